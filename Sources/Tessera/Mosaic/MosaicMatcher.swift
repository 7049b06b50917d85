// MosaicMatcher.swift — which photo goes in which cell of a photomosaic.
//
// Minimises the total squared Oklab distance between each cell's target sub-cells and the chosen
// photo's, subject to: no identical photo within `minDistance` cells (Chebyshev), and at most
// `maxUses` uses of one photo. Three phases:
//   1. in parallel, for each cell, the `candidateCount` best photos by cost (exact costs), the
//      photos read from the store a run at a time (so a million photos' features never need to
//      be in memory: they can stay in a FeatureStore's temporary file);
//   2. one pass over the cells in a seeded random order, each taking its best candidate that the
//      constraints allow (a full scan of all photos when none of its candidates is allowed).
//      The random order spreads repeats evenly instead of letting the top-left cells take every
//      photo's best matches; the same seed gives the same mosaic.
//   3. `effort` passes of local search over the cells in the same order: a cell takes a better
//      candidate when the constraints allow it, or swaps photos with the one neighbour whose
//      photo blocks it, whenever that lowers the total cost. Every move lowers it, so the
//      total never rises; the moves are made one at a time in a fixed order, so the result is
//      the same for any number of workers.
// Phase 1's ranking is exact either way: every photo compared with the cell, or, from 512
// photos on, a tree over each run's principal components (FeatureTree) that finds the same
// photos in the same order.
import Dispatch

/// The result of matching: a photo per cell and how well it fits.
public struct MosaicMatch: Equatable, Sendable {
    public let columns: Int
    public let rows: Int
    /// Row-major: an index into the photo list given to the matcher.
    public let assignment: [Int32]
    /// Row-major: mean Oklab distance between the cell's target sub-cells and its photo's.
    public let cellErrors: [Float]
    /// Cells where the constraints could not all be met (the best photo with uses left was taken).
    public let constraintViolations: Int
    /// The total cost (squared Oklab distance summed over every sub-cell) after the greedy pass,
    /// and at the end (lower or equal: the local search only makes moves that lower it).
    public var greedyCost: Double = 0
    public var totalCost: Double = 0
    /// The mean error (as `meanError`) after the greedy pass.
    public var greedyMeanError: Double = 0
    /// Moves the local search made (reassignments and swaps), and its passes.
    public var improvements = 0
    public var improvementPasses = 0
    /// Seconds spent ranking candidates, in the greedy pass, and improving.
    public var rankingSeconds = 0.0
    public var greedySeconds = 0.0
    public var improvementSeconds = 0.0
    /// Whether the candidates came from the feature tree (else from comparing every photo).
    public var usedTree = false
    /// Runs of photos ranked (the store read a run at a time), and the most photos in one.
    public var runs = 0
    public var runPhotos = 0
    /// What the matching was planned to hold besides the process and the store
    /// (`MosaicMatcher.workingBytes`).
    public var plannedBytes = 0

    /// Equal results: the same placements and figures (the time each phase took is not compared).
    public static func == (a: MosaicMatch, b: MosaicMatch) -> Bool {
        a.columns == b.columns && a.rows == b.rows && a.assignment == b.assignment && a.cellErrors == b.cellErrors
            && a.constraintViolations == b.constraintViolations && a.greedyCost == b.greedyCost && a.totalCost == b.totalCost
            && a.improvements == b.improvements && a.improvementPasses == b.improvementPasses
    }

    public init(columns: Int, rows: Int, assignment: [Int32], cellErrors: [Float], constraintViolations: Int) {
        self.columns = columns
        self.rows = rows
        self.assignment = assignment
        self.cellErrors = cellErrors
        self.constraintViolations = constraintViolations
    }

    /// Mean Oklab colour error between target and mosaic at sub-cell resolution.
    public var meanError: Double { cellErrors.reduce(0.0) { $0 + Double($1) } / Double(max(1, cellErrors.count)) }

