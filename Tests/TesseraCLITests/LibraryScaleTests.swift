// LibraryScaleTests.swift — issue 27: libraries of 100,000 photos and more, end to end through
// the real binary, inside the memory budget, and an analysis that survives being stopped.
//
// The libraries are made on the fly (CTesseraTestShims writes 100,000 distinct 64 x 48 JPEGs in
// seconds), once per test process, and removed when the suite ends. Peaks are the child's own
// VmHWM, polled every millisecond (MemoryTests.swift says why not ru_maxrss); the counts of
// photos analysed and reused are what the run itself reports ("analysis N photo(s) analysed, M
// from the index" in the text summary, `analysed` and `reused` in `--progress json`'s summary).
//
// The binary is a release build (`scaleTool`): a debug build takes about 20 times as long over
// 100,000 photos (13 minutes for one grid on a loaded 2-core machine), and what is measured
// here is what ships.
import CTesseraTestShims
import Glibc
import Testing

/// The binary these tests run: $TESSERA_SCALE_TOOL when set (CI builds the release binary
/// before the tests and names it), else $TESSERA_TOOL (as for every CLI test), else this
/// package's `tessera` built for release, once per test process, in its own scratch folder
/// (.build/scale-release: `swift test` holds .build's lock while it runs; an up-to-date build
/// takes seconds, the first one minutes).
let scaleTool: String = {
    for name in ["TESSERA_SCALE_TOOL", "TESSERA_TOOL"] {
        if let override = getenv(name), override.pointee != 0 { return String(cString: override) }
    }
    let file = #filePath
    let tests = file[..<file.lastIndex(of: "/")!]
    let package = String(tests[..<tests.lastIndex(of: "/")!].dropLast("/Tests".count))
    let scratch = package + "/.build/scale-release"
    let log = testRoot + "/scale-release-build.txt"
    let status = system("cd '\(package)' && PATH=\"/opt/swift/usr/bin:$PATH\" swift build -c release --product tessera "
                        + "--scratch-path '\(scratch)' >'\(log)' 2>&1")
    precondition(status == 0, "the release build failed: \(String(decoding: readFile(log), as: UTF8.self).suffix(3000))")
    return scratch + "/release/tessera"
}()

/// Where this suite's libraries live; removed as a whole when the suite ends.
private let scaleRoot = testRoot + "/scale-libraries"

/// Writes `count` distinct photos into a new folder `name` under scaleRoot (flat, or
/// `perFolder` to a subfolder), and returns its path.
private func makeDistinctPhotos(_ name: String, count: Int, perFolder: Int = 0, width: Int32 = 64, height: Int32 = 48,
                                noise: Int32 = 0) -> String {
    let folder = scaleRoot + "/" + name
    precondition(system("mkdir -p '\(folder)'") == 0, "cannot make \(folder)")
    var message = [CChar](repeating: 0, count: 300)
    let written = tessera_test_write_distinct_jpegs(folder, Int32(count), Int32(perFolder), width, height, noise, 85, &message, 300)
    precondition(written == 0, "cannot write the photos in \(folder): \(String(cString: message))")
    return folder
}

