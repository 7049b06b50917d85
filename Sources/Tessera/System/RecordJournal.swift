// RecordJournal.swift — a sorted store of records (key bytes to value bytes) on disk, with a
// journal that grows by durable, atomic appends, and compaction that folds the journal in.
//
// Two files per store, `<stem>.idx` (main) and `<stem>.journal`:
//
//   main:    header (24 bytes: magic "TSRSORT1", format version u32, schema u32, CRC32C of the
//            first 16 bytes, 0 u32), then blocks: "TBLK" u32, payload length u32, record count
//            u32, CRC32C of (length, count, payload), then the payload. Records are in ascending
//            byte order of key across the whole file.
//   journal: header (the same, magic "TSRJRNL1"), then frames laid out like blocks (magic
//            "TFRM"), one per appended batch, records in the order given.
//   record:  key length u32, value length u32, key, value. Everything little-endian.
//
// A block or frame that fails its checks (magic, bounds, CRC, record layout, key order) is
// skipped: its records are missing, and reading resumes at the next magic that checks out. A
// file whose header is damaged or has another schema (the caller's format of its values) is an
// empty store. Every length read from a file is checked against the file's size and fixed limits
// before anything is allocated for it, so a hostile file costs at most one chunk limit (2 MiB:
// an append cuts a batch into frames of at most that, each record whole). A file that is mostly
// holes (isMostlyUnstored: a sparse file, which would read as gigabytes of zeros) is damaged
// whole: a main file is not read (and the next compaction replaces it), a journal is cut off.
//
// Durability: an append writes its whole frame with one pwrite at the journal's valid end, then
// fdatasync: once `append` returns, the batch survives SIGKILL or power loss. A frame torn by a
// crash fails its CRC and is ignored, and the next append cuts it off first. ENOSPC throws and the
// tail is cut back, so every earlier batch stays readable.
//
// Reading: `openSources` snapshots the store as sorted sources (the main file read a block at a
// time, and the journal held sorted in memory when it is at most `journalHeldLimit` bytes: a
// larger one is compacted first). `RecordCursor` answers keys asked in ascending order by one
// merge pass over several sources (a later source wins), so its memory is a block per source,
// whatever the store's size.
//
// Compaction merges main and journal into a new main (AtomicOutputFile: renamed over the old one,
// so a reader that has the old one open keeps reading it by inode), then removes the journal.
// The journal is sorted in chunks of `sortChunkBytes` into runs in an anonymous temporary file,
// then merged with the main file: memory is a chunk plus a block per run.
//
// Two processes: append and compaction hold an exclusive flock on the journal file. A process
// that was waiting for a journal that compaction then removed sees the path name another inode
// (or none) and takes the lock again on the new file.
//
// Threading: a RecordStore may be used from several threads (appends are serialised by
// `stateLock` and the flock); a source or cursor is used by one thread.
import Glibc

enum RecordFormat {
    static let mainMagic: [UInt8] = Array("TSRSORT1".utf8)
    static let journalMagic: [UInt8] = Array("TSRJRNL1".utf8)
    static let version: UInt32 = 1
    static let fileHeaderBytes = 24
    static let blockMagic: UInt32 = 0x4B4C_4254  // "TBLK" read little-endian
    static let frameMagic: UInt32 = 0x4D52_4654  // "TFRM"
    static let chunkHeaderBytes = 16
    /// A block of the main file is cut once its payload reaches this.
    static let blockTargetBytes = 64 << 10
    /// The largest block or frame payload read or written: any one record fits (a batch is cut
    /// into frames of at most this on append).
    static let maxChunkBytes = 2 << 20
    static let maxKeyBytes = 1 << 16
    static let maxValueBytes = 1 << 20
    static let recordHeaderBytes = 8

    static func fileHeader(magic: [UInt8], schema: UInt32) -> [UInt8] {
        var bytes = magic
        bytes.appendLittleEndian(version)
        bytes.appendLittleEndian(schema)
        let crc = bytes.withUnsafeBytes { CRC32C.checksum($0) }
        bytes.appendLittleEndian(crc)
        bytes.appendLittleEndian(UInt32(0))
        return bytes
    }

