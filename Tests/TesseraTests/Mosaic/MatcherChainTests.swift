// MatcherChainTests.swift — the chain moves of the matcher at a minimum distance of 1 with no
// rule on uses (the default): rows placed together, then rows and columns relabelled at their
// least cost. The dynamic programme against a brute force, the constraints and the cost on
// random mosaics, and the mosaics the cell-by-cell search was stuck on.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct MatcherChainTests {
    /// The segment's least-cost labels (no two consecutive cells the same photo, no label of
    /// infinite cost) are the brute force's, on small random segments with repeated photos.
    @Test func theDynamicProgrammeFindsTheCheapestAllowedLabels() {
        var random = SplitMix64(seed: 77)
        for trial in 0..<300 {
            let count = 1 + Int(random.next() % 5), labels = 1 + Int(random.next() % 4)
            var scratch = MosaicMatcher.ChainScratch(cells: count, labels: labels)
            for i in 0..<count {
                // Photos from a small set, distinct within a cell (as a cell's candidates are).
                let offset = Int32(random.next() % 3)
                for j in 0..<labels {
                    let k = i * labels + j
                    scratch.photo[k] = random.next() % 6 == 0 ? -1 : offset + Int32(j)
                    scratch.cost[k] = scratch.photo[k] < 0 || random.next() % 7 == 0 ? .infinity : Float(random.next() % 1000) / 100
                }
                if i > 0 { scratch.advance(at: i, labels: labels) }
            }
            let found = scratch.bestPath(count: count, labels: labels)
            let brute = Self.bruteForce(scratch, count: count, labels: labels)
            #expect((found == nil) == (brute == nil), "trial \(trial)")
            guard let found, let brute else { continue }
            #expect(abs(found.cost - brute) < 1e-9, "trial \(trial): \(found.cost) against \(brute)")
            var cost = 0.0
            for i in 0..<count {
                let k = i * labels + Int(found.path[i])
                #expect(scratch.photo[k] >= 0 && scratch.cost[k] < .infinity)
                if i > 0 { #expect(scratch.photo[k] != scratch.photo[(i - 1) * labels + Int(found.path[i - 1])]) }
                cost += Double(scratch.cost[k])
            }
            #expect(abs(cost - found.cost) < 1e-9, "the path costs what it says")
        }
    }

    static func bruteForce(_ scratch: MosaicMatcher.ChainScratch, count: Int, labels: Int) -> Double? {
        var best: Double?
        func walk(_ i: Int, _ previous: Int32, _ sum: Double) {
            if i == count {
                best = min(best ?? .infinity, sum)
                return
            }
            for j in 0..<labels {
                let k = i * labels + j
                guard scratch.photo[k] >= 0, scratch.cost[k] < .infinity, scratch.photo[k] != previous else { continue }
                walk(i + 1, scratch.photo[k], sum + Double(scratch.cost[k]))
            }
        }
        walk(0, -1, 0)
        return best
    }

    static func match(_ target: [Float], _ photos: [Float], columns: Int, rows: Int, maxUses: Int? = nil, seed: UInt64,
                      effort: Int, workers: Int = 2, candidates: Int = 24) throws -> MosaicMatch {
        try MosaicMatcher.match(target: target, columns: columns, rows: rows, subCells: 3, photos: photos, minDistance: 1,
                                maxUses: maxUses, seed: seed, workers: workers, candidateCount: candidates, effort: effort)
    }

    /// On random mosaics (wide and tall ones cut into several segments, few and many photos, few
    /// candidates): no identical neighbours, the local search never raises the cost, the cost
    /// reported is that of the photos placed, and the same mosaic for any number of workers.
    @Test(arguments: [(40, 30, 60, 24), (700, 3, 20, 24), (3, 600, 20, 24), (25, 20, 9, 9), (30, 30, 200, 6), (1, 50, 12, 24)])
    func chainsKeepTheRuleAndNeverRaiseTheCost(columns: Int, rows: Int, photoCount: Int, candidates: Int) throws {
        for seed in [UInt64(1), 2] {
            let photos = photoLikeFeatures(count: photoCount, k: 3, seed: 300 &+ seed)
            let target = photoLikeFeatures(count: columns * rows, k: 3, seed: 400 &+ seed)
            let placed = try Self.match(target, photos, columns: columns, rows: rows, seed: seed, effort: 0, candidates: candidates)
            let improved = try Self.match(target, photos, columns: columns, rows: rows, seed: seed, effort: 3, candidates: candidates)
            #expect(improved.greedyCost == placed.totalCost, "the search starts from the rows placed")
            #expect(improved.totalCost <= improved.greedyCost)
            for match in [placed, improved] {
                #expect(LocalSearchTests.constraintsHold(match, minDistance: 1, maxUses: nil) && match.constraintViolations == 0,
                        "\(columns) x \(rows), \(photoCount) photos, seed \(seed)")
                let recomputed = (0..<(columns * rows)).reduce(0.0) { sum, cell in
                    target.withUnsafeBufferPointer { t in
                        photos.withUnsafeBufferPointer { p in
                            sum + Double(MosaicMatcher.squaredDistance(t.baseAddress! + cell * 27, p.baseAddress! + Int(match.assignment[cell]) * 27,
                                                                       count: 27))
                        }
                    }
                }
                #expect(abs(recomputed - match.totalCost) < 1e-3 * max(1, recomputed))
            }
            #expect(try Self.match(target, photos, columns: columns, rows: rows, seed: seed, effort: 3, workers: 1, candidates: candidates)
                == improved)
        }
    }

    /// A picture's smooth shading: each cell's sub-cells a slow wave of lightness and colour
    /// over the mosaic (where neighbouring cells want the same few photos).
    static func smoothTarget(columns: Int, rows: Int, seed: UInt64) -> [Float] {
        let phase = Float(seed % 7)
        var target: [Float] = []
        for row in 0..<rows {
            for column in 0..<columns {
                for sub in 0..<9 {
                    let x = (Float(column) + Float(sub % 3) / 3) / Float(columns), y = (Float(row) + Float(sub / 3) / 3) / Float(rows)
                    target += [0.5 + 0.35 * sinf(3 * x + phase) * cosf(2 * y), 0.15 * sinf(2 * y + phase), 0.15 * cosf(4 * x * y)]
                }
            }
        }
        return target
    }

    /// The cell-by-cell search (as it runs when uses are limited: a limit no photo reaches
    /// gives the same rules) ends on mosaics of a smooth picture that the chains improve on:
    /// rows placed together and relabelled whole cost less, on every seed.
    @Test func chainsBeatTheCellByCellSearch() throws {
        for seed in [UInt64(5), 6, 7] {
            let photos = photoLikeFeatures(count: 40, k: 3, seed: 500 &+ seed)
            let target = Self.smoothTarget(columns: 50, rows: 40, seed: seed)
            let chains = try Self.match(target, photos, columns: 50, rows: 40, seed: seed, effort: 2)
            let cellByCell = try Self.match(target, photos, columns: 50, rows: 40, maxUses: 50 * 40, seed: seed, effort: 2)
            #expect(chains.totalCost < 0.99 * cellByCell.totalCost, "seed \(seed): \(chains.totalCost) against \(cellByCell.totalCost)")
            #expect(chains.constraintViolations == 0 && cellByCell.constraintViolations == 0)
        }
    }
}
