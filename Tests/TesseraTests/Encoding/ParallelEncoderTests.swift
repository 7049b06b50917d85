// ParallelEncoderTests.swift — stripes compressed on their own and joined with restart markers
// must be the very file libjpeg writes serially with the same restart interval.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

extension RenderTests {
    private static let photos = ["Landscape_1", "Portrait_3", "Landscape_6", "Portrait_8", "Landscape_0"]
        .map { "\(fixturesDirectory)/orientation/\($0).jpg" }

    /// (subsampling, columns x cell width, rows x cell height): widths that are and are not
    /// multiples of the MCU width, heights whose last stripe is shorter than the others.
    @Test(arguments: [
        (ChromaSubsampling.s420, 10, 16, 5, 15),  // 160 x 75: last stripe 11 rows
        (.s420, 10, 15, 6, 16),                     // 150 x 96: width not a multiple of 16
        (.s422, 7, 19, 4, 21),                      // 133 x 84
        (.s444, 9, 13, 5, 13),                      // 117 x 65: last stripe 1 row
    ])
    func parallelIsByteIdenticalToSerialWithTheSameRestartInterval(
        subsampling: ChromaSubsampling, columns: Int, cellWidth: Int, rows: Int, cellHeight: Int
    ) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var parallel = RenderSettings()
        parallel.encoder = .parallel
        parallel.workers = 2
        parallel.subsampling = subsampling
        parallel.stripeHeight = subsampling.mcuHeight
        parallel.temporaryDirectory = scratch.path
        let library = try PhotoLibrary.scan(Self.photos)
        let layout = GridLayout.make(photoCount: library.photos.count, columns: columns, rows: rows,
                                     cellWidth: cellWidth, cellHeight: cellHeight, order: .name)
        let parallelPath = scratch.file("parallel.jpg")
        let parallelRenderer = try StripeRenderer(photos: library.photos, layout: layout, settings: parallel, jpeg: parallelPath)
        let interval = parallelRenderer.plan.restartInterval
        #expect(interval == subsampling.mcusPerRow(width: columns * cellWidth))
        try parallelRenderer.render()

        var serial = parallel
        serial.encoder = .serial
        serial.workers = 1
        serial.stripeHeight = 7  // the serial encoder does not care where stripes end
        serial.serialRestartInterval = interval
        let serialPath = scratch.file("serial.jpg")
        try StripeRenderer(photos: library.photos, layout: layout, settings: serial, jpeg: serialPath).render()
        let parallelBytes = readBytes(parallelPath)
        #expect(parallelBytes.count > 1000)
        #expect(parallelBytes == readBytes(serialPath))

        // The restart markers change no pixel: same decode as a serial file without them.
        serial.serialRestartInterval = 0
        let plainPath = scratch.file("plain.jpg")
        try StripeRenderer(photos: library.photos, layout: layout, settings: serial, jpeg: plainPath).render()
        #expect(try JPEGFile.read(parallelPath) == JPEGFile.read(plainPath))
        #expect(readBytes(plainPath) != parallelBytes)  // (it is a different file: no DRI, no RSTn)
    }

    @Test func restartMarkersCycleAndCountStripes() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.encoder = .parallel
        settings.workers = 3
        settings.stripeHeight = 16
        settings.temporaryDirectory = scratch.path
        let output = scratch.file("rst.jpg")
        // 20 stripes of 16 rows (320 rows): RST0...RST7 cycle twice and a half.
        try renderGrid(Self.photos, to: output, columns: 4, rows: 8, cellWidth: 40, cellHeight: 40, settings: settings)
        let bytes = readBytes(output)
        var markers: [UInt8] = []
        for i in 0..<(bytes.count - 1) where bytes[i] == 0xFF && (0xD0...0xD7).contains(bytes[i + 1]) { markers.append(bytes[i + 1] - 0xD0) }
        #expect(markers == (0..<19).map { UInt8($0 % 8) })
        #expect(bytes.suffix(2) == [0xFF, 0xD9])
    }

    @Test func externalToolsReadTheParallelFile() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.encoder = .parallel
        settings.workers = 2
        settings.temporaryDirectory = scratch.path
        let output = scratch.file("joined.jpg")
        try renderGrid(Self.photos, to: output, columns: 9, rows: 7, cellWidth: 37, cellHeight: 29, settings: settings)
        let log = scratch.file("tools.log")
        // djpeg must print nothing (no warning); jpegtran transforms it losslessly; vips and
        // ImageMagick decode it. CI installs all four (libjpeg-turbo-progs, libvips-tools, imagemagick).
        #expect(system("djpeg -outfile /dev/null '\(output)' 2>'\(log)'") == 0)
        #expect(readBytes(log).isEmpty, "djpeg: \(String(decoding: readBytes(log), as: UTF8.self))")
        #expect(system("jpegtran -rotate 90 -outfile '\(scratch.file("turned.jpg"))' '\(output)' 2>'\(log)'") == 0 && readBytes(log).isEmpty)
        #expect(system("djpeg -outfile /dev/null '\(scratch.file("turned.jpg"))' 2>'\(log)'") == 0 && readBytes(log).isEmpty)
        #expect(system("vips copy '\(output)' '\(scratch.file("vips.png"))' >'\(log)' 2>&1") == 0)
        #expect(system("convert '\(output)' '\(scratch.file("magick.png"))' >'\(log)' 2>&1") == 0)
        let turned = try JPEGFile.read(scratch.file("turned.jpg"))
        #expect(turned.width == 7 * 29 && turned.height == 9 * 37)
    }
}

@Suite struct ParallelPlanTests {
    @Test func restartIntervalFitsSixteenBitsAtTheWidestCanvas() throws {
        let layout = GridLayout.make(photoCount: 1, columns: 500, rows: 10, cellWidth: 131, cellHeight: 100, order: .name)
        var settings = RenderSettings()
        settings.encoder = .parallel
        settings.workers = 2
        settings.stripeHeight = 512
        settings.maxMemoryBytes = 1 << 30
        let plan = try RenderPlan.make(layout: layout, settings: settings)  // 65,500 px wide
        #expect(plan.geometry.stripeHeight == 256)  // 16 MCU rows of 4,094 MCUs
        #expect(plan.restartInterval == 4_094 * 16 && plan.restartInterval <= 65_535)
    }

    @Test func parallelStripesAreWholeMCURows() throws {
        let layout = GridLayout.make(photoCount: 1, columns: 10, rows: 10, cellWidth: 30, cellHeight: 30, order: .name)
        var settings = RenderSettings()
        settings.encoder = .parallel
        settings.stripeHeight = 7
        #expect(try RenderPlan.make(layout: layout, settings: settings).geometry.stripeHeight == 16)
        settings.subsampling = .s444
        #expect(try RenderPlan.make(layout: layout, settings: settings).geometry.stripeHeight == 8)
        settings.encoder = nil
        settings.workers = 1
        #expect(try RenderPlan.make(layout: layout, settings: settings).encoder == .serial)
        settings.workers = 2
        #expect(try RenderPlan.make(layout: layout, settings: settings).encoder == .parallel)
    }
}
