// DeepZoomTests.swift — the pyramid against an independent downscale of the JPEG, its tile
// sizes against the Deep Zoom rules, its descriptor through an XML parser, and its atomicity.
import Foundation
import FoundationXML
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

private let landscapes = (1...8).map { fixturesDirectory + "/orientation/Landscape_\($0).jpg" }

/// The descriptor's attributes, by element, read with an XML parser.
private final class DescriptorReader: NSObject, XMLParserDelegate {
    var elements: [String: [String: String]] = [:]
    var namespace: String?
    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        elements[name] = attributes
        if name == "Image" { namespace = attributes["xmlns"] }
    }
}

private func readDescriptor(_ path: String) -> DescriptorReader? {
    let parser = XMLParser(data: Data(readBytes(path)))
    let reader = DescriptorReader()
    parser.delegate = reader
    return parser.parse() ? reader : nil
}

/// Renders `photos` as a grid to a JPEG and/or a pyramid.
@discardableResult
func renderPyramid(_ photos: [String], jpeg: String?, deepZoom: String?, columns: Int, rows: Int,
                           cellWidth: Int, cellHeight: Int, zoom: DeepZoomSettings = DeepZoomSettings(),
                           settings base: RenderSettings = RenderSettings(), cancellation: RenderCancellation? = nil,
                           events: ((RenderEvent) -> Void)? = nil) throws -> RenderSummary {
    let settings = base
    var outputs: [RenderOutput] = []
    if let jpeg { outputs.append(.jpeg(path: jpeg)) }
    if let deepZoom { outputs.append(.deepZoom(path: deepZoom, settings: zoom)) }
    let library = try PhotoLibrary.scan(photos)
    let layout = GridLayout.make(photoCount: library.photos.count, columns: columns, rows: rows,
                                 cellWidth: cellWidth, cellHeight: cellHeight, order: .name)
    let renderer = try StripeRenderer(request: RenderRequest(photos: library.photos, layout: layout, settings: settings, outputs: outputs),
                                      cancellation: cancellation)
    return try renderer.render {
        events?($0)
    }
}

@Suite struct DeepZoomGeometryTests {
    @Test func levelsHalveRoundingUpDownToOnePixel() {
        let geometry = DeepZoomGeometry(width: 3000, height: 2000, tileSize: 254, overlap: 1)
        #expect(geometry.maxLevel == 12)  // 2^12 = 4096 >= 3000 > 2048
        #expect(geometry.levels[12].width == 3000 && geometry.levels[12].height == 2000)
        #expect(geometry.levels[11].width == 1500 && geometry.levels[11].height == 1000)
        #expect(geometry.levels[2].width == 3 && geometry.levels[2].height == 2)  // ceil(3000/1024), ceil(2000/1024)
        #expect(geometry.levels[0].width == 1 && geometry.levels[0].height == 1)
        #expect(geometry.levels[12].columns == 12 && geometry.levels[12].rows == 8)
        // libvips's dzsave writes the same 137 tiles for this size (checked by hand with vips 8.14).
        #expect(geometry.tileCount == 137)
        #expect(geometry.span(tile: 0, extent: 3000) == 0..<255)
        #expect(geometry.span(tile: 1, extent: 3000) == 253..<509)
        #expect(geometry.span(tile: 11, extent: 3000) == 2793..<3000)
        #expect(DeepZoomGeometry(width: 1, height: 1, tileSize: 254, overlap: 1).levels.count == 1)
    }

