// DuplicateTests.swift — the same picture stored more than once counts as one photo: re-encoded,
// resized, brightened or stripped of its colour profile; distinct real photos stay apart; and the
// search's grid never hides a pair the measure joins.
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

    /// A pair the measure joins lands in a cell the grid searches, so the grid's search
    /// finds exactly what comparing with every earlier picture finds; the streamed search agrees.
    /// Pictures are random, and copies are pushed to the edges of every bound (mean shifts, contrast
    /// gain, pattern noise), many of them across a cell boundary.
    @Test func gridNeverHidesAJoinedPair() throws {
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
                        let (searched, across, _) = gridPlaces(copy, searchedFor: base)
                        #expect(searched)
                        if across { joinedAcross += 1 }
                    }
                }
            }
            #expect(joined > 100 && joinedAcross > 20, "k \(k): \(joined) joined, \(joinedAcross) across cells")
            // Every earlier picture compared: the reference the grid must reproduce.
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

    /// Photos generated around every bound of the measure (`BoundaryPhotos`: flat, partly and
    /// fully rich, their means crowded together, copies just inside and just outside each bound,
    /// copies of copies, in shuffled order): the grid's search gives exactly the representatives
    /// that comparing each photo with every earlier picture gives (the first by position that
    /// `same` accepts), streamed or not; every pair `same` accepts lies in a cell the grid
    /// searches; and many accepted pairs lie across cells and near a bound of a coordinate.
    @Test func gridMatchesComparingEveryPair() throws {
        var generator = BoundaryPhotos(state: 0x2545_F491_4F6C_DD1D)
        for k in [1, 2, 3, 4] {
            let features = generator.library(subCells: k, pictures: 600)
            var reference: [Int] = [], pictures: [Int] = []
            var accepted = 0, across = 0, nearBound = 0
            var unsearched: [(photo: Int, picture: Int)] = []
            for (index, feature) in features.enumerated() {
                let joined = pictures.filter { DuplicatePictures.same(feature, features[$0]) }
                for picture in joined {
                    let places = gridPlaces(features[picture], searchedFor: feature)
                    if !places.searched { unsearched.append((index, picture)) }
                    accepted += 1
                    if places.across { across += 1 }
                    if places.nearBound { nearBound += 1 }
                }
                reference.append(joined.first ?? index)
                if joined.isEmpty { pictures.append(index) }
            }
            #expect(unsearched.isEmpty, "k \(k): \(unsearched.count) accepted pairs in cells not searched, first \(unsearched.prefix(3))")
            // (One sub-cell: every photo is flat, so the crowded means are few pictures.)
            #expect(accepted > 500 && across > 150 && nearBound > 50 && pictures.count > (k == 1 ? 10 : 400),
                    "k \(k): \(features.count) photos, \(pictures.count) pictures, \(accepted) pairs accepted, \(across) across cells, \(nearBound) near a bound")
            let representatives = DuplicatePictures.representatives(features)
            let wrong = features.indices.filter { representatives[$0] != reference[$0] }
            #expect(wrong.isEmpty, "k \(k): \(wrong.count) photos joined another picture, first \(wrong.prefix(5))")
            var streamed: [Int] = Array(0..<features.count)
            let rows = try DuplicatePictures.representatives(store: FeatureStore(photos: features, valuesPerPhoto: k * k * 3),
                                                              have: [Bool](repeating: true, count: features.count)) { streamed[$0] = $1 }
            let wrongStreamed = features.indices.filter { streamed[$0] != reference[$0] }
            #expect(wrongStreamed.isEmpty && rows?.map(Int.init) == pictures,
                    "k \(k): \(wrongStreamed.count) photos joined another picture streamed, first \(wrongStreamed.prefix(5))")
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

/// Whether the grid searches the cell of `representative` for `photo` (a pair `same(photo,
/// representative)` accepts must be searched), whether that cell is another than the photo's
/// own, and whether the two differ by more than 0.9 of the bound in some coordinate.
private func gridPlaces(_ representative: [Float], searchedFor photo: [Float]) -> (searched: Bool, across: Bool, nearBound: Bool) {
    let d = photo.count
    let grid = DuplicatePictures.Grid(valuesPerPhoto: d, tolerance: DuplicatePictures.tolerance, capacity: 1)
    return photo.withUnsafeBufferPointer { values in
        representative.withUnsafeBufferPointer { other in
            let x = values.baseAddress!, y = other.baseAddress!
            let sx = DuplicatePictures.summary(x, count: d), sy = DuplicatePictures.summary(y, count: d)
            let cell = grid.cell(y, sy)
            let searched = zip(grid.ranges(x, sx), cell).allSatisfy { $0.contains($1) }
            let gaps = zip(grid.coordinates(x, sx), grid.coordinates(y, sy)).map { abs($0 - $1) }
            return (searched, cell != grid.cell(x, sx), zip(gaps, grid.radii(sx)).contains { $0 > 0.9 * $1 })
        }
    }
}

