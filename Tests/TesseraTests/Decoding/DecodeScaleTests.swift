// DecodeScaleTests.swift — the DCT scale a JPEG is drawn from leaves the area average at least
// 2:1 (CellDecoder.sharpEnough), so a cell is as close to the photo's exact area average as a
// full-size decode would make it.
import Foundation
import Testing
@testable import Tessera
import TesseraTestSupport

/// The exact mean of each `factor` x `factor` block of the square centre crop of `image`,
/// rounded: the reference a cell `image.height / factor` px square should match.
private func blockMeans(_ image: RGBImage, factor: Int) -> RGBImage {
    let side = min(image.width, image.height), left = (image.width - side) / 2, top = (image.height - side) / 2
    let size = side / factor
    var out = RGBImage(width: size, height: size)
    for y in 0..<size {
        for x in 0..<size {
            var sum = (0, 0, 0)
            for sy in (top + y * factor)..<(top + (y + 1) * factor) {
                for sx in (left + x * factor)..<(left + (x + 1) * factor) {
                    let p = image.pixel(x: sx, y: sy)
                    sum.0 += Int(p.red); sum.1 += Int(p.green); sum.2 += Int(p.blue)
                }
            }
            let n = factor * factor, i = (y * size + x) * 3
            out.pixels[i] = UInt8((sum.0 + n / 2) / n)
            out.pixels[i + 1] = UInt8((sum.1 + n / 2) / n)
            out.pixels[i + 2] = UInt8((sum.2 + n / 2) / n)
        }
    }
    return out
}

@Suite struct DecodeScaleTests {
    /// A real photo (1800 x 1200, its 1200 px centre crop) into square cells that a DCT scale
    /// covers by less than 2:1: 240 px (2/8 gives 300, so 4/8 is used), 200 px (1/8 gives 150,
    /// 2/8 300: 4/8) and 120 px (1/8 gives 150: 2/8). Measured against the exact block means of
    /// the full-size decode: drawn from the scale that only just covers them (before 0.6.12) the
    /// mean differences were 1.9, 1.6 and 2.3 levels (through a Q100 output), from the scale up
    /// 0.9, 0.6 and 1.0.
    @Test(arguments: [(240, 5), (200, 6), (120, 10)])
    func aCellIsAsSharpAsTheFullSizeAverage(cell: Int, factor: Int) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let photo = fixturesDirectory + "/orientation/Landscape_1.jpg"
        let ppm = scratch.file("full.ppm")
        #expect(runTool(["djpeg", "-outfile", ppm, photo]) == 0)
        let full = try #require(readPPM(ppm))
        let reference = blockMeans(full, factor: factor)
        #expect(reference.width == cell)

        let decoder = CellDecoder(cellWidth: cell, cellHeight: cell, budget: DecodeBudget(budgetBytes: 256 << 20, workers: 1))
        var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
        let notes = try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(TesseraError) in try decoder.decode(path: photo, into: buffer) }
        }.get()
        #expect(notes.method == .streamed)
        let difference = meanAbsoluteDifference(RGBImage(width: cell, height: cell, pixels: bytes), reference)
        #expect(difference <= 1.25, "\(cell) px: mean difference \(difference) from the exact area average")
    }

    @Test func theScaleLeavesTwoToOneOrIsFullSize() {
        let cell = (width: 240, height: 240)
        // 1/8 of 1800 x 1200 covers it only at the DC decoder's (a progressive file).
        #expect(!CellDecoder.sharpEnough((225, 150), for: cell, numerator: 1, dcDecoder: true))
        #expect(CellDecoder.sharpEnough((225, 150), for: (150, 150), numerator: 1, dcDecoder: true))
        #expect(!CellDecoder.sharpEnough((225, 150), for: (150, 150), numerator: 1, dcDecoder: false))
        #expect(!CellDecoder.sharpEnough((450, 300), for: cell, numerator: 2, dcDecoder: false))
        #expect(CellDecoder.sharpEnough((900, 600), for: cell, numerator: 4, dcDecoder: false))
        // Full size is the last resort: it covers or the resampler enlarges.
        #expect(CellDecoder.sharpEnough((1800, 1200), for: (1000, 1000), numerator: 8, dcDecoder: false))
        #expect(!CellDecoder.sharpEnough((1800, 1200), for: (1300, 1300), numerator: 8, dcDecoder: false))
    }
}
