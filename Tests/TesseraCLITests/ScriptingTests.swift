// ScriptingTests.swift — what scripts and GUIs rely on: --progress json events, --quiet, the
// progress bar's shape, errors before work, own outputs left out, --dpi, a mosaic refused over
// its budget before analysis.
import Foundation
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

/// Runs the binary with standard output and standard error captured apart.
func runTesseraSplit(_ arguments: [String]) -> (status: Int32, standardOutput: String, standardError: String) {
    let tool = toolPath()
    let base = "\(testRoot)/tessera-split-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    defer { unlink(base + ".out"); unlink(base + ".err") }
    let command = ([tool] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    let status = system(testCacheAssignment + " " + command + " >'\(base).out' 2>'\(base).err' </dev/null")
    return ((status >> 8) & 0xFF, String(decoding: readFile(base + ".out"), as: UTF8.self),
            String(decoding: readFile(base + ".err"), as: UTF8.self))
}

/// Every line of `text` parsed as a JSON object (a line that is not one fails the test).
func jsonLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").map { line in
        let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object != nil, "not a JSON object: \(line)")
        return object ?? [:]
    }
}

@Suite struct ScriptingTests {
    @Test func progressJSONIsOneEventPerLine() throws {
        let directory = "\(testRoot)/tessera-json-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/photos' && cp '\(fixtures)'/*.jpg '\(directory)/photos/' && "
                       + "head -c 400 '\(fixtures)/Landscape_1.jpg' > '\(directory)/photos/zz-broken.jpg'") == 0)
        let run = runTesseraSplit(["grid", directory + "/photos", "-o", directory + "/wall.jpg", "--grid", "40x30",
                                   "--tile-size", "60", "--progress", "json", "--workers", "2"])
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardOutput.contains("wrote \(directory)/wall.jpg"))
        let events = jsonLines(run.standardError)
        let phases = events.filter { $0["event"] as? String == "phase" }.compactMap { $0["phase"] as? String }
        #expect(phases == ["scan", "render"], "\(phases)")
        let progress = events.filter { $0["event"] as? String == "progress" }
        for event in progress {
            #expect(["scan", "render"].contains(event["phase"] as? String ?? ""))
            #expect((event["done"] as? Int ?? -1) <= (event["total"] as? Int ?? -2))
            #expect(event.keys.contains("eta_s"))
        }
        // The scan's last event: every header read (18 photos and the broken one).
        #expect(progress.last(where: { $0["phase"] as? String == "scan" })?["done"] as? Int == 19)
        #expect(progress.last?["phase"] as? String == "render" && progress.last?["done"] as? Int == 30 * 60)
        // The broken photo: one event, drawn as a placeholder (its header reads, its data does not).
        let photoEvents = events.filter { ["placeholder", "skipped"].contains($0["event"] as? String ?? "") }
        #expect(photoEvents.count == 1 && (photoEvents.first?["path"] as? String ?? "").hasSuffix("zz-broken.jpg"), "\(photoEvents)")
        let summary = try #require(events.last)
        #expect(summary["event"] as? String == "summary")
        #expect(summary["width"] as? Int == 2400 && summary["height"] as? Int == 1800)
        let bytes = try #require(summary["bytes"] as? Int)
        var info = stat()
        #expect(stat(directory + "/wall.jpg", &info) == 0 && Int(info.st_size) == bytes)
        #expect((summary["peak_rss_bytes"] as? Int ?? 0) > 1 << 20)
        #expect((summary["seconds"] as? Double ?? -1) >= 0)
        #expect((summary["outputs"] as? [String: Any])?["jpeg"] as? String == directory + "/wall.jpg")

        // A mosaic names its own phases and adds its figures to the summary.
        let mosaic = runTesseraSplit(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", directory + "/m.jpg",
                                      "--columns", "20", "--tile-size", "8", "--min-distance", "0",
                                      "--cache-dir", directory + "/cache", "--progress", "json"])
        #expect(mosaic.status == 0, "\(mosaic.standardError)")
        let mosaicEvents = jsonLines(mosaic.standardError)
        let mosaicPhases = mosaicEvents.filter { $0["event"] as? String == "phase" }.compactMap { $0["phase"] as? String }
        #expect(mosaicPhases == ["scan", "analysis", "target", "matching", "render"], "\(mosaicPhases)")
        let figures = try #require(mosaicEvents.last?["mosaic"] as? [String: Any])
        #expect((figures["mean_error"] as? Double ?? -1) > 0 && figures["analysed"] as? Int == 18)

        // An error is an event too: every line stays JSON.
        let failed = runTesseraSplit(["grid", fixtures, "-o", "/proc/wall.jpg", "--columns", "2", "--tile-size", "8", "--progress", "json"])
        #expect(failed.status == 2)
        let errors = jsonLines(failed.standardError)
        #expect(errors.last?["event"] as? String == "error" && (errors.last?["message"] as? String ?? "").contains("/proc"), "\(errors)")
        // So is a mistyped flag, found before the options are whole.
        let typo = runTesseraSplit(["grid", "--progress", "json", fixtures, "-o", directory + "/t.jpg", "--colums", "2", "--tile-size", "8"])
        let typoErrors = jsonLines(typo.standardError)
        #expect(typo.status == 2 && typoErrors.count == 1 && typoErrors.first?["event"] as? String == "error"
                && (typoErrors.first?["message"] as? String ?? "").contains("--colums"), "\(typo.standardError)")
    }

    @Test func quietPrintsOnlyErrors() {
        let output = "\(testRoot)/tessera-quiet-\(getpid()).jpg"
        defer { unlink(output) }
        let run = runTesseraSplit(["grid", fixtures, fixtures + "/not-there.jpg", "-o", output, "--columns", "4", "--tile-size", "20", "-q"])
        #expect(run.status == 0 && run.standardOutput.isEmpty && run.standardError.isEmpty, "\(run)")
        #expect(access(output, F_OK) == 0)
        let failed = runTesseraSplit(["grid", fixtures, "-o", output, "--columns", "4", "--tile-size", "0", "--quiet"])
        #expect(failed.status == 2 && failed.standardError.hasPrefix("tessera: "))
    }

    @Test func aMissingPhotoPathIsSkippedNotFatal() {
        let output = "\(testRoot)/tessera-missing-\(getpid()).jpg"
        defer { unlink(output) }
        let missing = fixtures + "/no-such-photo.jpg"
        let run = runTessera(["grid", fixtures, missing, "-o", output, "--columns", "4", "--tile-size", "20", "--no-progress"])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("warning: skipping \(missing): no such file or folder"))
        let strict = runTessera(["grid", fixtures, missing, "-o", output, "--columns", "4", "--tile-size", "20", "--strict"])
        #expect(strict.status == 3, "\(strict.output)")
    }

    /// Outputs that cannot be written are refused before any photo is read: a 1.2-gigapixel
    /// job into /proc, a read-only /sys, a manifest there.
    @Test func unwritableOutputsAreRefusedBeforeWork() {
        for arguments in [["-o", "/proc/wall.jpg"], ["--dzi", "/proc/wall.dzi"], ["-o", "/sys/wall.jpg"],
                          ["-o", "\(testRoot)/ok-\(getpid()).jpg", "--manifest", "/proc/where.csv"]] {
            let run = runTessera(["grid", fixtures] + arguments + ["--grid", "200x267", "--tile-size", "150"])
            #expect(run.status == 2, "\(arguments): \(run.output)")
            #expect(run.output.contains("cannot be written") && !run.output.contains("disk space"), "\(run.output)")
            #expect(access("\(testRoot)/ok-\(getpid()).jpg", F_OK) != 0)
        }
    }

    @Test func ownOutputsAreLeftOut() {
        let directory = "\(testRoot)/tessera-own-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)' && cp '\(fixtures)'/*.jpg '\(directory)/'") == 0)
        let render = ["grid", directory, "-o", directory + "/wall.jpg", "--dzi", directory + "/wall.dzi", "--tiff", directory + "/wall.tif",
                      "--columns", "6", "--tile-size", "30", "--no-progress"]
        let first = runTessera(render)
        #expect(first.status == 0, "\(first.output)")
        // The JPEG and every tile carry the mark (the TIFF in its ImageDescription); a second
        // run, and a dry run, see 18 photos still.
        for file in [directory + "/wall.jpg", directory + "/wall_files/0/0_0.jpg"] {
            #expect(readFile(file).withUnsafeBytes { JPEGMarks.isOwnOutput($0) }, "\(file)")
        }
        let again = runTessera(render)
        #expect(again.status == 0 && again.output.contains("180 x 90 px"), "\(again.output)")
        let dry = runTessera(["grid", directory, "-o", directory + "/wall.jpg", "--columns", "6", "--tile-size", "30", "--dry-run"])
        #expect(dry.output.contains("photos      18 usable"), "\(dry.output)")
        #expect(dry.output.contains("left out    3 Tessera output(s)"), "\(dry.output)")
        // A photo of the folder is not one: it has no mark.
        #expect(!readFile(directory + "/Landscape_1.jpg").withUnsafeBytes { JPEGMarks.isOwnOutput($0) })
        // A mosaic may take a Tessera output as its target.
        let mosaic = runTessera(["mosaic", "--target", directory + "/wall.jpg", fixtures, "-o", directory + "/m.jpg", "--columns", "6",
                                 "--tile-size", "8", "--min-distance", "0", "--cache-dir", directory + "/cache", "--no-progress"])
        #expect(mosaic.status == 0, "\(mosaic.output)")
    }

    /// A mosaic on a disk too small for it is refused before the analysis (which can take
    /// minutes on a real library), not after the matching.
    @Test(.enabled(if: geteuid() == 0, "mounting a tmpfs needs root"))
    func aMosaicChecksFreeSpaceBeforeAnalysis() {
        let mountPoint = "\(testRoot)/tessera-mosaic-disk-\(getpid())"
        mkdir(mountPoint, 0o755)
        defer { rmdir(mountPoint) }
        #expect(system("mount -t tmpfs -o size=1m tessera-test '\(mountPoint)'") == 0)
        defer { _ = system("umount '\(mountPoint)'") }
        let cache = "\(testRoot)/tessera-mosaic-disk-cache-\(getpid())"
        defer { _ = system("rm -rf '\(cache)'") }
        let run = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", mountPoint + "/m.jpg", "--grid", "100x80",
                              "--tile-size", "40", "--min-distance", "0", "--cache-dir", cache, "--no-progress"])
        #expect(run.status == 4 && run.output.contains("not enough disk space"), "\(run.output)")
        #expect(featureIndexFiles(cache).isEmpty, "the photos were analysed before the disk was checked")
    }

    @Test func dpiIsTheJFIFDensity() throws {
        let output = "\(testRoot)/tessera-dpi-\(getpid()).jpg"
        defer { unlink(output) }
        for encoder in ["serial", "parallel"] {
            let run = runTessera(["grid", fixtures, "-o", output, "--columns", "4", "--tile-size", "20", "--dpi", "300",
                                  "--encoder", encoder, "--workers", "2", "--no-progress"])
            #expect(run.status == 0, "\(run.output)")
            let bytes = readFile(output)
            // SOI, APP0 "JFIF\0", version 1.01, units 1 (dots per inch), X and Y density 300.
            #expect(Array(bytes[6..<11]) == Array("JFIF\0".utf8))
            #expect(bytes[13] == 1 && Int(bytes[14]) << 8 | Int(bytes[15]) == 300 && Int(bytes[16]) << 8 | Int(bytes[17]) == 300,
                    "\(encoder): \(Array(bytes[0..<20]))")
        }
        #expect(runTessera(["grid", fixtures, "--dzi", "\(testRoot)/x.dzi", "--columns", "4", "--tile-size", "20",
                            "--dpi", "300"]).status == 2)
        #expect(runTessera(["grid", fixtures, "-o", output, "--columns", "4", "--tile-size", "20", "--dpi", "0"]).status == 2)
        // A viewer option without the viewer would do nothing: refused.
        #expect(runTessera(["grid", fixtures, "--dzi", "\(testRoot)/x.dzi", "--no-viewer", "--title", "T", "--columns", "4",
                            "--tile-size", "20"]).status == 2)
    }

    /// A mosaic whose matching cannot fit --max-memory is refused (exit 4) with the budget it
    /// needs, before any photo is analysed; that budget is enough.
    @Test func aMosaicOverItsBudgetIsRefusedBeforeAnalysis() throws {
        let directory = "\(testRoot)/tessera-mosaic-budget-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory, 0o755)
        let arguments = ["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", directory + "/m.jpg", "--grid", "400x300",
                         "--tile-size", "4", "--min-distance", "0", "--cache-dir", directory + "/cache", "--no-progress"]
        let refused = runTessera(arguments + ["--max-memory", "16M"])
        #expect(refused.status == 4, "\(refused.output)")
        #expect(featureIndexFiles(directory + "/cache").isEmpty, "analysed before refusing")
        // "this render needs at least 26.4 MiB": that budget renders.
        let text = try #require(refused.output.components(separatedBy: "needs at least ").last?.split(separator: " ").first)
        let needed = try #require(Double(text))
        let accepted = runTessera(arguments + ["--max-memory", "\(Int(needed.rounded(.up)))M"])
        #expect(accepted.status == 0, "\(accepted.output)")
    }
}

