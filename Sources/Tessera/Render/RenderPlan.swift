// RenderPlan.swift — how a render will spend its memory and disk, decided before it starts.
//
// The budget (`RenderSettings.maxMemoryBytes`) is split, in this order, into: a fixed allowance
// for the process (Swift runtime, libraries, code), the encoder's row buffers (proportional to
// the width), the decoders' shared pool (DecodeBudget: every photo decode, progressive ones
// with their whole-image buffers, is admitted against it), then the stripe window and the
// cell cache. Stripes default
// to 64 rows (beyond that the encoder gains nothing and memory grows); the cell cache gets what
// is left, up to what all distinct photos need.

/// The largest side a baseline JPEG can have (libjpeg's JPEG_MAX_DIMENSION).
public let jpegMaxDimension = 65_500

/// How the JPEG's stripes are compressed: decided once, by the plan; the renderer and the
/// memory accounting read it and nothing else.
public enum StripeCompression: Equatable, Sendable {
    /// No JPEG (pyramids alone).
    case none
    /// One libjpeg scanline encoder on the writer, fed each stripe's rows in order.
    case scanlinesOnWriter
    /// The same encoder, its rows for each stripe run as one more job of the pyramid's batch (two
    /// busy threads on two cores, not three).
    case scanlinesInPyramidBatch
    /// Each worker compresses the stripe it filled on its own; the writer joins the segments
    /// with restart markers (RestartMarkerJPEG.swift).
    case segmentsOnWorkers
    /// With a pyramid, the writer compresses each stripe as one more job of the pyramid's batch
    /// instead: workers compressing as well would make four busy threads on two cores.
    case segmentsInPyramidBatch

    /// The one decision about compression, which the plan's accounting and the renderer read:
    /// none without a JPEG; else the `encoder`'s form, on the writer or the workers alone or as
    /// one more job of the pyramid's batch `withPyramid`.
    init(writesJPEG: Bool, encoder: EncoderMode, withPyramid: Bool) {
        switch (writesJPEG, encoder, withPyramid) {
        case (false, _, _): self = .none
        case (true, .serial, false): self = .scanlinesOnWriter
        case (true, .serial, true): self = .scanlinesInPyramidBatch
        case (true, .parallel, false): self = .segmentsOnWorkers
        case (true, .parallel, true): self = .segmentsInPyramidBatch
        }
    }

    /// The encoder this is a form of (nil without a JPEG).
    public var encoder: EncoderMode? {
        switch self {
        case .none: return nil
        case .scanlinesOnWriter, .scanlinesInPyramidBatch: return .serial
        case .segmentsOnWorkers, .segmentsInPyramidBatch: return .parallel
        }
    }
}

public struct RenderPlan: Equatable, Sendable {
    public let geometry: StripeGeometry
    /// How the JPEG is compressed (see StripeCompression).
    public let compression: StripeCompression
    /// The restart interval in MCUs written to the file (0: none).
    public let restartInterval: Int
    public let workers: Int
    /// Stripes mapped at once: one per worker, one being encoded, one ready for the encoder.
    public let windowStripes: Int
    public let cellSlots: Int
    public let cellBytes: Int
    public let distinctPhotos: Int
    /// The memory every photo decode of the render shares (DecodeBudget).
    public internal(set) var decodePoolBytes: Int
    /// What the steady state (stripes, cell cache, decode pool) was planned for: the budget, or
    /// less of an automatic one (RenderSettings.steadyStateBytes).
    public var steadyStateBudgetBytes = 0
    /// Estimated peak resident memory of the whole process.
    public internal(set) var estimatedPeakBytes: Int
    /// Disk the stripe window needs, in `stripeDirectory`.
    public let stripeDiskBytes: Int64
    /// Disk the cell spill file may need, in `temporaryDirectory` (0 when every cell fits in memory).
    public let spillDiskBytes: Int64
    /// A conservative estimate of the JPEG's size (`bytesPerPixel` x pixels); 0 without a JPEG.
    public let estimatedOutputBytes: Int64
    /// The Deep Zoom pyramid's shape and settings, when one is written.
    public let deepZoom: DeepZoomGeometry?
    public let deepZoomSettings: DeepZoomSettings?
    /// Memory the pyramid's writer holds: an encoder and a partly written tile per tile column,
    /// and the rows averaged for the levels below.
    public let deepZoomMemoryBytes: Int
    /// A conservative estimate of the pyramid's size on disk, and the inodes it takes.
    public let deepZoomDiskBytes: Int64
    public let deepZoomInodes: Int64
    /// The tiled pyramidal TIFF's pages and settings, when one is written.
    public var tiff: PyramidTIFFGeometry?
    public var tiffSettings: PyramidTIFFSettings?
    /// Memory the TIFF's writer holds: its pyramid writer's (as the Deep Zoom one's), libtiff's
    /// table of page 0's tiles, the spool's index and a tile's buffer.
    public var tiffMemoryBytes = 0
    /// A conservative estimate of the TIFF's size, and of its smaller pages' spool in
    /// `temporaryDirectory` until they are copied in.
    public var tiffDiskBytes: Int64 = 0
    public var tiffSpoolBytes: Int64 = 0
    /// Where the cell spill file goes: the temporary folder asked for, else $TMPDIR, else /tmp.
    public let temporaryDirectory: String
    /// Where the stripe file goes: the temporary folder asked for or $TMPDIR when given, else /dev/shm when it is a
    /// writable tmpfs, else /tmp. The stripe window is small and bounded either way; on a tmpfs,
    /// writing through the mapping skips the filesystem's block allocation and write-fault
    /// bookkeeping, which cost about a second per gigapixel on ext4 (measured: 1.2 GP parallel
    /// render 5.2 s with stripes in /tmp on ext4, 4.1 s in /dev/shm).
    public let stripeDirectory: String

