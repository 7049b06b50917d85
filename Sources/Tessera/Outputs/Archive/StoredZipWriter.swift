// StoredZipWriter.swift — a ZIP archive of stored (uncompressed) entries, written front to back
// in one pass, for an SZI: a Deep Zoom pyramid in one file (DeepZoomArchive.swift).
//
// Why stored: the entries are JPEG tiles, which deflate does not shrink, and a reader over HTTP
// range requests (OpenSeadragon's SZI tile source, the viewer) fetches a tile as the bytes after
// its local header. Every entry is complete when added (its CRC and size known), so a local
// header is written once, before its bytes, with no data descriptor.
//
// Memory: nothing grows with the entry count. Each entry's central-directory record is appended
// to an unnamed temporary file (through a 64 KiB buffer) and copied after the last entry by
// `finish`, a MiB at a time. The archive itself is an AtomicOutputFile, so it appears under its
// name only when complete, and its written pages are dropped from the page cache as it goes.
//
// ZIP64 (APPNOTE.TXT 4.3.14, 4.5.3): an entry's offset past 4 GiB goes in a ZIP64 extra field of
// its central record; past 65,535 entries or 4 GiB of archive, the end of the central directory
// is a ZIP64 record and locator before the classic record, whose fields then hold their maxima.
// No entry is 4 GiB itself (a tile is at most a few MiB), so local headers never need ZIP64.
//
// Threading: `add(name:bytes:)` may be called from several threads at once (the pyramid's
// encoder jobs); the CRC is computed outside the lock, the writes are made under it, in the
// order the calls take it. `add(name:producedBy:)` (an entry streamed in two passes), `finish`,
// `commit` and `discard` are called by one thread once the other adds have returned.
import Glibc

final class StoredZipWriter: @unchecked Sendable {
    let destination: String
    private let lock = Mutex()
    // Protected by `lock`.
    private let file: AtomicOutputFile
    private let central: FileDescriptor
    private var centralBuffer: [UInt8] = []
    private var centralLength: Int64 = 0
    private var entryCount = 0
    private var failure: TesseraError?
    private var finished = false
    /// The entries' time, in MS-DOS form (the archive's start, local time).
    private let dosTime: UInt16, dosDate: UInt16

    /// The most one entry's bytes may be: its sizes must fit a local header's 32 bits.
    static let maximumEntryBytes = Int(UInt32.max) - 1

    /// Starts an archive that will replace `destination` (checked as any output is) when
    /// committed; the central directory waits in `temporaryDirectory`.
    init(destination: String, temporaryDirectory: String) throws(TesseraError) {
        self.destination = destination
        file = try AtomicOutputFile(destination: destination)
        do throws(TesseraError) {
            central = try FileDescriptor.openAnonymousTemporary(in: temporaryDirectory)
        } catch {
            file.discard()
            throw error
        }
        centralBuffer.reserveCapacity(Self.centralBufferBytes + 1024)
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        // MS-DOS dates start in 1980; a clock before that is written as 1980-01-01.
        let year = max(0, Int(parts.tm_year) + 1900 - 1980)
        dosDate = UInt16(truncatingIfNeeded: min(year, 127) << 9 | Int(parts.tm_mon + 1) << 5 | Int(parts.tm_mday))
        dosTime = UInt16(truncatingIfNeeded: Int(parts.tm_hour) << 11 | Int(parts.tm_min) << 5 | Int(parts.tm_sec) / 2)
    }

    deinit {
        central.close()
        if !finished { file.discard() }
    }

    static let centralBufferBytes = 64 << 10

    /// Entries added so far and the archive's bytes so far.
    var entries: Int { lock.lock(); defer { lock.unlock() }; return entryCount }
    var bytesWritten: Int64 { lock.lock(); defer { lock.unlock() }; return file.bytesWritten }

    /// Adds an entry named `name` (UTF-8, '/' between folders) holding `bytes`. Thread-safe.
    func add(name: String, bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        let nameBytes = try checkedName(name, size: bytes.count)
        let crc = ZipCRC32.checksum(bytes)
        lock.lock()
        defer { lock.unlock() }
        try appendEntry(name: nameBytes, crc: crc, size: bytes.count) { () throws(TesseraError) in try file.append(bytes) }
    }

