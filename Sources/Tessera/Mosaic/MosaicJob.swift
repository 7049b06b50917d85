// MosaicJob.swift — a photomosaic, from a photo library and a target picture to a render
// request: the target's shape decides the rows, every photo is analysed (or found in the
// feature index), the target is analysed, the cells are matched under the constraints, and the
// tint is worked out. The request then renders like any other (StripeRenderer).
//
// Decodes share the render's budget: analysis and the target's decode are admitted against one
// DecodeBudget sized from `RenderSettings.maxMemoryBytes`, the same way a render's are.
import Glibc

/// A mosaic's choices, besides the render's.
public struct MosaicSettings: Equatable, Sendable {
    /// The picture the mosaic rebuilds.
    public var targetPath: String
    public var columns: Int
    /// nil: from the target's upright shape.
    public var rows: Int?
    public var cellWidth: Int
    public var cellHeight: Int
    /// Features per cell: `subCells` x `subCells` mean Oklab colours.
    public var subCells = 3
    /// No identical photos within this many cells of each other (a chess king's moves).
    public var minDistance = 1
    /// Each photo at most this many times; nil: no limit.
    public var maxUses: Int?
    /// Every picture at least this many times (MosaicMatcher's repair after the greedy pass); 0: no minimum.
    public var minUses: Int = 0
    public var seed: UInt64 = 1
    /// Passes of local search after the greedy assignment (MosaicMatcher phase 3); 0: none.
    public var matchEffort = 2
    /// How far each cell's colours move toward its part of the target, 0...100.
    public var tintPercent = 0
    /// Where the feature index lives; nil: defaultCacheDirectory().
    public var cacheDirectory: String?
    /// `minDistance` is a default, not asked for: with too few distinct pictures for it, it is
    /// lowered to what they can keep (PreparedMosaic.minDistanceLowered) rather than refused.
    public var minDistanceIsDefault = false
    /// An adaptive mosaic (AdaptiveCells): the cells of `columns` x `rows` (the largest,
    /// `cellWidth` x `cellHeight`) split in four by the target's detail, this many times at most
    /// (the smallest cell: the largest halved `adaptiveLevels` times); 0: a grid. An adaptive
    /// mosaic's `minDistance` is in pixels: the gap between copies of a photo.
    public var adaptiveLevels = 0
    /// The smallest cell in pixels (the largest halved `adaptiveLevels` times).
    public var smallestCell: (width: Int, height: Int) { (max(1, cellWidth >> adaptiveLevels), max(1, cellHeight >> adaptiveLevels)) }
    /// The cells of an adaptive mosaic; nil: AdaptiveCells.defaultCount.
    public var adaptiveCells: Int?

    /// The cells an adaptive mosaic of `rows` rows ends with (AdaptiveCells.reachableCount).
    public func adaptiveCellCount(rows: Int) -> Int {
        let roots = columns * rows
        return AdaptiveCells.reachableCount(adaptiveCells ?? AdaptiveCells.defaultCount(roots: roots, levels: adaptiveLevels),
                                            roots: roots, levels: adaptiveLevels)
    }

    public init(targetPath: String, columns: Int, rows: Int? = nil, cellWidth: Int, cellHeight: Int) {
        self.targetPath = targetPath
        self.columns = columns
        self.rows = rows
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
    }
}

/// A mosaic ready to render, and how it was made.
public struct PreparedMosaic: Sendable {
    public let request: RenderRequest
    public let match: MosaicMatch
    /// Photos analysis could not read (not in the mosaic).
    public let failed: [SkippedPhoto]
    /// Photos analysed now, and found in the feature index.
    public let analysed: Int
    public let reused: Int
    public let analysisSeconds: Double
    public let targetSeconds: Double
    public let matchSeconds: Double
    /// Why the feature index could not be saved (the mosaic is made all the same), or nil.
    public let indexNotSaved: TesseraError?
    /// Photos left out because an earlier photo shows the same picture (DuplicatePictures):
    /// each picture counts once for the minimum distance and the most uses.
    /// (The first `MosaicJob.heldDuplicates`; `duplicateCount` counts them all.)
    public var duplicates: [(photo: String, sameAs: String)] = []
    public var duplicateCount = 0
    /// The distinct pictures the mosaic was matched from (the render holds only those it uses).
    public var photoCount = 0
    /// The most preparing the mosaic held, as planned (`MosaicJob.preparationBytes`).
    public var preparationBytes = 0
    /// The minimum distance the default was lowered to for a library of too few distinct
    /// pictures (MosaicSettings.minDistanceIsDefault), or nil when it was kept.
    public var minDistanceLowered: Int?
    /// An adaptive mosaic's cells (their order: the assignment's and the layout's), or nil.
    public var adaptive: AdaptiveCells?
    /// How far the mosaic's colours are from the target's: CIEDE2000 between each cell's target
    /// sub-cells and its photo's, measured after matching (MosaicQuality).
    public var colour = ColourDifference(meanDeltaE2000: 0, farShare: 0, subCells: 0)
    /// The distinct pictures smaller than the cell (drawn enlarged), with their uses.
    public var tooSmall = TooSmallPhotos()
    /// The cells of the final placement that break the minimum distance or the most uses.
    public var unmet = UnmetConstraints()
    /// How many times the pictures were used: `match.assignment` over `photoCount` pictures
    /// (indices into `request.photos`, the pictures used).
    public var uses: UsesHistogram { MosaicQuality.usesHistogram(assignment: match.assignment, pictures: photoCount) }
}

