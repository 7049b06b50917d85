import Glibc

/// Every error the Tessera library throws.
///
/// Each case carries what a user needs to act on it (the path, the operation, the numbers), and
/// `description` renders it as one line. An error is reported once, where it is detected; callers
/// pass it on unchanged.
public enum TesseraError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A system call failed. `operation` is the call's name (`open`, `mmap`, `fallocate`, ...).
    case system(operation: String, errno: Int32, path: String)
    /// A photo could not be decoded. `reason` is libjpeg's message or ours.
    case unreadablePhoto(path: String, reason: String)
    /// A setting is out of range or inconsistent; the message says which and why.
    case invalidSettings(String)
    /// An output (or the temporary folder) cannot be written where it is asked for: its folder
    /// is missing, what stands at its name is not ours to replace, two outputs are one file.
    /// Checked before any work.
    case unusableOutput(path: String, reason: String)
    /// The output would exceed what baseline JPEG can store in one dimension.
    case outputTooLarge(width: Int, height: Int, limit: Int)
    /// No usable photo was found in the given paths.
    case noPhotos(searched: [String])
    /// libjpeg failed while encoding the output.
    case encodeFailed(path: String, reason: String)
    /// The memory budget cannot hold even the smallest working set.
    case budgetTooSmall(budgetBytes: Int, neededBytes: Int)
    /// Not enough free disk space for the render; checked before any work starts.
    case insufficientDiskSpace(directory: String, neededBytes: Int64, freeBytes: Int64)
    /// Not enough free inodes for the files a Deep Zoom pyramid needs; checked before any work.
    case insufficientInodes(directory: String, neededFiles: Int64, freeFiles: Int64)
    /// The render was cancelled (a signal, or the caller).
    case cancelled
    /// A shard folder cannot be joined: a part is missing, duplicated, truncated, or of another
    /// render. Nothing was written.
    case unusableParts(directory: String, reason: String)

    public var description: String {
        switch self {
        case let .system(operation, errno, path):
            return "\(operation) failed for \(path): \(errnoDescription(errno))"
        case let .unreadablePhoto(path, reason):
            return "cannot read photo \(path): \(reason)"
        case let .invalidSettings(message):
            return message
        case let .unusableOutput(path, reason):
            return "\(path): \(reason)"
        case let .outputTooLarge(width, height, limit):
            return "output would be \(width) x \(height) px, but a JPEG side is limited to \(limit) px"
        case let .noPhotos(searched):
            return "no JPEG photos found in \(searched.joined(separator: ", "))"
        case let .encodeFailed(path, reason):
            return "encoding \(path) failed: \(reason)"
        case let .budgetTooSmall(budget, needed):
            return "memory budget \(formatBytes(Int64(budget))) is too small: this render needs at least \(formatBytes(Int64(needed)))"
        case let .insufficientDiskSpace(directory, needed, free):
            return "not enough disk space in \(directory): needs \(formatBytes(needed)), \(formatBytes(free)) free"
        case let .insufficientInodes(directory, needed, free):
            return "not enough free inodes in \(directory): the Deep Zoom pyramid needs \(needed) files and directories, \(free) can be made"
        case .cancelled:
            return "cancelled"
        case let .unusableParts(directory, reason):
            return "cannot join the parts in \(directory): \(reason)"
        }
    }
}

/// "No space left on device (ENOSPC)"-style text for an errno value.
func errnoDescription(_ code: Int32) -> String {
    return String(cString: strerror(code)) + " (errno \(code))"
}

/// Bytes as a human-readable binary size: "64.0 MiB".
public func formatBytes(_ bytes: Int64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while abs(value) >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    if unit == 0 { return "\(bytes) B" }
    return formatDecimal(value, places: 1) + " " + units[unit]
}

/// A fixed-point rendering of `value` with `places` decimals, without Foundation's formatters.
public func formatDecimal(_ value: Double, places: Int) -> String {
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    let negative = value < 0
    let scaled = (abs(value) * scale).rounded()
    guard scaled.isFinite, scaled < 9.0e18 else { return String(value) }
    let whole = Int64(scaled)
    let integer = whole / Int64(scale)
    var text = String(integer)
    if places > 0 {
        var fraction = String(whole % Int64(scale))
        while fraction.count < places { fraction = "0" + fraction }
        text += "." + fraction
    }
    return negative && scaled != 0 ? "-" + text : text
}
