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
