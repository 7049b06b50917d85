// AdaptiveCells.swift — an adaptive mosaic's cells: the fixed grid's cells (the largest) split
// in four where the target has detail, down to the smallest, by a quadtree on the target.
//
// The target is read once at `k` samples a side of the smallest cell (the finest sub-cells). A
// cell of side `s` smallest cells has k x k sub-cells of s x s samples each, their colours the
// mean in linear light (as a photo's sub-cells are: MosaicAnalysis.subCellMeans). A cell's
// detail is what its sub-cells cannot show: the squared Oklab distance of every sample to its
// sub-cell's colour, summed (its local contrast, weighted by area). The cell with the most detail
// is split first (ties: larger cells, then spread evenly over the picture), until the mosaic has the cells asked
// for. (Not the gain of one split: detail finer than a cell's quarters' sub-cells gains nothing
// from the first split, yet is only shown by splitting.) Every cell keeps the largest cell's shape, so a
// photo's features (its centre crop to that shape) serve every size.
//
// Copies of one photo are kept `minDistance` pixels apart: the gap between their rectangles
// (the larger of the horizontal and vertical gaps; touching cells have a gap of 0). Each cell's
// neighbours within that gap are listed once (CellNeighbours), for the matcher's rules.

/// The cells of an adaptive mosaic: squares (in the largest cell's shape) of 1, 2, 4 ...
/// `2^levels` smallest cells a side, covering `columns` x `rows` largest cells.
public struct AdaptiveCells: Equatable, Sendable {
    /// One cell, in units of the smallest cell: its top-left corner and its side.
    public struct Cell: Equatable, Sendable {
        public var x: Int32, y: Int32, side: Int32
    }
    /// The grid of the largest cells, and their size in pixels.
    public let columns: Int, rows: Int
    public let largestWidth: Int, largestHeight: Int
    /// Halvings from the largest cell to the smallest.
    public let levels: Int
    /// Sorted by top edge, then left edge (a framed layout's order).
    public let cells: [Cell]

    /// The smallest cell's size in pixels.
    public var unitWidth: Int { largestWidth >> levels }
    public var unitHeight: Int { largestHeight >> levels }
    public var width: Int { columns * largestWidth }
    public var height: Int { rows * largestHeight }
    /// The canvas in smallest cells.
    public var unitColumns: Int { columns << levels }
    public var unitRows: Int { rows << levels }

    public init(columns: Int, rows: Int, largestWidth: Int, largestHeight: Int, levels: Int, cells: [Cell]) {
        precondition(levels >= 0 && largestWidth % (1 << levels) == 0 && largestHeight % (1 << levels) == 0)
        self.columns = columns
        self.rows = rows
        self.largestWidth = largestWidth
        self.largestHeight = largestHeight
        self.levels = levels
        self.cells = cells.sorted { ($0.y, $0.x) < ($1.y, $1.x) }
    }

    /// Cell `index`'s rectangle in pixels, holding `photo`.
    public func frame(_ index: Int, photo: Int32 = -1) -> CellFrame {
        let cell = cells[index]
        return CellFrame(x: cell.x * Int32(unitWidth), y: cell.y * Int32(unitHeight), width: cell.side * Int32(unitWidth),
                         height: cell.side * Int32(unitHeight), photo: photo)
    }

    /// The layout of these cells holding `assignment` (photo per cell, in `cells`' order).
    public func layout(assignment: [Int32]) -> CellLayout {
        precondition(assignment.count == cells.count)
        return CellLayout(width: width, height: height, cells: (0..<cells.count).map { frame($0, photo: assignment[$0]) })
    }

    /// How many cells there are of each size: (width, height, cells), largest first.
    public var sizeHistogram: [(width: Int, height: Int, cells: Int)] {
        var counts = [Int](repeating: 0, count: levels + 1)
        for cell in cells { counts[Int(cell.side).trailingZeroBitCount] += 1 }
        return (0...levels).reversed().map { level in ((unitWidth << level), (unitHeight << level), counts[level]) }
    }

