// CellLayout.swift — which photo goes in which cell of the canvas.

/// A canvas of `columns` x `rows` cells of `cellWidth` x `cellHeight` px, each holding one photo
/// (an index into the render's photo list) or nothing (-1: drawn in the background colour).
public struct CellLayout: Equatable, Sendable {
    public let columns: Int
    public let rows: Int
    public let cellWidth: Int
    public let cellHeight: Int
    /// Row-major, `columns * rows` entries.
    public let photoIndices: [Int32]

    public init(columns: Int, rows: Int, cellWidth: Int, cellHeight: Int, photoIndices: [Int32]) {
        precondition(columns > 0 && rows > 0 && cellWidth > 0 && cellHeight > 0)
        precondition(photoIndices.count == columns * rows)
        self.columns = columns
        self.rows = rows
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
        self.photoIndices = photoIndices
    }

    public var width: Int { columns * cellWidth }
    public var height: Int { rows * cellHeight }

    /// The photo index in cell (`column`, `row`), or -1.
    @inline(__always)
    public func photo(column: Int, row: Int) -> Int { Int(photoIndices[row * columns + column]) }

    /// How many distinct photos the layout uses.
    /// (No filtered copy of the indices: a 20-gigapixel grid has close to a million cells.)
    public var distinctPhotoCount: Int {
        var seen = Set<Int32>()
        for index in photoIndices where index >= 0 { seen.insert(index) }
        return seen.count
    }
}

/// The order photos fill a grid in.
public enum PhotoOrder: Equatable, Sendable {
    /// Sorted by path.
    case name
    /// A pseudo-random permutation, the same for the same seed.
    case shuffle(seed: UInt64)
}

/// A plain photo grid: photos fill the cells row by row, in `order`, repeating from the first
/// when there are more cells than photos.
public enum GridLayout {
    /// Rows needed for `photoCount` photos in `columns` columns (at least 1).
    public static func rows(forPhotoCount photoCount: Int, columns: Int) -> Int {
        return max(1, (photoCount + columns - 1) / columns)
    }

    public static func make(photoCount: Int, columns: Int, rows: Int, cellWidth: Int, cellHeight: Int,
                            order: PhotoOrder) -> CellLayout {
        precondition(photoCount > 0)
        var sequence = (0..<photoCount).map { Int32($0) }
        if case .shuffle(let seed) = order {
            var random = SplitMix64(seed: seed)
            // Fisher–Yates with a generator whose output is fixed for a seed on every platform.
            for i in stride(from: sequence.count - 1, to: 0, by: -1) {
                let j = Int(random.next() % UInt64(i + 1))
                sequence.swapAt(i, j)
            }
        }
        let cells = columns * rows
        let indices = (0..<cells).map { sequence[$0 % photoCount] }
        return CellLayout(columns: columns, rows: rows, cellWidth: cellWidth, cellHeight: cellHeight, photoIndices: indices)
    }
}

/// SplitMix64: a small, fast generator whose sequence is fixed for a seed (unlike
/// SystemRandomNumberGenerator), so `--seed` reproduces a layout anywhere.
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
