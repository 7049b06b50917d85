// TestSupport.swift — temporary directories, fixtures and an independent reference resampler.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

/// The folder of this test target's fixtures (copied into the repository, with their license).
let fixturesDirectory: String = {
    let file = #filePath  // Tests/TesseraTests/Support/TestSupport.swift
    let support = file[..<file.lastIndex(of: "/")!]
    return String(support[..<support.lastIndex(of: "/")!]) + "/Fixtures"
}()

/// The fixture every hostile-input test starts from (a small baseline JPEG).
let baseJPEG = fixturesDirectory + "/variants/base.jpg"

/// $TMPDIR, or /tmp when it is not set.
let temporaryRoot: String = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"

/// A fresh empty directory (unique name) under $TMPDIR, removed (with its files) by `remove()`.
struct ScratchDirectory {
    let path: String

    init() {
        var template = Array("\(temporaryRoot)/tessera-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func file(_ name: String) -> String { path + "/" + name }

    /// Names in the directory, hidden ones included.
    func contents() -> [String] { (try? listDirectory(path).sorted()) ?? [] }

    func remove() { removeTree(path) }
}

/// The file's bytes, or none when it cannot be read.
func readBytes(_ path: String) -> [UInt8] { (try? readWholeFile(path)) ?? [] }

func writeBytes(_ bytes: [UInt8], to path: String) {
    let file = fopen(path, "wb")!
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}

/// A binary PPM as djpeg writes it (P6, maxval 255, no comments).
func readPPM(_ path: String) -> RGBImage? {
    let bytes = readBytes(path)
    var fields: [Int] = [], index = 2, number = -1
    guard bytes.count > 2, bytes[0] == UInt8(ascii: "P"), bytes[1] == UInt8(ascii: "6") else { return nil }
    while fields.count < 3, index < bytes.count {
        let byte = bytes[index]
        if byte >= 48 && byte <= 57 {
            number = max(number, 0) * 10 + Int(byte - 48)
        } else if number >= 0 {
            fields.append(number)
            number = -1
        }
        index += 1
    }
    guard fields.count == 3, fields[2] == 255, bytes.count - index == fields[0] * fields[1] * 3 else { return nil }
    return RGBImage(width: fields[0], height: fields[1], pixels: Array(bytes[index...]))
}

/// Reference for a cell: centre-crop `image` to the cell's aspect ratio and average each output
/// pixel over the whole-pixel block it covers. Written plainly and independently of the
/// renderer's AreaResampler (integer block bounds, no fractional weights), so agreement within
/// JPEG tolerance means the renderer is right, not merely self-consistent.
func referenceCell(_ image: RGBImage, width: Int, height: Int) -> RGBImage {
    let aspect = Double(width) / Double(height)
    var cropWidth = Double(image.width), cropHeight = Double(image.height)
    if cropWidth / cropHeight > aspect { cropWidth = cropHeight * aspect } else { cropHeight = cropWidth / aspect }
    let left = (Double(image.width) - cropWidth) / 2, top = (Double(image.height) - cropHeight) / 2
    var out = RGBImage(width: width, height: height)
    for y in 0..<height {
        let y0 = Int((top + Double(y) * cropHeight / Double(height)).rounded())
        let y1 = max(y0 + 1, Int((top + Double(y + 1) * cropHeight / Double(height)).rounded()))
        for x in 0..<width {
            let x0 = Int((left + Double(x) * cropWidth / Double(width)).rounded())
            let x1 = max(x0 + 1, Int((left + Double(x + 1) * cropWidth / Double(width)).rounded()))
            var sum = (0, 0, 0), count = 0
            for sy in y0..<min(y1, image.height) {
                for sx in x0..<min(x1, image.width) {
                    let p = image.pixel(x: sx, y: sy)
                    sum.0 += Int(p.red); sum.1 += Int(p.green); sum.2 += Int(p.blue)
                    count += 1
                }
            }
            let i = (y * width + x) * 3
            out.pixels[i] = UInt8(sum.0 / max(count, 1))
            out.pixels[i + 1] = UInt8(sum.1 / max(count, 1))
            out.pixels[i + 2] = UInt8(sum.2 / max(count, 1))
        }
    }
    return out
}

/// The `width` x `height` region of `image` at (`x`, `y`).
func crop(_ image: RGBImage, x: Int, y: Int, width: Int, height: Int) -> RGBImage {
    var out = RGBImage(width: width, height: height)
    for row in 0..<height {
        let from = ((y + row) * image.width + x) * 3
        out.pixels.replaceSubrange((row * width * 3)..<((row + 1) * width * 3), with: image.pixels[from..<(from + width * 3)])
    }
    return out
}

/// Mean absolute difference per channel between two same-sized images.
func meanAbsoluteDifference(_ a: RGBImage, _ b: RGBImage) -> Double {
    precondition(a.width == b.width && a.height == b.height)
    var total = 0
    for i in 0..<a.pixels.count { total += abs(Int(a.pixels[i]) - Int(b.pixels[i])) }
    return Double(total) / Double(a.pixels.count)
}

/// `image` mirrored left to right.
func mirrored(_ image: RGBImage) -> RGBImage {
    var out = image
    for y in 0..<image.height {
        for x in 0..<image.width {
            let p = image.pixel(x: image.width - 1 - x, y: y)
            let i = (y * image.width + x) * 3
            out.pixels[i] = p.red; out.pixels[i + 1] = p.green; out.pixels[i + 2] = p.blue
        }
    }
    return out
}

/// Renders `photos` (paths) as a grid and returns the summary.
@discardableResult
func renderGrid(_ paths: [String], to output: String, columns: Int, rows: Int, cellWidth: Int, cellHeight: Int,
                settings: RenderSettings = RenderSettings(), order: PhotoOrder = .name,
                events: ((RenderEvent) -> Void)? = nil) throws -> RenderSummary {
    let library = try PhotoLibrary.scan(paths)
    let layout = GridLayout.make(photoCount: library.photos.count, columns: columns, rows: rows,
                                 cellWidth: cellWidth, cellHeight: cellHeight, order: order)
    let renderer = try StripeRenderer(photos: library.photos, layout: layout, settings: settings, jpeg: output)
    return try renderer.render { events?($0) }
}

/// Writes a solid-colour JPEG.
func writeSolidPhoto(_ path: String, width: Int, height: Int, colour: RGB) throws {
    try JPEGFile.write(RGBImage(width: width, height: height, fill: colour), to: path, quality: 95, subsampling: .s444)
}

/// Expected pixel span of tile `index` along an axis `extent` long, written from the Deep Zoom
/// rules directly: the tile's own cells plus `overlap` on each side that has a neighbour.
func expectedSpan(_ index: Int, tileSize: Int, overlap: Int, extent: Int) -> (start: Int, count: Int) {
    let start = index == 0 ? 0 : index * tileSize - overlap
    let end = min(extent, (index + 1) * tileSize + overlap)
    return (start, end - start)
}

/// A Deep Zoom level put back together from its tile files (each tile's own pixels, overlaps
/// dropped), checking every tile's size against `expectedSpan`.
func readPyramidLevel(files: String, level: Int, width: Int, height: Int, tileSize: Int, overlap: Int) throws -> RGBImage {
    var image = RGBImage(width: width, height: height)
    let columns = (width + tileSize - 1) / tileSize, rows = (height + tileSize - 1) / tileSize
    for row in 0..<rows {
        for column in 0..<columns {
            let tile = try JPEGFile.read(files + "/\(level)/\(column)_\(row).jpg")
            let x = expectedSpan(column, tileSize: tileSize, overlap: overlap, extent: width)
            let y = expectedSpan(row, tileSize: tileSize, overlap: overlap, extent: height)
            #expect(tile.width == x.count && tile.height == y.count, "tile \(level)/\(column)_\(row) is \(tile.width)x\(tile.height)")
            guard tile.width == x.count && tile.height == y.count else { continue }
            // Copy the tile's own region (without overlap) into place.
            let left = column * tileSize - x.start, top = row * tileSize - y.start
            for ty in 0..<min(tileSize, height - row * tileSize) {
                for tx in 0..<min(tileSize, width - column * tileSize) {
                    let from = ((top + ty) * tile.width + left + tx) * 3
                    let to = ((row * tileSize + ty) * width + column * tileSize + tx) * 3
                    image.pixels[to] = tile.pixels[from]
                    image.pixels[to + 1] = tile.pixels[from + 1]
                    image.pixels[to + 2] = tile.pixels[from + 2]
                }
            }
        }
    }
    // Nothing beyond the last tile in either direction.
    #expect(access(files + "/\(level)/\(columns)_0.jpg", F_OK) != 0)
    #expect(access(files + "/\(level)/0_\(rows).jpg", F_OK) != 0)
    return image
}

/// A pid no process can have: the kernel's pid_max (pids are below it). A pid that has just
/// ended could be given to a new process before the test uses it; this one never is.
func deadProcessID() -> pid_t {
    let text = String(decoding: readBytes("/proc/sys/kernel/pid_max"), as: UTF8.self)
    let pidMax = pid_t(text.filter(\.isNumber)) ?? 4_194_304
    #expect(kill(pidMax, 0) == -1 && errno == ESRCH)
    return pidMax
}

/// Runs a tool found on PATH (djpeg, cjpeg, jpegtran: libjpeg-turbo-progs, which CI installs)
/// with its standard output going to `stdout` (or /dev/null); returns its exit status.
@discardableResult
func runTool(_ arguments: [String], stdout: String? = nil) -> Int32 {
    var pid: pid_t = 0
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    guard posix_spawnp(&pid, arguments[0], &actions, nil, &argv, environ) == 0 else { return -1 }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
}

/// The names in `directory`, sorted, hidden ones included (none when it cannot be read).
func listNames(_ directory: String) -> [String] { ((try? listDirectory(directory)) ?? []).sorted() }

extension StripeRenderer {
    /// A renderer of one JPEG at `jpeg`, as most tests want.
    convenience init(photos: [Photo], layout: CellLayout, settings: RenderSettings, jpeg: String,
                     cancellation: RenderCancellation? = nil, tint: CellTint? = nil) throws {
        try self.init(request: RenderRequest(photos: photos, layout: layout, settings: settings, outputs: [.jpeg(path: jpeg)], tint: tint),
                      cancellation: cancellation)
    }

    convenience init(photos: PhotoTable, layout: CellLayout, settings: RenderSettings, jpeg: String,
                     cancellation: RenderCancellation? = nil, tint: CellTint? = nil) throws {
        try self.init(photos: Array(photos), layout: layout, settings: settings, jpeg: jpeg, cancellation: cancellation, tint: tint)
    }
}

// Oracles shared by the tests: small filesystems, image differences, an independent downscale.

func mayMount() -> Bool {
    if geteuid() == 0 { return true }
    if getenv("TESSERA_TESTS_NEED_ROOT") != nil { Issue.record("TESSERA_TESTS_NEED_ROOT is set (.ci/run) but the tests do not run as root") }
    return false
}

/// Mounts a tmpfs of `size` (mount(8) syntax: "640k") at a new folder in `scratch`; returns its
/// path, or nil when it cannot (the caller's test then fails).
func mountTmpfs(size: String, in scratch: ScratchDirectory, name: String) -> String? {
    let mountPoint = scratch.file(name)
    mkdir(mountPoint, 0o755)
    guard system("mount -t tmpfs -o size=\(size) tessera-test '\(mountPoint)'") == 0 else {
        Issue.record("mount -t tmpfs -o size=\(size) failed")
        return nil
    }
    return mountPoint
}

/// Free bytes for an unprivileged writer, from statvfs directly.
func statvfsFreeBytes(_ path: String) -> Int64 {
    var info = statvfs()
    #expect(statvfs(path, &info) == 0)
    return Int64(info.f_bavail) * Int64(info.f_frsize)
}

/// Per-channel mean absolute difference, and the largest single difference.
func differences(_ a: RGBImage, _ b: RGBImage) -> (mean: Double, max: Int) {
    var total = 0, largest = 0
    for i in 0..<a.pixels.count {
        let d = abs(Int(a.pixels[i]) - Int(b.pixels[i]))
        total += d
        largest = max(largest, d)
    }
    return (Double(total) / Double(max(1, a.pixels.count)), largest)
}

/// The level below `image` in a Deep Zoom pyramid, written plainly: half the size rounded up,
/// each pixel the rounded mean of the 2 x 2 block it covers (fewer at an odd edge).
func halved(_ image: RGBImage) -> RGBImage {
    let width = (image.width + 1) / 2, height = (image.height + 1) / 2
    var out = RGBImage(width: width, height: height)
    for y in 0..<height {
        for x in 0..<width {
            for c in 0..<3 {
                var sum = 0, count = 0
                for sy in (2 * y)..<min(2 * y + 2, image.height) {
                    for sx in (2 * x)..<min(2 * x + 2, image.width) {
                        sum += Int(image.pixels[(sy * image.width + sx) * 3 + c])
                        count += 1
                    }
                }
                out.pixels[(y * width + x) * 3 + c] = UInt8((sum + count / 2) / count)
            }
        }
    }
    return out
}
