// OtherFormatTests.swift — PNG, WebP, HEIF/HEIC and AVIF photos, and colour profiles, each drawn
// cell compared with an sRGB baseline-JPEG twin of the same picture.
//
// The files are made here with the tools Debian ships (ImageMagick, cwebp, heif-enc; CI installs
// them) from one real photo of the repository's orientation fixture, and, for what those tools
// cannot write, with libheif and Little CMS directly (CTesseraTestShims: HEICs turned by
// irot/imir boxes, a Display P3 profile). Twins are made by ImageMagick, an independent decoder.
import CTesseraTestShims
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

/// One kind of file: how to make it from the master PNG, how to make its twin, and how close the
/// drawn cell must be.
struct FormatCase: CustomStringConvertible, Sendable {
    let name: String
    let file: String
    /// Untagged: 1.5 levels; profile-converted: 3 (the issue's targets).
    let tolerance: Double
    /// Converted from a wide-gamut profile: its unconverted pixels must differ from the twin by
    /// more than the tolerance, or the case could not catch an ignored profile.
    let tagged: Bool
    var description: String { name }
}

/// Made once for the suite (a global is initialised once, on first use, thread-safely).
let formatFixtures = FormatFixtures()

final class FormatFixtures: Sendable {
    let directory: String
    let cases: [FormatCase]
    /// The twins, by case name.
    let twins: [String: String]
    let problems: [String]

