// DateTakenTests.swift — the date a photo was taken, from its EXIF: read from the header (the
// original date before the digitised one before the file's), refused when it is not a date,
// kept by the header index and the photo table, and the order grids and collages take.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct DateTakenTests {
    private func header(_ dates: [UInt16: String], in scratch: ScratchDirectory) throws -> PhotoHeader {
        let path = scratch.file("p\(UInt32.random(in: 0...UInt32.max)).jpg")
        writeBytes(jpegWithDates(readBytes(baseJPEG), dates), to: path)
        return try PhotoLibrary.scan([path]).photos[0].header
    }

    @Test func theOriginalDateComesFirstThenTheDigitisedThenTheFiles() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        #expect(try header([0x9003: "2019:07:04 10:15:30", 0x9004: "2020:01:01 00:00:00", 0x0132: "2021:01:01 00:00:00"], in: scratch)
                    .dateTaken == 2019_07_04_10_15_30)
        #expect(try header([0x9004: "2020:01:02 03:04:05", 0x0132: "2021:01:01 00:00:00"], in: scratch).dateTaken == 2020_01_02_03_04_05)
        #expect(try header([0x0132: "2021:12:31 23:59:59"], in: scratch).dateTaken == 2021_12_31_23_59_59)
        #expect(try header([:], in: scratch).dateTaken == 0)
        #expect(try PhotoLibrary.scan([baseJPEG]).photos[0].header.dateTaken == 0)
    }

    /// A 2 x 2 grey TIFF whose first IFD holds `own` (tag: text, DateTime 306 among them) and
    /// points at an EXIF IFD holding `exif` (DateTimeOriginal 36867, DateTimeDigitized 36868),
    /// when given; little- or big-endian.
    private func tiffWithDates(own: [UInt16: String], exif: [UInt16: String]?, bigEndian: Bool = false) -> [UInt8] {
        func number(_ value: Int, _ count: Int) -> [UInt8] {
            let bytes = (0..<count).map { UInt8((value >> (8 * $0)) & 0xff) }
            return bigEndian ? bytes.reversed() : bytes
        }
        var file = Array((bigEndian ? "MM" : "II").utf8) + number(42, 2) + number(8, 4)
        var texts: [(Int, String)] = []  // where each text's offset goes, and the text
        func ifd(_ entries: [(tag: UInt16, type: Int, value: Int?, text: String?)]) {
            file += number(entries.count, 2)
            for entry in entries.sorted(by: { $0.tag < $1.tag }) {
                file += number(Int(entry.tag), 2) + number(entry.type, 2)
                if let text = entry.text {
                    file += number(text.utf8.count + 1, 4)
                    texts.append((file.count, text))
                    file += number(0, 4)
                } else if entry.type == 3 {
                    file += number(1, 4) + number(entry.value!, 2) + [0, 0]
                } else {
                    file += number(1, 4) + number(entry.value!, 4)
                }
            }
            file += number(0, 4)
        }
        let exifAt = 8 + 2 + 12 * (10 + own.count) + 4
        let exifBytes = exif.map { 2 + 12 * $0.count + 4 } ?? 0
        let pixelsAt = exifAt + exifBytes
        var entries: [(tag: UInt16, type: Int, value: Int?, text: String?)] = [
            (256, 3, 2, nil), (257, 3, 2, nil), (258, 3, 8, nil), (259, 3, 1, nil), (262, 3, 1, nil),
            (273, 4, pixelsAt, nil), (277, 3, 1, nil), (278, 3, 2, nil), (279, 4, 4, nil)]
        entries += own.map { (tag: $0.key, type: 2, value: nil, text: $0.value) }
        entries.append((34665, 4, exif == nil ? 0 : exifAt, nil))
        ifd(entries)
        if let exif { ifd(exif.map { (tag: $0.key, type: 2, value: nil, text: $0.value) }) }
        file += [40, 80, 120, 160]
        for (at, text) in texts {
            file.replaceSubrange(at..<at + 4, with: number(file.count, 4))
            file += Array(text.utf8) + [0]
        }
        return file
    }

    /// A TIFF's date, and a camera RAW's built as one, is its EXIF IFD's (original, then
    /// digitised) or its own DateTime: TIFFs sorted after every dated photo before 0.6.16.
    @Test func aTIFFsDateIsItsEXIFIFDsOrItsOwn() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        func date(own: [UInt16: String], exif: [UInt16: String]?, bigEndian: Bool = false) throws -> Int64 {
            let path = scratch.file("p\(UInt32.random(in: 0...UInt32.max)).tif")
            writeBytes(tiffWithDates(own: own, exif: exif, bigEndian: bigEndian), to: path)
            let library = try PhotoLibrary.scan([path])
            #expect(library.photos.count == 1, "\(library.skipped)")
            return library.photos.first?.header.dateTaken ?? -1
        }
        let original: [UInt16: String] = [36867: "2019:07:04 10:15:30", 36868: "2020:01:01 00:00:00"]
        #expect(try date(own: [306: "2021:01:01 00:00:00"], exif: original) == 2019_07_04_10_15_30)
        #expect(try date(own: [306: "2021:01:01 00:00:00"], exif: original, bigEndian: true) == 2019_07_04_10_15_30)
        #expect(try date(own: [:], exif: [36868: "2020:01:02 03:04:05"]) == 2020_01_02_03_04_05)
        #expect(try date(own: [306: "2021:12:31 23:59:59"], exif: nil) == 2021_12_31_23_59_59)
        #expect(try date(own: [306: "2021:12:31 23:59:59"], exif: [36867: "2019:13:04 10:15:30"]) == 2021_12_31_23_59_59)
        #expect(try date(own: [:], exif: nil) == 0)
        // A DNG's preview carries no EXIF: the date is the DNG's own.
        let dng = scratch.file("dated.dng")
        writeBytes(makeDNG(preview: readBytes(baseJPEG), dateTaken: "2015:06:07 08:09:10"), to: dng)
        let raw = try #require(try PhotoLibrary.scan([dng]).photos.first?.header)
        #expect(raw.format == .raw && raw.dateTaken == 2015_06_07_08_09_10)
    }

    /// What is not a date is no date (and the next tag is asked): hostile text is never read as one.
    @Test(arguments: ["2019:13:04 10:15:30", "2019:07:00 10:15:30", "2019:07:04 24:00:00", "0000:00:00 00:00:00",
                      "    :  :     :  :  ", "2019-07-04 10:15:30", "2019:07:04", "abcd:ef:gh ij:kl:mn", "1700:01:01 00:00:00"])
    func whatIsNotADateIsNoDate(text: String) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        #expect(try header([0x9003: text], in: scratch).dateTaken == 0, "\(text)")
        #expect(try header([0x9003: text, 0x0132: "2001:02:03 04:05:06"], in: scratch).dateTaken == 2001_02_03_04_05_06, "\(text)")
    }

    @Test func theHeaderIndexAndThePhotoTableKeepTheDate() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = scratch.file("dated.jpg")
        writeBytes(jpegWithDates(readBytes(baseJPEG), [0x9003: "2018:05:06 07:08:09"]), to: path)
        let index = HeaderIndex(directory: scratch.file("cache"))
        let cold = try PhotoLibrary.scan([path], cache: index)
        let warm = try PhotoLibrary.scan([path], cache: index)
        #expect(cold.photos[0].header.dateTaken == 2018_05_06_07_08_09)
        #expect(warm.photos[0].header == cold.photos[0].header)
        // A table in files (past the in-memory limit) gives the date back too.
        let builder = PhotoTable.Builder(temporaryDirectory: scratch.path, memoryLimit: 1)
        for _ in 0..<3 { try builder.append(cold.photos[0]) }
        let table = try builder.finish()
        #expect(table.isFileBacked)
        #expect(table[2].header.dateTaken == 2018_05_06_07_08_09)
    }

    @Test func gridsAndCollagesTakeTheDateOrder() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // By path a, b, c, d; by date c (2001), a (2005), d (2010), then b (no date).
        let dates: [String: String] = ["a": "2005:01:01 00:00:00", "c": "2001:01:01 00:00:00", "d": "2010:01:01 00:00:00"]
        var paths: [String] = []
        for name in ["a", "b", "c", "d"] {
            let path = scratch.file(name + ".jpg")
            writeBytes(dates[name].map { jpegWithDates(readBytes(baseJPEG), [0x9003: $0]) } ?? readBytes(baseJPEG), to: path)
            paths.append(path)
        }
        let photos = try PhotoLibrary.scan(paths).photos
        #expect(photos.map(\.path) == paths)
        #expect(PhotoOrder.byDateTaken(photos) == [2, 0, 3, 1])
        let grid = GridLayout.make(photoCount: 4, columns: 3, rows: 2, cellWidth: 8, cellHeight: 8, order: .dateTaken, photos: photos)
        #expect(grid.photoIndices == [2, 0, 3, 1, 2, 0])
        #expect(CollageLayout.sequence(photoCount: 4, order: .dateTaken, photos: photos) == [2, 0, 3, 1])
    }
}
