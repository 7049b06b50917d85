// SamplesTests.swift — the photos the repository ships for scripts/demo.sh (Samples/): each has
// its source and licence in Samples/README.md, the library stays small, and the binary reads every
// photo and the target and makes the demo's mosaic from them.
import Glibc
import Testing

/// Samples/, from this file's path (Tests/TesseraCLITests/SamplesTests.swift).
let samples: String = {
    var path = #filePath
    for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
    return path + "/Samples"
}()

@Suite struct SamplesTests {
    /// Every shipped picture is named in the README's licence table, and the library is 40-100
    /// photos of at most 160 px a side in under 1.5 MB.
    @Test func everyPictureHasItsLicenceListed() {
        let readme = String(decoding: readFile(samples + "/README.md"), as: UTF8.self)
        let library = listNames(samples + "/library")
        #expect(library.count >= 40 && library.count <= 100, "\(library.count) photos")
        var bytes = 0
        for name in library {
            #expect(name.hasSuffix(".jpg"), "\(name)")
            #expect(readme.contains("| library/\(name) | "), "\(name) is not in Samples/README.md")
            bytes += readFile(samples + "/library/" + name).count
        }
        #expect(bytes > 0 && bytes < 1_500_000, "\(bytes) bytes")
        #expect(listNames(samples + "/target") == ["chelsea.jpg"])
        #expect(readme.contains("| target/chelsea.jpg | "))
    }

    /// The demo's mosaic, smaller: a dry run reads every photo and the target (none skipped, no
    /// warning), and the render writes a JPEG of the grid's size.
    @Test func theDemoMosaicRendersFromTheShippedPictures() {
        let directory = "\(testRoot)/tessera-samples-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(directory, 0o755) == 0)
        defer { _ = system("rm -rf '\(directory)'") }
        let arguments = ["mosaic", "--target", samples + "/target/chelsea.jpg", samples + "/library", "-o", directory + "/m.jpg",
                         "--grid", "24x16", "--tile-size", "16", "--cache-dir", directory + "/cache"]
        let dry = runTessera(arguments + ["--dry-run"])
        #expect(dry.status == 0, "\(dry.output)")
        #expect(!dry.output.contains("skipped") && !dry.output.lowercased().contains("warning"), "\(dry.output)")
        #expect(dry.output.contains("46"), "\(dry.output)")
        #expect(access(directory + "/m.jpg", F_OK) != 0)
        let render = runTessera(arguments)
        #expect(render.status == 0, "\(render.output)")
        let jpeg = readFile(directory + "/m.jpg")
        #expect(jpeg.count > 1000 && jpeg.prefix(2) == [0xFF, 0xD8])
        let size = jpegSize(jpeg)
        #expect(size?.0 == 24 * 16 && size?.1 == 16 * 16, "\(String(describing: size))")
    }
}

/// The width and height in a JPEG's first start-of-frame marker.
func jpegSize(_ bytes: [UInt8]) -> (Int, Int)? {
    var at = 2
    while at + 9 < bytes.count {
        guard bytes[at] == 0xFF else { return nil }
        let marker = bytes[at + 1], length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        if (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker) {
            return (Int(bytes[at + 7]) << 8 | Int(bytes[at + 8]), Int(bytes[at + 5]) << 8 | Int(bytes[at + 6]))
        }
        at += 2 + length
    }
    return nil
}
