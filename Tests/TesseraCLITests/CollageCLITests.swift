// CollageCLITests.swift — `tessera collage` as a person and a script meet it: what it refuses,
// what the dry run says, and through the binary a collage whose manifest, JPEG, Deep Zoom
// viewer and sharded render agree with each other.
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

@Suite struct CollageCLITests {
    private func folder(_ name: String) -> String {
        let path = testRoot + "/collage-\(name)-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o755)
        return path
    }

    @Test func theCommandLineRefusesWhatACollageCannotTake() {
        func refusal(_ arguments: [String]) -> String {
            do {
                _ = try CollageCommand.parse(["p", "-o", "o.jpg"] + arguments)
                return ""
            } catch {
                return error.message
            }
        }
        #expect(refusal(["--grid", "3x3"]).contains("a collage's cells follow from its photos' shapes"))
        #expect(refusal(["--tile-size", "100"]).contains("keeps each photo's shape"))
        #expect(refusal(["--columns", "4"]).contains("add --layout columns"))
        #expect(refusal(["--layout", "columns", "--row-height", "200"]).contains("--row-height is for justified rows"))
        #expect(refusal(["--layout", "grid"]).contains("--layout expects rows or columns"))
        #expect(refusal(["--seed", "4"]).contains("--seed orders a shuffle"))
        #expect(refusal(["--width", "10", "--gap", "5"]).contains("leaves no room for a photo between gaps of 5 px: give --gap 4 or less"))
        #expect(refusal(["--width", "11", "--gap", "5"]).isEmpty)  // a pixel between the gaps
        #expect(refusal(["--width", "7", "--gap", "1", "--layout", "columns", "--columns", "3"]).isEmpty)
        #expect(refusal(["--width", "6", "--gap", "1", "--layout", "columns", "--columns", "3"]).contains("at most 2 columns fit"))
        #expect(refusal(["--width", "0"]).contains("--width expects a whole number"))
        #expect(refusal([]).isEmpty)
        let parsed = try? CollageCommand.parse(["p", "-o", "o.jpg", "--layout", "columns", "--columns", "6", "--gap", "4",
                                                "--order", "shuffle", "--seed", "3", "--width", "2000"])
        #expect(parsed?.arrangement == .columns && parsed?.render.columns == 6 && parsed?.gap == 4 && parsed?.width == 2000)
        #expect(parsed?.render.order == .shuffle(seed: 3))
        // The help teaches every option it takes, and none it refuses.
        for spec in CollageCommand.options + CollageCommand.renderingOptions {
            let spelled = spec.names.joined(separator: ", ") + (spec.valueName.map { " " + $0 } ?? "")
            #expect(CollageCommand.help.contains("\n  " + spelled + "\n"), "collage --help lacks \(spelled)")
        }
        #expect(!CollageCommand.help.contains("\n  --tile-size"))
    }

