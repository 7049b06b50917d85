// HEIFBudgetTests.swift — a HEIF that is one picture (not tiled) and has no thumbnail is decoded
// whole by libheif: about 6.5 bytes a pixel (libde265's picture and tables, libheif's copy;
// measured in Formats/HEIF.swift). A decode pool below that refuses it, naming the size;
// one above draws it.
import Glibc
import Testing
@testable import Tessera
import TesseraTestSupport

@Suite struct HEIFBudgetTests {
    @Test func aWholeHEIFDecodeIsRefusedBelowItsCostAndDrawnAboveIt() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let width = 2400, height = 1800
        let jpeg = scratch.file("picture.jpg"), heic = scratch.file("picture.heic")
        try JPEGFile.write(SamplePhotos.picture(width: width, height: height, seed: 26), to: jpeg, quality: 90)
        #expect(runTool(["heif-enc", "-q", "50", jpeg, "-o", heic]) == 0)
        // 4.32 MP: 28 MB by 6.5 bytes a pixel. A pool of 4 MiB lets one photo take what
        // DecodeBudget allows a whole image (a few times the pool): more than a budget of 3
        // bytes a pixel or less, less than 6 bytes a pixel.
        let pixels = width * height
        let small = 4 << 20
        let allowed = DecodeBudget(poolBytes: small, spillDirectory: scratch.path).wholeImageLimitBytes
        #expect(pixels * 3 < allowed && pixels * 6 > allowed, "a whole image may take \(allowed) bytes at a pool of \(small)")
        do {
            let (cell, notes) = try drawnCell(heic, pool: small)
            Issue.record("drawn at a pool of \(small) bytes (\(notes.method), \(cell.width) x \(cell.height))")
        } catch let error as TesseraError {
            // A refusal for want of memory carries the budget that would draw it.
            guard case .photoNeedsMemory(_, let reason, let budget) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(reason.contains("\(width) x \(height)") && reason.contains("more than"), "\(reason)")
            #expect(budget > Int64(allowed), "a budget of \(budget) bytes is suggested")
        }
        let (_, notes) = try drawnCell(heic, pool: 4 * small)
        #expect(notes.method == .wholeImage, "\(notes.method)")
    }

    /// A HEIF whose picture is an overlay (iovl) or coded otherwise than HEVC and AV1 (VVC) is
    /// skipped by the scan for what it is: it was "the coded size of its picture cannot be
    /// read (refused: libheif would decode the larger)".
    @Test func aPictureTesseraCannotDecodeIsNamedForWhatItIs() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let jpeg = scratch.file("picture.jpg"), heic = scratch.file("picture.heic")
        try JPEGFile.write(SamplePhotos.picture(width: 64, height: 48, seed: 3), to: jpeg, quality: 90)
        #expect(runTool(["heif-enc", "-q", "50", jpeg, "-o", heic]) == 0)
        let bytes = readBytes(heic)
        // The item's type in its infe box (the only hvc1 item: no thumbnail).
        let infe = try #require(bytes.indices.dropLast(4).first { bytes[$0..<$0 + 4].elementsEqual("infe".utf8) })
        let type = try #require((infe..<(infe + 64)).first { bytes[$0..<$0 + 4].elementsEqual("hvc1".utf8) })
        for (kind, said) in [("iovl", "an overlay of other pictures (iovl)"), ("vvc1", "coded as 'vvc1', which Tessera does not decode")] {
            var patched = bytes
            patched.replaceSubrange(type..<(type + 4), with: Array(kind.utf8))
            let path = scratch.file(kind + ".heic")
            writeBytes(patched, to: path)
            let library = try PhotoLibrary.scan([path])
            #expect(library.photos.isEmpty && library.skipped.first?.reason.contains(said) == true, "\(library.skipped)")
        }
    }
}
