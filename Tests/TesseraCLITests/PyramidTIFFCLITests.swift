// PyramidTIFFCLITests.swift — issue 30's tiled pyramidal TIFF through the binary, read by
// independent readers: Python's tifffile (its tiles decoded by imagecodecs' libjpeg-turbo),
// libvips (each page with `vips copy`, the page count with `vipsheader`) and OpenSlide (its
// generic tiled TIFF driver, which takes only reduced-resolution pages as levels). Page 0 is
// compared with the JPEG written in the same pass, each smaller page with page 0 averaged 2x2 by
// the test itself; every output in one pass; past JPEG's 65,500 px; inside the memory budget; a
// failed render keeps the file that was there; what the command line refuses and what the dry
// run counts.
import Glibc
import Testing

/// tifffile, imagecodecs and vips over a TIFF (argv: the TIFF, the JPEG of the same pass or
/// "-", a scratch folder): one "name value" line per finding.
private let tiffChecker = """
import sys, os, subprocess, tifffile, imagecodecs, numpy as np
tif, jpeg, work = sys.argv[1], sys.argv[2], sys.argv[3]
t = tifffile.TiffFile(tif)
print("pages", len(t.pages))
print("levels", len(t.series[0].levels))
print("bigtiff", t.is_bigtiff)
pages = [p.asarray().astype(np.int64) for p in t.pages]
print("shapes", " ".join("%dx%d" % (a.shape[1], a.shape[0]) for a in pages))
print("reduced", int(t.pages[0].subfiletype) == 0 and all(int(p.subfiletype) == 1 for p in t.pages[1:]))
print("jpeg_tiles", all(int(p.compression) == 7 and int(p.photometric) == 6 and p.tilewidth == 256 and p.tilelength == 256 for p in t.pages))
if jpeg != "-":
    j = imagecodecs.jpeg8_decode(open(jpeg, "rb").read()).astype(np.int64)
    print("jpeg_mad %.3f" % (np.abs(pages[0] - j).mean() if j.shape == pages[0].shape else 999))
level, worst, shifted = pages[0], 0.0, 999.0
for a in pages[1:]:
    hh, ww = level.shape[:2]
    padded = np.pad(level, ((0, hh % 2), (0, ww % 2), (0, 0)), mode="edge")
    level = (padded[0::2, 0::2] + padded[1::2, 0::2] + padded[0::2, 1::2] + padded[1::2, 1::2] + 2) // 4
    if a.shape != level.shape:
        worst = 999.0
        continue
    worst = max(worst, np.abs(a - level).mean())
    shifted = min(shifted, np.abs(a[1:] - level[:-1]).mean(), np.abs(a[:, 1:] - level[:, :-1]).mean())
print("levels_mad %.3f" % worst)
print("shifted_mad %.3f" % shifted)
p, a = t.pages[0], pages[0]
t.filehandle.seek(p.dataoffsets[-1])
tile = imagecodecs.jpeg8_decode(t.filehandle.read(p.databytecounts[-1])).astype(np.int64)
cols, rows = (a.shape[1] + 255) // 256, (a.shape[0] + 255) // 256
edge = a[(rows - 1) * 256:, (cols - 1) * 256:]
expected = np.pad(edge, ((0, 256 - edge.shape[0]), (0, 256 - edge.shape[1]), (0, 0)), mode="edge")
print("edge_tile %dx%d %.3f" % (tile.shape[1], tile.shape[0], np.abs(tile - expected).mean() if tile.shape == expected.shape else 999))
vips = 0.0
for i, a in enumerate(pages):
    png = os.path.join(work, "page%d.png" % i)
    subprocess.run(["vips", "copy", "%s[page=%d]" % (tif, i), png], check=True)
    v = imagecodecs.png_decode(open(png, "rb").read()).astype(np.int64)
    vips = max(vips, np.abs(v - a).mean() if v.shape == a.shape else 999)
print("vips_mad %.3f" % vips)
print("vips_pages", subprocess.run(["vipsheader", "-f", "n-pages", tif], capture_output=True, text=True).stdout.strip())
"""

