// DuplicateTests.swift — the same picture stored more than once counts as one photo.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

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
