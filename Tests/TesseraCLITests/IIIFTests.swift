// IIIFTests.swift — issue 30's IIIF Image API 3.0 level-0 folder through the binary: the IIIF
// validator (iiif-validator from PyPI, the reference suite of the IIIF community) at level 0
// against a local HTTP server, on the validator's own picture of 100 coloured squares drawn as a
// 10 x 10 grid; and on a pyramid of several levels, every IIIF tile is the Deep Zoom tile of the
// same level and place, named by its region and size as the test computes them.
import Glibc
import Testing

@Suite struct IIIFTests {
    private func folder(_ name: String) -> String {
        let path = testRoot + "/iiif-\(name)-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o755)
        return path
    }

    /// Runs `script` with python3, its output in the returned text; the status beside it.
    private func python(_ script: String, _ arguments: [String], in directory: String) -> (status: Int32, output: String) {
        let path = directory + "/script-\(UInt32.random(in: 0...UInt32.max)).py"
        writeFile(Array(script.utf8), to: path)
        let log = path + ".log"
        let status = system("python3 '\(path)' " + arguments.map { "'\($0)'" }.joined(separator: " ") + " >'\(log)' 2>&1")
        return (status, String(decoding: readFile(log), as: UTF8.self))
    }

    /// The validator's level-0 tests (info.json, the image, the squares' colours, the JPEG, no
    /// `full` size) pass on the folder served by a local HTTP server at the address --iiif-id gave.
    @Test func theIIIFValidatorPassesLevel0() throws {
        let directory = folder("validator")
        defer { _ = system("rm -rf '\(directory)'") }
        // The validator's picture: 10 x 10 squares of 100 px in its colours (ValidationInfo.colorInfo[x][y]).
        mkdir(directory + "/squares", 0o755)
        let made = python("""
        import sys
        from iiif_validator.validator import ValidationInfo
        from PIL import Image
        info = ValidationInfo()
        for y in range(10):
            for x in range(10):
                Image.new("RGB", (100, 100), info.colorInfo[x][y]).save("%s/r%dc%d.png" % (sys.argv[1], y, x))
        """, [directory + "/squares"], in: directory)
        try #require(made.status == 0, "the validator is needed (python3 -m pip install iiif-validator): \(made.output)")
        mkdir(directory + "/served", 0o755)
        mkdir(directory + "/served/prefix", 0o755)
        let port = Int.random(in: 20_000...60_000)
        let render = runTessera(["grid", directory + "/squares", "--grid", "10x10", "--tile-size", "100", "--dzi-tile-size", "1024",
                                 "--iiif", directory + "/served/prefix/squares", "--iiif-id", "http://localhost:\(port)/prefix/squares",
                                 "--no-progress", "--temp-dir", directory])
        try #require(render.status == 0, "\(render.output)")
        // The server runs while the validator does, and is ended after it (bounded: 60 s at most).
        let script = """
        cd '\(directory)/served' || exit 90
        python3 -m http.server \(port) --bind 127.0.0.1 >'\(directory)/http.log' 2>&1 &
        server=$!
        for i in $(seq 50); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:\(port)/prefix/squares/info.json')" 2>/dev/null && break; sleep 0.1; done
        timeout 60 iiif-validate.py -s localhost:\(port) -p prefix -i squares --version=3.0 --level 0 >'\(directory)/validator.log' 2>&1
        status=$?
        kill $server
        exit $status
        """
        writeFile(Array(script.utf8), to: directory + "/validate.sh")
        let status = system("bash '\(directory)/validate.sh'")
        let log = String(decoding: readFile(directory + "/validator.log"), as: UTF8.self)
        #expect(status == 0, "validator exit \(status):\n\(log)")
        #expect(log.contains("id_squares PASS") && log.contains("info_json PASS") && log.contains("0 failures"), "\(log)")
    }

