// DuplicateTests.swift — the same picture stored more than once counts as one photo: re-encoded,
// resized, brightened or stripped of its colour profile; distinct real photos stay apart; and the
// measure's buckets never hide a pair it joins.
import Glibc
import Testing
import TesseraTestSupport
import CTesseraTestShims
@testable import Tessera

/// The repository's root (Samples/ lives there), from this file's path.
private let repositoryDirectory: String = {
    var path = #filePath  // Tests/TesseraTests/Mosaic/DuplicateTests.swift
    for _ in 0..<4 { path = String(path[..<path.lastIndex(of: "/")!]) }
    return path
}()

@Suite struct DuplicateTests {
    /// The orientation fixture (one landscape photo and one portrait photo, each in every EXIF
    /// orientation, re-encoded with its own digit drawn on it) is two pictures.
    @Test func orientationFixtureIsTwoPictures() throws {
        let photos = try PhotoLibrary.scan([fixturesDirectory + "/orientation"]).photos
        let features = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1, workers: 2, index: nil).features.map { $0! }
        let representatives = DuplicatePictures.representatives(features)
        let names = photos.map { String($0.path.split(separator: "/").last!) }
        let landscape = names.firstIndex(of: "Landscape_0.jpg")!, portrait = names.firstIndex(of: "Portrait_0.jpg")!
        for (index, name) in names.enumerated() {
            #expect(representatives[index] == (name.hasPrefix("Landscape") ? landscape : portrait), "\(name)")
        }
    }

    /// Distinct pictures stay distinct; re-encoded copies (another quality, PNG, WebP, HEIC, a
    /// Display-P3 export) join their original.
    @Test func reencodedCopiesJoinTheirOriginal() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let originals = try SamplePhotos.generate(count: 12, in: scratch.path, longSide: 400, seed: 7)
        var expected: [String: String] = [:]  // copy -> original
        for (number, original) in originals.enumerated() {
            let copy: String
            switch number % 4 {
            case 0: copy = scratch.file("copy-\(number).jpg"); #expect(runTool(["convert", original, "-quality", "60", copy]) == 0)
            case 1: copy = scratch.file("copy-\(number).png"); #expect(runTool(["convert", original, copy]) == 0)
            case 2: copy = scratch.file("copy-\(number).webp"); #expect(runTool(["cwebp", "-quiet", "-q", "80", original, "-o", copy]) == 0)
            default: copy = scratch.file("copy-\(number).heic"); #expect(runTool(["heif-enc", "-q", "80", original, "-o", copy]) == 0)
            }
            expected[copy] = original
        }
        let photos = try PhotoLibrary.scan([scratch.path]).photos
        #expect(photos.count == 24)
        let features = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1, workers: 2, index: nil).features.map { $0! }
        let representatives = DuplicatePictures.representatives(features)
        func picture(_ index: Int) -> String { expected[photos[index].path] ?? photos[index].path }
        for index in photos.indices {
            // Joined to a photo of its own picture, and the same one as every photo of it.
            #expect(picture(representatives[index]) == picture(index), "\(photos[index].path)")
        }
        #expect(Set(representatives).count == 12)
    }

    /// The repository's sample photos (Samples/library: 46 distinct real photos), each copied
    /// the ways a library gets copies: JPEG at quality 60, a quarter of the size, PNG, WebP, HEIC,
    /// converted to a wide-gamut profile (Adobe RGB, from colord-data) and tagged with it, the same
    /// exported without the profile (the colours read as sRGB: washed out), and 5% brighter.
    /// Every copy joins its original; the originals and the target stay 47 pictures.
    @Test func realPhotoCopiesJoinTheirOriginal() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let samples = repositoryDirectory + "/Samples"
        let originals = listNames(samples + "/library").filter { $0.hasSuffix(".jpg") }
        #expect(originals.count == 46)
        let wide = "/usr/share/color/icc/colord/AdobeRGB1998.icc", srgb = "/usr/share/color/icc/colord/sRGB.icc"
        var picture: [String: String] = [:]  // path -> the sample it shows
        for (number, name) in originals.enumerated() {
            let original = samples + "/library/" + name
            picture[original] = name
            guard number % 4 == 0 else { continue }  // copies of every fourth photo
            let stem = scratch.file("copy-\(number)")
            let copies = [(stem + "-q60.jpg", ["vips", "copy", original, stem + "-q60.jpg[Q=60]"]),
                          (stem + "-quarter.jpg", ["vips", "resize", original, stem + "-quarter.jpg", "0.25"]),
                          (stem + ".png", ["vips", "copy", original, stem + ".png"]),
                          (stem + ".webp", ["cwebp", "-quiet", "-q", "80", original, "-o", stem + ".webp"]),
                          (stem + ".heic", ["heif-enc", "-q", "80", original, "-o", stem + ".heic"]),
                          (stem + "-wide.jpg", ["vips", "icc_transform", original, stem + "-wide.jpg", wide, "--input-profile", srgb]),
                          (stem + "-untagged.jpg", ["vips", "copy", stem + "-wide.jpg", stem + "-untagged.jpg[strip]"]),
                          (stem + "-bright.jpg", ["vips", "linear", original, stem + "-bright.jpg", "1.05", "0", "--uchar"])]
            for (path, command) in copies {
                #expect(runTool(command) == 0, "\(command)")
                picture[path] = name
            }
        }
        picture[samples + "/target/chelsea.jpg"] = "target"
        let photos = try PhotoLibrary.scan([samples + "/library", samples + "/target", scratch.path]).photos
        #expect(photos.count == 46 + 1 + 12 * 8)
        // The originals first, as a library's first copy is usually the original: a copy is
        // compared with the picture's first photo, and two edits (brightened, then untagged)
        // can add up past the measure's bounds.
        let order = photos.indices.filter { !photos[$0].path.hasPrefix(scratch.path) } + photos.indices.filter { photos[$0].path.hasPrefix(scratch.path) }
        for k in [3, 4] {
            let analysed = MosaicAnalysis.photoFeatures(photos, subCells: k, cellAspect: 1, workers: 2, index: nil).features.map { $0! }
            let features = order.map { analysed[$0] }
            let representatives = DuplicatePictures.representatives(features)
            for (position, index) in order.enumerated() {
                let representative = photos[order[representatives[position]]].path
                #expect(picture[representative] == picture[photos[index].path], "k \(k): \(photos[index].path) joined \(representative)")
            }
            let apart = order.indices.filter { representatives[$0] == $0 && photos[order[$0]].path.hasPrefix(scratch.path) }
            #expect(Set(representatives).count == 47, "k \(k): \(apart.map { photos[order[$0]].path })")
        }
    }

    /// The libraries the scale tests make (3 x 3 blocks of four grey levels, tinted) are as many
    /// pictures as photos: two of them differ in some block by at least 30 in every channel.
    @Test func syntheticDistinctLibraryStaysDistinct() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var message = [CChar](repeating: 0, count: 300)
        #expect(tessera_test_write_distinct_jpegs(scratch.path, 600, 0, 64, 48, 0, 85, &message, 300) == 0)
        let photos = try PhotoLibrary.scan([scratch.path]).photos
        #expect(photos.count == 600)
        let features = MosaicAnalysis.photoFeatures(photos, subCells: 3, cellAspect: 1, workers: 2, index: nil).features.map { $0! }
        #expect(Set(DuplicatePictures.representatives(features)).count == 600)
    }

    /// A pair the measure joins lands in the same or neighbouring buckets, so the bucketed search
    /// finds exactly what comparing with every earlier picture finds; the streamed search agrees.
    /// Pictures are random, and copies are pushed to the edges of every bound (mean shifts, contrast
    /// gain, pattern noise), many of them across a bucket boundary.
    @Test func bucketsNeverHideAJoinedPair() throws {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func random() -> Float {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Float(state >> 40) / Float(1 << 24)
        }
        for k in [3, 8] {
            let d = k * k * 3
            var features: [[Float]] = []
            var joinedAcross = 0, joined = 0
            for _ in 0..<400 {
                var base = [Float](repeating: 0, count: d), mean: [Float] = [0, 0, 0]
                for i in 0..<d {
                    base[i] = i % 3 == 0 ? 0.2 + 0.6 * random() : 0.3 * random() - 0.15
                    mean[i % 3] += base[i] / Float(d / 3)
                }
                features.append(base)
                for _ in 0..<3 {
                    let gain: Float = 0.8 + 0.45 * random()
                    let shifts: [Float] = [0.11 * random() - 0.055, 0.09 * random() - 0.045, 0.09 * random() - 0.045]
                    var copy = [Float](repeating: 0, count: d)
                    for i in 0..<d {
                        let channel = i % 3
                        let pattern = base[i] - mean[channel]
                        let noise: Float = 0.03 * random() - 0.015
                        copy[i] = mean[channel] + shifts[channel] + (channel == 0 ? gain * pattern : pattern) + noise
                    }
                    features.append(copy)
                    if DuplicatePictures.same(base, copy) {
                        joined += 1
                        let a = base.withUnsafeBufferPointer { values in
                            DuplicatePictures.bucket(DuplicatePictures.summary(values.baseAddress, count: d), tolerance: 0.02)
                        }
                        let b = copy.withUnsafeBufferPointer { values in
                            DuplicatePictures.bucket(DuplicatePictures.summary(values.baseAddress, count: d), tolerance: 0.02)
                        }
                        #expect(abs(a.l - b.l) <= 1 && abs(a.a - b.a) <= 1 && abs(a.b - b.b) <= 1)
                        if a != b { joinedAcross += 1 }
                    }
                }
            }
            #expect(joined > 100 && joinedAcross > 20, "k \(k): \(joined) joined, \(joinedAcross) across buckets")
            // Every earlier picture compared: the reference the buckets must reproduce.
            var reference: [Int] = []
            var pictures: [Int] = []
            for (index, feature) in features.enumerated() {
                if let first = pictures.first(where: { DuplicatePictures.same(feature, features[$0]) }) {
                    reference.append(first)
                } else {
                    reference.append(index)
                    pictures.append(index)
                }
            }
            let representatives = DuplicatePictures.representatives(features)
            #expect(representatives == reference, "k \(k)")
            var streamed: [Int] = Array(0..<features.count)
            let rows = try DuplicatePictures.representatives(store: FeatureStore(photos: features, valuesPerPhoto: d),
                                                              have: [Bool](repeating: true, count: features.count)) { streamed[$0] = $1 }
            #expect(streamed == reference && rows?.map(Int.init) == pictures, "k \(k)")
        }
    }

    /// Flat pictures (no pattern to confirm them by) keep the first measure's bounds: two grey
    /// walls 0.03 apart in L are two pictures, a rich picture 0.03 brighter is one.
    @Test func flatPicturesKeepTightBounds() {
        func lighter(_ feature: [Float], by amount: Float) -> [Float] {
            var result = feature
            for c in stride(from: 0, to: result.count, by: 3) { result[c] += amount }
            return result
        }
        var flat = [Float](repeating: 0, count: 27), rich = [Float](repeating: 0, count: 27)
        for cell in 0..<9 {
            flat[cell * 3] = cell % 2 == 0 ? 0.5 : 0.502
            rich[cell * 3] = 0.3 + 0.05 * Float(cell)
            rich[cell * 3 + 1] = 0.01 * Float(cell % 5)
        }
        #expect(!DuplicatePictures.same(flat, lighter(flat, by: 0.03)))
        #expect(DuplicatePictures.same(flat, lighter(flat, by: 0.015)))
        #expect(DuplicatePictures.same(rich, lighter(rich, by: 0.03)))
        #expect(!DuplicatePictures.same(rich, lighter(rich, by: 0.06)))
    }

    /// A mosaic at --min-distance 1 from a folder full of duplicates: no two identical pictures
    /// touch, and the duplicates are counted.
    @Test func identicalPicturesNeverTouch() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let originals = try SamplePhotos.generate(count: 10, in: scratch.path, longSide: 300, seed: 11)
        var group: [String: Int] = [:]
        for (number, original) in originals.enumerated() {
            group[original] = number
            for copy in 0..<3 {
                let path = scratch.file("copy-\(number)-\(copy).jpg")
                #expect(runTool(["convert", original, "-quality", "\(50 + copy * 20)", path]) == 0)
                group[path] = number
            }
        }
        let orientation = scratch.file("orientation")
        #expect(mkdir(orientation, 0o755) == 0)
        for name in listNames(fixturesDirectory + "/orientation") where name.hasSuffix(".jpg") {
            writeBytes(readBytes(fixturesDirectory + "/orientation/" + name), to: orientation + "/" + name)
            group[orientation + "/" + name] = name.hasPrefix("Landscape") ? 100 : 101
        }
        let library = try PhotoLibrary.scan(originals + (0..<10).flatMap { n in (0..<3).map { scratch.file("copy-\(n)-\($0).jpg") } }
                                            + [orientation])
        #expect(library.photos.count == 40 + 18)
        // The target a PNG (a screenshot, an export): read like any photo.
        let target = scratch.file("target.png")
        #expect(runTool(["convert", originals[3], "PNG24:" + target]) == 0)
        var mosaic = MosaicSettings(targetPath: target, columns: 24, rows: 18, cellWidth: 12, cellHeight: 12)
        mosaic.minDistance = 1
        mosaic.cacheDirectory = scratch.file("cache")
        let prepared = try MosaicJob.prepare(library: library, mosaic: mosaic, settings: RenderSettings(),
                                             outputs: [.jpeg(path: scratch.file("mosaic.jpg"))])
        #expect(prepared.duplicates.count == 30 + 16 && prepared.duplicateCount == 30 + 16)
        // Twelve pictures matched; the render holds only those the mosaic uses.
        #expect(prepared.photoCount == 12)
        #expect(prepared.request.photos.count <= 12 && Set(prepared.match.assignment).count == prepared.request.photos.count)
        let groups = prepared.match.assignment.map { group[prepared.request.photos[Int($0)].path]! }
        var touching = 0
        for row in 0..<18 {
            for column in 0..<24 {
                for (dy, dx) in [(0, 1), (1, -1), (1, 0), (1, 1)] {
                    let r = row + dy, c = column + dx
                    guard r < 18, c >= 0, c < 24 else { continue }
                    if groups[row * 24 + column] == groups[r * 24 + c] { touching += 1 }
                }
            }
        }
        #expect(touching == 0)
        #expect(prepared.match.constraintViolations == 0)
    }
}
