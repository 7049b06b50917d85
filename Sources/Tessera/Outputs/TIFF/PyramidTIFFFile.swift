// PyramidTIFFFile.swift — a tiled pyramidal TIFF written with libtiff from finished JPEG tiles
// (tessera_tiff_writer.c), in bounded memory, appearing under its name only when complete.
//
// Why page 0 goes straight in and the others wait in a spool: libtiff writes one image file
// directory at a time — a page's tags and its table of tile offsets are held until the page is
// ended, and only then can the next page begin — while the stripes make the tiles of every page
// at once. So page 0's tiles (three quarters of the bytes) go into the TIFF as they are made,
// in whatever order the encoding jobs finish them (each tile's offset is recorded in the
// directory); the smaller pages' tiles go to an unnamed temporary file (TileSpool) with an index
// of 8 bytes a tile. `finish` ends page 0, then copies each smaller page in, tile by tile, as a
// further directory marked reduced-resolution. Memory is libtiff's table for the page being
// written (16 bytes a tile), the spool's index and one tile's buffer; never the picture.
//
// The file is an AtomicOutputFile (opened for reading too: libtiff reads a directory's link
// back when it chains the next): it appears under its name only once committed, and a failed
// or cancelled render leaves what was there. BigTIFF is chosen up front
// (PyramidTIFFGeometry.needsBigTIFF).
//
// Threading: `add` may be called from several threads at once (the pyramid's encoding jobs);
// libtiff is called only under `lock`. `finish`, `commit` and `discard` are called by one thread
// (the render's writer) once the adds have returned.
import CTesseraShims

final class PyramidTIFFFile: @unchecked Sendable {
    let destination: String
    let geometry: PyramidTIFFGeometry
    private let subsampling: ChromaSubsampling
    private let output: AtomicOutputFile
    private let io: FileAccess
    private let spool: TileSpool
    private let lock = Mutex()
    // Protected by `lock`.
    private var writer: OpaquePointer?
    private var state = State.writing
    private var failure: TesseraError?
    private var fullPageTiles = 0

    private enum State { case writing, finished, committed, discarded }

    /// What the page directories say of the file's maker (the text every Tessera JPEG carries).
    static let description = JPEGMarks.outputComment

    /// Starts a TIFF that will replace `destination` when committed; the smaller pages' tiles
    /// wait in `temporaryDirectory`. `bigTIFF`: BigTIFF or not (nil: as the geometry needs; the
    /// tests write small BigTIFFs).
    init(destination: String, geometry: PyramidTIFFGeometry, subsampling: ChromaSubsampling,
         temporaryDirectory: String, bigTIFF: Bool? = nil) throws(TesseraError) {
        self.destination = destination
        self.geometry = geometry
        self.subsampling = subsampling
        output = try AtomicOutputFile(destination: destination, readable: true)
        io = FileAccess(output)
        do throws(TesseraError) {
            spool = try TileSpool(directory: temporaryDirectory, tileCounts: geometry.pages.dropFirst().map { $0.columns * $0.rows })
        } catch {
            output.discard()
            throw error
        }
        var message = [CChar](repeating: 0, count: 300)
        writer = tessera_tiff_writer_open(FileAccess.write, FileAccess.read, Unmanaged.passUnretained(io).toOpaque(),
                                          (bigTIFF ?? geometry.needsBigTIFF(subsampling: subsampling)) ? 1 : 0, &message, message.count)
        do throws(TesseraError) {
            guard writer != nil else { throw io.error ?? .encodeFailed(path: destination, reason: cMessage(message)) }
            try beginPage(0)
        } catch {
            discard()
            throw error
        }
    }

    deinit { discard() }

    /// Bytes of the file so far.
    var bytesWritten: Int64 { lock.withLock { output.bytesWritten } }
    /// Bytes waiting in the spool so far.
    var bytesSpooled: Int64 { spool.bytesSpooled }

