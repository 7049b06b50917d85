// CellCache.swift — decoded cells, each photo decoded once per render, in bounded memory.
//
// Threading contract:
// - Any worker thread calls `acquire` / `release`. Every mutable field below is protected by
//   `lock`; `changed` is broadcast whenever a photo's state or a slot's pin count changes.
// - A photo is decoded by exactly one thread: the first to find it `.absent` marks it `.decoding`
//   and decodes outside the lock into a slot it has pinned; others either skip it for now
//   (`wait: false`, so two workers on the same cell row decode different photos in parallel) or
//   wait on `changed`.
// - A slot's bytes are written only by the thread that pinned it while `.decoding` (or
//   `.loading`); readers only read a `.resident` slot they have pinned; eviction takes only
//   unpinned slots. So no bytes are read while written.
//
// Memory: `slotCount` of the largest cells (the budget the plan gave), as one arena that each
// cell takes its own size of (`CellArena`): a collage's cells average less than half its
// largest, and fixed slots of the largest held 24 of a row's 75 where the arena holds about 55.
// When a library has more distinct photos than fit, an evicted cell is first written to an
// anonymous spill file (pwrite, page cache only, not in the process's RSS) and read back with
// pread when needed again, so no photo is decoded twice.
//
// A layout of frames (a collage, an adaptive mosaic) knows how many canvas rows each drawing
// fills (`rowsLeft`): the painter counts off the rows it draws (`drew`), and a drawing with
// none left gives its slot back at once, unspilled. Without this the cache's LRU evicted every
// finished cell of a collage through the spill file (10,000 photos, 30,000 px wide: 3.5 GB
// written under the lock for cells never read again). Counted rows drawn twice (none are
// today) would only free a cell early: it is decoded again when next asked for.
import Glibc

final class CellCache: @unchecked Sendable {
    enum Lookup {
        /// The cell's bytes, valid until `release(slot:)`.
        case cell(UnsafeRawPointer, slot: Int)
        /// The photo could not be decoded: draw the placeholder.
        case failed
        /// Another thread is decoding it right now (only with `wait: false`).
        case busy
        /// Not in memory but whole in the spill file (only with `partial: true`): read the rows
        /// wanted with `readRows`, without taking a slot.
        case onDisk
    }

    fileprivate enum StateCode {
        case absent
        case decoding
        case loading
        case resident(slot: Int)
        case spilled
        case failed
    }

    let decoder: CellDecoder
    /// What each key is: a photo at the cell size (a grid), or a photo at one of its sizes.
    let drawings: CellDrawings
    /// The largest cell's bytes; the spill file keeps key i at i times this.
    let cellBytes: Int
    /// The arena holds this many of the largest cells (more of smaller ones).
    let slotCount: Int
    private let photos: PhotoTable
    private let spillDirectory: String
    private let memory: UnsafeMutableRawPointer

    private let lock = Mutex()
    private let changed: Condition
    // Protected by `lock`:
    private var states: PhotoStates
    // A slot is a handle on a cell in the arena, at `slotOffset` (its length follows from its
    // key). 24 bytes a slot, as the fixed slots took (a grid of 8 px cells has 100,000 of them).
    private var arena: CellArena
    private var slotPhoto: [Int32]
    private var slotPins: [Int32]
    private var slotLastUse: [UInt64]
    private var slotOffset: [Int]
    private var freeSlots: [Int]
    private var clock: UInt64 = 0
    private var spill: FileDescriptor?
    /// Per key of a layout of frames, the canvas rows it has still to fill (empty for a grid).
    private var rowsLeft: [Int32]
    private var pendingEvents: [RenderEvent] = []
    private(set) var decodedCount = 0
    /// Cells the source handed over instead of their being decoded.
    private(set) var fromSourceCount = 0
    private(set) var failedPhotos: [SkippedPhoto] = []
    /// Photos drawn in part (a file that ends early), each once, with what is missing.
    private(set) var partialPhotos: [SkippedPhoto] = []
    /// Photos already reported as failed (a photo drawn at two sizes fails twice, is told once).
    private var reportedFailures = Set<Int>()
    private var reportedPartial = Set<Int>()
    /// Where cells may come from before they are decoded (RenderPart.swift), or nil.
    private let source: (any CellSource)?

