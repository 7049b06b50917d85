// StripeStore.swift — the canvas, held as horizontal stripes in slots of one temporary file.
//
// Threading contract: `map(slot:)` and `release(slot:)` may be called from any thread, but the
// pipeline guarantees a slot is used by one stripe at a time (stripe i uses slot i % slotCount,
// and is mapped only after stripe i - slotCount was encoded and released). The store itself keeps
// no mutable state after init.
import Glibc

/// Rows of the canvas: which rows each stripe holds.
public struct StripeGeometry: Equatable, Sendable {
    public let width: Int
    public let height: Int
    public let stripeHeight: Int

    public init(width: Int, height: Int, stripeHeight: Int) {
        precondition(width > 0 && height > 0 && stripeHeight > 0)
        self.width = width
        self.height = height
        self.stripeHeight = stripeHeight
    }

    public var bytesPerRow: Int { width * 3 }
    public var stripeCount: Int { (height + stripeHeight - 1) / stripeHeight }

    /// Canvas rows of stripe `index`; the last stripe may be shorter.
    public func rows(ofStripe index: Int) -> Range<Int> {
        let start = index * stripeHeight
        return start..<min(height, start + stripeHeight)
    }
}

/// Slots of a temporary file, each big enough for one stripe, mapped on demand.
///
/// The file is anonymous (O_TMPFILE, or unlinked right after creation), so nothing is left in
/// the temporary directory after a crash. A slot's disk blocks are reserved with fallocate before
/// it is mapped (no SIGBUS on a full disk) and its blocks and page cache are released after the
/// stripe is encoded (hole punched, then POSIX_FADV_DONTNEED), so neither disk nor memory grows
/// with the output size. On Linux the page cache of a file mapping stays charged to the memory
/// cgroup after munmap until it is dropped; that is why the release matters.
final class StripeStore: @unchecked Sendable {
    let file: FileDescriptor
    /// Bytes per slot, rounded up to the page size so every slot maps at an aligned offset.
    let slotBytes: Int
    let slotCount: Int

    init(directory: String, stripeBytes: Int, slotCount: Int) throws(TesseraError) {
        precondition(stripeBytes > 0 && slotCount > 0)
        file = try FileDescriptor.openAnonymousTemporary(in: directory)
        slotBytes = (stripeBytes + pageSize - 1) / pageSize * pageSize
        self.slotCount = slotCount
        do {
            try file.truncate(to: Int64(slotBytes) * Int64(slotCount))
        } catch {
            file.close()
            throw error
        }
    }

    deinit { file.close() }

    /// Reserves and maps slot `slot`. The mapping reads as zeros.
    func map(slot: Int) throws(TesseraError) -> MappedRegion {
        let offset = Int64(slot) * Int64(slotBytes)
        try file.reserve(offset: offset, length: Int64(slotBytes))
        return try MappedRegion(file: file, offset: offset, length: slotBytes)
    }

    /// Frees slot `slot`'s disk blocks and page cache. Call after its mapping is gone.
    func release(slot: Int) {
        let offset = Int64(slot) * Int64(slotBytes)
        file.punchHole(offset: offset, length: Int64(slotBytes))
        file.dropCache(offset: offset, length: Int64(slotBytes))
    }
}
