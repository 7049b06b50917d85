// FormatBenchmark.swift — the formats a phone library holds, against baseline JPEG.
//
// One generated camera-sized picture (4000 x 3000) saved as a baseline JPEG, and, with Debian's
// tools (ImageMagick, cwebp, heif-enc) and CTesseraTestShims (a HEIC of 512 x 512 tiles, as
// phones write them): progressive JPEG, Display-P3 JPEG, PNG, Adam7 PNG, 16-bit PNG, WebP lossy
// and lossless, HEIC tiled (with and without a thumbnail) and as one HEVC picture, AVIF.
// Measured in this run:
//   - each file decoded into a 150 x 100 and a 600 x 400 cell, in this process, with the decode
//     budget of --max-memory 256M (so that every format decodes, whole where it must): median
//     milliseconds and the ratio to the baseline JPEG at the same size;
//   - a folder of 32 such photos in these formats as a `tessera grid` with default flags, at 150
//     and 600 px cells: wall time, peak RSS, and whether every photo was drawn.
import CTesseraTestShims
import Glibc
import Tessera
import TesseraTestSupport

@MainActor
func formatLibrary() -> (singles: [(name: String, path: String)], folder: String) {
    let directory = products + "/bench-formats", folder = directory + "/folder"
    let marker = directory + "/.complete-3"
    let names = ["baseline.jpg", "progressive.jpg", "display-p3.jpg", "rgb8.png", "adam7.png", "rgb16.png", "lossy.webp",
                 "lossless.webp", "tiled-thumbnail.heic", "tiled.heic", "one-picture.heic", "picture.avif"]
    let singles = names.map { (String($0.split(separator: ".").first!), directory + "/" + $0) }
    if access(marker, F_OK) == 0 { return (singles, folder) }
    print("generating camera-sized photos in every format (a few minutes, once) ...")
    _ = run(["rm", "-rf", directory])
    mkdir(directory, 0o755)
    mkdir(folder, 0o755)
    func shell(_ command: String) {
        guard run(["/bin/sh", "-c", command]).status == 0 else { fail("failed: \(command)") }
    }
    func picture(_ seed: UInt64) -> RGBImage { SamplePhotos.picture(width: 4000, height: 3000, seed: seed) }
    func tiled(_ image: RGBImage, to path: String, thumbnail: Int) {
        var message = [CChar](repeating: 0, count: 200)
        let status = image.pixels.withUnsafeBufferPointer {
            tessera_test_write_grid_heic(path, $0.baseAddress, 4000, 3000, 512, Int32(thumbnail), 80, &message, 200)
        }
        guard status == 0 else { fail("grid HEIC: \(String(cString: message))") }
    }
    let p3 = directory + "/p3.icc"
    guard tessera_test_write_display_p3_profile(p3) == 0 else { fail("cannot write a Display P3 profile") }
    let srgb = "/usr/share/color/icc/sRGB.icc"
    // The single files, from one picture.
    let image = picture(9001)
    let base = directory + "/baseline.jpg", png = directory + "/rgb8.png"
    do { try JPEGFile.write(image, to: base, quality: 90) } catch { fail("\(error)") }
    shell("jpegtran -progressive '\(base)' > '\(directory)/progressive.jpg'")
    shell("convert '\(base)' -profile \(srgb) -profile '\(p3)' -quality 90 '\(directory)/display-p3.jpg'")
    shell("convert '\(base)' PNG24:'\(png)'")
    shell("convert '\(png)' -interlace PNG PNG24:'\(directory)/adam7.png'")
    shell("convert '\(png)' -depth 16 PNG48:'\(directory)/rgb16.png'")
    shell("cwebp -quiet -q 85 '\(png)' -o '\(directory)/lossy.webp'")
    shell("cwebp -quiet -lossless -m 0 '\(png)' -o '\(directory)/lossless.webp'")
    tiled(image, to: directory + "/tiled-thumbnail.heic", thumbnail: 320)
    tiled(image, to: directory + "/tiled.heic", thumbnail: 0)
    shell("heif-enc -q 80 '\(png)' -o '\(directory)/one-picture.heic' >/dev/null")
    shell("heif-enc -A -q 60 '\(png)' -o '\(directory)/picture.avif' >/dev/null")
    // The folder: 32 different pictures, in the formats a phone library holds.
    let kinds = ["jpg", "jpg", "jpg", "jpg", "jpg", "jpg", "progressive", "progressive", "progressive", "progressive",
                 "p3", "p3", "adobe", "adobe", "png", "png", "png", "adam7", "png16", "webp", "webp", "webp", "webp", "webp",
                 "heic-thumbnail", "heic-thumbnail", "heic-thumbnail", "heic-thumbnail", "heic", "heic", "heic", "heic"]
    for (index, kind) in kinds.enumerated() {
        let name = folder + "/photo-\(index < 10 ? "0" : "")\(index)"
        let picture = picture(9100 + UInt64(index))
        let jpeg = name + "-source.jpg"
        do { try JPEGFile.write(picture, to: jpeg, quality: 90) } catch { fail("\(error)") }
        switch kind {
        case "jpg": shell("mv '\(jpeg)' '\(name).jpg'")
        case "progressive": shell("jpegtran -progressive '\(jpeg)' > '\(name).jpg' && rm '\(jpeg)'")
        case "p3": shell("convert '\(jpeg)' -profile \(srgb) -profile '\(p3)' -quality 90 '\(name).jpg' && rm '\(jpeg)'")
        case "adobe":
            shell("convert '\(jpeg)' -profile \(srgb) -profile /usr/share/color/icc/colord/AdobeRGB1998.icc -quality 90 '\(name).jpg' && rm '\(jpeg)'")
        case "png": shell("convert '\(jpeg)' PNG24:'\(name).png' && rm '\(jpeg)'")
        case "adam7": shell("convert '\(jpeg)' -interlace PNG PNG24:'\(name).png' && rm '\(jpeg)'")
        case "png16": shell("convert '\(jpeg)' -depth 16 PNG48:'\(name).png' && rm '\(jpeg)'")
        case "webp": shell("cwebp -quiet -q 85 '\(jpeg)' -o '\(name).webp' && rm '\(jpeg)'")
        default:
            tiled(picture, to: name + ".heic", thumbnail: kind == "heic-thumbnail" ? 320 : 0)
            shell("rm '\(jpeg)'")
        }
    }
    close(open(marker, O_CREAT | O_WRONLY, 0o644))
    return (singles, folder)
}

