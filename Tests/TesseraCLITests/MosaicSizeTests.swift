// MosaicSizeTests.swift — a mosaic's size in the terms a person thinks in (issue 29): the rules
// of MosaicSize (the default cell count, --size in each unit at a density, --cells, --size with
// --tile-size, --columns or --grid), the contradictions found together, the parse's messages;
// and through the binary: no size flag renders a picture of the target's upright shape, --size
// and --cells make what they say (the density in the JPEG), every problem comes in one error,
// and the messages say what to do.
import CTesseraTestShims
import Glibc
import Testing
@testable import TesseraCLI

/// The canvas a shape makes, with the rows it was given.
private func canvas(_ shape: MosaicShape) -> (width: Int, height: Int) {
    (shape.columns * shape.cellWidth, (shape.rows ?? 0) * shape.cellHeight)
}

@Suite struct MosaicSizeRuleTests {
    @Test func theDefaultCountIs25CellsAPhotoFrom2500To20000() {
        #expect(MosaicSize.defaultCellCount(photoCount: 0) == 2_500)
        #expect(MosaicSize.defaultCellCount(photoCount: 18) == 2_500)
        #expect(MosaicSize.defaultCellCount(photoCount: 100) == 2_500)
        #expect(MosaicSize.defaultCellCount(photoCount: 114) == 2_850)
        #expect(MosaicSize.defaultCellCount(photoCount: 800) == 20_000)
        #expect(MosaicSize.defaultCellCount(photoCount: Int.max) == 20_000)
    }

    @Test func printSizesParse() throws {
        #expect(PrintSize.parse("60x90cm") == PrintSize(width: 60, height: 90, unit: .centimetres))
        #expect(PrintSize.parse("24X36IN") == PrintSize(width: 24, height: 36, unit: .inches))
        #expect(PrintSize.parse("8.5x11in") == PrintSize(width: 8.5, height: 11, unit: .inches))
        #expect(PrintSize.parse("600x900mm") == PrintSize(width: 600, height: 900, unit: .millimetres))
        #expect(PrintSize.parse("8000x12000") == PrintSize(width: 8000, height: 12000, unit: .pixels))
        #expect(PrintSize.parse("8000x12000px") == PrintSize(width: 8000, height: 12000, unit: .pixels))
        for bad in ["0x5cm", "-1x5cm", "8000.5x100", "60x90ft", "60", "x", "cm", "1e3x5cm", "60x90x2cm", "nanxinfcm", "99999999x1", ""] {
            #expect(PrintSize.parse(bad) == nil, "\(bad)")
        }
        #expect(try #require(PrintSize.parse("8.5x11in")).spelled == "8.5x11in")
        // At a density: 60 cm is 23.62 in, 7,087 px at 300 dpi.
        #expect(try #require(PrintSize.parse("60x90cm")).pixels(dotsPerInch: 300) == (7087, 10630))
        #expect(try #require(PrintSize.parse("600x900mm")).pixels(dotsPerInch: 300) == (7087, 10630))
        #expect(try #require(PrintSize.parse("24x36in")).pixels(dotsPerInch: 300) == (7200, 10800))
        #expect(try #require(PrintSize.parse("24x36in")).pixels(dotsPerInch: 150) == (3600, 5400))
        #expect(try #require(PrintSize.parse("8000x12000")).pixels(dotsPerInch: 72) == (8000, 12000))
    }

    /// No size flag: about the default count in the target's shape, cells of 100 px.
    @Test(arguments: [2.0 / 3.0, 1.0, 16.0 / 9.0, 0.2, 5.0])
    func defaultsFollowTheTargetsShape(aspect: Double) throws {
        for photos in [12, 114, 5_000] {
            let shape = MosaicSize.resolve(MosaicSizeRequest(), targetAspect: aspect, photoCount: photos)
            let rows = try #require(shape.rows)
            #expect(shape.cellWidth == 100 && shape.cellHeight == 100)
            // The shape within one cell of the target's: the columns a row of this aspect has.
            #expect(abs(Double(rows) * aspect - Double(shape.columns)) <= 1, "\(shape) for \(aspect)")
            let wanted = MosaicSize.defaultCellCount(photoCount: photos)
            #expect(abs(shape.columns * rows - wanted) <= shape.columns + rows, "\(shape): \(shape.columns * rows) cells for \(wanted)")
            #expect(shape.reason?.contains("\(formatCount(photos)) photo(s) found") == true, "\(shape)")
        }
    }

