// DuplicatePictures.swift — photos that show the same picture, found from their features.
//
// A library holds the same picture more than once: an edited copy, a HEIC and its smaller JPEG
// export, a copy saved without its colour profile, one photo saved in several orientations. For a
// mosaic they are one photo, or the minimum distance would let identical pictures touch.
//
// The measure works on the features the analysis stores: the mean Oklab colour of each of a
// photo's k x k sub-cells (upright, converted to sRGB, cropped to the cell: what the mosaic draws).
// Comparing them cell by cell within a fixed 0.02 (the first measure) missed copies that differ by
// a global change: +5% brightness moves every L by about 0.025, a wide-gamut copy exported
// without its profile moves L by up to 0.04 and a by up to 0.027, and a small copy resampled
// differently moves a high-contrast cell by up to 0.04 (measured on 18 real photos, each with 11
// copies). So a photo is split into its mean colour and its pattern (each sub-cell minus the mean),
// and two photos are one picture when
//   - their mean colours are close (the global shift),
//   - their L contrasts (root mean square of the L pattern) are within a ratio of 1.25, and their
//     L patterns agree once both are brought to a common contrast (the tone change),
//   - their a and b patterns agree (a colour cast or a lost profile moves a and b mostly through
//     the mean), and
//   - no sub-cell differs by more than a cap (0.075: the least two unlike blocks of the test
//     libraries' pictures differ, 0.085, stays outside).
// How much shift and pattern error is allowed grows with the pattern's richness: a photo whose
// L pattern is flat (a wall, a sky, grey gravel) has nothing to confirm it by, and there two
// distinct pictures can differ only by their mean, so a flat pair keeps the first measure's 0.02
// for every bound; a pair with an L contrast of 0.08 or more (most photos) gets the loosest bounds.
// Measured (docs/mosaic.md): every copy of the 18 photos is within the measure of its original
// (the first measure missed 45 of the 198), and among 130 distinct real pictures (8,385 pairs) one
// pair is joined, by both measures: a flat grey texture and a flat grey wallpaper.
//
// Each photo is compared only with the representatives kept so far that lie in the cells of a grid
// (DuplicateGrid.swift: over its contrast and the L of a few sub-cells) where `same` could accept
// them, and joins the first of those by position that it accepts: exactly the picture comparing
// with every earlier representative would give it.

public enum DuplicatePictures {
    /// The bound on every difference between two flat photos of the same picture (Oklab L is 0-1):
    /// their mean colours, their patterns and each sub-cell colour component.
    public static let tolerance: Float = 0.02
    /// An L contrast (root mean square of the L pattern) at and past which a photo's pattern is rich
    /// enough for the loosest bounds; below it the allowances shrink in proportion.
    static let richContrast: Float = 0.08
    /// What a rich pair may add to `tolerance`: to the mean L shift, the mean a and b shifts, the
    /// L pattern error, the a and b pattern error and the sub-cell difference. (A HEIC or a
    /// quarter-size copy of a 160 px photo with hard edges moves its L pattern by up to 0.043.)
    static let lightnessShift: Float = 0.03
    static let colourShift: Float = 0.02
    static let lightnessPattern: Float = 0.03
    static let colourPattern: Float = 0.005
    static let cellDifference: Float = 0.055
    /// The largest ratio of two photos' L contrasts, and the contrast below which a photo counts as
    /// flat for that ratio (a flat photo's contrast is noise).
    static let contrastRatio: Float = 1.25
    static let contrastFloor: Float = 0.02

    /// A photo's mean Oklab colour and L contrast, computed once and used both for its grid cell
    /// and for every comparison, so that the grid and the measure see the same floats.
    struct Summary {
        var l: Float, a: Float, b: Float, contrast: Float
    }

    static func summary(_ values: UnsafePointer<Float>?, count d: Int) -> Summary {
        guard let values, d >= 3 else { return Summary(l: 0, a: 0, b: 0, contrast: 0) }
        let cells = d / 3
        var l: Float = 0, a: Float = 0, b: Float = 0
        for c in 0..<cells {
            l += values[c * 3]; a += values[c * 3 + 1]; b += values[c * 3 + 2]
        }
        let n = Float(cells)
        l /= n; a /= n; b /= n
        var squares: Float = 0
        for c in 0..<cells { squares += (values[c * 3] - l) * (values[c * 3] - l) }
        return Summary(l: l, a: a, b: b, contrast: (squares / n).squareRoot())
    }

