// MinUsesTests.swift — the matcher's minimum of uses (issue 29, "every picture at least once"):
// every picture reaches it under the minimum distance and the most uses, by either way of
// finding cells (every cell, or a FeatureTree over the cells), the same for a seed and any
// number of workers; impossible minimums are refused with the nearest values that can be met.
import Testing
import Tessera
import TesseraTestSupport

@Suite struct MinUsesTests {
    /// A library where the greedy pass leaves pictures out: 100 photo-like pictures of any
    /// colour against a target of smooth, mostly mid-grey cells (a third of the pictures are far
    /// from every cell).
    static let photos = photoLikeFeatures(count: 100, k: 3, seed: 29)
    static let columns = 60, rows = 50
    static let target: [Float] = {
        var random = SplitMix64(seed: 290)
        var values: [Float] = []
        for row in 0..<rows {
            for column in 0..<columns {
                for sub in 0..<9 {
                    let l = 0.35 + 0.3 * Float(column) / Float(columns) + 0.05 * Float(sub % 3) + Float(random.next() % 100) / 5000
                    values += [l, 0.02 * Float(row) / Float(rows), -0.02]
                }
            }
        }
        return values
    }()

    static func run(minUses: Int, minDistance: Int = 1, maxUses: Int? = nil, effort: Int = 2, seed: UInt64 = 1, workers: Int = 1,
                    repairByTree: Bool? = nil) throws -> MosaicMatch {
        try MosaicMatcher.match(target: target, columns: columns, rows: rows, subCells: 3, photos: photos,
                                minDistance: minDistance, maxUses: maxUses, minUses: minUses, seed: seed, workers: workers,
                                effort: effort, repairByTree: repairByTree)
    }

    static func uses(_ match: MosaicMatch) -> [Int] {
        var counts = [Int](repeating: 0, count: photos.count / 27)
        for photo in match.assignment { counts[Int(photo)] += 1 }
        return counts
    }

