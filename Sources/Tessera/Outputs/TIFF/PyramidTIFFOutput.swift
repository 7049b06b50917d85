// PyramidTIFFOutput.swift — a tiled pyramidal TIFF, as a sink of the stripe pipeline.
//
//     stripe rows ──▶ DeepZoomWriter (tiles of 256 px, no overlap, edge tiles padded,
//                     levels down to the first that fits in one tile)
//                        │ each finished tile's JPEG, from the encoding jobs
//                        ▼
//                     PyramidTIFFFile: page 0 into the TIFF, the other pages into a spool,
//                     copied in as reduced-resolution pages by `finish`
//
// The pyramid is made the way the Deep Zoom pyramid is (the same 2x2 averages, the same
// per-column tile encoders on every core, so memory grows with the width and never with the
// height); only where the tiles go differs. Beside a Deep Zoom pyramid, its jobs run in that
// pyramid's batches (StripeSink's threading contract).
//
// Threading: as every sink (StripeSink.swift); the tiles reach the file from the writer's jobs.

final class PyramidTIFFOutput: StripeSink {
    let file: PyramidTIFFFile
    let writer: DeepZoomWriter

    /// A TIFF that replaces `destination` when committed. `threads`: the render's workers.
    /// `bigTIFF`: as PyramidTIFFFile's.
    init(destination: String, geometry: PyramidTIFFGeometry, settings: PyramidTIFFSettings, subsampling: ChromaSubsampling,
         threads: Int, temporaryDirectory: String, bigTIFF: Bool? = nil) throws(TesseraError) {
        let file = try PyramidTIFFFile(destination: destination, geometry: geometry, subsampling: subsampling,
                                       temporaryDirectory: temporaryDirectory, bigTIFF: bigTIFF)
        self.file = file
        let handler = TileDestination.handler { level, column, row, bytes throws(TesseraError) in
            let page = geometry.page(ofLevel: level)
            try file.add(page: page, tile: row * geometry.levels.levels[level].columns + column, bytes: bytes)
        }
        do throws(TesseraError) {
            writer = try DeepZoomWriter(geometry: geometry.levels, quality: settings.quality, subsampling: subsampling,
                                        filesDirectory: destination, threads: threads, destination: handler,
                                        window: .levels(from: geometry.lowestLevel, of: geometry.levels), padEdgeTiles: true)
        } catch {
            file.discard()
            throw error
        }
    }

    var runsBatches: Bool { true }

    func take(_ stripe: StripeView, prepared: EncodedStripe?, alongside: StripeJobs?) throws(TesseraError) {
        try writer.append(rows: stripe.pixels, stride: stripe.bytesPerRow, count: stripe.rows.count, alongside: alongside)
    }

    func jobs(for stripe: StripeView, prepared: EncodedStripe?) throws(TesseraError) -> StripeJobs {
        writer.jobs(rows: stripe.pixels, stride: stripe.bytesPerRow, count: stripe.rows.count)
    }

    /// Drains the writer's last levels, then writes the pages' directories and the smaller pages.
    func finish() throws(TesseraError) {
        try writer.finish()
        try file.finish()
    }

    func commit(in commit: OutputCommit) throws(TesseraError) { try file.commit(in: commit) }

    func discard() {
        writer.abandon()
        file.discard()
    }

    func record(into summary: inout RenderSummary) {
        summary.tiffBytes = file.bytesWritten
        summary.tiffPages = file.geometry.pageCount
    }
}