    /// Disk the temporaries need at most.
    public var temporaryDiskBytes: Int64 { stripeDiskBytes + spillDiskBytes }
    /// The most one decode that cannot spill (a HEIF decoded whole, a lossless WebP) may hold:
    /// what the memory budget leaves beside everything else the plan counts. Such a decode runs
    /// alone, so it has the decode pool to itself.
    public var wholeImageLimitBytes: Int = 0
    public var width: Int { geometry.width }
    public var height: Int { geometry.height }
    public var stripeBytes: Int { geometry.stripeHeight * geometry.bytesPerRow }
    /// Whether a JPEG is written.
    public var writesJPEG: Bool { compression != .none }
    /// The JPEG's encoder (serial when there is no JPEG: nothing is encoded).
    public var encoder: EncoderMode { compression.encoder ?? .serial }

    /// What the process needs besides the renderer's own buffers (runtime, libjpeg, code).
    /// Measured (0.6.8, /proc/self/status at the peak of a release build's render): 14.7-16.3
    /// MiB of mapped code and libraries (`RssFile`: the Swift runtime alone about 4.8 MiB,
    /// libstdc++, libheif's codecs) and about 1 MiB of the runtime's own heap and thread
    /// stacks. The allowance was 12 MiB until then, and renders under a 64 MiB budget peaked 1-4
    /// MiB over their budget with every planned buffer inside it.
    public static let processAllowanceBytes = 16 << 20
    /// What one open tile encoder holds besides its output (libjpeg's per-image buffers for a
    /// 256 px wide 4:2:0 tile, measured as RSS growth over 1,000 open encoders: about 33 KiB).
    static let tileEncoderBytes = 36 << 10
    /// The largest side a Deep-Zoom-only canvas may have.
    public static let maxDeepZoomSide = 1 << 24
    static let defaultStripeHeight = 64

    /// Compressed bytes per pixel assumed when checking disk space: generous for photo content
    /// (measured grids of photos at Q90 4:2:0 come to about 0.25; this allows for busier ones).
    /// Above Q95, 2.4 (1.6 until 0.6.13): the real photos of the test corpus in 100 px cells came
    /// to 2.09 at Q100 4:4:4 (2.72 allowed then), and random noise at Q100 to 1.98 a pixel of
    /// every level at 4:2:0 and 4.11 at 4:4:4 (cjpeg), which this holds with the pyramid's
    /// levels. A pyramid of such tiles planned at 1.6 ran out of the disk it had checked.
    public static func bytesPerPixel(quality: Int, subsampling: ChromaSubsampling) -> Double {
        let base: Double = quality <= 75 ? 0.35 : quality <= 90 ? 0.6 : quality <= 95 ? 0.9 : 2.4
        switch subsampling {
        case .s420: return base
        case .s422: return base * 1.3
        case .s444: return base * 1.7
        }
    }

    /// The densest a JPEG of this subsampling can be, at quality 100: random noise, what cjpeg
    /// makes of it (1.98, 2.65 and 4.11 bytes a pixel at 4:2:0, 4:2:2 and 4:4:4), with 15% to
    /// spare. For what must never be too small, whatever the pictures: a TIFF's offsets.
    public static func densestBytesPerPixel(subsampling: ChromaSubsampling) -> Double {
        switch subsampling {
        case .s420: return 2.3
        case .s422: return 3.1
        case .s444: return 4.8
        }
    }

