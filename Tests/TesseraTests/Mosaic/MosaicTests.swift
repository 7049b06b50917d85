// MosaicTests.swift — matching where the optimum is known, the placement rules, determinism,
// the feature index, the manifest and a whole mosaic render.
import Foundation
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

/// `count` photos of distinct flat colours, in `directory`; returns the paths and colours.
private func flatLibrary(_ directory: String, colours: [RGB]) throws -> [String] {
    var paths: [String] = []
    for (index, colour) in colours.enumerated() {
        let path = directory + "/flat-\(index < 10 ? "0" : "")\(index).jpg"
        try writeSolidPhoto(path, width: 48, height: 48, colour: colour)
        paths.append(path)
    }
    return paths
}

/// The index's entries for `photos` as lines of the old text format (path, size, mtime, decode
/// key, then the values), as fields.
private func textIndexLines(_ photos: [Photo], _ features: [[Float]?]) throws -> [[String]] {
    try zip(photos, features).map { photo, values in
        guard case .success(let info) = fileStatus(photo.path), let values else { throw TesseraError.cancelled }
        let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        return [photo.path, "\(info.st_size)", "\(mtime)", FeatureIndex.decodeKey(photo.header)] + values.map { String($0) }
    }
}

/// Writes `lines` as the old text index beside `index` (its `.tsv`) and removes the index's files,
/// so the next FeatureIndex imports them.
private func writeTextIndex(_ lines: [[String]], replacing index: String) {
    let stem = String(index.dropLast(".idx".count))
    writeBytes(Array(lines.map { $0.joined(separator: "\t") + "\n" }.joined().utf8), to: stem + ".tsv")
    removeFile(index)
    removeFile(stem + ".journal")
}

private func randomFeatures(count: Int, k: Int, seed: UInt64) -> [[Float]] {
    var random = SplitMix64(seed: seed)
    return (0..<count).map { _ in (0..<(k * k * 3)).map { _ in Float(random.next() % 1000) / 1000 } }
}

@Suite struct OklabTests {
    @Test func knownColours() {
        let white = Oklab.fromSRGB(255, 255, 255), black = Oklab.fromSRGB(0, 0, 0)
        #expect(abs(white.l - 1) < 0.001 && abs(white.a) < 0.001 && abs(white.b) < 0.001)
        #expect(abs(black.l) < 0.001)
        let red = Oklab.fromSRGB(255, 0, 0)  // Ottosson's reference: L 0.628, a 0.225, b 0.126
        #expect(abs(red.l - 0.628) < 0.002 && abs(red.a - 0.225) < 0.002 && abs(red.b - 0.126) < 0.002)
        for (r, g, b) in [(12, 200, 99), (255, 128, 0), (30, 30, 31)] as [(UInt8, UInt8, UInt8)] {
            let back = Oklab.toSRGB(Oklab.fromSRGB(r, g, b))
            #expect(abs(back.0 - Float(r)) < 0.6 && abs(back.1 - Float(g)) < 0.6 && abs(back.2 - Float(b)) < 0.6)
        }
    }
}

