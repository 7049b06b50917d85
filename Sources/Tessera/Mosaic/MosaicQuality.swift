// MosaicQuality.swift — how good a mosaic is, in figures a person can weigh: the colour
// difference against the target at cell resolution (CIEDE2000, Sharma, Wu and Dalal 2005), the
// structural similarity of the written picture to the target (SSIM, Wang et al. 2004), how often
// each picture was used, and the photos too small for the cell that were enlarged into it.
//
// Pure functions over what a PreparedMosaic holds (features, the assignment, the photo table),
// and two reads of pictures at a small common size through CellDecoder (the output and the
// target, both streamed at a DCT scale and area-averaged: never decoded whole).
import Glibc

/// A colour in CIELAB (D65 white), L 0...100.
public struct CIELab: Equatable, Sendable {
    public var l: Double, a: Double, b: Double
    public init(l: Double, a: Double, b: Double) { self.l = l; self.a = a; self.b = b }
}

/// How far the mosaic's colours are from the target's, over every sub-cell of every cell.
public struct ColourDifference: Equatable, Sendable {
    /// Mean CIEDE2000 over the sub-cells (1: just noticeable side by side).
    public var meanDeltaE2000: Double
    /// Sub-cells whose CIEDE2000 is over `MosaicQuality.farDeltaE`: visibly another colour.
    public var farShare: Double
    /// Sub-cells compared.
    public var subCells: Int
    /// The tint the placed colours were moved by first (0...1; 0: none).
    public var tint: Float
    public init(meanDeltaE2000: Double, farShare: Double, subCells: Int, tint: Float = 0) {
        self.meanDeltaE2000 = meanDeltaE2000
        self.farShare = farShare
        self.subCells = subCells
        self.tint = tint
    }
}

/// A picture of the library smaller than the cell in either dimension: drawn enlarged.
public struct TooSmallPhoto: Equatable, Sendable {
    public var path: String
    /// Upright size in pixels.
    public var width: Int, height: Int
    /// Cells it was placed in (each an enlargement).
    public var uses: Int
    /// How much it is enlarged to cover a cell (the larger of the two ratios).
    public var enlargement: Double
}

/// The library's pictures too small for the cell: all counted, the most used held.
public struct TooSmallPhotos: Equatable, Sendable {
    public var count = 0
    /// Cells drawn from them.
    public var cells = 0
    /// The first `MosaicQuality.heldTooSmall` by uses (most first, then by path).
    public var held: [TooSmallPhoto] = []
    public init() {}
}

/// How many times the pictures were used.
public struct UsesHistogram: Equatable, Sendable {
    /// Cells and pictures (the distinct pictures the mosaic was matched from).
    public var cells: Int
    public var pictures: Int
    /// Pictures placed at least once, and never.
    public var used: Int
    public var unused: Int
    /// The most used picture's index (into the photos of the assignment) and its cells; -1 when none.
    public var mostUsed: Int
    public var mostUses: Int
    /// Pictures by their uses in buckets of doubling width: 0, 1, 2-3, 4-7, 8-15, ...
    /// (`lower`...`upper` uses, `pictures` of them); empty buckets are left out.
    public var buckets: [(lower: Int, upper: Int, pictures: Int)]

    /// The most used picture's share of the cells (0...1).
    public var mostUsedShare: Double { cells > 0 ? Double(mostUses) / Double(cells) : 0 }

    public static func == (x: UsesHistogram, y: UsesHistogram) -> Bool {
        x.cells == y.cells && x.pictures == y.pictures && x.used == y.used && x.unused == y.unused && x.mostUsed == y.mostUsed
            && x.mostUses == y.mostUses && x.buckets.map { [$0.lower, $0.upper, $0.pictures] } == y.buckets.map { [$0.lower, $0.upper, $0.pictures] }
    }
}

/// Cells of the final assignment that break a placement rule (the matcher counts the cells its
/// greedy pass could not place within the rules; the local search may mend some since).
public struct UnmetConstraints: Equatable, Sendable {
    /// Cells with an identical photo within the minimum distance.
    public var tooClose = 0
    /// Cells past their photo's most uses (each photo's uses beyond the limit).
    public var overUsed = 0
    /// Pictures used fewer times than the minimum of uses, and the uses they lack.
    public var underUsed = 0
    public var missingUses = 0
    public init(tooClose: Int = 0, overUsed: Int = 0, underUsed: Int = 0, missingUses: Int = 0) {
        self.tooClose = tooClose
        self.overUsed = overUsed
        self.underUsed = underUsed
        self.missingUses = missingUses
    }
    public var any: Bool { tooClose > 0 || overUsed > 0 || underUsed > 0 }
}

