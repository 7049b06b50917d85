// LibraryBenchmark.swift — the library-size section (issue 27): how `tessera` copes with 1,000,
// 100,000 and 1,000,000 photo files. For each size, in one run of the bench and over the same
// tree: `find LIB -type f -printf '%s %T@\n'` (what listing the files costs at the least), the
// grid's dry run cold and warm (the scan), the grid itself cold and warm, the dry run's planned
// peak against the measured one, and the mosaic cold and warm with its scan, analysis, matching
// and render told apart by the `--progress json` events. Each child's peak RSS is its VmHWM,
// polled as the rest of the bench does; each child is stopped after `--library-timeout` seconds
// and reported as "timed out". The targets of issue 27 are printed beside the figures.
//
// The photos are 64 x 48 JPEGs written here in memory with the library's own libjpeg encoder
// (tessera_jpeg_encoder through CTesseraShims; JPEGFileWriter fsyncs every file, which for
// 100,000 files would take minutes). Each shows a 3 x 3 pattern of five well-separated
// lightnesses, so no two of 1,953,125 are the same picture to the mosaic's duplicate finder.
// At most 100,000 distinct photos are made, 1,000 a folder under folders of 10,000: they are the
// library of their own count; a smaller library is their start hard-linked, a larger one sibling
// trees of them hard-linked (ten for 1,000,000 files, each path distinct).
import CTesseraShims
import Dispatch
import Glibc
import Tessera

/// Photos a distinct set holds at most; larger libraries are copies of it in sibling trees.
let libraryDistinctPhotos = 100_000

/// A 64 x 48 JPEG for photo number `index`, encoded in memory.
final class TinyPhotoEncoder {
    static let width = 64, height = 48
    // Oklab lightness about 0.2, 0.45, 0.6, 0.77 and 0.96: adjacent ones 0.13 or more apart,
    // far over the duplicate finder's 0.02, whatever JPEG does to them at quality 90.
    static let palette: [(UInt8, UInt8, UInt8)] = [(25, 25, 60), (110, 60, 40), (70, 140, 90), (215, 160, 130), (245, 240, 225)]
    private let encoder: OpaquePointer
    private var started = false
    private var pixels = [UInt8](repeating: 0, count: width * height * 3)

    init() {
        guard let made = tessera_jpeg_encoder_create(nil, nil, 16384) else { fail("cannot create a JPEG encoder") }
        encoder = made
    }

    deinit { tessera_jpeg_encoder_destroy(encoder) }

    /// Writes photo `index` to `path` (a plain file: no fsync, it is scratch).
    func write(_ index: Int, to path: String) {
        // The mosaic crops the photo to its square middle (x 8..<56) and splits that into 3 x 3
        // sub-cells of 16 px: one palette colour each, from the base-5 digits of `index`.
        var digits = [Int](repeating: 0, count: 9)
        var rest = index
        for d in 0..<9 { digits[d] = rest % 5; rest /= 5 }
        for y in 0..<Self.height {
            for x in 0..<Self.width {
                let block = min(2, y / 16) * 3 + min(2, max(0, x - 8) / 16)
                let colour = Self.palette[digits[block]]
                let i = (y * Self.width + x) * 3
                // A faint gradient, the same in every photo, so the blocks are not flat.
                let shade = UInt8((x + y) / 8)
                pixels[i] = colour.0 &+ (colour.0 < 200 ? shade : 0)
                pixels[i + 1] = colour.1 &+ (colour.1 < 200 ? shade : 0)
                pixels[i + 2] = colour.2 &+ (colour.2 < 200 ? shade : 0)
            }
        }
        write(pixels: pixels, width: Self.width, height: Self.height, to: path)
    }

