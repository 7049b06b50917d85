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