/// The output's likeness to the target at a common size.
public struct StructuralSimilarity: Equatable, Sendable {
    /// Mean SSIM over the luma of both pictures (1: identical).
    public var ssim: Double
    /// The common size both were brought to.
    public var width: Int, height: Int
}

public enum MosaicQuality {
    /// A sub-cell this far (CIEDE2000) from the target reads as another colour.
    public static let farDeltaE = 10.0
    /// Too-small photos named in a report (all are counted).
    public static let heldTooSmall = 100
    /// The long side of the common size SSIM compares at.
    public static let ssimLongSide = 512
    /// SSIM's Gaussian window: 11 x 11 samples, sigma 1.5 (Wang et al.).
    public static let ssimWindow = 11
    public static let ssimSigma = 1.5

    // MARK: Colour

    /// An Oklab colour in CIELAB (D65): back to linear sRGB (unclamped), to XYZ, to L*a*b*.
    public static func cielab(_ color: OklabColor) -> CIELab {
        let l0 = Double(color.l), a0 = Double(color.a), b0 = Double(color.b)
        let l_ = l0 + 0.3963377774 * a0 + 0.2158037573 * b0
        let m_ = l0 - 0.1055613458 * a0 - 0.0638541728 * b0
        let s_ = l0 - 0.0894841775 * a0 - 1.2914855480 * b0
        let l = l_ * l_ * l_, m = m_ * m_ * m_, s = s_ * s_ * s_
        let r = 4.0767416621 * l - 3.3077115913 * m + 0.2309699292 * s
        let g = -1.2684380046 * l + 2.6097574011 * m - 0.3413193965 * s
        let b = -0.0041960863 * l - 0.7034186147 * m + 1.7076147010 * s
        let x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
        let y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
        let z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883
        func f(_ t: Double) -> Double {
            let delta = 6.0 / 29.0
            return t > delta * delta * delta ? cbrt(t) : t / (3 * delta * delta) + 4.0 / 29.0
        }
        let fx = f(x), fy = f(y), fz = f(z)
        return CIELab(l: 116 * fy - 16, a: 500 * (fx - fy), b: 200 * (fy - fz))
    }

    /// The CIEDE2000 colour difference of two CIELAB colours (kL = kC = kH = 1), exactly as
    /// Sharma, Wu and Dalal, "The CIEDE2000 color-difference formula: implementation notes,
    /// supplementary test data, and mathematical observations" (2005), equations 2-22.
    public static func deltaE2000(_ one: CIELab, _ two: CIELab) -> Double {
        let degrees = 180.0 / Double.pi
        let c1 = (one.a * one.a + one.b * one.b).squareRoot(), c2 = (two.a * two.a + two.b * two.b).squareRoot()
        let meanC = (c1 + c2) / 2
        let pow25to7 = 6_103_515_625.0
        let meanC7 = pow(meanC, 7)
        let g = 0.5 * (1 - (meanC7 / (meanC7 + pow25to7)).squareRoot())
        let a1 = (1 + g) * one.a, a2 = (1 + g) * two.a
        let c1p = (a1 * a1 + one.b * one.b).squareRoot(), c2p = (a2 * a2 + two.b * two.b).squareRoot()
        func hue(_ b: Double, _ a: Double) -> Double {
            if a == 0 && b == 0 { return 0 }
            let h = atan2(b, a) * degrees
            return h < 0 ? h + 360 : h
        }
        let h1 = hue(one.b, a1), h2 = hue(two.b, a2)
        let dL = two.l - one.l, dC = c2p - c1p
        var dh = 0.0
        if c1p * c2p != 0 {
            dh = h2 - h1
            if dh > 180 { dh -= 360 } else if dh < -180 { dh += 360 }
        }
        let dH = 2 * (c1p * c2p).squareRoot() * sin(dh / 2 / degrees)
        let meanL = (one.l + two.l) / 2, meanCp = (c1p + c2p) / 2
        var meanH = h1 + h2
        if c1p * c2p != 0 {
            if abs(h1 - h2) <= 180 { meanH = (h1 + h2) / 2 } else if h1 + h2 < 360 { meanH = (h1 + h2 + 360) / 2 } else { meanH = (h1 + h2 - 360) / 2 }
        }
        let t = 1 - 0.17 * cos((meanH - 30) / degrees) + 0.24 * cos(2 * meanH / degrees)
            + 0.32 * cos((3 * meanH + 6) / degrees) - 0.20 * cos((4 * meanH - 63) / degrees)
        let dTheta = 30 * exp(-pow((meanH - 275) / 25, 2))
        let meanCp7 = pow(meanCp, 7)
        let rC = 2 * (meanCp7 / (meanCp7 + pow25to7)).squareRoot()
        let l50 = (meanL - 50) * (meanL - 50)
        let sL = 1 + 0.015 * l50 / (20 + l50).squareRoot()
        let sC = 1 + 0.045 * meanCp
        let sH = 1 + 0.015 * meanCp * t
        let rT = -sin(2 * dTheta / degrees) * rC
        let l = dL / sL, c = dC / sC, h = dH / sH
        return (l * l + c * c + h * h + rT * c * h).squareRoot()
    }