    /// What a pyramid's unfinished tile holds in each column's encoder: its compressed bytes so
    /// far. 3/8 of a byte a pixel at the default Q90 4:2:0 (measured to hold: a 60,000 px wide
    /// pyramid of real photos peaked at 58 MB under a 65 MiB budget), scaled with the disk
    /// check's rate for other qualities and subsamplings (until 0.6.13 it was 3/8 for all, and
    /// the same pyramid at Q100 4:4:4 peaked at 134 MB under that budget).
    static func tileBytesPerPixel(quality: Int, subsampling: ChromaSubsampling) -> Double {
        max(3.0 / 8, bytesPerPixel(quality: quality, subsampling: subsampling) * 5 / 8)
    }

    /// The plan for rendering `layout` with `settings` into outputs of the kinds in `outputs`
    /// (a JPEG, a pyramid, or both). Refuses settings out of range, a canvas too large for the
    /// outputs, and a budget that cannot hold the smallest working set.
    /// `wholeImageBytes`: the most one photo of this render must hold to be decoded at all (a HEIF
    /// decoded whole, a lossless WebP; 0 when every photo streams or spills): that much beyond
    /// the decode pool is kept from the cell cache, as far as the budget allows.
    /// A budget too small is refused with the smallest budget that fits (in whole MiB), found by
    /// planning again: what the plan needs grows with the budget (the decode pool is a share
    /// of it), so the shortfall at one budget is not the budget that fits.
    public static func make(layout: CellLayout, settings: RenderSettings, writing outputs: [OutputKind] = [.jpeg],
                            wholeImageBytes: Int = 0, multiScanBytes: Int = 0, photoBytes: Int = 0) throws(TesseraError) -> RenderPlan {
        do throws(TesseraError) {
            return try plan(layout: layout, settings: settings, writing: outputs, wholeImageBytes: wholeImageBytes, multiScanBytes: multiScanBytes,
                            photoBytes: photoBytes)
        } catch .budgetTooSmall(_, let needed) where settings.steadyStateBudgetBytes < settings.maxMemoryBytes {
            // A steady state larger than an automatic budget plans for (wide rows, many
            // workers): the smallest that fits, as far as the budget goes (not all of it: the
            // decode pool is a share of what it is planned for).
            func trial(_ bytes: Int) -> RenderSettings {
                var trial = settings
                trial.steadyStateBytes = bytes
                return trial
            }
            guard let steady = smallestBudget(from: needed, fits: { bytes in
                bytes > settings.maxMemoryBytes
                    || (try? plan(layout: layout, settings: trial(bytes), writing: outputs, wholeImageBytes: wholeImageBytes, multiScanBytes: multiScanBytes, photoBytes: photoBytes)) != nil
            }), steady <= settings.maxMemoryBytes else {
                var whole = settings
                whole.steadyStateBytes = nil
                return try make(layout: layout, settings: whole, writing: outputs, wholeImageBytes: wholeImageBytes, multiScanBytes: multiScanBytes, photoBytes: photoBytes)
            }
            return try plan(layout: layout, settings: trial(steady), writing: outputs, wholeImageBytes: wholeImageBytes, multiScanBytes: multiScanBytes, photoBytes: photoBytes)
        } catch .budgetTooSmall(let budget, let needed) {
            let smallest = smallestBudget(from: max(budget, needed)) { bytes in
                var trial = settings
                trial.maxMemoryBytes = bytes
                trial.steadyStateBytes = nil
                return (try? plan(layout: layout, settings: trial, writing: outputs, wholeImageBytes: wholeImageBytes, multiScanBytes: multiScanBytes, photoBytes: photoBytes)) != nil
            }
            throw .budgetTooSmall(budgetBytes: budget, neededBytes: smallest ?? needed)
        } catch {
            throw error
        }
    }