    /// A pyramid of several levels written as Deep Zoom (no overlap, 256 px tiles) and IIIF in one
    /// pass: info.json lists the scale factors from 1 to the one-tile level; every IIIF tile the
    /// test names from the Deep Zoom geometry (region in full-size pixels, size scaled, rounded
    /// up) is there, with the bytes of the Deep Zoom tile; `full/max` is the one-tile level.
    /// Where two levels name the same tile (513 px: "512,512,1,1/1,1" at scale factors 1 and
    /// 2), it is written once, with the finer level's bytes (both levels wrote it, and the
    /// render failed on the second).
    @Test(arguments: [("9x5", "130", "size 1170 650 256", "[1, 2, 4, 8]", "shared 0"),
                      ("1x1", "513", "size 513 513 256", "[1, 2, 4]", "shared 1")])
    func everyTileIsTheDeepZoomTileOfItsPlace(grid: String, cell: String, size: String, factors: String, shared: String) throws {
        let directory = folder("levels-\(cell)")
        defer { _ = system("rm -rf '\(directory)'") }
        let render = runTessera(["grid", fixtures, "--grid", grid, "--tile-size", cell, "--dzi", directory + "/z.dzi", "--no-viewer",
                                 "--iiif", directory + "/wall", "--iiif-id", "https://example.org/iiif/wall",
                                 "--no-progress", "--temp-dir", directory])
        try #require(render.status == 0, "\(render.output)")
        let checked = python("""
        import json, math, os, sys
        d = sys.argv[1]
        info = json.load(open(d + "/wall/info.json"))
        W, H, T = info["width"], info["height"], info["tiles"][0]["width"]
        print("size", W, H, T, info["id"], info["profile"], info["type"])
        max_level = max(0, math.ceil(math.log2(max(W, H))))
        factors, level, missing, different, count, seen, shared = [], max_level, 0, 0, 0, {}, 0
        while True:
            s = 1 << (max_level - level)
            lw, lh = math.ceil(W / s), math.ceil(H / s)
            factors.append(s)
            for row in range(math.ceil(lh / T)):
                for col in range(math.ceil(lw / T)):
                    x, y = col * T * s, row * T * s
                    w, h = min(T * s, W - x), min(T * s, H - y)
                    name = "%s/wall/%d,%d,%d,%d/%d,%d/0/default.jpg" % (d, x, y, w, h, math.ceil(w / s), math.ceil(h / s))
                    count += 1
                    if not os.path.exists(name): missing += 1; continue
                    tile = open("%s/z_files/%d/%d_%d.jpg" % (d, level, col, row), "rb").read()
                    if name in seen: shared += 1; tile = seen[name]
                    else: seen[name] = tile
                    if open(name, "rb").read() != tile: different += 1
            if lw <= T and lh <= T: break
            level -= 1
        print("factors", factors == info["tiles"][0]["scaleFactors"], factors)
        print("tiles", count, "missing", missing, "different", different, "shared", shared)
        whole = open("%s/z_files/%d/0_0.jpg" % (d, level), "rb").read()
        print("max", open(d + "/wall/full/max/0/default.jpg", "rb").read() == whole, info.get("maxWidth") == lw, info["sizes"] == [{"width": lw, "height": lh}])
        """, [directory], in: directory)
        #expect(checked.status == 0, "\(checked.output)")
        #expect(checked.output.contains(size + " https://example.org/iiif/wall level0 ImageService3"), "\(checked.output)")
        #expect(checked.output.contains("factors True " + factors), "\(checked.output)")
        #expect(checked.output.contains("missing 0 different 0 " + shared) && !checked.output.contains("tiles 0 "), "\(checked.output)")
        #expect(checked.output.contains("max True True True"), "\(checked.output)")
        let hidden = listNames(directory).filter { $0.hasPrefix(".") }
        #expect(hidden.isEmpty, "\(hidden)")
    }

