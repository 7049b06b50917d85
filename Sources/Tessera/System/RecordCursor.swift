// RecordCursor.swift — reading a RecordStore (RecordJournal.swift): its files as sorted sources
// read a chunk at a time, and the merge of several sources, for lookups in ascending key order
// (RecordCursor) and for compaction (mergeRecords).
//
// A source's memory is one chunk (a main file's block, 64 KiB as written, or a journal held
// whole when it is small), so a cursor over a store of any size holds a block per source.
// Reading a file stops quietly at a read error (what follows is missing, `failure` says why):
// lookups then analyse again, and compaction refuses to write a main file missing records.
//
// Threading: one thread uses a source or a cursor.
import Glibc

/// A sequence of records in strictly ascending key order, read forward.
protocol RecordSource: AnyObject {
    /// The record at the position (nil at the end), valid until the next move.
    var current: (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)? { get }
    func advance()
    /// Moves to the first record whose key is not below `key`.
    func seek(_ key: UnsafeRawBufferPointer)
    /// Back to the first record.
    func rewind()
    /// The memory the source holds for reading.
    var heldBytes: Int { get }
    /// The read error that ended the source early, if one did.
    var failure: TesseraError? { get }
}

/// Reads the chunks (blocks or frames) of a file between two offsets, each checked, skipping
/// damaged ones (see RecordJournal.swift's note on the format).
final class ChunkReader {
    let file: FileDescriptor
    let magic: UInt32
    let sorted: Bool
    let start: Int64
    let end: Int64
    private(set) var next: Int64
    private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    private(set) var failure: TesseraError?
    /// The end offset of the last chunk that checked out (`start` before any).
    private(set) var validEnd: Int64
    /// Whether any chunk failed its checks (the file is worth rewriting).
    private(set) var damaged = false
    /// Called once, at the first damage found.
    var onDamage: (() -> Void)?
    /// Bytes read for chunks that then failed their checks, and how many may be: a file sprayed
    /// with chunk headers that each claim 2 MiB (one every 8 bytes) would otherwise cost 2 MiB
    /// read and summed per 8 bytes of file, quadratic. Past the budget (16 MiB, or twice the
    /// file) the rest of the file is left unread, as damaged.
    private(set) var failedBytes: Int64 = 0
    private let failedBudget: Int64

    init(file: FileDescriptor, magic: UInt32, sorted: Bool, start: Int64, end: Int64) {
        self.file = file
        self.magic = magic
        self.sorted = sorted
        self.start = start
        self.end = end
        next = start
        validEnd = start
        failedBudget = max(16 << 20, 2 * (end - start))
    }

    /// A chunk failed its checks: counted, the buffer it needed let go when large (a damaged file
    /// holds no more than a sound one), and the reading given up past the budget.
    private func failed(readBytes: Int) {
        if !damaged && !seeking {
            damaged = true
            onDamage?()
        }
        failedBytes += Int64(readBytes)
        if buffer.count > 256 << 10 {
            buffer.deallocate()
            buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        }
        if failedBytes > failedBudget { next = end } else { resynchronise() }
    }

    deinit { buffer.deallocate() }

    var heldBytes: Int { buffer.count }

    func rewind() {
        next = start
        validEnd = start
    }

    /// Reads on from `offset` (clamped to the file's range): the next chunk read is the first
    /// that checks out at or after it. For a search among a sorted file's blocks.
    func reposition(to offset: Int64) {
        next = min(max(offset, start), end)
        seeking = true
    }

    /// Set by `reposition` until a chunk checks out: landing inside a block is no damage.
    private var seeking = false

    /// The chunks read, each checked (a measure of a search's work, for tests).
    private(set) var chunksRead = 0

