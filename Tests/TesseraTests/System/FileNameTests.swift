// FileNameTests.swift — paths as the kernel's bytes: NFC and NFD names, names that are not UTF-8.
import Glibc
import Testing
@testable import Tessera

@Suite struct FileNameTests {
    /// "é.jpg" in NFC and in NFD are two files; both are photos. A name that is not UTF-8 is a
    /// photo too, found, opened and drawn by its bytes (shown with U+FFFD in messages).
    @Test func namesAreTheirBytes() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let photo = readBytes(baseJPEG)
        let nfc = scratch.path + "/\u{E9}.jpg", nfd = scratch.path + "/e\u{301}.jpg"
        #expect(Array(nfc.utf8) != Array(nfd.utf8) && nfc == nfd)  // Swift calls them equal
        writeBytes(photo, to: nfc)
        writeBytes(photo, to: nfd)
        #expect(scratch.contents().count == 2)
        // A name with a byte that is not UTF-8, in a folder whose name is not UTF-8 either.
        let folder = Array(scratch.path.utf8) + [0x2F, 0xFE, 0x64]
        let file = folder + [0x2F, 0xFF] + Array("x.jpg".utf8)
        var folderC = folder.map { CChar(bitPattern: $0) } + [0], fileC = file.map { CChar(bitPattern: $0) } + [0]
        #expect(mkdir(&folderC, 0o755) == 0)
        let fd = open(&fileC, O_WRONLY | O_CREAT, 0o644)
        #expect(fd >= 0)
        photo.withUnsafeBytes { _ = write(fd, $0.baseAddress, $0.count) }
        close(fd)
        defer { unlink(&fileC); rmdir(&folderC) }
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.skipped.isEmpty, "\(library.skipped)")
        #expect(library.photos.count == 3)
        let odd = try #require(library.photos.first { $0.file.bytes == file })
        #expect(odd.path.contains("\u{FFFD}"))
        // And it decodes, by its bytes, to the same tile as the plain copy.
        let decoder = CellDecoder(cellWidth: 30, cellHeight: 20, decodePoolBytes: 16 << 20)
        var a = [UInt8](repeating: 0, count: decoder.cellBytes), b = a
        _ = try a.withUnsafeMutableBytes { t in Result { () throws(TesseraError) in try decoder.decode(file: odd.file, into: t) } }.get()
        _ = try b.withUnsafeMutableBytes { t in Result { () throws(TesseraError) in try decoder.decode(path: nfc, into: t) } }.get()
        #expect(a == b)
    }
}