    @Test(arguments: [100, 1_000, 2_500, 5_000, 20_000, 123_457])
    func cellsAsksForAboutThatMany(count: Int) throws {
        for aspect in [2.0 / 3.0, 1.0, 1.5, 0.25] {
            let shape = MosaicSize.resolve(MosaicSizeRequest(cells: count), targetAspect: aspect, photoCount: 12)
            let rows = try #require(shape.rows)
            let made = shape.columns * rows
            #expect(Double(abs(made - count)) <= max(Double(count) * 0.05, Double(shape.columns)), "\(count) at \(aspect): \(shape)")
            #expect(abs(Double(rows) * aspect - Double(shape.columns)) <= 1)
        }
        // With a tile that is not square, the picture still has the target's shape.
        let wide = MosaicSize.resolve(MosaicSizeRequest(cells: count, cellWidth: 40, cellHeight: 20), targetAspect: 1, photoCount: 12)
        let rows = try #require(wide.rows)
        #expect(abs(Double(wide.columns * 40) - Double(rows * 20)) <= 40, "\(wide)")
    }

    /// --size in each unit: the canvas is the nearest whole number of square cells of whole
    /// pixels, within one cell of the size asked, about the count asked.
    @Test(arguments: ["60x90cm", "600x900mm", "24x36in", "8000x12000", "10x15cm", "90x60cm", "1000x1000"])
    func sizeIsWithinOneCellOfWhatWasAsked(spelled: String) throws {
        let size = try #require(PrintSize.parse(spelled))
        for dpi in [nil, 150, 300] as [Int?] {
            let asked = size.pixels(dotsPerInch: dpi ?? 300)
            for (cells, photos) in [(nil, 12), (nil, 400), (nil, 100_000), (5_000, 12)] as [(Int?, Int)] {
                let request = MosaicSizeRequest(size: size, cells: cells, dotsPerInch: dpi)
                #expect(MosaicSize.problems(request).isEmpty)
                let shape = MosaicSize.resolve(request, targetAspect: 3, photoCount: photos)
                let made = canvas(shape)
                #expect(shape.cellWidth == shape.cellHeight, "\(spelled): \(shape)")
                #expect(abs(made.width - asked.width) <= shape.cellWidth && abs(made.height - asked.height) <= shape.cellHeight,
                        "\(spelled) at \(dpi ?? 0) dpi is \(asked), made \(made) of \(shape)")
                let wanted = cells ?? MosaicSize.defaultCellCount(photoCount: photos)
                let count = shape.columns * (shape.rows ?? 0)
                // About the count (cells of whole pixels, the default no smaller than 16 px).
                #expect(Double(abs(count - wanted)) <= Double(wanted) * 0.1 + Double(shape.columns + (shape.rows ?? 0)) || shape.cellWidth == 16,
                        "\(spelled): \(count) cells for \(wanted)")
            }
        }
        #expect(MosaicSizeRequest(size: size).effectiveDotsPerInch == (size.isPhysical ? 300 : nil))
    }

    @Test func sizeWithTheTileOrTheColumnsOrTheGrid() throws {
        let size = try #require(PrintSize.parse("60x90cm"))  // 7,087 x 10,630 px at 300 dpi
        let tiled = MosaicSize.resolve(MosaicSizeRequest(size: size, cellWidth: 177, cellHeight: 177), targetAspect: 1, photoCount: 12)
        #expect((tiled.columns, tiled.rows) == (40, 60) && tiled.cellWidth == 177)
        let columns = MosaicSize.resolve(MosaicSizeRequest(size: size, columns: 40), targetAspect: 1, photoCount: 12)
        #expect((columns.columns, columns.rows, columns.cellWidth, columns.cellHeight) == (40, 60, 177, 177))
        let grid = MosaicSize.resolve(MosaicSizeRequest(size: size, columns: 40, rows: 50), targetAspect: 1, photoCount: 12)
        #expect((grid.columns, grid.rows, grid.cellWidth, grid.cellHeight) == (40, 50, 177, 213))
        // All three, agreeing to within a cell: accepted, and the flags are the shape.
        let agreeing = MosaicSizeRequest(size: size, columns: 40, rows: 60, cellWidth: 177, cellHeight: 177)
        #expect(MosaicSize.problems(agreeing).isEmpty)
        #expect(MosaicSize.resolve(agreeing, targetAspect: 1, photoCount: 12) == MosaicShape(columns: 40, rows: 60, cellWidth: 177, cellHeight: 177,
                                                                                              reason: "--size 60x90cm at 300 dpi"))
        // Nothing but the grid or the tile: the rest defaults, no report line needed for both given.
        let given = MosaicSize.resolve(MosaicSizeRequest(columns: 20, rows: 30, cellWidth: 8, cellHeight: 8), targetAspect: 1, photoCount: 12)
        #expect(given == MosaicShape(columns: 20, rows: 30, cellWidth: 8, cellHeight: 8, reason: nil))
        let columnsOnly = MosaicSize.resolve(MosaicSizeRequest(columns: 20, cellWidth: 8, cellHeight: 8), targetAspect: 1, photoCount: 12)
        #expect(columnsOnly.rows == nil && columnsOnly.reason == nil, "--columns leaves the rows to the target's shape, as before")
        let gridOnly = MosaicSize.resolve(MosaicSizeRequest(columns: 20, rows: 30), targetAspect: 1, photoCount: 12)
        #expect(gridOnly.cellWidth == 100 && gridOnly.reason != nil)
        // A small canvas with the default count gets cells of 16 px, not of 2.
        let small = MosaicSize.resolve(MosaicSizeRequest(size: PrintSize(width: 100, height: 100, unit: .pixels)), targetAspect: 1, photoCount: 12)
        #expect(small.cellWidth == 16 && small.columns == 6, "\(small)")
    }

    @Test func contradictionsAreFoundTogether() throws {
        let size = try #require(PrintSize.parse("60x90cm"))
        func problems(_ request: MosaicSizeRequest) -> [String] { MosaicSize.problems(request) }
        #expect(problems(MosaicSizeRequest()).isEmpty)
        #expect(problems(MosaicSizeRequest(cells: 500, columns: 10, rows: 10)).first?.hasPrefix("--cells and --grid") == true)
        #expect(problems(MosaicSizeRequest(cells: 500, columns: 10)).first?.hasPrefix("--cells and --columns") == true)
        #expect(problems(MosaicSizeRequest(size: size, cells: 500, cellWidth: 100, cellHeight: 100)) == ["--size, --cells and --tile-size: any two of them decide the third; drop one"])
        let disagreeing = problems(MosaicSizeRequest(size: size, cells: 9, columns: 40, rows: 60, cellWidth: 100, cellHeight: 100))
        #expect(disagreeing.count == 2, "\(disagreeing)")
        #expect(disagreeing.last == "--size 60x90cm is 7,087 x 10,630 px at 300 dpi, but --grid 40x60 of --tile-size 100 makes 4,000 x 6,000 px: give two of the three (--size with --grid sets the tile; --size with --tile-size, the grid)")
        #expect(problems(MosaicSizeRequest(size: size, columns: 40, cellWidth: 100, cellHeight: 100)).first?.contains("--columns 40 of --tile-size 100 px makes 4,000 px wide") == true)
        #expect(problems(MosaicSizeRequest(size: PrintSize(width: 6_000, height: 9_000, unit: .centimetres), dotsPerInch: 65_535)).first?.contains("more than any picture can be") == true)
        #expect(problems(MosaicSizeRequest(size: PrintSize(width: 3, height: 900, unit: .pixels))).first?.contains("smaller than one cell") == true)
        // A JPEG's side is 65,500 px: 6 m at 300 dpi is refused with -o, not for a pyramid alone.
        let wall = MosaicSizeRequest(size: PrintSize(width: 600, height: 300, unit: .centimetres))
        #expect(MosaicSize.problems(wall, sideLimit: 65_500).first?.contains("more than a JPEG can be (65,500 px a side)") == true)
        #expect(MosaicSize.problems(wall).isEmpty)
        #expect(problems(MosaicSizeRequest(size: PrintSize(width: 100, height: 100, unit: .pixels), cells: 20_000)).first?.contains("more cells than") == true)
        #expect(problems(MosaicSizeRequest(size: PrintSize(width: 100, height: 100, unit: .pixels), cells: 5_000)).first?.hasPrefix("cells of 1 x 1 px cannot show a photo") == true)
        #expect(problems(MosaicSizeRequest(cellWidth: 3, cellHeight: 40)).first?.contains("give --tile-size 16 or more") == true)
        #expect(problems(MosaicSizeRequest(cellWidth: 4, cellHeight: 4)).isEmpty)
    }

    @Test func theReportLineSaysThePrintSize() throws {
        let request = MosaicSizeRequest(size: try #require(PrintSize.parse("60x90cm")))
        let shape = MosaicSize.resolve(request, targetAspect: 1, photoCount: 12)
        let line = try #require(MosaicSize.describe(shape, rows: shape.rows!, request: request))
        #expect(line.hasPrefix("size        41 x 61 cells (2,501) of 174 px: 7,134 x 10,614 px, 60.4 x 89.9 cm at 300 dpi; from --size 60x90cm at 300 dpi"), "\(line)")
        let mm = MosaicSizeRequest(size: try #require(PrintSize.parse("600x900mm")), cells: 5_000)
        let mmShape = MosaicSize.resolve(mm, targetAspect: 1, photoCount: 12)
        #expect(MosaicSize.describe(mmShape, rows: mmShape.rows!, request: mm)?.contains("604 x 896 mm at 300 dpi") == true)
        #expect(MosaicSize.describe(MosaicShape(columns: 2, rows: 2, cellWidth: 8, cellHeight: 8, reason: nil), rows: 2, request: MosaicSizeRequest()) == nil)
    }
}

@Suite struct MosaicSizeCommandLineTests {
    @Test func aMosaicNeedsNoSizeFlag() throws {
        let plain = try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg"])
        #expect(plain.sizeRequest == MosaicSizeRequest() && plain.render.settings.dotsPerInch == nil)
        let print = try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg", "--size", "60x90cm"])
        #expect(print.sizeRequest.size == PrintSize(width: 60, height: 90, unit: .centimetres) && print.render.settings.dotsPerInch == 300)
        let dense = try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg", "--size", "24x36in", "--dpi", "150", "--cells", "900"])
        #expect(dense.sizeRequest.dotsPerInch == 150 && dense.sizeRequest.cells == 900 && dense.render.settings.dotsPerInch == 150)
        let pixels = try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg", "--size", "8000x12000"])
        #expect(pixels.render.settings.dotsPerInch == nil)
        // A print size for a pyramid alone: --dpi converts it (nothing to write it into).
        let pyramid = try MosaicCommand.parse(["--target", "t.jpg", "p", "--dzi", "z.dzi", "--size", "60x90cm", "--dpi", "200"])
        #expect(pyramid.sizeRequest.effectiveDotsPerInch == 200 && pyramid.render.settings.dotsPerInch == nil)
        #expect(throws: CommandLineError("--dpi sets the JPEG's density, and only a pyramid is written: add -o OUT.jpg or drop --dpi")) {
            try MosaicCommand.parse(["--target", "t.jpg", "p", "--dzi", "z.dzi", "--dpi", "200"])
        }
        let given = try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg", "--grid", "20x30", "--tile-size", "40x30"])
        #expect(given.sizeRequest == MosaicSizeRequest(columns: 20, rows: 30, cellWidth: 40, cellHeight: 30))
    }

    @Test func everyProblemIsInOneError() {
        let nothing: String
        do { _ = try MosaicCommand.parse([]); nothing = "" } catch { nothing = error.message }
        #expect(nothing.hasPrefix("3 problems with this command line:\n  no photos given"), "\(nothing)")
        #expect(nothing.contains("\n  --target PICTURE is required") && nothing.contains("\n  -o OUT.jpg, --dzi DIR/NAME.dzi, --szi DIR/NAME.szi, --iiif DIR or --tiff FILE.tif"), "\(nothing)")
        let clash: String
        do {
            _ = try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg", "--size", "60x90cm", "--grid", "40x60", "--tile-size", "100", "--cells", "9"])
            clash = ""
        } catch { clash = error.message }
        #expect(clash.hasPrefix("2 problems") && clash.contains("--cells and --grid") && clash.contains("but --grid 40x60 of --tile-size 100"), "\(clash)")
        // A grid's shape has defaults too (GridSize): nothing of it is required.
        let grid = try? GridCommand.parse(["p", "-o", "o.jpg"])
        #expect(grid?.columns == nil && grid?.tileSizeGiven == false)
        #expect(throws: CommandLineError.self) { try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg", "--size", "60x90ft"]) }
        #expect(throws: CommandLineError.self) { try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg", "--cells", "0"]) }
    }

    @Test func anOutputNameMustSayJPEG() throws {
        for command in ["grid", "mosaic"] {
            func message(_ output: String) -> String? {
                let arguments = ["--target", "t.jpg", "p", "-o", output, "--grid", "2x2", "--tile-size", "8"]
                do {
                    if command == "grid" { _ = try GridCommand.parse(Array(arguments.dropFirst(2))) } else { _ = try MosaicCommand.parse(arguments) }
                    return nil
                } catch { return error.message }
            }
            #expect(message("x") == "-o x: name a .jpg/.jpeg file (or --dzi DIR/NAME.dzi)")
            #expect(message("out/") == "-o out/: name a .jpg/.jpeg file (or --dzi DIR/NAME.dzi)")
            #expect(message("wall.html") == "-o wall.html: name a .jpg/.jpeg file (or --dzi DIR/NAME.dzi)")
            for fine in ["x.jpg", "X.JPEG", "x.jpe", "x.jfif"] { #expect(message(fine) == nil, "\(fine)") }
        }
    }

    @Test func aCellTooSmallIsRefusedInAMosaicOnly() throws {
        #expect(throws: CommandLineError("cells of 2 x 2 px cannot show a photo (a mosaic needs at least 4 px a side, 16 to recognise one): give --tile-size 16 or more, or leave it out (100 px)")) {
            try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg", "--columns", "50", "--tile-size", "2"])
        }
        _ = try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "m.jpg", "--columns", "50", "--tile-size", "4"])
        // A grid of 2 px cells stays a grid's business (a contact sheet, a test pattern).
        _ = try GridCommand.parse(["p", "-o", "g.jpg", "--columns", "50", "--tile-size", "2"])
    }
}