    /// Adds an entry named `name` whose bytes `produce` hands to the function it is given, piece
    /// by piece: for an entry too large to hold at once (the viewer's cells.js of a million
    /// cells). `produce` is called twice, first for the CRC and the size (which the local header,
    /// written before the bytes, holds), then to write them, and must hand the same bytes both
    /// times. Called by one thread with no other `add` running (it holds the lock while it writes).
    func add(name: String, producedBy produce: (_ write: (UnsafeRawBufferPointer) throws(TesseraError) -> Void) throws(TesseraError) -> Void)
        throws(TesseraError) {
        var crc = ZipCRC32()
        var size = 0
        try produce { bytes throws(TesseraError) in
            crc.update(bytes)
            size += bytes.count
        }
        let nameBytes = try checkedName(name, size: size)
        lock.lock()
        defer { lock.unlock() }
        try appendEntry(name: nameBytes, crc: crc.value, size: size) { () throws(TesseraError) in
            var written = 0
            try produce { bytes throws(TesseraError) in
                written += bytes.count
                guard written <= size else {
                    throw .encodeFailed(path: destination, reason: "the archive entry \(name) grew between its two passes")
                }
                try file.append(bytes)
            }
            guard written == size else {
                throw .encodeFailed(path: destination, reason: "the archive entry \(name) shrank between its two passes")
            }
        }
    }

    /// `name` as UTF-8, refused when it or `size` does not fit a local header.
    private func checkedName(_ name: String, size: Int) throws(TesseraError) -> [UInt8] {
        let nameBytes = Array(name.utf8)
        guard nameBytes.count <= Int(UInt16.max), size <= Self.maximumEntryBytes else {
            throw .encodeFailed(path: destination, reason: "an archive entry too large for a ZIP local header: \(name)")
        }
        return nameBytes
    }

    /// Writes an entry's local header, then its bytes (`writeBytes`), then queues its central
    /// record. Called with `lock` held.
    private func appendEntry(name nameBytes: [UInt8], crc: UInt32, size: Int,
                             writeBytes: () throws(TesseraError) -> Void) throws(TesseraError) {
        if let failure { throw failure }
        guard !finished else { preconditionFailure("StoredZipWriter.add after finish") }
        let offset = file.bytesWritten
        var header: [UInt8] = []
        header.reserveCapacity(30 + nameBytes.count)
        Self.append32(0x0403_4B50, &header)   // local file header signature
        Self.append16(20, &header)            // version needed: 2.0
        Self.append16(0x0800, &header)        // flags: the name is UTF-8
        Self.append16(0, &header)             // stored
        Self.append16(dosTime, &header)
        Self.append16(dosDate, &header)
        Self.append32(crc, &header)
        Self.append32(UInt32(size), &header)
        Self.append32(UInt32(size), &header)
        Self.append16(UInt16(nameBytes.count), &header)
        Self.append16(0, &header)             // no extra field
        header += nameBytes
        do throws(TesseraError) {
            try header.withUnsafeBytes { raw in Result { () throws(TesseraError) in try file.append(raw) } }.get()
            try writeBytes()
            try appendCentralRecord(name: nameBytes, crc: crc, size: size, offset: offset)
        } catch {
            failure = error
            throw error
        }
        entryCount += 1
    }

    /// The entry's record for the central directory (APPNOTE 4.3.12), buffered.
    private func appendCentralRecord(name: [UInt8], crc: UInt32, size: Int, offset: Int64) throws(TesseraError) {
        let needsZip64 = offset >= 0xFFFF_FFFF
        Self.append32(0x0201_4B50, &centralBuffer)
        Self.append16(3 << 8 | 45, &centralBuffer)          // made by: Unix, 4.5
        Self.append16(needsZip64 ? 45 : 20, &centralBuffer) // version needed
        Self.append16(0x0800, &centralBuffer)
        Self.append16(0, &centralBuffer)
        Self.append16(dosTime, &centralBuffer)
        Self.append16(dosDate, &centralBuffer)
        Self.append32(crc, &centralBuffer)
        Self.append32(UInt32(size), &centralBuffer)
        Self.append32(UInt32(size), &centralBuffer)
        Self.append16(UInt16(name.count), &centralBuffer)
        Self.append16(needsZip64 ? 12 : 0, &centralBuffer)  // extra field length
        Self.append16(0, &centralBuffer)                    // comment length
        Self.append16(0, &centralBuffer)                    // disk number start
        Self.append16(0, &centralBuffer)                    // internal attributes
        Self.append32(UInt32(0o100644) << 16, &centralBuffer) // external: a regular file, mode 644
        Self.append32(needsZip64 ? 0xFFFF_FFFF : UInt32(offset), &centralBuffer)
        centralBuffer += name
        if needsZip64 {
            Self.append16(0x0001, &centralBuffer)           // ZIP64 extended information
            Self.append16(8, &centralBuffer)
            Self.append64(UInt64(offset), &centralBuffer)
        }
        if centralBuffer.count >= Self.centralBufferBytes { try flushCentral() }
    }