    /// `make` for photos of which some must be decoded whole, needing `wholeImageNeeds` (any
    /// order; 0 for the others): the plan leaves room for the largest of them that a plan within
    /// the budget can hold, not only for the largest of all. (One 12 MP HEIC no plan in 56 MiB
    /// could draw left no room at all, and the library's 3 MP HEICs, which fit beside smaller
    /// stripes, were drawn grey with it.)
    public static func make(layout: CellLayout, settings: RenderSettings, writing outputs: [OutputKind] = [.jpeg],
                            wholeImageNeeds: [Int], multiScanBytes: Int = 0, photoBytes: Int = 0) throws(TesseraError) -> RenderPlan {
        let needs = Array(Set(wholeImageNeeds.filter { $0 > 0 })).sorted()
        func plan(_ need: Int) throws(TesseraError) -> RenderPlan {
            try make(layout: layout, settings: settings, writing: outputs, wholeImageBytes: need, multiScanBytes: multiScanBytes,
                     photoBytes: photoBytes)
        }
        let largest = try plan(needs.last ?? 0)
        guard let last = needs.last, last > largest.wholeImageLimitBytes else { return largest }
        // The largest need a plan holds: a plan for a larger need leaves more room, up to the
        // smallest stripes, so the needs held are the ones up to some point.
        var low = -1, high = needs.count - 1  // needs[high] is not held; needs[low] is (or none)
        var best: RenderPlan?
        while high - low > 1 {
            let middle = (low + high) / 2
            if let trial = try? plan(needs[middle]), needs[middle] <= trial.wholeImageLimitBytes {
                low = middle
                best = trial
            } else {
                high = middle
            }
        }
        // (None held: the plan for the largest, which leaves the most room there is.)
        return best ?? largest
    }

    /// The smallest budget, in whole MiB, from `start` up, for which `fits` holds (assumed to
    /// hold for every larger budget once it holds); nil when none up to 1 TiB does.
    public static func smallestBudget(from start: Int, fits: (Int) -> Bool) -> Int? {
        var high = max(1 << 20, start)
        while !fits(high) {
            high *= 2
            if high > 1 << 40 { return nil }
        }
        var low = start >> 20, top = (high + (1 << 20) - 1) >> 20
        while low < top {
            let middle = (low + top) / 2
            if fits(middle << 20) { top = middle } else { low = middle + 1 }
        }
        return top << 20
    }