    init() {
        let scratch = ScratchDirectory()
        directory = scratch.path
        func at(_ name: String) -> String { scratch.file(name) }
        var problems: [String] = []
        func run(_ arguments: [String]) {
            if runTool(arguments) != 0 { problems.append(arguments.joined(separator: " ")) }
        }
        let source = fixturesDirectory + "/orientation/Landscape_1.jpg"
        let srgb = "/usr/share/color/icc/sRGB.icc"
        let adobe = "/usr/share/color/icc/colord/AdobeRGB1998.icc"
        // The master: 600 x 400, saturated (so that a wide-gamut profile matters), no profile.
        run(["convert", source, "-resize", "600x400!", "-modulate", "100,170", "-strip", "PNG24:" + at("master.png")])
        if tessera_test_write_display_p3_profile(at("p3.icc")) != 0 { problems.append("Display P3 profile") }
        run(["convert", at("master.png"), "-quality", "95", at("master-twin.jpg")])
        var cases: [FormatCase] = []
        var twins: [String: String] = [:]
        /// A case whose twin is ImageMagick's reading of the file itself (what the file holds,
        /// flattened over Tessera's default grey where transparent).
        func untagged(_ name: String, _ file: String, _ make: [String]) {
            run(make)
            run(["convert", at(file), "-background", "#808080", "-flatten", "-quality", "95", at(name + "-twin.jpg")])
            cases.append(FormatCase(name: name, file: at(file), tolerance: 1.5, tagged: false))
            twins[name] = at(name + "-twin.jpg")
        }
        /// A case whose twin is the master: the file holds the master's colours in another space.
        func sameAsMaster(_ name: String, _ file: String, tolerance: Double, tagged: Bool, _ make: [[String]]) {
            for command in make { run(command) }
            cases.append(FormatCase(name: name, file: at(file), tolerance: tolerance, tagged: tagged))
            twins[name] = at("master-twin.jpg")
        }
        let master = at("master.png")
        untagged("png-rgb8", "rgb8.png", ["convert", master, "PNG24:" + at("rgb8.png")])
        untagged("png-rgb16", "rgb16.png", ["convert", master, "-depth", "16", "PNG48:" + at("rgb16.png")])
        untagged("png-palette", "palette.png", ["convert", master, "-dither", "None", "-colors", "200", "PNG8:" + at("palette.png")])
        untagged("png-grey", "grey.png", ["convert", master, "-colorspace", "gray", at("grey.png")])
        untagged("png-grey16", "grey16.png", ["convert", master, "-colorspace", "gray", "-depth", "16", at("grey16.png")])
        untagged("png-alpha", "alpha.png", ["convert", master, "-alpha", "set", "-channel", "A", "-fx", "0.25+0.75*i/w",
                                             "+channel", "PNG32:" + at("alpha.png")])
        untagged("png-adam7", "adam7.png", ["convert", master, "-interlace", "PNG", "PNG24:" + at("adam7.png")])
        untagged("png-adam7-16", "adam7-16.png", ["convert", master, "-interlace", "PNG", "-depth", "16", "PNG48:" + at("adam7-16.png")])
        untagged("webp-lossless", "lossless.webp", ["cwebp", "-quiet", "-lossless", master, "-o", at("lossless.webp")])
        untagged("webp-alpha", "alpha.webp", ["cwebp", "-quiet", "-lossless", at("alpha.png"), "-o", at("alpha.webp")])
        sameAsMaster("webp-lossy", "lossy.webp", tolerance: 1.5, tagged: false,
                     [["cwebp", "-quiet", "-q", "95", master, "-o", at("lossy.webp")]])
        sameAsMaster("heic", "plain.heic", tolerance: 1.5, tagged: false, [["heif-enc", "-q", "95", master, "-o", at("plain.heic")]])
        sameAsMaster("avif", "plain.avif", tolerance: 1.5, tagged: false,
                     [["heif-enc", "-A", "-q", "95", master, "-o", at("plain.avif")]])
        sameAsMaster("jpeg-p3", "p3.jpg", tolerance: 3, tagged: true,
                     [["convert", master, "-profile", srgb, "-profile", at("p3.icc"), "-quality", "95", at("p3.jpg")]])
        sameAsMaster("jpeg-adobe-rgb", "adobe.jpg", tolerance: 3, tagged: true,
                     [["convert", master, "-profile", srgb, "-profile", adobe, "-quality", "95", at("adobe.jpg")]])
        sameAsMaster("png-p3-iccp", "p3.png", tolerance: 3, tagged: true,
                     [["convert", master, "-profile", srgb, "-profile", at("p3.icc"), "PNG24:" + at("p3.png")]])
        sameAsMaster("webp-p3-iccp", "p3.webp", tolerance: 3, tagged: true,
                     [["cwebp", "-quiet", "-q", "95", "-metadata", "icc", at("p3.jpg"), "-o", at("p3.webp")]])
        sameAsMaster("heic-p3-prof", "p3.heic", tolerance: 3, tagged: true, [["heif-enc", "-q", "95", at("p3.jpg"), "-o", at("p3.heic")]])
        // A CMYK JPEG with its CMYK profile (our own, on a warm paper): its twin is ImageMagick's
        // reading of it through the profile (perceptual, as printing profiles are read); the
        // naive formula is about 20 levels off.
        if tessera_test_write_cmyk_profile(at("cmyk.icc")) != 0 { problems.append("CMYK profile") }
        run(["convert", master, "-colorspace", "CMYK", "-quality", "95", at("cmyk-plain.jpg")])
        run(["convert", at("cmyk-plain.jpg"), "-profile", at("cmyk.icc"), at("cmyk.jpg")])
        run(["convert", at("cmyk.jpg"), "-intent", "Perceptual", "-profile", srgb, "-quality", "95", at("jpeg-cmyk-profile-twin.jpg")])
        cases.append(FormatCase(name: "jpeg-cmyk-profile", file: at("cmyk.jpg"), tolerance: 3, tagged: true))
        twins["jpeg-cmyk-profile"] = at("jpeg-cmyk-profile-twin.jpg")
        // The same inks and profile in a TIFF (libtiff's own reading of CMYK is the formula).
        run(["convert", at("cmyk-plain.jpg"), "-profile", at("cmyk.icc"), "-compress", "lzw", at("cmyk.tif")])
        run(["convert", at("cmyk.tif"), "-intent", "Perceptual", "-profile", srgb, "-quality", "95", at("tiff-cmyk-profile-twin.jpg")])
        cases.append(FormatCase(name: "tiff-cmyk-profile", file: at("cmyk.tif"), tolerance: 3, tagged: true))
        twins["tiff-cmyk-profile"] = at("tiff-cmyk-profile-twin.jpg")
        // P3 pixels with no ICC profile, tagged only by H.273 code points.
        run(["convert", at("p3.png"), "-strip", "PNG24:" + at("p3-pixels.png")])
        // heif-enc 1.15 drops its --colour_primaries (its macOS workaround): written with libheif.
        if let pixels = try? pngPixels(at("p3-pixels.png")) {
            var message = [CChar](repeating: 0, count: 200)
            let written = pixels.pixels.withUnsafeBufferPointer {
                tessera_test_write_heic(at("p3-nclx.heic"), $0.baseAddress, Int32(pixels.width), Int32(pixels.height), 1, 0, 0,
                                        12, 95, &message, 200)
            }
            if written != 0 { problems.append("p3-nclx.heic: " + String(cString: message)) }
        } else {
            problems.append("reading p3-pixels.png")
        }
        cases.append(FormatCase(name: "heic-p3-nclx", file: at("p3-nclx.heic"), tolerance: 3, tagged: true))
        twins["heic-p3-nclx"] = at("master-twin.jpg")
        // PNG's cICP chunk (no Debian tool writes one): inserted after IHDR.
        var png = readBytes(at("p3-pixels.png"))
        if png.count > 33 {
            png.insert(contentsOf: pngChunk("cICP", [12, 13, 0, 1]), at: 33)
            writeBytes(png, to: at("p3-cicp.png"))
        }
        cases.append(FormatCase(name: "png-p3-cicp", file: at("p3-cicp.png"), tolerance: 3, tagged: true))
        twins["png-p3-cicp"] = at("master-twin.jpg")
        self.cases = cases
        self.twins = twins
        self.problems = problems
    }
}

