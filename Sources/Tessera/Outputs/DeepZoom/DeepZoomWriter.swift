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
// Threading: `append` is called by one thread (the render's writer) with rows in order. Each
// call is one batch of jobs on all cores (a JobTeam of its own): one job per tile column of
// every level that has rows waiting, which encodes them and averages its own part of them for
// the level below (while they are in the cache). A level's averaged rows are the next level's
// input in the next batch, so the levels form a pipeline one batch apart and no job in a batch
// waits for another; `finish` runs the batches that drain it. A job touches only its own
// column's encoder and carry rows and its own range of output pixels.
//
// Another sink that batches (a second pyramid in the same render) may run this writer's jobs in
// its own batch instead: `jobs(rows:stride:count:)` plans the batch and gives its jobs, and their
// `complete` does what `append` does after its batch.
//
// A TIFF pyramid (Outputs/TIFF) runs the same writer with tiles of 256 px and no overlap, over
// a window of its levels down to the first that fits in one tile, with `padEdgeTiles`: every
// tile is then encoded at the full tile size, the pixels past the level's right and bottom edges
// repeating the last column and row (a TIFF tile is always whole).
//
// A shard (ShardPlan.swift) runs the same writer over a window of the picture: levels
// `window.lowest...maxLevel` only, fed the band's rows with margins, writing only the tile rows
// the band owns, and handing the rows it averages below its lowest level to `reduced`
// (the small picture the join builds the remaining levels from). The join runs it once more
// over that small picture, for levels 0...lowest-1. Every level is averaged from the one above
// with pairs aligned to even rows, so each band's rows are exactly the whole render's.
import CTesseraShims

/// Where finished tiles go: files in NAME_files (through one writing thread), or a handler
/// (a shard's part file), called from the encoding jobs.
enum TileDestination {
    case folder(String)
    case handler(@Sendable (_ level: Int, _ column: Int, _ row: Int, _ bytes: UnsafeRawBufferPointer) throws(TesseraError) -> Void)
}

/// The part of a pyramid one writer makes (see the file's note on shards).
struct DeepZoomWindow: Equatable, Sendable {
    /// The lowest level written; the rows averaged from it are handed to `reduced`.
    let lowest: Int
    /// Per level (index = level; below `lowest` unused): the rows it is fed, and the tile rows
    /// it writes.
    let fedRows: [Range<Int>]
    let tileRows: [Range<Int>]
    /// The rows of level `lowest - 1` the band owns (what it hands over of those averaged).
    let reducedRows: Range<Int>

    /// Every level of `geometry` from `lowest` up, whole (what a TIFF pyramid writes); the rows
    /// averaged below `lowest` are dropped.
    static func levels(from lowest: Int, of geometry: DeepZoomGeometry) -> DeepZoomWindow {
        DeepZoomWindow(lowest: lowest, fedRows: geometry.levels.map { 0..<$0.height }, tileRows: geometry.levels.map { 0..<$0.rows },
                       reducedRows: 0..<0)
    }
}

final class DeepZoomWriter {
    let geometry: DeepZoomGeometry
    /// NAME_files: holds a folder per level (a label only, with a handler destination).
    let filesDirectory: String
    private let destination: TileDestination
    /// Where every tile goes as well (an SZI beside the folder), uncounted: the tiles are the same.
    private let copy: (@Sendable (_ level: Int, _ column: Int, _ row: Int, _ bytes: UnsafeRawBufferPointer) throws(TesseraError) -> Void)?
    private let window: DeepZoomWindow?
    /// Rows of level `window.lowest - 1` as they are averaged: (first row, rows, stride, count).
    private let reduced: ((Int, UnsafePointer<UInt8>, Int, Int) throws(TesseraError) -> Void)?
    private let tilesHandled = TileTally()
    private let quality: Int32
    private let factors: (h: Int32, v: Int32)
    /// Every tile encoded whole, its edges repeated past the level's (see the file's note).
    let padEdgeTiles: Bool
    private let levels: [LevelStream]
    private let errors = FirstError()
    private let files: TileFileQueue
    /// Runs the batches' jobs (see JobTeam for why not concurrentPerform).
    private let team: JobTeam
    /// Tiles written so far (every level).
    var tilesWritten: Int { files.filesWritten + tilesHandled.count }
    /// Bytes of tiles written so far.
    var bytesWritten: Int64 { files.bytesWritten + Int64(tilesHandled.bytes) }

