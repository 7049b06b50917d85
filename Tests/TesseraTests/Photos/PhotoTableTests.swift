// PhotoTableTests.swift — a PhotoTable gives back every field of every photo, in memory and from
// its temporary files, from several threads at once; the external sort agrees with `sorted()`.
import Dispatch
import Glibc
import Testing
@testable import Tessera

@Suite struct PhotoTableTests {
    /// A photo with every optional field set, every flag on and numbers that need all 64 bits.
    static func fullPhoto(_ index: Int) -> Photo {
        var header = PhotoHeader(width: 4000 + index, height: 3000 + index, colorModel: [.gray, .rgb, .cmyk][index % 3],
                                 isProgressive: index % 2 == 0, exifOrientation: index % 9, adobeInverted: index % 3 == 0,
                                 isArithmetic: index % 4 == 0, storedRGB: index % 5 == 0, minimumDataBytes: Int64(index) << 33,
                                 coefficientBytes: Int64.max - Int64(index), dcDecoderBytes: Int64(index) * 12_345)
        header.format = [.jpeg, .heif, ImageFormat(rawValue: "a-format-name-longer-than-fifteen-bytes")][index % 3]
        header.colorTag = index % 2 == 0 ? UInt64.max - UInt64(index) : nil
        header.wholeImageBytes = Int64(index) * 7
        header.hasAlpha = index % 2 == 1
        header.thumbnailWidth = 320 + index
        header.thumbnailHeight = 240 + index
        // Non-UTF-8 bytes in some paths: the text shows U+FFFD, the bytes stay as they were.
        let bytes = Array("/photos/\(index % 7)/IMG_\(index)".utf8) + (index % 3 == 0 ? [0xFF, 0xFE, 0x2E, 0x6A] : Array(".jpg".utf8))
        let file = PathBytes(bytes)
        return Photo(path: index % 11 == 0 ? "a label of its own \(index)" : file.display, header: header, file: file,
                     identity: index % 4 == 1 ? nil : OutputDestination.Identity(device: UInt64.max - 1, inode: UInt64(index) << 40),
                     fileBytes: index % 5 == 2 ? nil : Int64(index) * 1_000_003,
                     modifiedNanoseconds: index % 6 == 3 ? nil : 1_700_000_000_123_456_789 + Int64(index),
                     changedNanoseconds: index % 7 == 4 ? nil : 1_800_000_000_987_654_321 - Int64(index))
    }

    static func build(_ photos: [Photo], memoryLimit: Int) throws -> PhotoTable {
        let builder = PhotoTable.Builder(temporaryDirectory: temporaryRoot, memoryLimit: memoryLimit)
        for photo in photos { try builder.append(photo) }
        #expect(builder.count == photos.count)
        return try builder.finish()
    }

