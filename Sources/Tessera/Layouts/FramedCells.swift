// FramedCells.swift — a layout of rectangles of any size (a collage, an adaptive mosaic): where
// each cell is, and the distinct (photo, size) pairs the cell cache decodes.
//
// A grid draws every photo at one size, so its cache is keyed by photo. Here a photo may be
// drawn at several sizes (a mosaic's small and large cells), so the cache is keyed by
// *drawing*: one photo at one size, decoded once per render whatever the number of cells that
// show it. Cells are sorted top to bottom, so the cells a stripe crosses are found by a binary
// search and a short scan (those starting at most `tallest` rows above the stripe).

/// One cell of a layout of rectangles: where it is on the canvas, in pixels, and which photo it
/// holds (an index into the render's photo list, or -1 for the background).
public struct CellFrame: Equatable, Hashable, Sendable {
    public var x: Int32
    public var y: Int32
    public var width: Int32
    public var height: Int32
    public var photo: Int32

    public init(x: Int32, y: Int32, width: Int32, height: Int32, photo: Int32) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
        self.photo = photo
    }

    public init(x: Int, y: Int, width: Int, height: Int, photo: Int) {
        self.init(x: Int32(x), y: Int32(y), width: Int32(width), height: Int32(height), photo: Int32(photo))
    }

    public var bottom: Int { Int(y) + Int(height) }
    public var right: Int { Int(x) + Int(width) }
}

/// One photo drawn at one size: what the cell cache decodes and keeps for a layout of frames.
public struct CellDrawing: Equatable, Hashable, Sendable {
    public var photo: Int32
    public var width: Int32
    public var height: Int32
}

public struct FramedCells: Equatable, Sendable {
    public let width: Int
    public let height: Int
    /// Sorted by top edge, then left edge.
    public let frames: [CellFrame]
    /// Per frame, the index of its drawing in `drawings` (-1 for a background cell).
    let drawingOfFrame: [Int32]
    /// The distinct (photo, size) pairs, in the order first met top to bottom.
    public let drawings: [CellDrawing]
    public let widest: Int
    public let tallest: Int
    /// The largest cell's area in pixels.
    public let largestArea: Int
    /// The cells cover the canvas exactly once (nothing to fill with the background first).
    public let tiles: Bool

    init(width: Int, height: Int, cells: [CellFrame]) {
        precondition(width > 0 && height > 0)
        for cell in cells {
            precondition(cell.width > 0 && cell.height > 0 && cell.x >= 0 && cell.y >= 0
                         && cell.right <= width && cell.bottom <= height, "a cell outside the canvas: \(cell)")
        }
        self.width = width
        self.height = height
        let sorted = cells.sorted { ($0.y, $0.x) < ($1.y, $1.x) }
        frames = sorted
        var index: [CellDrawing: Int32] = [:]
        var drawings: [CellDrawing] = []
        var drawingOfFrame: [Int32] = []
        drawingOfFrame.reserveCapacity(sorted.count)
        var widest = 1, tallest = 1, largest = 1
        for frame in sorted {
            widest = max(widest, Int(frame.width))
            tallest = max(tallest, Int(frame.height))
            largest = max(largest, Int(frame.width) * Int(frame.height))
            guard frame.photo >= 0 else {
                drawingOfFrame.append(-1)
                continue
            }
            let drawing = CellDrawing(photo: frame.photo, width: frame.width, height: frame.height)
            if let known = index[drawing] {
                drawingOfFrame.append(known)
            } else {
                index[drawing] = Int32(drawings.count)
                drawingOfFrame.append(Int32(drawings.count))
                drawings.append(drawing)
            }
        }
        self.drawings = drawings
        self.drawingOfFrame = drawingOfFrame
        self.widest = widest
        self.tallest = tallest
        largestArea = largest
        tiles = FramedCells.tile(sorted, width: width, height: height)
    }

    /// Whether `sorted` (by top, then left) covers the canvas exactly once: a skyline, each
    /// column's filled height, must meet every cell's top edge along its whole width. The
    /// skyline is kept per span between neighbouring cell edges, not per pixel: a collage 16
    /// million pixels wide held 64 MiB of skyline before its memory was checked.
    private static func tile(_ sorted: [CellFrame], width: Int, height: Int) -> Bool {
        var edges: [Int32] = [0, Int32(width)]
        edges.reserveCapacity(2 * sorted.count + 2)
        for frame in sorted {
            edges.append(frame.x)
            edges.append(Int32(frame.right))
        }
        edges.sort()
        var unique: [Int32] = []
        unique.reserveCapacity(edges.count)
        for edge in edges where unique.last != edge { unique.append(edge) }
        edges = []
        /// The span starting at `x` (an edge).
        func span(_ x: Int32) -> Int {
            var low = 0, high = unique.count - 1
            while low < high {
                let middle = (low + high) / 2
                if unique[middle] < x { low = middle + 1 } else { high = middle }
            }
            return low
        }
        var skyline = [Int32](repeating: 0, count: unique.count - 1)
        for frame in sorted {
            var index = span(frame.x)
            while index < skyline.count && unique[index] < Int32(frame.right) {
                guard skyline[index] == frame.y else { return false }
                skyline[index] = frame.y + frame.height
                index += 1
            }
        }
        return skyline.allSatisfy { Int($0) == height }
    }

