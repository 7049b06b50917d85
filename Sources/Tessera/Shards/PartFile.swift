// PartFile.swift — one shard's output: a single file in the shard folder, written atomically.
//
//     "TSPART02"                                   8 bytes
//     records' bytes, in the order they were made  (JPEG header and segments, tiles, reduced
//                                                   rows, the viewer's cells.js)
//     header text                                  "key=value" lines (the render's description)
//     index                                        40 bytes a record: kind, a, b, c (UInt32),
//                                                   offset, length (UInt64), the CRC-32C of its
//                                                   bytes, 0 (UInt32), little-endian
//     footer                                       header offset and length, index offset and
//                                                   record count (UInt64 each), the CRC-32C of
//                                                   header text and index, 0 (UInt32), "TSPARTOK"
//
// The footer comes last, so a part cut short (a copy that stopped, a disk that filled) has no
// valid footer and is refused as truncated.
//
// A part is untrusted input: a shard folder is often on a shared filesystem that other users
// and jobs can write. The reader takes no number from it on trust: every offset, length and
// count is checked against the file's size with arithmetic that cannot overflow before it sizes
// a read, an allocation or a loop; the header text is at most 1 MiB (a real one is under 2 KB)
// and the index is read in 1 MiB pieces, each record checked as it comes, so a sparse file
// whose footer claims gigabytes is refused after a few reads; records must lie end to end, as
// the writer appends them, so that verifying reads each byte once. The checksums (CRC32C.swift) find
// a changed byte: the join verifies every record's before it writes anything (`verify`). They
// are not a signature: whoever can write the folder can write a consistent part, so what a
// part may make the join do is bounded elsewhere (the join's destinations, ShardJoin.swift). The file is made as an AtomicOutputFile: a shard
// killed mid-way leaves nothing under the part's name, and a shard run again replaces its part
// in one rename. One file a shard (not a folder of tiles) keeps a shared folder (NFS, a
// Kubernetes volume) to N files, however many tiles the pyramid has.
//
// Threading: `append` may be called from several threads at once (the pyramid's encoding jobs
// and the writer); records are appended under a lock.
import Glibc

/// What a record of a part holds.
enum PartRecordKind: UInt32 {
    /// The JPEG's header (stripe 0's): a = 0.
    case jpegHeader = 1
    /// A stripe's entropy-coded segment: a = stripe index.
    case jpegSegment = 2
    /// A pyramid tile: a = level, b = column, c = row.
    case tile = 3
    /// Rows of the reduced picture the join builds the lower levels from: a = first row, b = count.
    case reducedRows = 4
    /// A piece of the viewer's cells.js, in order: a = piece number.
    case cellsScript = 5
    /// A tile of the TIFF's pyramid (padded to the tile size): a = level, b = column, c = row.
    case tiffTile = 6
    /// Rows of the TIFF's reduced picture (as `reducedRows`, for the TIFF's pyramid).
    case tiffReducedRows = 7
    /// The viewer's preview of a photo (a JPEG): a = the photo's number in cells.js.
    case preview = 8
    /// A piece of the manifest (part 1's), in order: a = piece number. All of a CSV; a JSON's
    /// but its last lines, which the join writes from every part's notes.
    case manifestPiece = 9
    /// A photo this part drew as a placeholder (a = 0) or only in part (a = 1), for a JSON
    /// manifest: its path, a NUL, the reason.
    case manifestNote = 10
}

struct PartRecord: Equatable, Sendable {
    let kind: PartRecordKind
    let a: UInt32, b: UInt32, c: UInt32
    let offset: UInt64
    let length: UInt64
    /// CRC-32C of the record's bytes.
    let checksum: UInt32
}