func flippedVertically(_ image: RGBImage) -> RGBImage {
    var out = image
    let row = image.width * 3
    for y in 0..<image.height {
        out.pixels.replaceSubrange(y * row..<(y + 1) * row, with: image.pixels[(image.height - 1 - y) * row..<(image.height - y) * row])
    }
    return out
}

/// A PNG's pixels, through ImageMagick (to binary PPM).
func pngPixels(_ path: String) throws -> RGBImage {
    let ppm = path + ".ppm"
    guard runTool(["convert", path, "-depth", "8", "ppm:" + ppm]) == 0 else { throw TesseraError.unreadablePhoto(path: path, reason: "convert") }
    let bytes = readBytes(ppm)
    // "P6\nW H\n255\n" then the pixels.
    var fields: [Int] = [], at = 2, number = 0, inNumber = false
    while fields.count < 3 && at < bytes.count {
        let byte = bytes[at]
        if byte >= 48 && byte <= 57 { number = number * 10 + Int(byte - 48); inNumber = true }
        else if inNumber { fields.append(number); number = 0; inNumber = false }
        at += 1
    }
    guard fields.count == 3 else { throw TesseraError.unreadablePhoto(path: ppm, reason: "not a PPM") }
    return RGBImage(width: fields[0], height: fields[1], pixels: Array(bytes[at..<(at + fields[0] * fields[1] * 3)]))
}