    /// Whether `bytes` (at least `fileHeaderBytes`) is a header of `magic` and `schema`.
    static func checkHeader(_ bytes: UnsafeRawBufferPointer, magic: [UInt8], schema: UInt32) -> Bool {
        guard bytes.count >= fileHeaderBytes else { return false }
        let expected = fileHeader(magic: magic, schema: schema)
        return expected.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress!, fileHeaderBytes) == 0 }
    }

    static func chunkHeader(magic: UInt32, payload: UnsafeRawBufferPointer, count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(chunkHeaderBytes)
        bytes.appendLittleEndian(magic)
        bytes.appendLittleEndian(UInt32(payload.count))
        bytes.appendLittleEndian(UInt32(count))
        var crc = CRC32C()
        bytes.withUnsafeBytes { crc.update(UnsafeRawBufferPointer(rebasing: $0[4..<12])) }
        crc.update(payload)
        bytes.appendLittleEndian(crc.value)
        return bytes
    }

    /// Whether a chunk's CRC, record layout and count check out. `sorted`: keys must also ascend
    /// strictly within the chunk (a main file's block).
    static func validate(payload: UnsafeRawBufferPointer, count: UInt32, crc: UInt32,
                         sorted: Bool) -> (ok: Bool, last: UnsafeRawBufferPointer?) {
        var check = CRC32C()
        var fields: (UInt32, UInt32) = (UInt32(payload.count).littleEndian, count.littleEndian)
        withUnsafeBytes(of: &fields) { check.update($0) }
        check.update(payload)
        guard check.value == crc else { return (false, nil) }
        var at = 0
        var seen: UInt32 = 0
        var previous: UnsafeRawBufferPointer?
        while at < payload.count {
            guard seen < count, let (key, value) = record(in: payload, at: at) else { return (false, nil) }
            if sorted, let previous, compareKeys(previous, key) >= 0 { return (false, nil) }
            previous = key
            at = value.baseAddress! - payload.baseAddress! + value.count
            seen += 1
        }
        return (seen == count, previous)
    }

    /// The record at `at` in a payload, bounds-checked.
    @inline(__always)
    static func record(in payload: UnsafeRawBufferPointer, at: Int) -> (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)? {
        guard payload.count - at >= recordHeaderBytes else { return nil }
        let keyLength = Int(payload.loadLittleEndian(at, as: UInt32.self))
        let valueLength = Int(payload.loadLittleEndian(at + 4, as: UInt32.self))
        guard keyLength <= maxKeyBytes, valueLength <= maxValueBytes,
              keyLength + valueLength <= payload.count - at - recordHeaderBytes else { return nil }
        let keyStart = at + recordHeaderBytes
        return (UnsafeRawBufferPointer(rebasing: payload[keyStart..<keyStart + keyLength]),
                UnsafeRawBufferPointer(rebasing: payload[keyStart + keyLength..<keyStart + keyLength + valueLength]))
    }
}

/// Byte-order comparison of two keys: negative, zero or positive.
@inline(__always)
func compareKeys(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let common = min(a.count, b.count)
    if common > 0 {
        let order = memcmp(a.baseAddress!, b.baseAddress!, common)
        if order != 0 { return Int(order) }
    }
    return a.count - b.count
}

extension Array where Element == UInt8 {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always)
    func loadLittleEndian<T: FixedWidthInteger>(_ offset: Int, as type: T.Type) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

/// Records to append as one journal frame (or to write as a sorted run), encoded as they are added.
struct RecordBatch {
    private(set) var bytes: [UInt8] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Adds a record whose value `writeValue` appends to the buffer it is given. A key or value
    /// over the format's limits is left out (returns false).
    @discardableResult
    mutating func add(key: UnsafeRawBufferPointer, writeValue: (inout [UInt8]) -> Void) -> Bool {
        guard key.count <= RecordFormat.maxKeyBytes else { return false }
        let start = bytes.count
        bytes.appendLittleEndian(UInt32(key.count))
        bytes.appendLittleEndian(UInt32(0))
        bytes.append(contentsOf: key)
        let valueStart = bytes.count
        writeValue(&bytes)
        let valueLength = bytes.count - valueStart
        guard valueLength <= RecordFormat.maxValueBytes else {
            bytes.removeSubrange(start...)
            return false
        }
        Swift.withUnsafeBytes(of: UInt32(valueLength).littleEndian) { length in
            for i in 0..<4 { bytes[start + 4 + i] = length[i] }
        }
        count += 1
        return true
    }

