// ExternalSort.swift — sorts records (key bytes, payload bytes) by key in memory that does not grow
// with their count: runs of a few MiB are sorted in memory and written to an anonymous temporary
// file, then merged k ways, each run read through one small buffer.
//
// The scan sorts every file it finds by path this way, so a library of a million files costs the
// run buffer while it is walked, not a million paths held until the end.
import Glibc

final class ExternalSort {
    /// What one run may hold in memory (bytes of keys and payloads, plus the index entries).
    let runBytes: Int
    let temporaryDirectory: String
    /// The records of the run being filled, end to end: key, then payload.
    private var arena: [UInt8] = []
    private var entries: [Entry] = []
    /// Runs written so far: byte ranges of `spill`.
    private var runs: [Range<Int64>] = []
    private var spill: FileDescriptor?
    private var spillLength: Int64 = 0
    /// Records appended, of all runs.
    private(set) var count = 0

    /// Where one record of the run being filled is in `arena`.
    private struct Entry {
        var offset: Int
        var keyLength: Int32
        var payloadLength: Int32
    }

    /// Bytes each index entry costs besides its record.
    private static let entryOverhead = MemoryLayout<Entry>.stride
    /// A record on disk starts with its two lengths (UInt32 each, little endian).
    private static let recordHeader = 8
    /// The longest key or payload taken: far past any path, so only a caller's bug reaches it.
    static let maximumPartBytes = 1 << 20

    init(temporaryDirectory: String, runBytes: Int = ExternalSort.defaultRunBytes) {
        self.temporaryDirectory = temporaryDirectory
        self.runBytes = max(runBytes, 64)
    }

    deinit { spill?.close() }

    /// Adds one record. Stable: records with equal keys come out in the order they were added.
    func append(key: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) throws(TesseraError) {
        guard key.count <= Self.maximumPartBytes, payload.count <= Self.maximumPartBytes else {
            throw .system(operation: "sort (a record over 1 MiB)", errno: EINVAL, path: temporaryDirectory)
        }
        let cost = key.count + payload.count + Self.entryOverhead
        // The run's buffers once, at their full size: grown by doubling they would reach twice
        // that, and copying them three times. Only the pages written are resident, and arena
        // and entries together are kept under runBytes below.
        if arena.capacity == 0 {
            arena.reserveCapacity(runBytes)
            entries.reserveCapacity(runBytes / Self.entryOverhead)
        }
        if !entries.isEmpty && arena.count + entries.count * Self.entryOverhead + cost > runBytes { try writeRun() }
        entries.append(Entry(offset: arena.count, keyLength: Int32(key.count), payloadLength: Int32(payload.count)))
        arena.append(contentsOf: key)
        arena.append(contentsOf: payload)
        count += 1
    }

    func append(key: [UInt8], payload: [UInt8]) throws(TesseraError) {
        try key.withTypedBytes { k throws(TesseraError) in
            try payload.withTypedBytes { p throws(TesseraError) in try append(key: k, payload: p) }
        }
    }

    /// Sorts the run being filled in place (by key, then by arrival: stable whatever `sort` is,
    /// since a record's offset in the arena grows with its arrival). Sorting the entries
    /// themselves, rather than an index array mapped back, keeps the run's cost at
    /// `plannedBytes`: no second copy of the entries.
    private func sortRun() {
        arena.withUnsafeBytes { bytes in
            let base = bytes.baseAddress!
            entries.sort { x, y in
                let c = compareBytes(base + x.offset, Int(x.keyLength), base + y.offset, Int(y.keyLength))
                return c != 0 ? c < 0 : x.offset < y.offset
            }
        }
    }

    /// The most this sorter keeps resident while records are appended, whatever their number:
    /// the run (keys, payloads and entries together stay under `runBytes`), the sort's scratch
    /// (at most half the entries, which are at most the run) and the spill's write buffer.
    /// Once the run is gone, `finish` holds only the merge's read buffers (`mergeBufferBytes`,
    /// while there are at most 1,024 runs: 4 GiB of records). The scan's plan counts both
    /// (PhotoLibrary.plannedScanBytes).
    static func plannedRunBytes(runBytes: Int = defaultRunBytes) -> Int {
        runBytes + runBytes / 2 + (64 << 10)
    }

    /// A run's default size.
    static let defaultRunBytes = 4 << 20
    /// The merge's read buffers in all, however many runs (each at least 4 KiB, at most 64).
    static let mergeBufferBytes = 4 << 20

