// MosaicMatcher.swift — which photo goes in which cell of a photomosaic.
//
// Minimises the total squared Oklab distance between each cell's target sub-cells and the chosen
// photo's, subject to: no identical photo within `minDistance` cells (Chebyshev), at most
// `maxUses` uses of one photo, and at least `minUses` of every photo. Three phases, each a named
// step of `match`:
//   1. `rankCandidates`: in parallel, for each cell, the `candidateCount` best photos by cost (exact costs), the
//      photos read from the store a run at a time (so a million photos' features never need to
//      be in memory: they can stay in a FeatureStore's temporary file);
//   2. `Placement.placeGreedily`: one pass over the cells in a seeded random order, each taking its best candidate that the
//      constraints allow (a full scan of all photos when none of its candidates is allowed).
//      The random order spreads repeats evenly instead of letting the top-left cells take every
//      photo's best matches; the same seed gives the same mosaic.
//      At a minimum distance of 1 with no rule on uses (the default: `chainsApply`),
//      `placeInRows` instead: the rows from the top, each row's cells given together the photos
//      of least total cost next to the row above (a dynamic programme along the row, exact for
//      it): neighbours share out the few photos a smooth area wants instead of the first come
//      taking its best and leaving the next cell worse ones.
//      With a minimum of uses, `Placement.repairMinUses` then gives every photo used fewer times
//      its missing uses, each in the cell where it costs least extra, taken from a photo used
//      more than the minimum (the cells compared: all of them when that is cheap, else first
//      each cell's nearest short photos by a FeatureTree over those photos);
//   3. `Placement.improve`: `effort` passes of local search over the cells in the same order: a cell takes a better
//      candidate when the constraints allow it, or swaps photos with the one neighbour whose
//      photo blocks it, whenever that lowers the total cost (a reassignment never takes a photo
//      below its minimum of uses; a swap keeps every count). Where the chains apply, each pass
//      first relabels every row, then every column, at its least total cost with the rest as
//      it is (`sweepChains`: the same dynamic programme, in segments of `chainCells`), moves
//      that change many cells at once where one cell's move alone would break the rule.
//      Every move lowers it, so the
//      total never rises; the moves are made one at a time in a fixed order, so the result is
//      the same for any number of workers.
// Phases 2 and 3 change one value, `Placement` (the assignment, the costs and the bookkeeping
// the constraints and the moves read), through its mutating steps, on the calling thread.
// Phase 1's ranking is exact either way: every photo compared with the cell, or, from 512
// photos on, a tree over each run's principal components (FeatureTree) that finds the same
// photos in the same order.
import Dispatch

/// The result of matching: a photo per cell and how well it fits.
public struct MosaicMatch: Equatable, Sendable {
    public let columns: Int
    public let rows: Int
    /// Row-major: an index into the photo list given to the matcher.
    public internal(set) var assignment: [Int32]
    /// Row-major: mean Oklab distance between the cell's target sub-cells and its photo's.
    public let cellErrors: [Float]
    /// Cells where the constraints could not all be met (the best photo with uses left was
    /// taken), and the uses a minimum of uses still lacks (`missingUses`: a cell each that should
    /// have held a picture short of its minimum).
    public let constraintViolations: Int
    /// The total cost (squared Oklab distance summed over every sub-cell) after the greedy pass
    /// (and the repair that gives short pictures their minimum of uses), and at the end (lower
    /// or equal: the local search only makes moves that lower it).
    public var greedyCost: Double = 0
    public var totalCost: Double = 0
    /// The mean error (as `meanError`) after the greedy pass (and the repair).
    public var greedyMeanError: Double = 0
    /// The fewest uses asked of every picture (0: no minimum).
    public var minUses = 0
    /// Cells the repair gave to pictures short of `minUses` after the greedy pass, and what
    /// that added to the total cost.
    public var repairedCells = 0
    public var repairCost: Double = 0
    /// Pictures still used fewer than `minUses` times (the minimum distance left them no cell),
    /// and the uses they lack in all (counted in `constraintViolations`).
    public var picturesBelowMinUses = 0
    public var missingUses = 0
    /// Moves the local search made (reassignments and swaps), and its passes.
    public var improvements = 0
    public var improvementPasses = 0
    /// Seconds spent ranking candidates, in the greedy pass, repairing and improving.
    public var rankingSeconds = 0.0
    public var greedySeconds = 0.0
    public var repairSeconds = 0.0
    public var improvementSeconds = 0.0
    /// Whether the candidates came from the feature tree (else from comparing every photo).
    public var usedTree = false
    /// Runs of photos ranked (the store read a run at a time), and the most photos in one.
    public var runs = 0
    public var runPhotos = 0
    /// What the matching was planned to hold besides the process and the store
    /// (`MosaicMatcher.workingBytes`).
    public var plannedBytes = 0
    /// An adaptive mosaic's cells (nil for a grid's): each cell's rectangle in pixels, in the
    /// order of `assignment` (a framed layout's: top edge, then left edge), and the smallest
    /// cell's size, the unit its `position` counts in.
    public internal(set) var frames: [CellFrame]?
    public internal(set) var unitWidth = 0
    public internal(set) var unitHeight = 0

    /// Cell `cell`'s column and row: in a grid, its own; in an adaptive mosaic, its top-left
    /// corner counted in smallest cells.
    public func position(of cell: Int) -> (column: Int, row: Int) {
        if let frames { return (Int(frames[cell].x) / max(1, unitWidth), Int(frames[cell].y) / max(1, unitHeight)) }
        return (cell % columns, cell / columns)
    }

    /// An adaptive mosaic's smallest gap in pixels between two cells holding the same photo
    /// (CellNeighbours.gap: 0 when they touch); nil for a grid, or when no photo is used twice.
    public var smallestRepeatGap: Int? {
        guard let frames else { return nil }
        var cellsOf: [Int32: [Int]] = [:]
        for (cell, photo) in assignment.enumerated() where photo >= 0 { cellsOf[photo, default: []].append(cell) }
        var best = Int.max
        for (_, cells) in cellsOf where cells.count > 1 {
            // In cell order, by top edge: once a cell starts `best` below the other's bottom, later ones are farther.
            for i in 0..<cells.count {
                for j in (i + 1)..<cells.count {
                    let a = frames[cells[i]], b = frames[cells[j]]
                    if Int(b.y) - a.bottom >= best { break }
                    best = min(best, CellNeighbours.gap(a, b))
                }
            }
        }
        return best == Int.max ? nil : best
    }

    /// Equal results: the same placements and figures (the time each phase took is not compared).
    public static func == (a: MosaicMatch, b: MosaicMatch) -> Bool {
        a.columns == b.columns && a.rows == b.rows && a.assignment == b.assignment && a.cellErrors == b.cellErrors
            && a.constraintViolations == b.constraintViolations && a.greedyCost == b.greedyCost && a.totalCost == b.totalCost
            && a.improvements == b.improvements && a.improvementPasses == b.improvementPasses && a.minUses == b.minUses
            && a.repairedCells == b.repairedCells && a.repairCost == b.repairCost && a.picturesBelowMinUses == b.picturesBelowMinUses
            && a.missingUses == b.missingUses && a.frames == b.frames
    }

    public init(columns: Int, rows: Int, assignment: [Int32], cellErrors: [Float], constraintViolations: Int) {
        self.columns = columns
        self.rows = rows
        self.assignment = assignment
        self.cellErrors = cellErrors
        self.constraintViolations = constraintViolations
    }

    /// The same match with the photos numbered again (`assignment`: each cell's photo in the
    /// new numbering, a one-to-one renaming of the photos used).
    func renumbered(_ assignment: [Int32]) -> MosaicMatch {
        var match = self
        match.assignment = assignment
        return match
    }

    /// Mean Oklab colour error between target and mosaic at sub-cell resolution.
    public var meanError: Double { cellErrors.reduce(0.0) { $0 + Double($1) } / Double(max(1, cellErrors.count)) }