/// The steps of preparing a mosaic, as its progress names them.
public enum MosaicStep: Sendable {
    case analysis, target, matching
}

public enum MosaicJob {
    /// The most preparing a mosaic of `columns` x `rows` cells from `photoCount` photos holds at
    /// once, the process included. What grows with the library lives in files (the photo
    /// table, the features, the index) or is a few bytes a photo (`bytesPerPhoto`); beside it,
    /// the largest of: the matching's working set, the target's decode (its sub-cell pixels and
    /// their features, and a decoder), the analysis (the decode pool, and a batch's features),
    /// and the distinct pictures' features while duplicates are found (`pictureBytes`).
    public static func preparationBytes(columns: Int, rows: Int, photoCount: Int, subCells k: Int, settings: RenderSettings,
                                        minUses: Int = 0) -> Int {
        let (fixed, phases) = preparationParts(columns: columns, rows: rows, photoCount: photoCount, subCells: k, settings: settings,
                                               minUses: minUses)
        return fixed + max(phases, pictureBytes(photoCount: photoCount, subCells: k, besides: fixed, settings: settings))
    }

    /// What a photo of the library costs in memory while the mosaic is prepared: whether it has
    /// features (a byte), its row if it must be analysed (4), and its share of the photo table.
    static let bytesPerPhoto = 1 + 4 + 8

    /// What preparing holds throughout (the process, the library's bytes a photo, the features
    /// store while it is small enough to be in memory), and the largest of the phases but
    /// finding duplicates: the matching, the target, the analysis.
    static func preparationParts(columns: Int, rows: Int, photoCount: Int, subCells k: Int, settings: RenderSettings,
                                 minUses: Int = 0) -> (fixed: Int, phases: Int) {
        let cells = columns * rows
        let d = k * k * 3
        let workers = settings.workers ?? onlineCoreCount()
        let decodePool = DecodeBudget.poolBytes(forBudget: settings.steadyStateBudgetBytes, workers: workers)
        let library = photoCount * bytesPerPhoto + PhotoTable.residentBytes(count: photoCount) + min(photoCount * d * 4, 1 << 20)
        let target = cells * k * k * 3 + cells * d * 4 + decodePool
        let matching = MosaicMatcher.workingBytes(cells: cells, photos: photoCount, subCells: k,
                                                  chunkPhotos: matchingRun(cells: cells, photoCount: photoCount, subCells: k, settings: settings),
                                                  minUses: minUses)
            + cells * d * 4
        let side = k * MosaicAnalysis.samplesPerSubCell
        let analysis = decodePool + workers * side * side * 3 + MosaicAnalysis.largestBatch * (d * 4 + 256)
        return (RenderPlan.processAllowanceBytes + library, max(target, matching, analysis))
    }

    /// The distinct pictures' features while duplicates are found (DuplicatePictures holds
    /// them all), as far as the budget leaves room beside `besides`: a library with more
    /// distinct pictures than that is refused once they are known, with the budget it needs.
    static func pictureBytes(photoCount: Int, subCells k: Int, besides: Int, settings: RenderSettings) -> Int {
        max(0, min(DuplicatePictures.heldBytes(pictures: photoCount, valuesPerPhoto: k * k * 3), settings.maxMemoryBytes - besides))
    }

    /// Photos the matcher ranks at once: as many as the budget leaves room for beside the
    /// library's bytes a photo (MosaicMatcher.runPhotos).
    static func matchingRun(cells: Int, photoCount: Int, subCells k: Int, settings: RenderSettings) -> Int {
        MosaicMatcher.runPhotos(cells: cells, photos: max(1, photoCount), subCells: k, budgetBytes: settings.steadyStateBudgetBytes,
                                otherBytes: photoCount * bytesPerPhoto + cells * k * k * 3 * 4)
    }

    /// The settings a mosaic's render is planned with: its budget less what preparing the mosaic
    /// leaves resident under the render, a decoder pool's worth (the analysis's and the target's
    /// decoders; Report.renderPeak counts it on top of the render's plan). The render was planned
    /// for the whole budget before: a helper's mosaic of large photos under a budget of 30
    /// to 32 MiB peaked 3.3 MiB over it, its dry run already showing the plan over the budget.
    static func renderSettings(_ settings: RenderSettings) -> RenderSettings {
        var render = settings
        let workers = settings.workers ?? onlineCoreCount()
        render.maxMemoryBytes = max(1 << 20, settings.maxMemoryBytes
                                    - DecodeBudget.poolBytes(forBudget: settings.steadyStateBudgetBytes, workers: max(1, workers)))
        return render
    }

