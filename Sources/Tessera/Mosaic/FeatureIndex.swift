// FeatureIndex.swift — analysed photo features kept on disk, so a second run skips analysis.
//
// One record store (System/RecordJournal.swift) per analysis shape (sub-cells k and cell
// aspect), in a cache directory: `features-k<k>-a<aspect>.idx`, sorted by path, and its journal
// `.journal`, which every batch of analysed photos is appended to durably (an interrupted
// analysis keeps every batch appended; the next run analyses only the rest). A record: key = the
// photo's path bytes; value = size i64, mtime (ns) i64, change time (ns) i64 (0: not known, as
// in entries written before 0.6.15), device u64, inode u64 (since schema 2), the decode key
// (`decodeKey`: format, colour profile, decoder version) as a u8 length and its bytes, then
// k*k*3 Float32, all little-endian. An entry counts only while the file's size, mtime, device
// and inode are unchanged, and its change time where both sides know one (another folder's
// photo of the same relative path, size and time is another inode; an editor that rewrites a
// photo and renames it over the old one makes a new inode; a file deleted and another made with
// its freed inode, size and mtime has a new change time), it would be decoded the same way, and
// every value is a
// finite number within ±2 (Oklab from sRGB stays
// within [0, 1] for L and about ±0.33 for a and b: anything else is a damaged cache, analysed
// again).
//
// Memory does not follow the index: `lookup` answers a run's photos (sorted by path) by one
// merge pass over the files, a block at a time, and `compact` merges in sorted chunks.
//
// Shards (`tessera analyse` run as shard K of N): a shard's store is a file set of its own
// beside the main one, `features-k<k>-a<aspect>.shard-K-of-N.idx` (and `.journal`), so that no
// two tasks of a job array write one file; every index of the same shape reads those too (the
// main files first, then the shard files in name order; for a photo, the newest usable entry).
//
// The format before this one, `<stem>.tsv` (a line per photo: path, size, mtime, decode key,
// then k*k*3 numbers, tab-separated), is imported once, streamed, when there is no `.idx` yet.
//
// The old per-photo methods (`lookup(_:decoded:)`, `store`, `save`, `heldEntries`) remain as a
// layer over the store: they hold the run's entries (`only`) in a dictionary, loaded on first use.
//
// Threading: every method may be called from any thread; `lock` protects the mutable state.
import Glibc

public final class FeatureIndex: @unchecked Sendable {
    /// The main file this index writes (the main one, or the shard's own).
    public let path: String
    private let valuesPerPhoto: Int
    /// Where this index appends.
    private let store: RecordStore
    /// What it reads, oldest first: the main store, then the shards' in name order.
    private let readStores: [RecordStore]
    private let only: Set<String>?
    private let lock = Mutex()
    private typealias Entry = (stamp: FileStamp, decoded: String, features: [Float])
    private var held: [String: Entry]?  // protected by `lock`; the old API's entries, loaded on first use
    private var pending: [(path: String, entry: Entry)] = []  // protected by `lock`
    private var hitCount = 0  // protected by `lock`

    /// Entries reused by either `lookup` in this run.
    public var hits: Int { lock.withLock { hitCount } }
    /// The entries held in memory by the per-photo methods (this run's photos, or all with no
    /// `only`); loading them is deferred to the first per-photo call.
    public var heldEntries: Int { lock.withLock { heldLocked().count } }

    /// Opens (or starts) the index for `k` sub-cells and `cellAspect` in `directory`, creating the
    /// directory if needed, and imports the old text format once. A missing, unreadable or
    /// damaged file is an empty index (damaged blocks are just missing entries).
    /// `only`: the photo paths the per-photo `lookup(_:decoded:)` may ask about (nil: all).
    /// `shard`: append into this shard's own files (see the file's note), not the main ones.
    /// The most shard stores read beside the main one (see `init`).
    static let mostShardFiles = 64