    @Test func settingsOutOfRangeAreRefused() {
        var settings = DeepZoomSettings()
        settings.overlap = 200
        #expect(throws: TesseraError.invalidSettings("Deep Zoom overlap must be 0...127 px (half the tile size), got 200")) {
            try settings.validate()
        }
        settings.overlap = 1
        settings.tileSize = 8
        #expect(throws: TesseraError.invalidSettings("Deep Zoom tile size must be 16...8192 px, got 8")) { try settings.validate() }
        settings.tileSize = 254
        settings.quality = 0
        #expect(throws: TesseraError.invalidSettings("Deep Zoom quality must be 1...100, got 0")) { try settings.validate() }
    }

    @Test func viewerStringsAreEscaped() {
        #expect(DeepZoomViewer.jsonString("a\"b\\c</script>\n") == #""a\"b\\c\u003c/script>\n""#)
        #expect(DeepZoomViewer.htmlEscaped("<a href=\"x\">&'") == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;")
        let page = DeepZoomViewer.page(name: "my wall#1")
        #expect(page.contains("<script src=\"my%20wall%231_files/viewer/cells.js\"></script>"))
        #expect(page.contains("data-page=\"my wall#1.html\"") && page.contains("data-folder=\"my%20wall%231_files\""))
        #expect(!page.contains("data-archive=\""))
        let archivePage = DeepZoomViewer.page(name: "a&b", title: nil, folder: false, archive: true)
        #expect(archivePage.contains("data-archive=\"a%26b.szi\"") && archivePage.contains("data-archive-name=\"a&amp;b.szi\""))
        #expect(!archivePage.contains("<script src=") && !archivePage.contains("data-folder=\""))
    }

    /// Leaflet is inlined in the page: its code must not end the <script> or <style> early, and
    /// its licence (a comment) must not end the comment early; the page carries the licence.
    @Test func leafletIsInlinedWhole() {
        let page = DeepZoomViewer.page(name: "w", folder: false, archive: true)
        for (text, closing) in [(LeafletAssets.javascript, "</script"), (LeafletAssets.css, "</style"),
                                (DeepZoomViewerScript.main + ViewerArchiveReader.script, "</script")] {
            #expect(!text.lowercased().contains(closing) && !text.contains("<!--"))
        }
        #expect(!LeafletAssets.license.contains("*/"))
        #expect(page.contains("/*! Leaflet \(LeafletAssets.version)") && page.contains(LeafletAssets.license))
        #expect(page.ranges(of: "</script>").count == 2, "Leaflet's script and the viewer's, nothing else")
    }
}

