// MappedRegion.swift — a shared, writable mapping of a file range that unmaps itself.
import Glibc

/// A read-write MAP_SHARED mapping of `length` bytes of a file at `offset`.
///
/// Ownership: the mapping lives exactly as long as this object; `deinit` calls munmap. Bytes are
/// handed out only inside `withUnsafeMutableBytes`, so no pointer outlives the mapping.
/// The caller reserves the file's blocks (fallocate) before mapping, so stores cannot SIGBUS.
final class MappedRegion: @unchecked Sendable {
    private let address: UnsafeMutableRawPointer
    let length: Int

    /// mmap(2) of `length` bytes of `file` at `offset` (a multiple of the page size).
    init(file: FileDescriptor, offset: Int64, length: Int) throws(TesseraError) {
        precondition(length > 0)
        if let injected = SyscallFaults.take("mmap", path: file.path) {
            throw TesseraError.system(operation: "mmap", errno: injected, path: file.path)
        }
        guard let address = system_mmap(length, PROT_READ | PROT_WRITE, MAP_SHARED, file.rawValue, off_t(offset)),
              address != MAP_FAILED
        else {
            throw TesseraError.system(operation: "mmap", errno: errno, path: file.path)
        }
        self.address = address
        self.length = length
    }

    deinit {
        _ = system_munmap(address, length)
    }

    /// Runs `body` with the mapped bytes.
    @inline(__always)
    func withUnsafeMutableBytes<T, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> T) throws(E) -> T {
        return try body(UnsafeMutableRawBufferPointer(start: address, count: length))
    }
}

/// The system page size, for aligning mapped offsets.
let pageSize: Int = Int(sysconf(Int32(_SC_PAGESIZE)))