@Suite struct MatcherTests {
    @Test func flatTargetFromExactlyItsColoursIsMatchedPerfectly() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let colours = [RGB(red: 220, green: 30, blue: 30), RGB(red: 30, green: 200, blue: 60), RGB(red: 30, green: 60, blue: 220),
                       RGB(red: 240, green: 230, blue: 40)]
        let paths = try flatLibrary(scratch.path, colours: colours)
        // Target: 4 x 2 blocks of the four colours, 16 x 16 px each.
        var target = RGBImage(width: 64, height: 32)
        for y in 0..<32 {
            for x in 0..<64 {
                let colour = colours[(y / 16) * 2 + (x / 16) % 2]
                let i = (y * 64 + x) * 3
                target.pixels[i] = colour.red; target.pixels[i + 1] = colour.green; target.pixels[i + 2] = colour.blue
            }
        }
        let targetPath = scratch.file("target.jpg")
        try JPEGFile.write(target, to: targetPath, quality: 98, subsampling: .s444)
        let photos = try PhotoLibrary.scan(paths).photos
        let analysis = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1, workers: 2, index: nil)
        let features = analysis.features.map { $0! }
        let targetFeatures = try MosaicAnalysis.targetFeatures(path: targetPath, columns: 4, rows: 2, subCells: 3)
        let match = try MosaicMatcher.match(target: targetFeatures, columns: 4, rows: 2, subCells: 3, photoFeatures: features,
                                            minDistance: 0, maxUses: nil, seed: 1, workers: 2)
        // Cell (column, row) holds colour (row * 2 + column % 2).
        #expect(match.assignment == [0, 1, 0, 1, 2, 3, 2, 3].map { Int32($0) })
        #expect(match.meanError < 0.01)
    }

    @Test(arguments: [1, 2, 3])
    func minimumDistanceHoldsEverywhere(distance: Int) throws {
        let k = 3, columns = 40, rows = 30
        let photos = randomFeatures(count: 60, k: k, seed: 5)
        let target = randomFeatures(count: columns * rows, k: k, seed: 6).flatMap { $0 }
        let match = try MosaicMatcher.match(target: target, columns: columns, rows: rows, subCells: k, photoFeatures: photos,
                                            minDistance: distance, maxUses: nil, seed: 3, workers: 2)
        #expect(match.constraintViolations == 0)
        for cell in 0..<(columns * rows) {
            let row = cell / columns, column = cell % columns
            for other in 0..<(columns * rows) where other != cell && match.assignment[other] == match.assignment[cell] {
                let gap = max(abs(other / columns - row), abs(other % columns - column))
                #expect(gap > distance, "photo \(match.assignment[cell]) at cells \(cell) and \(other), \(gap) apart")
            }
        }
        #expect((match.smallestRepeatDistance ?? Int.max) > distance)
    }

    @Test func maximumUsesHolds() throws {
        let k = 3
        let photos = randomFeatures(count: 30, k: k, seed: 7)
        // A target that every cell of which prefers photo 0: without the cap it would take them all.
        let target = Array(repeating: photos[0], count: 20 * 10).flatMap { $0 }
        let match = try MosaicMatcher.match(target: target, columns: 20, rows: 10, subCells: k, photoFeatures: photos,
                                            minDistance: 0, maxUses: 7, seed: 1, workers: 2)
        var uses = [Int32: Int]()
        for photo in match.assignment { uses[photo, default: 0] += 1 }
        #expect(uses.values.allSatisfy { $0 <= 7 })
        #expect(uses[0] == 7)  // the best photo is used up to its cap
        let unconstrained = try MosaicMatcher.match(target: target, columns: 20, rows: 10, subCells: k, photoFeatures: photos,
                                                    minDistance: 0, maxUses: nil, seed: 1, workers: 2)
        #expect(Set(unconstrained.assignment) == [0])
    }

    @Test func impossibleConstraintsAreRefused() {
        let photos = randomFeatures(count: 8, k: 3, seed: 1)
        let target = randomFeatures(count: 100, k: 3, seed: 2).flatMap { $0 }
        #expect(throws: TesseraError.invalidSettings(
            "a minimum distance of 1 needs at least 9 different pictures (a 3 x 3 block holds no repeat; copies of one picture count once), found 8: a distance of 0 fits them, or add pictures")) {
            try MosaicMatcher.match(target: target, columns: 10, rows: 10, subCells: 3, photoFeatures: photos,
                                    minDistance: 1, maxUses: nil, seed: 1, workers: 1)
        }
        #expect(throws: TesseraError.invalidSettings("at most 12 uses of each of 8 photos fill at most 96 of 100 cells: 13 uses each would fill them")) {
            try MosaicMatcher.match(target: target, columns: 10, rows: 10, subCells: 3, photoFeatures: photos,
                                    minDistance: 0, maxUses: 12, seed: 1, workers: 1)
        }
    }

    @Test func sameSeedSameMosaic() throws {
        let photos = randomFeatures(count: 50, k: 3, seed: 9)
        let target = randomFeatures(count: 30 * 20, k: 3, seed: 10).flatMap { $0 }
        func run(_ seed: UInt64, workers: Int, maxUses: Int? = nil) throws -> MosaicMatch {
            try MosaicMatcher.match(target: target, columns: 30, rows: 20, subCells: 3, photoFeatures: photos,
                                    minDistance: 1, maxUses: maxUses, seed: seed, workers: workers)
        }
        let a = try run(4, workers: 1), b = try run(4, workers: 2)
        #expect(a == b)
        // The seed orders the greedy pass where it runs (with a most of uses); at the default
        // rules the rows are placed by their least cost, whatever the seed.
        #expect(try run(4, workers: 2, maxUses: 30).assignment != run(5, workers: 2, maxUses: 30).assignment)
        // The manifest names, cell by cell in row-major order, the photo the assignment chose.
        let manifest = RenderManifest.text(match: a, photoPaths: (0..<50).map { "p\($0).jpg" }, format: .csv)
        let lines = manifest.split(separator: "\n").dropFirst().map { $0.split(separator: ",").map(String.init) }
        #expect(lines.count == a.assignment.count)
        for (cell, fields) in lines.enumerated() where fields.count == 4 {
            #expect(Int(fields[0]) == cell % 30 && Int(fields[1]) == cell / 30, "cell \(cell): \(fields)")
            #expect(fields[2] == "p\(a.assignment[cell]).jpg", "cell \(cell): \(fields)")
        }
    }
}