/// 100,000 distinct 64 x 48 px photos in one folder.
private let flatLibrary = makeDistinctPhotos("flat", count: 100_000)
/// The same 100,000 pictures nested 1,000 to a folder (100 subfolders).
private let nestedLibrary = makeDistinctPhotos("nested", count: 100_000, perFolder: 1_000)
/// 300,000 files that are not photos (empty sidecars, 100 in every 1,000 tiny text notes) and
/// one photo.
private let notPhotosLibrary: String = {
    let folder = scaleRoot + "/not-photos"
    precondition(system("mkdir -p '\(folder)'") == 0, "cannot make \(folder)")
    for index in 0..<300_000 {
        let text = index % 10 == 0
        let fd = open(folder + (text ? "/note-\(index).txt" : "/sidecar-\(index).xmp"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        precondition(fd >= 0, "cannot write in \(folder)")
        if text { _ = write(fd, "not a photo\n", 12) }
        close(fd)
    }
    precondition(system("cp '\(fixtures)/Landscape_1.jpg' '\(folder)/photo.jpg'") == 0)
    return folder
}()
/// 10,000 distinct photos for the interrupted analyses: 160 x 120 px with noise, so that one
/// worker takes seconds over them and a signal lands part-way.
private let interruptedLibrary = makeDistinctPhotos("interrupted", count: 10_000, width: 160, height: 120, noise: 24)
private let interruptedCount = 10_000

/// Removes the libraries when the suite has run (the test root goes at exit too, but 800 MB of
/// small files should not wait for the other suites).
struct RemovesScaleLibraries: SuiteTrait, TestScoping {
    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        defer { _ = system("rm -rf '\(scaleRoot)'") }
        try await function()
    }
}

/// A new empty folder for one test's outputs, index and temporaries.
private func scratchFolder(_ name: String) -> String {
    let folder = testRoot + "/scale-\(name)-\(UInt32.random(in: 0...UInt32.max))"
    precondition(mkdir(folder, 0o755) == 0, "cannot make \(folder)")
    return folder
}

private func mib(_ bytes: Int) -> String { String(format1: Double(bytes) / 1_048_576) }

/// `scaleTool` run to its end with its peak measured.
private func runScaled(_ arguments: [String]) -> ChildRun { runWatched(arguments).run }

/// What `--dry-run` plans for `arguments` ("memory      about 41.9 MiB peak"), in bytes, as
/// plannedPeakBytes reads it but from `scaleTool`.
private func plannedScaledBytes(_ arguments: [String]) -> Int? {
    let run = runScaled(arguments + ["--dry-run"])
    guard let line = run.output.split(separator: "\n").first(where: { $0.hasPrefix("memory      about ") }) else { return nil }
    let words = line.split(separator: " ")
    guard words.count >= 4, let number = Double(words[2]) else { return nil }
    let unit: Double = words[3] == "GiB" ? 1_073_741_824 : words[3] == "MiB" ? 1_048_576 : words[3] == "KiB" ? 1024 : 1
    return Int(number * unit)
}

/// The peak within the plan: the dry run for `arguments` must plan at least the measured peak
/// (issue 27: "each peak within the dry run's plan"; its other figure, the plan at least 80% of
/// the peak, follows).
private func expectPeakWithinPlan(_ arguments: [String], peakBytes: Int, _ name: String) {
    guard let planned = plannedScaledBytes(arguments) else {
        Issue.record("\(name): no memory line in the dry run")
        return
    }
    #expect(peakBytes <= planned, "\(name): peak \(mib(peakBytes)) MiB over the \(mib(planned)) MiB the dry run planned")
}

/// The peak inside `budgetMiB`, and measured at all.
private func expectPeakInsideBudget(_ run: ChildRun, _ budgetMiB: Int, _ name: String) {
    #expect(run.peakBytes > 4 << 20, "\(name): a peak of \(run.peakBytes) bytes is not a measurement")
    #expect(run.peakBytes <= budgetMiB << 20, "\(name): peak \(run.peakMiB) MiB over the \(budgetMiB) MiB budget")
}

/// The number after `key` (`"done": 12`, `"analysed": 5`) in a JSON line, or nil.
private func jsonInteger(_ key: String, in line: Substring) -> Int? {
    guard let range = line.range(of: "\"\(key)\": ") else { return nil }
    return Int(line[range.upperBound...].prefix { $0.isNumber })
}

/// What a mosaic run says it analysed and took from the index: the text summary's "analysis N
/// photo(s) analysed, M from the index", else the JSON summary's `analysed` and `reused`.
func analysisCounts(_ output: String) -> (analysed: Int, reused: Int)? {
    for line in output.split(separator: "\n") {
        if let range = line.range(of: " photo(s) analysed, ") {
            let before = line[..<range.lowerBound].split(separator: " ").last.flatMap { Int($0) }
            let after = line[range.upperBound...].split(separator: " ").first.flatMap { Int($0) }
            if let before, let after { return (before, after) }
        }
        if line.contains("\"event\": \"summary\""), let analysed = jsonInteger("analysed", in: line),
           let reused = jsonInteger("reused", in: line) {
            return (analysed, reused)
        }
    }
    return nil
}

/// runMeasured's run of `scaleTool`, with standard output and error read line by line while the child runs:
/// `decide` sees each line and may answer a signal to send (once). The run is SIGKILLed, and an
/// issue recorded, if it has not ended after ten minutes.
func runWatched(_ arguments: [String], decide: (Substring) -> Int32? = { _ in nil }) -> (run: ChildRun, sent: Int32?) {
    let tool = scaleTool
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { return (ChildRun(status: -1, output: "pipe failed", peakBytes: 0), nil) }
    // (Only the child's 1 and 2 are the pipe's write end: the dup2s clear close-on-exec.)
    _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
    _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
    var argv: [UnsafeMutablePointer<CChar>?] = ([tool] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2)
    var pid: pid_t = 0
    var environment = testEnvironment()
    defer { freeEnvironment(environment) }
    let spawned = posix_spawn(&pid, tool, &actions, nil, &argv, &environment)
    close(fds[1])
    defer { close(fds[0]) }
    guard spawned == 0 else { return (ChildRun(status: -1, output: "spawn failed", peakBytes: 0), nil) }
    _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
    var output: [UInt8] = [], pending: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    var sent: Int32?
    var status: Int32 = 0, peak = 0
    let deadline = monotonicNow() + 600
    func drain() {
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            output += buffer[0..<count]
            pending += buffer[0..<count]
            while let newline = pending.firstIndex(of: 10) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                if sent == nil, let signal = decide(Substring(line)) {
                    kill(pid, signal)
                    sent = signal
                }
            }
        }
    }
    while true {
        peak = max(peak, highWaterMark(pid))
        var watch = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        _ = poll(&watch, 1, 1)
        drain()
        let done = waitpid(pid, &status, WNOHANG)
        if done == pid || (done < 0 && errno != EINTR) { break }
        if monotonicNow() > deadline && sent != SIGKILL {
            Issue.record("\(arguments.prefix(2)): still running after ten minutes; killed")
            kill(pid, SIGKILL)
            sent = SIGKILL
        }
    }
    drain()
    return (ChildRun(status: status, output: String(decoding: output, as: UTF8.self), peakBytes: peak), sent)
}

