// DeepZoomWriter.swift — a Deep Zoom pyramid built from the canvas's rows as they stream past.
//
//     stripe rows ──▶ level max ──2x2 average──▶ level max-1 ──▶ ... ──▶ level 0
//                       │                          │
//                       ▼                          ▼
//             one JPEG encoder per tile column, fed scanlines as they arrive;
//             a tile's file is written the moment its last row has gone in
//
// Nothing holds a band of tile rows. Each tile column of each level keeps one libjpeg
// compressor open on its current tile and hands it rows straight from the stripe (level max)
// or from the small buffer the level above just averaged down. The `2 x overlap` rows a tile
// shares with the one below are copied aside and replayed into the next tile's encoder. A
// level keeps at most one row of its own (an even row waiting for its partner). So memory is
// a compressor and a partly written tile per tile column, plus a stripe's worth of averaged
// rows: it grows with the width, never with the height.
//
// Threading: `append` is called by one thread (the render's writer) with rows in order. For
// each level it runs the tile columns and the averaging for the level below as independent
// jobs on all cores (DispatchQueue.concurrentPerform): a job touches only its own column's
// encoder and carry rows, or its own output rows.
import CTesseraShims
import Dispatch

final class DeepZoomWriter {
    let geometry: DeepZoomGeometry
    /// NAME_files: holds a folder per level.
    let filesDirectory: String
    private let quality: Int32
    private let factors: (h: Int32, v: Int32)
    private let levels: [LevelStream]
    private let errorLock = Mutex()
    private var firstError: TesseraError?  // protected by errorLock
    private let files = TileFileQueue()
    /// Tiles written so far (every level).
    var tilesWritten: Int { files.filesWritten }
    /// Bytes of tiles written so far.
    var bytesWritten: Int64 { files.bytesWritten }

    init(geometry: DeepZoomGeometry, quality: Int, subsampling: ChromaSubsampling, filesDirectory: String) throws(TesseraError) {
        self.geometry = geometry
        self.filesDirectory = filesDirectory
        self.quality = Int32(quality)
        factors = subsampling.lumaFactors
        levels = geometry.levels.map { LevelStream(level: $0, geometry: geometry) }
        for level in geometry.levels { try makeDirectory(filesDirectory + "/\(level.index)") }
    }

    /// Feeds the next `count` rows of the full picture, `stride` bytes apart.
    func append(rows: UnsafeRawPointer, stride: Int, count: Int) throws(TesseraError) {
        try feed(level: geometry.maxLevel, rows: rows.assumingMemoryBound(to: UInt8.self), stride: stride, count: count)
    }

    /// Checks that every level received all its rows and every tile was written.
    func finish() throws(TesseraError) {
        try files.drain()
        for stream in levels where stream.nextRow != stream.level.height || stream.columns.contains(where: { $0.tileRow != stream.level.rows }) {
            throw TesseraError.encodeFailed(path: filesDirectory, reason: "level \(stream.level.index) received \(stream.nextRow) of \(stream.level.height) rows")
        }
    }

