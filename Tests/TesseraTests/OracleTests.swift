// OracleTests.swift — the headline promises checked against what the code under test did not
// compute: libjpeg's serial encoder for the parallel encoder, libvips's dzsave and a plain box
// filter written here for Deep Zoom, statvfs of real small tmpfs mounts for the pre-flight.
import Glibc
import Testing
@testable import Tessera

/// Whether this test may mount a tmpfs. CI runs the tests as root (.ci/run checks and sets
/// TESSERA_TESTS_NEED_ROOT), and there a
/// test that needs root must not be skipped: not being root under CI is a failure.
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

@Suite struct OracleTests {
    static let photos = ["Landscape_1", "Portrait_3", "Landscape_6", "Portrait_8", "Landscape_0", "Portrait_5"]
        .map { "\(fixturesDirectory)/orientation/\($0).jpg" }

    /// The default encoder (parallel, restart markers between stripes) at the default stripe
    /// heights, for 1, 2, 3 and 8 workers and every subsampling, at an odd width: byte for byte
    /// the file libjpeg's serial encoder writes with the same restart interval.
    @Test(arguments: [ChromaSubsampling.s420, .s422, .s444], [1, 2, 3, 8])
    func parallelEncoderIsLibjpegsSerialFile(subsampling: ChromaSubsampling, workers: Int) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.encoder = .parallel
        settings.workers = workers
        settings.subsampling = subsampling
        settings.temporaryDirectory = scratch.path
        let library = try PhotoLibrary.scan(Self.photos)
        // 7 x 23 = 161 px wide (not a multiple of any MCU), 9 x 31 = 279 rows: at the default
        // stripe height several stripes and a short last one.
        let layout = GridLayout.make(photoCount: library.photos.count, columns: 7, rows: 9, cellWidth: 23, cellHeight: 31, order: .name)
        let parallel = scratch.file("parallel.jpg")
        let renderer = try StripeRenderer(photos: library.photos, layout: layout, settings: settings, jpeg: parallel)
        #expect(renderer.plan.encoder == .parallel)
        #expect(renderer.plan.geometry.stripeCount >= 3, "stripes of \(renderer.plan.geometry.stripeHeight) rows")
        try renderer.render()

