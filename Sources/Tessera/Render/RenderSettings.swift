// RenderSettings.swift — what the caller chooses, and the events and summary it gets back.
import Glibc

/// An RGB colour.
public struct RGB: Equatable, Sendable {
    public var red: UInt8, green: UInt8, blue: UInt8
    public init(red: UInt8, green: UInt8, blue: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
    }
}

/// Choices for one render, whatever it writes (the outputs are RenderRequest.outputs). Defaults
/// are what `tessera grid` uses.
public struct RenderSettings: Equatable, Sendable {
    /// JPEG quality, 1...100.
    public var quality = 90
    public var subsampling = ChromaSubsampling.s420
    /// Threads filling stripes; nil: the number of online cores.
    public var workers: Int?
    /// Canvas rows per stripe; nil: derived from `maxMemoryBytes`.
    public var stripeHeight: Int?
    /// Budget for everything the renderer holds: stripes, cell cache, decoders, encoder.
    public var maxMemoryBytes = 64 << 20
    /// The most the steady state (stripes, cell cache, decode pool, the mosaic's matching) is
    /// planned for; the rest of `maxMemoryBytes` is room for one photo at a time that must be
    /// decoded whole. nil: all of the budget (a budget the caller named behaves as it always did).
    public var steadyStateBytes: Int?
    /// Where `maxMemoryBytes` came from, for the dry run.
    public var memoryRule = MemoryBudget.Rule.given
    /// The JPEG's density in dots per inch (JFIF), for printing; nil: none (aspect 1:1).
    public var dotsPerInch: Int?
    /// Where the stripe file and the cell spill file live. nil: the spill file in $TMPDIR or
    /// /tmp, the stripe file in $TMPDIR if set, else in /dev/shm (see RenderPlan.stripeDirectory).
    public var temporaryDirectory: String?
    /// The encoder; nil: parallel when more than one worker is used, else serial.
    public var encoder: EncoderMode?
    /// Restart interval (MCUs) for the serial encoder, 0 for none. The parallel encoder always
    /// uses one stripe's MCUs; setting this to the same value makes the serial output identical.
    public var serialRestartInterval = 0
    /// Colour of empty cells and of cells whose photo failed to decode.
    public var background = RGB(red: 0x80, green: 0x80, blue: 0x80)
    /// A photo that cannot be drawn fails the render (no output is written) instead of being
    /// drawn as a placeholder in `background` (the command line's strict mode).
    public var failOnPlaceholder = false

    public init() {}

    /// What the steady state is planned for: the budget, or less (`steadyStateBytes`).
    public var steadyStateBudgetBytes: Int { min(maxMemoryBytes, steadyStateBytes ?? maxMemoryBytes) }

    /// Takes `budget` (MemoryBudget.automatic()): its bytes as the budget, and a steady state of
    /// at most `MemoryBudget.steadyStateBytes`, so a large budget buys room for whole decodes,
    /// not stripes and cells nobody needs.
    public mutating func useMemoryBudget(_ budget: MemoryBudget) {
        maxMemoryBytes = budget.bytes
        memoryRule = budget.rule
        steadyStateBytes = budget.rule == .given ? nil : MemoryBudget.steadyStateBytes
    }

    /// The valid ranges, for the plan's checks and any front end's (one source of truth).
    public static let qualities = 1...100
    public static let workerCounts = 1...256
}

/// Something the caller may want to show while a render runs. Delivered on the thread that
/// called `render`, never concurrently.
public enum RenderEvent: Equatable, Sendable {
    /// A photo failed while being decoded; its cells show the background colour.
    case photoFailed(SkippedPhoto)
    /// A photo decoded with libjpeg warnings (corrupt data it worked around).
    case photoWarning(path: String, message: String)
    /// A temporary left by a Tessera process that no longer runs (killed, power cut) was removed.
    case staleTemporaryRemoved(path: String)
    /// `rowsWritten` of `totalRows` canvas rows are encoded.
    case progress(rowsWritten: Int, totalRows: Int)
}

/// What a finished render did.
public struct RenderSummary: Equatable, Sendable {
    public var width: Int
    public var height: Int
    public var seconds: Double
    /// Bytes of the JPEG (0 when none was written).
    public var outputBytes: Int64
    /// Tiles and bytes of the Deep Zoom pyramid (0 when none was written).
    public var deepZoomTiles = 0
    public var deepZoomBytes: Int64 = 0
    /// The SZI's size in bytes (its tiles, their headers and the central directory), or 0.
    public var archiveBytes: Int64 = 0
    /// The TIFF's size in bytes and its pages (levels), or 0.
    public var tiffBytes: Int64 = 0
    public var tiffPages = 0
    public var peakResidentBytes: Int64
    public var photosDecoded: Int
    public var failedPhotos: [SkippedPhoto]
    /// Photos drawn only in part (a file that ends early: the rows or scans it holds), with
    /// what is missing; each was also named in a warning.
    public var partialPhotos: [SkippedPhoto] = []
    /// A shard's cells read from other shards' decodes instead of decoded (SharedCells.swift).
    public var cellsShared = 0
    /// The viewer's previews written (DeepZoomSettings.previews), one a distinct photo drawn that could be read.
    public var previews = 0
    /// Photos drawn in the render that have no preview all the same (the decode at the preview's
    /// size failed, for want of memory most often), with why.
    public var previewsMissed: [SkippedPhoto] = []

    public var megapixels: Double { Double(width) * Double(height) / 1e6 }
    public var megapixelsPerSecond: Double { seconds > 0 ? megapixels / seconds : 0 }
}

/// The process's peak resident set so far, in bytes: VmHWM from /proc/self/status, else
/// getrusage's ru_maxrss. (ru_maxrss also carries the high-water mark of the memory the process
/// had before exec, which after posix_spawn from a large parent is the parent's.)
public func peakResidentBytes() -> Int64 {
    if let kilobytes = processStatusKilobytes("VmHWM") { return kilobytes * 1024 }
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Int64(usage.ru_maxrss) * 1024
}

/// Monotonic seconds, for timing.
public func monotonicSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Online cores (sysconf _SC_NPROCESSORS_ONLN), at least 1.
public func onlineCoreCount() -> Int {
    return max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
}

/// $TMPDIR if set and non-empty, else /tmp.
public func defaultTemporaryDirectory() -> String {
    if let value = getenv("TMPDIR"), value.pointee != 0 { return String(cString: value) }
    return "/tmp"
}

/// $TMPDIR if set; else /dev/shm if it is a writable directory with `neededBytes` free and
/// twice that to spare; else /tmp.
func defaultStripeDirectory(neededBytes: Int64) -> String {
    if let value = getenv("TMPDIR"), value.pointee != 0 { return String(cString: value) }
    let shared = "/dev/shm"
    if access(shared, W_OK | X_OK) == 0, let free = try? freeDiskBytes(shared), free >= neededBytes * 3 {
        return shared
    }
    return "/tmp"
}
