// main.swift — parse, call the library (through TesseraCLI's Runner), draw progress, map errors
// to exit codes, handle signals. Nothing else lives here.
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

// A closed standard output or error (`tessera ... 2>&1 | head -1`) must not kill a render with
// its temporaries left: writes to it then fail with EPIPE, which the writers ignore.
useBoundedMemoryAllocator()
raiseOpenFileLimit()
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
    // A script that asked for JSON reads every line of standard error as JSON, this one too.
    let arguments = Array(CommandLine.arguments.dropFirst())
    let json = arguments.contains("--progress=json")
        || zip(arguments, arguments.dropFirst()).contains { $0.0 == "--progress" && $0.1 == "json" }
    if json {
        writeStandardError("{\"event\": \"error\", \"message\": \(jsonStringLiteral(error.description))}\n")
    } else {
        printError(error.description)
    }
    exit(ExitCode.usage.rawValue)
}

func runner(_ console: StreamConsole) -> Runner {
    let signals = SignalWatch()
    return Runner(console: console, cancellation: signals.cancellation) { signals.exitCode }
}

/// Results on standard output; messages, warnings and progress on standard error, unbuffered,
/// so that they interleave in order.
func console(_ options: GridOptions) -> StreamConsole { console(progress: options.progress, quiet: options.quiet, verbose: options.verbose) }

func console(progress: ProgressStyle, quiet: Bool, verbose: Bool = false) -> StreamConsole {
    StreamConsole(style: progress, quiet: quiet, verbose: verbose, standardOutput: { text in print(text, terminator: "") },
                  standardError: { text in writeStandardError(text) },
                  errorIsTerminal: isatty(STDERR_FILENO) != 0, terminalWidth: standardErrorColumns)
}

switch invocation {
case .help:
    print(TopLevel.help)
    exit(ExitCode.success.rawValue)
case .version(let json):
    print(Distribution.versionText(json: json))
    exit(ExitCode.success.rawValue)
case .manPage:
    print(Distribution.manPage, terminator: "")
    exit(ExitCode.success.rawValue)
case .completions(let shell):
    print(Distribution.completion(shell: shell)!, terminator: "")
    exit(ExitCode.success.rawValue)
case .grid(let options):
    if options.help {
        print(GridCommand.help)
        exit(ExitCode.success.rawValue)
    }
    exit(runner(console(options)).grid(options).rawValue)
case .mosaic(let options):
    if options.render.help {
        print(MosaicCommand.help)
        exit(ExitCode.success.rawValue)
    }
    exit(runner(console(options.render)).mosaic(options).rawValue)
case .collage(let options):
    if options.render.help {
        print(CollageCommand.help)
        exit(ExitCode.success.rawValue)
    }
    exit(runner(console(options.render)).collage(options).rawValue)
case .join(let options):
    if options.help {
        print(JoinCommand.help)
        exit(ExitCode.success.rawValue)
    }
    exit(runner(console(progress: options.progress, quiet: options.quiet)).join(options).rawValue)
case .analyse(let options):
    if options.help {
        print(AnalyseCommand.help)
        exit(ExitCode.success.rawValue)
    }
    exit(runner(console(progress: options.progress, quiet: options.quiet, verbose: options.verbose)).analyse(options).rawValue)
}