    /// Writes `pixels` (`width` x `height` RGB) as a JPEG at quality 90 to `path` (a plain file).
    func write(pixels: [UInt8], width: Int, height: Int, to path: String) {
        let begun = started ? tessera_jpeg_encoder_restart(encoder, UInt32(width), UInt32(height))
            : tessera_jpeg_encoder_start(encoder, UInt32(width), UInt32(height), 90, 2, 2, 0)
        started = true
        guard begun == TESSERA_JPEG_OK,
              tessera_jpeg_encoder_write_rows(encoder, pixels, width * 3, UInt32(height)) == TESSERA_JPEG_OK,
              tessera_jpeg_encoder_finish(encoder) == TESSERA_JPEG_OK else {
            fail("encoding a photo: \(String(cString: tessera_jpeg_encoder_message(encoder)))")
        }
        var bytes: UnsafePointer<UInt8>?
        let count = tessera_jpeg_encoder_memory_output(encoder, &bytes)
        let file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard file >= 0, let bytes, Glibc.write(file, bytes, count) == count else { fail("cannot write \(path): \(String(cString: strerror(errno)))") }
        close(file)
    }
}

/// Where photo `index` of a tree lives inside it: 1,000 a folder, 10 folders a group.
func libraryPhotoPath(_ root: String, _ index: Int) -> String {
    root + "/g\(index / 10_000)/f\(index / 1000)/p\(index).jpg"
}

/// Makes the folders of a tree of `count` photos.
func makeLibraryFolders(_ root: String, count: Int) {
    mkdir(root, 0o755)
    for folder in stride(from: 0, to: count, by: 1000) {
        mkdir(root + "/g\(folder / 10_000)", 0o755)
        mkdir(root + "/g\(folder / 10_000)/f\(folder / 1000)", 0o755)
    }
}

/// Writes `count` distinct photos into `root`, a folder per job on every core.
func writeDistinctPhotos(_ root: String, count: Int) {
    makeLibraryFolders(root, count: count)
    let folders = (count + 999) / 1000
    DispatchQueue.concurrentPerform(iterations: folders) { folder in
        let encoder = TinyPhotoEncoder()
        for index in (folder * 1000)..<min(count, folder * 1000 + 1000) {
            encoder.write(index, to: libraryPhotoPath(root, index))
        }
    }
}

/// A library of `size` files in `root`: hard links to the distinct set in `distinct`, one tree
/// for up to its count, else sibling trees t0, t1, ... of it.
func linkLibrary(_ root: String, size: Int, distinct: String, distinctCount: Int) {
    mkdir(root, 0o755)
    let trees = (size + distinctCount - 1) / distinctCount
    DispatchQueue.concurrentPerform(iterations: trees) { tree in
        let treeRoot = trees == 1 ? root : root + "/t\(tree)"
        let count = min(distinctCount, size - tree * distinctCount)
        makeLibraryFolders(treeRoot, count: count)
        for index in 0..<count where link(libraryPhotoPath(distinct, index), libraryPhotoPath(treeRoot, index)) != 0 {
            fail("cannot link \(libraryPhotoPath(treeRoot, index)): \(String(cString: strerror(errno)))")
        }
    }
}

/// What one child did: wall seconds, peak RSS, exit status (nil when it was stopped for taking
/// too long), its standard error's lines each with the second (since the start) it arrived.
struct LibraryChild {
    var seconds: Double
    var peakBytes: Int64
    var status: Int32?
    var lines: [(at: Double, text: String)]
    var ok: Bool { status == 0 }
}