enum PartFormat {
    /// "TSPART" and the format's two digits: 01 had no checksums.
    static let startMagic = Array("TSPART02".utf8)
    static let version = "2"
    static let endMagic = Array("TSPARTOK".utf8)
    static let recordBytes = 40
    static let footerBytes = 48
    /// The most header text a part may claim; a real render's is under 2 KB (a long title at most).
    static let maxHeaderBytes: UInt64 = 1 << 20
    /// The most a JPEG header record may hold (tables and markers: under 1 KB).
    static let maxJPEGHeaderBytes: UInt64 = 1 << 20
    /// The most a piece of the viewer's cells.js may hold (the writer cuts them at 64 KiB, plus
    /// at most one photo's name).
    static let maxCellsPieceBytes = 1 << 20
    /// The most a piece of the manifest may hold (the writer cuts them at 256 KiB, plus at most
    /// one cell's line).
    static let maxManifestPieceBytes = 1 << 20
    /// The most a manifest note may hold (a path of at most 4 KiB and a reason).
    static let maxManifestNoteBytes = 64 << 10
}

final class PartWriter: @unchecked Sendable {
    let path: String
    private let file: AtomicOutputFile
    private let lock = Mutex()
    private var records: [PartRecord] = []  // protected by `lock`

    init(path: String) throws(TesseraError) {
        self.path = path
        file = try AtomicOutputFile(destination: path)
        try PartFormat.startMagic.withUnsafeBytes { raw in Result { () throws(TesseraError) in try file.append(raw) } }.get()
    }

    var bytesWritten: Int64 { lock.withLock { file.bytesWritten } }

    func append(_ kind: PartRecordKind, a: Int, b: Int = 0, c: Int = 0, bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        let checksum = CRC32C.checksum(bytes)  // (outside the lock: the encoding jobs sum in parallel)
        lock.lock()
        defer { lock.unlock() }
        let offset = UInt64(file.bytesWritten)
        try file.append(bytes)
        records.append(PartRecord(kind: kind, a: UInt32(a), b: UInt32(b), c: UInt32(c), offset: offset, length: UInt64(bytes.count),
                                  checksum: checksum))
    }

    /// Writes the header, the index and the footer; the part is complete (still invisible).
    func finish(header: [(key: String, value: String)]) throws(TesseraError) {
        lock.lock()
        defer { lock.unlock() }
        var tail: [UInt8] = []
        let headerOffset = UInt64(file.bytesWritten)
        for (key, value) in header { tail += Array("\(key)=\(PartHeader.escape(value))\n".utf8) }
        let headerLength = UInt64(tail.count)
        let indexOffset = headerOffset + headerLength
        tail.reserveCapacity(tail.count + records.count * PartFormat.recordBytes + PartFormat.footerBytes)
        func put32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { tail += $0 } }
        func put64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { tail += $0 } }
        for record in records {
            put32(record.kind.rawValue); put32(record.a); put32(record.b); put32(record.c)
            put64(record.offset); put64(record.length); put32(record.checksum); put32(0)
        }
        let checksum = tail.withUnsafeBytes { CRC32C.checksum($0) }
        put64(headerOffset); put64(headerLength); put64(indexOffset); put64(UInt64(records.count)); put32(checksum); put32(0)
        tail += PartFormat.endMagic
        try tail.withUnsafeBytes { raw in Result { () throws(TesseraError) in try file.append(raw) } }.get()
    }

    func commit() throws(TesseraError) { try file.commit() }
    func discard() { file.discard() }
}

/// A part's header: the render it belongs to, as "key=value" lines.
struct PartHeader: Equatable, Sendable {
    var values: [String: String]

    subscript(key: String) -> String? { values[key] }

    /// Values are one line: "%" and newlines are escaped.
    static func escape(_ text: String) -> String {
        text.replacingAll("%", with: "%25").replacingAll("\n", with: "%0A").replacingAll("\r", with: "%0D")
    }

    static func unescape(_ text: Substring) -> String {
        String(text).replacingAll("%0A", with: "\n").replacingAll("%0D", with: "\r").replacingAll("%25", with: "%")
    }

    init(text: String) {
        values = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = PartHeader.unescape(line[line.index(after: equals)...])
        }
    }
}

