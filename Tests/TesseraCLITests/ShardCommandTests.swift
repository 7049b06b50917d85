// ShardCommandTests.swift — the shard flags, `tessera join` and `tessera analyse --shard` as a
// script runs them: exit codes, messages, and the joined files against the single-process ones.
import Foundation
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

@Suite struct ShardCommandTests {
    /// A join of more parts than the process may open files: it says so, with the limit and
    /// what raises it (it said only "Too many open files"). Under `ulimit -n 20` (soft and hard
    /// alike, so the tool cannot raise it), 24 parts; the same parts join under the usual limit.
    @Test func aJoinPastTheOpenFileLimitSaysWhichLimit() {
        let folder = "\(testRoot)/tessera-fd-limit-\(getpid())"
        defer { _ = system("rm -rf '\(folder)'") }
        #expect(system("mkdir -p '\(folder)/photos' '\(folder)/parts' && cp '\(fixtures)'/*.jpg '\(folder)/photos/'") == 0)
        for k in 1...24 {
            let shard = runTesseraSplit(["grid", folder + "/photos", "-o", folder + "/w.jpg", "--grid", "24x2", "--tile-size", "8",
                                         "--shard", "\(k)/24", "--shard-dir", folder + "/parts", "-q"])
            #expect(shard.status == 0, "\(shard.standardError)")
        }
        let error = folder + "/join.err"
        // The test process's own descriptors are closed first: a child of the runner inherits
        // dozens, and under the limit even the folder's listing failed in CI.
        let limited = "import os, resource; os.closerange(3, 1 << 16); resource.setrlimit(resource.RLIMIT_NOFILE, (20, 20)); "
            + "os.execv('\(toolPath())', ['tessera', 'join', '\(folder)/parts'])"
        let status = system("\(testCacheAssignment) python3 -c \"\(limited)\" 2>'\(error)' </dev/null")
        let said = String(decoding: readFile(error), as: UTF8.self)
        #expect((status >> 8) & 0xFF == 3, "\(said)")
        #expect(said.contains("the join holds every part open at once, and this process may open at most 20 files"), "\(said)")
        #expect(said.contains("ulimit -n") && said.contains("--wait SECONDS"), "\(said)")
        #expect(access(folder + "/w.jpg", F_OK) != 0)
        let join = runTesseraSplit(["join", folder + "/parts", "-q"])
        #expect(join.status == 0, "\(join.standardError)")
        #expect(readFile(folder + "/w.jpg").starts(with: [0xFF, 0xD8]))
    }

