// tessera-bench — the performance instrument. No test framework, no assertions: it prints.
//
// For grids of about 0.1, 0.4 and 1.2 gigapixels (200 columns of 150 px cells; 22, 89 and 267
// rows) it measures, in one run of this program:
//   floor   the same pixels pushed through the same libjpeg settings with no tile work
//           (JPEGFile.encodeRepeating over one rendered band of cells), in this process;
//   tessera the real `tessera grid` command, as a child process, so its peak RSS (wait4) is its own.
// Then, on the largest grid, `--encoder serial` against `--encoder parallel` for 1, 2 and all
// workers (the speed-up), and what the parallel encoder's restart markers cost in file size.
// Then Deep Zoom on the largest grid: `--dzi` alone, `-o` alone, both in one pass against the two
// one after the other, `--szi`, `--iiif` and `--tiff` alone against `--dzi`, libvips's dzsave of the JPEG
// (a folder and an .szi), and a 20-gigapixel `--dzi` render (same
// width, 16.7 x the height) to show that memory does not grow with the height.
// Then a library of 40 large progressive photos (12-48 MP) against their baseline twins
// (Benchmarks/ProgressiveBenchmark.swift), and the 1.2 GP grid with them in its folder.
// Then every format a phone library holds against baseline JPEG, and a folder of 32 camera-sized
// photos in those formats (Benchmarks/FormatBenchmark.swift).
// Then `tessera mosaic` on the same grid against a real photo (end to end, ratio to the floor,
// peak RSS), matching alone for 53,400 cells against 1,000 photos, and, where `metapixel` and
// ImageMagick's `convert` are installed, metapixel's classic mode on the same target, library
// and grid, with both mosaics' mean Oklab error and CIEDE2000 against the target at sub-cell
// resolution and their SSIM against it at a common size (MosaicQuality).
// Then `tessera mosaic --adaptive` against the fixed mosaic at the same number of cells, on each
// target and library: CIEDE2000 and SSIM of the written pictures (Benchmarks/AdaptiveBenchmark.swift;
// `--adaptive-only` runs that alone).
// Then libraries of 1,000 and 100,000 tiny photo files (and 1,000,000 when asked): the scan, the
// grid and the mosaic cold and warm against `find -printf` over the same tree, with peak RSS and
// the dry run's plan (Benchmarks/LibraryBenchmark.swift; one run each, not the median below).
// Each measurement: one warm-up run thrown away, then --runs timed runs; the median is printed
// with MP/s, peak RSS and the ratio to the floor.
//
//   swift run -c release tessera-bench [--photos DIR] [--runs N] [--sizes 0.1,0.4,1.2]
//                                      [--workers N] [--temp-dir DIR] [--library-sizes 1000,100000,1000000]
//                                      [--no-library] [--library-timeout S] [--no-collage] [--collage-photos N]
//                                      [--collage-width PX] [-- extra tessera flags]
import Glibc
import Tessera
import TesseraTestSupport

#if DEBUG
print("""
################################################################################
#  DEBUG BUILD: these numbers mean nothing. Run: swift run -c release tessera-bench
################################################################################
""")
#endif

useBoundedMemoryAllocator()

struct Options {
    var photos: String?
    var runs = 3
    var sizes: [Double] = [0.1, 0.4, 1.2]
    var workers: Int?
    var temporaryDirectory = defaultTemporaryDirectory()
    var extra: [String] = []
    var compareEncoders = true
    var mosaic = true
    var deepZoom = true
    var largeDeepZoomGigapixels = 20.0
    var target: String?
    var compareBinary: String?
    var progressive = true
    var formats = true
    var matching = true
    var matchingSizes = [1000, 100_000, 1_000_000]
    var shards = true
    var shardDeepZoomGigapixels = 5.0
    var library = true
    /// The mosaic section's comparison of adaptive and fixed mosaics (AdaptiveBenchmark.swift);
    /// `adaptiveOnly`: that alone.
    var adaptive = true
    var adaptiveOnly = false
    // 1,000,000 files take minutes with a binary that lists them slowly: asked for by name.
    var librarySizes = [1000, 100_000]
    var libraryTimeout = 600.0
    var collage = true
    var collagePhotos = 10_000
    var collageWidth = 30_000
}

func fail(_ message: String) -> Never {
    print("tessera-bench: \(message)")
    exit(2)
}

func number<T: LosslessStringConvertible>(_ text: String, _ what: String) -> T {
    guard let value = T(text) else { fail("\(what) expects a number, got '\(text)'") }
    return value
}

