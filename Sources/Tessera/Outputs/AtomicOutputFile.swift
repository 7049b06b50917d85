// AtomicOutputFile.swift — an output file that appears under its name only when complete.
//
// The bytes go to an anonymous O_TMPFILE in the destination's directory (same filesystem, so the
// final step is a rename, not a copy). `commit()` fsyncs, links it under a hidden temporary name
// and swaps that with the destination (OutputCommit: the old file, now under the hidden name, is
// removed once every output of the render is in place, or swapped back if one fails), or renames
// it there when nothing stands there. Until then an existing file at the destination is left
// untouched, and a crash leaves nothing visible. Where the filesystem has no O_TMPFILE, a hidden
// named temporary (".NAME.tessera-PID-XXXXXX.tmp") is used instead and removed by `discard()`.
// Either way a named file exists only briefly; if the process dies then, the next run removes it
// (StaleTemporaries), since the pid in its name is no longer alive.
//
// Drop-behind: a 300 MB output would otherwise sit in the page cache as dirty pages charged to
// the process's memory cgroup. Every `flushChunkBytes`, writeback of the previous chunk starts,
// and the chunk before that is waited for and dropped from the cache.
//
// A writer that seeks (libtiff, which writes a page's directory after its tiles and rewrites
// the link to it) opens the file `readable` and uses `write(_:at:)` and `read(into:at:)`; the
// drop-behind then follows the furthest byte written, and a rewrite of an earlier byte only
// dirties its page again (the commit's fsync writes it).
//
// Threading: one thread (the writer) uses an instance.
import Glibc

final class AtomicOutputFile {
    let destination: String
    let directory: String
    private let file: FileDescriptor
    /// The hidden named temporary, when O_TMPFILE was not available.
    private var namedTemporary: String?
    private(set) var bytesWritten: Int64 = 0
    private var flushedChunks: Int64 = 0
    private var committed = false
    static let flushChunkBytes: Int64 = 8 << 20

    /// `readable`: the file is opened for reading too (`read(into:at:)`).
    init(destination: String, readable: Bool = false) throws(TesseraError) {
        try OutputDestination.checkReplaceable(destination, role: "the output")
        self.destination = destination
        directory = parentDirectory(of: destination)
        let base = destination.split(separator: "/").last.map(String.init) ?? "output"
        (file, namedTemporary) = try FileDescriptor.openUnnamed(in: directory, prefix: base + ".", access: readable ? O_RDWR : O_WRONLY,
                                                                mode: 0o644, label: destination)
        // Held while this process has the file: the hidden name it is linked under before the
        // rename (or a fallback named temporary) is not taken for abandoned (StaleTemporaries).
        _ = try? file.tryLock()
    }

    deinit {
        if !committed { discard() }
    }

    /// Appends `bytes`, dropping older written chunks from the page cache as it goes.
    func append(_ bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        try file.writeAll(bytes)
        bytesWritten += Int64(bytes.count)
        try dropBehind()
    }

    /// Writes `bytes` at `offset` (pwrite); `bytesWritten` is then the file's length, the end of
    /// the furthest byte written.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(TesseraError) {
        try file.writeAll(bytes, at: offset)
        bytesWritten = max(bytesWritten, offset + Int64(bytes.count))
        try dropBehind()
    }

    /// Reads up to `buffer.count` bytes at `offset` (one pread) of a file opened `readable`;
    /// returns the count read, short at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(TesseraError) -> Int {
        try file.read(into: buffer, at: offset)
    }

    /// Starts writeback of each chunk completed since the last call, and waits for and drops the
    /// chunk before it from the page cache.
    private func dropBehind() throws(TesseraError) {
        let chunk = Self.flushChunkBytes
        while (flushedChunks + 1) * chunk <= bytesWritten {
            // Start writeback of the chunk just completed; wait for and drop the one before.
            try file.flushRange(offset: flushedChunks * chunk, length: chunk, wait: false)
            if flushedChunks > 0 {
                let previous = (flushedChunks - 1) * chunk
                try file.flushRange(offset: previous, length: chunk, wait: true)
                file.dropCache(offset: previous, length: chunk)
            }
            flushedChunks += 1
        }
    }

    /// Makes the file durable and visible under `destination`, replacing what was there.
    func commit() throws(TesseraError) {
        try OutputCommit.all { commit throws(TesseraError) in try self.commit(in: commit) }
    }

    /// The same as one output of several (OutputCommit): a file it replaces is swapped out to
    /// the hidden temporary name (or moved aside to another: OutputCommit.move), put back if a
    /// later output fails, removed when all are in.
    func commit(in commit: OutputCommit) throws(TesseraError) {
        try file.sync()
        file.dropCache(offset: 0, length: 0)
        let temporary: String
        let base = destination.split(separator: "/").last.map(String.init) ?? "output"
        if let named = namedTemporary {
            temporary = named
        } else {
            temporary = directory + "/" + StaleTemporaries.name(prefix: base + ".", unique: "\(UInt32.random(in: 0...UInt32.max)).tmp")
            _ = try valueOrErrno("linkat", path: temporary) {
                system_linkat(AT_FDCWD, "/proc/self/fd/\(file.rawValue)", AT_FDCWD, temporary, AT_SYMLINK_FOLLOW)
            }.get("linkat", path: temporary)
        }
        let destination = self.destination
        var existing = stat()
        let stood = system_lstat(destination, &existing) == 0
        do throws(TesseraError) {
            if stood, (existing.st_mode & S_IFMT) == S_IFREG {
                // The old file is swapped to `temporary` (or moved aside where the filesystem
                // cannot swap), put back if a later output fails, removed once all are in.
                let aside = directory + "/" + StaleTemporaries.name(prefix: base + ".", unique: "\(UInt32.random(in: 0...UInt32.max)).tmp")
                let move = try commit.move(temporary, to: destination, aside: aside)
                let replaced = move.replaced ?? temporary
                commit.onUndo { if move.undo() { removeFile(temporary) } }
                commit.afterwards { removeFile(replaced) }
            } else {
                // Nothing stood there (or something not a file, which the rename replaces or refuses).
                try commit.willMove(temporary, to: destination, exchange: false)
                try renameFile(temporary, to: destination)
                if !stood { commit.onUndo { removeFile(destination) } }
            }
        } catch {
            removeFile(temporary)
            throw error
        }
        namedTemporary = nil
        committed = true
        file.close()
    }

    /// Abandons the output: the anonymous file vanishes on close; a named temporary is removed.
    func discard() {
        guard !committed else { return }
        committed = true
        file.close()
        if let named = namedTemporary { removeFile(named) }
    }
}