/// A PNG chunk: length, type, data, CRC-32 of type and data.
func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    let body = Array(type.utf8) + data
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in body {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    crc ^= 0xFFFF_FFFF
    func be(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    return be(UInt32(data.count)) + body + be(crc)
}

/// One cell of `path` drawn by CellDecoder at `width` x `height`.
func drawnCell(_ path: String, width: Int = 150, height: Int = 100, pool: Int = 32 << 20) throws -> (RGBImage, DecodeNotes) {
    let decoder = CellDecoder(cellWidth: width, cellHeight: height, decodePoolBytes: pool)
    var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
    let notes = try bytes.withUnsafeMutableBytes { buffer in
        Result { () throws(TesseraError) -> DecodeNotes in try decoder.decode(path: path, into: buffer) }
    }.get()
    return (RGBImage(width: width, height: height, pixels: bytes), notes)
}

@Suite struct OtherFormatTests {
    @Test func fixturesWereMade() {
        #expect(formatFixtures.problems.isEmpty, "commands that failed: \(formatFixtures.problems)")
    }

    /// Each kind of file is drawn like its sRGB twin: within 1.5 levels (mean) untagged, 3 when
    /// converted from Display P3 or Adobe RGB. Prints the measured value for the note.
    @Test(arguments: formatFixtures.cases)
    func drawnLikeItsTwin(_ kind: FormatCase) throws {
        let (cell, notes) = try drawnCell(kind.file)
        #expect(notes.warningCount == 0, "\(notes.firstWarning)")
        let (twin, _) = try drawnCell(formatFixtures.twins[kind.name]!)
        let difference = meanAbsoluteDifference(cell, twin)
        print("format \(kind.name): mean difference to its sRGB twin \(formatDecimal(difference, places: 2)) levels")
        #expect(difference <= kind.tolerance, "\(kind.name): \(difference) levels from its twin")
        // The comparison can fail: a mirrored twin is far off.
        #expect(meanAbsoluteDifference(cell, mirrored(twin)) > 10)
        if kind.tagged {
            // The same pixels drawn without their profile are further off than the tolerance:
            // a decoder that ignored the profile would fail above.
            let stripped = formatFixtures.directory + "/stripped-" + kind.name + ".png"
            #expect(runTool(["convert", kind.file, "-strip", "PNG24:" + stripped]) == 0)
            let (raw, _) = try drawnCell(stripped)
            let unconverted = meanAbsoluteDifference(raw, twin)
            print("format \(kind.name): unconverted it would be \(formatDecimal(unconverted, places: 2)) levels off")
            #expect(unconverted > kind.tolerance)
        }
    }

    /// The scan recognises each by content (not by name) and reads its header.
    @Test func scanReadsEveryFormatByContent() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var expected: [String: ImageFormat] = [:]
        for kind in formatFixtures.cases {
            let renamed = scratch.file(kind.name + ".dat")  // no telling extension
            writeBytes(readBytes(kind.file), to: renamed)
            let suffix = kind.file.split(separator: ".").last!
            expected[renamed] = suffix == "jpg" ? .jpeg : suffix == "png" ? .png : suffix == "webp" ? .webp : suffix == "tif" ? .tiff : .heif
        }
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.skipped.isEmpty, "\(library.skipped)")
        #expect(library.photos.count == expected.count)
        for photo in library.photos {
            #expect(photo.header.format == expected[photo.path], "\(photo.path)")
            #expect(photo.header.width == 600 && photo.header.height == 400, "\(photo.path)")
            let tagged = formatFixtures.cases.first { photo.path.hasSuffix("/" + $0.name + ".dat") }!.tagged
            #expect((photo.header.colorTag != nil) == tagged, "\(photo.path)")
        }
    }

    /// A CMYK profile whose floating-point table chains more elements than a profile needs is
    /// not used (Little CMS ran the whole chain at every point of its precomputed transform: 3,000
    /// of them took 18 s a photo): the inks are converted by formula, with a warning that says
    /// why, exactly as with no profile; a chain of 2 is used.
    @Test func aCMYKProfileOfTooManyChainedTablesIsNotUsed() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let plain = formatFixtures.directory + "/cmyk-plain.jpg"
        var drawn: [Int: (RGBImage, DecodeNotes)] = [:]
        for chained in [2, 40] {
            let profile = scratch.file("chained-\(chained).icc"), tagged = scratch.file("chained-\(chained).jpg")
            #expect(tessera_test_write_cmyk_profile_chained(profile, Int32(chained)) == 0)
            #expect(runTool(["convert", plain, "-profile", profile, tagged]) == 0)
            drawn[chained] = try drawnCell(tagged)
        }
        let (formula, _) = try drawnCell(plain)
        let refused = try #require(drawn[40])
        #expect(refused.1.warningCount == 1 && refused.1.firstWarning.contains("chains 41 processing elements"), "\(refused.1.firstWarning)")
        #expect(refused.1.firstWarning.hasSuffix("its inks converted by formula"), "\(refused.1.firstWarning)")
        // (ImageMagick re-encoded the file to tag it: the same picture within its rounding.)
        #expect(meanAbsoluteDifference(refused.0, formula) < 1.5, "\(meanAbsoluteDifference(refused.0, formula))")
        let used = try #require(drawn[2])
        #expect(used.1.warningCount == 0, "\(used.1.firstWarning)")
        #expect(meanAbsoluteDifference(used.0, formula) > 10)
    }

    /// A profile whose floating-point table has curves of thousands of segments is not used
    /// (Little CMS 2.14 crashed reading 16,000-segment curves under the profile's memory cap, a
    /// 4 KB PNG's worth; 6,000 took 1.3 s a photo): drawn as if sRGB, with a warning that says
    /// why. The same profile with curves of 3 segments is read.
    @Test func aProfileOfCurvesOfThousandsOfSegmentsIsNotUsed() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let untagged = scratch.file("untagged.jpg")
        #expect(runTool(["convert", formatFixtures.directory + "/master.png", "-quality", "90", untagged]) == 0)
        let (plain, _) = try drawnCell(untagged)
        // (Curves of 64 segments of 4,096 samples each crashed it too: 6 MB to read.)
        for (segments, samples, refusal) in [(3, 0, nil), (16_000, 0, "a curve of more than 64 segments"),
                                             (64, 4096, "a table that takes more than 2 MiB to read")] as [(Int, Int, String?)] {
            let tagged = scratch.file("segments-\(segments)-\(samples).jpg")
            writeBytes(withICCProfile(readBytes(untagged), segmentedCurveProfile(segments: segments, samples: samples)), to: tagged)
            let (cell, notes) = try drawnCell(tagged)
            if let refusal {
                #expect(notes.warningCount == 1 && notes.firstWarning.contains(refusal), "\(notes.firstWarning)")
                #expect(meanAbsoluteDifference(cell, plain) == 0)
            } else {
                #expect(!notes.firstWarning.contains("segments") && !notes.firstWarning.contains("to read"), "\(notes.firstWarning)")
            }
        }
    }

    /// An sRGB profile is not converted: the photo stays byte-identical to the untagged one.
    @Test func srgbProfileIsDrawnAsIs() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let untagged = scratch.file("untagged.jpg"), tagged = scratch.file("tagged.jpg")
        #expect(runTool(["convert", formatFixtures.directory + "/master.png", "-quality", "90", untagged]) == 0)
        // The same file with an APP2 ICC_PROFILE marker after SOI: Debian's sRGB profile.
        let profile = readBytes("/usr/share/color/icc/sRGB.icc")
        #expect(profile.count > 128)
        let payload = Array("ICC_PROFILE".utf8) + [0, 1, 1] + profile
        let marker: [UInt8] = [0xFF, 0xE2, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
        var bytes = readBytes(untagged)
        bytes.insert(contentsOf: marker, at: 2)
        writeBytes(bytes, to: tagged)
        #expect(try drawnCell(untagged).0 == drawnCell(tagged).0)
        #expect(try PhotoLibrary.scan([tagged]).photos.first?.header.colorTag == nil)
    }

    /// A damaged ICC profile: the photo is drawn as is, with a warning that says so.
    @Test func damagedProfileIsAWarning() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var bytes = readBytes(formatFixtures.directory + "/p3.jpg")
        // The profile's header ("acsp" signature at offset 36 of the profile) broken.
        let signature = Array("acsp".utf8)
        let at = (0..<(bytes.count - 4)).first { Array(bytes[$0..<($0 + 4)]) == signature }!
        bytes[at] = 0x78
        writeBytes(bytes, to: scratch.file("damaged.jpg"))
        let (_, notes) = try drawnCell(scratch.file("damaged.jpg"))
        #expect(notes.warningCount == 1)
        #expect(notes.firstWarning.contains("ICC profile"), "\(notes.firstWarning)")
    }

    /// Hostile headers are refused before any decoding: a PNG claiming more pixels than its
    /// bytes could inflate to, and truncated files of each format.
    @Test func hostileAndTruncatedFilesAreRefused() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // IHDR of 60,000 x 60,000 RGB in a file of a few hundred bytes.
        var png = readBytes(formatFixtures.directory + "/rgb8.png")
        png.replaceSubrange(16..<24, with: [0, 0, 0xEA, 0x60, 0, 0, 0xEA, 0x60])
        png.replaceSubrange(8..<33, with: pngChunk("IHDR", Array(png[16..<29])))
        writeBytes(Array(png.prefix(2000)), to: scratch.file("bomb.png"))
        #expect(throws: TesseraError.self) { try drawnCell(scratch.file("bomb.png")) }
        for kind in formatFixtures.cases where ["png-rgb8", "png-adam7", "webp-lossy", "webp-lossless", "heic", "avif"].contains(kind.name) {
            let bytes = readBytes(kind.file)
            let truncated = scratch.file("truncated-" + kind.name)
            writeBytes(Array(bytes.prefix(bytes.count / 2)), to: truncated)
            #expect(throws: TesseraError.self, "\(kind.name)") { try drawnCell(truncated) }
        }
    }

    /// A lossless WebP's stream is read before libwebp sees it (tessera_vp8l.c): cwebp's picture
    /// is counted at what libwebp allocates (four bytes a pixel and its tables, measured 4.1 to
    /// 4.3), and a stream of a code libwebp refuses (255 symbols of 8 bits: not complete) is
    /// named at the scan; the same stream with the code complete is read, pixel for pixel.
    @Test func aLosslessWebPStreamIsMeasuredBeforeLibwebpReadsIt() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let cwebp = try #require(try PhotoLibrary.scan([formatFixtures.directory + "/lossless.webp"]).photos.first?.header)
        let pixels = Int64(cwebp.width * cwebp.height)
        #expect(cwebp.wholeImageBytes >= 4 * pixels && cwebp.wholeImageBytes < 5 * pixels + (1 << 20), "\(cwebp.wholeImageBytes)")
        /// A 2 x 2 lossless WebP: green 0, 60, 120 and 180 by a code of `symbols` lengths of 8
        /// bits; red 200, blue 100 and alpha 255 by codes of one symbol.
        func tinyLossless(symbols: Int) -> [UInt8] {
            var bits: [UInt8] = []
            func put(_ value: Int, _ count: Int) { for i in 0..<count { bits.append(UInt8((value >> i) & 1)) } }
            func code(_ value: Int, _ count: Int) { for i in stride(from: count - 1, through: 0, by: -1) { bits.append(UInt8((value >> i) & 1)) } }
            func single(_ symbol: Int) { put(1, 1); put(0, 1); put(1, 1); put(symbol, 8) }
            put(0x2f, 8); put(1, 14); put(1, 14); put(0, 4)
            put(0, 3)  // no transform, no colour cache, no meta codes
            put(0, 1); put(8, 4)
            for symbol in [17, 18, 0, 1, 2, 3, 4, 5, 16, 6, 7, 8] { put(symbol == 0 || symbol == 8 ? 1 : 0, 3) }
            put(0, 1)
            for i in 0..<280 { code(i < symbols ? 1 : 0, 1) }
            single(200); single(100); single(255); single(0)
            for pixel in 0..<4 { code(pixel * 60, 8) }
            var data = [UInt8](repeating: 0, count: (bits.count + 7) / 8)
            for (i, bit) in bits.enumerated() where bit == 1 { data[i >> 3] |= 1 << UInt8(i & 7) }
            if data.count % 2 == 1 { data.append(0) }
            func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xff) } }
            let chunk = Array("VP8L".utf8) + le32(data.count) + data
            return Array("RIFF".utf8) + le32(4 + chunk.count) + Array("WEBP".utf8) + chunk
        }
        writeBytes(tinyLossless(symbols: 256), to: scratch.file("complete.webp"))
        writeBytes(tinyLossless(symbols: 255), to: scratch.file("incomplete.webp"))
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.photos.map { String($0.path.split(separator: "/").last!) } == ["complete.webp"])
        #expect(library.skipped.first?.reason.contains("a prefix code libwebp refuses") == true, "\(library.skipped)")
        #expect(runTool(["dwebp", "-quiet", scratch.file("complete.webp"), "-o", scratch.file("complete.png")]) == 0)
        #expect(runTool(["dwebp", "-quiet", scratch.file("incomplete.webp"), "-o", scratch.file("incomplete.png")]) != 0)
    }

    /// A HEIC turned by irot/imir (and carrying the same orientation in EXIF, as an iPhone's
    /// does), and one turned by EXIF alone (as heif-enc 1.15 writes them), with and without a
    /// thumbnail, in orientations 1, 3, 6 and 8: every one comes out upright, turned once.
    @Test(arguments: [1, 3, 6, 8])
    func heicComesOutUpright(orientation: Int) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // The stored frame of orientation k is the fixture's Landscape_k (a real camera's file);
        // its upright cell is what the JPEG decoder draws from it (tested against upright files
        // in OrientationTests).
        let jpeg = fixturesDirectory + "/orientation/Landscape_\(orientation).jpg"
        let stored = try JPEGFile.read(jpeg)
        let (reference, _) = try drawnCell(jpeg)
        for thumbnail in [0, 320] {
            let byBoxes = scratch.file("boxes-\(thumbnail).heic")
            var message = [CChar](repeating: 0, count: 200)
            let written = stored.pixels.withUnsafeBufferPointer {
                tessera_test_write_heic(byBoxes, $0.baseAddress, Int32(stored.width), Int32(stored.height), Int32(orientation),
                                        Int32(orientation), Int32(thumbnail), 0, 90, &message, 200)
            }
            #expect(written == 0, "\(String(cString: message))")
            let byExif = scratch.file("exif-\(thumbnail).heic")
            var arguments = ["heif-enc", "-q", "90", fixturesDirectory + "/orientation/Landscape_\(orientation).jpg", "-o", byExif]
            if thumbnail > 0 { arguments += ["-t", "\(thumbnail)"] }
            #expect(runTool(arguments) == 0)
            for file in [byBoxes, byExif] {
                let (cell, notes) = try drawnCell(file)
                #expect(notes.method == (thumbnail > 0 ? .thumbnail : .wholeImage), "\(file)")
                let difference = meanAbsoluteDifference(cell, reference)
                print("heic orientation \(orientation) \(file.split(separator: "/").last!): \(formatDecimal(difference, places: 2)) levels from upright")
                // A decoded primary image is within 2.5 levels. libheif 1.15 makes thumbnails by
                // nearest-neighbour scaling, so theirs alias (measured 5.5-7.4): within 9.
                #expect(difference < (thumbnail > 0 ? 9 : 2.5), "orientation \(orientation), \(file): \(difference) from upright")
                // And the upright picture is the nearest of the four that fit a landscape cell
                // (turned twice, or mirrored, is far off).
                for wrong in [mirrored(reference), flippedVertically(reference), mirrored(flippedVertically(reference))] {
                    #expect(meanAbsoluteDifference(cell, wrong) > difference + 8, "orientation \(orientation), \(file)")
                }
                let header = try #require(try PhotoLibrary.scan([file]).photos.first?.header)
                let turned = OrientationTransform(exifOrientation: header.exifOrientation).swapsAxes
                #expect((turned ? header.height : header.width) > (turned ? header.width : header.height), "\(file): landscape upright")
            }
        }
    }

    /// BMP is named in a warning; a non-image named .png too. (GIF and TIFF are read: NewFormatTests.)
    @Test func unreadableImagesAreNamed() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let master = formatFixtures.directory + "/master.png"
        #expect(runTool(["convert", master, scratch.file("c.bmp")]) == 0)
        writeBytes(Array("not a picture".utf8), to: scratch.file("d.png"))
        writeBytes(Array("notes".utf8), to: scratch.file("e.txt"))
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.photos.isEmpty)
        let reasons = Dictionary(uniqueKeysWithValues: library.skipped.map { (String($0.path.split(separator: "/").last!), $0.reason) })
        #expect(reasons["c.bmp"]?.hasPrefix("a BMP image") == true)
        #expect(reasons["d.png"] != nil)
        #expect(reasons["e.txt"] == nil && library.ignoredNonJPEGCount == 1)
    }
}