    /// The next chunk that checks out, or nil at the end (or at a read error: `failure`).
    func read() -> (payload: UnsafeRawBufferPointer, count: Int, last: UnsafeRawBufferPointer?)? {
        let headerBytes = Int64(RecordFormat.chunkHeaderBytes)
        while failure == nil && end - next >= headerBytes {
            var header = (UInt32(0), UInt32(0), UInt32(0), UInt32(0))
            do throws(TesseraError) {
                try withUnsafeMutableBytes(of: &header) { raw in
                    Result { () throws(TesseraError) in try file.readAll(into: raw, at: next) }
                }.get()
            } catch {
                failure = error
                return nil
            }
            let length = Int(UInt32(littleEndian: header.1)), count = UInt32(littleEndian: header.2)
            // A record takes at least its 8-byte header: more records than that is no chunk.
            guard UInt32(littleEndian: header.0) == magic, length <= RecordFormat.maxChunkBytes,
                  Int64(length) <= end - next - headerBytes, Int(count) <= length / RecordFormat.recordHeaderBytes else {
                failed(readBytes: 0)
                continue
            }
            if buffer.count < length {
                buffer.deallocate()
                buffer = .allocate(byteCount: max(length, 4096), alignment: 16)
            }
            let payload = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length])
            do throws(TesseraError) { try file.readAll(into: payload, at: next + headerBytes) } catch {
                failure = error
                return nil
            }
            let check = RecordFormat.validate(payload: UnsafeRawBufferPointer(payload), count: count,
                                              crc: UInt32(littleEndian: header.3), sorted: sorted)
            guard check.ok else {
                failed(readBytes: length)
                continue
            }
            next += headerBytes + Int64(length)
            seeking = false
            validEnd = next
            chunksRead += 1
            return (UnsafeRawBufferPointer(payload), Int(count), check.last)
        }
        return nil
    }

    /// After a damaged chunk: on to the next place the magic occurs (a false match fails its
    /// checks in turn), or the end.
    private func resynchronise() {
        let window = 1 << 16
        var scratch = [UInt8](repeating: 0, count: window)
        var at = next + 1
        while at + 4 <= end {
            let want = Int(min(Int64(window), end - at))
            let got: Int
            do throws(TesseraError) {
                got = try scratch.withUnsafeMutableBytes { raw in
                    Result { () throws(TesseraError) in try file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]), at: at) }
                }.get()
            } catch {
                failure = error
                return
            }
            guard got >= 4 else { break }
            // Candidates are found by their first byte with memchr (a run of zeros passes at its
            // speed, not a byte at a time).
            let first = UInt8(truncatingIfNeeded: magic)
            let found: Int? = scratch.withUnsafeBytes { raw in
                var from = 0
                while from <= got - 4, let hit = memchr(raw.baseAddress! + from, Int32(first), got - 3 - from) {
                    let index = raw.baseAddress!.distance(to: UnsafeRawPointer(hit))
                    if raw.loadLittleEndian(index, as: UInt32.self) == magic { return index }
                    from = index + 1
                }
                return nil
            }
            if let found {
                next = at + Int64(found)
                return
            }
            at += Int64(got - 3)
        }
        next = end
    }
}

/// The blocks of a main file (or of a sorted run in a temporary file), a block at a time.
final class BlockFileSource: RecordSource {
    private let reader: ChunkReader
    private let ownsFile: Bool
    private var payload = UnsafeRawBufferPointer(start: nil, count: 0)
    private var at = 0
    /// The last key of the block before (copied: the buffer is reused), for order across blocks.
    private var previousLast: [UInt8] = []
    private var hasPrevious = false
    private var blockLast: UnsafeRawBufferPointer?
    private(set) var current: (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)?

    init(file: FileDescriptor, start: Int64, end: Int64, ownsFile: Bool, onDamage: (() -> Void)? = nil) {
        reader = ChunkReader(file: file, magic: RecordFormat.blockMagic, sorted: true, start: start, end: end)
        reader.onDamage = onDamage
        self.ownsFile = ownsFile
        loadBlock()
    }

