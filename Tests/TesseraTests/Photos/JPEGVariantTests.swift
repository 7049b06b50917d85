// JPEGVariantTests.swift — every kind of JPEG a camera or a program writes, against a baseline.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct JPEGVariantTests {
    /// Every supported kind of JPEG decodes to the same picture as the baseline file.
    @Test(arguments: ["progressive", "arithmetic", "restart", "cmyk", "ycck", "s444", "s422", "s411", "s440"])
    func variantDecodesLikeBaseline(name: String) throws {
        let directory = fixturesDirectory + "/variants"
        let decoder = CellDecoder(cellWidth: 60, cellHeight: 40, decodePoolBytes: 16 << 20)
        func tile(_ file: String) throws -> RGBImage {
            var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
            try bytes.withUnsafeMutableBytes { buffer in
                Result { () throws(TesseraError) in _ = try decoder.decode(path: directory + "/" + file, into: buffer) }
            }.get()
            return RGBImage(width: 60, height: 40, pixels: bytes)
        }
        let base = try tile("base.jpg")
        let variant = try tile(name + ".jpg")
        #expect(meanAbsoluteDifference(base, mirrored(base)) > 10)  // the comparison can fail
        #expect(meanAbsoluteDifference(variant, base) < 6, "\(name) differs from baseline")
    }

    @Test func grayscaleIsExpandedToEqualChannels() throws {
        let decoder = CellDecoder(cellWidth: 60, cellHeight: 40, decodePoolBytes: 16 << 20)
        var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
        try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(TesseraError) in _ = try decoder.decode(path: fixturesDirectory + "/variants/gray.jpg", into: buffer) }
        }.get()
        var spread = 0
        for i in stride(from: 0, to: bytes.count, by: 3) {
            #expect(bytes[i] == bytes[i + 1] && bytes[i + 1] == bytes[i + 2])
            spread = max(spread, Int(bytes[i]))
        }
        #expect(spread > 100)  // a picture, not a flat grey
    }
}
