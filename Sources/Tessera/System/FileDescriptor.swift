// FileDescriptor.swift — typed operations on an open file, each one wrapping one syscall.
//
// Every failure throws `TesseraError.system(operation:errno:path:)` with the path the descriptor
// was opened for, so an error says which file and which call.
import Glibc

/// An open file descriptor and the path it was opened for (for error messages).
/// Not owning: call `close()` exactly once.
public struct FileDescriptor: Sendable {
    public let rawValue: Int32
    public let path: String

    init(rawValue: Int32, path: String) {
        self.rawValue = rawValue
        self.path = path
    }

    /// open(2) with O_CLOEXEC added.
    static func open(_ path: String, flags: Int32, mode: mode_t = 0o644) throws(TesseraError) -> FileDescriptor {
        let fd = try valueOrErrno("open", path: path) { system_open(path, flags | O_CLOEXEC, mode) }.get("open", path: path)
        return FileDescriptor(rawValue: fd, path: path)
    }

    /// Opens a regular file for reading without following it into a FIFO or device:
    /// O_NONBLOCK keeps open(2) from waiting on a FIFO's writer, and fstat rejects anything that
    /// is not a regular file before a byte is read.
    static func openRegularFileForReading(_ path: String) throws(TesseraError) -> (FileDescriptor, stat) {
        try openRegularFileForReading(PathBytes(path))
    }

    /// The same, for a path given as bytes (any name the kernel allows).
    static func openRegularFileForReading(_ bytes: PathBytes) throws(TesseraError) -> (FileDescriptor, stat) {
        let path = bytes.display
        let raw = try valueOrErrno("open", path: path) { system_open(bytes, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0) }
            .get("open", path: path)
        let fd = FileDescriptor(rawValue: raw, path: path)
        let info: stat
        do {
            info = try fd.status()
        } catch {
            fd.close()
            throw error
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            fd.close()
            throw TesseraError.unreadablePhoto(path: path, reason: "not a regular file")
        }
        return (fd, info)
    }

    /// A new file in `directory` with no name: O_TMPFILE where the filesystem supports it.
    /// Elsewhere a hidden file `.<prefix>tessera-<pid>-XXXXXX.tmp` is created (mkostemps) and its name
    /// returned, for the caller to unlink at once or to rename when done. The pid lets a later
    /// run remove it if this process dies first (`StaleTemporaries`). `label` names it in errors.
    static func openUnnamed(in directory: String, prefix: String, access: Int32, mode: mode_t,
                            label: String) throws(TesseraError) -> (file: FileDescriptor, fallbackName: String?) {
        switch valueOrErrno("open", path: directory, { system_open_tmpfile(directory, access | O_CLOEXEC, mode) }) {
        case .success(let fd):
            return (FileDescriptor(rawValue: fd, path: label), nil)
        case .failure(let code) where code.rawValue == EOPNOTSUPP || code.rawValue == EISDIR || code.rawValue == EINVAL:
            break  // no O_TMPFILE on this filesystem: fall back below
        case .failure(let code):
            throw TesseraError.system(operation: "open(O_TMPFILE)", errno: code.rawValue, path: directory)
        }
        var template = Array((directory + "/" + StaleTemporaries.name(prefix: prefix, unique: "XXXXXX.tmp")).utf8CString)
        let fd = try template.withUnsafeMutableBufferPointer { buffer throws(TesseraError) -> Int32 in
            try valueOrErrno("mkstemp", path: directory) { system_mkstemp(buffer.baseAddress!) }.get("mkstemp", path: directory)
        }
        _ = system_fchmod(fd, mode & ~currentUmask())
        let name = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (FileDescriptor(rawValue: fd, path: label), name)
    }

    /// An anonymous read-write temporary file in `directory`, never visible under a name after
    /// this returns (O_TMPFILE, or mkostemp followed at once by unlink).
    static func openAnonymousTemporary(in directory: String) throws(TesseraError) -> FileDescriptor {
        let (file, name) = try openUnnamed(in: directory, prefix: "", access: O_RDWR, mode: 0o600,
                                           label: directory + "/(temporary file)")
        if let name { removeFile(name) }
        return file
    }

    /// close(2), never retried (see Syscalls.swift). Errors are ignored: by then nothing can be done.
    func close() { _ = system_close(rawValue) }

    /// fstat(2).
    func status() throws(TesseraError) -> stat {
        var info = stat()
        _ = try valueOrErrno("fstat", path: path) { system_fstat(rawValue, &info) }.get("fstat", path: path)
        return info
    }