    private func feed(level index: Int, rows: UnsafePointer<UInt8>, stride: Int, count: Int) throws(TesseraError) {
        guard count > 0 else { return }
        let stream = levels[index]
        let level = stream.level
        precondition(stream.nextRow + count <= level.height, "more rows than the level has")
        let firstRow = stream.nextRow

        // The averaging for the level below: pairs of rows, the first possibly the row kept
        // from the previous call; a last unpaired row is the level's last row (averaged with
        // itself) or is kept for the next call.
        var pairs: [(top: UnsafePointer<UInt8>, bottom: UnsafePointer<UInt8>)] = []
        var keep: UnsafePointer<UInt8>?
        if index > 0 {
            var i = 0
            var available = count
            if stream.hasPending {
                pairs.append((UnsafePointer(stream.pending), rows))
                i = 1
                available -= 1
            }
            while available >= 2 {
                pairs.append((rows + i * stride, rows + (i + 1) * stride))
                i += 2
                available -= 2
            }
            if available == 1 {
                if firstRow + i == level.height - 1 {
                    pairs.append((rows + i * stride, rows + i * stride))
                } else {
                    keep = rows + i * stride
                }
            }
            stream.reserveOutput(rows: pairs.count, width: levels[index - 1].level.width)
        }

        // Jobs: every tile column, then the averaging in chunks of rows.
        let columnJobs = stream.columns.count
        let chunkRows = max(1, min(8, pairs.count / 4))
        let chunkJobs = (pairs.count + chunkRows - 1) / chunkRows
        let output = stream.output
        let outputStride = index > 0 ? levels[index - 1].level.width * 3 : 0
        let inputWidth = level.width
        let job = { (job: Int) in
            if job < columnJobs {
                do throws(TesseraError) {
                    try stream.columns[job].feed(rows: rows, stride: stride, firstRow: firstRow, count: count, writer: self)
                } catch {
                    self.errorLock.withLock { if self.firstError == nil { self.firstError = error } }
                }
            } else {
                let first = (job - columnJobs) * chunkRows
                for p in first..<min(pairs.count, first + chunkRows) {
                    averageRows(pairs[p].top, pairs[p].bottom, into: output + p * outputStride, inputWidth: inputWidth)
                }
            }
        }
        let jobs = columnJobs + chunkJobs
        if jobs == 1 || level.width * count < 1 << 16 {
            for j in 0..<jobs { job(j) }
        } else {
            // The jobs share nothing mutable (see the file's threading note); errors go through
            // errorLock.
            let shared = UnsafeSendable(job)
            DispatchQueue.concurrentPerform(iterations: jobs) { shared.value($0) }
        }
        if let error = errorLock.withLock({ firstError }) { throw error }

        stream.nextRow += count
        if let keep {
            stream.pending.update(from: keep, count: inputWidth * 3)
            stream.hasPending = true
        } else if index > 0 {
            stream.hasPending = false
        }
        if index > 0 {
            try feed(level: index - 1, rows: UnsafePointer(output), stride: outputStride, count: pairs.count)
        }
    }

    /// Hands a finished tile's bytes to the file queue. Called from jobs, one per column.
    fileprivate func writeTile(level: Int, column: Int, row: Int, bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        try files.enqueue(path: filesDirectory + "/\(level)/\(column)_\(row).jpg", bytes: Array(bytes))
    }

    /// Waits for queued tile files (so a failed render can remove its folder).
    func abandon() { try? files.drain() }

    fileprivate var encoderSettings: (quality: Int32, h: Int32, v: Int32) { (quality, factors.h, factors.v) }
}

/// One level's state between calls: its tile columns, a kept row, and the buffer its rows are
/// averaged into for the level below.
private final class LevelStream {
    let level: DeepZoomGeometry.Level
    let columns: [TileColumn]
    var nextRow = 0
    let pending: UnsafeMutablePointer<UInt8>
    var hasPending = false
    private(set) var output: UnsafeMutablePointer<UInt8>
    private var outputCapacity = 0

    init(level: DeepZoomGeometry.Level, geometry: DeepZoomGeometry) {
        self.level = level
        columns = (0..<level.columns).map {
            TileColumn(level: level, column: $0, x: geometry.span(tile: $0, extent: level.width), geometry: geometry)
        }
        pending = .allocate(capacity: level.width * 3)
        output = .allocate(capacity: 0)
    }

    deinit {
        pending.deallocate()
        output.deallocate()
    }

    func reserveOutput(rows: Int, width: Int) {
        let needed = rows * width * 3
        guard needed > outputCapacity else { return }
        output.deallocate()
        output = .allocate(capacity: needed)
        outputCapacity = needed
    }
}

/// One column of tiles of one level: an encoder on the current tile, and the rows the next
/// tile shares with it.
private final class TileColumn {
    let level: DeepZoomGeometry.Level
    let column: Int
    let x: Range<Int>
    let geometry: DeepZoomGeometry
    private var encoder: OpaquePointer?
    private(set) var tileRow = 0
    private var started = false
    private let carry: UnsafeMutablePointer<UInt8>
    private var carryRows = 0

    init(level: DeepZoomGeometry.Level, column: Int, x: Range<Int>, geometry: DeepZoomGeometry) {
        self.level = level
        self.column = column
        self.x = x
        self.geometry = geometry
        carry = .allocate(capacity: max(1, 2 * geometry.overlap * x.count * 3))
    }

