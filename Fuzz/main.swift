// tessera-fuzz — a mutation fuzzer for every way a photo gets in: the library scan (header, EXIF,
// orientation), the tile decoder (streamed baseline, the DC decoder at 1/8, libjpeg's coefficient
// arrays in memory, compact or spilled), mosaic analysis (photo and target features), and the whole render
// path on tiny canvases (serial and parallel encoders, Deep Zoom); and a shard's part file, parsed
// and verified as `tessera join` would (PartTarget.swift, seeded with *.tessera-part files).
//
// Each iteration takes a seed JPEG, applies a few mutations (bit flips, byte overwrites,
// truncation, chunk duplication, random markers, edited SOF dimensions, EXIF segments with random
// or garbage contents, splices of two seeds, one scan repeated up to 2,000 times; and one input
// in 20 followed by a hole of 2 MB to 20 GB, a sparse file), writes it to WORKDIR/current.jpg and
// runs it through one entry point (in turn, or the one named by --target). A Swift error is an
// expected outcome; a crash, a hang or runaway memory is a finding. Because the input is written
// before it is used, a crash leaves its reproducer in current.jpg: copy it into Fuzz/regressions/
// (a finding becomes a committed regression file), and every later run replays that folder first.
//
//   tessera-fuzz --seconds N --work DIR [--target T] [--regressions DIR] SEED.jpg...
//   tessera-fuzz --replay FILE WIDTH HEIGHT POOL_BYTES
// (scripts/fuzz.sh wraps it: AddressSanitizer, a memory limit, the seeds.)
import Dispatch
import Glibc
import Tessera

var seconds = 60.0
var workDirectory = "/tmp/tessera-fuzz"
var seedPaths: [String] = []
var seedValue: UInt64 = UInt64(time(nil))
var targetName = "all"
var regressionDirectory: String?
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "--seconds": seconds = Double(arguments.removeFirst()) ?? 60
    case "--work": workDirectory = arguments.removeFirst()
    case "--seed": seedValue = UInt64(arguments.removeFirst()) ?? 1
    case "--target": targetName = arguments.removeFirst()
    case "--regressions": regressionDirectory = arguments.removeFirst()
    case "--replay":
        // Decodes one file as an iteration would: --replay FILE WIDTH HEIGHT POOL_BYTES.
        let path = arguments.removeFirst()
        let width = Int(arguments.removeFirst()) ?? 1, height = Int(arguments.removeFirst()) ?? 1
        let pool = Int(arguments.removeFirst()) ?? (64 << 20)
        let started = monotonicSeconds()
        let decoder = CellDecoder(cellWidth: width, cellHeight: height, decodePoolBytes: pool)
        let tile = UnsafeMutableRawBufferPointer.allocate(byteCount: decoder.cellBytes, alignment: 16)
        let result = Result { () throws(TesseraError) in try decoder.decode(path: path, into: tile) }
        print("tessera-fuzz: replay \(path) at \(width)x\(height), pool \(pool): \(result) in \(monotonicSeconds() - started) s")
        exit(0)
    default: seedPaths.append(argument)
    }
}
guard !seedPaths.isEmpty else {
    print("usage: tessera-fuzz [--seconds N] [--work DIR] [--seed S] [--target scan|decode|analyse|render|heif|part|all] [--regressions DIR] SEED.jpg... [PART.tessera-part...]")
    exit(2)
}

func readFile(_ path: String) -> [UInt8] { (try? readWholeFile(path)) ?? [] }

func writeFile(_ bytes: [UInt8], _ path: String) {
    guard let file = fopen(path, "wb") else { fatalError("cannot write \(path)") }
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}

// Parts seed the part target; photos the others.
let seeds = seedPaths.filter { !$0.hasSuffix(".tessera-part") }.map(readFile).filter { $0.count > 4 }
let partSeeds = seedPaths.filter { $0.hasSuffix(".tessera-part") }.map(readFile).filter { $0.count > 4 }
mkdir(workDirectory, 0o755)
let current = workDirectory + "/current.jpg"
nonisolated(unsafe) var random = SplitMix64(seed: seedValue)  // single-threaded program
func below(_ n: Int) -> Int { n <= 1 ? 0 : Int(random.next() % UInt64(n)) }

