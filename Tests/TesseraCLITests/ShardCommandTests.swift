// ShardCommandTests.swift — the shard flags, `tessera join` and `tessera analyse --shard` as a
// script runs them: exit codes, messages, and the joined files against the single-process ones.
import Foundation
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

@Suite struct ShardCommandTests {
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
    }

    /// Three shards run by the binary and joined: the single-process render's bytes; a part
    /// removed: exit 3, named, nothing written.
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
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: directory + "/cache")) ?? []).sorted()
        #expect(files == ["features-k3-a1.0000.shard-1-of-2.tsv", "features-k3-a1.0000.shard-2-of-2.tsv"])
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