/// A folder of `count` distinct small photos for one test (removed by the caller).
private func distinctPhotos(_ folder: String, count: Int) -> String {
    precondition(system("mkdir -p '\(folder)/photos'") == 0)
    var message = [CChar](repeating: 0, count: 300)
    let written = tessera_test_write_distinct_jpegs(folder + "/photos", Int32(count), 0, 64, 48, 0, 85, &message, 300)
    precondition(written == 0, "cannot write the photos: \(String(cString: message))")
    return folder + "/photos"
}

/// A JPEG's size from its frame header and its JFIF density (units 1: dots per inch), read
/// from the file's first markers; nil when it has none.
private func jpegShape(_ path: String) -> (width: Int, height: Int, dpi: Int?)? {
    let bytes = readFile(path)
    var dpi: Int?
    var at = 2
    while at + 9 < bytes.count, bytes[at] == 0xFF {
        let marker = bytes[at + 1]
        let length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        if marker == 0xE0, at + 15 < bytes.count, bytes[at + 11] == 1 { dpi = Int(bytes[at + 12]) << 8 | Int(bytes[at + 13]) }
        if (0xC0...0xC2).contains(marker) {
            return (Int(bytes[at + 7]) << 8 | Int(bytes[at + 8]), Int(bytes[at + 5]) << 8 | Int(bytes[at + 6]), dpi)
        }
        at += 2 + length
    }
    return nil
}

