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
    public var seed: UInt64 = 1
    /// Passes of local search after the greedy assignment (MosaicMatcher phase 3); 0: none.
    public var matchEffort = 2
    /// How far each cell's colours move toward its part of the target, 0...100.
    public var tintPercent = 0
    /// Where the feature index lives; nil: defaultCacheDirectory().
    public var cacheDirectory: String?

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
    public var duplicates: [(photo: String, sameAs: String)] = []
    /// The most preparing the mosaic held, as planned (`MosaicJob.preparationBytes`).
    public var preparationBytes = 0
}

/// The steps of preparing a mosaic, as its progress names them.
public enum MosaicStep: Sendable {
    case analysis, target, matching
}

public enum MosaicJob {
    /// The most preparing a mosaic of `columns` x `rows` cells from `photoCount` photos holds at
    /// once, the process included: the matching's working set, or the target's decode (its
    /// sub-cell pixels and their features, and a decoder), whichever is more; with the feature
    /// index's entries for the photos.
    public static func preparationBytes(columns: Int, rows: Int, photoCount: Int, subCells k: Int, settings: RenderSettings) -> Int {
        let cells = columns * rows
        let d = k * k * 3
        let workers = settings.workers ?? onlineCoreCount()
        let decodePool = DecodeBudget.poolBytes(forBudget: settings.steadyStateBudgetBytes, workers: workers)
        let index = photoCount * (d * 4 + 160)
        let target = cells * k * k * 3 + cells * d * 4 + decodePool
        let matching = MosaicMatcher.workingBytes(cells: cells, photos: photoCount, subCells: k,
                                                  chunkPhotos: matchingRun(cells: cells, photoCount: photoCount, subCells: k, settings: settings))
        let analysis = decodePool + workers * (k * MosaicAnalysis.samplesPerSubCell) * (k * MosaicAnalysis.samplesPerSubCell) * 3
        return RenderPlan.processAllowanceBytes + index + max(target, matching, analysis)
    }

    /// Photos the matcher ranks at once: as many as the budget leaves room for beside the feature
    /// index's entries (MosaicMatcher.runPhotos).
    static func matchingRun(cells: Int, photoCount: Int, subCells k: Int, settings: RenderSettings) -> Int {
        MosaicMatcher.runPhotos(cells: cells, photos: max(1, photoCount), subCells: k, budgetBytes: settings.steadyStateBudgetBytes,
                                otherBytes: photoCount * (k * k * 3 * 4 + 160))
    }

