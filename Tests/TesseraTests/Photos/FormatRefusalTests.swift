// FormatRefusalTests.swift — a PNG whose header claims more pixels than its bytes could inflate
// to is refused at its header, for that reason, and the bound is where the comment says: deflate
// expands at most 1032 times, plus 64 KiB of slack.
import Testing
@testable import Tessera
import TesseraTestSupport

@Suite struct FormatRefusalTests {
    /// A PNG of a header claiming `width` x `height` 8-bit RGB, one IDAT of garbage and IEND;
    /// the same length whatever the size claimed.
    private static func png(width: UInt32, height: UInt32) -> [UInt8] {
        func be(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
        let header = be(width) + be(height) + [8, 2, 0, 0, 0]   // 8 bits, truecolour, deflate, no filter, no interlace
        let garbage = (0..<64).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + pngChunk("IHDR", header) + pngChunk("IDAT", garbage) + pngChunk("IEND", [])
    }

    /// The reason `path` is not drawn.
    private static func refusal(_ path: String) -> String? {
        do {
            _ = try drawnCell(path)
            return nil
        } catch let error as TesseraError {
            if case .unreadablePhoto(_, let reason) = error { return reason }
            return "\(error)"
        } catch {
            return "\(error)"
        }
    }

    @Test func aPNGClaimingMoreThanItsBytesCanHoldIsRefusedAtItsHeader() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let height: UInt32 = 64
        let fileBytes = Self.png(width: 1, height: height).count
        // Raw image data: a filter byte and 3 bytes a pixel a row. The widest claim the bound allows:
        let bound = 1032 * fileBytes + (1 << 16)
        let widest = UInt32((bound / Int(height) - 1) / 3)
        #expect(Int(height) * (3 * Int(widest) + 1) <= bound && Int(height) * (3 * Int(widest + 1) + 1) > bound)

        for (name, width, refusedForSize) in [("just-over", widest + 1, true), ("at-bound", widest, false),
                                              ("huge", 60_000, true), ("small", 40, false)] {
            let path = scratch.file("\(name).png")
            let bytes = Self.png(width: width, height: height)
            #expect(bytes.count == fileBytes)
            writeBytes(bytes, to: path)
            // Every one is refused (its image data is garbage); only the claims over the bound
            // for what they claim.
            let reason = try #require(Self.refusal(path), "\(name): drawn")
            let forSize = reason.contains("claims \(width) x \(height) px") && reason.contains("can hold")
            #expect(forSize == refusedForSize, "\(name) (\(width) x \(height) in \(fileBytes) bytes): \(reason)")
        }
    }
}
