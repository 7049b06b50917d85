// CellLayout.swift — which photo goes in which cell of the canvas.

/// A canvas of `columns` x `rows` cells of `cellWidth` x `cellHeight` px, each holding one photo
/// (an index into the render's photo list) or nothing (-1: drawn in the background colour).
///
/// A grid's cells are a function of their index (its photos in order, repeated), so a grid
/// stores only its photo sequence, whatever its cell count (65,500 x 65,500 one-pixel cells
/// would be 17 GB as a table); a mosaic's assignment is a table, 4 bytes a cell, which the plan
/// counts (`storedBytes`).
public struct CellLayout: Equatable, Sendable {
    public let columns: Int
    public let rows: Int
    public let cellWidth: Int
    public let cellHeight: Int
    /// Row-major, one entry a cell (a mosaic); nil for a grid.
    private let table: [Int32]?
    /// A grid's photos in fill order: cell i holds sequence[i mod count].
    private let sequence: [Int32]
    /// A grid of photos in their own order: cell i holds i mod `inOrder` (no sequence stored: a
    /// library of a million photos would be 4 MB of it). 0 for the other layouts.
    private let inOrder: Int
    /// A layout of rectangles of any size (FramedCells.swift), or nil for a grid of equal cells.
    public let framed: FramedCells?
    /// Counted as a mosaic's table (4 bytes a cell) though cell i holds i mod `inOrder`: the
    /// layout a mosaic plans with before it is matched.
    private var countsTable = false

    /// A layout with one photo index (or -1) per cell, row-major.
    public init(columns: Int, rows: Int, cellWidth: Int, cellHeight: Int, photoIndices: [Int32]) {
        precondition(columns > 0 && rows > 0 && cellWidth > 0 && cellHeight > 0)
        precondition(photoIndices.count == columns * rows)
        self.columns = columns
        self.rows = rows
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
        table = photoIndices
        sequence = []
        inOrder = 0
        framed = nil
    }

    /// A layout whose cell i holds `sequence[i % sequence.count]`.
    public init(columns: Int, rows: Int, cellWidth: Int, cellHeight: Int, repeating sequence: [Int32]) {
        precondition(columns > 0 && rows > 0 && cellWidth > 0 && cellHeight > 0 && !sequence.isEmpty)
        self.columns = columns
        self.rows = rows
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
        table = nil
        self.sequence = sequence
        inOrder = 0
        framed = nil
    }

    /// A layout whose cell i holds photo i mod `photoCount`.
    public init(columns: Int, rows: Int, cellWidth: Int, cellHeight: Int, inOrder photoCount: Int) {
        precondition(columns > 0 && rows > 0 && cellWidth > 0 && cellHeight > 0 && photoCount > 0)
        self.columns = columns
        self.rows = rows
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
        table = nil
        sequence = []
        inOrder = photoCount
        framed = nil
    }

    /// The layout a mosaic of `columns` x `rows` cells is planned with before it is matched:
    /// cell i holds photo i mod `photoCount` (the most distinct photos it can draw), and its
    /// memory is counted as the table the matched mosaic will have (4 bytes a cell), though none
    /// is made (a 6,000-column mosaic's would be 100 MB).
    public static func mosaicPlan(columns: Int, rows: Int, cellWidth: Int, cellHeight: Int, photoCount: Int) -> CellLayout {
        var layout = CellLayout(columns: columns, rows: rows, cellWidth: cellWidth, cellHeight: cellHeight, inOrder: photoCount)
        layout.countsTable = true
        return layout
    }

    /// A layout of `cells`: rectangles of any size on a `width` x `height` canvas, each holding
    /// a photo or -1 (the background). Cells are kept sorted top to bottom; where none covers
    /// the canvas the background shows. Cells must not overlap (where two do, which of them shows
    /// is not defined: workers draw a stripe's cells in the order their photos are ready). Cell i
    /// of this layout is the i-th of `cells` in that order.
    public init(width: Int, height: Int, cells: [CellFrame]) {
        let framed = FramedCells(width: width, height: height, cells: cells)
        self.columns = max(1, framed.frames.count)
        self.rows = 1
        self.cellWidth = framed.widest
        self.cellHeight = framed.tallest
        table = nil
        sequence = []
        inOrder = 0
        self.framed = framed
    }

    /// The same cells holding the same photos, each `cellWidth` x `cellHeight` px (a preview's
    /// smaller cells): the storage is shared, nothing is copied.
    public func withCellSize(width cellWidth: Int, height cellHeight: Int) -> CellLayout {
        precondition(cellWidth > 0 && cellHeight > 0)
        precondition(framed == nil, "a layout of frames is scaled with scaled(by:)")
        return CellLayout(columns: columns, rows: rows, cellWidth: cellWidth, cellHeight: cellHeight, table: table,
                          sequence: sequence, inOrder: inOrder)
    }