    private func flushCentral() throws(TesseraError) {
        guard !centralBuffer.isEmpty else { return }
        try centralBuffer.withUnsafeBytes { raw in
            Result { () throws(TesseraError) in try central.writeAll(raw, at: centralLength) }
        }.get()
        centralLength += Int64(centralBuffer.count)
        centralBuffer.removeAll(keepingCapacity: true)
    }

    /// Writes the central directory and its end records after the last entry. No entry may be
    /// added after it.
    func finish() throws(TesseraError) {
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw failure }
        finished = true
        try flushCentral()
        let directoryOffset = file.bytesWritten
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var copied: Int64 = 0
        while copied < centralLength {
            let count = Int(min(Int64(chunk.count), centralLength - copied))
            try chunk.withUnsafeMutableBytes { raw in
                Result { () throws(TesseraError) in
                    try central.readAll(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<count]), at: copied)
                }
            }.get()
            try chunk.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in try file.append(UnsafeRawBufferPointer(rebasing: raw[0..<count])) }
            }.get()
            copied += Int64(count)
        }
        let end = Self.endRecords(entries: entryCount, directoryOffset: directoryOffset, directoryBytes: centralLength)
        try end.withUnsafeBytes { raw in Result { () throws(TesseraError) in try file.append(raw) } }.get()
    }

    /// The end of the central directory (APPNOTE 4.3.16), preceded by the ZIP64 record and
    /// locator (4.3.14, 4.3.15) when a count or an offset does not fit the classic fields.
    static func endRecords(entries: Int, directoryOffset: Int64, directoryBytes: Int64) -> [UInt8] {
        var bytes: [UInt8] = []
        let needsZip64 = entries >= 0xFFFF || directoryOffset >= 0xFFFF_FFFF || directoryBytes >= 0xFFFF_FFFF
        if needsZip64 {
            let recordOffset = directoryOffset + directoryBytes
            append32(0x0606_4B50, &bytes)
            append64(44, &bytes)                 // the record's size after this field
            append16(3 << 8 | 45, &bytes)
            append16(45, &bytes)
            append32(0, &bytes)                  // this disk
            append32(0, &bytes)                  // the disk the directory starts on
            append64(UInt64(entries), &bytes)
            append64(UInt64(entries), &bytes)
            append64(UInt64(directoryBytes), &bytes)
            append64(UInt64(directoryOffset), &bytes)
            append32(0x0706_4B50, &bytes)        // the locator
            append32(0, &bytes)
            append64(UInt64(recordOffset), &bytes)
            append32(1, &bytes)                  // disks in all
        }
        append32(0x0605_4B50, &bytes)
        append16(0, &bytes)
        append16(0, &bytes)
        append16(UInt16(min(entries, 0xFFFF)), &bytes)
        append16(UInt16(min(entries, 0xFFFF)), &bytes)
        append32(UInt32(min(directoryBytes, 0xFFFF_FFFF)), &bytes)
        append32(UInt32(min(directoryOffset, 0xFFFF_FFFF)), &bytes)
        append16(0, &bytes)                      // no comment
        return bytes
    }

    /// Makes the finished archive durable and visible under `destination`.
    func commit() throws(TesseraError) {
        try OutputCommit.all { commit throws(TesseraError) in try self.commit(in: commit) }
    }

    /// The same as one output of several (OutputCommit).
    func commit(in commit: OutputCommit) throws(TesseraError) {
        precondition(finished, "StoredZipWriter.commit before finish")
        try file.commit(in: commit)
    }

    /// Abandons the archive: nothing appears under `destination`.
    func discard() {
        lock.lock()
        defer { lock.unlock() }
        finished = true
        file.discard()
    }

    private static func append16(_ value: UInt16, _ bytes: inout [UInt8]) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    private static func append32(_ value: UInt32, _ bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    private static func append64(_ value: UInt64, _ bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }
}
