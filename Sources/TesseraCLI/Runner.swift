// Runner.swift — what `tessera grid` and `tessera mosaic` do, step by step, between the parsed
// options and the library: check the outputs, scan the photos, (for a mosaic, analyse and match),
// plan, dry-run or pre-flight, render, report. Everything it shows goes through a `Console`
// (Console.swift), so the flows run in tests without a process.
import Glibc
import Tessera

public struct Runner {
    let console: Console
    let cancellation: RenderCancellation
    /// The exit code for a cancellation (which signal arrived).
    let cancelledCode: () -> ExitCode

    public init(console: Console, cancellation: RenderCancellation, cancelledCode: @escaping () -> ExitCode) {
        self.console = console
        self.cancellation = cancellation
        self.cancelledCode = cancelledCode
    }

    public func grid(_ options: GridOptions) -> ExitCode {
        let library: PhotoLibrary
        let manifest = options.manifestPath.map { [OutputFile(path: $0, role: "the manifest", isFolder: false)] } ?? []
        switch scanPhotos(options, alsoWriting: manifest) {
        case .success(let found): library = found
        case .failure(let code): return code
        }
        do throws(TesseraError) {
            let columns = options.columns!
            let rows = options.rows ?? GridLayout.rows(forPhotoCount: library.photos.count, columns: columns)
            try RenderRequest.checkCanvas(columns: columns, rows: rows, cellWidth: options.cellWidth, cellHeight: options.cellHeight,
                                          outputs: options.outputs.map(\.kind))
            let layout = GridLayout.make(photoCount: library.photos.count, columns: columns, rows: rows,
                                         cellWidth: options.cellWidth, cellHeight: options.cellHeight, order: options.order)
            let request = RenderRequest(photos: library.photos, layout: layout, settings: options.settings, outputs: options.outputs)
            let renderer = try StripeRenderer(request: request, cancellation: cancellation)
            guard let summary = try render(renderer, options: options, photoCount: library.photos.count) else { return .success }
            if let path = options.manifestPath {
                try MosaicManifest.write(layout: layout, photoPaths: library.photos.map(\.path), to: path)
            }
            console.result(Report.summary(summary, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath, skipped: library.skipped))
            console.finished(Report.summaryFields(summary, jpeg: options.jpegPath, deepZoom: options.deepZoomPath,
                                                  manifest: options.manifestPath, skipped: library.skipped.count))
            return .success
        } catch {
            return report(error, options: options, manifest: options.manifestPath)
        }
    }

    public func mosaic(_ mosaic: MosaicOptions) -> ExitCode {
        let options = mosaic.render
        let manifest = mosaic.manifestPath.map { [OutputFile(path: $0, role: "the manifest", isFolder: false)] } ?? []
        let library: PhotoLibrary
        switch scanPhotos(options, alsoWriting: manifest, alsoReading: [mosaic.targetPath]) {
        case .success(let found): library = found
        case .failure(let code): return code
        }
        do throws(TesseraError) {
            var settings = MosaicSettings(targetPath: mosaic.targetPath, columns: options.columns!, rows: options.rows,
                                          cellWidth: options.cellWidth, cellHeight: options.cellHeight)
            settings.subCells = mosaic.subCells
            settings.minDistance = mosaic.minDistance
            settings.maxUses = mosaic.maxUses
            settings.seed = mosaic.seed
            settings.matchEffort = mosaic.matchEffort
            settings.tintPercent = mosaic.tintPercent
            settings.cacheDirectory = mosaic.cacheDirectory
            let started = monotonicSeconds()
            let console = self.console
            let prepared = try MosaicJob.prepare(library: library, mosaic: settings, settings: options.settings, outputs: options.outputs,
                                                 cancellation: cancellation, beforeAnalysis: { plan throws(TesseraError) in
                // Free space before analysis and matching, which can take minutes.
                if !options.dryRun { try DiskPreflight.check(plan: plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath) }
            }) { step, done, total in
                let phase: Phase = step == .analysis ? .analysis : step == .target ? .target : .matching
                if done == 0 { console.phase(phase) }
                console.progress(phase, done: done, total: total, seconds: monotonicSeconds() - started, rowWidth: 0)
            }
            for failed in prepared.failed { console.photo(failed, placeholder: false) }
            if let error = prepared.indexNotSaved { console.warning("cannot save the feature index: \(error)") }
            if options.dryRun {
                for duplicate in prepared.duplicates { console.result("duplicate   \(duplicate.photo): the same picture as \(duplicate.sameAs)") }
            }
            let renderer = try StripeRenderer(request: prepared.request, cancellation: cancellation)
            let matching = Report.mosaic(prepared.match, photoCount: prepared.request.photos.count, analysed: prepared.analysed,
                                         reused: prepared.reused, analysisSeconds: prepared.analysisSeconds,
                                         targetSeconds: prepared.targetSeconds, matchSeconds: prepared.matchSeconds,
                                         duplicates: prepared.duplicates.count)
            guard let summary = try render(renderer, options: options, photoCount: prepared.request.photos.count,
                                           preparationBytes: prepared.preparationBytes) else {
                console.result(matching)
                return .success
            }
            if let path = mosaic.manifestPath { try MosaicJob.writeManifest(prepared, to: path) }
            console.result(Report.summary(summary, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath,
                                          skipped: library.skipped + prepared.failed))
            console.result(matching)
            console.finished(Report.summaryFields(summary, jpeg: options.jpegPath, deepZoom: options.deepZoomPath,
                                                  manifest: mosaic.manifestPath, skipped: library.skipped.count + prepared.failed.count)
                             + [Report.mosaicFields(prepared.match, photoCount: prepared.request.photos.count, analysed: prepared.analysed,
                                                    reused: prepared.reused, duplicates: prepared.duplicates.count,
                                                    analysisSeconds: prepared.analysisSeconds, targetSeconds: prepared.targetSeconds,
                                                    matchSeconds: prepared.matchSeconds)])
            return .success
        } catch {
            return report(error, options: options, manifest: mosaic.manifestPath)
        }
    }