    /// The main file at `path`, or nil when it is missing, unreadable or not of this `schema`.
    static func open(main path: String, schema: UInt32, onDamage: (() -> Void)? = nil) -> BlockFileSource? {
        guard let (file, info) = try? FileDescriptor.openRegularFileForReading(path) else { return nil }
        guard !isMostlyUnstored(info) else {
            file.close()
            return nil
        }
        var header = [UInt8](repeating: 0, count: RecordFormat.fileHeaderBytes)
        let ok = Int64(info.st_size) >= Int64(RecordFormat.fileHeaderBytes) && header.withUnsafeMutableBytes { raw in
            (try? file.readAll(into: raw, at: 0)) != nil
        } && header.withUnsafeBytes { RecordFormat.checkHeader($0, magic: RecordFormat.mainMagic, schema: schema) }
        guard ok else {
            file.close()
            return nil
        }
        let source = BlockFileSource(file: file, start: Int64(RecordFormat.fileHeaderBytes), end: Int64(info.st_size), ownsFile: true,
                                     onDamage: onDamage)
        return source
    }

    deinit { if ownsFile { reader.file.close() } }

    var heldBytes: Int { reader.heldBytes + previousLast.capacity }
    var failure: TesseraError? { reader.failure }
    /// Bytes read for blocks that failed their checks (for tests).
    var failedBytes: Int64 { reader.failedBytes }
    /// The blocks read so far, each checked (for tests).
    var blocksRead: Int { reader.chunksRead }

    private func loadBlock() {
        if let last = blockLast {
            previousLast.removeAll(keepingCapacity: true)
            previousLast.append(contentsOf: last)
            hasPrevious = true
        }
        readBlock()
    }

    /// The next block that checks out, its first record above `previousLast` made current.
    private func readBlock() {
        current = nil
        blockLast = nil
        while let chunk = reader.read() {
            payload = chunk.payload
            at = 0
            blockLast = chunk.last
            // Records not above the previous block's last key (a damaged or hostile file) are skipped.
            while let record = RecordFormat.record(in: payload, at: at) {
                if hasPrevious && previousLast.withUnsafeBytes({ compareKeys(record.key, $0) }) <= 0 {
                    at = record.value.baseAddress! - payload.baseAddress! + record.value.count
                    continue
                }
                current = record
                return
            }
        }
    }

    func advance() {
        guard let record = current else { return }
        at = record.value.baseAddress! - payload.baseAddress! + record.value.count
        if let next = RecordFormat.record(in: payload, at: at) {
            current = next
        } else {
            loadBlock()
        }
    }

    func seek(_ key: UnsafeRawBufferPointer) {
        var passed = 0
        while let record = current {
            // A whole block below the key is passed without visiting its records; past the
            // second, the blocks ahead are searched instead of read one by one.
            if let last = blockLast, compareKeys(last, key) < 0 {
                passed += 1
                if passed > 2 { skipBlocks(below: key) } else { loadBlock() }
                continue
            }
            if compareKeys(record.key, key) >= 0 { return }
            advance()
        }
    }

    /// The first block and offset at or after `offset` that checks out: its start, its end and
    /// whether its last key is below `key` (nil: none before the end).
    private func probe(at offset: Int64, below key: UnsafeRawBufferPointer) -> (start: Int64, end: Int64, below: Bool)? {
        reader.reposition(to: offset)
        guard let chunk = reader.read(), let last = chunk.last else { return nil }
        let start = reader.next - Int64(RecordFormat.chunkHeaderBytes) - Int64(chunk.payload.count)
        let below = compareKeys(last, key) < 0
        if below {
            previousLast.removeAll(keepingCapacity: true)
            previousLast.append(contentsOf: last)
        }
        return (start, reader.next, below)
    }

