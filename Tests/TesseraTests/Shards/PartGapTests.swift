// PartGapTests.swift — a part whose data has bytes no record holds (between its last record and
// its header), with the footer and the header's checksum made consistent again, is refused: the
// records must tile the data exactly, so that what the join verifies is everything it trusts.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct PartGapTests {
    @Test(arguments: [1, 8, 4096])
    func bytesNoRecordHoldsAreRefused(gap: Int) throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (parts, path) = try renderWholePart(in: scratch)
        let original = readBytes(path)
        let records = try PartReader(path: path, directory: parts).records.count
        #expect(try ShardJoin.verifyPart(at: path) == records)

        // Footer (little-endian UInt64s): header offset, header length, index offset, count; then
        // the CRC-32C of header and index at 32.
        func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
        func put(_ value: UInt64, _ bytes: inout [UInt8], _ at: Int, _ width: Int) {
            for i in 0..<width { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) }
        }
        let footer = original.count - PartFormat.footerBytes
        let headerOffset = Int(u64(original, footer)), indexOffset = Int(u64(original, footer + 16))
        var bytes = Array(original[..<headerOffset]) + [UInt8](repeating: 0xA5, count: gap) + Array(original[headerOffset...])
        let moved = footer + gap
        put(UInt64(headerOffset + gap), &bytes, moved, 8)
        put(UInt64(indexOffset + gap), &bytes, moved + 16, 8)
        let checksum = bytes[(headerOffset + gap)..<moved].withUnsafeBytes { CRC32C.checksum($0) }
        put(UInt64(checksum), &bytes, moved + 32, 4)
        writeBytes(bytes, to: path)
        do {
            _ = try ShardJoin.verifyPart(at: path)
            Issue.record("a gap of \(gap) bytes before the header: accepted")
        } catch {
            guard case .unusableParts(_, let reason) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(reason.contains("part-0001-of-0001.tessera-part") && reason.contains("has \(gap) bytes of data no record holds"),
                    "\(reason)")
        }
    }
}