    public static func == (a: AdaptiveCells, b: AdaptiveCells) -> Bool {
        a.columns == b.columns && a.rows == b.rows && a.largestWidth == b.largestWidth && a.largestHeight == b.largestHeight
            && a.levels == b.levels && a.cells == b.cells
    }

    // MARK: Sizes

    /// The halvings that take a `width` x `height` cell to one `smallestWidth` px wide, or nil
    /// when none does: each halving must split both sides evenly, and the smallest cell keeps
    /// at least `smallestSide` px a side.
    public static func levels(largestWidth width: Int, largestHeight height: Int, smallestWidth: Int, smallestSide: Int = 4) -> Int? {
        allowedSmallest(largestWidth: width, largestHeight: height, smallestSide: smallestSide)
            .firstIndex(of: smallestWidth).map { $0 + 1 }
    }

    /// The widths the smallest cell can have (one halving, two, ...) for a `width` x `height`
    /// largest cell: halvings that split both sides evenly and keep `smallestSide` px a side.
    public static func allowedSmallest(largestWidth width: Int, largestHeight height: Int, smallestSide: Int = 4) -> [Int] {
        var result: [Int] = []
        var level = 1
        while level < 16 && width % (1 << level) == 0 && height % (1 << level) == 0
                && min(width >> level, height >> level) >= smallestSide {
            result.append(width >> level)
            level += 1
        }
        return result
    }

    /// The cells an adaptive mosaic of `roots` largest cells has by default with `levels`
    /// halvings: as many as a fixed mosaic whose cells' side is the geometric mean of the
    /// largest's and the smallest's (roots x 2^levels).
    public static func defaultCount(roots: Int, levels: Int) -> Int { roots << levels }

    /// The count actually made: `wanted` rounded down to one that splits in fours reach (roots
    /// plus a multiple of 3), within roots ... roots x 4^levels.
    public static func reachableCount(_ wanted: Int, roots: Int, levels: Int) -> Int {
        let most = roots << (2 * levels)
        let clamped = min(max(wanted, roots), most)
        return roots + (clamped - roots) / 3 * 3
    }

    /// Bytes `split` holds beside its result: the target's samples, and a heap entry a cell.
    public static func splitBytes(columns: Int, rows: Int, levels: Int, subCells k: Int, cells: Int) -> Int {
        let samples = (columns << levels) * k * (rows << levels) * k
        return samples * 3 + cells * (MemoryLayout<Cell>.stride * 2 + 16) + k * k * 3 * 4 * 10
    }

    // MARK: The quadtree