    /// The smallest Chebyshev distance between two cells holding the same photo; nil when no photo
    /// is used twice.
    public var smallestRepeatDistance: Int? {
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
    /// mark.
    public static func workingBytes(cells: Int, photos: Int, subCells k: Int, candidateCount: Int = 24,
                                    chunkPhotos: Int = MosaicMatcher.chunkPhotos) -> Int {
        let d = k * k * 3
        let m = min(candidateCount, max(1, photos))
        let run = min(chunkPhotos, photos)
        let placed = min(cells, photos)
        let table = photos <= max(cells, PhotoSlots.largestTable) ? photos * 4 : 0
        return cells * (d * 4 + m * 8 + 20 + 8) + placed * (d * 4 + 48) + table + run * runBytesPerPhoto(subCells: k)
    }

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
                             minDistance: Int, maxUses: Int?, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, effort: Int = 0, useTree: Bool? = nil, chunkPhotos: Int = MosaicMatcher.chunkPhotos,
                             cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        let d = k * k * 3
        return try match(target: target, columns: columns, rows: rows, subCells: k,
                         store: FeatureStore(photos: photoFeatures, valuesPerPhoto: d),
                         minDistance: minDistance, maxUses: maxUses, seed: seed, workers: workers, candidateCount: candidateCount,
                         effort: effort, useTree: useTree, chunkPhotos: chunkPhotos, cancellation: cancellation, progress: progress)
    }

    /// The same, with the photos' features one after another in `flat` (k*k*3 floats each).
    public static func match(target: [Float], columns: Int, rows: Int, subCells k: Int, photos flat: [Float],
                             minDistance: Int, maxUses: Int?, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, effort: Int = 0, useTree: Bool? = nil, chunkPhotos: Int = MosaicMatcher.chunkPhotos,
                             cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        try match(target: target, columns: columns, rows: rows, subCells: k, store: FeatureStore(features: flat, valuesPerPhoto: k * k * 3),
                  minDistance: minDistance, maxUses: maxUses, seed: seed, workers: workers, candidateCount: candidateCount,
                  effort: effort, useTree: useTree, chunkPhotos: chunkPhotos, cancellation: cancellation, progress: progress)
    }

