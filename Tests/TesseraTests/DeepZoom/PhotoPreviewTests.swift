// PhotoPreviewTests.swift — the viewer's previews as PhotoPreviews makes them: one per distinct
// photo drawn, none for a photo that cannot be read, and none tried again for a photo the
// render already failed to read (the viewer's side is ViewerTests, in headless Chromium).
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct PhotoPreviewTests {
    /// Three readable photos and one that fails while it is drawn, in a grid that draws each twice.
    private func previews(in scratch: ScratchDirectory, broken breaking: ([UInt8]) -> [UInt8] = JPEGFile.failingInItsScan,
                          failedInRender: @escaping @Sendable (Int) -> Bool) throws
        -> (made: [Int], counts: (made: Int, unreadable: Int, missed: [SkippedPhoto])) {
        var photos = try PhotoLibrary.scan(["Landscape_1", "Portrait_3", "Landscape_6"].map { "\(fixturesDirectory)/orientation/\($0).jpg" })
            .photos.map { $0 }
        let broken = scratch.file("broken.jpg")
        let bytes = readBytes(photos[0].path)
        writeBytes(breaking(bytes), to: broken)
        photos.append(Photo(path: broken, header: photos[0].header))
        let layout = CellLayout(columns: 4, rows: 2, cellWidth: 20, cellHeight: 20, repeating: [0, 1, 2, 3])
        var previews = PhotoPreviews(photos: PhotoTable(photos), layout: layout, longSide: 96, quality: 80, subsampling: .s420,
                                     decoder: CellDecoder(cellWidth: 20, cellHeight: 20, decodePoolBytes: 16 << 20), workers: 2)
        previews.failedInRender = failedInRender
        var made: [Int] = []
        let counts = try previews.make { index, jpeg throws(TesseraError) in
            #expect(jpeg.count > 100 && jpeg[0] == 0xFF && jpeg[1] == 0xD8, "preview \(index) is not a JPEG")
            made.append(index)
        }
        return (made.sorted(), counts)
    }

    @Test func everyReadablePhotoDrawnHasOnePreview() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let result = try previews(in: scratch) { _ in false }
        #expect(result.made == [0, 1, 2])
        #expect(result.counts.made == 3 && result.counts.unreadable == 1)
        // The broken photo, which the render (here) drew: named, with why.
        #expect(result.counts.missed.map(\.path) == [scratch.path + "/broken.jpg"] && result.counts.missed[0].reason.isEmpty == false,
                "\(result.counts.missed)")
    }

    /// A photo cut short is drawn as far as it goes in its cell, but has no preview (a larger
    /// picture of it would show the grey it lacks): named, with why.
    @Test func aCutPhotoHasNoPreview() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let result = try previews(in: scratch, broken: { Array($0.prefix($0.count * 8 / 10)) }) { _ in false }
        #expect(result.made == [0, 1, 2])
        #expect(result.counts.missed.map(\.path) == [scratch.path + "/broken.jpg"]
                && result.counts.missed[0].reason.contains("file ends early"), "\(result.counts.missed)")
    }

    /// A photo the render failed to read is not decoded again: here a readable one marked so
    /// has no preview, counted with the unreadable.
    @Test func aPhotoThatFailedInTheRenderIsNotTriedAgain() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let result = try previews(in: scratch) { $0 == 1 || $0 == 3 }
        #expect(result.made == [0, 2])
        #expect(result.counts.made == 2 && result.counts.unreadable == 2)
        #expect(result.counts.missed.isEmpty, "a photo the render named is not named again")
    }
}