@MainActor
func runFormatBenchmark() {
    let (singles, folder) = formatLibrary()
    print("\nformats: one 4000 x 3000 picture in each format, decoded into a cell in this process "
          + "(a decode budget of --max-memory 256M, so that every format decodes whole where it must), median of \(max(3, options.runs)) after 1 warm-up")
    print("  file              150 x 100 cell        600 x 400 cell")
    var baseline: [Int: Double] = [:]
    for (name, path) in singles {
        var line = "  " + name.padding(18)
        for (width, height) in [(150, 100), (600, 400)] {
            let decoder = CellDecoder(cellWidth: width, cellHeight: height, budget: DecodeBudget(budgetBytes: 256 << 20, workers: 1))
            var cell = [UInt8](repeating: 0, count: decoder.cellBytes)
            var times: [Double] = []
            var failure: String?
            var method = ""
            for run in 0...max(3, options.runs) {
                let start = monotonicSeconds()
                do {
                    let notes = try cell.withUnsafeMutableBytes { bytes in
                        try Result { () throws(TesseraError) -> DecodeNotes in try decoder.decode(path: path, into: bytes) }.get()
                    }
                    if notes.method == .thumbnail { method = " (thumbnail)" }
                    if notes.warningCount > 0 { method = " (warning: \(notes.firstWarning))" }
                } catch {
                    failure = "\(error)"
                    break
                }
                if run > 0 { times.append(monotonicSeconds() - start) }
            }
            if let failure {
                line += ("refused: " + failure.suffix(70)).padding(22)
                continue
            }
            let milliseconds = median(times) * 1000
            if name == "baseline" { baseline[width] = milliseconds }
            let ratio = baseline[width].map { " x" + fixed(milliseconds / $0, 1) } ?? ""
            line += (fixed(milliseconds, 1) + " ms" + ratio + method).padding(22)
        }
        print(line)
    }
    print("\nformats: a folder of 32 photos of 4000 x 3000 (JPEG baseline, progressive, Display P3, Adobe RGB; PNG, Adam7, 16-bit; "
          + "WebP; HEIC tiled with and without thumbnails), `tessera grid --columns 8`, default flags")
    for cell in [150, 600] {
        let output = scratch + "/formats.jpg", log = scratch + "/formats.txt", errors = scratch + "/formats-errors.txt"
        let result = run([tessera, "grid", folder, "-o", output, "--columns", "8", "--tile-size", "\(cell)", "--no-progress",
                          "--temp-dir", options.temporaryDirectory], stdout: log, stderr: errors)
        let text = fileLines(log) + fileLines(errors)
        let placeholders = text.filter { $0.hasPrefix("  placeholder") }.count
        let thumbnails = text.filter { $0.contains("warning") && $0.contains("thumbnail:") }.count
        let other = text.filter { $0.contains("warning") && !$0.contains("thumbnail:") && !$0.contains("placeholder") }
        print("  \(cell) px: \(fixed(result.seconds)) s, peak RSS \(fixed(Double(result.peakBytes) / 1e6, 1)) MB, exit \(result.status >> 8), "
              + (placeholders + thumbnails + other.count == 0 ? "every photo drawn"
                 : "\(placeholders) placeholder(s) (more memory asked for), \(thumbnails) drawn from their thumbnails"
                   + (other.isEmpty ? "" : ", other warnings: \(other.joined(separator: " | "))")))
    }
}

extension String {
    func padding(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