    /// The cells for a target whose samples are `pixels` (RGB, `(columns << levels) * k` x
    /// `(rows << levels) * k`, row-major: the target decoded at k samples a side of the smallest
    /// cell), splitting the best gains first until there are `count` cells (reachableCount).
    /// Returns the cells and each one's k x k Oklab features, in the cells' order.
    /// `photos`: features of photos to match (k*k*3 each, one after another; a sample of the
    /// library): a split is then worth what it lowers the best match's cost over the cell's
    /// area (its cost times its area, less its quarters'); empty: the cell's detail.
    /// `cancellation`: once raised, the split stops at its next cell and returns what it has (the
    /// caller, seeing it raised, throws): a split into millions of cells takes tens of seconds,
    /// and Ctrl-C waited for all of it.
    public static func split(pixels: [UInt8], columns: Int, rows: Int, largestWidth: Int, largestHeight: Int, levels: Int,
                             subCells k: Int, count wanted: Int, photos: [Float] = [],
                             cancellation: RenderCancellation? = nil) -> (cells: AdaptiveCells, features: [Float]) {
        let sampler = Sampler(pixels: pixels, width: (columns << levels) * k, k: k, photos: photos)
        precondition(pixels.count == sampler.width * (rows << levels) * k * 3)
        let roots = columns * rows
        let count = reachableCount(wanted, roots: roots, levels: levels)
        let top = Int32(1 << levels)
        var leaves: [Cell] = []
        leaves.reserveCapacity(count)
        var heap = SplitHeap()
        for row in 0..<rows {
            // A root's gain reads every sample under it: a row of roots is a whole row of the target.
            if cancellation?.isCancelled == true { break }
            for column in 0..<columns {
                let cell = Cell(x: Int32(column) * top, y: Int32(row) * top, side: top)
                if levels > 0 { heap.push(cell, gain: sampler.splitGain(cell)) } else { leaves.append(cell) }
            }
        }
        var made = roots
        // Checked at every split: a large cell's split reads every sample under it.
        while made < count, cancellation?.isCancelled != true, let (cell, _) = heap.pop() {
            made += 3
            let half = cell.side / 2
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] as [(Int32, Int32)] {
                let child = Cell(x: cell.x + dx * half, y: cell.y + dy * half, side: half)
                if half > 1 { heap.push(child, gain: sampler.splitGain(child)) } else { leaves.append(child) }
            }
        }
        leaves += heap.cells
        let cells = AdaptiveCells(columns: columns, rows: rows, largestWidth: largestWidth, largestHeight: largestHeight, levels: levels,
                                  cells: leaves)
        var features = [Float]()
        features.reserveCapacity(cells.cells.count * k * k * 3)
        for (index, cell) in cells.cells.enumerated() {
            if index & 1023 == 0 && cancellation?.isCancelled == true { break }
            features += sampler.features(cell)
        }
        return (cells, features)
    }

    /// The target's samples and the sub-cell colours of any cell.
    struct Sampler {
        let pixels: [UInt8]
        /// Samples a row.
        let width: Int
        let k: Int
        let photos: [Float]

        /// The least squared distance from `features` to a photo's.
        func bestCost(_ features: [Float]) -> Float {
            let d = k * k * 3
            var best = Float.infinity
            photos.withUnsafeBufferPointer { p in
                features.withUnsafeBufferPointer { f in
                    var start = 0
                    while start + d <= p.count {
                        best = min(best, MosaicMatcher.squaredDistance(f.baseAddress!, p.baseAddress! + start, count: d))
                        start += d
                    }
                }
            }
            return best
        }

        /// What splitting `cell` lowers the best match's cost, each cost times its cell's area.
        func matchGain(_ cell: Cell) -> Float {
            let half = cell.side / 2
            var children: Float = 0
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] as [(Int32, Int32)] {
                children += bestCost(features(Cell(x: cell.x + dx * half, y: cell.y + dy * half, side: half)))
            }
            let area = Float(Int(cell.side) * Int(cell.side))
            return area * bestCost(features(cell)) - area / 4 * children
        }

        /// k x k Oklab colours of `cell`: each sub-cell the linear-light mean of its side x side samples.
        func features(_ cell: Cell) -> [Float] {
            let side = Int(cell.side)
            var result = [Float](repeating: 0, count: k * k * 3)
            pixels.withUnsafeBufferPointer { p in
                for sy in 0..<k {
                    for sx in 0..<k {
                        let x0 = Int(cell.x) * k + sx * side, y0 = Int(cell.y) * k + sy * side
                        var r: Float = 0, g: Float = 0, b: Float = 0
                        for y in y0..<(y0 + side) {
                            var i = (y * width + x0) * 3
                            for _ in 0..<side {
                                r += Oklab.linearLight(p[i])
                                g += Oklab.linearLight(p[i + 1])
                                b += Oklab.linearLight(p[i + 2])
                                i += 3
                            }
                        }
                        let n = Float(side * side)
                        let lab = Oklab.fromLinear(r / n, g / n, b / n)
                        let f = (sy * k + sx) * 3
                        result[f] = lab.l
                        result[f + 1] = lab.a
                        result[f + 2] = lab.b
                    }
                }
            }
            return result
        }

        /// What splitting `cell` is worth: the detail its own sub-cells cannot show, the
        /// squared Oklab distance of every sample to its sub-cell's colour, summed (an area
        /// measure: a large cell of some detail can outweigh a small one of more).
        ///
        /// Rounded, per sample, to a millionth (a step of one sRGB level is about 1e-5 a sample):
        /// the rounding error of summing a flat cell is not detail. Left unrounded, it made equal
        /// cells of a one-colour target unequal, and the split went down to the smallest cells in
        /// clumps wherever it happened to be largest.
        func splitGain(_ cell: Cell) -> Float {
            let gain = (photos.isEmpty ? 0 : matchGain(cell)) + detail(cell)
            let samples = Float(Int(cell.side) * Int(cell.side) * k * k)
            let quantum: Float = 1e-6
            return (gain / samples / quantum).rounded() * quantum * samples
        }

        func detail(_ cell: Cell) -> Float {
            let own = features(cell)
            let side = Int(cell.side)
            var detail: Float = 0
            pixels.withUnsafeBufferPointer { p in
                for sy in 0..<k {
                    for sx in 0..<k {
                        let f = (sy * k + sx) * 3
                        let x0 = Int(cell.x) * k + sx * side, y0 = Int(cell.y) * k + sy * side
                        for y in y0..<(y0 + side) {
                            var i = (y * width + x0) * 3
                            for _ in 0..<side {
                                let lab = Oklab.fromSRGB(p[i], p[i + 1], p[i + 2])
                                let dl = lab.l - own[f], da = lab.a - own[f + 1], db = lab.b - own[f + 2]
                                detail += dl * dl + da * da + db * db
                                i += 3
                            }
                        }
                    }
                }
            }
            return detail
        }
    }

    /// A max-heap of cells by split gain; equal gains: the larger cell, then `spread`'s order.
    struct SplitHeap {
        private var entries: [(gain: Float, cell: Cell)] = []

        var cells: [Cell] { entries.map(\.cell) }

        private static func before(_ a: (gain: Float, cell: Cell), _ b: (gain: Float, cell: Cell)) -> Bool {
            if a.gain != b.gain { return a.gain > b.gain }
            if a.cell.side != b.cell.side { return a.cell.side > b.cell.side }
            let (spreadA, spreadB) = (spread(a.cell), spread(b.cell))
            if spreadA != spreadB { return spreadA < spreadB }
            return (a.cell.y, a.cell.x) < (b.cell.y, b.cell.x)
        }

        /// Equal cells of one size are split in this order: their place (in cells of their size)
        /// interleaved bit by bit and read backwards, so that any number of them taken first are
        /// spread evenly over the picture (a flat target's last, partial level of splits was a
        /// band across the top: all 8,000 of its small cells in the top fifth).
        static func spread(_ cell: Cell) -> UInt64 {
            let side = UInt64(max(1, cell.side))
            let column = UInt64(max(0, cell.x)) / side, row = UInt64(max(0, cell.y)) / side
            var backwards: UInt64 = 0
            for bit in 0..<32 {
                backwards |= ((column >> UInt64(bit)) & 1) << UInt64(63 - 2 * bit)
                backwards |= ((row >> UInt64(bit)) & 1) << UInt64(62 - 2 * bit)
            }
            return backwards
        }

        mutating func push(_ cell: Cell, gain: Float) {
            entries.append((gain.isNaN ? 0 : gain, cell))
            var i = entries.count - 1
            while i > 0 {
                let parent = (i - 1) / 2
                guard Self.before(entries[i], entries[parent]) else { break }
                entries.swapAt(i, parent)
                i = parent
            }
        }

        mutating func pop() -> (Cell, Float)? {
            guard !entries.isEmpty else { return nil }
            let top = entries[0]
            let last = entries.removeLast()
            if !entries.isEmpty {
                entries[0] = last
                var i = 0
                while true {
                    let l = 2 * i + 1, r = l + 1
                    var best = i
                    if l < entries.count && Self.before(entries[l], entries[best]) { best = l }
                    if r < entries.count && Self.before(entries[r], entries[best]) { best = r }
                    if best == i { break }
                    entries.swapAt(i, best)
                    i = best
                }
            }
            return (top.cell, top.gain)
        }
    }
}