    /// `threads`: how many threads run the jobs (the caller's included), as many as the
    /// render's workers.
    /// `window`: a shard's part of the pyramid (nil: all of it); `reduced` receives the rows
    /// averaged below `window.lowest`. With a `.folder` destination, `filesDirectory` is it.
    /// `padEdgeTiles`: every tile `tileSize` square (needs no overlap).
    init(geometry: DeepZoomGeometry, quality: Int, subsampling: ChromaSubsampling, filesDirectory: String,
         threads: Int, destination: TileDestination? = nil, alsoTo copy: TileDestination? = nil, window: DeepZoomWindow? = nil,
         padEdgeTiles: Bool = false,
         reduced: ((Int, UnsafePointer<UInt8>, Int, Int) throws(TesseraError) -> Void)? = nil) throws(TesseraError) {
        precondition(!padEdgeTiles || geometry.overlap == 0, "padded tiles have no overlap")
        let destination = destination ?? .folder(filesDirectory)
        if case .handler(let handle) = copy { self.copy = handle } else { self.copy = nil }
        if case .folder(let folder) = destination {
            for level in geometry.levels { try makeDirectory(folder + "/\(level.index)") }
        }
        self.geometry = geometry
        self.filesDirectory = filesDirectory
        self.destination = destination
        self.window = window
        self.reduced = reduced
        self.quality = Int32(quality)
        factors = subsampling.lumaFactors
        self.padEdgeTiles = padEdgeTiles
        levels = geometry.levels.map { level in
            let lowest = window?.lowest ?? 0
            guard level.index >= lowest else {
                return LevelStream(level: level, geometry: geometry, firstRow: 0, tileRows: 0..<0, padded: false)
            }
            return LevelStream(level: level, geometry: geometry, firstRow: window?.fedRows[level.index].lowerBound ?? 0,
                               tileRows: window?.tileRows[level.index] ?? 0..<level.rows, padded: padEdgeTiles)
        }
        let team = try JobTeam(helpers: max(0, threads - 1))
        do throws(TesseraError) {
            files = try TileFileQueue()
        } catch {
            team.stop()
            throw error
        }
        self.team = team
    }

    deinit {
        team.stop()
        files.stop()
    }

    /// Feeds the next `count` rows of the full picture, `stride` bytes apart. The rows are
    /// used before this returns (tiles encoded, averaged rows made for the level below).
    /// `alongside`, if given, runs as the first jobs of the same batch (the render uses it to
    /// compress the stripe for the JPEG, and to run another pyramid's jobs, on the same threads,
    /// instead of on more threads that would fight these for the cores); its `complete` is the
    /// caller's to call.
    func append(rows: UnsafeRawPointer, stride: Int, count: Int, alongside: StripeJobs? = nil) throws(TesseraError) {
        try run(jobs(rows: rows, stride: stride, count: count), alongside: alongside)
    }

    /// `append` in two halves, for a writer whose jobs run in another sink's batch: takes the
    /// next `count` rows and plans their batch. The rows must stay valid until the jobs'
    /// `complete` has returned; the jobs must all have run before it is called.
    func jobs(rows: UnsafeRawPointer, stride: Int, count: Int) -> StripeJobs {
        guard count > 0 else { return .none }
        levels[geometry.maxLevel].input = (rows.assumingMemoryBound(to: UInt8.self), stride, count)
        return planBatch()
    }

    /// Runs what is left in the pipeline, then checks that every level received all its rows and
    /// every tile was written.
    func finish() throws(TesseraError) {
        while levels.contains(where: { $0.input != nil }) { try run(planBatch(), alongside: nil) }
        try files.drain()
        for stream in levels where stream.level.index >= (window?.lowest ?? 0) {
            let expected = window?.fedRows[stream.level.index].upperBound ?? stream.level.height
            if stream.nextRow != expected || stream.columns.contains(where: { $0.tileRow != $0.tileRows.upperBound }) {
                throw TesseraError.encodeFailed(path: filesDirectory, reason: "level \(stream.level.index) received rows up to \(stream.nextRow) of \(expected)")
            }
        }
    }

