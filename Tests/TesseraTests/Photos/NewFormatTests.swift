// NewFormatTests.swift — GIF, TIFF and camera RAW previews, each drawn cell compared with an
// sRGB baseline-JPEG twin of the same picture; GIF transparency, hostile files, and videos
// counted once.
//
// The GIFs and TIFFs are made with ImageMagick (CI installs it) from the master of
// OtherFormatTests; the RAWs (a DNG, a RAF) are written here byte by byte around a JPEG
// preview, as a camera lays them out: IFD0 a small uncompressed thumbnail, a SubIFD the large
// JPEG preview, another SubIFD the sensor data (here a lossless-JPEG header, which must not be
// taken for a preview).
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

/// A little-endian TIFF written by hand: blobs, then IFDs (tag, type, values), then the header's
/// first IFD offset patched in.
struct TIFFBuilder {
    var bytes: [UInt8] = [0x49, 0x49, 0x2A, 0x00, 0, 0, 0, 0]

    static func le(_ value: UInt32, _ size: Int) -> [UInt8] { (0..<size).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }

    /// Appends `blob` (at an even offset) and returns where.
    mutating func append(_ blob: [UInt8]) -> UInt32 {
        if bytes.count % 2 == 1 { bytes.append(0) }
        let at = UInt32(bytes.count)
        bytes += blob
        return at
    }

    /// Appends an IFD; returns its offset. Types: 1 BYTE, 3 SHORT, 4 LONG.
    mutating func ifd(_ entries: [(tag: UInt16, type: UInt16, values: [UInt32])], next: UInt32 = 0) -> UInt32 {
        let sorted = entries.sorted { $0.tag < $1.tag }
        var fields: [[UInt8]] = []
        for entry in sorted {
            let size = entry.type == 3 ? 2 : entry.type == 1 || entry.type == 2 ? 1 : 4
            let data = entry.values.flatMap { Self.le($0, size) }
            fields.append(data.count <= 4 ? data + [UInt8](repeating: 0, count: 4 - data.count) : Self.le(append(data), 4))
        }
        let at = append(Self.le(UInt32(sorted.count), 2))
        for (entry, field) in zip(sorted, fields) {
            bytes += Self.le(UInt32(entry.tag), 2) + Self.le(UInt32(entry.type), 2) + Self.le(UInt32(entry.values.count), 4) + field
        }
        bytes += Self.le(next, 4)
        return at
    }

    mutating func patch(_ value: UInt32, at offset: Int) {
        bytes.replaceSubrange(offset..<(offset + 4), with: Self.le(value, 4))
    }

    mutating func setFirstIFD(_ offset: UInt32) { patch(offset, at: 4) }
}