    /// The smallest Chebyshev distance between two cells holding the same photo; nil when no photo
    /// is used twice.
    public var smallestRepeatDistance: Int? {
        guard frames == nil else { return nil }
        var positions: [Int32: [(Int, Int)]] = [:]
        for (cell, photo) in assignment.enumerated() { positions[photo, default: []].append((cell / columns, cell % columns)) }
        var best = Int.max
        for (_, cells) in positions where cells.count > 1 {
            // Row-major order: once rows differ by `best`, later cells are farther.
            for i in 0..<cells.count {
                for j in (i + 1)..<cells.count {
                    let dy = cells[j].0 - cells[i].0
                    if dy >= best { break }
                    best = min(best, max(dy, abs(cells[j].1 - cells[i].1)))
                }
            }
        }
        return best == Int.max ? nil : best
    }
}

public enum MosaicMatcher {
    /// Cells placed between progress reports and cancellation checks.
    static let batchCells = 4096
    /// From this many photos on, candidates come from a FeatureTree.
    public static let treeThreshold = 512
    /// Photos read and ranked at once (one tree over each run) when no budget says otherwise:
    /// 32,768 photos are 3.5 MB of features at k = 3, and their tree about 2.4 MB.
    public static let chunkPhotos = 32_768
    /// The fewest photos a run holds (fewer runs are faster: every run is a search for every
    /// cell; see runPhotos).
    public static let smallestRun = 4096

    /// What matching `cells` cells against `photos` photos in runs of `chunkPhotos` holds
    /// besides the process and the photos' features (which stay where the store keeps them: see
    /// FeatureStore.residentBytes), in bytes. A cell: its target features, its `candidateCount`
    /// candidates (photo and cost), the order, assignment, costs and local search lists, the
    /// errors before and after. A placed photo (at most one a cell): its features and
    /// bookkeeping; with few photos, a table of every photo's slot. A photo of the run: its features, its projected point (as built and in tree
    /// order, 32 bytes each), its place in the order, its share of the nodes, the permutation's
    /// mark. With a minimum of uses (`minUses` > 0), the repair's besides (at most one short
    /// photo a cell): their features in a tree's order, the tree, and 2 offers a cell
    /// (`repairTreeBytesPerCell`). The chain moves' dynamic programme (`ChainScratch`, a segment
    /// of up to `chainCells` cells).
    public static func workingBytes(cells: Int, photos: Int, subCells k: Int, candidateCount: Int = 24,
                                    chunkPhotos: Int = MosaicMatcher.chunkPhotos, minUses: Int = 0) -> Int {
        let d = k * k * 3
        let m = min(candidateCount, max(1, photos))
        let run = min(chunkPhotos, photos)
        let placed = min(cells, photos)
        let table = photos <= max(cells, PhotoSlots.largestTable) ? photos * 4 : 0
        let repair = minUses > 0 ? cells * (d * 4 + repairTreeBytesPerCell) : 0
        let chains = ChainScratch.bytes(cells: min(chainCells, cells), labels: m + 1)
        return cells * (d * 4 + m * 8 + 20 + 8) + placed * (d * 4 + 48) + table + run * runBytesPerPhoto(subCells: k) + repair + chains
    }

    /// A cell's share of the repair: a short photo's projected point (32 bytes), its place in the
    /// order (4) and share of the nodes (about 4), and the cell's 2 offers (12 each), with room
    /// to spare.
    static let repairTreeBytesPerCell = 72

    /// Up to this many (picture, cell) comparisons, the repair compares every short picture with
    /// every cell (exact, and cheap: 16M comparisons of 27 values are well under a second);
    /// beyond, each cell finds its nearest short pictures by a FeatureTree over them.
    static let exhaustiveRepairPairs = 1 << 24

    static func runBytesPerPhoto(subCells k: Int) -> Int { k * k * 3 * 4 + 32 + 32 + 4 + 5 + 1 }

    /// The photos a run should hold for matching to stay within `budgetBytes` with the process
    /// (RenderPlan.processAllowanceBytes) and `otherBytes` besides (features the caller keeps
    /// in memory, say): as many as fit, all of them if they do, and never fewer than
    /// `smallestRun` (a budget that small is refused by the caller's plan, not here).
    public static func runPhotos(cells: Int, photos: Int, subCells k: Int, budgetBytes: Int, otherBytes: Int = 0,
                                 candidateCount: Int = 24) -> Int {
        let fixed = RenderPlan.processAllowanceBytes + otherBytes
            + workingBytes(cells: cells, photos: photos, subCells: k, candidateCount: candidateCount, chunkPhotos: 0)
        let fit = max(0, budgetBytes - fixed) / runBytesPerPhoto(subCells: k)
        return max(1, min(photos, max(smallestRun, fit)))
    }

    /// Matches `photoFeatures` (k*k*3 floats each) to `target` (`columns * rows` cells of k*k*3).
    public static func match(target: [Float], columns: Int, rows: Int, subCells k: Int, photoFeatures: [[Float]],
                             minDistance: Int, maxUses: Int?, minUses: Int = 0, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, effort: Int = 0, useTree: Bool? = nil, chunkPhotos: Int = MosaicMatcher.chunkPhotos,
                             repairByTree: Bool? = nil, cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        let d = k * k * 3
        return try match(target: target, columns: columns, rows: rows, subCells: k,
                         store: FeatureStore(photos: photoFeatures, valuesPerPhoto: d),
                         minDistance: minDistance, maxUses: maxUses, minUses: minUses, seed: seed, workers: workers,
                         candidateCount: candidateCount, effort: effort, useTree: useTree, chunkPhotos: chunkPhotos, repairByTree: repairByTree,
                         cancellation: cancellation, progress: progress)
    }

    /// The same, with the photos' features one after another in `flat` (k*k*3 floats each).
    public static func match(target: [Float], columns: Int, rows: Int, subCells k: Int, photos flat: [Float],
                             minDistance: Int, maxUses: Int?, minUses: Int = 0, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, effort: Int = 0, useTree: Bool? = nil, chunkPhotos: Int = MosaicMatcher.chunkPhotos,
                             repairByTree: Bool? = nil, cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        try match(target: target, columns: columns, rows: rows, subCells: k, store: FeatureStore(features: flat, valuesPerPhoto: k * k * 3),
                  minDistance: minDistance, maxUses: maxUses, minUses: minUses, seed: seed, workers: workers, candidateCount: candidateCount,
                  effort: effort, useTree: useTree, chunkPhotos: chunkPhotos, repairByTree: repairByTree, cancellation: cancellation,
                  progress: progress)
    }

