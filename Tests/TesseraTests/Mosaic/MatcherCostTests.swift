// MatcherCostTests.swift — the matcher's cost is the squared Oklab distance summed over the
// sub-cells, checked against a sum computed here (in Double, by a loop of its own), not with the
// matcher's own distance function.
import Testing
@testable import Tessera
import TesseraTestSupport

@Suite struct MatcherCostTests {
    /// Sum over the `d` values of (a - b)^2, in Double.
    private static func squaredDistance(_ target: [Float], cell: Int, _ photos: [Float], photo: Int, d: Int) -> Double {
        var sum = 0.0
        for i in 0..<d {
            let difference = Double(target[cell * d + i]) - Double(photos[photo * d + i])
            sum += difference * difference
        }
        return sum
    }

    /// When none of a cell's candidates is allowed, the scan of every photo finds the cheapest
    /// one that is, even past a cheaper one held nearby. (The scan skipped every photo dearer than
    /// the cheapest with uses left, allowed or not, and placed a copy beside itself: 200
    /// pictures left 18 cells of an adaptive mosaic with a copy within --min-distance.) A 3 x 3
    /// grid, every cell within 1 of the centre; 9 photos, ever dearer; 2 candidates a cell (the
    /// cheapest two, soon held nearby): 9 pictures are enough for every cell, whatever the order.
    @Test func theScanPastTheCandidatesFindsAnAllowedPhotoBehindACheaperHeldOne() throws {
        let k = 3, d = k * k * 3
        let target = [Float](repeating: 0.5, count: 9 * d)
        let photos = (0..<9).flatMap { photo in [Float](repeating: 0.5 + Float(photo) * 0.05, count: d) }
        for seed in 0..<6 as Range<UInt64> {
            // (A most of uses: the greedy pass in a seeded order, not the rows' placement.)
            let match = try MosaicMatcher.match(target: target, columns: 3, rows: 3, subCells: k, photos: photos, minDistance: 1, maxUses: 9,
                                                seed: seed, workers: 1, candidateCount: 2, effort: 0)
            #expect(match.constraintViolations == 0, "seed \(seed): \(match.assignment)")
            #expect(LocalSearchTests.constraintsHold(match, minDistance: 1, maxUses: 9), "seed \(seed): \(match.assignment)")
        }
    }

    /// With no constraint and no local search, each cell gets the photo nearest to it by the
    /// squared distance (ties aside), and the reported cost is the sum of those distances.
    @Test(arguments: [false, true])
    func unconstrainedCellsTakeTheirNearestPhotoBySquaredDistance(useTree: Bool) throws {
        let k = 3, d = k * k * 3, columns = 24, rows = 16, photoCount = 80
        let photos = photoLikeFeatures(count: photoCount, k: k, seed: 71)
        let target = photoLikeFeatures(count: columns * rows, k: k, seed: 72)
        let match = try MosaicMatcher.match(target: target, columns: columns, rows: rows, subCells: k, photos: photos,
                                            minDistance: 0, maxUses: nil, seed: 5, workers: 2, effort: 0, useTree: useTree)
        var expectedTotal = 0.0
        var misplaced = 0
        for cell in 0..<(columns * rows) {
            let costs = (0..<photoCount).map { Self.squaredDistance(target, cell: cell, photos, photo: $0, d: d) }
            let best = costs.min()!
            expectedTotal += best
            let chosen = costs[Int(match.assignment[cell])]
            // Float sums against Double ones: equal to a few parts in a million.
            if chosen > best * (1 + 1e-5) + 1e-9 { misplaced += 1 }
        }
        #expect(misplaced == 0, "\(misplaced) of \(columns * rows) cells hold a photo that is not their nearest")
        #expect(abs(match.totalCost - expectedTotal) <= 1e-4 * max(1, expectedTotal),
                "reported \(match.totalCost), squared distances sum to \(expectedTotal)")
    }

    /// With constraints and the local search, the reported cost is still the squared distance of
    /// what was placed, summed independently here.
    @Test func theReportedCostIsTheSquaredDistanceOfWhatWasPlaced() throws {
        let k = 3, d = k * k * 3, columns = 30, rows = 20
        let photos = photoLikeFeatures(count: 60, k: k, seed: 81)
        let target = photoLikeFeatures(count: columns * rows, k: k, seed: 82)
        let match = try MosaicMatcher.match(target: target, columns: columns, rows: rows, subCells: k, photos: photos,
                                            minDistance: 1, maxUses: 20, seed: 3, workers: 2, effort: 4)
        let recomputed = (0..<(columns * rows)).reduce(0.0) {
            $0 + Self.squaredDistance(target, cell: $1, photos, photo: Int(match.assignment[$1]), d: d)
        }
        #expect(abs(match.totalCost - recomputed) <= 1e-4 * max(1, recomputed),
                "reported \(match.totalCost), squared distances sum to \(recomputed)")
    }
}
