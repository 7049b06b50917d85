// CollageLayout.swift — a collage wall: every photo once, keeping its shape (justified rows, or
// masonry columns), as a layout of frames (FramedCells.swift) the stripe pipeline draws.
//
// Justified rows are what photo sites show galleries as: each row holds consecutive photos at
// one height, scaled so the row fills the width exactly. Where rows break is chosen for the
// whole collage at once (a shortest path over the break points, as in Knuth and Plass's line
// breaking), so every row, the last too, comes out near the asked height rather than the last
// one odd. A row's height is whole pixels, and its photos' widths are shared out so they sum to
// the width exactly while each photo, scaled to cover its cell, overhangs it by at most about a
// pixel (the centre crop takes nothing a person sees).

/// How a collage is laid out.
public enum CollageStyle: Equatable, Sendable {
    /// Rows about `rowHeight` px tall, each exactly the canvas width.
    case rows(rowHeight: Int)
    /// `count` columns of equal width; each photo goes to the shortest column (masonry).
    case columns(count: Int)
}

public enum CollageLayout {
    /// The widest and tallest shape a photo keeps (a 100:1 banner is centre-cropped to 16:1).
    public static let aspectLimit = 16.0

    /// A photo's upright aspect ratio (width / height) from its header, within `aspectLimit`.
    public static func aspect(of header: PhotoHeader) -> Double {
        guard header.width > 0, header.height > 0 else { return 1 }
        let sideways = (5...8).contains(header.exifOrientation)
        let aspect = sideways ? Double(header.height) / Double(header.width) : Double(header.width) / Double(header.height)
        return min(aspectLimit, max(1 / aspectLimit, aspect))
    }

    /// The photos in `order` (their positions in the photo list), every one once: by name, by
    /// date taken (`photos` gives the dates), or shuffled for the seed.
    public static func sequence(photoCount: Int, order: PhotoOrder, photos: PhotoTable? = nil) -> [Int32] {
        if case .dateTaken = order {
            precondition(photos?.count == photoCount, "the date order needs the photos")
            return PhotoOrder.byDateTaken(photos!)
        }
        var deck = (0..<photoCount).map { Int32($0) }
        if case .shuffle(let seed) = order {
            var random = SplitMix64(seed: seed)
            for i in stride(from: deck.count - 1, to: 0, by: -1) { deck.swapAt(i, Int(random.next() % UInt64(i + 1))) }
        }
        return deck
    }

    /// The collage of the photos `sequence` names (aspects by photo index) on a canvas `width` px
    /// wide, with `gap` px between photos and around the edge. The canvas height follows;
    /// beyond `heightLimit` (what the outputs hold) it is refused before any cell is made.
    public static func make(aspects: [Double], sequence: [Int32], width: Int, style: CollageStyle, gap: Int,
                            heightLimit: Int = RenderPlan.maxDeepZoomSide) throws(TesseraError) -> CellLayout {
        precondition(!sequence.isEmpty && width > 2 * gap && gap >= 0)
        let shapes = sequence.map { aspects[Int($0)] }
        let (cells, height): ([(x: Int, y: Int, width: Int, height: Int)], Int)
        switch style {
        case .rows(let rowHeight): (cells, height) = rows(shapes, width: width, rowHeight: rowHeight, gap: gap)
        case .columns(let count): (cells, height) = columns(shapes, width: width, count: count, gap: gap)
        }
        let limit = min(heightLimit, RenderPlan.maxDeepZoomSide)
        guard height <= limit else { throw .outputTooLarge(width: width, height: height, limit: limit) }
        return CellLayout(width: width, height: height, cells: cells.enumerated().map { place($1, photo: sequence[$0]) })
    }

    private static func place(_ cell: (x: Int, y: Int, width: Int, height: Int), photo: Int32) -> CellFrame {
        CellFrame(x: cell.x, y: cell.y, width: cell.width, height: cell.height, photo: Int(photo))
    }