    /// The same, with the photos' features in `store`, read `chunkPhotos` photos at a time.
    /// `useTree`: nil decides by the photo count; true or false forces the feature tree or the
    /// exhaustive ranking (they give the same result). `minUses`: every photo at least this many
    /// times (0: no minimum); `repairByTree`: nil decides by the work, true or false forces the
    /// repair's rounds over a FeatureTree of the short photos or its comparison of every short
    /// photo with every cell (these can differ: a round takes the cheapest offers first).
    /// `neighbours`: the cells of an adaptive mosaic (`columns` of them in one row), each with
    /// the cells a copy of its photo may not stand in (CellNeighbours, `minDistance` pixels);
    /// nil: a grid, with `minDistance` in cells. `weights`: each cell's share of the picture
    /// (an adaptive mosaic's cells: their area in smallest cells), its cost counted that many
    /// times, so a large cell weighs in a swap what it weighs in the picture; the greedy pass
    /// then places the heaviest cells first (in the seed's order among equals). nil: all 1.
    public static func match(target: [Float], columns: Int, rows: Int, subCells k: Int, store: FeatureStore,
                             minDistance: Int, maxUses: Int?, minUses: Int = 0, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, effort: Int = 0, useTree: Bool? = nil, chunkPhotos: Int = MosaicMatcher.chunkPhotos,
                             repairByTree: Bool? = nil, neighbours: CellNeighbours? = nil, weights: [Float]? = nil,
                             cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        let cells = columns * rows
        let d = k * k * 3
        let n = store.count
        precondition(target.count == cells * d && store.valuesPerPhoto == d && chunkPhotos > 0)
        precondition(neighbours == nil || (rows == 1 && neighbours!.cellCount == cells))
        precondition(weights == nil || weights!.count == cells)
        // (An adaptive mosaic's distance is in pixels: its rules are its neighbours'.)
        let gridDistance = neighbours == nil ? minDistance : 0
        try refuseImpossibleConstraints(cells: cells, photos: n, minDistance: gridDistance, maxUses: maxUses)
        try refuseImpossibleMinUses(columns: columns, rows: rows, pictures: n, minUses: minUses, maxUses: maxUses, minDistance: gridDistance)
        let run = min(chunkPhotos, n)
        let runFeatures = UnsafeMutableBufferPointer<Float>.allocate(capacity: run * d)
        defer { runFeatures.deallocate() }
        let reporter = MatchReporter(totalWork: cells * (2 + max(0, effort)), cancellation: cancellation, progress: progress)

        var started = monotonicSeconds()
        var ranking = try rankCandidates(target: target, cells: cells, valuesPerPhoto: d, store: store, m: min(candidateCount, n),
                                         useTree: useTree ?? (n >= treeThreshold), run: run, runFeatures: runFeatures,
                                         workers: workers, reporter: reporter)
        if let weights {
            // (A cell's candidates keep their order: one weight scales them all.)
            let m = ranking.m
            ranking = CandidateRanking(m: m, photos: ranking.photos, costs: ranking.costs.enumerated().map { $0.element * weights[$0.offset / m] },
                                       usedTree: ranking.usedTree)
        }
        let rankingSeconds = monotonicSeconds() - started

        var order = seededOrder(cells: cells, seed: seed)
        if let weights {
            // Heaviest first, the seed's order among equals (a stable sort of that order).
            order = order.enumerated().sorted { (weights[Int($0.element)], -$0.offset) > (weights[Int($1.element)], -$1.offset) }.map(\.element)
        }
        var placement = Placement(target: target, columns: columns, rows: rows, subCells: k, store: store, run: run,
                                  runFeatures: runFeatures, ranking: ranking, minDistance: minDistance, limit: maxUses ?? Int.max,
                                  minUses: minUses, neighbours: neighbours, weights: weights)
        started = monotonicSeconds()
        if placement.chainsApply {
            try placement.placeInRows(reporter: reporter)
        } else {
            try placement.placeGreedily(in: order, reporter: reporter)
        }
        let greedySeconds = monotonicSeconds() - started
        started = monotonicSeconds()
        let repair = try placement.repairMinUses(byTree: repairByTree, reporter: reporter)
        let repairSeconds = monotonicSeconds() - started
        let greedyCost = placement.totalCost
        let greedyErrors = placement.cellErrors()

        // (The lists the local search keeps are made before its clock starts, as they always were.)
        if effort > 0 { try placement.linkCells() }
        started = monotonicSeconds()
        let search = try placement.improve(in: order, effort: effort, reporter: reporter)
        let improvementSeconds = monotonicSeconds() - started

        var match = MosaicMatch(columns: columns, rows: rows, assignment: placement.assignment, cellErrors: placement.cellErrors(),
                                constraintViolations: placement.violations + repair.missingUses)
        match.minUses = minUses
        match.repairedCells = repair.cells
        match.repairCost = repair.cost
        match.picturesBelowMinUses = repair.pictures
        match.missingUses = repair.missingUses
        match.repairSeconds = repairSeconds
        match.greedyCost = greedyCost
        match.totalCost = placement.totalCost
        match.greedyMeanError = greedyErrors.reduce(0.0) { $0 + Double($1) } / Double(max(1, cells))
        match.improvements = search.moves
        match.improvementPasses = search.passes
        match.rankingSeconds = rankingSeconds
        match.greedySeconds = greedySeconds
        match.improvementSeconds = improvementSeconds
        match.usedTree = ranking.usedTree
        match.runs = (n + run - 1) / run
        match.runPhotos = run
        match.plannedBytes = workingBytes(cells: cells, photos: n, subCells: k, candidateCount: candidateCount, chunkPhotos: run,
                                          minUses: minUses)
        return match
    }

    /// Refuses constraints no placement can meet: fewer photos than a block of the minimum
    /// distance holds, or too few uses in all to fill the cells.
    static func refuseImpossibleConstraints(cells: Int, photos n: Int, minDistance: Int, maxUses: Int?) throws(TesseraError) {
        guard n > 0 else { throw .noPhotos(searched: []) }
        let window = (2 * minDistance + 1) * (2 * minDistance + 1)
        if minDistance > 0 && n < window && cells > 1 {
            throw .invalidSettings("a minimum distance of \(minDistance) needs at least \(window) different pictures (a \(2 * minDistance + 1) x \(2 * minDistance + 1) block holds no repeat; copies of one picture count once), found \(n): a distance of \(max(0, (Int(Double(n).squareRoot()) - 1) / 2)) fits them, or add pictures")
        }
        if let maxUses, maxUses * n < cells {
            throw .invalidSettings("at most \(maxUses) \(maxUses == 1 ? "use" : "uses") of each of \(n) \(n == 1 ? "photo" : "photos") fill at most \(maxUses * n) of \(cells) cells: "
                                   + "\((cells + n - 1) / n) uses each would fill them")
        }
    }

    /// Refuses a minimum of uses no placement can meet: more than the most uses, more than one
    /// picture fits on the grid at the minimum distance, or (once the distinct pictures are
    /// known: `pictures`) more uses in all than there are cells. Each refusal carries the nearest
    /// values that can be met. Cheap: a caller runs it before any photo is read (without
    /// `pictures`; `photoCount`, the photos found, names the most there can be) and again once
    /// they are counted.
    public static func refuseImpossibleMinUses(columns: Int, rows: Int, pictures: Int?, photoCount: Int? = nil, minUses: Int, maxUses: Int?,
                                               minDistance: Int) throws(TesseraError) {
        guard minUses > 0 else { return }
        let cells = columns * rows
        if let pictures, pictures > 0, pictures * minUses > cells {
            throw .minUsesImpossible(.tooFewCells(pictures: pictures, cells: cells, minUses: minUses))
        }
        if let maxUses, maxUses < minUses { throw .minUsesImpossible(.aboveMaxUses(minUses: minUses, maxUses: maxUses)) }
        // (Before the pictures are counted: the photos found are the most there can be, so the
        // message names them, and a minimum it suggests is one they could meet.)
        if minUses > cells { throw .minUsesImpossible(.tooFewCells(pictures: max(1, pictures ?? photoCount ?? 1), cells: cells, minUses: minUses)) }
        let most = mostUses(columns: columns, rows: rows, minDistance: minDistance)
        if minUses > most {
            // (At distance 0 every cell can hold the picture, and minUses <= cells here.)
            var distance = minDistance - 1
            while distance > 0 && mostUses(columns: columns, rows: rows, minDistance: distance) < minUses { distance -= 1 }
            throw .minUsesImpossible(.minDistance(minUses: minUses, minDistance: minDistance, columns: columns, rows: rows,
                                                  mostUses: most, largestDistance: max(0, distance)))
        }
    }

    /// The most cells of a `columns` x `rows` grid one picture can hold with no repeat within
    /// `minDistance` cells: every (D+1)-th cell of every (D+1)-th row, from a corner (a
    /// (D+1) x (D+1) block holds at most one, and the blocks from a corner cover the grid).
    public static func mostUses(columns: Int, rows: Int, minDistance: Int) -> Int {
        let step = minDistance + 1
        return ((columns + step - 1) / step) * ((rows + step - 1) / step)
    }

    /// Progress reports and cancellation checks, between batches of cells: `done` of `totalWork`
    /// (a cell per phase: ranking, greedy pass, each pass of the local search).
    struct MatchReporter {
        let totalWork: Int
        let cancellation: RenderCancellation?
        let progress: ((Int, Int) -> Void)?

        /// Throws `.cancelled` when the render was cancelled, else reports `done`.
        func report(_ done: Int) throws(TesseraError) {
            if cancellation?.isCancelled == true { throw .cancelled }
            progress?(done, totalWork)
        }
    }

    /// Phase 1's result: every cell's `m` best photos and their costs, best first, ties by
    /// photo index (row-major: cell `c`'s are at `c * m ..< (c + 1) * m`).
    struct CandidateRanking {
        let m: Int
        let photos: [Int32]
        let costs: [Float]
        /// Whether a feature tree ranked them (else every photo was compared with every cell).
        let usedTree: Bool
    }