/// A part, opened and checked for reading.
final class PartReader {
    let path: String
    /// The file's name, for messages.
    let name: String
    let header: PartHeader
    let records: [PartRecord]
    let size: Int64
    /// The file's device and inode: an output must not be one of the parts.
    let identity: OutputDestination.Identity
    private let file: FileDescriptor
    let directory: String

    /// What one record takes in memory: the join holds every open part's index.
    static let recordBytesInMemory = MemoryLayout<PartRecord>.stride

    /// What this part's index and header take in memory (the join holds every open part's).
    var indexBytes: Int { records.count * PartReader.recordBytesInMemory + headerBytes }
    /// What the header takes in memory, counted as twice its text (the text and the values
    /// parsed from it) and `bytesPerHeaderLine` a line: a real one is under 2 KB and 30 lines,
    /// a forged one up to `maxHeaderBytes`, and a folder of hundreds of those took up to 9 MB
    /// each past the budget before they counted.
    let headerBytes: Int

    /// Opens `path` and checks its shape: the magic at both ends, a header and an index inside
    /// the file and within their bounds, each record inside the data, and the checksum of header
    /// and index. Throws `.unusableParts` (naming the file) for anything else, a file that
    /// cannot be opened or is not a regular file included. An index of more records than
    /// fit in `IndexBudget`'s share of the join's budget, beside the indexes already held, is
    /// refused once that many have passed their checks, naming the budget it would need.
    init(path: String, directory: String, indexBudget: IndexBudget? = nil) throws(TesseraError) {
        self.path = path
        self.directory = directory
        // Named in messages as shown, never obeyed (a part's name is someone else's: a newline
        // in it forged a line of the join's error).
        let name = displayedName(path.split(separator: "/").last.map(String.init) ?? path)
        self.name = name
        func bad(_ why: String) -> TesseraError { .unusableParts(directory: directory, reason: "\(name) \(why)") }
        let file: FileDescriptor, info: stat
        do throws(TesseraError) {
            (file, info) = try FileDescriptor.openRegularFileForReading(path)
        } catch {
            throw PartReader.notOpened(path, name: name, directory: directory, error)
        }
        let size = Int64(info.st_size)
        var parsedHeader = PartHeader(text: "")
        var parsedRecords: [PartRecord] = []
        var parsedHeaderBytes = 0
        do throws(TesseraError) {
            let truncated = bad("is truncated or not a part (\(size) bytes, no complete index at its end): run its shard again")
            guard size >= Int64(PartFormat.startMagic.count + PartFormat.footerBytes) else {
                if size >= 8 { try PartReader.checkMagic(file, bad) }
                throw truncated
            }
            try PartReader.checkMagic(file, bad)
            var footer = [UInt8](repeating: 0, count: PartFormat.footerBytes)
            try footer.withUnsafeMutableBytes { raw in
                Result { () throws(TesseraError) in try file.readAll(into: raw, at: size - Int64(PartFormat.footerBytes)) }
            }.get()
            guard Array(footer[40..<48]) == PartFormat.endMagic else { throw truncated }
            let headerOffset = u64(footer, 0), headerLength = u64(footer, 8), indexOffset = u64(footer, 16), count = u64(footer, 24)
            let expectedChecksum = u32(footer, 32)
            // Each bound is checked before the next uses it, so that no sum or product overflows.
            let footerStart = UInt64(size) - UInt64(PartFormat.footerBytes)
            guard headerOffset >= 8, headerOffset <= footerStart, headerLength <= footerStart - headerOffset,
                  indexOffset == headerOffset + headerLength else { throw truncated }
            guard headerLength <= PartFormat.maxHeaderBytes else {
                throw bad("claims a header of \(headerLength) bytes (a part's is at most \(PartFormat.maxHeaderBytes)): it is damaged or not a part")
            }
            parsedHeaderBytes = 2 * Int(headerLength)
            try indexBudget?.check(headerBytes: parsedHeaderBytes, of: name, in: directory)
            let indexBytes = footerStart - indexOffset
            guard count <= indexBytes / UInt64(PartFormat.recordBytes), count * UInt64(PartFormat.recordBytes) == indexBytes else {
                throw truncated
            }
            var checksum = CRC32C()
            let text = try PartReader.readHeader(file, at: headerOffset, length: headerLength, checksum: &checksum)
            parsedHeaderBytes += PartReader.bytesPerHeaderLine * text.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
            try indexBudget?.check(headerBytes: parsedHeaderBytes, of: name, in: directory)
            parsedHeader = PartHeader(text: String(decoding: text, as: UTF8.self))
            // The index, 1 MiB at a time, each record checked as it is read: a hole of zeros
            // fails at its first record. What stays is the records that passed.
            let recordsPerRead = (1 << 20) / PartFormat.recordBytes
            var chunk = [UInt8](repeating: 0, count: Int(min(count, UInt64(recordsPerRead))) * PartFormat.recordBytes)
            var records: [PartRecord] = []
            // The records the budget lets the join hold (sized once: growing by doubling would
            // take up to twice the index). Records are counted as they pass their checks, so
            // that a damaged index is named as damaged, not as too large.
            let most = indexBudget.map { max(0, $0.share - parsedHeaderBytes) / PartReader.recordBytesInMemory } ?? Int.max
            if indexBudget != nil { records.reserveCapacity(Int(min(count, UInt64(most)))) }
            var read: UInt64 = 0
            // The writer appends each record's bytes after the last: records are contiguous from
            // the magic to the header. Required, so that no two records share bytes (N records
            // each claiming the whole file would make verifying read it N times).
            var dataEnd: UInt64 = 8
            while read < count {
                let n = Int(min(count - read, UInt64(recordsPerRead)))
                try chunk.withUnsafeMutableBytes { raw in
                    Result { () throws(TesseraError) in
                        let piece = UnsafeMutableRawBufferPointer(rebasing: raw[0..<(n * PartFormat.recordBytes)])
                        try file.readAll(into: piece, at: Int64(indexOffset + read * UInt64(PartFormat.recordBytes)))
                        checksum.update(UnsafeRawBufferPointer(piece))
                    }
                }.get()
                for i in 0..<n {
                    let at = i * PartFormat.recordBytes
                    let number = read + UInt64(i) + 1
                    guard let kind = PartRecordKind(rawValue: u32(chunk, at)) else {
                        throw bad("has a record of an unknown kind (record \(number) of \(count)): it is damaged or not a part")
                    }
                    let record = PartRecord(kind: kind, a: u32(chunk, at + 4), b: u32(chunk, at + 8), c: u32(chunk, at + 12),
                                            offset: u64(chunk, at + 16), length: u64(chunk, at + 24), checksum: u32(chunk, at + 32))
                    guard record.offset == dataEnd, record.length <= headerOffset - record.offset else {
                        throw bad("has a record outside its data (record \(number) of \(count)): it is damaged or not a part")
                    }
                    dataEnd += record.length
                    // Fields a kind does not use are what the writer left there: anything else is an edit.
                    guard kind == .tile || kind == .tiffTile
                            || (record.b == (kind == .reducedRows || kind == .tiffReducedRows ? 1 : 0) && record.c == 0) else {
                        throw bad("has a record with fields its kind does not have (record \(number) of \(count)): it is damaged or not a part")
                    }
                    guard kind != .jpegHeader || record.length <= PartFormat.maxJPEGHeaderBytes else {
                        throw bad("has a JPEG header of \(record.length) bytes: it is damaged or not a part")
                    }
                    if records.count >= most, let indexBudget {
                        throw .partIndexTooLarge(directory: directory, reason: name + " " + indexBudget.refusal(records: count, headerBytes: parsedHeaderBytes),
                                                 neededBytes: indexBudget.neededBytes(records: count, headerBytes: parsedHeaderBytes))
                    }
                    records.append(record)
                }
                read += UInt64(n)
            }
            guard dataEnd == headerOffset else {
                throw bad("has \(headerOffset - dataEnd) bytes of data no record holds: it is damaged or not a part")
            }
            guard checksum.value == expectedChecksum else {
                throw bad("has a header and index that do not match their checksum: the part was changed or damaged; run its shard again")
            }
            parsedRecords = records
        } catch {
            file.close()
            throw error
        }
        self.file = file
        self.size = size
        identity = OutputDestination.Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        header = parsedHeader
        records = parsedRecords
        headerBytes = parsedHeaderBytes
    }

