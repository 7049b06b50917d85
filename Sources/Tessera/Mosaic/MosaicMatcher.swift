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

    /// What matching `cells` cells against `photos` photos holds besides the process, in bytes:
    /// the target's features, the order, the assignment and the errors (16 bytes a cell beside
    /// the features), the photos' features twice (as given and flattened) and a batch's
    /// candidates.
    public static func workingBytes(cells: Int, photos: Int, subCells k: Int, candidateCount: Int = 24) -> Int {
        let d = k * k * 3
        return cells * (d * 4 + 16) + photos * (d * 8 + 80) + batchCells * candidateCount * 4
    }

    /// Matches `photoFeatures` (k*k*3 floats each) to `target` (`columns * rows` cells of k*k*3).
    public static func match(target: [Float], columns: Int, rows: Int, subCells k: Int, photoFeatures: [[Float]],
                             minDistance: Int, maxUses: Int?, seed: UInt64, workers: Int,
                             candidateCount: Int = 24, cancellation: RenderCancellation? = nil,
                             progress: ((Int, Int) -> Void)? = nil) throws(TesseraError) -> MosaicMatch {
        let cells = columns * rows
        let n = photoFeatures.count
        let d = k * k * 3
        precondition(target.count == cells * d && photoFeatures.allSatisfy { $0.count == d })
        guard n > 0 else { throw .noPhotos(searched: []) }
        let window = (2 * minDistance + 1) * (2 * minDistance + 1)
        if minDistance > 0 && n < window && cells > 1 {
            throw .invalidSettings("a minimum distance of \(minDistance) needs at least \(window) different pictures (a \(2 * minDistance + 1) x \(2 * minDistance + 1) block holds no repeat; copies of one picture count once), found \(n)")
        }
        if let maxUses, maxUses * n < cells {
            throw .invalidSettings("at most \(maxUses) uses of each of \(n) photos fill at most \(maxUses * n) of \(cells) cells")
        }
        let flat = photoFeatures.flatMap { $0 }
        let m = min(candidateCount, n)

        var order = [Int32](unsafeUninitializedCapacity: cells) { buffer, count in
            for i in 0..<cells { buffer[i] = Int32(i) }
            count = cells
        }
        var random = SplitMix64(seed: seed)
        for i in stride(from: cells - 1, to: 0, by: -1) { order.swapAt(i, Int(random.next() % UInt64(i + 1))) }
        var assignment = [Int32](repeating: -1, count: cells)
        var uses = [Int](repeating: 0, count: n)
        var violations = 0
        let limit = maxUses ?? Int.max

        func allowed(_ photo: Int32, cell: Int) -> Bool {
            guard uses[Int(photo)] < limit else { return false }
            guard minDistance > 0 else { return true }
            let row = cell / columns, column = cell % columns
            for y in max(0, row - minDistance)...min(rows - 1, row + minDistance) {
                for x in max(0, column - minDistance)...min(columns - 1, column + minDistance) where assignment[y * columns + x] == photo {
                    return false
                }
            }
            return true
        }

        // The cells in a seeded random order, a batch at a time: each batch's m best photos per
        // cell in parallel (exact costs), then the greedy pass over the batch, each cell taking
        // its best candidate the constraints allow. Only one batch's candidates exist at a time
        // (a million cells' would be 96 MB), and the result is the same as ranking every cell
        // first.
        var candidates = [Int32](repeating: 0, count: batchCells * m)
        var batchStart = 0
        while batchStart < cells {
            let batch = min(batchCells, cells - batchStart)
            flat.withUnsafeBufferPointer { photos in
                target.withUnsafeBufferPointer { targets in
                    order.withUnsafeBufferPointer { cellOrder in
                        candidates.withUnsafeMutableBufferPointer { out in
                            let p = UnsafeSendable(photos.baseAddress!), t = UnsafeSendable(targets.baseAddress!)
                            let o = UnsafeSendable(cellOrder.baseAddress! + batchStart), c = UnsafeSendable(out.baseAddress!)
                            _ = mapInLanes(count: batch, lanes: workers, cancellation: cancellation,
                                           scratch: { [Float](repeating: .infinity, count: m) }) { slot, bestCost in
                                let bestPhoto = c.value + slot * m
                                for i in 0..<m {
                                    bestCost[i] = .infinity
                                    bestPhoto[i] = 0
                                }
                                let cellTarget = t.value + Int(o.value[slot]) * d
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
            if cancellation?.isCancelled == true { throw .cancelled }
            for slot in 0..<batch {
                let cell = Int(order[batchStart + slot])
                var chosen: Int32 = -1
                for i in 0..<m where allowed(candidates[slot * m + i], cell: cell) {
                    chosen = candidates[slot * m + i]
                    break
                }
                if chosen < 0 {
                    // None of the best m is allowed: rank all photos for this cell.
                    let ranked = target.withUnsafeBufferPointer { t in
                        flat.withUnsafeBufferPointer { p in
                            (0..<n).map { (squaredDistance(t.baseAddress! + cell * d, p.baseAddress! + $0 * d, count: d), Int32($0)) }
                        }
                    }.sorted { $0.0 < $1.0 }
                    if let feasible = ranked.first(where: { allowed($0.1, cell: cell) }) {
                        chosen = feasible.1
                    } else {
                        chosen = ranked.first(where: { uses[Int($0.1)] < limit })?.1 ?? ranked[0].1
                        violations += 1
                    }
                }
                assignment[cell] = chosen
                uses[Int(chosen)] += 1
            }
            batchStart += batch
            progress?(batchStart, cells)
        }

        // Per-cell error: mean Euclidean distance over sub-cells.
        var errors = [Float](repeating: 0, count: cells)
        for cell in 0..<cells {
            let photo = Int(assignment[cell])
            var total: Float = 0
            for s in 0..<(k * k) {
                let ti = cell * d + s * 3, pi = photo * d + s * 3
                let dl = target[ti] - flat[pi], da = target[ti + 1] - flat[pi + 1], db = target[ti + 2] - flat[pi + 2]
                total += (dl * dl + da * da + db * db).squareRoot()
            }
            errors[cell] = total / Float(k * k)
        }
        return MosaicMatch(columns: columns, rows: rows, assignment: assignment, cellErrors: errors, constraintViolations: violations)
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
