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
        // A folder of videos alone: no photos, and the videos said to be why.
        let videos = directory + "/videos-only"
        #expect(system("mkdir -p '\(videos)' && cp '\(photos)'/*.MOV '\(photos)'/clip.mp4 '\(videos)'/") == 0)
        let none = runTessera(["grid", videos, "-o", directory + "/none.jpg", "--columns", "2", "--tile-size", "50", "--no-progress"])
        #expect(none.status == 3 && none.output.contains("(3 videos left out: Tessera draws photos)"), "\(none.output)")
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

/// TIFFs made by a small writer in Python: `tiled N` (N x N 8-bit grey in 256 px deflate
/// tiles), `shared N` (the same, every tile pointing at one tile's bytes: 1.6 GB of picture in
/// 400 KB), `strip N` (one deflate strip of N x N grey: the strip is the picture).
private let tiffWriter = """
import sys, zlib, struct
def tiff(path, n, mode):
    tiled = mode != "strip"
    out = bytearray(b"II*\\0\\0\\0\\0\\0")
    if tiled:
        blob = zlib.compress(b"\\x80" * (256 * 256), 9)
        count = ((n + 255) // 256) ** 2
    else:
        c = zlib.compressobj(9)
        blob = b"".join(c.compress(b"\\x80" * n) for _ in range(n)) + c.flush()
        count = 1
    at = len(out); out += blob
    starts = [at] * count
    if mode == "tiled":
        for i in range(1, count): starts[i] = len(out); out += blob
    if len(out) % 2: out += b"\\0"
    offsets = len(out); out += struct.pack("<%dI" % count, *starts)
    counts = len(out); out += struct.pack("<%dI" % count, *([len(blob)] * count))
    def v(off, one): return off if count > 1 else one
    entries = [(256, 4, 1, n), (257, 4, 1, n), (258, 3, 1, 8), (259, 3, 1, 8), (262, 3, 1, 1), (277, 3, 1, 1)]
    if tiled:
        entries += [(322, 3, 1, 256), (323, 3, 1, 256), (324, 4, count, v(offsets, at)), (325, 4, count, v(counts, len(blob)))]
    else:
        entries += [(273, 4, 1, at), (278, 4, 1, n), (279, 4, 1, len(blob))]
    entries.sort()
    ifd = len(out)
    out += struct.pack("<H", len(entries))
    for tag, typ, cnt, val in entries:
        out += struct.pack("<HHI", tag, typ, cnt) + (struct.pack("<HH", val, 0) if typ == 3 else struct.pack("<I", val))
    out += struct.pack("<I", 0)
    out[4:8] = struct.pack("<I", ifd)
    open(path, "wb").write(out)
tiff(sys.argv[2], int(sys.argv[3]), sys.argv[1])
"""

extension NewFormatCLITests {
    /// Large and lying GIFs and TIFFs beside a valid photo, 2 x 1 cells of 100 px at
    /// --max-memory 32M: each drawn, or named in a warning, and the peak inside the budget and
    /// the slack.
    @Test(arguments: [
        ("a 4000 x 3000 interlaced GIF (its frame held whole)", "big.gif", ""),
        ("a 6000 x 6000 TIFF in 256 px tiles", "tiled.tif", ""),
        ("a 40000 x 40000 TIFF of one tile's bytes repeated", "huge.tif", "more than its"),
        // (100 MP: past it, a file this small is refused as a bomb before its strip is sized.)
        ("a 10000 x 10000 TIFF in one deflate strip", "strip.tif", "--max-memory"),
    ])
    func largeAndLyingFilesStayInsideTheBudget(_ name: String, _ file: String, _ saying: String) {
        let folder = "\(testRoot)/new-format-memory-\(UInt32.random(in: 0...UInt32.max))"
        defer { _ = system("rm -rf '\(folder)'") }
        #expect(system("mkdir -p '\(folder)/photos' && convert -size 300x200 gradient:red-blue '\(folder)/photos/valid.png'") == 0)
        let path = folder + "/photos/" + file
        let script = folder + "/tiff.py"
        writeFile(Array(tiffWriter.utf8), to: script)
        let made: Int32
        switch file {
        case "big.gif": made = system("convert -size 4000x3000 plasma:fractal -colors 64 -interlace GIF '\(path)'")
        case "tiled.tif": made = system("python3 '\(script)' tiled '\(path)' 6000")
        case "huge.tif": made = system("python3 '\(script)' shared '\(path)' 40000")
        default: made = system("python3 '\(script)' strip '\(path)' 10000")
        }
        #expect(made == 0, "\(name): could not make it")
        let run = runMeasured(["grid", folder + "/photos", "-o", folder + "/out.jpg", "--grid", "2x1", "--tile-size", "100",
                               "--max-memory", "32M", "--no-progress", "--temp-dir", folder])
        print("new format memory, \(name): exit \(run.exitCode), peak \(run.peakMiB) MiB at --max-memory 32M")
        #expect(run.exitCode == 0, "\(name): \(run.output)")
        if saying.isEmpty {
            #expect(!run.output.contains("warning"), "\(name): \(run.output)")
        } else {
            let warning = run.output.split(separator: "\n").first { $0.contains(file) && $0.contains("warning") }
            #expect(warning?.contains(saying) == true, "\(name): \(run.output)")
        }
        #expect(run.peakBytes <= (32 << 20) + hostileSlackBytes, "\(name): peak \(run.peakMiB) MiB")
    }
}