@Suite struct ConsoleTests {
    /// A console whose writes and clock the test holds.
    final class Captured: @unchecked Sendable {
        var out = "", err = "", now = 0.0
        func console(_ style: ProgressStyle, quiet: Bool = false, terminal: Bool = true, columns: Int = 80) -> StreamConsole {
            StreamConsole(style: style, quiet: quiet, standardOutput: { self.out += $0 }, standardError: { self.err += $0 },
                          errorIsTerminal: terminal, terminalWidth: { columns }, clock: { self.now })
        }
    }

    @Test func jsonProgressIsAtMostFourASecondAndTheLastAlwaysShows() {
        let captured = Captured()
        let console = captured.console(.json)
        for done in 1...1000 {
            captured.now = Double(done) / 100  // 10 s, 100 calls a second
            console.progress(.render, done: done, total: 1000, seconds: captured.now, rowWidth: 100)
        }
        let events = jsonLines(captured.err)
        #expect(events.count <= 41 && events.count >= 39, "\(events.count)")
        #expect(events.last?["done"] as? Int == 1000)
        // No ETA before a second and a tenth: the early rate says little.
        #expect(events.first?["eta_s"] is NSNull, "\(events.first ?? [:])")
        #expect(events.dropFirst(20).allSatisfy { $0["eta_s"] is Double })
    }