    @Test func shardFlagsAreCheckedTogether() throws {
        let base = ["p", "-o", "o.jpg", "--grid", "4x4", "--tile-size", "10"]
        let options = try GridCommand.parse(base + ["--shard", "3/8", "--shard-dir", "parts"])
        #expect(options.shard == ShardTarget(shard: try ShardSpec(number: 3, count: 8), directory: "parts"))
        #expect(options.shard?.partPath == "parts/part-0003-of-0008.tessera-part")
        #expect(throws: CommandLineError("--shard K/N needs --shard-dir DIR, the folder its part goes to (and 'tessera join DIR' reads)")) {
            try GridCommand.parse(base + ["--shard", "1/2"])
        }
        #expect(throws: CommandLineError("--shard-dir is where --shard K/N writes its part: give --shard too")) {
            try GridCommand.parse(base + ["--shard-dir", "parts"])
        }
        for bad in ["0/2", "3/2", "2", "a/b", "1/0", "1/10001"] {
            #expect(throws: CommandLineError.self) { try GridCommand.parse(base + ["--shard", bad, "--shard-dir", "d"]) }
        }
        #expect(throws: CommandLineError.self) {
            try GridCommand.parse(base + ["--shard", "1/2", "--shard-dir", "d", "--encoder", "serial"])
        }
        // An output the join would refuse to write (inside the shard folder) is refused by the shard.
        #expect(throws: CommandLineError("-o parts/o.jpg is inside the shard folder parts, where the join writes nothing (the parts are there): "
                                         + "name the output in another folder")) {
            try GridCommand.parse(["p", "-o", "parts/o.jpg", "--shard", "1/2", "--shard-dir", "parts"])
        }
        #expect(throws: CommandLineError.self) {
            try GridCommand.parse(["p", "-o", "o.jpg", "--dzi", "./parts/deeper/z.dzi", "--shard", "1/2", "--shard-dir", "parts/"])
        }
        let mosaic = try MosaicCommand.parse(["--target", "t.jpg"] + base + ["--shard", "2/2", "--shard-dir", "d"])
        #expect(mosaic.render.shard?.shard.number == 2)
        #expect(try JoinCommand.parse(["parts", "--workers", "3"]) == {
            var join = JoinOptions()
            join.directory = "parts"
            join.workers = 3
            return join
        }())
        #expect(throws: CommandLineError("join needs the shard folder: tessera join DIR")) { try JoinCommand.parse([]) }
        #expect(throws: CommandLineError.self) { try JoinCommand.parse(["a", "b"]) }
        #expect(throws: CommandLineError.self) { try AnalyseCommand.parse(["photos"]) }
        #expect(try AnalyseCommand.parse(["photos", "--tile-size", "20x30", "--shard", "2/5"]).shard == ShardSpec.parse("2/5"))
        // A picture of one pixel has a pyramid of one level: it renders in one process only,
        // and the refusal names the pyramid asked for.
        for (flag, name, words) in [("--tiff", "o.tif", "a TIFF pyramid of a 1 x 1 px picture"),
                                    ("--dzi", "o.dzi", "a Deep Zoom pyramid of a 1 x 1 px picture")] {
            let directory = "\(testRoot)/shard-one-pixel-\(getpid())"
            defer { _ = system("rm -rf '\(directory)'") }
            #expect(system("mkdir -p '\(directory)/parts'") == 0)
            let shard = runTesseraSplit(["grid", fixtures + "/Landscape_1.jpg", "--grid", "1x1", "--tile-size", "1x1",
                                         flag, directory + "/" + name, "--shard", "1/1", "--shard-dir", directory + "/parts", "-q"])
            #expect(shard.status == 2 && shard.standardError.contains(words) && shard.standardError.contains("render it in one process"),
                    "\(shard.standardError)")
        }
    }

    /// Three shards run by the binary and joined: the single-process render's bytes; a part
    /// removed: exit 3, named, nothing written.
    /// More shards than bands: shards 1 and 2 of a one-tile-high picture have empty bands and
    /// hold only previews. A join that waits takes them before the band: every preview is still
    /// written, the same files as one process's (they were dropped, the join exiting 0).
    @Test func aWaitingJoinKeepsThePreviewsOfEmptyBands() throws {
        let directory = "\(testRoot)/tessera-wait-previews-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/one' '\(directory)/out' '\(directory)/parts'") == 0)
        let flags = ["Landscape_1.jpg", "Portrait_1.jpg", "Landscape_3.jpg"].map { fixtures + "/" + $0 }
            + ["--grid", "3x1", "--tile-size", "100", "--previews", "64", "-q"]
        let whole = runTesseraSplit(["grid"] + flags + ["--dzi", directory + "/one/z.dzi"])
        #expect(whole.status == 0, "\(whole.standardError)")
        for k in 1...3 {
            let shard = runTesseraSplit(["grid"] + flags + ["--dzi", directory + "/out/z.dzi", "--shard", "\(k)/3",
                                                            "--shard-dir", directory + "/parts"])
            #expect(shard.status == 0, "\(shard.standardError)")
        }
        let join = runTesseraSplit(["join", directory + "/parts", "--wait", "10", "-q"])
        #expect(join.status == 0, "\(join.standardError)")
        let previews = "/z_files/viewer/previews"
        let names = listNames(directory + "/one" + previews).sorted()
        #expect(names.count == 3, "\(names)")
        #expect(listNames(directory + "/out" + previews).sorted() == names)
        for name in names {
            #expect(readFile(directory + "/out" + previews + "/" + name) == readFile(directory + "/one" + previews + "/" + name), "\(name)")
        }
    }

    @Test func joinedFilesAreTheSingleProcessFiles() throws {
        let directory = "\(testRoot)/tessera-shards-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/out' '\(directory)/parts' '\(directory)/ref'") == 0)
        let flags = [fixtures, "--grid", "30x20", "--tile-size", "48x40", "--dzi-tile-size", "62", "--subsampling", "444",
                     "--title", "Shards"]
        let whole = runTesseraSplit(["grid"] + flags + ["-o", directory + "/ref/w.jpg", "--dzi", directory + "/ref/w.dzi",
                                                        "--encoder", "parallel", "-q"])
        #expect(whole.status == 0, "\(whole.standardError)")
        for k in 1...3 {
            let shard = runTesseraSplit(["grid"] + flags + ["-o", directory + "/out/w.jpg", "--dzi", directory + "/out/w.dzi",
                                                            "--shard", "\(k)/3", "--shard-dir", directory + "/parts"])
            #expect(shard.status == 0, "\(shard.standardError)")
            #expect(shard.standardOutput.contains("wrote shard \(k)/3 to \(directory)/parts/part-000\(k)-of-0003.tessera-part"))
            #expect(shard.standardOutput.contains("when all 3 shard(s) are done: tessera join \(directory)/parts"))
        }
        #expect(system("ls '\(directory)/out' | grep -q .") != 0)  // nothing before the join
        let nowhere = runTesseraSplit(["grid"] + flags + ["-o", directory + "/out/w.jpg", "--dzi", directory + "/out/w.dzi", "--shard", "1/3",
                                                          "--shard-dir", directory + "/none"])
        #expect(nowhere.status == 2 && nowhere.standardError.contains("--shard-dir \(directory)/none/part-0001-of-0003.tessera-part: the folder"),
                "\(nowhere.standardError)")
        #expect(system("cp -r '\(directory)/parts' '\(directory)/missing' && rm '\(directory)/missing/part-0002-of-0003.tessera-part'") == 0)
        let refused = runTesseraSplit(["join", directory + "/missing"])
        #expect(refused.status == 3)
        #expect(refused.standardError.contains("shard(s) 2 of 3 have no part yet"))
        #expect(system("ls '\(directory)/out' | grep -q .") != 0)
        let joined = runTesseraSplit(["join", directory + "/parts", "--progress", "json"])
        #expect(joined.status == 0, "\(joined.standardError)")
        #expect(joined.standardOutput.contains("joined 3 part(s) from \(directory)/parts"))
        let summary = jsonLines(joined.standardError).last { $0["event"] as? String == "summary" }
        #expect(summary?["shards"] as? Int == 3)
        #expect(system("diff -r '\(directory)/ref' '\(directory)/out'") == 0)
    }

    /// A sharded render's JSON manifest lists what every shard drew as a placeholder or in part
    /// (it listed shard 1's only, written by shard 1 before the join): the join writes it from
    /// part 1's cells and every part's notes, the single process's manifest; a CSV one too. A
    /// join given its outputs must be given the manifest, at a name of the parts' format.
    @Test func aShardedManifestIsTheSingleProcessManifest() throws {
        let directory = "\(testRoot)/tessera-shard-manifest-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/photos' '\(directory)/out' '\(directory)/parts' '\(directory)/ref' "
                       + "&& cp '\(fixtures)'/*.jpg '\(directory)/photos/'") == 0)
        // 18 photos in 18 cells, each once: two photos cut short, drawn in part by the first shard
        // alone (Portrait_8, in the top row at this seed) and the last alone (Landscape_1, in the
        // bottom row). The manifest lists them by path, whichever decode ended first.
        for name in ["Landscape_1.jpg", "Portrait_8.jpg"] {
            let whole = readFile(fixtures + "/" + name)
            writeFile(Array(whole.prefix(whole.count / 3)), to: directory + "/photos/" + name)
        }
        writeFile(Array("not a photo".utf8), to: directory + "/photos/zz.jpg")
        let flags = [directory + "/photos", "--grid", "3x6", "--tile-size", "40x30", "--order", "shuffle", "--seed", "3", "-q"]
        for format in ["json", "csv"] {
            let whole = runTesseraSplit(["grid"] + flags + ["-o", directory + "/ref/w.jpg", "--manifest", directory + "/ref/m." + format,
                                                            "--encoder", "parallel"])
            #expect(whole.status == 0, "\(whole.standardError)")
            for k in 1...3 {
                let shard = runTesseraSplit(["grid"] + flags + ["-o", directory + "/out/w.jpg", "--manifest", directory + "/out/m." + format,
                                                                "--shard", "\(k)/3", "--shard-dir", directory + "/parts"])
                #expect(shard.status == 0, "\(shard.standardError)")
            }
            #expect(!FileManager.default.fileExists(atPath: directory + "/out/m." + format))  // nothing before the join
            let refused = runTesseraSplit(["join", directory + "/parts", "-o", directory + "/out/given.jpg"])
            #expect(refused.status == 2 && refused.standardError.contains("give --manifest PATH as well"), "\(refused.standardError)")
            let other = format == "json" ? "csv" : "json"
            let wrongName = runTesseraSplit(["join", directory + "/parts", "-o", directory + "/out/given.jpg",
                                             "--manifest", directory + "/out/given." + other])
            #expect(wrongName.status == 2 && wrongName.standardError.contains("the parts hold a \(format.uppercased()) manifest"),
                    "\(wrongName.standardError)")
            let joined = runTesseraSplit(["join", directory + "/parts"])
            #expect(joined.status == 0, "\(joined.standardError)")
            #expect(joined.standardOutput.contains("the manifest \(directory)/out/m.\(format)"), "\(joined.standardOutput)")
            #expect(readFile(directory + "/out/w.jpg") == readFile(directory + "/ref/w.jpg"))
            #expect(String(decoding: readFile(directory + "/out/m." + format), as: UTF8.self)
                    == String(decoding: readFile(directory + "/ref/m." + format), as: UTF8.self))
            _ = system("rm -f '\(directory)'/out/* '\(directory)'/parts/*")
        }
        let reference = try #require(try JSONSerialization.jsonObject(with: Data(readFile(directory + "/ref/m.json"))) as? [String: Any])
        let partial = (reference["partial"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        #expect(partial == [directory + "/photos/Landscape_1.jpg", directory + "/photos/Portrait_8.jpg"], "\(partial)")
        let rows = String(decoding: readFile(directory + "/ref/m.csv"), as: UTF8.self)
        #expect(rows.contains("1,0,\(directory)/photos/Portrait_8.jpg") && rows.contains("0,5,\(directory)/photos/Landscape_1.jpg"), "\(rows)")
        #expect(reference["skipped_count"] as? Int == 1)
    }

    /// A mosaic's shards each analyse and match (the same assignment from the same seed) and
    /// render their band: joined, the single-process mosaic.
    @Test func aShardedMosaicIsTheSingleProcessMosaic() throws {
        let directory = "\(testRoot)/tessera-mosaic-shards-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/out' '\(directory)/parts' '\(directory)/ref'") == 0)
        let flags = ["--target", fixtures + "/Portrait_3.jpg", fixtures, "--grid", "24x30", "--tile-size", "32", "--min-distance", "0",
                     "--max-uses", "400", "--tint", "15", "--cache-dir", directory + "/cache", "--seed", "5", "-q"]
        let whole = runTesseraSplit(["mosaic"] + flags + ["-o", directory + "/ref/m.jpg", "--dzi", directory + "/ref/m.dzi", "--encoder", "parallel"])
        #expect(whole.status == 0, "\(whole.standardError)")
        for k in 1...2 {
            let shard = runTesseraSplit(["mosaic"] + flags + ["-o", directory + "/out/m.jpg", "--dzi", directory + "/out/m.dzi",
                                                              "--shard", "\(k)/2", "--shard-dir", directory + "/parts"])
            #expect(shard.status == 0, "\(shard.standardError)")
        }
        let joined = runTesseraSplit(["join", directory + "/parts", "-q"])
        #expect(joined.status == 0, "\(joined.standardError)")
        #expect(system("diff -r '\(directory)/ref' '\(directory)/out'") == 0)
    }

    /// A shard killed with SIGKILL mid-render leaves no part under any name join reads.
    @Test func aKilledShardLeavesNoPart() throws {
        let directory = "\(testRoot)/tessera-killed-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/parts'") == 0)
        let command = "'\(toolPath())' grid '\(fixtures)' -o '\(directory)/w.jpg' --grid 1000x600 --tile-size 64 --shard 1/2 "
            + "--shard-dir '\(directory)/parts' -q & pid=$!; sleep 0.5; kill -9 $pid; wait $pid; echo $? > '\(directory)/status'"
        writeFile(Array(command.utf8), to: directory + "/kill.sh")
        #expect(system("bash '\(directory)/kill.sh'") == 0)
        #expect(String(decoding: readFile(directory + "/status"), as: UTF8.self).hasPrefix("137"), "the shard finished before the kill")
        let visible = ((try? FileManager.default.contentsOfDirectory(atPath: directory + "/parts")) ?? []).filter { !$0.hasPrefix(".") }
        #expect(visible.isEmpty, "\(visible)")
        let join = runTesseraSplit(["join", directory + "/parts"])
        #expect(join.status == 3 && join.standardError.contains("holds no part files"))
    }

    /// Two analyse shards fill their own index files; the mosaic then analyses nothing.
    @Test func analyseShardsFillTheIndexAMosaicMerges() throws {
        let directory = "\(testRoot)/tessera-analyse-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/cache'") == 0)
        for k in 1...2 {
            let run = runTesseraSplit(["analyse", fixtures, "--tile-size", "40", "--cache-dir", directory + "/cache", "--shard", "\(k)/2"])
            #expect(run.status == 0, "\(run.standardError)")
            #expect(run.standardOutput.contains("analysed share \(k)/2 of the photos"))
        }
        let files = featureIndexFiles(directory + "/cache")
        #expect(files == ["features-k3-a1.0000.shard-1-of-2.idx", "features-k3-a1.0000.shard-2-of-2.idx"])
        let mosaic = runTesseraSplit(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", directory + "/m.jpg",
                                      "--grid", "12x8", "--tile-size", "40", "--min-distance", "0", "--cache-dir", directory + "/cache",
                                      "--progress", "json"])
        #expect(mosaic.status == 0, "\(mosaic.standardError)")
        let summary = jsonLines(mosaic.standardError).last { $0["event"] as? String == "summary" }
        let fields = summary?["mosaic"] as? [String: Any] ?? summary ?? [:]
        #expect(fields["analysed"] as? Int == 0, "\(mosaic.standardError)")
        #expect((fields["reused"] as? Int ?? 0) > 0)
    }
}