/// The numbers of the "size" line: columns, rows and the cell's side.
private func sizeLine(_ output: String) -> (columns: Int, rows: Int, cell: Int)? {
    guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("size        ") }) else { return nil }
    let words = line.split(separator: " ")
    guard words.count > 7, let columns = Int(words[1].filter(\.isNumber)), let rows = Int(words[3].filter(\.isNumber)),
          let cell = Int(words[7]) else { return nil }
    return (columns, rows, cell)
}

@Suite struct MosaicSizeThroughTheBinaryTests {
    /// `tessera mosaic --target T LIB -o m.jpg`: exit 0, the target's upright shape (Portrait_6
    /// is stored 1800 x 1200 and turned: 2:3), about 2,500 cells of 100 px for 12 photos.
    @Test func noSizeFlagMakesASensibleMosaic() throws {
        let folder = "\(testRoot)/tessera-size-default-\(getpid())"
        defer { _ = system("rm -rf '\(folder)'") }
        let photos = distinctPhotos(folder, count: 12)
        let run = runTessera(["mosaic", "--target", fixtures + "/Portrait_6.jpg", photos, "-o", folder + "/m.jpg",
                              "--cache-dir", folder + "/cache", "--no-progress"])
        #expect(run.status == 0, "\(run.output)")
        let shape = try #require(jpegShape(folder + "/m.jpg"), "\(run.output)")
        let line = try #require(sizeLine(run.output), "\(run.output)")
        #expect(line.cell == 100 && shape.width == line.columns * 100 && shape.height == line.rows * 100, "\(run.output)")
        #expect(abs(Double(shape.width) - Double(shape.height) * 2 / 3) <= 100, "\(shape) is not the target's 2:3")
        #expect(abs(line.columns * line.rows - 2_500) <= line.columns + line.rows, "\(run.output)")
        #expect(shape.dpi == nil, "no density asked, none written")
        #expect(run.output.contains("12 usable photo(s)"), "\(run.output)")
    }