    /// The photos a render of `layout` can draw within `settings`' budget, and the others with
    /// why. A photo decoded whole (a HEIF without a thumbnail that covers the cell, a lossless
    /// WebP) needs its whole image in memory, and the render leaves room for one such photo
    /// only up to `RenderPlan.wholeImageLimitBytes` (analysis, which holds little else, allows
    /// more: a photo could be analysed and matched, then drawn as a placeholder). Each left-out
    /// photo carries the budget that would draw it (DecodeBudget.budgetToDraw: this budget and
    /// the shortfall, the decoder's own rule).
    static func drawablePhotos(_ photos: PhotoTable, layout: CellLayout, settings: RenderSettings,
                               outputs: [OutputKind]) throws(TesseraError) -> (photos: PhotoTable, leftOut: [SkippedPhoto]) {
        var needs = Set<Int>()
        for photo in photos {
            let need = photo.header.wholeImageBytes(cellWidth: layout.cellWidth, cellHeight: layout.cellHeight)
            if need > 0 { needs.insert(need) }
        }
        guard let largest = needs.max(),
              let plan = try? RenderPlan.make(layout: layout, settings: renderSettings(settings), writing: outputs,
                                              wholeImageNeeds: Array(needs)),
              largest > plan.wholeImageLimitBytes else { return (photos, []) }
        let kept = PhotoTable.Builder(temporaryDirectory: settings.temporaryDirectory)
        var leftOut: [SkippedPhoto] = []
        for photo in photos {
            let need = photo.header.wholeImageBytes(cellWidth: layout.cellWidth, cellHeight: layout.cellHeight)
            guard need > plan.wholeImageLimitBytes else {
                try kept.append(photo)
                continue
            }
            let header = photo.header
            leftOut.append(SkippedPhoto(
                path: photo.path,
                reason: "the mosaic's render could only draw it grey: decoding this \(header.width) x \(header.height) "
                    + "\(header.format.rawValue) whole takes about \(formatBytes(Int64(need))), more than the memory budget of "
                    + "\(formatBytes(Int64(settings.maxMemoryBytes))) leaves for one photo (\(formatBytes(Int64(plan.wholeImageLimitBytes))))",
                budgetToDrawBytes: DecodeBudget.budgetToDraw(bytes: Int64(need), budgetBytes: Int64(settings.maxMemoryBytes),
                                                             limitBytes: Int64(plan.wholeImageLimitBytes))))
        }
        return (try kept.finish(), leftOut)
    }

    /// The mosaic's rows: as given, or from the target's upright shape.
    public static func rows(for mosaic: MosaicSettings) throws(TesseraError) -> Int {
        if let rows = mosaic.rows { return rows }
        let scanned = try PhotoLibrary.scan([mosaic.targetPath], selection: PhotoSelection(includeOwnOutputs: true))
        guard let target = scanned.photos.first else {
            throw .unreadablePhoto(path: mosaic.targetPath, reason: scanned.skipped.first?.reason ?? "not a picture Tessera reads")
        }
        let turned = OrientationTransform(exifOrientation: target.header.exifOrientation).swapsAxes
        let aspect = turned ? Double(target.header.height) / Double(target.header.width)
                            : Double(target.header.width) / Double(target.header.height)
        return max(1, Int((Double(mosaic.columns * mosaic.cellWidth) / aspect / Double(mosaic.cellHeight)).rounded()))
    }

