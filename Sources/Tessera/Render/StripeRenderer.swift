// StripeRenderer.swift — the pipeline: workers fill stripes, one writer encodes them in order.
//
//      photos ──decode at draw size──▶ CellCache ──copy rows──▶ stripe slots (mmapped temp file)
//                (worker threads)                                   │  window of N stripes
//                                                                   ▼
//                  AtomicOutputFile ◀── JPEGScanlineWriter ◀── writer (the caller's thread)
//
// Threading contract:
// - `render` runs the writer on the calling thread and `plan.workers` worker threads of its own
//   (not Dispatch's pool, which the Deep Zoom writer's parallel jobs need: see Threads.swift).
// - Workers claim stripe indices in increasing order (`nextStripe`). Stripe i uses slot
//   i % window and is mapped only once stripe i - window has been encoded (`encodedCount`), so at
//   most `window` stripes exist at once (back-pressure) and a slot is never shared.
// - The writer takes stripe i only when its worker has published it in `ready[i % window]`,
//   encodes its rows top to bottom and advances `encodedCount`. The encoder therefore sees every
//   row once, in order, never with gaps (the same contract as libvips's sink_disc).
// - Ownership: a slot's bytes belong to the worker filling stripe i until it is published, then
//   to the writer until `encodedCount` passes i, then to the worker of stripe i + window. The
//   mappings themselves belong to the StripeStore, which releases them when the render ends.
// - Parallel encoder (plan.encoder == .parallel): the worker also compresses its stripe on its own
//   (EncodedStripe) and publishes the compressed segment; the writer only appends segments in
//   order with RST markers between them (see StripeSegments.swift). Segments in flight are
//   bounded by the same window.
// - Deep Zoom (plan.deepZoom): the writer feeds each stripe's rows to the pyramid
//   (DeepZoomWriter), whose batch of jobs runs on every core; the JPEG's share of the stripe
//   (the serial encoder's rows, or the parallel encoder's segment, which workers then do not
//   make) runs as one more job of that batch, so two busy threads share two cores, not four.
// - Errors: the first error from any thread is kept in `failure`; everyone stops at the next
//   check, the writer discards the output, and `render` throws that error.
// - Events reach the observer on the calling thread only.
import CTesseraShims

public final class StripeRenderer: @unchecked Sendable {
    public let photos: [Photo]
    public let layout: CellLayout
    public let settings: RenderSettings
    public let plan: RenderPlan
    private let cancellation: RenderCancellation?
    /// Per-cell colour shift toward a mosaic's target, applied while cells are drawn.
    public let tint: CellTint?

    public init(photos: [Photo], layout: CellLayout, settings: RenderSettings,
                cancellation: RenderCancellation? = nil, tint: CellTint? = nil) throws(TesseraError) {
        changed = Condition(lock)
        self.tint = tint
        self.photos = photos
        self.layout = layout
        self.settings = settings
        self.cancellation = cancellation
        plan = try RenderPlan.make(layout: layout, settings: settings)
    }

    // Shared pipeline state, protected by `lock`; `changed` is broadcast on every change.
    // (`changed` is created in init, not lazily: a lazy property is not safe to initialise from
    // several threads.) One render at a time per renderer: the state below is per render.
    private let lock = Mutex()
    private let changed: Condition
    private var nextStripe = 0
    private var encodedCount = 0
    private var ready: [(index: Int, stripe: FinishedStripe)?] = []
    private var failure: TesseraError?

    /// Renders the layout into a baseline JPEG at `outputPath`, which appears only when complete.
    public func render(to outputPath: String, observer: (RenderEvent) -> Void = { _ in }) throws(TesseraError) -> RenderSummary {
        return try render(jpeg: outputPath, deepZoom: nil, observer: observer)
    }

    /// Renders the layout in one pass into a baseline JPEG at `jpeg`, a Deep Zoom pyramid at
    /// `deepZoom` (DIR/NAME.dzi, with NAME_files and, with the viewer, NAME.html), or both; each
    /// appears only when complete. Which of them are written was fixed by the settings
    /// (`writesJPEG`, `deepZoom`). `labels` names the photo in each cell for the viewer.
    /// Removes what dead renders left in the folders this render uses (their hidden temporaries
    /// and pyramid staging folders, named with their pid) and returns their paths. `render` does
    /// this first; call it before a free-space pre-flight too, so that their space counts as free.
    public func removeStaleTemporaries(jpeg: String?, deepZoom: String?) -> [String] {
        var stale = Set<String>()
        for path in [jpeg, deepZoom].compactMap({ $0 }) { stale.formUnion(StaleTemporaries.remove(in: parentDirectory(of: path))) }
        stale.formUnion(StaleTemporaries.remove(in: plan.temporaryDirectory))
        stale.formUnion(StaleTemporaries.remove(in: plan.stripeDirectory))
        return stale.sorted()
    }