/// A DNG as a camera writes one: IFD0 a 60 x 40 uncompressed thumbnail (solid green, so a
/// reader that drew it would be far off) with DNGVersion and Orientation; SubIFD 1 the JPEG
/// `preview` (NewSubFileType 1, Compression 7); SubIFD 2 the sensor data, a lossless JPEG's
/// header claiming 6000 x 4000 px. `dateTaken`: an EXIF IFD with that DateTimeOriginal.
func makeDNG(preview: [UInt8], orientation: UInt32? = nil, previewOffset: UInt32? = nil, previewLength: UInt32? = nil, loop: Bool = false,
             dateTaken: String? = nil) -> [UInt8] {
    var tiff = TIFFBuilder()
    let thumb = tiff.append([UInt8]((0..<(60 * 40)).flatMap { _ in [0, 200, 0] as [UInt8] }))
    let jpeg = tiff.append(preview)
    // SOI, SOF3 (lossless) 6000 x 4000, then filler: what a DNG's raw strip starts with.
    let lossless = tiff.append([0xFF, 0xD8, 0xFF, 0xC3, 0x00, 0x0B, 0x0C, 0x0F, 0xA0, 0x17, 0x70, 0x01, 0x01, 0x11, 0x00]
                               + [UInt8](repeating: 0x55, count: 200))
    let previewIFD = tiff.ifd([(0xFE, 4, [1]), (0x100, 4, [600]), (0x101, 4, [400]), (0x102, 3, [8, 8, 8]), (0x103, 3, [7]),
                               (0x106, 3, [6]), (0x111, 4, [previewOffset ?? jpeg]), (0x115, 3, [3]), (0x116, 4, [400]),
                               (0x117, 4, [previewLength ?? UInt32(preview.count)])])
    let rawIFD = tiff.ifd([(0xFE, 4, [0]), (0x100, 4, [6000]), (0x101, 4, [4000]), (0x102, 3, [12]), (0x103, 3, [7]),
                           (0x106, 3, [32803]), (0x111, 4, [lossless]), (0x115, 3, [1]), (0x116, 4, [4000]), (0x117, 4, [215])])
    var first: [(tag: UInt16, type: UInt16, values: [UInt32])] = [
        (0xFE, 4, [1]), (0x100, 4, [60]), (0x101, 4, [40]), (0x102, 3, [8, 8, 8]), (0x103, 3, [1]), (0x106, 3, [2]),
        (0x111, 4, [thumb]), (0x115, 3, [3]), (0x116, 4, [40]), (0x117, 4, [7200]), (0x14A, 4, [previewIFD, rawIFD]),
        (0xC612, 1, [1, 4, 0, 0]),
    ]
    if let orientation { first.append((0x112, 3, [orientation])) }
    if let dateTaken {
        let exif = tiff.ifd([(0x9003, 2, (Array(dateTaken.utf8) + [0]).map { UInt32($0) })])
        first.append((0x8769, 4, [exif]))
    }
    let ifd0 = tiff.ifd(first)
    tiff.setFirstIFD(ifd0)
    if loop {
        // IFD0's next is the preview's IFD, whose next is IFD0, and the raw IFD names itself.
        tiff.patch(previewIFD, at: Int(ifd0) + 2 + 12 * first.count)
        tiff.patch(ifd0, at: Int(previewIFD) + 2 + 12 * 10)
        tiff.patch(rawIFD, at: Int(rawIFD) + 2 + 12 * 10)
    }
    return tiff.bytes
}

/// A NEF as Nikon lays one out: a plain TIFF header; IFD0 a small uncompressed thumbnail
/// (NewSubFileType 1); SubIFD 1 the JPEG preview by JPEGInterchangeFormat/Length; SubIFD 2 the
/// sensor data (a colour filter array, Nikon's compression 34713). No DNGVersion: the CFA page
/// says it is a RAW.
func makeNEF(preview: [UInt8]) -> [UInt8] {
    var tiff = TIFFBuilder()
    let thumb = tiff.append([UInt8]((0..<(60 * 40)).flatMap { _ in [0, 200, 0] as [UInt8] }))
    let jpeg = tiff.append(preview)
    let sensor = tiff.append([UInt8](repeating: 0x55, count: 400))
    let previewIFD = tiff.ifd([(0xFE, 4, [1]), (0x103, 3, [6]), (0x201, 4, [jpeg]), (0x202, 4, [UInt32(preview.count)])])
    let rawIFD = tiff.ifd([(0xFE, 4, [0]), (0x100, 4, [6000]), (0x101, 4, [4000]), (0x102, 3, [14]), (0x103, 3, [34713]),
                           (0x106, 3, [32803]), (0x111, 4, [sensor]), (0x115, 3, [1]), (0x116, 4, [4000]), (0x117, 4, [400])])
    tiff.setFirstIFD(tiff.ifd([(0xFE, 4, [1]), (0x100, 4, [60]), (0x101, 4, [40]), (0x102, 3, [8, 8, 8]), (0x103, 3, [1]),
                               (0x106, 3, [2]), (0x111, 4, [thumb]), (0x115, 3, [3]), (0x116, 4, [40]), (0x117, 4, [7200]),
                               (0x14A, 4, [previewIFD, rawIFD])]))
    return tiff.bytes
}