    /// Analyses, matches and tints: the render request for the mosaic of `library` into
    /// `outputs`. Refuses a canvas too large for the outputs before any analysis.
    public static func prepare(library: PhotoLibrary, mosaic: MosaicSettings, settings: RenderSettings, outputs: [RenderOutput],
                               cancellation: RenderCancellation? = nil,
                               beforeAnalysis: ((RenderPlan) throws(TesseraError) -> Void)? = nil,
                               progress: (@Sendable (MosaicStep, Int, Int) -> Void)? = nil) throws(TesseraError) -> PreparedMosaic {
        let rows = try rows(for: mosaic)
        let columns = mosaic.columns
        try RenderRequest.checkCanvas(columns: columns, rows: rows, cellWidth: mosaic.cellWidth, cellHeight: mosaic.cellHeight,
                                      outputs: outputs.map(\.kind))
        // The cells matched: the grid's, or an adaptive mosaic's in one row (its distance in pixels).
        let adaptive = mosaic.adaptiveLevels > 0
        let matched = (columns: adaptive ? mosaic.adaptiveCellCount(rows: rows) : columns, rows: adaptive ? 1 : rows)
        // A minimum of uses that no count of pictures could meet is refused before any photo is read.
        try MosaicMatcher.refuseImpossibleMinUses(columns: matched.columns, rows: matched.rows, pictures: nil,
                                                  photoCount: library.photos.count, minUses: mosaic.minUses,
                                                  maxUses: mosaic.maxUses, minDistance: adaptive ? 0 : mosaic.minDistance)
        let (preparation, provisional) = try checkBudget(mosaic, rows: rows, matched: matched, photoCount: library.photos.count,
                                                         settings: settings, outputs: outputs, beforeAnalysis: beforeAnalysis)
        let workers = settings.workers ?? onlineCoreCount()
        let k = mosaic.subCells
        let cellAspect = Double(mosaic.cellWidth) / Double(mosaic.cellHeight)
        let decodeBudget = DecodeBudget(settings: settings, workers: workers)

        var analysisProgress: (@Sendable (Int, Int) -> Void)?
        var matchingProgress: ((Int, Int) -> Void)?
        if let progress {
            analysisProgress = { done, total in progress(.analysis, done, total) }
            matchingProgress = { done, total in progress(.matching, done, total) }
        }
        // Photos the render could not draw in this budget are left out before analysis: matched,
        // each would be a grey placeholder in the mosaic.
        let temporary = settings.temporaryDirectory ?? defaultTemporaryDirectory()
        let drawable = try drawablePhotos(library.photos, layout: provisional, settings: settings, outputs: outputs.map(\.kind))
        // Every photo left out so: the budget is what is short, not the photos (a folder of 120
        // phone HEICs at 28M said "no photos ... in" it).
        if drawable.photos.count == 0, let least = drawable.leftOut.compactMap(\.budgetToDrawBytes).min() {
            throw .budgetTooSmall(budgetBytes: settings.maxMemoryBytes, neededBytes: Int(least))
        }
        var started = monotonicSeconds()
        let index = FeatureIndex(directory: mosaic.cacheDirectory ?? defaultCacheDirectory(), subCells: k, cellAspect: cellAspect)
        let features = try analysedFeatures(drawable.photos, index: index, subCells: k, cellAspect: cellAspect, workers: workers,
                                            budget: decodeBudget, temporaryDirectory: temporary, cancellation: cancellation,
                                            progress: analysisProgress)
        let analysisSeconds = monotonicSeconds() - started
        releaseFreedMemory()
        guard features.have.contains(true) else { throw .noPhotos(searched: library.searched) }
        // One photo per picture: a duplicate would let the same picture touch itself.
        let fixedBytes = preparationParts(columns: matched.columns, rows: matched.rows, photoCount: library.photos.count, subCells: k, settings: settings).fixed
        let pictures = try distinctPictures(drawable.photos, store: features.store, have: features.have, temporaryDirectory: temporary,
                                            budget: (settings, fixedBytes))
        releaseFreedMemory()
        // A default distance a small library cannot keep is lowered, not refused: its first
        // mosaic should render. The largest D whose (2D+1) x (2D+1) block the pictures fill.
        var mosaic = mosaic
        var minDistanceLowered: Int?
        let keepableDistance = Self.keepableDistance(pictures: pictures.photos.count,
                                                     smallestCell: adaptive ? mosaic.smallestCell : nil)
        if mosaic.minDistanceIsDefault && mosaic.minDistance > keepableDistance {
            mosaic.minDistance = keepableDistance
            minDistanceLowered = keepableDistance
        }
        // Once the distinct pictures are counted, before the target and the matching.
        try MosaicMatcher.refuseImpossibleMinUses(columns: matched.columns, rows: matched.rows, pictures: pictures.photos.count,
                                                  minUses: mosaic.minUses, maxUses: mosaic.maxUses, minDistance: adaptive ? 0 : mosaic.minDistance)

        started = monotonicSeconds()
        progress?(.target, 0, 1)
        let cells = try targetCells(mosaic, rows: rows, budget: decodeBudget, cancellation: cancellation, store: pictures.store)
        let target = cells.target
        let targetSeconds = monotonicSeconds() - started
        progress?(.target, 1, 1)
        started = monotonicSeconds()
        progress?(.matching, 0, matched.columns * matched.rows)
        var match = try MosaicMatcher.match(target: target, columns: matched.columns, rows: matched.rows, subCells: k, store: pictures.store,
                                            minDistance: mosaic.minDistance, maxUses: mosaic.maxUses, minUses: mosaic.minUses,
                                            seed: mosaic.seed,
                                            workers: workers, effort: mosaic.matchEffort,
                                            chunkPhotos: matchingRun(cells: matched.columns * matched.rows, photoCount: pictures.photos.count,
                                                                     subCells: k, settings: settings),
                                            neighbours: cells.neighbours,
                                            weights: cells.adaptive.map { $0.cells.map { Float(Int($0.side) * Int($0.side)) } },
                                            cancellation: cancellation,
                                            progress: matchingProgress)
        if let adaptive = cells.adaptive {
            match.frames = (0..<adaptive.cells.count).map { adaptive.frame($0) }
            (match.unitWidth, match.unitHeight) = (adaptive.unitWidth, adaptive.unitHeight)
        }
        let matchSeconds = monotonicSeconds() - started
        let measured = try measure(match, target: target, pictures: pictures, mosaic: mosaic, neighbours: cells.neighbours)
        releaseFreedMemory()
        // The render reads only the photos the mosaic uses (at most one a cell, whatever the
        // library's size), numbered in the order of the pictures.
        let used = try usedPhotos(match, pictures: pictures, subCells: k, keepFeatures: mosaic.tintPercent > 0,
                                  temporaryDirectory: settings.temporaryDirectory)
        let layout = cells.adaptive?.layout(assignment: used.match.assignment)
            ?? CellLayout(columns: columns, rows: rows, cellWidth: mosaic.cellWidth, cellHeight: mosaic.cellHeight,
                          photoIndices: used.match.assignment)
        // (An adaptive mosaic's target is its cells', in the layout's order: the tint's per frame.)
        let tint = mosaic.tintPercent > 0
            ? CellTint(strength: Float(mosaic.tintPercent) / 100, subCells: k, target: target, features: used.features)
            : nil
        var prepared = PreparedMosaic(request: RenderRequest(photos: used.photos, layout: layout, settings: renderSettings(settings),
                                                             outputs: outputs, tint: tint),
                                      match: used.match, failed: drawable.leftOut + features.outcome.failed,
                                      analysed: features.outcome.analysed, reused: index.hits,
                                      analysisSeconds: analysisSeconds, targetSeconds: targetSeconds, matchSeconds: matchSeconds,
                                      indexNotSaved: features.indexError)
        prepared.duplicates = pictures.duplicates
        prepared.duplicateCount = pictures.duplicateCount
        prepared.photoCount = pictures.photos.count
        prepared.preparationBytes = preparation
        prepared.minDistanceLowered = minDistanceLowered
        prepared.adaptive = cells.adaptive
        (prepared.colour, prepared.tooSmall, prepared.unmet) = measured
        return prepared
    }

