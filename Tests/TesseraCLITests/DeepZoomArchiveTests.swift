// DeepZoomArchiveTests.swift — issue 30's one-file pyramid through the binary: `--szi` read by an
// independent reader (Python's zipfile) and compared tile for tile with `--dzi`'s folder, alone
// and in one pass with the JPEG and the folder; the archive appears only when complete, and a
// failed render keeps the file that was there.
import Glibc
import Testing

/// Python's zipfile over an SZI: checks every entry's CRC (`testzip`), and prints the entry
/// count, then for each `.jpg` tile whether the file of the same name under FOLDER (NAME_files
/// of a DZI, when given) has the same bytes, and whether NAME/NAME.dzi equals the DZI.
private let zipChecker = """
import sys, zipfile, os
archive, folder = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
z = zipfile.ZipFile(archive)
bad = z.testzip()
print("crc", "ok" if bad is None else "bad " + bad)
names = z.namelist()
print("entries", len(names))
stored = all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
print("stored", stored)
stem = os.path.basename(archive)[:-4]
print("descriptor", (stem + "/" + stem + ".dzi") in names)
tiles = [n for n in names if n.endswith(".jpg")]
print("tiles", len(tiles))
print("layout", all(n.startswith(stem + "/" + stem + "_files/") for n in tiles))
if folder:
    different = 0
    for n in tiles:
        level_file = n.split("_files/", 1)[1]
        with open(os.path.join(folder, level_file), "rb") as f:
            if f.read() != z.read(n): different += 1
    print("different", different)
    count = sum(1 for d, _, fs in os.walk(folder) for f in fs if f.endswith(".jpg") and "/viewer" not in d)
    print("folder_tiles", count)
"""

/// Runs the checker on `archive` (against `folder`'s tiles when given); its lines as a dictionary.
private func checkArchive(_ archive: String, against folder: String? = nil) -> [String: String] {
    let script = testRoot + "/szi-check.py"
    writeFile(Array(zipChecker.utf8), to: script)
    let log = testRoot + "/szi-check-\(UInt32.random(in: 0...UInt32.max)).txt"
    defer { unlink(log) }
    let status = system("python3 '\(script)' '\(archive)' \(folder.map { "'\($0)'" } ?? "") >'\(log)' 2>&1")
    let text = String(decoding: readFile(log), as: UTF8.self)
    var fields: [String: String] = ["status": String(status), "text": text]
    for line in text.split(separator: "\n") {
        let words = line.split(separator: " ", maxSplits: 1)
        if words.count == 2 { fields[String(words[0])] = String(words[1]) }
    }
    return fields
}

@Suite struct DeepZoomArchiveTests {
    private func folder(_ name: String) -> String {
        let path = testRoot + "/szi-\(name)-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o755)
        return path
    }

