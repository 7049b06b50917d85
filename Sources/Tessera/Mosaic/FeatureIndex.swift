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
// Memory follows the photos of the run, not the index: the file is read a line at a time and
// only the entries of the photos asked about (`only`) are kept; saving writes those and copies
// every other line across from the old file, again a line at a time. (A 300,000-entry index
// held whole took 113 MiB.)
//
// Shards (`tessera analyse` run as shard K of N): a shard's index is a file of its own beside the main
// one, `features-k<k>-a<aspect>.shard-K-of-N.tsv`, so that no two tasks of a job array write one
// file; every index of the same shape merges those files when it loads (the main file first,
// then the shard files in name order; an entry read later replaces one read earlier).
//
// Threading: `lookup` and `store` may be called from any thread; `lock` protects `entries`.
import Glibc

public final class FeatureIndex: @unchecked Sendable {
    public let path: String
    private let valuesPerPhoto: Int
    private let lock = Mutex()
    private var entries: [String: (size: Int64, mtime: Int64, decoded: String, features: [Float])] = [:]  // protected by `lock`
    private var changed = false  // protected by `lock`
    /// The entries held in memory (this run's photos, or all with no `only`).
    public var heldEntries: Int { lock.withLock { entries.count } }
    /// Entries reused by `lookup` in this run.
    public private(set) var hits = 0

    /// Opens (or starts) the index for `k` sub-cells and `cellAspect` in `directory`, creating the
    /// directory if needed. A missing or unreadable file is an empty index.
    /// `only`: the photo paths this run may look up (nil: all; the other entries are kept on
    /// disk and carried over when saving, never held).
    /// `shard`: save into this shard's own file (see the file's note), not the main one.
    public init(directory: String, subCells k: Int, cellAspect: Double, only: Set<String>? = nil, shard: ShardSpec? = nil) {
        try? makeDirectory(directory)  // (an existing one is fine; a failure shows when saving)
        let stem = "features-k\(k)-a\(formatDecimal(cellAspect, places: 4))"
        let main = directory + "/" + stem + ".tsv"
        path = shard.map { directory + "/" + stem + ".shard-\($0.number)-of-\($0.count).tsv" } ?? main
        valuesPerPhoto = k * k * 3
        let shardFiles = ((try? listDirectory(directory)) ?? [])
            .filter { $0.hasPrefix(stem + ".shard-") && $0.hasSuffix(".tsv") }.sorted().map { directory + "/" + $0 }
        // (A missing or unreadable file is an empty index.)
        for file in [main] + shardFiles {
            load(file, only: only)
        }
    }

    private func load(_ file: String, only: Set<String>?) {
        try? forEachLine(of: file) { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            if let only, let first = fields.first, !only.contains(String(first)) { return }
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
        let output = try AtomicOutputFile(destination: path)
        var text = ""
        func flush(atLeast bytes: Int) throws(TesseraError) {
            guard text.utf8.count >= bytes else { return }
            try Array(text.utf8).withUnsafeBytes { bytes in Result { () throws(TesseraError) in try output.append(bytes) } }.get()
            text = ""
        }
        var held = Set<Substring>()
        for (photoPath, entry) in snapshot where !photoPath.contains("\t") && !photoPath.contains("\n") {
            held.insert(Substring(photoPath))
            text += photoPath + "\t\(entry.size)\t\(entry.mtime)\t\(entry.decoded)"
            for value in entry.features { text += "\t" + String(value) }
            text += "\n"
            try flush(atLeast: 1 << 20)
        }
        // The entries this run did not hold, as they were.
        var failure: TesseraError?
        try? forEachLine(of: path) { line in
            guard failure == nil, let tab = line.firstIndex(of: "\t"), !held.contains(line[..<tab]) else { return }
            text += line + "\n"
            do throws(TesseraError) { try flush(atLeast: 1 << 20) } catch { failure = error }
        }
        if let failure { throw failure }
        try flush(atLeast: 0)
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