/// Runs `command` with standard output to `stdout` and standard error read as it comes (the
/// `--progress json` events are timed on arrival), the environment plus `environment`. Stops
/// it (SIGTERM, then SIGKILL 5 s later) after `timeout` seconds.
func runLibraryChild(_ command: [String], stdout: String = "/dev/null", environment: [String] = [], timeout: Double) -> LibraryChild {
    var ends: [Int32] = [0, 0]
    // Close-on-exec, so the child holds only the dup on its standard error (the bench spawns
    // from one thread: nothing forks between pipe and fcntl).
    guard pipe(&ends) == 0 else { fail("pipe: \(String(cString: strerror(errno)))") }
    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
    var inherited: [String] = []
    var entry = environ
    while let variable = entry.pointee { inherited.append(String(cString: variable)); entry += 1 }
    let names = Set(environment.map { $0.prefix { $0 != "=" } })
    var envp: [UnsafeMutablePointer<CChar>?] = (inherited.filter { !names.contains($0.prefix { $0 != "=" }) } + environment).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_adddup2(&actions, ends[1], 2)
    let start = monotonicSeconds()
    var pid: pid_t = 0
    let spawned = posix_spawnp(&pid, command[0], &actions, nil, &argv, &envp)
    close(ends[1])
    guard spawned == 0 else { fail("cannot run \(command[0]): \(String(cString: strerror(spawned)))") }
    _ = fcntl(ends[0], F_SETFL, O_NONBLOCK)
    var result = LibraryChild(seconds: 0, peakBytes: 0, status: nil, lines: [])
    var pending: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    var stopping: Double?
    func drain() {
        while true {
            let count = read(ends[0], &buffer, buffer.count)
            guard count > 0 else { return }
            let now = monotonicSeconds() - start
            for byte in buffer[0..<count] {
                if byte == 10 { result.lines.append((now, String(decoding: pending, as: UTF8.self))); pending = [] } else { pending.append(byte) }
            }
        }
    }
    var status: Int32 = 0
    while true {
        result.peakBytes = max(result.peakBytes, highWaterMark(pid))
        drain()
        let done = waitpid(pid, &status, WNOHANG)
        if done == pid || (done < 0 && errno != EINTR) { break }
        let elapsed = monotonicSeconds() - start
        if stopping == nil && elapsed > timeout { kill(pid, SIGTERM); stopping = elapsed }
        if let since = stopping, elapsed > since + 5 { kill(pid, SIGKILL) }
        usleep(10_000)
    }
    result.seconds = monotonicSeconds() - start
    drain()
    close(ends[0])
    if stopping == nil { result.status = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F) }
    return result
}

/// The figure of a dry run's "memory      about 20.6 MiB peak" line, in bytes (the parsing of
/// MemoryTests.swift's plannedPeakBytes).
func plannedPeak(_ stdout: String) -> Int64? {
    guard let line = fileLines(stdout).first(where: { $0.hasPrefix("memory      about ") }) else { return nil }
    let words = line.split(separator: " ")
    guard words.count >= 4, let number = Double(words[2]) else { return nil }
    let unit: Double = words[3] == "GiB" ? 1_073_741_824 : words[3] == "MiB" ? 1_048_576 : words[3] == "KiB" ? 1024 : 1
    return Int64(number * unit)
}

/// A number field of a JSON event line (`"name": 1.25`), or nil.
func jsonNumber(_ line: String, _ name: String) -> Double? {
    guard let range = line.firstRange(of: "\"\(name)\": ") else { return nil }
    return Double(line[range.upperBound...].prefix { $0.isNumber || $0 == "." || $0 == "-" })
}

/// Seconds of each phase of a `--progress json` run: from its "phase" event to the next (the
/// last to the exit, the first from the start); the summary's analysis_s and matching_s where
/// it gives them, since those leave out the waits between phases.
func phaseSeconds(_ child: LibraryChild) -> [String: Double] {
    var starts: [(phase: String, at: Double)] = []
    var summary: String?
    for line in child.lines {
        if line.text.contains("\"event\": \"phase\""), let range = line.text.firstRange(of: "\"phase\": \"") {
            starts.append((String(line.text[range.upperBound...].prefix { $0 != "\"" }), line.at))
        } else if line.text.contains("\"event\": \"summary\"") {
            summary = line.text
        }
    }
    var seconds: [String: Double] = [:]
    for (i, start) in starts.enumerated() {
        let from = i == 0 ? 0 : start.at
        let to = i + 1 < starts.count ? starts[i + 1].at : child.seconds
        seconds[start.phase, default: 0] += to - from
    }
    if let summary {
        if let analysis = jsonNumber(summary, "analysis_s") { seconds["analysis"] = analysis }
        if let matching = jsonNumber(summary, "matching_s") { seconds["matching"] = matching }
    }
    return seconds
}

