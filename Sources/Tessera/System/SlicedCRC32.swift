// SlicedCRC32.swift — reflected CRC-32 checksums by slicing-by-8, for any polynomial: CRC-32C
// (Castagnoli), which shard parts keep for their records (Shards/CRC32C.swift), and the CRC-32 of
// ZIP (IEEE 802.3), which an SZI archive keeps for each tile (Outputs/Archive/StoredZipWriter.swift).
//
// Slicing-by-8: eight 256-entry tables, so the loop takes 8 bytes a step with 8 lookups instead
// of 8 dependent steps of one; about 1 GB/s here. `updateByte`, one table, one byte at a time, is
// the plain reference the fast path is tested against. No hardware CRC instruction: that would
// need a C target, and neither the join's nor the archive's cost is this.

enum SlicedCRC32 {
    /// The eight tables of `polynomial` (reflected), one after another: entries 0..<256 are the
    /// byte-at-a-time table; entry k * 256 + n is the CRC of byte n followed by k zero bytes.
    static func tables(polynomial: UInt32) -> [UInt32] {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var crc = UInt32(n)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ polynomial : crc >> 1 }
            tables[n] = crc
        }
        for k in 1..<8 {
            for n in 0..<256 {
                let previous = tables[(k - 1) * 256 + n]
                tables[k * 256 + n] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }

    /// One byte, with one table: the reference.
    @inline(__always)
    static func updateByte(_ state: UInt32, _ byte: UInt8, tables: [UInt32]) -> UInt32 {
        (state >> 8) ^ tables[Int((state ^ UInt32(byte)) & 0xFF)]
    }

    /// `bytes`, 8 at a time; returns the new running state (before the final inversion).
    static func update(_ state: UInt32, _ bytes: UnsafeRawBufferPointer, tables: [UInt32]) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return state }
        let count = bytes.count
        return tables.withUnsafeBufferPointer { t -> UInt32 in
            var crc = state
            var at = 0
            while count - at >= 8 {
                let low = UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt32.self)) ^ crc
                let high = UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self))
                crc = t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
                at += 8
            }
            while at < count {
                crc = (crc >> 8) ^ t[Int((crc ^ UInt32(base.load(fromByteOffset: at, as: UInt8.self))) & 0xFF)]
                at += 1
            }
            return crc
        }
    }
}

/// A polynomial's slicing tables (`SlicedCRC32.tables`), made once.
protocol CRC32Polynomial {
    static var tables: [UInt32] { get }
}

/// CRC-32C (Castagnoli, reflected 0x82F63B78): shard parts' records (Shards/CRC32C.swift).
enum CastagnoliPolynomial: CRC32Polynomial {
    static let tables = SlicedCRC32.tables(polynomial: 0x82F6_3B78)
}

/// The CRC-32 of ZIP, gzip and PNG (IEEE 802.3, reflected 0xEDB88320): an SZI's entries.
enum IEEEPolynomial: CRC32Polynomial {
    static let tables = SlicedCRC32.tables(polynomial: 0xEDB8_8320)
}

/// A running CRC-32 of `Polynomial`.
struct RunningCRC32<Polynomial: CRC32Polynomial>: Equatable, Sendable {
    /// The running value, before the final inversion.
    private var state: UInt32 = 0xFFFF_FFFF

    init() {}

    /// The checksum of what was added.
    var value: UInt32 { ~state }

    /// One byte, with one table: the reference.
    mutating func update(byte: UInt8) { state = SlicedCRC32.updateByte(state, byte, tables: Polynomial.tables) }

    /// `bytes`, 8 at a time.
    mutating func update(_ bytes: UnsafeRawBufferPointer) { state = SlicedCRC32.update(state, bytes, tables: Polynomial.tables) }

    /// The checksum of `bytes` alone.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = RunningCRC32()
        crc.update(bytes)
        return crc.value
    }
}

/// The CRC-32 of ZIP (tested on the catalogue's check value and its byte-at-a-time reference).
typealias ZipCRC32 = RunningCRC32<IEEEPolynomial>
