// StripeRenderer.swift — a render, start to end: the request's outputs become sinks, the
// stripe pipeline fills and writes the canvas, the outputs are committed.
//
// Threading: `render` runs on the caller's thread (the pipeline's writer) and starts the
// pipeline's workers (StripePipeline.swift); everything a render changes is made by that call
// and dropped at its end, so a renderer holds no per-render state and may render again, even
// from several threads at once. Events reach the observer on the calling thread only.
import CTesseraShims

public final class StripeRenderer: Sendable {
    public let request: RenderRequest
    public let plan: RenderPlan
    private let cancellation: RenderCancellation?
    /// The part of the render this process makes (RenderPart.swift), or nil for all of it.
    let part: (any RenderPart)?

    public var photos: PhotoTable { request.photos }
    public var layout: CellLayout { request.layout }
    public var settings: RenderSettings { request.settings }

    /// Validates `request` (its outputs, their folders and names; RenderRequest.validate) and
    /// plans the render (settings, canvas size, memory; RenderPlan.make). With `partChooser`,
    /// renders only the part it chooses of the planned render, into the part's sink.
    init(request: RenderRequest, cancellation: RenderCancellation?, partChooser: (any RenderPartChooser)?) throws(TesseraError) {
        var request = request
        try partChooser?.adjust(&request)
        try request.validate()
        self.request = request
        self.cancellation = cancellation
        // The whole decodes (their distinct sizes) and the largest multi-scan buffer, in one pass
        // over the photos (a table of a million is read, never copied).
        var wholeImageNeeds = Set<Int>(), multiScanBytes = 0
        for photo in request.photos {
            let whole = photo.header.wholeImageBytes(cellWidth: request.layout.cellWidth, cellHeight: request.layout.cellHeight)
            if whole > 0 { wholeImageNeeds.insert(whole) }
            multiScanBytes = max(multiScanBytes, photo.header.multiScanBytes(cellWidth: request.layout.cellWidth,
                                                                             cellHeight: request.layout.cellHeight))
        }
        let plan = try RenderPlan.make(layout: request.layout, settings: request.settings, writing: request.outputs.map(\.kind),
                                       wholeImageNeeds: Array(wholeImageNeeds), multiScanBytes: multiScanBytes,
                                       photoBytes: Self.photoBytes(request.photos))
        self.plan = plan
        part = try partChooser?.part(of: request, plan: plan)
    }

    /// What the render keeps for each photo, whatever it draws: the table's resident part and
    /// the cell cache's state a photo.
    static func photoBytes(_ photos: PhotoTable) -> Int {
        photos.plannedBytes + photos.count * CellCache.bytesPerPhoto
    }

    /// Removes what dead renders left in the folders this render uses (their hidden temporaries
    /// and pyramid staging folders, named with their pid) and returns their paths. `render` does
    /// this first; call it before a free-space pre-flight too, so that their space counts as free.
    public func removeStaleTemporaries() -> [String] {
        var stale = Set<String>()
        for output in request.outputs { stale.formUnion(StaleTemporaries.remove(in: parentDirectory(of: output.path))) }
        stale.formUnion(StaleTemporaries.remove(in: plan.temporaryDirectory))
        stale.formUnion(StaleTemporaries.remove(in: plan.stripeDirectory))
        for directory in part?.directories ?? [] { stale.formUnion(StaleTemporaries.remove(in: directory)) }
        return stale.sorted()
    }