    deinit {
        if let encoder { tessera_jpeg_encoder_destroy(encoder) }
        carry.deallocate()
    }

    private var label: String { "Deep Zoom tile \(level.index)/\(column)_\(tileRow).jpg" }

    private func check(_ status: Int32) throws(TesseraError) {
        guard status != TESSERA_JPEG_OK else { return }
        throw TesseraError.encodeFailed(path: label, reason: String(cString: tessera_jpeg_encoder_message(encoder)))
    }

    /// Takes rows [firstRow, firstRow + count) of the level (`rows` points at the first, at x 0).
    func feed(rows: UnsafePointer<UInt8>, stride: Int, firstRow: Int, count: Int, writer: DeepZoomWriter) throws(TesseraError) {
        let rowBytes = x.count * 3
        var y = firstRow
        let end = firstRow + count
        while y < end {
            let span = geometry.span(tile: tileRow, extent: level.height)
            if !started {
                if encoder == nil {
                    encoder = tessera_jpeg_encoder_create(nil, nil, 16 << 10)
                    guard encoder != nil else { throw TesseraError.encodeFailed(path: label, reason: "out of memory creating an encoder") }
                }
                let settings = writer.encoderSettings
                try check(tessera_jpeg_encoder_start(encoder, UInt32(x.count), UInt32(span.count), settings.quality,
                                                     settings.h, settings.v, 0))
                started = true
                precondition(span.lowerBound + carryRows == y, "carried rows do not meet the stream")
                if carryRows > 0 {
                    try check(tessera_jpeg_encoder_write_rows(encoder, carry, rowBytes, UInt32(carryRows)))
                    carryRows = 0
                }
            }
            let stop = min(end, span.upperBound)
            try check(tessera_jpeg_encoder_write_rows(encoder, rows + (y - firstRow) * stride + x.lowerBound * 3, stride, UInt32(stop - y)))
            if tileRow + 1 < level.rows {
                let nextStart = geometry.span(tile: tileRow + 1, extent: level.height).lowerBound
                var row = max(y, nextStart)
                while row < stop {
                    (carry + carryRows * rowBytes).update(from: rows + (row - firstRow) * stride + x.lowerBound * 3, count: rowBytes)
                    carryRows += 1
                    row += 1
                }
            }
            y = stop
            if y == span.upperBound {
                try check(tessera_jpeg_encoder_finish(encoder))
                var bytes: UnsafePointer<UInt8>?
                let length = tessera_jpeg_encoder_memory_output(encoder, &bytes)
                try writer.writeTile(level: level.index, column: column, row: tileRow,
                                     bytes: UnsafeRawBufferPointer(start: bytes, count: length))
                tileRow += 1
                started = false
            }
        }
    }
}

/// One row of the level below from two rows of this one (or one row twice, for the last row of
/// an odd height): each output pixel is the rounded mean of a 2 x 2 block; the last column of
/// an odd width averages its one column.
@inline(__always)
func averageRows(_ top: UnsafePointer<UInt8>, _ bottom: UnsafePointer<UInt8>, into out: UnsafeMutablePointer<UInt8>, inputWidth: Int) {
    let pairs = inputWidth / 2
    var i = 0, o = 0
    for _ in 0..<pairs {
        out[o] = UInt8(truncatingIfNeeded: (UInt16(top[i]) &+ UInt16(top[i + 3]) &+ UInt16(bottom[i]) &+ UInt16(bottom[i + 3]) &+ 2) >> 2)
        out[o + 1] = UInt8(truncatingIfNeeded: (UInt16(top[i + 1]) &+ UInt16(top[i + 4]) &+ UInt16(bottom[i + 1]) &+ UInt16(bottom[i + 4]) &+ 2) >> 2)
        out[o + 2] = UInt8(truncatingIfNeeded: (UInt16(top[i + 2]) &+ UInt16(top[i + 5]) &+ UInt16(bottom[i + 2]) &+ UInt16(bottom[i + 5]) &+ 2) >> 2)
        i += 6
        o += 3
    }
    if inputWidth % 2 == 1 {
        for c in 0..<3 {
            out[o + c] = UInt8(truncatingIfNeeded: (UInt16(top[i + c]) &+ UInt16(bottom[i + c]) &+ 1) >> 1)
        }
    }
}
