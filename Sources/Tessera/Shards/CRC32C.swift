// CRC32C.swift — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum a part
// keeps for each record and for its header and index (PartFile.swift). Computed by slicing-by-8
// (System/SlicedCRC32.swift), about 1 GB/s here, enough to verify a part at the speed it is
// read; `update(byte:)` is the plain reference the fast path is tested against (ShardTests).

struct CRC32C: Equatable, Sendable {
    /// The running value, before the final inversion.
    private var state: UInt32 = 0xFFFF_FFFF

    init() {}

    /// The checksum of what was added.
    var value: UInt32 { ~state }

    static let tables = SlicedCRC32.tables(polynomial: 0x82F6_3B78)

    /// One byte, with one table: the reference.
    mutating func update(byte: UInt8) { state = SlicedCRC32.updateByte(state, byte, tables: CRC32C.tables) }

    /// `bytes`, 8 at a time.
    mutating func update(_ bytes: UnsafeRawBufferPointer) { state = SlicedCRC32.update(state, bytes, tables: CRC32C.tables) }

    /// The checksum of `bytes` alone.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = CRC32C()
        crc.update(bytes)
        return crc.value
    }
}