    /// JPEG, folder and SZI in one pass: the archive holds NAME/NAME.dzi, the viewer's cells.js
    /// and every tile of the folder, byte for byte, stored, with good CRCs.
    @Test func theArchiveHoldsTheFoldersTiles() throws {
        let directory = folder("both")
        defer { _ = system("rm -rf '\(directory)'") }
        let run = runTessera(["grid", fixtures, "-o", directory + "/g.jpg", "--dzi", directory + "/g.dzi", "--szi", directory + "/g.szi",
                              "--grid", "6x4", "--tile-size", "120", "--dzi-tile-size", "126", "--no-progress", "--temp-dir", directory])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("g.szi"), "\(run.output)")
        let checked = checkArchive(directory + "/g.szi", against: directory + "/g_files")
        #expect(checked["status"] == "0" && checked["crc"] == "ok" && checked["stored"] == "True", "\(checked["text"] ?? "")")
        #expect(checked["descriptor"] == "True" && checked["layout"] == "True", "\(checked["text"] ?? "")")
        #expect(checked["different"] == "0", "\(checked["text"] ?? "")")
        let tiles = try #require(Int(checked["tiles"] ?? ""))
        #expect(tiles > 20 && String(tiles) == checked["folder_tiles"], "\(checked["text"] ?? "")")
        #expect(checked["entries"] == String(tiles + 2), "the tiles, the descriptor and the viewer's cells.js: \(checked["text"] ?? "")")
        // The descriptor in the archive is the folder's.
        let unzip = system("cd '\(directory)' && python3 -c \"import zipfile; open('inner.dzi','wb').write(zipfile.ZipFile('g.szi').read('g/g.dzi'))\"")
        #expect(unzip == 0 && readFile(directory + "/inner.dzi") == readFile(directory + "/g.dzi"))
        // Nothing hidden is left beside the outputs (no staging file, no temporary).
        let left = listNames(directory).filter { $0.hasPrefix(".") }
        #expect(left.isEmpty, "\(left)")
    }

    /// A pyramid rendered again without its viewer takes away the page the first render left
    /// (it would look for cells the new folder no longer has, and say the tiles are missing);
    /// a page that is not tessera's stays.
    @Test func aPyramidWithoutItsViewerTakesTheOldPageAway() throws {
        let directory = folder("no-viewer")
        defer { _ = system("rm -rf '\(directory)'") }
        let shape = ["--grid", "3x3", "--tile-size", "60", "--no-progress", "--temp-dir", directory]
        let first = runTessera(["grid", fixtures, "--dzi", directory + "/x.dzi"] + shape)
        #expect(first.status == 0 && access(directory + "/x.html", R_OK) == 0, "\(first.output)")
        let again = runTessera(["grid", fixtures, "--dzi", directory + "/x.dzi", "--no-viewer"] + shape)
        #expect(again.status == 0, "\(again.output)")
        #expect(access(directory + "/x.html", F_OK) != 0, "the old page went with the old pyramid")
        #expect(access(directory + "/x_files/viewer", F_OK) != 0 && access(directory + "/x.dzi", R_OK) == 0)
        writeFile(Array("<p>mine</p>".utf8), to: directory + "/x.html")
        let third = runTessera(["grid", fixtures, "--dzi", directory + "/x.dzi", "--no-viewer"] + shape)
        #expect(third.status == 0, "\(third.output)")
        #expect(readFile(directory + "/x.html") == Array("<p>mine</p>".utf8), "a page tessera did not write is kept")
    }

    /// An SZI alone has the tiles a folder alone would have had (the same render, run twice).
    @Test func anArchiveAloneHasTheTilesOfAFolderAlone() throws {
        let directory = folder("alone")
        defer { _ = system("rm -rf '\(directory)'") }
        let shape = ["--grid", "5x5", "--tile-size", "90", "--no-progress", "--temp-dir", directory]
        let archive = runTessera(["grid", fixtures, "--szi", directory + "/a.szi"] + shape)
        #expect(archive.status == 0, "\(archive.output)")
        #expect(access(directory + "/a.dzi", F_OK) != 0 && access(directory + "/a_files", F_OK) != 0,
                "an SZI alone writes no folder beside it")
        #expect(access(directory + "/a.html", R_OK) == 0, "an SZI alone has its viewer page beside it")
        let pyramid = runTessera(["grid", fixtures, "--dzi", directory + "/a.dzi", "--no-viewer"] + shape)
        #expect(pyramid.status == 0, "\(pyramid.output)")
        #expect(access(directory + "/a.html", R_OK) == 0, "the archive's page stays beside it")
        let checked = checkArchive(directory + "/a.szi", against: directory + "/a_files")
        #expect(checked["crc"] == "ok" && checked["different"] == "0" && checked["tiles"] == checked["folder_tiles"],
                "\(checked["text"] ?? "")")
    }

    /// A render that fails part-way (a file-size limit the archive crosses) keeps the SZI that
    /// was there and leaves no temporary beside it; exit 1 names the cause.
    @Test func aFailedRenderKeepsTheArchiveThatWasThere() {
        let directory = folder("failed")
        defer { _ = system("rm -rf '\(directory)'") }
        writeFile(Array("an older archive".utf8), to: directory + "/w.szi")
        let command = "ulimit -f 64; exec '\(toolPath())' grid '\(fixtures)' --szi '\(directory)/w.szi' --grid 20x20 "
            + "--tile-size 100 --no-progress --temp-dir '\(directory)' >'\(directory)/log' 2>&1"
        let status = system("sh -c \"\(command)\"")
        let log = String(decoding: readFile(directory + "/log"), as: UTF8.self)
        #expect(status & 0x7F == 0 && (status >> 8) & 0xFF == 1, "status \(status): \(log)")
        #expect(log.contains("File too large"), "\(log)")
        #expect(readFile(directory + "/w.szi") == Array("an older archive".utf8))
        let left = listNames(directory).filter { $0.hasPrefix(".") }
        #expect(left.isEmpty, "\(left)")
    }

    /// Shards rendered with a folder pyramid (no overlap) and joined into the JPEG, the folder,
    /// the SZI and the IIIF folder: each is the one-process render's (the SZI entry for entry,
    /// since its order and times are the writer's; the folders byte for byte).
    @Test func shardsJoinedIntoEveryContainerMatchOneProcess() throws {
        let directory = folder("shards")
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/one' '\(directory)/joined' '\(directory)/parts' '\(directory)/x'") == 0)
        let flags = ["grid", fixtures, "--grid", "12x8", "--tile-size", "60", "--dzi-tile-size", "256", "--dzi-overlap", "0", "--encoder", "parallel", "-q"]
        let address = ["--iiif-id", "https://example.org/iiif/w"]
        let whole = runTessera(flags + ["-o", directory + "/one/w.jpg", "--dzi", directory + "/one/w.dzi", "--szi", directory + "/one/w.szi",
                                        "--iiif", directory + "/one/iiif"] + address)
        #expect(whole.status == 0, "\(whole.output)")
        for k in 1...2 {
            let shard = runTessera(flags + ["-o", directory + "/x/w.jpg", "--dzi", directory + "/x/w.dzi", "--shard", "\(k)/2",
                                            "--shard-dir", directory + "/parts"])
            #expect(shard.status == 0, "\(shard.output)")
        }
        let refused = runTessera(flags + ["--szi", directory + "/x/w.szi", "--shard", "1/2", "--shard-dir", directory + "/parts"])
        #expect(refused.status == 2 && refused.output.contains("then 'tessera join DIR --szi"), "\(refused.output)")
        let joined = runTessera(["join", directory + "/parts", "-o", directory + "/joined/w.jpg", "--dzi", directory + "/joined/w.dzi",
                                 "--szi", directory + "/joined/w.szi", "--iiif", directory + "/joined/iiif", "-q"] + address)
        #expect(joined.status == 0, "\(joined.output)")
        for name in ["w.jpg", "w.dzi", "w.html", "w_files", "iiif"] {
            #expect(system("diff -r '\(directory)/one/\(name)' '\(directory)/joined/\(name)'") == 0, "\(name) differs")
        }
        let compare = "import zipfile,sys; a,b=[zipfile.ZipFile(p) for p in sys.argv[1:3]]; "
            + "na,nb=sorted(a.namelist()),sorted(b.namelist()); "
            + "print('same' if na==nb and all(a.read(n)==b.read(n) for n in na) and a.testzip() is None and b.testzip() is None else 'different', len(na))"
        let log = directory + "/zip-compare.txt"
        #expect(system("python3 -c \"\(compare)\" '\(directory)/one/w.szi' '\(directory)/joined/w.szi' >'\(log)' 2>&1") == 0)
        let compared = String(decoding: readFile(log), as: UTF8.self)
        #expect(compared.hasPrefix("same ") && !compared.hasPrefix("same 0"), "\(compared)")
        // A join asked for IIIF of parts whose pyramid overlaps is refused before writing.
        let overlapping = directory + "/overlapping"
        #expect(system("mkdir -p '\(overlapping)/parts'") == 0)
        for k in 1...2 {
            let shard = runTessera(["grid", fixtures, "--grid", "6x4", "--tile-size", "40", "--encoder", "parallel", "-q", "--dzi",
                                    overlapping + "/w.dzi", "--shard", "\(k)/2", "--shard-dir", overlapping + "/parts"])
            #expect(shard.status == 0, "\(shard.output)")
        }
        let noOverlap = runTessera(["join", overlapping + "/parts", "--iiif", overlapping + "/iiif", "-q"] + address)
        #expect(noOverlap.status == 2 && noOverlap.output.contains("IIIF tiles do not overlap"), "\(noOverlap.output)")
        #expect(access(overlapping + "/iiif", F_OK) != 0)
    }

    /// What the command line refuses: a name that is not NAME.szi, an SZI from shards, a
    /// folder and an archive that would need two pyramids, a folder where the SZI's page goes;
    /// the dry run counts the archive's room; --no-viewer leaves the page and cells.js out.
    @Test func theCommandLineSaysWhatItNeeds() {
        let directory = folder("flags")
        defer { _ = system("rm -rf '\(directory)'") }
        let grid = ["grid", fixtures, "--grid", "2x2", "--tile-size", "40", "--no-progress", "--temp-dir", directory]
        let wrongName = runTessera(grid + ["--szi", directory + "/w.zip"])
        #expect(wrongName.status == 2 && wrongName.output.contains("--szi expects a path ending in NAME.szi"), "\(wrongName.output)")
        let sharded = runTessera(grid + ["--szi", directory + "/w.szi", "--shard", "1/2", "--shard-dir", directory])
        #expect(sharded.status == 2 && sharded.output.contains("--szi is written by the join, not by each shard"), "\(sharded.output)")
        let dry = runTessera(grid + ["--szi", directory + "/w.szi", "--dry-run"])
        #expect(dry.status == 0 && dry.output.contains("deep zoom") && dry.output.contains("free space"), "\(dry.output)")
        #expect(access(directory + "/w.szi", F_OK) != 0, "a dry run writes nothing")
        let sameName = runTessera(grid + ["-o", directory + "/w.szi.jpg", "--szi", directory + "/w.szi", "--dzi", directory + "/w.dzi"])
        #expect(sameName.status == 0, "\(sameName.output)")
        // The SZI's viewer page is an output like the others: a folder at its name is refused
        // before any work; --no-viewer writes neither the page nor the archive's cells.js.
        mkdir(directory + "/v.html", 0o755)
        let pageIsAFolder = runTessera(grid + ["--szi", directory + "/v.szi"])
        #expect(pageIsAFolder.status == 2 && pageIsAFolder.output.contains("the Deep Zoom viewer \(directory)/v.html exists and is a folder"),
                "\(pageIsAFolder.output)")
        #expect(access(directory + "/v.szi", F_OK) != 0)
        let noViewer = runTessera(grid + ["--szi", directory + "/n.szi", "--no-viewer"])
        #expect(noViewer.status == 0 && access(directory + "/n.html", F_OK) != 0, "\(noViewer.output)")
        let checked = checkArchive(directory + "/n.szi")
        #expect(checked["crc"] == "ok" && checked["entries"].map { Int($0) } == checked["tiles"].map { Int($0).map { $0 + 1 } },
                "the tiles and the descriptor only: \(checked["text"] ?? "")")
    }
}
