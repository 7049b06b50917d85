// DuplicateGrid.swift — where DuplicatePictures looks for a photo's picture: the representatives
// kept so far, in the cells of a grid over six numbers of a photo, so that a photo is compared only
// with the representatives in the few cells where `same` could accept one.
//
// The mean colour alone (the first grid) does not spread photos: most photos' means crowd into a
// few cells, real libraries' as well as the test libraries', and a library of 100,000 distinct
// photos compared each photo with tens of thousands (150 s). A photo's coordinates here are the
// log of its L contrast and the L of up to five of its sub-cells (the corners and the middle),
// which differ from photo to photo far more than the mean does, and `same` bounds each of them:
//   - the contrast ratio test bounds the difference of log max(c, contrastFloor) by log 1.25;
//   - the cap on each sub-cell's difference bounds a sub-cell's L difference by tolerance +
//     cellDifference x weight, and the pair's weight (from the smaller contrast) is at most the
//     photo's own, so a flat photo looks in a narrower range.
//
// Why every representative y that `same(x, y)` accepts is in a cell searched for photo x. Per
// coordinate, with v the coordinate's float for x, u for y, and r the bound `radii` gives for x:
//   1. |v - u| <= r (1 + 2^-23) + 4e-5. A sub-cell's L: `same` found fl(|x_i - y_i|) <= cellBound
//      and cellBound <= r (min(1, min(cx, cy) / richContrast) <= min(1, cx / richContrast), and
//      float quotients, products, sums and min are monotonic); a correctly rounded difference at
//      most r is a real difference at most r (1 + 2^-23). The contrast: `same` found fl(c'x / c'y)
//      within [fl(1 / 1.25), 1.25] (c' = max(c, contrastFloor) >= 0.02), so the real quotient's log
//      is within log 1.25 + 2e-7 of 0, and logf is within a few units in the last place of a log
//      below 89 in size (under 4e-5; glibc's is within one). `same` holds only for finite numbers
//      (a NaN or infinite difference fails its tests), and clamping both coordinates to [-8, 8]
//      never moves them further apart.
//   2. The range searched is floor((v - R) / width) ... floor((v + R) / width), R = 1.01 r + 1e-5.
//      R - |v - u| >= 0.0099 r + 1e-5 - 4e-5 - 2^-23 r: at least 1e-5 for a sub-cell (any r >= 0)
//      and 2e-3 for the contrast (r = log 1.25), while fl(v - R) and fl(v + R) are within
//      2^-24 (8 + R) of v - R and v + R, which is less. So fl(v - R) <= u <= fl(v + R); float
//      division by a positive width, clamping to +-1e6 (which keeps the quotient in Int32) and
//      rounding down are monotonic, so y's cell floor(u / width) is within the range. (A negative
//      r, from a negative tolerance, accepts nothing, so any range will do.)
//   3. A width that is not a positive finite number puts every photo in cell 0 of the coordinate.
// So the search skips only representatives `same` rejects, and the smallest index it accepts is
// exactly what comparing the photo with every earlier representative finds.
//
// The cells are hashed into one table of list heads, a slot a representative (sized once), and
// each representative links to the previous one in its slot: 8 bytes a representative beside its
// features and summary. Cells that share a slot share a list, which costs comparisons, never a
// representative. The widths are 2.1 times the largest r, so a range is one cell or two: a rich
// photo searches 2^6 cells, a flat one mostly fewer.
import Glibc

extension DuplicatePictures {
    struct Grid {
        let valuesPerPhoto: Int
        let tolerance: Float
        /// The sub-cells whose L is a coordinate: the corners and the middle.
        let keyCells: [Int]
        /// The cells' widths: of the log of the contrast, then of a sub-cell's L.
        let widths: [Float]
        /// The representatives' features, one after another, and their summaries.
        private(set) var features: [Float] = []
        private(set) var summaries: [Summary] = []
        /// Each representative's predecessor in its slot's list (-1: the list's end).
        private var next: [Int32] = []
        /// Each slot's newest representative (-1: none).
        private var heads: [Int32]

        /// A grid for up to `capacity` representatives of `d` floats (room reserved once: pages
        /// not written are not resident, and growing by doubling would copy).
        init(valuesPerPhoto d: Int, tolerance: Float, capacity: Int) {
            valuesPerPhoto = d
            self.tolerance = tolerance
            keyCells = Grid.keyCells(d / 3)
            let light = (tolerance + cellDifference) * 2.1, contrast = logf(contrastRatio) * 2.1
            widths = [contrast] + keyCells.map { _ in light }
            heads = [Int32](repeating: -1, count: max(1, capacity))
            features.reserveCapacity(max(1, capacity) * d)
            summaries.reserveCapacity(max(1, capacity))
            next.reserveCapacity(max(1, capacity))
        }