/// Feature vectors around the bounds of `DuplicatePictures.same`: pictures whose means crowd
/// together (L 0.48-0.52, a and b within 0.005 of 0), of L contrasts from none through the floor
/// (0.02) and the rich contrast (0.08) to well past it, and copies that move one quantity the
/// measure bounds to just inside or just outside its bound.
private struct BoundaryPhotos {
    var state: UInt64

    /// 0 ..< 1.
    mutating func random() -> Float {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Float(state >> 40) / Float(1 << 24)
    }

    /// `bound` times 0.96 ... 1.04, either sign: just inside or just outside it.
    mutating func near(_ bound: Float) -> Float {
        bound * (0.96 + 0.08 * random()) * (random() < 0.5 ? -1 : 1)
    }

    /// `pictures` pictures of k x k sub-cells, each followed by up to four copies (of it or of an
    /// earlier copy), then shuffled.
    mutating func library(subCells k: Int, pictures: Int) -> [[Float]] {
        var photos: [[Float]] = []
        for _ in 0..<pictures {
            var family = [picture(cells: k * k)]
            for _ in 0..<Int(random() * 5) { family.append(copy(of: family[Int(random() * Float(family.count))])) }
            photos += family
        }
        for i in stride(from: photos.count - 1, to: 0, by: -1) { photos.swapAt(i, Int(random() * Float(i + 1))) }
        return photos
    }

    mutating func picture(cells n: Int) -> [Float] {
        let contrasts: [Float] = [0, 0.01, 0.019, 0.021, 0.04, 0.079, 0.081, 0.15]
        let contrast = contrasts[Int(random() * Float(contrasts.count))]
        var pattern = (0..<n).map { _ in random() - 0.5 }
        let mean = pattern.reduce(0, +) / Float(n)
        pattern = pattern.map { $0 - mean }
        let rms = (pattern.reduce(0) { $0 + $1 * $1 } / Float(n)).squareRoot()
        let l = 0.48 + 0.04 * random(), a = 0.01 * random() - 0.005, b = 0.01 * random() - 0.005
        var x = [Float](repeating: 0, count: n * 3)
        for c in 0..<n {
            x[c * 3] = l + (rms > 0 ? pattern[c] * contrast / rms : 0)
            x[c * 3 + 1] = a + 0.02 * random() - 0.01
            x[c * 3 + 2] = b + 0.02 * random() - 0.01
        }
        return x
    }

    /// `x` with one bounded quantity moved to just inside or outside its bound (the bounds of a
    /// pair as rich as `x`): the mean L, a or b; the L contrast; one sub-cell's L, a or b pattern
    /// (the others moved back so the mean stays); or the mean L and one sub-cell's L pattern
    /// together, up to the cap on a sub-cell's difference.
    mutating func copy(of x: [Float]) -> [Float] {
        let n = x.count / 3
        let s = x.withUnsafeBufferPointer { DuplicatePictures.summary($0.baseAddress, count: x.count) }
        let weight = min(1, s.contrast / DuplicatePictures.richContrast), t = DuplicatePictures.tolerance
        let meanL = t + DuplicatePictures.lightnessShift * weight, meanColour = t + DuplicatePictures.colourShift * weight
        let patternL = t + DuplicatePictures.lightnessPattern * weight, patternColour = t + DuplicatePictures.colourPattern * weight
        var y = x
        func shift(_ channel: Int, by amount: Float) { for c in 0..<n { y[c * 3 + channel] += amount } }
        func move(_ channel: Int, cell: Int, by amount: Float) {
            for c in 0..<n { y[c * 3 + channel] += c == cell ? amount : (n > 1 ? -amount / Float(n - 1) : 0) }
        }
        let cell = Int(random() * Float(n))
        switch Int(random() * 8) {
        case 0: shift(0, by: near(meanL))
        case 1: shift(1, by: near(meanColour))
        case 2: shift(2, by: near(meanColour))
        case 3:
            let gain = Float(pow(Double(DuplicatePictures.contrastRatio), Double(near(1))))
            for c in 0..<n { y[c * 3] = s.l + (x[c * 3] - s.l) * gain }
        case 4: move(0, cell: cell, by: near(patternL))
        case 5: move(1 + Int(random() * 2), cell: cell, by: near(patternColour))
        default:
            let cap = near(t + DuplicatePictures.cellDifference * weight), first = 0.7 * meanL * (cap < 0 ? -1 : 1)
            shift(0, by: first)
            move(0, cell: cell, by: cap - first)
        }
        return y
    }
}