extension RenderTests {
    /// One pass writes both; every level matches a plain 2 x 2 downscale of the decoded JPEG.
    @Test(arguments: [(tileSize: 64, overlap: 2), (tileSize: 254, overlap: 1), (tileSize: 50, overlap: 0)])
    func pyramidLevelsMatchADownscaleOfTheJPEG(tileSize: Int, overlap: Int) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var zoom = DeepZoomSettings()
        zoom.tileSize = tileSize
        zoom.overlap = overlap
        zoom.quality = 95
        var settings = RenderSettings()
        settings.quality = 95
        settings.temporaryDirectory = scratch.path
        settings.stripeHeight = 21  // odd: levels keep a row between stripes
        // 7 x 5 cells of 45 x 37 px: 315 x 185, odd in both directions.
        let summary = try renderPyramid(landscapes, jpeg: scratch.file("wall.jpg"), deepZoom: scratch.file("wall.dzi"),
                                        columns: 7, rows: 5, cellWidth: 45, cellHeight: 37, zoom: zoom, settings: settings)
        let geometry = DeepZoomGeometry(width: 315, height: 185, tileSize: tileSize, overlap: overlap)
        #expect(summary.deepZoomTiles == geometry.tileCount)
        var reference = try JPEGFile.read(scratch.file("wall.jpg"))
        for level in stride(from: geometry.maxLevel, through: 0, by: -1) {
            let assembled = try readPyramidLevel(files: scratch.file("wall_files"), level: level, width: reference.width,
                                              height: reference.height, tileSize: tileSize, overlap: overlap)
            let difference = meanAbsoluteDifference(assembled, reference)
            // Both sides went through JPEG (the reference once, the tiles once more from the
            // canvas): at Q95 that differs by a few levels, most where the downscaled photos are
            // busiest. The same comparison one pixel out of line is far worse, so a misplaced
            // tile, a wrong level or a skewed average cannot hide under the tolerance.
            #expect(difference < 6, "level \(level): mean difference \(difference)")
            if reference.width >= 20 && reference.height >= 12 {
                let shifted = meanAbsoluteDifference(crop(assembled, x: 1, y: 0, width: reference.width - 1, height: reference.height),
                                                     crop(reference, x: 0, y: 0, width: reference.width - 1, height: reference.height))
                #expect(shifted > difference * 2, "level \(level): \(difference) in line, \(shifted) one pixel out")
            }
            reference = halved(reference)
        }
        guard let descriptor = readDescriptor(scratch.file("wall.dzi")) else {
            Issue.record("the descriptor does not parse")
            return
        }
        #expect(descriptor.namespace == "http://schemas.microsoft.com/deepzoom/2008")
        #expect(descriptor.elements["Image"]?["TileSize"] == String(tileSize))
        #expect(descriptor.elements["Image"]?["Overlap"] == String(overlap))
        #expect(descriptor.elements["Image"]?["Format"] == "jpg")
        #expect(descriptor.elements["Size"]?["Width"] == "315" && descriptor.elements["Size"]?["Height"] == "185")
        #expect(scratch.contents() == ["wall.dzi", "wall.html", "wall.jpg", "wall_files"])
        let levels = (try listDirectory(scratch.file("wall_files"))).filter { $0 != "viewer" && $0 != ".tessera-pyramid" }.sorted { Int($0)! < Int($1)! }
        #expect(levels == (0...geometry.maxLevel).map(String.init))
    }

    /// The tiles do not depend on how the canvas was cut into stripes or how many workers ran.
    @Test func pyramidIsTheSameForAnyStripesAndWorkers() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var zoom = DeepZoomSettings()
        zoom.tileSize = 40
        var names: [String] = []
        for (index, (stripe, workers)) in [(7, 1), (16, 2), (64, 3)].enumerated() {
            var settings = RenderSettings()
            settings.temporaryDirectory = scratch.path
            settings.stripeHeight = stripe
            settings.workers = workers
            try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p\(index).dzi"), columns: 9, rows: 4,
                              cellWidth: 30, cellHeight: 33, zoom: zoom, settings: settings)
            names.append("p\(index)")
        }
        let geometry = DeepZoomGeometry(width: 270, height: 132, tileSize: 40, overlap: 1)
        for level in geometry.levels {
            for row in 0..<level.rows {
                for column in 0..<level.columns {
                    let tile = "/\(level.index)/\(column)_\(row).jpg"
                    let first = readBytes(scratch.file("p0_files") + tile)
                    #expect(!first.isEmpty)
                    #expect(readBytes(scratch.file("p1_files") + tile) == first, "\(tile) differs with 16-row stripes")
                    #expect(readBytes(scratch.file("p2_files") + tile) == first, "\(tile) differs with 64-row stripes")
                }
            }
        }
    }

    /// Written alongside a pyramid (its stripes then compressed in the pyramid's batches), the
    /// JPEG is byte for byte the one written alone, with either encoder.
    @Test func jpegIsTheSameWithOrWithoutAPyramid() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        for encoder in [EncoderMode.parallel, .serial] {
            var settings = RenderSettings()
            settings.temporaryDirectory = scratch.path
            settings.workers = 2
            settings.encoder = encoder
            settings.stripeHeight = 32
            try renderPyramid(landscapes, jpeg: scratch.file("alone.jpg"), deepZoom: nil, columns: 13, rows: 9,
                              cellWidth: 41, cellHeight: 37, settings: settings)
            try renderPyramid(landscapes, jpeg: scratch.file("with.jpg"), deepZoom: scratch.file("with.dzi"), columns: 13, rows: 9,
                              cellWidth: 41, cellHeight: 37, settings: settings)
            let alone = readBytes(scratch.file("alone.jpg"))
            #expect(alone.count > 1000)
            #expect(readBytes(scratch.file("with.jpg")) == alone, "\(encoder) encoder")
        }
    }

    /// Without a JPEG the canvas may pass JPEG's 65,500 px limit; with one it may not.
    @Test func pyramidAloneMayExceedTheJPEGLimit() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        // (A pyramid writer 66,000 px wide and the process's 16 MiB need 68 MiB: more than 64.)
        settings.maxMemoryBytes = 80 << 20
        let layout = GridLayout.make(photoCount: 1, columns: 660, rows: 1, cellWidth: 100, cellHeight: 8, order: .name)
        #expect(throws: TesseraError.outputTooLarge(width: 66_000, height: 8, limit: jpegMaxDimension)) {
            try RenderPlan.make(layout: layout, settings: settings, writing: [.jpeg, .deepZoom(DeepZoomSettings())])
        }
        try renderPyramid([landscapes[0]], jpeg: nil, deepZoom: scratch.file("wide.dzi"), columns: 660, rows: 1,
                          cellWidth: 100, cellHeight: 8, settings: settings)
        let top = DeepZoomGeometry(width: 66_000, height: 8, tileSize: 254, overlap: 1)
        #expect(top.maxLevel == 17)
        let last = try JPEGFile.read(scratch.file("wide_files") + "/17/259_0.jpg")
        #expect(last.width == 66_000 - 259 * 254 + 1 && last.height == 8)
        #expect(readDescriptor(scratch.file("wide.dzi"))?.elements["Size"]?["Width"] == "66000")
    }

    /// A new pyramid replaces an old one whole: no tile of the old one survives beside it.
    @Test func newPyramidReplacesTheOldOneWhole() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 20, rows: 10,
                          cellWidth: 40, cellHeight: 40, settings: settings)
        #expect(access(scratch.file("p_files") + "/10/3_1.jpg", F_OK) == 0)  // 800 x 400: level 10, 4 x 2 tiles
        try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 4, rows: 4,
                          cellWidth: 40, cellHeight: 40, settings: settings)
        #expect(access(scratch.file("p_files") + "/10", F_OK) != 0)  // 160 x 160 has levels 0...8
        #expect(access(scratch.file("p_files") + "/8/0_0.jpg", F_OK) == 0)
        #expect(readDescriptor(scratch.file("p.dzi"))?.elements["Size"]?["Width"] == "160")
        #expect(scratch.contents() == ["p.dzi", "p.html", "p_files"])
    }

    /// NAME_files that tessera did not write (somebody's folder, a plain file) is refused before
    /// any work and left as it was; a pyramid it wrote carries its marker and is replaced.
    @Test func onlyOurOwnPyramidIsReplaced() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        mkdir(scratch.file("docs_files"), 0o755)
        writeBytes(Array("my notes".utf8), to: scratch.file("docs_files/notes.txt"))
        writeBytes(Array("a file".utf8), to: scratch.file("plain_files"))
        for (name, words) in [("docs", "not a pyramid tessera wrote"), ("plain", "is not a folder")] {
            do {
                try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file(name + ".dzi"), columns: 4, rows: 4,
                                  cellWidth: 40, cellHeight: 40, settings: settings)
                Issue.record("\(name)_files was replaced")
            } catch let error as TesseraError {
                guard case .invalidSettings(let message) = error else { Issue.record("\(error)"); continue }
                #expect(message.contains(words), "\(message)")
            }
        }
        #expect(readBytes(scratch.file("docs_files/notes.txt")) == Array("my notes".utf8))
        #expect(readBytes(scratch.file("plain_files")) == Array("a file".utf8))
        #expect(scratch.contents() == ["docs_files", "plain_files"])
        try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 4, rows: 4,
                          cellWidth: 40, cellHeight: 40, settings: settings)
        #expect(access(scratch.file("p_files/.tessera-pyramid"), F_OK) == 0)
        try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 2, rows: 2,
                          cellWidth: 40, cellHeight: 40, settings: settings)
        #expect(readDescriptor(scratch.file("p.dzi"))?.elements["Size"]?["Width"] == "80")
        // What someone put in a folder tessera wrote is named and kept, with the old pyramid: a
        // file beside the levels, one in a level, a symbolic link, a folder in the viewer's.
        let tileFolder = scratch.file("p_files")
        let levels = try listDirectory(tileFolder).filter { $0.allSatisfy(\.isNumber) }.sorted { Int($0)! < Int($1)! }
        let aLevel = try #require(levels.last)
        let additions: [(make: () -> Void, name: String)] = [
            ({ writeBytes(Array("my notes".utf8), to: tileFolder + "/notes.txt") }, "notes.txt"),
            ({ writeBytes(Array("mine".utf8), to: tileFolder + "/\(aLevel)/0_0.png") }, "\(aLevel)/0_0.png"),
            ({ _ = symlink("/etc/hostname", tileFolder + "/\(aLevel)/9_9.jpg") }, "\(aLevel)/9_9.jpg"),
            ({ mkdir(tileFolder + "/viewer", 0o755); mkdir(tileFolder + "/viewer/photos", 0o755) }, "viewer/photos"),
        ]
        for addition in additions {
            addition.make()
            do {
                try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 3, rows: 3,
                                  cellWidth: 40, cellHeight: 40, settings: settings)
                Issue.record("p_files was replaced, with \(addition.name) in it")
            } catch let error as TesseraError {
                guard case .invalidSettings(let message) = error else { Issue.record("\(error)"); continue }
                #expect(message.contains("holds \(addition.name), which tessera did not write there"), "\(message)")
            }
            var info = stat()
            #expect(lstat(tileFolder + "/" + addition.name, &info) == 0, "\(addition.name) was removed")
            #expect(readDescriptor(scratch.file("p.dzi"))?.elements["Size"]?["Width"] == "80")
            _ = system("rm -rf '\(tileFolder)/\(addition.name)'")
        }
        // A file named like a Mac's AppleDouble file that is not one is a stranger too.
        writeBytes(Array("my notes".utf8), to: tileFolder + "/\(aLevel)/._notes")
        #expect(throws: TesseraError.self) {
            try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 3, rows: 3, cellWidth: 40, cellHeight: 40, settings: settings)
        }
        #expect(readBytes(tileFolder + "/\(aLevel)/._notes") == Array("my notes".utf8))
        unlink(tileFolder + "/\(aLevel)/._notes")
        // What a file manager leaves in a folder it showed goes with the old pyramid.
        let appleDouble: [UInt8] = [0x00, 0x05, 0x16, 0x07, 0x00, 0x02, 0x00, 0x00] + [UInt8](repeating: 0, count: 4088)
        writeBytes(Array("Bud1".utf8), to: tileFolder + "/.DS_Store")
        writeBytes(appleDouble, to: tileFolder + "/\(aLevel)/._0_0.jpg")
        writeBytes(Array("[Desktop Entry]".utf8), to: tileFolder + "/\(aLevel)/.directory")
        writeBytes([0xd0, 0xcf, 0x11, 0xe0], to: tileFolder + "/\(aLevel)/Thumbs.db")
        try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 3, rows: 3,
                          cellWidth: 40, cellHeight: 40, settings: settings)
        #expect(readDescriptor(scratch.file("p.dzi"))?.elements["Size"]?["Width"] == "120")
        #expect(access(tileFolder + "/.DS_Store", F_OK) != 0)
        // An empty folder made ready for it is taken (it holds nothing to lose); so for IIIF.
        mkdir(scratch.file("ready_files"), 0o755)
        try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("ready.dzi"), columns: 2, rows: 2,
                          cellWidth: 40, cellHeight: 40, settings: settings)
        #expect(access(scratch.file("ready_files/.tessera-pyramid"), F_OK) == 0)
        mkdir(scratch.file("iiif"), 0o755)
        try IIIFTileFolder.checkReplaceable(scratch.file("iiif"))
        writeBytes(Array("x".utf8), to: scratch.file("iiif/x"))
        #expect(throws: TesseraError.self) { try IIIFTileFolder.checkReplaceable(scratch.file("iiif")) }
    }

    /// A folder the user put at NAME_files while the render ran (after its first check) is
    /// still refused at the commit, and kept as it is.
    @Test func aFolderThatAppearsDuringTheRenderIsNotReplaced() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        settings.stripeHeight = 16
        var placed = false
        #expect {
            try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 4, rows: 4,
                              cellWidth: 40, cellHeight: 40, settings: settings) { event in
                guard case .progress = event, !placed else { return }
                placed = true
                mkdir(scratch.file("p_files"), 0o755)
                writeBytes(Array("my notes".utf8), to: scratch.file("p_files/notes.txt"))
            }
        } throws: { error in
            guard case TesseraError.invalidSettings(let message) = error else { return false }
            return message.contains("not a pyramid tessera wrote")
        }
        #expect(placed)
        #expect(readBytes(scratch.file("p_files/notes.txt")) == Array("my notes".utf8))
        #expect(scratch.contents() == ["p_files"])
    }

    /// A commit that fails after NAME_files was swapped in (here the descriptor's swap) puts
    /// the old tiles and page back: the old pyramid stays whole, nothing new is left.
    @Test func aFailedCommitLeavesTheOldPyramidWhole() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 20, rows: 10,
                          cellWidth: 40, cellHeight: 40, settings: settings)
        let oldDescriptor = readBytes(scratch.file("p.dzi")), oldPage = readBytes(scratch.file("p.html"))
        let oldTile = readBytes(scratch.file("p_files/10/3_1.jpg"))
        // (The descriptor is swapped with the old one, as the folder and the page are.)
        SyscallFaults.inject("renameat2", errno: EIO, pathPrefix: scratch.file("p.dzi"))
        defer { SyscallFaults.reset() }
        #expect(throws: TesseraError.system(operation: "renameat2", errno: EIO, path: scratch.file("p.dzi"))) {
            try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 4, rows: 4,
                              cellWidth: 40, cellHeight: 40, settings: settings)
        }
        #expect(SyscallFaults.fired("renameat2", pathPrefix: scratch.file("p.dzi")) == 1)
        #expect(readBytes(scratch.file("p.dzi")) == oldDescriptor)
        #expect(readBytes(scratch.file("p.html")) == oldPage)
        #expect(readBytes(scratch.file("p_files/10/3_1.jpg")) == oldTile)
        #expect(scratch.contents() == ["p.dzi", "p.html", "p_files"])
    }

    /// A failure mid-pyramid (here the disk refusing a tile) or a cancellation leaves the old
    /// pyramid as it was and nothing else behind.
    @Test func failedOrCancelledPyramidLeavesTheOldOneAndNoTemporaries() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        try renderPyramid([landscapes[0]], jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 2, rows: 2,
                          cellWidth: 40, cellHeight: 40, settings: settings)
        let before = readBytes(scratch.file("p.dzi"))
        let tileBefore = readBytes(scratch.file("p_files") + "/6/0_0.jpg")
        // The staging folder is ".p.dzi.tessera-<pid>-...": its 30th file finds the disk full.
        SyscallFaults.inject("write", errno: ENOSPC, pathPrefix: scratch.file(".p.dzi.tessera-"), skip: 30)
        #expect {
            try renderPyramid(landscapes, jpeg: scratch.file("p.jpg"), deepZoom: scratch.file("p.dzi"), columns: 30, rows: 20,
                              cellWidth: 40, cellHeight: 40, settings: settings)
        } throws: { error in
            guard case TesseraError.system("write", ENOSPC, let path) = error else { return false }
            return path.hasPrefix(scratch.file(".p.dzi.tessera-"))
        }
        #expect(SyscallFaults.fired("write", pathPrefix: scratch.file(".p.dzi.tessera-")) == 1)
        SyscallFaults.reset()
        #expect(readBytes(scratch.file("p.dzi")) == before)
        #expect(readBytes(scratch.file("p_files") + "/6/0_0.jpg") == tileBefore)
        #expect(scratch.contents() == ["p.dzi", "p.html", "p_files"])

        let cancellation = RenderCancellation()
        #expect(throws: TesseraError.cancelled) {
            try renderPyramid(landscapes, jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 30, rows: 20,
                              cellWidth: 40, cellHeight: 40, settings: settings, cancellation: cancellation) { event in
                if case .progress = event { cancellation.cancel() }
            }
        }
        #expect(readBytes(scratch.file("p.dzi")) == before)
        #expect(scratch.contents() == ["p.dzi", "p.html", "p_files"])
    }

    /// A staging folder left by a killed process (its pid gone) is removed by the next render.
    @Test func stagingFolderOfADeadProcessIsRemoved() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let pid = deadProcessID()  // a pid that just ended
        let stale = scratch.file(".p.dzi.tessera-\(pid)-abc")
        mkdir(stale, 0o755)
        writeBytes([], to: stale + "/.lock")  // its lock file, which nobody holds now
        mkdir(stale + "/p_files", 0o755)
        mkdir(stale + "/p_files/3", 0o755)
        writeBytes([1, 2, 3], to: stale + "/p_files/3/0_0.jpg")
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        var removed: [String] = []
        try renderPyramid([landscapes[0]], jpeg: nil, deepZoom: scratch.file("p.dzi"), columns: 2, rows: 2,
                          cellWidth: 16, cellHeight: 16, settings: settings) { event in
            if case .staleTemporaryRemoved(let path) = event { removed.append(path) }
        }
        #expect(removed == [stale])
        #expect(scratch.contents() == ["p.dzi", "p.html", "p_files"])
    }

    /// The pre-flight counts the pyramid's bytes and files where it goes.
    @Test func preflightCountsThePyramidsFilesAgainstFreeInodes() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let layout = GridLayout.make(photoCount: 1, columns: 200, rows: 267, cellWidth: 150, cellHeight: 150, order: .name)
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        let plan = try RenderPlan.make(layout: layout, settings: settings, writing: [.deepZoom(DeepZoomSettings())])
        #expect(plan.deepZoom?.tileCount == 25_159)  // what libvips writes for 30,000 x 40,050 at 254/1
        #expect(plan.deepZoomInodes > 25_159)
        #expect(plan.deepZoomDiskBytes > 300_000_000)  // 1.6 GP of tiles at 0.6 B/px, at least
        let path = scratch.file("wall.dzi")
        #expect(throws: TesseraError.insufficientInodes(directory: scratch.path, neededFiles: plan.deepZoomInodes + 2, freeFiles: 20_000)) {
            try DiskPreflight.check(plan: plan, outputPath: nil, deepZoomPath: path, freeSpace: { _ in 1 << 40 }, freeFiles: { _ in 20_000 })
        }
        #expect {
            try DiskPreflight.check(plan: plan, outputPath: nil, deepZoomPath: path, freeSpace: { _ in 1 << 28 }, freeFiles: { _ in 1 << 30 })
        } throws: { error in
            guard case TesseraError.insufficientDiskSpace(scratch.path, let needed, 1 << 28) = error else { return false }
            return needed > 300_000_000
        }
        try DiskPreflight.check(plan: plan, outputPath: nil, deepZoomPath: path, freeSpace: { _ in 1 << 40 }, freeFiles: { _ in 1 << 30 })
    }
}