    public func render(jpeg: String?, deepZoom: String?, labels: CellLabels? = nil,
                       observer: (RenderEvent) -> Void = { _ in }) throws(TesseraError) -> RenderSummary {
        guard (jpeg != nil) == plan.writesJPEG, (deepZoom != nil) == (plan.deepZoom != nil) else {
            throw .invalidSettings("the outputs asked for do not match the render settings (writesJPEG, deepZoom)")
        }
        let started = monotonicSeconds()
        let geometry = plan.geometry
        let label = jpeg ?? deepZoom!
        for path in removeStaleTemporaries(jpeg: jpeg, deepZoom: deepZoom) { observer(.staleTemporaryRemoved(path: path)) }
        let output = try jpeg.map { path throws(TesseraError) in try AtomicOutputFile(destination: path) }
        var pyramid: DeepZoomOutput?
        if let deepZoom, let pyramidGeometry = plan.deepZoom, let pyramidSettings = settings.deepZoom {
            pyramid = try DeepZoomOutput(destination: deepZoom, geometry: pyramidGeometry, settings: pyramidSettings,
                                         subsampling: settings.subsampling, labels: labels, threads: plan.workers)
        }
        let store: StripeStore
        do throws(TesseraError) {
            store = try StripeStore(directory: plan.stripeDirectory, stripeBytes: plan.stripeBytes, slotCount: plan.windowStripes)
        } catch {
            pyramid?.discard()
            throw error
        }
        let cache = CellCache(photos: photos,
                              decoder: CellDecoder(cellWidth: layout.cellWidth, cellHeight: layout.cellHeight,
                                                   budget: DecodeBudget(poolBytes: plan.decodePoolBytes,
                                                                        spillDirectory: plan.temporaryDirectory),
                                                   cancellation: cancellation),
                              slotCount: plan.cellSlots, spillDirectory: plan.temporaryDirectory)
        lock.withLock {
            nextStripe = 0
            encodedCount = 0
            failure = nil
            ready = Array(repeating: nil, count: plan.windowStripes)
        }

        var threads: [JoinableThread] = []
        var writeError: TesseraError?
        do throws(TesseraError) {
            // Serial: one libjpeg encoder on this thread. Parallel: workers compress, this thread joins.
            let writer = plan.writesJPEG && plan.encoder == .serial
                ? try JPEGScanlineWriter(sink: output!, label: label, width: geometry.width, height: geometry.height,
                                         quality: settings.quality, subsampling: settings.subsampling,
                                         restartInterval: plan.restartInterval)
                : nil
            for _ in 0..<plan.workers {
                threads.append(try JoinableThread { self.workerLoop(store: store, cache: cache, label: label) })
            }
            for index in 0..<geometry.stripeCount {
                let rows = geometry.rows(ofStripe: index)
                let finished = try waitForStripe(index)
                var segment = finished.segment
                if writer != nil || pyramid != nil {
                    try finished.region.withUnsafeMutableBytes { bytes throws(TesseraError) in
                        let pixels = UnsafeRawPointer(bytes.baseAddress!)
                        // The JPEG's part of this stripe: the serial encoder's rows, or, with a
                        // pyramid, the parallel encoder's segment (see workerLoop). With a
                        // pyramid it runs as one more job of the pyramid's batch.
                        var jpegResult: Result<EncodedStripe?, TesseraError> = .success(nil)
                        var jpegJob: (() -> Void)?
                        if let writer {
                            jpegJob = {
                                jpegResult = Result { () throws(TesseraError) -> EncodedStripe? in
                                    try writer.write(rows: pixels, stride: geometry.bytesPerRow, count: rows.count)
                                    return nil
                                }
                            }
                        } else if plan.writesJPEG && segment == nil {
                            jpegJob = {
                                jpegResult = Result { () throws(TesseraError) -> EncodedStripe? in
                                    try EncodedStripe.encode(rows: pixels, stride: geometry.bytesPerRow, width: geometry.width,
                                                             rowCount: rows.count, quality: self.settings.quality,
                                                             subsampling: self.settings.subsampling, label: label)
                                }
                            }
                        }
                        if let pyramid {
                            try pyramid.writer.append(rows: pixels, stride: geometry.bytesPerRow, count: rows.count, alongside: jpegJob)
                        } else {
                            jpegJob?()
                        }
                        if let encoded = try jpegResult.get() { segment = encoded }
                    }
                }
                if let segment {
                    try writeSegment(segment, index: index, to: output!, label: label)
                }
                lock.withLock {
                    ready[index % plan.windowStripes] = nil
                    encodedCount = index + 1
                    changed.broadcast()
                }
                for event in cache.takeEvents() { observer(event) }
                observer(.progress(rowsWritten: rows.upperBound, totalRows: geometry.height))
                if cancellation?.isCancelled == true { throw TesseraError.cancelled }
            }
            try writer?.finish()
        } catch {
            writeError = error
        }
        if let writeError { fail(writeError) }
        for thread in threads { thread.join() }
        lock.withLock { ready = Array(repeating: nil, count: plan.windowStripes) }
        store.releaseAll()
        if let error = lock.withLock({ failure }) {
            output?.discard()
            pyramid?.discard()
            throw error
        }
        do throws(TesseraError) {
            try pyramid?.commit()
        } catch {
            output?.discard()
            pyramid?.discard()
            throw error
        }
        try output?.commit()
        for event in cache.takeEvents() { observer(event) }
        var summary = RenderSummary(width: geometry.width, height: geometry.height, seconds: monotonicSeconds() - started,
                                    outputBytes: output?.bytesWritten ?? 0, peakResidentBytes: peakResidentBytes(),
                                    photosDecoded: cache.decodedCount, failedPhotos: cache.failedPhotos)
        summary.deepZoomTiles = pyramid?.tilesWritten ?? 0
        summary.deepZoomBytes = pyramid?.bytesWritten ?? 0
        return summary
    }