    /// Moves past the blocks whose keys are all below `key` (the current block is one, and so
    /// were the two before it): a gallop over doubling strides, then halving, so a key far ahead
    /// in a store of millions of records costs a few dozen blocks rather than every block
    /// between. The blocks are sorted, so every block this skips is below the key; the last
    /// stretch is read block by block, as a damaged block found by a probe is skipped as in a
    /// plain read.
    private func skipBlocks(below key: UnsafeRawBufferPointer) {
        let block = Int64(RecordFormat.blockTargetBytes)
        if let last = blockLast {
            previousLast.removeAll(keepingCapacity: true)
            previousLast.append(contentsOf: last)
            hasPrevious = true
        }
        // Every block ending at or before `low` is below the key; the first block that checks
        // out at or after `high` is not (or there is none).
        var low = reader.next, high = reader.end, stride = 2 * block
        while low + stride < high {
            guard let found = probe(at: low + stride, below: key) else {
                high = low + stride
                break
            }
            guard found.below else {
                high = found.start
                break
            }
            low = found.end
            stride *= 2
        }
        while high - low > 2 * block {
            let middle = low + (high - low) / 2
            guard let found = probe(at: middle, below: key), found.start < high else {
                high = middle
                continue
            }
            if found.below { low = found.end } else { high = found.start }
        }
        reader.reposition(to: low)
        readBlock()
    }

    func rewind() {
        reader.rewind()
        hasPrevious = false
        blockLast = nil
        loadBlock()
    }
}

/// Records held in memory, sorted (a small journal, or a chunk of one being sorted into a run):
/// the payloads' bytes and, per record, where it is. Of records with equal keys the last added wins.
final class HeldRecords: RecordSource {
    private var storage: UnsafeMutableRawBufferPointer
    private var used = 0
    private var entries: [(offset: Int32, keyLength: Int32, valueLength: Int32)] = []
    private var sortedAndUnique = true
    private var position = 0

    init(capacity: Int) {
        storage = .allocate(byteCount: max(capacity, 16), alignment: 16)
    }

    deinit { storage.deallocate() }

    var count: Int { entries.count }
    var bytesUsed: Int { used }
    var heldBytes: Int { storage.count + entries.capacity * 12 }
    var failure: TesseraError? { nil }

    /// Copies a checked payload's records in (the storage grows as needed: records are found
    /// by offset, so moving it is safe).
    func append(payload: UnsafeRawBufferPointer) {
        if payload.count > storage.count - used {
            let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(storage.count * 2, used + payload.count), alignment: 16)
            grown.copyMemory(from: UnsafeRawBufferPointer(rebasing: storage[0..<used]))
            storage.deallocate()
            storage = grown
        }
        UnsafeMutableRawBufferPointer(rebasing: storage[used..<used + payload.count]).copyMemory(from: UnsafeRawBufferPointer(payload))
        var at = 0
        while let record = RecordFormat.record(in: payload, at: at) {
            let keyStart = record.key.baseAddress! - payload.baseAddress!
            entries.append((Int32(used + keyStart), Int32(record.key.count), Int32(record.value.count)))
            at = keyStart + record.key.count + record.value.count
        }
        used += payload.count
        sortedAndUnique = false
    }

    private func key(_ entry: (offset: Int32, keyLength: Int32, valueLength: Int32)) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: storage[Int(entry.offset)..<Int(entry.offset) + Int(entry.keyLength)])
    }

    private func record(_ index: Int) -> (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let entry = entries[index]
        let valueStart = Int(entry.offset) + Int(entry.keyLength)
        return (key(entry), UnsafeRawBufferPointer(rebasing: storage[valueStart..<valueStart + Int(entry.valueLength)]))
    }

    /// Sorts by key; of equal keys keeps the one added last (offsets grow with the order added).
    func sort() {
        guard !sortedAndUnique else { return }
        entries.sort { a, b in
            let order = compareKeys(key(a), key(b))
            return order < 0 || (order == 0 && a.offset < b.offset)
        }
        var kept = 0
        for index in entries.indices {
            if index + 1 < entries.count && compareKeys(key(entries[index]), key(entries[index + 1])) == 0 { continue }
            entries[kept] = entries[index]
            kept += 1
        }
        entries.removeSubrange(kept...)
        sortedAndUnique = true
        position = 0
    }

    /// Empties it for the next chunk, keeping its memory.
    func removeAll() {
        entries.removeAll(keepingCapacity: true)
        used = 0
        position = 0
        sortedAndUnique = true
    }

    var current: (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)? {
        position < entries.count ? record(position) : nil
    }

    func advance() { if position < entries.count { position += 1 } }

    func seek(_ key: UnsafeRawBufferPointer) {
        // Binary search from the position: the first entry not below `key`.
        var low = position, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if compareKeys(self.key(entries[middle]), key) < 0 { low = middle + 1 } else { high = middle }
        }
        position = low
    }

    func rewind() { position = 0 }

    /// Calls `body` with each record in order.
    func forEach(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(TesseraError) -> Void) throws(TesseraError) {
        for index in entries.indices {
            let (key, value) = record(index)
            try body(key, value)
        }
    }
}