    /// Phase 1: every cell's m best photos, ranked by (cost, index), a run of photos at a
    /// time: the run is read into `runFeatures`, a tree is built over it (its features moved
    /// into the tree's order, so a search reads neighbouring photos), and its photos are merged
    /// into every cell's ranking in parallel.
    static func rankCandidates(target: [Float], cells: Int, valuesPerPhoto d: Int, store: FeatureStore, m: Int, useTree treeWanted: Bool,
                               run: Int, runFeatures: UnsafeMutableBufferPointer<Float>, workers: Int,
                               reporter: MatchReporter) throws(TesseraError) -> CandidateRanking {
        let n = store.count
        var candidates = [Int32](repeating: .max, count: cells * m)
        var candidateCosts = [Float](repeating: .infinity, count: cells * m)
        var usedTree = false
        var projection: FeatureTree.Projection?
        var first = 0
        while first < n {
            let count = min(run, n - first)
            try store.read(first, count, into: runFeatures.baseAddress!)
            // (Every run projects on the first run's principal axes: runs of one library share them.)
            let tree: FeatureTree? = treeWanted && count > 1
                ? FeatureTree(features: runFeatures.baseAddress!, count: count, valuesPerPhoto: d, projection: projection) : nil
            if let tree {
                projection = projection ?? tree.projection
                permuteRecords(runFeatures.baseAddress!, width: d, order: tree.order)
                usedTree = true
            }
            mergeRun(UnsafePointer(runFeatures.baseAddress!), count: count, firstPhoto: Int32(first), tree: tree, target: target,
                     cells: cells, valuesPerPhoto: d, m: m, workers: workers, cancellation: reporter.cancellation,
                     into: &candidates, costs: &candidateCosts)
            if reporter.cancellation?.isCancelled == true { throw .cancelled }
            first += count
            reporter.progress?(Int((Double(cells) * Double(first) / Double(n)).rounded(.down)), reporter.totalWork)
        }
        return CandidateRanking(m: m, photos: candidates, costs: candidateCosts, usedTree: usedTree)
    }

    /// Merges a run of `count` photos (`features`, in the tree's order when there is a tree;
    /// the first is photo `firstPhoto`) into every cell's ranking, the cells spread over
    /// `workers` lanes.
    static func mergeRun(_ features: UnsafePointer<Float>, count: Int, firstPhoto: Int32, tree: FeatureTree?, target: [Float],
                         cells: Int, valuesPerPhoto d: Int, m: Int, workers: Int, cancellation: RenderCancellation?,
                         into candidates: inout [Int32], costs candidateCosts: inout [Float]) {
        target.withUnsafeBufferPointer { targets in
            candidates.withUnsafeMutableBufferPointer { out in
                candidateCosts.withUnsafeMutableBufferPointer { outCosts in
                    let f = UnsafeSendable(features), t = UnsafeSendable(targets.baseAddress!)
                    let c = UnsafeSendable(out.baseAddress!), cc = UnsafeSendable(outCosts.baseAddress!)
                    _ = mapInLanes(count: cells, lanes: workers, cancellation: cancellation,
                                   scratch: { FeatureTree.Scratch(dimensions: tree?.dimensions ?? 1) }) { cell, scratch in
                        let bestPhoto = c.value + cell * m, bestCost = cc.value + cell * m
                        let cellTarget = t.value + cell * d
                        if let tree {
                            tree.nearest(cellTarget, features: f.value, firstPhoto: firstPhoto, m: m, photos: bestPhoto, costs: bestCost,
                                         scratch: &scratch)
                            return
                        }
                        mergeEveryPhoto(f.value, count: count, firstPhoto: firstPhoto, into: cellTarget, valuesPerPhoto: d, m: m,
                                        photos: bestPhoto, costs: bestCost)
                    }
                }
            }
        }
    }

    /// Without a tree: every photo of the run compared with the cell (`cellTarget`) and
    /// inserted into its ranking (`bestPhoto`, `bestCost`: m each, best first); a later photo
    /// with an equal cost ranks after (the runs come in photo order).
    @inline(__always)
    static func mergeEveryPhoto(_ features: UnsafePointer<Float>, count: Int, firstPhoto: Int32, into cellTarget: UnsafePointer<Float>,
                                valuesPerPhoto d: Int, m: Int, photos bestPhoto: UnsafeMutablePointer<Int32>,
                                costs bestCost: UnsafeMutablePointer<Float>) {
        for photo in 0..<count {
            let cost = squaredDistance(cellTarget, features + photo * d, count: d)
            if cost < bestCost[m - 1] {
                var i = m - 1
                while i > 0 && bestCost[i - 1] > cost {
                    bestCost[i] = bestCost[i - 1]
                    bestPhoto[i] = bestPhoto[i - 1]
                    i -= 1
                }
                bestCost[i] = cost
                bestPhoto[i] = firstPhoto + Int32(photo)
            }
        }
    }

    /// The cells in a seeded random order (a Fisher-Yates shuffle by SplitMix64): the order of
    /// the greedy pass and of every pass of the local search.
    static func seededOrder(cells: Int, seed: UInt64) -> [Int32] {
        var order = [Int32](unsafeUninitializedCapacity: cells) { buffer, count in
            for i in 0..<cells { buffer[i] = Int32(i) }
            count = cells
        }
        var random = SplitMix64(seed: seed)
        for i in stride(from: cells - 1, to: 0, by: -1) { order.swapAt(i, Int(random.next() % UInt64(i + 1))) }
        return order
    }

    /// Phases 2 and 3: the photo in each cell and what the constraints and the moves need to
    /// know about it, with the steps that change it. One value, changed by one thread in a fixed
    /// order (the result is the same for any number of workers).
    ///
    /// The photos placed so far each have a slot: its features (read from the store once), its
    /// uses, and the head of the list of cells holding it (for the local search's swaps with a
    /// used-up photo). Only placed photos have a slot: at most one a cell, whatever the library.
    /// The greedy pass needs no features: the slots it makes are filled after it, in one pass
    /// over the store in photo order (tens of thousands of single reads scattered over a
    /// store that the page cache no longer holds took 2.2 s in a 64 MiB memory cgroup).
    struct Placement {
        let target: [Float]
        let columns: Int, rows: Int, k: Int
        /// Floats a photo's (and a cell's) features take: k * k * 3.
        let d: Int
        let store: FeatureStore
        /// Photos read from the store at once, into `runFeatures` (shared with the ranking).
        let run: Int
        let runFeatures: UnsafeMutableBufferPointer<Float>
        let ranking: CandidateRanking
        let minDistance: Int
        /// An adaptive mosaic's cells near each cell (nil: a grid's, within `minDistance` cells).
        let neighbours: CellNeighbours?
        /// Each cell's weight in the cost (nil: 1).
        let weights: [Float]?
        /// The most uses of one photo (Int.max: no limit), and the fewest of every photo (0: none).
        let limit: Int
        let minUses: Int

        /// Row-major: each cell's photo (-1 before it is placed) and its cost.
        private(set) var assignment: [Int32]
        private(set) var costs: [Float]
        /// Cells placed without meeting every constraint.
        private(set) var violations = 0
        private var slotOfPhoto: PhotoSlots
        private var placedFeatures: [Float] = []
        private var uses: [Int32] = []
        private var head: [Int32] = []
        /// Whether a newly placed photo's features are read as it is placed (after the greedy pass).
        private var readingPlaced = false
        /// The photos the greedy pass used fewer than `minUses` times, in photo order (each has a
        /// slot, its features read with the placed photos').
        private var shortPictures: [Int32] = []
        /// The cells holding each photo, as doubly linked lists from its slot's `head` (the local
        /// search's only: empty without it).
        private var next: [Int32] = []
        private var previous: [Int32] = []

        init(target: [Float], columns: Int, rows: Int, subCells k: Int, store: FeatureStore, run: Int,
             runFeatures: UnsafeMutableBufferPointer<Float>, ranking: CandidateRanking, minDistance: Int, limit: Int, minUses: Int = 0,
             neighbours: CellNeighbours? = nil, weights: [Float]? = nil) {
            let cells = columns * rows
            self.target = target
            self.columns = columns
            self.rows = rows
            self.k = k
            self.d = k * k * 3
            self.store = store
            self.run = run
            self.runFeatures = runFeatures
            self.ranking = ranking
            self.minDistance = minDistance
            self.neighbours = neighbours
            self.weights = weights
            self.limit = limit
            self.minUses = minUses
            assignment = [Int32](repeating: -1, count: cells)
            costs = [Float](repeating: 0, count: cells)
            slotOfPhoto = PhotoSlots(photos: store.count, cells: cells)
        }