    /// Records the first error and wakes everyone so they stop.
    private func fail(_ error: TesseraError) {
        lock.withLock {
            if failure == nil { failure = error }
            changed.broadcast()
        }
    }

    /// Appends a compressed stripe: the file header first (from stripe 0), then its entropy-coded
    /// data, then RST0...RST7 cycling between stripes, or EOI after the last.
    private func writeSegment(_ segment: EncodedStripe, index: Int, to output: AtomicOutputFile, label: String) throws(TesseraError) {
        let geometry = plan.geometry
        if index == 0 {
            let header = try segment.fileHeader(height: geometry.height, restartInterval: plan.restartInterval, label: label)
            try header.withUnsafeBytes { bytes in Result { () throws(TesseraError) in try output.append(bytes) } }.get()
        }
        try segment.jpeg.withUnsafeBytes { bytes in
            Result { () throws(TesseraError) in try output.append(UnsafeRawBufferPointer(rebasing: bytes[segment.entropy])) }
        }.get()
        let trailer: [UInt8] = index + 1 < geometry.stripeCount ? [0xFF, 0xD0 + UInt8(index % 8)] : [0xFF, 0xD9]
        try trailer.withUnsafeBytes { bytes in Result { () throws(TesseraError) in try output.append(bytes) } }.get()
    }

    /// A stripe ready for the writer: its mapped pixels, and with the parallel encoder its
    /// compressed segment.
    private struct FinishedStripe {
        let region: MappedRegion
        let segment: EncodedStripe?
    }

    /// The writer's wait for stripe `index` to be filled; throws the pipeline's failure.
    private func waitForStripe(_ index: Int) throws(TesseraError) -> FinishedStripe {
        let slot = index % plan.windowStripes
        lock.lock()
        defer { lock.unlock() }
        while true {
            if let failure { throw failure }
            if let entry = ready[slot], entry.index == index { return entry.stripe }
            changed.wait()
        }
    }

    private func workerLoop(store: StripeStore, cache: CellCache, label: String) {
        let window = plan.windowStripes
        while true {
            // Claim the next stripe and wait until its slot is free.
            let index: Int? = lock.withLock {
                guard failure == nil, nextStripe < plan.geometry.stripeCount else { return nil }
                let claimed = nextStripe
                nextStripe += 1
                while failure == nil && claimed - window >= encodedCount { changed.wait() }
                return failure == nil ? claimed : nil
            }
            guard let index else { return }
            if cancellation?.isCancelled == true { fail(.cancelled); return }
            do throws(TesseraError) {
                let region = try store.mapping(slot: index % window)
                let rows = plan.geometry.rows(ofStripe: index)
                let finished = try region.withUnsafeMutableBytes { bytes throws(TesseraError) -> FinishedStripe in
                    try fill(stripe: index, into: bytes, cache: cache)
                    // With a pyramid as well, the writer compresses the stripe in its batch of
                    // pyramid jobs: workers compressing too would make four busy threads on two
                    // cores fighting over them.
                    guard plan.writesJPEG && plan.encoder == .parallel && plan.deepZoom == nil else {
                        return FinishedStripe(region: region, segment: nil)
                    }
                    return FinishedStripe(region: region, segment: try EncodedStripe.encode(
                        rows: UnsafeRawPointer(bytes.baseAddress!), stride: plan.geometry.bytesPerRow, width: plan.geometry.width,
                        rowCount: rows.count, quality: settings.quality, subsampling: settings.subsampling, label: label))
                }
                lock.withLock {
                    ready[index % window] = (index, finished)
                    changed.broadcast()
                }
            } catch {
                fail(error)
                return
            }
        }
    }