    /// The cells in order of their photo (row order within one photo): each photo's features
    /// are then read once, and its uses are a run.
    public static func cellsByPhoto(_ assignment: [Int32]) -> [Int32] {
        var order = (0..<Int32(assignment.count)).map { $0 }
        order.sort { assignment[Int($0)] != assignment[Int($1)] ? assignment[Int($0)] < assignment[Int($1)] : $0 < $1 }
        return order
    }

    /// CIEDE2000 between each cell's target sub-cells (`target`: cells x k x k Oklab triples,
    /// row-major) and its photo's (`store`, by `assignment`), over every sub-cell. `order` is
    /// `cellsByPhoto(assignment)`. Cells without a photo (a negative index) are left out.
    /// `tint` (0...1): each photo sub-cell is first moved that far toward the target's in Oklab,
    /// as CellTint draws it (its rounding to whole sRGB steps and clamping aside).
    static func colourDifference(target: [Float], assignment: [Int32], order: [Int32], store: FeatureStore,
                                 subCells k: Int, tint: Float = 0) throws(TesseraError) -> ColourDifference {
        let d = k * k * 3
        precondition(target.count == assignment.count * d && order.count == assignment.count)
        var photo = [Float](repeating: 0, count: d)
        var current: Int32 = -1
        var sum = 0.0, far = 0, count = 0
        for cell in order {
            let picture = assignment[Int(cell)]
            guard picture >= 0, Int(picture) < store.count else { continue }
            if picture != current {
                try photo.withUnsafeMutableBufferPointer { values in
                    Result { () throws(TesseraError) in try store.read(Int(picture), 1, into: values.baseAddress!) }
                }.get()
                current = picture
            }
            let base = Int(cell) * d
            for s in 0..<(k * k) {
                let i = s * 3
                let goal = OklabColor(l: target[base + i], a: target[base + i + 1], b: target[base + i + 2])
                let wanted = cielab(goal)
                let placed = cielab(OklabColor(l: photo[i] + tint * (goal.l - photo[i]), a: photo[i + 1] + tint * (goal.a - photo[i + 1]),
                                               b: photo[i + 2] + tint * (goal.b - photo[i + 2])))
                let difference = deltaE2000(wanted, placed)
                sum += difference
                if difference > farDeltaE { far += 1 }
                count += 1
            }
        }
        return ColourDifference(meanDeltaE2000: count > 0 ? sum / Double(count) : 0,
                                farShare: count > 0 ? Double(far) / Double(count) : 0, subCells: count, tint: tint)
    }

    // MARK: Rules