        /// The total cost: every cell's, summed in cell order.
        var totalCost: Double { costs.reduce(0.0) { $0 + Double($1) } }

        /// Per cell: the mean Oklab distance of its photo (MosaicMatcher.placedErrors).
        func cellErrors() -> [Float] {
            placedErrors(target: target, assignment: assignment, subCells: k, features: placedFeatures) { Int(slotOfPhoto[$0]!) }
        }

        // MARK: Phase 2, the greedy pass

        /// One pass over the cells in `order`, each taking its best candidate that the
        /// constraints allow (a scan of all photos when none is allowed); then the features of
        /// every placed photo, and of every photo short of `minUses`, are read.
        mutating func placeGreedily(in order: [Int32], reporter: MatchReporter) throws(TesseraError) {
            let cells = assignment.count
            for (position, cellIndex) in order.enumerated() {
                let cell = Int(cellIndex)
                let (chosen, chosenCost) = try greedyChoice(cell)
                assignment[cell] = chosen
                costs[cell] = chosenCost
                let slot = try slot(chosen)
                uses[slot] += 1
                if (position + 1) % batchCells == 0 || position + 1 == cells {
                    try reporter.report(cells + position + 1)
                }
            }
            var read = Set(assignment)
            if minUses > 0 {
                // (At most one photo a cell: a minimum of uses is refused with more photos than cells.)
                for photo in 0..<Int32(store.count) where usesOf(photo) < minUses {
                    _ = try slot(photo)
                    shortPictures.append(photo)
                    read.insert(photo)
                }
            }
            try readPlacedFeatures(Array(read))
        }

        /// The photo the greedy pass gives `cell`: its first candidate the constraints allow,
        /// else the best of all photos (a violation when that one is not allowed either).
        mutating func greedyChoice(_ cell: Int) throws(TesseraError) -> (photo: Int32, cost: Float) {
            let m = ranking.m
            for i in 0..<m where allowed(ranking.photos[cell * m + i], cell: cell) {
                return (ranking.photos[cell * m + i], ranking.costs[cell * m + i])
            }
            let found = try bestOfAll(cell)
            if !found.allowed { violations += 1 }
            return (found.photo, found.cost)
        }

        /// When none of a cell's m best is allowed: every photo, read a run at a time, for the
        /// best allowed one by (cost, index); failing that the best with uses left, then the best
        /// (either a violation).
        func bestOfAll(_ cell: Int) throws(TesseraError) -> (photo: Int32, cost: Float, allowed: Bool) {
            let n = store.count
            var best: [(photo: Int32, cost: Float)] = Array(repeating: (-1, .infinity), count: 3)  // allowed, uses left, any
            var first = 0
            while first < n {
                let count = min(run, n - first)
                try store.read(first, count, into: runFeatures.baseAddress!)
                for photo in 0..<count {
                    let cost = target.withUnsafeBufferPointer { squaredDistance($0.baseAddress! + cell * d, runFeatures.baseAddress! + photo * d, count: d) }
                        * (weights?[cell] ?? 1)
                    let index = Int32(first + photo)
                    if cost < best[2].cost { best[2] = (index, cost) }
                    guard usesOf(index) < limit else { continue }
                    if cost < best[1].cost { best[1] = (index, cost) }
                    // Whatever best[1] is: a cheaper photo held nearby must not hide a dearer
                    // one that is allowed (it did, and 200 pictures, enough for every cell's
                    // 101 neighbours, left 18 cells of an adaptive mosaic with a copy nearby).
                    if cost < best[0].cost && holders(of: index, near: cell, most: 1).isEmpty { best[0] = (index, cost) }
                }
                first += count
            }
            if best[0].photo >= 0 { return (best[0].photo, best[0].cost, true) }
            let fallback = best[1].photo >= 0 ? best[1] : best[2]
            return (fallback.photo, fallback.cost, false)
        }

        // MARK: After the greedy pass, the minimum of uses

        /// Gives every photo short of `minUses` after the greedy pass its missing uses, each in a
        /// cell whose photo has uses to spare (more than `minUses`) and where the minimum
        /// distance still holds, at the least extra cost (the photo's cost there less the
        /// cell's) that can be found. With few pairs (`exhaustiveRepairPairs`; `byTree` false),
        /// one photo after another in photo order compares every cell. Else first in rounds
        /// (`repairInRounds`): every such cell offers itself to its nearest short photos by a
        /// FeatureTree over them, and the offers are taken cheapest first; what the rounds leave
        /// short is then done one photo at a time. Uses no cell can take (the minimum distance
        /// blocks every cell with a photo to spare) are counted as missing. One thread, in a
        /// fixed order: the same result for any number of workers.
        mutating func repairMinUses(byTree: Bool?, reporter: MatchReporter) throws(TesseraError)
            -> (cells: Int, cost: Double, pictures: Int, missingUses: Int) {
            guard minUses > 0, !shortPictures.isEmpty else { return (0, 0, 0, 0) }
            let cells = assignment.count
            var pending = shortPictures
            var repaired = 0, added = 0.0, below = 0, missing = 0
            if cells > 1 && (byTree ?? (shortPictures.count * cells > exhaustiveRepairPairs)) {
                (repaired, added) = try repairInRounds(&pending, reporter: reporter)
            }
            for (index, picture) in pending.enumerated() {
                var want = minUses - usesOf(picture)
                while want > 0 {
                    var took = 0
                    for cell in everyOffer(picture, keep: 4 * want + 16) where want > 0 && canGive(Int(cell), to: picture) {
                        added += give(Int(cell), to: picture)
                        took += 1
                        want -= 1
                    }
                    repaired += took
                    if want > 0 && took == 0 {
                        // Not one cell of the mosaic can take it: what it lacks is a violation.
                        below += 1
                        missing += want
                        break
                    }
                    // (Else, if it still lacks uses, the best offers of every cell were taken:
                    // the next ones are looked for.)
                }
                if (index + 1) % 256 == 0, reporter.cancellation?.isCancelled == true { throw .cancelled }
            }
            return (repaired, added, below, missing)
        }

        /// Up to 8 rounds: a FeatureTree over the photos in `pending` (short of `minUses`); every
        /// cell whose photo has uses to spare finds its 2 nearest of them (for a cell the nearest
        /// is the least extra cost: the cell's own cost is the same for all), and the offers are
        /// taken cheapest first, by (extra cost, cell, photo), while the photo is short and the
        /// cell can be given to it. `pending` is left holding the photos still short; stops
        /// early when a round gives nothing. Each round is a search a cell (not a comparison of
        /// every photo with every cell). Returns the cells given and the cost they added.
        mutating func repairInRounds(_ pending: inout [Int32], reporter: MatchReporter) throws(TesseraError) -> (cells: Int, cost: Double) {
            var repaired = 0, added = 0.0
            for _ in 0..<8 where !pending.isEmpty {
                var features = [Float](repeating: 0, count: pending.count * d)
                for (i, picture) in pending.enumerated() {
                    let slot = Int(slotOfPhoto[picture]!)
                    for v in 0..<d { features[i * d + v] = placedFeatures[slot * d + v] }
                }
                let tree = features.withUnsafeBufferPointer { FeatureTree(features: $0.baseAddress!, count: pending.count, valuesPerPhoto: d) }
                features.withUnsafeMutableBufferPointer { permuteRecords($0.baseAddress!, width: d, order: tree.order) }
                let m = min(2, pending.count)
                var offers: [(extra: Float, cell: Int32, picture: Int32)] = []
                var found = [Int32](repeating: .max, count: m), foundCosts = [Float](repeating: .infinity, count: m)
                var scratch = FeatureTree.Scratch(dimensions: tree.dimensions)
                for cell in 0..<assignment.count where usesOf(assignment[cell]) > minUses {
                    for i in 0..<m { (found[i], foundCosts[i]) = (.max, .infinity) }
                    target.withUnsafeBufferPointer { t in
                        features.withUnsafeBufferPointer { f in
                            found.withUnsafeMutableBufferPointer { found in
                                foundCosts.withUnsafeMutableBufferPointer { foundCosts in
                                    tree.nearest(t.baseAddress! + cell * d, features: f.baseAddress!, m: m, photos: found.baseAddress!,
                                                 costs: foundCosts.baseAddress!, scratch: &scratch)
                                }
                            }
                        }
                    }
                    for i in 0..<m where found[i] != .max { offers.append((foundCosts[i] - costs[cell], Int32(cell), pending[Int(found[i])])) }
                    if cell % batchCells == 0, reporter.cancellation?.isCancelled == true { throw .cancelled }
                }
                offers.sort { ($0.extra, $0.cell, $0.picture) < ($1.extra, $1.cell, $1.picture) }
                var took = 0
                for offer in offers where usesOf(offer.picture) < minUses && canGive(Int(offer.cell), to: offer.picture) {
                    added += give(Int(offer.cell), to: offer.picture)
                    took += 1
                }
                repaired += took
                pending = pending.filter { usesOf($0) < minUses }
                if took == 0 { break }
            }
            return (repaired, added)
        }