    static func plan(layout: CellLayout, settings: RenderSettings, writing outputs: [OutputKind],
                     wholeImageBytes: Int, multiScanBytes: Int = 0, photoBytes: Int = 0) throws(TesseraError) -> RenderPlan {
        let (writesJPEG, deepZoomSettings, tiffSettings, workers) = try checkedOutputs(layout: layout, settings: settings, writing: outputs)
        let width = layout.width, height = layout.height
        let window = workers + 2
        let rowBytes = width * 3
        // Without a JPEG, workers only fill stripes and the writer only feeds the pyramid.
        let deepZoom = deepZoomSettings.map {
            DeepZoomGeometry(width: width, height: height, tileSize: $0.tileSize, overlap: $0.overlap)
        }
        var deepZoomBytes = deepZoom.map {
            pyramidWriterBytes($0, rowBytes: rowBytes, tileBytesPerPixel: tileBytesPerPixel(quality: deepZoomSettings?.quality ?? 90,
                                                                                          subsampling: settings.subsampling))
        } ?? 0
        // The viewer's previews: a preview being made on each worker (after the last stripe,
        // counted throughout).
        if let zoom = deepZoomSettings, zoom.viewer, zoom.previews > 0 {
            deepZoomBytes += workers * PhotoPreviews.workingBytes(longSide: zoom.previews)
        }
        let tiff = tiffSettings.map { PyramidTIFFGeometry(width: width, height: height, tileSize: $0.tileSize) }
        var tiffBytes = tiff.map {
            tiffWriterBytes($0, rowBytes: rowBytes, tileBytesPerPixel: tileBytesPerPixel(quality: tiffSettings?.quality ?? 90,
                                                                                      subsampling: settings.subsampling))
        } ?? 0
        // Pyramids whose writers average rows for their levels below (Deep Zoom, TIFF).
        let pyramids = (deepZoom == nil ? 0 : 1) + (tiff == nil ? 0 : 1)
        let mcu = settings.subsampling.mcuHeight
        // A restart interval is a 16-bit count of MCUs: at most this many MCU rows per stripe.
        let maxMcuRows = max(1, 65_535 / settings.subsampling.mcusPerRow(width: width))
        let cellBytes = layout.largestCellBytes
        let distinct = layout.distinctDrawingCount
        // The steady state is planned for at most `steadyStateBudgetBytes`; the rest of the
        // budget is room for the one photo at a time that is decoded whole.
        let budget = settings.steadyStateBudgetBytes
        let compression = StripeCompression(writesJPEG: writesJPEG, encoder: settings.encoder ?? (workers > 1 ? .parallel : .serial),
                                            withPyramid: pyramids > 0)
        let encoder = compression.encoder ?? .serial
        let decodePool = DecodeBudget.poolBytes(forBudget: budget, workers: workers)
        // The layout's own table (a mosaic's 4 bytes a cell; a grid stores only its photo order),
        // and what the render keeps a photo (`photoBytes`: the photo table's resident part and
        // the cell cache's state a photo, StripeRenderer.photoBytes).
        let fixed = processAllowanceBytes + (writesJPEG ? encoderBytes(compression, workers: workers, rowBytes: rowBytes) : 0)
            + decodePool + layout.storedBytes + photoBytes + deepZoomBytes + tiffBytes
        // Two cells a worker, so that pinned cells leave room to decode; but no more than the
        // distinct drawings, which then all stay (one 8,000 px cell was planned four times: 855 MiB
        // asked for a render that peaks at 223).
        let minimumCells = min(workers * 2, max(distinct, 1))

        // Each pyramid's averaged rows for the levels below: a third of a stripe, counted as part
        // of each stripe's cost (only one stripe is averaged at a time; this is generous).
        let stripeRowBytes = rowBytes + pyramids * (rowBytes / (3 * window) + 1)
        let stripeHeight = try stripeHeight(requested: settings.stripeHeight, height: height, encoder: encoder, pyramidsOnly: !writesJPEG, mcu: mcu,
                                            maxMcuRows: maxMcuRows, window: window, stripeRowBytes: stripeRowBytes, fixed: fixed,
                                            smallestCacheBytes: minimumCells * cellBytes, budget: budget,
                                            wholeImageReserve: max(0, wholeImageBytes - decodePool - (settings.maxMemoryBytes - budget)))
        let restartInterval = try restartInterval(writesJPEG: writesJPEG, encoder: encoder, settings: settings, width: width,
                                                  stripeHeight: stripeHeight)
        let stripeBytes = stripeHeight * rowBytes
        let averagedBytes = pyramids * (stripeBytes / 3)
        if deepZoom != nil { deepZoomBytes += stripeBytes / 3 }
        if tiff != nil { tiffBytes += stripeBytes / 3 }
        let segmentBytes = waitingSegmentBytes(compression, window: window, stripeBytes: stripeBytes)
        let cache = cellCache(budget: budget, fixed: fixed, averagedBytes: averagedBytes, window: window, stripeBytes: stripeBytes,
                              segmentBytes: segmentBytes, wholeImageBytes: wholeImageBytes, decodePool: decodePool,
                              minimumCells: minimumCells, cellBytes: cellBytes, distinct: distinct)
        let estimatedPeak = fixed + averagedBytes + window * stripeBytes + segmentBytes + min(cache.slots, max(distinct, 1)) * cellBytes
            + cache.reserve
        // The smallest cell cache (two cells a worker) can still not fit: refuse, as the budget
        // promises, rather than plan past it.
        guard estimatedPeak <= budget else { throw .budgetTooSmall(budgetBytes: budget, neededBytes: estimatedPeak) }
        // A layout of frames gives back each drawing's spilled copy when it is drawn.
        let everyCellBytes = Int64(distinct) * Int64(cellBytes)
        let spillBytes: Int64 = cache.slots >= distinct ? 0
            : layout.framed.map { min(everyCellBytes, $0.mostSpilledBytes(reach: window * stripeHeight)) } ?? everyCellBytes
        let pageRounded = Int64((stripeBytes + pageSize - 1) / pageSize * pageSize)
        var plan = RenderPlan(
            geometry: StripeGeometry(width: width, height: height, stripeHeight: stripeHeight),
            compression: compression, restartInterval: restartInterval,
            workers: workers, windowStripes: window, cellSlots: cache.slots, cellBytes: cellBytes,
            distinctPhotos: distinct, decodePoolBytes: decodePool, estimatedPeakBytes: estimatedPeak,
            stripeDiskBytes: pageRounded * Int64(window), spillDiskBytes: spillBytes,
            estimatedOutputBytes: writesJPEG ? estimatedJPEGBytes(width: width, height: height, settings: settings) : 0,
            deepZoom: deepZoom, deepZoomSettings: deepZoomSettings, deepZoomMemoryBytes: deepZoomBytes,
            deepZoomDiskBytes: deepZoom.map {
                pyramidDiskBytes($0, settings: deepZoomSettings!, subsampling: settings.subsampling, cellCount: layout.cellCount,
                                 drawings: layout.distinctDrawingCount)
            } ?? 0,
            deepZoomInodes: Int64(deepZoom?.inodeCount ?? 0)
                + (deepZoomSettings.map { $0.viewer && $0.previews > 0 } == true ? Int64(distinct) + 1 : 0),
            temporaryDirectory: settings.temporaryDirectory ?? defaultTemporaryDirectory(),
            stripeDirectory: settings.temporaryDirectory ?? defaultStripeDirectory(neededBytes: pageRounded * Int64(window)))
        plan.steadyStateBudgetBytes = budget
        if let tiff, let tiffSettings {
            plan.tiff = tiff
            plan.tiffSettings = tiffSettings
            plan.tiffMemoryBytes = tiffBytes
            let bytesPerPixel = bytesPerPixel(quality: tiffSettings.quality, subsampling: settings.subsampling)
            plan.tiffDiskBytes = tiff.estimatedBytes(bytesPerPixel: bytesPerPixel)
            plan.tiffSpoolBytes = tiff.estimatedBytes(bytesPerPixel: bytesPerPixel, fromPage: 1)
        }
        plan.wholeImageLimitBytes = max(decodePool, settings.maxMemoryBytes - estimatedPeak + decodePool + cache.reserve)
        // Beyond the steady state, the peak is the steady state and the largest whole decode
        // beside it (what it needs past the pool and the reserve), as far as the budget holds it.
        if budget < settings.maxMemoryBytes {
            plan.estimatedPeakBytes += max(0, min(wholeImageBytes, plan.wholeImageLimitBytes) - decodePool - cache.reserve)
            // Progressive photos' whole-image buffers (`multiScanBytes`, the largest) spill to a
            // file when the pool cannot hold them: at 600 px cells that made a grid of large
            // progressive photos 2.6x its baseline twin. With room to spare, the pool holds one
            // a worker in memory (twice it: the decoder keeps a buffer in memory only when it is
            // under half the pool), and the peak counts it.
            if multiScanBytes > 0 {
                let extra = max(0, min(settings.maxMemoryBytes - plan.estimatedPeakBytes,
                                       2 * workers * (multiScanBytes + (2 << 20)) - decodePool))
                plan.decodePoolBytes += extra
                plan.estimatedPeakBytes += extra / 2
            }
        }
        return plan
    }