var options = Options()
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    func value() -> String {
        guard !arguments.isEmpty else { fail("\(argument) needs a value") }
        return arguments.removeFirst()
    }
    switch argument {
    case "--photos": options.photos = value()
    case "--runs": options.runs = number(value(), "--runs")
    case "--sizes": options.sizes = value().split(separator: ",").map { number(String($0), "--sizes") }
    case "--workers": options.workers = number(value(), "--workers")
    case "--temp-dir": options.temporaryDirectory = value()
    case "--no-encoder-comparison": options.compareEncoders = false
    case "--no-mosaic": options.mosaic = false
    case "--no-deep-zoom": options.deepZoom = false
    case "--no-progressive": options.progressive = false
    case "--no-formats": options.formats = false
    case "--no-matching": options.matching = false
    case "--matching-sizes": options.matchingSizes = value().split(separator: ",").map { number(String($0), "--matching-sizes") }
    case "--match-synthetic": runSyntheticMatching(photoCount: number(value(), "--match-synthetic"), workers: options.workers ?? onlineCoreCount(), temporaryDirectory: options.temporaryDirectory)
    case "--large-deep-zoom": options.largeDeepZoomGigapixels = number(value(), "--large-deep-zoom")
    case "--target": options.target = value()
    case "--compare-binary": options.compareBinary = value()
    case "--no-shards": options.shards = false
    case "--shard-deep-zoom": options.shardDeepZoomGigapixels = number(value(), "--shard-deep-zoom")
    case "--no-library": options.library = false
    case "--no-collage": options.collage = false
    case "--collage-photos": options.collagePhotos = number(value(), "--collage-photos")
    case "--collage-width": options.collageWidth = number(value(), "--collage-width")
    case "--no-adaptive": options.adaptive = false
    case "--adaptive-only": options.adaptiveOnly = true
    case "--library-sizes": options.librarySizes = value().split(separator: ",").map { number(String($0), "--library-sizes") }
    case "--library-timeout": options.libraryTimeout = number(value(), "--library-timeout")
    case "--": options.extra = arguments; arguments = []
    case "-h", "--help":
        print("usage: tessera-bench [--photos DIR] [--runs N] [--sizes 0.1,0.4,1.2] [--workers N] [--temp-dir DIR] [--no-encoder-comparison] [--no-mosaic] [--no-deep-zoom] [--no-progressive] [--no-formats] [--no-matching] [--matching-sizes 1000,100000,1000000] [--large-deep-zoom GP (0: skip)] [--target PICTURE] [--compare-binary OLD_TESSERA] [--no-shards] [--shard-deep-zoom GP (0: skip)] [--no-library] [--library-sizes 1000,100000[,1000000]] [--library-timeout S] [--no-collage] [--collage-photos N] [--collage-width PX] [--no-adaptive] [--adaptive-only] [-- tessera flags]")
        exit(0)
    default: fail("unknown argument \(argument)")
    }
}

/// The directory holding this executable (the release build's products).
func productsDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { fail("cannot find /proc/self/exe") }
    let path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return String(path[..<path.lastIndex(of: "/")!])
}

