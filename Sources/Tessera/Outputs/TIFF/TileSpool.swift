// TileSpool.swift — finished tiles kept in an unnamed temporary file until they can be copied
// where they belong, with a small index in memory.
//
// A pyramidal TIFF's pages must each be written whole, one after the other (libtiff holds one
// directory at a time), but the stripes make every page's tiles at once. The TIFF takes page 0's
// tiles as they come; the smaller pages' tiles (a third of the bytes, at most) wait here, and
// `PyramidTIFFFile.finish` copies them in page by page. The index is 8 bytes a tile (offset and
// length packed), the tiles themselves are on disk: memory does not grow with the picture's
// bytes. The file is anonymous (O_TMPFILE, or unlinked at once), so it goes when closed,
// however the process ends. As with an output file (AtomicOutputFile), written chunks are sent
// to the disk and dropped from the page cache as the spool grows, so gigabytes of spooled tiles
// are not dirty pages charged to the process's memory cgroup.
//
// Threading: `add` may be called from several threads at once (the pyramid's encoding jobs); the
// bytes are written at offsets claimed under `lock`, outside it. `read` and `close` are called by
// one thread once the adds have returned.

final class TileSpool: @unchecked Sendable {
    private let file: FileDescriptor
    private let lock = Mutex()
    // Protected by `lock`.
    private var length: Int64 = 0
    private var flushedChunks: Int64 = 0
    /// Per spooled page: (offset << 24 | length) of each tile by number, 0 until added.
    private var index: [[UInt64]]
    private var closed = false

    /// The most one tile may be: its length must fit the index's 24 bits.
    static let maximumTileBytes = (1 << 24) - 1

    /// A spool in `directory` for pages of `tileCounts[i]` tiles each.
    init(directory: String, tileCounts: [Int]) throws(TesseraError) {
        file = try FileDescriptor.openAnonymousTemporary(in: directory)
        index = tileCounts.map { [UInt64](repeating: 0, count: $0) }
    }

    deinit { close() }

    /// The bytes the index holds (what the plan counts).
    static func indexBytes(tileCounts: [Int]) -> Int { tileCounts.reduce(0) { $0 + $1 * 8 } }

    /// Bytes spooled so far.
    var bytesSpooled: Int64 { lock.withLock { length } }

    /// Keeps tile `tile` of spooled page `page`. Thread-safe.
    func add(page: Int, tile: Int, bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        guard bytes.count > 0, bytes.count <= Self.maximumTileBytes else {
            throw .encodeFailed(path: file.path, reason: "a tile of \(bytes.count) bytes cannot be spooled")
        }
        let offset: Int64 = lock.withLock {
            let offset = length
            length += Int64(bytes.count)
            return offset
        }
        try file.writeAll(bytes, at: offset)
        let flush: Int64? = lock.withLock {
            index[page][tile] = UInt64(offset) << 24 | UInt64(bytes.count)
            // A chunk is sent once the spool is a whole chunk past it: writes still in flight
            // are in the chunk after it (and one that is not only dirties its page again).
            guard (flushedChunks + 2) * AtomicOutputFile.flushChunkBytes <= length else { return nil }
            flushedChunks += 1
            return flushedChunks - 1
        }
        if let flush { try dropBehind(chunk: flush) }
    }

    /// Starts writeback of chunk `chunk`, and waits for and drops the one before it.
    private func dropBehind(chunk: Int64) throws(TesseraError) {
        let size = AtomicOutputFile.flushChunkBytes
        try file.flushRange(offset: chunk * size, length: size, wait: false)
        guard chunk > 0 else { return }
        try file.flushRange(offset: (chunk - 1) * size, length: size, wait: true)
        file.dropCache(offset: (chunk - 1) * size, length: size)
    }

    /// The length of tile `tile` of page `page` (0 when it was never added).
    func tileBytes(page: Int, tile: Int) -> Int { lock.withLock { Int(index[page][tile] & 0xFF_FFFF) } }

    /// Reads tile `tile` of page `page` into `buffer` (at least `tileBytes` long); returns its length.
    func read(page: Int, tile: Int, into buffer: UnsafeMutableRawBufferPointer) throws(TesseraError) -> Int {
        let entry = lock.withLock { index[page][tile] }
        let count = Int(entry & 0xFF_FFFF)
        guard count > 0 else {
            throw .encodeFailed(path: file.path, reason: "tile \(tile) of page \(page) was never made")
        }
        try file.readAll(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), at: Int64(entry >> 24))
        return count
    }

    /// Closes the file (it vanishes).
    func close() {
        lock.withLock {
            guard !closed else { return }
            closed = true
            file.close()
        }
    }
}
