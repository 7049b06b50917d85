// GridSizeTests.swift — a grid with no size flags: the columns that show each photo once in
// about a square picture, the default cell and its shrinking to a JPEG's side limit (the pure
// arithmetic), and `tessera grid DIR -o OUT.jpg` through the binary.
import Foundation
import Glibc
import Testing
import Tessera
import TesseraTestSupport
@testable import TesseraCLI

@Suite struct GridSizeTests {
    /// Each photo once: as many cells as photos when a picture between 3:4 and 4:3 allows it,
    /// otherwise the fewest empty cells; a few photos take the nearest a square.
    @Test func theDefaultColumnsShowEachPhotoOnceInAboutASquare() {
        for count in [1, 2, 3, 5, 7, 18, 100, 300, 1_000, 4_321, 100_000] {
            let shape = GridSize.resolve(columns: nil, rows: nil, tile: nil, photoCount: count, sideLimit: jpegMaxDimension)
            let cells = shape.columns * shape.rows
            #expect(cells >= count && cells - count < shape.columns, "\(count): \(shape)")
            let aspect = Double(shape.columns * shape.cellWidth) / Double(shape.rows * shape.cellHeight)
            if count >= 10 { #expect(aspect >= 0.75 && aspect <= 4.0 / 3.0, "\(count): \(shape)") }
            #expect(shape.reason?.contains("each of the \(formatCount(count)) photo(s) once") == true, "\(shape)")
        }
        // 300 photos fill 20 x 15 exactly (landscape when portrait is as near a square); 100 fill 10 x 10.
        let three = GridSize.resolve(columns: nil, rows: nil, tile: nil, photoCount: 300, sideLimit: jpegMaxDimension)
        #expect((three.columns, three.rows, three.cellWidth) == (20, 15, GridSize.defaultTileSize))
        let hundred = GridSize.resolve(columns: nil, rows: nil, tile: nil, photoCount: 100, sideLimit: jpegMaxDimension)
        #expect((hundred.columns, hundred.rows) == (10, 10))
        // Wide cells: fewer columns for the same square picture.
        let wide = GridSize.resolve(columns: nil, rows: nil, tile: (300, 100), photoCount: 300, sideLimit: jpegMaxDimension)
        let wideAspect = Double(wide.columns * 300) / Double(wide.rows * 100)
        #expect(wide.columns < wide.rows && wideAspect >= 0.75 && wideAspect <= 4.0 / 3.0, "\(wide)")
    }

    /// The default cell shrinks to the largest that keeps a JPEG's sides inside its limit; a
    /// pyramid alone keeps it. A given tile is never changed (the canvas check refuses it).
    @Test func theDefaultCellFitsTheOutputsLimit() {
        let many = GridSize.resolve(columns: nil, rows: nil, tile: nil, photoCount: 100_000, sideLimit: jpegMaxDimension)
        #expect(many.cellWidth < GridSize.defaultTileSize && many.cellWidth == many.cellHeight)
        #expect(max(many.columns, many.rows) * many.cellWidth <= jpegMaxDimension)
        #expect(max(many.columns, many.rows) * (many.cellWidth + 1) > jpegMaxDimension, "not the largest that fits: \(many)")
        #expect(many.reason?.contains("the largest that keep the picture inside 65,500 px a side") == true, "\(many)")
        let pyramid = GridSize.resolve(columns: nil, rows: nil, tile: nil, photoCount: 100_000, sideLimit: RenderPlan.maxDeepZoomSide)
        #expect(pyramid.cellWidth == GridSize.defaultTileSize)
        let given = GridSize.resolve(columns: nil, rows: nil, tile: (300, 300), photoCount: 100_000, sideLimit: jpegMaxDimension)
        #expect(given.cellWidth == 300 && given.reason?.contains("--columns C chooses otherwise") == true, "\(given)")
        let columns = GridSize.resolve(columns: 400, rows: nil, tile: nil, photoCount: 1_000, sideLimit: jpegMaxDimension)
        #expect((columns.columns, columns.rows, columns.cellWidth) == (400, 3, 163), "\(columns)")
        #expect(GridSize.resolve(columns: 4, rows: 4, tile: (9, 9), photoCount: 3, sideLimit: jpegMaxDimension).reason == nil)
    }

    /// `tessera grid DIR -o OUT.jpg` with nothing else: the size line, a picture of the shape it
    /// names, and each photo in it once (the manifest).
    @Test func aGridWithNoSizeFlagsDrawsEachPhotoOnce() throws {
        let directory = "\(testRoot)/tessera-grid-size-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try #require(mkdir(directory, 0o755) == 0)
        defer { _ = system("rm -rf '\(directory)'") }
        let run = runTesseraSplit(["grid", fixtures, "-o", directory + "/g.jpg", "--manifest", directory + "/g.csv", "--no-progress"])
        #expect(run.status == 0, "\(run.standardError)")
        let line = try #require(run.standardOutput.split(separator: "\n").first { $0.hasPrefix("size        ") }, "\(run.standardOutput)")
        // 18 photos: 5 x 4 cells of 200 px, two of them repeats.
        #expect(line.hasPrefix("size        5 x 4 cells (20) of 200 px: 1,000 x 800 px; from each of the 18 photo(s) once"), "\(line)")
        let size = try #require(jpegSize(readFile(directory + "/g.jpg")))
        #expect(size == (1000, 800))
        let rows = String(decoding: readFile(directory + "/g.csv"), as: UTF8.self).split(separator: "\n").dropFirst()
        let photos = rows.map { $0.split(separator: ",").dropFirst(2).joined(separator: ",") }
        #expect(rows.count == 20 && Set(photos).count == 18, "\(rows)")
    }

    /// --order date says how many photos carry no date and where they went (grid and collage);
    /// the other orders and a library dated throughout say nothing.
    @Test func undatedPhotosAreCountedInADateOrder() throws {
        let directory = "\(testRoot)/tessera-undated-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try #require(mkdir(directory, 0o755) == 0)
        defer { _ = system("rm -rf '\(directory)'") }
        let photo = readFile(fixtures + "/Landscape_1.jpg"), photos = directory + "/photos"
        try #require(mkdir(photos, 0o755) == 0)
        writeFile(jpegWithDates(photo, [0x9003: "2024:05:06 07:08:09"]), to: photos + "/a.jpg")
        writeFile(jpegWithDates(photo, [0x9003: "2023:05:06 07:08:09"]), to: photos + "/b.jpg")
        writeFile(photo, to: photos + "/c.jpg")
        func lines(_ arguments: [String]) -> [Substring] {
            let run = runTesseraSplit(arguments + ["--cache-dir", directory + "/cache", "--no-progress"])
            #expect(run.status == 0, "\(run.standardError)")
            return run.standardOutput.split(separator: "\n")
        }
        let grid = lines(["grid", photos, "-o", directory + "/g.jpg", "--order", "date", "--manifest", directory + "/g.csv"])
        #expect(grid.contains("note        1 of the 3 photos have no date taken (no EXIF date): they follow the dated ones, by path"), "\(grid)")
        let order = String(decoding: readFile(directory + "/g.csv"), as: UTF8.self).split(separator: "\n").dropFirst().map { $0.suffix(5) }
        // 2 x 2 cells: the last repeats the first.
        #expect(order == ["b.jpg", "a.jpg", "c.jpg", "b.jpg"])
        let collage = lines(["collage", photos, "-o", directory + "/c.jpg", "--width", "300", "--order", "date"])
        #expect(collage.contains { $0.hasPrefix("note        1 of the 3 photos have no date taken") }, "\(collage)")
        #expect(!lines(["grid", photos, "-o", directory + "/n.jpg"]).contains { $0.contains("no date taken") })
        unlink(photos + "/c.jpg")
        #expect(!lines(["grid", photos, "-o", directory + "/d.jpg", "--order", "date"]).contains { $0.contains("no date taken") })
    }
}