/// For each cell of an adaptive mosaic, the cells whose rectangles are less than `minDistance`
/// pixels from its own (the gap: the larger of the horizontal and vertical gaps, 0 when they
/// touch), in cell order: where a copy of its photo may not stand. Compressed rows: 4 bytes a
/// neighbour, 4 a cell.
public struct CellNeighbours: Sendable {
    public let minDistance: Int
    let offsets: [Int32]
    let neighbours: [Int32]

    public init(_ adaptive: AdaptiveCells, minDistance: Int) {
        self.minDistance = minDistance
        let cells = adaptive.cells
        var offsets = [Int32](repeating: 0, count: cells.count + 1)
        var neighbours: [Int32] = []
        guard minDistance > 0 else {
            self.offsets = offsets
            self.neighbours = neighbours
            return
        }
        let uw = adaptive.unitWidth, uh = adaptive.unitHeight
        let unitColumns = adaptive.unitColumns, unitRows = adaptive.unitRows
        // Which cell covers each smallest cell.
        var owner = [Int32](repeating: -1, count: unitColumns * unitRows)
        for (index, cell) in cells.enumerated() {
            for y in Int(cell.y)..<Int(cell.y + cell.side) {
                for x in Int(cell.x)..<Int(cell.x + cell.side) { owner[y * unitColumns + x] = Int32(index) }
            }
        }
        var seen = [Int32](repeating: -1, count: cells.count)
        var found: [Int32] = []
        for (index, cell) in cells.enumerated() {
            let x0 = Int(cell.x) * uw, y0 = Int(cell.y) * uh
            let x1 = x0 + Int(cell.side) * uw, y1 = y0 + Int(cell.side) * uh
            // The smallest cells a rectangle less than minDistance away overlaps: one to the
            // left ends past x0 - minDistance, one to the right starts before x1 + minDistance.
            func floorDivision(_ a: Int, _ b: Int) -> Int { a >= 0 ? a / b : -((-a + b - 1) / b) }
            let ux0 = max(0, floorDivision(x0 - minDistance, uw)), ux1 = min(unitColumns - 1, (x1 + minDistance - 1) / uw)
            let uy0 = max(0, floorDivision(y0 - minDistance, uh)), uy1 = min(unitRows - 1, (y1 + minDistance - 1) / uh)
            found.removeAll(keepingCapacity: true)
            for uy in uy0...uy1 {
                for ux in ux0...ux1 {
                    let other = owner[uy * unitColumns + ux]
                    guard other >= 0, other != Int32(index), seen[Int(other)] != Int32(index) else { continue }
                    seen[Int(other)] = Int32(index)
                    if Self.gap(adaptive.frame(index), adaptive.frame(Int(other))) < minDistance { found.append(other) }
                }
            }
            found.sort()
            neighbours += found
            offsets[index + 1] = Int32(neighbours.count)
        }
        self.offsets = offsets
        self.neighbours = neighbours
    }