@Suite struct ManifestTests {
    @Test func csvAndJSONQuoteAwkwardNames() {
        let match = MosaicMatch(columns: 2, rows: 1, assignment: [1, 0], cellErrors: [0.25, 0.5], constraintViolations: 0)
        let paths = ["plain.jpg", "a,b \"c\".jpg"]
        #expect(RenderManifest.text(match: match, photoPaths: paths, format: .csv)
                == "column,row,photo,cost\n0,0,\"a,b \"\"c\"\".jpg\",0.25000\n1,0,plain.jpg,0.50000\n")
        #expect(RenderManifest.text(match: match, photoPaths: paths, format: .json) == """
        {"cells": [
          {"column": 0, "row": 0, "photo": "a,b \\"c\\".jpg", "cost": 0.25000},
          {"column": 1, "row": 0, "photo": "plain.jpg", "cost": 0.50000}
        ],
          "skipped_count": 0,
          "skipped": [],
          "placeholders": [],
          "partial": []
        }

        """)
        #expect(RenderManifest.format(for: "out.JSON") == .json && RenderManifest.format(for: "out.csv") == .csv)
    }

    /// A JSON manifest says what the run left out: the skipped files it holds (and how many in
    /// all), the placeholders and the photos drawn in part, each with its reason; it parses as JSON.
    @Test func jsonNamesWhatWasLeftOut() throws {
        let match = MosaicMatch(columns: 1, rows: 1, assignment: [0], cellErrors: [0.5], constraintViolations: 0)
        let notes = ManifestNotes(skipped: [("bad \"1\".jpg", "not an image"), ("b2.jpg", "truncated")], skippedCount: 1_200,
                                  placeholders: [("p.jpg", "not a photo")], partial: [("cut.jpg", "ends early")])
        let text = RenderManifest.text(match: match, photoPaths: ["a.jpg"], format: .json, notes: notes)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect((object["cells"] as? [[String: Any]])?.first?["photo"] as? String == "a.jpg")
        #expect(object["skipped_count"] as? Int == 1_200)
        let skipped = try #require(object["skipped"] as? [[String: String]])
        #expect(skipped == [["path": "bad \"1\".jpg", "reason": "not an image"], ["path": "b2.jpg", "reason": "truncated"]])
        #expect(object["placeholders"] as? [[String: String]] == [["path": "p.jpg", "reason": "not a photo"]])
        #expect(object["partial"] as? [[String: String]] == [["path": "cut.jpg", "reason": "ends early"]])
        let grid = RenderManifest.text(layout: CellLayout(columns: 1, rows: 1, cellWidth: 1, cellHeight: 1, photoIndices: [-1]),
                                       photoPaths: ["a.jpg"], format: .json, notes: notes)
        let empty = try #require(try JSONSerialization.jsonObject(with: Data(grid.utf8)) as? [String: Any])
        #expect((empty["cells"] as? [Any])?.isEmpty == true && empty["skipped_count"] as? Int == 1_200)
        // CSV stays one row a cell.
        #expect(RenderManifest.text(match: match, photoPaths: ["a.jpg"], format: .csv, notes: notes) == "column,row,photo,cost\n0,0,a.jpg,0.50000\n")
    }
}

extension RenderTests {
    @Test func featureIndexIsReusedAndInvalidatedByAChange() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let paths = try flatLibrary(scratch.path, colours: (0..<6).map { RGB(red: UInt8($0 * 40), green: 90, blue: 200) })
        let cache = scratch.file("cache")
        let photos = try PhotoLibrary.scan(paths).photos
        func analyse() throws -> (analysed: Int, hits: Int, features: [[Float]?]) {
            let index = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1.5)
            let result = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1.5, workers: 2, index: index)
            try index.save()
            return (result.analysed, index.hits, result.features)
        }
        let first = try analyse()
        #expect(first.analysed == 6 && first.hits == 0)
        let second = try analyse()
        #expect(second.analysed == 0 && second.hits == 6)
        #expect(second.features == first.features)
        // A changed photo (new content, so new size or mtime) is analysed again; the rest are reused.
        usleep(10_000)
        try writeSolidPhoto(paths[2], width: 64, height: 40, colour: RGB(red: 250, green: 250, blue: 10))
        let third = try analyse()
        #expect(third.analysed == 1 && third.hits == 5)
        #expect(third.features[2] != first.features[2])
    }

    /// A damaged cache (nan, inf, absurd values) is not trusted: those photos are analysed again
    /// and the index is rewritten without the bad values.
    /// An entry analysed from another decode (another format or colour profile behind the same
    /// name and time, or a line from before colour conversion, with no decode key) is analysed again.
    /// (Both through the old text format, imported when there is no index file.)
    @Test func featureIndexKeysOnWhatWasDecoded() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let paths = try flatLibrary(scratch.path, colours: (0..<3).map { RGB(red: UInt8($0 * 60), green: 90, blue: 200) })
        let cache = scratch.file("cache")
        let photos = try PhotoLibrary.scan(paths).photos
        #expect(FeatureIndex.decodeKey(photos[0].header) == "jpeg-srgb-d2")
        let index = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        let first = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1, workers: 2, index: index)
        try index.save()
        var lines = try textIndexLines(Array(photos), first.features)
        lines[0][3] = "jpeg-3fa0c2d1-d2"  // the same file once converted from a profile
        lines[1].remove(at: 3)  // the old format: no decode key
        writeTextIndex(lines, replacing: index.path)
        let reopened = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        let again = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1, workers: 2, index: reopened)
        #expect(again.analysed == 2 && reopened.hits == 1)
    }

    /// An index far larger than the library: only the library's entries are held (the others
    /// are never parsed into memory), and saving keeps every other entry.
    @Test func featureIndexHoldsOnlyTheRunsPhotosAndKeepsTheRest() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let paths = try flatLibrary(scratch.path, colours: (0..<3).map { RGB(red: UInt8($0 * 60), green: 90, blue: 200) })
        let cache = scratch.file("cache")
        let photos = try PhotoLibrary.scan(paths).photos
        let index = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        _ = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1, workers: 2, index: index)
        try index.save()
        // 20,000 entries of other photos, as another library's run would have left them.
        let others = (0..<20_000).map {
            Photo(path: "/elsewhere/photo-\(100_000 + $0).jpg", header: photos[0].header, fileBytes: 1000, modifiedNanoseconds: 1)
        }
        try index.append(others.map { ($0, [Float](repeating: 0.5, count: 27)) })

        // This run's photos: the first two, and a third that changed (analysed again, rewritten).
        let library = Set(photos.map(\.path))
        let reopened = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1, only: library)
        #expect(reopened.heldEntries == 3)
        #expect(reopened.lookup("/elsewhere/photo-100007.jpg", decoded: "jpeg-srgb-d2") == nil)
        _ = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1, workers: 2, index: reopened)
        #expect(reopened.hits == 3)
        reopened.store(photos[2].path, decoded: "jpeg-srgb-d2", features: [Float](repeating: 0.25, count: 27))
        try reopened.save()
        let all = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        #expect(all.heldEntries == 20_003)
        #expect(all.lookup(photos[2].path, decoded: "jpeg-srgb-d2") == [Float](repeating: 0.25, count: 27))
        var kept = 0
        let missing = try all.lookup(others) { _, values throws(TesseraError) in if values.allSatisfy({ $0 == 0.5 }) { kept += 1 } }
        #expect(missing.isEmpty && kept == 20_000)
    }

    @Test func featureIndexEntriesThatAreNotColoursAreAnalysedAgain() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let paths = try flatLibrary(scratch.path, colours: (0..<4).map { RGB(red: UInt8($0 * 60), green: 90, blue: 200) })
        let cache = scratch.file("cache")
        let photos = try PhotoLibrary.scan(paths).photos
        let index = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1.5)
        let clean = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1.5, workers: 2, index: index)
        try index.save()
        // Damage three entries: a nan, an inf, a value no colour has.
        var lines = try textIndexLines(Array(photos), clean.features)
        for (line, bad) in zip(0..<3, ["nan", "inf", "12.5"]) { lines[line][4] = bad }
        writeTextIndex(lines, replacing: index.path)
        let reopened = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1.5)
        let again = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1.5, workers: 2, index: reopened)
        #expect(again.analysed == 3 && reopened.hits == 1)
        #expect(again.features == clean.features)
        try reopened.save()
        let third = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1.5)
        let reused = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1.5, workers: 2, index: third)
        #expect(reused.analysed == 0 && third.hits == 4 && reused.features == clean.features)
    }

    @Test func mosaicRendersThroughTheStripePipeline() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let colours = [RGB(red: 230, green: 20, blue: 20), RGB(red: 20, green: 20, blue: 230), RGB(red: 20, green: 210, blue: 20),
                       RGB(red: 240, green: 240, blue: 240), RGB(red: 15, green: 15, blue: 15), RGB(red: 240, green: 200, blue: 20),
                       RGB(red: 200, green: 20, blue: 200), RGB(red: 20, green: 200, blue: 200), RGB(red: 128, green: 128, blue: 128),
                       RGB(red: 180, green: 30, blue: 30)]
        let paths = try flatLibrary(scratch.path, colours: colours)
        let photos = try PhotoLibrary.scan(paths).photos
        let features = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1, workers: 2, index: nil).features.map { $0! }
        let target = "\(fixturesDirectory)/orientation/Landscape_1.jpg"
        let targetFeatures = try MosaicAnalysis.targetFeatures(path: target, columns: 12, rows: 8, subCells: 3)
        let match = try MosaicMatcher.match(target: targetFeatures, columns: 12, rows: 8, subCells: 3, photoFeatures: features,
                                            minDistance: 1, maxUses: nil, seed: 2, workers: 2)
        let layout = CellLayout(columns: 12, rows: 8, cellWidth: 16, cellHeight: 16, photoIndices: match.assignment)
        var settings = RenderSettings()
        settings.subsampling = .s444
        settings.quality = 95
        let output = scratch.file("mosaic.jpg")
        try StripeRenderer(photos: photos, layout: layout, settings: settings, jpeg: output).render()
        let rendered = try JPEGFile.read(output)
        #expect(rendered.width == 192 && rendered.height == 128)
        // Every cell shows the flat colour of the photo the matcher chose for it.
        for cell in 0..<96 {
            let colour = colours[Int(match.assignment[cell])]
            let pixel = rendered.pixel(x: (cell % 12) * 16 + 8, y: (cell / 12) * 16 + 8)
            #expect(abs(Int(pixel.red) - Int(colour.red)) <= 6 && abs(Int(pixel.blue) - Int(colour.blue)) <= 6)
        }
        // Tinting all the way turns each sub-cell into the target's colour there: the mosaic gets
        // closer to the target than the untinted one.
        let tinted = scratch.file("tinted.jpg")
        try StripeRenderer(photos: photos, layout: layout, settings: settings, jpeg: tinted,
                           tint: CellTint(strength: 1, subCells: 3, target: targetFeatures, photoFeatures: features)).render()
        let reference = referenceCell(try JPEGFile.read(target), width: 192, height: 128)
        #expect(meanAbsoluteDifference(try JPEGFile.read(tinted), reference) < meanAbsoluteDifference(rendered, reference) * 0.7)
    }
}

@Suite struct FeatureTreeTests {
    /// The tree's m best photos are the exhaustive scan's, in the same order and with the same
    /// costs, for every cell: uniform, clustered (with exact copies) and uniformly random
    /// features, where the bound prunes little.
    @Test(arguments: [("photo-like", 0), ("clustered with copies", 12), ("uniform noise", -1)])
    func nearestIsExactlyTheExhaustiveRanking(kind: String, clusters: Int) {
        let k = 3, d = 27, n = 3000, m = 24
        let photos: [Float] = clusters < 0 ? (0..<(n * d)).map { _ in Float.random(in: 0...1) }
                                           : photoLikeFeatures(count: n, k: k, seed: 21, clusters: clusters)
        let targets = photoLikeFeatures(count: 400, k: k, seed: 22, clusters: max(0, clusters))
        let tree = photos.withUnsafeBufferPointer { FeatureTree(features: $0.baseAddress!, count: n, valuesPerPhoto: d) }
        // The features in the tree's order, as the matcher moves them.
        var arranged = photos
        arranged.withUnsafeMutableBufferPointer { permuteRecords($0.baseAddress!, width: d, order: tree.order) }
        for slot in [0, 1, 17, n - 1] {  // slot s holds photo order[s]
            let photo = Int(tree.order[slot])
            #expect(Array(arranged[(slot * d)..<((slot + 1) * d)]) == Array(photos[(photo * d)..<((photo + 1) * d)]))
        }
        var scratch = FeatureTree.Scratch(dimensions: tree.dimensions)
        var same = 0
        for cell in 0..<400 {
            var treePhotos = [Int32](repeating: .max, count: m), treeCosts = [Float](repeating: .infinity, count: m)
            targets.withUnsafeBufferPointer { t in
                arranged.withUnsafeBufferPointer { features in
                    tree.nearest(t.baseAddress! + cell * d, features: features.baseAddress!, m: m, photos: &treePhotos, costs: &treeCosts,
                                 scratch: &scratch)
                }
            }
            // Exhaustive: every photo's cost, ranked by (cost, index).
            var all: [(cost: Float, photo: Int32)] = []
            photos.withUnsafeBufferPointer { p in
                targets.withUnsafeBufferPointer { t in
                    for photo in 0..<n {
                        all.append((MosaicMatcher.squaredDistance(t.baseAddress! + cell * d, p.baseAddress! + photo * d, count: d), Int32(photo)))
                    }
                }
            }
            all.sort { (a: (cost: Float, photo: Int32), b: (cost: Float, photo: Int32)) -> Bool in
                a.cost < b.cost || (a.cost == b.cost && a.photo < b.photo)
            }
            let best = Array(all.prefix(m))
            if best.map({ $0.photo }) == treePhotos && best.map({ $0.cost }) == treeCosts { same += 1 }
        }
        #expect(same == 400, "\(kind): \(same) of 400 cells ranked as the exhaustive scan ranks them")
    }

    /// Through the matcher, with constraints: the tree and the exhaustive ranking give the same
    /// mosaic, cell for cell.
    @Test func theMatcherGivesTheSameMosaicWithOrWithoutTheTree() throws {
        let photos = photoLikeFeatures(count: 1500, k: 3, seed: 31, clusters: 30)
        let target = photoLikeFeatures(count: 60 * 40, k: 3, seed: 32)
        func run(_ tree: Bool) throws -> MosaicMatch {
            try MosaicMatcher.match(target: target, columns: 60, rows: 40, subCells: 3, photos: photos, minDistance: 2, maxUses: 5,
                                    seed: 8, workers: 2, effort: 2, useTree: tree)
        }
        let withTree = try run(true), without = try run(false)
        #expect(withTree.usedTree && !without.usedTree)
        #expect(withTree == without)
    }
}

@Suite struct StreamedMatchingTests {
    /// Photos ranked a run at a time (a tree over each run, or every photo of it) give the same
    /// mosaic as one run over all of them: clustered features with exact copies (ties broken by
    /// photo index across runs), --min-distance and --max-uses, the local search.
    @Test(arguments: [(2, 5 as Int?), (1, nil), (0, 2 as Int?)])
    func runsOfPhotosGiveTheMosaicOfOneRun(minDistance: Int, maxUses: Int?) throws {
        let photos = photoLikeFeatures(count: 1500, k: 3, seed: 51, clusters: 30)
        let target = photoLikeFeatures(count: 60 * 40, k: 3, seed: 52)
        func run(tree: Bool, chunk: Int) throws -> MosaicMatch {
            try MosaicMatcher.match(target: target, columns: 60, rows: 40, subCells: 3, photos: photos, minDistance: minDistance,
                                    maxUses: maxUses, seed: 9, workers: 2, effort: 2, useTree: tree, chunkPhotos: chunk)
        }
        let whole = try run(tree: false, chunk: 1500)
        for (tree, chunk) in [(true, 1500), (true, 700), (true, 256), (false, 333), (true, 1)] {
            let result = try run(tree: tree, chunk: chunk)
            #expect(result == whole, "tree \(tree), runs of \(chunk) photos")
        }
        #expect(LocalSearchTests.constraintsHold(whole, minDistance: minDistance, maxUses: maxUses) && whole.constraintViolations == 0)
    }

    /// When every candidate of a cell is used up, the cell scans all photos, a run at a time:
    /// 60 photos for 1,200 cells at --max-uses 20 leaves no slack, so late cells take photos
    /// far down their ranking. The runs give the same result as one run, and the uses hold.
    @Test func aScanOfAllPhotosReadsThemARunAtATime() throws {
        let photos = photoLikeFeatures(count: 60, k: 3, seed: 61)
        let target = photoLikeFeatures(count: 40 * 30, k: 3, seed: 62)
        func run(chunk: Int) throws -> MosaicMatch {
            try MosaicMatcher.match(target: target, columns: 40, rows: 30, subCells: 3, photos: photos, minDistance: 1,
                                    maxUses: 20, seed: 4, workers: 2, effort: 1, chunkPhotos: chunk)
        }
        let whole = try run(chunk: 60)
        #expect(try run(chunk: 7) == whole)
        var uses: [Int32: Int] = [:]
        for photo in whole.assignment { uses[photo, default: 0] += 1 }
        #expect(uses.count == 60 && uses.values.allSatisfy { $0 == 20 }, "every photo used exactly 20 times")
    }

    /// A store in an anonymous temporary file: the same mosaic as the store in memory, none of
    /// its features held by the process, and nothing left in the directory.
    @Test func aStoreInATemporaryFileMatchesLikeOneInMemory() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let d = 27, n = 5000
        let photos = photoLikeFeatures(count: n, k: 3, seed: 71, clusters: 40)
        let target = photoLikeFeatures(count: 50 * 30, k: 3, seed: 72)
        var batches: [Int] = []
        let onDisk = try FeatureStore(count: n, valuesPerPhoto: d, directory: scratch.path, batch: 1024) { first, buffer in
            batches.append(first)
            _ = buffer.initialize(from: photos[(first * d)..<(first * d + buffer.count)])
        }
        #expect(batches == [0, 1024, 2048, 3072, 4096])
        #expect(onDisk.residentBytes == 0 && FeatureStore(features: photos, valuesPerPhoto: d).residentBytes == n * d * 4)
        #expect(scratch.contents().isEmpty, "the store's file has no name")
        func run(_ store: FeatureStore) throws -> MosaicMatch {
            try MosaicMatcher.match(target: target, columns: 50, rows: 30, subCells: 3, store: store, minDistance: 1, maxUses: 3,
                                    seed: 2, workers: 2, effort: 2, chunkPhotos: 1200)
        }
        #expect(try run(onDisk) == run(FeatureStore(features: photos, valuesPerPhoto: d)))
        // The matcher read the store a run at a time and then the placed photos: never more than
        // a run at once, every photo once in the ranking, and (no cell is left to a scan of all
        // photos here) not much more after.
        let reads = onDisk.readStatistics
        #expect(reads.largest == 1200, "at most a run of 1,200 photos at once: \(reads)")
        #expect(reads.photos >= n && reads.photos <= 3 * n, "\(reads)")
    }

    /// Runs are as large as the budget leaves room for: all photos when they fit, fewer in a
    /// smaller budget, never fewer than the smallest run; what is planned fits the budget.
    @Test func runsAreAsLargeAsTheBudgetAllows() {
        let cells = 200 * 267, k = 3
        let all = MosaicMatcher.runPhotos(cells: cells, photos: 50_000, subCells: k, budgetBytes: 64 << 20)
        #expect(all == 50_000)
        let million = MosaicMatcher.runPhotos(cells: cells, photos: 1_000_000, subCells: k, budgetBytes: 64 << 20)
        let smaller = MosaicMatcher.runPhotos(cells: cells, photos: 1_000_000, subCells: k, budgetBytes: 48 << 20)
        #expect(million < 1_000_000 && smaller < million && smaller >= MosaicMatcher.smallestRun)
        for (run, budget) in [(million, 64 << 20), (smaller, 48 << 20)] {
            let planned = RenderPlan.processAllowanceBytes
                + MosaicMatcher.workingBytes(cells: cells, photos: 1_000_000, subCells: k, chunkPhotos: run)
            #expect(planned <= budget && planned + 200 * 1024 > budget, "run \(run): \(planned) planned in \(budget)")
        }
        #expect(MosaicMatcher.runPhotos(cells: cells, photos: 1_000_000, subCells: k, budgetBytes: 8 << 20) == MosaicMatcher.smallestRun)
    }

    /// A store that cannot be made says where and why; an error from the caller's fill is passed on.
    @Test func aStoreThatCannotBeWrittenIsAnError() {
        let missing = temporaryRoot + "/tessera-no-such-directory-\(getpid())"
        #expect {
            _ = try FeatureStore(count: 10, valuesPerPhoto: 27, directory: missing) { _, _ in }
        } throws: { error in
            guard case let TesseraError.system(_, errno, path) = error else { return false }
            return errno == ENOENT && path.hasPrefix(missing)
        }
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        #expect(throws: TesseraError.cancelled) {
            _ = try FeatureStore(count: 10, valuesPerPhoto: 27, directory: scratch.path) { _, _ throws(TesseraError) in throw .cancelled }
        }
        #expect(scratch.contents().isEmpty)
    }
}

@Suite struct LocalSearchTests {
    static func constraintsHold(_ match: MosaicMatch, minDistance: Int, maxUses: Int?) -> Bool {
        var uses: [Int32: Int] = [:]
        for photo in match.assignment { uses[photo, default: 0] += 1 }
        if let maxUses, uses.values.contains(where: { $0 > maxUses }) { return false }
        return (match.smallestRepeatDistance ?? Int.max) > minDistance
    }

    /// The local search lowers the total cost (never raises it), keeps every constraint, and
    /// gives the same mosaic for a seed whatever the number of workers.
    @Test(arguments: [(1, nil), (2, nil), (1, 40), (0, 25), (3, 60)] as [(Int, Int?)])
    func improvesWithinTheConstraints(minDistance: Int, maxUses: Int?) throws {
        let photos = photoLikeFeatures(count: 60, k: 3, seed: 41)
        let target = photoLikeFeatures(count: 40 * 30, k: 3, seed: 42)
        func run(effort: Int, workers: Int) throws -> MosaicMatch {
            try MosaicMatcher.match(target: target, columns: 40, rows: 30, subCells: 3, photos: photos, minDistance: minDistance,
                                    maxUses: maxUses, seed: 3, workers: workers, effort: effort)
        }
        let greedy = try run(effort: 0, workers: 2)
        let improved = try run(effort: 4, workers: 2)
        #expect(improved.greedyCost == greedy.totalCost, "the local search starts from the greedy result")
        #expect(improved.totalCost <= improved.greedyCost)
        #expect(improved.improvements > 0 && improved.totalCost < improved.greedyCost,
                "D \(minDistance), K \(maxUses.map(String.init) ?? "none"): \(improved.improvements) moves")
        // The cost it reports is the cost of what it placed.
        let recomputed = (0..<(40 * 30)).reduce(0.0) { sum, cell in
            target.withUnsafeBufferPointer { t in
                photos.withUnsafeBufferPointer { p in
                    sum + Double(MosaicMatcher.squaredDistance(t.baseAddress! + cell * 27, p.baseAddress! + Int(improved.assignment[cell]) * 27, count: 27))
                }
            }
        }
        #expect(abs(recomputed - improved.totalCost) < 1e-3 * max(1, recomputed))
        #expect(Self.constraintsHold(improved, minDistance: minDistance, maxUses: maxUses) && improved.constraintViolations == 0)
        for workers in [1, 3, 8] { #expect(try run(effort: 4, workers: workers) == improved, "\(workers) workers") }
    }
}