    public init(directory: String, subCells k: Int, cellAspect: Double, only: Set<String>? = nil, shard: ShardSpec? = nil) {
        makeDirectories(directory)  // (an existing one is fine; a failure shows when saving)
        let stem = "features-k\(k)-a\(formatDecimal(cellAspect, places: 4))"
        valuesPerPhoto = k * k * 3
        self.only = only
        let schema = UInt32(0x0200_0000) | UInt32(truncatingIfNeeded: valuesPerPhoto)
        let ownStem = shard.map { stem + ".shard-\($0.number)-of-\($0.count)" } ?? stem
        var shardStems = Set<String>()
        for name in (try? listDirectory(directory, limit: 4096, where: { $0.hasPrefix(stem + ".shard-") })) ?? [] {
            for suffix in [".idx", ".journal", ".tsv"] where name.hasSuffix(suffix) { shardStems.insert(String(name.dropLast(suffix.count))) }
        }
        // A lookup holds a block of every store at once, so their number is bounded: the first
        // `mostShardFiles` in name order are read (and this shard's own); the photos of any
        // others are analysed again and land in the store written now.
        var shardNames = Array(shardStems.sorted().prefix(Self.mostShardFiles))
        if shard != nil && !shardNames.contains(ownStem) { shardNames.append(ownStem) }
        // A lookup holds every store's journal (when small): together at most 4 MiB, so with
        // many shards each is compacted sooner.
        let stems = [stem] + shardNames
        let held = max(Int64(64 << 10), Int64(4 << 20) / Int64(stems.count))
        let stores = stems.map { RecordStore(directory: directory, stem: $0, schema: schema, journalHeldLimit: held) }
        readStores = stores
        store = stores.first { $0.mainPath == directory + "/" + ownStem + ".idx" }!
        path = store.mainPath
        for store in stores where !store.mainExists {
            let text = String(store.mainPath.dropLast(4)) + ".tsv"
            if RecordStore.fileBytes(text) != nil { try? importText(text, into: store) }
        }
    }

    /// The old format, streamed into a new main file (the journal's records, newer, win).
    private func importText(_ text: String, into store: RecordStore) throws(TesseraError) {
        let count = valuesPerPhoto
        try store.compact { sorter throws(TesseraError) in
            var failure: TesseraError?
            var value: [UInt8] = []
            try forEachLine(of: text) { line in
                guard failure == nil else { return }
                let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
                guard fields.count == 4 + count, let size = Int64(fields[1]), let mtime = Int64(fields[2]) else { return }
                let values = fields[4...].compactMap { Float($0) }
                guard values.count == count, Self.plausible(values) else { return }
                // The old format knew size and mtime only: an entry whose file still has them is
                // taken with the file's device and inode now, once; one whose file has changed is
                // left out; one whose file is gone stays as a photo known by size and mtime alone.
                var stamp = FileStamp(fileBytes: size, modifiedNanoseconds: mtime)
                if case .success(let info) = fileStatus(String(fields[0])) {
                    guard Self.stamp(info).fileBytes == size && Self.stamp(info).modifiedNanoseconds == mtime else { return }
                    stamp = Self.stamp(info)
                }
                value.removeAll(keepingCapacity: true)
                guard Self.encode(stamp: stamp, decoded: Array(fields[3].utf8), features: values, into: &value) else { return }
                let key = Array(fields[0].utf8)
                do throws(TesseraError) {
                    try key.withUnsafeBytes { key in
                        value.withUnsafeBytes { value in Result { () throws(TesseraError) in try sorter.add(key: key, value: value) } }
                    }.get()
                } catch { failure = error }
            }
            if let failure { throw failure }
        }
    }

    /// What decoding a photo with `header` draws, as the index records it: the format, the
    /// colour profile it is converted from, and the version of Tessera's decoding (2: colour
    /// conversion to sRGB).
    public static func decodeKey(_ header: PhotoHeader) -> String {
        let profile = header.colorTag.map { String($0, radix: 16) } ?? "srgb"
        return "\(header.format.rawValue.lowercased())-\(profile)-d2"
    }

    private static func plausible<S: Sequence>(_ values: S) -> Bool where S.Element == Float {
        values.allSatisfy { $0.isFinite && abs($0) <= 2 }
    }

    /// Appends a record's value; false when the decode key is too long to store.
    private static func encode<C: Collection>(stamp: FileStamp, decoded: [UInt8], features: C,
                                              into value: inout [UInt8]) -> Bool where C.Element == Float {
        guard decoded.count <= 255 else { return false }
        value.appendLittleEndian(stamp.fileBytes)
        value.appendLittleEndian(stamp.modifiedNanoseconds)
        value.appendLittleEndian(stamp.changedNanoseconds)
        value.appendLittleEndian(stamp.device)
        value.appendLittleEndian(stamp.inode)
        value.append(UInt8(decoded.count))
        value.append(contentsOf: decoded)
        for feature in features { value.appendLittleEndian(feature.bitPattern) }
        return true
    }

    /// A value's parts, bounds-checked: nil when it is not of this index's shape.
    private func parse(_ value: UnsafeRawBufferPointer) -> (stamp: FileStamp, decoded: UnsafeRawBufferPointer, features: Int)? {
        let at = 40
        guard value.count > at else { return nil }
        let decodedCount = Int(value[at])
        guard value.count == at + 1 + decodedCount + 4 * valuesPerPhoto else { return nil }
        let stamp = FileStamp(fileBytes: value.loadLittleEndian(0, as: Int64.self), modifiedNanoseconds: value.loadLittleEndian(8, as: Int64.self),
                              changedNanoseconds: value.loadLittleEndian(16, as: Int64.self), device: value.loadLittleEndian(24, as: UInt64.self),
                              inode: value.loadLittleEndian(32, as: UInt64.self))
        return (stamp, UnsafeRawBufferPointer(rebasing: value[(at + 1)..<(at + 1 + decodedCount)]), at + 1 + decodedCount)
    }