    /// Sorts the run being filled and appends it to the spill file.
    private func writeRun() throws(TesseraError) {
        sortRun()
        if spill == nil { spill = try FileDescriptor.openAnonymousTemporary(in: temporaryDirectory) }
        let start = spillLength
        var out: [UInt8] = []
        out.reserveCapacity(1 << 16)
        for entry in entries {
            appendLittleEndian(UInt32(entry.keyLength), to: &out)
            appendLittleEndian(UInt32(entry.payloadLength), to: &out)
            out.append(contentsOf: arena[entry.offset..<entry.offset + Int(entry.keyLength) + Int(entry.payloadLength)])
            if out.count >= 1 << 16 { try flush(&out) }
        }
        try flush(&out)
        runs.append(start..<spillLength)
        arena.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
    }

    private func flush(_ out: inout [UInt8]) throws(TesseraError) {
        guard !out.isEmpty, let spill else { return }
        try out.withTypedBytes { bytes throws(TesseraError) in try spill.writeAll(bytes, at: spillLength) }
        spillLength += Int64(out.count)
        out.removeAll(keepingCapacity: true)
    }

    /// Hands every record to `body` in key order (the buffers are valid only during the call),
    /// then empties the sorter.
    func finish(_ body: (_ key: UnsafeRawBufferPointer, _ payload: UnsafeRawBufferPointer) throws(TesseraError) -> Void)
        throws(TesseraError) {
        defer { reset() }
        if runs.isEmpty {
            // Everything fit in one run: no file at all.
            sortRun()
            let (arena, entries) = (self.arena, self.entries)
            try arena.withTypedBytes { bytes throws(TesseraError) in
                for entry in entries {
                    let key = UnsafeRawBufferPointer(rebasing: bytes[entry.offset..<entry.offset + Int(entry.keyLength)])
                    let end = entry.offset + Int(entry.keyLength) + Int(entry.payloadLength)
                    try body(key, UnsafeRawBufferPointer(rebasing: bytes[entry.offset + Int(entry.keyLength)..<end]))
                }
            }
            return
        }
        if !entries.isEmpty { try writeRun() }
        arena = []
        entries = []
        try merge(body)
    }

    /// The k-way merge: a binary heap of run cursors ordered by (key, run), so equal keys keep
    /// the order they were added in (an earlier run holds earlier records).
    private func merge(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(TesseraError) -> Void)
        throws(TesseraError) {
        guard let spill else { return }
        // A few MiB of read buffers in all, however many runs: each at least 4 KiB.
        let bufferBytes = max(4 << 10, min(64 << 10, Self.mergeBufferBytes / max(runs.count, 1)))
        var cursors: [RunCursor] = []
        for (index, run) in runs.enumerated() {
            let cursor = RunCursor(file: spill, range: run, run: index, bufferBytes: bufferBytes)
            if try cursor.advance() { cursors.append(cursor) }
        }
        var heap = CursorHeap(cursors)
        while let top = heap.top {
            try top.withRecord { key, payload throws(TesseraError) in try body(key, payload) }
            if try top.advance() { heap.siftDownTop() } else { heap.removeTop() }
        }
    }

    private func reset() {
        arena = []
        entries = []
        runs = []
        spill?.close()
        spill = nil
        spillLength = 0
        count = 0
    }
}

/// memcmp order, a shorter key first when it is a prefix of the longer.
@inline(__always)
func compareBytes(_ a: UnsafeRawPointer, _ aCount: Int, _ b: UnsafeRawPointer, _ bCount: Int) -> Int {
    let common = min(aCount, bCount)
    if common > 0 {
        let c = memcmp(a, b, common)
        if c != 0 { return Int(c) }
    }
    return aCount - bCount
}

private func appendLittleEndian(_ value: UInt32, to out: inout [UInt8]) {
    out.append(UInt8(truncatingIfNeeded: value))
    out.append(UInt8(truncatingIfNeeded: value >> 8))
    out.append(UInt8(truncatingIfNeeded: value >> 16))
    out.append(UInt8(truncatingIfNeeded: value >> 24))
}

/// One run of the spill file, read a buffer at a time: the current record is
/// `buffer[recordStart...]`.
private final class RunCursor {
    let file: FileDescriptor
    let range: Range<Int64>
    let run: Int
    private var buffer: [UInt8]
    /// The file offset `buffer[0]` came from, and how many of its bytes are valid.
    private var bufferOffset: Int64
    private var valid = 0
    private var recordStart = 0
    private var keyLength = 0
    private var payloadLength = 0
    /// The current record's length on disk (0 before the first `advance`).
    private var recordLength = 0

    init(file: FileDescriptor, range: Range<Int64>, run: Int, bufferBytes: Int) {
        self.file = file
        self.range = range
        self.run = run
        buffer = [UInt8](repeating: 0, count: bufferBytes)
        bufferOffset = range.lowerBound
    }