    /// Takes tile `tile` (row * columns + column) of page `page`: page 0's into the file, the
    /// others' into the spool. Thread-safe.
    func add(page: Int, tile: Int, bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        guard page == 0 else {
            try spool.add(page: page - 1, tile: tile, bytes: bytes)
            return
        }
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw failure }
        precondition(state == .writing, "PyramidTIFFFile.add after finish")
        do throws(TesseraError) {
            try check(tessera_tiff_writer_tile(writer, UInt32(tile), bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count))
        } catch {
            failure = error
            throw error
        }
        fullPageTiles += 1
    }

    /// Ends page 0, copies the smaller pages in from the spool, and completes the file (still
    /// invisible). Throws unless every tile of page 0 came.
    func finish() throws(TesseraError) {
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw failure }
        guard fullPageTiles == geometry.fullPageTileCount else {
            throw .encodeFailed(path: destination, reason: "\(fullPageTiles) of page 0's \(geometry.fullPageTileCount) tiles were made")
        }
        state = .finished
        try check(tessera_tiff_writer_end_page(writer))
        var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: geometry.tileSize * geometry.tileSize * 3, alignment: 16)
        defer { buffer.deallocate() }
        for (number, page) in geometry.pages.enumerated().dropFirst() {
            try beginPage(number)
            for tile in 0..<(page.columns * page.rows) {
                let count = spool.tileBytes(page: number - 1, tile: tile)
                if count > buffer.count {
                    buffer.deallocate()
                    buffer = .allocate(byteCount: count, alignment: 16)
                }
                let length = try spool.read(page: number - 1, tile: tile, into: buffer)
                try check(tessera_tiff_writer_tile(writer, UInt32(tile), buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), length))
            }
            try check(tessera_tiff_writer_end_page(writer))
        }
        spool.close()
        var message = [CChar](repeating: 0, count: 300)
        let status = tessera_tiff_writer_close(writer, &message, message.count)
        writer = nil
        if status != 0 { throw io.error ?? .encodeFailed(path: destination, reason: "libtiff: " + cMessage(message)) }
    }

    /// Makes the finished file durable and visible under `destination`.
    func commit(in commit: OutputCommit) throws(TesseraError) {
        lock.lock()
        defer { lock.unlock() }
        precondition(state == .finished && writer == nil, "PyramidTIFFFile.commit before finish")
        try output.commit(in: commit)
        state = .committed
    }

    /// Abandons the file: nothing appears under `destination`, the spool vanishes.
    func discard() {
        lock.withLock {
            guard state != .committed && state != .discarded else { return }
            state = .discarded
            if let writer { tessera_tiff_writer_abandon(writer) }
            writer = nil
            spool.close()
            output.discard()
        }
    }

    /// The tags of page `number` (0: the full picture), set on the directory libtiff holds.
    private func beginPage(_ number: Int) throws(TesseraError) {
        let page = geometry.pages[number]
        let factors = subsampling.lumaFactors
        let status = Self.description.withCString { description in
            "Tessera".withCString { software in
                var tags = tessera_tiff_page(width: UInt32(page.width), height: UInt32(page.height),
                                             tile_width: UInt32(geometry.tileSize), tile_height: UInt32(geometry.tileSize),
                                             subsampling_h: UInt16(factors.h), subsampling_v: UInt16(factors.v),
                                             reduced: number > 0 ? 1 : 0, description: description, software: software)
                return tessera_tiff_writer_begin_page(writer, &tags)
            }
        }
        try check(status)
    }

    /// Throws for a failed libtiff call: the file's own error when a read or write failed (it
    /// names the call, errno and path), else libtiff's message.
    private func check(_ status: Int32) throws(TesseraError) {
        guard status != 0 else { return }
        if let error = io.error { throw error }
        throw .encodeFailed(path: destination, reason: "libtiff: " + String(cString: tessera_tiff_writer_message(writer)))
    }
}

/// The output file as libtiff's reads and writes reach it (C callbacks with this as context),
/// and the first error they met. Used under PyramidTIFFFile's lock only.
private final class FileAccess {
    let output: AtomicOutputFile
    var error: TesseraError?

    init(_ output: AtomicOutputFile) { self.output = output }

    static let write: tessera_tiff_write_at = { context, bytes, count, offset in
        let access = Unmanaged<FileAccess>.fromOpaque(context!).takeUnretainedValue()
        do throws(TesseraError) {
            try access.output.write(UnsafeRawBufferPointer(start: bytes, count: count), at: Int64(offset))
            return 0
        } catch {
            if access.error == nil { access.error = error }
            return -1
        }
    }

    static let read: tessera_tiff_read_at = { context, bytes, count, offset in
        let access = Unmanaged<FileAccess>.fromOpaque(context!).takeUnretainedValue()
        do throws(TesseraError) {
            return Int64(try access.output.read(into: UnsafeMutableRawBufferPointer(start: bytes, count: count), at: Int64(offset)))
        } catch {
            if access.error == nil { access.error = error }
            return -1
        }
    }
}