    /// Copies a value's features into `out` if they are all plausible.
    private func features(_ value: UnsafeRawBufferPointer, at offset: Int, into out: UnsafeMutableBufferPointer<Float>) -> Bool {
        for index in 0..<valuesPerPhoto {
            let feature = Float(bitPattern: value.loadLittleEndian(offset + 4 * index, as: UInt32.self))
            guard feature.isFinite && abs(feature) <= 2 else { return false }
            out[index] = feature
        }
        return true
    }

    /// A photo's stamp as the index compares it: size, mtime, change time, device and inode, as
    /// scanned (a photo made by hand: its size and mtime, the rest 0), else by stat.
    private static func identity(_ photo: Photo) -> FileStamp? {
        if let size = photo.fileBytes, let mtime = photo.modifiedNanoseconds {
            return FileStamp(fileBytes: size, modifiedNanoseconds: mtime, changedNanoseconds: photo.changedNanoseconds ?? 0,
                             device: photo.identity?.device ?? 0, inode: photo.identity?.inode ?? 0)
        }
        guard case .success(let info) = fileStatus(photo.file) else { return nil }
        return stamp(info)
    }

    /// What a stat gives the index.
    private static func stamp(_ info: stat) -> FileStamp { FileStamp(info) }

    /// Whether an entry's stamp is the file's: the same size, mtime, device and inode, and the
    /// same change time where both know one (0: not known, in entries written before 0.6.15 and
    /// for photos made by hand). A file deleted and another made in its place with the freed
    /// inode, its size and mtime set back (`cp -p` of a same-sized file), has a new change time.
    private static func sameFile(_ entry: FileStamp, _ file: FileStamp) -> Bool {
        entry.fileBytes == file.fileBytes && entry.modifiedNanoseconds == file.modifiedNanoseconds && entry.device == file.device
            && entry.inode == file.inode
            && (entry.changedNanoseconds == 0 || file.changedNanoseconds == 0 || entry.changedNanoseconds == file.changedNanoseconds)
    }

    /// Looks up `photos`, which must be sorted ascending by `file` (byte order; out of order still
    /// answers right, only slower): calls `found(row, features)` for each photo with a usable
    /// entry (same size, mtime and decode key; plausible values), and returns the other rows,
    /// ascending. One merge pass over the index files: memory does not grow with the index.
    public func lookup<C: RandomAccessCollection>(_ photos: C, found: (Int, UnsafeBufferPointer<Float>) throws(TesseraError) -> Void)
        throws(TesseraError) -> [Int32] where C.Element == Photo, C.Index == Int {
        let cursor = RecordCursor(sources: readStores.flatMap { $0.openSources() })
        let out = UnsafeMutableBufferPointer<Float>.allocate(capacity: max(valuesPerPhoto, 1))
        defer { out.deallocate() }
        var missing: [Int32] = []
        var reused = 0
        defer { lock.withLock { hitCount += reused } }
        for row in photos.indices {
            let photo = photos[row]
            guard let stamp = Self.identity(photo) else {
                missing.append(Int32(row))
                continue
            }
            let decoded = Array(Self.decodeKey(photo.header).utf8)
            let hit = photo.file.bytes.withUnsafeBytes { key in
                cursor.visit(key) { value in
                    guard let entry = parse(value), Self.sameFile(entry.stamp, stamp),
                          decoded.withUnsafeBytes({ compareKeys($0, entry.decoded) }) == 0 else { return false }
                    return features(value, at: entry.features, into: out)
                }
            }
            if hit {
                try found(row, UnsafeBufferPointer(out))
                reused += 1
            } else {
                missing.append(Int32(row))
            }
        }
        return missing
    }

    /// Appends `entries` as one durable batch (photos with a feature count of another shape, or
    /// that cannot be stat'ed, are left out). After this returns, a crash keeps them.
    public func append(_ entries: [(photo: Photo, features: [Float])]) throws(TesseraError) {
        var batch = RecordBatch()
        for (photo, features) in entries where features.count == valuesPerPhoto && Self.plausible(features) {
            guard let stamp = Self.identity(photo) else { continue }
            let decoded = Array(Self.decodeKey(photo.header).utf8)
            photo.file.bytes.withUnsafeBytes { key in
                _ = batch.add(key: key) { value in _ = Self.encode(stamp: stamp, decoded: decoded, features: features, into: &value) }
            }
        }
        try store.append(batch)
    }

    /// Folds the journal into the sorted main file (bounded memory; atomic: a crash leaves the
    /// old main file and the journal, which say the same).
    public func compact() throws(TesseraError) {
        try store.compact()
    }