    /// Bytes the cache keeps a photo, drawn or not (its state).
    static var bytesPerPhoto: Int { PhotoStates.bytesPerPhoto }

    /// At most this many cells at once beyond `slotCount` (24 bytes each: 96 KiB).
    static let mostHandles = 4096
    /// A photo that fails to decode is an error, not a placeholder (RenderSettings.failOnPlaceholder).
    var failOnPlaceholder = false

    /// `drawings` says what each key of `acquire` is; nil: photo i at the decoder's cell size.
    init(photos: PhotoTable, decoder: CellDecoder, slotCount: Int, spillDirectory: String, source: (any CellSource)? = nil,
         drawings: CellDrawings? = nil) {
        precondition(slotCount > 0)
        self.photos = photos
        self.source = source
        self.decoder = decoder
        self.drawings = drawings ?? CellDrawings(photoCount: photos.count, cellWidth: decoder.cellWidth, cellHeight: decoder.cellHeight)
        cellBytes = self.drawings.largestBytes
        self.slotCount = slotCount
        self.spillDirectory = spillDirectory
        let arenaBytes = Self.placeBytes(cellBytes, framed: self.drawings.framed != nil) * slotCount
        // Reserved, not touched: pages become resident only as cells fill them (the lowest
        // free place first).
        memory = .allocate(byteCount: arenaBytes, alignment: 64)
        arena = CellArena(bytes: arenaBytes)
        changed = Condition(lock)
        states = PhotoStates(count: self.drawings.count)
        // As many handles as the arena holds of the smallest cells, within reason.
        let handles = max(slotCount, min(self.drawings.count, Self.mostHandles, arenaBytes / Self.placeBytes(self.drawings.smallestBytes, framed: self.drawings.framed != nil)))
        slotPhoto = Array(repeating: -1, count: handles)
        slotPins = Array(repeating: 0, count: handles)
        slotLastUse = Array(repeating: 0, count: handles)
        slotOffset = Array(repeating: 0, count: handles)
        freeSlots = Array((0..<handles).reversed())
        rowsLeft = self.drawings.framed?.rowsDrawn() ?? []
    }

    deinit {
        memory.deallocate()
        spill?.close()
    }