    /// The cells of `assignment` (`columns` wide) that break the rules: an identical photo
    /// within `minDistance` cells (Chebyshev), uses of a photo past `maxUses`. `order` is
    /// `cellsByPhoto(assignment)`: each photo's cells are a run in row order, so only pairs
    /// of one photo within `minDistance` rows are compared.
    /// `pictures`: how many the mosaic was matched from (those never placed are short of
    /// `minUses` too).
    public static func unmetConstraints(assignment: [Int32], columns: Int, order: [Int32], minDistance: Int,
                                        maxUses: Int?, minUses: Int = 0, pictures: Int = 0) -> UnmetConstraints {
        var result = UnmetConstraints()
        var start = 0
        var near: [Bool] = []
        var placed = 0
        while start < order.count {
            let photo = assignment[Int(order[start])]
            var end = start + 1
            while end < order.count && assignment[Int(order[end])] == photo { end += 1 }
            if photo >= 0 {
                placed += 1
                if end - start < minUses {
                    result.underUsed += 1
                    result.missingUses += minUses - (end - start)
                }
                if let maxUses, end - start > maxUses { result.overUsed += end - start - maxUses }
                if minDistance > 0 {
                    near = [Bool](repeating: false, count: end - start)
                    for i in start..<end {
                        let a = Int(order[i])
                        for j in (i + 1)..<end {
                            let b = Int(order[j])
                            if b / columns - a / columns > minDistance { break }
                            if abs(b % columns - a % columns) <= minDistance { near[i - start] = true; near[j - start] = true }
                        }
                    }
                    result.tooClose += near.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
            }
            start = end
        }
        if minUses > 0 && pictures > placed {
            result.underUsed += pictures - placed
            result.missingUses += (pictures - placed) * minUses
        }
        return result
    }

    /// An adaptive mosaic's cells with an identical photo nearer than its minimum distance
    /// (`neighbours`: each cell's cells within it).
    public static func tooClose(assignment: [Int32], neighbours: CellNeighbours) -> Int {
        precondition(neighbours.cellCount == assignment.count)
        var count = 0
        for cell in 0..<assignment.count where assignment[cell] >= 0 {
            if neighbours.of(cell).contains(where: { assignment[Int($0)] == assignment[cell] }) { count += 1 }
        }
        return count
    }

    // MARK: Uses

    /// How many times each of `pictures` pictures is used by `assignment` (indices into them;
    /// a negative index is an empty cell).
    public static func usesHistogram(assignment: [Int32], pictures: Int) -> UsesHistogram {
        var uses = [Int32](repeating: 0, count: max(pictures, 0))
        for photo in assignment where photo >= 0 && Int(photo) < uses.count { uses[Int(photo)] += 1 }
        var mostUsed = -1, mostUses = 0, used = 0
        var counts: [Int] = []
        for (picture, count) in uses.enumerated() {
            if count > mostUses { mostUsed = picture; mostUses = Int(count) }
            if count > 0 { used += 1 }
            // Bucket 0 holds 0, bucket b >= 1 holds 2^(b-1) ... 2^b - 1.
            let bucket = count == 0 ? 0 : Int32.bitWidth - count.leadingZeroBitCount
            if bucket >= counts.count { counts += [Int](repeating: 0, count: bucket + 1 - counts.count) }
            counts[bucket] += 1
        }
        var buckets: [(lower: Int, upper: Int, pictures: Int)] = []
        for (bucket, count) in counts.enumerated() where count > 0 {
            buckets.append(bucket == 0 ? (0, 0, count) : (1 << (bucket - 1), (1 << bucket) - 1, count))
        }
        return UsesHistogram(cells: assignment.count, pictures: max(pictures, 0), used: used, unused: max(pictures, 0) - used,
                             mostUsed: mostUsed, mostUses: mostUses, buckets: buckets)
    }

    // MARK: Too small

    /// The photos of `photos` whose upright size is smaller than the cell in either dimension,
    /// with their uses: `order` is `cellsByPhoto(assignment)`, `assignment` indexes `photos`.
    public static func tooSmallPhotos(_ photos: PhotoTable, cellWidth: Int, cellHeight: Int, assignment: [Int32],
                                      order: [Int32]) -> TooSmallPhotos {
        var result = TooSmallPhotos()
        var position = 0
        for picture in 0..<photos.count {
            // The photo's uses are the run of `order` on it (both in photo order).
            var uses = 0
            while position < order.count && assignment[Int(order[position])] < Int32(picture) { position += 1 }
            while position < order.count && assignment[Int(order[position])] == Int32(picture) { uses += 1; position += 1 }
            let photo = photos[picture]
            let header = photo.header
            let turned = OrientationTransform(exifOrientation: header.exifOrientation).swapsAxes
            let width = turned ? header.height : header.width, height = turned ? header.width : header.height
            guard width > 0, height > 0, width < cellWidth || height < cellHeight else { continue }
            result.count += 1
            result.cells += uses
            let enlargement = max(Double(cellWidth) / Double(width), Double(cellHeight) / Double(height))
            result.held.append(TooSmallPhoto(path: photo.path, width: width, height: height, uses: uses, enlargement: enlargement))
            // Held sorted, trimmed now and then: a library of thumbnails stays a few KB here.
            if result.held.count >= heldTooSmall * 2 { trimTooSmall(&result.held) }
        }
        trimTooSmall(&result.held)
        return result
    }

    private static func trimTooSmall(_ held: inout [TooSmallPhoto]) {
        held.sort { $0.uses != $1.uses ? $0.uses > $1.uses : $0.path < $1.path }
        if held.count > heldTooSmall { held.removeLast(held.count - heldTooSmall) }
    }

    // MARK: Structure

    /// The common size a `width` x `height` output is compared at: its long side
    /// `ssimLongSide` (or its own size when smaller), the shape kept.
    public static func commonSize(width: Int, height: Int, longSide: Int = ssimLongSide) -> (width: Int, height: Int) {
        let long = max(width, height)
        guard long > longSide else { return (max(1, width), max(1, height)) }
        return (max(1, Int((Double(width) * Double(longSide) / Double(long)).rounded())),
                max(1, Int((Double(height) * Double(longSide) / Double(long)).rounded())))
    }

    /// The luma (Rec. 601, 0...255) of the picture at `path`, upright, centre-cropped to
    /// `width` x `height` and area-averaged to it: a JPEG streams through libjpeg at the
    /// smallest DCT scale M/8 that covers the size twice over (CellDecoder), so a gigapixel output costs
    /// a few of its scaled rows, never its whole picture.
    public static func luma(path: String, width: Int, height: Int, budget: DecodeBudget) throws(TesseraError) -> [Float] {
        let decoder = CellDecoder(cellWidth: width, cellHeight: height, budget: budget)
        var pixels = [UInt8](repeating: 0, count: decoder.cellBytes)
        try pixels.withUnsafeMutableBytes { bytes in
            Result { () throws(TesseraError) in _ = try decoder.decode(path: path, into: bytes) }
        }.get()
        var luma = [Float](repeating: 0, count: width * height)
        for i in 0..<(width * height) {
            luma[i] = 0.299 * Float(pixels[i * 3]) + 0.587 * Float(pixels[i * 3 + 1]) + 0.114 * Float(pixels[i * 3 + 2])
        }
        return luma
    }

    /// SSIM of the picture at `output` (a mosaic `width` x `height` px) against `target` at the
    /// common size (`commonSize`), on luma.
    public static func structuralSimilarity(output: String, width: Int, height: Int, target: String,
                                            budget: DecodeBudget) throws(TesseraError) -> StructuralSimilarity {
        let size = commonSize(width: width, height: height)
        let x = try luma(path: output, width: size.width, height: size.height, budget: budget)
        let y = try luma(path: target, width: size.width, height: size.height, budget: budget)
        return StructuralSimilarity(ssim: ssim(x, y, width: size.width, height: size.height), width: size.width, height: size.height)
    }

    /// Mean SSIM (Wang, Bovik, Sheikh and Simoncelli 2004) of two `width` x `height` luma
    /// images (0...255): an 11 x 11 Gaussian window of sigma 1.5 at every position where it
    /// fits whole, C1 = (0.01 x 255)^2, C2 = (0.03 x 255)^2. A picture smaller than the window
    /// is compared with a window of its own size.
    public static func ssim(_ x: [Float], _ y: [Float], width: Int, height: Int) -> Double {
        precondition(x.count == width * height && y.count == width * height && width > 0 && height > 0)
        let side = min(ssimWindow, width, height)
        var weights = (0..<side).map { i -> Double in
            let t = Double(i) - Double(side - 1) / 2
            return exp(-t * t / (2 * ssimSigma * ssimSigma))
        }
        let total = weights.reduce(0, +)
        weights = weights.map { $0 / total }
        // Separable filtering of x, y, x^2, y^2, xy: rows first, then columns, "valid" only.
        let outWidth = width - side + 1, outHeight = height - side + 1
        func filtered(_ value: (Int) -> Double) -> [Double] {
            var rows = [Double](repeating: 0, count: outWidth * height)
            for row in 0..<height {
                for column in 0..<outWidth {
                    var sum = 0.0
                    for i in 0..<side { sum += weights[i] * value(row * width + column + i) }
                    rows[row * outWidth + column] = sum
                }
            }
            var out = [Double](repeating: 0, count: outWidth * outHeight)
            for row in 0..<outHeight {
                for column in 0..<outWidth {
                    var sum = 0.0
                    for i in 0..<side { sum += weights[i] * rows[(row + i) * outWidth + column] }
                    out[row * outWidth + column] = sum
                }
            }
            return out
        }
        let mx = filtered { Double(x[$0]) }, my = filtered { Double(y[$0]) }
        let mxx = filtered { Double(x[$0]) * Double(x[$0]) }, myy = filtered { Double(y[$0]) * Double(y[$0]) }
        let mxy = filtered { Double(x[$0]) * Double(y[$0]) }
        let c1 = (0.01 * 255) * (0.01 * 255), c2 = (0.03 * 255) * (0.03 * 255)
        var sum = 0.0
        for i in 0..<mx.count {
            let vx = mxx[i] - mx[i] * mx[i], vy = myy[i] - my[i] * my[i], cxy = mxy[i] - mx[i] * my[i]
            sum += ((2 * mx[i] * my[i] + c1) * (2 * cxy + c2)) / ((mx[i] * mx[i] + my[i] * my[i] + c1) * (vx + vy + c2))
        }
        return sum / Double(mx.count)
    }
}
