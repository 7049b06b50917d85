// main.swift — parse, call the library, draw progress, map errors to exit codes, handle signals.
import Dispatch
import Glibc
import Tessera
import TesseraCLI

/// Writes `text` to standard error unbuffered (write(2)), so progress and warnings interleave in order.
func writeStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
            if written <= 0 { if errno == EINTR { continue } else { return } }
            offset += written
        }
    }
}

func printError(_ message: String) {
    writeStandardError("tessera: " + message + "\n")
}

// A closed standard output or error (`tessera ... 2>&1 | head -1`) must not kill a render with
// its temporaries left: writes to it then fail with EPIPE, which the writers ignore.
signal(SIGPIPE, SIG_IGN)
// A file-size limit (`ulimit -f`) must not kill a render with a core dump either: the write that
// crosses it then fails with EFBIG, reported like any failed write (exit 1, nothing left).
signal(SIGXFSZ, SIG_IGN)

// Paths are kept as UTF-8 text: an argument that is not valid UTF-8 would be read with
// replacement characters and name another file. Refused, naming its position.
for index in 1..<Int(CommandLine.argc) {
    if let argument = CommandLine.unsafeArgv[index], String(validatingCString: argument) == nil {
        printError("argument \(index) (\(String(cString: argument))) is not valid UTF-8; tessera reads its arguments as UTF-8 text "
                   + "(names found inside folders may be any bytes): name a folder that holds it instead, or rename it")
        exit(ExitCode.usage.rawValue)
    }
}

let invocation: Invocation
do {
    invocation = try TopLevel.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    printError(error.message)
    exit(ExitCode.usage.rawValue)
}

switch invocation {
case .help:
    print(TopLevel.help)
    exit(ExitCode.success.rawValue)
case .version:
    print("tessera \(tesseraVersion)")
    exit(ExitCode.success.rawValue)
case .grid(let options):
    if options.help {
        print(GridCommand.help)
        exit(ExitCode.success.rawValue)
    }
    exit(runGrid(options).rawValue)
case .mosaic(let options):
    if options.render.help {
        print(MosaicCommand.help)
        exit(ExitCode.success.rawValue)
    }
    exit(runMosaic(options).rawValue)
}

/// Stops the render on SIGINT, SIGTERM or SIGHUP and remembers which arrived first.
final class SignalWatch: @unchecked Sendable {
    let cancellation = RenderCancellation()
    private let lock = Mutex()
    private var received: Int32 = 0  // protected by `lock`
    private var sources: [DispatchSourceSignal] = []

    init() {
        for number in [SIGINT, SIGTERM, SIGHUP] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in
                lock.withLock { if received == 0 { received = number } }
                cancellation.cancel()
            }
            source.resume()
            sources.append(source)
        }
    }

    var exitCode: ExitCode {
        lock.withLock { received == SIGTERM ? .terminated : received == SIGHUP ? .hungUp : .interrupted }
    }
}

/// Every file a command will write, with the flag that names it: the JPEG, the pyramid's
/// descriptor, viewer page and tile folder, the mosaic's manifest.
func outputFiles(_ options: GridOptions, manifest: String? = nil) -> [(flag: String, path: String, isFolder: Bool)] {
    var outputs: [(flag: String, path: String, isFolder: Bool)] = []
    if let jpeg = options.jpegPath { outputs.append(("-o", jpeg, false)) }
    if let dzi = options.deepZoomPath {
        outputs.append(("--dzi", dzi, false))
        if dzi.hasSuffix(".dzi") {
            let base = String(dzi.dropLast(4))
            outputs.append(("--dzi (its tiles)", base + "_files", true))
            if options.settings.deepZoom?.viewer != false { outputs.append(("--dzi (its viewer)", base + ".html", false)) }
        }
    }
    if let manifest { outputs.append(("--manifest", manifest, false)) }
    return outputs
}