/// Starts `command` with its standard output (and error, when given) to files; fails the run if
/// it cannot start.
func spawn(_ command: [String], stdout: String, stderr: String?) -> pid_t {
    var pid: pid_t = 0
    var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    if let stderr { posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
    defer { posix_spawn_file_actions_destroy(&actions) }
    let spawned = posix_spawnp(&pid, command[0], &actions, nil, &argv, environ)
    guard spawned == 0 else { fail("cannot run \(command[0]): \(String(cString: strerror(spawned)))") }
    return pid
}

/// Runs a command; returns wall seconds, the child's peak RSS in bytes and its exit status.
func run(_ command: [String], stdout: String = "/dev/null", stderr: String? = nil) -> (seconds: Double, peakBytes: Int64, status: Int32) {
    let start = monotonicSeconds()
    let pid = spawn(command, stdout: stdout, stderr: stderr)
    // Peak RSS: the child's VmHWM, sampled every 10 ms until it exits. (wait4's ru_maxrss is no
    // good here: posix_spawn shares this process's memory until exec, and Linux carries that
    // high-water mark into the child's, so a child would report at least this process's RSS.)
    var status: Int32 = 0
    var peak: Int64 = 0
    while true {
        peak = max(peak, highWaterMark(pid))
        let done = waitpid(pid, &status, WNOHANG)
        if done == pid { break }
        if done < 0 && errno != EINTR { break }
        usleep(10_000)
    }
    let seconds = monotonicSeconds() - start
    return (seconds, peak, status)
}

/// VmHWM of a running process, in bytes (0 once it has exited).
func highWaterMark(_ pid: pid_t) -> Int64 {
    guard let file = fopen("/proc/\(pid)/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("VmHWM:") {
            let digits = text.filter(\.isNumber)
            return (Int64(digits) ?? 0) * 1024
        }
    }
    return 0
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func fixed(_ value: Double, _ places: Int = 2) -> String { formatDecimal(value, places: places) }

let products = productsDirectory()
let tessera = products + "/tessera"
guard access(tessera, X_OK) == 0 else { fail("build the tool first: swift build -c release (looked for \(tessera))") }

// Photos: the user's folder, or 120 generated ones cached beside the build.
let photoDirectory: String
if let given = options.photos {
    photoDirectory = given
} else {
    photoDirectory = products + "/bench-photos"
    let marker = photoDirectory + "/.complete-120"
    if access(marker, F_OK) != 0 {
        mkdir(photoDirectory, 0o755)
        print("generating 120 sample photos (1600 x 1200) in \(photoDirectory) ...")
        do {
            _ = try SamplePhotos.generate(count: 120, in: photoDirectory)
        } catch {
            fail("\(error)")
        }
        close(open(marker, O_CREAT | O_WRONLY, 0o644))
    }
}

let columns = 200, cell = 150, quality = 90
let scratch = options.temporaryDirectory + "/tessera-bench-\(getpid())"
mkdir(scratch, 0o755)
defer { rmdir(scratch) }
let output = scratch + "/out.jpg"
var flags = ["--quality", String(quality), "--no-progress"] + options.extra
if let workers = options.workers { flags += ["--workers", String(workers)] }

print("tessera-bench: \(onlineCoreCount()) cores, photos from \(photoDirectory), \(options.runs) timed runs after 1 warm-up, median shown")
if options.adaptiveOnly {
    runAdaptiveComparison()
    rmdir(scratch)
    exit(0)
}

// The floor's pixels: one band of cells as tessera draws them.
let bandPath = scratch + "/band.jpg"
let bandRun = run([tessera, "grid", photoDirectory, "-o", bandPath, "--grid", "\(columns)x1", "--tile-size", String(cell)] + flags)
guard bandRun.status == 0 else { fail("rendering the floor's band failed (status \(bandRun.status))") }
let band: RGBImage
do { band = try JPEGFile.read(bandPath) } catch { fail("\(error)") }
unlink(bandPath)

var results: [(label: String, megapixels: Double, seconds: Double, peak: Int64, ratio: Double)] = []
var floorAtLargest: Double?
for size in options.sizes {
    let rows = max(1, Int((size * 1e9 / Double(columns * cell * cell)).rounded()))
    let width = columns * cell, height = rows * cell
    let megapixels = Double(width) * Double(height) / 1e6
    print("\ngrid \(columns)x\(rows) cells of \(cell) px = \(width) x \(height) px (\(fixed(megapixels, 1)) MP), Q\(quality) 4:2:0")

    var floorTimes: [Double] = []
    for attempt in 0...options.runs {
        let start = monotonicSeconds()
        do {
            _ = try JPEGFile.encodeRepeating(band: band, height: height, to: output, quality: quality, subsampling: .s420)
        } catch { fail("\(error)") }
        if attempt > 0 { floorTimes.append(monotonicSeconds() - start) }
        unlink(output)
    }
    let floor = median(floorTimes)
    if size == options.sizes.max() { floorAtLargest = floor }
    print("  floor    encode only, 1 core : \(fixed(floor)) s  \(fixed(megapixels / floor, 0)) MP/s   runs \(floorTimes.map { fixed($0) }.joined(separator: " "))")

    var times: [Double] = []
    var peaks: [Int64] = []
    for attempt in 0...options.runs {
        let result = run([tessera, "grid", photoDirectory, "-o", output, "--grid", "\(columns)x\(rows)", "--tile-size", String(cell)] + flags)
        guard result.status == 0 else { fail("tessera failed with status \(result.status)") }
        if attempt > 0 {
            times.append(result.seconds)
            peaks.append(result.peakBytes)
        }
    }
    var outputSize = stat()
    stat(output, &outputSize)
    unlink(output)
    let seconds = median(times)
    let peak = peaks.max()!
    print("  tessera  grid                : \(fixed(seconds)) s  \(fixed(megapixels / seconds, 0)) MP/s   runs \(times.map { fixed($0) }.joined(separator: " "))")
    print("           peak RSS \(fixed(Double(peak) / 1e6, 1)) MB (max of runs), output \(fixed(Double(outputSize.st_size) / 1e6, 1)) MB, ratio to floor \(fixed(seconds / floor))")
    results.append(("\(fixed(megapixels / 1000, 2)) GP", megapixels, seconds, peak, seconds / floor))
}

// The encoders compared on the largest grid: serial (one libjpeg writer, no restart markers) against
// parallel (workers compress stripes, joined with restart markers), for 1, 2 and all workers.
if options.compareEncoders, let size = options.sizes.max() {
    let rows = max(1, Int((size * 1e9 / Double(columns * cell * cell)).rounded()))
    let megapixels = Double(columns * cell) * Double(rows * cell) / 1e6
    print("\nencoders on grid \(columns)x\(rows) (\(fixed(megapixels, 1)) MP): serial vs parallel, median of \(options.runs) after 1 warm-up")
    var workerCounts = [1, 2, onlineCoreCount()]
    workerCounts = workerCounts.enumerated().filter { !workerCounts[..<$0.offset].contains($0.element) }.map(\.element)
    var serialBytes: Int64 = 0, parallelBytes: Int64 = 0
    for workers in workerCounts {
        var medians: [String: Double] = [:]
        for encoder in ["serial", "parallel"] {
            var times: [Double] = []
            for attempt in 0...options.runs {
                let result = run([tessera, "grid", photoDirectory, "-o", output, "--grid", "\(columns)x\(rows)", "--tile-size", String(cell),
                                  "--quality", String(quality), "--no-progress", "--workers", String(workers), "--encoder", encoder] + options.extra)
                guard result.status == 0 else { fail("tessera --encoder \(encoder) failed with status \(result.status)") }
                if attempt > 0 { times.append(result.seconds) }
            }
            var info = stat()
            stat(output, &info)
            if encoder == "serial" { serialBytes = Int64(info.st_size) } else { parallelBytes = Int64(info.st_size) }
            unlink(output)
            medians[encoder] = median(times)
        }
        let floorNote = floorAtLargest.map { "  parallel = \(fixed(medians["parallel"]! / $0)) x the 1-core floor" } ?? ""
        print("  workers \(workers): serial \(fixed(medians["serial"]!)) s, parallel \(fixed(medians["parallel"]!)) s, speed-up x\(fixed(medians["serial"]! / medians["parallel"]!))\(floorNote)")
    }
    let cost = Double(parallelBytes - serialBytes) / Double(serialBytes) * 100
    print("  restart markers: parallel file \(parallelBytes) bytes, serial \(serialBytes) bytes: \(cost >= 0 ? "+" : "")\(fixed(cost, 3))%")
}

/// Runs `a` and `b` alternately (one warm-up each, then `options.runs` each), so that both see the
/// same machine state; returns their medians and peaks.
@MainActor func alternate(_ a: [String], _ b: [String]) -> (a: Double, b: Double, peakA: Int64, peakB: Int64, runsA: [Double], runsB: [Double]) {
    var timesA: [Double] = [], timesB: [Double] = [], peakA: Int64 = 0, peakB: Int64 = 0
    for attempt in 0...options.runs {
        for (command, first) in [(a, true), (b, false)] {
            let result = run(command)
            guard result.status == 0 else { fail("\(command.joined(separator: " ")) failed with status \(result.status)") }
            unlink(output)
            guard attempt > 0 else { continue }
            if first { timesA.append(result.seconds); peakA = max(peakA, result.peakBytes) } else { timesB.append(result.seconds); peakB = max(peakB, result.peakBytes) }
        }
    }
    return (median(timesA), median(timesB), peakA, peakB, timesA, timesB)
}

// This build against another (`--compare-binary`, e.g. the last release), on the largest grid.
if let old = options.compareBinary, let size = options.sizes.max() {
    let rows = max(1, Int((size * 1e9 / Double(columns * cell * cell)).rounded()))
    let arguments = ["grid", photoDirectory, "-o", output, "--grid", "\(columns)x\(rows)", "--tile-size", String(cell)] + flags
    print("\nthis build against \(old) on grid \(columns)x\(rows), alternating, median of \(options.runs) after 1 warm-up")
    let compared = alternate([tessera] + arguments, [old] + arguments)
    print("  this build: \(fixed(compared.a)) s, peak RSS \(fixed(Double(compared.peakA) / 1e6, 1)) MB   runs \(compared.runsA.map { fixed($0) }.joined(separator: " "))")
    print("  other     : \(fixed(compared.b)) s, peak RSS \(fixed(Double(compared.peakB) / 1e6, 1)) MB   runs \(compared.runsB.map { fixed($0) }.joined(separator: " "))")
    print("  this / other: x\(fixed(compared.a / compared.b, 3)) time, x\(fixed(Double(compared.peakA) / Double(compared.peakB), 3)) peak RSS")
}

if options.progressive {
    runProgressiveBenchmark()
}

if options.formats {
    runFormatBenchmark()
}

if options.matching {
    runMatchingBenchmark(sizes: options.matchingSizes)
}
if options.mosaic {
    runMosaicBenchmark()
    if options.adaptive { runAdaptiveComparison() }
}

if options.deepZoom {
    runDeepZoomBenchmark()
}

if options.shards {
    runShardBenchmark()
}

if options.collage {
    runCollageBenchmark(photoCount: options.collagePhotos, width: options.collageWidth)
}

if options.library {
    runLibraryBenchmark(sizes: options.librarySizes, timeout: options.libraryTimeout)
}

if results.count > 1 {
    let smallest = results.first!
    print("\nsummary")
    for result in results {
        let flat = Double(result.peak) / Double(smallest.peak)
        print("  \(result.label): \(fixed(result.seconds)) s, \(fixed(result.megapixels / result.seconds, 0)) MP/s, peak RSS \(fixed(Double(result.peak) / 1e6, 1)) MB (x\(fixed(flat)) of the smallest), \(fixed(result.ratio)) x floor")
    }
}

func fileLines(_ path: String) -> [String] {
    guard let file = fopen(path, "r") else { return [] }
    defer { fclose(file) }
    var lines: [String] = []
    var buffer = [CChar](repeating: 0, count: 4096)
    while fgets(&buffer, 4096, file) != nil {
        lines.append(String(decoding: buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return lines
}

/// Mean Oklab distance between two feature arrays (cells x k*k*3), per sub-cell.
func meanOklabError(_ a: [Float], _ b: [Float]) -> Double {
    var total = 0.0
    for i in stride(from: 0, to: a.count, by: 3) {
        let dl = a[i] - b[i], da = a[i + 1] - b[i + 1], db = a[i + 2] - b[i + 2]
        total += Double((dl * dl + da * da + db * db).squareRoot())
    }
    return total / Double(a.count / 3)
}

/// Mean CIEDE2000 between two feature arrays (cells x k*k*3 Oklab), per sub-cell
/// (MosaicQuality: Oklab to CIELAB D65, then Sharma et al.'s formula).
func meanDeltaE2000(_ a: [Float], _ b: [Float]) -> Double {
    var total = 0.0
    for i in stride(from: 0, to: a.count, by: 3) {
        total += MosaicQuality.deltaE2000(MosaicQuality.cielab(OklabColor(l: a[i], a: a[i + 1], b: a[i + 2])),
                                          MosaicQuality.cielab(OklabColor(l: b[i], a: b[i + 1], b: b[i + 2])))
    }
    return total / Double(max(1, a.count / 3))
}

/// "mean ΔE2000 x, SSIM y": the picture at `path` (`width` x `height` px) against the target, its
/// features `features` against the target's `targetFeatures`; SSIM on luma at the common size.
func qualityFigures(_ path: String, width: Int, height: Int, features: [Float], target: String, targetFeatures: [Float]) -> String {
    guard width > 0 && height > 0 else { return "mean ΔE2000 \(fixed(meanDeltaE2000(features, targetFeatures), 2)), SSIM not measured" }
    let budget = DecodeBudget(budgetBytes: 64 << 20, workers: 1)
    let ssim = (try? MosaicQuality.structuralSimilarity(output: path, width: width, height: height, target: target, budget: budget))
        .map { "SSIM \(fixed($0.ssim, 3)) (luma at \($0.width) x \($0.height), 11x11 Gaussian)" } ?? "SSIM not measured"
    return "mean ΔE2000 \(fixed(meanDeltaE2000(features, targetFeatures), 2)), \(ssim)"
}

@MainActor
func runMosaicBenchmark() {
    let columns = 200, rows = 267, k = 3
    let repository = products + "/../../.."
    let target = options.target ?? repository + "/Tests/TesseraTests/Fixtures/orientation/Portrait_1.jpg"
    let cache = scratch + "/feature-cache"
    let megapixels = Double(columns * cell) * Double(rows * cell) / 1e6
    print("\nmosaic \(columns)x\(rows) cells of \(cell) px (\(fixed(megapixels, 1)) MP), target \(target), \(photoDirectory)")
    var times: [Double] = []
    var peaks: [Int64] = []
    let report = scratch + "/mosaic-report.txt"
    for attempt in 0...options.runs {
        let result = run([tessera, "mosaic", "--target", target, photoDirectory, "-o", output, "--grid", "\(columns)x\(rows)",
                          "--tile-size", String(cell), "--quality", String(quality), "--no-progress", "--cache-dir", cache]
                         + options.extra, stdout: report)
        guard result.status == 0 else { fail("tessera mosaic failed with status \(result.status)") }
        if attempt > 0 { times.append(result.seconds); peaks.append(result.peakBytes) }
    }
    for line in fileLines(report) { print("  | " + line) }
    let seconds = median(times)
    let floorNote = floorAtLargest.map { ", ratio to the 1.2 GP floor \(fixed(seconds / $0))" } ?? ""
    print("  tessera mosaic (index warm): \(fixed(seconds)) s, \(fixed(megapixels / seconds, 0)) MP/s, peak RSS \(fixed(Double(peaks.max()!) / 1e6, 1)) MB\(floorNote)   runs \(times.map { fixed($0) }.joined(separator: " "))")
    let ours: [Float]
    let targetFeatures: [Float]
    do {
        ours = try MosaicAnalysis.targetFeatures(path: output, columns: columns, rows: rows, subCells: k)
        targetFeatures = try MosaicAnalysis.targetFeatures(path: target, columns: columns, rows: rows, subCells: k)
    } catch { fail("\(error)") }
    let figures = qualityFigures(output, width: columns * cell, height: rows * cell, features: ours, target: target, targetFeatures: targetFeatures)
    unlink(output)
    print("  tessera mosaic: the rendered picture against the target: mean Oklab error \(fixed(meanOklabError(ours, targetFeatures), 4)), \(figures)")

    // Matching alone: 1,000 photos (generated, 400 px) against 53,400 cells.
    let thousand = products + "/bench-photos-1000"
    if access(thousand + "/.complete-1000", F_OK) != 0 {
        mkdir(thousand, 0o755)
        print("  generating 1,000 small sample photos in \(thousand) ...")
        do { _ = try SamplePhotos.generate(count: 1000, in: thousand, longSide: 400, seed: 1000) } catch { fail("\(error)") }
        close(open(thousand + "/.complete-1000", O_CREAT | O_WRONLY, 0o644))
    }
    do {
        let library = try PhotoLibrary.scan([thousand], workers: onlineCoreCount())
        var start = monotonicSeconds()
        let analysis = MosaicAnalysis.photoFeatures(library.photos, subCells: k, cellAspect: 1, workers: onlineCoreCount(), index: nil)
        let analysisSeconds = monotonicSeconds() - start
        let features = analysis.features.compactMap { $0 }
        var matchTimes: [Double] = []
        for attempt in 0...options.runs {
            start = monotonicSeconds()
            _ = try MosaicMatcher.match(target: targetFeatures, columns: columns, rows: rows, subCells: k, photoFeatures: features,
                                        minDistance: 1, maxUses: nil, seed: 1, workers: onlineCoreCount())
            if attempt > 0 { matchTimes.append(monotonicSeconds() - start) }
        }
        print("  matching alone: \(columns * rows) cells against \(features.count) photos: \(fixed(median(matchTimes), 3)) s (median; analysis of the 1,000 photos took \(fixed(analysisSeconds)) s once)")
    } catch { fail("\(error)") }

    // metapixel's classic mode on the same target, library and grid, if installed.
    guard access("/usr/bin/metapixel", X_OK) == 0, access("/usr/bin/convert", X_OK) == 0 else {
        print("  metapixel: not installed (apt-get install metapixel imagemagick), no comparison")
        unlink(report)
        _ = run(["rm", "-rf", cache])
        return
    }
    let sized = scratch + "/target-\(columns * 6)x\(rows * 6).jpg"
    guard run(["convert", target, "-auto-orient", "-resize", "\(columns * 6)x\(rows * 6)!", "-quality", "95", sized]).status == 0 else {
        fail("convert failed")
    }
    let library = scratch + "/metapixel-library"
    mkdir(library, 0o755)
    let prepare = run(["metapixel-prepare", "--width=\(cell)", "--height=\(cell)", photoDirectory, library], stderr: "/dev/null")
    guard prepare.status == 0 else { fail("metapixel-prepare failed with status \(prepare.status)") }
    let theirs = scratch + "/metapixel.jpg"
    let metapixel = run(["metapixel", "--metapixel", sized, theirs, "--library=\(library)", "--width=\(cell)", "--height=\(cell)",
                         "--scale=\(cell / 6)"], stderr: "/dev/null")
    guard metapixel.status == 0 else { fail("metapixel failed with status \(metapixel.status)") }
    let ourRun = run([tessera, "mosaic", "--target", sized, photoDirectory, "-o", output, "--grid", "\(columns)x\(rows)",
                      "--tile-size", String(cell), "--quality", String(quality), "--no-progress", "--cache-dir", cache], stdout: report)
    do {
        let sizedFeatures = try MosaicAnalysis.targetFeatures(path: sized, columns: columns, rows: rows, subCells: k)
        let theirFeatures = try MosaicAnalysis.targetFeatures(path: theirs, columns: columns, rows: rows, subCells: k)
        let ourFeatures = try MosaicAnalysis.targetFeatures(path: output, columns: columns, rows: rows, subCells: k)
        let theirError = meanOklabError(theirFeatures, sizedFeatures), ourError = meanOklabError(ourFeatures, sizedFeatures)
        var theirSize = (width: 0, height: 0)
        if let header = try? PhotoLibrary.scan([theirs], selection: PhotoSelection(includeOwnOutputs: true)).photos.first?.header {
            theirSize = (header.width, header.height)
        }
        let theirFigures = qualityFigures(theirs, width: theirSize.width, height: theirSize.height, features: theirFeatures, target: sized,
                                          targetFeatures: sizedFeatures)
        let ourFigures = qualityFigures(output, width: columns * cell, height: rows * cell, features: ourFeatures, target: sized,
                                        targetFeatures: sizedFeatures)
        print("  metapixel --metapixel (library prepared in \(fixed(prepare.seconds)) s): \(fixed(metapixel.seconds)) s, peak RSS \(fixed(Double(metapixel.peakBytes) / 1e6, 1)) MB, mean Oklab error \(fixed(theirError, 4)), \(theirFigures)")
        print("  tessera mosaic, same target, library and grid: \(fixed(ourRun.seconds)) s, peak RSS \(fixed(Double(ourRun.peakBytes) / 1e6, 1)) MB, mean Oklab error \(fixed(ourError, 4)), \(ourFigures)")
        for line in fileLines(report) where line.hasPrefix("mosaic:") { print("  | " + line) }
    } catch { fail("\(error)") }
    unlink(output)
    unlink(theirs)
    unlink(sized)
    _ = run(["rm", "-rf", library, cache, report])
}

/// Size in bytes of everything under `path` (du -sb).
@MainActor
func treeBytes(_ path: String) -> Int64 {
    let listing = scratch + "/du.txt"
    defer { unlink(listing) }
    _ = run(["du", "-sb", path], stdout: listing)
    return Int64(fileLines(listing).first?.split(separator: "\t").first.map(String.init) ?? "") ?? 0
}

@MainActor
func runDeepZoomBenchmark() {
    guard let size = options.sizes.max() else { return }
    let rows = max(1, Int((size * 1e9 / Double(columns * cell * cell)).rounded()))
    let megapixels = Double(columns * cell) * Double(rows * cell) / 1e6
    let grid = ["grid", photoDirectory, "--grid", "\(columns)x\(rows)", "--tile-size", String(cell)] + flags
    print("\ndeep zoom on grid \(columns)x\(rows) (\(fixed(megapixels, 1)) MP), 254 px tiles + 1 overlap, Q\(quality), into \(scratch); median of \(options.runs) rounds after 1 warm-up")
    print("  (each round runs -o, --dzi, then both in one pass, each into a folder of its own; the folders are deleted")
    print("   at the end: on ext4, creating thousands of files right after deleting thousands is slower, which is not")
    print("   what a user's render meets)")
    let pyramid = scratch + "/zoom"
    var times: [String: [Double]] = [:], peaks: [String: Int64] = [:]
    var tiles: Int64 = 0, cellBytes: Int64 = 0
    var folders: [String] = []
    for attempt in 0...options.runs {
        for mode in ["jpeg", "dzi", "both", "szi", "iiif", "tiff"] {
            let folder = scratch + "/zoom-\(attempt)-\(mode)"
            mkdir(folder, 0o755)
            folders.append(folder)
            var outputs: [String] = []
            if mode == "jpeg" || mode == "both" { outputs += ["-o", folder + "/wall.jpg"] }
            if mode == "dzi" || mode == "both" { outputs += ["--dzi", folder + "/wall.dzi"] }
            if mode == "szi" { outputs += ["--szi", folder + "/wall.szi"] }
            if mode == "iiif" { outputs += ["--iiif", folder + "/wall", "--iiif-id", "https://example.org/iiif/wall"] }
            if mode == "tiff" { outputs += ["--tiff", folder + "/wall.tif"] }
            let result = run([tessera] + grid + outputs)
            guard result.status == 0 else { fail("tessera \(outputs.joined(separator: " ")) failed with status \(result.status)") }
            if attempt > 0 {
                times[mode, default: []].append(result.seconds)
                peaks[mode] = max(peaks[mode] ?? 0, result.peakBytes)
            }
            if mode == "dzi" && attempt == 0 {
                cellBytes = treeBytes(folder + "/wall_files")
                let count = scratch + "/count.txt"
                _ = run(["sh", "-c", "find '\(folder)/wall_files' -name '*_*.jpg' | wc -l"], stdout: count)
                tiles = Int64(fileLines(count).first ?? "") ?? 0
                unlink(count)
            }
        }
    }
    // The last one-pass JPEG is the input of vips dzsave below.
    _ = run(["mv", scratch + "/zoom-\(options.runs)-both/wall.jpg", output])
    let jpeg = median(times["jpeg"]!), dzi = median(times["dzi"]!), both = median(times["both"]!)
    let sequential = median(zip(times["jpeg"]!, times["dzi"]!).map { $0 + $1 })
    let floorNote = floorAtLargest.map { ", \(fixed(dzi / $0)) x the 1-core JPEG floor" } ?? ""
    print("  tessera --dzi alone       : \(fixed(dzi)) s, \(fixed(megapixels / dzi, 0)) MP/s, peak RSS \(fixed(Double(peaks["dzi"]!) / 1e6, 1)) MB\(floorNote)   runs \(times["dzi"]!.map { fixed($0) }.joined(separator: " "))")
    print("                              \(tiles) tiles, \(fixed(Double(cellBytes) / 1e6, 1)) MB")
    print("  tessera -o alone          : \(fixed(jpeg)) s, peak RSS \(fixed(Double(peaks["jpeg"]!) / 1e6, 1)) MB   runs \(times["jpeg"]!.map { fixed($0) }.joined(separator: " "))")
    print("  tessera -o --dzi, one pass: \(fixed(both)) s, peak RSS \(fixed(Double(peaks["both"]!) / 1e6, 1)) MB   runs \(times["both"]!.map { fixed($0) }.joined(separator: " "))")
    print("  one after the other (-o, then --dzi, same round): \(fixed(sequential)) s; one pass takes x\(fixed(both / sequential)) of that")
    for (mode, label) in [("szi", "--szi alone (one file)"), ("iiif", "--iiif alone (256 px)"), ("tiff", "--tiff alone (256 px)")] {
        let seconds = median(times[mode]!)
        let ratio = floorAtLargest.map { ", \(fixed(seconds / $0)) x the floor" } ?? ""
        print("  tessera \(label): \(fixed(seconds)) s, x\(fixed(seconds / dzi)) the --dzi time\(ratio), peak RSS \(fixed(Double(peaks[mode]!) / 1e6, 1)) MB   runs \(times[mode]!.map { fixed($0) }.joined(separator: " "))")
    }

    // libvips on the JPEG tessera just wrote: the chain other tools' users build.
    var vipsSeconds: Double?
    if run(["sh", "-c", "command -v vips"]).status == 0 {
        mkdir(pyramid, 0o755)
        let vips = run(["vips", "dzsave", output, pyramid + "/vips", "--tile-size", "254", "--overlap", "1", "--suffix", ".jpg[Q=\(quality)]"])
        if vips.status == 0 {
            vipsSeconds = vips.seconds
            print("  vips dzsave of that JPEG (1 run): \(fixed(vips.seconds)) s, peak RSS \(fixed(Double(vips.peakBytes) / 1e6, 1)) MB; "
                  + "tessera -o then vips: \(fixed(jpeg + vips.seconds)) s, against one pass \(fixed(both)) s (x\(fixed(both / (jpeg + vips.seconds))))")
        } else {
            print("  vips dzsave failed with status \(vips.status)")
        }
        let vipsArchive = run(["vips", "dzsave", output, pyramid + "/vips.szi", "--tile-size", "254", "--overlap", "1", "--suffix", ".jpg[Q=\(quality)]"])
        if vipsArchive.status == 0 {
            print("  vips dzsave .szi of that JPEG (1 run): \(fixed(vipsArchive.seconds)) s, peak RSS \(fixed(Double(vipsArchive.peakBytes) / 1e6, 1)) MB; "
                  + "tessera --szi alone is x\(fixed(median(times["szi"]!) / vipsArchive.seconds)) of it")
        }
        _ = run(["rm", "-rf", pyramid])
    } else {
        print("  vips: not installed (apt-get install libvips-tools), no comparison")
    }
    unlink(output)
    _ = vipsSeconds
    rmdir(pyramid)
    for folder in folders { _ = run(["rm", "-rf", folder]) }

    // A large pyramid: the same width, many more rows. Memory must not follow the height.
    guard options.largeDeepZoomGigapixels > 0 else { return }
    sleep(40)  // ext4 treats inodes freed in the last 30-35 s as recently deleted and allocates around them
    let largeRows = max(1, Int((options.largeDeepZoomGigapixels * 1e9 / Double(columns * cell * cell)).rounded()))
    let largeMegapixels = Double(columns * cell) * Double(largeRows * cell) / 1e6
    mkdir(pyramid, 0o755)
    let log = scratch + "/large.txt"
    let large = run([tessera, "grid", photoDirectory, "--grid", "\(columns)x\(largeRows)", "--tile-size", String(cell),
                     "--dzi", pyramid + "/large.dzi"] + flags, stdout: log, stderr: log)
    if large.status == 0 {
        print("  tessera --dzi, grid \(columns)x\(largeRows) (\(fixed(largeMegapixels / 1000, 1)) GP, 1 run): \(fixed(large.seconds)) s, "
              + "\(fixed(largeMegapixels / large.seconds, 0)) MP/s, peak RSS \(fixed(Double(large.peakBytes) / 1e6, 1)) MB "
              + "(x\(fixed(Double(large.peakBytes) / Double(peaks["dzi"]!))) of the \(fixed(megapixels / 1000, 1)) GP pyramid's)")
        for line in fileLines(log) { print("  | " + line) }
    } else {
        print("  tessera --dzi, \(fixed(largeMegapixels / 1000, 1)) GP: exit status \(large.status)")
        for line in fileLines(log) { print("  | " + line) }
    }
    _ = run(["rm", "-rf", pyramid])
    unlink(log)
}