func exifSegment() -> [UInt8] {
    var payload = Array("Exif".utf8) + [0, 0]
    if below(3) == 0 {
        payload += (0..<below(400)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    } else {
        let big = below(2) == 0
        let orientation = UInt16(truncatingIfNeeded: below(4) == 0 ? Int(random.next() & 0xFFFF) : below(10))
        func u16(_ v: UInt16) -> [UInt8] { big ? [UInt8(v >> 8), UInt8(v & 0xFF)] : [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func u32(_ v: UInt32) -> [UInt8] { big ? [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
                                               : [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24)] }
        let count = UInt16(truncatingIfNeeded: below(4) == 0 ? below(70000) : 1)
        let type: UInt16 = below(5) == 0 ? UInt16(below(20)) : 3
        let offset: UInt32 = below(5) == 0 ? UInt32(truncatingIfNeeded: random.next()) : 8
        payload += (big ? [0x4D, 0x4D] : [0x49, 0x49]) + u16(42) + u32(offset) + u16(count)
            + u16(0x0112) + u16(type) + u32(UInt32(below(3) == 0 ? below(100000) : 1)) + u16(orientation) + u16(0) + u32(0)
    }
    let length = min(payload.count + 2, 0xFFFF)
    return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload.prefix(length - 2)
}

func mutate(_ input: [UInt8]) -> [UInt8] {
    var bytes = input
    for _ in 0..<(1 + below(4)) {
        guard bytes.count > 4 else { break }
        switch below(10) {
        case 0: for _ in 0..<(1 + below(16)) { bytes[2 + below(bytes.count - 2)] ^= UInt8(1 << below(8)) }
        case 1: for _ in 0..<(1 + below(8)) { bytes[2 + below(bytes.count - 2)] = UInt8(truncatingIfNeeded: random.next()) }
        case 2: bytes = Array(bytes.prefix(2 + below(bytes.count - 2)))
        case 3:
            let start = below(bytes.count), length = below(min(4096, bytes.count - start))
            let chunk = bytes[start..<(start + length)]
            bytes.insert(contentsOf: chunk, at: below(bytes.count))
        case 4: bytes.insert(contentsOf: [0xFF, UInt8(0xC0 + below(64))], at: 2 + below(bytes.count - 2))
        case 5:
            if bytes.count > 10, let sof = (0..<(bytes.count - 9)).first(where: { bytes[$0] == 0xFF && (0xC0...0xC2).contains(bytes[$0 + 1]) }) {
                let values: [UInt16] = [0, 1, 7, 8, 9, 15, 16, 17, 255, 4096, 65_500, 65_535, UInt16(truncatingIfNeeded: random.next())]
                let field = sof + 5 + 2 * below(2)
                let value = values[below(values.count)]
                bytes[field] = UInt8(value >> 8); bytes[field + 1] = UInt8(value & 0xFF)
            }
        case 6: bytes.insert(contentsOf: exifSegment(), at: 2)
        case 7:
            let other = seeds[below(seeds.count)]
            let cut = below(bytes.count), from = below(other.count)
            bytes = Array(bytes.prefix(cut)) + other[from...]
        case 8:
            // A scan bomb: one scan (its header and data, up to the next marker that is not a
            // restart marker) repeated many times before the end.
            // (A plain loop over a copy: a filter closure over the mutated array was quadratic.)
            let snapshot = bytes
            var scans: [Int] = []
            var at = 2
            while at + 4 < snapshot.count {
                if snapshot[at] == 0xFF && snapshot[at + 1] == 0xDA { scans.append(at) }
                at += 1
            }
            if !scans.isEmpty {
                let sos = scans[below(scans.count)]
                var end = sos + 2
                while end + 1 < bytes.count && !(bytes[end] == 0xFF && bytes[end + 1] != 0 && !(0xD0...0xD7).contains(bytes[end + 1]) && end > sos + 4) {
                    end += 1
                }
                let scan = Array(bytes[sos..<end])
                let copies = [10, 100, 600, 2000][below(4)]
                if scan.count * copies < 8 << 20 {
                    var repeated: [UInt8] = []
                    for _ in 0..<copies { repeated += scan }
                    bytes.insert(contentsOf: repeated, at: end)
                }
            }
        default:
            if bytes.count > 10, let sof = (0..<(bytes.count - 9)).first(where: { bytes[$0] == 0xFF && (0xC0...0xC2).contains(bytes[$0 + 1]) }) {
                bytes[sof + 9] = UInt8(below(6))  // component count
            }
        }
    }
    return bytes
}

var outcomes: [String: Int] = [:]
var slowest: (seconds: Double, iteration: Int) = (0, 0)
var iterations = 0
// Watchdog: an input that takes over 10 s is a hang; keep it and stop with status 3.
final class Progress: @unchecked Sendable {
    private let lock = Mutex()
    private var iteration = 0, since = 0.0, mutating = false  // protected by `lock`
    /// Input `number` is being made (`mutating`: the harness's own work) or exercised.
    func started(_ number: Int, mutating: Bool = false) {
        lock.withLock { iteration = number; since = monotonicSeconds(); self.mutating = mutating }
    }
    var stalled: (iteration: Int, seconds: Double, mutating: Bool)? {
        lock.withLock { monotonicSeconds() - since > 10 ? (iteration, monotonicSeconds() - since, mutating) : nil }
    }
}
let progress = Progress()
let watchdog = DispatchSource.makeTimerSource(queue: .global())
watchdog.schedule(deadline: .now() + 1, repeating: 1)
let watchedFile = current, keptDirectory = workDirectory, watched = progress
watchdog.setEventHandler { @Sendable in
    if let (iteration, elapsed, mutating) = watched.stalled {
        if mutating {
            // The file on disk is still the previous input, which is not what hung.
            print("tessera-fuzz: making input \(iteration) has taken \(Int(elapsed)) s: the harness's own mutation is too slow (a bug in Fuzz/, not in Tessera)")
            exit(3)
        }
        let kept = keptDirectory + "/hang-\(iteration).jpg"
        rename(watchedFile, kept)
        print("tessera-fuzz: input \(iteration) has run \(Int(elapsed)) s: a hang; kept as \(kept)")
        exit(3)
    }
}
watchdog.resume()
/// The entry points, one per iteration in turn.
enum Target: String, CaseIterable {
    case scan, decode, analyse, render
    case heif  // HEIFBoxMutator.swift: box-aware mutations of the HEIF seeds, scanned and decoded
    case part  // PartTarget.swift: a shard's part file, parsed and verified as the join does
}
let targets: [Target] = (targetName == "all" ? Target.allCases : [Target(rawValue: targetName)].compactMap { $0 })
    .filter { $0 != .part || !partSeeds.isEmpty }
guard !targets.isEmpty, !seeds.isEmpty || targets == [.part] else {
    print("tessera-fuzz: unknown --target \(targetName) (scan, decode, analyse, render, heif, part or all), or no seeds for it")
    exit(2)
}
/// A photo that always decodes, drawn beside the fuzzed one in renders.
let goodSeed = seedPaths[0]

/// Runs `path` through `target`; returns the outcome's name. Errors are outcomes; crashes are not.
@MainActor func exercise(_ path: String, _ target: Target) -> String {
    do throws(TesseraError) {
        switch target {
        case .scan:
            let library = try PhotoLibrary.scan([path])
            return library.photos.isEmpty ? "scan: refused" : "scan: accepted"
        case .decode:
            // Half the time a small cell, so that multi-scan seeds take the DC decoder (1/8 scale);
            // a third of the time a tiny budget, so that whole-image buffers go to a spill file;
            // a sixth of the time a pool just over what the decode's rows and cell take, where
            // a seed's compact coefficient arrays (tessera_coefficients.c) fit and its whole ones
            // may not.
            let side = below(2) == 0 ? 30 : 300
            let width = 1 + below(side), height = 1 + below(side)
            let pool: Int
            switch below(6) {
            case 0, 1: pool = 32 << 10
            case 2: pool = 2 * (width * height * 3 + (384 << 10)) + below(256 << 10)
            default: pool = 64 << 20
            }
            let decoder = CellDecoder(cellWidth: width, cellHeight: height, decodePoolBytes: pool)
            let tile = UnsafeMutableRawBufferPointer.allocate(byteCount: decoder.cellBytes, alignment: 16)
            defer { tile.deallocate() }
            let notes = try decoder.decode(path: path, into: tile)
            return notes.warningCount > 0 ? "decode: with warnings" : "decode: decoded"
        case .analyse:
            let library = try PhotoLibrary.scan([path])
            let budget = DecodeBudget(poolBytes: below(3) == 0 ? 32 << 10 : 8 << 20, spillDirectory: workDirectory)
            let analysed = MosaicAnalysis.photoFeatures(library.photos, subCells: 1 + below(4), cellAspect: 0.5 + Double(below(3)) / 2,
                                                        workers: 1 + below(2), index: nil, budget: budget)
            _ = try MosaicAnalysis.targetFeatures(path: path, columns: 1 + below(12), rows: 1 + below(12), subCells: 1 + below(4),
                                                  budget: budget)
            return analysed.failed.isEmpty ? "analyse: analysed" : "analyse: photo refused, target drawn"
        case .heif:
            return try exerciseHEIF(path)
        case .render:
            let library = try PhotoLibrary.scan([path, goodSeed])
            var settings = RenderSettings()
            settings.workers = 1 + below(3)
            settings.encoder = below(2) == 0 ? .serial : .parallel
            settings.subsampling = [.s420, .s422, .s444][below(3)]
            settings.stripeHeight = below(2) == 0 ? nil : 1 + below(40)
            settings.temporaryDirectory = workDirectory
            settings.maxMemoryBytes = 48 << 20
            let withPyramid = below(3) == 0
            var zoom = DeepZoomSettings()
            zoom.tileSize = 16 + below(48)
            zoom.overlap = below(3)
            zoom.viewer = false
            let layout = GridLayout.make(photoCount: library.photos.count, columns: 1 + below(4), rows: 1 + below(4),
                                         cellWidth: 1 + below(40), cellHeight: 1 + below(40), order: .name)
            var outputs: [RenderOutput] = [.jpeg(path: workDirectory + "/render.jpg")]
            if withPyramid { outputs.append(.deepZoom(path: workDirectory + "/render.dzi", settings: zoom)) }
            let renderer = try StripeRenderer(request: RenderRequest(photos: library.photos, layout: layout, settings: settings,
                                                                     outputs: outputs))
            let summary = try renderer.render()
            _ = system("rm -rf '\(workDirectory)/render.jpg' '\(workDirectory)/render.dzi' '\(workDirectory)/render_files'")
            return summary.failedPhotos.isEmpty ? "render: drawn" : "render: drawn with a placeholder"
        case .part:
            return try exercisePart(path)
        }
    } catch {
        switch error {
        case .unreadablePhoto, .noPhotos, .unusableParts: return "\(target): refused"
        default: return "\(target): other error: \(error)"
        }
    }
}

// Findings of earlier runs first: each through every entry point, at several sizes.
if let regressionDirectory {
    var replayed = 0
    var names: [String] = []
    if let listing = opendir(regressionDirectory) {
        while let entry = readdir(listing) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) } }
            if !name.hasPrefix(".") && name != "README.md" { names.append(name) }
        }
        closedir(listing)
    }
    for name in names.sorted() {
        for target in Target.allCases {
            for _ in 0..<3 {
                progress.started(-1)
                _ = exercise(regressionDirectory + "/" + name, target)
            }
        }
        replayed += 1
    }
    print("tessera-fuzz: replayed \(replayed) regression files from \(regressionDirectory) through every entry point, no crash")
}

