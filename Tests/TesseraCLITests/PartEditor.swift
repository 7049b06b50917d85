// PartEditor.swift — rewrites a real part file as an attacker would, for the hostile-part tests:
// footer and index fields, header values, a byte of a record, a sparse file. After an edit the
// checksums can be recomputed (`reseal`), so that only the check under test can refuse it.
//
// It reads the format from its description (Sources/Tessera/Shards/PartFile.swift) and sums with
// its own CRC-32C, bit by bit: an independent computation, not the library's tables.
import Glibc

struct PartEditor {
    var bytes: [UInt8]

    static let footerBytes = 48
    static let recordBytes = 40

    init(path: String) { bytes = readFile(path) }

    func write(to path: String) { writeFile(bytes, to: path) }

    // Footer fields (UInt64): header offset, header length, index offset, record count.
    enum FooterField: Int, CaseIterable { case headerOffset = 0, headerLength = 8, indexOffset = 16, count = 24 }

    var footerStart: Int { bytes.count - PartEditor.footerBytes }

    subscript(field: FooterField) -> UInt64 {
        get { load64(footerStart + field.rawValue) }
        set { store64(newValue, at: footerStart + field.rawValue) }
    }

    var recordCount: Int { Int(self[.count]) }

    /// Index record `index`'s field at `offset` (0 kind, 4 a, 8 b, 12 c: UInt32; 16 offset, 24
    /// length: UInt64; 32 checksum: UInt32).
    func recordStart(_ index: Int) -> Int { Int(self[.indexOffset]) + index * PartEditor.recordBytes }
    func record32(_ index: Int, _ offset: Int) -> UInt32 { UInt32(truncatingIfNeeded: load(recordStart(index) + offset, 4)) }
    func record64(_ index: Int, _ offset: Int) -> UInt64 { load64(recordStart(index) + offset) }
    mutating func setRecord32(_ index: Int, _ offset: Int, _ value: UInt32) { store(UInt64(value), at: recordStart(index) + offset, 4) }
    mutating func setRecord64(_ index: Int, _ offset: Int, _ value: UInt64) { store64(value, at: recordStart(index) + offset) }

    /// The first record of `kind` (1 JPEG header, 2 segment, 3 tile, 4 reduced row, 5 cells).
    func firstRecord(kind: UInt32) -> Int? { (0..<recordCount).first { record32($0, 0) == kind } }

    /// Flips one byte in the middle of record `index`'s data (its checksum left as it was).
    mutating func flipByte(inRecord index: Int) {
        let at = Int(record64(index, 16) + record64(index, 24) / 2)
        bytes[at] ^= 0x5A
    }

    /// Sets every byte of record `index`'s data to `value` (its checksum left as it was).
    mutating func fill(record index: Int, with value: UInt8) {
        let start = Int(record64(index, 16)), length = Int(record64(index, 24))
        for at in start..<(start + length) { bytes[at] = value }
    }

    /// Appends `count` records of `kind` holding no bytes (as many tile records as a forger
    /// likes, each one valid in itself: 40 bytes of file each), checksums resealed.
    mutating func appendEmptyRecords(_ count: Int, kind: UInt32) {
        let dataEnd = self[.headerOffset]
        var record = [UInt8](repeating: 0, count: PartEditor.recordBytes)
        for i in 0..<4 { record[i] = UInt8(truncatingIfNeeded: kind >> (8 * i)) }
        for i in 0..<8 { record[16 + i] = UInt8(truncatingIfNeeded: dataEnd >> (8 * i)) }
        // (The checksum of no bytes is 0; the length is 0.)
        var index = Array(bytes[Int(self[.indexOffset])..<footerStart])
        index.reserveCapacity(index.count + count * PartEditor.recordBytes)
        for _ in 0..<count { index.append(contentsOf: record) }
        let footer = Array(bytes[footerStart...])
        let total = UInt64(recordCount + count)
        bytes = Array(bytes[0..<Int(self[.indexOffset])]) + index + footer
        self[.count] = total
        let start = Int(self[.headerOffset])
        store(UInt64(PartEditor.crc32c(bytes[start..<footerStart])), at: footerStart + 32, 4)
    }