    /// The cell of key `index` (a photo, or a drawing of a layout of frames), decoding (or
    /// reading back) it if needed: `drawings.size(index)` pixels of RGB. Pins the slot: call
    /// `release(slot:)` when done with the bytes. Throws only for spill-file I/O errors.
    /// With `partial`, a cell that is only in the spill file is not read back whole: the
    /// caller reads the rows it draws (`.onDisk`, `readRows`), so a cell drawn over many
    /// stripes (a collage's, an adaptive mosaic's large cells) is read from the spill once in
    /// all, however few cells the cache holds.
    func acquire(photo index: Int, wait: Bool, partial: Bool = false) throws(TesseraError) -> Lookup {
        var slot = -1, place = 0
        var fromDisk = false
        do {
            lock.lock()
            defer { lock.unlock() }
            while true {
                switch states[index] {
                case .resident(let resident):
                    slotPins[resident] += 1
                    clock += 1
                    slotLastUse[resident] = clock
                    return .cell(UnsafeRawPointer(memory + slotOffset[resident]), slot: resident)
                case .failed:
                    return .failed
                case .decoding, .loading:
                    if !wait { return .busy }
                    changed.wait()
                    continue
                case .spilled where partial:
                    return .onDisk
                case .absent, .spilled:
                    let size = drawings.size(index)
                    guard let free = try takeSlotLocked(bytes: size.width * size.height * 3) else {
                        // Every slot is pinned by other workers: wait for one to be released.
                        changed.wait()
                        continue
                    }
                    slot = free
                    place = slotOffset[free]
                    fromDisk = states.onDisk(index)
                    states[index] = fromDisk ? .loading : .decoding
                    slotPhoto[slot] = Int32(index)
                    slotPins[slot] = 1
                }
                break
            }
        }
        // Fill the pinned slot outside the lock.
        let size = drawings.size(index)
        let bytes = UnsafeMutableRawBufferPointer(start: memory + place, count: size.width * size.height * 3)
        let photo = drawings.photo(index)
        let decoder = drawings.framed == nil ? self.decoder : self.decoder.sized(width: size.width, height: size.height)
        var outcome: Result<DecodeNotes, TesseraError>
        var fromSource = false
        if !fromDisk, let source {
            do throws(TesseraError) {
                let fetched = try source.fetch(index, into: bytes) { () throws(TesseraError) in
                    try decoder.decode(file: photos[photo].file, into: bytes)
                }
                fromSource = fetched.read
                outcome = .success(fetched.notes)
            } catch {
                outcome = .failure(error)
            }
        } else if fromDisk {
            do throws(TesseraError) {
                try spill!.readAll(into: bytes, at: Int64(index) * Int64(cellBytes))
                outcome = .success(DecodeNotes())
            } catch {
                outcome = .failure(error)
            }
        } else {
            do throws(TesseraError) {
                outcome = .success(try decoder.decode(file: photos[photo].file, into: bytes))
            } catch {
                outcome = .failure(error)
            }
        }
        if failOnPlaceholder, case .success(let notes) = outcome, let missing = notes.incomplete {
            // Drawn in part (a truncated file): a strict run wants every photo whole.
            outcome = .failure(.unreadablePhoto(path: photos[photo].path, reason: missing))
        }
        lock.lock()
        defer {
            changed.broadcast()
            lock.unlock()
        }
        switch outcome {
        case .success(let notes):
            states[index] = .resident(slot: slot)
            clock += 1
            slotLastUse[slot] = clock
            if fromSource {
                fromSourceCount += 1
            } else if !fromDisk {
                decodedCount += 1
                if notes.warningCount > 0 {
                    pendingEvents.append(.photoWarning(path: photos[photo].path, message: notes.firstWarning))
                }
                if let missing = notes.incomplete, reportedPartial.insert(photo).inserted {
                    partialPhotos.append(SkippedPhoto(path: photos[photo].path, reason: missing))
                }
            }
            return .cell(UnsafeRawPointer(bytes.baseAddress!), slot: slot)
        case .failure(let error):
            slotPins[slot] = 0
            emptyLocked(slot: slot)
            if fromDisk {
                states[index] = .spilled
                throw error
            }
            if error == .cancelled {
                // The render is being stopped, not the photo failing: no placeholder, no warning.
                states[index] = .absent
                throw error
            }
            states[index] = .failed
            if failOnPlaceholder {
                throw TesseraError.unreadablePhoto(path: photos[photo].path, reason: "\(SkippedPhoto(path: "", error: error).reason) "
                                                   + "(a strict run draws no placeholder or partial photo: nothing is written)")
            }
            if reportedFailures.insert(photo).inserted {
                let skipped = SkippedPhoto(path: photos[photo].path, error: error)
                failedPhotos.append(skipped)
                pendingEvents.append(.photoFailed(skipped))
            }
            return .failed
        }
    }

    /// Rows `rows` of key `index`'s cell (which `acquire` found `.onDisk`), one cell row to
    /// each `stride` bytes from `target`. A cell once in the spill file is never written again,
    /// so this reads without the lock.
    func readRows(_ index: Int, rows: Range<Int>, into target: UnsafeMutableRawPointer, stride: Int) throws(TesseraError) {
        let span = drawings.size(index).width * 3
        let spill = lock.withLock { self.spill }
        guard let spill, !rows.isEmpty else { return }
        try spill.readBlocks(rows.count, blockBytes: span, at: Int64(index) * Int64(cellBytes) + Int64(rows.lowerBound * span),
                             into: target, stride: stride)
    }

    /// Unpins a slot returned by `acquire`.
    func release(slot: Int) {
        lock.withLock {
            slotPins[slot] -= 1
            guard slotPins[slot] == 0 else { return }
            if !rowsLeft.isEmpty, slotPhoto[slot] >= 0, rowsLeft[Int(slotPhoto[slot])] <= 0 { freeLocked(slot: slot) }
            changed.broadcast()
        }
    }

