// FeatureTree.swift — the m photos nearest a cell, without comparing the cell with every photo.
//
// A photo's feature is k*k*3 numbers (27 at k = 3). The tree is built over a projection of the
// features onto their first few principal components: for an orthonormal projection P,
// |P(x - y)|^2 <= |x - y|^2, so the projected distance is a lower bound of the true one, and the
// principal components make it a tight one (photos differ mostly in their overall colour and
// its gradient). A k-d tree over the projected points finds the photos whose bound is below the
// m-th best true cost so far; only those are compared in full, each comparison stopping as soon
// as its partial sum exceeds the m-th best. The result is exact: the same m photos, in the same
// order (cost, then photo index, as the exhaustive scan ranks them), with the same costs to the
// bit (every full cost is summed in the same order as the exhaustive scan's).
//
// Memory: p floats a photo for the projected points (in tree order), a 4-byte permutation, and
// the nodes (about 2n/leafSize of them); the full features stay where the caller keeps them.

struct FeatureTree: Sendable {
    /// Dimensions of the projection.
    let dimensions: Int
    /// Values per photo of the full features.
    let valuesPerPhoto: Int
    /// The projection: `dimensions` rows of `valuesPerPhoto`, orthonormal, applied after
    /// subtracting `mean`.
    let axes: [Float]
    let mean: [Float]
    /// Projected points in tree order, `dimensions` floats each.
    let points: [Float]
    /// Tree order to photo index.
    let order: [Int32]
    /// Nodes: leaves hold `order[start..<end]`; inner nodes split `axis` at `split`.
    let nodes: [Node]

    struct Node: Sendable {
        var start: Int32
        var end: Int32
        /// -1 for a leaf.
        var axis: Int32
        var split: Float
        var low: Int32
        var high: Int32
    }

    static let leafSize = 12

    /// Builds the tree over `count` photos of `valuesPerPhoto` floats each at `features`.
    init(features: UnsafePointer<Float>, count: Int, valuesPerPhoto d: Int, dimensions requested: Int = 6) {
        valuesPerPhoto = d
        let p = min(requested, d)
        dimensions = p
        // Mean and covariance from at most 20,000 photos spread over the library (the axes only
        // decide how tight the bound is, never whether the answer is right).
        let stride = max(1, count / 20_000)
        var mean = [Float](repeating: 0, count: d)
        var sampled = 0
        for photo in Swift.stride(from: 0, to: count, by: stride) {
            for i in 0..<d { mean[i] += features[photo * d + i] }
            sampled += 1
        }
        for i in 0..<d { mean[i] /= Float(max(1, sampled)) }
        var covariance = [Double](repeating: 0, count: d * d)
        var centred = [Double](repeating: 0, count: d)
        for photo in Swift.stride(from: 0, to: count, by: stride) {
            for i in 0..<d { centred[i] = Double(features[photo * d + i] - mean[i]) }
            for i in 0..<d {
                let ci = centred[i]
                for j in i..<d { covariance[i * d + j] += ci * centred[j] }
            }
        }
        for i in 0..<d { for j in 0..<i { covariance[i * d + j] = covariance[j * d + i] } }
        self.mean = mean
        axes = FeatureTree.principalAxes(covariance: covariance, size: d, count: p)

        // Project every photo.
        var projected = [Float](repeating: 0, count: count * p)
        for photo in 0..<count {
            for a in 0..<p {
                var sum: Float = 0
                for i in 0..<d { sum += (features[photo * d + i] - mean[i]) * axes[a * d + i] }
                projected[photo * p + a] = sum
            }
        }
        // The k-d tree: split on the widest projected dimension at the median.
        var order = (0..<count).map { Int32($0) }
        var nodes: [Node] = []
        nodes.reserveCapacity(2 * count / FeatureTree.leafSize + 2)
        func build(_ start: Int, _ end: Int) -> Int32 {
            let index = Int32(nodes.count)
            nodes.append(Node(start: Int32(start), end: Int32(end), axis: -1, split: 0, low: -1, high: -1))
            guard end - start > FeatureTree.leafSize else { return index }
            var widest = 0
            var widestSpan: Float = -1
            for a in 0..<p {
                var low = Float.infinity, high = -Float.infinity
                for i in start..<end {
                    let value = projected[Int(order[i]) * p + a]
                    low = min(low, value)
                    high = max(high, value)
                }
                if high - low > widestSpan {
                    widestSpan = high - low
                    widest = a
                }
            }
            guard widestSpan > 0 else { return index }  // all the same point: one leaf
            let middle = (start + end) / 2
            order[start..<end].withUnsafeMutableBufferPointer { slice in
                FeatureTree.select(slice, k: middle - start) { projected[Int($0) * p + widest] }
            }
            let split = projected[Int(order[middle]) * p + widest]
            let low = build(start, middle)
            let high = build(middle, end)
            nodes[Int(index)].axis = Int32(widest)
            nodes[Int(index)].split = split
            nodes[Int(index)].low = low
            nodes[Int(index)].high = high
            return index
        }
        if count > 0 { _ = build(0, count) }
        // The projected points into tree order, in place.
        projected.withUnsafeMutableBufferPointer { permuteRecords($0.baseAddress!, width: p, order: order) }
        self.order = order
        self.points = projected
        self.nodes = nodes
    }