    deinit { file.close() }

    /// What a header line costs in memory beyond its text: an entry of the header's dictionary,
    /// two strings and the table's slack (about 58 bytes measured, for lines of a few bytes:
    /// 160,000 short lines in a 1 MiB header took 9 MB).
    static let bytesPerHeaderLine = 128

    /// The header text at `offset`, its bytes added to `checksum`.
    private static func readHeader(_ file: FileDescriptor, at offset: UInt64, length: UInt64,
                                   checksum: inout CRC32C) throws(TesseraError) -> [UInt8] {
        var text = [UInt8](repeating: 0, count: Int(length))
        try text.withUnsafeMutableBytes { raw in
            Result { () throws(TesseraError) in
                if raw.count > 0 { try file.readAll(into: raw, at: Int64(offset)) }
                checksum.update(UnsafeRawBufferPointer(raw))
            }
        }.get()
        return text
    }

    /// Whether `path` is a regular file that does not (yet) end as a part does: a part still
    /// being copied in (cp or scp write it front to back; a shard's own appear whole, by
    /// rename). A join that waits for parts waits for such a one to end.
    static func lacksItsEnd(_ path: String) -> Bool {
        guard let (file, info) = try? FileDescriptor.openRegularFileForReading(path) else { return false }
        defer { file.close() }
        let size = Int64(info.st_size), magic = PartFormat.endMagic
        guard size >= Int64(magic.count) else { return true }
        var end = [UInt8](repeating: 0, count: magic.count)
        let read = end.withUnsafeMutableBytes { raw in Result { () throws(TesseraError) in try file.readAll(into: raw, at: size - Int64(magic.count)) } }
        guard case .success = read else { return false }
        return end != magic
    }