extension RenderTests {
    /// Every level height against every overlap: a level whose height is at most `overlap`
    /// past a tile boundary has a last tile made only of rows shared with the tile above (the
    /// render used to end with "level N received R of R rows", and lose the JPEG too). Every
    /// tile of every level is checked against the Deep Zoom rules (expectedSpan, written from the
    /// rules, not from DeepZoomGeometry) and against the picture's colour.
    @Test func everyHeightAndOverlapMakesEveryTile() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let photo = scratch.file("solid.jpg")
        try writeSolidPhoto(photo, width: 64, height: 64, colour: RGB(red: 200, green: 40, blue: 90))
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        for overlap in [0, 1, 3, 8] {
            var zoom = DeepZoomSettings()
            zoom.tileSize = 16
            zoom.overlap = overlap
            for height in 1...72 {
                let name = "h\(height)-o\(overlap)"
                // Only some with the JPEG too: it must survive whatever the pyramid does.
                let jpeg = height % 8 == 1 ? scratch.file(name + ".jpg") : nil
                do {
                    try renderPyramid([photo], jpeg: jpeg, deepZoom: scratch.file(name + ".dzi"), columns: 1, rows: 1,
                                      cellWidth: 21, cellHeight: height, zoom: zoom, settings: settings)
                } catch {
                    Issue.record("height \(height), overlap \(overlap): \(error)")
                    continue
                }
                if let jpeg { #expect(access(jpeg, F_OK) == 0) }
                var levelHeight = height, levelWidth = 21, level = DeepZoomGeometry(width: 21, height: height, tileSize: 16, overlap: overlap).maxLevel
                while level >= 0 {
                    let image = try readPyramidLevel(files: scratch.file(name + "_files"), level: level, width: levelWidth,
                                                     height: levelHeight, tileSize: 16, overlap: overlap)
                    let solid = RGBImage(width: levelWidth, height: levelHeight, fill: RGB(red: 200, green: 40, blue: 90))
                    #expect(meanAbsoluteDifference(image, solid) < 4, "height \(height), overlap \(overlap), level \(level)")
                    levelHeight = (levelHeight + 1) / 2
                    levelWidth = (levelWidth + 1) / 2
                    level -= 1
                }
                removeTree(scratch.file(name + "_files"))
            }
        }
    }
}