    // MARK: The per-photo methods

    /// The entries the per-photo methods hold (call with `lock` held).
    private func heldLocked() -> [String: Entry] {
        if let held { return held }
        var loaded: [String: Entry] = [:]
        let out = UnsafeMutableBufferPointer<Float>.allocate(capacity: max(valuesPerPhoto, 1))
        defer { out.deallocate() }
        func entry(_ value: UnsafeRawBufferPointer) -> Entry? {
            guard let parts = parse(value), features(value, at: parts.features, into: out) else { return nil }
            return (parts.stamp, String(decoding: parts.decoded, as: UTF8.self), Array(out))
        }
        let sources = readStores.flatMap { $0.openSources() }
        if let only {
            let cursor = RecordCursor(sources: sources)
            for path in only.map({ Array($0.utf8) }).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                _ = path.withUnsafeBytes { key in
                    cursor.visit(key) { value in
                        guard let found = entry(value) else { return false }
                        loaded[String(decoding: path, as: UTF8.self)] = found
                        return true
                    }
                }
            }
        } else {
            try? mergeRecords(sources) { key, value in
                if let found = entry(value) { loaded[String(decoding: key, as: UTF8.self)] = found }
            }
        }
        held = loaded
        return loaded
    }

    /// The stored features of `photoPath` if the file is unchanged since they were stored and
    /// decodes the same way (`decodeKey`).
    public func lookup(_ photoPath: String, decoded: String) -> [Float]? {
        guard case .success(let info) = fileStatus(photoPath) else { return nil }
        return lock.withLock {
            guard let entry = heldLocked()[photoPath], Self.sameFile(entry.stamp, Self.stamp(info)), entry.decoded == decoded else {
                return nil
            }
            hitCount += 1
            return entry.features
        }
    }

    /// Records the features of `photoPath` as it is now (appended by `save`).
    public func store(_ photoPath: String, decoded: String, features: [Float]) {
        guard case .success(let info) = fileStatus(photoPath) else { return }
        let entry: Entry = (Self.stamp(info), decoded, features)
        lock.withLock {
            held?[photoPath] = entry
            pending.append((photoPath, entry))
        }
    }

    /// Appends what `store` recorded as one batch, then compacts (a crash leaves the old files).
    public func save() throws(TesseraError) {
        let batch: RecordBatch? = lock.withLock {
            guard !pending.isEmpty else { return nil }
            var batch = RecordBatch()
            for (photoPath, entry) in pending where entry.features.count == valuesPerPhoto && Self.plausible(entry.features) {
                Array(photoPath.utf8).withUnsafeBytes { key in
                    _ = batch.add(key: key) { value in
                        _ = Self.encode(stamp: entry.stamp, decoded: Array(entry.decoded.utf8), features: entry.features, into: &value)
                    }
                }
            }
            pending.removeAll()
            return batch
        }
        guard let batch else { return }
        try store.append(batch)
        try store.compact()
    }
}

/// $XDG_CACHE_HOME/tessera, else $HOME/.cache/tessera, else /tmp/tessera-cache-UID (this
/// user's, 0700; see `privateTemporaryCache`).
public func defaultCacheDirectory() -> String {
    if let value = getenv("XDG_CACHE_HOME"), value.pointee != 0 {
        // Made if missing, as the XDG spec asks (0700): a $XDG_CACHE_HOME that did not exist
        // lost every index, with a warning at every mosaic.
        let cache = String(cString: value)
        makeDirectories(cache, mode: 0o700)
        return cache + "/tessera"
    }
    if let home = getenv("HOME"), home.pointee != 0 {
        let cache = String(cString: home) + "/.cache"
        try? makeDirectory(cache)
        return cache + "/tessera"
    }
    return privateTemporaryCache()
}

/// The cache's folder in /tmp, for a process with neither $HOME nor $XDG_CACHE_HOME (`env -i`,
/// some services): /tmp/tessera-cache-UID, made 0700, and used only when it is a folder (not a
/// link) this user owns that no one else may write or read. /tmp is everyone's: a shared
/// "/tmp/tessera-cache" that another user made first let that user read the photos' paths and
/// plant forged entries (a photo's size, which shapes a collage). A name taken by someone else
/// gets a new private folder (mkdtemp) for this run.
func privateTemporaryCache(in root: String = "/tmp") -> String {
    let uid = geteuid()
    let path = root + "/tessera-cache-\(uid)"
    _ = try? makeDirectory(path, mode: 0o700)
    if case .success(let info) = linkStatus(path), (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == uid, info.st_mode & 0o077 == 0 {
        return path
    }
    var template = Array((path + "-XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!) }
    guard made != nil else { return path + "-unusable/cache" }
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