@Suite(.serialized, RemovesScaleLibraries()) struct LibraryScaleTests {
    /// The grid of 100,000 photos in one folder: inside 64 MiB and 48 MiB, each peak within the
    /// dry run's plan, and the plan not a quarter over the peak.
    @Test(arguments: [64, 48])
    func aGridOf100000PhotosStaysInsideTheBudget(budgetMiB: Int) throws {
        let folder = scratchFolder("grid-flat-\(budgetMiB)")
        defer { _ = system("rm -rf '\(folder)'") }
        let arguments = ["grid", flatLibrary, "-o", folder + "/out.jpg", "--columns", "400", "--tile-size", "8",
                         "--max-memory", "\(budgetMiB)M", "--temp-dir", folder]
        let run = runScaled(arguments + ["--no-progress"])
        let name = "100,000 photos, one folder, --max-memory \(budgetMiB)M"
        #expect(run.exitCode == 0, "\(name): \(run.output)")
        #expect(run.output.contains("3200 x 2000 px"), "\(name): not every photo drawn: \(run.output)")
        expectPeakInsideBudget(run, budgetMiB, name)
        expectPeakWithinPlan(arguments, peakBytes: run.peakBytes, name)
    }

    /// The same 100,000 pictures in 100 folders of 1,000.
    @Test func aGridOf100000NestedPhotosStaysInsideTheBudget() throws {
        let folder = scratchFolder("grid-nested")
        defer { _ = system("rm -rf '\(folder)'") }
        let arguments = ["grid", nestedLibrary, "-o", folder + "/out.jpg", "--columns", "400", "--tile-size", "8",
                         "--max-memory", "64M", "--temp-dir", folder]
        let run = runScaled(arguments + ["--no-progress"])
        let name = "100,000 photos in 100 folders, --max-memory 64M"
        #expect(run.exitCode == 0, "\(name): \(run.output)")
        #expect(run.output.contains("3200 x 2000 px"), "\(name): not every photo drawn: \(run.output)")
        expectPeakInsideBudget(run, 64, name)
        expectPeakWithinPlan(arguments, peakBytes: run.peakBytes, name)
    }

    /// 300,000 files that are not photos and one photo: the scan keeps none of them, so the run
    /// stays inside 64 MiB and its plan (issue 25 tested 100,000 at 32 MiB; this is three times
    /// as many, with text files among them).
    @Test func threeHundredThousandFilesThatAreNotPhotosStayInsideTheBudget() throws {
        let folder = scratchFolder("grid-not-photos")
        defer { _ = system("rm -rf '\(folder)'") }
        let arguments = ["grid", notPhotosLibrary, "-o", folder + "/out.jpg", "--columns", "1", "--tile-size", "64",
                         "--max-memory", "64M", "--temp-dir", folder]
        let run = runScaled(arguments + ["--no-progress"])
        let name = "300,000 files that are not photos, --max-memory 64M"
        #expect(run.exitCode == 0 && run.output.contains("64 x 64 px"), "\(name): \(run.output)")
        expectPeakInsideBudget(run, 64, name)
        expectPeakWithinPlan(arguments, peakBytes: run.peakBytes, name)
    }

    /// A mosaic of the 100,000 photos, cold (every photo analysed) then warm (every feature from
    /// the index, none analysed): both inside 64 MiB and within the dry run's plan.
    @Test func aMosaicOf100000PhotosColdThenWarmStaysInsideTheBudget() throws {
        let folder = scratchFolder("mosaic")
        defer { _ = system("rm -rf '\(folder)'") }
        let arguments = ["mosaic", "--target", fixtures + "/Portrait_1.jpg", flatLibrary, "-o", folder + "/m.jpg",
                         "--grid", "50x66", "--tile-size", "20", "--cache-dir", folder + "/cache", "--max-memory", "64M",
                         "--temp-dir", folder]
        // A mosaic's dry run analyses and matches (it plans the matching from the features), so
        // it would fill the index the cold run must find empty: the plan is asked for once, after
        // the cold run, and both peaks are held to it (the plan does not depend on the index).
        var runs: [(name: String, run: ChildRun)] = []
        for (name, analysed) in [("cold", 100_000), ("warm", 0)] {
            let run = runScaled(arguments + ["--no-progress"])
            let label = "mosaic of 100,000 photos, \(name) index, --max-memory 64M"
            #expect(run.exitCode == 0, "\(label): \(run.output)")
            let counts = try #require(analysisCounts(run.output), "\(label): no analysis counts in: \(run.output)")
            #expect(counts.analysed == analysed && counts.analysed + counts.reused == 100_000,
                    "\(label): \(counts.analysed) analysed and \(counts.reused) from the index; expected \(analysed) analysed of 100,000")
            expectPeakInsideBudget(run, 64, label)
            runs.append((label, run))
        }
        let planned = try #require(plannedScaledBytes(arguments), "mosaic of 100,000 photos: no memory line in the dry run")
        for (label, run) in runs {
            #expect(run.peakBytes <= planned, "\(label): peak \(run.peakMiB) MiB over the \(mib(planned)) MiB the dry run planned")
        }
    }

    /// A mosaic's analysis stopped part-way, by SIGKILL (nothing of the process runs after it)
    /// or SIGINT (Ctrl-C: the run stops itself, exit 130), once at least a fifth of the photos
    /// are reported analysed: the rerun analyses only the rest, and a third run none.
    ///
    /// The bound: issue 27 says an interrupted analysis "loses at most the photos in flight". A
    /// photo is in flight from when a worker takes it until its features are in the index file;
    /// with `--workers 2` at most two are. Every photo the last progress event counted as done
    /// had been analysed before the signal was sent, so the index must keep all of them but the
    /// two whose entries may have been being written as the signal came: the rerun may analyse
    /// at most (10,000 - done) + 2 photos, and it must find the rest in the index (analysed now
    /// plus reused is 10,000, so no entry was damaged into a photo that is neither).
    @Test(arguments: [SIGKILL, SIGINT])
    func anInterruptedAnalysisLosesAtMostThePhotosInFlight(signal: Int32) throws {
        let folder = scratchFolder("interrupted-\(signal)")
        defer { _ = system("rm -rf '\(folder)'") }
        let workers = 2
        let total = interruptedCount
        let arguments = ["mosaic", "--target", fixtures + "/Portrait_1.jpg", interruptedLibrary, "-o", folder + "/m.jpg",
                         "--grid", "40x53", "--tile-size", "20", "--cache-dir", folder + "/cache", "--max-memory", "64M",
                         "--workers", "\(workers)", "--temp-dir", folder, "--progress", "json"]
        let name = signal == SIGKILL ? "SIGKILL" : "SIGINT"
        var doneAtSignal = 0
        let (first, sent) = runWatched(arguments) { line in
            guard line.contains("\"event\": \"progress\""), line.contains("\"phase\": \"analysis\""),
                  let done = jsonInteger("done", in: line), jsonInteger("total", in: line) == total, done * 5 >= total else { return nil }
            doneAtSignal = done
            return signal
        }
        try #require(sent == signal, "\(name): the analysis never reported a fifth of \(total) photos done: \(first.output.suffix(2000))")
        #expect(doneAtSignal < total, "\(name): the analysis had finished (\(doneAtSignal) of \(total)) before the signal; nothing was interrupted")
        if signal == SIGKILL {
            #expect(first.exitCode == -SIGKILL, "\(name): the run ended with \(first.exitCode), not by the signal")
        } else {
            #expect(first.exitCode == 130, "\(name): the run ended with \(first.exitCode), not 130: \(first.output.suffix(2000))")
        }
        let rerun = runScaled(arguments)
        #expect(rerun.exitCode == 0, "\(name): the rerun failed: \(rerun.output.suffix(2000))")
        let counts = try #require(analysisCounts(rerun.output), "\(name): no analysis counts in the rerun: \(rerun.output.suffix(2000))")
        let allowed = total - doneAtSignal + workers
        let lost = "\(name) after \(doneAtSignal) of \(total) photos analysed: the rerun analysed \(counts.analysed) "
            + "(\(counts.reused) from the index), more than the \(allowed) the photos in flight allow"
        #expect(counts.analysed <= allowed, "\(lost)")
        #expect(counts.analysed + counts.reused == total,
                "\(name): the rerun analysed \(counts.analysed) and reused \(counts.reused), not \(total) in all")
        let third = runScaled(arguments)
        let settled = try #require(analysisCounts(third.output), "\(name): no analysis counts in the third run: \(third.output.suffix(2000))")
        #expect(third.exitCode == 0 && settled.analysed == 0 && settled.reused == total,
                "\(name): the third run analysed \(settled.analysed) and reused \(settled.reused) of \(total): the index is not complete")
    }

    /// The index's disk full: the index of 10,000 photos on a tmpfs with room for half of it.
    /// The mosaic is made all the same (the index not saved is a warning, not a failure); once
    /// the tmpfs is enlarged, the rerun finds what was kept and analyses only the rest, and a
    /// third run analyses nothing. "What was kept" is what the rerun reports reused: it must be
    /// at least a quarter of the photos (room was left for half; the other quarter allows for
    /// whatever the index writes besides entries), and reused plus analysed must be all of them.
    /// Needs root (mount); with TESSERA_TESTS_NEED_ROOT set, not being root is a failure.
    @Test func anIndexOnAFullDiskKeepsWhatFitAndTheRerunAnalysesTheRest() throws {
        guard geteuid() == 0 else {
            if getenv("TESSERA_TESTS_NEED_ROOT") != nil { Issue.record("TESSERA_TESTS_NEED_ROOT is set (.ci/run) but the tests do not run as root") }
            return
        }
        let folder = scratchFolder("disk-full")
        defer { _ = system("rm -rf '\(folder)'") }
        let total = interruptedCount
        func arguments(_ cache: String) -> [String] {
            ["mosaic", "--target", fixtures + "/Portrait_1.jpg", interruptedLibrary, "-o", folder + "/m.jpg", "--grid", "40x53",
             "--tile-size", "20", "--cache-dir", cache, "--max-memory", "64M", "--temp-dir", folder, "--no-progress"]
        }
        // The whole index's size, from a run with room for it.
        let roomy = runScaled(arguments(folder + "/roomy"))
        #expect(roomy.exitCode == 0, "with room: \(roomy.output)")
        #expect(system("du -sb '\(folder)/roomy' | cut -f1 > '\(folder)/roomy-size.txt'") == 0)
        let whole = try #require(Int(String(decoding: readFile(folder + "/roomy-size.txt"), as: UTF8.self).filter(\.isNumber)))
        try #require(whole >= 256 << 10, "an index of \(whole) bytes for \(total) photos is too small to fill half of")
        let room = (whole / 2) / 4096 * 4096
        let mountPoint = folder + "/small"
        #expect(mkdir(mountPoint, 0o755) == 0)
        try #require(system("mount -t tmpfs -o size=\(room) tessera-test '\(mountPoint)'") == 0, "mount -t tmpfs -o size=\(room) failed")
        defer { _ = system("umount '\(mountPoint)'") }
        unlink(folder + "/m.jpg")
        let cramped = runScaled(arguments(mountPoint + "/cache"))
        let label = "an index of \(whole >> 10) KiB on a tmpfs of \(room >> 10) KiB"
        #expect(cramped.exitCode == 0, "\(label): the mosaic failed: \(cramped.output)")
        #expect(access(folder + "/m.jpg", F_OK) == 0, "\(label): no mosaic written")
        #expect(cramped.output.contains("warning") && cramped.output.contains("index"), "\(label): no warning about the index: \(cramped.output)")
        #expect(system("mount -o remount,size=\(whole * 4) '\(mountPoint)'") == 0)
        let rerun = runScaled(arguments(mountPoint + "/cache"))
        #expect(rerun.exitCode == 0, "\(label), then room: the rerun failed: \(rerun.output)")
        let counts = try #require(analysisCounts(rerun.output), "\(label): no analysis counts in the rerun: \(rerun.output)")
        #expect(counts.reused >= total / 4 && counts.analysed + counts.reused == total,
                "\(label): the rerun reused \(counts.reused) and analysed \(counts.analysed) of \(total) (at least \(total / 4) should have been kept)")
        let third = runScaled(arguments(mountPoint + "/cache"))
        let settled = try #require(analysisCounts(third.output), "\(label): no analysis counts in the third run: \(third.output)")
        #expect(third.exitCode == 0 && settled.analysed == 0 && settled.reused == total,
                "\(label): the third run analysed \(settled.analysed) and reused \(settled.reused) of \(total): the index is not complete")
    }
}