    /// The outputs asked for (whether a JPEG is written; the pyramid's settings, when one is)
    /// and the workers, once the settings and the canvas are checked: a quality in range,
    /// something to write, a canvas no side of which is past the outputs' limit, valid pyramid
    /// settings, a worker count in range (in that order: the first failure is the one thrown).
    static func checkedOutputs(layout: CellLayout, settings: RenderSettings, writing outputs: [OutputKind])
        throws(TesseraError) -> (writesJPEG: Bool, deepZoomSettings: DeepZoomSettings?, tiffSettings: PyramidTIFFSettings?, workers: Int) {
        let writesJPEG = outputs.contains(.jpeg)
        let deepZoomSettings = outputs.lazy.compactMap { kind -> DeepZoomSettings? in
            if case .deepZoom(let settings) = kind { return settings } else { return nil }
        }.first
        let tiffSettings = outputs.lazy.compactMap { kind -> PyramidTIFFSettings? in
            if case .tiff(let settings) = kind { return settings } else { return nil }
        }.first
        guard RenderSettings.qualities.contains(settings.quality) else {
            throw .invalidSettings("quality must be \(RenderSettings.qualities), got \(settings.quality)")
        }
        let width = layout.width, height = layout.height
        guard writesJPEG || deepZoomSettings != nil || tiffSettings != nil else {
            throw .invalidSettings("nothing to write: ask for a JPEG, a Deep Zoom pyramid, a TIFF, or any of them together")
        }
        let sideLimit = writesJPEG ? jpegMaxDimension : maxDeepZoomSide
        guard width <= sideLimit && height <= sideLimit else {
            throw .outputTooLarge(width: width, height: height, limit: sideLimit)
        }
        try deepZoomSettings?.validate()
        try tiffSettings?.validate()
        let workers = settings.workers ?? onlineCoreCount()
        guard RenderSettings.workerCounts.contains(workers) else {
            throw .invalidSettings("workers must be \(RenderSettings.workerCounts), got \(workers)")
        }
        return (writesJPEG, deepZoomSettings, tiffSettings, workers)
    }

    /// What the pyramid's writer holds besides the rows it averages (counted with the stripes):
    /// encoders and tiles in progress (about an eighth of a raw tile compressed, half done on
    /// average, allowing for busy ones), and a kept row per level.
    static func pyramidWriterBytes(_ deepZoom: DeepZoomGeometry, rowBytes: Int, tileBytesPerPixel: Double) -> Int {
        let tileColumns = deepZoom.levels.reduce(0) { $0 + $1.columns }
        let tileSide = deepZoom.tileSize + 2 * deepZoom.overlap
        let tileBytes = Int(Double(tileSide * tileSide) * tileBytesPerPixel)
        // (And the tiles waiting for the thread that writes the folder's files, which the plan
        // missed: a masonry collage of panoramas, pyramid only, peaked at 68.5 MiB, planned 62.3.)
        return tileColumns * (tileEncoderBytes + tileBytes + 2 * deepZoom.overlap * tileSide * 3)
            + 2 * rowBytes + TileFileQueue.defaultLimitBytes + tileSide * tileSide * 3
    }