    /// Whether two photos (`d` floats each, with their summaries) show the same picture.
    static func same(_ x: UnsafePointer<Float>, _ sx: Summary, _ y: UnsafePointer<Float>, _ sy: Summary, count d: Int,
                     tolerance: Float) -> Bool {
        // The richness weight: 0 for a flat photo (either one), 1 from richContrast up.
        let weight = min(1, min(sx.contrast, sy.contrast) / richContrast)
        guard abs(sx.l - sy.l) <= tolerance + lightnessShift * weight,
              abs(sx.a - sy.a) <= tolerance + colourShift * weight,
              abs(sx.b - sy.b) <= tolerance + colourShift * weight else { return false }
        let ratio = max(sx.contrast, contrastFloor) / max(sy.contrast, contrastFloor)
        guard ratio <= contrastRatio, ratio >= 1 / contrastRatio else { return false }
        // Both L patterns brought to the geometric mean of their contrasts: symmetric in x and y.
        let gain = ratio.squareRoot()
        let patternBound = tolerance + lightnessPattern * weight, cellBound = tolerance + cellDifference * weight
        let colourBound = tolerance + colourPattern * weight
        for c in 0..<(d / 3) {
            let i = c * 3
            guard abs(x[i] - y[i]) <= cellBound, abs(x[i + 1] - y[i + 1]) <= cellBound, abs(x[i + 2] - y[i + 2]) <= cellBound,
                  abs((x[i] - sx.l) / gain - (y[i] - sy.l) * gain) <= patternBound,
                  abs((x[i + 1] - sx.a) - (y[i + 1] - sy.a)) <= colourBound,
                  abs((x[i + 2] - sx.b) - (y[i + 2] - sy.b)) <= colourBound else { return false }
        }
        return true
    }

    /// Whether two photos' features (k*k*3 floats each) show the same picture.
    public static func same(_ a: [Float], _ b: [Float], tolerance: Float = tolerance) -> Bool {
        guard a.count == b.count, a.count >= 3 else { return false }
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in
                same(x.baseAddress!, summary(x.baseAddress!, count: a.count), y.baseAddress!, summary(y.baseAddress!, count: b.count),
                     count: a.count, tolerance: tolerance)
            }
        }
    }

    /// For each photo, the first photo (by position) showing the same picture: itself when it is
    /// the first. Photos whose feature length differs from the first photo's (or is under 3) are
    /// their own pictures.
    public static func representatives(_ features: [[Float]], tolerance: Float = tolerance) -> [Int] {
        var result = Array(features.indices)
        let d = features.first?.count ?? 0
        guard d >= 3 else { return result }
        var grid = Grid(valuesPerPhoto: d, tolerance: tolerance, capacity: features.count)
        var pictures: [Int] = []  // the representatives' positions
        for (index, feature) in features.enumerated() where feature.count == d {
            feature.withUnsafeBufferPointer { values in
                let x = values.baseAddress!, own = summary(x, count: d)
                if let found = grid.find(x, own) {
                    result[index] = pictures[Int(found)]
                } else {
                    grid.insert(x, own)
                    pictures.append(index)
                }
            }
        }
        return result
    }

    /// The same, streamed from `store` (the rows marked in `have`, in row order, read a run at a
    /// time): the representatives' rows, ascending, with `duplicate(row, representativeRow)`
    /// called for each other row. Holds the representatives' features, summaries and grid (the
    /// distinct pictures: `heldBytes` says how much), sized once for every picture that may be
    /// kept: pages not written are not resident, and growing by doubling would copy the features
    /// into a new block while the old one is still held (up to one and a half times `heldBytes`).
    /// More than `maxPictures` distinct pictures: nil (they are not all held).
    public static func representatives(store: FeatureStore, have: [Bool], tolerance: Float = tolerance, maxPictures: Int = .max,
                                       duplicate: (Int, Int) -> Void) throws(TesseraError) -> [Int32]? {
        let d = store.valuesPerPhoto
        let most = min(maxPictures, have.lazy.filter { $0 }.count) + 1
        var grid = Grid(valuesPerPhoto: d, tolerance: tolerance, capacity: most)
        var rows: [Int32] = []
        rows.reserveCapacity(most)
        let run = 4096
        var chunk = [Float](repeating: 0, count: run * max(d, 1))
        var first = 0
        while first < store.count {
            let count = min(run, store.count - first)
            try chunk.withUnsafeMutableBufferPointer { buffer in
                Result { () throws(TesseraError) in try store.read(first, count, into: buffer.baseAddress!) }
            }.get()
            for offset in 0..<count where have[first + offset] {
                let kept: Bool = chunk.withUnsafeBufferPointer { values in
                    let x = values.baseAddress! + offset * d, own = summary(x, count: d)
                    if d >= 3, let found = grid.find(x, own) {
                        duplicate(first + offset, Int(rows[Int(found)]))
                        return true
                    }
                    guard rows.count < maxPictures else { return false }
                    grid.insert(x, own)
                    rows.append(Int32(first + offset))
                    return true
                }
                if !kept { return nil }
            }
            first += count
        }
        return rows
    }

    /// What `representatives(store:...)` holds for `pictures` distinct pictures of `d` floats: a
    /// picture's features, summary and row, and its link and list head in the grid (4 bytes each);
    /// besides them, a run of photos read at a time and the scratch of a search.
    public static func heldBytes(pictures: Int, valuesPerPhoto d: Int) -> Int {
        pictures * (d * 4 + MemoryLayout<Summary>.stride + 4 + 4 + 4) + (1 << 20)
    }
}