    /// --size in each unit at the default or a given density: the picture within one cell of the
    /// size asked, the density in the JPEG; --cells about that many.
    @Test func sizeAndCellsMakeWhatTheySay() throws {
        let folder = "\(testRoot)/tessera-size-units-\(getpid())"
        defer { _ = system("rm -rf '\(folder)'") }
        let photos = distinctPhotos(folder, count: 12)
        let base = ["mosaic", "--target", fixtures + "/Landscape_1.jpg", photos, "-o", folder + "/m.jpg", "--cache-dir", folder + "/cache",
                    "--no-progress", "--cells", "400"]
        for (flags, width, height, dpi) in [(["--size", "10x15cm"], 1181, 1772, 300), (["--size", "100x150mm"], 1181, 1772, 300),
                                            (["--size", "4x6in", "--dpi", "200"], 800, 1200, 200), (["--size", "1200x900"], 1200, 900, 0)] {
            let run = runTessera(base + flags)
            #expect(run.status == 0, "\(flags): \(run.output)")
            let shape = try #require(jpegShape(folder + "/m.jpg"), "\(run.output)")
            let line = try #require(sizeLine(run.output), "\(run.output)")
            #expect(abs(shape.width - width) <= line.cell && abs(shape.height - height) <= line.cell, "\(flags): \(shape), \(run.output)")
            #expect(shape.dpi == (dpi == 0 ? nil : dpi), "\(flags): \(shape)")
            #expect(abs(line.columns * line.rows - 400) <= 20, "\(flags): \(run.output)")
        }
        // --cells with a tile: about that many in the target's (3:2) shape.
        let cells = runTessera(Array(base.dropLast(2)) + ["--cells", "600", "--tile-size", "20"])
        let shape = try #require(jpegShape(folder + "/m.jpg"), "\(cells.output)")
        let made = (shape.width / 20) * (shape.height / 20)
        #expect(cells.status == 0 && abs(made - 600) <= 30 && abs(Double(shape.width) - Double(shape.height) * 1.5) <= 20, "\(shape): \(cells.output)")
        // The dry run says the print size it would make.
        let dry = runTessera(Array(base.dropLast(2)) + ["--size", "60x90cm", "--dry-run"])
        #expect(dry.status == 0 && dry.output.contains("cm at 300 dpi; from --size 60x90cm at 300 dpi"), "\(dry.output)")
    }