/// Checks, before any work (a mosaic analyses and matches before it renders), that the folders
/// the outputs go into exist, that what stands at each output's name is a regular file tessera
/// may replace (not a device, a folder or a symbolic link), and that no two outputs are the
/// same file.
func checkOutputFolders(_ options: GridOptions, manifest: String? = nil) throws(TesseraError) {
    if let temporary = options.settings.temporaryDirectory {
        var info = stat()
        guard stat(temporary, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw TesseraError.invalidSettings("--temp-dir \(temporary): not an existing folder (create it first)")
        }
    }
    let outputs = outputFiles(options, manifest: manifest)
    for (flag, path, isFolder) in outputs {
        // Written first under a hidden name beside it (".NAME.tessera-PID-XXXXXX", or a staging
        // folder ".NAME.dzi.tessera-PID-XXXXXX"): that name must fit the file system's 255 bytes.
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard name.utf8.count <= 255 - 32 else {
            throw TesseraError.invalidSettings("\(flag) \(path): the name is \(name.utf8.count) bytes long; at most \(255 - 32) "
                                               + "(it is written under a longer hidden name first, and a name holds 255)")
        }
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        var info = stat()
        guard stat(folder.isEmpty ? "/" : folder, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw TesseraError.invalidSettings("\(flag) \(path): the folder \(folder) does not exist (create it first)")
        }
        guard access(folder.isEmpty ? "/" : folder, W_OK) == 0 else {
            throw TesseraError.invalidSettings("\(flag) \(path): the folder \(folder) cannot be written (\(String(cString: strerror(errno))))")
        }
        if !isFolder { try OutputDestination.checkReplaceable(path, role: flag) }
    }
    if let dzi = options.deepZoomPath {
        try checkDeepZoomDestination(dzi, viewer: options.settings.deepZoom?.viewer != false)
    }
    var seen: [String: String] = [:]
    for (flag, path, _) in outputs {
        let canonical = OutputDestination.canonicalPath(path)
        if let other = seen[canonical] {
            throw TesseraError.invalidSettings("\(other) and \(flag) name the same file, \(path): each output needs a name of its own")
        }
        seen[canonical] = flag
    }
}

/// Refuses outputs that are one of the photos read (the photo would be overwritten).
func checkOutputsAreNotInputs(_ options: GridOptions, photos: [String], manifest: String? = nil) throws(TesseraError) {
    var existing: [OutputDestination.Identity: (flag: String, path: String)] = [:]
    for (flag, path, isFolder) in outputFiles(options, manifest: manifest) where !isFolder {
        if let identity = OutputDestination.identity(path) { existing[identity] = (flag, path) }
    }
    guard !existing.isEmpty else { return }
    for photo in photos {
        if let identity = OutputDestination.identity(photo), let output = existing[identity] {
            throw TesseraError.invalidSettings("\(output.flag) \(output.path) is one of the photos (\(photo)); "
                                               + "writing it would destroy the photo: choose another name")
        }
    }
}

/// Checks the output folders, then scans the photo paths and reports what was skipped. nil
/// (with the exit code) when the run must stop: a missing output folder, a named path that does
/// not exist, --strict with skipped photos, or no photo at all.
func scanPhotos(_ options: GridOptions, signals: SignalWatch, manifest: String? = nil,
                extraInputs: [String] = []) -> Result<PhotoLibrary, ExitCode> {
    let library: PhotoLibrary
    do throws(TesseraError) {
        try checkOutputFolders(options, manifest: manifest)
    } catch {
        printError(error.description)
        return .failure(ExitCode(error))
    }
    do throws(TesseraError) {
        library = try PhotoLibrary.scan(options.photoPaths, workers: options.settings.workers ?? onlineCoreCount(),
                                        cancellation: signals.cancellation)
    } catch .cancelled {
        return .failure(report(.cancelled, signals: signals))
    } catch {
        // A named path that does not exist or cannot be listed is bad input, not a failed render.
        printError(error.description)
        return .failure(.badInput)
    }
    for skipped in library.skipped {
        printError("warning: skipping \(skipped.path): \(skipped.reason)")
    }
    if options.strict && !library.skipped.isEmpty {
        printError("--strict: \(library.skipped.count) photo(s) would be skipped; nothing rendered")
        return .failure(.badInput)
    }
    guard !library.photos.isEmpty else {
        printError(TesseraError.noPhotos(searched: options.photoPaths).description)
        return .failure(.badInput)
    }
    do throws(TesseraError) {
        try checkOutputsAreNotInputs(options, photos: library.photos.map(\.path) + extraInputs, manifest: manifest)
    } catch {
        printError(error.description)
        return .failure(ExitCode(error))
    }
    return .success(library)
}