/// Runs the checker; its lines as a dictionary (first word: the rest), with "text" all of it.
private func checkTIFF(_ tiff: String, jpeg: String? = nil) -> [String: String] {
    let work = testRoot + "/tiff-check-\(UInt32.random(in: 0...UInt32.max))"
    mkdir(work, 0o755)
    defer { _ = system("rm -rf '\(work)'") }
    writeFile(Array(tiffChecker.utf8), to: work + "/check.py")
    let status = system("python3 '\(work)/check.py' '\(tiff)' '\(jpeg ?? "-")' '\(work)' >'\(work)/log' 2>&1")
    let text = String(decoding: readFile(work + "/log"), as: UTF8.self)
    var fields: [String: String] = ["status": String(status), "text": text]
    for line in text.split(separator: "\n") {
        let words = line.split(separator: " ", maxSplits: 1)
        if words.count == 2 { fields[String(words[0])] = String(words[1]) }
    }
    return fields
}

/// What OpenSlide says of `tiff` (`openslide-show-properties`): its level count and vendor.
private func openSlideLevels(_ tiff: String) -> (levels: String?, vendor: String?, text: String) {
    let log = testRoot + "/openslide-\(UInt32.random(in: 0...UInt32.max)).txt"
    defer { unlink(log) }
    _ = system("openslide-show-properties '\(tiff)' >'\(log)' 2>&1")
    let text = String(decoding: readFile(log), as: UTF8.self)
    func value(_ key: String) -> String? {
        text.split(separator: "\n").first { $0.hasPrefix(key + ": ") }.map { String($0.dropFirst(key.count + 2)).replacingOccurrences(of: "'", with: "") }
    }
    return (value("openslide.level-count"), value("openslide.vendor"), text)
}

private func number(_ text: String?) -> Double { text.flatMap { Double($0.split(separator: " ").last ?? "") } ?? .infinity }

@Suite struct PyramidTIFFCLITests {
    private func folder(_ name: String) -> String {
        let path = testRoot + "/tiff-\(name)-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o755)
        return path
    }