    /// Runs `batch` on the team, `alongside`'s jobs first (the longest), then completes it.
    private func run(_ batch: StripeJobs, alongside: StripeJobs?) throws(TesseraError) {
        let extra = alongside?.count ?? 0
        let total = extra + batch.count
        let job = { (number: Int) in
            if number < extra { alongside!.run(number) } else { batch.run(number - extra) }
        }
        if total == 1 {
            job(0)
        } else if total > 1 {
            // The jobs share nothing mutable (see the file's threading note); errors go to
            // `errors` (and alongside's to its own).
            team.run(jobs: total, job)
        }
        try batch.complete()
    }

    /// One step of the pipeline, planned: every level that has rows waiting encodes them into
    /// its tiles and averages them for the level below, all levels at once in one batch of jobs.
    /// The rows a level averages now are the next level's input in the next batch, so no job
    /// waits for another (levels are a batch apart, and each level's output is double-buffered).
    /// `complete` passes the averaged rows on.
    private func planBatch() -> StripeJobs {
        var works: [LevelWork] = []
        for stream in levels.reversed() where stream.level.index >= (window?.lowest ?? 0) {
            guard let input = stream.input else { continue }
            stream.input = nil
            works.append(prepare(stream, rows: input.rows, stride: input.stride, count: input.count))
        }
        // The job table: each level's jobs in a run of numbers.
        var firstJob: [Int] = []
        var total = 0
        for work in works {
            firstJob.append(total)
            total += work.jobs
        }
        let table = works
        return StripeJobs(count: total, run: { number in
            var w = table.count - 1
            while firstJob[w] > number { w -= 1 }
            do throws(TesseraError) {
                try table[w].run(job: number - firstJob[w], writer: self)
            } catch {
                self.errors.record(error)
            }
        }, complete: { () throws(TesseraError) in try self.complete(table) })
    }

    /// After a batch's jobs: throws their first error, else moves every level on and hands the
    /// rows each averaged to the level below (or, below a shard's lowest level, to `reduced`).
    private func complete(_ works: [LevelWork]) throws(TesseraError) {
        try errors.check()
        for work in works {
            let stream = levels[work.level]
            stream.nextRow += work.count
            guard work.level > 0 else { continue }
            if let keep = work.keep {
                stream.pending.update(from: keep, count: stream.level.width * 3)
                stream.hasPending = true
            } else {
                stream.hasPending = false
            }
            if !work.pairs.isEmpty {
                if let window, work.level == window.lowest {
                    // Below a window's lowest level: hand the band's own rows over.
                    let first = (work.firstRow - (work.pairedPending ? 1 : 0)) / 2
                    let rows = first..<(first + work.pairs.count)
                    let kept = rows.clamped(to: window.reducedRows)
                    if !kept.isEmpty {
                        try reduced?(kept.lowerBound, UnsafePointer(work.output!) + (kept.lowerBound - first) * work.outputStride,
                                     work.outputStride, kept.count)
                    }
                } else {
                    levels[work.level - 1].input = (UnsafePointer(work.output!), work.outputStride, work.pairs.count)
                }
                stream.flipOutput()
            }
        }
    }