    /// The start magic: a part of another format version is named as such.
    private static func checkMagic(_ file: FileDescriptor, _ bad: (String) -> TesseraError) throws(TesseraError) {
        var start = [UInt8](repeating: 0, count: 8)
        try start.withUnsafeMutableBytes { raw in Result { () throws(TesseraError) in try file.readAll(into: raw, at: 0) } }.get()
        guard start != PartFormat.startMagic else { return }
        if start.starts(with: Array("TSPART".utf8)) {
            let version = String(decoding: start[6...], as: UTF8.self)
            throw bad("was made by another version of tessera (part format \(version); this one reads format "
                      + "\(String(decoding: PartFormat.startMagic[6...], as: UTF8.self))): run its shard again with this version")
        }
        throw bad("is not a Tessera part file")
    }

    /// The error for a part that could not be opened: the limit on open files, or what stands
    /// at `path` (whyNotOpened).
    private static func notOpened(_ path: String, name: String, directory: String, _ error: TesseraError) -> TesseraError {
        // Past the limit on open files (the tool raises its soft limit to the hard one first):
        // 40 parts under `ulimit -n 30` said only "Too many open files".
        if case .system(_, EMFILE, _) = error {
            return .tooManyPartsOpen(directory: directory, part: name, openFiles: openFileLimits()?.soft)
        }
        return .unusableParts(directory: directory, reason: "\(name) \(whyNotOpened(path, error))")
    }

    /// Why `path` could not be opened as a part, from what stands there (a part's own words:
    /// the open's error is worded for photos).
    private static func whyNotOpened(_ path: String, _ error: TesseraError) -> String {
        if case .success(let link) = linkStatus(path), (link.st_mode & S_IFMT) == S_IFLNK,
           case .failure = fileStatus(path) {
            return "is a symbolic link to nothing: remove it, or run its shard again"
        }
        if case .success(let info) = fileStatus(path) {
            switch info.st_mode & S_IFMT {
            case S_IFDIR: return "is a folder, not a part file: remove it, or run its shard again"
            case S_IFIFO: return "is a FIFO, not a part file: remove it, or run its shard again"
            case S_IFREG: break
            default: return "is not a regular file: remove it, or run its shard again"
            }
        }
        if case .system(_, let code, _) = error { return "cannot be opened (\(errnoDescription(code)))" }
        return "cannot be opened"
    }