    /// read(2) into `buffer`; returns the count read, 0 at end of file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(TesseraError) -> Int {
        return try valueOrErrno("read", path: path) { system_read(rawValue, buffer.baseAddress, buffer.count) }.get("read", path: path)
    }

    /// pread(2) once; returns the count read (short near the end of the file).
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(TesseraError) -> Int {
        return try valueOrErrno("pread", path: path) { system_pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
            .get("pread", path: path)
    }

    /// pread(2) until `buffer` is full; throws on a short file.
    func readAll(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(TesseraError) {
        var done = 0
        while done < buffer.count {
            let n = try valueOrErrno("pread", path: path) {
                system_pread(rawValue, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            }.get("pread", path: path)
            if n == 0 { throw TesseraError.system(operation: "pread", errno: EIO, path: path) }
            done += n
        }
    }

    /// Reads `count` consecutive blocks of `blockBytes` from `offset` into the blocks at
    /// `target`, `target + stride`, ... (rows of a cell into rows of a stripe): one preadv(2)
    /// a call for up to 64 rows, pread(2) for what a short read leaves.
    func readBlocks(_ count: Int, blockBytes: Int, at offset: Int64, into target: UnsafeMutableRawPointer, stride: Int) throws(TesseraError) {
        var block = 0
        var vectors = [iovec](repeating: iovec(), count: min(count, 64))
        while block < count {
            let batch = min(count - block, 64)
            for i in 0..<batch { vectors[i] = iovec(iov_base: target + (block + i) * stride, iov_len: blockBytes) }
            let start = off_t(offset) + off_t(block * blockBytes)
            let n = try valueOrErrno("preadv", path: path) {
                vectors.withUnsafeBufferPointer { system_preadv(rawValue, $0.baseAddress!, Int32(batch), start) }
            }.get("preadv", path: path)
            if n == 0 { throw TesseraError.system(operation: "preadv", errno: EIO, path: path) }
            // Whole blocks read, then the rest of a block a short read cut.
            let whole = n / blockBytes, part = n % blockBytes
            block += whole
            if part > 0 {
                try readAll(into: UnsafeMutableRawBufferPointer(start: target + block * stride + part, count: blockBytes - part),
                            at: offset + Int64(block * blockBytes + part))
                block += 1
            }
        }
    }

    /// write(2) until every byte of `bytes` is written.
    /// flock(2) LOCK_EX | LOCK_NB: takes the file's exclusive lock if no other open file holds it
    /// (returns false when one does). Held until every descriptor of this open file is closed;
    /// released by the kernel when the process dies, however it dies.
    func tryLock() throws(TesseraError) -> Bool {
        switch valueOrErrno("flock", path: path, { system_flock(rawValue, LOCK_EX | LOCK_NB) }) {
        case .success: return true
        case .failure(let code) where code.rawValue == EWOULDBLOCK: return false
        case .failure(let code): throw TesseraError.system(operation: "flock", errno: code.rawValue, path: path)
        }
    }

    func writeAll(_ bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        var done = 0
        while done < bytes.count {
            let n = try valueOrErrno("write", path: path) {
                system_write(rawValue, bytes.baseAddress! + done, bytes.count - done)
            }.get("write", path: path)
            done += n
        }
    }

    /// pwrite(2) until every byte of `bytes` is written at `offset`.
    func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(TesseraError) {
        var done = 0
        while done < bytes.count {
            let n = try valueOrErrno("pwrite", path: path) {
                system_pwrite(rawValue, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }.get("pwrite", path: path)
            done += n
        }
    }

    /// fallocate(2) mode 0: reserves disk blocks for the range so that writing through a mapping
    /// cannot hit SIGBUS on a full disk. ENOSPC is reported here instead.
    func reserve(offset: Int64, length: Int64) throws(TesseraError) {
        _ = try valueOrErrno("fallocate", path: path) { system_fallocate_reserve(rawValue, off_t(offset), off_t(length)) }
            .get("fallocate", path: path)
    }

    /// fallocate(2) with FALLOC_FL_PUNCH_HOLE: frees the range's disk blocks and page cache.
    /// Returns false where the filesystem cannot punch holes (the caller falls back to fadvise).
    @discardableResult
    func punchHole(offset: Int64, length: Int64) -> Bool {
        if case .success = valueOrErrno("fallocate", path: path, { system_fallocate_punch_hole(rawValue, off_t(offset), off_t(length)) }) {
            return true
        }
        return false
    }

    /// posix_fadvise(2) POSIX_FADV_DONTNEED: drops the range's clean page cache, so it stops
    /// counting against a memory cgroup. Advisory: failures are ignored.
    func dropCache(offset: Int64, length: Int64) {
        _ = valueOrErrno("posix_fadvise", path: path) { system_posix_fadvise(rawValue, off_t(offset), off_t(length), POSIX_FADV_DONTNEED) }
    }

    /// posix_fadvise(2) POSIX_FADV_RANDOM (`true`) or POSIX_FADV_NORMAL: whether the kernel reads
    /// ahead of this descriptor's reads. Advisory: failures are ignored.
    func adviseRandomAccess(_ random: Bool) {
        _ = valueOrErrno("posix_fadvise", path: path) {
            system_posix_fadvise(rawValue, 0, 0, random ? POSIX_FADV_RANDOM : POSIX_FADV_NORMAL)
        }
    }

    /// sync_file_range(2): starts writeback of the range, and with `wait` waits for it, so that
    /// the pages become clean and `dropCache` can release them.
    func flushRange(offset: Int64, length: Int64, wait: Bool) throws(TesseraError) {
        _ = try valueOrErrno("sync_file_range", path: path) { system_sync_file_range(rawValue, off_t(offset), off_t(length), wait) }
            .get("sync_file_range", path: path)
    }

    /// ftruncate(2).
    func truncate(to length: Int64) throws(TesseraError) {
        _ = try valueOrErrno("ftruncate", path: path) { system_ftruncate(rawValue, off_t(length)) }.get("ftruncate", path: path)
    }

    /// fsync(2).
    func sync() throws(TesseraError) {
        _ = try valueOrErrno("fsync", path: path) { system_fsync(rawValue) }.get("fsync", path: path)
    }
}

/// Free space for unprivileged users on the filesystem holding `path` (statvfs f_bavail x f_frsize).
/// Filesystems that report no size at all (ramfs, some FUSE file systems: 0 blocks in all)
/// count as unlimited: their free space is unknown, not nil, and a full one fails the write.
public func freeDiskBytes(_ path: String) throws(TesseraError) -> Int64 {
    var info = statvfs()
    _ = try valueOrErrno("statvfs", path: path) { system_statvfs(path, &info) }.get("statvfs", path: path)
    return info.f_blocks == 0 ? Int64.max : Int64(info.f_bavail) * Int64(info.f_frsize)
}

/// Free inodes for unprivileged users on the filesystem holding `path` (statvfs f_favail).
/// Filesystems without an inode limit (btrfs reports 0 total) count as unlimited.
public func freeInodes(_ path: String) throws(TesseraError) -> Int64 {
    var info = statvfs()
    _ = try valueOrErrno("statvfs", path: path) { system_statvfs(path, &info) }.get("statvfs", path: path)
    return info.f_files == 0 ? Int64.max : Int64(info.f_favail)
}

/// mkdir(2).
func makeDirectory(_ path: String, mode: mode_t = 0o755) throws(TesseraError) {
    _ = try valueOrErrno("mkdir", path: path) { system_mkdir(path, mode) }.get("mkdir", path: path)
}

/// Makes `path` and any folder above it that is missing (mkdir -p), for a cache's folder: a
/// cache folder given two levels deep lost every index, with a warning at every mosaic and a silent
/// rescan at every grid. Best effort: what cannot be made shows when the cache is written.
func makeDirectories(_ path: String, mode: mode_t = 0o755) {
    if case .success(let info) = fileStatus(path), (info.st_mode & S_IFMT) == S_IFDIR { return }
    let parent = parentDirectory(of: path)
    if parent != path && parent != "." && parent != "/" { makeDirectories(parent, mode: mode) }
    _ = try? makeDirectory(path, mode: mode)
}

/// Writes `bytes` to a new file at `path` (O_EXCL: never over an existing one).
func writeNewFile(_ path: String, _ bytes: UnsafeRawBufferPointer, mode: mode_t = 0o644) throws(TesseraError) {
    let file = try FileDescriptor.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: mode)
    defer { file.close() }
    try file.writeAll(bytes)
}

/// Removes `path` and, if it is a directory, everything under it. Symlinks are removed, never
/// followed. Best effort: returns false if anything could not be removed.
///
/// The walk goes through directory descriptors (openat with O_NOFOLLOW, unlinkat), never through
/// paths below `path`: a folder it is emptying that someone swaps for a symbolic link (the stale
/// temporaries it removes may sit in /tmp) has the link removed, not what it points to. Names
/// are bytes, so one that is not UTF-8 goes too. At most `removeTreeDepth` levels deep.
@discardableResult
func removeTree(_ path: String) -> Bool {
    var info = stat()
    guard system_lstat(path, &info) == 0 else { return errno == ENOENT }
    if (info.st_mode & S_IFMT) != S_IFDIR { return system_unlink(path) == 0 || errno == ENOENT }
    let folder = system_open(PathBytes(path), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
    guard folder >= 0 else { return system_unlink(path) == 0 }  // swapped for a link or a file since
    let complete = removeContents(of: folder, depth: 0, last: Array(StaleTemporaries.lockName.utf8))
    _ = system_close(folder)
    return system_rmdir(path) == 0 && complete
}

/// Deeper than any folder tessera makes (a pyramid's is three), shallow enough for descriptors.
let removeTreeDepth = 32

/// Names listed at a time by removeContents: a folder of a million entries (an old pyramid's
/// level, a planted folder) is emptied a batch at a time, never listed whole (a helper's attack:
/// the listing of a million old tiles OOM-killed a render at 80 MiB after its new pyramid was in
/// place, and left the old one behind for good).
let removeTreeBatch = 16_384

/// Removes everything in the open directory `folder`, through its descriptor. `last` (a name at
/// the top) goes after everything else: a staging folder's lock file, so a removal cut short
/// leaves a folder still known as a stale temporary, removed by a later run.
private func removeContents(of folder: Int32, depth: Int, last: [UInt8]? = nil) -> Bool {
    var complete = true
    // Names that could not be removed, skipped by the next batches (bounded: past it, give up).
    var failed: Set<[UInt8]> = []
    var keptLast = false
    // Listings that held all that was left, every name of which was then removed: the next
    // finds the folder empty, unless removing makes names (on FUSE, a file still open is renamed
    // .fuse_hiddenXXXX when removed, and that one again: a removal spun forever).
    var wholeListings = 0
    while failed.count < removeTreeBatch {
        // Listed first, removed after: readdir over a folder being emptied may skip entries.
        // Each batch lists the folder again from its start, where only what is left remains.
        var names: [[UInt8]] = []
        let listing = system_dup(folder)
        guard listing >= 0, let directory = system_fdopendir(listing) else {
            if listing >= 0 { _ = system_close(listing) }
            return false
        }
        // From the start: the duplicate shares the folder's offset, where the last batch ended.
        system_rewinddir(directory)
        while names.count < removeTreeBatch, let entry = system_readdir(directory) {
            let field = UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!
            let name = Array(UnsafeRawBufferPointer(start: field, count: strnlen(field.assumingMemoryBound(to: CChar.self), 256)))
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] || failed.contains(name) { continue }
            if let last, name == last { keptLast = true; continue }
            names.append(name)
        }
        _ = system_closedir(directory)
        if names.isEmpty { break }
        if names.count < removeTreeBatch {
            wholeListings += 1
            if wholeListings > 3 {
                complete = false
                break
            }
        }
        for name in names where !removeEntry(name, in: folder, depth: depth) {
            failed.insert(name)
            complete = false
        }
    }
    if !failed.isEmpty { complete = false }
    // The lock goes only with the rest: a folder something stays in is still a temporary.
    if let last, keptLast, !complete || !removeEntry(last, in: folder, depth: depth) { complete = false }
    return complete
}

/// Removes the entry `name` of the open directory `folder`: a file or link unlinked, a folder
/// emptied and removed. False when something stays.
private func removeEntry(_ name: [UInt8], in folder: Int32, depth: Int) -> Bool {
    if system_unlinkat(folder, name, 0) == 0 || errno == ENOENT { return true }
    guard errno == EISDIR || errno == EPERM else { return false }
    // A directory (unlink refuses it: EISDIR on Linux, EPERM by POSIX): opened without
    // following a link, emptied, removed. Swapped for a link meanwhile, the open fails and
    // the link is unlinked.
    let child = system_openat(folder, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard child >= 0 else { return system_unlinkat(folder, name, 0) == 0 || errno == ENOENT }
    var complete = depth + 1 < removeTreeDepth && removeContents(of: child, depth: depth + 1)
    _ = system_close(child)
    if system_unlinkat(folder, name, AT_REMOVEDIR) != 0 && errno != ENOENT { complete = false }
    return complete
}

/// renameat2(2) RENAME_EXCHANGE: swaps two existing paths in one atomic step.
func exchangePaths(_ from: String, _ to: String) throws(TesseraError) {
    _ = try valueOrErrno("renameat2", path: to) { system_rename_exchange(from, to) }.get("renameat2", path: to)
}

/// rename(2).
func renameFile(_ from: String, to: String) throws(TesseraError) {
    _ = try valueOrErrno("rename", path: to) { system_rename(from, to) }.get("rename", path: to)
}

/// unlink(2); a missing file is not an error.
func removeFile(_ path: String) {
    _ = valueOrErrno("unlink", path: path) { system_unlink(path) }
}

/// The process's file mode creation mask.
private func currentUmask() -> mode_t {
    let mask = umask(0)
    umask(mask)
    return mask
}

/// The whole of a regular file (for small files: manifests, fixtures, a tool's inputs).
public func readWholeFile(_ path: String) throws(TesseraError) -> [UInt8] {
    let (file, _) = try FileDescriptor.openRegularFileForReading(path)
    defer { file.close() }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = try chunk.withUnsafeMutableBytes { buffer in
            Result { () throws(TesseraError) in try file.read(into: buffer) }
        }.get()
        if count == 0 { return bytes }
        bytes.append(contentsOf: chunk[0..<count])
    }
}

/// Whether a file's stat says most of its length is not stored: a sparse file, whose holes read
/// as zeros for as long as it claims. Files of tessera's own (its caches) are never written so; a
/// filesystem that compresses may store a few times less than the length, never 32 times less
/// for such data, and small files are exempt (their bytes may be kept inline, with no blocks).
func isMostlyUnstored(_ info: stat) -> Bool {
    let length = Int64(info.st_size)
    return length > 16 << 20 && Int64(info.st_blocks) * 512 < length / 32
}

/// Calls `body` with each line of the regular file at `path` (without its newline), reading 64 KiB
/// at a time: a large file is never held whole. A line longer than `maxLineBytes` is skipped
/// whole (never held), and a sparse file (isMostlyUnstored) is refused.
func forEachLine(of path: String, maxLineBytes: Int = 1 << 20, _ body: (Substring) -> Void) throws(TesseraError) {
    let (file, info) = try FileDescriptor.openRegularFileForReading(path)
    defer { file.close() }
    guard !isMostlyUnstored(info) else {
        throw TesseraError.unusableOutput(path: path, reason: "a sparse file (\(formatBytes(Int64(info.st_size))) long, almost none of it stored)")
    }
    var pending: [UInt8] = []
    var overlong = false
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    func take(_ piece: ArraySlice<UInt8>) {
        guard !overlong else { return }
        if pending.count + piece.count > maxLineBytes {
            overlong = true
            pending.removeAll()
        } else {
            pending.append(contentsOf: piece)
        }
    }
    while true {
        let count = try chunk.withUnsafeMutableBytes { buffer in
            Result { () throws(TesseraError) in try file.read(into: buffer) }
        }.get()
        if count == 0 { break }
        var start = 0
        while start < count {
            let newline: Int? = chunk.withUnsafeBytes { raw in
                memchr(raw.baseAddress! + start, 10, count - start).map { raw.baseAddress!.distance(to: UnsafeRawPointer($0)) }
            }
            guard let newline else {
                take(chunk[start..<count])
                break
            }
            take(chunk[start..<newline])
            if !overlong { body(Substring(String(decoding: pending, as: UTF8.self))) }
            pending.removeAll(keepingCapacity: true)
            overlong = false
            start = newline + 1
        }
    }
    if !pending.isEmpty && !overlong { body(Substring(String(decoding: pending, as: UTF8.self))) }
}

/// Raises the soft limit on open files to the hard limit (commonly 1,024 to 524,288 or more): a
/// join opens every part of a render at once, and a render of more shards than the soft limit
/// allows failed to open them ("Too many open files"). The `tessera` tool calls this first;
/// nothing here uses select(2), which fails past 1,024.
public func raiseOpenFileLimit() {
    var limit = rlimit()
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    guard getrlimit(resource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(resource, &limit)
}

/// The fewest open files a render works with: its photos in flight, the stripe, spill and
/// output files, the journal, and Dispatch's own (under `ulimit -n 16` a render with every
/// output died with SIGILL inside Dispatch, a helper's finding).
public let leastOpenFilesForRender = 64

/// The limit on open files when it is below `leastOpenFilesForRender` (after
/// `raiseOpenFileLimit`), else nil.
public func openFileLimitTooLowForRender() -> Int? {
    guard let soft = openFileLimits()?.soft, soft < leastOpenFilesForRender else { return nil }
    return soft
}

/// The soft and hard limits on open files (`ulimit -Sn`, `ulimit -Hn`), or nil when unknown or
/// unlimited.
func openFileLimits() -> (soft: Int, hard: Int)? {
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0,
          limit.rlim_cur != rlim_t.max, limit.rlim_max != rlim_t.max else { return nil }
    return (Int(clamping: limit.rlim_cur), Int(clamping: limit.rlim_max))
}