    /// Renders the layout in one pass into every output of the request; each appears only when
    /// complete, replacing what was at its name. On failure or cancellation nothing of the
    /// render is left and what was at the outputs' names is untouched. `manifest` is written
    /// once the stripes are done and moved into place with the outputs (by a part of a render,
    /// into the part, for the join).
    public func render(manifest: ManifestOutput? = nil, observer: (RenderEvent) -> Void = { _ in }) throws(TesseraError) -> RenderSummary {
        let started = monotonicSeconds()
        for path in removeStaleTemporaries() { observer(.staleTemporaryRemoved(path: path)) }
        let sinks = try makeSinks()
        let store: StripeStore
        do throws(TesseraError) {
            store = try StripeStore(directory: plan.stripeDirectory, stripeBytes: plan.stripeBytes, slotCount: plan.windowStripes)
        } catch {
            for sink in sinks { sink.discard() }
            throw error
        }
        var source: (any CellSource)?
        do throws(TesseraError) {
            source = try part?.makeCellSource(plan: plan, layout: layout, photoCount: photos.count)
        } catch {
            store.releaseAll()
            for sink in sinks { sink.discard() }
            throw error
        }
        let cache = CellCache(photos: photos,
                              decoder: CellDecoder(cellWidth: layout.cellWidth, cellHeight: layout.cellHeight,
                                                   budget: DecodeBudget(poolBytes: plan.decodePoolBytes,
                                                                        spillDirectory: plan.temporaryDirectory,
                                                                        wholeImageLimitBytes: plan.wholeImageLimitBytes,
                                                                        processBudgetBytes: settings.maxMemoryBytes),
                                                   cancellation: cancellation, background: settings.background),
                              slotCount: plan.cellSlots, spillDirectory: plan.temporaryDirectory, source: source,
                              drawings: CellDrawings(layout: layout, photoCount: photos.count))
        cache.failOnPlaceholder = settings.failOnPlaceholder
        // The viewer's previews, made with the cells' decoder after the last stripe (a part's
        // share of them, by a part of the render).
        if let zoom = plan.deepZoomSettings, zoom.previews > 0, zoom.viewer {
            var previews = PhotoPreviews(photos: photos, layout: layout, longSide: zoom.previews, quality: zoom.quality,
                                         subsampling: settings.subsampling, decoder: cache.decoder, workers: plan.workers,
                                         failedInRender: { [cache] photo in cache.failed(photo: photo) })
            previews.share = part?.previewShare ?? (0, 1)
            if let sink = sinks.lazy.compactMap({ $0 as? PreviewSink }).first { sink.previews = previews }
        }
        let drawn = { [plan, cache] () -> RenderSummary in
            var summary = RenderSummary(width: plan.width, height: plan.height, seconds: monotonicSeconds() - started,
                                        outputBytes: 0, peakResidentBytes: peakResidentBytes(),
                                        photosDecoded: cache.decodedCount, failedPhotos: cache.failedPhotos)
            summary.cellsShared = cache.fromSourceCount
            summary.partialPhotos = cache.partialPhotos
            return summary
        }
        // A part of a render hands the manifest to the join (which has every part's placeholders).
        if let manifest, part != nil, let sink = sinks.lazy.compactMap({ $0 as? ManifestSink }).first {
            sink.manifest = (manifest, drawn)
        }
        let painter = CellPainter(layout: layout, geometry: plan.geometry, cache: cache, tint: request.tint,
                                  background: settings.background)
        do throws(TesseraError) {
            let pipeline = StripePipeline(plan: plan, store: store, painter: painter, sinks: sinks, cancellation: cancellation,
                                          stripes: part?.stripes)
            try HeapKeeping.shared.whileStripesRun { () throws(TesseraError) in try pipeline.run(observer: observer) }
        } catch {
            store.releaseAll()
            for sink in sinks { sink.discard() }
            throw error
        }
        store.releaseAll()
        // In order: the manifest, the pyramid (its commit checks the names again and may still
        // refuse), the JPEG's rename last, all as one (OutputCommit): a failure undoes the
        // outputs moved in before it, and discards every output.
        var manifestFile: AtomicOutputFile?
        do throws(TesseraError) {
            if let manifest, part == nil { manifestFile = try manifest.stage(drawn()) }
            let folders = (request.outputs.map(\.path) + [manifestFile?.destination].compactMap { $0 }).map { parentDirectory(of: $0) }
            try OutputCommit.all(locking: folders, cancellation: cancellation) { commit throws(TesseraError) in
                try manifestFile?.commit(in: commit)
                for sink in sinks { try sink.commit(in: commit) }
            }
        } catch {
            manifestFile?.discard()
            for sink in sinks { sink.discard() }
            throw error
        }
        for event in cache.takeEvents() { observer(event) }
        var summary = drawn()
        for sink in sinks { sink.record(into: &summary) }
        return summary
    }

