// NewFormatCLITests.swift — GIF, TIFF and a camera RAW's preview through the binary, each cell
// of the grid compared with the cell of its baseline-JPEG twin; videos counted in the summary
// and the dry run, not warned about one by one.
import Glibc
import Testing
import TesseraCLI
@testable import Tessera

/// ImageMagick's mean absolute error between two images, in levels (0...255).
func meanAbsoluteLevels(_ a: String, _ b: String) -> Double? {
    let capture = "\(testRoot)/compare-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).txt"
    defer { unlink(capture) }
    _ = system("compare -metric MAE '\(a)' '\(b)' null: 2>'\(capture)'")
    // "838.505 (0.0127948)": the normalised figure in brackets.
    let text = String(decoding: readFile(capture), as: UTF8.self)
    guard let open = text.firstIndex(of: "("), let close = text.firstIndex(of: ")") else { return nil }
    return Double(text[text.index(after: open)..<close]).map { $0 * 255 }
}

@Suite struct NewFormatCLITests {
    @Test func newFormatsAndVideosThroughTheBinary() {
        let directory = "\(testRoot)/tessera-new-formats-\(getpid())"
        let photos = directory + "/photos"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(photos)'") == 0)
        let master = directory + "/master.png"
        #expect(system("convert '\(fixtures)/Landscape_1.jpg' -resize 960x640! -strip PNG24:'\(master)'") == 0)
        // Named so that the sorted grid is twin, GIF, TIFF, RAF.
        #expect(system("convert '\(master)' -quality 95 '\(photos)/a-twin.jpg'") == 0)
        #expect(system("convert '\(master)' -dither None -colors 256 '\(photos)/b.gif'") == 0)
        #expect(system("convert '\(master)' -define tiff:tile-geometry=64x64 -compress zip '\(photos)/c.tif'") == 0)
        // A RAF: Fujifilm's header naming the JPEG after it (offset 100 at 84, then its length).
        let preview = readFile(photos + "/a-twin.jpg")
        var raf = Array(("FUJIFILMCCD-RAW 0201FF393101" + String(repeating: "\0", count: 72)).utf8)
        let length = UInt32(preview.count)
        raf.replaceSubrange(84..<92, with: [0, 0, 0, 100, UInt8(length >> 24), UInt8(length >> 16 & 0xFF),
                                            UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
        writeFile(raf + preview, to: photos + "/d.raf")
        // Two Live Photo movies and a clip.
        let movie: [UInt8] = [0, 0, 0, 0x14] + Array("ftypqt  ".utf8) + [0, 0, 0, 0] + Array("qt  ".utf8) + [UInt8](repeating: 0, count: 64)
        writeFile(movie, to: photos + "/IMG_0001.MOV")
        writeFile(movie, to: photos + "/IMG_0002.MOV")
        writeFile([0, 0, 0, 0x18] + Array("ftypisom".utf8) + [0, 0, 2, 0] + Array("isommp41".utf8) + [UInt8](repeating: 0, count: 64),
                  to: photos + "/clip.mp4")
        let output = directory + "/grid.jpg"
        let run = runTessera(["grid", photos, "-o", output, "--columns", "4", "--tile-size", "120", "--quality", "98", "--no-progress"])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("left out 3 videos"), "\(run.output)")
        #expect(!run.output.contains("warning"), "\(run.output)")
        // Each cell against the twin's (cells 120 x 80: the photos' 3:2, the twin drawn at 1/8),
        // within 3 levels: the output's own JPEG coding is 0.9 of that (the RAF's cell holds the
        // twin's very pixels: measured 0.87), the twin's coding and the GIF's palette the rest
        // (measured 2.58 GIF, 2.32 TIFF); the library's tests hold each format to 1.5.
        var cells: [String] = []
        for index in 0..<4 {
            let cell = directory + "/cell-\(index).png"
            #expect(system("convert '\(output)' -crop 120x80+\(index * 120)+0 +repage '\(cell)'") == 0)
            cells.append(cell)
        }
        for (index, name) in ["GIF", "TIFF", "RAF"].enumerated() {
            let levels = meanAbsoluteLevels(cells[0], cells[index + 1])
            print("binary: \(name) cell \(levels.map { formatDecimal($0, places: 2) } ?? "?") levels from the JPEG twin's")
            #expect(levels != nil && levels! <= 3, "\(name): \(String(describing: levels))")
        }
        // The comparison can fail: the twin's cell against itself mirrored.
        let mirrored = directory + "/mirrored.png"
        #expect(system("convert '\(cells[0])' -flop '\(mirrored)'") == 0)
        #expect((meanAbsoluteLevels(cells[0], mirrored) ?? 0) > 10)
        let dry = runTessera(["grid", photos, "-o", output, "--columns", "4", "--tile-size", "120", "--dry-run"])
        #expect(dry.output.contains("photos      4 usable"), "\(dry.output)")
        #expect(dry.output.contains("left out    3 videos"), "\(dry.output)")
    }

    @Test func leftOutAndSummaryNameVideos() {
        var leftOut = LeftOut()
        leftOut.videos = 1
        #expect(Report.leftOut(leftOut) == "left out    1 video")
        leftOut.hidden = 2
        leftOut.videos = 12
        #expect(Report.leftOut(leftOut) == "left out    2 hidden (--include-hidden takes them), 12 videos")
    }
}