    /// What the command line refuses: --iiif without its address, an address that is not a URL,
    /// an overlap, a folder that is somebody else's; a second render replaces the folder it wrote.
    @Test func theCommandLineSaysWhatItNeeds() {
        let directory = folder("flags")
        defer { _ = system("rm -rf '\(directory)'") }
        let grid = ["grid", fixtures, "--grid", "3x2", "--tile-size", "60", "--no-progress", "--temp-dir", directory]
        let noAddress = runTessera(grid + ["--iiif", directory + "/w"])
        #expect(noAddress.status == 2 && noAddress.output.contains("--iiif needs --iiif-id URL"), "\(noAddress.output)")
        let badAddress = runTessera(grid + ["--iiif", directory + "/w", "--iiif-id", "example.org/w"])
        #expect(badAddress.status == 2 && badAddress.output.contains("--iiif-id expects an http or https URL"), "\(badAddress.output)")
        // Viewers append each tile's path to the address: a query, a fragment, a space or a
        // line break in it would break every tile's address.
        for (address, problem) in [("https://e.org/w?token=1", "a query"), ("https://e.org/w#x", "a fragment"),
                                   ("https://e.org/my wall", "byte 0x20"), ("https://e.org/w\nx", "byte 0x0A"),
                                   ("https://e.org/w/", "a trailing slash"), ("https:///w", "no host")] {
            let refused = runTessera(grid + ["--iiif", directory + "/w", "--iiif-id", address])
            #expect(refused.status == 2 && refused.output.contains(problem), "\(address): \(refused.output)")
        }
        for dot in [".", directory + "/w/.", "..", "w/.."] {
            let refused = runTessera(grid + ["--iiif", dot, "--iiif-id", "https://e.org/w"])
            #expect(refused.status == 2 && refused.output.contains("names the folder to create"), "\(dot): \(refused.output)")
        }
        let encoded = runTessera(grid + ["--iiif", directory + "/enc", "--iiif-id", "http://localhost:8080/my%20wall/b-c_d.e~f"])
        #expect(encoded.status == 0, "\(encoded.output)")
        let overlap = runTessera(grid + ["--iiif", directory + "/w", "--iiif-id", "https://e.org/w", "--dzi-overlap", "2"])
        #expect(overlap.status == 2 && overlap.output.contains("IIIF tiles do not overlap"), "\(overlap.output)")
        mkdir(directory + "/mine", 0o755)
        writeFile(Array("keep".utf8), to: directory + "/mine/notes.txt")
        let somebodys = runTessera(grid + ["--iiif", directory + "/mine", "--iiif-id", "https://e.org/mine"])
        #expect(somebodys.status != 0 && somebodys.output.contains("not an IIIF folder tessera wrote"), "\(somebodys.output)")
        #expect(readFile(directory + "/mine/notes.txt") == Array("keep".utf8))
        for _ in 0..<2 {
            let run = runTessera(grid + ["--iiif", directory + "/w", "--iiif-id", "https://e.org/w"])
            #expect(run.status == 0, "\(run.output)")
        }
        #expect(access(directory + "/w/info.json", F_OK) == 0 && access(directory + "/w/full/max/0/default.jpg", F_OK) == 0)
        #expect(listNames(directory).filter { $0.hasPrefix(".") }.isEmpty, "\(listNames(directory))")
        // The folder published holds its marker and the service, not the staging lock.
        #expect(listNames(directory + "/w").filter { $0.hasPrefix(".") } == [".tessera-iiif"], "\(listNames(directory + "/w"))")
        // The lock a replaced folder is given while it is removed, left in it by a kill (the
        // folder put back by the next run): the folder is still tessera's, and replaced (every
        // later render there was refused, "holds .lock").
        writeFile([], to: directory + "/w/.lock")
        let locked = runTessera(grid + ["--iiif", directory + "/w", "--iiif-id", "https://e.org/w"])
        #expect(locked.status == 0, "\(locked.output)")
        #expect(access(directory + "/w/.lock", F_OK) != 0)
        // A file someone put in the folder tessera wrote is named, and kept with the old tiles.
        writeFile(Array("keep".utf8), to: directory + "/w/full/notes.txt")
        let added = runTessera(grid + ["--iiif", directory + "/w", "--iiif-id", "https://e.org/w"])
        #expect(added.status == 2 && added.output.contains("holds full/notes.txt, which tessera did not write there"), "\(added.output)")
        #expect(readFile(directory + "/w/full/notes.txt") == Array("keep".utf8) && access(directory + "/w/info.json", F_OK) == 0)
        // A hand-written page where the viewer's would go is kept, for a folder and for an SZI;
        // the viewer's own page is replaced.
        let page = Array("<h1>My hand-written home page</h1>\n".utf8)
        writeFile(page, to: directory + "/index.html")
        writeFile(page, to: directory + "/gallery.html")
        for (flag, name) in [("--dzi", "index.dzi"), ("--szi", "gallery.szi")] {
            let over = runTessera(grid + [flag, directory + "/" + name])
            #expect(over.status == 2 && over.output.contains("is not a viewer page tessera wrote"), "\(over.output)")
        }
        #expect(readFile(directory + "/index.html") == page && readFile(directory + "/gallery.html") == page)
        #expect(access(directory + "/index_files", F_OK) != 0 && access(directory + "/gallery.szi", F_OK) != 0)
        #expect(runTessera(grid + ["--dzi", directory + "/index.dzi", "--no-viewer"]).status == 0)
        for _ in 0..<2 { #expect(runTessera(grid + ["--dzi", directory + "/v.dzi"]).status == 0) }
    }

    /// An output, or the temporary folder, inside a folder another output replaces whole (the
    /// IIIF folder, the Deep Zoom tiles) is refused before anything is written: it would go with
    /// the old folder (after a run that said it wrote it), or the swap would fail half done.
    @Test func nothingIsWrittenInsideAFolderTheRenderReplaces() {
        let directory = folder("nested")
        defer { _ = system("rm -rf '\(directory)'") }
        let grid = ["grid", fixtures, "--grid", "3x2", "--tile-size", "60", "--no-progress"]
        let iiif = ["--iiif", directory + "/w", "--iiif-id", "https://e.org/w"]
        #expect(runTessera(grid + iiif).status == 0)
        #expect(runTessera(grid + ["--dzi", directory + "/z.dzi"]).status == 0)
        let before = listNames(directory + "/w"), tilesBefore = listNames(directory + "/z_files")
        let refusals: [(arguments: [String], words: String)] = [
            (iiif + ["--dzi", directory + "/w/z.dzi"], "inside the IIIF folder (\(directory)/w), which the render replaces whole: put the Deep Zoom descriptor elsewhere"),
            (iiif + ["--szi", directory + "/w/s.szi"], "inside the IIIF folder"),
            (iiif + ["-o", directory + "/w/x.jpg"], "inside the IIIF folder"),
            (iiif + ["--tiff", directory + "/w/x.tif"], "inside the IIIF folder"),
            (["--dzi", directory + "/z.dzi", "--iiif", directory + "/z_files/iiif", "--iiif-id", "https://e.org/i"],
             "inside the Deep Zoom tiles (\(directory)/z_files)"),
            (["--dzi", directory + "/z.dzi", "--manifest", directory + "/z_files/m.csv"], "put the manifest elsewhere"),
            (["--dzi", directory + "/z.dzi", "--temp-dir", directory + "/z_files"],
             "--temp-dir \(directory)/z_files: the temporary folder is inside the Deep Zoom tiles"),
        ]
        for refusal in refusals {
            let run = runTessera(grid + refusal.arguments)
            #expect(run.status == 2 && run.output.contains(refusal.words), "\(refusal.arguments): \(run.status) \(run.output)")
        }
        #expect(listNames(directory + "/w") == before && listNames(directory + "/z_files") == tilesBefore)
    }
}