    /// The gap in pixels between two rectangles: the larger of the horizontal and vertical gaps.
    public static func gap(_ a: CellFrame, _ b: CellFrame) -> Int {
        let gx = max(0, max(Int(a.x), Int(b.x)) - min(a.right, b.right))
        let gy = max(0, max(Int(a.y), Int(b.y)) - min(a.bottom, b.bottom))
        return max(gx, gy)
    }

    public var cellCount: Int { offsets.count - 1 }

    /// The cells near `cell`, in cell order.
    public func of(_ cell: Int) -> ArraySlice<Int32> { neighbours[Int(offsets[cell])..<Int(offsets[cell + 1])] }

    /// Bytes held.
    public var storedBytes: Int { (offsets.count + neighbours.count) * 4 }

    /// About the bytes for `cells` cells before they are made: the owner map of the smallest
    /// cells, and for each cell as many neighbours as a smallest cell has among smallest cells
    /// (or all the cells, when fewer): most cells are the smallest, and a larger cell's
    /// neighbours are fewer than the smallest cells its area would have held.
    public static func plannedBytes(cells: Int, unitCells: Int, minDistance: Int, unitWidth: Int, unitHeight: Int) -> Int {
        guard minDistance > 0 else { return (cells + 1) * 4 }
        let reachX = 2 * ((minDistance + unitWidth - 1) / unitWidth) + 1, reachY = 2 * ((minDistance + unitHeight - 1) / unitHeight) + 1
        // (A distance across the whole canvas makes every cell every other's neighbour: planned
        // as such, it is refused by the budget rather than found out.)
        return unitCells * 4 + cells * 8 + cells * 4 * min(reachX * reachY, cells)
    }
}
