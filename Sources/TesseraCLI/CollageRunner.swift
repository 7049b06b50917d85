// CollageRunner.swift — what `tessera collage` does: scan the photos, lay them out keeping their
// shapes (CollageLayout), then render as a grid does (Runner.render).
import Tessera

extension Runner {
    public func collage(_ collage: CollageOptions) -> ExitCode {
        let runStarted = monotonicSeconds()
        let options = collage.render.withMemoryChosen()
        warnIfOverCgroup(options.settings, given: !options.automaticMemory)
        let manifest = options.manifestPath.map { [OutputFile(path: $0, role: "the manifest", isFolder: false)] } ?? []
        let library: PhotoLibrary
        switch scanPhotos(options, alsoWriting: manifest) {
        case .success(let found): library = found
        case .failure(let code): return code
        }
        do throws(TesseraError) {
            let layout = try collageLayout(collage, options: options, photos: library.photos)
            let request = RenderRequest(photos: library.photos, layout: layout, settings: options.settings, outputs: options.plannedOutputs)
            if let path = options.previewPath {
                let preview = try writePreview(of: request, to: path, dryRun: options.dryRun)
                if options.outputs.isEmpty { return previewOnly(preview, path: path, skipped: library.skippedCount) }
            }
            let renderer = try StripeRenderer(request: request, cancellation: cancellation, shard: options.shard)
            guard let summary = try render(renderer, options: options, photoCount: library.photos.count) else { return .success }
            if let path = options.manifestPath, options.shard.map({ $0.shard.number == 1 }) ?? true {
                try RenderManifest.write(layout: layout, photos: library.photos, to: path,
                                         notes: Report.manifestNotes(skipped: library, placeholders: summary.failedPhotos))
            }
            let runSeconds = monotonicSeconds() - runStarted
            console.result(report(summary, renderer: renderer, options: options, skipped: library.skippedCount,
                                  videos: library.leftOut.videos, runSeconds: runSeconds))
            console.finished(Report.summaryFields(summary, jpeg: options.jpegPath, deepZoom: options.deepZoomPath, archive: options.deepZoomArchivePath,
                                                  iiif: options.iiifPath, tiff: options.tiffPath, manifest: options.manifestPath,
                                                  skipped: library.skippedCount, runSeconds: runSeconds, preview: options.previewPath))
            return .success
        } catch {
            return report(error, options: options, manifest: options.manifestPath)
        }
    }

    /// The collage's layout: every photo once in the order asked, its shape from its header;
    /// refused before anything is drawn when the picture is larger than the outputs hold.
    func collageLayout(_ collage: CollageOptions, options: GridOptions, photos: PhotoTable) throws(TesseraError) -> CellLayout {
        let kinds = options.plannedOutputs.map(\.kind)
        let sideLimit = kinds.contains(.jpeg) ? jpegMaxDimension : RenderPlan.maxDeepZoomSide
        var aspects: [Double] = []
        aspects.reserveCapacity(photos.count)
        for photo in photos { aspects.append(CollageLayout.aspect(of: photo.header)) }
        let shape = CollageCommand.shape(collage, aspects: aspects, sideLimit: sideLimit)
        if case .columns(let count) = shape.style {
            // Columns past the photo count would stay empty.
            if count > photos.count {
                throw .invalidSettings("--columns \(count) is more columns than the \(photos.count) photos can fill: give --columns \(photos.count) or fewer")
            }
            if shape.width < count + collage.gap * (count + 1) {
                throw .invalidSettings("a collage \(shape.width) px wide has no room for \(count) columns with gaps of \(collage.gap) px: give a larger --width or fewer --columns")
            }
        }
        let sequence = CollageLayout.sequence(photoCount: photos.count, order: options.order, photos: photos)
        try RenderRequest.checkCanvas(columns: 1, rows: 1, cellWidth: shape.width, cellHeight: 1, outputs: kinds)
        return try CollageLayout.make(aspects: aspects, sequence: sequence, width: shape.width, style: shape.style, gap: collage.gap,
                                      heightLimit: sideLimit)
    }
}