    /// What the TIFF's writer holds besides the rows it averages (counted with the stripes): its
    /// pyramid writer's encoders and tiles in progress, as the Deep Zoom one's, with a row
    /// buffer for each padded column; libtiff's table of page 0's tiles (offset and byte count,
    /// 16 bytes a tile, and up to 8 more while its directory is written: the arrays it converts
    /// to 32 bits); the spool's index (8 bytes a tile of the smaller pages); and the buffer a
    /// tile is copied in through.
    static func tiffWriterBytes(_ tiff: PyramidTIFFGeometry, rowBytes: Int, tileBytesPerPixel: Double) -> Int {
        let pages = tiff.pages
        let tileColumns = pages.reduce(0) { $0 + $1.columns }
        let tile = tiff.tileSize * tiff.tileSize * 3
        let compressed = Int(Double(tiff.tileSize * tiff.tileSize) * tileBytesPerPixel)
        let writer = tileColumns * (tileEncoderBytes + compressed + tiff.tileSize * 3) + 2 * rowBytes
        let fullPageTiles = tiff.fullPageTileCount
        return writer + fullPageTiles * 24 + TileSpool.indexBytes(tileCounts: pages.dropFirst().map { $0.columns * $0.rows }) + 2 * tile
    }

    /// The JPEG encoders' row buffers: one libjpeg compressor per worker when the workers
    /// compress; else one, on the writer.
    static func encoderBytes(_ compression: StripeCompression, workers: Int, rowBytes: Int) -> Int {
        let compressors = compression == .segmentsOnWorkers ? workers : 1
        return (rowBytes * 32 + (256 << 10)) * compressors
    }

    /// The stripe height in rows. Asked for (`requested`): that, in whole MCU rows a restart
    /// interval can count for the parallel encoder, at most the canvas. Else half of what the
    /// budget leaves beside `fixed` and the smallest cell cache, in whole MCU rows, at most the
    /// default, at least 16 rows (or the canvas). Refuses a budget that cannot hold the window
    /// of such stripes, `fixed` and the smallest cell cache.
    /// `wholeImageReserve`: what the largest photo decoded whole needs past the decode pool and
    /// past the budget beyond the steady state (an automatic budget of 2 GiB plans the steady
    /// state for 64 MiB and keeps the rest for such a photo: its stripes need not shrink).
    /// Stripes chosen by the plan leave it room when the budget holds it beside the smallest
    /// stripes: on a canvas 20,000 px wide, stripes of 64 rows took the room a phone's 3 MP
    /// HEIC needed inside a 64 MiB container, and it was drawn grey (16-row stripes fit it).
    static func stripeHeight(requested: Int?, height: Int, encoder: EncoderMode, pyramidsOnly: Bool = false, mcu: Int, maxMcuRows: Int,
                             window: Int, stripeRowBytes: Int, fixed: Int, smallestCacheBytes: Int, budget: Int,
                             wholeImageReserve: Int = 0) throws(TesseraError) -> Int {
        /// What the budget must hold with stripes of `rows` rows.
        func needed(forRows rows: Int) -> Int { fixed + window * rows * stripeRowBytes + smallestCacheBytes }
        var stripeHeight: Int
        if let requested {
            guard requested >= 1 else { throw .invalidSettings("stripe height must be at least 1 row, got \(requested)") }
            stripeHeight = requested
            if encoder == .parallel {
                // Whole MCU rows, and no more than a restart interval can count.
                stripeHeight = min((requested + mcu - 1) / mcu, maxMcuRows) * mcu
            }
            stripeHeight = min(stripeHeight, height)
            let need = needed(forRows: stripeHeight)
            guard need <= budget else { throw .budgetTooSmall(budgetBytes: budget, neededBytes: need) }
        } else {
            let minimumNeed = needed(forRows: min(height, 16))
            // Without a JPEG there are no MCU rows to keep whole: a very wide pyramid (a TIFF of
            // 150,000 px a side in 128 MiB) may go down to stripes of 8 rows, as asked for with
            // a requested stripe height of 8, before it is refused.
            if minimumNeed > budget && pyramidsOnly && height > 8 && needed(forRows: 8) <= budget { return 8 }
            guard minimumNeed <= budget else { throw .budgetTooSmall(budgetBytes: budget, neededBytes: minimumNeed) }
            // Half of what remains may go to stripes, in whole MCU rows, at most the default
            // (after the room for a photo decoded whole, when that leaves the smallest stripes).
            // (Beside the reserve: the stripes, and the compressed segments waiting for the
            // writer, up to a third of a stripe each.)
            let reserve = minimumNeed + wholeImageReserve <= budget ? wholeImageReserve : 0
            let half = (budget - fixed - smallestCacheBytes) / 2
            let forStripes = reserve == 0 ? half : min(half, (budget - fixed - smallestCacheBytes - reserve) * 3 / 4)
            let fitting = forStripes / (window * stripeRowBytes) / mcu * mcu
            stripeHeight = min(height, max(min(16, height), min(defaultStripeHeight, fitting, maxMcuRows * mcu)))
        }
        return stripeHeight
    }

