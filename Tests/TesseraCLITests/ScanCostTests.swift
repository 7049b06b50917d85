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

    /// A phone's HEIC (a grid of 512 px tiles with a 320 px thumbnail) is scanned from its boxes,
    /// and drawn into small cells from its boxes and its thumbnail: neither reads its tiles.
    /// libheif 1.15 reads every item's data to open a file, and the scan walked every tile's
    /// data for parameter sets: 200 phone HEICs (417 MB) read 474 MiB from the disk to scan and
    /// as much again to draw from their thumbnails (now 66 and 71 MiB, 58 of them the binary).
    @Test func aPhonesHEICIsScannedAndDrawnSmallWithoutReadingItsTiles() throws {
        guard access("/usr/bin/strace", X_OK) == 0 else {
            Issue.record("strace is needed (apt-get install strace)")
            return
        }
        let folder = testRoot + "/heic-reads-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(folder, 0o755) == 0 && mkdir(folder + "/photos", 0o755) == 0)
        defer { _ = system("rm -rf '\(folder)'") }
        let photo = folder + "/photos/phone.heic"
        #expect(system("cp '\(mixedFormatPhotos)/phone-1.heic' '\(photo)'") == 0)
        let fileBytes = readFile(photo).count
        try #require(fileBytes > 500_000)
        /// The bytes the run of `arguments` read from the HEIC, by strace's account of its preads.
        func bytesRead(_ arguments: [String]) -> Int {
            let log = folder + "/strace.log"
            let command = "strace -f -qq -y -s 0 -e trace=pread64,read -o '\(log)' '\(toolPath())' "
                + arguments.map { "'\($0)'" }.joined(separator: " ") + " >/dev/null 2>&1"
            #expect(system(command) == 0, "\(command)")
            var total = 0
            var pending: [Substring: Bool] = [:]  // a call of each thread waiting to be resumed
            for line in String(decoding: readFile(log), as: UTF8.self).split(separator: "\n") {
                let thread = line.prefix { $0 != " " }
                let ofPhoto: Bool
                if line.contains("resumed>") {
                    ofPhoto = pending.removeValue(forKey: thread) ?? false
                } else if line.hasSuffix("<unfinished ...>") {
                    pending[thread] = line.contains("phone.heic>")
                    continue
                } else {
                    ofPhoto = line.contains("phone.heic>")
                }
                let words = line.split(separator: " ")
                if ofPhoto, words.count > 2, words[words.count - 2] == "=", let count = Int(words[words.count - 1]) { total += count }
            }
            return total
        }
        let scan = bytesRead(["grid", folder + "/photos", "-o", folder + "/out.jpg", "--dry-run", "--cache-dir", folder + "/cache"])
        let drawn = bytesRead(["grid", folder + "/photos", "-o", folder + "/out.jpg", "--tile-size", "100", "--cache-dir",
                               folder + "/cache", "--no-progress"])
        print("a \(fileBytes)-byte phone HEIC: the scan read \(scan) bytes of it, drawing it from its thumbnail \(drawn)")
        #expect(scan > 0 && scan < fileBytes / 10, "the scan read \(scan) of \(fileBytes) bytes")
        #expect(drawn > 0 && drawn < fileBytes / 4, "drawing it small read \(drawn) of \(fileBytes) bytes")
        // Drawn large, from its tiles, the tiles its cell crops are read (all but the two ends
        // of the 3:2 picture in a square cell).
        let whole = bytesRead(["grid", folder + "/photos", "-o", folder + "/out.jpg", "--tile-size", "800", "--cache-dir",
                               folder + "/cache", "--no-progress"])
        #expect(whole >= fileBytes * 2 / 3, "drawing it large read \(whole) of \(fileBytes) bytes")
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
