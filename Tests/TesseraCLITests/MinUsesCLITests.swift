// MinUsesCLITests.swift — `tessera mosaic --min-uses N` and `--use-all` through the binary
// (issue 29): every picture of the library is in the manifest at least N times, with
// --min-distance and --max-uses; the same seed gives the same manifest for any --workers; and
// impossible minimums are refused with the flags and values that would work.
import CTesseraTestShims
import Glibc
import Testing

@Suite struct MinUsesCLITests {
    /// 40 distinct 64 x 48 photos (grey 3 x 3 blocks, CTesseraTestShims), made once.
    static let library: String = {
        let folder = testRoot + "/min-uses-library"
        precondition(system("mkdir -p '\(folder)'") == 0, "cannot make \(folder)")
        var message = [CChar](repeating: 0, count: 300)
        let written = tessera_test_write_distinct_jpegs(folder, 40, 0, 64, 48, 0, 85, &message, 300)
        precondition(written == 0, "cannot write the photos: \(String(cString: message))")
        return folder
    }()
    static let target = fixtures + "/Landscape_1.jpg"

    /// Runs a 40 x 27 mosaic (1,080 cells) of the library with `flags`; returns the run and
    /// each photo's uses from its CSV manifest (every photo of the library, 0 for unused ones).
    static func mosaic(_ name: String, _ flags: [String]) -> (status: Int32, output: String, uses: [String: Int], manifest: String) {
        let folder = testRoot + "/min-uses-" + name
        _ = system("mkdir -p '\(folder)'")
        let run = runTessera(["mosaic", "--target", target, library, "-o", folder + "/m.jpg", "--grid", "40x27", "--tile-size", "8",
                              "--manifest", folder + "/m.csv", "--cache-dir", testRoot + "/min-uses-cache", "--no-progress"] + flags)
        let manifest = String(decoding: readFile(folder + "/m.csv"), as: UTF8.self)
        var uses: [String: Int] = [:]
        for name in listNames(library) { uses[library + "/" + name] = 0 }
        for line in manifest.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count == 4 else { continue }
            uses[String(fields[2]), default: 0] += 1
        }
        return (run.status, run.output, uses, manifest)
    }

    @Test func everyPictureIsInTheManifestAtLeastNTimes() throws {
        // Without a minimum, pictures are left out (else this test would prove nothing).
        let plain = Self.mosaic("plain", ["--min-distance", "1"])
        try #require(plain.status == 0, "\(plain.output)")
        try #require(plain.uses.count == 40 && plain.uses.values.contains(0), "\(plain.uses.values.sorted())")
        for (name, flags, fewest) in [("all", ["--use-all", "--min-distance", "1"], 1),
                                      ("three", ["--min-uses", "3", "--min-distance", "2", "--max-uses", "60"], 3),
                                      ("both", ["--min-uses", "2", "--use-all", "--max-uses", "40", "--min-distance", "0"], 2)] {
            let run = Self.mosaic(name, flags)
            #expect(run.status == 0, "\(flags): \(run.output)")
            #expect(run.uses.count == 40 && run.uses.values.allSatisfy { $0 >= fewest }, "\(flags): \(run.uses.values.sorted())")
            if let most = flags.firstIndex(of: "--max-uses").map({ Int(flags[$0 + 1])! }) {
                #expect(run.uses.values.allSatisfy { $0 <= most }, "\(flags): \(run.uses.values.sorted())")
            }
            #expect(!run.output.contains("could not meet the constraints"), "\(flags): \(run.output)")
        }
    }

    @Test func theSameSeedGivesTheSameManifestForAnyWorkers() throws {
        let one = Self.mosaic("seed-a", ["--use-all", "--seed", "4", "--workers", "1"])
        let two = Self.mosaic("seed-b", ["--use-all", "--seed", "4", "--workers", "2"])
        let other = Self.mosaic("seed-c", ["--use-all", "--seed", "5", "--workers", "2"])
        try #require(one.status == 0 && two.status == 0 && other.status == 0, "\(one.output)\(two.output)\(other.output)")
        #expect(one.manifest == two.manifest && !one.manifest.isEmpty)
        #expect(one.manifest != other.manifest)
    }

    @Test func impossibleMinimumsAreRefusedWithWhatWouldWork() {
        // 40 pictures in 25 cells; 30 uses each of 40 pictures in 1,080 cells.
        let small = runTessera(["mosaic", "--target", Self.target, Self.library, "-o", testRoot + "/never-min-uses.jpg",
                                "--grid", "5x5", "--tile-size", "8", "--use-all", "--min-distance", "0", "--no-progress"])
        #expect(small.status == 2)
        #expect(small.output.contains("--use-all needs at least 40 cells for 40 pictures; this mosaic has 25: ask for 40 cells or more "
                                      + "(--cells, or a larger --columns or --grid), or leave out --use-all"), "\(small.output)")
        let many = Self.mosaic("many", ["--min-uses", "30"])
        #expect(many.status == 2)
        #expect(many.output.contains("--min-uses 30 needs at least 1,200 cells for 40 pictures (30 each); this mosaic has 1,080: "
                                     + "ask for 1,200 cells or more (--cells, or a larger --columns or --grid), or --min-uses 27"), "\(many.output)")
        // More uses than cells, refused before the pictures are counted: the photos found are
        // named, and the minimum suggested is one they can meet.
        let most40 = runTessera(["mosaic", "--target", Self.target, Self.library, "-o", testRoot + "/never-min-uses.jpg",
                                 "--grid", "5x5", "--tile-size", "8", "--min-uses", "1000", "--min-distance", "0", "--no-progress"])
        #expect(most40.status == 2)
        #expect(most40.output.contains("for 40 pictures (1000 each); this mosaic has 25") && most40.output.contains("leave out --min-uses 1000"),
                "\(most40.output)")
        // Known before any photo is read: refused the same with a library that does not matter.
        let most = runTessera(["mosaic", "--target", Self.target, Self.library, "-o", testRoot + "/never-min-uses.jpg",
                               "--grid", "40x27", "--tile-size", "8", "--min-uses", "5", "--max-uses", "3"])
        #expect(most.status == 2)
        #expect(most.output.contains("--min-uses 5 is more than --max-uses 3: give --max-uses 5 or more, or --min-uses 3"), "\(most.output)")
        // At distance 9 a 40 x 27 grid holds one picture 4 x 3 = 12 times; distance 7 holds 5 x 4 = 20.
        let far = runTessera(["mosaic", "--target", Self.target, Self.library, "-o", testRoot + "/never-min-uses.jpg",
                              "--grid", "40x27", "--tile-size", "8", "--min-uses", "20", "--min-distance", "9"])
        #expect(far.status == 2)
        #expect(far.output.contains("--min-uses 20 cannot be met with --min-distance 9: a 40 x 27 grid holds one picture at most 12 times "
                                    + "10 cells apart; give --min-distance 7 or less, or --min-uses 12"), "\(far.output)")
        #expect(access(testRoot + "/never-min-uses.jpg", F_OK) != 0)
    }

    @Test func theHelpOffersBoth() {
        let help = runTessera(["help", "mosaic"]).output
        #expect(help.contains("--min-uses N") && help.contains("--use-all"))
    }
}