    /// Before any photo is read: a mosaic whose matching or render cannot fit the budget is
    /// refused with the smallest budget that fits both, not found out after minutes of
    /// analysis. (The render is planned on a layout of the mosaic's shape; which photo goes
    /// where does not change what it needs.) Returns what preparing holds, and that layout.
    /// The largest minimum distance `pictures` distinct pictures can keep everywhere: D cells of
    /// a grid, where they fill a (2D+1) x (2D+1) block; for an adaptive mosaic (`smallestCell`,
    /// its smallest cell in pixels), in pixels, where copies may not stand less than D px apart
    /// (CellNeighbours): D smallest cells' width, whose copies are then D cells apart as in the
    /// grid (64 px between 32 px cells asks a 5 x 5 block, as 2 cells of a grid do). One pixel
    /// less, as this said before, lowered a default that the library kept, and the strict mode
    /// refused the mosaic.
    public static func keepableDistance(pictures: Int, smallestCell: (width: Int, height: Int)?) -> Int {
        let cells = max(0, (Int(Double(max(0, pictures)).squareRoot()) - 1) / 2)
        guard let smallestCell else { return cells }
        return cells * max(1, min(smallestCell.width, smallestCell.height))
    }

    /// The largest minimum distance in pixels that `pictures` distinct pictures keep in an
    /// adaptive mosaic whatever its cells: around a largest cell (`levels`: its side is
    /// 2^levels smallest cells) whose neighbours are all smallest cells, every cell within D px
    /// has a picture of its own when they are fewer than the pictures (then a cell always has a
    /// picture no neighbour holds). keepableDistance's D assumes smallest cells alone, and a
    /// large cell has more neighbours within the same distance: 200 pictures with 64 px cells
    /// of 8 px at its 96 px left 45 cells unmet; this says 32.
    public static func guaranteedDistance(pictures: Int, smallestCell: (width: Int, height: Int), levels: Int) -> Int {
        let side = 1 << max(0, levels)
        var rings = 0
        while (side + 2 * (rings + 1)) * (side + 2 * (rings + 1)) - side * side <= pictures - 1 { rings += 1 }
        return rings * max(1, min(smallestCell.width, smallestCell.height))
    }

    static func checkBudget(_ mosaic: MosaicSettings, rows: Int, matched: (columns: Int, rows: Int), photoCount: Int,
                            settings: RenderSettings, outputs: [RenderOutput],
                            beforeAnalysis: ((RenderPlan) throws(TesseraError) -> Void)?) throws(TesseraError) -> (Int, CellLayout) {
        let columns = mosaic.columns
        let extra = adaptiveBytes(mosaic, rows: rows)
        let preparation = preparationBytes(columns: matched.columns, rows: matched.rows, photoCount: photoCount,
                                           subCells: mosaic.subCells, settings: settings, minUses: mosaic.minUses) + extra
        // Every photo in turn (which photo goes where changes nothing the plan counts but the
        // distinct photos, taken as all of them).
        let distinct = max(1, min(photoCount, columns * rows))
        let provisional = CellLayout.mosaicPlan(columns: columns, rows: rows, cellWidth: mosaic.cellWidth, cellHeight: mosaic.cellHeight,
                                                photoCount: distinct)
        func fits(_ budget: Int) -> Bool {
            var trial = settings
            trial.maxMemoryBytes = budget
            return preparationBytes(columns: matched.columns, rows: matched.rows, photoCount: photoCount,
                                    subCells: mosaic.subCells, settings: trial, minUses: mosaic.minUses) + extra <= budget
                && (try? RenderPlan.make(layout: provisional, settings: renderSettings(trial), writing: outputs.map(\.kind),
                                         wholeImageBytes: 0)) != nil
        }
        if !fits(settings.maxMemoryBytes) {
            throw TesseraError.budgetTooSmall(budgetBytes: settings.maxMemoryBytes,
                                              neededBytes: RenderPlan.smallestBudget(from: settings.maxMemoryBytes, fits: fits) ?? preparation)
        }
        // (The checks a caller makes before the work, free space for one.)
        try beforeAnalysis?(RenderPlan.make(layout: provisional, settings: renderSettings(settings), writing: outputs.map(\.kind)))
        return (preparation, provisional)
    }