    public static func == (a: FramedCells, b: FramedCells) -> Bool {
        a.width == b.width && a.height == b.height && a.frames == b.frames
    }

    /// Bytes the layout holds: a frame, its drawing's index, and the drawings (with the cell
    /// cache's count of each drawing's rows still to draw, CellCache's `rowsLeft`).
    var storedBytes: Int {
        frames.count * (MemoryLayout<CellFrame>.stride + 4) + drawings.count * (MemoryLayout<CellDrawing>.stride + 16 + 4)
    }

    /// Per drawing, the rows of the canvas it fills: the sum of its frames' heights.
    func rowsDrawn() -> [Int32] {
        var rows = [Int32](repeating: 0, count: drawings.count)
        for (index, frame) in frames.enumerated() where drawingOfFrame[index] >= 0 {
            rows[Int(drawingOfFrame[index])] &+= frame.height
        }
        return rows
    }

    /// The most bytes the cell cache's spill file can hold at once for this layout: a drawing's
    /// copy there is dropped once its last row is drawn (CellCache's `forgetSpillLocked`), so
    /// what it holds are drawings whose rows, from first to last, cross a stretch of `reach`
    /// canvas rows (the stripes in flight) together. Three times that: a shard's band leaves
    /// undrawn the rows of the drawings across its top and bottom edges, whose copies stay.
    func mostSpilledBytes(reach: Int) -> Int64 {
        var top = [Int32](repeating: .max, count: drawings.count), bottom = [Int32](repeating: 0, count: drawings.count)
        for (index, frame) in frames.enumerated() where drawingOfFrame[index] >= 0 {
            let drawing = Int(drawingOfFrame[index])
            top[drawing] = min(top[drawing], frame.y)
            bottom[drawing] = max(bottom[drawing], Int32(frame.bottom))
        }
        var changes: [(row: Int, bytes: Int64)] = []
        changes.reserveCapacity(2 * drawings.count)
        for (index, drawing) in drawings.enumerated() {
            let bytes = Int64(drawing.width) * Int64(drawing.height) * 3
            changes.append((Int(top[index]) - reach, bytes))
            changes.append((Int(bottom[index]), -bytes))
        }
        // At one row, the drawings that end there go before those that start.
        changes.sort { ($0.row, $0.bytes) < ($1.row, $1.bytes) }
        var live: Int64 = 0, most: Int64 = 0
        for change in changes {
            live += change.bytes
            most = max(most, live)
        }
        return 3 * most
    }

    /// The indices of the frames that may cross canvas rows `rows` (those starting above
    /// `rows.lowerBound - tallest` cannot): check each one's rows.
    func candidates(crossing rows: Range<Int>) -> Range<Int> {
        let first = firstIndex(top: rows.lowerBound - tallest + 1)
        let end = firstIndex(top: rows.upperBound)
        return first..<max(first, end)
    }

    /// The first frame whose top edge is at or below `top`.
    private func firstIndex(top: Int) -> Int {
        var low = 0, high = frames.count
        while low < high {
            let middle = (low + high) / 2
            if Int(frames[middle].y) < top { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Frame `index`'s drawing, or -1.
    func drawing(ofFrame index: Int) -> Int { Int(drawingOfFrame[index]) }
}

/// What a render's cell cache decodes, by key: for a grid, photo i at the cell size; for a
/// layout of frames, drawing i (a photo at one of the sizes it is drawn at).
struct CellDrawings: Sendable {
    let photoCount: Int
    let framed: FramedCells?
    let cellWidth: Int
    let cellHeight: Int

    init(layout: CellLayout, photoCount: Int) {
        self.photoCount = photoCount
        framed = layout.framed
        cellWidth = layout.cellWidth
        cellHeight = layout.cellHeight
    }

    /// Photo i at one size.
    init(photoCount: Int, cellWidth: Int, cellHeight: Int) {
        self.photoCount = photoCount
        framed = nil
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
    }

    var count: Int { framed?.drawings.count ?? photoCount }

    func photo(_ key: Int) -> Int { framed.map { Int($0.drawings[key].photo) } ?? key }

    func size(_ key: Int) -> (width: Int, height: Int) {
        guard let framed else { return (cellWidth, cellHeight) }
        let drawing = framed.drawings[key]
        return (Int(drawing.width), Int(drawing.height))
    }

    /// The most bytes a key's cell takes.
    var largestBytes: Int { (framed?.largestArea ?? cellWidth * cellHeight) * 3 }

    /// The fewest bytes a key's cell takes (a loop over a layout's drawings).
    var smallestBytes: Int {
        guard let framed, !framed.drawings.isEmpty else { return cellWidth * cellHeight * 3 }
        return framed.drawings.reduce(Int.max) { min($0, Int($1.width) * Int($1.height)) } * 3
    }
}
