// CameraLibraryTests.swift — a library of camera-size photos in every kind Tessera reads, drawn
// by the binary at the default flags: nothing grey, nothing drawn from a thumbnail smaller than
// its cell, and each kind close to its sRGB baseline-JPEG twin drawn in the same grid.
import CTesseraTestShims
import Glibc
import Testing

/// One picture per kind (the large ones 4000 x 3000 px, 12 MP, a phone's), each beside `NAME-twin.jpg`: the same
/// pixels as an sRGB baseline JPEG. `converted` kinds carry a colour profile Tessera converts from.
private struct Kind {
    let name: String
    let converted: Bool
    /// Camera size (4000 x 3000) for the kinds that decode whole or by tiles, the ones the
    /// default budget used to draw grey; 2000 x 1500 for the others, which stream, so that
    /// making the library (an AVIF encode above all) stays quick.
    var large = false
    var size: String { large ? "4000x3000" : "2000x1500" }
}

private let cameraKinds: [Kind] = [
    Kind(name: "heic-single.heic", converted: false, large: true), Kind(name: "heic-tiled-thumb.heic", converted: false, large: true),
    Kind(name: "heic-tiled.heic", converted: false, large: true), Kind(name: "avif.avif", converted: false),
    Kind(name: "webp-lossless.webp", converted: false, large: true), Kind(name: "webp-lossy.webp", converted: false),
    Kind(name: "png-8.png", converted: false), Kind(name: "png-16-alpha.png", converted: false),
    Kind(name: "jpeg-progressive.jpg", converted: false), Kind(name: "jpeg-p3.jpg", converted: true),
    Kind(name: "jpeg-adobe.jpg", converted: true), Kind(name: "heic-p3.heic", converted: true),
    Kind(name: "tiff-16.tif", converted: false, large: true), Kind(name: "gif.gif", converted: false),
]

/// The library, made once per test process from the fixtures (ImageMagick, cwebp, heif-enc and
/// the test shims' grid-HEIC writer).
private let cameraLibrary: String = {
    let folder = testRoot + "/camera-library"
    let work = folder + "-work"
    precondition(system("mkdir -p '\(folder)' '\(work)'") == 0)
    var commands: [String] = []
    for (index, kind) in cameraKinds.enumerated() {
        let source = work + "/\(index).png", base = folder + "/" + kind.name
        let twin = String(base[..<base.lastIndex(of: ".")!]) + "-twin.jpg"
        commands.append("convert '\(fixtures)/Landscape_\(index % 9).jpg' -auto-orient -resize \(kind.size)! PNG24:'\(source)'")
        // A GIF's twin is made from the GIF: its 256 colours are the picture.
        if kind.name != "gif.gif" { commands.append("convert '\(source)' -quality 95 '\(twin)'") }
        switch kind.name {
        case "tiff-16.tif": commands.append("convert '\(source)' -depth 16 -compress lzw '\(base)'")
        case "gif.gif": commands.append("convert '\(source)' '\(base)' && convert '\(base)' -quality 95 '\(twin)'")
        case "heic-single.heic": commands.append("heif-enc -q 90 '\(source)' -o '\(base)'")
        case "avif.avif": commands.append("heif-enc -A -q 90 '\(source)' -o '\(base)'")
        case "webp-lossless.webp": commands.append("cwebp -quiet -lossless -m 0 '\(source)' -o '\(base)'")
        case "webp-lossy.webp": commands.append("cwebp -quiet -q 95 '\(source)' -o '\(base)'")
        case "png-8.png": commands.append("cp '\(source)' '\(base)'")
        // Opaque alpha: the twin has none, and the pixels are the same.
        case "png-16-alpha.png": commands.append("convert '\(source)' -depth 16 -alpha set PNG64:'\(base)'")
        case "jpeg-progressive.jpg": commands.append("convert '\(source)' -quality 95 -interlace JPEG '\(base)'")
        case "jpeg-p3.jpg":
            commands.append("convert '\(source)' -profile /usr/share/color/icc/sRGB.icc -profile '\(work)/p3.icc' -quality 95 '\(base)'")
        case "jpeg-adobe.jpg":
            commands.append("convert '\(source)' -profile /usr/share/color/icc/sRGB.icc "
                            + "-profile /usr/share/color/icc/colord/AdobeRGB1998.icc -quality 95 '\(base)'")
        case "heic-p3.heic":
            commands.append("convert '\(source)' -profile /usr/share/color/icc/sRGB.icc -profile '\(work)/p3.icc' PNG24:'\(work)/p3.png'"
                            + " && heif-enc -q 90 '\(work)/p3.png' -o '\(base)'")
        default: break  // the tiled HEICs, below
        }
    }
    precondition(tessera_test_write_display_p3_profile(work + "/p3.icc") == 0)
    for command in commands { precondition(system(command) == 0, "failed: \(command)") }
    // Tiled like a phone's: 512 px tiles, with a 320 px thumbnail (smaller than the cells below:
    // it must not be used) and without one.
    for (kind, thumbnail) in [("heic-tiled-thumb", 320), ("heic-tiled", 0)] {
        let index = cameraKinds.firstIndex { $0.name.hasPrefix(kind + ".") }!
        let ppm = work + "/\(kind).ppm"
        precondition(system("convert '\(work)/\(index).png' '\(ppm)'") == 0)
        let bytes = readFile(ppm)
        let header = Array("P6\n4000 3000\n255\n".utf8)
        precondition(Array(bytes.prefix(header.count)) == header, "unexpected PPM header")
        var message = [CChar](repeating: 0, count: 200)
        let written = Array(bytes[header.count...]).withUnsafeBufferPointer {
            tessera_test_write_grid_heic(folder + "/\(kind).heic", $0.baseAddress, 4000, 3000, 512, Int32(thumbnail), 90, &message, 200)
        }
        precondition(written == 0, "grid HEIC: \(String(cString: message))")
    }
    _ = system("rm -rf '\(work)'")
    return folder
}()