/// The three parts of a small grid (JPEG and pyramid) rendered by the binary, made once per test
/// process from copies of the fixtures in `photos/`, with `out/` empty: each hostile-part test
/// copies it and edits the copy.
private let hostileBase: String = {
    let base = "\(testRoot)/hostile-base"
    let made = system("mkdir -p '\(base)/photos' '\(base)/parts' '\(base)/out' && cp '\(fixtures)'/Landscape_*.jpg '\(base)/photos/'") == 0
    precondition(made, "cannot make \(base)")
    for k in 1...3 {
        let shard = runTesseraSplit(["grid", base + "/photos", "--grid", "12x8", "--tile-size", "40x30", "--dzi-tile-size", "62",
                                     "-o", base + "/out/w.jpg", "--dzi", base + "/out/w.dzi", "--tiff", base + "/out/w.tif",
                                     "--previews", "64", "--shard", "\(k)/3",
                                     "--shard-dir", base + "/parts", "-q"])
        precondition(shard.status == 0, shard.standardError)
    }
    return base
}()

/// Every regular file under `root` with its bytes (symbolic links by their target).
private func snapshot(_ root: String) -> [String: [UInt8]] {
    var files: [String: [UInt8]] = [:]
    let enumerator = FileManager.default.enumerator(atPath: root)
    while let name = enumerator?.nextObject() as? String {
        let path = root + "/" + name
        var info = stat()
        guard lstat(path, &info) == 0 else { continue }
        switch info.st_mode & S_IFMT {
        case S_IFREG: files[name] = readFile(path)
        case S_IFLNK: files[name] = Array(((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "").utf8)
        default: files[name] = []
        }
    }
    return files
}

@Suite struct HostilePartTests {
    /// A copy of the base (`folder`), with "old picture" at out/w.jpg: a join refused must leave it.
    private func copyOfBase(_ name: String) -> String {
        let folder = "\(testRoot)/hostile-\(name)"
        _ = system("rm -rf '\(folder)'")
        #expect(system("cp -a '\(hostileBase)' '\(folder)'") == 0)
        // The parts name the base's outputs: pointed at this copy's (every part alike, resealed).
        for k in 1...3 {
            var edited = PartEditor(path: part(folder, k))
            edited.setHeader("jpeg", folder + "/out/w.jpg")
            edited.setHeader("dzi", folder + "/out/w.dzi")
            edited.setHeader("tiff", folder + "/out/w.tif")
            edited.write(to: part(folder, k))
        }
        writeFile(Array("old picture".utf8), to: folder + "/out/w.jpg")
        return folder
    }

    private func part(_ folder: String, _ k: Int) -> String { folder + "/parts/part-000\(k)-of-0003.tessera-part" }

    /// Joins `folder`'s parts (with -o and --dzi naming out/, unless `given` is false): expects
    /// exit `status`, stderr naming `words`, never the photo wording, and photos, parts and
    /// outputs as they were.
    @discardableResult
    private func expectRefused(_ folder: String, status: Int32 = 3, saying words: [String], given: Bool = true,
                               extra: [String] = [], parts: Bool = true) -> String {
        // (`parts` false: not read back, for a sparse part of gigabytes.)
        let before = (snapshot(folder + "/photos"), parts ? snapshot(folder + "/parts") : [:], snapshot(folder + "/out"))
        let outputs = given ? ["-o", folder + "/out/w.jpg", "--dzi", folder + "/out/w.dzi", "--tiff", folder + "/out/w.tif"] : []
        let join = runTesseraSplit(["join", folder + "/parts"] + outputs + extra + ["--no-progress"])
        #expect(join.status == status, "\(join.standardError)")
        for word in words { #expect(join.standardError.contains(word), "expected '\(word)' in: \(join.standardError)") }
        #expect(!join.standardError.contains("cannot read photo"), "\(join.standardError)")
        #expect(snapshot(folder + "/photos") == before.0, "a photo changed")
        if parts { #expect(snapshot(folder + "/parts") == before.1, "a part changed") }
        #expect(snapshot(folder + "/out") == before.2, "the outputs changed")
        return join.standardError
    }

    /// The base joins (given its outputs) into a JPEG: the edits below are what is refused.
    @Test func theUneditedPartsJoin() {
        let folder = copyOfBase("unedited")
        defer { _ = system("rm -rf '\(folder)'") }
        let join = runTesseraSplit(["join", folder + "/parts", "-o", folder + "/out/w.jpg", "--dzi", folder + "/out/w.dzi",
                                    "--tiff", folder + "/out/w.tif", "-q"])
        #expect(join.status == 0, "\(join.standardError)")
        #expect(readFile(folder + "/out/w.jpg").starts(with: [0xFF, 0xD8]))
        #expect(readFile(folder + "/out/w.tif").starts(with: Array("II*".utf8)))
        // Every photo's preview (the 9 landscapes), gathered from the three parts.
        #expect(listNames(folder + "/out/w_files/viewer/previews").count == 9, "\(listNames(folder + "/out/w_files/viewer"))")
        _ = system("rm -f '\(folder)/out/w.tif'")
        // Without -o the JPEG, which exists, comes from the parts: refused, not replaced.
        writeFile(Array("old picture".utf8), to: folder + "/out/w.jpg")
        _ = system("rm -rf '\(folder)/out/w.dzi' '\(folder)/out/w_files' '\(folder)/out/w.html'")
        expectRefused(folder, status: 2, saying: ["w.jpg", "comes from the parts", "-o PATH"], given: false)
    }

    /// Huge numbers in the footer and the index: exit 3 naming the part, never a trap.
    @Test func hugeFooterAndIndexNumbersAreRefusedNotTrapped() {
        let folder = copyOfBase("footer")
        defer { _ = system("rm -rf '\(folder)'") }
        let original = PartEditor(path: part(folder, 2))
        let values: [UInt64] = [UInt64.max, UInt64.max - 7, UInt64(Int64.max), 1 << 63, 1 << 40, UInt64(original.bytes.count)]
        for field in PartEditor.FooterField.allCases {
            for value in values {
                var edited = original
                edited[field] = value
                edited.write(to: part(folder, 2))
                expectRefused(folder, saying: ["part-0002-of-0003.tessera-part"])
            }
        }
        for (offset, wide) in [(16, true), (24, true), (4, false), (8, false), (12, false)] {
            for value in [UInt64.max, UInt64(Int64.max), UInt64(UInt32.max)] {
                var edited = original
                if wide { edited.setRecord64(0, offset, value) } else { edited.setRecord32(0, offset, UInt32(truncatingIfNeeded: value)) }
                edited.reseal()  // consistent checksums: only the range checks can refuse it
                edited.write(to: part(folder, 2))
                expectRefused(folder, saying: ["part-0002-of-0003.tessera-part"])
            }
        }
    }

    /// Header values no render makes: exit 3 naming the part.
    @Test func impossibleHeaderValuesAreRefused() {
        let folder = copyOfBase("header")
        defer { _ = system("rm -rf '\(folder)'") }
        let original = (1...3).map { PartEditor(path: part(folder, $0)) }
        let cases: [(String, String)] = [("width", "1000000000000"), ("height", "1000000000000"), ("width", "65501"),
                                         ("stripe-count", "99999999999"), ("dz-tile-size", "9223372036854775807"),
                                         ("dz-overlap", "-1"), ("shards", "9223372036854775807"), ("dz-lowest", "99"),
                                         ("dz-reduced-size", "9223372036854775807 9223372036854775807"), ("jpeg-stripes", "0 99999999")]
        for (key, value) in cases {
            // Every part edited alike (so they still agree), checksums recomputed.
            for k in 1...3 {
                var edited = original[k - 1]
                edited.setHeader(key, value)
                edited.write(to: part(folder, k))
            }
            expectRefused(folder, saying: ["part-000"])
        }
        // 10^12 x 10^12 named as the claim it is.
        for k in 1...3 {
            var edited = original[k - 1]
            edited.setHeader("width", "1000000000000")
            edited.setHeader("height", "1000000000000")
            edited.write(to: part(folder, k))
        }
        expectRefused(folder, saying: ["part-0001-of-0003.tessera-part claims a picture of 1000000000000 x 1000000000000 px"])
    }

    /// A part's name is someone else's: one with a newline and an escape sequence is named in
    /// the refusal as `\n` and `\x1B`, never a line of its own.
    @Test func aPartNamedToForgeALineIsShownNotObeyed() {
        let folder = copyOfBase("forged-name")
        defer { _ = system("rm -rf '\(folder)'") }
        let forged = folder + "/parts/\u{1B}[31mx\ntessera: joined 3 part(s): all good.tessera-part"
        writeFile(readFile(part(folder, 2)), to: forged)
        let message = expectRefused(folder, saying: ["\\x1B[31mx\\ntessera: joined 3 part(s): all good.tessera-part"], parts: false)
        #expect(!message.split(separator: "\n").contains { $0.hasPrefix("tessera: joined") }, "\(message)")
    }

    /// A fingerprint that is a path: every part saying "x/../../victim" (they agree, checksums
    /// recomputed), with a `.cells-x` folder made ready, had the join remove `victim` beside the
    /// shard folder once it had written its outputs. Refused before anything is written.
    @Test func aFingerprintThatIsAPathIsRefused() {
        let folder = copyOfBase("fingerprint")
        defer { _ = system("rm -rf '\(folder)'") }
        mkdir(folder + "/victim", 0o755)
        writeFile(Array("precious".utf8), to: folder + "/victim/notes.txt")
        mkdir(folder + "/parts/.cells-x", 0o755)
        let original = (1...3).map { PartEditor(path: part(folder, $0)) }
        for fingerprint in ["x/../../victim", "x/../../victim/notes.txt", "", "ABCDEF0123456789abcdef0123456789"] {
            for k in 1...3 {
                var edited = original[k - 1]
                edited.setHeader("fingerprint", fingerprint)
                edited.write(to: part(folder, k))
            }
            expectRefused(folder, saying: ["part-0001-of-0003.tessera-part has no valid description of its render"])
            #expect(readFile(folder + "/victim/notes.txt") == Array("precious".utf8), "\(fingerprint)")
        }
    }

    /// The TIFF's share of the parts edited as a careful attacker would (checksums recomputed):
    /// settings no render has, a band split elsewhere or at the last page, a reduced picture of
    /// another size, tiles moved out of the TIFF, onto another's place or shortened past a JPEG,
    /// reduced rows out of order, another TIFF named by one part. Exit 3 naming the part, or 4
    /// for a tile longer than the join's budget allows; nothing written.
    @Test func editedTIFFSharesAreRefused() throws {
        let folder = copyOfBase("tiff")
        defer { _ = system("rm -rf '\(folder)'") }
        let original = (1...3).map { PartEditor(path: part(folder, $0)) }
        let lowest = try #require(original[0].header.first { $0.key == "tiff-lowest" }?.value)
        for (key, value) in [("tiff-tile-size", "0"), ("tiff-tile-size", "17"), ("tiff-tile-size", "1073741824"), ("tiff-quality", "0"),
                             ("tiff-quality", "101"), ("tiff-lowest", "0"), ("tiff-lowest", "99"), ("tiff-lowest", String(Int(lowest)! - 1)),
                             ("tiff-reduced-size", "9223372036854775807 9223372036854775807"), ("tiff-reduced-size", "1 1")] {
            for k in 1...3 {
                var edited = original[k - 1]
                edited.setHeader(key, value)
                edited.write(to: part(folder, k))
            }
            expectRefused(folder, saying: ["part-000"])
        }
        for k in 1...3 { original[k - 1].write(to: part(folder, k)) }
        // (The picture is one TIFF tile high: part 1 holds the TIFF's tiles; part 2 reduced rows.)
        guard let tile = original[0].firstRecord(kind: 6), let rows = original[1].firstRecord(kind: 7) else {
            Issue.record("the parts hold no TIFF tile or reduced row")
            return
        }
        let edits: [(Int, String, (inout PartEditor) -> Void, [String])] = [
            (1, "a TIFF tile past the last level", { $0.setRecord32(tile, 4, 99) }, ["which is out of the TIFF or held twice"]),
            (1, "a TIFF tile past the columns", { $0.setRecord32(tile, 8, 4000) }, ["which is out of the TIFF or held twice"]),
            (1, "a TIFF tile in another's place", { part in
                let other = (0..<part.recordCount).first { $0 != tile && part.record32($0, 0) == 6 }!
                for field in [4, 8, 12] { part.setRecord32(other, field, part.record32(tile, field)) }
            }, ["held twice"]),
            (1, "a TIFF tile as a reduced row", { $0.setRecord32(tile, 0, 7) }, []),
            (2, "a reduced row out of order", { $0.setRecord32(rows, 4, $0.record32(rows, 4) + 1) }, ["reduced rows of the TIFF do not follow"]),
            (2, "a reduced row of the TIFF as a Deep Zoom tile", { $0.setRecord32(rows, 0, 3) }, []),
        ]
        for (k, what, edit, words) in edits {
            var edited = original[k - 1]
            edit(&edited)
            edited.reseal()
            edited.write(to: part(folder, k))
            let said = expectRefused(folder, saying: ["part-000\(k)-of-0003.tessera-part"] + words)
            #expect(!said.isEmpty, "\(what)")
            original[k - 1].write(to: part(folder, k))
        }
        // Part 2 names another TIFF: refused as a part of another render's outputs.
        var other = original[1]
        other.setHeader("tiff", folder + "/out/x.tif")
        other.write(to: part(folder, 2))
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part names other outputs"])
        // The viewer's previews: a second of one photo, one past a JPEG's size, previews in a
        // render the parts say had none.
        guard let preview = original[1].firstRecord(kind: 8) else {
            Issue.record("part 2 holds no preview")
            return
        }
        var twice = original[1]
        let second = (0..<twice.recordCount).first { $0 != preview && twice.record32($0, 0) == 8 }!
        twice.setRecord32(second, 4, twice.record32(preview, 4))
        twice.reseal()
        twice.write(to: part(folder, 2))
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part holds a second preview of photo"])
        for k in 1...3 {
            var edited = original[k - 1]
            edited.setHeader("dz-previews", "9999")
            edited.write(to: part(folder, k))
        }
        expectRefused(folder, saying: ["has previews no render has"])
        for k in 1...3 { original[k - 1].write(to: part(folder, k)) }
        // Part 2 alone describes other TIFF settings: refused, though part 1 decides them.
        var settings = original[1]
        settings.setHeader("tiff-quality", "50")
        settings.write(to: part(folder, 2))
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part describes the render otherwise than the first part (tiff-quality)"])
    }

    /// Parts of a TIFF alone, forged as a careful attacker would: a picture that fits in one tile
    /// (which no shard writes: the join's checks have no level to compare with) is refused, not
    /// trapped; a relative path from the parts is refused rather than written where the join runs.
    @Test func forgedTIFFOnlyPartsAreRefused() {
        let folder = "\(testRoot)/hostile-tiff-only"
        _ = system("rm -rf '\(folder)' && mkdir -p '\(folder)/parts' '\(folder)/out'")
        defer { _ = system("rm -rf '\(folder)'") }
        for k in 1...2 {
            let shard = runTesseraSplit(["grid", fixtures, "--grid", "12x8", "--tile-size", "40x30", "--tiff", folder + "/out/w.tif",
                                         "--shard", "\(k)/2", "--shard-dir", folder + "/parts", "-q"])
            #expect(shard.status == 0, "\(shard.standardError)")
        }
        let parts = (1...2).map { folder + "/parts/part-000\($0)-of-0002.tessera-part" }
        let original = parts.map { PartEditor(path: $0) }
        func edit(_ changes: [(String, String)], given: Bool, status: Int32, saying words: String) {
            for (k, path) in parts.enumerated() {
                var edited = original[k]
                for (key, value) in changes { edited.setHeader(key, value) }
                edited.write(to: path)
            }
            let join = runTesseraSplit(["join", folder + "/parts", "--no-progress"] + (given ? ["--tiff", folder + "/out/w.tif"] : []))
            #expect(join.status == status && join.standardError.contains(words), "\(join.standardError)")
            #expect(listNames(folder + "/out").isEmpty)
        }
        edit([("width", "200"), ("height", "100")], given: true, status: 3, saying: "band of the TIFF is not valid")
        edit([("width", "1024"), ("height", "1000"), ("tiff-tile-size", "1024")], given: true, status: 3, saying: "band of the TIFF is not valid")
        edit([("tiff", "w.tif")], given: false, status: 2, saying: "a part names this relative path as an output")
        for (k, path) in parts.enumerated() { original[k].write(to: path) }
        let join = runTesseraSplit(["join", folder + "/parts", "-q"])
        #expect(join.status == 0 && access(folder + "/out/w.tif", F_OK) == 0, "\(join.standardError)")
    }

    /// One byte changed in a stripe's segment, in a tile, in the header text: exit 3 naming the
    /// part and the record, nothing written.
    @Test func aChangedByteFailsItsChecksum() throws {
        let folder = copyOfBase("checksum")
        defer { _ = system("rm -rf '\(folder)'") }
        let original = PartEditor(path: part(folder, 2))
        var segment = original
        let index = try #require(segment.firstRecord(kind: 2))
        segment.flipByte(inRecord: index)
        segment.write(to: part(folder, 2))
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part: the segment of stripe \(segment.record32(index, 4))",
                                       "does not match its checksum"])
        var tile = original
        let tileIndex = try #require(tile.firstRecord(kind: 3))
        tile.flipByte(inRecord: tileIndex)
        tile.write(to: part(folder, 2))
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part: the tile ", "does not match its checksum"])
        var header = original
        header.bytes[Int(header[.headerOffset]) + 3] ^= 0x01
        header.write(to: part(folder, 2))
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part has a header and index that do not match their checksum"])
        // A part of the format before checksums: named as another version's.
        var old = original
        old.bytes.replaceSubrange(0..<8, with: Array("TSPART01".utf8))
        old.write(to: part(folder, 2))
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part was made by another version of tessera (part format 01"])
    }

    /// Sparse parts whose footer claims a 256 MiB or 8 GiB header, or an 8 GiB index of zeros:
    /// refused after a few reads, the join's peak RSS far below what they claim.
    @Test func aSparsePartIsNotReadIntoMemory() {
        let folder = copyOfBase("sparse")
        defer { _ = system("rm -rf '\(folder)'") }
        let original = PartEditor(path: part(folder, 3))
        let photos = snapshot(folder + "/photos"), outputs = snapshot(folder + "/out")
        for (bytes, index) in [(Int64(256) << 20, false), (Int64(8) << 30, false), (Int64(8) << 30, true)] {
            writeSparsePart(from: original, apparentBytes: bytes, to: part(folder, 3), claimingIndex: index)
            let measured = runMeasured(["join", folder + "/parts", "-o", folder + "/out/w.jpg", "--dzi", folder + "/out/w.dzi", "--no-progress"])
            #expect((measured.status >> 8) & 0xFF == 3, "\(measured.output)")
            #expect(measured.output.contains("part-0003-of-0003.tessera-part"), "\(measured.output)")
            #expect(measured.peakBytes < 48 << 20, "sparse part of \(bytes >> 20) MiB: join peak RSS \(measured.peakMiB) MiB")
            print("hostile sparse part of \(bytes >> 20) MiB (claiming \(index ? "an index" : "a header")): join exit \((measured.status >> 8) & 0xFF), peak RSS \(measured.peakMiB) MiB")
            #expect(snapshot(folder + "/photos") == photos && snapshot(folder + "/out") == outputs)
        }
        expectRefused(folder, saying: ["part-0003-of-0003.tessera-part has a record of an unknown kind (record 1 of"], parts: false)
    }

    /// A part whose index holds 1,200,000 more records (each valid in itself, none holding a
    /// byte): the join would hold 48 MB of index. Refused once the records it may hold (half its
    /// budget) have passed their checks, naming the part and the budget that would hold it
    /// (exit 4, as for any budget too small), inside the budget; with that budget, refused for
    /// what the records say (exit 3).
    @Test func aHugeIndexIsRefusedInsideTheBudget() {
        let folder = copyOfBase("index")
        defer { _ = system("rm -rf '\(folder)'") }
        var edited = PartEditor(path: part(folder, 2))
        edited.appendEmptyRecords(1_200_000, kind: 3)
        edited.write(to: part(folder, 2))
        let outputs = snapshot(folder + "/out")
        let measured = runMeasured(["join", folder + "/parts", "-o", folder + "/out/w.jpg", "--dzi", folder + "/out/w.dzi",
                                    "--tiff", folder + "/out/w.tif", "--no-progress"])
        print("a part of \(edited.recordCount) records: join exit \(measured.exitCode), peak RSS \(measured.peakMiB) MiB")
        #expect(measured.exitCode == 4, "\(measured.output)")
        #expect(measured.output.contains("part-0002-of-0003.tessera-part has an index of \(edited.recordCount) records"),
                "\(measured.output)")
        // Twice the index (its share of the budget), in MiB rounded up.
        let advised = (2 * edited.recordCount * 40 + (1 << 20) - 1) >> 20
        #expect(measured.output.contains("more than 1/2 of the join's memory budget of 64.0 MiB: give --max-memory \(advised).0 MiB or more"),
                "\(measured.output)")
        #expect(measured.output.contains("the part is damaged"), "\(measured.output)")
        #expect(measured.peakBytes <= 64 << 20, "peak \(measured.peakMiB) MiB")
        #expect(snapshot(folder + "/out") == outputs)
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part holds tile ", "out of the pyramid or held twice"],
                      extra: ["--max-memory", "256M"])
    }

    /// Tiles and previews whose bytes are not what the shard's encoder makes (checksums
    /// recomputed): zeros for a Deep Zoom tile, a TIFF tile and a preview; a tile whose frame
    /// says 4:4:4 in a 4:2:0 render; every part claiming 4:4:4 (which would have labelled the
    /// TIFF's subsampling wrongly). Exit 3 naming the part, nothing written.
    @Test func tilesThatAreNotTheRendersJPEGsAreRefused() throws {
        let folder = copyOfBase("tile-bytes")
        defer { _ = system("rm -rf '\(folder)'") }
        let original = (1...3).map { PartEditor(path: part(folder, $0)) }
        for (kind, words) in [(UInt32(3), "which is not a JPEG of that tile's size and 420 sampling"),
                              (UInt32(6), "which is not a JPEG of that tile's size and 420 sampling"),
                              (UInt32(8), "that is not a JPEG of at most")] {
            let k = try #require((1...3).first { original[$0 - 1].firstRecord(kind: kind) != nil }, "no record of kind \(kind)")
            var edited = original[k - 1]
            edited.fill(record: edited.firstRecord(kind: kind)!, with: 0)
            edited.reseal()
            edited.write(to: part(folder, k))
            expectRefused(folder, saying: ["part-000\(k)-of-0003.tessera-part holds ", words])
            original[k - 1].write(to: part(folder, k))
        }
        // One byte of a tile's headers or data changed (checksums resealed), each of which makes
        // a decoder refuse the tile (djpeg: "two SOF markers", "Unsupported JPEG data precision",
        // "Quantization table 0x07 was not defined", "Bogus Huffman table definition", ...).
        let tile = try #require(original[0].firstRecord(kind: 3))
        let start = Int(original[0].record64(tile, 16)), length = Int(original[0].record64(tile, 24))
        func marker(_ code: UInt8) throws -> Int {
            try #require((start..<(start + length - 1)).first { original[0].bytes[$0] == 0xFF && original[0].bytes[$0 + 1] == code })
        }
        let sof = try marker(0xC0), dqt = try marker(0xDB), dht = try marker(0xC4), sos = try marker(0xDA)
        let data = sos + 2 + (Int(original[0].bytes[sos + 2]) << 8 | Int(original[0].bytes[sos + 3]))
        let stuffed = try #require((data..<(start + length - 2)).first { original[0].bytes[$0] == 0xFF && original[0].bytes[$0 + 1] == 0 })
        #expect(original[0].bytes[sof + 11] == 0x22)
        for (what, at, value) in [("luma sampled 1x1 (4:4:4) in a 4:2:0 render", sof + 11, UInt8(0x11)),
                                  ("12-bit samples", sof + 4, 12), ("a second frame header (the DQT's marker)", dqt + 1, 0xC0),
                                  ("a quantisation table numbered 7", dqt + 4, 0x07), ("two Huffman codes of length 1", dht + 5, 2),
                                  ("a scan of no components", sos + 4, 0), ("an unstuffed 0xFF in the data", stuffed + 1, 0x3F),
                                  ("an APP1 segment", dqt + 1, 0xE1), ("EOI before the scan", dqt + 1, 0xD9)] {
            var edited = original[0]
            edited.bytes[at] = value
            edited.reseal()
            edited.write(to: part(folder, 1))
            let said = expectRefused(folder, saying: ["part-0001-of-0003.tessera-part holds tile ", "420 sampling"])
            #expect(!said.isEmpty, "\(what)")
        }
        // Every part claiming 4:4:4: refused at the JPEG's header already.
        for k in 1...3 {
            var edited = original[k - 1]
            edited.setHeader("subsampling", "444")
            edited.write(to: part(folder, k))
        }
        expectRefused(folder, saying: ["part-0001-of-0003.tessera-part", "444 sampling"])
    }

    /// What the viewer runs and the JPEG's data, edited and resealed: part 1's cells.js made to
    /// run code (its start, a key, an expression where a number stands) or to give another
    /// size; a marker inside a stripe's entropy-coded segment (an end of image, which makes the
    /// JPEG end there); a preview of a photo the cells do not name. Each is refused (exit 3),
    /// naming the part, with nothing written.
    @Test func theViewerCellsTheSegmentsAndThePreviewsAreChecked() throws {
        let folder = copyOfBase("cells")
        defer { _ = system("rm -rf '\(folder)'") }
        let original = (1...3).map { PartEditor(path: part(folder, $0)) }
        let cells = try #require(original[0].firstRecord(kind: 5), "part 1 holds no cells")
        let start = Int(original[0].record64(cells, 16)), length = Int(original[0].record64(cells, 24))
        let text = Array(original[0].bytes[start..<(start + length)])
        func place(of words: String) throws -> Int {
            let needle = Array(words.utf8)
            return try #require((0...(text.count - needle.count)).first { Array(text[$0..<($0 + needle.count)]) == needle },
                                "no '\(words)' in cells.js") + start
        }
        for (words, replacement, said) in [("window.TE", "alert(1);", "it does not begin as tessera's does"),
                                           ("name:", "eval:", "a key tessera does not write (eval)"),
                                           ("width: 4", "width:(4", "where a value belongs"),
                                           ("width: 4", "width: 9", "it gives width 9")] {
            var edited = original[0]
            let at = try place(of: words)
            for (i, byte) in replacement.utf8.enumerated() { edited.bytes[at + i] = byte }
            edited.reseal()
            edited.write(to: part(folder, 1))
            expectRefused(folder, saying: ["part-0001-of-0003.tessera-part's viewer cells (cells.js) are not what tessera writes", said])
        }
        original[0].write(to: part(folder, 1))

        let k = try #require((1...3).first { original[$0 - 1].firstRecord(kind: 2) != nil })
        var marked = original[k - 1]
        let segment = marked.firstRecord(kind: 2)!
        let middle = Int(marked.record64(segment, 16) + marked.record64(segment, 24) / 2)
        marked.bytes[middle] = 0xFF
        marked.bytes[middle + 1] = 0xD9
        marked.reseal()
        marked.write(to: part(folder, k))
        expectRefused(folder, saying: ["part-000\(k)-of-0003.tessera-part's segment of stripe", "holds a marker (0xFF 0xD9)"])
        // A segment emptied, its bytes given to the record after it (checksums recomputed):
        // shorter than its blocks can be coded in.
        var emptied = original[k - 1]
        let next = try #require((0..<emptied.recordCount).first { emptied.record64($0, 16) == emptied.record64(segment, 16) + emptied.record64(segment, 24) })
        emptied.setRecord64(next, 16, emptied.record64(segment, 16))
        emptied.setRecord64(next, 24, emptied.record64(next, 24) + emptied.record64(segment, 24))
        emptied.setRecord64(segment, 24, 0)
        emptied.reseal()
        emptied.write(to: part(folder, k))
        expectRefused(folder, saying: ["part-000\(k)-of-0003.tessera-part holds a segment of stripe", "of 0 bytes, fewer than the"])
        original[k - 1].write(to: part(folder, k))

        let p = try #require((1...3).first { original[$0 - 1].firstRecord(kind: 8) != nil })
        var stray = original[p - 1]
        stray.setRecord32(stray.firstRecord(kind: 8)!, 4, 99_999)
        stray.reseal()
        stray.write(to: part(folder, p))
        expectRefused(folder, saying: ["part-000\(p)-of-0003.tessera-part holds a preview of photo 99999, but the render's cells name"])
    }

    /// A sharded manifest's records edited (checksums recomputed): a note of a kind no render
    /// writes, a note that is not a path and a reason, a piece that is not text, a part naming
    /// another manifest; each refused (exit 3), and an existing file at the manifest's path
    /// the parts name is not replaced (exit 2, naming --manifest).
    @Test func editedManifestRecordsAreRefused() throws {
        let folder = "\(testRoot)/hostile-manifest"
        _ = system("rm -rf '\(folder)'")
        defer { _ = system("rm -rf '\(folder)'") }
        #expect(system("mkdir -p '\(folder)/photos' '\(folder)/parts' '\(folder)/out' && cp '\(fixtures)'/Landscape_*.jpg '\(folder)/photos/'") == 0)
        let cut = readFile(fixtures + "/Landscape_0.jpg")
        writeFile(Array(cut.prefix(cut.count / 3)), to: folder + "/photos/Landscape_0.jpg")
        for k in 1...3 {
            let shard = runTesseraSplit(["grid", folder + "/photos", "--grid", "3x9", "--tile-size", "40x30", "--order", "name",
                                         "-o", folder + "/out/w.jpg", "--manifest", folder + "/out/m.json", "--shard", "\(k)/3",
                                         "--shard-dir", folder + "/parts", "-q"])
            #expect(shard.status == 0, "\(shard.standardError)")
        }
        let original = (1...3).map { PartEditor(path: part(folder, $0)) }
        let notes = original[0].firstRecord(kind: 10), pieces = original[0].firstRecord(kind: 9)
        try #require(notes != nil && pieces != nil, "part 1 holds no manifest note or no manifest")
        let note = notes!, piece = pieces!
        var kind = original[0]
        kind.setRecord32(note, 4, 2)
        var joined = original[0]
        let start = Int(joined.record64(note, 16)), length = Int(joined.record64(note, 24))
        let nul = try #require((start..<(start + length)).first { joined.bytes[$0] == 0 })
        joined.bytes[nul] = UInt8(ascii: "x")
        var binary = original[0]
        binary.bytes[Int(binary.record64(piece, 16)) + 3] = 0xFF
        for (var edited, said) in [(kind, "holds a manifest note no render writes"),
                                   (joined, "holds a manifest note that is not a photo's path and a reason"),
                                   (binary, "piece 0 of the manifest is not text")] {
            edited.reseal()
            edited.write(to: part(folder, 1))
            expectRefused(folder, saying: ["part-0001-of-0003.tessera-part", said], given: false)
        }
        original[0].write(to: part(folder, 1))
        var other = original[1]
        other.setHeader("manifest", folder + "/out/other.json")
        other.write(to: part(folder, 2))
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part names other outputs"], given: false)
        original[1].write(to: part(folder, 2))
        writeFile(Array("old manifest".utf8), to: folder + "/out/m.json")
        expectRefused(folder, status: 2, saying: ["m.json", "comes from the parts", "(--manifest PATH)"], given: false)
        unlink(folder + "/out/m.json")
        let join = runTesseraSplit(["join", folder + "/parts", "-q"])
        #expect(join.status == 0, "\(join.standardError)")
        // Drawn in part by every shard (it is in every band), listed once.
        #expect(String(decoding: readFile(folder + "/out/m.json"), as: UTF8.self)
            .split(separator: "Landscape_0.jpg\", \"reason\": \"file ends early").count == 2)
    }

    /// Parts edited to name a photo of the render, another part, or a path in the shard folder
    /// as the JPEG (every part alike, checksums recomputed): only the destination checks stand
    /// in the way, and they refuse (exit 2) with nothing replaced.
    @Test func partsCannotChooseWhatTheJoinReplaces() {
        let folder = copyOfBase("destinations")
        defer { _ = system("rm -rf '\(folder)'") }
        unlink(folder + "/out/w.jpg")
        let original = (1...3).map { PartEditor(path: part(folder, $0)) }
        func pointJPEG(at path: String) {
            for k in 1...3 {
                var edited = original[k - 1]
                edited.setHeader("jpeg", path)
                edited.write(to: part(folder, k))
            }
        }
        pointJPEG(at: folder + "/photos/Landscape_1.jpg")
        expectRefused(folder, status: 2, saying: ["photos/Landscape_1.jpg", "comes from the parts"], given: false)
        pointJPEG(at: part(folder, 2))
        expectRefused(folder, status: 2, saying: ["part-0002-of-0003.tessera-part"], given: false)
        pointJPEG(at: folder + "/parts/part-0009-of-0009.jpg")
        expectRefused(folder, status: 2, saying: ["inside the shard folder"], given: false)
        pointJPEG(at: folder + "/parts/new.jpg")
        expectRefused(folder, status: 2, saying: ["inside the shard folder"], given: false)
        pointJPEG(at: folder + "/out/profile")
        expectRefused(folder, status: 2, saying: ["does not end in .jpg"], given: false)
        // A hard link to a part outside the folder: refused as the part it is.
        _ = system("ln '\(part(folder, 1))' '\(folder)/out/linked.jpg'")
        pointJPEG(at: folder + "/out/linked.jpg")
        expectRefused(folder, status: 2, saying: ["it is the part part-0001-of-0003.tessera-part"], given: false)
        // Given to join by mistake: refused the same way, the part intact.
        let linked = readFile(part(folder, 1))
        let given = runTesseraSplit(["join", folder + "/parts", "-o", folder + "/out/linked.jpg", "--dzi", folder + "/out/w.dzi",
                                     "--tiff", folder + "/out/w.tif", "-q"])
        #expect(given.status == 2 && given.standardError.contains("it is the part part-0001-of-0003.tessera-part"), "\(given.standardError)")
        #expect(readFile(part(folder, 1)) == linked)
        unlink(folder + "/out/linked.jpg")
        // Only one part edited: the parts disagree, exit 3.
        for k in 1...3 { original[k - 1].write(to: part(folder, k)) }
        var one = original[1]
        one.setHeader("jpeg", folder + "/photos/Landscape_2.jpg")
        one.write(to: part(folder, 2))
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part names other outputs"], given: false)
        // Unedited, to a new path: joined.
        original[1].write(to: part(folder, 2))
        let join = runTesseraSplit(["join", folder + "/parts", "-q"])
        #expect(join.status == 0, "\(join.standardError)")
        #expect(readFile(folder + "/out/w.jpg").starts(with: [0xFF, 0xD8]))
    }

    /// A part that is a dangling symbolic link, a folder, a FIFO: exit 3 naming it, in a part's
    /// words. A --shard-dir that is a file is said to be one, for join and for a shard.
    @Test func partsThatAreNotFilesAreNamed() {
        let folder = copyOfBase("kinds")
        defer { _ = system("rm -rf '\(folder)'") }
        let path = part(folder, 2)
        #expect(system("mv '\(path)' '\(folder)/moved' && ln -s '\(folder)/nowhere' '\(path)'") == 0)
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part is a symbolic link to nothing"])
        unlink(path)
        #expect(mkdir(path, 0o755) == 0)
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part is a folder"])
        rmdir(path)
        #expect(mkfifo(path, 0o644) == 0)
        expectRefused(folder, saying: ["part-0002-of-0003.tessera-part is a FIFO"])
        unlink(path)
        let file = folder + "/a-file"
        writeFile(Array("x".utf8), to: file)
        let join = runTesseraSplit(["join", file])
        #expect(join.status == 3 && join.standardError.contains("it is a file, not a folder"), "\(join.standardError)")
        let shard = runTesseraSplit(["grid", folder + "/photos", "-o", folder + "/out/x.jpg", "--grid", "4x4", "--tile-size", "16",
                                     "--shard", "1/2", "--shard-dir", file])
        #expect(shard.status == 2 && shard.standardError.contains("\(file) is a file, not a folder"), "\(shard.standardError)")
    }
}

