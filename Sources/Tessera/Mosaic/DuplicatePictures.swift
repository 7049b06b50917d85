// DuplicatePictures.swift — photos that show the same picture, found from their features.
//
// A library holds the same picture more than once: an edited copy, a HEIC and its JPEG export,
// one photo saved in several orientations. For a mosaic they are one photo, or the minimum distance
// would let identical pictures touch. Two photos are the same picture when every mean Oklab
// colour of their k x k sub-cells (upright, converted to sRGB, cropped to the cell: what the
// mosaic draws) agrees within `tolerance`. Measured on the orientation fixture (one photo in
// eight orientations, each re-encoded with its own digit on it): same picture at most 0.011
// apart, the two different pictures 0.24 apart.
//
// Photos are bucketed by their overall mean colour (buckets `tolerance` wide): duplicates have
// overall means within `tolerance`, so each photo is compared only with the representatives in
// its bucket and the 26 around it.

public enum DuplicatePictures {
    /// Largest difference of any sub-cell colour component (Oklab L is 0-1) between two photos
    /// of the same picture.
    public static let tolerance: Float = 0.02

    /// For each photo, the first photo (by position) showing the same picture: itself when it is
    /// the first.
    public static func representatives(_ features: [[Float]], tolerance: Float = tolerance) -> [Int] {
        struct Bucket: Hashable { let l: Int32, a: Int32, b: Int32 }
        var buckets: [Bucket: [Int]] = [:]
        var result = [Int](repeating: 0, count: features.count)
        for (index, feature) in features.enumerated() {
            var mean: (Float, Float, Float) = (0, 0, 0)
            let cells = max(1, feature.count / 3)
            for c in 0..<cells {
                mean.0 += feature[c * 3]
                mean.1 += feature[c * 3 + 1]
                mean.2 += feature[c * 3 + 2]
            }
            let scale = 1 / (Float(cells) * tolerance)
            let home = Bucket(l: Int32((mean.0 * scale).rounded(.down)), a: Int32((mean.1 * scale).rounded(.down)),
                              b: Int32((mean.2 * scale).rounded(.down)))
            var found: Int?
            for dl in -1...1 {
                for da in -1...1 {
                    for db in -1...1 {
                        let bucket = Bucket(l: home.l + Int32(dl), a: home.a + Int32(da), b: home.b + Int32(db))
                        for candidate in buckets[bucket] ?? [] where same(feature, features[candidate], tolerance) {
                            if found == nil || candidate < found! { found = candidate }
                        }
                    }
                }
            }
            if let found {
                result[index] = found
            } else {
                result[index] = index
                buckets[home, default: []].append(index)
            }
        }
        return result
    }

    @inline(__always)
    static func same(_ a: [Float], _ b: [Float], _ tolerance: Float) -> Bool {
        guard a.count == b.count else { return false }
        for i in 0..<a.count where abs(a[i] - b[i]) > tolerance { return false }
        return true
    }

    /// The same, streamed from `store` (the rows marked in `have`, in row order, read a run at a
    /// time): the representatives' rows, ascending, with `duplicate(row, representativeRow)`
    /// called for each other row. Holds the representatives' features (the distinct pictures:
    /// `heldBytes` says how much), and the buckets, which are bounded by the colour space
    /// (about 50 x 34 x 34 at the default tolerance), not by the photos.
    /// More than `maxPictures` distinct pictures: nil (they are not all held).
    public static func representatives(store: FeatureStore, have: [Bool], tolerance: Float = tolerance, maxPictures: Int = .max,
                                       duplicate: (Int, Int) -> Void) throws(TesseraError) -> [Int32]? {
        struct Bucket: Hashable { let l: Int32, a: Int32, b: Int32 }
        let d = store.valuesPerPhoto
        var buckets: [Bucket: [Int32]] = [:]
        var kept: [Float] = []  // the representatives' features, one after another
        var rows: [Int32] = []
        let run = 4096
        var chunk = [Float](repeating: 0, count: run * d)
        var first = 0
        while first < store.count {
            let count = min(run, store.count - first)
            try chunk.withUnsafeMutableBufferPointer { buffer in
                Result { () throws(TesseraError) in try store.read(first, count, into: buffer.baseAddress!) }
            }.get()
            for offset in 0..<count where have[first + offset] {
                let base = offset * d
                var mean: (Float, Float, Float) = (0, 0, 0)
                let cells = max(1, d / 3)
                for c in 0..<cells {
                    mean.0 += chunk[base + c * 3]
                    mean.1 += chunk[base + c * 3 + 1]
                    mean.2 += chunk[base + c * 3 + 2]
                }
                let scale = 1 / (Float(cells) * tolerance)
                let home = Bucket(l: Int32((mean.0 * scale).rounded(.down)), a: Int32((mean.1 * scale).rounded(.down)),
                                  b: Int32((mean.2 * scale).rounded(.down)))
                var found: Int32?
                for dl in -1...1 {
                    for da in -1...1 {
                        for db in -1...1 {
                            let bucket = Bucket(l: home.l + Int32(dl), a: home.a + Int32(da), b: home.b + Int32(db))
                            for candidate in buckets[bucket] ?? [] where found == nil || candidate < found! {
                                var same = true
                                let other = Int(candidate) * d
                                for i in 0..<d where abs(chunk[base + i] - kept[other + i]) > tolerance {
                                    same = false
                                    break
                                }
                                if same { found = candidate }
                            }
                        }
                    }
                }
                if let found {
                    duplicate(first + offset, Int(rows[Int(found)]))
                } else {
                    if rows.count >= maxPictures { return nil }
                    buckets[home, default: []].append(Int32(rows.count))
                    rows.append(Int32(first + offset))
                    kept.append(contentsOf: chunk[base..<(base + d)])
                }
            }
            first += count
        }
        return rows
    }

    /// What `representatives(store:...)` holds for `pictures` distinct pictures of `d` floats.
    public static func heldBytes(pictures: Int, valuesPerPhoto d: Int) -> Int { pictures * (d * 4 + 4 + 4) + (1 << 20) }
}

