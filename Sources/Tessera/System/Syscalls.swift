// Syscalls.swift — the one place Tessera calls libc for files and memory mappings.
//
// Each raw call sits behind a one-line `system_*` function. `valueOrErrno` retries EINTR for
// every call except close (after an interrupted close the descriptor state is unspecified on
// Linux, and retrying can close a descriptor another thread just opened).
//
// Tests inject failures here (`SyscallFaults`), so ENOSPC and EINTR paths are exercised without
// filling a real disk.
import CTesseraShims
import Glibc

/// Failures injected by tests at the syscall layer. Production code never arms it.
///
/// An injection applies only to calls on paths starting with its `pathPrefix`, so tests that fail
/// the writes in their own scratch folders cannot disturb each other, even when they run at the
/// same time. Each injection counts the failures it delivered (`fired`), so a test can show that
/// its fault was really met.
///
/// Threading: `lock` protects `injections` and `firedCounts`; `armed` is read without the lock as
/// a fast path (a stale read only delays an injection to the next call, which tests never depend
/// on).
public enum SyscallFaults {
    private struct Injection {
        var errno: Int32
        var skip: Int
        var count: Int
    }
    private struct Key: Hashable {
        let operation: String
        let pathPrefix: String
    }
    nonisolated(unsafe) private static var armed = false
    nonisolated(unsafe) private static var injections: [Key: Injection] = [:]
    nonisolated(unsafe) private static var firedCounts: [Key: Int] = [:]
    private static let lock = Mutex()

    /// Makes the `count` calls of `operation` on paths under `pathPrefix`, after the first `skip`
    /// such calls, fail with `errno`. Replaces an earlier injection for the same operation and
    /// prefix, and zeroes its count.
    public static func inject(_ operation: String, errno: Int32, pathPrefix: String, skip: Int = 0, count: Int = 1) {
        lock.withLock {
            let key = Key(operation: operation, pathPrefix: pathPrefix)
            injections[key] = Injection(errno: errno, skip: skip, count: count)
            firedCounts[key] = 0
            armed = true
        }
    }

    /// How many failures the injection for `operation` under `pathPrefix` has delivered.
    public static func fired(_ operation: String, pathPrefix: String) -> Int {
        lock.withLock { firedCounts[Key(operation: operation, pathPrefix: pathPrefix)] ?? 0 }
    }

    /// Removes the injections under `pathPrefix` (every injection when nil) and their counts.
    public static func reset(pathPrefix: String? = nil) {
        lock.withLock {
            if let pathPrefix {
                injections = injections.filter { $0.key.pathPrefix != pathPrefix }
                firedCounts = firedCounts.filter { $0.key.pathPrefix != pathPrefix }
            } else {
                injections.removeAll()
                firedCounts.removeAll()
            }
            armed = !injections.isEmpty
        }
    }

    /// The errno to fail `operation` on `path` with now, if a test asked for one.
    static func take(_ operation: String, path: String) -> Int32? {
        guard armed else { return nil }
        return lock.withLock { () -> Int32? in
            guard let key = injections.keys.first(where: { $0.operation == operation && path.hasPrefix($0.pathPrefix) }),
                  var entry = injections[key] else { return nil }
            if entry.skip > 0 {
                entry.skip -= 1
                injections[key] = entry
                return nil
            }
            guard entry.count > 0 else { return nil }
            entry.count -= 1
            injections[key] = entry
            firedCounts[key, default: 0] += 1
            return entry.errno
        }
    }
}

/// Runs `body` until it does not fail with EINTR; returns its value or the errno.
/// `path` is what the call works on, for test injection (errors name it via `get`).
@inline(__always)
func valueOrErrno<T: FixedWidthInteger>(
    _ operation: String, path: String, retryOnInterrupt: Bool = true, _ body: () -> T
) -> Result<T, Errno> {
    while true {
        // An injected failure stands in for the call's own -1 and errno, EINTR included.
        let injected = SyscallFaults.take(operation, path: path)
        let value = injected == nil ? body() : -1
        if value != -1 { return .success(value) }
        let code = injected ?? errno
        if code == EINTR && retryOnInterrupt { continue }
        return .failure(Errno(rawValue: code))
    }
}

/// An errno value, read right after the failing call and before any cleanup.
struct Errno: Error, Equatable {
    let rawValue: Int32
}

extension Result where Failure == Errno {
    /// The value, or a `TesseraError.system` naming the call and the path.
    @inline(__always)
    func get(_ operation: String, path: String) throws(TesseraError) -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let code):
            throw TesseraError.system(operation: operation, errno: code.rawValue, path: path)
        }
    }
}

