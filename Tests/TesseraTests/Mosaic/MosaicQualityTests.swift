// MosaicQualityTests.swift — the quality figures of a mosaic: CIEDE2000 against Sharma, Wu and
// Dalal's published test pairs, Oklab to CIELAB, SSIM (identical pictures 1, a different one
// lower), the uses histogram and the photos too small for the cell.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct MosaicQualityTests {
    /// Pairs of Sharma, Wu and Dalal (2005), Table 1: L*a*b* of each sample and ΔE00, including
    /// the hue-angle and mean-hue branches (pairs 7-16), a near-neutral pair and a dark pair.
    static let sharmaPairs: [(CIELab, CIELab, Double)] = [
        (CIELab(l: 50, a: 2.6772, b: -79.7751), CIELab(l: 50, a: 0, b: -82.7485), 2.0425),
        (CIELab(l: 50, a: 3.1571, b: -77.2803), CIELab(l: 50, a: 0, b: -82.7485), 2.8615),
        (CIELab(l: 50, a: -1.3802, b: -84.2814), CIELab(l: 50, a: 0, b: -82.7485), 1.0000),
        (CIELab(l: 50, a: 0, b: 0), CIELab(l: 50, a: -1, b: 2), 2.3669),
        (CIELab(l: 50, a: 2.49, b: -0.001), CIELab(l: 50, a: -2.49, b: 0.0009), 7.1792),
        (CIELab(l: 50, a: 2.49, b: -0.001), CIELab(l: 50, a: -2.49, b: 0.0011), 7.2195),
        (CIELab(l: 50, a: -0.001, b: 2.49), CIELab(l: 50, a: 0.0009, b: -2.49), 4.8045),
        (CIELab(l: 50, a: -0.001, b: 2.49), CIELab(l: 50, a: 0.0011, b: -2.49), 4.7461),
        (CIELab(l: 50, a: 2.5, b: 0), CIELab(l: 50, a: 0, b: -2.5), 4.3065),
        (CIELab(l: 50, a: 2.5, b: 0), CIELab(l: 73, a: 25, b: -18), 27.1492),
        (CIELab(l: 50, a: 2.5, b: 0), CIELab(l: 61, a: -5, b: 29), 22.8977),
        (CIELab(l: 50, a: 2.5, b: 0), CIELab(l: 56, a: -27, b: -3), 31.9030),
        (CIELab(l: 50, a: 2.5, b: 0), CIELab(l: 58, a: 24, b: 15), 19.4535),
        (CIELab(l: 50, a: 2.5, b: 0), CIELab(l: 50, a: 3.1736, b: 0.5854), 1.0000),
        (CIELab(l: 60.2574, a: -34.0099, b: 36.2677), CIELab(l: 60.4626, a: -34.1751, b: 39.4387), 1.2644),
        (CIELab(l: 63.0109, a: -31.0961, b: -5.8663), CIELab(l: 62.8187, a: -29.7946, b: -4.0864), 1.2630),
        (CIELab(l: 22.7233, a: 20.0904, b: -46.6940), CIELab(l: 23.0331, a: 14.9730, b: -42.5619), 2.0373),
        (CIELab(l: 90.8027, a: -2.0831, b: 1.4410), CIELab(l: 91.1528, a: -1.6435, b: 0.0447), 1.4441),
        (CIELab(l: 6.7747, a: -0.2908, b: -2.4247), CIELab(l: 5.8714, a: -0.0985, b: -2.2286), 0.6377),
        (CIELab(l: 2.0776, a: 0.0795, b: -1.1350), CIELab(l: 0.9033, a: -0.0636, b: -0.5514), 0.9082),
    ]

    @Test func ciede2000MatchesSharmasTable() {
        for (index, pair) in Self.sharmaPairs.enumerated() {
            let forward = MosaicQuality.deltaE2000(pair.0, pair.1)
            let backward = MosaicQuality.deltaE2000(pair.1, pair.0)
            // The table gives four decimals.
            #expect(abs(forward - pair.2) < 0.00005 + 1e-9, "pair \(index): \(forward), published \(pair.2)")
            #expect(abs(forward - backward) < 1e-9, "pair \(index) is not symmetric: \(forward) \(backward)")
        }
        #expect(MosaicQuality.deltaE2000(CIELab(l: 40, a: 10, b: -3), CIELab(l: 40, a: 10, b: -3)) == 0)
    }

    @Test func oklabToCIELabHitsKnownColours() {
        // White is L* 100 with no chroma, black 0; sRGB red is about (53.24, 80.09, 67.20).
        let white = MosaicQuality.cielab(Oklab.fromSRGB(255, 255, 255))
        #expect(abs(white.l - 100) < 0.05 && abs(white.a) < 0.05 && abs(white.b) < 0.05, "\(white)")
        let black = MosaicQuality.cielab(Oklab.fromSRGB(0, 0, 0))
        #expect(abs(black.l) < 0.01, "\(black)")
        let red = MosaicQuality.cielab(Oklab.fromSRGB(255, 0, 0))
        #expect(abs(red.l - 53.24) < 0.1 && abs(red.a - 80.09) < 0.2 && abs(red.b - 67.20) < 0.2, "\(red)")
        // A just-noticeable step in sRGB is about one ΔE00.
        let step = MosaicQuality.deltaE2000(MosaicQuality.cielab(Oklab.fromSRGB(120, 120, 120)),
                                            MosaicQuality.cielab(Oklab.fromSRGB(122, 120, 120)))
        #expect(step > 0.3 && step < 2, "\(step)")
    }

    @Test func colourDifferenceAveragesEverySubCell() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let k = 3, d = k * k * 3
        let grey = Oklab.fromSRGB(128, 128, 128), red = Oklab.fromSRGB(200, 40, 40)
        func features(_ colour: OklabColor) -> [Float] { (0..<(k * k)).flatMap { _ in [colour.l, colour.a, colour.b] } }
        let store = try FeatureStore(writableCount: 2, valuesPerPhoto: d, directory: scratch.path)
        try features(grey).withUnsafeBufferPointer { values in try store.write(0, values) }
        try features(red).withUnsafeBufferPointer { values in try store.write(1, values) }
        // Three cells: grey on grey (0), red on grey, red on red (0).
        let target = features(grey) + features(grey) + features(red)
        let assignment: [Int32] = [0, 1, 1]
        let result = try MosaicQuality.colourDifference(target: target, assignment: assignment,
                                                        order: MosaicQuality.cellsByPhoto(assignment), store: store, subCells: k)
        let apart = MosaicQuality.deltaE2000(MosaicQuality.cielab(grey), MosaicQuality.cielab(red))
        #expect(apart > MosaicQuality.farDeltaE)
        #expect(result.subCells == 27)
        #expect(abs(result.meanDeltaE2000 - apart / 3) < 1e-6, "\(result.meanDeltaE2000) vs \(apart / 3)")
        #expect(abs(result.farShare - 1.0 / 3) < 1e-9)
        // With a tint the placed colours are first moved toward the target's, as drawn: all the
        // way, no difference; half way, less than none.
        let order = MosaicQuality.cellsByPhoto(assignment)
        let full = try MosaicQuality.colourDifference(target: target, assignment: assignment, order: order, store: store, subCells: k, tint: 1)
        let half = try MosaicQuality.colourDifference(target: target, assignment: assignment, order: order, store: store, subCells: k, tint: 0.5)
        #expect(full.meanDeltaE2000 < 1e-4 && full.tint == 1)
        #expect(half.meanDeltaE2000 > 0.1 && half.meanDeltaE2000 < result.meanDeltaE2000)
    }

    @Test func ssimIsOneForTheSamePictureAndLowerForAnother() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let one = SamplePhotos.picture(width: 600, height: 400, seed: 3)
        let other = SamplePhotos.picture(width: 600, height: 400, seed: 4)
        try JPEGFile.write(one, to: scratch.file("one.jpg"), quality: 95)
        try JPEGFile.write(other, to: scratch.file("other.jpg"), quality: 95)
        let budget = DecodeBudget(budgetBytes: 64 << 20, workers: 1, spillDirectory: scratch.path)
        let same = try MosaicQuality.structuralSimilarity(output: scratch.file("one.jpg"), width: 600, height: 400,
                                                          target: scratch.file("one.jpg"), budget: budget)
        #expect(same.width == 512 && same.height == 341)
        #expect(abs(same.ssim - 1) < 1e-9, "\(same.ssim)")
        let different = try MosaicQuality.structuralSimilarity(output: scratch.file("one.jpg"), width: 600, height: 400,
                                                               target: scratch.file("other.jpg"), budget: budget)
        #expect(different.ssim < 0.6, "\(different.ssim)")
        // A blurred copy is between.
        var luma = try MosaicQuality.luma(path: scratch.file("one.jpg"), width: 120, height: 80, budget: budget)
        let sharp = luma
        for i in 1..<(luma.count - 1) { luma[i] = (sharp[i - 1] + sharp[i] + sharp[i + 1]) / 3 }
        let blurred = MosaicQuality.ssim(sharp, luma, width: 120, height: 80)
        #expect(blurred < 1 && blurred > different.ssim, "\(blurred)")
    }

    @Test func ssimOfFlatPicturesFollowsTheMeans() {
        // No structure: SSIM is the luminance term, (2 x y + C1) / (x^2 + y^2 + C1).
        let x = [Float](repeating: 100, count: 20 * 20), y = [Float](repeating: 120, count: 20 * 20)
        let c1 = (0.01 * 255) * (0.01 * 255)
        let expected = (2 * 100 * 120 + c1) / (100 * 100 + 120 * 120 + c1)
        #expect(abs(MosaicQuality.ssim(x, y, width: 20, height: 20) - expected) < 1e-9)
        #expect(MosaicQuality.commonSize(width: 300, height: 200) == (300, 200))
        #expect(MosaicQuality.commonSize(width: 40_000, height: 10_000) == (512, 128))
    }

    @Test func usesHistogramCountsEveryPicture() {
        // 5 pictures: 0 used 4 times, 1 twice, 2 once, 3 and 4 never.
        let histogram = MosaicQuality.usesHistogram(assignment: [0, 1, 0, 2, 0, 1, 0], pictures: 5)
        #expect(histogram.cells == 7 && histogram.pictures == 5 && histogram.used == 3 && histogram.unused == 2)
        #expect(histogram.mostUsed == 0 && histogram.mostUses == 4)
        #expect(abs(histogram.mostUsedShare - 4.0 / 7) < 1e-12)
        #expect(histogram.buckets.map { [$0.lower, $0.upper, $0.pictures] } == [[0, 0, 2], [1, 1, 1], [2, 3, 1], [4, 7, 1]])
        #expect(histogram.buckets.reduce(0) { $0 + $1.pictures } == 5)
        let empty = MosaicQuality.usesHistogram(assignment: [], pictures: 0)
        #expect(empty.mostUsed == -1 && empty.buckets.isEmpty && empty.mostUsedShare == 0)
    }

    @Test func unmetConstraintsAreFoundInTheFinalPlacement() {
        // 4 x 3 cells: photo 0 at (0,0) and (1,1) touch diagonally; photo 1 at (3,0) and (3,2)
        // are 2 rows apart; photo 2 is used 4 times.
        let assignment: [Int32] = [0, 2, 2, 1,
                                   3, 0, 4, 5,
                                   2, 6, 2, 1]
        let order = MosaicQuality.cellsByPhoto(assignment)
        let one = MosaicQuality.unmetConstraints(assignment: assignment, columns: 4, order: order, minDistance: 1, maxUses: 3)
        // Too close at distance 1: photo 0's two cells, photo 2's (0,1)-(0,2) pair; (2,0) and (2,2) are 2 apart.
        #expect(one == UnmetConstraints(tooClose: 4, overUsed: 1), "\(one)")
        let two = MosaicQuality.unmetConstraints(assignment: assignment, columns: 4, order: order, minDistance: 2, maxUses: nil)
        // At distance 2 every repeat is too close: photo 0 (2), photo 1 (2), photo 2 (all 4).
        #expect(two == UnmetConstraints(tooClose: 8, overUsed: 0), "\(two)")
        #expect(!MosaicQuality.unmetConstraints(assignment: assignment, columns: 4, order: order, minDistance: 0, maxUses: 4).any)
    }

    @Test func tooSmallPhotosAreFoundWithTheirUses() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // Cells of 60 x 40: a 100 x 77 photo fits, a 50 x 80 is too narrow, a 30 x 20 too small both ways.
        for (name, width, height) in [("a-big.jpg", 100, 77), ("b-narrow.jpg", 50, 80), ("c-tiny.jpg", 30, 20)] {
            try JPEGFile.write(SamplePhotos.picture(width: width, height: height, seed: 1), to: scratch.file(name))
        }
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.photos.count == 3)
        let assignment: [Int32] = [2, 0, 2, 1, 2]
        let found = MosaicQuality.tooSmallPhotos(library.photos, cellWidth: 60, cellHeight: 40, assignment: assignment,
                                                 order: MosaicQuality.cellsByPhoto(assignment))
        #expect(found.count == 2 && found.cells == 4)
        #expect(found.held.map(\.path) == [scratch.file("c-tiny.jpg"), scratch.file("b-narrow.jpg")])
        #expect(found.held.map(\.uses) == [3, 1])
        #expect(found.held.first.map { $0.width == 30 && $0.height == 20 && abs($0.enlargement - 2) < 1e-12 } == true)
        #expect(abs(found.held[1].enlargement - 1.2) < 1e-12)
    }
}