    /// Plans one level's part of a batch: which rows pair up for the level below (the first
    /// possibly with the row kept from before; a last unpaired row is the level's last row,
    /// averaged with itself, or is kept for later), and its jobs.
    private func prepare(_ stream: LevelStream, rows: UnsafePointer<UInt8>, stride: Int, count: Int) -> LevelWork {
        let level = stream.level
        precondition(stream.nextRow + count <= level.height, "more rows than the level has")
        var pairs: [(top: UnsafePointer<UInt8>, bottom: UnsafePointer<UInt8>)] = []
        var keep: UnsafePointer<UInt8>?
        var output: UnsafeMutablePointer<UInt8>?
        var outputStride = 0
        if level.index > 0 {
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
                if stream.nextRow + i == level.height - 1 {
                    pairs.append((rows + i * stride, rows + i * stride))
                } else {
                    keep = rows + i * stride
                }
            }
            outputStride = levels[level.index - 1].level.width * 3
            output = stream.reserveOutput(bytes: pairs.count * outputStride)
        }
        return LevelWork(stream: stream, rows: rows, stride: stride, count: count, firstRow: stream.nextRow,
                         pairedPending: level.index > 0 && stream.hasPending, pairs: pairs, keep: keep, output: output, outputStride: outputStride)
    }

    /// Hands a finished tile's bytes to the file queue. Called from jobs, one per column.
    func writeTile(level: Int, column: Int, row: Int, bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        try copy?(level, column, row, bytes)
        switch destination {
        case .folder(let folder):
            try files.enqueue(path: folder + "/\(level)/\(column)_\(row).jpg", bytes: Array(bytes))
        case .handler(let handle):
            try handle(level, column, row, bytes)
            tilesHandled.add(bytes: bytes.count)
        }
    }

    /// Waits for queued tile files (so a failed render can remove its folder).
    func abandon() { try? files.drain() }

    fileprivate var encoderSettings: (quality: Int32, h: Int32, v: Int32) { (quality, factors.h, factors.v) }
}

/// One level's part of a batch.
private struct LevelWork {
    let stream: LevelStream
    let rows: UnsafePointer<UInt8>
    let stride: Int
    let count: Int
    let firstRow: Int
    /// Whether the first pair starts with the row kept from the batch before.
    let pairedPending: Bool
    let pairs: [(top: UnsafePointer<UInt8>, bottom: UnsafePointer<UInt8>)]
    let keep: UnsafePointer<UInt8>?
    let output: UnsafeMutablePointer<UInt8>?
    let outputStride: Int

    var level: Int { stream.level.index }
    /// A small level is one job; a large one a job per tile column.
    var single: Bool { stream.level.width * count < 1 << 16 }
    var jobs: Int { single ? 1 : stream.columns.count }

    /// Encodes this batch's rows into column `job`'s tiles, then averages the same part of the
    /// rows for the level below while it is still in the cache (output pixels
    /// ceil(c*T/2) ..< ceil((c+1)*T/2) for column c, the last column to the end of the row).
    func run(job: Int, writer: DeepZoomWriter) throws(TesseraError) {
        for column in single ? stream.columns.indices : job..<(job + 1) {
            try stream.columns[column].feed(rows: rows, stride: stride, firstRow: firstRow, count: count, writer: writer)
            guard let output, !pairs.isEmpty else { continue }
            let tileSize = stream.columns[column].geometry.tileSize
            let width = stream.level.width
            let first = (column * tileSize + 1) / 2
            let end = column == stream.columns.count - 1 ? (width + 1) / 2 : ((column + 1) * tileSize + 1) / 2
            let inputWidth = min(2 * (end - first), width - 2 * first)
            for p in pairs.indices {
                averageRows(pairs[p].top + 6 * first, pairs[p].bottom + 6 * first, into: output + p * outputStride + 3 * first,
                            inputWidth: inputWidth)
            }
        }
    }
}

/// One level's state between batches: its tile columns, its rows waiting for the next batch, a
/// kept row, and the two buffers its rows are averaged into for the level below (one being
/// filled while the level below reads the other).
private final class LevelStream {
    let level: DeepZoomGeometry.Level
    let columns: [TileColumn]
    var nextRow = 0
    /// Rows waiting for the next batch.
    var input: (rows: UnsafePointer<UInt8>, stride: Int, count: Int)?
    let pending: UnsafeMutablePointer<UInt8>
    var hasPending = false
    private var outputs: [(buffer: UnsafeMutablePointer<UInt8>, capacity: Int)]
    private var current = 0

    init(level: DeepZoomGeometry.Level, geometry: DeepZoomGeometry, firstRow: Int, tileRows: Range<Int>, padded: Bool) {
        self.level = level
        nextRow = firstRow
        columns = (0..<level.columns).map {
            TileColumn(level: level, column: $0, x: geometry.span(tile: $0, extent: level.width), geometry: geometry,
                       tileRows: tileRows, padded: padded)
        }
        pending = .allocate(capacity: level.width * 3)
        outputs = [(.allocate(capacity: 0), 0), (.allocate(capacity: 0), 0)]
    }

