// SharedCells.swift — decoded cells that several shards of one render draw, kept in the shard
// folder so that a shard started after another reads them instead of decoding the photos again.
//
// A grid of 120 photos repeated over 1.2 gigapixels shows every photo in every band: without
// this, 8 shards decode every photo 8 times (about a second of CPU each, measured), which is
// most of what splitting costs. Only photos shown in more than one band are kept (a library of
// distinct photos, each in one cell, keeps nothing), one file per photo in
// DIR/.cells-<fingerprint>/, written under a temporary name and renamed, so a reader sees a
// whole cell or none. It changes no output byte (a cell read is the cell decoded). Shards
// running at the same time share the decoding too: the one decoding a photo holds an flock on
// it, and another that needs it waits (briefly, bounded) and reads the cell. Nothing depends
// on it: a lock that misbehaves (some network filesystems) costs a decode, never a result. The
// join removes the folder.
//
// Threading: `load` and `store` are called from the render's workers, for different photos.
import Glibc

final class SharedCells: CellSource, @unchecked Sendable {
    let directory: String
    /// Per photo (a grid) or drawing (a layout of frames): shown in another band too, so worth keeping.
    private let shared: [Bool]

    /// The folder a render's shared cells go in, inside the shard folder.
    static func directory(shardDirectory: String, fingerprint: String) -> String {
        (shardDirectory.hasSuffix("/") ? shardDirectory : shardDirectory + "/") + ".cells-" + fingerprint
    }

    /// nil when no photo of this render is drawn by more than one shard.
    init?(shardDirectory: String, fingerprint: String, layout: CellLayout, photoCount: Int, plan: RenderPlan,
          shards: Int) throws(TesseraError) {
        // The band (by rendered stripes) each cell row falls in: a photo in two bands is shared.
        var bands: [Range<Int>] = []
        for k in 1...shards {
            let band = try ShardBand.make(plan: plan, shard: ShardSpec(number: k, count: shards))
            let stripes = band.renderedStripes
            bands.append(stripes.isEmpty ? 0..<0
                         : stripes.lowerBound * plan.geometry.stripeHeight..<min(plan.height, stripes.upperBound * plan.geometry.stripeHeight))
        }
        // Keyed as the cell cache is: by photo for a grid, by drawing (a photo at one size) for
        // a layout of frames.
        let drawings = CellDrawings(layout: layout, photoCount: photoCount)
        var firstBand = [Int32](repeating: -1, count: drawings.count)
        var shared = [Bool](repeating: false, count: drawings.count)
        func note(_ key: Int, rows: Range<Int>) {
            guard key >= 0, key < drawings.count else { return }
            for band in bands.indices where bands[band].overlaps(rows) {
                if firstBand[key] < 0 { firstBand[key] = Int32(band) } else if firstBand[key] != Int32(band) { shared[key] = true }
            }
        }
        if let framed = layout.framed {
            for (index, frame) in framed.frames.enumerated() { note(framed.drawing(ofFrame: index), rows: Int(frame.y)..<frame.bottom) }
        } else {
            for row in 0..<layout.rows {
                let rows = row * layout.cellHeight..<(row + 1) * layout.cellHeight
                guard bands.contains(where: { $0.overlaps(rows) }) else { continue }
                for column in 0..<layout.columns { note(layout.photo(column: column, row: row), rows: rows) }
            }
        }
        guard shared.contains(true) else { return nil }
        directory = SharedCells.directory(shardDirectory: shardDirectory, fingerprint: fingerprint)
        self.shared = shared
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw .system(operation: "mkdir", errno: errno, path: directory)
        }
    }

    private func path(_ photo: Int) -> String { directory + "/\(photo).rgb" }

    /// Photo `photo`'s cell: read if another shard kept it; else decoded by `decode` (and kept,
    /// when shared). While one shard decodes a shared photo it holds an flock on
    /// `.PHOTO.lock`; another shard that wants the photo then waits for that decode (polling,
    /// at most `waitLimit` seconds, so a lock that never clears costs a decode, not a hang)
    /// and reads it. A lock dies with its process. Returns whether the cell was read.
    func fetch(_ photo: Int, into bytes: UnsafeMutableRawBufferPointer,
               decode: () throws(TesseraError) -> DecodeNotes) throws(TesseraError) -> (notes: DecodeNotes, read: Bool) {
        guard shared[photo] else { return (try decode(), false) }
        if read(photo, into: bytes) { return (DecodeNotes(), true) }
        let lock = open(directory + "/.\(photo).lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        defer { if lock >= 0 { close(lock) } }
        if lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) != 0 {
            // Another shard is decoding it: wait for its cell.
            let deadline = monotonicSeconds() + SharedCells.waitLimit
            while flock(lock, LOCK_EX | LOCK_NB) != 0 && monotonicSeconds() < deadline { usleep(2_000) }
            if read(photo, into: bytes) { return (DecodeNotes(), true) }
        }
        let notes = try decode()
        store(photo, UnsafeRawBufferPointer(bytes))
        return (notes, false)
    }

    /// How long a shard waits for another's decode of a photo before decoding it itself.
    static let waitLimit = 2.0

    private func read(_ photo: Int, into bytes: UnsafeMutableRawBufferPointer) -> Bool {
        let descriptor = open(path(photo), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var done = 0
        while done < bytes.count {
            let count = Glibc.read(descriptor, bytes.baseAddress! + done, bytes.count - done)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            done += count
        }
        return true
    }

    /// Keeps a decoded cell for the other shards. A failure to write is not an error: the
    /// cell is only an accelerator.
    private func store(_ photo: Int, _ bytes: UnsafeRawBufferPointer) {
        guard access(path(photo), F_OK) != 0 else { return }
        let temporary = directory + "/.\(photo).\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return }
        var done = 0
        var failed = false
        while done < bytes.count {
            let count = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { failed = true; break }
            done += count
        }
        close(descriptor)
        if failed || rename(temporary, path(photo)) != 0 { unlink(temporary) }
    }
}