        var serial = settings
        serial.encoder = .serial
        serial.workers = 1
        serial.stripeHeight = 5  // the serial encoder's rows do not depend on the stripes
        serial.serialRestartInterval = renderer.plan.restartInterval
        let reference = scratch.file("serial.jpg")
        try StripeRenderer(photos: library.photos, layout: layout, settings: serial, jpeg: reference).render()
        let bytes = readBytes(parallel)
        #expect(bytes.count > 2_000)
        #expect(bytes == readBytes(reference), "\(subsampling) \(workers) workers: differs from libjpeg's serial file")
        // The restart interval is one stripe's MCUs, independently: MCUs per row x MCU rows.
        let mcuWidth = subsampling == .s444 ? 8 : 16, mcuHeight = subsampling == .s420 ? 16 : 8
        let stripeHeight = renderer.plan.geometry.stripeHeight
        #expect(stripeHeight % mcuHeight == 0 || stripeHeight == 279)
        #expect(renderer.plan.restartInterval == (161 + mcuWidth - 1) / mcuWidth * ((stripeHeight + mcuHeight - 1) / mcuHeight))
    }

    /// Deep Zoom against libvips: the same tile files with the same sizes, and every tile's
    /// pixels (not a level's mean) within JPEG tolerance of vips dzsave's tile made from the same
    /// canvas. Small, detailed cells, so a tile shifted by a pixel or misplaced shows.
    @Test(arguments: [(254, 1), (127, 2), (100, 3), (64, 0)])
    func deepZoomMatchesVipsDzsaveTileByTile(tileSize: Int, overlap: Int) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.quality = 100
        settings.subsampling = .s444
        settings.temporaryDirectory = scratch.path
        var zoom = DeepZoomSettings()
        zoom.tileSize = tileSize
        zoom.overlap = overlap
        zoom.viewer = false
        let canvas = scratch.file("canvas.jpg")
        mkdir(scratch.file("ours"), 0o755)
        // 19 x 13 cells of 29 x 23 px: 551 x 299 px, odd both ways.
        try renderPyramid(Self.photos, jpeg: canvas, deepZoom: scratch.file("ours/p.dzi"), columns: 19, rows: 13,
                          cellWidth: 29, cellHeight: 23, zoom: zoom, settings: settings)
        // The same canvas (the Q100 4:4:4 JPEG of it) cut by libvips.
        #expect(system("vips dzsave '\(canvas)' '\(scratch.file("vips"))' --tile-size \(tileSize) --overlap \(overlap) "
                       + "--suffix '.jpg[Q=90]' >/dev/null 2>&1") == 0)
        func tiles(_ folder: String) -> [String] {
            var found: [String] = []
            for level in listNames(folder) where Int(level) != nil {
                for tile in listNames(folder + "/" + level) { found.append(level + "/" + tile) }
            }
            return found.sorted()
        }
        let ours = tiles(scratch.file("ours/p_files")), theirs = tiles(scratch.file("vips_files"))
        #expect(!ours.isEmpty && ours == theirs, "tile files differ from vips: \(Set(ours).symmetricDifference(theirs).sorted().prefix(8))")
        var worst = (tile: "", mean: 0.0)
        for name in ours where theirs.contains(name) {
            let a = try JPEGFile.read(scratch.file("ours/p_files/" + name)), b = try JPEGFile.read(scratch.file("vips_files/" + name))
            #expect(a.width == b.width && a.height == b.height, "\(name): \(a.width)x\(a.height) against vips's \(b.width)x\(b.height)")
            guard a.width == b.width && a.height == b.height else { continue }
            let d = differences(a, b)
            if d.mean > worst.mean { worst = (name, d.mean) }
            #expect(d.mean < 3, "\(name): mean difference \(d.mean) from vips's tile")
        }
        #expect(worst.mean > 0, "no tile compared")
        let descriptor = String(decoding: readBytes(scratch.file("ours/p.dzi")), as: UTF8.self)
        #expect(descriptor.contains("TileSize=\"\(tileSize)\"") && descriptor.contains("Overlap=\"\(overlap)\"")
                && descriptor.contains("Width=\"551\"") && descriptor.contains("Height=\"299\""))
    }

    /// The pyramid's 2 x 2 averaging, exactly (no JPEG in between): random rows of odd and even
    /// widths against the box filter above.
    @Test(arguments: [1, 2, 7, 64, 255])
    func averagingIsTheRoundedBoxMean(width: Int) {
        var generator = SystemRandomNumberGenerator()
        var image = RGBImage(width: width, height: 2)
        for i in image.pixels.indices { image.pixels[i] = UInt8.random(in: 0...255, using: &generator) }
        var out = [UInt8](repeating: 0, count: (width + 1) / 2 * 3)
        image.pixels.withUnsafeBufferPointer { rows in
            averageRows(rows.baseAddress!, rows.baseAddress! + width * 3, into: &out, inputWidth: width)
        }
        #expect(out == halved(image).pixels)
    }

    /// Every level of the pyramid, tile by tile, against the full-size canvas halved again and
    /// again by the plain box filter above (not the renderer's averaging code).
    @Test func pyramidLevelsAreTheCanvasHalved() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.quality = 100
        settings.subsampling = .s444
        settings.temporaryDirectory = scratch.path
        var zoom = DeepZoomSettings()
        zoom.tileSize = 64
        zoom.overlap = 2
        zoom.quality = 95
        zoom.viewer = false
        let canvasPath = scratch.file("canvas.jpg")
        try renderPyramid(Self.photos, jpeg: canvasPath, deepZoom: scratch.file("p.dzi"), columns: 21, rows: 11,
                          cellWidth: 19, cellHeight: 27, zoom: zoom, settings: settings)
        var level = try JPEGFile.read(canvasPath)  // 399 x 297
        var index = 9  // ceil(log2(399))
        while true {
            let columns = (level.width + 63) / 64, rows = (level.height + 63) / 64
            for row in 0..<rows {
                for column in 0..<columns {
                    let x = expectedSpan(column, tileSize: 64, overlap: 2, extent: level.width)
                    let y = expectedSpan(row, tileSize: 64, overlap: 2, extent: level.height)
                    let tile = try JPEGFile.read(scratch.file("p_files/\(index)/\(column)_\(row).jpg"))
                    #expect(tile.width == x.count && tile.height == y.count, "level \(index) tile \(column)_\(row)")
                    guard tile.width == x.count && tile.height == y.count else { continue }
                    let d = differences(tile, crop(level, x: x.start, y: y.start, width: x.count, height: y.count))
                    #expect(d.mean < 4, "level \(index) tile \(column)_\(row): mean difference \(d.mean)")
                }
            }
            #expect(access(scratch.file("p_files/\(index)/\(columns)_0.jpg"), F_OK) != 0)
            if index == 0 { break }
            level = halved(level)
            index -= 1
        }
        #expect(level.width == 1 && level.height == 1)
    }

    /// The pre-flight against real filesystems: a small tmpfs for the output, then for the
    /// stripes. The refusal names the folder and statvfs's own free bytes, before any file is made;
    /// and over a sweep of sizes every render either is refused before it starts or succeeds
    /// (never a disk found full halfway).
    @Test func preflightAgainstRealSmallFilesystems() throws {
        guard mayMount() else { return }
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let library = try PhotoLibrary.scan(Self.photos)
        // 1,000 x 600 px of photos.
        let layout = GridLayout.make(photoCount: library.photos.count, columns: 20, rows: 12, cellWidth: 50, cellHeight: 50, order: .name)
        // The real output size, rendered where there is room: the estimate must not be below it.
        var roomy = RenderSettings()
        roomy.temporaryDirectory = scratch.path
        let real = try StripeRenderer(photos: library.photos, layout: layout, settings: roomy, jpeg: scratch.file("real.jpg")).render()
        let estimate = try RenderPlan.make(layout: layout, settings: roomy).estimatedOutputBytes
        #expect(estimate >= real.outputBytes, "estimated \(estimate) bytes for a \(real.outputBytes)-byte JPEG")

        // The output's folder on a tmpfs smaller than the JPEG.
        guard let small = mountTmpfs(size: "\(max(64, real.outputBytes / 2048))k", in: scratch, name: "small") else { return }
        defer { _ = system("umount '\(small)'") }
        let free = statvfsFreeBytes(small)
        #expect(free < real.outputBytes)
        // As the command line does: the pre-flight, then the render.
        func checkedRender(_ settings: RenderSettings, to output: String) throws {
            let renderer = try StripeRenderer(photos: library.photos, layout: layout, settings: settings, jpeg: output)
            try DiskPreflight.check(plan: renderer.plan, outputPath: output)
            try renderer.render()
        }
        #expect {
            try checkedRender(roomy, to: small + "/out.jpg")
        } throws: { error in
            guard case TesseraError.insufficientDiskSpace(small, let needed, free) = error else { return false }
            return needed >= real.outputBytes
        }
        #expect(listNames(small).filter { $0 != "lost+found" }.isEmpty)

        // The stripes on tmpfs filesystems of several sizes (the output where there is room).
        var outcomes = (rendered: 0, refused: 0)
        for kib in [128, 384, 640, 896, 1_152, 1_664, 4_096] {
            guard let mountPoint = mountTmpfs(size: "\(kib)k", in: scratch, name: "temp-\(kib)") else { continue }
            defer { _ = system("umount '\(mountPoint)'") }
            var settings = RenderSettings()
            settings.temporaryDirectory = mountPoint
            settings.workers = 2
            let output = scratch.file("out-\(kib).jpg")
            do {
                try checkedRender(settings, to: output)
                #expect(try JPEGFile.read(output).width == 1_000, "\(kib) KiB")
                outcomes.rendered += 1
            } catch TesseraError.insufficientDiskSpace(let directory, let needed, let freeBytes) {
                #expect(directory == mountPoint && freeBytes == statvfsFreeBytes(mountPoint) && needed > freeBytes, "\(kib) KiB")
                #expect(access(output, F_OK) != 0)
                outcomes.refused += 1
            } catch {
                Issue.record("\(kib) KiB of temporary space: the pre-flight passed and the render failed: \(error)")
            }
            #expect(listNames(mountPoint).isEmpty, "\(kib) KiB: left \(listNames(mountPoint))")
        }
        #expect(outcomes.rendered >= 1 && outcomes.refused >= 1, "\(outcomes)")
    }
}