/// The shared end of grid and mosaic: dry run or pre-flight, then the render with a progress bar
/// and warnings. Returns the summary, or nil after a dry run.
func render(_ renderer: StripeRenderer, options: GridOptions, photoCount: Int) throws(TesseraError) -> RenderSummary? {
    let disk = try DiskPreflight.requirements(plan: renderer.plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath)
    if options.dryRun {
        print(Report.plan(renderer.plan, layout: renderer.layout, photoCount: photoCount, disk: disk, settings: options.settings))
        if !disk.allSatisfy(\.fits) {
            try DiskPreflight.check(plan: renderer.plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath)
        }
        return nil
    }
    // What dead renders left (a SIGKILLed pyramid's staging folder can be most of a small disk)
    // goes before the pre-flight counts the free space.
    for path in renderer.removeStaleTemporaries(jpeg: options.jpegPath, deepZoom: options.deepZoomPath) {
        printError("removed \(path), left by an earlier run that was killed")
    }
    try DiskPreflight.check(plan: renderer.plan, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath)
    let drawBar = options.showProgress && isatty(STDERR_FILENO) != 0
    let started = monotonicSeconds()
    var lastDrawn = 0.0
    var barVisible = false
    let labels = CellLabels(layout: renderer.layout, photoPaths: renderer.photos.map(\.path))
    let summary = try renderer.render(jpeg: options.jpegPath, deepZoom: options.deepZoomPath, labels: labels) { event in
        switch event {
        case .progress(let done, let total):
            guard drawBar else { return }
            let now = monotonicSeconds()
            if now - lastDrawn >= 0.1 || done == total {
                lastDrawn = now
                writeStandardError("\r" + Report.progressBar(done: done, total: total, pixelsPerRow: renderer.layout.width,
                                                             seconds: now - started))
                barVisible = true
            }
        case .photoFailed(let skipped):
            if barVisible { writeStandardError("\n"); barVisible = false }
            printError("warning: \(skipped.path): \(skipped.reason); drawn as a placeholder")
        case .staleTemporaryRemoved(let path):
            printError("removed \(path), left by an earlier run that was killed")
        case .photoWarning(let path, let message):
            if barVisible { writeStandardError("\n"); barVisible = false }
            printError("warning: \(path): \(message)")
        }
    }
    if barVisible { writeStandardError("\n") }
    return summary
}

/// A JPEG side is limited to 65,500 px; a Deep-Zoom-only canvas to RenderPlan.maxDeepZoomSide.
func checkCanvasSize(_ options: GridOptions, columns: Int, rows: Int) throws(TesseraError) {
    let limit = options.jpegPath != nil ? jpegMaxDimension : RenderPlan.maxDeepZoomSide
    // Overflow-safe: the parser bounds each factor by 2^24, but this must not trap whatever comes.
    let (width, wide) = columns.multipliedReportingOverflow(by: options.cellWidth)
    let (height, tall) = rows.multipliedReportingOverflow(by: options.cellHeight)
    guard !wide, !tall, width <= limit, height <= limit else {
        throw TesseraError.outputTooLarge(width: wide ? Int.max : width, height: tall ? Int.max : height, limit: limit)
    }
}

/// Maps a failure to its message and exit code.
func report(_ error: TesseraError, signals: SignalWatch) -> ExitCode {
    if error == .cancelled {
        writeStandardError("\n")
        printError("interrupted; nothing was written and temporaries are removed")
        return signals.exitCode
    }
    printError(error.description)
    return ExitCode(error)
}

func runGrid(_ options: GridOptions) -> ExitCode {
    let signals = SignalWatch()
    let library: PhotoLibrary
    switch scanPhotos(options, signals: signals) {
    case .success(let found): library = found
    case .failure(let code): return code
    }
    do throws(TesseraError) {
        let columns = options.columns!
        let rows = options.rows ?? GridLayout.rows(forPhotoCount: library.photos.count, columns: columns)
        try checkCanvasSize(options, columns: columns, rows: rows)
        let layout = GridLayout.make(photoCount: library.photos.count, columns: columns, rows: rows,
                                     cellWidth: options.cellWidth, cellHeight: options.cellHeight, order: options.order)
        let renderer = try StripeRenderer(photos: library.photos, layout: layout, settings: options.settings,
                                          cancellation: signals.cancellation)
        guard let summary = try render(renderer, options: options, photoCount: library.photos.count) else { return .success }
        print(Report.summary(summary, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath, skipped: library.skipped))
        return .success
    } catch {
        return report(error, signals: signals)
    }
}