    /// The cells' target features: a grid's (MosaicAnalysis.targetFeatures), or an adaptive
    /// mosaic's, its cells split by the target's detail (AdaptiveCells.split, the target read at
    /// k samples a side of the smallest cell) with each cell's neighbours within the minimum distance.
    static func targetCells(_ mosaic: MosaicSettings, rows: Int, budget: DecodeBudget, cancellation: RenderCancellation?,
                            store: FeatureStore? = nil)
        throws(TesseraError) -> (target: [Float], adaptive: AdaptiveCells?, neighbours: CellNeighbours?) {
        let k = mosaic.subCells, levels = mosaic.adaptiveLevels
        guard levels > 0 else {
            return (try MosaicAnalysis.targetFeatures(path: mosaic.targetPath, columns: mosaic.columns, rows: rows, subCells: k,
                                                      budget: budget, cancellation: cancellation), nil, nil)
        }
        let width = (mosaic.columns << levels) * k, height = (rows << levels) * k
        let decoder = CellDecoder(cellWidth: width, cellHeight: height, budget: budget, cancellation: cancellation)
        var pixels = [UInt8](repeating: 0, count: decoder.cellBytes)
        try pixels.withUnsafeMutableBytes { bytes in
            Result { () throws(TesseraError) in _ = try decoder.decodeWhole(file: PathBytes(mosaic.targetPath), into: bytes) }
        }.get()
        // The split weighs what the library can show: a sample of it, evenly spread over the store.
        var sample: [Float] = []
        if let store {
            let step = max(1, store.count / splitPhotos)
            for row in stride(from: 0, to: store.count, by: step).prefix(splitPhotos) { sample += try store.features(of: row) }
        }
        let split = AdaptiveCells.split(pixels: pixels, columns: mosaic.columns, rows: rows, largestWidth: mosaic.cellWidth,
                                        largestHeight: mosaic.cellHeight, levels: levels, subCells: k, count: mosaic.adaptiveCellCount(rows: rows),
                                        photos: sample, cancellation: cancellation)
        pixels = []
        if cancellation?.isCancelled == true { throw .cancelled }
        return (split.features, split.cells, CellNeighbours(split.cells, minDistance: mosaic.minDistance))
    }

    /// Photos of the library an adaptive mosaic's split compares cells with (at most).
    static let splitPhotos = 256

    /// What an adaptive mosaic holds besides a grid's of as many cells: the target's samples
    /// and the split's heap, the neighbours' lists; 0 for a grid.
    static func adaptiveBytes(_ mosaic: MosaicSettings, rows: Int) -> Int {
        let levels = mosaic.adaptiveLevels
        guard levels > 0 else { return 0 }
        let cells = mosaic.adaptiveCellCount(rows: rows)
        return AdaptiveCells.splitBytes(columns: mosaic.columns, rows: rows, levels: levels, subCells: mosaic.subCells, cells: cells)
            + CellNeighbours.plannedBytes(cells: cells, unitCells: (mosaic.columns << levels) * (rows << levels),
                                          minDistance: mosaic.minDistance, unitWidth: max(1, mosaic.cellWidth >> levels),
                                          unitHeight: max(1, mosaic.cellHeight >> levels))
    }

    /// The part of `adaptiveBytes` the minimum distance decides (each cell lists every cell
    /// nearer than it): a caller names it when it is what a refused budget is short of. 0 for
    /// a grid, and when `rows` cannot be known (nil rows and no target read).
    public static func neighbourListBytes(_ mosaic: MosaicSettings) -> Int {
        let levels = mosaic.adaptiveLevels
        guard levels > 0, mosaic.minDistance > 0, let rows = try? rows(for: mosaic) else { return 0 }
        let cells = mosaic.adaptiveCellCount(rows: rows)
        return CellNeighbours.plannedBytes(cells: cells, unitCells: (mosaic.columns << levels) * (rows << levels),
                                           minDistance: mosaic.minDistance, unitWidth: max(1, mosaic.cellWidth >> levels),
                                           unitHeight: max(1, mosaic.cellHeight >> levels))
            - CellNeighbours.plannedBytes(cells: cells, unitCells: (mosaic.columns << levels) * (rows << levels),
                                          minDistance: 0, unitWidth: 1, unitHeight: 1)
    }

