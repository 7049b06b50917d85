// CellPainter.swift — draws the cells a stripe crosses: each cell's photo, decoded once at its
// drawn size (CellCache), copied row by row into the stripe (tinted toward a mosaic's target
// when asked), or the background colour where the photo failed.
//
// Threading: `fill` runs on the pipeline's workers, several stripes at once; it writes only the
// stripe it is given, and the cell cache is thread-safe.

struct CellPainter: @unchecked Sendable {
    let layout: CellLayout
    let geometry: StripeGeometry
    let cache: CellCache
    let tint: CellTint?
    let background: RGB

    /// Draws every cell row that stripe `index` crosses into `bytes` (the stripe's rows).
    /// Cells whose photo another worker is decoding are drawn last, so two workers on one cell
    /// row decode different photos instead of waiting on each other.
    func fill(stripe index: Int, into bytes: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        let rows = geometry.rows(ofStripe: index)
        if let framed = layout.framed { return try fill(framed, rows: rows, into: bytes) }
        let cellHeight = layout.cellHeight
        let firstCellRow = rows.lowerBound / cellHeight
        let lastCellRow = (rows.upperBound - 1) / cellHeight
        var deferred: [(column: Int, row: Int)] = []
        for cellRow in firstCellRow...lastCellRow {
            for column in 0..<layout.columns {
                if try !drawCell(column: column, row: cellRow, rows: rows, into: bytes, wait: false) {
                    deferred.append((column, cellRow))
                }
            }
        }
        for cell in deferred {
            _ = try drawCell(column: cell.column, row: cell.row, rows: rows, into: bytes, wait: true)
        }
    }

    /// A layout of frames: the background first where the cells leave gaps, then every cell
    /// that crosses the stripe (a cell taller than the stripe is drawn a band at a time, from
    /// the one decode the cache keeps), the busy ones last.
    private func fill(_ framed: FramedCells, rows: Range<Int>, into bytes: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        if !framed.tiles {
            paintBackground(CellFrame(x: 0, y: rows.lowerBound, width: geometry.width, height: rows.count, photo: -1),
                            rows: rows, into: bytes)
        }
        var deferred: [Int] = []
        for index in framed.candidates(crossing: rows) where framed.frames[index].bottom > rows.lowerBound {
            if try !draw(framed, frame: index, rows: rows, into: bytes, wait: false) { deferred.append(index) }
        }
        for index in deferred { _ = try draw(framed, frame: index, rows: rows, into: bytes, wait: true) }
    }

    /// Copies the part of frame `index` that lies in `rows` into the stripe. Returns false when
    /// its drawing was busy and `wait` is false.
    private func draw(_ framed: FramedCells, frame index: Int, rows: Range<Int>, into bytes: UnsafeMutableRawBufferPointer,
                      wait: Bool) throws(TesseraError) -> Bool {
        let frame = framed.frames[index]
        let key = framed.drawing(ofFrame: index)
        var lookup = CellCache.Lookup.failed
        if key >= 0 { lookup = try cache.acquire(photo: key, wait: wait, partial: true) }
        let top = max(rows.lowerBound, Int(frame.y)), bottom = min(rows.upperBound, frame.bottom)
        let rowBytes = geometry.bytesPerRow, spanBytes = Int(frame.width) * 3
        let destination = bytes.baseAddress! + Int(frame.x) * 3
        switch lookup {
        case .busy:
            return false
        case .onDisk:
            // Only the rows this stripe shows, straight from the spill file into the stripe.
            let target = destination + (top - rows.lowerBound) * rowBytes
            try cache.readRows(key, rows: top - Int(frame.y)..<bottom - Int(frame.y), into: target, stride: rowBytes)
            cache.drew(key, rows: bottom - top)
            if let tint {
                let offsets = tint.offsets(cell: index, photo: Int(frame.photo))
                for y in top..<bottom {
                    let line = (target + (y - top) * rowBytes).assumingMemoryBound(to: UInt8.self)
                    tint.apply(offsets, row: y - Int(frame.y), cellWidth: Int(frame.width), cellHeight: Int(frame.height),
                               from: line, to: line)
                }
            }
        case .cell(let pixels, let slot):
            let width = Int(frame.width), height = Int(frame.height)
            let offsets = tint?.offsets(cell: index, photo: Int(frame.photo))
            for y in top..<bottom {
                let source = pixels + (y - Int(frame.y)) * spanBytes, target = destination + (y - rows.lowerBound) * rowBytes
                if let tint, let offsets {
                    tint.apply(offsets, row: y - Int(frame.y), cellWidth: width,
                               cellHeight: height, from: source.assumingMemoryBound(to: UInt8.self),
                               to: target.assumingMemoryBound(to: UInt8.self))
                } else {
                    target.copyMemory(from: source, byteCount: spanBytes)
                }
            }
            cache.release(slot: slot)
            cache.drew(key, rows: bottom - top)
        case .failed:
            paintBackground(frame, rows: rows, into: bytes)
        }
        return true
    }