    /// Without a minimum, pictures are left out (else the tests below would prove nothing); with
    /// one, every picture has it, within the most uses and the minimum distance, and the total
    /// never rises in the local search.
    @Test(arguments: [(1, 1, nil), (1, 2, 80), (3, 1, 60), (2, 0, nil), (5, 1, 40)] as [(Int, Int, Int?)])
    func everyPictureReachesItsMinimum(minUses: Int, minDistance: Int, maxUses: Int?) throws {
        let without = try Self.run(minUses: 0, minDistance: minDistance, maxUses: maxUses)
        try #require(Self.uses(without).contains { $0 < minUses }, "the greedy pass already meets \(minUses)")
        for byTree in [false, true] {
            let match = try Self.run(minUses: minUses, minDistance: minDistance, maxUses: maxUses, repairByTree: byTree)
            let counts = Self.uses(match)
            #expect(counts.allSatisfy { $0 >= minUses }, "tree \(byTree): fewest uses \(counts.min()!)")
            if let maxUses { #expect(counts.max()! <= maxUses) }
            // The cells the greedy pass could not place within the most uses (the same pass with
            // or without a minimum) stay the only violations; the repair adds none.
            #expect(match.picturesBelowMinUses == 0 && match.missingUses == 0)
            #expect(match.constraintViolations == without.constraintViolations)
            if without.constraintViolations == 0 { #expect((match.smallestRepeatDistance ?? .max) > minDistance) }
            #expect(match.repairedCells > 0)
            #expect(match.minUses == minUses)
            #expect(match.totalCost <= match.greedyCost)
        }
    }

    /// The local search alone would take pictures back out: after the repair, its moves must keep
    /// every picture at its minimum (a greedy-only match meets it as well).
    @Test func theLocalSearchKeepsTheMinimum() throws {
        let greedy = try Self.run(minUses: 2, effort: 0)
        #expect(Self.uses(greedy).allSatisfy { $0 >= 2 })
        let improved = try Self.run(minUses: 2, effort: 5)
        #expect(Self.uses(improved).allSatisfy { $0 >= 2 })
        #expect(improved.improvements > 0 && improved.totalCost < greedy.totalCost)
    }

    /// The cost of using every picture is small beside the mosaic's: here (60 x 50 cells, 100
    /// pictures, a third left out by the greedy pass) under 10% on the mean error.
    @Test func theMinimumCostsLittle() throws {
        let without = try Self.run(minUses: 0), with = try Self.run(minUses: 1), tree = try Self.run(minUses: 1, repairByTree: true)
        #expect(with.meanError <= without.meanError * 1.10, "\(with.meanError) against \(without.meanError)")
        #expect(tree.meanError <= without.meanError * 1.10, "\(tree.meanError) against \(without.meanError)")
        #expect(with.repairCost > 0)
    }

    @Test func sameSeedSameMatchForAnyWorkers() throws {
        for byTree in [false, true] {
            let a = try Self.run(minUses: 2, seed: 7, workers: 1, repairByTree: byTree)
            let b = try Self.run(minUses: 2, seed: 7, workers: 2, repairByTree: byTree)
            let c = try Self.run(minUses: 2, seed: 8, workers: 2, repairByTree: byTree)
            #expect(a == b)
            #expect(a.assignment != c.assignment)
        }
    }

    @Test func impossibleMinimumsAreRefused() {
        // 100 pictures once each need 100 cells.
        #expect(throws: TesseraError.minUsesImpossible(.tooFewCells(pictures: 100, cells: 90, minUses: 1))) {
            try MosaicMatcher.match(target: [Float](Self.target[0..<(90 * 27)]), columns: 10, rows: 9, subCells: 3, photos: Self.photos,
                                    minDistance: 1, maxUses: nil, minUses: 1, seed: 1, workers: 1)
        }
        #expect(throws: TesseraError.minUsesImpossible(.aboveMaxUses(minUses: 5, maxUses: 3))) {
            try MosaicMatcher.refuseImpossibleMinUses(columns: 10, rows: 10, pictures: nil, minUses: 5, maxUses: 3, minDistance: 0)
        }
        // At distance 4 a 10 x 10 grid holds one picture 4 times (every 5th cell of every 5th
        // row); distance 3 holds it 9 times.
        #expect(throws: TesseraError.minUsesImpossible(.minDistance(minUses: 5, minDistance: 4, columns: 10, rows: 10, mostUses: 4,
                                                                    largestDistance: 3))) {
            try MosaicMatcher.refuseImpossibleMinUses(columns: 10, rows: 10, pictures: nil, minUses: 5, maxUses: nil, minDistance: 4)
        }
        #expect(MosaicMatcher.mostUses(columns: 10, rows: 10, minDistance: 3) == 9)
        #expect(MosaicMatcher.mostUses(columns: 7, rows: 1, minDistance: 0) == 7)
        // What can be met is not refused, with or without the pictures counted.
        #expect(throws: Never.self) {
            try MosaicMatcher.refuseImpossibleMinUses(columns: 10, rows: 10, pictures: 100, minUses: 1, maxUses: 1, minDistance: 0)
            try MosaicMatcher.refuseImpossibleMinUses(columns: 10, rows: 10, pictures: nil, minUses: 4, maxUses: nil, minDistance: 4)
        }
        let conflict = MinUsesConflict.tooFewCells(pictures: 114, cells: 200, minUses: 2)
        #expect(conflict.fewestCells == 228 && conflict.largestMinUses == 1)
        #expect(conflict.description == "every one of 114 pictures at least 2 times needs at least 228 cells; this mosaic has 200: "
                    + "ask for 228 cells or more, or at least 1 use(s) of each")
    }

    /// The most uses of one picture at a distance is what a grid can hold: a brute-force
    /// greedy packing from a corner reaches it, and no placement beats it (a (D+1) x (D+1)
    /// block holds one at most).
    @Test func mostUsesIsTheLatticeCount() {
        for (columns, rows, distance) in [(10, 10, 4), (7, 3, 1), (5, 5, 2), (9, 1, 3)] {
            var placed: [(Int, Int)] = []
            for row in 0..<rows {
                for column in 0..<columns where placed.allSatisfy({ max(abs($0.0 - row), abs($0.1 - column)) > distance }) {
                    placed.append((row, column))
                }
            }
            #expect(placed.count == MosaicMatcher.mostUses(columns: columns, rows: rows, minDistance: distance), "\(columns) x \(rows) at \(distance)")
        }
    }
}