        /// Whether `cell` can be given to `picture`: its photo has uses to spare, and no cell near
        /// holds `picture`. (`picture` is short of `minUses`, so under the most uses.)
        func canGive(_ cell: Int, to picture: Int32) -> Bool {
            let current = assignment[cell]
            return current != picture && usesOf(current) > minUses && holders(of: picture, near: cell, most: 1).isEmpty
        }

        /// Puts `picture` in `cell` (the greedy pass's bookkeeping: the cells are not linked yet);
        /// returns what it adds to the total cost.
        mutating func give(_ cell: Int, to picture: Int32) -> Double {
            let cost = placedCost(cell, picture)
            let added = Double(cost) - Double(costs[cell])
            uses[Int(slotOfPhoto[assignment[cell]]!)] -= 1
            uses[Int(slotOfPhoto[picture]!)] += 1
            assignment[cell] = picture
            costs[cell] = cost
            return added
        }

        /// Of every cell, the `keep` that can be given to `picture` at the least extra cost, by
        /// (extra cost, cell).
        func everyOffer(_ picture: Int32, keep: Int) -> [Int32] {
            var best: [(extra: Float, cell: Int32)] = []
            best.reserveCapacity(keep + 1)
            for cell in 0..<assignment.count where usesOf(assignment[cell]) > minUses {
                let extra = placedCost(cell, picture) - costs[cell]
                if best.count == keep, let last = best.last, extra >= last.extra { continue }
                guard canGive(cell, to: picture) else { continue }
                var i = best.count
                best.append((extra, Int32(cell)))
                while i > 0 && best[i - 1].extra > extra {
                    best[i] = best[i - 1]
                    i -= 1
                }
                best[i] = (extra, Int32(cell))
                if best.count > keep { best.removeLast() }
            }
            return best.map(\.cell)
        }

        // MARK: The constraints

        func usesOf(_ photo: Int32) -> Int { slotOfPhoto[photo].map { Int(uses[Int($0)]) } ?? 0 }

        func allowed(_ photo: Int32, cell: Int) -> Bool {
            usesOf(photo) < limit && holders(of: photo, near: cell, most: 1).isEmpty
        }

        /// Cells within `minDistance` of `cell` that hold `photo`, other than `cell` and
        /// `except`, up to `most` of them.
        func holders(of photo: Int32, near cell: Int, except: Int = -1, most: Int = 2) -> [Int] {
            guard minDistance > 0 else { return [] }
            var found: [Int] = []
            if let neighbours {
                for other in neighbours.of(cell) where Int(other) != except && assignment[Int(other)] == photo {
                    found.append(Int(other))
                    if found.count >= most { return found }
                }
                return found
            }
            let row = cell / columns, column = cell % columns
            for y in max(0, row - minDistance)...min(rows - 1, row + minDistance) {
                for x in max(0, column - minDistance)...min(columns - 1, column + minDistance) {
                    let other = y * columns + x
                    if other != cell && other != except && assignment[other] == photo {
                        found.append(other)
                        if found.count >= most { return found }
                    }
                }
            }
            return found
        }

        // MARK: Placed photos' slots and features

        /// `photo`'s slot, made when it has none (its features read at once after the greedy pass).
        mutating func slot(_ photo: Int32) throws(TesseraError) -> Int {
            if let slot = slotOfPhoto[photo] { return Int(slot) }
            let slot = uses.count
            slotOfPhoto[photo] = Int32(slot)
            placedFeatures.append(contentsOf: repeatElement(0, count: d))
            if readingPlaced {
                let store = store, d = d
                try placedFeatures.withUnsafeMutableBufferPointer { (buffer: inout UnsafeMutableBufferPointer<Float>) throws(TesseraError) in
                    try store.read(Int(photo), 1, into: buffer.baseAddress! + slot * d)
                }
            }
            uses.append(0)
            head.append(-1)
            return slot
        }

        /// Reads the features of every placed photo, a run of the store at a time (the runs that
        /// hold none are not read), and from then on each newly placed photo's as it is placed.
        mutating func readPlacedFeatures(_ placed: [Int32]) throws(TesseraError) {
            let sorted = placed.sorted()
            let n = store.count, d = d, runFeatures = runFeatures
            var next = 0
            while next < sorted.count {
                let first = Int(sorted[next]) / run * run
                let count = min(run, n - first)
                try store.read(first, count, into: runFeatures.baseAddress!)
                while next < sorted.count && Int(sorted[next]) < first + count {
                    let photo = Int(sorted[next]), slot = Int(slotOfPhoto[sorted[next]]!)
                    placedFeatures.withUnsafeMutableBufferPointer {
                        $0.baseAddress!.advanced(by: slot * d).update(from: runFeatures.baseAddress! + (photo - first) * d, count: d)
                    }
                    next += 1
                }
            }
            readingPlaced = true
        }

        /// The cost of a placed photo in `cell`.
        func placedCost(_ cell: Int, _ photo: Int32) -> Float {
            let slot = Int(slotOfPhoto[photo]!)
            return target.withUnsafeBufferPointer { t in
                placedFeatures.withUnsafeBufferPointer { p in squaredDistance(t.baseAddress! + cell * d, p.baseAddress! + slot * d, count: d) }
            } * (weights?[cell] ?? 1)
        }

        // MARK: Phase 3, the local search

        /// `effort` passes of local search over the cells in `order`, until one makes no move,
        /// once the cells are on their photos' lists (`linkCells`). A cell's candidates are those
        /// phase 1 ranked (the ranking does not depend on what is placed), and a cell holding its
        /// best one cannot do better. Returns the moves made and the passes run.
        mutating func improve(in order: [Int32], effort: Int, reporter: MatchReporter) throws(TesseraError) -> (moves: Int, passes: Int) {
            guard effort > 0 else { return (0, 0) }
            precondition(next.count == assignment.count, "the cells are linked first (linkCells)")
            let cells = assignment.count
            var improvements = 0, passes = 0
            for pass in 0..<effort {
                var moves = chainsApply ? try sweepChains(reporter: reporter) : 0
                // Only the cells that hold less than their best can improve.
                let unsettled = order.filter { costs[Int($0)] > ranking.costs[Int($0) * ranking.m] }
                for (position, cellIndex) in unsettled.enumerated() {
                    if try improveCell(Int(cellIndex)) { moves += 1 }
                    if (position + 1) % batchCells == 0 || position + 1 == unsettled.count {
                        try reporter.report(cells * (2 + pass) + (position + 1) * cells / max(1, unsettled.count))
                    }
                }
                improvements += moves
                passes += 1
                if moves == 0 { break }
            }
            return (improvements, passes)
        }