let start = monotonicSeconds()
print("tessera-fuzz: \(seeds.count) photo seeds, \(partSeeds.count) part seeds, \(seconds) s, seed \(seedValue), targets \(targets.map(\.rawValue).joined(separator: ",")), work file \(current)")
while monotonicSeconds() - start < seconds {
    progress.started(iterations + 1, mutating: true)  // (a slow mutation would otherwise count against the last input)
    let target = targets[(iterations + 1) % targets.count]
    let input = target == .part ? mutatePart(partSeeds[below(partSeeds.count)])
        : (target == .heif ? mutateHEIFBoxes(seeds) : nil) ?? mutate(seeds[below(seeds.count)])
    writeFile(input, current)
    // Sometimes a sparse file: the input followed by a long hole (zeros that take no disk).
    if below(20) == 0 { truncate(current, off_t(input.count) + off_t([2 << 20, 64 << 20, 20 << 30][below(3)])) }
    let inputStarted = monotonicSeconds()
    iterations += 1
    progress.started(iterations)
    let outcome = exercise(current, target)
    outcomes[outcome, default: 0] += 1
    let took = monotonicSeconds() - inputStarted
    if took > slowest.seconds { slowest = (took, iterations) }
}
let elapsed = monotonicSeconds() - start
print("tessera-fuzz: \(iterations) inputs in \(formatDecimal(elapsed, places: 1)) s (\(formatDecimal(Double(iterations) / elapsed, places: 0))/s), no crash, peak RSS \(formatBytes(peakResidentBytes()))")
for (outcome, count) in outcomes.sorted(by: { $0.value > $1.value }) { print("  \(count)\t\(outcome)") }
print("  slowest input: \(formatDecimal(slowest.seconds, places: 2)) s (input \(slowest.iteration))")
unlink(current)