    /// The header as "key=value" lines.
    var header: [(key: String, value: String)] {
        let start = Int(self[.headerOffset]), length = Int(self[.headerLength])
        let text = String(decoding: bytes[start..<(start + length)], as: UTF8.self)
        return text.split(separator: "\n").map { (line: Substring) -> (key: String, value: String) in
            let equals = line.firstIndex(of: "=")!
            return (key: String(line[..<equals]), value: String(line[line.index(after: equals)...]))
        }
    }

    /// Replaces (or adds) one header value, moves the index after it, and reseals.
    mutating func setHeader(_ key: String, _ value: String) {
        var lines = header
        if let at = lines.firstIndex(where: { $0.key == key }) { lines[at].value = value } else { lines.append((key, value)) }
        let text = Array(lines.map { "\($0.key)=\($0.value)\n" }.joined().utf8)
        let headerOffset = Int(self[.headerOffset])
        let index = Array(bytes[Int(self[.indexOffset])..<footerStart])
        let count = self[.count]
        let magic = Array(bytes[(bytes.count - 8)...])
        bytes = Array(bytes[0..<headerOffset]) + text + index + [UInt8](repeating: 0, count: PartEditor.footerBytes - 8) + magic
        self[.headerOffset] = UInt64(headerOffset)
        self[.headerLength] = UInt64(text.count)
        self[.indexOffset] = UInt64(headerOffset + text.count)
        self[.count] = count
        reseal()
    }

    /// Recomputes every record's checksum and the one over header and index: the part is then
    /// consistent whatever was edited, as a careful attacker would leave it.
    mutating func reseal() {
        for index in 0..<recordCount {
            let offset = record64(index, 16), length = record64(index, 24), size = UInt64(bytes.count)
            if offset <= size, length <= size - offset {
                setRecord32(index, 32, PartEditor.crc32c(bytes[Int(offset)..<Int(offset + length)]))
            }
        }
        let start = Int(self[.headerOffset])
        store(UInt64(PartEditor.crc32c(bytes[start..<footerStart])), at: footerStart + 32, 4)
    }

    /// CRC-32C, one bit at a time (reflected polynomial 0x82F63B78).
    static func crc32c(_ data: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in data {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    private func load(_ at: Int, _ count: Int) -> UInt64 { (0..<count).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
    private func load64(_ at: Int) -> UInt64 { load(at, 8) }
    private mutating func store(_ value: UInt64, at: Int, _ count: Int) {
        for i in 0..<count { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) }
    }
    private mutating func store64(_ value: UInt64, at: Int) { store(value, at: at, 8) }
}

/// A sparse part of `apparentBytes`: the start of `part` (its magic and data), a hole, and a
/// footer at the end whose header runs from the part's header offset to the footer (most of it
/// the hole), with no records. Made with ftruncate, so it takes a few KB of disk.
func writeSparsePart(from part: PartEditor, apparentBytes: Int64, to path: String, claimingIndex: Bool = false) {
    let headerOffset = part[.headerOffset]
    writeFile(Array(part.bytes[0..<Int(headerOffset)]), to: path)
    let fd = open(path, O_WRONLY)
    precondition(fd >= 0 && ftruncate(fd, off_t(apparentBytes)) == 0)
    var footer = [UInt8](repeating: 0, count: PartEditor.footerBytes)
    func put(_ value: UInt64, _ at: Int) { for i in 0..<8 { footer[at + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) } }
    let footerStart = UInt64(apparentBytes) - UInt64(PartEditor.footerBytes)
    if claimingIndex {
        // A tiny header and an index of zeros filling the hole: (footerStart - index) / 40 records.
        let indexOffset = headerOffset + 8
        let records = (footerStart - indexOffset) / UInt64(PartEditor.recordBytes)
        let indexStart = footerStart - records * UInt64(PartEditor.recordBytes)
        put(headerOffset, 0); put(indexStart - headerOffset, 8); put(indexStart, 16); put(records, 24)
    } else {
        put(headerOffset, 0); put(footerStart - headerOffset, 8); put(footerStart, 16); put(0, 24)
    }
    for (i, byte) in "TSPARTOK".utf8.enumerated() { footer[40 + i] = byte }
    _ = footer.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(footerStart)) }
    close(fd)
}