    /// What `record` is, for messages.
    static func describe(_ record: PartRecord) -> String {
        switch record.kind {
        case .jpegHeader: return "JPEG header"
        case .jpegSegment: return "segment of stripe \(record.a)"
        case .tile: return "tile \(record.a)/\(record.b)_\(record.c)"
        case .reducedRows: return "reduced row \(record.a)"
        case .cellsScript: return "piece \(record.a) of the viewer's cells.js"
        case .tiffTile: return "TIFF tile \(record.a)/\(record.b)_\(record.c)"
        case .tiffReducedRows: return "TIFF reduced row \(record.a)"
        case .preview: return "preview of photo \(record.a)"
        case .manifestPiece: return "piece \(record.a) of the manifest"
        case .manifestNote: return "a manifest note"
        }
    }

    /// Reads every record in pieces of `buffer`'s size and compares its checksum; throws
    /// `.unusableParts` naming the part and the record at the first that differs.
    func verify(using buffer: inout [UInt8]) throws(TesseraError) {
        precondition(!buffer.isEmpty)
        for (index, record) in records.enumerated() {
            var checksum = CRC32C()
            var done: UInt64 = 0
            while done < record.length {
                let count = Int(min(UInt64(buffer.count), record.length - done))
                try buffer.withUnsafeMutableBytes { raw in
                    Result { () throws(TesseraError) in
                        let piece = UnsafeMutableRawBufferPointer(rebasing: raw[0..<count])
                        try file.readAll(into: piece, at: Int64(record.offset + done))
                        checksum.update(UnsafeRawBufferPointer(piece))
                    }
                }.get()
                done += UInt64(count)
            }
            guard checksum.value == record.checksum else {
                throw .unusableParts(directory: directory, reason: "\(name): the \(PartReader.describe(record)) (record \(index + 1) of "
                                     + "\(records.count)) does not match its checksum: the part was changed or damaged; run its shard again")
            }
        }
    }

    // Every read below checks the record's checksum again, on the bytes it hands over: `verify`
    // read them once, but a part changed in place during the join (or a waiting join's part still
    // being written over) would have bytes copied that were never summed (a helper's race: a
    // wrong JPEG, exit 0, in 3 of 11 joins). A record that no longer matches stops the join,
    // whose outputs are then never committed.

    /// Reads `record`'s bytes into `buffer` (resized to fit), checked.
    func read(_ record: PartRecord, into buffer: inout [UInt8]) throws(TesseraError) {
        let length = Int(record.length)
        if buffer.count != length { buffer = [UInt8](repeating: 0, count: length) }
        try buffer.withUnsafeMutableBytes { raw in
            Result { () throws(TesseraError) in try read(whole: record, into: raw) }
        }.get()
    }

    /// Reads all of `record` (`raw` holds at least its length) into the start of `raw`, checked.
    func read(whole record: PartRecord, into raw: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        let length = Int(record.length)
        precondition(raw.count >= length)
        let bytes = UnsafeMutableRawBufferPointer(rebasing: raw[0..<length])
        if length > 0 { try file.readAll(into: bytes, at: Int64(record.offset)) }
        try expect(record, CRC32C.checksum(UnsafeRawBufferPointer(bytes)))
    }