/// The second review's cases: what a consistent forgery (checksums recomputed) could still do.
extension HostilePartTests {
    /// A NUL in a path from the parts: "evil.sh\0.jpg" passed as a .jpg and created evil.sh.
    @Test func aPathWithANulIsRefused() {
        let folder = copyOfBase("nul")
        defer { _ = system("rm -rf '\(folder)'") }
        unlink(folder + "/out/w.jpg")
        for k in 1...3 {
            var edited = PartEditor(path: part(folder, k))
            edited.setHeader("jpeg", folder + "/out/evil.sh\u{0}.jpg")
            edited.write(to: part(folder, k))
        }
        expectRefused(folder, status: 2, saying: ["NUL"], given: false)
        #expect(access(folder + "/out/evil.sh", F_OK) != 0, "the join created the file the NUL cut the path to")
    }

    /// A header whose size is not the JPEG's own (its SOF): the summary would report a size the
    /// file does not have.
    @Test func aSizeThatIsNotTheJPEGsIsRefused() {
        let folder = copyOfBase("sof")
        defer { _ = system("rm -rf '\(folder)'") }
        for k in 1...3 {
            var edited = PartEditor(path: part(folder, k))
            edited.setHeader("width", "65500")
            edited.setHeader("height", "65500")
            edited.write(to: part(folder, k))
        }
        expectRefused(folder, saying: ["JPEG header is not that of a 65500 x 65500 px picture"])
    }

