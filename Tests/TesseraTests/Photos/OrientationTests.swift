// OrientationTests.swift — the eight EXIF orientations as pixel mappings.
import Glibc
import Testing
@testable import Tessera

@Suite struct OrientationTests {
    @Test func invalidValuesAreUpright() {
        #expect(OrientationTransform(exifOrientation: 0) == .identity)
        #expect(OrientationTransform(exifOrientation: 9) == .identity)
        #expect(OrientationTransform(exifOrientation: 6) == .rotate90Clockwise)
    }

    @Test func rotate90ClockwiseMovesTheTopRowToTheRight() {
        // Stored 3 x 2 image: top row A B C, bottom row D E F. Turned clockwise it is 2 x 3:
        // D A / E B / F C.
        let stored: [UInt8] = [1, 2, 3, 4, 5, 6].flatMap { [UInt8($0), 0, 0] }
        var upright = [UInt8](repeating: 0, count: 18)
        stored.withUnsafeBytes { source in
            upright.withUnsafeMutableBytes { target in
                OrientationTransform.rotate90Clockwise.apply(stored: source, storedWidth: 3, storedHeight: 2, upright: target)
            }
        }
        #expect(stride(from: 0, to: 18, by: 3).map { upright[$0] } == [4, 1, 5, 2, 6, 3])
    }
}