    /// Hands `record`'s bytes to `write` a `buffer`-full at a time: the memory is the buffer's,
    /// whatever length the record claims. The checksum is compared after the last piece: what was
    /// written by then belongs to an output that a throw leaves uncommitted.
    func copy(_ record: PartRecord, using buffer: inout [UInt8],
              to write: (UnsafeRawBufferPointer) throws(TesseraError) -> Void) throws(TesseraError) {
        var done = 0
        var checksum = CRC32C()
        while done < Int(record.length) {
            let count = min(buffer.count, Int(record.length) - done)
            try buffer.withUnsafeMutableBytes { raw in
                Result { () throws(TesseraError) in
                    let piece = UnsafeMutableRawBufferPointer(rebasing: raw[0..<count])
                    try file.readAll(into: piece, at: Int64(record.offset) + Int64(done))
                    checksum.update(UnsafeRawBufferPointer(piece))
                    try write(UnsafeRawBufferPointer(piece))
                }
            }.get()
            done += count
        }
        try expect(record, checksum.value)
    }

    private func expect(_ record: PartRecord, _ checksum: UInt32) throws(TesseraError) {
        guard checksum == record.checksum else {
            throw .unusableParts(directory: directory, reason: "\(name): the \(PartReader.describe(record)) changed while the join read it "
                                 + "(its checksum matched before, not now): the part was changed during the join; nothing was written")
        }
    }
}

/// What the join lets the parts' indexes take: a `fraction` of its budget (1/2 when every part
/// is open at once, 1/4 each for the two a waiting join holds), less `heldBytes`, the indexes
/// of the parts opened before.
struct IndexBudget {
    let budgetBytes: Int
    let fraction: Int
    let heldBytes: Int

    var share: Int { budgetBytes / fraction - heldBytes }

    private func bytes(records: UInt64) -> Int {
        Int(min(records, UInt64(Int.max / 64 / PartReader.recordBytesInMemory))) * PartReader.recordBytesInMemory
    }

    /// Why an index of `records` records (beside a header taking `headerBytes`) is refused.
    func refusal(records: UInt64, headerBytes: Int = 0) -> String {
        let bytes = bytes(records: records) + headerBytes
        return "has an index of \(records) records" + (headerBytes > 1 << 16 ? " and a header" : "")
            + ", which take\(headerBytes > 1 << 16 ? "" : "s") \(formatBytes(Int64(bytes))) in memory"
            + (heldBytes > 0 ? " (with the parts before it, \(formatBytes(Int64(heldBytes + bytes))))" : "")
            + ", more than 1/\(fraction) of the join's memory budget of \(formatBytes(Int64(budgetBytes)))"
    }

    /// Throws unless a header taking `headerBytes` in memory fits the share, before it is read.
    func check(headerBytes: Int, of name: String, in directory: String) throws(TesseraError) {
        guard headerBytes > share else { return }
        throw .partIndexTooLarge(directory: directory, reason: name + " " + refusal(headerBytes: headerBytes),
                                 neededBytes: neededBytes(records: 0, headerBytes: headerBytes))
    }

    /// Why a header taking `headerBytes` in memory is refused, before its index is read.
    func refusal(headerBytes: Int) -> String {
        "has a header that takes \(formatBytes(Int64(headerBytes))) in memory"
            + (heldBytes > 0 ? " (with the parts before it, \(formatBytes(Int64(heldBytes + headerBytes))))" : "")
            + ", more than 1/\(fraction) of the join's memory budget of \(formatBytes(Int64(budgetBytes)))"
            + " (a part's header is a few KB)"
    }

    /// The least budget that holds the index (and its header) and those before it: its share
    /// (the fraction), and beside them what every join holds (its buffers and the process); the
    /// levels the join builds below the bands come on top, and are named once the parts are read.
    func neededBytes(records: UInt64, headerBytes: Int = 0) -> Int {
        let indexes = heldBytes + bytes(records: records) + headerBytes
        return max(fraction * indexes, indexes + ShardJoin.fixedBytes)
    }
}

/// Little-endian fields of a part's footer and index.
private func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
private func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 { (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[at + $1]) << (8 * $1) } }

extension String {
    /// Every occurrence of `target` replaced (without Foundation).
    func replacingAll(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty, contains(target) else { return self }
        var out = ""
        var rest = self[...]
        while let range = rest.firstRange(of: target) {
            out += rest[..<range.lowerBound]
            out += replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }
}
