// PhotoLibraryTests.swift — what a folder scan finds: JPEGs are photos; images in other formats
// are named in a warning with their format; other files (sidecars, notes) are left out.
import Glibc
import Testing
@testable import Tessera

@Suite struct PhotoLibraryTests {
    /// Each format by its first bytes (as a phone's folder holds them), followed by filler.
    static let formats: [(name: String, magic: [UInt8], format: String)] = [
        // Formats Tessera reads: the reader's own complaint about the garbage after the magic.
        ("screenshot.png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "PNG: "),
        ("saved.webp", Array("RIFF".utf8) + [0x10, 0, 0, 0] + Array("WEBPVP8 ".utf8), "WebP: "),
        ("IMG_0001.HEIC", [0, 0, 0, 0x18] + Array("ftypheic".utf8), "HEIF: "),
        ("photo.avif", [0, 0, 0, 0x1C] + Array("ftypavif".utf8), "HEIF: "),
        ("anim.gif", Array("GIF89a".utf8), "GIF: "),
        ("scan.tif", [0x49, 0x49, 0x2A, 0x00], "TIFF: "),
        ("raw.cr2", [0x49, 0x49, 0x2A, 0x00, 0x10, 0, 0, 0] + Array("CR".utf8), "a CR2 with no JPEG preview"),
        ("raw.raf", Array("FUJIFILMCCD-RAW ".utf8), "a RAF with no JPEG preview"),
        // Formats it does not: named.
        ("old.bmp", Array("BM".utf8) + [0x36, 0x10, 0, 0], "a BMP image, which Tessera does not read"),
        ("clip.heics", [0, 0, 0, 0x18] + Array("ftyphevc".utf8), "a HEIF image sequence, which Tessera does not read"),
    ]

    @Test func imagesInOtherFormatsAreNamedAndOtherFilesLeftOut() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        for (name, magic, _) in Self.formats {
            writeBytes(magic + [UInt8](repeating: 0x41, count: 200), to: scratch.file(name))
        }
        writeBytes(Array("<x:xmpmeta/>".utf8), to: scratch.file("IMG_0001.xmp"))
        writeBytes(Array("shopping list".utf8), to: scratch.file("notes.txt"))
        writeBytes(readBytes(baseJPEG), to: scratch.file("photo.jpg"))
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.photos.map(\.path) == [scratch.file("photo.jpg")])
        #expect(library.ignoredNonJPEGCount == 2)
        let expected = Self.formats.map { (scratch.file($0.name), $0.format) }.sorted { $0.0 < $1.0 }
        #expect(library.skipped.map(\.path) == expected.map(\.0))
        for (skipped, (_, reason)) in zip(library.skipped, expected) {
            #expect(skipped.reason.hasPrefix(reason), "\(skipped.path): \(skipped.reason)")
        }
    }

    /// Hidden files and folders and thumbnail folders are left out and counted; --include-hidden
    /// takes the hidden ones; --exclude patterns match names and paths, and a folder left out is
    /// not searched. A hidden file named on the command line is still a photo.
    @Test func selectionLeavesOutHiddenThumbnailsAndExcluded() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let jpeg = readBytes(baseJPEG)
        for folder in [".trash", "@eaDir", "drafts", "trip", "trip/.thumbnails"] { #expect(mkdir(scratch.file(folder), 0o755) == 0) }
        for name in ["a.jpg", ".hidden.jpg", ".trash/b.jpg", "@eaDir/c.jpg", "drafts/d.jpg", "trip/e.jpg", "trip/f.jpg",
                     "trip/.thumbnails/g.jpg", "trip/skip-me.jpg"] {
            writeBytes(jpeg, to: scratch.file(name))
        }
        func names(_ library: PhotoLibrary) -> [String] {
            library.photos.map { String($0.path.dropFirst(scratch.path.count + 1)) }
        }
        let plain = try PhotoLibrary.scan([scratch.path])
        #expect(names(plain) == ["a.jpg", "drafts/d.jpg", "trip/e.jpg", "trip/f.jpg", "trip/skip-me.jpg"])
        #expect(plain.leftOut == LeftOut(hidden: 3, thumbnailFolders: 1, excluded: 0))
        let hidden = try PhotoLibrary.scan([scratch.path], selection: PhotoSelection(includeHidden: true))
        #expect(names(hidden) == [".hidden.jpg", ".trash/b.jpg", "a.jpg", "drafts/d.jpg", "trip/e.jpg", "trip/f.jpg",
                                  "trip/skip-me.jpg"])
        // .thumbnails is a thumbnail folder even when hidden ones are searched.
        #expect(hidden.leftOut == LeftOut(hidden: 0, thumbnailFolders: 2, excluded: 0))
        let excluded = try PhotoLibrary.scan([scratch.path], selection: PhotoSelection(excludes: ["*/drafts", "skip-*"]))
        #expect(names(excluded) == ["a.jpg", "trip/e.jpg", "trip/f.jpg"])
        #expect(excluded.leftOut.excluded == 2)
        let named = try PhotoLibrary.scan([scratch.file(".hidden.jpg")])
        #expect(named.photos.count == 1)
    }
}
