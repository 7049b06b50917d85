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
// Memory: `slotCount` cells at most (the budget the plan gave). When a library has more distinct
// photos than fit, an evicted cell is first written to an anonymous spill file (pwrite, page
// cache only, not in the process's RSS) and read back with pread when needed again, so no photo
// is decoded twice.
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
    /// A slot's bytes: the largest cell.
    let cellBytes: Int
    let slotCount: Int
    private let photos: PhotoTable
    private let spillDirectory: String
    private let memory: UnsafeMutableRawPointer

    private let lock = Mutex()
    private let changed: Condition
    // Protected by `lock`:
    private var states: PhotoStates
    private var slotPhoto: [Int]
    private var slotPins: [Int]
    private var slotLastUse: [UInt64]
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
    /// Photos already reported as failed (a photo drawn at two sizes fails twice, is told once).
    private var reportedFailures = Set<Int>()
    /// Where cells may come from before they are decoded (RenderPart.swift), or nil.
    private let source: (any CellSource)?

    /// Bytes the cache keeps a photo, drawn or not (its state).
    static var bytesPerPhoto: Int { PhotoStates.bytesPerPhoto }

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
        // Reserved, not touched: pages become resident only as slots fill.
        memory = .allocate(byteCount: cellBytes * slotCount, alignment: 64)
        changed = Condition(lock)
        states = PhotoStates(count: self.drawings.count)
        slotPhoto = Array(repeating: -1, count: slotCount)
        slotPins = Array(repeating: 0, count: slotCount)
        slotLastUse = Array(repeating: 0, count: slotCount)
        freeSlots = Array((0..<slotCount).reversed())
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
        var slot = -1
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
                    return .cell(UnsafeRawPointer(memory + resident * cellBytes), slot: resident)
                case .failed:
                    return .failed
                case .decoding, .loading:
                    if !wait { return .busy }
                    changed.wait()
                    continue
                case .spilled where partial:
                    return .onDisk
                case .absent, .spilled:
                    guard let free = try takeSlotLocked() else {
                        // Every slot is pinned by other workers: wait for one to be released.
                        changed.wait()
                        continue
                    }
                    slot = free
                    fromDisk = states.onDisk(index)
                    states[index] = fromDisk ? .loading : .decoding
                    slotPhoto[slot] = index
                    slotPins[slot] = 1
                }
                break
            }
        }
        // Fill the pinned slot outside the lock.
        let size = drawings.size(index)
        let bytes = UnsafeMutableRawBufferPointer(start: memory + slot * cellBytes, count: size.width * size.height * 3)
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
            }
            return .cell(UnsafeRawPointer(bytes.baseAddress!), slot: slot)
        case .failure(let error):
            slotPins[slot] = 0
            slotPhoto[slot] = -1
            freeSlots.append(slot)
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
            if !rowsLeft.isEmpty, slotPhoto[slot] >= 0, rowsLeft[slotPhoto[slot]] <= 0 { freeLocked(slot: slot) }
            changed.broadcast()
        }
    }

    /// Counts off `rows` canvas rows of key `index` drawn (a layout of frames; a grid ignores
    /// it). With none left, its slot is free again when no one holds it.
    func drew(_ index: Int, rows: Int) {
        lock.withLock {
            guard !rowsLeft.isEmpty else { return }
            rowsLeft[index] -= Int32(clamping: rows)
            guard rowsLeft[index] <= 0, case .resident(let slot) = states[index], slotPins[slot] == 0 else { return }
            freeLocked(slot: slot)
            changed.broadcast()
        }
    }

    /// Empties unpinned `slot`, whose key is drawn: it is read from the spill file or decoded
    /// again if asked for once more. Called with `lock` held.
    private func freeLocked(slot: Int) {
        let key = slotPhoto[slot]
        states[key] = states.onDisk(key) ? .spilled : .absent
        slotPhoto[slot] = -1
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

    /// A free slot, evicting the least recently used unpinned cell (spilling it to disk first if
    /// it has no copy there). nil when every slot is pinned. Called with `lock` held.
    private func takeSlotLocked() throws(TesseraError) -> Int? {
        if let free = freeSlots.popLast() { return free }
        var victim = -1
        var oldest = UInt64.max
        for slot in 0..<slotCount where slotPins[slot] == 0 && slotLastUse[slot] < oldest {
            if case .resident = states[slotPhoto[slot]] {
                oldest = slotLastUse[slot]
                victim = slot
            }
        }
        guard victim >= 0 else { return nil }
        let photo = slotPhoto[victim]
        if !states.onDisk(photo) {
            // Under the lock: a rare path (libraries larger than the cache), kept simple.
            if spill == nil { spill = try FileDescriptor.openAnonymousTemporary(in: spillDirectory) }
            let size = drawings.size(photo)
            try spill!.writeAll(UnsafeRawBufferPointer(start: memory + victim * cellBytes, count: size.width * size.height * 3),
                                at: Int64(photo) * Int64(cellBytes))
            states.setOnDisk(photo)
        }
        states[photo] = .spilled
        slotPhoto[victim] = -1
        return victim
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
}