        /// Makes at most one move for `cell`, the first that lowers the total cost, trying its
        /// candidates better than what it holds in rank order: taking one the constraints allow;
        /// a used-up one by a swap with a cell holding it; one a single neighbour holds by a
        /// swap with that neighbour. Returns whether it moved.
        mutating func improveCell(_ cell: Int) throws(TesseraError) -> Bool {
            let m = ranking.m
            let current = assignment[cell]
            let currentCost = costs[cell]
            for i in 0..<m {
                let better = ranking.photos[cell * m + i], betterCost = ranking.costs[cell * m + i]
                guard betterCost < currentCost else { break }  // ranked: none further is better
                if better == current { continue }
                let blockers = holders(of: better, near: cell)
                // (The cell's photo may leave it only with uses to spare: a photo at its minimum
                // of uses moves by swaps, which keep every count.)
                if blockers.isEmpty && usesOf(better) < limit && usesOf(current) > minUses {
                    try reassign(cell, to: better, cost: betterCost)
                    return true
                }
                if blockers.isEmpty {
                    // Used up (at its most uses), or the cell's photo at its fewest: swap with the
                    // cell holding it that gains most.
                    guard usesOf(better) > 0,
                          let swap = bestSwapForUsedUp(better, betterCost: betterCost, into: cell, current: current,
                                                       currentCost: currentCost) else { continue }
                    try swapPhotos(cell, swap.cell, cellCost: betterCost, otherCost: swap.cost)
                    return true
                }
                // One neighbour holds it: swap, if the current photo may stand there and
                // the two cells together fit better.
                guard blockers.count == 1 else { continue }
                let other = blockers[0]
                guard holders(of: current, near: other, except: cell, most: 1).isEmpty else { continue }
                let otherNewCost = placedCost(other, current)
                guard Double(betterCost) + Double(otherNewCost) < Double(currentCost) + Double(costs[other]) else { continue }
                try swapPhotos(cell, other, cellCost: betterCost, otherCost: otherNewCost)
                return true
            }
            return false
        }

        /// For a used-up `better` that `cell` (holding `current`) wants: of the first 64 cells on
        /// `better`'s list, the one where `current` may stand whose swap with `cell` gains most,
        /// and its cost with `current`; nil when no swap gains.
        func bestSwapForUsedUp(_ better: Int32, betterCost: Float, into cell: Int, current: Int32,
                               currentCost: Float) -> (cell: Int, cost: Float)? {
            var best = -1
            var bestGain = 0.0
            var otherCost: Float = 0
            var other = Int(head[Int(slotOfPhoto[better]!)])
            var looked = 0
            while other >= 0 && looked < 64 {
                looked += 1
                if holders(of: current, near: other, except: cell, most: 1).isEmpty {
                    let newCost = placedCost(other, current)
                    let gain = Double(currentCost) + Double(costs[other]) - Double(betterCost) - Double(newCost)
                    if gain > bestGain {
                        bestGain = gain
                        best = other
                        otherCost = newCost
                    }
                }
                other = Int(next[other])
            }
            return best >= 0 ? (best, otherCost) : nil
        }

        /// Puts `photo` in `cell` at `cost`, moving the cell to its list and its use.
        mutating func reassign(_ cell: Int, to photo: Int32, cost: Float) throws(TesseraError) {
            uses[Int(slotOfPhoto[assignment[cell]]!)] -= 1
            unlink(cell)
            try link(cell, to: photo)
            uses[Int(slotOfPhoto[photo]!)] += 1
            assignment[cell] = photo
            costs[cell] = cost
        }

        /// Swaps the photos of cells `a` and `b`, which then cost `cellCost` and `otherCost`.
        mutating func swapPhotos(_ a: Int, _ b: Int, cellCost: Float, otherCost: Float) throws(TesseraError) {
            let photoA = assignment[a], photoB = assignment[b]
            unlink(a)
            unlink(b)
            assignment[a] = photoB
            assignment[b] = photoA
            try link(a, to: photoB)
            try link(b, to: photoA)
            costs[a] = cellCost
            costs[b] = otherCost
        }

        // MARK: The lists of cells holding each photo (8 bytes a cell)

        /// Makes the lists: every cell on its photo's, in cell order.
        mutating func linkCells() throws(TesseraError) {
            let cells = assignment.count
            next = [Int32](repeating: -1, count: cells)
            previous = [Int32](repeating: -1, count: cells)
            for cell in stride(from: cells - 1, through: 0, by: -1) { try link(cell, to: assignment[cell]) }
        }

        mutating func link(_ cell: Int, to photo: Int32) throws(TesseraError) {
            let slot = try slot(photo)
            next[cell] = head[slot]
            previous[cell] = -1
            if head[slot] >= 0 { previous[Int(head[slot])] = Int32(cell) }
            head[slot] = Int32(cell)
        }

        mutating func unlink(_ cell: Int) {
            let slot = Int(slotOfPhoto[assignment[cell]]!)
            if previous[cell] >= 0 { next[Int(previous[cell])] = next[cell] } else { head[slot] = next[cell] }
            if next[cell] >= 0 { previous[Int(next[cell])] = previous[cell] }
        }
    }

    /// Each placed photo's slot: a table of every photo's when that is small (no hashing in the
    /// hot loops of a mosaic of a few thousand photos), else a dictionary of the placed ones
    /// (at most one a cell: a million photos' table would be 4 MB).
    struct PhotoSlots {
        static let largestTable = 65_536
        private var table: [Int32]
        private var dictionary: [Int32: Int32] = [:]

        init(photos: Int, cells: Int) {
            table = photos <= max(cells, PhotoSlots.largestTable) ? [Int32](repeating: -1, count: photos) : []
        }

        subscript(photo: Int32) -> Int32? {
            get {
                if !table.isEmpty {
                    let slot = table[Int(photo)]
                    return slot < 0 ? nil : slot
                }
                return dictionary[photo]
            }
            set {
                if !table.isEmpty { table[Int(photo)] = newValue ?? -1 } else { dictionary[photo] = newValue }
            }
        }
    }

    /// Per cell: mean Euclidean Oklab distance over sub-cells between target and the placed
    /// photo, whose features are at `slot(photo)` in `features`.
    static func placedErrors(target: [Float], assignment: [Int32], subCells k: Int, features: [Float],
                             slot: (Int32) -> Int) -> [Float] {
        let d = k * k * 3
        return features.withUnsafeBufferPointer { placed in
            (0..<assignment.count).map { cell in
                cellError(target: target, cell: cell, photo: placed.baseAddress! + slot(assignment[cell]) * d, subCells: k)
            }
        }
    }

    /// Mean Euclidean Oklab distance over sub-cells between cell `cell` of `target` and `photo`'s
    /// features.
    static func cellError(target: [Float], cell: Int, photo flat: UnsafePointer<Float>, subCells k: Int) -> Float {
        let d = k * k * 3
        var total: Float = 0
        for s in 0..<(k * k) {
            let ti = cell * d + s * 3, pi = s * 3
            let dl = target[ti] - flat[pi], da = target[ti + 1] - flat[pi + 1], db = target[ti + 2] - flat[pi + 2]
            total += (dl * dl + da * da + db * db).squareRoot()
        }
        return total / Float(k * k)
    }

    @inline(__always)
    static func squaredDistance(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, count: Int) -> Float {
        var sum: Float = 0
        for i in 0..<count {
            let diff = a[i] - b[i]
            sum += diff * diff
        }
        return sum
    }
}

// MARK: The chain sweeps of the local search

extension MosaicMatcher.Placement {
    /// Whether the local search also relabels whole chains of cells (`sweepChains`): a grid at
    /// a minimum distance of 1 (the default), with no most or fewest uses (a chain's relabelling
    /// would change the counts those rules keep).
    var chainsApply: Bool { neighbours == nil && minDistance == 1 && limit == Int.max && minUses == 0 && ranking.m > 0 }

    /// Phase 2 when the chains apply, in place of the greedy pass: the rows from the top, each
    /// in segments of at most `MosaicMatcher.chainCells` cells given their least total cost next
    /// to the cells placed before them (the dynamic programme of `relabelSegment`, the cells
    /// below still empty), so a row's cells share out the photos they want together instead of
    /// the first come taking its best. A segment no labelling fits (too few candidates) is
    /// placed greedily. Then the placed photos' features are read, as after the greedy pass.
    mutating func placeInRows(reporter: MosaicMatcher.MatchReporter) throws(TesseraError) {
        let labels = ranking.m + 1, cells = assignment.count
        var scratch = MosaicMatcher.ChainScratch(cells: min(MosaicMatcher.chainCells, columns), labels: labels)
        var reported = 0
        for row in 0..<rows {
            for first in stride(from: 0, to: columns, by: MosaicMatcher.chainCells) {
                let count = min(MosaicMatcher.chainCells, columns - first)
                for i in 0..<count {
                    fillLabels(of: row * columns + first + i, at: i * labels, line: row, alongRows: true, first: first, count: count,
                               scratch: &scratch)
                    if i > 0 { scratch.advance(at: i, labels: labels) }
                }
                let path = scratch.bestPath(count: count, labels: labels)?.path
                for i in 0..<count {
                    let cell = row * columns + first + i
                    if let path {
                        (assignment[cell], costs[cell]) = (scratch.photo[i * labels + Int(path[i])], scratch.cost[i * labels + Int(path[i])])
                    } else {
                        (assignment[cell], costs[cell]) = try greedyChoice(cell)
                    }
                    let photo = assignment[cell]
                    uses[try slot(photo)] += 1
                }
            }
            if (row + 1) * columns - reported >= MosaicMatcher.batchCells || row + 1 == rows {
                reported = (row + 1) * columns
                try reporter.report(cells + reported)
            }
        }
        try readPlacedFeatures(Array(Set(assignment)))
    }