    /// What the match looks like against the target while both features are at hand: the
    /// colour difference (CIEDE2000), the pictures too small for the cell, the cells that
    /// break a rule. Holds the cells'
    /// order by picture (4 bytes a cell) beside the target's features, within the matching's
    /// share of the plan (its working set is freed by now).
    static func measure(_ match: MosaicMatch, target: [Float], pictures: (photos: PhotoTable, store: FeatureStore, duplicates: [(photo: String, sameAs: String)], duplicateCount: Int),
                        mosaic: MosaicSettings, neighbours: CellNeighbours? = nil) throws(TesseraError) -> (ColourDifference, TooSmallPhotos, UnmetConstraints) {
        let order = MosaicQuality.cellsByPhoto(match.assignment)
        let colour = try MosaicQuality.colourDifference(target: target, assignment: match.assignment, order: order, store: pictures.store,
                                                        subCells: mosaic.subCells, tint: Float(mosaic.tintPercent) / 100)
        let tooSmall = MosaicQuality.tooSmallPhotos(pictures.photos, cellWidth: mosaic.cellWidth, cellHeight: mosaic.cellHeight,
                                                    assignment: match.assignment, order: order)
        var unmet = MosaicQuality.unmetConstraints(assignment: match.assignment, columns: match.columns, order: order,
                                                   minDistance: neighbours == nil ? mosaic.minDistance : 0, maxUses: mosaic.maxUses,
                                                   minUses: mosaic.minUses, pictures: pictures.photos.count)
        if let neighbours { unmet.tooClose = MosaicQuality.tooClose(assignment: match.assignment, neighbours: neighbours) }
        return (colour, tooSmall, unmet)
    }

    /// The features of every photo of `photos` (row for row in the store; `have` marks the
    /// rows that have them): from the index where it holds them, analysed (and appended to
    /// the index, a batch at a time) where it does not. The index is compacted at the end.
    static func analysedFeatures(_ photos: PhotoTable, index: FeatureIndex, subCells k: Int, cellAspect: Double, workers: Int,
                                 budget: DecodeBudget, temporaryDirectory: String, cancellation: RenderCancellation?,
                                 progress: (@Sendable (Int, Int) -> Void)?)
        throws(TesseraError) -> (store: FeatureStore, have: [Bool], outcome: MosaicAnalysis.Outcome, indexError: TesseraError?) {
        let d = k * k * 3
        let store = try FeatureStore(writableCount: photos.count, valuesPerPhoto: d, directory: temporaryDirectory)
        var have = [Bool](repeating: false, count: photos.count)
        var indexError: TesseraError?
        var missing: [Int32]
        do throws(TesseraError) {
            missing = try index.lookup(photos) { row, features throws(TesseraError) in
                try store.write(row, features)
                have[row] = true
            }
        } catch {
            // An index that cannot be read is no index: every photo is analysed.
            indexError = error
            missing = (0..<photos.count).filter { !have[$0] }.map(Int32.init)
        }
        let outcome = try MosaicAnalysis.analyse(photos, rows: missing, into: store, have: &have, subCells: k, cellAspect: cellAspect,
                                                 workers: workers, index: indexError == nil ? index : nil, budget: budget,
                                                 cancellation: cancellation, progress: progress)
        if cancellation?.isCancelled == true { throw .cancelled }
        indexError = indexError ?? outcome.indexError
        if indexError == nil {
            do throws(TesseraError) { try index.compact() } catch { indexError = error }
        }
        return (store, have, outcome, indexError)
    }

    /// The photos that show distinct pictures (DuplicatePictures), their features, and the
    /// duplicates left out (the first `heldDuplicates` named, all counted).
    /// More distinct pictures than the budget holds (`pictureBytes`) are refused with the
    /// budget that would hold them.
    static func distinctPictures(_ photos: PhotoTable, store: FeatureStore, have: [Bool], temporaryDirectory: String,
                                 budget: (settings: RenderSettings, fixedBytes: Int))
        throws(TesseraError) -> (photos: PhotoTable, store: FeatureStore, duplicates: [(photo: String, sameAs: String)], duplicateCount: Int) {
        var duplicates: [(photo: String, sameAs: String)] = []
        var duplicateCount = 0
        let d = store.valuesPerPhoto
        let k = Int(Double(d / 3).squareRoot().rounded())
        let room = pictureBytes(photoCount: photos.count, subCells: k, besides: budget.fixedBytes, settings: budget.settings)
        let perPicture = DuplicatePictures.heldBytes(pictures: 1, valuesPerPhoto: d) - DuplicatePictures.heldBytes(pictures: 0, valuesPerPhoto: d)
        let maxPictures = max(1, (room - DuplicatePictures.heldBytes(pictures: 0, valuesPerPhoto: d)) / perPicture)
        guard let rows = try DuplicatePictures.representatives(store: store, have: have, maxPictures: maxPictures, duplicate: { row, representative in
            duplicateCount += 1
            if duplicates.count < heldDuplicates { duplicates.append((photos[row].path, photos[representative].path)) }
        }) else {
            let analysed = have.reduce(0) { $0 + ($1 ? 1 : 0) }
            throw .budgetTooSmall(budgetBytes: budget.settings.maxMemoryBytes,
                                  neededBytes: budget.fixedBytes + DuplicatePictures.heldBytes(pictures: analysed, valuesPerPhoto: d))
        }
        let picked = try FeatureStore(writableCount: rows.count, valuesPerPhoto: d, directory: temporaryDirectory)
        let chosen = PhotoTable.Builder(temporaryDirectory: temporaryDirectory)
        var buffer = [Float](repeating: 0, count: d)
        for (slot, row) in rows.enumerated() {
            try buffer.withUnsafeMutableBufferPointer { values in
                Result { () throws(TesseraError) in
                    try store.read(Int(row), 1, into: values.baseAddress!)
                    try picked.write(slot, UnsafeBufferPointer(values))
                }
            }.get()
            try chosen.append(photos[Int(row)])
        }
        return (try chosen.finish(), picked, duplicates, duplicateCount)
    }