    /// Draws every cell row that stripe `index` crosses into `bytes` (the stripe's rows).
    /// Cells whose photo another worker is decoding are drawn last, so two workers on one cell
    /// row decode different photos instead of waiting on each other.
    func fill(stripe index: Int, into bytes: UnsafeMutableRawBufferPointer, cache: CellCache) throws(TesseraError) {
        let rows = plan.geometry.rows(ofStripe: index)
        let cellHeight = layout.cellHeight
        let firstCellRow = rows.lowerBound / cellHeight
        let lastCellRow = (rows.upperBound - 1) / cellHeight
        var deferred: [(column: Int, row: Int)] = []
        for cellRow in firstCellRow...lastCellRow {
            for column in 0..<layout.columns {
                if try !drawCell(column: column, row: cellRow, rows: rows, into: bytes, cache: cache, wait: false) {
                    deferred.append((column, cellRow))
                }
            }
        }
        for cell in deferred {
            _ = try drawCell(column: cell.column, row: cell.row, rows: rows, into: bytes, cache: cache, wait: true)
        }
    }

    /// Copies the part of cell (`column`, `row`) that lies in `rows` into the stripe.
    /// Returns false when the cell was busy and `wait` is false.
    private func drawCell(column: Int, row: Int, rows: Range<Int>, into bytes: UnsafeMutableRawBufferPointer,
                          cache: CellCache, wait: Bool) throws(TesseraError) -> Bool {
        let cellWidth = layout.cellWidth, cellHeight = layout.cellHeight
        let top = max(rows.lowerBound, row * cellHeight)
        let bottom = min(rows.upperBound, (row + 1) * cellHeight)
        let rowBytes = plan.geometry.bytesPerRow
        let spanBytes = cellWidth * 3
        let destination = bytes.baseAddress! + column * spanBytes
        let photo = layout.photo(column: column, row: row)
        var lookup = CellCache.Lookup.failed
        if photo >= 0 {
            lookup = try cache.acquire(photo: photo, wait: wait)
        }
        switch lookup {
        case .busy:
            return false
        case .cell(let pixels, let slot):
            if let tint {
                let offsets = tint.offsets(cell: row * layout.columns + column, photo: photo)
                for y in top..<bottom {
                    tint.apply(offsets, row: y - row * cellHeight, cellWidth: cellWidth, cellHeight: cellHeight,
                               from: (pixels + (y - row * cellHeight) * spanBytes).assumingMemoryBound(to: UInt8.self),
                               to: (destination + (y - rows.lowerBound) * rowBytes).assumingMemoryBound(to: UInt8.self))
                }
            } else {
                for y in top..<bottom {
                    (destination + (y - rows.lowerBound) * rowBytes)
                        .copyMemory(from: pixels + (y - row * cellHeight) * spanBytes, byteCount: spanBytes)
                }
            }
            cache.release(slot: slot)
        case .failed:
            let colour = settings.background
            for y in top..<bottom {
                let line = (destination + (y - rows.lowerBound) * rowBytes).assumingMemoryBound(to: UInt8.self)
                for x in 0..<cellWidth {
                    line[x * 3] = colour.red
                    line[x * 3 + 1] = colour.green
                    line[x * 3 + 2] = colour.blue
                }
            }
        }
        return true
    }
}

/// A flag a caller (a signal handler's thread, a UI) sets to stop a render at the next stripe.
public final class RenderCancellation: @unchecked Sendable {
    private let lock = Mutex()
    private var cancelled = false  // protected by `lock`
    /// The same, for the C decoders to poll between scans and rows (atomic, see
    /// tessera_flag_raise); allocated for the object's life.
    let flag: UnsafeMutablePointer<Int32>
    public init() {
        flag = .allocate(capacity: 1)
        flag.initialize(to: 0)
    }
    deinit { flag.deallocate() }
    public func cancel() {
        lock.withLock { cancelled = true }
        tessera_flag_raise(flag)
    }
    public var isCancelled: Bool { lock.withLock { cancelled } }
}
