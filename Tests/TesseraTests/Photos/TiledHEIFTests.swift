// TiledHEIFTests.swift — a grid HEIC (the layout phones write: 512 x 512 HEVC tiles, irot, a
// thumbnail, nclx and an ICC profile) is drawn a row of tiles at a time, with the same pixels as
// libheif's own whole decode (heif-convert, an independent program), within the budget of a
// row of tiles; its thumbnail only when it has the cell's pixels; a hostile grid is refused.
import CTesseraTestShims
import Foundation
import Testing
@testable import Tessera
import TesseraTestSupport

/// A picture's grid tiles (512 x 512) and thumbnail, HEVC-encoded once (the slow part) and
/// written as phone-layout HEICs with different boxes (tessera_test_write_heic_tiles).
final class EncodedPhoneHEIC: @unchecked Sendable {
    // Read only after init; writes from it run concurrently.
    private let tiles: OpaquePointer

    init(_ picture: RGBImage, thumbnail: Int = 0) {
        var message = [CChar](repeating: 0, count: 200)
        let encoded = picture.pixels.withUnsafeBufferPointer {
            tessera_test_encode_heic_tiles($0.baseAddress, Int32(picture.width), Int32(picture.height), 512, Int32(thumbnail), 90,
                                           &message, 200)
        }
        precondition(encoded != nil, "encoding tiles: \(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        tiles = encoded!
    }

    deinit { tessera_test_free_heic_tiles(tiles) }

    func write(to path: String, thumbnail: Bool = false, damagedThumbnail: Bool = false, transforms: String = "",
               clap: (Int, Int) = (0, 0), icc: [UInt8] = [], canvas: (Int, Int) = (0, 0), unturnedThumbnail: Bool = false) throws {
        var message = [CChar](repeating: 0, count: 200)
        let written = transforms.withCString { transformText in
            icc.withUnsafeBufferPointer { iccBytes in
                var options = tessera_test_heic_options()
                options.transforms = transforms.isEmpty ? nil : transformText
                options.clap_width = Int32(clap.0)
                options.clap_height = Int32(clap.1)
                options.icc = iccBytes.isEmpty ? nil : iccBytes.baseAddress
                options.icc_bytes = iccBytes.count
                options.omit_thumbnail = thumbnail || damagedThumbnail ? 0 : 1
                options.damage_thumbnail = damagedThumbnail ? 1 : 0
                options.thumbnail_unturned = unturnedThumbnail ? 1 : 0
                options.canvas_width = Int32(canvas.0)
                options.canvas_height = Int32(canvas.1)
                return tessera_test_write_heic_tiles(path, tiles, &options, &message, 200)
            }
        }
        guard written == 0 else {
            throw TiledHEIFTests.Failure(text: String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }
}

@Suite struct TiledHEIFTests {
    struct Failure: Error { let text: String }

    /// 1300 x 1000: a grid of 3 x 2 tiles whose right and bottom ones are partly past the
    /// canvas, and a 325 x 250 thumbnail.
    static let phone = EncodedPhoneHEIC(SamplePhotos.picture(width: 1300, height: 1000, seed: 28), thumbnail: 320)

    /// libheif's own decode of `heic` (heif-convert, transforms applied), drawn into the same
    /// cell through the PNG path: the oracle.
    func libheifsCell(_ heic: String, width: Int, height: Int, scratch: ScratchDirectory) throws -> RGBImage {
        let png = scratch.file(UUID().uuidString + ".png")
        #expect(runTool(["heif-convert", "--quiet", heic, png]) == 0)
        return try drawnCell(png, width: width, height: height).0
    }

    func largestDifference(_ a: RGBImage, _ b: RGBImage) -> Int {
        zip(a.pixels, b.pixels).map { abs(Int($0) - Int($1)) }.max() ?? 0
    }

    /// Every irot and imir combination a file can carry, in libheif's order; cells that crop
    /// the sides, the top and bottom, and neither much.
    @Test(arguments: ["", "r1", "r2", "r3", "m0", "m1", "r1m0", "m1r3"], [(300, 300), (400, 100), (260, 200)])
    func drawnTileByTileLikeLibheifsWholeDecode(_ transforms: String, _ cell: (Int, Int)) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let heic = scratch.file("phone.heic")
        try Self.phone.write(to: heic, transforms: transforms)
        let (drawn, notes) = try drawnCell(heic, width: cell.0, height: cell.1)
        #expect(notes.method == .tiles, "\(notes.method)")
        let reference = try libheifsCell(heic, width: cell.0, height: cell.1, scratch: scratch)
        // The same tiles and conversion to RGB: the same pixels, but for the resampler's sums in
        // another order (it works in the stored frame, which is libheif's turned one for the PNG).
        let mean = meanAbsoluteDifference(drawn, reference)
        #expect(largestDifference(drawn, reference) <= 1 && mean < 0.001, "\(transforms) into \(cell): \(mean) mean")
    }

    /// An ICC profile (Display P3) beside the nclx box is applied as it is for the whole decode.
    @Test func anICCProfileIsAppliedAsForTheWholeDecode() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let profile = scratch.file("p3.icc")
        #expect(tessera_test_write_display_p3_profile(profile) == 0)
        let icc = try [UInt8](Data(contentsOf: URL(fileURLWithPath: profile)))
        let heic = scratch.file("p3.heic"), plain = scratch.file("plain.heic")
        try Self.phone.write(to: heic, transforms: "r3", icc: icc)
        try Self.phone.write(to: plain, transforms: "r3")
        let (drawn, notes) = try drawnCell(heic, width: 300, height: 200)
        #expect(notes.method == .tiles && notes.warningCount == 0, "\(notes)")
        let reference = try libheifsCell(heic, width: 300, height: 200, scratch: scratch)
        #expect(largestDifference(drawn, reference) <= 1, "\(meanAbsoluteDifference(drawn, reference)) mean")
        // And the profile did something: P3 to sRGB moves a saturated picture.
        let (untagged, _) = try drawnCell(plain, width: 300, height: 200)
        #expect(meanAbsoluteDifference(drawn, untagged) > 1)
    }

    /// What the budget counts for a grid is a row of tiles and one tile's decode, not the canvas.
    @Test func theBudgetCountsARowOfTiles() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let heic = scratch.file("phone.heic")
        try Self.phone.write(to: heic)
        let header = try PhotoLibrary.scan([heic]).photos[0].header
        let rowOfTiles = 3 * 512 * 512 * 3
        #expect(header.wholeImageBytes >= Int64(rowOfTiles) && header.wholeImageBytes < Int64(rowOfTiles) * 4,
                "\(header.wholeImageBytes)")
        // libheif's whole decode would hold the canvas as planar RGB (3.9 MB) and a tile's
        // decoder (8 MiB counted): a pool of 2.5 MiB (10 MiB for one decode) refuses that, and
        // draws the tiles.
        let pool = 5 << 19
        #expect(1300 * 1000 * 3 + (8 << 20) > DecodeBudget(poolBytes: pool, spillDirectory: scratch.path).wholeImageLimitBytes)
        let (_, notes) = try drawnCell(heic, width: 300, height: 300, pool: pool)
        #expect(notes.method == .tiles, "\(notes.method)")
    }

    /// The 325 x 250 thumbnail draws a 200 x 150 cell and a 250 px square one; a 300 px square
    /// cell (a 250 x 250 crop of it) and a 330 x 240 one are drawn from the tiles.
    @Test func theThumbnailOnlyWhenItHasTheCellsPixels() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let heic = scratch.file("thumbnailed.heic")
        try Self.phone.write(to: heic, thumbnail: true, transforms: "r1")
        let header = try PhotoLibrary.scan([heic]).photos[0].header
        // Turned by its irot, as the picture is.
        #expect(header.thumbnailWidth == 250 && header.thumbnailHeight == 325, "\(header.thumbnailWidth) x \(header.thumbnailHeight)")
        #expect(try drawnCell(heic, width: 150, height: 200).1.method == .thumbnail)
        #expect(try drawnCell(heic, width: 250, height: 250).1.method == .thumbnail)
        #expect(try drawnCell(heic, width: 300, height: 300).1.method == .tiles)
        #expect(try drawnCell(heic, width: 240, height: 330).1.method == .tiles)
        #expect(header.wholeImageBytes(cellWidth: 150, cellHeight: 200) == 0)
        #expect(header.wholeImageBytes(cellWidth: 300, cellHeight: 300) == Int(header.wholeImageBytes))
    }

    /// A thumbnail is decoded whole, on its own: one the budget cannot hold is not used, the
    /// tiles are (a helper's 8192 x 8192 12-bit thumbnail of a cheap 8-bit grid was decoded at
    /// 978 MiB under --max-memory 32M). Here a thumbnail as large as its 1536 x 1024 picture.
    @Test func aThumbnailTheBudgetCannotHoldIsNotUsed() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let heic = scratch.file("large-thumbnail.heic")
        let phone = EncodedPhoneHEIC(SamplePhotos.picture(width: 1536, height: 1024, seed: 29), thumbnail: 1536)
        try phone.write(to: heic, thumbnail: true)
        let header = try PhotoLibrary.scan([heic]).photos[0].header
        #expect(header.thumbnailWidth == 1536, "\(header.thumbnailWidth) x \(header.thumbnailHeight)")
        let (_, roomy) = try drawnCell(heic, width: 150, height: 100, pool: 32 << 20)
        #expect(roomy.method == .thumbnail, "\(roomy)")
        let (_, notes) = try drawnCell(heic, width: 150, height: 100, pool: 2 << 20)
        #expect(notes.method == .tiles, "\(notes)")
    }

    /// A thumbnail that is not the picture's shape as each is turned (the grid has an irot, the
    /// thumbnail none: a portrait's thumbnail lying on its side) is not used: a cell it would
    /// cover is drawn from the tiles, upright, as without a thumbnail. Before, it was drawn
    /// sideways from the thumbnail.
    @Test func aThumbnailTurnedOtherwiseThanThePictureIsNotUsed() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let unturned = scratch.file("unturned.heic"), plain = scratch.file("plain.heic")
        try Self.phone.write(to: unturned, thumbnail: true, transforms: "r1", unturnedThumbnail: true)
        try Self.phone.write(to: plain, transforms: "r1")
        let header = try PhotoLibrary.scan([unturned]).photos[0].header
        #expect(header.thumbnailWidth == 0 && header.thumbnailHeight == 0, "\(header.thumbnailWidth) x \(header.thumbnailHeight)")
        let (drawn, notes) = try drawnCell(unturned, width: 150, height: 200)
        #expect(notes.method == .tiles, "\(notes)")
        let (expected, _) = try drawnCell(plain, width: 150, height: 200)
        #expect(drawn.pixels == expected.pixels)
        // The same thumbnail turned as its picture is still used.
        let turned = scratch.file("turned.heic")
        try Self.phone.write(to: turned, thumbnail: true, transforms: "r1")
        #expect(try drawnCell(turned, width: 150, height: 200).1.method == .thumbnail)
        // A square picture, whose thumbnail has its shape either way: told by the transforms.
        let square = EncodedPhoneHEIC(SamplePhotos.picture(width: 1000, height: 1000, seed: 29), thumbnail: 320)
        let squareUnturned = scratch.file("square-unturned.heic"), squarePlain = scratch.file("square-plain.heic")
        try square.write(to: squareUnturned, thumbnail: true, transforms: "r1", unturnedThumbnail: true)
        try square.write(to: squarePlain, transforms: "r1")
        let squareHeader = try PhotoLibrary.scan([squareUnturned]).photos[0].header
        #expect(squareHeader.thumbnailWidth == 0, "\(squareHeader.thumbnailWidth) x \(squareHeader.thumbnailHeight)")
        let (squareDrawn, squareNotes) = try drawnCell(squareUnturned, width: 150, height: 150)
        #expect(squareNotes.method == .tiles, "\(squareNotes)")
        #expect(squareDrawn.pixels == (try drawnCell(squarePlain, width: 150, height: 150)).0.pixels)
    }

    /// A thumbnail that cannot be decoded, beside a whole picture, is not the photo's end: the
    /// cell is drawn from the tiles, as without a thumbnail, with a warning saying so.
    @Test func aDamagedThumbnailFallsBackToThePicture() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let damaged = scratch.file("damaged.heic"), plain = scratch.file("plain.heic")
        try Self.phone.write(to: damaged, damagedThumbnail: true, transforms: "r1")
        try Self.phone.write(to: plain, transforms: "r1")
        let (drawn, notes) = try drawnCell(damaged, width: 150, height: 200)
        #expect(notes.method == .tiles && notes.warningCount == 1, "\(notes)")
        #expect(notes.firstWarning.hasPrefix("its thumbnail cannot be decoded ("), "\(notes.firstWarning)")
        #expect(notes.firstWarning.hasSuffix("); drawn from the full image"), "\(notes.firstWarning)")
        let (expected, _) = try drawnCell(plain, width: 150, height: 200)
        #expect(drawn.pixels == expected.pixels)
    }

    /// A grid with a clap crop is decoded whole by libheif (its rounding is libheif's own).
    @Test func aCroppedGridIsDecodedWhole() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let heic = scratch.file("clap.heic")
        try Self.phone.write(to: heic, transforms: "cr1", clap: (1200, 900))
        let (drawn, notes) = try drawnCell(heic, width: 200, height: 200)
        #expect(notes.method == .wholeImage, "\(notes.method)")
        let reference = try libheifsCell(heic, width: 200, height: 200, scratch: scratch)
        #expect(meanAbsoluteDifference(drawn, reference) < 1)
    }

    /// Tiles that do not reach the canvas's edge (libheif would leave pixels unset), or a tile
    /// row past it: a clear per-photo error.
    @Test(arguments: [(1560, 1000), (1300, 1060), (1000, 1000), (1300, 500)])
    func aGridWhoseTilesDoNotCoverItsCanvasIsRefused(_ canvas: (Int, Int)) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let heic = scratch.file("hostile.heic")
        try Self.phone.write(to: heic, canvas: canvas)
        do {
            let (_, notes) = try drawnCell(heic)
            Issue.record("drawn (\(notes.method))")
        } catch let error as TesseraError {
            guard case .unreadablePhoto(_, let reason) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(reason.contains("does not cover"), "\(reason)")
        }
    }

    /// A file cut short inside its tiles' data, or with one tile's data overwritten: a per-photo
    /// error (the tiles before it decoded), never a crash.
    @Test(arguments: [false, true])
    func aGridWithBrokenTileDataIsAPerPhotoError(_ overwrite: Bool) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let heic = scratch.file("broken.heic")
        try Self.phone.write(to: heic)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: heic)))
        let cut = bytes.count * 3 / 4
        if overwrite {
            for i in cut..<min(bytes.count, cut + 4096) { bytes[i] = UInt8(truncatingIfNeeded: i &* 131) }
        } else {
            bytes.removeSubrange(cut...)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: heic))
        do {
            let (_, notes) = try drawnCell(heic, width: 260, height: 200)
            // libde265 may conceal garbage in a tile rather than fail; it is still drawn by tiles.
            #expect(overwrite && notes.method == .tiles, "\(notes.method)")
        } catch let error as TesseraError {
            guard case .unreadablePhoto(_, let reason) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(reason.hasPrefix("HEIF: "), "\(reason)")
        }
    }
}