    /// The photos a render of `layout` can draw within `settings`' budget, and the others with
    /// why. A photo decoded whole (a HEIF without a thumbnail that covers the cell, a lossless
    /// WebP) needs its whole image in memory, and the render leaves room for one such photo
    /// only up to `RenderPlan.wholeImageLimitBytes` (analysis, which holds little else, allows
    /// more: a photo could be analysed and matched, then drawn as a placeholder). Each left-out
    /// photo carries the budget that would draw it (DecodeBudget.budgetToDraw: this budget and
    /// the shortfall, the decoder's own rule).
    static func drawablePhotos(_ photos: [Photo], layout: CellLayout, settings: RenderSettings,
                               outputs: [OutputKind]) -> (photos: [Photo], leftOut: [SkippedPhoto]) {
        let needs = photos.map { $0.header.wholeImageBytes(cellWidth: layout.cellWidth, cellHeight: layout.cellHeight) }
        guard let largest = needs.max(), largest > 0,
              let plan = try? RenderPlan.make(layout: layout, settings: settings, writing: outputs, wholeImageBytes: largest),
              largest > plan.wholeImageLimitBytes else { return (photos, []) }
        var kept: [Photo] = [], leftOut: [SkippedPhoto] = []
        for (photo, need) in zip(photos, needs) {
            guard need > plan.wholeImageLimitBytes else {
                kept.append(photo)
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
        return (kept, leftOut)
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
        // Before any photo is read: a mosaic whose matching or render cannot fit the budget is
        // refused with the smallest budget that fits both, not found out after minutes of
        // analysis. (The render is planned on a layout of the mosaic's shape; which photo goes
        // where does not change what it needs.)
        let preparation = preparationBytes(columns: columns, rows: rows, photoCount: library.photos.count, subCells: mosaic.subCells,
                                           settings: settings)
        // Every photo in turn (which photo goes where changes nothing the plan counts but the
        // distinct photos, taken as all of them).
        let distinct = max(1, min(library.photos.count, columns * rows))
        let provisional = CellLayout(columns: columns, rows: rows, cellWidth: mosaic.cellWidth, cellHeight: mosaic.cellHeight,
                                     photoIndices: (0..<(columns * rows)).map { Int32($0 % distinct) })
        do {
            func fits(_ budget: Int) -> Bool {
                var trial = settings
                trial.maxMemoryBytes = budget
                return preparationBytes(columns: columns, rows: rows, photoCount: library.photos.count, subCells: mosaic.subCells,
                                        settings: trial) <= budget
                    && (try? RenderPlan.make(layout: provisional, settings: trial, writing: outputs.map(\.kind), wholeImageBytes: 0)) != nil
            }
            if !fits(settings.maxMemoryBytes) {
                throw TesseraError.budgetTooSmall(budgetBytes: settings.maxMemoryBytes,
                                                  neededBytes: RenderPlan.smallestBudget(from: settings.maxMemoryBytes, fits: fits) ?? preparation)
            }
            // (The checks a caller makes before the work, free space for one.)
            try beforeAnalysis?(RenderPlan.make(layout: provisional, settings: settings, writing: outputs.map(\.kind)))
        }
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
        let drawable = drawablePhotos(Array(library.photos), layout: provisional, settings: settings, outputs: outputs.map(\.kind))
        var started = monotonicSeconds()
        let index = FeatureIndex(directory: mosaic.cacheDirectory ?? defaultCacheDirectory(), subCells: k, cellAspect: cellAspect,
                                 only: Set(drawable.photos.map(\.path)))
        let analysis = MosaicAnalysis.photoFeatures(drawable.photos, subCells: k, cellAspect: cellAspect, workers: workers, index: index,
                                                    budget: decodeBudget, cancellation: cancellation,
                                                    progress: analysisProgress)
        if cancellation?.isCancelled == true { throw .cancelled }
        var indexNotSaved: TesseraError?
        do throws(TesseraError) { try index.save() } catch { indexNotSaved = error }
        let analysisSeconds = monotonicSeconds() - started
        var analysed: [Photo] = []
        var analysedFeatures: [[Float]] = []
        for (photo, feature) in zip(drawable.photos, analysis.features) {
            if let feature {
                analysed.append(photo)
                analysedFeatures.append(feature)
            }
        }
        guard !analysed.isEmpty else { throw .noPhotos(searched: library.searched) }
        // One photo per picture: a duplicate would let the same picture touch itself.
        let representatives = DuplicatePictures.representatives(analysedFeatures)
        var photos: [Photo] = []
        var features: [[Float]] = []
        var duplicates: [(photo: String, sameAs: String)] = []
        for (index, representative) in representatives.enumerated() {
            if representative == index {
                photos.append(analysed[index])
                features.append(analysedFeatures[index])
            } else {
                duplicates.append((analysed[index].path, analysed[representative].path))
            }
        }

        started = monotonicSeconds()
        progress?(.target, 0, 1)
        let target = try MosaicAnalysis.targetFeatures(path: mosaic.targetPath, columns: columns, rows: rows, subCells: k,
                                                       budget: decodeBudget, cancellation: cancellation)
        let targetSeconds = monotonicSeconds() - started
        progress?(.target, 1, 1)
        started = monotonicSeconds()
        progress?(.matching, 0, columns * rows)
        let match = try MosaicMatcher.match(target: target, columns: columns, rows: rows, subCells: k, photoFeatures: features,
                                            minDistance: mosaic.minDistance, maxUses: mosaic.maxUses, seed: mosaic.seed,
                                            workers: workers, effort: mosaic.matchEffort,
                                            chunkPhotos: matchingRun(cells: columns * rows, photoCount: features.count, subCells: k,
                                                                     settings: settings),
                                            cancellation: cancellation,
                                            progress: matchingProgress)
        let matchSeconds = monotonicSeconds() - started
        let layout = CellLayout(columns: columns, rows: rows, cellWidth: mosaic.cellWidth, cellHeight: mosaic.cellHeight,
                                photoIndices: match.assignment)
        let tint = mosaic.tintPercent > 0
            ? CellTint(strength: Float(mosaic.tintPercent) / 100, subCells: k, target: target, photoFeatures: features)
            : nil
        var prepared = PreparedMosaic(request: RenderRequest(photos: photos, layout: layout, settings: settings, outputs: outputs, tint: tint),
                                      match: match, failed: drawable.leftOut + analysis.failed, analysed: analysis.analysed, reused: index.hits,
                                      analysisSeconds: analysisSeconds, targetSeconds: targetSeconds, matchSeconds: matchSeconds,
                                      indexNotSaved: indexNotSaved)
        prepared.duplicates = duplicates
        prepared.preparationBytes = preparation
        return prepared
    }

    /// `tessera analyse`: analyses the photos of `library` (share `shard` of them, in path
    /// order, when given) into the feature index for cells of `cellWidth` x `cellHeight` and
    /// `k` sub-cells, skipping those it already holds; saves it (a shard into its own file).
    public static func analyse(library: PhotoLibrary, cellWidth: Int, cellHeight: Int, subCells k: Int, settings: RenderSettings,
                               cacheDirectory: String?, shard: ShardSpec?, cancellation: RenderCancellation? = nil,
                               progress: (@Sendable (Int, Int) -> Void)? = nil) throws(TesseraError) -> AnalyseSummary {
        let started = monotonicSeconds()
        let sorted = library.photos.sorted { $0.path < $1.path }
        let share = shard.map { sorted.count * ($0.number - 1) / $0.count..<sorted.count * $0.number / $0.count } ?? 0..<sorted.count
        let photos = Array(sorted[share])
        let workers = settings.workers ?? onlineCoreCount()
        let cellAspect = Double(cellWidth) / Double(cellHeight)
        let index = FeatureIndex(directory: cacheDirectory ?? defaultCacheDirectory(), subCells: k, cellAspect: cellAspect,
                                 only: Set(photos.map(\.path)), shard: shard)
        let budget = DecodeBudget(settings: settings, workers: workers)
        let analysis = MosaicAnalysis.photoFeatures(photos, subCells: k, cellAspect: cellAspect, workers: workers, index: index,
                                                    budget: budget, cancellation: cancellation, progress: progress)
        if cancellation?.isCancelled == true { throw .cancelled }
        try index.save()
        return AnalyseSummary(photos: photos.count, of: sorted.count, analysed: analysis.analysed, reused: index.hits,
                              failed: analysis.failed, indexPath: index.path, seconds: monotonicSeconds() - started,
                              peakResidentBytes: peakResidentBytes())
    }

    /// Writes where every photo went (CSV, or JSON for a path ending in .json).
    public static func writeManifest(_ mosaic: PreparedMosaic, to path: String) throws(TesseraError) {
        try RenderManifest.write(match: mosaic.match, photoPaths: mosaic.request.photos.map(\.path), to: path)
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