/// Lookups in ascending key order over several sources, the later ones taking precedence: one
/// merge pass, whatever the number of records. A key lower than the one before (a caller out of
/// order) rewinds every source, so the answer is still right, only slower.
final class RecordCursor {
    private let sources: [any RecordSource]
    private var previous: [UInt8] = []
    private var started = false

    init(sources: [any RecordSource]) {
        self.sources = sources
    }

    /// The memory held for reading (the sources' chunks and held journals).
    var heldBytes: Int { sources.reduce(previous.capacity) { $0 + $1.heldBytes } }

    /// Calls `body` with the values stored for `key`, newest source first, until it returns true;
    /// returns whether it did.
    func visit(_ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        if started && previous.withUnsafeBytes({ compareKeys(key, $0) }) < 0 {
            for source in sources { source.rewind() }
        }
        started = true
        previous.removeAll(keepingCapacity: true)
        previous.append(contentsOf: key)
        for source in sources { source.seek(key) }
        for source in sources.reversed() {
            guard let record = source.current, compareKeys(record.key, key) == 0 else { continue }
            if body(record.value) { return true }
        }
        return false
    }

    /// The newest value for `key`.
    func value(_ key: [UInt8]) -> [UInt8]? {
        var found: [UInt8]?
        _ = key.withUnsafeBytes { key in
            visit(key) { value in
                found = Array(value)
                return true
            }
        }
        return found
    }
}

/// Every key of `sources` once, in ascending order, with the value of the latest source that
/// has it (a binary heap over the sources: a compaction merges hundreds of sorted runs).
func mergeRecords(_ sources: [any RecordSource],
                  _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(TesseraError) -> Void) throws(TesseraError) {
    // Heap order: the lower key first; of equal keys, the later source.
    func before(_ a: Int, _ b: Int) -> Bool {
        let order = compareKeys(sources[a].current!.key, sources[b].current!.key)
        return order < 0 || (order == 0 && a > b)
    }
    var heap: [Int] = []
    func siftDown(_ from: Int) {
        var parent = from
        while true {
            let left = 2 * parent + 1, right = left + 1
            var first = parent
            if left < heap.count && before(heap[left], heap[first]) { first = left }
            if right < heap.count && before(heap[right], heap[first]) { first = right }
            if first == parent { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
    func siftUp(_ from: Int) {
        var child = from
        while child > 0 {
            let parent = (child - 1) / 2
            guard before(heap[child], heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }
    /// Advances the source at the top, keeping the heap ordered.
    func advanceTop() {
        let source = sources[heap[0]]
        source.advance()
        if source.current == nil {
            heap[0] = heap[heap.count - 1]
            heap.removeLast()
        }
        if !heap.isEmpty { siftDown(0) }
    }
    for index in sources.indices where sources[index].current != nil {
        heap.append(index)
        siftUp(heap.count - 1)
    }
    var key: [UInt8] = []
    while let top = heap.first {
        let record = sources[top].current!
        try body(record.key, record.value)
        key.removeAll(keepingCapacity: true)
        key.append(contentsOf: record.key)
        advanceTop()
        // The same key in older sources: superseded.
        while let next = heap.first, key.withUnsafeBytes({ compareKeys(sources[next].current!.key, $0) }) == 0 {
            advanceTop()
        }
    }
}