    @Test func theBarNamesItsPhaseFitsTheTerminalAndClearsBeforeAWarning() {
        for columns in [20, 40, 80, 200] {
            let line = Report.progressLine(phase: .render, done: 500, total: 1000, seconds: 3, rowWidth: 30_000, columns: columns)
            #expect(line.count < columns, "\(columns): \(line)")
            #expect(line.hasPrefix("render"), "\(line)")
        }
        #expect(Report.progressLine(phase: .analysis, done: 7, total: 70, seconds: 0.5, rowWidth: 0, columns: 80).contains("7/70"))
        #expect(!Report.progressLine(phase: .render, done: 10, total: 1000, seconds: 0.2, rowWidth: 100, columns: 80).contains("ETA"))
        #expect(Report.progressLine(phase: .render, done: 500, total: 1000, seconds: 2, rowWidth: 100, columns: 80).contains("ETA 2 s"))

        let captured = Captured()
        let console = captured.console(.bar)
        console.progress(.render, done: 0, total: 100, seconds: 0, rowWidth: 100)
        console.warning("photo.jpg: corrupt data")
        // The bar's line is erased before the warning, so no stale bar stays above it.
        #expect(captured.err.hasSuffix("\r\u{1B}[Ktessera: warning: photo.jpg: corrupt data\n"), "\(captured.err.debugDescription)")
        // Not a terminal: no bar at all. Quiet: no warning either.
        let piped = Captured()
        piped.console(.bar, terminal: false).progress(.render, done: 5, total: 10, seconds: 1, rowWidth: 10)
        #expect(piped.err.isEmpty)
        let quiet = Captured()
        let quietConsole = quiet.console(.bar, quiet: true)
        quietConsole.warning("x")
        quietConsole.result("wrote it")
        quietConsole.message("an error")
        #expect(quiet.out.isEmpty && quiet.err == "tessera: an error\n")
    }
}