    /// The restart interval written to the JPEG, in MCUs: a stripe's for the parallel encoder,
    /// the one asked for with the serial encoder, 0 without a JPEG. Refuses one past 16 bits.
    static func restartInterval(writesJPEG: Bool, encoder: EncoderMode, settings: RenderSettings, width: Int,
                                stripeHeight: Int) throws(TesseraError) -> Int {
        let mcu = settings.subsampling.mcuHeight
        let restartInterval = !writesJPEG ? 0 : encoder == .parallel
            ? settings.subsampling.mcusPerRow(width: width) * ((stripeHeight + mcu - 1) / mcu)
            : settings.serialRestartInterval
        guard (0...65_535).contains(restartInterval) else {
            throw .invalidSettings("restart interval must be 0...65535 MCUs, got \(restartInterval)")
        }
        return restartInterval
    }

    /// Compressed segments waiting for the parallel encoder's writer: about a third of a stripe
    /// each, one a stripe of the window when the workers compress, one when the writer does.
    static func waitingSegmentBytes(_ compression: StripeCompression, window: Int, stripeBytes: Int) -> Int {
        compression == .segmentsOnWorkers ? window * stripeBytes / 3
            : compression == .segmentsInPyramidBatch ? stripeBytes / 3 : 0
    }

    /// The cell cache's slots: what is left of the budget once everything else is counted, at
    /// least two cells a worker, at most one a distinct photo; and `reserve`, the room kept from
    /// it for a photo that must be decoded whole beyond the decode pool (what the smallest cache
    /// leaves, at most).
    static func cellCache(budget: Int, fixed: Int, averagedBytes: Int, window: Int, stripeBytes: Int, segmentBytes: Int,
                          wholeImageBytes: Int, decodePool: Int, minimumCells: Int, cellBytes: Int,
                          distinct: Int) -> (slots: Int, reserve: Int) {
        // (The segments too: the estimate used to exceed the budget by them, e.g. 66.7 MiB
        // planned under 64 MiB.)
        let forCells = budget - fixed - averagedBytes - window * stripeBytes - segmentBytes
        let reserve = max(0, min(wholeImageBytes - decodePool, forCells - minimumCells * cellBytes))
        let slots = max(minimumCells, min(max(distinct, 1), (forCells - reserve) / max(cellBytes, 1)))
        return (slots, reserve)
    }

    /// A conservative estimate of the JPEG's size (`bytesPerPixel` x pixels, and the headers).
    static func estimatedJPEGBytes(width: Int, height: Int, settings: RenderSettings) -> Int64 {
        let pixels = Double(width) * Double(height)
        return Int64(pixels * bytesPerPixel(quality: settings.quality, subsampling: settings.subsampling)) + 65_536
    }

    /// A conservative estimate of the pyramid's size on disk: its tiles, and the viewer's
    /// cells.js when there is a viewer (up to 8 bytes a cell, "1234567,").
    static func pyramidDiskBytes(_ deepZoom: DeepZoomGeometry, settings: DeepZoomSettings, subsampling: ChromaSubsampling,
                                 cellCount: Int, drawings: Int = 0) -> Int64 {
        let perPixel = bytesPerPixel(quality: settings.quality, subsampling: subsampling)
        // The previews: at most one a drawing, each at most a square of the long side.
        let previews = settings.viewer && settings.previews > 0
            ? Int64(drawings) * Int64((Double(settings.previews * settings.previews) * perPixel).rounded(.up) + 4096) : 0
        return deepZoom.estimatedBytes(bytesPerPixel: perPixel) + (settings.viewer ? Int64(cellCount) * 8 : 0) + previews
    }
}
