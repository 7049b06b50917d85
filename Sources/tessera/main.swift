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
}

/// Stops the render on SIGINT or SIGTERM and remembers which arrived.
final class SignalWatch: @unchecked Sendable {
    let cancellation = RenderCancellation()
    private let lock = Mutex()
    private var received: Int32 = 0  // protected by `lock`
    private var sources: [DispatchSourceSignal] = []

    init() {
        for number in [SIGINT, SIGTERM] {
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
        lock.withLock { received == SIGTERM ? .terminated : .interrupted }
    }
}

func runGrid(_ options: GridOptions) -> ExitCode {
    let signals = SignalWatch()
    do throws(TesseraError) {
        let library: PhotoLibrary
        do throws(TesseraError) {
            library = try PhotoLibrary.scan(options.photoPaths, workers: options.settings.workers ?? onlineCoreCount())
        } catch {
            // A named path that does not exist or cannot be listed is bad input, not a failed render.
            printError(error.description)
            return .badInput
        }
        for skipped in library.skipped {
            printError("warning: skipping \(skipped.path): \(skipped.reason)")
        }
        if options.strict && !library.skipped.isEmpty {
            printError("--strict: \(library.skipped.count) photo(s) would be skipped; nothing rendered")
            return .badInput
        }
        guard !library.photos.isEmpty else { throw TesseraError.noPhotos(searched: options.photoPaths) }
        let columns = options.columns!
        let rows = options.rows ?? GridLayout.rows(forPhotoCount: library.photos.count, columns: columns)
        guard columns * options.cellWidth <= jpegMaxDimension, rows * options.cellHeight <= jpegMaxDimension else {
            throw TesseraError.outputTooLarge(width: columns * options.cellWidth, height: rows * options.cellHeight,
                                              limit: jpegMaxDimension)
        }
        let layout = GridLayout.make(photoCount: library.photos.count, columns: columns, rows: rows,
                                     cellWidth: options.cellWidth, cellHeight: options.cellHeight, order: options.order)
        let renderer = try StripeRenderer(photos: library.photos, layout: layout, settings: options.settings,
                                          cancellation: signals.cancellation)
        let disk = try DiskPreflight.requirements(plan: renderer.plan, outputPath: options.outputPath)
        if options.dryRun {
            print(Report.plan(renderer.plan, layout: layout, photoCount: library.photos.count, disk: disk, settings: options.settings))
            return disk.allSatisfy(\.fits) ? .success : .insufficientResources
        }
        try DiskPreflight.check(plan: renderer.plan, outputPath: options.outputPath)

        let drawBar = options.showProgress && isatty(STDERR_FILENO) != 0
        let started = monotonicSeconds()
        var lastDrawn = 0.0
        var barVisible = false
        let summary = try renderer.render(to: options.outputPath) { event in
            switch event {
            case .progress(let done, let total):
                guard drawBar else { return }
                let now = monotonicSeconds()
                if now - lastDrawn >= 0.1 || done == total {
                    lastDrawn = now
                    writeStandardError("\r" + Report.progressBar(done: done, total: total, pixelsPerRow: layout.width, seconds: now - started))
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
        print(Report.summary(summary, outputPath: options.outputPath, skipped: library.skipped))
        return .success
    } catch TesseraError.cancelled {
        writeStandardError("\n")
        printError("interrupted; nothing was written and temporaries are removed")
        return signals.exitCode
    } catch {
        printError(error.description)
        return ExitCode(error)
    }
}