    /// The height a justified collage of these shapes would have (for choosing a width).
    public static func height(aspects: [Double], width: Int, rowHeight: Int, gap: Int) -> Int {
        rows(aspects, width: width, rowHeight: rowHeight, gap: gap).height
    }

    // MARK: Justified rows

    /// Rows of consecutive photos, each filling `width` less the gaps exactly.
    static func rows(_ aspects: [Double], width: Int, rowHeight: Int, gap: Int) -> (cells: [(x: Int, y: Int, width: Int, height: Int)], height: Int) {
        let breaks = rowBreaks(aspects, width: width, rowHeight: rowHeight, gap: gap)
        var cells: [(x: Int, y: Int, width: Int, height: Int)] = []
        cells.reserveCapacity(aspects.count)
        var y = gap, start = 0
        for end in breaks {
            let row = Array(aspects[start..<end])
            let available = width - gap * (row.count + 1)
            let (height, widths) = justify(row, width: available)
            var x = gap
            for w in widths {
                cells.append((x, y, w, height))
                x += w + gap
            }
            y += height + gap
            start = end
        }
        return (cells, y)
    }

    /// Where rows end (exclusive indices): the breaks whose rows' heights stray least from
    /// `rowHeight` in total (squared relative error), rows of up to a few times the photos
    /// that fit at that height.
    ///
    /// Each start weighs at most `mostEnds` ends. A row of photos past a thousand (a row height
    /// of a few pixels on a wide canvas: 130,000 photos 1 px high took 40 s here, every start
    /// weighing every end of three rows' worth) jumps, by a binary search of the running sums,
    /// to the ends around its height's crossing of the target; rows of fewer photos weigh every
    /// end, as before.
    static func rowBreaks(_ aspects: [Double], width: Int, rowHeight: Int, gap: Int) -> [Int] {
        let n = aspects.count, target = Double(rowHeight)
        let mostEnds = 2048
        var cost = [Double](repeating: .infinity, count: n + 1)
        var from = [Int](repeating: 0, count: n + 1)
        var prefix = [Double](repeating: 0, count: n + 1)
        for i in 0..<n { prefix[i + 1] = prefix[i] + aspects[i] }
        /// A row's height from the running sums (for the jump only).
        func roughHeight(_ start: Int, _ end: Int) -> Double {
            Double(width - gap * (end - start + 1)) / max(prefix[end] - prefix[start], .leastNonzeroMagnitude)
        }
        cost[0] = 0
        for start in 0..<n where cost[start].isFinite {
            var sum = 0.0
            var end = start + 1
            var weighed = 0
            while end <= n && weighed < mostEnds {
                if weighed == mostEnds / 2 && roughHeight(start, end) > target {
                    // Half the ends weighed and the row still taller than the target: on to a
                    // quarter of them before the first end where it is not.
                    var low = end, high = n
                    while low < high {
                        let middle = (low + high) / 2
                        if roughHeight(start, middle) > target { low = middle + 1 } else { high = middle }
                    }
                    let jump = max(end, low - mostEnds / 4)
                    if jump > end {
                        sum = prefix[jump - 1] - prefix[start]
                        end = jump
                    }
                }
                sum += aspects[end - 1]
                let available = Double(width - gap * (end - start + 1))
                guard available >= Double(end - start) else { break }
                let height = available / sum
                let error = (height - target) / target
                let total = cost[start] + error * error
                if total < cost[end] {
                    cost[end] = total
                    from[end] = start
                }
                // Rows past a third of the height only get worse.
                if height < target / 3 { break }
                weighed += 1
                end += 1
            }
            // A row to the last photo is always weighed: the ends weighed above stop at a
            // window of them, and a row of thousands of photos (a wide collage of short rows)
            // could miss the last one: 5,000 photos 65,500 px wide in rows of about 13 px were
            // broken into rows of 15 and 22 px where one row of 9 px is nearer.
            if end <= n && weighed >= mostEnds {
                let available = Double(width - gap * (n - start + 1))
                if available >= Double(n - start) {
                    let error = (available / (prefix[n] - prefix[start]) - target) / target
                    if cost[start] + error * error < cost[n] {
                        cost[n] = cost[start] + error * error
                        from[n] = start
                    }
                }
            }
        }
        var breaks: [Int] = []
        var end = n
        while end > 0 {
            breaks.append(end)
            end = from[end]
        }
        return breaks.reversed()
    }