    /// The records cut into runs of at most `limit` bytes, each record whole (one larger than the
    /// limit, which the format's key and value limits rule out, would be a run of its own): the
    /// byte range and record count of each, for a frame apiece.
    func frames(limit: Int) -> [(range: Range<Int>, count: Int)] {
        var frames: [(range: Range<Int>, count: Int)] = []
        var start = 0, at = 0, records = 0
        bytes.withUnsafeBytes { raw in
            while at < raw.count {
                let length = RecordFormat.recordHeaderBytes + Int(raw.loadLittleEndian(at, as: UInt32.self))
                    + Int(raw.loadLittleEndian(at + 4, as: UInt32.self))
                if records > 0 && at + length - start > limit {
                    frames.append((start..<at, records))
                    start = at
                    records = 0
                }
                at += length
                records += 1
            }
        }
        if records > 0 { frames.append((start..<at, records)) }
        return frames
    }

    mutating func add(key: [UInt8], value: [UInt8]) {
        key.withUnsafeBytes { key in _ = add(key: key) { $0.append(contentsOf: value) } }
    }

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        count = 0
    }
}

/// fdatasync(2), through the fault-injection layer.
func syncData(_ file: FileDescriptor) throws(TesseraError) {
    _ = try valueOrErrno("fdatasync", path: file.path) { fdatasync(file.rawValue) }.get("fdatasync", path: file.path)
}

/// fsync of a directory, so a file just created or renamed in it survives power loss.
func syncDirectory(_ path: String) {
    guard case .success(let fd) = valueOrErrno("open", path: path, { system_open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0) })
    else { return }
    _ = system_fsync(fd)
    _ = system_close(fd)
}

/// Writes records (given in ascending key order) as checked blocks to `sink`.
final class BlockWriter {
    private var block = RecordBatch()
    private let targetBytes: Int
    private let sink: (UnsafeRawBufferPointer) throws(TesseraError) -> Void
    private(set) var records = 0

    init(targetBytes: Int = RecordFormat.blockTargetBytes, sink: @escaping (UnsafeRawBufferPointer) throws(TesseraError) -> Void) {
        self.targetBytes = targetBytes
        self.sink = sink
    }

    func add(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws(TesseraError) {
        guard block.add(key: key, writeValue: { $0.append(contentsOf: value) }) else { return }
        records += 1
        if block.bytes.count >= targetBytes { try flush() }
    }

    func finish() throws(TesseraError) { try flush() }

    private func flush() throws(TesseraError) {
        guard !block.isEmpty else { return }
        let header = block.bytes.withUnsafeBytes { RecordFormat.chunkHeader(magic: RecordFormat.blockMagic, payload: $0, count: block.count) }
        try header.withUnsafeBytes { bytes in Result { () throws(TesseraError) in try sink(bytes) } }.get()
        try block.bytes.withUnsafeBytes { bytes in Result { () throws(TesseraError) in try sink(bytes) } }.get()
        block.removeAll()
    }
}

/// Records in the order given (a journal, an import), sorted a chunk at a time into runs in an
/// anonymous temporary file: the memory of compaction is one chunk, whatever the journal's size.
final class RunSorter {
    let directory: String
    let chunkBytes: Int
    private let held: HeldRecords
    private var temporary: FileDescriptor?
    private var temporaryEnd: Int64 = 0
    private var runs: [(start: Int64, end: Int64)] = []
    private var batch = RecordBatch()

    init(directory: String, chunkBytes: Int) {
        self.directory = directory
        self.chunkBytes = chunkBytes
        held = HeldRecords(capacity: min(chunkBytes, 1 << 20))
    }

    deinit { temporary?.close() }

    var heldBytes: Int { held.heldBytes }

    /// Adds a checked payload's records.
    func add(payload: UnsafeRawBufferPointer) throws(TesseraError) {
        var at = 0
        while let record = RecordFormat.record(in: payload, at: at) {
            try add(key: record.key, value: record.value)
            at = record.value.baseAddress! - payload.baseAddress! + record.value.count
        }
    }

