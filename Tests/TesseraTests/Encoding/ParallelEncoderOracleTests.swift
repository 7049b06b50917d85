// ParallelEncoderOracleTests.swift — the parallel encoder against libjpeg's serial file.
import Glibc
import Testing
@testable import Tessera

@Suite struct ParallelEncoderOracleTests {
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
}
