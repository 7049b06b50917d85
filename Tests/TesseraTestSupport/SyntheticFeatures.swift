// SyntheticFeatures.swift — mosaic features without photos, for the matcher's tests and the
// benchmark's library-scale matching (a million photos need no files).
import Tessera

/// Photo-like features: a base colour per photo, a gradient across its sub-cells and a little
/// noise; `clusters` > 0 draws the bases from that many tight clusters (a library of many
/// shots of the same scenes), with some exact copies (ties).
public func photoLikeFeatures(count: Int, k: Int, seed: UInt64, clusters: Int = 0) -> [Float] {
    var random = SplitMix64(seed: seed)
    func uniform() -> Float { Float(random.next() % 1_000_000) / 1_000_000 }
    let centres = (0..<max(1, clusters)).map { _ in (uniform(), uniform() * 0.6 - 0.3, uniform() * 0.6 - 0.3) }
    var features: [Float] = []
    features.reserveCapacity(count * k * k * 3)
    for photo in 0..<count {
        if clusters > 0 && photo % 10 == 9 {  // an exact copy of the one before
            features += features[(features.count - k * k * 3)...]
            continue
        }
        let base = clusters > 0 ? centres[Int(random.next() % UInt64(clusters))] : (uniform(), uniform() * 0.6 - 0.3, uniform() * 0.6 - 0.3)
        let spread: Float = clusters > 0 ? 0.02 : 1
        let l = clusters > 0 ? base.0 + (uniform() - 0.5) * spread : base.0
        let gx = (uniform() - 0.5) * 0.2, gy = (uniform() - 0.5) * 0.2
        for sy in 0..<k {
            for sx in 0..<k {
                let g = gx * Float(sx - k / 2) + gy * Float(sy - k / 2)
                features += [l + g + (uniform() - 0.5) * 0.04, base.1 + (uniform() - 0.5) * 0.04, base.2 + (uniform() - 0.5) * 0.04]
            }
        }
    }
    return features
}

