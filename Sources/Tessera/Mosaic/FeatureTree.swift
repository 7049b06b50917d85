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
// The matcher builds one tree for each run of photos it reads (MosaicMatcher.chunkPhotos) and
// merges each tree's photos into every cell's ranking, so a tree never covers more than a run.

struct FeatureTree: Sendable {
    /// Dimensions of the projection.
    let dimensions: Int
    /// Values per photo of the full features.
    let valuesPerPhoto: Int
    /// The projection: `dimensions` rows of `valuesPerPhoto`, orthonormal, applied after
    /// subtracting `mean`.
    let axes: [Float]
    let mean: [Float]
    /// Projected points in tree order, `dimensions` floats each padded with zeros to 8 (one
    /// vector: the bound of a point is a handful of instructions).
    let points: [SIMD8<Float>]
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

    /// The mean and the axes a tree projects on.
    struct Projection: Sendable {
        let dimensions: Int
        let mean: [Float]
        let axes: [Float]
    }

    var projection: Projection { Projection(dimensions: dimensions, mean: mean, axes: axes) }

    /// Builds the tree over `count` photos of `valuesPerPhoto` floats each at `features`, on the
    /// principal components of those photos, or on `projection`'s (another run of the same
    /// library: the axes only decide how tight the bound is, never whether the answer is right).
    init(features: UnsafePointer<Float>, count: Int, valuesPerPhoto d: Int, dimensions requested: Int = 8,
         projection: Projection? = nil) {
        valuesPerPhoto = d
        if let projection {
            precondition(projection.mean.count == d && projection.axes.count == projection.dimensions * d)
            dimensions = projection.dimensions
            mean = projection.mean
            axes = projection.axes
        } else {
            dimensions = min(requested, d, 8)
            (mean, axes) = FeatureTree.principalComponents(features: features, count: count, valuesPerPhoto: d, dimensions: dimensions)
        }
        let p = dimensions, mean = self.mean, axes = self.axes
        // Project every photo (lanes past p stay 0).
        var points = [SIMD8<Float>](repeating: SIMD8(repeating: 0), count: count)
        for photo in 0..<count {
            for a in 0..<p {
                var sum: Float = 0
                for i in 0..<d { sum += (features[photo * d + i] - mean[i]) * axes[a * d + i] }
                points[photo][a] = sum
            }
        }
        // The k-d tree: split on the widest projected dimension at the median. The points move
        // with the order, so every scan of a node's points is sequential.
        var order = (0..<count).map { Int32($0) }
        var nodes: [Node] = []
        nodes.reserveCapacity(2 * count / FeatureTree.leafSize + 2)
        points.withUnsafeMutableBufferPointer { points in
            order.withUnsafeMutableBufferPointer { order in
                func build(_ start: Int, _ end: Int) -> Int32 {
                    let index = Int32(nodes.count)
                    nodes.append(Node(start: Int32(start), end: Int32(end), axis: -1, split: 0, low: -1, high: -1))
                    guard end - start > FeatureTree.leafSize else { return index }
                    var smallest = points[start], largest = points[start]
                    for i in (start + 1)..<end {
                        smallest = pointwiseMin(smallest, points[i])
                        largest = pointwiseMax(largest, points[i])
                    }
                    let span = largest - smallest
                    var widest = 0
                    for a in 1..<p where span[a] > span[widest] { widest = a }
                    guard span[widest] > 0 else { return index }  // all the same point: one leaf
                    let middle = (start + end) / 2
                    FeatureTree.select(points: points, order: order, start: start, end: end, k: middle, axis: widest)
                    let split = points[middle][widest]
                    let low = build(start, middle)
                    let high = build(middle, end)
                    nodes[Int(index)].axis = Int32(widest)
                    nodes[Int(index)].split = split
                    nodes[Int(index)].low = low
                    nodes[Int(index)].high = high
                    return index
                }
                if count > 0 { _ = build(0, count) }
            }
        }
        self.points = points
        self.order = order
        self.nodes = nodes
    }

    /// The mean and the top `p` principal axes of the features, from at most 20,000 photos
    /// spread over them.
    static func principalComponents(features: UnsafePointer<Float>, count: Int, valuesPerPhoto d: Int,
                                    dimensions p: Int) -> (mean: [Float], axes: [Float]) {
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
        return (mean, principalAxes(covariance: covariance, size: d, count: p))
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

    /// Reorders points start..<end (and their photos in `order` with them) so that the k-th
    /// by `axis` is in place, smaller ones before it and larger after.
    static func select(points: UnsafeMutableBufferPointer<SIMD8<Float>>, order: UnsafeMutableBufferPointer<Int32>,
                       start: Int, end: Int, k: Int, axis: Int) {
        @inline(__always) func swapAt(_ i: Int, _ j: Int) {
            points.swapAt(i, j)
            order.swapAt(i, j)
        }
        var low = start, high = end - 1
        while low < high {
            let pivot = points[(low + high) / 2][axis]
            var i = low, j = high
            while i <= j {
                while points[i][axis] < pivot { i += 1 }
                while points[j][axis] > pivot { j -= 1 }
                if i <= j {
                    swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            if k <= j { high = j } else if k >= i { low = i } else { return }
        }
    }

    /// Per-query working memory.
    struct Scratch {
        var offsets: [Float]
        init(dimensions: Int) {
            offsets = [Float](repeating: 0, count: dimensions)
        }
    }

    /// Merges the tree's photos into the `m` best so far: `photos` and `costs` (m each) hold a
    /// ranking by (cost, index) (infinity and Int32.max where empty), and leave holding the `m`
    /// photos with the smallest cost (squared distance over all values) to `target` among
    /// those and this tree's, ranked the same way. Exactly what comparing with every photo
    /// gives. `features` are the full features the tree was built from, in tree order
    /// (`permuteRecords` with `order`): slot s holds photo order[s], which is reported as
    /// `firstPhoto + order[s]`.
    func nearest(_ target: UnsafePointer<Float>, features: UnsafePointer<Float>, firstPhoto: Int32 = 0, m: Int,
                 photos: UnsafeMutablePointer<Int32>, costs: UnsafeMutablePointer<Float>, scratch: inout Scratch) {
        let d = valuesPerPhoto, p = dimensions
        var projectedTarget = SIMD8<Float>(repeating: 0)
        for a in 0..<p {
            var sum: Float = 0
            for i in 0..<d { sum += (target[i] - mean[i]) * axes[a * d + i] }
            projectedTarget[a] = sum
            scratch.offsets[a] = 0
        }
        let query = projectedTarget
        // A bound at or above this (with room for rounding) cannot beat the m-th best.
        @inline(__always) func beaten(_ bound: Float) -> Bool { bound > costs[m - 1] * 1.0001 + 1e-9 }
        points.withUnsafeBufferPointer { points in
            order.withUnsafeBufferPointer { order in
                nodes.withUnsafeBufferPointer { nodes in
                    do {
                        scratch.offsets.withUnsafeMutableBufferPointer { offsets in
                            func visit(_ index: Int, _ bound: Float) {
                                let node = nodes[index]
                                if node.axis < 0 {
                                    for slot in Int(node.start)..<Int(node.end) {
                                        let gap = query - points[slot]
                                        if beaten((gap * gap).sum()) { continue }
                                        let photo = firstPhoto + order[slot]
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
