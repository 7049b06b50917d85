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
        runLayout(options) { library, options throws(TesseraError) in
            // What the flags leave out, chosen for this library (GridSize).
            let shape = GridSize.resolve(columns: options.columns, rows: options.rows,
                                         tile: options.tileSizeGiven ? (options.cellWidth, options.cellHeight) : nil,
                                         photoCount: library.photos.count,
                                         sideLimit: RenderRequest.sideLimit(outputs: options.plannedOutputs.map(\.kind)))
            if let line = GridSize.describe(shape) { console.result(line) }
            if let line = Report.undatedNote(options.order, photos: library.photos) { console.result(line) }
            let (columns, rows) = (shape.columns, shape.rows)
            if columns * rows < library.photos.count {
                // Not an error (a sample of a library is a fair wish), but not silent either.
                console.result("note        the grid's \(formatCount(columns * rows)) cells show \(formatCount(columns * rows)) of the "
                               + "\(formatCount(library.photos.count)) photos found; the other \(formatCount(library.photos.count - columns * rows)) "
                               + "are left out (--columns \(columns) alone takes the rows every photo needs)")
            }
            try RenderRequest.checkCanvas(columns: columns, rows: rows, cellWidth: shape.cellWidth, cellHeight: shape.cellHeight,
                                          outputs: options.outputs.map(\.kind))
            return GridLayout.make(photoCount: library.photos.count, columns: columns, rows: rows,
                                   cellWidth: shape.cellWidth, cellHeight: shape.cellHeight, order: options.order,
                                   photos: library.photos)
        }
    }

    /// What grid and collage share: scan the photos, lay them out (`makeLayout`, given the
    /// library and the options with the memory chosen), then the preview, the render, the
    /// manifest and the report.
    func runLayout(_ options: GridOptions, collage: Bool = false,
                   layout makeLayout: (PhotoLibrary, GridOptions) throws(TesseraError) -> CellLayout) -> ExitCode {
        if let refused = refuseFewOpenFiles() { return refused }
        let runStarted = monotonicSeconds()
        let options = options.withMemoryChosen()
        warnIfOverCgroup(options.settings, given: !options.automaticMemory)
        let library: PhotoLibrary
        let manifest = options.manifestPath.map { [OutputFile(path: $0, role: "the manifest", isFolder: false)] } ?? []
        switch scanPhotos(options, alsoWriting: manifest) {
        case .success(let found): library = found
        case .failure(let code): return code
        }
        do throws(TesseraError) {
            let layout = try makeLayout(library, options)
            let request = RenderRequest(photos: library.photos, layout: layout, settings: options.settings, outputs: options.plannedOutputs)
            if let path = options.previewPath, options.outputs.isEmpty {
                return previewOnly(try writePreview(of: request, to: path, dryRun: options.dryRun), path: path, skipped: library.skippedCount)
            }
            let renderer = try StripeRenderer(request: request, cancellation: cancellation, shard: options.shard)
            if let path = options.previewPath {
                // The full render's free space first: a preview (replacing the one before) is not
                // written for a render that cannot be. (A mosaic checks before its analysis.)
                try checkDisk(renderer, options: options)
                _ = try writePreview(of: request, to: path, dryRun: options.dryRun)
            }
            let manifest = options.manifestPath.map { path in
                RenderManifest.withOutputs(layout: layout, photos: library.photos, to: path) { Report.manifestNotes(skipped: library, drawn: $0) }
            }
            guard let summary = try render(renderer, options: options, photoCount: library.photos.count, manifest: manifest) else {
                return .success
            }
            let runSeconds = monotonicSeconds() - runStarted
            console.result(report(summary, renderer: renderer, options: options, skipped: library.skippedCount,
                                  videos: library.leftOut.videos, runSeconds: runSeconds))
            console.finished(Report.summaryFields(summary, jpeg: options.jpegPath, deepZoom: options.deepZoomPath, archive: options.deepZoomArchivePath, iiif: options.iiifPath, tiff: options.tiffPath,
                                                  manifest: options.manifestPath, skipped: library.skippedCount,
                                                  runSeconds: runSeconds, preview: options.previewPath))
            return .success
        } catch {
            return report(error, options: options, manifest: options.manifestPath, collage: collage)
        }
    }

    /// The output folder (a pyramid's tiles, an IIIF folder) that `path` is in or is, or nil.
    static func replacedFolder(holding path: String, _ outputs: [RenderOutput]) -> String? {
        let inside = Self.absolute(path)
        for output in outputs {
            for file in output.files where file.isFolder {
                let folder = Self.absolute(file.path)
                if inside == folder || inside.hasPrefix(folder + "/") { return file.path }
            }
        }
        return nil
    }

    /// `path` made absolute with every link resolved, as far as it exists (the rest as given),
    /// and without "." or empty parts.
    static func absolute(_ path: String) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let here = getcwd(&buffer, buffer.count) != nil ? String(cString: buffer) : "."
        var head = path.hasPrefix("/") ? path : here + "/" + path
        var tail: [Substring] = []
        while !head.isEmpty, head != "/" {
            if let resolved = realpath(head, nil) {
                defer { free(resolved) }
                head = String(cString: resolved)
                break
            }
            let cut = head.lastIndex(of: "/") ?? head.startIndex
            tail.insert(head[head.index(after: cut)...], at: 0)
            head = String(head[..<cut])
        }
        let parts = (head.split(separator: "/") + tail).filter { $0 != "." && !$0.isEmpty }
        return "/" + parts.joined(separator: "/")
    }

    /// Exit 4 before anything is read when this process may open fewer files than a render needs.
    func refuseFewOpenFiles() -> ExitCode? {
        guard let limit = openFileLimitTooLowForRender() else { return nil }
        console.message("this process may open at most \(limit) files (ulimit -n), and a render needs at least "
                        + "\(leastOpenFilesForRender): raise the limit (ulimit -n 1024; LimitNOFILE= for a service) and run again")
        return .insufficientResources
    }

    public func mosaic(_ mosaic: MosaicOptions) -> ExitCode {
        if let refused = refuseFewOpenFiles() { return refused }
        let runStarted = monotonicSeconds()
        let options = mosaic.render.withMemoryChosen()
        warnIfOverCgroup(options.settings, given: !options.automaticMemory)
        let manifest = mosaic.manifestPath.map { [OutputFile(path: $0, role: "the manifest", isFolder: false)] } ?? []
        if let refused = refuseUnreadableTarget(mosaic.targetPath) { return refused }
        let library: PhotoLibrary
        switch scanPhotos(options, alsoWriting: manifest, alsoReading: [mosaic.targetPath]) {
        case .success(let found): library = found
        case .failure(let code): return code
        }
        do throws(TesseraError) {
            // The size in a person's terms needs the library's photo count (MosaicSize.swift).
            let shape = try mosaicShape(mosaic, photoCount: library.photos.count)
            var settings = MosaicSettings(targetPath: mosaic.targetPath, columns: shape.columns, rows: shape.rows,
                                          cellWidth: shape.cellWidth, cellHeight: shape.cellHeight)
            settings.subCells = mosaic.subCells
            settings.minDistance = mosaic.minDistance
            settings.minDistanceIsDefault = !mosaic.minDistanceGiven
            settings.maxUses = mosaic.maxUses
            settings.minUses = mosaic.minUses
            settings.seed = mosaic.seed
            settings.matchEffort = mosaic.matchEffort
            settings.tintPercent = mosaic.tintPercent
            settings.cacheDirectory = mosaic.cacheDirectory
            if mosaic.adaptive {
                // Split down to --min-cell; copies kept apart in pixels (default: a smallest cell).
                settings.adaptiveLevels = try MosaicSize.adaptiveLevels(shape, minCell: mosaic.minCell)
                if !mosaic.minDistanceGiven { settings.minDistance = shape.cellWidth >> settings.adaptiveLevels }
            }
            let started = monotonicSeconds()
            let console = self.console
            let prepared = try explainingDistance(settings, given: mosaic.minDistanceGiven) { () throws(TesseraError) in
                try MosaicJob.prepare(library: library, mosaic: settings, settings: options.settings, outputs: options.plannedOutputs,
                                                 cancellation: cancellation, beforeAnalysis: { plan throws(TesseraError) in
                // Free space before analysis and matching, which can take minutes.
                if !options.dryRun {
                    try DiskPreflight.check(plan: plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath, archivePath: options.deepZoomArchivePath, iiifPath: options.iiifPath, tiffPath: options.tiffPath,
                                            shard: options.shard.map { ($0.directory, 1.0 / Double($0.shard.count)) })
                }
            }) { step, done, total in
                let phase: Phase = step == .analysis ? .analysis : step == .target ? .target : .matching
                if done == 0 { console.phase(phase) }
                console.progress(phase, done: done, total: total, seconds: monotonicSeconds() - started, rowWidth: 0)
            }
            }
            for failed in prepared.failed { console.photo(failed, placeholder: false) }
            if let error = prepared.indexNotSaved { console.warning("cannot save the feature index: \(error)") }
            if options.dryRun {
                for duplicate in prepared.duplicates { console.duplicate(duplicate.photo, sameAs: duplicate.sameAs) }
                console.summarise()
            }
            console.result(Report.library(prepared, usable: library.photos.count - prepared.failed.count))
            if let adaptive = prepared.adaptive { console.result(MosaicSize.describeCells(adaptive)) }
            if let lowered = prepared.minDistanceLowered {
                let asked = settings.minDistance
                settings.minDistance = lowered
                console.warning("only \(prepared.photoCount) distinct picture(s): identical photos may touch (the default --min-distance \(asked)\(mosaic.adaptive ? " px" : "") needs 9, "
                                + "a 3 x 3 block without repeats)\(mosaic.adaptive ? ", lowered to \(lowered) px" : ""); add photos, or give --min-distance 0 to say so")
                if options.strict {
                    // The rule was the default's, but it is still a rule the mosaic breaks.
                    console.message("--strict: only \(prepared.photoCount) distinct picture(s), too few for the default --min-distance \(asked)"
                                    + "\(mosaic.adaptive ? " px" : ""); nothing rendered")
                    return .badInput
                }
            }
            // Cells that broke a rule are known after matching: --strict refuses them before
            // anything is written.
            if let unmet = Report.unmetConstraints(prepared, minDistance: settings.minDistance, maxUses: settings.maxUses,
                                                   minUses: settings.minUses) {
                console.warning(unmet)
                if options.strict {
                    let broken = Report.unmetCells(prepared.unmet) > 0
                        ? "\(Report.unmetCells(prepared.unmet)) cell(s) could not meet the placement rules"
                        : "\(prepared.unmet.underUsed) picture(s) could not be used --min-uses \(settings.minUses) times"
                    console.message("--strict: \(broken); nothing rendered")
                    return .badInput
                }
            }
            if let path = options.previewPath {
                // A preview alone: the mosaic's report first, the line naming the file last.
                if options.outputs.isEmpty { console.result(Report.mosaic(prepared)) }
                let preview = try writePreview(of: prepared.request, to: path, dryRun: options.dryRun)
                if options.outputs.isEmpty { return previewOnly(preview, path: path, skipped: library.skippedCount + prepared.failed.count) }
            }
            let renderer = try mosaicRenderer(prepared, options: options)
            let manifest = mosaic.manifestPath.map { Self.manifest(of: prepared, library: library, to: $0) }
            guard let rendered = try render(renderer, options: options, photoCount: prepared.photoCount,
                                           preparationBytes: prepared.preparationBytes, manifest: manifest) else {
                console.result(Report.mosaic(prepared))
                return .success
            }
            let similarity = likeness(prepared, summary: rendered, options: options, target: settings.targetPath)
            // The likeness is measured after the render: the peak it reaches is the run's too
            // (the report said 20.9 MiB of a run that peaked at 27).
            var summary = rendered
            summary.peakResidentBytes = max(summary.peakResidentBytes, peakResidentBytes())
            let runSeconds = monotonicSeconds() - runStarted
            // The quality first, the line naming what was written last, where a person looks.
            console.result(Report.mosaic(prepared, similarity: similarity))
            console.result(report(summary, renderer: renderer, options: options, skipped: library.skippedCount + prepared.failed.count,
                                  videos: library.leftOut.videos, runSeconds: runSeconds))
            console.finished(Report.summaryFields(summary, jpeg: options.jpegPath, deepZoom: options.deepZoomPath, archive: options.deepZoomArchivePath, iiif: options.iiifPath, tiff: options.tiffPath,
                                                  manifest: mosaic.manifestPath, skipped: library.skippedCount + prepared.failed.count,
                                                  runSeconds: runSeconds, preview: options.previewPath)
                             + [Report.mosaicFields(prepared, similarity: similarity, minDistance: settings.minDistance, maxUses: settings.maxUses)])
            return .success
        } catch {
            // The target's own failure (a broken or empty picture) named by its flag, as a
            // missing target is: the photos' errors name a photo.
            if error != .cancelled, case .unreadablePhoto(let path, _) = error, path == mosaic.targetPath {
                console.message("--target " + error.commandLineDescription)
                return ExitCode(error)
            }
            return report(error, options: options, manifest: mosaic.manifestPath)
        }
    }

    /// The target's header, read before the library: a file that is no picture Tessera reads
    /// is refused in a moment, not after the scan of a large library. (A target that is missing
    /// or not a file is refused by the scan's checks of its inputs.)
    func refuseUnreadableTarget(_ path: String) -> ExitCode? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        do throws(TesseraError) {
            _ = try MosaicSize.uprightAspect(ofPicture: path)
            return nil
        } catch {
            console.message("--target " + error.commandLineDescription)
            return ExitCode(error)
        }
    }

    /// The mosaic's SSIM against its target, read back from the JPEG just written at the
    /// common size (MosaicQuality.structuralSimilarity: streamed, never decoded whole), or why
    /// it was not measured.
    func likeness(_ prepared: PreparedMosaic, summary: RenderSummary, options: GridOptions,
                  target: String) -> Result<StructuralSimilarity, SimilaritySkipped> {
        if options.shard != nil { return .failure(SimilaritySkipped("a shard writes a part; measure the picture tessera join writes")) }
        guard let jpeg = options.jpegPath else {
            return .failure(SimilaritySkipped("only a Deep Zoom pyramid was written, and SSIM reads the JPEG back (add -o OUT.jpg)"))
        }
        // The render's decoder pool and no more (a large progressive target spills its
        // coefficients), so the read-back stays inside what the render's plan counted.
        let settings = options.settings
        let pool = DecodeBudget.poolBytes(forBudget: settings.steadyStateBudgetBytes, workers: settings.workers ?? onlineCoreCount())
        let budget = DecodeBudget(poolBytes: pool, spillDirectory: settings.temporaryDirectory ?? defaultTemporaryDirectory(),
                                  wholeImageLimitBytes: pool)
        do throws(TesseraError) {
            return .success(try MosaicQuality.structuralSimilarity(output: jpeg, width: summary.width, height: summary.height,
                                                                   target: target, budget: budget))
        } catch {
            return .failure(SimilaritySkipped("could not read the pictures back (\(error))"))
        }
    }

    /// Checks the outputs, then scans the photo paths and reports what was skipped. The exit code
    /// when the run must stop: an output that cannot be written, a missing target, --strict with
    /// skipped photos (a named path that is not there is one), no photo at all, an output that is
    /// one of the inputs.
    func scanPhotos(_ options: GridOptions, alsoWriting extra: [OutputFile] = [],
                    alsoReading inputs: [String] = []) -> Result<PhotoLibrary, ExitCode> {
        let manifest = extra.first?.path
        let extra = extra + (options.shard.map { [OutputFile(path: $0.partPath, role: "the shard's part", isFolder: false)] } ?? [])
            + (options.previewPath.map { [OutputFile(path: $0, role: "the preview", isFolder: false)] } ?? []).filter { _ in !options.outputs.isEmpty }
        do throws(TesseraError) {
            try RenderRequest.checkDestinations(options.plannedOutputs, alsoWriting: extra, temporaryDirectory: options.settings.temporaryDirectory)
        } catch {
            return .failure(report(error, options: options, manifest: manifest))
        }
        if let cache = options.cacheDirectory, let folder = Self.replacedFolder(holding: cache, options.plannedOutputs) {
            // It would be written into the folder the render then replaces and removes (the
            // render failed after the analysis, and left its cache there).
            console.message("--cache-dir \(cache) is inside \(folder), which the render replaces: give a folder outside it")
            return .failure(.usage)
        }
        // A named input besides the photos (a mosaic's target) that is not there is a command
        // line naming nothing (exit 2), said before any photo is read.
        // A folder, FIFO or device there is the same mistake: nothing that could be read as a
        // picture (a FIFO would block the run on whoever writes it).
        for input in inputs {
            var info = stat()
            if stat(input, &info) != 0 {
                let code = errno
                console.message("--target \(input): " + (code == ENOENT ? "no such file" : String(cString: strerror(code))))
                return .failure(.usage)
            }
            let kind = info.st_mode & S_IFMT
            if kind != S_IFREG {
                let what = kind == S_IFDIR ? "a folder" : kind == S_IFIFO ? "a FIFO" : kind == S_IFSOCK ? "a socket" : "a device"
                console.message("--target \(input) is \(what), not a photo: give the picture the mosaic should show")
                return .failure(.usage)
            }
        }
        let library: PhotoLibrary
        switch findPhotos(options.search) {
        case .success(let found): library = found
        case .failure(let code): return .failure(code)
        }
        do throws(TesseraError) {
            try RenderRequest.checkNotInputs(options.plannedOutputs, alsoWriting: extra, photos: library.photos, otherInputs: inputs,
                                             lists: options.photoLists.map { $0.path == "-" ? "/dev/stdin" : $0.path })
        } catch {
            return .failure(report(error, options: options, manifest: manifest))
        }
        return .success(library)
    }

    /// Scans the photo paths and lists and reports what was skipped, the first few of each
    /// reason by name; the exit code when the run must stop: a list that cannot be read (exit 2,
    /// before any photo is read), --strict with skipped photos (a named path that is not there is
    /// one), or no photo at all.
    func findPhotos(_ search: PhotoSearch) -> Result<PhotoLibrary, ExitCode> {
        if let problem = search.unreadableList() {
            console.message(problem)
            return .failure(.usage)
        }
        if search.lists.contains(where: { PhotoSourceOptions.readsStandardInput($0.path) }) && isatty(STDIN_FILENO) != 0 {
            console.warning("--photos-from - reads the list from the terminal: type the paths, then Ctrl-D")
        }
        let library: PhotoLibrary
        console.phase(.scan)
        do throws(TesseraError) {
            let started = monotonicSeconds()
            let console = self.console
            // Skipped photos are reported as they are found (the console groups them): a
            // folder of 100,000 broken files is never a list.
            library = try PhotoLibrary.scan(search.paths, lists: search.lists, workers: search.workers ?? onlineCoreCount(),
                                            memoryBudgetBytes: search.memoryBytes,
                                            cancellation: cancellation, selection: search.selection, progress: { done, total in
                console.progress(.scan, done: done, total: total, seconds: monotonicSeconds() - started, rowWidth: 0)
            }, cache: HeaderIndex(directory: search.cacheDirectory ?? defaultCacheDirectory()),
               temporaryDirectory: search.temporaryDirectory, onSkipped: { skipped in console.photo(skipped, placeholder: false) })
        } catch .cancelled {
            return .failure(interrupted())
        } catch {
            // A named path that does not exist or cannot be listed is bad input, not a failed render.
            console.message(error.commandLineDescription)
            return .failure(.badInput)
        }
        console.summarise()
        if let error = library.cacheError {
            console.warning("the header index could not be used or saved (\(error)); every photo was read")
        }
        if search.countsLeftOut, let line = Report.leftOut(library.leftOut) { console.result(line) }
        if search.strict && library.skippedCount > 0 {
            console.message("--strict: \(library.skippedCount) photo(s) would be skipped; nothing rendered")
            return .failure(.badInput)
        }
        guard !library.photos.isEmpty else {
            let videos = library.leftOut.videos > 0 ? " (\(Report.videos(library.leftOut.videos)) left out: Tessera draws photos)" : ""
            console.message(TesseraError.noPhotos(searched: search.searched).description + videos)
            return .failure(.badInput)
        }
        return .success(library)
    }

    /// Runs `body` (an adaptive mosaic's preparation); a budget refusal that the neighbour lists
    /// of a given --min-distance account for most of is first said to be theirs: the budget
    /// alone ("needs at least 6.0 GiB") does not say that the distance asked for it.
    func explainingDistance<T>(_ mosaic: MosaicSettings, given: Bool,
                               _ body: () throws(TesseraError) -> T) throws(TesseraError) -> T {
        do {
            return try body()
        } catch {
            if case .budgetTooSmall(let budget, _) = error, given, mosaic.adaptiveLevels > 0 {
                let lists = MosaicJob.neighbourListBytes(mosaic)
                if lists > budget / 2 {
                    console.message("--min-distance \(mosaic.minDistance) px: each cell of this adaptive mosaic lists every cell "
                                    + "within \(mosaic.minDistance) px, \(formatBytes(Int64(lists))) in all; "
                                    + "a smaller --min-distance or a larger --min-cell needs less")
                }
            }
            throw error
        }
    }

    /// A mosaic's renderer. Its render is planned for the budget less what preparing left
    /// resident (MosaicJob.renderSettings): a refusal names the budget given, and what it needs.
    func mosaicRenderer(_ prepared: PreparedMosaic, options: GridOptions) throws(TesseraError) -> StripeRenderer {
        do {
            return try StripeRenderer(request: prepared.request, cancellation: cancellation, shard: options.shard)
        } catch .budgetTooSmall(let budget, let needed) {
            let residue = options.settings.maxMemoryBytes - budget
            throw .budgetTooSmall(budgetBytes: options.settings.maxMemoryBytes, neededBytes: needed + max(0, residue))
        }
    }

    /// The shared end of grid and mosaic: dry run or pre-flight, then the render with progress
    /// and warnings. Returns the summary, or nil after a dry run.
    /// `preparationBytes`: what a mosaic held before the render (analysis, target, matching).
    /// A mosaic's manifest, written with its outputs: its notes from the library's skipped
    /// photos, the ones the analysis could not read and what the render drew as placeholders.
    static func manifest(of prepared: PreparedMosaic, library: PhotoLibrary, to path: String) -> ManifestOutput {
        RenderManifest.withOutputs(match: prepared.match, photos: prepared.request.photos, to: path) {
            Report.manifestNotes(skipped: library, alsoSkipped: prepared.failed, drawn: $0)
        }
    }

    /// A shard writes its part, about its band's share of the outputs, into the shard folder.
    private static func shardShare(_ renderer: StripeRenderer) -> (String, Double)? {
        renderer.shard.map { target in
            (target.directory, Double(max(1, renderer.band!.renderedStripes.count)) / Double(renderer.plan.geometry.stripeCount))
        }
    }

    /// The free-space pre-flight of `renderer`'s outputs, once what dead renders left there is
    /// removed (a SIGKILLed pyramid's staging folder can be most of a small disk). Nothing in a
    /// dry run.
    func checkDisk(_ renderer: StripeRenderer, options: GridOptions) throws(TesseraError) {
        guard !options.dryRun else { return }
        for path in renderer.removeStaleTemporaries() { console.warning("removed \(path), left by an earlier run that was killed") }
        try DiskPreflight.check(plan: renderer.plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath, archivePath: options.deepZoomArchivePath,
                                iiifPath: options.iiifPath, tiffPath: options.tiffPath, shard: Self.shardShare(renderer))
    }

    func render(_ renderer: StripeRenderer, options: GridOptions, photoCount: Int,
                preparationBytes: Int = 0, manifest: ManifestOutput? = nil) throws(TesseraError) -> RenderSummary? {
        let plan = renderer.plan
        let shardShare = Self.shardShare(renderer)
        let disk = try DiskPreflight.requirements(plan: plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath, archivePath: options.deepZoomArchivePath, iiifPath: options.iiifPath, tiffPath: options.tiffPath,
                                                  shard: shardShare)
        if options.dryRun {
            console.result(Report.plan(plan, layout: renderer.layout, photoCount: photoCount, disk: disk, settings: options.settings,
                                       preparationBytes: preparationBytes))
            if let band = renderer.band { console.result(Report.band(band, plan: plan)) }
            if !disk.allSatisfy(\.fits) {
                try DiskPreflight.check(plan: plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath, archivePath: options.deepZoomArchivePath, iiifPath: options.iiifPath, tiffPath: options.tiffPath, shard: shardShare)
            }
            return nil
        }
        try checkDisk(renderer, options: options)
        console.phase(.render)
        let started = monotonicSeconds()
        let summary = try renderer.render(manifest: manifest) { event in
            switch event {
            case .progress(let done, let total):
                console.progress(.render, done: done, total: total, seconds: monotonicSeconds() - started, rowWidth: renderer.layout.width)
            case .photoFailed(let skipped):
                console.photo(skipped, placeholder: true)
            case .staleTemporaryRemoved(let path):
                console.warning("removed \(path), left by an earlier run that was killed")
            case .photoWarning(let path, let message):
                console.photoWarning(path, message)
            }
        }
        if let warning = Self.missedPreviews(summary.previewsMissed, previewSide: options.deepZoom?.previews ?? 0) {
            console.warning(warning)
        }
        return summary
    }

    /// The warning for photos drawn that have no preview (their decode at the preview's size
    /// failed): how many, the first one's reason, a few names, and what would make them.
    static func missedPreviews(_ missed: [SkippedPhoto], previewSide: Int) -> String? {
        guard let first = missed.first else { return nil }
        let names = missed.prefix(3).map(\.path).joined(separator: ", ") + (missed.count > 3 ? " and \(formatCount(missed.count - 3)) more" : "")
        let most = missed.compactMap(\.budgetToDrawBytes).max()
        // At the smallest --previews (64), only the budget can help.
        let smaller = previewSide > 64 ? " or a smaller --previews" : ""
        let advice = most.map { "--max-memory \(($0 + (1 << 20) - 1) >> 20)M\(smaller) would make them" }
            ?? (previewSide > 64 ? "a smaller --previews may make them" : "they could not be read at that size")
        return "\(formatCount(missed.count)) \(missed.count == 1 ? "photo has" : "photos have") no \(previewSide) px preview in the viewer, "
            + "though \(missed.count == 1 ? "its cell is" : "their cells are") drawn (\(first.reason)): \(names); \(advice)"
    }

    /// The summary line of a render, or of a shard's part.
    func report(_ summary: RenderSummary, renderer: StripeRenderer, options: GridOptions, skipped: Int,
                videos: Int = 0, runSeconds: Double? = nil) -> String {
        guard let target = renderer.shard, let band = renderer.band else {
            return Report.summary(summary, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath, archivePath: options.deepZoomArchivePath, iiifPath: options.iiifPath, tiffPath: options.tiffPath, skipped: skipped,
                                  videos: videos, runSeconds: runSeconds)
        }
        return Report.shard(summary, target: target, band: band, skipped: skipped)
    }

    /// `tessera join DIR`: the outputs from the parts.
    public func join(_ options: JoinOptions) -> ExitCode {
        console.phase(.join)
        do throws(TesseraError) {
            let started = monotonicSeconds()
            let console = self.console
            let summary = try ShardJoin.join(directory: options.directory, destinations: options.destinations, threads: options.workers,
                                             memoryBytes: options.maxMemoryBytes, waitSeconds: options.waitSeconds, cancellation: cancellation) { done, total in
                console.progress(.join, done: done, total: total, seconds: monotonicSeconds() - started, rowWidth: 0)
            }
            console.result(Report.join(summary, directory: options.directory))
            var fields: [(String, String)] = [("shards", String(summary.shards)), ("width", String(summary.width)),
                                              ("height", String(summary.height)), ("seconds", formatDecimal(summary.seconds, places: 3)),
                                              ("peak_rss_bytes", String(summary.peakResidentBytes))]
            if let path = summary.jpegPath { fields += [("jpeg", jsonStringLiteral(path)), ("jpeg_bytes", String(summary.jpegBytes))] }
            if let path = summary.deepZoomPath {
                fields += [("dzi", jsonStringLiteral(path)), ("tiles", String(summary.deepZoomTiles)), ("tile_bytes", String(summary.deepZoomBytes))]
            }
            console.finished(fields)
            return .success
        } catch .cancelled {
            return interrupted()
        } catch {
            console.message(error.commandLineDescription)
            return ExitCode(error)
        }
    }

    /// A budget given by size that the memory cgroup cannot hold: the kernel would kill the
    /// render that used it, so say so before the work (and what auto would choose).
    func warnIfOverCgroup(_ settings: RenderSettings, given: Bool, limitBytes: Int64? = cgroupMemoryLimitBytes,
                          machineBytes: Int64 = Int64(sysconf(Int32(_SC_PHYS_PAGES))) * Int64(sysconf(Int32(_SC_PAGESIZE)))) {
        // More than the machine has at all (64G typed for 64M): planned for, never there.
        if given, machineBytes > 0, Int64(settings.maxMemoryBytes) > machineBytes, limitBytes.map({ $0 >= machineBytes }) ?? true {
            console.warning("--max-memory \(formatBytes(Int64(settings.maxMemoryBytes))) is more than this machine's memory of "
                            + "\(formatBytes(machineBytes)): the plan counts on memory that is not there; leave --max-memory out "
                            + "(auto: \(formatBytes(Int64(MemoryBudget.automatic().bytes)))) or give less")
            return
        }
        guard given, let limit = limitBytes, Int64(settings.maxMemoryBytes) > limit else { return }
        console.warning("--max-memory \(formatBytes(Int64(settings.maxMemoryBytes))) is more than this memory cgroup's limit of "
                        + "\(formatBytes(limit)): a render that uses it is killed by the kernel; leave --max-memory out "
                        + "(auto: \(formatBytes(Int64(MemoryBudget.automatic().bytes)))) or give less")
    }

    /// `tessera analyse`: the feature index filled for (a share of) the photos.
    public func analyse(_ options: AnalyseOptions) -> ExitCode {
        var options = options
        if options.automaticMemory { options.settings.useMemoryBudget(MemoryBudget.automatic()) }
        let library: PhotoLibrary
        switch findPhotos(options.search) {
        case .success(let found): library = found
        case .failure(let code): return code
        }
        let started = monotonicSeconds()
        let console = self.console
        console.phase(.analysis)
        do throws(TesseraError) {
            let summary = try MosaicJob.analyse(library: library, cellWidth: options.cellWidth, cellHeight: options.cellHeight,
                                                subCells: options.subCells, settings: options.settings,
                                                cacheDirectory: options.cacheDirectory, shard: options.shard,
                                                cancellation: cancellation) { done, total in
                console.progress(.analysis, done: done, total: total, seconds: monotonicSeconds() - started, rowWidth: 0)
            }
            for failed in summary.failed { console.photo(failed, placeholder: false) }
            let share = options.shard.map { "share \($0) of the photos: \(summary.photos) of \(summary.of)" } ?? "\(summary.photos) photos"
            console.result("analysed \(share), \(summary.analysed) now and \(summary.reused) already in the index"
                           + (summary.failed.isEmpty ? "" : ", \(summary.failed.count) unreadable")
                           // Where they went only when something did (no file is made for nothing new).
                           + (summary.analysed > 0 ? ", into \(summary.indexPath)" : "")
                           + " in \(formatDecimal(summary.seconds, places: 2)) s, peak RSS \(formatBytes(summary.peakResidentBytes))")
            console.finished([("photos", String(summary.photos)), ("of", String(summary.of)), ("analysed", String(summary.analysed)),
                              ("reused", String(summary.reused)), ("failed", String(summary.failed.count)),
                              ("index", jsonStringLiteral(summary.indexPath)), ("seconds", formatDecimal(summary.seconds, places: 3)),
                              ("peak_rss_bytes", String(summary.peakResidentBytes))])
            return .success
        } catch .cancelled {
            console.message("interrupted; the index is as it was")
            return cancelledCode()
        } catch {
            console.message(error.commandLineDescription)
            return ExitCode(error)
        }
    }

    /// Shows `error` (an output's with the flag that names it) and returns its exit code.
    func report(_ error: TesseraError, options: GridOptions, manifest: String? = nil, collage: Bool = false) -> ExitCode {
        if error == .cancelled { return interrupted() }
        if case .unusableOutput(let path, let reason) = error {
            let flag = path == manifest ? "--manifest" : options.flag(naming: path)
            console.message((flag.map { "\($0) " } ?? "") + "\(path): \(reason)")
        } else {
            console.message(error.commandLineDescription(collage: collage))
        }
        return ExitCode(error)
    }

    /// Says a run was stopped by a signal (nothing written, temporaries removed) and returns the
    /// signal's exit code.
    func interrupted() -> ExitCode {
        console.message("interrupted; nothing was written and temporaries are removed")
        return cancelledCode()
    }
}