        /// The corner sub-cells and the middle one of a k x k photo (all its sub-cells when they
        /// are fewer); for a count that is not a square, the first, middle and last.
        static func keyCells(_ cells: Int) -> [Int] {
            guard cells > 0 else { return [] }
            let k = Int(Double(cells).squareRoot().rounded())
            let picks = k * k == cells ? [0, k - 1, (k / 2) * k + k / 2, k * (k - 1), k * k - 1] : [0, cells / 2, cells - 1]
            var unique: [Int] = []
            for cell in picks where !unique.contains(cell) { unique.append(cell) }
            return unique
        }

        /// The photo's coordinates: the log of its floored L contrast, then its key sub-cells' L,
        /// each clamped to [-8, 8] (a NaN is 0: such a photo is never `same` as another).
        func coordinates(_ x: UnsafePointer<Float>, _ s: Summary) -> [Float] {
            func clamped(_ value: Float) -> Float { value.isNaN ? 0 : min(max(value, -8), 8) }
            return [clamped(logf(max(s.contrast, contrastFloor)))] + keyCells.map { clamped(x[$0 * 3]) }
        }

        /// The bounds `same` puts on each coordinate's difference for photo `s` and any other.
        func radii(_ s: Summary) -> [Float] {
            let weight = min(1, s.contrast / richContrast)
            let light = tolerance + cellDifference * weight
            return [logf(contrastRatio)] + keyCells.map { _ in light }
        }

        /// The cell of `value` along a coordinate of cells `width` wide.
        static func cell(_ value: Float, width: Float) -> Int32 {
            guard width.isFinite, width > 0 else { return 0 }
            let scaled = value / width
            return Int32(min(max(scaled, -1e6), 1e6).rounded(.down))
        }

        /// The photo's cell, a coordinate after another.
        func cell(_ x: UnsafePointer<Float>, _ s: Summary) -> [Int32] {
            zip(coordinates(x, s), widths).map { Grid.cell($0, width: $1) }
        }

        /// The cells that may hold a representative `same` accepts for the photo: a range a
        /// coordinate.
        func ranges(_ x: UnsafePointer<Float>, _ s: Summary) -> [ClosedRange<Int32>] {
            zip(zip(coordinates(x, s), radii(s)), widths).map { coordinate, width in
                let (value, radius) = coordinate, reach = radius * 1.01 + 1e-5
                let low = Grid.cell(value - reach, width: width), high = Grid.cell(value + reach, width: width)
                return low...max(low, high)
            }
        }

        /// The table slot of a cell.
        func slot(_ cell: [Int32]) -> Int {
            var hash: UInt32 = 0x9E37_79B9
            for coordinate in cell {
                hash = (hash ^ UInt32(bitPattern: coordinate)) &* 0x0100_0193
                hash ^= hash >> 15
            }
            hash = (hash ^ (hash >> 16)) &* 0x45D9_F3B5
            hash ^= hash >> 16
            return Int((UInt64(hash) &* UInt64(heads.count)) >> 32)
        }

        /// The first representative (by position) that `same` accepts for the photo `x` with
        /// summary `own`, if any.
        func find(_ x: UnsafePointer<Float>, _ own: Summary) -> Int32? {
            let ranges = ranges(x, own)
            var cell = ranges.map(\.lowerBound)
            var found: Int32?
            features.withUnsafeBufferPointer { held in
                summaries.withUnsafeBufferPointer { summaries in
                    next.withUnsafeBufferPointer { next in
                        while true {
                            var candidate = heads[slot(cell)]
                            while candidate >= 0 {
                                if found == nil || candidate < found!,
                                   same(x, own, held.baseAddress! + Int(candidate) * valuesPerPhoto, summaries[Int(candidate)],
                                        count: valuesPerPhoto, tolerance: tolerance) { found = candidate }
                                candidate = next[Int(candidate)]
                            }
                            guard Grid.advance(&cell, in: ranges) else { break }
                        }
                    }
                }
            }
            return found
        }

        /// The next cell in the ranges' product (the first coordinate fastest); false after the last.
        static func advance(_ cell: inout [Int32], in ranges: [ClosedRange<Int32>]) -> Bool {
            for i in cell.indices {
                if cell[i] < ranges[i].upperBound {
                    cell[i] += 1
                    return true
                }
                cell[i] = ranges[i].lowerBound
            }
            return false
        }

        /// Keeps the photo `x` (summary `own`) as the next representative.
        mutating func insert(_ x: UnsafePointer<Float>, _ own: Summary) {
            let slot = slot(cell(x, own)), index = Int32(summaries.count)
            next.append(heads[slot])
            heads[slot] = index
            features.append(contentsOf: UnsafeBufferPointer(start: x, count: valuesPerPhoto))
            summaries.append(own)
        }
    }
}
