// ShardSink.swift — a shard's one output: its part file (PartFile.swift), fed the band's stripes.
//
// The JPEG's stripes the band owns are compressed exactly as the single-process parallel encoder
// compresses them (RestartMarkerJPEG.swift: a standalone JPEG a stripe, its entropy-coded data
// kept), on the workers, or in the pyramid's batch when there is one; the part keeps each
// segment and, in the part holding stripe 0, the file's header. The pyramid's share goes through
// a DeepZoomWriter over the band's window (DeepZoomWriter.swift): tiles and the reduced rows into
// the part. A TIFF's pyramid goes the same way through a writer of its own (padded tiles of its
// tile size, its own window: ShardPlan.swift), as TIFF tiles and TIFF reduced rows; its jobs run
// in the Deep Zoom writer's batch when there is one. Shard 1 also keeps the viewer's cells.js.
// With the viewer's previews, each shard makes its share of them (PhotoPreviews.share: every
// N-th photo drawn, whichever bands show it) after its band, into the part.
// The header text (`header`) says everything `tessera join` needs: the outputs, their
// settings, and the band.

/// Where a shard writes, and which shard it is.
public struct ShardTarget: Equatable, Sendable {
    public let shard: ShardSpec
    /// The shard folder every shard of the render writes its part into, and `tessera join` reads.
    public let directory: String

    public init(shard: ShardSpec, directory: String) {
        self.shard = shard
        self.directory = directory
    }

    public var partPath: String { (directory.hasSuffix("/") ? directory : directory + "/") + shard.partFileName }
}

final class ShardSink: StripeSink, PreviewSink, ManifestSink {
    private let part: PartWriter
    private let band: ShardBand
    private let plan: RenderPlan
    private let settings: RenderSettings
    private let marks: JPEGMarks
    private let zoom: DeepZoomWriter?
    private let tiff: DeepZoomWriter?
    private var header: [(key: String, value: String)]
    private let cells: CellLabels?
    private let isFirst: Bool
    /// The render's manifest, when asked for: set by the renderer before the render.
    var manifest: (output: ManifestOutput, drawn: () -> RenderSummary)?
    private let writesCells: Bool
    /// The viewer's previews this shard makes (its share), when asked for: set by the renderer,
    /// which has the decoder, before the render.
    var previews: PhotoPreviews?
    /// The previews' long side (0: none).
    private let previewSide: Int
    private var previewsMade = 0
    private var previewsMissed: [SkippedPhoto] = []