/// What the photo search takes from a command line: the paths and lists, which files it takes,
/// its threads, and what it reports.
struct PhotoSearch {
    var paths: [String]
    /// Files listing more paths (`--photos-from`).
    var lists: [PhotoList] = []
    var selection: PhotoSelection
    var workers: Int?
    /// The header index's folder (nil: the default cache folder).
    var cacheDirectory: String?
    /// Where the scan's sorting and photo table files go.
    var temporaryDirectory: String?
    /// The run's memory budget: what the scan lets a TIFF's tags hold follows from it.
    var memoryBytes = RenderSettings().maxMemoryBytes
    /// Refuse a run with skipped photos (`--strict`).
    var strict = false
    /// Print what the search left out (a dry run).
    var countsLeftOut = false

    /// What "no photos in ..." names: the paths, and the lists by their names (not the
    /// million paths they may hold).
    var searched: [String] {
        paths + lists.map { PhotoSourceOptions.readsStandardInput($0.path) ? "the list on standard input" : "the list \($0.path)" }
    }

    /// Why a list cannot be read, naming --photos-from and its path; nil when every list can be
    /// opened. Standard input is always there. A FIFO is a list (`--photos-from <(find ...)`),
    /// so only a folder and what cannot be opened are refused; a list is not opened here, so a
    /// FIFO's writer is not met twice.
    func unreadableList() -> String? {
        for list in lists where !PhotoSourceOptions.readsStandardInput(list.path) {
            var info = stat()
            if stat(list.path, &info) != 0 {
                let code = errno
                return "--photos-from \(list.path): " + (code == ENOENT ? "no such file" : String(cString: strerror(code)))
            }
            if info.st_mode & S_IFMT == S_IFDIR {
                return "--photos-from \(list.path) is a folder, not a list of photos: name it as a PHOTOS path to search it"
            }
            if access(list.path, R_OK) != 0 {
                return "--photos-from \(list.path): " + String(cString: strerror(errno))
            }
        }
        return nil
    }
}