/// One size's figures for one binary (nil: not measured; a failed or stopped run keeps its child).
struct LibraryFigures {
    var size: Int
    var binary: String
    var find: Double = 0
    var scanCold: LibraryChild?, scanWarm: LibraryChild?
    var gridCold: LibraryChild?, gridWarm: LibraryChild?, grid48: LibraryChild?
    var mosaicCold: LibraryChild?, mosaicWarm: LibraryChild?, mosaic48: LibraryChild?
    var plannedGrid: Int64?, plannedMosaic: Int64?
}

/// "8.25 s, 56.9 MiB", or why there is no figure.
func describe(_ child: LibraryChild?) -> String {
    guard let child else { return "not run" }
    guard let status = child.status else {
        // Where it was: the last progress event's phase and count.
        let last = child.lines.last { $0.text.contains("\"event\": \"progress\"") }.map { line -> String in
            let phase = line.text.firstRange(of: "\"phase\": \"").map { String(line.text[$0.upperBound...].prefix { $0 != "\"" }) } ?? "?"
            return ", in its \(phase) phase at \(Int(jsonNumber(line.text, "done") ?? 0)) of \(Int(jsonNumber(line.text, "total") ?? 0))"
        } ?? ""
        return "timed out after \(fixed(child.seconds, 0)) s\(last) (peak RSS \(mib(child.peakBytes)) MiB so far)"
    }
    guard status == 0 else {
        let last = child.lines.last.map { ": " + $0.text } ?? ""
        return "exit status \(status) after \(fixed(child.seconds)) s\(last)"
    }
    return "\(fixed(child.seconds)) s, peak RSS \(mib(child.peakBytes)) MiB"
}

func mib(_ bytes: Int64) -> String { fixed(Double(bytes) / 1_048_576, 1) }

/// The library-size section: makes the libraries, measures each size with each binary, prints
/// every run as it ends, then the tables and the targets.
@MainActor
func runLibraryBenchmark(sizes: [Int], timeout: Double) {
    guard let largest = sizes.max(), largest > 0 else { return }
    let root = scratch + "/library"
    _ = run(["rm", "-rf", root])
    mkdir(root, 0o755)
    defer { _ = run(["rm", "-rf", root]) }
    let target = options.target ?? products + "/../../../Tests/TesseraTests/Fixtures/orientation/Portrait_1.jpg"
    let binaries = [tessera] + (options.compareBinary.map { [$0] } ?? [])
    let distinctCount = min(libraryDistinctPhotos, largest)
    print("\nlibrary sizes \(sizes.map(String.init).joined(separator: ", ")) photo files (64 x 48 JPEGs, 1,000 a folder), in \(root);")
    print("  one run each (cold: no index or cache yet; the OS's own caches are warm), a run stopped after \(fixed(timeout, 0)) s")
    // ext4 allocates new inodes around those freed in the last 30-35 s, scanning for them, which
    // makes creating files several times slower right after the Deep Zoom and shard sections
    // deleted theirs (measured: 20,000 photos in 18 s instead of 3 s).
    if (options.deepZoom && !options.sizes.isEmpty) || options.shards {
        print("  (waiting 40 s first: ext4 creates files slowly for a while after many were deleted)")
        sleep(40)
    }
    var start = monotonicSeconds()
    // The distinct photos are the library of their own count; the others are hard links to them,
    // whose removal frees no inode.
    let distinct = root + "/lib-\(distinctCount)"
    writeDistinctPhotos(distinct, count: distinctCount)
    print("  \(distinctCount) distinct photos written in \(fixed(monotonicSeconds() - start)) s")
    var all: [LibraryFigures] = []
    for size in sizes where size > 0 {
        let library = root + "/lib-\(size)"
        let trees = (size + distinctCount - 1) / distinctCount
        if size == distinctCount {
            print("\n  library of \(size) files: the distinct photos")
        } else {
            start = monotonicSeconds()
            linkLibrary(library, size: size, distinct: distinct, distinctCount: distinctCount)
            print("\n  library of \(size) files\(trees > 1 ? " (\(trees) sibling trees of the \(distinctCount) distinct photos)" : ""), hard-linked in \(fixed(monotonicSeconds() - start)) s")
        }
        // find: one run to warm the directory caches as the others' are, then the median of three.
        let find = ["find", library, "-type", "f", "-printf", "%s %T@\n"]
        _ = run(find)
        let findSeconds = median((0..<3).map { _ in run(find).seconds })
        print("  find -type f -printf '%s %T@\\n': \(fixed(findSeconds, 3)) s")
        fflush(nil)
        for binary in binaries {
            var figures = measureLibrary(size: size, library: library, binary: binary, target: target, timeout: timeout,
                                         work: root + "/work")
            figures.find = findSeconds
            all.append(figures)
        }
        if size != distinctCount { _ = run(["rm", "-rf", library]) }
    }
    printLibraryTables(all, binaries: binaries)
}