    /// The same layout with the canvas scaled by `factor` (a preview): a grid's cells become
    /// `round(size x factor)` px (at least 1); a layout of frames has every edge scaled and
    /// rounded, so cells that touched still touch, and a cell that shrinks to nothing is left out.
    public func scaled(by factor: Double) -> CellLayout {
        guard let framed else {
            return withCellSize(width: max(1, Int((Double(cellWidth) * factor).rounded())),
                                height: max(1, Int((Double(cellHeight) * factor).rounded())))
        }
        func edge(_ value: Int32) -> Int32 { Int32((Double(value) * factor).rounded()) }
        var cells: [CellFrame] = []
        cells.reserveCapacity(framed.frames.count)
        for frame in framed.frames {
            let x = edge(frame.x), y = edge(frame.y)
            let width = edge(frame.x + frame.width) - x, height = edge(frame.y + frame.height) - y
            if width > 0 && height > 0 { cells.append(CellFrame(x: x, y: y, width: width, height: height, photo: frame.photo)) }
        }
        return CellLayout(width: max(1, Int(edge(Int32(framed.width)))), height: max(1, Int(edge(Int32(framed.height)))), cells: cells)
    }

    private init(columns: Int, rows: Int, cellWidth: Int, cellHeight: Int, table: [Int32]?, sequence: [Int32], inOrder: Int) {
        self.columns = columns
        self.rows = rows
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
        self.table = table
        self.sequence = sequence
        self.inOrder = inOrder
        framed = nil
    }

    /// Equal layouts: the same canvas, and the same photo in every cell (however it is stored).
    public static func == (a: CellLayout, b: CellLayout) -> Bool {
        guard a.framed == b.framed else { return false }
        guard a.columns == b.columns, a.rows == b.rows, a.cellWidth == b.cellWidth, a.cellHeight == b.cellHeight else { return false }
        if a.table == nil && b.table == nil && a.sequence == b.sequence && a.inOrder == b.inOrder { return true }
        return (0..<a.cellCount).allSatisfy { a.photo(at: $0) == b.photo(at: $0) }
    }

    /// The canvas: a grid's cells side by side, or the size a layout of frames was made with.
    public var width: Int { framed?.width ?? columns * cellWidth }
    public var height: Int { framed?.height ?? rows * cellHeight }
    public var cellCount: Int { framed?.frames.count ?? columns * rows }

    /// Cell `index`'s rectangle on the canvas.
    public func frame(at index: Int) -> CellFrame {
        if let framed { return framed.frames[index] }
        let column = index % columns, row = index / columns
        return CellFrame(x: Int32(column * cellWidth), y: Int32(row * cellHeight), width: Int32(cellWidth),
                         height: Int32(cellHeight), photo: Int32(photo(at: index)))
    }

    /// The largest cell's pixels (what one decoded cell holds at most), in bytes of RGB.
    public var largestCellBytes: Int { (framed?.largestArea ?? cellWidth * cellHeight) * 3 }

    /// Every cell's photo index, row-major (made on demand for a grid: tests and small layouts).
    public var photoIndices: [Int32] { table ?? (0..<cellCount).map { Int32(photo(at: $0)) } }

    /// Memory the layout holds: 4 bytes a cell for a mosaic, a grid's sequence otherwise.
    public var storedBytes: Int { framed?.storedBytes ?? 4 * (countsTable ? cellCount : table?.count ?? sequence.count) }

    /// The photo index in cell `index` (row-major), or -1.
    @inline(__always)
    public func photo(at index: Int) -> Int {
        if let framed { return Int(framed.frames[index].photo) }
        if let table { return Int(table[index]) }
        if inOrder > 0 { return index % inOrder }
        return Int(sequence[index % sequence.count])
    }

    /// The photo index in cell (`column`, `row`), or -1.
    @inline(__always)
    public func photo(column: Int, row: Int) -> Int { photo(at: row * columns + column) }

    /// How many distinct cells the cache decodes: a grid's distinct photos, a layout of frames'
    /// distinct (photo, size) pairs.
    public var distinctDrawingCount: Int { framed?.drawings.count ?? distinctPhotoCount }

    /// How many distinct photos the layout uses.
    /// (No filtered copy of the indices: a 20-gigapixel grid has close to a million cells.)
    /// (A bit a photo, not a set: a million photos are 125 KB of bits, and 40 MB of a set.)
    public var distinctPhotoCount: Int {
        if inOrder > 0 { return min(inOrder, cellCount) }
        let indices = framed?.frames.map(\.photo) ?? table ?? Array(sequence.prefix(min(sequence.count, cellCount)))
        guard let largest = indices.max(), largest >= 0 else { return 0 }
        var seen = [UInt64](repeating: 0, count: Int(largest) / 64 + 1)
        var count = 0
        for index in indices where index >= 0 {
            let word = Int(index) / 64, bit = UInt64(1) << UInt64(index % 64)
            if seen[word] & bit == 0 {
                seen[word] |= bit
                count += 1
            }
        }
        return count
    }
}

