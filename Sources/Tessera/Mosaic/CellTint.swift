// CellTint.swift — the tint: move each drawn cell's colours toward its part of the target.
//
// Per sub-cell, the shift is worked out in Oklab: the cell's sub-cell colour moves `strength` of
// the way to the target's, and the difference, taken back to sRGB, is added to every pixel of
// that sub-cell as the cell is copied into its stripe. One Oklab round trip per sub-cell, one add
// per pixel: cheap enough for a gigapixel.

public struct CellTint: Sendable {
    /// 0 (none) ... 1 (the target's colours exactly, per sub-cell).
    public let strength: Float
    public let subCells: Int
    /// The target: `cells` x k*k*3 Oklab values (MosaicAnalysis.targetFeatures).
    public let target: [Float]
    /// Per photo (indexes of the render's photo list), one after another: k*k*3 Oklab values.
    /// Flat: an array a photo would cost its header besides.
    public let features: [Float]

    public init(strength: Float, subCells: Int, target: [Float], photoFeatures: [[Float]]) {
        self.init(strength: strength, subCells: subCells, target: target, features: photoFeatures.flatMap { $0 })
    }

    public init(strength: Float, subCells: Int, target: [Float], features: [Float]) {
        self.strength = strength
        self.subCells = subCells
        self.target = target
        self.features = features
    }

    /// Photo `photo`'s features.
    public func photoFeatures(_ photo: Int) -> ArraySlice<Float> {
        let d = subCells * subCells * 3
        return features[(photo * d)..<((photo + 1) * d)]
    }

    /// sRGB offsets (k*k*3) for `photo` drawn in `cell`.
    func offsets(cell: Int, photo: Int) -> [Int16] {
        let k = subCells, d = k * k * 3
        let features = Array(photoFeatures(photo))
        var result = [Int16](repeating: 0, count: d)
        for s in 0..<(k * k) {
            let f = s * 3, t = cell * d + s * 3
            let tile = OklabColor(l: features[f], a: features[f + 1], b: features[f + 2])
            let goal = OklabColor(l: tile.l + strength * (target[t] - tile.l), a: tile.a + strength * (target[t + 1] - tile.a),
                                  b: tile.b + strength * (target[t + 2] - tile.b))
            let from = Oklab.toSRGB(tile), to = Oklab.toSRGB(goal)
            result[f] = Int16((to.0 - from.0).rounded())
            result[f + 1] = Int16((to.1 - from.1).rounded())
            result[f + 2] = Int16((to.2 - from.2).rounded())
        }
        return result
    }

    /// Copies row `row` of a `cellWidth`-pixel cell from `source` to `destination`, shifted by
    /// the offsets of the sub-cells it crosses. Pixel x lies in sub-cell x * k / cellWidth; the
    /// loop walks each sub-cell's run of pixels with its three offsets held in registers.
    @inline(__always)
    func apply(_ offsets: [Int16], row: Int, cellWidth: Int, cellHeight: Int,
               from source: UnsafePointer<UInt8>, to destination: UnsafeMutablePointer<UInt8>) {
        let k = subCells
        let sy = row * k / cellHeight
        offsets.withUnsafeBufferPointer { o in
            for sx in 0..<k {
                // The first x with x * k / cellWidth == sx, and the first past it.
                let start = (sx * cellWidth + k - 1) / k, end = ((sx + 1) * cellWidth + k - 1) / k
                let f = (sy * k + sx) * 3
                let r = Int(o[f]), g = Int(o[f + 1]), b = Int(o[f + 2])
                var i = start * 3
                let stop = end * 3
                while i < stop {
                    destination[i] = UInt8(clamping: Int(source[i]) + r)
                    destination[i + 1] = UInt8(clamping: Int(source[i + 1]) + g)
                    destination[i + 2] = UInt8(clamping: Int(source[i + 2]) + b)
                    i += 3
                }
            }
        }
    }
}