    /// A 770 x 550 grid as a JPEG and a TIFF in one pass: three pages (770 x 550, 385 x 275,
    /// 193 x 138: halved and rounded up, the last the first to fit a tile), JPEG tiles of 256 px
    /// in YCbCr, the later pages reduced-resolution. Page 0 is the JPEG's picture (both JPEG at
    /// the same quality), each smaller page page 0 averaged 2x2 (and far from it shifted by a
    /// pixel), the last tile whole with the edge repeated; libvips reads every page as tifffile
    /// does, and OpenSlide sees three levels.
    @Test func theTIFFIsAPyramidIndependentReadersOpen() {
        let directory = folder("pyramid")
        defer { _ = system("rm -rf '\(directory)'") }
        let run = runTessera(["grid", fixtures, "-o", directory + "/g.jpg", "--tiff", directory + "/g.tif",
                              "--grid", "7x5", "--tile-size", "110", "--no-progress", "--temp-dir", directory])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("g.tif") && run.output.contains("a TIFF of 3 levels"), "\(run.output)")
        let checked = checkTIFF(directory + "/g.tif", jpeg: directory + "/g.jpg")
        let text = checked["text"] ?? ""
        #expect(checked["status"] == "0", "\(text)")
        #expect(checked["pages"] == "3" && checked["levels"] == "3" && checked["bigtiff"] == "False", "\(text)")
        #expect(checked["shapes"] == "770x550 385x275 193x138", "\(text)")
        #expect(checked["reduced"] == "True" && checked["jpeg_tiles"] == "True", "\(text)")
        #expect(number(checked["jpeg_mad"]) < 2, "\(text)")
        #expect(number(checked["levels_mad"]) < 6 && number(checked["levels_mad"]) * 2 < number(checked["shifted_mad"]), "\(text)")
        // 770 px is 3 tiles and 2 px: the last tile is 256 px wide all the same.
        #expect(checked["edge_tile"]?.hasPrefix("256x256 ") == true && number(checked["edge_tile"]) < 3, "\(text)")
        #expect(number(checked["vips_mad"]) < 1 && checked["vips_pages"] == "3", "\(text)")
        let slide = openSlideLevels(directory + "/g.tif")
        #expect(slide.levels == "3" && slide.vendor == "generic-tiff", "\(slide.text)")
        let left = listNames(directory).filter { $0.hasPrefix(".") }
        #expect(left.isEmpty, "nothing hidden is left: \(left)")
    }

    /// JPEG, Deep Zoom folder, SZI and TIFF in one pass (the TIFF's jobs run in the pyramid's
    /// batches): every output is there, and the TIFF's pages are pixel for pixel those of a TIFF
    /// rendered alone.
    @Test func everyOutputInOnePass() {
        let directory = folder("all")
        defer { _ = system("rm -rf '\(directory)'") }
        let shape = ["--grid", "9x4", "--tile-size", "100", "--no-progress", "--temp-dir", directory]
        let all = runTessera(["grid", fixtures, "-o", directory + "/a.jpg", "--dzi", directory + "/a.dzi", "--szi", directory + "/a.szi",
                              "--tiff", directory + "/a.tif"] + shape)
        #expect(all.status == 0, "\(all.output)")
        for name in ["a.jpg", "a.dzi", "a.html", "a_files", "a.szi", "a.tif"] {
            #expect(access(directory + "/" + name, F_OK) == 0, "\(name) missing: \(all.output)")
        }
        let alone = runTessera(["grid", fixtures, "--tiff", directory + "/b.tiff"] + shape)
        #expect(alone.status == 0, "\(alone.output)")
        let compare = """
        import sys, tifffile, numpy as np
        a, b = tifffile.TiffFile(sys.argv[1]), tifffile.TiffFile(sys.argv[2])
        print(len(a.pages), len(b.pages), all(np.array_equal(p.asarray(), q.asarray()) for p, q in zip(a.pages, b.pages)))
        """
        writeFile(Array(compare.utf8), to: directory + "/compare.py")
        let status = system("python3 '\(directory)/compare.py' '\(directory)/a.tif' '\(directory)/b.tiff' >'\(directory)/log' 2>&1")
        let log = String(decoding: readFile(directory + "/log"), as: UTF8.self)
        #expect(status == 0 && log == "3 3 True\n", "\(log)")
    }

    /// Three shards of a JPEG, a Deep Zoom pyramid and a TIFF, joined: the TIFF is the pyramid
    /// the independent readers open (as the one-process render's: three pages, OpenSlide's three
    /// levels, page 0 the joined JPEG's picture), pixel for pixel the one-process render's TIFF;
    /// joined again to a path given with --tiff (the parts' own path now exists); and a join asked
    /// for a TIFF the parts do not hold is refused.
    @Test func shardsAndTheirJoinWriteTheTIFF() {
        let directory = folder("shards")
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory + "/parts", 0o755)
        mkdir(directory + "/plain", 0o755)
        let shape = ["--grid", "7x5", "--tile-size", "110", "--no-progress", "--temp-dir", directory]
        let outputs = ["-o", directory + "/s.jpg", "--dzi", directory + "/s.dzi", "--tiff", directory + "/s.tif"]
        for k in 1...3 {
            let shard = runTessera(["grid", fixtures] + outputs + shape + ["--shard", "\(k)/3", "--shard-dir", directory + "/parts"])
            #expect(shard.status == 0, "shard \(k): \(shard.output)")
        }
        let join = runTessera(["join", directory + "/parts", "--no-progress"])
        #expect(join.status == 0 && join.output.contains("s.tif (a TIFF of 3 levels"), "\(join.output)")
        let checked = checkTIFF(directory + "/s.tif", jpeg: directory + "/s.jpg")
        let text = checked["text"] ?? ""
        #expect(checked["status"] == "0" && checked["pages"] == "3" && checked["shapes"] == "770x550 385x275 193x138", "\(text)")
        #expect(checked["reduced"] == "True" && checked["jpeg_tiles"] == "True" && number(checked["jpeg_mad"]) < 2, "\(text)")
        #expect(number(checked["levels_mad"]) < 6 && number(checked["vips_mad"]) < 1 && checked["vips_pages"] == "3", "\(text)")
        #expect(openSlideLevels(directory + "/s.tif").levels == "3")
        let whole = runTessera(["grid", fixtures, "--tiff", directory + "/w.tif"] + shape)
        #expect(whole.status == 0, "\(whole.output)")
        let again = runTessera(["join", directory + "/parts", "--no-progress", "-o", directory + "/t.jpg", "--dzi", directory + "/t.dzi",
                                "--tiff", directory + "/t.tiff"])
        #expect(again.status == 0, "\(again.output)")
        let compare = """
        import sys, tifffile, numpy as np
        pages = [tifffile.TiffFile(path).pages for path in sys.argv[1:]]
        print(*(len(p) for p in pages), all(np.array_equal(a.asarray(), b.asarray()) for p in pages[1:] for a, b in zip(pages[0], p)))
        """
        writeFile(Array(compare.utf8), to: directory + "/compare.py")
        let status = system("python3 '\(directory)/compare.py' '\(directory)/w.tif' '\(directory)/s.tif' '\(directory)/t.tiff' >'\(directory)/log' 2>&1")
        let log = String(decoding: readFile(directory + "/log"), as: UTF8.self)
        #expect(status == 0 && log == "3 3 3 True\n", "\(log)")
        // Parts that hold no TIFF: --tiff is refused, and nothing is written.
        for k in 1...2 {
            let shard = runTessera(["grid", fixtures, "-o", directory + "/n.jpg"] + shape + ["--shard", "\(k)/2", "--shard-dir", directory + "/plain"])
            #expect(shard.status == 0, "\(shard.output)")
        }
        let refused = runTessera(["join", directory + "/plain", "--no-progress", "-o", directory + "/n.jpg", "--tiff", directory + "/n.tif"])
        #expect(refused.status == 2 && refused.output.contains("the parts hold no TIFF"), "\(refused.output)")
        #expect(access(directory + "/n.tif", F_OK) != 0 && access(directory + "/n.jpg", F_OK) != 0)
    }

    /// 70,000 x 100 px, past a JPEG's 65,500: refused with -o, written as a TIFF alone, its ten
    /// pages read back whole.
    @Test func aTIFFMayBeWiderThanAJPEG() {
        let directory = folder("wide")
        defer { _ = system("rm -rf '\(directory)'") }
        let shape = ["--grid", "700x1", "--tile-size", "100", "--no-progress", "--temp-dir", directory]
        let withJPEG = runTessera(["grid", fixtures, "-o", directory + "/w.jpg", "--tiff", directory + "/w.tif"] + shape)
        #expect(withJPEG.status == 2 && withJPEG.output.contains("65500"), "\(withJPEG.output)")
        let run = runTessera(["grid", fixtures, "--tiff", directory + "/w.tif"] + shape)
        #expect(run.status == 0, "\(run.output)")
        let checked = checkTIFF(directory + "/w.tif")
        let text = checked["text"] ?? ""
        #expect(checked["pages"] == "10" && checked["vips_pages"] == "10", "\(text)")
        #expect(checked["shapes"]?.hasPrefix("70000x100 35000x50 17500x25 ") == true && checked["shapes"]?.hasSuffix(" 137x1") == true, "\(text)")
        #expect(number(checked["levels_mad"]) < 6 && number(checked["vips_mad"]) < 1, "\(text)")
    }

    /// A TIFF alone, and with the JPEG and the Deep Zoom pyramid in the same pass, inside the
    /// 64 MiB the render plans for, and the plan not below the peak (by more than the memory
    /// tests allow).
    @Test(arguments: [false, true])
    func theTIFFStaysInsideTheBudget(withOthers: Bool) {
        let directory = folder("memory")
        defer { _ = system("rm -rf '\(directory)'") }
        let arguments = ["grid", fixtures, "--tiff", directory + "/m.tif", "--grid", "60x60", "--tile-size", "150", "--temp-dir", directory]
            + (withOthers ? ["-o", directory + "/m.jpg", "--dzi", directory + "/m.dzi"] : [])
        let run = runMeasured(arguments + ["--no-progress"])
        #expect(run.exitCode == 0, "\(run.output)")
        #expect(run.peakBytes > 4 << 20 && run.peakBytes <= 64 << 20, "peak \(run.peakMiB) MiB over the 64 MiB budget")
        expectPlanCovers(arguments, peakBytes: run.peakBytes, withOthers ? "JPEG, DZI and TIFF" : "TIFF alone")
    }

    /// A render that fails part-way (a file-size limit the TIFF crosses) keeps the TIFF that was
    /// there and leaves no temporary beside it; exit 1 names the cause.
    @Test func aFailedRenderKeepsTheTIFFThatWasThere() {
        let directory = folder("failed")
        defer { _ = system("rm -rf '\(directory)'") }
        writeFile(Array("an older picture".utf8), to: directory + "/w.tif")
        let command = "ulimit -f 64; exec '\(toolPath())' grid '\(fixtures)' --tiff '\(directory)/w.tif' --grid 20x20 "
            + "--tile-size 100 --no-progress --temp-dir '\(directory)' >'\(directory)/log' 2>&1"
        let status = system("sh -c \"\(command)\"")
        let log = String(decoding: readFile(directory + "/log"), as: UTF8.self)
        #expect(status & 0x7F == 0 && (status >> 8) & 0xFF == 1, "status \(status): \(log)")
        #expect(log.contains("File too large"), "\(log)")
        #expect(readFile(directory + "/w.tif") == Array("an older picture".utf8))
        #expect(listNames(directory) == ["log", "w.tif"], "\(listNames(directory))")
    }

    /// What the command line refuses (a name that is not a TIFF's, -o given
    /// a TIFF's name) and what the dry run counts (the file, its spool, its memory), writing
    /// nothing.
    @Test func theCommandLineSaysWhatItNeeds() {
        let directory = folder("flags")
        defer { _ = system("rm -rf '\(directory)'") }
        let grid = ["grid", fixtures, "--grid", "2x2", "--tile-size", "40", "--no-progress", "--temp-dir", directory]
        let wrongName = runTessera(grid + ["--tiff", directory + "/w.png"])
        #expect(wrongName.status == 2 && wrongName.output.contains("--tiff expects a path ending in .tif or .tiff"), "\(wrongName.output)")
        let asJPEG = runTessera(grid + ["-o", directory + "/w.tif"])
        #expect(asJPEG.status == 2 && asJPEG.output.contains("or --tiff"), "\(asJPEG.output)")
        let dry = runTessera(grid + ["--tiff", directory + "/w.TIF", "--dry-run"])
        #expect(dry.status == 0, "\(dry.output)")
        let line = dry.output.split(separator: "\n").first { $0.hasPrefix("tiff ") }.map(String.init) ?? ""
        #expect(line.contains("1 level,") && line.contains("classic TIFF") && line.contains("wait in " + directory)
                && line.contains("of memory"), "\(dry.output)")
        #expect(dry.output.contains("jpeg        none (pyramids only)") && dry.output.contains("free space"), "\(dry.output)")
        #expect(listNames(directory).isEmpty, "a dry run writes nothing")
    }
}