/// The order photos fill a grid in.
public enum PhotoOrder: Equatable, Sendable {
    /// Sorted by path.
    case name
    /// By when each photo was taken (its EXIF date), oldest first; photos without a date after
    /// them, by path.
    case dateTaken
    /// A pseudo-random permutation, the same for the same seed.
    case shuffle(seed: UInt64)

    /// Whether a seed chooses this order.
    public var isShuffle: Bool {
        if case .shuffle = self { return true }
        return false
    }

    /// The positions of `photos` by when they were taken (`dateTaken`), oldest first, those
    /// without a date last; equal dates keep their (path) order.
    public static func byDateTaken(_ photos: PhotoTable) -> [Int32] {
        var keys: [(date: Int64, index: Int32)] = []
        keys.reserveCapacity(photos.count)
        for (index, photo) in photos.enumerated() {
            keys.append((photo.header.dateTaken > 0 ? photo.header.dateTaken : Int64.max, Int32(index)))
        }
        keys.sort { ($0.date, $0.index) < ($1.date, $1.index) }
        return keys.map(\.index)
    }
}

/// A plain photo grid: photos fill the cells row by row, in `order`. In name order they repeat
/// from the first when there are more cells than photos. Shuffled, every pass through the
/// photos is shuffled anew (no period shows, however many passes), and a photo is never put next
/// to itself (the 8 cells around it) when there are at least 5 photos.
public enum GridLayout {
    /// Rows needed for `photoCount` photos in `columns` columns (at least 1).
    public static func rows(forPhotoCount photoCount: Int, columns: Int) -> Int {
        return max(1, (photoCount + columns - 1) / columns)
    }

    /// `photos` gives the dates of `.dateTaken` (required for it, unused otherwise): the grid
    /// takes them in that order, repeating it as name order repeats.
    public static func make(photoCount: Int, columns: Int, rows: Int, cellWidth: Int, cellHeight: Int,
                            order: PhotoOrder, photos: PhotoTable? = nil) -> CellLayout {
        precondition(photoCount > 0)
        let seed: UInt64
        switch order {
        case .name:
            return CellLayout(columns: columns, rows: rows, cellWidth: cellWidth, cellHeight: cellHeight, inOrder: photoCount)
        case .dateTaken:
            precondition(photos?.count == photoCount, "the date order needs the photos")
            let sequence = PhotoOrder.byDateTaken(photos!)
            return CellLayout(columns: columns, rows: rows, cellWidth: cellWidth, cellHeight: cellHeight,
                              repeating: Array(sequence.prefix(columns * rows)))
        case .shuffle(let chosen):
            seed = chosen
        }
        var random = SplitMix64(seed: seed)
        // Fisher–Yates with a generator whose output is fixed for a seed on every platform.
        func shuffled() -> [Int32] {
            var deck = (0..<photoCount).map { Int32($0) }
            for i in stride(from: deck.count - 1, to: 0, by: -1) {
                deck.swapAt(i, Int(random.next() % UInt64(i + 1)))
            }
            return deck
        }
        let cells = columns * rows
        // One pass (the usual case): the shuffle itself, stored as a repeating sequence.
        guard cells > photoCount else {
            return CellLayout(columns: columns, rows: rows, cellWidth: cellWidth, cellHeight: cellHeight, repeating: shuffled())
        }
        // Several passes: dealt cell by cell from a fresh deck each pass; a card equal to an
        // already placed neighbour (left, and the three above) is swapped with the first later
        // card that is not. When none is left in this deck (its last few cards), the next deck is
        // shuffled in behind them: with 5 photos or more one of them fits (4 neighbours are
        // placed), at the cost of those few photos appearing once more than the rest.
        var table = [Int32](repeating: 0, count: cells)
        var deck: [Int32] = []
        var next = 0
        for cell in 0..<cells {
            if next == deck.count {
                deck = shuffled()
                next = 0
            }
            let row = cell / columns, column = cell % columns
            func conflicts(_ photo: Int32) -> Bool {
                if column > 0 && table[cell - 1] == photo { return true }
                guard row > 0 else { return false }
                let above = cell - columns
                return table[above] == photo || (column > 0 && table[above - 1] == photo)
                    || (column + 1 < columns && table[above + 1] == photo)
            }
            if conflicts(deck[next]) {
                if (next + 1..<deck.count).first(where: { !conflicts(deck[$0]) }) == nil {
                    deck = Array(deck[next...]) + shuffled()
                    next = 0
                }
                if let swap = (next + 1..<deck.count).first(where: { !conflicts(deck[$0]) }) { deck.swapAt(next, swap) }
            }
            table[cell] = deck[next]
            next += 1
        }
        return CellLayout(columns: columns, rows: rows, cellWidth: cellWidth, cellHeight: cellHeight, photoIndices: table)
    }
}

/// SplitMix64: a small, fast generator whose sequence is fixed for a seed (unlike
/// SystemRandomNumberGenerator), so a seed reproduces a layout anywhere.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