    func add(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws(TesseraError) {
        batch.removeAll()
        guard batch.add(key: key, writeValue: { $0.append(contentsOf: value) }) else { return }
        batch.bytes.withUnsafeBytes { held.append(payload: $0) }
        if held.bytesUsed >= chunkBytes { try spill() }
    }

    private func spill() throws(TesseraError) {
        held.sort()
        if temporary == nil { temporary = try FileDescriptor.openAnonymousTemporary(in: directory) }
        let file = temporary!
        let start = temporaryEnd
        let writer = BlockWriter(targetBytes: 16 << 10) { [self] bytes throws(TesseraError) in
            try file.writeAll(bytes, at: temporaryEnd)
            temporaryEnd += Int64(bytes.count)
        }
        try held.forEach { key, value throws(TesseraError) in try writer.add(key: key, value: value) }
        try writer.finish()
        runs.append((start, temporaryEnd))
        held.removeAll()
    }

    /// The sorted runs, oldest first (the last chunk stays in memory as the newest). Valid while
    /// the sorter lives.
    func finish() -> [any RecordSource] {
        held.sort()
        var sources: [any RecordSource] = runs.map { BlockFileSource(file: temporary!, start: $0.start, end: $0.end, ownsFile: false) }
        if held.count > 0 { sources.append(held) }
        return sources
    }
}

/// A sorted record store: a main file and its journal (see the file's note).
final class RecordStore: @unchecked Sendable {
    let directory: String
    let mainPath: String
    let journalPath: String
    /// The caller's format of its values: a file of another schema is an empty store.
    let schema: UInt32
    /// A journal up to this size is held in memory by a reader; a larger one is compacted first.
    let journalHeldLimit: Int64
    /// Compaction sorts the journal in chunks of this many bytes.
    let sortChunkBytes: Int
    private let stateLock = Mutex()
    /// Where this process's last append ended, so the next need not scan the journal again.
    private var appended: (device: UInt64, inode: UInt64, end: Int64)?  // protected by `stateLock`
    private let damageLock = Mutex()
    private var damageFound = false  // protected by `damageLock`
    private var compactionFailed = false  // protected by `damageLock`
    /// Whether a read of the main file since this store was made met a damaged block: worth a
    /// compaction, which rewrites it without the damage (else every run pays to skip it again).
    var mainDamaged: Bool { damageLock.withLock { damageFound } }

    init(directory: String, stem: String, schema: UInt32, journalHeldLimit: Int64 = 4 << 20, sortChunkBytes: Int = 4 << 20) {
        self.directory = directory
        mainPath = directory + "/" + stem + ".idx"
        journalPath = directory + "/" + stem + ".journal"
        self.schema = schema
        self.journalHeldLimit = journalHeldLimit
        self.sortChunkBytes = sortChunkBytes
    }