func system_open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    return open(path, flags, mode)
}
func system_close(_ fd: Int32) -> Int32 { return close(fd) }
func system_read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    return read(fd, buffer, count)
}
func system_pread(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ offset: off_t) -> Int {
    return pread(fd, buffer, count, offset)
}
func system_preadv(_ fd: Int32, _ vectors: UnsafePointer<iovec>, _ count: Int32, _ offset: off_t) -> Int {
    return preadv(fd, vectors, count, offset)
}
func system_write(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    return write(fd, buffer, count)
}
func system_pwrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int, _ offset: off_t) -> Int {
    return pwrite(fd, buffer, count, offset)
}
func system_fstat(_ fd: Int32, _ info: UnsafeMutablePointer<stat>) -> Int32 { return fstat(fd, info) }
func system_stat(_ path: String, _ info: UnsafeMutablePointer<stat>) -> Int32 { return stat(path, info) }
func system_lstat(_ path: String, _ info: UnsafeMutablePointer<stat>) -> Int32 { return lstat(path, info) }
func system_open_tmpfile(_ directory: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    return tessera_open_tmpfile(directory, flags, mode)
}
func system_fallocate_reserve(_ fd: Int32, _ offset: off_t, _ length: off_t) -> Int32 {
    return tessera_fallocate_reserve(fd, offset, length)
}
func system_fallocate_punch_hole(_ fd: Int32, _ offset: off_t, _ length: off_t) -> Int32 {
    return tessera_fallocate_punch_hole(fd, offset, length)
}
func system_ftruncate(_ fd: Int32, _ length: off_t) -> Int32 { return ftruncate(fd, length) }
/// posix_fadvise returns the error number instead of setting errno; adapted to the -1 convention.
func system_posix_fadvise(_ fd: Int32, _ offset: off_t, _ length: off_t, _ advice: Int32) -> Int32 {
    let result = posix_fadvise(fd, offset, length, advice)
    if result != 0 { errno = result; return -1 }
    return 0
}
func system_sync_file_range(_ fd: Int32, _ offset: off_t, _ length: off_t, _ wait: Bool) -> Int32 {
    return tessera_sync_file_range(fd, offset, length, wait ? 1 : 0)
}
func system_mmap(_ length: Int, _ protection: Int32, _ flags: Int32, _ fd: Int32, _ offset: off_t) -> UnsafeMutableRawPointer? {
    return mmap(nil, length, protection, flags, fd, offset)
}
func system_munmap(_ address: UnsafeMutableRawPointer, _ length: Int) -> Int32 { return munmap(address, length) }
func system_statvfs(_ path: String, _ info: UnsafeMutablePointer<statvfs>) -> Int32 { return statvfs(path, info) }
func system_linkat(_ fromDirectory: Int32, _ from: String, _ toDirectory: Int32, _ to: String, _ flags: Int32) -> Int32 {
    return linkat(fromDirectory, from, toDirectory, to, flags)
}
func system_rename(_ from: String, _ to: String) -> Int32 { return rename(from, to) }
func system_unlink(_ path: String) -> Int32 { return unlink(path) }
func system_mkdir(_ path: String, _ mode: mode_t) -> Int32 { return mkdir(path, mode) }
func system_rmdir(_ path: String) -> Int32 { return rmdir(path) }
func system_rename_exchange(_ from: String, _ to: String) -> Int32 { return tessera_rename_exchange(from, to) }
func system_mkstemp(_ template: UnsafeMutablePointer<CChar>) -> Int32 { return tessera_mkostemp_cloexec(template) }
func system_fsync(_ fd: Int32) -> Int32 { return fsync(fd) }
func system_fchmod(_ fd: Int32, _ mode: mode_t) -> Int32 { return fchmod(fd, mode) }
func system_opendir(_ path: String) -> OpaquePointer? { return opendir(path) }
func system_opendir(_ path: PathBytes) -> OpaquePointer? { return path.withCString { opendir($0) } }
func system_stat(_ path: PathBytes, _ info: UnsafeMutablePointer<stat>) -> Int32 { return path.withCString { stat($0, info) } }
func system_open(_ path: PathBytes, _ flags: Int32, _ mode: mode_t) -> Int32 {
    return path.withCString { Glibc.open($0, flags, mode) }
}
func system_readdir(_ directory: OpaquePointer) -> UnsafeMutablePointer<dirent>? { return readdir(directory) }
func system_fdopendir(_ fd: Int32) -> OpaquePointer? { return fdopendir(fd) }
/// Whether `fd` has data to read, its end, or an error within `milliseconds` (poll POLLIN). An
/// interrupted poll says no (the caller looks at its cancellation and asks again: the signal
/// that interrupted it is most often the one that cancels); a failed one says yes, and the
/// read that follows tells.
func system_poll_readable(_ fd: Int32, milliseconds: Int32) -> Bool {
    var request = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let ready = poll(&request, 1, milliseconds)
    return ready > 0 || (ready < 0 && errno != EINTR)
}
/// Clears O_NONBLOCK on `fd` (a FIFO opened without waiting for its writer).
func system_clear_nonblocking(_ fd: Int32) -> Int32 {
    let flags = fcntl(fd, F_GETFL)
    return flags < 0 ? flags : fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
}
func system_dup(_ fd: Int32) -> Int32 { return dup(fd) }
func system_openat(_ folder: Int32, _ name: [UInt8], _ flags: Int32) -> Int32 {
    return (name + [0]).withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { openat(folder, $0.baseAddress!, flags) }
    }
}
func system_unlinkat(_ folder: Int32, _ name: [UInt8], _ flags: Int32) -> Int32 {
    return (name + [0]).withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { unlinkat(folder, $0.baseAddress!, flags) }
    }
}
func system_closedir(_ directory: OpaquePointer) -> Int32 { return closedir(directory) }
func system_rewinddir(_ directory: OpaquePointer) { rewinddir(directory) }
func system_kill(_ pid: pid_t, _ signal: Int32) -> Int32 { return kill(pid, signal) }
func system_flock(_ fd: Int32, _ operation: Int32) -> Int32 { return flock(fd, operation) }
func system_is_immutable(_ path: String) -> Int32 { return tessera_is_immutable(path) }
