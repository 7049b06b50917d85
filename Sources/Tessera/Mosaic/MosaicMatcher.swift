// MosaicMatcher.swift — which photo goes in which cell of a photomosaic.
//
// Minimises the total squared Oklab distance between each cell's target sub-cells and the chosen
// photo's, subject to: no identical photo within `minDistance` cells (Chebyshev), and at most
// `maxUses` uses of one photo. Two phases:
//   1. in parallel, for each cell, the `candidateCount` best photos by cost (exact costs);
//   2. one pass over the cells in a seeded random order, each taking its best candidate that the
//      constraints allow (a full scan of all photos when none of its candidates is allowed).
// The cells are taken in that order a batch at a time, phase 1 then phase 2 for each batch.
// The random order spreads repeats evenly instead of letting the top-left cells take every
// photo's best matches; the same seed gives the same mosaic.
//   3. `effort` passes of local search over the cells in the same order: a cell takes a better
//      candidate when the constraints allow it, or swaps photos with the one neighbour whose
//      photo blocks it, whenever that lowers the total cost. Every move lowers it, so the
//      total never rises; the moves are made one at a time in a fixed order, so the result is
//      the same for any number of workers.
// Phase 1's ranking is exact either way: every photo compared with the cell, or, from 512
// photos on, a tree over the features' principal components (FeatureTree) that finds the same
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
    /// Cells ranked at once (their candidates are all that is kept).
    static let batchCells = 4096
    /// From this many photos on, candidates come from a FeatureTree.
    public static let treeThreshold = 512

    /// What matching `cells` cells against `photos` photos holds besides the process, in bytes:
    /// the target's features, the order, the assignment, the errors, the costs and the local
    /// search's lists and best costs and a list of cells to improve (36 bytes a cell beside the features), the photos' features twice (as given and flattened), the tree
    /// (6 projected values, an index and a share of a node a photo), and a batch's candidates.
    public static func workingBytes(cells: Int, photos: Int, subCells k: Int, candidateCount: Int = 24) -> Int {
        let d = k * k * 3
        return cells * (d * 4 + 36) + photos * (d * 8 + 80 + 50) + batchCells * candidateCount * 8
    }

    /// Matches `photoFeatures` (k*k*3 floats each) to `target` (`columns * rows` cells of k*k*3).
    public static func match(target: [Float], columns: Int, rows: Int, subCells k: Int, photoFeatures: [[Float]],
                             minDistance: Int, maxUses: Int?, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, effort: Int = 0, useTree: Bool? = nil, cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        let d = k * k * 3
        return try match(target: target, columns: columns, rows: rows, subCells: k,
                         store: FeatureStore(photos: photoFeatures, valuesPerPhoto: d),
                         minDistance: minDistance, maxUses: maxUses, seed: seed, workers: workers, candidateCount: candidateCount,
                         effort: effort, useTree: useTree, cancellation: cancellation, progress: progress)
    }

    /// The same, with the photos' features one after another in `flat` (k*k*3 floats each).
    public static func match(target: [Float], columns: Int, rows: Int, subCells k: Int, photos flat: [Float],
                             minDistance: Int, maxUses: Int?, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, effort: Int = 0, useTree: Bool? = nil, cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        try match(target: target, columns: columns, rows: rows, subCells: k, store: FeatureStore(features: flat, valuesPerPhoto: k * k * 3),
                  minDistance: minDistance, maxUses: maxUses, seed: seed, workers: workers, candidateCount: candidateCount,
                  effort: effort, useTree: useTree, cancellation: cancellation, progress: progress)
    }

    /// The same, with the photos' features in `store` (which is rearranged into the feature
    /// tree's order when a tree is used).
    /// `useTree`: nil decides by the photo count; true or false forces the feature tree or the
    /// exhaustive ranking (they give the same result).
    public static func match(target: [Float], columns: Int, rows: Int, subCells k: Int, store: FeatureStore,
                             minDistance: Int, maxUses: Int?, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, effort: Int = 0, useTree: Bool? = nil, cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        let cells = columns * rows
        let d = k * k * 3
        let n = store.count
        precondition(target.count == cells * d && store.valuesPerPhoto == d)
        guard n > 0 else { throw .noPhotos(searched: []) }
        let window = (2 * minDistance + 1) * (2 * minDistance + 1)
        if minDistance > 0 && n < window && cells > 1 {
            throw .invalidSettings("a minimum distance of \(minDistance) needs at least \(window) different pictures (a \(2 * minDistance + 1) x \(2 * minDistance + 1) block holds no repeat; copies of one picture count once), found \(n)")
        }
        if let maxUses, maxUses * n < cells {
            throw .invalidSettings("at most \(maxUses) uses of each of \(n) photos fill at most \(maxUses * n) of \(cells) cells")
        }
        let m = min(candidateCount, n)
        var started = monotonicSeconds()
        let tree: FeatureTree? = (useTree ?? (n >= treeThreshold))
            ? FeatureTree(features: store.base, count: n, valuesPerPhoto: d) : nil
        // The features in the tree's order: a search reads a few runs of neighbouring photos, not
        // a page per photo all over the store.
        if let tree { store.arrange(tree.order) }
        var rankingSeconds = monotonicSeconds() - started
        var greedySeconds = 0.0, improvementSeconds = 0.0

        var order = [Int32](unsafeUninitializedCapacity: cells) { buffer, count in
            for i in 0..<cells { buffer[i] = Int32(i) }
            count = cells
        }
        var random = SplitMix64(seed: seed)
        for i in stride(from: cells - 1, to: 0, by: -1) { order.swapAt(i, Int(random.next() % UInt64(i + 1))) }
        var assignment = [Int32](repeating: -1, count: cells)
        var costs = [Float](repeating: 0, count: cells)
        var uses = [Int](repeating: 0, count: n)
        var violations = 0
        let limit = maxUses ?? Int.max
        let totalWork = cells * (1 + max(0, effort))

        func cost(_ cell: Int, _ photo: Int32) -> Float {
            target.withUnsafeBufferPointer { t in squaredDistance(t.baseAddress! + cell * d, store.pointer(Int(photo)), count: d) }
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
            uses[Int(photo)] < limit && holders(of: photo, near: cell, most: 1).isEmpty
        }

        // Each batch's candidates (photos and their costs), ranked in parallel.
        var candidates = [Int32](repeating: 0, count: batchCells * m)
        var candidateCosts = [Float](repeating: 0, count: batchCells * m)
        // Ranks `batch` cells of `list` from `batchStart`, timed into `rankingSeconds`; throws
        // once cancelled.
        func rank(_ list: [Int32], batchStart: Int, batch: Int) throws(TesseraError) {
            let began = monotonicSeconds()
            defer { rankingSeconds += monotonicSeconds() - began }
            do {
                target.withUnsafeBufferPointer { targets in
                    list.withUnsafeBufferPointer { cellOrder in
                        candidates.withUnsafeMutableBufferPointer { out in
                            candidateCosts.withUnsafeMutableBufferPointer { outCosts in
                                // (By photo, or by tree slot once arranged.)
                                let p = UnsafeSendable(store.base), t = UnsafeSendable(targets.baseAddress!)
                                let o = UnsafeSendable(cellOrder.baseAddress! + batchStart), c = UnsafeSendable(out.baseAddress!)
                                let cc = UnsafeSendable(outCosts.baseAddress!)
                                _ = mapInLanes(count: batch, lanes: workers, cancellation: cancellation,
                                               scratch: { FeatureTree.Scratch(dimensions: tree?.dimensions ?? 1) }) { slot, scratch in
                                    let bestPhoto = c.value + slot * m, bestCost = cc.value + slot * m
                                    let cellTarget = t.value + Int(o.value[slot]) * d
                                    if let tree {
                                        tree.nearest(cellTarget, features: p.value, m: m, photos: bestPhoto, costs: bestCost, scratch: &scratch)
                                        return
                                    }
                                    for i in 0..<m {
                                        bestCost[i] = .infinity
                                        bestPhoto[i] = 0
                                    }
                                    for photo in 0..<n {
                                        let cost = squaredDistance(cellTarget, p.value + photo * d, count: d)
                                        if cost < bestCost[m - 1] {
                                            var i = m - 1
                                            while i > 0 && bestCost[i - 1] > cost {
                                                bestCost[i] = bestCost[i - 1]
                                                bestPhoto[i] = bestPhoto[i - 1]
                                                i -= 1
                                            }
                                            bestCost[i] = cost
                                            bestPhoto[i] = Int32(photo)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if cancellation?.isCancelled == true { throw .cancelled }
        }

        // Each cell's best cost with no constraint (for the local search: a cell holding a photo
        // that good cannot do better, and is not ranked again).
        var bestCosts = [Float](repeating: 0, count: effort > 0 ? cells : 0)
        // Phase 1 and 2, a batch at a time.
        var batchStart = 0
        while batchStart < cells {
            let batch = min(batchCells, cells - batchStart)
            try rank(order, batchStart: batchStart, batch: batch)
            started = monotonicSeconds()
            for slot in 0..<batch {
                let cell = Int(order[batchStart + slot])
                if effort > 0 { bestCosts[cell] = candidateCosts[slot * m] }
                var chosen: Int32 = -1
                var chosenCost: Float = 0
                for i in 0..<m where allowed(candidates[slot * m + i], cell: cell) {
                    chosen = candidates[slot * m + i]
                    chosenCost = candidateCosts[slot * m + i]
                    break
                }
                if chosen < 0 {
                    // None of the best m is allowed: rank all photos for this cell.
                    let ranked = (0..<n).map { (cost(cell, Int32($0)), Int32($0)) }.sorted { $0.0 < $1.0 }
                    if let feasible = ranked.first(where: { allowed($0.1, cell: cell) }) {
                        (chosenCost, chosen) = feasible
                    } else {
                        (chosenCost, chosen) = ranked.first(where: { uses[Int($0.1)] < limit }) ?? ranked[0]
                        violations += 1
                    }
                }
                assignment[cell] = chosen
                costs[cell] = chosenCost
                uses[Int(chosen)] += 1
            }
            greedySeconds += monotonicSeconds() - started
            batchStart += batch
            progress?(batchStart, totalWork)
        }
        let greedyCost = costs.reduce(0.0) { $0 + Double($1) }
        let greedyErrors = cellErrors(target: target, store: store, assignment: assignment, subCells: k)

        // Phase 3: local search, `effort` passes in the same order. The cells holding each photo
        // are kept as doubly linked lists (8 bytes a cell), for swaps with a used-up photo.
        var head = [Int32](repeating: -1, count: effort > 0 ? n : 0)
        var next = [Int32](repeating: -1, count: effort > 0 ? cells : 0)
        var previous = [Int32](repeating: -1, count: effort > 0 ? cells : 0)
        func link(_ cell: Int, to photo: Int32) {
            next[cell] = head[Int(photo)]
            previous[cell] = -1
            if head[Int(photo)] >= 0 { previous[Int(head[Int(photo)])] = Int32(cell) }
            head[Int(photo)] = Int32(cell)
        }
        func unlink(_ cell: Int) {
            let photo = Int(assignment[cell])
            if previous[cell] >= 0 { next[Int(previous[cell])] = next[cell] } else { head[photo] = next[cell] }
            if next[cell] >= 0 { previous[Int(next[cell])] = previous[cell] }
        }
        func swapPhotos(_ a: Int, _ b: Int, cellCost: Float, otherCost: Float) {
            let photoA = assignment[a], photoB = assignment[b]
            unlink(a)
            unlink(b)
            assignment[a] = photoB
            assignment[b] = photoA
            link(a, to: photoB)
            link(b, to: photoA)
            costs[a] = cellCost
            costs[b] = otherCost
        }
        if effort > 0 { for cell in stride(from: cells - 1, through: 0, by: -1) { link(cell, to: assignment[cell]) } }
        var improvements = 0, passes = 0
        for pass in 0..<max(0, effort) {
            var moves = 0
            // Only the cells that hold less than their best can improve.
            let unsettled = order.filter { costs[Int($0)] > bestCosts[Int($0)] }
            batchStart = 0
            while batchStart < unsettled.count {
                let batch = min(batchCells, unsettled.count - batchStart)
                try rank(unsettled, batchStart: batchStart, batch: batch)
                started = monotonicSeconds()
                for slot in 0..<batch {
                    let cell = Int(unsettled[batchStart + slot])
                    let current = assignment[cell]
                    let currentCost = costs[cell]
                    for i in 0..<m {
                        let better = candidates[slot * m + i], betterCost = candidateCosts[slot * m + i]
                        guard betterCost < currentCost else { break }  // ranked: none further is better
                        if better == current { continue }
                        let blockers = holders(of: better, near: cell)
                        if blockers.isEmpty && uses[Int(better)] < limit {
                            uses[Int(current)] -= 1
                            uses[Int(better)] += 1
                            unlink(cell)
                            link(cell, to: better)
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
                            var other = Int(head[Int(better)])
                            var looked = 0
                            while other >= 0 && looked < 64 {
                                looked += 1
                                if holders(of: current, near: other, except: cell, most: 1).isEmpty {
                                    let newCost = cost(other, current)
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
                            swapPhotos(cell, best, cellCost: betterCost, otherCost: otherCost)
                            moves += 1
                            break
                        }
                        // One neighbour holds it: swap, if the current photo may stand there and
                        // the two cells together fit better.
                        guard blockers.count == 1 else { continue }
                        let other = blockers[0]
                        guard holders(of: current, near: other, except: cell, most: 1).isEmpty else { continue }
                        let otherNewCost = cost(other, current)
                        guard Double(betterCost) + Double(otherNewCost) < Double(currentCost) + Double(costs[other]) else { continue }
                        swapPhotos(cell, other, cellCost: betterCost, otherCost: otherNewCost)
                        moves += 1
                        break
                    }
                }
                improvementSeconds += monotonicSeconds() - started
                batchStart += batch
                progress?(cells * (pass + 1) + batchStart * cells / max(1, unsettled.count), totalWork)
            }
            improvements += moves
            passes += 1
            if moves == 0 { break }
        }

        var match = MosaicMatch(columns: columns, rows: rows, assignment: assignment,
                                cellErrors: cellErrors(target: target, store: store, assignment: assignment, subCells: k),
                                constraintViolations: violations)
        match.greedyCost = greedyCost
        match.totalCost = costs.reduce(0.0) { $0 + Double($1) }
        match.greedyMeanError = greedyErrors.reduce(0.0) { $0 + Double($1) } / Double(max(1, cells))
        match.improvements = improvements
        match.improvementPasses = passes
        match.rankingSeconds = rankingSeconds
        match.greedySeconds = greedySeconds
        match.improvementSeconds = improvementSeconds
        match.usedTree = tree != nil
        return match
    }

    /// Per cell: mean Euclidean Oklab distance over sub-cells between target and photo.
    static func cellErrors(target: [Float], store: FeatureStore, assignment: [Int32], subCells k: Int) -> [Float] {
        let d = k * k * 3
        var errors = [Float](repeating: 0, count: assignment.count)
        for cell in 0..<assignment.count {
            let flat = store.pointer(Int(assignment[cell]))
            var total: Float = 0
            for s in 0..<(k * k) {
                let ti = cell * d + s * 3, pi = s * 3
                let dl = target[ti] - flat[pi], da = target[ti + 1] - flat[pi + 1], db = target[ti + 2] - flat[pi + 2]
                total += (dl * dl + da * da + db * db).squareRoot()
            }
            errors[cell] = total / Float(k * k)
        }
        return errors
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