/// Two grey PNGs of the same gradient, one with an iCCP chunk holding a grey ICC profile
/// (gamma 2.2, as scanners and screenshot tools write): argv[1] the plain one, argv[2] the other.
private let greyPNGWriter = """
import sys, zlib, struct
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
def s15(v): return struct.pack(">i", int(round(v * 65536)))
w, h = 64, 48
raw = b"".join(b"\\0" + bytes((x * 4 + y) % 256 for x in range(w)) for y in range(h))
def png(path, extra):
    open(path, "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) + extra
                           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
trc = b"curv" + b"\\0" * 4 + struct.pack(">IH", 1, 0x0233) + b"\\0\\0"
white = b"XYZ " + b"\\0" * 4 + s15(0.9642) + s15(1.0) + s15(0.8249)
tags = [(b"kTRC", trc), (b"wtpt", white)]
table, data, at = b"", b"", 128 + 4 + 12 * len(tags)
for signature, body in tags:
    table += signature + struct.pack(">II", at + len(data), len(body)); data += body
rest = struct.pack(">I", len(tags)) + table + data
header = (struct.pack(">I", 128 + len(rest)) + b"lcms" + struct.pack(">I", 0x02100000) + b"mntrGRAYXYZ " + b"\\0" * 12
          + b"acspAPPL" + b"\\0" * 24 + s15(0.9642) + s15(1.0) + s15(0.8249) + b"\\0" * 48)
png(sys.argv[1], b"")
png(sys.argv[2], chunk(b"iCCP", b"grey\\0\\0" + zlib.compress(header + rest, 9)))
"""

extension NewFormatCLITests {
    /// A grey PNG's grey profile is not applied as RGB (it was refused, with a warning for each
    /// such file): the picture is its grey levels, as without the profile, and nothing is said.
    @Test func aGreyPNGWithAGreyProfileIsDrawnAsItsGreys() throws {
        let folder = "\(testRoot)/grey-profile-\(UInt32.random(in: 0...UInt32.max))"
        defer { _ = system("rm -rf '\(folder)'") }
        #expect(system("mkdir -p '\(folder)/plain' '\(folder)/profiled'") == 0)
        writeFile(Array(greyPNGWriter.utf8), to: folder + "/grey.py")
        try #require(system("python3 '\(folder)/grey.py' '\(folder)/plain/g.png' '\(folder)/profiled/g.png'") == 0)
        var outputs: [[UInt8]] = []
        for name in ["plain", "profiled"] {
            let run = runTesseraSplit(["grid", folder + "/" + name, "-o", folder + "/\(name).jpg", "--grid", "1x1", "--tile-size", "64",
                                       "--no-progress", "--cache-dir", folder + "/cache"])
            #expect(run.status == 0 && !run.standardError.contains("warning"), "\(name): \(run.standardError)")
            outputs.append(readFile(folder + "/\(name).jpg"))
        }
        #expect(!outputs[0].isEmpty && outputs[0] == outputs[1])
    }
}