    /// Checks the outputs, then scans the photo paths and reports what was skipped. The exit code
    /// when the run must stop: an output that cannot be written, a missing target, --strict with
    /// skipped photos (a named path that is not there is one), no photo at all, an output that is
    /// one of the inputs.
    func scanPhotos(_ options: GridOptions, alsoWriting extra: [OutputFile] = [],
                    alsoReading inputs: [String] = []) -> Result<PhotoLibrary, ExitCode> {
        do throws(TesseraError) {
            try RenderRequest.checkDestinations(options.outputs, alsoWriting: extra, temporaryDirectory: options.settings.temporaryDirectory)
        } catch {
            return .failure(report(error, options: options, manifest: extra.first?.path))
        }
        // A named input besides the photos (a mosaic's target) that is not there is a command
        // line naming nothing (exit 2), said before any photo is read.
        for input in inputs {
            var info = stat()
            if stat(input, &info) != 0 {
                console.message(TesseraError.system(operation: "stat", errno: errno, path: input).description)
                return .failure(.usage)
            }
        }
        let library: PhotoLibrary
        console.phase(.scan)
        do throws(TesseraError) {
            let started = monotonicSeconds()
            let console = self.console
            library = try PhotoLibrary.scan(options.photoPaths, workers: options.settings.workers ?? onlineCoreCount(),
                                            cancellation: cancellation, selection: options.selection) { done, total in
                console.progress(.scan, done: done, total: total, seconds: monotonicSeconds() - started, rowWidth: 0)
            }
        } catch .cancelled {
            return .failure(report(.cancelled, options: options))
        } catch {
            // A named path that does not exist or cannot be listed is bad input, not a failed render.
            console.message(error.description)
            return .failure(.badInput)
        }
        for skipped in library.skipped { console.photo(skipped, placeholder: false) }
        if options.dryRun, let line = Report.leftOut(library.leftOut) { console.result(line) }
        if options.strict && !library.skipped.isEmpty {
            console.message("--strict: \(library.skipped.count) photo(s) would be skipped; nothing rendered")
            return .failure(.badInput)
        }
        guard !library.photos.isEmpty else {
            console.message(TesseraError.noPhotos(searched: options.photoPaths).description)
            return .failure(.badInput)
        }
        do throws(TesseraError) {
            try RenderRequest.checkNotInputs(options.outputs, alsoWriting: extra, photos: library.photos, otherInputs: inputs)
        } catch {
            return .failure(report(error, options: options, manifest: extra.first?.path))
        }
        return .success(library)
    }

    /// The shared end of grid and mosaic: dry run or pre-flight, then the render with progress
    /// and warnings. Returns the summary, or nil after a dry run.
    /// `preparationBytes`: what a mosaic held before the render (analysis, target, matching).
    func render(_ renderer: StripeRenderer, options: GridOptions, photoCount: Int,
                preparationBytes: Int = 0) throws(TesseraError) -> RenderSummary? {
        let plan = renderer.plan
        let disk = try DiskPreflight.requirements(plan: plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath)
        if options.dryRun {
            console.result(Report.plan(plan, layout: renderer.layout, photoCount: photoCount, disk: disk, settings: options.settings,
                                       preparationBytes: preparationBytes))
            if !disk.allSatisfy(\.fits) {
                try DiskPreflight.check(plan: plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath)
            }
            return nil
        }
        // What dead renders left (a SIGKILLed pyramid's staging folder can be most of a small disk)
        // goes before the pre-flight counts the free space.
        for path in renderer.removeStaleTemporaries() { console.warning("removed \(path), left by an earlier run that was killed") }
        try DiskPreflight.check(plan: plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath)
        console.phase(.render)
        let started = monotonicSeconds()
        return try renderer.render { event in
            switch event {
            case .progress(let done, let total):
                console.progress(.render, done: done, total: total, seconds: monotonicSeconds() - started, rowWidth: renderer.layout.width)
            case .photoFailed(let skipped):
                console.photo(skipped, placeholder: true)
            case .staleTemporaryRemoved(let path):
                console.warning("removed \(path), left by an earlier run that was killed")
            case .photoWarning(let path, let message):
                console.warning("\(path): \(message)")
            }
        }
    }

    /// Shows `error` (an output's with the flag that names it) and returns its exit code.
    func report(_ error: TesseraError, options: GridOptions, manifest: String? = nil) -> ExitCode {
        if error == .cancelled {
            console.message("interrupted; nothing was written and temporaries are removed")
            return cancelledCode()
        }
        if case .unusableOutput(let path, let reason) = error {
            let flag = path == manifest ? "--manifest" : options.flag(naming: path)
            console.message((flag.map { "\($0) " } ?? "") + "\(path): \(reason)")
        } else {
            console.message(error.description)
        }
        return ExitCode(error)
    }
}