/// One binary's runs on one library, each printed as it ends.
@MainActor
func measureLibrary(size: Int, library: String, binary: String, target: String, timeout: Double, work: String) -> LibraryFigures {
    _ = run(["rm", "-rf", work])
    mkdir(work, 0o755)
    defer { _ = run(["rm", "-rf", work]) }
    var figures = LibraryFigures(size: size, binary: binary)
    // A grid that gains a header index (and a --cache-dir for it) is given a fresh folder for it;
    // XDG_CACHE_HOME points there as well, so no run finds an index left by another.
    let help = work + "/help.txt"
    _ = run([binary, "grid", "--help"], stdout: help, stderr: help)
    let gridHasCache = fileLines(help).contains { $0.contains("--cache-dir") }
    func cache(_ name: String) -> (flags: [String], environment: [String]) {
        let folder = work + "/cache-" + name
        mkdir(folder, 0o755)
        return (["--cache-dir", folder], ["XDG_CACHE_HOME=" + folder])
    }
    let columns = max(1, Int((Double(size).squareRoot() * 1.33).rounded()))
    let label = binary == tessera ? "this build" : binary
    let capture = work + "/stdout.txt"
    func measure(_ what: String, _ arguments: [String], _ cache: (flags: [String], environment: [String]), grid: Bool) -> LibraryChild {
        let flags = grid && !gridHasCache ? [] : cache.flags
        let child = runLibraryChild([binary] + arguments + flags + ["--progress", "json"], stdout: capture, environment: cache.environment,
                                    timeout: timeout)
        print("    \(label), \(what): \(describe(child))")
        fflush(nil)  // a run may take minutes: show each as it ends, also into a file
        return child
    }
    let grid = ["grid", library, "--columns", String(columns), "--tile-size", "20", "-o", work + "/grid.jpg"]
    let scanCache = cache("scan"), gridCache = cache("grid"), mosaicCache = cache("mosaic")
    figures.scanCold = measure("grid --dry-run, cold", grid + ["--dry-run"], scanCache, grid: true)
    figures.plannedGrid = plannedPeak(capture)
    if figures.scanCold?.status != nil { figures.scanWarm = measure("grid --dry-run, warm", grid + ["--dry-run"], scanCache, grid: true) }
    figures.gridCold = measure("grid \(columns) columns of 20 px, cold", grid, gridCache, grid: true)
    if figures.gridCold?.status != nil { figures.gridWarm = measure("grid, warm", grid, gridCache, grid: true) }
    // The 48 MiB budget's target is set at 100,000 photos; larger libraries are not run twice more.
    if size <= 100_000 && figures.gridCold?.status != nil {
        figures.grid48 = measure("grid --max-memory 48M, warm", grid + ["--max-memory", "48M"], gridCache, grid: true)
    }
    let mosaic = ["mosaic", "--target", target, library, "--grid", "200x267", "--tile-size", "20", "-o", work + "/mosaic.jpg"]
    figures.mosaicCold = measure("mosaic 200x267 cells of 20 px, cold", mosaic, mosaicCache, grid: false)
    // A mosaic that did not finish cold leaves no index for the warm runs: they would time out too.
    guard figures.mosaicCold?.status != nil else {
        print("    \(label), mosaic warm, --dry-run and --max-memory 48M: not run (the cold mosaic timed out)")
        return figures
    }
    let warm = measure("mosaic, warm", mosaic, mosaicCache, grid: false)
    figures.mosaicWarm = warm
    if warm.ok {
        let phases = phaseSeconds(warm)
        print("      phases (warm): " + ["scan", "analysis", "target", "matching", "render"].compactMap { name in
            phases[name].map { "\(name) \(fixed($0))" } }.joined(separator: ", ") + " s")
    }
    _ = measure("mosaic --dry-run, warm", mosaic + ["--dry-run"], mosaicCache, grid: false)
    figures.plannedMosaic = plannedPeak(capture)
    if size <= 100_000 { figures.mosaic48 = measure("mosaic --max-memory 48M, warm", mosaic + ["--max-memory", "48M"], mosaicCache, grid: false) }
    return figures
}