/// The output's pixels (RGB) by djpeg, and its width.
private func decodedPixels(_ jpeg: String) -> (pixels: [UInt8], width: Int)? {
    let ppm = jpeg + ".ppm"
    defer { unlink(ppm) }
    guard system("djpeg -pnm '\(jpeg)' > '\(ppm)'") == 0 else { return nil }
    let bytes = readFile(ppm)
    // "P6\nW H\n255\n"
    var fields: [Int] = [], at = 2, number = 0, inNumber = false
    while fields.count < 3 && at < bytes.count {
        let byte = bytes[at]
        if byte >= 48 && byte <= 57 {
            number = number * 10 + Int(byte - 48)
            inNumber = true
        } else if inNumber {
            fields.append(number)
            number = 0
            inNumber = false
        }
        at += 1
    }
    guard fields.count == 3 else { return nil }
    return (Array(bytes[at...]), fields[0])
}

@Suite(.serialized) struct CameraLibraryTests {
    /// Default flags, 300 px cells: every photo drawn (no warning, no placeholder), and each kind
    /// within 2.5 levels of its twin (3.0 where a profile is converted), its cell against the
    /// twin's cell of the same render (the manifest says which cell is which photo). The output
    /// is written at quality 100 and 4:4:4 (no other flag), so that its own compression, which
    /// differs cell to cell where 8 x 8 blocks straddle cells, does not hide the decoders'
    /// differences (at Q90 4:2:0, two identical photos' cells differ by about 3 levels).
    @Test func everyKindIsDrawnSharpAtTheDefaults() throws {
        let cell = 300
        let folder = testRoot + "/camera-render-\(cell)-\(getpid())"
        #expect(system("mkdir -p '\(folder)'") == 0)
        defer { _ = system("rm -rf '\(folder)'") }
        let run = runMeasured(["grid", cameraLibrary, "-o", folder + "/out.jpg", "--columns", "6", "--tile-size", "\(cell)",
                               "--quality", "100", "--subsampling", "444", "--manifest", folder + "/cells.csv", "--no-progress"])
        #expect(run.exitCode == 0, "\(run.output)")
        #expect(!run.output.contains("warning") && !run.output.contains("placeholder") && !run.output.contains("thumbnail"),
                "\(run.output)")
        // Within the budget the default chose (this machine: its available memory).
        let plan = runTessera(["grid", cameraLibrary, "-o", folder + "/out.jpg", "--columns", "6", "--tile-size", "\(cell)", "--dry-run"])
        let budgetText = plan.output.components(separatedBy: "(budget ").last?.split(separator: ",").first.map(String.init) ?? ""
        let budgetMiB = budgetText.hasSuffix(" GiB") ? (Double(budgetText.dropLast(4)) ?? 0) * 1024 : Double(budgetText.dropLast(4)) ?? 0
        #expect(budgetMiB >= 64, "\(plan.output)")
        #expect(Double(run.peakBytes) <= budgetMiB * 1_048_576, "peak \(run.peakMiB) MiB over the \(budgetText) budget")
        let manifest = String(decoding: readFile(folder + "/cells.csv"), as: UTF8.self)
        var cellOf: [String: (Int, Int)] = [:]
        for line in manifest.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: ",")
            guard fields.count == 3, let column = Int(fields[0]), let row = Int(fields[1]) else { continue }
            cellOf[String(fields[2].split(separator: "/").last!)] = (column, row)
        }
        let (pixels, width) = try #require(decodedPixels(folder + "/out.jpg"))
        for kind in cameraKinds {
            let twinName = String(kind.name[..<kind.name.lastIndex(of: ".")!]) + "-twin.jpg"
            guard let photo = cellOf[kind.name], let twin = cellOf[twinName] else {
                Issue.record("\(kind.name) or its twin is not in the manifest: \(manifest)")
                continue
            }
            var total = 0
            for y in 0..<cell {
                for x in 0..<(cell * 3) {
                    let a = (photo.1 * cell + y) * width * 3 + photo.0 * cell * 3 + x
                    let b = (twin.1 * cell + y) * width * 3 + twin.0 * cell * 3 + x
                    total += abs(Int(pixels[a]) - Int(pixels[b]))
                }
            }
            let mean = Double(total) / Double(cell * cell * 3)
            #expect(mean <= (kind.converted ? 3.0 : 2.5), "\(kind.name) at \(cell) px: \(mean) levels from its twin")
        }
    }
}