/// A CR2 as Canon lays one out: "CR" at byte 8; IFD0 the full-size JPEG preview as one strip
/// (Compression 6) with the Orientation tag; IFD1 a smaller JPEG thumbnail by
/// JPEGInterchangeFormat (the larger must win).
func makeCR2(preview: [UInt8], thumbnail: [UInt8], orientation: UInt32) -> [UInt8] {
    var tiff = TIFFBuilder()
    _ = tiff.append(Array("CR".utf8) + [2, 0, 0, 0, 0, 0])
    let jpeg = tiff.append(preview)
    let small = tiff.append(thumbnail)
    let ifd1 = tiff.ifd([(0x103, 3, [6]), (0x201, 4, [small]), (0x202, 4, [UInt32(thumbnail.count)])])
    tiff.setFirstIFD(tiff.ifd([(0x100, 4, [600]), (0x101, 4, [400]), (0x103, 3, [6]), (0x111, 4, [jpeg]), (0x112, 3, [orientation]),
                               (0x117, 4, [UInt32(preview.count)])], next: ifd1))
    return tiff.bytes
}

/// A RAF: Fujifilm's header (magic, version, camera) with the JPEG's offset and length at 84.
func makeRAF(preview: [UInt8], offset: UInt32? = nil) -> [UInt8] {
    var header = Array("FUJIFILMCCD-RAW 0201FF393101".utf8) + [UInt8](repeating: 0, count: 100)
    header = Array(header.prefix(100))
    func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    header.replaceSubrange(84..<92, with: be(offset ?? 100) + be(UInt32(preview.count)))
    return header + preview
}

let newFormatFixtures = NewFormatFixtures()

final class NewFormatFixtures: Sendable {
    let directory: String
    let cases: [FormatCase]
    let twins: [String: String]
    let problems: [String]

