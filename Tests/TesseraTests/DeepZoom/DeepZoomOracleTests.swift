// DeepZoomOracleTests.swift — the pyramid against libvips's dzsave, tile by tile, and against a
// box filter written here.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct DeepZoomOracleTests {
    static let photos = ["Landscape_1", "Portrait_3", "Landscape_6", "Portrait_8", "Landscape_0", "Portrait_5"]
        .map { "\(fixturesDirectory)/orientation/\($0).jpg" }

    /// Deep Zoom against libvips: the same tile files with the same sizes, and every tile's
    /// pixels (not a level's mean) within JPEG tolerance of vips dzsave's tile made from the same
    /// canvas. Small, detailed cells, so a tile shifted by a pixel or misplaced shows.
    @Test(arguments: [(254, 1), (127, 2), (100, 3), (64, 0)])
    func deepZoomMatchesVipsDzsaveTileByTile(tileSize: Int, overlap: Int) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.quality = 100
        settings.subsampling = .s444
        settings.temporaryDirectory = scratch.path
        var zoom = DeepZoomSettings()
        zoom.tileSize = tileSize
        zoom.overlap = overlap
        zoom.viewer = false
        let canvas = scratch.file("canvas.jpg")
        mkdir(scratch.file("ours"), 0o755)
        // 19 x 13 cells of 29 x 23 px: 551 x 299 px, odd both ways.
        try renderPyramid(Self.photos, jpeg: canvas, deepZoom: scratch.file("ours/p.dzi"), columns: 19, rows: 13,
                          cellWidth: 29, cellHeight: 23, zoom: zoom, settings: settings)
        // The same canvas (the Q100 4:4:4 JPEG of it) cut by libvips.
        #expect(system("vips dzsave '\(canvas)' '\(scratch.file("vips"))' --tile-size \(tileSize) --overlap \(overlap) "
                       + "--suffix '.jpg[Q=90]' >/dev/null 2>&1") == 0)
        func tiles(_ folder: String) -> [String] {
            var found: [String] = []
            for level in listNames(folder) where Int(level) != nil {
                for tile in listNames(folder + "/" + level) { found.append(level + "/" + tile) }
            }
            return found.sorted()
        }
        let ours = tiles(scratch.file("ours/p_files")), theirs = tiles(scratch.file("vips_files"))
        #expect(!ours.isEmpty && ours == theirs, "tile files differ from vips: \(Set(ours).symmetricDifference(theirs).sorted().prefix(8))")
        var worst = (tile: "", mean: 0.0)
        for name in ours where theirs.contains(name) {
            let a = try JPEGFile.read(scratch.file("ours/p_files/" + name)), b = try JPEGFile.read(scratch.file("vips_files/" + name))
            #expect(a.width == b.width && a.height == b.height, "\(name): \(a.width)x\(a.height) against vips's \(b.width)x\(b.height)")
            guard a.width == b.width && a.height == b.height else { continue }
            let d = differences(a, b)
            if d.mean > worst.mean { worst = (name, d.mean) }
            #expect(d.mean < 3, "\(name): mean difference \(d.mean) from vips's tile")
        }
        #expect(worst.mean > 0, "no tile compared")
        let descriptor = String(decoding: readBytes(scratch.file("ours/p.dzi")), as: UTF8.self)
        #expect(descriptor.contains("TileSize=\"\(tileSize)\"") && descriptor.contains("Overlap=\"\(overlap)\"")
                && descriptor.contains("Width=\"551\"") && descriptor.contains("Height=\"299\""))
    }

    /// The pyramid's 2 x 2 averaging, exactly (no JPEG in between): random rows of odd and even
    /// widths against the box filter above.
    @Test(arguments: [1, 2, 7, 64, 255])
    func averagingIsTheRoundedBoxMean(width: Int) {
        var generator = SystemRandomNumberGenerator()
        var image = RGBImage(width: width, height: 2)
        for i in image.pixels.indices { image.pixels[i] = UInt8.random(in: 0...255, using: &generator) }
        var out = [UInt8](repeating: 0, count: (width + 1) / 2 * 3)
        image.pixels.withUnsafeBufferPointer { rows in
            averageRows(rows.baseAddress!, rows.baseAddress! + width * 3, into: &out, inputWidth: width)
        }
        #expect(out == halved(image).pixels)
    }

    /// Every level of the pyramid, tile by tile, against the full-size canvas halved again and
    /// again by the plain box filter above (not the renderer's averaging code).
    @Test func pyramidLevelsAreTheCanvasHalved() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.quality = 100
        settings.subsampling = .s444
        settings.temporaryDirectory = scratch.path
        var zoom = DeepZoomSettings()
        zoom.tileSize = 64
        zoom.overlap = 2
        zoom.quality = 95
        zoom.viewer = false
        let canvasPath = scratch.file("canvas.jpg")
        try renderPyramid(Self.photos, jpeg: canvasPath, deepZoom: scratch.file("p.dzi"), columns: 21, rows: 11,
                          cellWidth: 19, cellHeight: 27, zoom: zoom, settings: settings)
        var level = try JPEGFile.read(canvasPath)  // 399 x 297
        var index = 9  // ceil(log2(399))
        while true {
            let columns = (level.width + 63) / 64, rows = (level.height + 63) / 64
            for row in 0..<rows {
                for column in 0..<columns {
                    let x = expectedSpan(column, tileSize: 64, overlap: 2, extent: level.width)
                    let y = expectedSpan(row, tileSize: 64, overlap: 2, extent: level.height)
                    let tile = try JPEGFile.read(scratch.file("p_files/\(index)/\(column)_\(row).jpg"))
                    #expect(tile.width == x.count && tile.height == y.count, "level \(index) tile \(column)_\(row)")
                    guard tile.width == x.count && tile.height == y.count else { continue }
                    let d = differences(tile, crop(level, x: x.start, y: y.start, width: x.count, height: y.count))
                    #expect(d.mean < 4, "level \(index) tile \(column)_\(row): mean difference \(d.mean)")
                }
            }
            #expect(access(scratch.file("p_files/\(index)/\(columns)_0.jpg"), F_OK) != 0)
            if index == 0 { break }
            level = halved(level)
            index -= 1
        }
        #expect(level.width == 1 && level.height == 1)
    }
}