    /// Counts off `rows` canvas rows of key `index` drawn (a layout of frames; a grid ignores
    /// it). With none left, its slot is free again when no one holds it.
    func drew(_ index: Int, rows: Int) {
        lock.withLock {
            guard !rowsLeft.isEmpty else { return }
            rowsLeft[index] -= Int32(clamping: rows)
            guard rowsLeft[index] <= 0 else { return }
            forgetSpillLocked(index)
            guard case .resident(let slot) = states[index], slotPins[slot] == 0 else { return }
            freeLocked(slot: slot)
            changed.broadcast()
        }
    }

    /// Drops a drawn key's copy in the spill file: its pages would otherwise stay dirty in the
    /// page cache until written back to the disk, though never read again (a collage of 10,000
    /// photos at 64 MiB spilled 2.6 GB a run, and the kernel's writeback of it made run times
    /// vary from 7 to 17 s). Every read of it is done: `drew` follows each one. Called with
    /// `lock` held, so that no new copy is written while the hole is punched.
    private func forgetSpillLocked(_ index: Int) {
        guard states.onDisk(index), let spill else { return }
        switch states[index] {
        case .spilled: states[index] = .absent
        case .resident: break
        default: return
        }
        states.clearOnDisk(index)
        spill.punchHole(offset: Int64(index) * Int64(cellBytes), length: Int64(drawings.size(index).width * drawings.size(index).height * 3))
    }

    /// Empties unpinned `slot`, whose key is drawn: it is read from the spill file or decoded
    /// again if asked for once more. Called with `lock` held.
    private func freeLocked(slot: Int) {
        let key = Int(slotPhoto[slot])
        states[key] = states.onDisk(key) ? .spilled : .absent
        emptyLocked(slot: slot)
    }

    /// The arena bytes a cell of `bytes` takes: a grid's cells (one size) side by side, as its
    /// slots were (7 x 7 px cells rounded to a cache line would take a third more than planned);
    /// a layout of frames' at whole cache lines.
    private func placeBytes(_ bytes: Int) -> Int { Self.placeBytes(bytes, framed: drawings.framed != nil) }

    private static func placeBytes(_ bytes: Int, framed: Bool) -> Int { framed ? CellArena.rounded(bytes) : max(bytes, 1) }

    /// Gives `slot`'s place in the arena back, and the handle. Called with `lock` held.
    private func emptyLocked(slot: Int) {
        let size = drawings.size(Int(slotPhoto[slot]))
        slotPhoto[slot] = -1
        arena.free(offset: slotOffset[slot], length: placeBytes(size.width * size.height * 3))
        freeSlots.append(slot)
    }

    /// Whether photo `photo` (a photo's index, not a key) failed to decode in this render.
    func failed(photo: Int) -> Bool { lock.withLock { reportedFailures.contains(photo) } }

    /// Events (failures, warnings) collected since the last call, for the pipeline to deliver
    /// on the caller's thread.
    func takeEvents() -> [RenderEvent] {
        lock.withLock {
            let events = pendingEvents
            pendingEvents.removeAll()
            return events
        }
    }

    /// A slot of `bytes` in the arena, evicting the least recently used unpinned cells (spilling
    /// each to disk first if it has no copy there) until there is a place that large. nil when
    /// the pinned cells leave none. Called with `lock` held.
    private func takeSlotLocked(bytes: Int) throws(TesseraError) -> Int? {
        let length = placeBytes(bytes)
        while true {
            if !freeSlots.isEmpty, let offset = arena.take(length) {
                let slot = freeSlots.removeLast()
                slotOffset[slot] = offset
                return slot
            }
            var victim = -1
            var oldest = UInt64.max
            for slot in slotPhoto.indices where slotPhoto[slot] >= 0 && slotPins[slot] == 0 && slotLastUse[slot] < oldest {
                if case .resident = states[Int(slotPhoto[slot])] {
                    oldest = slotLastUse[slot]
                    victim = slot
                }
            }
            guard victim >= 0 else { return nil }
            let photo = Int(slotPhoto[victim])
            if !states.onDisk(photo) {
                // Under the lock: kept simple.
                if spill == nil { spill = try FileDescriptor.openAnonymousTemporary(in: spillDirectory) }
                let size = drawings.size(photo)
                try spill!.writeAll(UnsafeRawBufferPointer(start: memory + slotOffset[victim], count: size.width * size.height * 3),
                                    at: Int64(photo) * Int64(cellBytes))
                states.setOnDisk(photo)
            }
            states[photo] = .spilled
            emptyLocked(slot: victim)
        }
    }
}