    deinit {
        pending.deallocate()
        for output in outputs { output.buffer.deallocate() }
    }

    /// The buffer to average into now, at least `bytes` long.
    func reserveOutput(bytes: Int) -> UnsafeMutablePointer<UInt8> {
        if bytes > outputs[current].capacity {
            outputs[current].buffer.deallocate()
            outputs[current] = (.allocate(capacity: bytes), bytes)
        }
        return outputs[current].buffer
    }

    /// The level below now reads the buffer just filled; the next batch fills the other.
    func flipOutput() { current ^= 1 }
}

/// One column of tiles of one level: an encoder on the current tile, and the rows the next
/// tile shares with it.
private final class TileColumn {
    let level: DeepZoomGeometry.Level
    let column: Int
    let x: Range<Int>
    let geometry: DeepZoomGeometry
    /// The tile rows this column writes (all of the level's, but for a shard's band).
    let tileRows: Range<Int>
    /// Every tile encoded `tileSize` square, the last column and row repeated past the level.
    let padded: Bool
    private var encoder: OpaquePointer?
    private(set) var tileRow: Int
    private var started = false
    private let carry: UnsafeMutablePointer<UInt8>
    private var carryRows = 0
    /// A row widened to the tile's width, for a padded column narrower than a tile (the last).
    private let wideRow: UnsafeMutablePointer<UInt8>?

    init(level: DeepZoomGeometry.Level, column: Int, x: Range<Int>, geometry: DeepZoomGeometry, tileRows: Range<Int>, padded: Bool) {
        self.level = level
        self.tileRows = tileRows
        tileRow = tileRows.lowerBound
        self.column = column
        self.x = x
        self.geometry = geometry
        self.padded = padded
        carry = .allocate(capacity: max(1, 2 * geometry.overlap * x.count * 3))
        wideRow = padded && x.count < geometry.tileSize ? .allocate(capacity: geometry.tileSize * 3) : nil
    }

    deinit {
        if let encoder { tessera_jpeg_encoder_destroy(encoder) }
        carry.deallocate()
        wideRow?.deallocate()
    }

    private var label: String { "Deep Zoom tile \(level.index)/\(column)_\(tileRow).jpg" }

    private func check(_ status: Int32) throws(TesseraError) {
        guard status != TESSERA_JPEG_OK else { return }
        throw TesseraError.encodeFailed(path: label, reason: String(cString: tessera_jpeg_encoder_message(encoder)))
    }

    /// The encoded tile's size: its pixels, or the whole tile when padded.
    private var encodedWidth: Int { padded ? geometry.tileSize : x.count }
    private func encodedHeight(_ span: Range<Int>) -> Int { padded ? geometry.tileSize : span.count }

    /// Hands `count` rows (`stride` bytes apart, from x.lowerBound) to the encoder, each widened
    /// to the tile by repeating its last pixel when the column is narrower than a padded tile.
    private func write(rows: UnsafePointer<UInt8>, stride: Int, count: Int) throws(TesseraError) {
        guard let wideRow else {
            try check(tessera_jpeg_encoder_write_rows(encoder, rows, stride, UInt32(count)))
            return
        }
        let rowBytes = x.count * 3
        for i in 0..<count {
            wideRow.update(from: rows + i * stride, count: rowBytes)
            let last = wideRow + rowBytes - 3
            for pixel in x.count..<geometry.tileSize { (wideRow + pixel * 3).update(from: last, count: 3) }
            try check(tessera_jpeg_encoder_write_rows(encoder, wideRow, geometry.tileSize * 3, 1))
        }
    }