    init() {
        let scratch = ScratchDirectory()
        directory = scratch.path
        func at(_ name: String) -> String { scratch.file(name) }
        var problems = formatFixtures.problems
        func run(_ arguments: [String]) {
            if runTool(arguments) != 0 { problems.append(arguments.joined(separator: " ")) }
        }
        let master = formatFixtures.directory + "/master.png"
        let srgb = "/usr/share/color/icc/sRGB.icc"
        var cases: [FormatCase] = []
        var twins: [String: String] = [:]
        func untagged(_ name: String, _ file: String, _ make: [String]) {
            run(make)
            run(["convert", at(file) + "[0]", "-background", "#808080", "-flatten", "-quality", "95", at(name + "-twin.jpg")])
            cases.append(FormatCase(name: name, file: at(file), tolerance: 1.5, tagged: false))
            twins[name] = at(name + "-twin.jpg")
        }
        func withTwin(_ name: String, _ file: String, twin: String, tolerance: Double, tagged: Bool = false) {
            cases.append(FormatCase(name: name, file: at(file), tolerance: tolerance, tagged: tagged))
            twins[name] = twin
        }
        // A quarter of the picture transparent: drawn over the background.
        run(["convert", master, "-alpha", "set", "-region", "300x200+0+0", "-alpha", "transparent", "+region", "PNG32:" + at("holed.png")])
        untagged("gif", "plain.gif", ["convert", master, "-dither", "None", "-colors", "256", at("plain.gif")])
        untagged("gif-interlaced", "interlaced.gif", ["convert", master, "-dither", "None", "-colors", "256", "-interlace", "GIF", at("interlaced.gif")])
        untagged("gif-transparent", "transparent.gif", ["convert", at("holed.png"), "-dither", "None", "-colors", "255", at("transparent.gif")])
        untagged("tiff-rgb8-lzw", "rgb8.tif", ["convert", master, "-compress", "lzw", "-define", "tiff:rows-per-strip=16", at("rgb8.tif")])
        untagged("tiff-one-strip", "one-strip.tif", ["convert", master, "-define", "tiff:rows-per-strip=400", at("one-strip.tif")])
        untagged("tiff-rgb16", "rgb16.tif", ["convert", master, "-depth", "16", "-compress", "zip", at("rgb16.tif")])
        untagged("tiff-tiled", "tiled.tif", ["convert", master, "-define", "tiff:tile-geometry=64x64", at("tiled.tif")])
        untagged("tiff-planar", "planar.tif", ["convert", master, "-interlace", "plane", at("planar.tif")])
        untagged("tiff-grey16", "grey16.tif", ["convert", master, "-colorspace", "gray", "-depth", "16", at("grey16.tif")])
        untagged("tiff-palette", "palette.tif", ["convert", master, "-dither", "None", "-colors", "200", "-type", "Palette", at("palette.tif")])
        untagged("tiff-cmyk", "cmyk.tif", ["convert", master, "-colorspace", "CMYK", "-depth", "8", at("cmyk.tif")])
        untagged("tiff-alpha", "alpha.tif", ["convert", at("holed.png"), at("alpha.tif")])
        // A second page (a solid colour) is not drawn.
        run(["convert", master, "-size", "600x400", "xc:#00ff00", at("pages.tif")])
        withTwin("tiff-two-pages", "pages.tif", twin: formatFixtures.directory + "/master-twin.jpg", tolerance: 1.5)
        // The Orientation tag set (RightTop: 6, turned a quarter clockwise), the pixels as stored.
        run(["convert", master, "-orient", "RightTop", at("oriented.tif")])
        // Its twin is lossless (a PNG turned by ImageMagick): a JPEG twin of the portrait picture is
        // drawn by libjpeg's 3/8 scaled IDCT, 2.4 levels from the picture itself, which would hide
        // a shift of a pixel; the PNG shows the TIFF within 0.01.
        run(["convert", master, "-rotate", "90", "PNG24:" + at("rotated-twin.png")])
        withTwin("tiff-orientation", "oriented.tif", twin: at("rotated-twin.png"), tolerance: 0.01)
        run(["convert", master, "-profile", srgb, "-profile", formatFixtures.directory + "/p3.icc", at("p3.tif")])
        withTwin("tiff-p3-icc", "p3.tif", twin: formatFixtures.directory + "/master-twin.jpg", tolerance: 3, tagged: true)
        // Camera RAWs around a JPEG preview of the master.
        run(["convert", master, "-strip", "-quality", "95", at("preview.jpg")])
        let preview = readBytes(at("preview.jpg"))
        writeBytes(makeDNG(preview: preview), to: at("plain.dng"))
        withTwin("dng", "plain.dng", twin: at("preview.jpg"), tolerance: 0.01)
        writeBytes(makeDNG(preview: preview, orientation: 6), to: at("oriented.dng"))
        // The preview turned is a portrait JPEG drawn at 3/8, as the twin (a JPEG of the turned
        // master) is: 2.4 levels from the PNG for both, 0.07 from each other.
        run(["convert", master, "-rotate", "90", "-quality", "95", at("rotated-twin.jpg")])
        withTwin("dng-orientation", "oriented.dng", twin: at("rotated-twin.jpg"), tolerance: 1.5)
        writeBytes(makeNEF(preview: preview), to: at("plain.nef"))
        withTwin("nef", "plain.nef", twin: at("preview.jpg"), tolerance: 0.01)
        run(["convert", master, "-resize", "160x120!", "-fill", "#00ff00", "-colorize", "100", "-strip", at("thumbnail.jpg")])
        writeBytes(makeCR2(preview: preview, thumbnail: readBytes(at("thumbnail.jpg")), orientation: 6), to: at("oriented.cr2"))
        withTwin("cr2-orientation", "oriented.cr2", twin: at("rotated-twin.jpg"), tolerance: 1.5)
        writeBytes(makeRAF(preview: preview), to: at("plain.raf"))
        withTwin("raf", "plain.raf", twin: at("preview.jpg"), tolerance: 0.01)
        self.cases = cases
        self.twins = twins
        self.problems = problems
    }
}

/// How a hostile file ended: its decode's error or notes.
func decodeOutcome(_ path: String) -> Result<DecodeNotes, TesseraError> {
    let decoder = CellDecoder(cellWidth: 150, cellHeight: 100, decodePoolBytes: 32 << 20)
    var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
    return bytes.withUnsafeMutableBytes { buffer in
        Result { () throws(TesseraError) -> DecodeNotes in try decoder.decode(path: path, into: buffer) }
    }
}

func skippedReason(_ path: String) throws -> String? {
    try PhotoLibrary.scan([path]).skipped.first?.reason
}

@Suite struct NewFormatTests {
    @Test func fixturesWereMade() {
        #expect(newFormatFixtures.problems.isEmpty, "commands that failed: \(newFormatFixtures.problems)")
    }