    init(target: ShardTarget, band: ShardBand, plan: RenderPlan, request: RenderRequest, fingerprint: String) throws(TesseraError) {
        self.band = band
        self.plan = plan
        settings = request.settings
        marks = .output(dotsPerInch: request.settings.dotsPerInch)
        part = try PartWriter(path: target.partPath)
        isFirst = target.shard.number == 1
        var header: [(key: String, value: String)] = [
            ("format", PartFormat.version), ("shard", String(target.shard.number)),
            ("shards", String(target.shard.count)), ("fingerprint", fingerprint),
            ("width", String(plan.width)), ("height", String(plan.height)),
            ("stripe-height", String(plan.geometry.stripeHeight)), ("stripe-count", String(plan.geometry.stripeCount)),
            ("band-unit", String(band.bandUnitRows)),
            ("rows", "\(band.rows.lowerBound) \(band.rows.upperBound)"), ("subsampling", settings.subsampling.rawValue),
        ]
        if let path = request.jpegPath {
            header += [("jpeg", OutputDestination.canonicalPath(path)), ("restart-interval", String(plan.restartInterval)),
                       ("jpeg-stripes", "\(band.jpegStripes.lowerBound) \(band.jpegStripes.upperBound)")]
        }
        var zoomWriter: DeepZoomWriter?
        if let path = request.deepZoomPath, let geometry = plan.deepZoom, let zoom = plan.deepZoomSettings {
            let lowest = band.deepZoom?.window.lowest ?? 0
            header += [("dzi", OutputDestination.canonicalPath(path)), ("dz-tile-size", String(zoom.tileSize)),
                       ("dz-overlap", String(zoom.overlap)), ("dz-quality", String(zoom.quality)),
                       ("dz-viewer", zoom.viewer ? "1" : "0"), ("dz-labels", zoom.labels.rawValue)]
            if let title = zoom.title { header.append(("dz-title", title)) }
            if zoom.viewer && zoom.previews > 0 { header.append(("dz-previews", String(zoom.previews))) }
            if let window = band.deepZoom {
                header += [("dz-lowest", String(lowest)), ("dz-reduced-size", "\(window.reducedWidth) \(window.reducedHeight)"),
                           ("dz-reduced-rows", "\(window.window.reducedRows.lowerBound) \(window.window.reducedRows.upperBound)")]
                let part = self.part
                let reducedBytes = window.reducedWidth * 3
                zoomWriter = try DeepZoomWriter(
                    geometry: geometry, quality: zoom.quality, subsampling: settings.subsampling,
                    filesDirectory: target.partPath, threads: plan.workers,
                    destination: .handler { level, column, row, bytes throws(TesseraError) in
                        try part.append(.tile, a: level, b: column, c: row, bytes: bytes)
                    },
                    window: window.window,
                    reduced: { first, rows, stride, count throws(TesseraError) in
                        for i in 0..<count {
                            try part.append(.reducedRows, a: first + i, b: 1, bytes: UnsafeRawBufferPointer(start: rows + i * stride, count: reducedBytes))
                        }
                    })
            }
            // cells.js: the layout's, once (shard 1); join copies it into the viewer.
            cells = zoom.viewer ? CellLabels(layout: request.layout, photos: request.photos, shown: zoom.labels) : nil
            writesCells = zoom.viewer && target.shard.number == 1
            if writesCells { header.append(("dz-name", (path.split(separator: "/").last.map(String.init) ?? "").replacingAll(".dzi", with: ""))) }
        } else {
            cells = nil
            writesCells = false
        }
        zoom = zoomWriter
        previewSide = plan.deepZoomSettings.map { $0.viewer ? $0.previews : 0 } ?? 0
        var tiffWriter: DeepZoomWriter?
        if let path = request.tiffPath, let pages = plan.tiff, let tiff = plan.tiffSettings {
            header += [("tiff", OutputDestination.canonicalPath(path)), ("tiff-tile-size", String(tiff.tileSize)),
                       ("tiff-quality", String(tiff.quality))]
            if let window = band.tiff {
                // A TIFF of one page has no page below the bands: no reduced rows.
                let onePage = pages.lowestLevel == pages.levels.maxLevel
                header += [("tiff-lowest", String(window.window.lowest))]
                if !onePage {
                    header += [("tiff-reduced-size", "\(window.reducedWidth) \(window.reducedHeight)"),
                               ("tiff-reduced-rows", "\(window.window.reducedRows.lowerBound) \(window.window.reducedRows.upperBound)")]
                }
                let part = self.part
                let reducedBytes = window.reducedWidth * 3
                do throws(TesseraError) {
                    tiffWriter = try DeepZoomWriter(
                        geometry: pages.levels, quality: tiff.quality, subsampling: settings.subsampling,
                        filesDirectory: target.partPath, threads: plan.workers,
                        destination: .handler { level, column, row, bytes throws(TesseraError) in
                            try part.append(.tiffTile, a: level, b: column, c: row, bytes: bytes)
                        },
                        window: window.window, padEdgeTiles: true,
                        reduced: onePage ? nil : { first, rows, stride, count throws(TesseraError) in
                            for i in 0..<count {
                                try part.append(.tiffReducedRows, a: first + i, b: 1,
                                                bytes: UnsafeRawBufferPointer(start: rows + i * stride, count: reducedBytes))
                            }
                        })
                } catch {
                    part.discard()
                    throw error
                }
            }
        }
        tiff = tiffWriter
        self.header = header
    }

    private func owns(_ stripe: StripeView) -> Bool { plan.writesJPEG && band.jpegStripes.contains(stripe.index) }

    func prepare(_ stripe: StripeView) throws(TesseraError) -> EncodedStripe? {
        guard plan.compression == .segmentsOnWorkers, owns(stripe) else { return nil }
        return try encode(stripe)
    }

    var runsBatches: Bool { zoom != nil || tiff != nil }

