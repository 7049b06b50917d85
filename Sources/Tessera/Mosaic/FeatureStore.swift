// FeatureStore.swift — the photos' features as the matcher reads them: k*k*3 floats a photo,
// one photo after another, in one allocation (not an array per photo: a million photos' arrays
// would cost their headers on top of the 108 MB of floats), rearranged into the feature tree's
// order once the tree is built, so that a search reads runs of neighbouring photos.
import Glibc

public final class FeatureStore: @unchecked Sendable {
    /// Photos stored.
    public let count: Int
    /// Floats per photo (k*k*3).
    public let valuesPerPhoto: Int
    /// Where the features are, for as long as this store lives (its own allocation, or the
    /// mapping).
    let base: UnsafePointer<Float>
    private let mutableBase: UnsafeMutablePointer<Float>
    /// After `arrange`: the slot each photo's features are in.
    private var slotOfPhoto: [Int32]?
    private let memory: UnsafeMutableBufferPointer<Float>

    /// Features held in memory (`features.count` a multiple of `valuesPerPhoto`), copied.
    public convenience init(features: [Float], valuesPerPhoto: Int) {
        precondition(valuesPerPhoto > 0 && features.count % valuesPerPhoto == 0)
        self.init(count: features.count / valuesPerPhoto, valuesPerPhoto: valuesPerPhoto) { buffer in
            _ = buffer.initialize(from: features)
        }
    }

    /// One photo's features after another, copied into memory (no flattened array between).
    public convenience init(photos: [[Float]], valuesPerPhoto: Int) {
        precondition(photos.allSatisfy { $0.count == valuesPerPhoto })
        self.init(count: photos.count, valuesPerPhoto: valuesPerPhoto) { buffer in
            for (index, photo) in photos.enumerated() {
                _ = UnsafeMutableBufferPointer(rebasing: buffer[(index * valuesPerPhoto)..<((index + 1) * valuesPerPhoto)]).initialize(from: photo)
            }
        }
    }

    /// `count` photos' features written by `fill` straight into the store's allocation.
    public init(count: Int, valuesPerPhoto: Int, fill: (UnsafeMutableBufferPointer<Float>) -> Void) {
        self.count = count
        self.valuesPerPhoto = valuesPerPhoto
        let storage = UnsafeMutableBufferPointer<Float>.allocate(capacity: max(1, count * valuesPerPhoto))
        fill(UnsafeMutableBufferPointer(rebasing: storage[0..<(count * valuesPerPhoto)]))
        memory = storage
        mutableBase = storage.baseAddress!
        base = UnsafePointer(storage.baseAddress!)
    }

    deinit { memory.deallocate() }

    /// Photo `photo`'s features.
    @inline(__always)
    func pointer(_ photo: Int) -> UnsafePointer<Float> {
        base + (slotOfPhoto.map { Int($0[photo]) } ?? photo) * valuesPerPhoto
    }

    /// Moves the features so that slot s holds photo `order[s]` (a permutation of the photos),
    /// in place, cycle by cycle; `pointer(photo)` still finds each photo.
    func arrange(_ order: [Int32]) {
        precondition(order.count == count && slotOfPhoto == nil)
        permuteRecords(mutableBase, width: valuesPerPhoto, order: order)
        var slots = [Int32](repeating: 0, count: count)
        for (slot, photo) in order.enumerated() { slots[Int(photo)] = Int32(slot) }
        slotOfPhoto = slots
    }
}

/// Rearranges `order.count` records of `width` floats at `records` so that record s becomes the
/// one that was at `order[s]` (a permutation), in place: each cycle of the permutation is
/// followed once, carrying one record, so no second copy of the records is ever held.
func permuteRecords(_ records: UnsafeMutablePointer<Float>, width: Int, order: [Int32]) {
    var placed = [Bool](repeating: false, count: order.count)
    var carried = [Float](repeating: 0, count: width)
    for start in 0..<order.count where !placed[start] {
        for i in 0..<width { carried[i] = records[start * width + i] }
        var slot = start
        while true {
            placed[slot] = true
            let source = Int(order[slot])
            if source == start {
                for i in 0..<width { records[slot * width + i] = carried[i] }
                break
            }
            for i in 0..<width { records[slot * width + i] = records[source * width + i] }
            slot = source
        }
    }
}
