// HostilePhotoTests.swift — damaged and hostile photos: bit flips, garbage EXIF, decoding bombs.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

/// Decodes `path` into a 60 x 40 tile; the error, if any.
private func decodeTile(_ path: String) -> Result<RGBImage, TesseraError> {
    let decoder = CellDecoder(cellWidth: 60, cellHeight: 40, decodePoolBytes: 32 << 20)
    var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
    do throws(TesseraError) {
        try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(TesseraError) in _ = try decoder.decode(path: path, into: buffer) }
        }.get()
        return .success(RGBImage(width: 60, height: 40, pixels: bytes))
    } catch {
        return .failure(error)
    }
}

/// `jpeg` with `segment` (a whole marker segment) inserted right after SOI.
private func inserting(_ segment: [UInt8], into jpeg: [UInt8]) -> [UInt8] {
    return Array(jpeg[0..<2]) + segment + Array(jpeg[2...])
}

/// An APP1 EXIF segment holding one Orientation entry (big-endian TIFF).
private func exifSegment(orientation: UInt16) -> [UInt8] {
    let tiff: [UInt8] = [0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8,  // "MM", 42, IFD0 at 8
                         0, 1,                                   // one entry
                         0x01, 0x12, 0, 3, 0, 0, 0, 1,           // Orientation, SHORT, 1 value
                         UInt8(orientation >> 8), UInt8(orientation & 0xFF), 0, 0,
                         0, 0, 0, 0]                             // no next IFD
    let payload = Array("Exif".utf8) + [0, 0] + tiff
    let length = payload.count + 2
    return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
}

@Suite struct HostilePhotoTests {
    @Test func bitFlippedPhotosNeverCrash() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let original = readBytes(baseJPEG)
        var random = SplitMix64(seed: 42)
        var decoded = 0, refused = 0
        for round in 0..<300 {
            var bytes = original
            for _ in 0..<(1 + Int(random.next() % 8)) {
                let index = 2 + Int(random.next() % UInt64(bytes.count - 2))
                bytes[index] ^= UInt8(1 << (random.next() % 8))
            }
            let path = scratch.file("flip-\(round).jpg")
            writeBytes(bytes, to: path)
            switch decodeTile(path) {
            case .success: decoded += 1
            case .failure(.unreadablePhoto(let failedPath, let reason)):
                #expect(failedPath == path && !reason.isEmpty)
                refused += 1
            case .failure(let other):
                Issue.record("unexpected error \(other)")
            }
            unlink(path)
        }
        #expect(decoded + refused == 300)
    }

    @Test(arguments: [UInt16(0), 9, 0xFFFF])
    func invalidOrientationIsUpright(value: UInt16) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = scratch.file("odd-orientation.jpg")
        writeBytes(inserting(exifSegment(orientation: value), into: readBytes(baseJPEG)), to: path)
        let photo = try PhotoLibrary.scan([path]).photos[0]
        #expect(photo.header.exifOrientation == Int(value))
        let upright = try decodeTile(baseJPEG).get()
        #expect(meanAbsoluteDifference(try decodeTile(path).get(), upright) < 1)
        // A valid tag on the same file does turn it: the tag is really read.
        let turned = scratch.file("turned.jpg")
        writeBytes(inserting(exifSegment(orientation: 3), into: readBytes(baseJPEG)), to: turned)
        #expect(meanAbsoluteDifference(try decodeTile(turned).get(), upright) > 10)
    }

    @Test func garbageExifAndHugeSegmentsAreHarmless() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var random = SplitMix64(seed: 7)
        // An APP1 that starts like EXIF and is then noise, at the largest size a segment can have.
        let noise = (0..<65_527).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let garbageExif = [0xFF, 0xE1, 0xFF, 0xFF] + Array("Exif".utf8) + [0, 0] + noise
        // Twenty more maximal APPn segments before the image.
        var bytes = readBytes(baseJPEG)
        for marker in 0..<20 {
            bytes = inserting([0xFF, 0xE2 + UInt8(marker % 12), 0xFF, 0xFF] + [UInt8](repeating: 0x5A, count: 65_533), into: bytes)
        }
        bytes = inserting(garbageExif, into: bytes)
        let path = scratch.file("segments.jpg")
        writeBytes(bytes, to: path)
        let upright = try decodeTile(baseJPEG).get()
        #expect(meanAbsoluteDifference(try decodeTile(path).get(), upright) < 1)
    }

    @Test func progressiveBombFailsWithinTheMemoryCap() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var bytes = readBytes(fixturesDirectory + "/variants/progressive.jpg")
        let sof = (0..<(bytes.count - 9)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC2 }!
        bytes[sof + 5] = 0xFF; bytes[sof + 6] = 0xDC  // height 65500
        bytes[sof + 7] = 0xFF; bytes[sof + 8] = 0xDC  // width 65500
        let path = scratch.file("progressive-bomb.jpg")
        writeBytes(bytes, to: path)
        // Its whole-image coefficient buffers would need about 12 GiB: refused, as a file far too
        // small for its header. (The memory of such renders is measured on a real child process
        // in MemoryTests.)
        guard case .failure(.unreadablePhoto(let failed, let reason)) = decodeTile(path) else {
            Issue.record("a progressive 65,500 x 65,500 header decoded")
            return
        }
        #expect(failed == path)
        #expect(reason.contains("truncated or corrupt"), "\(reason)")
    }
}
