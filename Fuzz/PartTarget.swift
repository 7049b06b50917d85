// PartTarget.swift — the fuzzer's part-file entry point: a shard's part (PartFile.swift), parsed
// and verified as `tessera join` would (ShardJoin.verifyPart), from real parts the built tool
// made (scripts/fuzz.sh). Besides the byte mutations every input gets, a part's own structure
// is aimed at: the footer's and the index's numbers set to extremes (where overflow and
// oversized reads would be), header values replaced, and the checksums left as they were or
// not (a record whose checksum is stale is refused early; the range checks are reached only
// through the footer's numbers, which no checksum covers).
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
    return below(3) == 0 && !seeds.isEmpty ? mutate(bytes) : bytes
}

/// Parses and verifies the part at `path`; the outcome's name.
func exercisePart(_ path: String) throws(TesseraError) -> String {
    _ = try ShardJoin.verifyPart(at: path)
    return "part: verified"
}