    /// The default shape: about a square, but never rows wider than every photo side by side
    /// at the row height (a phone screenshot alone came out 1066 x 2487 px, two 1:10 and 1:16
    /// photos 4579 x 28179), and masonry's default columns no more than the photos, nor than a
    /// JPEG's width holds at the default column width.
    @Test func theDefaultShapeDrawsFewTallPhotosAtTheRowHeight() throws {
        let rows = try CollageCommand.parse(["p", "-o", "o.jpg"])
        func width(_ aspects: [Double]) -> Int { CollageCommand.shape(rows, aspects: aspects, sideLimit: 65_500).width }
        #expect(width([1080.0 / 2520]) == 129)
        #expect(width([0.75]) == 225)
        #expect(width([0.1, 0.0625]) == 49)
        #expect(width([4.0 / 3, 3.0 / 4]) == 625)  // one row, both at 300 px
        // Many photos: about a square (rows of 300 px, the height within a row of the width).
        let many = [Double](repeating: 1.5, count: 400)
        let manyWidth = width(many)
        let height = CollageLayout.height(aspects: many, width: manyWidth, rowHeight: 300, gap: 0)
        #expect(abs(manyWidth - height) * 10 <= manyWidth, "\(manyWidth) x \(height)")
        // A few rows: 18 photos of 4:3 came out 1290 x 1980 (three to a row).
        let few = [Double](repeating: 4.0 / 3, count: 18)
        let fewWidth = width(few)
        let fewHeight = CollageLayout.height(aspects: few, width: fewWidth, rowHeight: 300, gap: 0)
        #expect(abs(fewWidth - fewHeight) * 4 <= fewWidth, "\(fewWidth) x \(fewHeight)")

        let columns = try CollageCommand.parse(["p", "-o", "o.jpg", "--layout", "columns"])
        func count(_ aspects: [Double], _ options: CollageOptions = columns) -> Int {
            guard case .columns(let count) = CollageCommand.shape(options, aspects: aspects, sideLimit: 65_500).style else { return -1 }
            return count
        }
        #expect(count([1080.0 / 2520]) == 1)
        #expect(count([0.1, 0.0625]) == 2)
        #expect(count([Double](repeating: 0.2, count: 40)) == 14)
        let gapped = try CollageCommand.parse(["p", "-o", "o.jpg", "--layout", "columns", "--gap", "1000"])
        let wide = CollageCommand.shape(gapped, aspects: [Double](repeating: 0.75, count: 20_000), sideLimit: 65_500)
        #expect(wide.width <= 65_500)
        #expect(count([Double](repeating: 0.75, count: 20_000), gapped) == 49)
    }

    /// Photos drawn too small to keep their shape within a pixel (a collage 7 px wide) are
    /// told, with what would help; a collage of ordinary size says nothing.
    @Test func photosTooSmallToKeepTheirShapeAreTold() throws {
        // The shapes of ten photos a fuzzer drew at --width 7 --row-height 5 (a 4:3 one in 4 x 5).
        let aspects = [1.0, 1.0 / 3, 0.5625, 3.0, 0.5625, 16.0, 1.0 / 16, 1.0 / 16, 4.0 / 3, 1.0 / 16]
        let tiny = try CollageLayout.make(aspects: aspects, sequence: (0..<10).map { Int32($0) }, width: 7, style: .rows(rowHeight: 5), gap: 0,
                                          heightLimit: 65_500)
        let warning = Runner.misshapen(tiny, aspects: aspects)
        #expect(warning?.contains("too small to keep their shape") == true && warning?.contains("--width") == true, "\(warning ?? "none")")
        let ordinary = try CollageLayout.make(aspects: aspects, sequence: (0..<10).map { Int32($0) }, width: 1200, style: .rows(rowHeight: 200), gap: 4,
                                              heightLimit: 65_500)
        #expect(Runner.misshapen(ordinary, aspects: aspects) == nil)
    }

    /// A $TMPDIR that names no folder is refused before any work, as --temp-dir is (exit 2),
    /// naming TMPDIR, where it was "stat failed", exit 1.
    @Test func aMissingTMPDIRIsRefusedByName() {
        let directory = folder("tmpdir")
        defer { _ = system("rm -rf '\(directory)'") }
        let capture = directory + "/output.txt"
        let status = system("TMPDIR='\(directory)/missing' '\(toolPath())' collage '\(fixtures)' -o '\(directory)/c.jpg' --no-progress "
                            + ">'\(capture)' 2>&1 </dev/null")
        let output = String(decoding: readFile(capture), as: UTF8.self)
        #expect(status >> 8 == 2, "\(output)")
        #expect(output.contains("TMPDIR") && output.contains(directory + "/missing"), "\(output)")
        #expect(access(directory + "/c.jpg", F_OK) != 0)
    }

    /// A temporary folder no file can be made in (/proc here; a read-only mount the same) is
    /// refused before any work, exit 2, a dry run too: it failed after the scan, exit 1, as
    /// "mkstemp failed", and a dry run said all was well.
    @Test func aTemporaryFolderThatCannotBeWrittenIsRefusedFirst() {
        let directory = folder("proc-temp")
        defer { _ = system("rm -rf '\(directory)'") }
        for dryRun in [false, true] {
            let run = runTessera(["grid", fixtures, "-o", directory + "/g.jpg", "--temp-dir", "/proc", "--no-progress"] + (dryRun ? ["--dry-run"] : []))
            #expect(run.status == 2, "\(run.output)")
            #expect(run.output.contains("/proc") && run.output.contains("the temporary folder cannot be written"), "\(run.output)")
            #expect(!run.output.contains("scanned"), "\(run.output)")
        }
        #expect(access(directory + "/g.jpg", F_OK) != 0)
    }

