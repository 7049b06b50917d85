// PartTarget.swift — the fuzzer's part-file entry point: a shard's part (PartFile.swift), parsed
// and verified as `tessera join` would (ShardJoin.verifyPart), from real parts the built tool
// made (scripts/fuzz.sh). Besides the byte mutations every input gets, a part's own structure
// is aimed at: the footer's and the index's numbers set to extremes (where overflow and
// oversized reads would be), header values replaced; then, one time in 3, the checksums
// recomputed (`reseal`: most of an input's time), as a careful attacker would leave them, so
// that the checks behind the checksums (ranges, the render's description, the records against
// it) are reached too.
import Tessera

/// A part's layout, as PartFile.swift describes it.
private let footerBytes = 48, recordBytes = 40

private let extremes: [UInt64] = [0, 1, 7, 8, 39, 40, 41, 1 << 20, (1 << 20) + 1, 1 << 31, 1 << 32, 1 << 40, 1 << 62,
                                  UInt64(Int64.max), UInt64(Int64.max) + 1, UInt64.max - 47, UInt64.max - 7, UInt64.max]

private func store(_ value: UInt64, _ bytes: inout [UInt8], at: Int, width: Int) {
    guard at >= 0, at + width <= bytes.count else { return }
    for i in 0..<width { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) }
}

private func load(_ bytes: [UInt8], at: Int) -> UInt64 {
    guard at >= 0, at + 8 <= bytes.count else { return 0 }
    return (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * $1) }
}

func extreme() -> UInt64 { below(4) == 0 ? random.next() : extremes[below(extremes.count)] }

/// A part-shaped mutation of `input` (a real part), then sometimes the byte mutations.
func mutatePart(_ input: [UInt8]) -> [UInt8] {
    var bytes = input
    guard bytes.count > footerBytes + 8, !seeds.isEmpty else { return bytes }
    let footer = bytes.count - footerBytes
    for _ in 0..<(1 + below(3)) {
        switch below(6) {
        case 0:  // a footer number: header offset, header length, index offset, record count
            store(extreme(), &bytes, at: footer + 8 * below(4), width: 8)
        case 1:  // a footer number, off by a little
            let at = footer + 8 * below(4)
            store(load(bytes, at: at) &+ UInt64(bitPattern: Int64(below(81) - 40)), &bytes, at: at, width: 8)
        case 2, 3:  // an index record's field: kind, a, b, c (32 bits), offset, length (64), checksum (32)
            // (The footer may be mutated already: the index is clamped into the file.)
            let indexOffset = Int(min(load(bytes, at: footer + 16), UInt64(footer)))
            let count = max(1, (footer - indexOffset) / recordBytes)
            let record = indexOffset + below(count) * recordBytes
            let (offset, width) = [(0, 4), (4, 4), (8, 4), (12, 4), (16, 8), (24, 8), (32, 4)][below(7)]
            store(extreme(), &bytes, at: record + offset, width: width)
        case 4:  // the magic of another version
            store(UInt64(0x3130_5452_4150_5354), &bytes, at: 0, width: 8)  // "TSPART01"
        default:  // a header value: a digit run replaced by a huge or negative number
            let headerOffset = Int(min(load(bytes, at: footer), UInt64(footer)))
            guard headerOffset > 0, headerOffset < footer else { break }
            let digits = (headerOffset..<footer).filter { bytes[$0] >= 0x30 && bytes[$0] <= 0x39 }
            guard !digits.isEmpty else { break }
            let at = digits[below(digits.count)]
            let replacement = Array(["99999999999999999999", "9223372036854775807", "-1", "0", "1000000000000", "65501"][below(6)].utf8)
            bytes.replaceSubrange(at..<(at + 1), with: replacement)
        }
    }
    if below(3) == 0 && !seeds.isEmpty { bytes = mutate(bytes) }
    if below(3) == 0 { reseal(&bytes) }
    return bytes
}

/// Recomputes each record's CRC-32C and the one over header and index, wherever the (mutated)
/// footer and index say they are; what they cannot point at is left alone.
private func reseal(_ bytes: inout [UInt8]) {
    guard bytes.count > footerBytes + 8 else { return }
    let footer = bytes.count - footerBytes
    let headerOffset = load(bytes, at: footer), indexOffset = load(bytes, at: footer + 16), count = load(bytes, at: footer + 24)
    guard headerOffset <= UInt64(footer), indexOffset <= UInt64(footer) else { return }
    let records = min(count, (UInt64(footer) - indexOffset) / UInt64(recordBytes))
    // At most 4 times the file's bytes summed: mutated records may each cover most of the file.
    var budget = 4 * UInt64(bytes.count)
    for i in 0..<Int(records) {
        let record = Int(indexOffset) + i * recordBytes
        let offset = load(bytes, at: record + 16), length = load(bytes, at: record + 24)
        guard offset <= UInt64(footer), length <= UInt64(footer) - offset, length <= budget else { continue }
        budget -= length
        store(UInt64(crc32c(bytes[Int(offset)..<Int(offset + length)])), &bytes, at: record + 32, width: 4)
    }
    store(UInt64(crc32c(bytes[Int(headerOffset)..<footer])), &bytes, at: footer + 32, width: 4)
}

/// CRC-32C a byte at a time from one table (the library's is internal).
private let crcTable: [UInt32] = (0..<256).map { (n: Int) -> UInt32 in
    var crc = UInt32(n)
    for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
    return crc
}

/// (Through raw buffers: this runs unoptimised under AddressSanitizer, where iterating the slice
/// itself cost about a microsecond a byte, and a scan-bomb mutation (up to 8 MB) resealed four
/// times over took the watchdog's 10 s: a hang of the harness, not of Tessera.)
private func crc32c(_ data: ArraySlice<UInt8>) -> UInt32 {
    crcTable.withUnsafeBufferPointer { table in
        data.withUnsafeBufferPointer { input in
            var crc: UInt32 = 0xFFFF_FFFF
            var index = 0
            while index < input.count {
                crc = (crc >> 8) ^ table[Int((crc ^ UInt32(input[index])) & 0xFF)]
                index += 1
            }
            return ~crc
        }
    }
}

/// Parses and verifies the part at `path`; the outcome's name.
func exercisePart(_ path: String) throws(TesseraError) -> String {
    _ = try ShardJoin.verifyPart(at: path)
    return "part: verified"
}