    @Test func everyFieldRoundTripsInMemoryAndInAFile() throws {
        let photos = (0..<1000).map(Self.fullPhoto)
        let inMemory = try Self.build(photos, memoryLimit: 2048)
        #expect(!inMemory.isFileBacked)
        #expect(Array(inMemory) == photos)
        let inFile = try Self.build(photos, memoryLimit: 10)
        #expect(inFile.isFileBacked)
        #expect(inFile.count == photos.count)
        #expect(Array(inFile) == photos)
        // Random access, backwards, across blocks.
        for index in stride(from: photos.count - 1, through: 0, by: -37) { #expect(inFile[index] == photos[index]) }
        #expect(inFile[3].file.bytes.suffix(4) == [0xFF, 0xFE, 0x2E, 0x6A])
        #expect(inFile[3].path.contains("\u{FFFD}"))
        #expect(inFile[11].path == "a label of its own 11")
    }

    @Test func aFileBackedTableHoldsLittleInMemory() throws {
        let photos = (0..<20_000).map(Self.fullPhoto)
        let small = try Self.build(Array(photos.prefix(2000)), memoryLimit: 100)
        let large = try Self.build(photos, memoryLimit: 100)
        for photo in small { _ = photo }
        for photo in large { _ = photo }
        // A block cache, not the photos: the same for ten times the rows, and far below the
        // in-memory table's figure.
        #expect(large.residentBytes < 1 << 20)
        #expect(large.residentBytes <= small.residentBytes + 4096)
        #expect(large.residentBytes < PhotoTable(photos).residentBytes / 10)
    }

    @Test func emptyAndSmallTables() throws {
        #expect(try Self.build([], memoryLimit: 0).isEmpty)
        let one = try Self.build([Self.fullPhoto(3)], memoryLimit: 0)
        #expect(one.isFileBacked)
        #expect(Array(one) == [Self.fullPhoto(3)])
        let literal: PhotoTable = [Self.fullPhoto(1), Self.fullPhoto(2)]
        #expect(literal.map(\.header.width) == [4001, 4002])
    }

    @Test func concurrentReadersAllSeeTheRightPhotos() throws {
        let photos = (0..<3000).map(Self.fullPhoto)
        let table = try Self.build(photos, memoryLimit: 0)
        let wrong = AtomicCounter()
        let right = AtomicCounter()
        DispatchQueue.concurrentPerform(iterations: 8) { lane in
            // Each lane strides through the table from its own start: the blocks keep changing.
            var index = lane * 97 % photos.count
            for _ in 0..<2000 {
                if table[index] != photos[index] { _ = wrong.increment() } else { _ = right.increment() }
                index = (index + 257 * (lane + 1)) % photos.count
            }
        }
        #expect(wrong.increment() == 1)  // none wrong before this one
        #expect(right.increment() == 8 * 2000 + 1)
    }

    // MARK: External sort

    /// Sorts `records` with runs of `runBytes` and returns them as the sorter gave them.
    static func externalSort(_ records: [(key: [UInt8], payload: [UInt8])], runBytes: Int) throws -> [(key: [UInt8], payload: [UInt8])] {
        let sorter = ExternalSort(temporaryDirectory: temporaryRoot, runBytes: runBytes)
        for record in records { try sorter.append(key: record.key, payload: record.payload) }
        var out: [(key: [UInt8], payload: [UInt8])] = []
        try sorter.finish { (key: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) throws(TesseraError) in
            out.append((Array(key), Array(payload)))
        }
        return out
    }

    @Test func externalSortAgreesWithSortedOverManyRuns() throws {
        var random = SystemRandomNumberGenerator()
        var records: [(key: [UInt8], payload: [UInt8])] = []
        for index in 0..<20_000 {
            // Short keys from a small alphabet: many equal keys and many prefixes of others.
            let key = (0..<Int.random(in: 0...6, using: &random)).map { _ in UInt8.random(in: 0x2E...0x31, using: &random) }
            var payload: [UInt8] = []
            withUnsafeBytes(of: Int32(index).littleEndian) { payload.append(contentsOf: $0) }
            payload += [UInt8](repeating: 7, count: index % 13)
            records.append((key, payload))
        }
        // Stable reference: by key, then by arrival (the payload's first four bytes).
        let expected = records.enumerated().sorted { a, b in
            a.element.key == b.element.key ? a.offset < b.offset : a.element.key.lexicographicallyPrecedes(b.element.key)
        }.map(\.element)
        for runBytes in [300, 4096, 1 << 22] {
            let sorted = try Self.externalSort(records, runBytes: runBytes)
            #expect(sorted.count == expected.count)
            #expect(sorted.map(\.key) == expected.map(\.key), "runBytes \(runBytes)")
            #expect(sorted.map(\.payload) == expected.map(\.payload), "runBytes \(runBytes): equal keys keep their order")
        }
    }

    @Test func externalSortOfNothingAndOfLongRecords() throws {
        #expect(try Self.externalSort([], runBytes: 100).isEmpty)
        // Records longer than a run and than a merge read buffer still come back whole.
        let long = (0..<40).map { index in ([UInt8](repeating: UInt8(40 - index), count: 9000), [UInt8](repeating: UInt8(index), count: 70_000)) }
        let sorted = try Self.externalSort(long.map { (key: $0.0, payload: $0.1) }, runBytes: 100)
        #expect(sorted.map(\.key.first) == (1...40).map { UInt8($0) })
        #expect(sorted.allSatisfy { $0.payload.count == 70_000 && $0.key.count == 9000 })
        #expect(sorted.map(\.payload.first) == (0..<40).reversed().map { UInt8($0) })
    }
}