    /// Moves to the next record; false at the end of the run.
    func advance() throws(TesseraError) -> Bool {
        recordStart += recordLength
        recordLength = 0
        let position = bufferOffset + Int64(recordStart)
        guard position < range.upperBound else { return false }
        try ensure(8)
        keyLength = Int(littleEndian32(at: recordStart))
        payloadLength = Int(littleEndian32(at: recordStart + 4))
        // The file is this process's own, but a length is still checked before it sizes a read.
        guard keyLength <= ExternalSort.maximumPartBytes, payloadLength <= ExternalSort.maximumPartBytes,
              position + Int64(8 + keyLength + payloadLength) <= range.upperBound else {
            throw .system(operation: "sort (a damaged run)", errno: EIO, path: file.path)
        }
        try ensure(8 + keyLength + payloadLength)
        recordLength = 8 + keyLength + payloadLength
        return true
    }

    /// Makes `buffer[recordStart..<recordStart + bytes]` valid, reading on from the file.
    private func ensure(_ bytes: Int) throws(TesseraError) {
        if recordStart + bytes <= valid { return }
        // Keep the partial record at the buffer's start, then fill the rest.
        let keep = valid - recordStart
        if keep > 0 && recordStart > 0 {
            buffer.withUnsafeMutableBytes { b in
                _ = memmove(b.baseAddress!, b.baseAddress! + recordStart, keep)
            }
        }
        bufferOffset += Int64(recordStart)
        recordStart = 0
        valid = max(keep, 0)
        if buffer.count < bytes { buffer += [UInt8](repeating: 0, count: bytes - buffer.count) }
        let wanted = min(Int64(buffer.count - valid), range.upperBound - (bufferOffset + Int64(valid)))
        if wanted > 0 {
            let (file, offset, start) = (self.file, bufferOffset + Int64(valid), valid)
            try buffer.withTypedMutableBytes { b throws(TesseraError) in
                try file.readAll(into: UnsafeMutableRawBufferPointer(rebasing: b[start..<start + Int(wanted)]), at: offset)
            }
            valid += Int(wanted)
        }
        guard recordStart + bytes <= valid else { throw .system(operation: "sort (a short run)", errno: EIO, path: file.path) }
    }

    private func littleEndian32(at index: Int) -> UInt32 {
        UInt32(buffer[index]) | UInt32(buffer[index + 1]) << 8 | UInt32(buffer[index + 2]) << 16 | UInt32(buffer[index + 3]) << 24
    }

    func withRecord<T>(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(TesseraError) -> T) throws(TesseraError) -> T {
        let (start, keyLength, payloadLength) = (recordStart + 8, self.keyLength, self.payloadLength)
        return try buffer.withTypedBytes { b throws(TesseraError) in
            try body(UnsafeRawBufferPointer(rebasing: b[start..<start + keyLength]),
                     UnsafeRawBufferPointer(rebasing: b[start + keyLength..<start + keyLength + payloadLength]))
        }
    }

    /// Orders by key, then by run (stability).
    static func precedes(_ a: RunCursor, _ b: RunCursor) -> Bool {
        let c = a.buffer.withUnsafeBytes { x in
            b.buffer.withUnsafeBytes { y in
                compareBytes(x.baseAddress! + a.recordStart + 8, a.keyLength, y.baseAddress! + b.recordStart + 8, b.keyLength)
            }
        }
        return c != 0 ? c < 0 : a.run < b.run
    }
}

/// A binary min-heap of cursors whose current records are compared.
private struct CursorHeap {
    private var items: [RunCursor]

    init(_ cursors: [RunCursor]) {
        items = cursors
        var index = items.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
    }

    var top: RunCursor? { items.first }

    /// The top's record changed: restore the order.
    mutating func siftDownTop() { siftDown(0) }

    mutating func removeTop() {
        items.swapAt(0, items.count - 1)
        items.removeLast()
        if !items.isEmpty { siftDown(0) }
    }

    private mutating func siftDown(_ start: Int) {
        var index = start
        while true {
            let left = 2 * index + 1, right = left + 1
            var smallest = index
            if left < items.count && RunCursor.precedes(items[left], items[smallest]) { smallest = left }
            if right < items.count && RunCursor.precedes(items[right], items[smallest]) { smallest = right }
            if smallest == index { return }
            items.swapAt(index, smallest)
            index = smallest
        }
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body that throws TesseraError (the standard one rethrows `any Error`).
    func withTypedBytes<T>(_ body: (UnsafeRawBufferPointer) throws(TesseraError) -> T) throws(TesseraError) -> T {
        try withUnsafeBytes { bytes in Result { () throws(TesseraError) in try body(bytes) } }.get()
    }

    /// `withUnsafeMutableBytes` for a body that throws TesseraError.
    mutating func withTypedMutableBytes<T>(_ body: (UnsafeMutableRawBufferPointer) throws(TesseraError) -> T) throws(TesseraError) -> T {
        try withUnsafeMutableBytes { bytes in Result { () throws(TesseraError) in try body(bytes) } }.get()
    }
}