    /// What is wrong is said before any photo is read, all of it at once, exit 2; each message
    /// says what to do.
    @Test func messagesSayWhatToDo() throws {
        let folder = "\(testRoot)/tessera-size-messages-\(getpid())"
        defer { _ = system("rm -rf '\(folder)'") }
        let photos = distinctPhotos(folder, count: 12)
        let cache = folder + "/cache"
        let target = fixtures + "/Landscape_1.jpg"
        let clash = runTessera(["mosaic", "--target", target, photos, "-o", folder + "/m.jpg", "--cache-dir", cache,
                                "--size", "60x90cm", "--grid", "40x60", "--tile-size", "100", "--cells", "9"])
        #expect(clash.status == 2 && clash.output.contains("2 problems") && clash.output.contains("--cells and --grid")
                && clash.output.contains("7,087 x 10,630 px at 300 dpi"), "\(clash.output)")
        let nothing = runTessera(["mosaic"])
        #expect(nothing.status == 2 && nothing.output.contains("3 problems") && nothing.output.contains("--target PICTURE is required"), "\(nothing.output)")
        let noExtension = runTessera(["mosaic", "--target", target, photos, "-o", folder + "/x", "--cache-dir", cache])
        #expect(noExtension.status == 2 && noExtension.output.contains("name a .jpg/.jpeg file (or --dzi DIR/NAME.dzi)"), "\(noExtension.output)")
        let tiny = runTessera(["mosaic", "--target", target, photos, "-o", folder + "/m.jpg", "--cache-dir", cache, "--tile-size", "1"])
        #expect(tiny.status == 2 && tiny.output.contains("cannot show a photo") && tiny.output.contains("--tile-size 16 or more"), "\(tiny.output)")
        #expect(featureIndexFiles(cache).isEmpty, "photos analysed before a command line was refused")
        #expect(access(folder + "/x", F_OK) != 0 && access(folder + "/m.jpg", F_OK) != 0)
        // Small cells render, with the reason they show colours and not photos.
        let small = runTessera(["mosaic", "--target", target, photos, "-o", folder + "/m.jpg", "--cache-dir", cache, "--tile-size", "8",
                                "--cells", "100", "--no-progress"])
        #expect(small.status == 0 && small.output.contains("warning: cells of 8 x 8 px are too small to recognise a photo in"), "\(small.output)")
        // The messages that were there: no photos, a missing target, a folder as the target.
        mkdir(folder + "/empty", 0o755)
        let empty = runTessera(["mosaic", "--target", target, folder + "/empty", "-o", folder + "/m.jpg", "--cache-dir", cache])
        #expect(empty.status == 3 && empty.output.contains("no photos (JPEG, PNG, WebP, HEIF") && empty.output.contains("in \(folder)/empty"), "\(empty.output)")
        let missing = runTessera(["mosaic", "--target", folder + "/nope.jpg", photos, "-o", folder + "/m.jpg", "--cache-dir", cache])
        #expect(missing.status == 2 && missing.output.contains("--target \(folder)/nope.jpg: no such file"), "\(missing.output)")
        let isFolder = runTessera(["mosaic", "--target", photos, photos, "-o", folder + "/m.jpg", "--cache-dir", cache])
        #expect(isFolder.status == 2 && isFolder.output.contains("is a folder, not a photo"), "\(isFolder.output)")
        // A target that is a file but no picture is refused before the library is scanned: with
        // a library folder that does not exist, the target is what is named (exit 3), where the
        // scan would have named the folder (exit 2) after reading every photo of a real one.
        writeFile(Array("notes, not a picture\n".utf8), to: folder + "/notes.jpg")
        let text = runTessera(["mosaic", "--target", folder + "/notes.jpg", folder + "/no-such-library", "-o", folder + "/m.jpg",
                               "--cache-dir", cache])
        #expect(text.status == 3 && text.output.contains("--target ") && text.output.contains("notes.jpg"), "\(text.output)")
        #expect(!text.output.contains("no-such-library"), "\(text.output)")
    }
}