    /// One sink per output, the pyramids first (the first runs the batches the others' work
    /// joins); the JPEG's by the plan's compression. A part has a sink of its own.
    private func makeSinks() throws(TesseraError) -> [StripeSink] {
        if let part { return [try part.makeSink(plan: plan, request: request)] }
        var sinks: [StripeSink] = []
        let ordered = request.outputs.filter { $0.kind != .jpeg } + request.outputs.filter { $0.kind == .jpeg }
        do throws(TesseraError) {
            // A pyramid's folder and its SZI are one sink: the tiles are encoded once for both.
            var pyramidMade = false
            for output in ordered {
                switch output {
                case .deepZoom(_, let zoom), .deepZoomArchive(_, let zoom), .iiif(_, let zoom, _):
                    guard !pyramidMade else { continue }
                    pyramidMade = true
                    sinks.append(try DeepZoomOutput(destination: request.deepZoomPath, archive: request.deepZoomArchivePath, iiif: request.iiif,
                                                    geometry: plan.deepZoom!, settings: zoom, subsampling: settings.subsampling,
                                                    labels: CellLabels(layout: layout, photos: photos, shown: zoom.labels),
                                                    threads: plan.workers, temporaryDirectory: plan.temporaryDirectory))
                case .tiff(let path, let tiff):
                    sinks.append(try PyramidTIFFOutput(destination: path, geometry: plan.tiff!, settings: tiff,
                                                       subsampling: settings.subsampling, threads: plan.workers,
                                                       temporaryDirectory: plan.temporaryDirectory))
                case .jpeg(let path):
                    switch plan.compression {
                    case .scanlinesOnWriter, .scanlinesInPyramidBatch:
                        sinks.append(try SerialJPEGSink(path: path, width: plan.width, height: plan.height, quality: settings.quality,
                                                        subsampling: settings.subsampling, restartInterval: plan.restartInterval,
                                                        marks: .output(dotsPerInch: settings.dotsPerInch)))
                    case .segmentsOnWorkers, .segmentsInPyramidBatch:
                        sinks.append(try RestartMarkerJPEGSink(path: path, geometry: plan.geometry, quality: settings.quality,
                                                               subsampling: settings.subsampling, restartInterval: plan.restartInterval,
                                                               compressOnWorkers: plan.compression == .segmentsOnWorkers,
                                                               marks: .output(dotsPerInch: settings.dotsPerInch)))
                    case .none:
                        preconditionFailure("a JPEG output in a plan without compression")
                    }
                }
            }
        } catch {
            for sink in sinks { sink.discard() }
            throw error
        }
        return sinks
    }
}

/// A flag a caller (a signal handler's thread, a UI) sets to stop a render at the next stripe.
///
/// Threading: any thread may cancel or read. One flag, read by Swift and by the C decoders
/// alike (they poll it between scans and rows): an int written and read with relaxed C atomics
/// (tessera_flag_raise, tessera_flag_is_raised). Relaxed is enough: it only ever goes from 0 to
/// 1, and nothing else is published through it (a reader that sees it stops; one that does not
/// yet sees it at its next check).
public final class RenderCancellation: @unchecked Sendable {
    /// Allocated for the object's life, so the C decoders may hold its address.
    let flag: UnsafeMutablePointer<Int32>
    public init() {
        flag = .allocate(capacity: 1)
        flag.initialize(to: 0)
    }
    deinit { flag.deallocate() }
    public func cancel() { tessera_flag_raise(flag) }
    public var isCancelled: Bool { tessera_flag_is_raised(flag) != 0 }
}