func runMosaic(_ mosaic: MosaicOptions) -> ExitCode {
    let signals = SignalWatch()
    let options = mosaic.render
    let workers = options.settings.workers ?? onlineCoreCount()
    let library: PhotoLibrary
    switch scanPhotos(options, signals: signals, manifest: mosaic.manifestPath, extraInputs: [mosaic.targetPath]) {
    case .success(let found): library = found
    case .failure(let code): return code
    }
    do throws(TesseraError) {
        // The target's upright shape decides the rows when only --columns is given.
        guard let target = try PhotoLibrary.scan([mosaic.targetPath]).photos.first else {
            throw TesseraError.unreadablePhoto(path: mosaic.targetPath, reason: "not a readable JPEG")
        }
        let turned = OrientationTransform(exifOrientation: target.header.exifOrientation).swapsAxes
        let targetAspect = turned ? Double(target.header.height) / Double(target.header.width)
                                  : Double(target.header.width) / Double(target.header.height)
        let columns = options.columns!
        let rows = options.rows ?? max(1, Int((Double(columns * options.cellWidth) / targetAspect / Double(options.cellHeight)).rounded()))
        try checkCanvasSize(options, columns: columns, rows: rows)
        let k = mosaic.subCells
        let cellAspect = Double(options.cellWidth) / Double(options.cellHeight)

        // Analysis and the target share --max-memory's decoder pool the same way a render does.
        let decodeBudget = DecodeBudget(budgetBytes: options.settings.maxMemoryBytes, workers: workers,
                                        spillDirectory: options.settings.temporaryDirectory)
        var started = monotonicSeconds()
        let index = FeatureIndex(directory: mosaic.cacheDirectory ?? defaultCacheDirectory(), subCells: k, cellAspect: cellAspect)
        let analysis = MosaicAnalysis.photoFeatures(library.photos, subCells: k, cellAspect: cellAspect, workers: workers, index: index,
                                                    budget: decodeBudget, cancellation: signals.cancellation)
        if signals.cancellation.isCancelled { throw TesseraError.cancelled }
        for failed in analysis.failed { printError("warning: skipping \(failed.path): \(failed.reason)") }
        do throws(TesseraError) { try index.save() } catch { printError("warning: cannot save the feature index: \(error)") }
        let analysisSeconds = monotonicSeconds() - started
        var photos: [Photo] = []
        var features: [[Float]] = []
        for (photo, feature) in zip(library.photos, analysis.features) {
            if let feature { photos.append(photo); features.append(feature) }
        }
        guard !photos.isEmpty else { throw TesseraError.noPhotos(searched: options.photoPaths) }

        started = monotonicSeconds()
        let targetFeatures = try MosaicAnalysis.targetFeatures(path: mosaic.targetPath, columns: columns, rows: rows, subCells: k,
                                                                 budget: decodeBudget, cancellation: signals.cancellation)
        let targetSeconds = monotonicSeconds() - started
        started = monotonicSeconds()
        let match = try MosaicMatcher.match(target: targetFeatures, columns: columns, rows: rows, subCells: k,
                                            photoFeatures: features, minDistance: mosaic.minDistance, maxUses: mosaic.maxUses,
                                            seed: mosaic.seed, workers: workers, cancellation: signals.cancellation)
        let matchSeconds = monotonicSeconds() - started
        let layout = CellLayout(columns: columns, rows: rows, cellWidth: options.cellWidth, cellHeight: options.cellHeight,
                                photoIndices: match.assignment)
        let tint = mosaic.tintPercent > 0
            ? CellTint(strength: Float(mosaic.tintPercent) / 100, subCells: k, target: targetFeatures, photoFeatures: features)
            : nil
        let renderer = try StripeRenderer(photos: photos, layout: layout, settings: options.settings,
                                          cancellation: signals.cancellation, tint: tint)
        let report = Report.mosaic(match, photoCount: photos.count, analysed: analysis.analysed, reused: index.hits,
                                   analysisSeconds: analysisSeconds, targetSeconds: targetSeconds, matchSeconds: matchSeconds)
        guard let summary = try render(renderer, options: options, photoCount: photos.count) else {
            print(report)
            return .success
        }
        if let manifest = mosaic.manifestPath {
            try MosaicManifest.write(match: match, photoPaths: photos.map(\.path), to: manifest)
        }
        print(Report.summary(summary, outputPath: options.jpegPath, deepZoomPath: options.deepZoomPath,
                             skipped: library.skipped + analysis.failed))
        print(report)
        return .success
    } catch {
        return report(error, signals: signals)
    }
}
