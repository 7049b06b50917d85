// FeatureIndex.swift — analysed photo features kept on disk, so a second run skips analysis.
//
// One text file per analysis shape (sub-cells k and cell aspect), in a cache directory:
// `features-k<k>-a<aspect>.tsv`, a line per photo: path, size, mtime (ns), what was decoded
// (format, colour profile and decoder version: `decodeKey`), then k*k*3 numbers. An entry counts
// only while the file's size and mtime are unchanged and it would be decoded the same way (lines
// from before the decode key, analysed without colour conversion, no longer parse: analysed
// again). The file is rewritten
// atomically after a run that added entries.
//
// Threading: `lookup` and `store` may be called from any thread; `lock` protects `entries`.
import Glibc

public final class FeatureIndex: @unchecked Sendable {
    public let path: String
    private let valuesPerPhoto: Int
    private let lock = Mutex()
    private var entries: [String: (size: Int64, mtime: Int64, decoded: String, features: [Float])] = [:]  // protected by `lock`
    private var changed = false  // protected by `lock`
    /// Entries reused by `lookup` in this run.
    public private(set) var hits = 0

    /// Opens (or starts) the index for `k` sub-cells and `cellAspect` in `directory`, creating the
    /// directory if needed. A missing or unreadable file is an empty index.
    public init(directory: String, subCells k: Int, cellAspect: Double) {
        try? makeDirectory(directory)  // (an existing one is fine; a failure shows when saving)
        path = directory + "/features-k\(k)-a\(formatDecimal(cellAspect, places: 4)).tsv"
        valuesPerPhoto = k * k * 3
        // (A missing or unreadable file is an empty index.)
        try? forEachLine(of: path) { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count == 4 + valuesPerPhoto, let size = Int64(fields[1]), let mtime = Int64(fields[2]) else { return }
            let values = fields[4...].compactMap { Float($0) }
            // Oklab from sRGB stays within [0, 1] for L and about ±0.33 for a and b. A value
            // that is not a finite number in a generous range (a damaged or edited cache: "nan"
            // parses as a Float) drops the entry, so the photo is analysed again and the entry
            // rewritten when the index is saved.
            guard values.count == valuesPerPhoto, values.allSatisfy({ $0.isFinite && abs($0) <= 2 }) else { return }
            entries[String(fields[0])] = (size, mtime, String(fields[3]), values)
        }
    }

    /// What decoding a photo with `header` draws, as the index records it: the format, the
    /// colour profile it is converted from, and the version of Tessera's decoding (2: colour
    /// conversion to sRGB).
    public static func decodeKey(_ header: PhotoHeader) -> String {
        let profile = header.colorTag.map { String($0, radix: 16) } ?? "srgb"
        return "\(header.format.rawValue.lowercased())-\(profile)-d2"
    }

    /// The stored features of `photoPath` if the file is unchanged since they were stored and
    /// decodes the same way (`decodeKey`).
    public func lookup(_ photoPath: String, decoded: String) -> [Float]? {
        guard case .success(let info) = fileStatus(photoPath) else { return nil }
        let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        return lock.withLock {
            guard let entry = entries[photoPath], entry.size == Int64(info.st_size), entry.mtime == mtime,
                  entry.decoded == decoded else { return nil }
            hits += 1
            return entry.features
        }
    }

    /// Records the features of `photoPath` as it is now.
    public func store(_ photoPath: String, decoded: String, features: [Float]) {
        guard case .success(let info) = fileStatus(photoPath) else { return }
        let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        lock.withLock {
            entries[photoPath] = (Int64(info.st_size), mtime, decoded, features)
            changed = true
        }
    }

    /// Writes the index if anything was added (atomically: a crash leaves the old file).
    public func save() throws(TesseraError) {
        let snapshot: [(String, (size: Int64, mtime: Int64, decoded: String, features: [Float]))]? = lock.withLock {
            guard changed else { return nil }
            changed = false
            return entries.sorted { $0.key < $1.key }
        }
        guard let snapshot else { return }
        var text = ""
        for (photoPath, entry) in snapshot where !photoPath.contains("\t") && !photoPath.contains("\n") {
            text += photoPath + "\t\(entry.size)\t\(entry.mtime)\t\(entry.decoded)"
            for value in entry.features { text += "\t" + String(value) }
            text += "\n"
        }
        let output = try AtomicOutputFile(destination: path)
        try Array(text.utf8).withUnsafeBytes { bytes in Result { () throws(TesseraError) in try output.append(bytes) } }.get()
        try output.commit()
    }
}

/// $XDG_CACHE_HOME/tessera, else $HOME/.cache/tessera, else /tmp/tessera-cache.
public func defaultCacheDirectory() -> String {
    if let value = getenv("XDG_CACHE_HOME"), value.pointee != 0 { return String(cString: value) + "/tessera" }
    if let home = getenv("HOME"), home.pointee != 0 {
        let cache = String(cString: home) + "/.cache"
        try? makeDirectory(cache)
        return cache + "/tessera"
    }
    return "/tmp/tessera-cache"
}