    /// The length of the regular file at `path`; 0 for one that is mostly holes (damaged whole).
    static func fileBytes(_ path: String) -> Int64? {
        guard case .success(let info) = fileStatus(path), (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return isMostlyUnstored(info) ? 0 : Int64(info.st_size)
    }

    var mainBytes: Int64 { Self.fileBytes(mainPath) ?? 0 }
    var journalBytes: Int64 { Self.fileBytes(journalPath) ?? 0 }
    var mainExists: Bool { Self.fileBytes(mainPath) != nil }

    /// Runs `body` holding the journal's flock, on the file the path names once the lock is held.
    private func withJournalLock<T>(_ body: (FileDescriptor, stat) throws(TesseraError) -> T) throws(TesseraError) -> T {
        stateLock.lock()
        defer { stateLock.unlock() }
        while true {
            // Never through a symbolic link, nor into a FIFO or a device: the journal is written
            // only as a file of its own (a link planted at its name would have the appends
            // overwrite what it points to).
            let file: FileDescriptor
            do throws(TesseraError) {
                file = try FileDescriptor.open(journalPath, flags: O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, mode: 0o644)
            } catch .system(_, let code, _) where code == ELOOP {
                throw .unusableOutput(path: journalPath, reason: "it is a symbolic link; the index's journal is written only as a file of its own")
            }
            if let info = try? file.status(), (info.st_mode & S_IFMT) != S_IFREG {
                file.close()
                throw .unusableOutput(path: journalPath, reason: "it is not a regular file; the index's journal is written only as a file of its own")
            }
            // Nor through a hard link: the appends, and the cut of a torn tail, would change the
            // other name's file too (a cache copied with `cp -al`, or a planted link).
            if let info = try? file.status(), info.st_nlink > 1 {
                file.close()
                throw .unusableOutput(path: journalPath, reason: "it has \(info.st_nlink) names (hard links); the index's journal is written only as a file of its own")
            }
            var locked: stat?
            do throws(TesseraError) {
                _ = try valueOrErrno("flock", path: journalPath) { system_flock(file.rawValue, LOCK_EX) }.get("flock", path: journalPath)
                let info = try file.status()
                // A compaction may have removed (or replaced) the journal while this waited.
                if case .success(let named) = fileStatus(journalPath), named.st_dev == info.st_dev, named.st_ino == info.st_ino {
                    locked = info
                }
            } catch {
                file.close()
                throw error
            }
            guard var info = locked else {
                file.close()
                continue
            }
            defer { file.close() }
            if isMostlyUnstored(info) {
                // Damaged whole (see the file's note): cut off, so no read wades through its holes.
                try file.truncate(to: 0)
                info.st_size = 0
            }
            return try body(file, info)
        }
    }

    /// Calls `body` with each checked frame's payload; returns the end of the last good frame
    /// (0 when the header is damaged or of another schema: the whole journal is ignored).
    private func scanJournal(_ file: FileDescriptor, size: Int64,
                             _ body: (UnsafeRawBufferPointer) throws(TesseraError) -> Void) throws(TesseraError) -> Int64 {
        guard size >= Int64(RecordFormat.fileHeaderBytes) else { return 0 }
        var header = [UInt8](repeating: 0, count: RecordFormat.fileHeaderBytes)
        try header.withUnsafeMutableBytes { raw in Result { () throws(TesseraError) in try file.readAll(into: raw, at: 0) } }.get()
        guard header.withUnsafeBytes({ RecordFormat.checkHeader($0, magic: RecordFormat.journalMagic, schema: schema) }) else { return 0 }
        let reader = ChunkReader(file: file, magic: RecordFormat.frameMagic, sorted: false,
                                 start: Int64(RecordFormat.fileHeaderBytes), end: size)
        while let chunk = reader.read() { try body(chunk.payload) }
        if let failure = reader.failure { throw failure }
        return reader.validEnd
    }

    /// Appends `batch` as one frame, durably (see the file's note). On a failure (a full disk)
    /// the journal is cut back to where it was: every earlier batch stays.
    func append(_ batch: RecordBatch) throws(TesseraError) {
        guard !batch.isEmpty else { return }
        // A journal past what a reader holds is compacted before it is read; once that has failed
        // (the main file's name taken, the disk too full to write it) the journal is never read,
        // so adding to it would only grow it, run after run, without bound.
        if damageLock.withLock({ compactionFailed }) && journalBytes > journalHeldLimit {
            throw TesseraError.unusableOutput(path: journalPath, reason: "it is past \(formatBytes(journalHeldLimit)) and could not be folded into \(mainPath)")
        }
        try withJournalLock { file, info throws(TesseraError) in
            let size = Int64(info.st_size)
            let end: Int64
            if let known = appended, known.device == UInt64(info.st_dev), known.inode == UInt64(info.st_ino), known.end == size {
                end = size
            } else {
                end = try scanJournal(file, size: size) { _ in }
            }
            appended = nil
            // A torn frame (a crash mid-append) or a damaged tail is cut off first.
            if end < size { try file.truncate(to: end) }
            var frame = end == 0 ? RecordFormat.fileHeader(magic: RecordFormat.journalMagic, schema: schema) : []
            batch.bytes.withUnsafeBytes { bytes in
                for (range, count) in batch.frames(limit: RecordFormat.maxChunkBytes) {
                    let payload = UnsafeRawBufferPointer(rebasing: bytes[range])
                    frame += RecordFormat.chunkHeader(magic: RecordFormat.frameMagic, payload: payload, count: count)
                    frame += payload
                }
            }
            do throws(TesseraError) {
                try frame.withUnsafeBytes { bytes in Result { () throws(TesseraError) in try file.writeAll(bytes, at: end) } }.get()
                try syncData(file)
            } catch {
                try? file.truncate(to: end)
                throw error
            }
            if end == 0 { syncDirectory(directory) }
            appended = (UInt64(info.st_dev), UInt64(info.st_ino), end + Int64(frame.count))
        }
    }

    /// Merges the journal into a new main file and removes the journal (see the file's note).
    /// `importing`: records from elsewhere (an old format) to start from instead of the main
    /// file, older than the journal's; only done while there is no main file.
    func compact(importing: ((RunSorter) throws(TesseraError) -> Void)? = nil) throws(TesseraError) {
        do throws(TesseraError) {
            try compactOnce(importing: importing)
        } catch {
            damageLock.withLock { compactionFailed = true }
            throw error
        }
    }

    private func compactOnce(importing: ((RunSorter) throws(TesseraError) -> Void)?) throws(TesseraError) {
        if importing == nil && Self.fileBytes(journalPath) == nil { return }
        try withJournalLock { journal, info throws(TesseraError) in
            if importing != nil && mainExists { return }  // another process imported first
            let sorter = RunSorter(directory: directory, chunkBytes: sortChunkBytes)
            if let importing { try importing(sorter) }
            _ = try scanJournal(journal, size: Int64(info.st_size)) { payload throws(TesseraError) in try sorter.add(payload: payload) }
            var sources: [any RecordSource] = []
            if importing == nil, let main = BlockFileSource.open(main: mainPath, schema: schema) { sources.append(main) }
            sources += sorter.finish()
            let output = try AtomicOutputFile(destination: mainPath)
            try RecordFormat.fileHeader(magic: RecordFormat.mainMagic, schema: schema).withUnsafeBytes { bytes in
                Result { () throws(TesseraError) in try output.append(bytes) }
            }.get()
            let writer = BlockWriter { bytes throws(TesseraError) in try output.append(bytes) }
            try mergeRecords(sources) { key, value throws(TesseraError) in try writer.add(key: key, value: value) }
            try writer.finish()
            // A read error part way would leave records out: the old files stay as they are.
            if let failure = sources.lazy.compactMap({ $0.failure }).first { throw failure }
            try output.commit()
            syncDirectory(directory)
            removeFile(journalPath)
            appended = nil
            withExtendedLifetime(sorter) {}
        }
    }

    /// The store as it is now, as sorted sources, oldest first: the main file, and the journal
    /// held sorted (compacted first when larger than `journalHeldLimit`; if that fails, left
    /// out). Nothing here throws: what cannot be read is missing.
    func openSources() -> [any RecordSource] {
        var held: HeldRecords?
        // The journal before the main file: a compaction in between then shows its records
        // twice (harmless), never not at all.
        if let size = Self.fileBytes(journalPath) {
            if size > journalHeldLimit { try? compact() }
            held = loadJournal()
        }
        var sources: [any RecordSource] = []
        if let main = BlockFileSource.open(main: mainPath, schema: schema, onDamage: { [weak self] in
            self?.damageLock.withLock { self?.damageFound = true }
        }) {
            sources.append(main)
        } else if mainExists {
            // A main file that does not open (garbage, a damaged header, another schema) is
            // damaged whole: the next compaction rewrites it, else it would stay for good.
            damageLock.withLock { damageFound = true }
        }
        if let held, held.count > 0 { sources.append(held) }
        return sources
    }

    private func loadJournal() -> HeldRecords? {
        guard let (file, info) = try? FileDescriptor.openRegularFileForReading(journalPath) else { return nil }
        defer { file.close() }
        let size = Int64(info.st_size)
        guard size <= journalHeldLimit, !isMostlyUnstored(info) else { return nil }
        let held = HeldRecords(capacity: Int(size))
        _ = try? scanJournal(file, size: size) { payload in held.append(payload: payload) }
        held.sort()
        return held
    }
}