    /// A --cache-dir inside an output folder the render replaces (an IIIF folder, a pyramid's
    /// tiles), by any path to it, is refused before any work (the render failed after the
    /// analysis, and left its cache in the old folder).
    @Test func aCacheInsideAFolderTheRenderReplacesIsRefused() {
        let directory = folder("cache-inside")
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory + "/out", 0o755)
        #expect(symlink(directory + "/out", directory + "/link") == 0)
        for (outputs, cache) in [(["--iiif", directory + "/out/iiif", "--iiif-id", "https://example.org/i"], directory + "/link/iiif/cache"),
                                 (["--dzi", directory + "/out/w.dzi"], directory + "/out/./w_files")] {
            let run = runTessera(["grid", fixtures, "--cache-dir", cache, "--no-progress"] + outputs)
            #expect(run.status == 2 && run.output.contains("--cache-dir \(cache) is inside"), "\(run.output)")
        }
        // Relative to the working folder.
        let capture = directory + "/output.txt"
        let status = system("cd '\(directory)/out' && '\(toolPath())' grid '\(fixtures)' --dzi w.dzi --cache-dir w_files/c --no-progress "
                            + ">'\(capture)' 2>&1 </dev/null")
        let output = String(decoding: readFile(capture), as: UTF8.self)
        #expect(status >> 8 == 2 && output.contains("--cache-dir w_files/c is inside w_files"), "\(output)")
        #expect(listNames(directory + "/out").isEmpty)
        let outside = runTessera(["grid", fixtures, "--cache-dir", directory + "/cache", "--dzi", directory + "/out/w.dzi", "--no-progress"])
        #expect(outside.status == 0, "\(outside.output)")
    }

    /// Rows too tall for a JPEG: the row height named is the tallest that fits, found by laying
    /// the photos out again. (It was the height scaled by the proportion over, but the height
    /// grows with the square of the row height: 5,000 photos 6,000 px wide were told 178 px,
    /// where 233 fits.) One pixel more does not fit.
    @Test func theRowHeightATooTallCollageNamesIsTheTallestThatFits() {
        let directory = folder("tall-rows")
        defer { _ = system("rm -rf '\(directory)'") }
        func run(_ rowHeight: Int) -> (status: Int32, output: String) {
            runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--dry-run", "--width", "20000", "--row-height", String(rowHeight),
                        "--no-progress", "--temp-dir", directory])
        }
        let tall = run(13_000)
        #expect(tall.status == 2 && tall.output.contains("more than a JPEG can be (65,500 px)"), "\(tall.output)")
        let named = tall.output.components(separatedBy: "give --row-height ").dropFirst().first?.split(separator: " ").first.flatMap { Int($0) }
        #expect(named.map { $0 > 1 && $0 < 13_000 } == true, "\(tall.output)")
        if let named {
            let fits = run(named)
            #expect(fits.status == 0 && fits.output.contains("output      20000 x"), "\(fits.output)")
            let over = run(named + 1)
            #expect(over.status == 2 && over.output.contains("more than a JPEG can be"), "\(over.output)")
        }
    }

    /// A collage taller than a JPEG can be: `-o` is refused by the JPEG's limit, a preview alone
    /// is written (small), since the full picture is never written.
    @Test func aPreviewAloneOfACollageTallerThanAJPEG() {
        let directory = folder("tall-preview")
        defer { _ = system("rm -rf '\(directory)'") }
        let shape = ["--layout", "columns", "--columns", "2", "--width", "20000", "--no-progress", "--temp-dir", directory]
        let full = runTessera(["collage", fixtures, "-o", directory + "/c.jpg"] + shape)
        #expect(full.status == 2 && full.output.contains("more than a JPEG can be (65,500 px)"), "\(full.output)")
        // The columns it names make a collage a JPEG holds.
        let named = full.output.components(separatedBy: "give --columns ").dropFirst().first?.split(separator: " ").first.flatMap { Int($0) }
        #expect(named.map { $0 > 2 } == true, "\(full.output)")
        if let named {
            let fits = runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--dry-run", "--layout", "columns", "--columns", String(named),
                                   "--width", "20000", "--no-progress", "--temp-dir", directory])
            #expect(fits.status == 0, "\(fits.output)")
        }
        let preview = runTessera(["collage", fixtures, "--preview", directory + "/p.jpg"] + shape)
        #expect(preview.status == 0, "\(preview.output)")
        let size = jpegSize(directory + "/p.jpg")
        #expect(size.map { $0.width <= 2000 && $0.height == 2000 } == true, "\(String(describing: size))")
        #expect(access(directory + "/c.jpg", F_OK) != 0)
    }

    /// Too tall in masonry columns with gaps: the columns named are a count the collage takes
    /// (no more than the photos, each column a pixel wide at least between the gaps), and it
    /// fits. (The search tried up to a column a pixel of the width, which with gaps left no
    /// room: a precondition failure, exit 132, instead of the error.)
    @Test func aTooTallMasonryCollageWithGapsNamesColumnsItTakes() {
        let directory = folder("tall-gaps")
        defer { _ = system("rm -rf '\(directory)'") }
        let photoCount = listNames(fixtures).filter { $0.hasSuffix(".jpg") }.count
        for gap in ["1", "40"] {
            let tall = runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--layout", "columns", "--columns", "1", "--width", "20000",
                                   "--gap", gap, "--dry-run", "--temp-dir", directory])
            #expect(tall.status == 2 && tall.output.contains("(65,500 px)"), "gap \(gap): \(tall.output)")
            let named = tall.output.components(separatedBy: "give --columns ").dropFirst().first?.split(separator: " ").first.flatMap { Int($0) }
            #expect(named.map { $0 > 1 && $0 <= photoCount } == true, "gap \(gap), \(photoCount) photos: \(tall.output)")
            if let named {
                let fits = runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--layout", "columns", "--columns", String(named),
                                       "--width", "20000", "--gap", gap, "--dry-run", "--temp-dir", directory])
                #expect(fits.status == 0, "gap \(gap): \(fits.output)")
            }
        }
    }

    /// A collage of the fixtures (landscapes and portraits, each in all eight EXIF
    /// orientations): the manifest's cells are every photo once, upright shapes, rows exactly
    /// the width; the JPEG is the canvas they make; the viewer knows each cell's rectangle;
    /// two shards joined are the same JPEG and pyramid.
    @Test func aCollageThroughTheBinary() {
        let directory = folder("binary")
        defer { _ = system("rm -rf '\(directory)'") }
        let shape = ["--width", "1200", "--row-height", "120", "--gap", "3", "--background", "ffffff", "--no-progress",
                     "--temp-dir", directory]
        let run = runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--dzi", directory + "/c.dzi", "--manifest",
                              directory + "/c.csv", "--dzi-tile-size", "128"] + shape)
        #expect(run.status == 0, "\(run.output)")
        let manifest = String(decoding: readFile(directory + "/c.csv"), as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(manifest.first == "x,y,width,height,photo")
        let cells = manifest.dropFirst().map { $0.split(separator: ",").map(String.init) }
        #expect(cells.count == 18 && Set(cells.map { $0[4] }).count == 18, "\(manifest)")
        var rows: [Int: Int] = [:]
        var bottom = 0
        for cell in cells {
            let (x, y, w, h) = (Int(cell[0])!, Int(cell[1])!, Int(cell[2])!, Int(cell[3])!)
            rows[y, default: 3] += w + 3
            bottom = max(bottom, y + h + 3)
            // Upright shapes: every Landscape_N is 3:2 upright whatever its orientation tag.
            let aspect = cell[4].contains("Landscape") ? 1.5 : 2.0 / 3
            #expect(abs(Double(w) - aspect * Double(h)) <= max(1, aspect) + 1e-9, "\(cell)")
        }
        #expect(rows.count == 2 && rows.values.allSatisfy { $0 == 1200 }, "\(rows)")
        let size = jpegSize(directory + "/c.jpg")
        #expect(size?.width == 1200 && size?.height == bottom, "\(String(describing: size)) against \(bottom)")
        let cellsScript = String(decoding: readFile(directory + "/c_files/viewer/cells.js"), as: UTF8.self)
        #expect(cellsScript.contains("frames: ["), "the viewer's cells have no rectangles: \(cellsScript.prefix(300))")

        // Two shards and their join: the same files.
        let parts = directory + "/parts"
        mkdir(parts, 0o755)
        mkdir(directory + "/s", 0o755)
        for k in 1...2 {
            let shard = runTessera(["collage", fixtures, "-o", directory + "/s/c.jpg", "--dzi", directory + "/s/c.dzi",
                                    "--dzi-tile-size", "128", "--shard", "\(k)/2", "--shard-dir", parts] + shape)
            #expect(shard.status == 0, "\(shard.output)")
        }
        let join = runTessera(["join", parts, "--no-progress"])
        #expect(join.status == 0, "\(join.output)")
        #expect(readFile(directory + "/s/c.jpg") == readFile(directory + "/c.jpg"))
        #expect(system("diff -r '\(directory)/s/c_files' '\(directory)/c_files' >/dev/null") == 0, "the joined pyramid differs")
        #expect(readFile(directory + "/s/c.html") == readFile(directory + "/c.html"))
    }

    @Test func theDryRunCountsTheCellsBySize() {
        let directory = folder("dry")
        defer { _ = system("rm -rf '\(directory)'") }
        let run = runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--layout", "columns", "--columns", "3", "--width", "903",
                              "--dry-run", "--temp-dir", directory])
        #expect(run.status == 0, "\(run.output)")
        // 3 columns of 301 px: landscapes 301 x 201, portraits 301 x 452 (3:2 both ways).
        #expect(run.output.contains("18 cells: 9 of 301 x 452 px, 9 of 301 x 201 px"), "\(run.output)")
        #expect(run.output.contains("18 drawn, 18 decodes"), "\(run.output)")
        #expect(access(directory + "/c.jpg", F_OK) != 0)
        let tall = runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--layout", "columns", "--columns", "1", "--width", "9000",
                               "--temp-dir", directory])
        #expect(tall.status == 2 && tall.output.contains("(65,500 px)") && tall.output.contains("give --columns "), "\(tall.output)")
        // A width past the JPEG's limit is named as a width (the height is not known yet).
        let wide = runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--width", "65501", "--temp-dir", directory])
        #expect(wide.status == 2 && wide.output.contains("--width 65501 is wider than a JPEG can be (65,500 px)")
                && !wide.output.contains("x 1 px"), "\(wide.output)")
        // The default width makes about a square picture, gaps and all.
        for gap in ["0", "100"] {
            let square = runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--gap", gap, "--dry-run", "--temp-dir", directory])
            let words = square.output.split(separator: "\n").first { $0.hasPrefix("output") }?.split(separator: " ") ?? []
            let (w, h) = (words.count > 3 ? Double(words[1]) ?? 0 : 0, words.count > 3 ? Double(words[3]) ?? 0 : 0)
            #expect(w > 0 && h > 0 && max(w / h, h / w) < 1.5, "gap \(gap): \(square.output)")
        }
        let empty = runTessera(["collage", fixtures, "-o", directory + "/c.jpg", "--layout", "columns", "--columns", "19", "--temp-dir", directory])
        #expect(empty.status == 2 && empty.output.contains("--columns 18 or fewer"), "\(empty.output)")
    }
}

/// A JPEG's width and height from its SOF marker.
private func jpegSize(_ path: String) -> (width: Int, height: Int)? {
    let bytes = readFile(path)
    var i = 2
    while i + 9 < bytes.count {
        guard bytes[i] == 0xFF else { return nil }
        let marker = bytes[i + 1], length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
        if marker == 0xC0 || marker == 0xC2 {
            return (Int(bytes[i + 7]) << 8 | Int(bytes[i + 8]), Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]))
        }
        i += 2 + length
    }
    return nil
}