    /// The top `count` eigenvectors of a symmetric matrix, by subspace iteration: orthonormal
    /// rows, `count` of `size`.
    static func principalAxes(covariance: [Double], size d: Int, count p: Int) -> [Float] {
        var basis = [Double](repeating: 0, count: p * d)
        var random = SplitMix64(seed: 0x7E55E7A)
        for i in 0..<(p * d) { basis[i] = Double(random.next() % 2000) / 1000 - 1 }
        var next = [Double](repeating: 0, count: p * d)
        for _ in 0..<60 {
            for a in 0..<p {
                for i in 0..<d {
                    var sum = 0.0
                    for j in 0..<d { sum += covariance[i * d + j] * basis[a * d + j] }
                    next[a * d + i] = sum
                }
            }
            // Gram-Schmidt.
            for a in 0..<p {
                for b in 0..<a {
                    var dot = 0.0
                    for i in 0..<d { dot += next[a * d + i] * next[b * d + i] }
                    for i in 0..<d { next[a * d + i] -= dot * next[b * d + i] }
                }
                var norm = 0.0
                for i in 0..<d { norm += next[a * d + i] * next[a * d + i] }
                norm = norm.squareRoot()
                if norm < 1e-30 {
                    // A degenerate direction (no variance left): any unit vector orthogonal enough.
                    for i in 0..<d { next[a * d + i] = i == a % d ? 1 : 0 }
                    for b in 0..<a {
                        var dot = 0.0
                        for i in 0..<d { dot += next[a * d + i] * next[b * d + i] }
                        for i in 0..<d { next[a * d + i] -= dot * next[b * d + i] }
                    }
                    norm = 0
                    for i in 0..<d { norm += next[a * d + i] * next[a * d + i] }
                    norm = max(norm.squareRoot(), 1e-30)
                }
                for i in 0..<d { next[a * d + i] /= norm }
            }
            swap(&basis, &next)
        }
        return basis.map { Float($0) }
    }

    /// Reorders `slice` so that its k-th element (by `key`) is in place, smaller ones before it.
    static func select(_ slice: UnsafeMutableBufferPointer<Int32>, k: Int, key: (Int32) -> Float) {
        var low = 0, high = slice.count - 1
        while low < high {
            let pivot = key(slice[(low + high) / 2])
            var i = low, j = high
            while i <= j {
                while key(slice[i]) < pivot { i += 1 }
                while key(slice[j]) > pivot { j -= 1 }
                if i <= j {
                    slice.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            if k <= j { high = j } else if k >= i { low = i } else { return }
        }
    }

    /// Per-query working memory.
    struct Scratch {
        var projected: [Float]
        var offsets: [Float]
        init(dimensions: Int) {
            projected = [Float](repeating: 0, count: dimensions)
            offsets = [Float](repeating: 0, count: dimensions)
        }
    }

    /// The `m` photos with the smallest cost (squared distance over all values) to `target`,
    /// ranked by (cost, index), into `photos` and `costs` (m each). Exactly what comparing with
    /// every photo gives. `features` are the full features the tree was built from, in tree
    /// order (FeatureStore.arrange with `order`): slot s holds photo order[s].
    func nearest(_ target: UnsafePointer<Float>, features: UnsafePointer<Float>, m: Int, photos: UnsafeMutablePointer<Int32>,
                 costs: UnsafeMutablePointer<Float>, scratch: inout Scratch) {
        let d = valuesPerPhoto, p = dimensions
        for i in 0..<m {
            costs[i] = .infinity
            photos[i] = Int32.max
        }
        for a in 0..<p {
            var sum: Float = 0
            for i in 0..<d { sum += (target[i] - mean[i]) * axes[a * d + i] }
            scratch.projected[a] = sum
            scratch.offsets[a] = 0
        }
        // A bound at or above this (with room for rounding) cannot beat the m-th best.
        @inline(__always) func beaten(_ bound: Float) -> Bool { bound > costs[m - 1] * 1.0001 + 1e-9 }
        points.withUnsafeBufferPointer { points in
            order.withUnsafeBufferPointer { order in
                nodes.withUnsafeBufferPointer { nodes in
                    scratch.projected.withUnsafeBufferPointer { query in
                        scratch.offsets.withUnsafeMutableBufferPointer { offsets in
                            func visit(_ index: Int, _ bound: Float) {
                                let node = nodes[index]
                                if node.axis < 0 {
                                    for slot in Int(node.start)..<Int(node.end) {
                                        var projectedCost: Float = 0
                                        for a in 0..<p {
                                            let diff = query[a] - points[slot * p + a]
                                            projectedCost += diff * diff
                                        }
                                        if beaten(projectedCost) { continue }
                                        let photo = order[slot]
                                        let worst = costs[m - 1]
                                        let full = features + slot * d
                                        var cost: Float = 0
                                        var i = 0
                                        while i < d {
                                            let diff = target[i] - full[i]
                                            cost += diff * diff
                                            i += 1
                                            if cost > worst { break }
                                        }
                                        guard cost < worst || (cost == worst && photo < photos[m - 1]) else { continue }
                                        // Insert by (cost, index).
                                        var j = m - 1
                                        while j > 0 && (costs[j - 1] > cost || (costs[j - 1] == cost && photos[j - 1] > photo)) {
                                            costs[j] = costs[j - 1]
                                            photos[j] = photos[j - 1]
                                            j -= 1
                                        }
                                        costs[j] = cost
                                        photos[j] = photo
                                    }
                                    return
                                }
                                let axis = Int(node.axis)
                                let diff = query[axis] - node.split
                                let (near, far) = diff < 0 ? (Int(node.low), Int(node.high)) : (Int(node.high), Int(node.low))
                                visit(near, bound)
                                // The far side is at least this far: the bound with this axis's
                                // offset replaced by the distance to the split.
                                let old = offsets[axis]
                                let farBound = bound - old * old + diff * diff
                                if !beaten(farBound) {
                                    offsets[axis] = diff
                                    visit(far, farBound)
                                    offsets[axis] = old
                                }
                            }
                            if !nodes.isEmpty { visit(0, 0) }
                        }
                    }
                }
            }
        }
    }
}