/// A table cell: the figure of a run that finished, or why there is none.
func libraryCell(_ child: LibraryChild?, _ figure: (LibraryChild) -> String) -> String {
    guard let child else { return "-" }
    guard let status = child.status else { return "timed out" }
    return status == 0 ? figure(child) : "exit \(status)"
}

/// Peak RSS of the runs given, when all finished.
func libraryPeak(_ children: [LibraryChild?]) -> Int64? {
    let ran = children.compactMap { $0 }
    guard !ran.isEmpty, ran.allSatisfy(\.ok) else { return nil }
    return ran.map(\.peakBytes).max()
}

func printTable(_ header: [String], _ rows: [[String]]) {
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max()! }
    for row in [header] + rows {
        print("  " + row.indices.map { String(repeating: " ", count: widths[$0] - row[$0].count) + row[$0] }.joined(separator: "  "))
    }
}

/// The two tables (seconds; MiB) and the targets of issue 27 at the sizes it sets them.
@MainActor
func printLibraryTables(_ all: [LibraryFigures], binaries: [String]) {
    guard !all.isEmpty else { return }
    let named = binaries.count > 1
    func lead(_ f: LibraryFigures) -> [String] { [String(f.size)] + (named ? [f.binary == tessera ? "this build" : "other"] : []) }
    let leadHeader = ["files"] + (named ? ["binary"] : [])
    print("\nlibrary sizes, seconds (one run each; analysis, matching and render of the warm mosaic, from its --progress json events)")
    printTable(leadHeader + ["find", "scan cold", "scan warm", "warm/find", "grid cold", "grid warm", "mosaic cold", "analysis from index",
                             "matching", "render", "mosaic warm"], all.map { f in
        let phases = f.mosaicWarm.map(phaseSeconds) ?? [:]
        func phase(_ name: String) -> String { libraryCell(f.mosaicWarm) { _ in phases[name].map { fixed($0) } ?? "n/a" } }
        return lead(f) + [fixed(f.find, 3), libraryCell(f.scanCold) { fixed($0.seconds) }, libraryCell(f.scanWarm) { fixed($0.seconds) },
                          libraryCell(f.scanWarm) { "x" + fixed($0.seconds / f.find) }, libraryCell(f.gridCold) { fixed($0.seconds) },
                          libraryCell(f.gridWarm) { fixed($0.seconds) }, libraryCell(f.mosaicCold) { fixed($0.seconds) },
                          phase("analysis"), phase("matching"), phase("render"), libraryCell(f.mosaicWarm) { fixed($0.seconds) }]
    })
    print("\nlibrary sizes, peak RSS in MiB (VmHWM; grid and mosaic: the larger of cold and warm; planned: the dry run's memory line)")
    printTable(leadHeader + ["grid peak", "planned", "planned/peak", "mosaic peak", "planned", "planned/peak", "grid at 48M", "mosaic at 48M"], all.map { f in
        let grid = libraryPeak([f.gridCold, f.gridWarm]), mosaic = libraryPeak([f.mosaicCold, f.mosaicWarm])
        func ratio(_ planned: Int64?, _ peak: Int64?) -> String {
            guard let planned, let peak, peak > 0 else { return "-" }
            return fixed(Double(planned) / Double(peak))
        }
        return lead(f) + [grid.map(mib) ?? "-", f.plannedGrid.map(mib) ?? "-", ratio(f.plannedGrid, grid),
                          mosaic.map(mib) ?? "-", f.plannedMosaic.map(mib) ?? "-", ratio(f.plannedMosaic, mosaic),
                          libraryCell(f.grid48) { mib($0.peakBytes) }, libraryCell(f.mosaic48) { mib($0.peakBytes) }]
    })
    let sized = all.filter { $0.size == 100_000 || $0.size == 1_000_000 }
    guard !sized.isEmpty else { return }
    print("\nlibrary sizes, the targets of issue 27 (this machine: \(onlineCoreCount()) cores)")
    for f in sized { printLibraryTargets(f, named ? (f.binary == tessera ? " (this build)" : " (other)") : "") }
}