    /// Each kind is drawn like its sRGB twin: within 1.5 levels (mean); 3 converted from Display
    /// P3; a RAW's preview as its JPEG itself (0.01). Prints the measured value.
    @Test(arguments: newFormatFixtures.cases)
    func drawnLikeItsTwin(_ kind: FormatCase) throws {
        let (cell, notes) = try drawnCell(kind.file)
        #expect(notes.warningCount == 0, "\(notes.firstWarning)")
        let (twin, _) = try drawnCell(newFormatFixtures.twins[kind.name]!)
        let difference = meanAbsoluteDifference(cell, twin)
        print("format \(kind.name): mean difference to its sRGB twin \(formatDecimal(difference, places: 2)) levels")
        #expect(difference <= kind.tolerance, "\(kind.name): \(difference) levels from its twin")
        #expect(meanAbsoluteDifference(cell, mirrored(twin)) > 10)
        if kind.tagged {
            let stripped = newFormatFixtures.directory + "/stripped-" + kind.name + ".png"
            #expect(runTool(["convert", kind.file, "-strip", "PNG24:" + stripped]) == 0)
            let (raw, _) = try drawnCell(stripped)
            #expect(meanAbsoluteDifference(raw, twin) > kind.tolerance)
        }
    }

    /// The scan finds each by content, under a name that says nothing, with its format, size
    /// (as stored) and orientation.
    @Test func scanReadsEachByContent() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        for kind in newFormatFixtures.cases { writeBytes(readBytes(kind.file), to: scratch.file(kind.name + ".dat")) }
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.skipped.isEmpty, "\(library.skipped)")
        #expect(library.photos.count == newFormatFixtures.cases.count)
        for photo in library.photos {
            let name = String(photo.path.split(separator: "/").last!.dropLast(4))
            let format: ImageFormat = name.hasPrefix("gif") ? .gif : name.hasPrefix("tiff") ? .tiff : .raw
            #expect(photo.header.format == format, "\(name)")
            #expect(photo.header.width == 600 && photo.header.height == 400, "\(name)")
            #expect(photo.header.exifOrientation == (name.hasSuffix("orientation") ? 6 : name.hasPrefix("tiff") ? 1 : 0), "\(name)")
            #expect(photo.header.hasAlpha == (name == "gif-transparent" || name == "tiff-alpha"), "\(name)")
        }
    }

    /// A transparent GIF index is the background colour, as PNG alpha is.
    @Test func gifTransparencyIsTheBackground() throws {
        let path = newFormatFixtures.directory + "/transparent.gif"
        for background in [RGB(red: 128, green: 128, blue: 128), RGB(red: 255, green: 0, blue: 255)] {
            let decoder = CellDecoder(cellWidth: 150, cellHeight: 100, budget: DecodeBudget(poolBytes: 32 << 20, spillDirectory: "/tmp"),
                                      background: background)
            var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
            _ = try bytes.withUnsafeMutableBytes { buffer in
                Result { () throws(TesseraError) -> DecodeNotes in try decoder.decode(path: path, into: buffer) }
            }.get()
            let cell = RGBImage(width: 150, height: 100, pixels: bytes)
            // The top-left quarter is transparent; the rest is the picture.
            #expect(cell.pixel(x: 20, y: 20) == background)
            #expect(cell.pixel(x: 60, y: 40) == background)
            #expect(cell.pixel(x: 120, y: 80) != background)
        }
    }

    /// An interlaced GIF's frame is held whole: counted as its whole-image bytes; a plain one streams.
    @Test func interlacedGIFCountsItsFrame() throws {
        let interlaced = try PhotoLibrary.scan([newFormatFixtures.directory + "/interlaced.gif"]).photos[0].header
        let plain = try PhotoLibrary.scan([newFormatFixtures.directory + "/plain.gif"]).photos[0].header
        #expect(interlaced.wholeImageBytes(cellWidth: 150, cellHeight: 100) == 600 * 400)
        #expect(plain.wholeImageBytes(cellWidth: 150, cellHeight: 100) == 0)
        #expect(interlaced.isProgressive && !plain.isProgressive)
    }

    /// A tiled TIFF holds a row of tiles, a stripped one a strip or a few: never the picture,
    /// but for a TIFF stored as one strip, whose strip is the picture (and is counted so).
    @Test func tiffHoldsAChunk() throws {
        func held(_ name: String) throws -> Int {
            try PhotoLibrary.scan([newFormatFixtures.directory + "/" + name]).photos[0].header.wholeImageBytes(cellWidth: 150, cellHeight: 100)
        }
        // And the page's tags' values, which libtiff holds while the page is open: these files'
        // are a few hundred bytes (ImageMagick's text tags).
        func holds(_ name: String, chunk: Int) throws -> Bool { (chunk...chunk + 4096).contains(try held(name)) }
        // A row of 64 px tiles: libtiff decodes one tile at a time (its buffer, and the raw bytes
        // read for it), into 64 RGBA rows.
        #expect(try holds("tiled.tif", chunk: 2 * 64 * 64 * 3 + 600 * 64 * 4), "\((try? held("tiled.tif")) ?? -1)")
        // 16-row strips: two buffers of a strip and 16 RGBA rows.
        #expect(try holds("rgb8.tif", chunk: 2 * 600 * 16 * 3 + 600 * 16 * 4), "\((try? held("rgb8.tif")) ?? -1)")
        #expect(try holds("one-strip.tif", chunk: 2 * 600 * 400 * 3 + 600 * 400 * 4), "\((try? held("one-strip.tif")) ?? -1)")
    }

    /// Hostile GIFs: data cut short is drawn as far as it goes, with a warning; a screen larger
    /// than the file can describe is refused before any row; neither crashes.
    @Test func hostileGIFs() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let gif = readBytes(newFormatFixtures.directory + "/plain.gif")
        writeBytes(Array(gif.prefix(gif.count * 6 / 10)), to: scratch.file("cut.gif"))
        let cut = decodeOutcome(scratch.file("cut.gif"))
        guard case .success(let notes) = cut else { Issue.record("cut.gif: \(cut)"); return }
        #expect(notes.warningCount == 1 && notes.firstWarning.contains("ends after"), "\(notes.firstWarning)")
        var huge = gif
        huge.replaceSubrange(6..<10, with: [0xFF, 0xFF, 0xFF, 0xFF])
        writeBytes(huge, to: scratch.file("huge.gif"))
        #expect(try skippedReason(scratch.file("huge.gif"))?.contains("more than its") == true)
        writeBytes(Array(gif.prefix(20)), to: scratch.file("header-only.gif"))
        #expect(try skippedReason(scratch.file("header-only.gif"))?.hasPrefix("GIF: ") == true)
    }

    /// Hostile TIFFs: truncated data, a size the file cannot hold, an IFD offset past the end:
    /// each a warning, none a crash.
    @Test func hostileTIFFs() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let tiff = readBytes(newFormatFixtures.directory + "/rgb8.tif")
        writeBytes(Array(tiff.prefix(tiff.count / 2)), to: scratch.file("cut.tif"))
        // ImageMagick writes the IFD after the strips: half the file has no IFD at all.
        #expect(try skippedReason(scratch.file("cut.tif"))?.hasPrefix("TIFF: ") == true)
        // The uncompressed tiled one, its tags kept and its tiles cut short.
        let tiled = readBytes(newFormatFixtures.directory + "/tiled.tif")
        let offset = Int(tiled[4]) | Int(tiled[5]) << 8 | Int(tiled[6]) << 16 | Int(tiled[7]) << 24
        #expect(offset > 8)
        if offset < tiled.count {
            var holed = tiled
            for i in 8..<(offset / 2) { holed[i] = 0 }
            writeBytes(holed, to: scratch.file("holed.tif"))
            #expect(throws: Never.self) { _ = decodeOutcome(scratch.file("holed.tif")) }
        }
        // Width and height patched to 1,000,000 each (LONG values, in place of ImageMagick's).
        var big = TIFFBuilder()
        let pixels = big.append([UInt8](repeating: 0x80, count: 300))
        big.setFirstIFD(big.ifd([(0x100, 4, [1_000_000]), (0x101, 4, [1_000_000]), (0x102, 3, [8]), (0x103, 3, [1]),
                                 (0x106, 3, [1]), (0x111, 4, [pixels]), (0x115, 3, [1]), (0x116, 4, [1_000_000]),
                                 (0x117, 4, [300])]))
        writeBytes(big.bytes, to: scratch.file("big.tif"))
        let reason = try skippedReason(scratch.file("big.tif"))
        #expect(reason?.contains("more than its") == true || reason?.hasPrefix("TIFF: ") == true, "\(String(describing: reason))")
        // 200 private tags all pointing at the same 1 MiB of zeros (a 1 MB file): libtiff would
        // hold every tag's value, 200 MiB, to open the page. Refused before it is opened.
        var aliased = TIFFBuilder()
        let strip = aliased.append([UInt8](repeating: 0x80, count: 16)), block = aliased.append([UInt8](repeating: 0, count: 1 << 20))
        var entries: [(UInt32, UInt32, UInt32, UInt32)] = [(0x100, 3, 1, 4), (0x101, 3, 1, 4), (0x102, 3, 1, 8), (0x103, 3, 1, 1),
                                                            (0x106, 3, 1, 1), (0x111, 4, 1, strip), (0x115, 3, 1, 1), (0x116, 3, 1, 4),
                                                            (0x117, 4, 1, 16)]
        for i in 0..<200 { entries.append((UInt32(50_000 + i), 7, 1 << 20, block)) }
        let directory = TIFFBuilder.le(UInt32(entries.count), 2)
            + entries.flatMap { TIFFBuilder.le($0.0, 2) + TIFFBuilder.le($0.1, 2) + TIFFBuilder.le($0.2, 4) + TIFFBuilder.le($0.3, 4) }
            + TIFFBuilder.le(0, 4)
        aliased.setFirstIFD(aliased.append(directory))
        writeBytes(aliased.bytes, to: scratch.file("aliased.tif"))
        let tags = try skippedReason(scratch.file("aliased.tif"))
        #expect(tags?.contains("its tags hold 200.0 MiB") == true, "\(String(describing: tags))")
        // 16-bit CMYK: libtiff's RGBA interface has no such case; the scan names its reason.
        #expect(runTool(["convert", formatFixtures.directory + "/master.png", "-colorspace", "CMYK", "-depth", "16",
                         scratch.file("cmyk16.tif")]) == 0)
        #expect(try skippedReason(scratch.file("cmyk16.tif"))?.hasPrefix("TIFF: ") == true)
        var far = tiff
        far.replaceSubrange(4..<8, with: [0xF0, 0xFF, 0xFF, 0x7F])
        writeBytes(far, to: scratch.file("far.tif"))
        #expect(try skippedReason(scratch.file("far.tif"))?.hasPrefix("TIFF: ") == true)
    }

    /// Hostile RAWs: IFDs in a loop still give the preview, once; a preview offset past the end,
    /// or a RAF naming one, is "no JPEG preview"; a RAW with no preview at all says so.
    @Test func hostileRAWs() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let preview = readBytes(newFormatFixtures.directory + "/preview.jpg")
        writeBytes(makeDNG(preview: preview, loop: true), to: scratch.file("loop.dng"))
        let (looped, _) = try drawnCell(scratch.file("loop.dng"))
        let (twin, _) = try drawnCell(newFormatFixtures.directory + "/preview.jpg")
        #expect(meanAbsoluteDifference(looped, twin) < 0.01)
        // A progressive preview, drawn small: by the DC decoder from the preview's offset (it
        // was decoded whole, a 16,000 x 65,000 px one in 13.7 s), the same as the JPEG alone.
        #expect(system("convert '\(newFormatFixtures.directory)/preview.jpg' -interlace JPEG '\(scratch.file("progressive.jpg"))'") == 0)
        writeBytes(makeDNG(preview: readBytes(scratch.file("progressive.jpg"))), to: scratch.file("progressive.dng"))
        let (progressive, notes) = try drawnCell(scratch.file("progressive.dng"), width: 60, height: 40)
        let (alone, aloneNotes) = try drawnCell(scratch.file("progressive.jpg"), width: 60, height: 40)
        #expect(notes.method == .dcOnly(spilled: false) && aloneNotes.method == .dcOnly(spilled: false), "\(notes.method)")
        #expect(meanAbsoluteDifference(progressive, alone) < 0.01)
        // A preview whose length says half its JPEG: drawn as far as that goes, with a warning
        // (the reader read on past it, and drew it whole without a word).
        writeBytes(makeDNG(preview: preview, previewLength: UInt32(preview.count / 2)), to: scratch.file("half.dng"))
        if case .success(let halfNotes) = decodeOutcome(scratch.file("half.dng")) {
            #expect(halfNotes.incomplete?.contains("ends early") == true, "\(halfNotes)")
        } else {
            Issue.record("the preview of half its length was not drawn: \(decodeOutcome(scratch.file("half.dng")))")
        }
        writeBytes(makeDNG(preview: preview, previewOffset: 0x7FFF_FFF0), to: scratch.file("far.dng"))
        #expect(try skippedReason(scratch.file("far.dng"))?.hasPrefix("a DNG with no JPEG preview") == true)
        writeBytes(makeRAF(preview: preview, offset: 0xFFFF_FF00), to: scratch.file("far.raf"))
        #expect(try skippedReason(scratch.file("far.raf"))?.hasPrefix("a RAF with no JPEG preview") == true)
        writeBytes(makeDNG(preview: Array(preview.prefix(40))), to: scratch.file("tiny.dng"))
        #expect(try skippedReason(scratch.file("tiny.dng"))?.hasPrefix("a DNG with no JPEG preview") == true)
        // A preview cut off after its header: libjpeg's complaint, or a warning, never a crash.
        let dng = makeDNG(preview: preview)
        writeBytes(Array(dng.prefix(dng.count - preview.count / 2 - 2000)), to: scratch.file("cut.dng"))
        #expect(throws: Never.self) { _ = decodeOutcome(scratch.file("cut.dng")) }
    }

    /// Videos and Live Photo movies, by their first bytes: counted once, no warning each; a HEIC
    /// beside them is still a photo.
    @Test func videosAreCountedNotWarned() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let files: [(String, [UInt8])] = [
            ("IMG_0001.MOV", [0, 0, 0, 0x14] + Array("ftypqt  ".utf8) + [0, 0, 0, 0] + Array("qt  ".utf8)),
            ("clip.mp4", [0, 0, 0, 0x18] + Array("ftypisom".utf8) + [0, 0, 2, 0] + Array("isommp41".utf8)),
            ("phone.3gp", [0, 0, 0, 0x14] + Array("ftyp3gp4".utf8) + [0, 0, 0, 0] + Array("3gp4".utf8)),
            ("old.avi", Array("RIFF".utf8) + [0x10, 0, 0, 0] + Array("AVI LIST".utf8)),
            ("film.mkv", [0x1A, 0x45, 0xDF, 0xA3, 0x9F, 0x42, 0x86, 0x81]),
            ("legacy.mov", [0, 0, 0, 0x10] + Array("moov".utf8)),
        ]
        for (name, magic) in files { writeBytes(magic + [UInt8](repeating: 0, count: 300), to: scratch.file(name)) }
        writeBytes(readBytes(baseJPEG), to: scratch.file("IMG_0001.jpg"))
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.skipped.isEmpty, "\(library.skipped)")
        #expect(library.photos.count == 1)
        #expect(library.leftOut.videos == files.count)
        #expect(library.leftOut.total == files.count)
        // A video named on its own is counted too, and a decode of one says what it is.
        #expect(try PhotoLibrary.scan([scratch.file("clip.mp4")]).leftOut.videos == 1)
        guard case .failure(.unreadablePhoto(_, let reason)) = decodeOutcome(scratch.file("clip.mp4")) else {
            Issue.record("a video decoded"); return
        }
        #expect(reason.contains("video"))
        // A HEIF is not a video, whatever it is compatible with.
        #expect(Sniffed(startingWith: [0, 0, 0, 0x18] + Array("ftypheic".utf8) + [0, 0, 0, 0] + Array("mif1heic".utf8)) == .readable(.heif))
    }
}
