// PartFile.swift — one shard's output: a single file in the shard folder, written atomically.
//
//     "TSPART01"                                   8 bytes
//     records' bytes, in the order they were made  (JPEG header and segments, tiles, reduced
//                                                   rows, the viewer's cells.js)
//     header text                                  "key=value" lines (the render's description)
//     index                                        32 bytes a record: kind, a, b, c (UInt32),
//                                                   offset, length (UInt64), little-endian
//     footer                                       header offset and length, index offset and
//                                                   record count (UInt64 each), "TSPARTOK"
//
// The footer comes last, so a part cut short (a copy that stopped, a disk that filled) has no
// valid footer and is refused as truncated. The file is made as an AtomicOutputFile: a shard
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
}

struct PartRecord: Equatable, Sendable {
    let kind: PartRecordKind
    let a: UInt32, b: UInt32, c: UInt32
    let offset: UInt64
    let length: UInt64
}

enum PartFormat {
    static let startMagic = Array("TSPART01".utf8)
    static let endMagic = Array("TSPARTOK".utf8)
    static let recordBytes = 32
    static let footerBytes = 40
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
        lock.lock()
        defer { lock.unlock() }
        let offset = UInt64(file.bytesWritten)
        try file.append(bytes)
        records.append(PartRecord(kind: kind, a: UInt32(a), b: UInt32(b), c: UInt32(c), offset: offset, length: UInt64(bytes.count)))
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
            put64(record.offset); put64(record.length)
        }
        put64(headerOffset); put64(headerLength); put64(indexOffset); put64(UInt64(records.count))
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
    let header: PartHeader
    let records: [PartRecord]
    let size: Int64
    private let file: FileDescriptor

    /// Opens `path` and checks its shape: the magic at both ends, and a header and index inside
    /// the file. Throws `.unusableParts` (naming the file) for anything else.
    init(path: String, directory: String) throws(TesseraError) {
        self.path = path
        let name = path.split(separator: "/").last.map(String.init) ?? path
        func bad(_ why: String) -> TesseraError { .unusableParts(directory: directory, reason: "\(name) \(why)") }
        let (file, info) = try FileDescriptor.openRegularFileForReading(path)
        let size = Int64(info.st_size)
        var parsedHeader = PartHeader(text: "")
        var parsedRecords: [PartRecord] = []
        do throws(TesseraError) {
            let truncated = bad("is truncated or not a part (\(size) bytes, no complete index at its end): run its shard again")
            guard size >= Int64(PartFormat.startMagic.count + PartFormat.footerBytes) else { throw truncated }
            var start = [UInt8](repeating: 0, count: 8)
            try start.withUnsafeMutableBytes { raw in Result { () throws(TesseraError) in try file.readAll(into: raw, at: 0) } }.get()
            guard start == PartFormat.startMagic else { throw bad("is not a Tessera part file") }
            var footer = [UInt8](repeating: 0, count: PartFormat.footerBytes)
            try footer.withUnsafeMutableBytes { raw in
                Result { () throws(TesseraError) in try file.readAll(into: raw, at: size - Int64(PartFormat.footerBytes)) }
            }.get()
            guard Array(footer[32..<40]) == PartFormat.endMagic else { throw truncated }
            func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
            func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 { (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[at + $1]) << (8 * $1) } }
            let headerOffset = u64(footer, 0), headerLength = u64(footer, 8), indexOffset = u64(footer, 16), count = u64(footer, 24)
            let footerStart = UInt64(size) - UInt64(PartFormat.footerBytes)
            guard headerOffset >= 8, headerOffset + headerLength == indexOffset, count < UInt64(Int32.max),
                  indexOffset + count * UInt64(PartFormat.recordBytes) == footerStart else { throw truncated }
            var tail = [UInt8](repeating: 0, count: Int(footerStart - headerOffset))
            try tail.withUnsafeMutableBytes { raw in
                Result { () throws(TesseraError) in try file.readAll(into: raw, at: Int64(headerOffset)) }
            }.get()
            parsedHeader = PartHeader(text: String(decoding: tail[0..<Int(headerLength)], as: UTF8.self))
            var records: [PartRecord] = []
            records.reserveCapacity(Int(count))
            for i in 0..<Int(count) {
                let at = Int(headerLength) + i * PartFormat.recordBytes
                guard let kind = PartRecordKind(rawValue: u32(tail, at)) else { throw bad("has a record of an unknown kind") }
                let record = PartRecord(kind: kind, a: u32(tail, at + 4), b: u32(tail, at + 8), c: u32(tail, at + 12),
                                        offset: u64(tail, at + 16), length: u64(tail, at + 24))
                guard record.offset >= 8, record.offset + record.length <= headerOffset else { throw bad("has a record outside its data") }
                records.append(record)
            }
            parsedRecords = records
        } catch {
            file.close()
            throw error
        }
        self.file = file
        self.size = size
        header = parsedHeader
        records = parsedRecords
    }

    deinit { file.close() }

    /// Reads `record`'s bytes into `buffer` (resized to fit).
    func read(_ record: PartRecord, into buffer: inout [UInt8]) throws(TesseraError) {
        let length = Int(record.length)
        if buffer.count != length { buffer = [UInt8](repeating: 0, count: length) }
        guard length > 0 else { return }
        try buffer.withUnsafeMutableBytes { raw in
            Result { () throws(TesseraError) in try file.readAll(into: raw, at: Int64(record.offset)) }
        }.get()
    }

    /// Reads part of `record`: `count` bytes from `start` within it.
    func read(_ record: PartRecord, from start: Int, count: Int, into raw: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        try file.readAll(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<count]), at: Int64(record.offset) + Int64(start))
    }
}

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