    func take(_ stripe: StripeView, prepared: EncodedStripe?, alongside: StripeJobs?) throws(TesseraError) {
        var segment = prepared
        var encodeError: TesseraError?
        let work = {
            if segment == nil && self.owns(stripe) {
                do throws(TesseraError) { segment = try self.encode(stripe) } catch { encodeError = error }
            }
            alongside?.runAll()
        }
        /// The stripe's rows within `fed`: its first row's address and how many.
        func rows(within fed: Range<Int>) -> (first: UnsafeRawPointer, count: Int) {
            let rows = stripe.rows.clamped(to: fed)
            return (stripe.pixels + max(0, rows.lowerBound - stripe.rows.lowerBound) * stripe.bytesPerRow, rows.count)
        }
        // One batch: the Deep Zoom's jobs, or the TIFF's, with the JPEG's (and the TIFF's) beside.
        var side = [StripeJobs(count: 1, run: { _ in work() }, complete: {})]
        var batching = zoom.flatMap { zoom in band.deepZoom.map { (zoom, $0.fedRows) } }
        if let tiff, let fed = band.tiff?.fedRows {
            if batching == nil {
                batching = (tiff, fed)
            } else {
                let fed = rows(within: fed)
                side.append(tiff.jobs(rows: fed.first, stride: stripe.bytesPerRow, count: fed.count))
            }
        }
        if let (writer, fed) = batching {
            let fed = rows(within: fed)
            let jobs = StripeJobs.combining(side)
            try writer.append(rows: fed.first, stride: stripe.bytesPerRow, count: fed.count, alongside: jobs)
            try jobs.complete()
        } else {
            work()
        }
        if let encodeError { throw encodeError }
        guard let segment else { return }
        if stripe.index == 0 {
            let fileHeader = try segment.fileHeader(height: plan.height, restartInterval: plan.restartInterval, label: part.path)
            try fileHeader.withUnsafeBytes { raw in Result { () throws(TesseraError) in try part.append(.jpegHeader, a: 0, bytes: raw) } }.get()
        }
        try segment.jpeg.withUnsafeBytes { raw in
            Result { () throws(TesseraError) in
                try part.append(.jpegSegment, a: stripe.index, bytes: UnsafeRawBufferPointer(rebasing: raw[segment.entropy]))
            }
        }.get()
    }

    func finish() throws(TesseraError) {
        try zoom?.finish()
        try tiff?.finish()
        if let previews {
            let part = self.part
            let made = try previews.make { index, bytes throws(TesseraError) in try part.append(.preview, a: index, bytes: bytes) }
            previewsMade = made.made
            previewsMissed = made.missed
        }
        if writesCells, let geometry = plan.deepZoom {
            var piece = 0
            let name = header.first { $0.key == "dz-name" }?.value ?? ""
            try DeepZoomViewer.cellsScript(name: name, geometry: geometry, labels: cells, previews: previewSide) { bytes throws(TesseraError) in
                try part.append(.cellsScript, a: piece, bytes: bytes)
                piece += 1
            }
        }
        try writeManifest()
        try part.finish(header: header)
    }

    /// The manifest's share of the part: every part names it and holds the photos it drew as
    /// placeholders or in part (for a JSON manifest); part 1 holds the rest, in pieces of about
    /// 256 KiB (the join writes it, with every part's notes as its last lines).
    private func writeManifest() throws(TesseraError) {
        guard let manifest else { return }
        let summary = manifest.drawn()
        let json = manifest.output.format == .json
        header += [("manifest", OutputDestination.canonicalPath(manifest.output.path)), ("manifest-format", json ? "json" : "csv")]
        if json {
            let notes = manifest.output.notes(summary)
            for (kind, list) in [(0, notes.placeholders), (1, notes.partial)] {
                for entry in list {
                    try Array((entry.path + "\u{0}" + entry.reason).utf8).withUnsafeBytes { raw in
                        Result { () throws(TesseraError) in try part.append(.manifestNote, a: kind, bytes: raw) }
                    }.get()
                }
            }
        }
        guard isFirst else { return }
        var pending = "", piece = 0
        var failure: TesseraError?
        func flush() {
            guard failure == nil, !pending.isEmpty else { return }
            do throws(TesseraError) {
                try Array(pending.utf8).withUnsafeBytes { raw in
                    Result { () throws(TesseraError) in try part.append(.manifestPiece, a: piece, bytes: raw) }
                }.get()
            } catch { failure = error }
            pending = ""
            piece += 1
        }
        manifest.output.emitAllButTail(summary) { text in
            pending += text
            if pending.utf8.count >= 256 << 10 { flush() }
        }
        flush()
        if let failure { throw failure }
    }

    func commit(in commit: OutputCommit) throws(TesseraError) { try part.commit() }

    func discard() {
        zoom?.abandon()
        tiff?.abandon()
        part.discard()
    }

    func record(into summary: inout RenderSummary) {
        summary.outputBytes = part.bytesWritten
        summary.deepZoomTiles = zoom?.tilesWritten ?? 0
        summary.deepZoomBytes = zoom?.bytesWritten ?? 0
        summary.previews = previewsMade
        summary.previewsMissed = previewsMissed
    }