    /// The photos `match` uses, in the order of the pictures, with the assignment renumbered to
    /// them, and their features one after another when a tint needs them.
    static func usedPhotos(_ match: MosaicMatch, pictures: (photos: PhotoTable, store: FeatureStore, duplicates: [(photo: String, sameAs: String)], duplicateCount: Int),
                           subCells k: Int, keepFeatures: Bool, temporaryDirectory: String?) throws(TesseraError) -> (photos: PhotoTable, match: MosaicMatch, features: [Float]) {
        var number = [Int32](repeating: -1, count: pictures.photos.count)
        for photo in match.assignment where photo >= 0 { number[Int(photo)] = 0 }
        let photos = PhotoTable.Builder(temporaryDirectory: temporaryDirectory)
        var features: [Float] = []
        for picture in 0..<number.count where number[picture] == 0 {
            number[picture] = Int32(photos.count)
            try photos.append(pictures.photos[picture])
            if keepFeatures { features += try pictures.store.features(of: picture) }
        }
        let assignment = match.assignment.map { $0 >= 0 ? number[Int($0)] : $0 }
        return (try photos.finish(), match.renumbered(assignment), features)
    }

    /// Duplicates named in a mosaic's report (all are counted).
    public static let heldDuplicates = 1_000

    /// `tessera analyse`: analyses the photos of `library` (share `shard` of them, in path
    /// order, when given) into the feature index for cells of `cellWidth` x `cellHeight` and
    /// `k` sub-cells, skipping those it already holds; saves it (a shard into its own file).
    public static func analyse(library: PhotoLibrary, cellWidth: Int, cellHeight: Int, subCells k: Int, settings: RenderSettings,
                               cacheDirectory: String?, shard: ShardSpec?, cancellation: RenderCancellation? = nil,
                               progress: (@Sendable (Int, Int) -> Void)? = nil) throws(TesseraError) -> AnalyseSummary {
        let started = monotonicSeconds()
        // The library is in path order already (the scan's order).
        let all = library.photos
        let share = shard.map { all.count * ($0.number - 1) / $0.count..<all.count * $0.number / $0.count } ?? 0..<all.count
        var photos = all
        if share.count != all.count {
            let builder = PhotoTable.Builder(temporaryDirectory: settings.temporaryDirectory)
            for row in share { try builder.append(all[row]) }
            photos = try builder.finish()
        }
        let workers = settings.workers ?? onlineCoreCount()
        let cellAspect = Double(cellWidth) / Double(cellHeight)
        let index = FeatureIndex(directory: cacheDirectory ?? defaultCacheDirectory(), subCells: k, cellAspect: cellAspect, shard: shard)
        let budget = DecodeBudget(settings: settings, workers: workers)
        let features = try analysedFeatures(photos, index: index, subCells: k, cellAspect: cellAspect, workers: workers, budget: budget,
                                            temporaryDirectory: settings.temporaryDirectory ?? defaultTemporaryDirectory(),
                                            cancellation: cancellation, progress: progress)
        if let error = features.indexError { throw error }
        return AnalyseSummary(photos: photos.count, of: all.count, analysed: features.outcome.analysed, reused: index.hits,
                              failed: features.outcome.failed, indexPath: index.path, seconds: monotonicSeconds() - started,
                              peakResidentBytes: peakResidentBytes())
    }
}

/// What `MosaicJob.analyse` did.
public struct AnalyseSummary: Equatable, Sendable {
    /// Photos in this run's share, of all found.
    public let photos: Int
    public let of: Int
    /// Analysed now, and found in the index already.
    public let analysed: Int
    public let reused: Int
    public let failed: [SkippedPhoto]
    /// The index file written.
    public let indexPath: String
    public let seconds: Double
    public let peakResidentBytes: Int64
}
