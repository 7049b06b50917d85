// CollageBenchmark.swift — the collage section (issue 31): a justified collage of 10,000 photos,
// 30,000 px wide, its time against the single-core encode floor of its pixels and its peak RSS
// against the 64 MiB it must stay inside (run with --max-memory 64M), and masonry columns of the
// same photos.
//
// The photos are written here (TinyPhotoEncoder, LibraryBenchmark.swift) in the shapes a phone
// library has: 4:3 and 3:4, 16:9 and 9:16, square, and a few panoramas, 480 px on the long side
// (a collage of ten thousand draws them at about 400 x 300: decoded at 1/1 or 1/2 scale), each a
// pattern of its own colours. They are made once and kept beside the build.
import Dispatch
import Glibc
import Tessera
import TesseraTestSupport

/// The shapes the collage's photos come in, in turn (width x height, 480 px on the long side).
let collagePhotoShapes: [(Int, Int)] = [(480, 360), (360, 480), (480, 270), (480, 360), (270, 480), (400, 400), (480, 360), (480, 160)]

/// Writes `count` photos of mixed shapes into `root` (a folder per thousand), once.
func writeCollagePhotos(_ root: String, count: Int) {
    let marker = root + "/.complete-\(count)"
    guard access(marker, F_OK) != 0 else { return }
    print("generating \(count) photos of mixed shapes in \(root) ...")
    makeLibraryFolders(root, count: count)
    DispatchQueue.concurrentPerform(iterations: (count + 999) / 1000) { folder in
        let encoder = TinyPhotoEncoder()
        for index in (folder * 1000)..<min(count, folder * 1000 + 1000) {
            let (width, height) = collagePhotoShapes[index % collagePhotoShapes.count]
            var random = SplitMix64(seed: UInt64(index))
            let base = (0..<3).map { _ in Int(random.next() % 200) + 20 }
            var pixels = [UInt8](repeating: 0, count: width * height * 3)
            for y in 0..<height {
                for x in 0..<width {
                    let i = (y * width + x) * 3
                    // A diagonal gradient over the photo's own colour, with a band across it.
                    let band = (y * 4 / height) == 1 ? 30 : 0
                    pixels[i] = UInt8(min(255, base[0] + (x + y) / 16 + band))
                    pixels[i + 1] = UInt8(min(255, base[1] + x / 12))
                    pixels[i + 2] = UInt8(min(255, base[2] + y / 12 + band))
                }
            }
            encoder.write(pixels: pixels, width: width, height: height, to: libraryPhotoPath(root, index))
        }
    }
    close(open(marker, O_CREAT | O_WRONLY, 0o644))
}

/// The size `tessera collage --dry-run` plans, from its "output W x H px" line.
func plannedSize(_ log: String) -> (width: Int, height: Int)? {
    for line in fileLines(log) where line.hasPrefix("output") {
        let words = line.split(separator: " ")
        guard words.count > 3, let width = Int(words[1]), let height = Int(words[3]) else { continue }
        return (width, height)
    }
    return nil
}

@MainActor func runCollageBenchmark(photoCount: Int, width: Int) {
    let root = products + "/bench-collage-\(photoCount)"
    writeCollagePhotos(root, count: photoCount)
    print("\ncollage of \(photoCount) photos of mixed shapes (480 px on the long side), \(width) px wide, Q\(quality) 4:2:0")
    let log = scratch + "/collage.txt"
    let shape = ["collage", root, "--width", String(width), "--max-memory", "64M"] + flags
    let dry = run([tessera] + shape + ["-o", output, "--dry-run"], stdout: log, stderr: log)
    guard dry.status == 0, let size = plannedSize(log) else {
        print("  dry run failed (status \(dry.status))")
        for line in fileLines(log) { print("  | " + line) }
        return
    }
    for line in fileLines(log) where line.hasPrefix("output") || line.hasPrefix("memory") || line.hasPrefix("cell cache") { print("  | " + line) }
    let megapixels = Double(size.width) * Double(size.height) / 1e6

    // The floor: the encoder alone on this collage's own kind of pixels (a strip of it, rendered
    // first, repeated to the full height).
    let stripPath = scratch + "/collage-strip.jpg"
    let strip = run([tessera, "collage", root, "--width", String(width), "-o", stripPath, "--order", "shuffle", "--seed", "2"] + flags
                    + ["--exclude", "f[1-9]*"])  // the first thousand photos: a few rows
    guard strip.status == 0, let band = try? JPEGFile.read(stripPath) else { fail("rendering the collage's strip failed (status \(strip.status))") }
    unlink(stripPath)
    var floorTimes: [Double] = []
    for attempt in 0...options.runs {
        let start = monotonicSeconds()
        do {
            _ = try JPEGFile.encodeRepeating(band: band, height: size.height, to: output, quality: quality, subsampling: .s420)
        } catch { fail("\(error)") }
        if attempt > 0 { floorTimes.append(monotonicSeconds() - start) }
        unlink(output)
    }
    let floor = median(floorTimes)
    print("  floor    encode only, 1 core : \(fixed(floor)) s  \(fixed(megapixels / floor, 0)) MP/s   runs \(floorTimes.map { fixed($0) }.joined(separator: " "))")

    for (label, extra) in [("justified rows (--row-height 300)", [String]()), ("masonry, 75 columns", ["--layout", "columns", "--columns", "75"])] {
        var times: [Double] = [], peaks: [Int64] = []
        var height = size.height
        for attempt in 0...options.runs {
            let result = run([tessera] + shape + extra + ["-o", output], stdout: log, stderr: log)
            guard result.status == 0 else {
                print("  \(label): exit status \(result.status)")
                for line in fileLines(log) { print("  | " + line) }
                return
            }
            if let made = try? JPEGFileReader(path: output) { height = made.height }
            if attempt > 0 {
                times.append(result.seconds)
                peaks.append(result.peakBytes)
            }
            unlink(output)
        }
        let seconds = median(times), peak = peaks.max() ?? 0
        let pixels = Double(width) * Double(height) / 1e6
        // The floor scaled to this picture's pixels (masonry's height differs).
        let ratio = seconds / (floor * pixels / megapixels)
        print("  tessera collage, \(label): \(width) x \(height) px (\(fixed(pixels, 0)) MP) in \(fixed(seconds)) s, \(fixed(pixels / seconds, 0)) MP/s, "
              + "peak RSS \(fixed(Double(peak) / 1_048_576, 1)) MiB (budget 64 MiB), \(fixed(ratio)) x floor   runs \(times.map { fixed($0) }.joined(separator: " "))")
    }
    unlink(log)
}