    /// Takes rows [firstRow, firstRow + count) of the level (`rows` points at the first, at x 0).
    func feed(rows: UnsafePointer<UInt8>, stride: Int, firstRow: Int, count: Int, writer: DeepZoomWriter) throws(TesseraError) {
        let rowBytes = x.count * 3
        var y = firstRow
        let end = firstRow + count
        while y < end && tileRow < tileRows.upperBound {
            let span = geometry.span(tile: tileRow, extent: level.height)
            if !started && carryRows == 0 && y < span.lowerBound {
                // A shard's margin above its first tile: rows the band above writes.
                y = min(end, span.lowerBound)
                continue
            }
            if !started { try startTile(span: span, at: y, rowBytes: rowBytes, writer: writer) }
            let stop = min(end, span.upperBound)
            try write(rows: rows + (y - firstRow) * stride + x.lowerBound * 3, stride: stride, count: stop - y)
            if tileRow + 1 < tileRows.upperBound {
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
                if encodedHeight(span) > span.count {
                    // A padded tile past the level's bottom: its last row again, to the tile's end.
                    try write(rows: rows + (y - 1 - firstRow) * stride + x.lowerBound * 3, stride: 0,
                              count: encodedHeight(span) - span.count)
                }
                try finishTile(writer: writer)
                // When the level's height is at most `overlap` past a tile boundary, the last
                // tile holds only rows the one above it shared: all carried already, and no row
                // of the stream is left to start it. It is written now, from the carry alone.
                if tileRow < tileRows.upperBound {
                    let next = geometry.span(tile: tileRow, extent: level.height)
                    if next.upperBound <= y {
                        try startTile(span: next, at: y, rowBytes: rowBytes, writer: writer)
                        try finishTile(writer: writer)
                    }
                }
            }
        }
    }

    /// Starts the encoder on tile `tileRow` (rows `span`), replaying the rows carried from the
    /// tile above; `y` is the stream's next row.
    private func startTile(span: Range<Int>, at y: Int, rowBytes: Int, writer: DeepZoomWriter) throws(TesseraError) {
        if encoder == nil {
            encoder = tessera_jpeg_encoder_create(nil, nil, 64 << 10)
            guard encoder != nil else { throw TesseraError.encodeFailed(path: label, reason: "out of memory creating an encoder") }
            tessera_jpeg_encoder_set_marks(encoder, 0, JPEGMarks.outputComment)
            let settings = writer.encoderSettings
            try check(tessera_jpeg_encoder_start(encoder, UInt32(encodedWidth), UInt32(encodedHeight(span)), settings.quality,
                                                 settings.h, settings.v, 0))
        } else {
            try check(tessera_jpeg_encoder_restart(encoder, UInt32(encodedWidth), UInt32(encodedHeight(span))))
        }
        started = true
        precondition(span.lowerBound + carryRows == y, "carried rows do not meet the stream")
        if carryRows > 0 {
            try write(rows: carry, stride: rowBytes, count: carryRows)
            carryRows = 0
        }
    }

    /// Finishes tile `tileRow` and hands its bytes to the file thread.
    private func finishTile(writer: DeepZoomWriter) throws(TesseraError) {
        try check(tessera_jpeg_encoder_finish(encoder))
        var bytes: UnsafePointer<UInt8>?
        let length = tessera_jpeg_encoder_memory_output(encoder, &bytes)
        try writer.writeTile(level: level.index, column: column, row: tileRow,
                             bytes: UnsafeRawBufferPointer(start: bytes, count: length))
        tileRow += 1
        started = false
    }
}

/// One row of the level below from two rows of this one (or one row twice, for the last row of
/// an odd height): each output pixel is the rounded mean of a 2 x 2 block; the last column of
/// an odd width averages its one column. In C (tessera_pyramid.c), 16 pixels at a time.
@inline(__always)
func averageRows(_ top: UnsafePointer<UInt8>, _ bottom: UnsafePointer<UInt8>, into out: UnsafeMutablePointer<UInt8>, inputWidth: Int) {
    tessera_average_rows(top, bottom, out, inputWidth)
}

/// Tiles and bytes handed to a handler destination, counted from the encoding jobs.
private final class TileTally: @unchecked Sendable {
    private let lock = Mutex()
    private var tiles = 0, total = 0  // protected by `lock`
    func add(bytes: Int) { lock.withLock { tiles += 1; total += bytes } }
    var count: Int { lock.withLock { tiles } }
    var bytes: Int { lock.withLock { total } }
}