    /// The JPEG's stripes as a forger who reseals the checksums could change them, each of
    /// which joined into a file decoders warn about (djpeg: "extraneous bytes before marker
    /// 0xd0", "found marker 0xd9 instead of RST5") with exit 0: the header's restart interval
    /// set to 1 MCU; the stripe count and height changed in every part; and an APPn segment in
    /// the header (an Exif orientation there turned the joined picture). Exit 3, nothing written.
    @Test func stripesThatDoNotDivideThePictureAndAppSegmentsAreRefused() throws {
        let folder = copyOfBase("stripes")
        defer { _ = system("rm -rf '\(folder)'") }
        let original = (1...3).map { PartEditor(path: part(folder, $0)) }
        let header = try #require(original[0].firstRecord(kind: 1))
        let start = Int(original[0].record64(header, 16)), length = Int(original[0].record64(header, 24))
        func marker(_ code: UInt8) throws -> Int {
            try #require((start..<(start + length - 1)).first { original[0].bytes[$0] == 0xFF && original[0].bytes[$0 + 1] == code })
        }
        // DRI: FF DD 00 04 and the interval.
        var edited = original[0]
        let dri = try marker(0xDD)
        edited.bytes[dri + 4] = 0
        edited.bytes[dri + 5] = 1
        edited.reseal()
        edited.write(to: part(folder, 1))
        expectRefused(folder, saying: ["part-0001-of-0003.tessera-part's JPEG stripes", "a restart interval of 1 MCUs",
                                       "do not divide"])
        original[0].write(to: part(folder, 1))
        // The JFIF segment made an APP1: the same length, another kind of segment.
        edited = original[0]
        edited.bytes[try marker(0xE0) + 1] = 0xE1
        edited.reseal()
        edited.write(to: part(folder, 1))
        expectRefused(folder, saying: ["part-0001-of-0003.tessera-part's JPEG header is not that of a"])
        original[0].write(to: part(folder, 1))
        // A Huffman table's two AC symbols swapped (a table still buildable: the data then decodes
        // to other coefficients), and the components named R, G, B in the frame and the scan
        // (libjpeg then reads the data as RGB): each joined with exit 0 before.
        edited = original[0]
        // (libjpeg writes a DHT segment a table: the first whose table is of class 1, AC.)
        let acTable = try #require((start..<(start + length - 5)).first {
            original[0].bytes[$0] == 0xFF && original[0].bytes[$0 + 1] == 0xC4 && original[0].bytes[$0 + 4] >> 4 == 1
        }) + 4
        edited.bytes.swapAt(acTable + 17, acTable + 18)
        edited.reseal()
        edited.write(to: part(folder, 1))
        expectRefused(folder, saying: ["part-0001-of-0003.tessera-part's JPEG header is not the one tessera writes"])
        edited = original[0]
        let sof = try marker(0xC0), sos = try marker(0xDA)
        for (i, id) in "RGB".utf8.enumerated() {
            edited.bytes[sof + 10 + 3 * i] = id
            edited.bytes[sos + 5 + 2 * i] = id
        }
        edited.reseal()
        edited.write(to: part(folder, 1))
        expectRefused(folder, saying: ["part-0001-of-0003.tessera-part's JPEG header is not the one tessera writes"])
        original[0].write(to: part(folder, 1))
        // Fewer stripes, and taller ones, in every part alike.
        for (key, value) in [("stripe-count", String(Int(original[0].header.first { $0.key == "stripe-count" }!.value)! - 1)),
                             ("stripe-height", String(2 * Int(original[0].header.first { $0.key == "stripe-height" }!.value)!))] {
            for k in 1...3 {
                var changed = original[k - 1]
                changed.setHeader(key, value)
                changed.write(to: part(folder, k))
            }
            expectRefused(folder, saying: ["part-0001-of-0003.tessera-part's JPEG stripes", "do not divide"])
        }
        // Unedited, they join.
        for k in 1...3 { original[k - 1].write(to: part(folder, k)) }
        let join = runTesseraSplit(["join", folder + "/parts", "-o", folder + "/out/w.jpg", "--dzi", folder + "/out/w.dzi",
                                    "--tiff", folder + "/out/w.tif", "-q"])
        #expect(join.status == 0, "\(join.standardError)")
    }

    /// Parts of almost nothing (a few KB of disk each: a hole) whose header claims 1 MiB, the
    /// most a part may have, checksums right: the join held each header, and 200 of them took
    /// 224 MB at the default 64 MiB. Headers now count against the budget: refused inside it,
    /// naming the part and the header (exit 4), in a second or two.
    @Test func partsOfHugeHeadersAreRefusedInsideTheBudget() {
        let folder = "\(testRoot)/join-headers"
        _ = system("rm -rf '\(folder)'")
        #expect(system("mkdir -p '\(folder)/parts' '\(folder)/out'") == 0)
        let length = (1 << 20) - 6
        let text = Array("pad=".utf8) + [UInt8](repeating: 0, count: length) + [0x0A]
        let checksum = PartEditor.crc32c(text[...])
        for k in 1...100 {
            let path = folder + "/parts/junk-\(1000 + k).tessera-part"
            writeFile(Array("TSPART02pad=".utf8), to: path)
            let fd = open(path, O_WRONLY)
            var footer = [UInt8](repeating: 0, count: PartEditor.footerBytes)
            func put(_ value: UInt64, _ at: Int, _ bytes: Int = 8) { for i in 0..<bytes { footer[at + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) } }
            put(8, 0); put(UInt64(text.count), 8); put(UInt64(8 + text.count), 16); put(0, 24); put(UInt64(checksum), 32, 4)
            for (i, byte) in "TSPARTOK".utf8.enumerated() { footer[40 + i] = byte }
            let tail: [UInt8] = [0x0A] + footer
            _ = tail.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(8 + text.count - 1)) }
            close(fd)
        }
        let measured = runMeasured(["join", folder + "/parts", "-o", folder + "/out/w.jpg", "--no-progress"])
        print("100 parts of 1 MiB headers: join exit \(measured.exitCode), peak RSS \(measured.peakMiB) MiB")
        defer { _ = system("rm -rf '\(folder)'") }
        #expect(measured.exitCode == 4, "\(measured.output)")
        #expect(measured.output.contains("has a header that takes 2.0 MiB in memory"), "\(measured.output)")
        #expect(measured.output.contains("more than 1/2 of the join's memory budget of 64.0 MiB"), "\(measured.output)")
        #expect(measured.peakBytes <= 64 << 20, "peak \(measured.peakMiB) MiB")
        #expect(access(folder + "/out/w.jpg", F_OK) != 0)
        // Headers of 0.9 MiB in 100,000 short lines, each a key of its own: a dictionary entry a
        // line took 9 MB a part, 158 MB at the default budget, when only the text counted.
        _ = system("rm -f '\(folder)'/parts/*")
        var lines = [UInt8]()
        for n in 0..<100_000 { lines += Array("k\(n)=\n".utf8) }
        let lineChecksum = PartEditor.crc32c(lines[...])
        var forged = Array("TSPART02".utf8) + lines
        var footer = [UInt8](repeating: 0, count: PartEditor.footerBytes)
        func put(_ value: UInt64, _ at: Int, _ bytes: Int = 8) { for i in 0..<bytes { footer[at + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) } }
        put(8, 0); put(UInt64(lines.count), 8); put(UInt64(8 + lines.count), 16); put(0, 24); put(UInt64(lineChecksum), 32, 4)
        for (i, byte) in "TSPARTOK".utf8.enumerated() { footer[40 + i] = byte }
        forged += footer
        for k in 1...30 { writeFile(forged, to: folder + "/parts/lines-\(k).tessera-part") }
        let short = runMeasured(["join", folder + "/parts", "-o", folder + "/out/w.jpg", "--no-progress"])
        print("30 parts of 100,000 header lines: join exit \(short.exitCode), peak RSS \(short.peakMiB) MiB")
        #expect(short.exitCode == 4, "\(short.output)")
        #expect(short.output.contains("has a header that takes"), "\(short.output)")
        #expect(short.peakBytes <= 64 << 20, "peak \(short.peakMiB) MiB")
    }

    /// Tiles of 4096 px (a render with a large budget may make them): the levels the join builds
    /// need more than its default budget, so it refuses before writing (exit 4, naming the
    /// need), and joins with --max-memory.
    @Test func theJoinKeepsToItsBudget() {
        let folder = "\(testRoot)/join-budget"
        _ = system("rm -rf '\(folder)'")
        #expect(system("mkdir -p '\(folder)/parts' '\(folder)/out'") == 0)
        for k in 1...3 {
            let shard = runTesseraSplit(["grid", fixtures, "--grid", "12x8", "--tile-size", "40x30", "--dzi-tile-size", "4096",
                                         "--dzi", folder + "/out/w.dzi", "--max-memory", "1G", "--shard", "\(k)/3",
                                         "--shard-dir", folder + "/parts", "-q"])
            #expect(shard.status == 0, "\(shard.standardError)")
        }
        let refused = runMeasured(["join", folder + "/parts", "--no-progress"])
        #expect(refused.exitCode == 4, "\(refused.output)")
        #expect(refused.output.contains("64.0 MiB is too small"), "\(refused.output)")
        #expect(access(folder + "/out/w.dzi", F_OK) != 0)
        #expect(refused.peakBytes <= 68 << 20, "peak \(refused.peakMiB) MiB")
        let joined = runTesseraSplit(["join", folder + "/parts", "--max-memory", "1G", "-q"])
        #expect(joined.status == 0, "\(joined.standardError)")
        #expect(access(folder + "/out/w.dzi", F_OK) == 0)
        _ = system("rm -rf '\(folder)'")
    }
}
