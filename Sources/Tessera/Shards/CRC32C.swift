// CRC32C.swift — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum a part
// keeps for each record and for its header and index (PartFile.swift). Computed by slicing-by-8
// (System/SlicedCRC32.swift), about 1 GB/s here, enough to verify a part at the speed it is
// read; `update(byte:)` is the plain reference the fast path is tested against (ShardTests).

typealias CRC32C = RunningCRC32<CastagnoliPolynomial>