    /// Fills the part of `frame` in `rows` with the background colour.
    private func paintBackground(_ frame: CellFrame, rows: Range<Int>, into bytes: UnsafeMutableRawBufferPointer) {
        let top = max(rows.lowerBound, Int(frame.y)), bottom = min(rows.upperBound, frame.bottom)
        guard top < bottom else { return }
        let rowBytes = geometry.bytesPerRow, spanBytes = Int(frame.width) * 3
        let first = (bytes.baseAddress! + (top - rows.lowerBound) * rowBytes + Int(frame.x) * 3).assumingMemoryBound(to: UInt8.self)
        for x in 0..<Int(frame.width) {
            first[x * 3] = background.red
            first[x * 3 + 1] = background.green
            first[x * 3 + 2] = background.blue
        }
        for y in top + 1..<bottom {
            (bytes.baseAddress! + (y - rows.lowerBound) * rowBytes + Int(frame.x) * 3).copyMemory(from: first, byteCount: spanBytes)
        }
    }

    /// Copies the part of cell (`column`, `row`) that lies in `rows` into the stripe.
    /// Returns false when the cell was busy and `wait` is false.
    private func drawCell(column: Int, row: Int, rows: Range<Int>, into bytes: UnsafeMutableRawBufferPointer,
                          wait: Bool) throws(TesseraError) -> Bool {
        let cellWidth = layout.cellWidth, cellHeight = layout.cellHeight
        let top = max(rows.lowerBound, row * cellHeight)
        let bottom = min(rows.upperBound, (row + 1) * cellHeight)
        let rowBytes = geometry.bytesPerRow
        let spanBytes = cellWidth * 3
        let destination = bytes.baseAddress! + column * spanBytes
        let photo = layout.photo(column: column, row: row)
        var lookup = CellCache.Lookup.failed
        if photo >= 0 {
            lookup = try cache.acquire(photo: photo, wait: wait)
        }
        switch lookup {
        case .onDisk:
            preconditionFailure("a whole cell was asked for")
        case .busy:
            return false
        case .cell(let pixels, let slot):
            if let tint {
                let offsets = tint.offsets(cell: row * layout.columns + column, photo: photo)
                for y in top..<bottom {
                    tint.apply(offsets, row: y - row * cellHeight, cellWidth: cellWidth, cellHeight: cellHeight,
                               from: (pixels + (y - row * cellHeight) * spanBytes).assumingMemoryBound(to: UInt8.self),
                               to: (destination + (y - rows.lowerBound) * rowBytes).assumingMemoryBound(to: UInt8.self))
                }
            } else {
                for y in top..<bottom {
                    (destination + (y - rows.lowerBound) * rowBytes)
                        .copyMemory(from: pixels + (y - row * cellHeight) * spanBytes, byteCount: spanBytes)
                }
            }
            cache.release(slot: slot)
        case .failed:
            for y in top..<bottom {
                let line = (destination + (y - rows.lowerBound) * rowBytes).assumingMemoryBound(to: UInt8.self)
                for x in 0..<cellWidth {
                    line[x * 3] = background.red
                    line[x * 3 + 1] = background.green
                    line[x * 3 + 2] = background.blue
                }
            }
        }
        return true
    }
}