/// `jpeg` with `profile` in APP2 ICC_PROFILE markers after SOI (as many as it takes).
func withICCProfile(_ jpeg: [UInt8], _ profile: [UInt8]) -> [UInt8] {
    let chunk = 65_519
    let count = (profile.count + chunk - 1) / chunk
    var markers: [UInt8] = []
    for index in 0..<count {
        let payload = Array("ICC_PROFILE".utf8) + [0, UInt8(index + 1), UInt8(count)]
            + profile[(index * chunk)..<min(profile.count, (index + 1) * chunk)]
        markers += [0xFF, 0xE2, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
    }
    return Array(jpeg[0..<2]) + markers + jpeg[2...]
}

/// A v4 RGB profile whose floating-point tables (D2B0 and D2B1) are three segmented curves of
/// `segments` identity segments each, then a matrix (a hostile profile's shape, at thousands).
/// With `samples` > 0, every segment after the first is a sampled one of that many points.
func segmentedCurveProfile(segments: Int, samples: Int = 0) -> [UInt8] {
    func be32(_ value: UInt32) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> UInt32($0)) } }
    func be16(_ value: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)] }
    func float(_ value: Float) -> [UInt8] { be32(value.bitPattern) }
    func text(_ value: String) -> [UInt8] { Array(value.utf8) }
    func padded(_ bytes: [UInt8]) -> [UInt8] { bytes + [UInt8](repeating: 0, count: (4 - bytes.count % 4) % 4) }
    var curve = text("curf") + [0, 0, 0, 0] + be16(segments) + be16(0)
    for i in 0..<(segments - 1) { curve += float(1 + Float(i) * 1e-3) }
    for segment in 0..<segments {
        if samples > 0 && segment > 0 {
            curve += text("samf") + [0, 0, 0, 0] + be32(UInt32(samples)) + (0..<samples).flatMap { float(Float($0) / Float(samples)) }
        } else {
            curve += text("parf") + [0, 0, 0, 0] + be16(0) + be16(0) + float(1) + float(1) + float(0) + float(0)
        }
    }
    curve = padded(curve)
    var curves = text("cvst") + [0, 0, 0, 0] + be16(3) + be16(3)
    for i in 0..<3 { curves += be32(UInt32(12 + 24 + i * curve.count)) + be32(UInt32(curve.count)) }
    for _ in 0..<3 { curves += curve }
    let toXYZ: [Float] = [0.4361, 0.3851, 0.1431, 0.2225, 0.7169, 0.0606, 0.0139, 0.0971, 0.7141, 0, 0, 0]
    let matrix = text("matf") + [0, 0, 0, 0] + be16(3) + be16(3) + toXYZ.flatMap(float)
    var table = text("mpet") + [0, 0, 0, 0] + be16(3) + be16(3) + be32(2)
    var offset = 16 + 16
    for element in [curves, matrix] {
        table += be32(UInt32(offset)) + be32(UInt32(element.count))
        offset += element.count
    }
    table += curves + matrix
    let name = Array("hostile curves".utf16).flatMap { be16(Int($0)) }
    let description = padded(text("mluc") + [0, 0, 0, 0] + be32(1) + be32(12) + text("enUS") + be32(UInt32(name.count)) + be32(28) + name)
    func s15(_ value: Double) -> [UInt8] { be32(UInt32(bitPattern: Int32((value * 65536).rounded()))) }
    let white = text("XYZ ") + [0, 0, 0, 0] + s15(0.9642) + s15(1.0) + s15(0.8249)
    let tags: [([UInt8], [UInt8])] = [(text("desc"), description), (text("wtpt"), white), (text("D2B0"), table)]
    let start = 128 + 4 + 12 * (tags.count + 1)
    var directory = be32(UInt32(tags.count + 1)), data: [UInt8] = []
    var tableAt = 0
    for (signature, body) in tags {
        if signature == text("D2B0") { tableAt = start + data.count }
        directory += signature + be32(UInt32(start + data.count)) + be32(UInt32(body.count))
        data += body
    }
    directory += text("D2B1") + be32(UInt32(tableAt)) + be32(UInt32(table.count))
    let size = start + data.count
    var header = be32(UInt32(size)) + text("lcms") + be32(0x0430_0000) + text("mntrRGB XYZ ") + [UInt8](repeating: 0, count: 12)
    header += text("acsp") + text("APPL") + [UInt8](repeating: 0, count: 20) + be32(1) + s15(0.9642) + s15(1.0) + s15(0.8249)
    header += text("lcms") + [UInt8](repeating: 0, count: 44)
    return header + directory + data
}
