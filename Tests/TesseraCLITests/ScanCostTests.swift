// ScanCostTests.swift — issue 25: files that are not photos cost nothing that stays, and a
// target that is not a file is a command line naming nothing (exit 2, before any photo is read).
import Glibc
import Testing

@Suite struct ScanCostTests {
    /// 100,000 empty files beside one photo, at --max-memory 32M: the scan reads them a batch at
    /// a time and keeps none, so the run's peak stays inside the budget (it was 52 MiB when every
    /// file's path and result were held until the scan ended).
    @Test func emptyFilesCostNothingThatStays() throws {
        let folder = testRoot + "/empty-files"
        #expect(mkdir(folder, 0o755) == 0)
        for index in 0..<100_000 {
            let fd = open(folder + "/sidecar-\(index).xmp", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            try #require(fd >= 0)
            close(fd)
        }
        #expect(system("cp '\(fixtures)/Landscape_1.jpg' '\(folder)/photo.jpg'") == 0)
        let output = testRoot + "/empty-files.jpg"
        // (A cache folder of its own: the default one is shared with the other tests running.)
        let run = runMeasured(["grid", folder, "--columns", "1", "--tile-size", "64", "--max-memory", "32M", "-o", output,
                               "--cache-dir", folder + "-cache"])
        #expect(run.exitCode == 0, "\(run.output)")
        #expect(run.output.contains("64 x 64 px"), "\(run.output)")
        #expect(run.peakBytes <= 32 << 20, "peak \(run.peakMiB) MiB for 100,000 empty files at --max-memory 32M")
        // The photo is still found among them, and the sidecars draw no warning.
        #expect(!run.output.contains("warning"), "\(run.output)")
        #expect(system("rm -rf '\(folder)'") == 0)
    }

    /// 100,000 empty subfolders beside one photo, at --max-memory 32M: a folder waiting to be
    /// entered costs its name, not its stat (it peaked at 40 MB when each kept a stat).
    @Test func emptyFoldersCostLittle() throws {
        let folder = testRoot + "/empty-folders"
        #expect(mkdir(folder, 0o755) == 0)
        for index in 0..<100_000 { try #require(mkdir(folder + "/album-\(index)", 0o755) == 0) }
        #expect(system("cp '\(fixtures)/Landscape_1.jpg' '\(folder)/photo.jpg'") == 0)
        let run = runMeasured(["grid", folder, "--grid", "2x1", "--tile-size", "64", "--max-memory", "32M", "-o", testRoot + "/empty-folders.jpg",
                               "--cache-dir", folder + "-cache"])
        #expect(run.exitCode == 0 && run.output.contains("128 x 64 px"), "\(run.output)")
        #expect(run.peakBytes <= 32 << 20, "peak \(run.peakMiB) MiB for 100,000 empty folders at --max-memory 32M")
        #expect(system("rm -rf '\(folder)'") == 0)
    }

    /// A 2100 x 1575 AVIF target (one picture, no thumbnail: decoded whole, about 22.5 MiB) at
    /// --max-memory 32M: a whole decode may not take what the process itself holds, so it is
    /// refused naming the file, inside the budget plus the 4 MiB slack (it was drawn at 40.6 MB),
    /// with exit 4: the budget is short (3 until 0.6.7).
    @Test func aWholeDecodeLeavesTheProcessItsShare() throws {
        let folder = testRoot + "/whole-decode"
        #expect(mkdir(folder, 0o755) == 0)
        let target = folder + "/target.avif"
        #expect(system("convert '\(fixtures)/Landscape_1.jpg' -resize 2100x1575! PNG24:'\(folder)/t.png' && "
                       + "heif-enc -A -q 20 '\(folder)/t.png' -o '\(target)' >/dev/null") == 0)
        let run = runMeasured(["mosaic", "--target", target, fixtures, "-o", folder + "/m.jpg", "--columns", "8", "--tile-size", "32",
                               "--max-memory", "32M", "--min-distance", "0", "--cache-dir", folder + "/cache", "-q"])
        #expect(run.exitCode == 4 && run.output.contains(target) && run.output.contains("--max-memory"), "\(run.output)")
        #expect(run.peakBytes <= 36 << 20, "peak \(run.peakMiB) MiB at --max-memory 32M")
        #expect(access(folder + "/m.jpg", F_OK) != 0)
        #expect(system("rm -rf '\(folder)'") == 0)
    }

    /// A folder, a FIFO or a missing file as --target: exit 2 naming --target and the path,
    /// before any photo is read (nothing is written).
    @Test func targetThatIsNotAFile() throws {
        let folder = testRoot + "/target-kinds"
        #expect(mkdir(folder, 0o755) == 0)
        let fifo = folder + "/target.jpg"
        #expect(mkfifo(fifo, 0o644) == 0)
        let output = folder + "/mosaic.jpg"
        let cases: [(target: String, says: String)] = [
            (folder, "is a folder"), (fifo, "is a FIFO"), (folder + "/chelsa.jpg", "no such file"),
        ]
        for (target, says) in cases {
            let run = runTessera(["mosaic", "--target", target, fixtures, "-o", output, "--columns", "4", "--tile-size", "8"])
            #expect(run.status == 2, "\(target): \(run.output)")
            #expect(run.output.contains("--target \(target)") && run.output.contains(says), "\(run.output)")
            #expect(!run.output.contains("cannot read photo"), "\(run.output)")
            #expect(access(output, F_OK) != 0, "\(target): an output was written")
        }
        #expect(system("rm -rf '\(folder)'") == 0)
    }
}