    private func encode(_ stripe: StripeView) throws(TesseraError) -> EncodedStripe {
        try EncodedStripe.encode(rows: stripe.pixels, stride: stripe.bytesPerRow, width: stripe.width, rowCount: stripe.rows.count,
                                 quality: settings.quality, subsampling: settings.subsampling, label: part.path, marks: marks)
    }
}

/// A 128-bit FNV-1a digest (two 64-bit lanes with different offsets), as 32 hex digits: what
/// tells a part of this render from a part of another.
struct Fingerprint {
    private var a: UInt64 = 0xcbf2_9ce4_8422_2325
    private var b: UInt64 = 0x6c62_272e_07bb_0142
    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            b = (b ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 &+ 0x9e37
        }
    }
    mutating func add(_ text: String) {
        var text = text + "\u{1}"
        text.withUTF8 { add(UnsafeRawBufferPointer($0)) }
    }
    mutating func add<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { add($0) } }
    /// Whether `text` is a fingerprint's shape (32 lowercase hex digits). A part's header is
    /// read from a file anyone with the folder may have written: its fingerprint names the
    /// shared cells' folder the join removes (`.cells-` + it), so "x/../../photos" must never
    /// get that far.
    static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f")) }
    }

    var hex: String {
        func digits(_ value: UInt64) -> String {
            let text = String(value, radix: 16)
            return String(repeating: "0", count: 16 - text.count) + text
        }
        return digits(a) + digits(b)
    }
}

extension ShardBand {
    /// What identifies the render a part belongs to: everything that decides its bytes (the
    /// plan's shape, the outputs and their settings, the photos and which cell shows which, a
    /// mosaic's tints) and the split (N and the band height).
    static func fingerprint(request: RenderRequest, plan: RenderPlan, shards: Int, bandUnitRows: Int) -> String {
        var digest = Fingerprint()
        let settings = request.settings
        digest.add("tessera shards 2")
        for value in [plan.width, plan.height, plan.geometry.stripeHeight, plan.restartInterval, settings.quality,
                      settings.dotsPerInch ?? 0, shards, bandUnitRows, Int(settings.background.red),
                      Int(settings.background.green), Int(settings.background.blue)] { digest.add(Int64(value)) }
        digest.add(settings.subsampling.rawValue)
        for output in request.outputs {
            digest.add(OutputDestination.canonicalPath(output.path))
            if case .deepZoom(_, let zoom) = output {
                for value in [zoom.tileSize, zoom.overlap, zoom.quality, zoom.viewer ? 1 : 0] { digest.add(Int64(value)) }
                digest.add(zoom.labels.rawValue)
                digest.add(zoom.title ?? "")
                if zoom.previews > 0 { digest.add("previews \(zoom.previews)") }
            }
            if case .tiff(_, let tiff) = output {
                digest.add("tiff")
                for value in [tiff.tileSize, tiff.quality] { digest.add(Int64(value)) }
            }
        }
        let layout = request.layout
        for value in [layout.columns, layout.rows, layout.cellWidth, layout.cellHeight] { digest.add(Int64(value)) }
        if let framed = layout.framed {
            for value in [framed.width, framed.height] { digest.add(Int64(value)) }
            for frame in framed.frames { for value in [frame.x, frame.y, frame.width, frame.height, frame.photo] { digest.add(value) } }
        } else {
            for cell in 0..<layout.cellCount { digest.add(Int32(layout.photo(at: cell))) }
        }
        // Each photo's file as the scan found it, by its size and modification time too (kept
        // by copies made with `cp -p` or `rsync -t`, so shards that read their own copy of the
        // library still agree): a photo replaced between one shard and the next, or before a
        // shard run again over the shared cells of an earlier run, makes another render, whose
        // parts the join refuses and whose cells are kept apart.
        for photo in request.photos {
            digest.add(photo.path)
            for value in [photo.header.width, photo.header.height, photo.header.exifOrientation] { digest.add(Int64(value)) }
            digest.add(photo.fileBytes ?? -1)
            digest.add(photo.modifiedNanoseconds ?? -1)
        }
        if let tint = request.tint {
            digest.add(tint.strength.bitPattern)
            digest.add(Int64(tint.subCells))
            for value in tint.target { digest.add(value.bitPattern) }
            for value in tint.features { digest.add(value.bitPattern) }
        }
        return digest.hex
    }
}
