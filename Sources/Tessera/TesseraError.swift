// TesseraError.swift — every error the library throws, as values, and the byte and number
// formatting its messages use.
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
    /// A photo cannot be drawn within the memory budget: `reason` says what it takes, and
    /// `budgetToDrawBytes` is the budget that would draw it.
    case photoNeedsMemory(path: String, reason: String, budgetToDrawBytes: Int64)
    /// A setting is out of range or inconsistent; the message says which and why.
    case invalidSettings(String)
    /// A mosaic's minimum of uses of every picture cannot be met; the conflict carries the
    /// numbers and the nearest values that can.
    case minUsesImpossible(MinUsesConflict)
    /// An output (or the temporary folder) cannot be written where it is asked for: its folder
    /// is missing, what stands at its name is not ours to replace, two outputs are one file.
    /// Checked before any work.
    case unusableOutput(path: String, reason: String)
    /// The output would exceed what its format can store in one dimension: `limit` is a JPEG's
    /// (65,500 px) when a JPEG is written, else a Deep Zoom pyramid's (RenderPlan.maxDeepZoomSide).
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
    /// A sharded render was asked for with the serial encoder: shards are joined from the
    /// parallel encoder's restart-marker stripes.
    case shardedSerialEncoder
    /// The outputs given to a join do not match what the parts hold.
    case joinOutputs(JoinOutputMismatch)
    /// A path the parts name for `output` (the JPEG, the pyramid; `file` is which of its files,
    /// "the Deep Zoom tiles") cannot be used as it stands: the join must be given one instead.
    case joinPathFromParts(path: String, output: OutputRole, file: String, problem: JoinPathProblem)
    /// A shard folder holds no part file: the shards have not been run into it.
    case noParts(directory: String)
    /// A shard folder cannot be joined: a part is missing, duplicated, truncated, or of another
    /// render. Nothing was written.
    case unusableParts(directory: String, reason: String)
    /// A join that opens every part at once reached the limit on open files at `part`
    /// (`openFiles`: the limit, when known). Nothing was written.
    case tooManyPartsOpen(directory: String, part: String, openFiles: Int?)
    /// A part's index would take more of the join's memory budget than the join lets it
    /// (`reason` names the part and what it takes); a budget of `neededBytes` holds it. Nothing
    /// was written. (A forged part looks the same: the reason says so.)
    case partIndexTooLarge(directory: String, reason: String, neededBytes: Int)

    public var description: String {
        switch self {
        case let .system(operation, errno, path):
            return "\(operation) failed for \(path): \(errnoDescription(errno))"
        case let .unreadablePhoto(path, reason):
            return "cannot read photo \(path): \(reason)"
        case let .photoNeedsMemory(path, reason, budget):
            return "cannot read photo \(path): \(reason); a memory budget of \(formatBytes(budget)) or more would draw it"
        case let .invalidSettings(message):
            return message
        case let .minUsesImpossible(conflict):
            return conflict.description
        case let .unusableOutput(path, reason):
            return "\(path): \(reason)"
        case let .outputTooLarge(width, height, limit):
            let what = limit == jpegMaxDimension ? "a JPEG side" : "a pyramid's side (Deep Zoom, TIFF)"
            return "output would be \(width) x \(height) px, but \(what) is limited to \(limit) px"
        case let .noPhotos(searched):
            return "no photos (\(Formats.names)) in \(searched.joined(separator: ", "))"
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
        case .shardedSerialEncoder:
            return "a sharded render is joined from restart-marker stripes, which the serial encoder does not make"
        case let .joinOutputs(mismatch):
            return mismatch.description
        case let .joinPathFromParts(path, _, file, problem):
            return "\(path): " + problem.description(file: file)
        case let .noParts(directory):
            return "cannot join the parts in \(directory): it holds no part files (*\(ShardSpec.partExtension)): run the shards into this folder first"
        case let .unusableParts(directory, reason):
            return "cannot join the parts in \(directory): \(reason)"
        case let .tooManyPartsOpen(directory, part, openFiles):
            let limit = openFiles.map { "at most \($0) files" } ?? "no more files"
            return "cannot join the parts in \(directory): \(part) cannot be opened: the join holds every part open at once, "
                + "and this process may open \(limit). Raise the limit on open files above the number of parts (ulimit -n, "
                + "up to its hard limit, ulimit -Hn; LimitNOFILE= for a service) and join again"
        case let .partIndexTooLarge(directory, reason, needed):
            return "cannot join the parts in \(directory): \(reason): a memory budget of at least \(formatBytes(Int64(needed))) "
                + "holds it, or, if its render did not make that many tiles, the part is damaged"
        }
    }
}

/// An output of a render, as messages name it.
public enum OutputRole: String, Equatable, Sendable {
    case jpeg = "the JPEG"
    case pyramid = "the pyramid"
    case tiff = "the TIFF"
    case manifest = "the manifest"
}