extension GridOptions {
    /// The photo search this command line asks for.
    var search: PhotoSearch {
        PhotoSearch(paths: photoPaths, lists: photoLists, selection: selection, workers: settings.workers,
                    cacheDirectory: cacheDirectory, temporaryDirectory: settings.temporaryDirectory, memoryBytes: settings.maxMemoryBytes,
                    strict: strict, countsLeftOut: dryRun)
    }
}

extension AnalyseOptions {
    /// The photo search `tessera analyse` asks for.
    var search: PhotoSearch {
        PhotoSearch(paths: photoPaths, lists: photoLists, selection: selection, workers: settings.workers, cacheDirectory: cacheDirectory,
                    temporaryDirectory: settings.temporaryDirectory, memoryBytes: settings.maxMemoryBytes)
    }
}

extension Report {
    /// What a JSON manifest lists as left out: the skipped photos the library holds (all
    /// counted), a mosaic's photos its analysis could not read, the placeholders and the
    /// photos drawn in part of the render `drawn`, in the warnings' words.
    static func manifestNotes(skipped library: PhotoLibrary, alsoSkipped: [SkippedPhoto] = [],
                              drawn: RenderSummary) -> ManifestNotes {
        let skipped = (library.skipped + alsoSkipped).map { (path: $0.path, reason: $0.commandLineReason) }
        return ManifestNotes(skipped: skipped, skippedCount: library.skippedCount + alsoSkipped.count,
                             placeholders: drawn.failedPhotos.map { (path: $0.path, reason: $0.commandLineReason) },
                             partial: drawn.partialPhotos.map { (path: $0.path, reason: $0.commandLineReason) })
    }
}