/// Every photo's cache state in 4 bytes (a library of a million photos: 4 MB, where an array of
/// `State` and one of flags took 17): the state, and whether the photo's cell is in the spill
/// file, which outlives the state.
private struct PhotoStates {
    private var words: [UInt32]
    private static let onDiskBit: UInt32 = 1 << 31
    /// Codes below `firstSlot`; a resident cell is `firstSlot + slot`.
    private static let firstSlot: UInt32 = 5

    /// Bytes a photo costs.
    static let bytesPerPhoto = MemoryLayout<UInt32>.stride

    init(count: Int) { words = Array(repeating: 0, count: count) }

    subscript(index: Int) -> CellCache.StateCode {
        get {
            switch words[index] & ~Self.onDiskBit {
            case 0: return .absent
            case 1: return .decoding
            case 2: return .loading
            case 3: return .spilled
            case 4: return .failed
            case let code: return .resident(slot: Int(code - Self.firstSlot))
            }
        }
        set {
            let code: UInt32
            switch newValue {
            case .absent: code = 0
            case .decoding: code = 1
            case .loading: code = 2
            case .spilled: code = 3
            case .failed: code = 4
            case .resident(let slot): code = Self.firstSlot + UInt32(slot)
            }
            words[index] = (words[index] & Self.onDiskBit) | code
        }
    }

    func onDisk(_ index: Int) -> Bool { words[index] & Self.onDiskBit != 0 }

    mutating func setOnDisk(_ index: Int) { words[index] |= Self.onDiskBit }

    mutating func clearOnDisk(_ index: Int) { words[index] &= ~Self.onDiskBit }
}

/// Places in the cell cache's memory: first fit among the free ranges, which are kept sorted and
/// merged. Cells of one size (a grid's) take the places fixed slots would.
struct CellArena {
    /// Free ranges as (offset, length), sorted by offset, none touching another.
    private(set) var free: [(offset: Int, length: Int)]

    init(bytes: Int) { free = bytes > 0 ? [(0, bytes)] : [] }

    /// `bytes` rounded up to the arena's unit (64 bytes, a cache line).
    static func rounded(_ bytes: Int) -> Int { (max(bytes, 1) + 63) & ~63 }

    /// The offset of `length` bytes taken from the first free range that holds them, or nil.
    mutating func take(_ length: Int) -> Int? {
        guard let index = free.firstIndex(where: { $0.length >= length }) else { return nil }
        let offset = free[index].offset
        if free[index].length == length {
            free.remove(at: index)
        } else {
            free[index] = (offset + length, free[index].length - length)
        }
        return offset
    }

    /// Gives back `length` bytes at `offset` (taken with `take`), merging with the free
    /// ranges either side.
    mutating func free(offset: Int, length: Int) {
        var low = 0, high = free.count
        while low < high {
            let middle = (low + high) / 2
            if free[middle].offset < offset { low = middle + 1 } else { high = middle }
        }
        let joinsBefore = low > 0 && free[low - 1].offset + free[low - 1].length == offset
        let joinsAfter = low < free.count && offset + length == free[low].offset
        switch (joinsBefore, joinsAfter) {
        case (true, true):
            free[low - 1].length += length + free[low].length
            free.remove(at: low)
        case (true, false):
            free[low - 1].length += length
        case (false, true):
            free[low] = (offset, length + free[low].length)
        case (false, false):
            free.insert((offset, length), at: low)
        }
    }
}
