// PartFileTests.swift — the part file's checksum and its reader against hostile numbers: CRC-32C
// against published vectors and its own byte-at-a-time reference; the reader given a real part
// whose footer and index hold extreme values refuses it (`.unusableParts` naming it), never traps.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct PartFileTests {
    @Test func crc32cMatchesPublishedVectors() {
        func crc(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { CRC32C.checksum($0) } }
        #expect(crc(Array("123456789".utf8)) == 0xE306_9283)
        // RFC 3720 (iSCSI), appendix B.4.
        #expect(crc([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(crc([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(crc((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(crc([]) == 0)
    }

    /// Slicing-by-8 at every alignment and length near its 8-byte steps, in pieces, equals the
    /// one-table reference over the whole.
    @Test func slicingEqualsTheByteAtATimeReference() {
        var random = SplitMix64(seed: 25)
        let data = (0..<4099).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        for start in 0..<9 {
            for length in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4090 - start] {
                var reference = CRC32C()
                for byte in data[start..<(start + length)] { reference.update(byte: byte) }
                var sliced = CRC32C()
                let cut = length / 3
                data.withUnsafeBytes { raw in
                    sliced.update(UnsafeRawBufferPointer(rebasing: raw[start..<(start + cut)]))
                    sliced.update(UnsafeRawBufferPointer(rebasing: raw[(start + cut)..<(start + length)]))
                }
                #expect(sliced == reference, "start \(start), length \(length)")
            }
        }
    }

    /// The index budget: a real part opens within a share that holds its records, and is
    /// refused, named, by one record fewer, or when the parts before it hold the rest; the
    /// budget named in the refusal holds the parts before it and this one, and the join.
    @Test func anIndexOpensOnlyWithinItsShareOfTheBudget() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (parts, path) = try renderWholePart(in: scratch)
        let whole = try PartReader(path: path, directory: parts)
        let bytes = whole.indexBytes
        // Its records, and its header (counted twice: the text and the values parsed from it).
        #expect(whole.headerBytes > 0 && whole.headerBytes < 8 << 10, "\(whole.headerBytes)")
        #expect(bytes == whole.records.count * 40 + whole.headerBytes)
        let fits = try PartReader(path: path, directory: parts, indexBudget: IndexBudget(budgetBytes: 4 * bytes, fraction: 4, heldBytes: 0))
        #expect(fits.indexBytes == bytes)
        func refusal(budget: Int, held: Int) -> (reason: String, needed: Int)? {
            do {
                _ = try PartReader(path: path, directory: parts, indexBudget: IndexBudget(budgetBytes: budget, fraction: 2, heldBytes: held))
                return nil
            } catch {
                if case .partIndexTooLarge(_, let reason, let needed) = error { return (reason, needed) }
                return ("\(error)", 0)
            }
        }
        for (budget, held) in [(2 * bytes - 2, 0), (2 * bytes + 1000, 1000), (4 * bytes, bytes + 8)] {
            let (reason, needed) = refusal(budget: budget, held: held) ?? ("(opened)", 0)
            #expect(reason.hasPrefix("part-0001-of-0001.tessera-part has an index of \(whole.records.count) records"), "\(reason)")
            #expect(reason.hasSuffix("more than 1/2 of the join's memory budget of \(formatBytes(Int64(budget)))"), "\(reason)")
            #expect(reason.contains("with the parts before it") == (held > 0), "\(reason)")
            // Its share of the budget, and the join's own memory beside the indexes.
            #expect(needed == max(2 * (held + bytes), held + bytes + ShardJoin.fixedBytes), "\(needed)")
        }
        // A share too small for the header itself: refused before the index is read, naming it.
        let header = whole.headerBytes
        for (budget, held) in [(2 * header - 2, 0), (2 * header + 4000, 2001)] {
            let (reason, needed) = refusal(budget: budget, held: held) ?? ("(opened)", 0)
            #expect(reason.hasPrefix("part-0001-of-0001.tessera-part has a header that takes \(formatBytes(Int64(header))) in memory"), "\(reason)")
            #expect(reason.contains("more than 1/2 of the join's memory budget of \(formatBytes(Int64(budget)))"), "\(reason)")
            #expect(needed == max(2 * (held + header), held + header + ShardJoin.fixedBytes), "\(needed)")
        }
    }

    /// A part changed in place after it was verified (another program writing over it while
    /// the join runs): each read hands over only bytes that match their checksum, so a record
    /// changed since is refused where it is used, by a whole read, a copy or a row read alike.
    @Test func aRecordChangedAfterTheCheckIsRefusedWhereItIsRead() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (parts, path) = try renderWholePart(in: scratch)
        let part = try PartReader(path: path, directory: parts)
        var buffer = [UInt8](repeating: 0, count: 4096)
        try part.verify(using: &buffer)
        let record = try #require(part.records.first { $0.length > 16 })
        var whole: [UInt8] = []
        try part.read(record, into: &whole)
        // Changed in place, under the open reader: the same inode, one byte of the record.
        let fd = open(path, O_WRONLY)
        #expect(fd >= 0)
        var flipped = whole[Int(record.length) / 2] ^ 0x5A
        #expect(pwrite(fd, &flipped, 1, off_t(record.offset + record.length / 2)) == 1)
        close(fd)
        func refused(_ what: String, _ read: () throws(TesseraError) -> Void) {
            do {
                try read()
                Issue.record("\(what): the changed record was handed over")
            } catch {
                guard case .unusableParts(_, let reason) = error else { Issue.record("\(what): \(error)"); return }
                #expect(reason.contains("changed while the join read it"), "\(what): \(reason)")
            }
        }
        refused("read") { () throws(TesseraError) in try part.read(record, into: &whole) }
        var copied = 0
        refused("copy") { () throws(TesseraError) in
            try part.copy(record, using: &buffer) { (piece) throws(TesseraError) in copied += piece.count }
        }
        #expect(copied == Int(record.length))
        var raw = [UInt8](repeating: 0, count: Int(record.length))
        refused("whole") { () throws(TesseraError) in
            try raw.withUnsafeMutableBytes { bytes in Result { () throws(TesseraError) in try part.read(whole: record, into: bytes) } }.get()
        }
    }

    /// Every footer field, and a record's offset and length (its checksums recomputed), set to
    /// extreme values: refused with the part named.
    @Test func extremeFooterAndIndexNumbersAreRefused() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (parts, path) = try renderWholePart(in: scratch)
        let original = readBytes(path)
        let part = try PartReader(path: path, directory: parts)
        #expect(part.records.count > 10)
        let footer = original.count - PartFormat.footerBytes
        func put(_ value: UInt64, _ bytes: inout [UInt8], _ at: Int, _ width: Int) {
            for i in 0..<width { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) }
        }
        func expectRefused(_ bytes: [UInt8], _ what: String) {
            writeBytes(bytes, to: path)
            do {
                _ = try ShardJoin.verifyPart(at: path)
                Issue.record("\(what): accepted")
            } catch {
                guard case .unusableParts(_, let reason) = error else {
                    Issue.record("\(what): \(error)")
                    return
                }
                #expect(reason.contains("part-0001-of-0001.tessera-part"), "\(what): \(reason)")
            }
        }
        let values: [UInt64] = [0, 7, UInt64(original.count), UInt64(original.count) + 1, 1 << 32, 1 << 63, UInt64(Int64.max),
                                UInt64.max - 39, UInt64.max]
        for field in 0..<4 {
            for value in values where value != (0..<8).reduce(UInt64(0), { $0 | UInt64(original[footer + 8 * field + $1]) << (8 * $1) }) {
                var bytes = original
                put(value, &bytes, footer + 8 * field, 8)
                expectRefused(bytes, "footer field \(field) = \(value)")
            }
        }
        let headerOffset = Int(part.records.map { $0.offset + $0.length }.max()!)
        let indexOffset = footer - part.records.count * PartFormat.recordBytes
        for (field, value) in [(16, UInt64.max), (16, UInt64(headerOffset)), (24, UInt64.max), (24, UInt64(Int64.max)), (16, 0)] {
            var bytes = original
            put(value, &bytes, indexOffset + field, 8)
            let checksum = bytes[headerOffset..<footer].withUnsafeBytes { CRC32C.checksum($0) }
            put(UInt64(checksum), &bytes, footer + 32, 4)
            expectRefused(bytes, "record 0 field \(field) = \(value)")
        }
        // Records that share bytes (each claiming all the data: verifying would read it once a
        // record), resealed: refused.
        var overlapping = original
        for i in 0..<part.records.count {
            put(8, &overlapping, indexOffset + i * PartFormat.recordBytes + 16, 8)
            put(UInt64(headerOffset - 8), &overlapping, indexOffset + i * PartFormat.recordBytes + 24, 8)
        }
        let crc = overlapping[headerOffset..<footer].withUnsafeBytes { CRC32C.checksum($0) }
        put(UInt64(crc), &overlapping, footer + 32, 4)
        expectRefused(overlapping, "every record over all the data")
        writeBytes(original, to: path)
        #expect(try ShardJoin.verifyPart(at: path) == part.records.count)
    }
}

/// ShardCase's render as one shard, in `scratch`: the parts folder and its one part.
func renderWholePart(in scratch: ScratchDirectory) throws -> (parts: String, path: String) {
    let folder = scratch.file("out"), parts = scratch.file("parts")
    try makeDirectory(folder)
    try makeDirectory(folder + "/zoom")
    try makeDirectory(parts)
    try renderShards(ShardCase(), numbers: [1], of: 1, parts: parts, folder: folder)
    return (parts, parts + "/part-0001-of-0001.tessera-part")
}