    /// One row's whole-pixel height and widths summing to `width` exactly: each photo's width
    /// is allowed from a pixel narrower than its shape at that height (a pixel of its width
    /// cropped) to its aspect's worth of pixels wider (a pixel of its height cropped). The
    /// height is the real one rounded down, or up when the widths cannot then sum.
    static func justify(_ aspects: [Double], width: Int) -> (height: Int, widths: [Int]) {
        let sum = aspects.reduce(0, +)
        let exact = Double(width) / sum
        for height in [Int(exact.rounded(.down)), Int(exact.rounded(.up))] where height >= 1 {
            let low = aspects.map { max(1, Int((Double(height) * $0 - 1).rounded(.up))) }
            let high = aspects.map { max(1, Int((Double(height) * $0 + $0).rounded(.down))) }
            guard low.reduce(0, +) <= width && width <= high.reduce(0, +) else { continue }
            return (height, share(aspects.map { $0 * exact }, width: width, low: low, high: high))
        }
        // Shapes too extreme for that (never with shapes within the limit and room for a pixel
        // each): the widths in proportion, the crop larger.
        let height = max(1, Int(exact.rounded()))
        return (height, share(aspects.map { $0 * exact }, width: width, low: aspects.map { _ in 1 }, high: aspects.map { _ in width }))
    }

    /// Whole widths between `low` and `high` summing to `width`, each as near `ideal` as the
    /// sum allows (pixels added where the width is furthest below its ideal, removed where
    /// furthest above).
    static func share(_ ideal: [Double], width: Int, low: [Int], high: [Int]) -> [Int] {
        var widths = ideal.indices.map { min(high[$0], max(low[$0], Int(ideal[$0].rounded()))) }
        var left = width - widths.reduce(0, +)
        while left != 0 {
            let step = left > 0 ? 1 : -1
            var best = -1, bestGap = -Double.infinity
            for i in widths.indices where step > 0 ? widths[i] < high[i] : widths[i] > low[i] {
                let gap = step > 0 ? ideal[i] - Double(widths[i]) : Double(widths[i]) - ideal[i]
                if gap > bestGap {
                    bestGap = gap
                    best = i
                }
            }
            guard best >= 0 else { break }
            widths[best] += step
            left -= step
        }
        return widths
    }

    // MARK: Masonry columns

    /// `count` columns (widths differing by a pixel at most), each photo at its shape's height
    /// in the shortest column so far (the leftmost of equals).
    static func columns(_ aspects: [Double], width: Int, count: Int, gap: Int) -> (cells: [(x: Int, y: Int, width: Int, height: Int)], height: Int) {
        let available = width - gap * (count + 1)
        precondition(available >= count)
        var lefts: [Int] = [], widths: [Int] = []
        var x = gap
        for column in 0..<count {
            let w = available / count + (column < available % count ? 1 : 0)
            lefts.append(x)
            widths.append(w)
            x += w + gap
        }
        var bottoms = [Int](repeating: gap, count: count)
        var cells: [(x: Int, y: Int, width: Int, height: Int)] = []
        cells.reserveCapacity(aspects.count)
        for aspect in aspects {
            let column = bottoms.indices.min { (bottoms[$0], $0) < (bottoms[$1], $1) }!
            let height = max(1, Int((Double(widths[column]) / aspect).rounded()))
            cells.append((lefts[column], bottoms[column], widths[column], height))
            bottoms[column] += height + gap
        }
        return (cells, bottoms.max()!)
    }
}