    /// The same, with the photos' features in `store`, read `chunkPhotos` photos at a time.
    /// `useTree`: nil decides by the photo count; true or false forces the feature tree or the
    /// exhaustive ranking (they give the same result).
    public static func match(target: [Float], columns: Int, rows: Int, subCells k: Int, store: FeatureStore,
                             minDistance: Int, maxUses: Int?, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, effort: Int = 0, useTree: Bool? = nil, chunkPhotos: Int = MosaicMatcher.chunkPhotos,
                             cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        let cells = columns * rows
        let d = k * k * 3
        let n = store.count
        precondition(target.count == cells * d && store.valuesPerPhoto == d && chunkPhotos > 0)
        guard n > 0 else { throw .noPhotos(searched: []) }
        let window = (2 * minDistance + 1) * (2 * minDistance + 1)
        if minDistance > 0 && n < window && cells > 1 {
            throw .invalidSettings("a minimum distance of \(minDistance) needs at least \(window) different pictures (a \(2 * minDistance + 1) x \(2 * minDistance + 1) block holds no repeat; copies of one picture count once), found \(n)")
        }
        if let maxUses, maxUses * n < cells {
            throw .invalidSettings("at most \(maxUses) uses of each of \(n) photos fill at most \(maxUses * n) of \(cells) cells")
        }
        let m = min(candidateCount, n)
        let treeWanted = useTree ?? (n >= treeThreshold)
        let run = min(chunkPhotos, n)
        let limit = maxUses ?? Int.max
        let totalWork = cells * (2 + max(0, effort))

        // Phase 1: every cell's m best photos, ranked by (cost, index), a run of photos at a
        // time: the run is read, a tree is built over it (its features moved into the tree's
        // order, so a search reads neighbouring photos), and its photos are merged into every
        // cell's ranking in parallel.
        var started = monotonicSeconds()
        var candidates = [Int32](repeating: .max, count: cells * m)
        var candidateCosts = [Float](repeating: .infinity, count: cells * m)
        let runFeatures = UnsafeMutableBufferPointer<Float>.allocate(capacity: run * d)
        defer { runFeatures.deallocate() }
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
            target.withUnsafeBufferPointer { targets in
                candidates.withUnsafeMutableBufferPointer { out in
                    candidateCosts.withUnsafeMutableBufferPointer { outCosts in
                        let f = UnsafeSendable(UnsafePointer(runFeatures.baseAddress!)), t = UnsafeSendable(targets.baseAddress!)
                        let c = UnsafeSendable(out.baseAddress!), cc = UnsafeSendable(outCosts.baseAddress!)
                        let firstPhoto = Int32(first)
                        _ = mapInLanes(count: cells, lanes: workers, cancellation: cancellation,
                                       scratch: { FeatureTree.Scratch(dimensions: tree?.dimensions ?? 1) }) { cell, scratch in
                            let bestPhoto = c.value + cell * m, bestCost = cc.value + cell * m
                            let cellTarget = t.value + cell * d
                            if let tree {
                                tree.nearest(cellTarget, features: f.value, firstPhoto: firstPhoto, m: m, photos: bestPhoto, costs: bestCost,
                                             scratch: &scratch)
                                return
                            }
                            // Every photo of the run; a later photo with an equal cost ranks
                            // after (the runs come in photo order).
                            for photo in 0..<count {
                                let cost = squaredDistance(cellTarget, f.value + photo * d, count: d)
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
                    }
                }
            }
            if cancellation?.isCancelled == true { throw .cancelled }
            first += count
            progress?(Int((Double(cells) * Double(first) / Double(n)).rounded(.down)), totalWork)
        }
        let rankingSeconds = monotonicSeconds() - started

        var order = [Int32](unsafeUninitializedCapacity: cells) { buffer, count in
            for i in 0..<cells { buffer[i] = Int32(i) }
            count = cells
        }
        var random = SplitMix64(seed: seed)
        for i in stride(from: cells - 1, to: 0, by: -1) { order.swapAt(i, Int(random.next() % UInt64(i + 1))) }
        var assignment = [Int32](repeating: -1, count: cells)
        var costs = [Float](repeating: 0, count: cells)
        var violations = 0

        // The photos placed so far, each in a slot: its features (read from the store once), its
        // uses, and the head of the list of cells holding it (for the local search's swaps with a
        // used-up photo). Only placed photos have a slot: at most one a cell, whatever the library.
        // The greedy pass needs no features: the slots it makes are filled after it, in one pass
        // over the store in photo order (tens of thousands of single reads scattered over a
        // store that the page cache no longer holds took 2.2 s in a 64 MiB memory cgroup).
        var slotOfPhoto = PhotoSlots(photos: n, cells: cells)
        var placedFeatures: [Float] = []
        var uses: [Int32] = []
        var head: [Int32] = []
        var readingPlaced = false
        func slot(_ photo: Int32) throws(TesseraError) -> Int {
            if let slot = slotOfPhoto[photo] { return Int(slot) }
            let slot = uses.count
            slotOfPhoto[photo] = Int32(slot)
            placedFeatures.append(contentsOf: repeatElement(0, count: d))
            if readingPlaced {
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
        func readPlacedFeatures(_ placed: [Int32]) throws(TesseraError) {
            let sorted = placed.sorted()
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
        func usesOf(_ photo: Int32) -> Int { slotOfPhoto[photo].map { Int(uses[Int($0)]) } ?? 0 }
        /// The cost of a placed photo in `cell`.
        func placedCost(_ cell: Int, _ photo: Int32) -> Float {
            let slot = Int(slotOfPhoto[photo]!)
            return target.withUnsafeBufferPointer { t in
                placedFeatures.withUnsafeBufferPointer { p in squaredDistance(t.baseAddress! + cell * d, p.baseAddress! + slot * d, count: d) }
            }
        }

        /// Cells within `minDistance` of `cell` that hold `photo`, other than `cell` and
        /// `except`, up to `most` of them.
        func holders(of photo: Int32, near cell: Int, except: Int = -1, most: Int = 2) -> [Int] {
            guard minDistance > 0 else { return [] }
            var found: [Int] = []
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

        func allowed(_ photo: Int32, cell: Int) -> Bool {
            usesOf(photo) < limit && holders(of: photo, near: cell, most: 1).isEmpty
        }

        /// When none of a cell's m best is allowed: every photo, read a run at a time, for the
        /// best allowed one by (cost, index); failing that the best with uses left, then the best
        /// (either a violation).
        func bestOfAll(_ cell: Int) throws(TesseraError) -> (photo: Int32, cost: Float, allowed: Bool) {
            var best: [(photo: Int32, cost: Float)] = Array(repeating: (-1, .infinity), count: 3)  // allowed, uses left, any
            var first = 0
            while first < n {
                let count = min(run, n - first)
                try store.read(first, count, into: runFeatures.baseAddress!)
                for photo in 0..<count {
                    let cost = target.withUnsafeBufferPointer { squaredDistance($0.baseAddress! + cell * d, runFeatures.baseAddress! + photo * d, count: d) }
                    let index = Int32(first + photo)
                    if cost < best[2].cost { best[2] = (index, cost) }
                    guard cost < best[1].cost, usesOf(index) < limit else { continue }
                    best[1] = (index, cost)
                    if cost < best[0].cost && holders(of: index, near: cell, most: 1).isEmpty { best[0] = (index, cost) }
                }
                first += count
            }
            if best[0].photo >= 0 { return (best[0].photo, best[0].cost, true) }
            let fallback = best[1].photo >= 0 ? best[1] : best[2]
            return (fallback.photo, fallback.cost, false)
        }

        // Phase 2: the greedy pass, in the seeded order.
        started = monotonicSeconds()
        for (position, cellIndex) in order.enumerated() {
            let cell = Int(cellIndex)
            var chosen: Int32 = -1
            var chosenCost: Float = 0
            for i in 0..<m where allowed(candidates[cell * m + i], cell: cell) {
                chosen = candidates[cell * m + i]
                chosenCost = candidateCosts[cell * m + i]
                break
            }
            if chosen < 0 {
                let found = try bestOfAll(cell)
                (chosen, chosenCost) = (found.photo, found.cost)
                if !found.allowed { violations += 1 }
            }
            assignment[cell] = chosen
            costs[cell] = chosenCost
            uses[try slot(chosen)] += 1
            if (position + 1) % batchCells == 0 || position + 1 == cells {
                if cancellation?.isCancelled == true { throw .cancelled }
                progress?(cells + position + 1, totalWork)
            }
        }
        try readPlacedFeatures(Array(Set(assignment)))
        let greedySeconds = monotonicSeconds() - started
        let greedyCost = costs.reduce(0.0) { $0 + Double($1) }
        let greedyErrors = placedErrors(target: target, assignment: assignment, subCells: k, features: placedFeatures) {
            Int(slotOfPhoto[$0]!)
        }

        // Phase 3: local search, `effort` passes in the same order. The cells holding each photo
        // are kept as doubly linked lists (8 bytes a cell), for swaps with a used-up photo. A
        // cell's candidates are those phase 1 ranked (the ranking does not depend on what is
        // placed), and a cell holding its best one cannot do better.
        var next = [Int32](repeating: -1, count: effort > 0 ? cells : 0)
        var previous = [Int32](repeating: -1, count: effort > 0 ? cells : 0)
        func link(_ cell: Int, to photo: Int32) throws(TesseraError) {
            let slot = try slot(photo)
            next[cell] = head[slot]
            previous[cell] = -1
            if head[slot] >= 0 { previous[Int(head[slot])] = Int32(cell) }
            head[slot] = Int32(cell)
        }
        func unlink(_ cell: Int) {
            let slot = Int(slotOfPhoto[assignment[cell]]!)
            if previous[cell] >= 0 { next[Int(previous[cell])] = next[cell] } else { head[slot] = next[cell] }
            if next[cell] >= 0 { previous[Int(next[cell])] = previous[cell] }
        }
        func swapPhotos(_ a: Int, _ b: Int, cellCost: Float, otherCost: Float) throws(TesseraError) {
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
        if effort > 0 { for cell in stride(from: cells - 1, through: 0, by: -1) { try link(cell, to: assignment[cell]) } }
        var improvements = 0, passes = 0
        started = monotonicSeconds()
        for pass in 0..<max(0, effort) {
            var moves = 0
            // Only the cells that hold less than their best can improve.
            let unsettled = order.filter { costs[Int($0)] > candidateCosts[Int($0) * m] }
            for (position, cellIndex) in unsettled.enumerated() {
                let cell = Int(cellIndex)
                let current = assignment[cell]
                let currentCost = costs[cell]
                for i in 0..<m {
                    let better = candidates[cell * m + i], betterCost = candidateCosts[cell * m + i]
                    guard betterCost < currentCost else { break }  // ranked: none further is better
                    if better == current { continue }
                    let blockers = holders(of: better, near: cell)
                    if blockers.isEmpty && usesOf(better) < limit {
                        uses[Int(slotOfPhoto[current]!)] -= 1
                        unlink(cell)
                        try link(cell, to: better)
                        uses[Int(slotOfPhoto[better]!)] += 1
                        assignment[cell] = better
                        costs[cell] = betterCost
                        moves += 1
                        break
                    }
                    if blockers.isEmpty {
                        // Used up (--max-uses): swap with the cell holding it that gains most,
                        // if the current photo may stand there (the first 64 such cells).
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
                        guard best >= 0 else { continue }
                        try swapPhotos(cell, best, cellCost: betterCost, otherCost: otherCost)
                        moves += 1
                        break
                    }
                    // One neighbour holds it: swap, if the current photo may stand there and
                    // the two cells together fit better.
                    guard blockers.count == 1 else { continue }
                    let other = blockers[0]
                    guard holders(of: current, near: other, except: cell, most: 1).isEmpty else { continue }
                    let otherNewCost = placedCost(other, current)
                    guard Double(betterCost) + Double(otherNewCost) < Double(currentCost) + Double(costs[other]) else { continue }
                    try swapPhotos(cell, other, cellCost: betterCost, otherCost: otherNewCost)
                    moves += 1
                    break
                }
                if (position + 1) % batchCells == 0 || position + 1 == unsettled.count {
                    if cancellation?.isCancelled == true { throw .cancelled }
                    progress?(cells * (2 + pass) + (position + 1) * cells / max(1, unsettled.count), totalWork)
                }
            }
            improvements += moves
            passes += 1
            if moves == 0 { break }
        }
        let improvementSeconds = monotonicSeconds() - started

        var match = MosaicMatch(columns: columns, rows: rows, assignment: assignment,
                                cellErrors: placedErrors(target: target, assignment: assignment, subCells: k,
                                                           features: placedFeatures) { Int(slotOfPhoto[$0]!) },
                                constraintViolations: violations)
        match.greedyCost = greedyCost
        match.totalCost = costs.reduce(0.0) { $0 + Double($1) }
        match.greedyMeanError = greedyErrors.reduce(0.0) { $0 + Double($1) } / Double(max(1, cells))
        match.improvements = improvements
        match.improvementPasses = passes
        match.rankingSeconds = rankingSeconds
        match.greedySeconds = greedySeconds
        match.improvementSeconds = improvementSeconds
        match.usedTree = usedTree
        match.runs = (n + run - 1) / run
        match.runPhotos = run
        match.plannedBytes = workingBytes(cells: cells, photos: n, subCells: k, candidateCount: candidateCount, chunkPhotos: run)
        return match
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