extension RenderTests {
    /// A render in another PID namespace (a container sharing the folder) has a pid that looks
    /// dead here. Its staging folder and its hidden output are locked while it runs, and are left
    /// alone; once the lock is gone they are removed.
    @Test func temporariesOfALiveRenderElsewhereAreLeftAlone() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let pid = deadProcessID()  // how the other namespace's pid looks from here
        let staging = scratch.file(".p.dzi.tessera-\(pid)-abc")
        mkdir(staging, 0o755)
        writeBytes([], to: staging + "/.lock")
        let hidden = scratch.file(".out.jpg.tessera-\(pid)-42.tmp")
        writeBytes([1, 2, 3], to: hidden)
        // The other render holds both locks (flock: an open file of its own).
        let stagingLock = open(staging + "/.lock", O_RDONLY), hiddenLock = open(hidden, O_RDONLY)
        #expect(flock(stagingLock, LOCK_EX) == 0 && flock(hiddenLock, LOCK_EX) == 0)
        #expect(StaleTemporaries.remove(in: scratch.path).isEmpty)
        #expect(scratch.contents() == [hidden, staging].map { String($0.split(separator: "/").last!) }.sorted())
        // It ends (or is killed): the kernel drops its locks, and the next render cleans up.
        close(stagingLock)
        close(hiddenLock)
        #expect(StaleTemporaries.remove(in: scratch.path) == [hidden, staging].sorted())
        #expect(scratch.contents().isEmpty)
    }
}