@MainActor
func printLibraryTargets(_ f: LibraryFigures, _ label: String) {
    func verdict(_ met: Bool?) -> String { met.map { $0 ? "met" : "NOT met" } ?? "NOT met (no figure)" }
    func line(_ what: String, _ value: String, _ target: String, _ met: Bool?) {
        print("  \(f.size)\(label): \(what) \(value), target: \(target): \(verdict(met))")
    }
    let limit: Int64 = 64 << 20
    if f.size == 1_000_000 {
        for (name, children) in [("grid", [f.gridCold, f.gridWarm]), ("mosaic", [f.mosaicCold, f.mosaicWarm])] {
            let peak = libraryPeak(children)
            let value = peak.map { "completed, peak RSS \(mib($0)) MiB" } ?? children.map { describe($0) }.joined(separator: "; ")
            line(name, value, "completes inside 64 MiB", peak.map { $0 <= limit })
        }
        return
    }
    let grid = libraryPeak([f.gridCold, f.gridWarm]), mosaic = libraryPeak([f.mosaicCold, f.mosaicWarm])
    for (name, peak, planned, at48) in [("grid", grid, f.plannedGrid, f.grid48), ("mosaic", mosaic, f.plannedMosaic, f.mosaic48)] {
        line("\(name) peak RSS", peak.map { "\(mib($0)) MiB" } ?? "-", "<= 64 MiB", peak.map { $0 <= limit })
        let peak48 = libraryPeak([at48])
        line("\(name) --max-memory 48M peak RSS", peak48.map { "\(mib($0)) MiB" } ?? describe(at48), "<= 48 MiB", peak48.map { $0 <= 48 << 20 })
        let ratio = planned.flatMap { planned in peak.map { Double(planned) / Double(max(1, $0)) } }
        line("\(name) dry run's plan / peak", ratio.map { "x" + fixed($0) } ?? "-", ">= 0.80", ratio.map { $0 >= 0.8 })
    }
    let scan = f.scanWarm.flatMap { $0.ok ? $0.seconds / f.find : nil }
    line("warm scan / find", scan.map { "x" + fixed($0) } ?? describe(f.scanWarm), "<= 3x", scan.map { $0 <= 3 })
    let whole = f.mosaicWarm.flatMap { $0.ok ? $0.seconds : nil }
    line("whole mosaic, warm feature index", whole.map { "\(fixed($0)) s" } ?? describe(f.mosaicWarm), "<= 3 s", whole.map { $0 <= 3 })
}
