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
// The shard folder is untrusted (often writable by other users and jobs), so the cells are too.
// Every name is opened in the folder's own descriptor (openat: a folder swapped for a symlink
// after it was checked is never followed), without following a symlink and without waiting (a
// FIFO at a cell's name would hold its open forever, past SIGTERM); only a regular file of
// exactly a cell and its CRC-32C is read, and one that is not is decoded again and replaced.
// A `.cells-` folder that is a symlink, or not a folder, turns the sharing off. What a checksum
// cannot stop: someone who can write the folder and recompute the checksums can change a
// photo's pixels in the shards that read them, as they could in a part (shards.md).
//
// Threading: `load` and `store` are called from the render's workers, for different photos.
import Glibc

final class SharedCells: CellSource, @unchecked Sendable {
    let directory: String
    /// Per photo (a grid) or drawing (a layout of frames): shown in another band too, so worth keeping.
    private let shared: [Bool]
    /// The folder, opened once; every cell and lock is named relative to it.
    private let folder: Int32

    /// The folder a render's shared cells go in, inside the shard folder.
    static func directory(shardDirectory: String, fingerprint: String) -> String {
        precondition(Fingerprint.isWellFormed(fingerprint), "a fingerprint names a folder only in its own shape")
        return (shardDirectory.hasSuffix("/") ? shardDirectory : shardDirectory + "/") + ".cells-" + fingerprint
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
        // Not a folder of its own (a symlink to elsewhere, a file, a FIFO): share nothing
        // rather than read or write through it; each photo is decoded.
        folder = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard folder >= 0 else { return nil }
    }

    deinit { close(folder) }

    private func name(_ photo: Int) -> String { "\(photo).rgb" }

    /// Opens `name` in the folder without following a symlink or waiting on a FIFO; only a
    /// regular file is kept (its descriptor), anything else is closed: -1.
    private func openRegular(_ name: String, _ flags: Int32, mode: mode_t = 0) -> (descriptor: Int32, bytes: Int) {
        let descriptor = openat(folder, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode)
        guard descriptor >= 0 else { return (-1, 0) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            return (-1, 0)
        }
        return (descriptor, Int(info.st_size))
    }

    /// Photo `photo`'s cell: read if another shard kept it; else decoded by `decode` (and kept,
    /// when shared). While one shard decodes a shared photo it holds an flock on
    /// `.PHOTO.lock`; another shard that wants the photo then waits for that decode (polling,
    /// at most `waitLimit` seconds, so a lock that never clears costs a decode, not a hang)
    /// and reads it. A lock dies with its process. Returns whether the cell was read.
    func fetch(_ photo: Int, into bytes: UnsafeMutableRawBufferPointer,
               decode: () throws(TesseraError) -> DecodeNotes) throws(TesseraError) -> (notes: DecodeNotes, read: Bool) {
        guard shared[photo] else { return (try decode(), false) }
        if read(photo, into: bytes) { return (DecodeNotes(), true) }
        let lock = openRegular(".\(photo).lock", O_RDWR | O_CREAT, mode: 0o644).descriptor
        defer { if lock >= 0 { close(lock) } }
        if lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) != 0 {
            // Another shard is decoding it: wait for its cell.
            let deadline = monotonicSeconds() + SharedCells.waitLimit
            while flock(lock, LOCK_EX | LOCK_NB) != 0 && monotonicSeconds() < deadline { usleep(2_000) }
            if read(photo, into: bytes) { return (DecodeNotes(), true) }
        }
        let notes = try decode()
        // A photo drawn with a warning (a truncated file drawn in part) is not kept: each
        // shard that draws it decodes it and says so, and a strict shard refuses it.
        if notes.warningCount == 0 { store(photo, UnsafeRawBufferPointer(bytes)) }
        return (notes, false)
    }

    /// How long a shard waits for another's decode of a photo before decoding it itself.
    static let waitLimit = 2.0

    /// Reads a kept cell: a regular file of exactly the cell and its checksum, whose checksum
    /// holds. Anything else is not read (the photo is decoded, and its cell kept anew).
    private func read(_ photo: Int, into bytes: UnsafeMutableRawBufferPointer) -> Bool {
        let (descriptor, size) = openRegular(name(photo), O_RDONLY)
        guard descriptor >= 0 else { return false }
        let file = FileDescriptor(rawValue: descriptor, path: directory + "/" + name(photo))
        defer { file.close() }
        var trailer: UInt32 = 0
        guard size == bytes.count + 4, (try? file.readAll(into: bytes, at: 0)) != nil,
              (try? withUnsafeMutableBytes(of: &trailer, { (raw) throws(TesseraError) in try file.readAll(into: raw, at: Int64(bytes.count)) })) != nil
        else { return false }
        return UInt32(littleEndian: trailer) == CRC32C.checksum(UnsafeRawBufferPointer(bytes))
    }

    /// Keeps a decoded cell for the other shards, its CRC-32C after it, under a temporary name
    /// renamed over the cell's (replacing one that could not be read). A failure to write is
    /// not an error: the cell is only an accelerator.
    private func store(_ photo: Int, _ bytes: UnsafeRawBufferPointer) {
        let temporary = ".\(photo).\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = openat(folder, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return }
        let file = FileDescriptor(rawValue: descriptor, path: directory + "/" + temporary)
        var trailer = CRC32C.checksum(bytes).littleEndian
        let written = (try? file.writeAll(bytes)) != nil
            && (try? withUnsafeBytes(of: &trailer, { (raw) throws(TesseraError) in try file.writeAll(raw) })) != nil
        file.close()
        if !written || renameat(folder, temporary, folder, name(photo)) != 0 { unlinkat(folder, temporary, 0) }
    }
}
