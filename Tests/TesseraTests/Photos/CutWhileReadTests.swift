// CutWhileReadTests.swift — a photo whose file is cut short between its open and its decode
// (a sync client or a copy rewriting it during the render): a WebP is read through a mapping,
// where the first page past the new end raised SIGBUS and killed the run; a HEIC through
// libheif, which asserts that a read inside the file succeeds (SIGABRT). Both are now an error
// for that photo, saying the file was cut while it was read.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct CutWhileReadTests {
    /// `file` copied into `scratch`, opened, then cut to `keep` bytes before `decode` runs.
    private func cutAfterOpen(_ file: String, keep: Int64, scratch: ScratchDirectory,
                              decode: (PhotoFile) throws(TesseraError) -> Void) -> String? {
        let path = scratch.file("cut-" + (file.split(separator: "/").last.map(String.init) ?? "photo"))
        writeBytes(readBytes(file), to: path)
        do {
            let photo = try PhotoFile.open(PathBytes(path))
            #expect(truncate(path, off_t(keep)) == 0)
            try decode(photo)
            return nil
        } catch {
            guard case .unreadablePhoto(_, let reason) = error else { return "\(error)" }
            return reason
        }
    }

    @Test func aWebPCutAfterItsOpenIsAnErrorNotASignal() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        for name in ["lossy.webp", "lossless.webp"] {
            let file = formatFixtures.directory + "/" + name
            // A page kept whole: the decoder finds the cut by reading past it, not by the zeros
            // a partly cut page reads as.
            #expect(readBytes(file).count > 3 * 4096)
            let reason = cutAfterOpen(file, keep: 4096, scratch: scratch) { (photo) throws(TesseraError) in
                let reader = try WebPReader(photo: photo, cap: 1 << 30)
                let rgba = UnsafeMutablePointer<UInt8>.allocate(capacity: 600 * 400 * 4)
                defer { rgba.deallocate() }
                try reader.decode(width: 600, height: 400, into: rgba)
            }
            #expect(reason?.contains("the file was cut short while it was read") == true, "\(name): \(reason ?? "decoded")")
        }
    }

    @Test func aHEICCutAfterItsOpenIsAnErrorNotAnAbort() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let file = formatFixtures.directory + "/plain.heic"
        let bytes = Int64(readBytes(file).count)
        let reason = cutAfterOpen(file, keep: bytes / 2, scratch: scratch) { (photo) throws(TesseraError) in
            let reader = try HEIFReader(photo: photo, openLimitBytes: 64 << 20, advice: { Int64($0) }, large: { $1() })
            _ = try reader.decode(thumbnail: false)
        }
        #expect(reason?.contains("the file was cut short while it was read") == true, "\(reason ?? "decoded")")
    }
}