/// How the outputs given to a join disagree with the parts.
public enum JoinOutputMismatch: Equatable, Sendable, CustomStringConvertible {
    /// A JPEG was asked for, but the parts' render wrote only a pyramid.
    case noJPEGInParts
    /// A pyramid was asked for, but the parts' render wrote only a JPEG.
    case noPyramidInParts
    /// Outputs were given, but not the JPEG the parts also hold.
    case jpegNotGiven
    /// Outputs were given, but not the pyramid the parts also hold.
    case pyramidNotGiven
    /// A TIFF was asked for, but the parts' render wrote none.
    case noTIFFInParts
    /// Outputs were given, but not the TIFF the parts also hold.
    case tiffNotGiven
    /// A manifest was asked for, but the shards were given none.
    case noManifestInParts
    /// Outputs were given, but not the manifest the parts also hold.
    case manifestNotGiven

    public var description: String {
        switch self {
        case .noJPEGInParts: "the parts hold no JPEG (their render wrote only a pyramid)"
        case .noPyramidInParts: "the parts hold no pyramid (their render wrote only a JPEG)"
        case .jpegNotGiven: "the parts hold a JPEG too: give its path as well (or no paths, to use those the shards named)"
        case .pyramidNotGiven: "the parts hold a pyramid too: give its path as well (or no paths, to use those the shards named)"
        case .noTIFFInParts: "the parts hold no TIFF (their render was not given one)"
        case .tiffNotGiven: "the parts hold a TIFF too: give its path as well (or no paths, to use those the shards named)"
        case .noManifestInParts: "the parts hold no manifest (the shards were not given one)"
        case .manifestNotGiven: "the parts hold a manifest too: give its path as well (or no paths, to use those the shards named)"
        }
    }
}

/// Why a mosaic's minimum of uses of every picture cannot be met, with the nearest values that
/// can (the command line names the flags that set them).
public enum MinUsesConflict: Equatable, Sendable, CustomStringConvertible {
    /// `pictures` x `minUses` uses need more cells than the mosaic's `cells`: `fewestCells` would
    /// do, or a minimum of `largestMinUses` (0: fewer pictures than cells).
    case tooFewCells(pictures: Int, cells: Int, minUses: Int)
    /// The fewest uses asked of every picture is more than the most allowed of one.
    case aboveMaxUses(minUses: Int, maxUses: Int)
    /// On a `columns` x `rows` grid with no repeat within `minDistance` cells, one picture fits
    /// at most `mostUses` times; a distance of `largestDistance` fits `minUses`.
    case minDistance(minUses: Int, minDistance: Int, columns: Int, rows: Int, mostUses: Int, largestDistance: Int)

    /// The cells `tooFewCells` needs.
    public var fewestCells: Int {
        if case let .tooFewCells(pictures, _, minUses) = self { return pictures * minUses }
        return 0
    }

    /// The largest minimum of uses `tooFewCells`'s cells hold for every picture.
    public var largestMinUses: Int {
        if case let .tooFewCells(pictures, cells, _) = self { return cells / max(1, pictures) }
        return 0
    }

    public var description: String {
        switch self {
        case let .tooFewCells(pictures, cells, minUses):
            let each = minUses == 1 ? "once" : "\(minUses) times"
            return "every one of \(pictures) pictures at least \(each) needs at least \(fewestCells) cells; this mosaic has \(cells): "
                + "ask for \(fewestCells) cells or more, or " + (largestMinUses > 0 ? "at least \(largestMinUses) use(s) of each" : "fewer pictures")
        case let .aboveMaxUses(minUses, maxUses):
            return "at least \(minUses) uses of every picture cannot be met with at most \(maxUses) of each: "
                + "allow \(minUses) uses or more, or ask for at least \(maxUses)"
        case let .minDistance(minUses, minDistance, columns, rows, mostUses, largestDistance):
            return "at least \(minUses) uses of every picture cannot be met with no repeat within \(minDistance) cells: "
                + "a \(columns) x \(rows) grid holds one picture at most \(mostUses) times \(minDistance + 1) cells apart; "
                + "a minimum distance of \(largestDistance), or at least \(mostUses) use(s) of each, can be met"
        }
    }
}

/// Why a path named by the parts is not used without the join being given one.
public enum JoinPathProblem: Equatable, Sendable {
    /// A JPEG's path that does not end in .jpg or .jpeg.
    case notJPEGName
    /// Something exists there: the join only creates files at the paths its parts name.
    case exists

    /// The reason, for `file` ("the JPEG", "the Deep Zoom tiles").
    public func description(file: String) -> String {
        switch self {
        case .notJPEGName: "a part names this as the JPEG, but it does not end in .jpg or .jpeg"
        case .exists: "\(file) exists, and this path comes from the parts, not from you: the join only creates "
            + "files at paths its parts name; to replace it, give it to the join"
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