    /// Every row, then every column, cut into segments of at most `MosaicMatcher.chainCells`
    /// cells, each given the best photos it can hold with the rest of the mosaic as it is
    /// (`relabelSegment`). Returns the cells that changed photo.
    mutating func sweepChains(reporter: MosaicMatcher.MatchReporter) throws(TesseraError) -> Int {
        var moves = 0
        var scratch = MosaicMatcher.ChainScratch(cells: min(MosaicMatcher.chainCells, max(rows, columns)), labels: ranking.m + 1)
        let segment = MosaicMatcher.chainCells
        for row in 0..<rows {
            for first in stride(from: 0, to: columns, by: segment) {
                moves += try relabelSegment(line: row, alongRows: true, first: first, count: min(segment, columns - first), scratch: &scratch)
            }
            if reporter.cancellation?.isCancelled == true { throw .cancelled }
        }
        for column in 0..<columns {
            for first in stride(from: 0, to: rows, by: segment) {
                moves += try relabelSegment(line: column, alongRows: false, first: first, count: min(segment, rows - first), scratch: &scratch)
            }
            if reporter.cancellation?.isCancelled == true { throw .cancelled }
        }
        return moves
    }

    /// The cell at `position` along a row (`alongRows`, row `line`) or a column (column `line`).
    func chainCell(line: Int, alongRows: Bool, position: Int) -> Int {
        alongRows ? line * columns + position : position * columns + line
    }

    /// Relabels cells `first ..< first + count` of a row or column at their least total cost:
    /// each cell may take any of its ranked candidates or keep its photo, none that a cell off
    /// the segment within distance 1 holds, and no two consecutive cells the same (the only
    /// cells of the segment within distance 1 of each other). An exact dynamic programme over
    /// the segment (Viterbi: a cell's best predecessor is the best of the previous cell's
    /// labels, or the second best when the best has the same photo), so the cost never rises;
    /// the new labels are taken only when they lower it. Returns the cells that changed photo.
    mutating func relabelSegment(line: Int, alongRows: Bool, first: Int, count: Int,
                                 scratch: inout MosaicMatcher.ChainScratch) throws(TesseraError) -> Int {
        let labels = ranking.m + 1
        var oldCost = 0.0
        for i in 0..<count {
            let cell = chainCell(line: line, alongRows: alongRows, position: first + i)
            oldCost += Double(costs[cell])
            fillLabels(of: cell, at: i * labels, line: line, alongRows: alongRows, first: first, count: count, scratch: &scratch)
            if i > 0 { scratch.advance(at: i, labels: labels) }
        }
        guard let chosen = scratch.bestPath(count: count, labels: labels), chosen.cost < oldCost * (1 - 1e-12) else { return 0 }
        var moves = 0
        for i in 0..<count {
            let cell = chainCell(line: line, alongRows: alongRows, position: first + i)
            let j = i * labels + Int(chosen.path[i])
            if scratch.photo[j] != assignment[cell] {
                try reassign(cell, to: scratch.photo[j], cost: scratch.cost[j])
                moves += 1
            }
        }
        return moves
    }

    /// A cell's labels into `scratch` from `base`: its candidates, then its own photo (when not
    /// among them), each with its cost, or an infinite one when a cell off the segment within
    /// distance 1 holds it (an empty label: photo -1).
    func fillLabels(of cell: Int, at base: Int, line: Int, alongRows: Bool, first: Int, count: Int,
                    scratch: inout MosaicMatcher.ChainScratch) {
        let m = ranking.m
        let current = assignment[cell]
        var holdsCurrent = false
        for j in 0..<m {
            let photo = ranking.photos[cell * m + j]
            holdsCurrent = holdsCurrent || photo == current
            scratch.photo[base + j] = photo
            scratch.cost[base + j] = photo == current ? costs[cell] : ranking.costs[cell * m + j]
        }
        scratch.photo[base + m] = holdsCurrent ? -1 : current
        scratch.cost[base + m] = holdsCurrent || current < 0 ? .infinity : costs[cell]
        for j in 0...m where scratch.photo[base + j] >= 0
            && heldOffSegment(scratch.photo[base + j], near: cell, alongRows: alongRows, first: first, count: count) {
            scratch.cost[base + j] = .infinity
        }
    }

    /// Whether a cell within distance 1 of `cell` and not on the segment (`first ..< first +
    /// count` along its row or column) holds `photo`.
    func heldOffSegment(_ photo: Int32, near cell: Int, alongRows: Bool, first: Int, count: Int) -> Bool {
        let row = cell / columns, column = cell % columns
        for y in max(0, row - 1)...min(rows - 1, row + 1) {
            for x in max(0, column - 1)...min(columns - 1, column + 1) {
                let along = alongRows ? x : y
                let onSegment = (alongRows ? y == row : x == column) && along >= first && along < first + count
                if !onSegment && assignment[y * columns + x] == photo { return true }
            }
        }
        return false
    }
}

extension MosaicMatcher {
    /// The most cells a chain sweep relabels at once (its scratch: `ChainScratch.bytes`).
    static let chainCells = 512

    /// A segment's dynamic programme: for each cell and label, the photo, its cost, the least
    /// total cost of the segment up to it, and the label before it on that path.
    struct ChainScratch {
        var photo: [Int32]
        var cost: [Float]
        var total: [Double]
        var back: [Int32]

        /// Bytes a scratch of `cells` cells of `labels` labels holds.
        static func bytes(cells: Int, labels: Int) -> Int { cells * labels * (4 + 4 + 8 + 4) }

        init(cells: Int, labels: Int) {
            photo = [Int32](repeating: -1, count: cells * labels)
            cost = [Float](repeating: .infinity, count: cells * labels)
            total = [Double](repeating: .infinity, count: cells * labels)
            back = [Int32](repeating: -1, count: cells * labels)
        }

        /// Cell `i`'s totals from cell `i - 1`'s (cell 0's are its costs, set by `advance`'s
        /// caller through `bestPath`): each label follows the previous cell's best label with
        /// another photo.
        mutating func advance(at i: Int, labels: Int) {
            let previous = (i - 1) * labels, here = i * labels
            if i == 1 { for j in 0..<labels { total[previous + j] = photo[previous + j] >= 0 ? Double(cost[previous + j]) : .infinity } }
            var best = -1, second = -1
            for j in 0..<labels where total[previous + j] < .infinity {
                if best < 0 || total[previous + j] < total[previous + best] {
                    second = best
                    best = j
                } else if second < 0 || total[previous + j] < total[previous + second] {
                    second = j
                }
            }
            for j in 0..<labels {
                let from = best >= 0 && photo[previous + best] == photo[here + j] ? second : best
                guard from >= 0, cost[here + j] < .infinity, photo[here + j] >= 0 else {
                    total[here + j] = .infinity
                    back[here + j] = -1
                    continue
                }
                total[here + j] = total[previous + from] + Double(cost[here + j])
                back[here + j] = Int32(from)
            }
        }

        /// The least-cost labels of the segment's `count` cells, and their cost; nil when no
        /// labelling is allowed.
        mutating func bestPath(count: Int, labels: Int) -> (path: [Int32], cost: Double)? {
            if count == 1 { for j in 0..<labels { total[j] = photo[j] >= 0 ? Double(cost[j]) : .infinity } }
            let last = (count - 1) * labels
            var end = -1
            for j in 0..<labels where total[last + j] < .infinity && (end < 0 || total[last + j] < total[last + end]) { end = j }
            guard end >= 0 else { return nil }
            var path = [Int32](repeating: 0, count: count)
            var j = end
            for i in stride(from: count - 1, through: 0, by: -1) {
                path[i] = Int32(j)
                if i > 0 { j = Int(back[i * labels + j]) }
            }
            return (path, total[last + end])
        }
    }
}
