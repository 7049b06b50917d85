// Console.swift — where a command's words go: results on standard output; warnings, errors and
// progress on standard error, as a human bar, as JSON Lines for programs (`--progress json`),
// or not at all (`--progress none`, `--quiet`). The Runner says what happened; the console
// decides how it is shown. Everything here writes through two closures, so tests run it
// without a terminal.
import Glibc
import Tessera

/// The steps of a run, as progress names them.
public enum Phase: String, Sendable {
    case scan, analysis, target, matching, render
    /// `tessera join`: parts copied of N.
    case join
}

/// How progress is shown (`--progress`).
public enum ProgressStyle: String, Sendable {
    /// A bar on standard error, drawn only when it is a terminal (the default).
    case bar
    /// JSON Lines on standard error: every line is one event object.
    case json
    /// Nothing.
    case none
}

/// Where a command's messages go.
public protocol Console: AnyObject, Sendable {
    /// A line of the command's result (standard output).
    func result(_ text: String)
    /// An error, or a notice that is not a warning (standard error).
    func message(_ text: String)
    /// A warning, without its "warning: " prefix.
    func warning(_ text: String)
    /// A photo that was skipped (before rendering) or drawn as a placeholder.
    func photo(_ photo: SkippedPhoto, placeholder: Bool)
    /// A step of the run starts.
    func phase(_ phase: Phase)
    /// `done` of `total` units of `phase` (photos, cells, rows of `rowWidth` px) after `seconds`.
    func progress(_ phase: Phase, done: Int, total: Int, seconds: Double, rowWidth: Int)
    /// The run's figures, for programs: (key, JSON value) pairs.
    func finished(_ fields: [(String, String)])
}

/// The console of the `tessera` executable, and of the tests that read what it would write.
public final class StreamConsole: Console, @unchecked Sendable {
    public let style: ProgressStyle
    public let quiet: Bool
    private let standardOutput: (String) -> Void
    private let standardError: (String) -> Void
    private let drawsBar: Bool
    private let terminalWidth: () -> Int
    private let clock: () -> Double
    private let lock = Mutex()
    // Protected by `lock`:
    private var lastShown = -Double.infinity
    private var barVisible = false

    /// Progress events a second at most (the last of a phase always shows).
    static let jsonEventsPerSecond = 4.0
    static let barDrawsPerSecond = 10.0

    public init(style: ProgressStyle, quiet: Bool, standardOutput: @escaping (String) -> Void,
                standardError: @escaping (String) -> Void, errorIsTerminal: Bool,
                terminalWidth: @escaping () -> Int = { 80 }, clock: @escaping () -> Double = monotonicSeconds) {
        self.style = quiet && style == .bar ? .none : style
        self.quiet = quiet
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.drawsBar = style == .bar && !quiet && errorIsTerminal
        self.terminalWidth = terminalWidth
        self.clock = clock
    }

    public func result(_ text: String) {
        guard !quiet else { return }
        lock.withLock { clearBar() }
        standardOutput(text + "\n")
    }

    public func message(_ text: String) {
        if style == .json {
            emit("{\"event\": \"error\", \"message\": \(jsonStringLiteral(text))}")
        } else {
            lock.withLock { clearBar() }
            standardError("tessera: " + text + "\n")
        }
    }

    public func warning(_ text: String) {
        if style == .json {
            emit("{\"event\": \"warning\", \"message\": \(jsonStringLiteral(text))}")
        } else if !quiet {
            lock.withLock { clearBar() }
            standardError("tessera: warning: " + text + "\n")
        }
    }

    public func photo(_ photo: SkippedPhoto, placeholder: Bool) {
        if style == .json {
            emit("{\"event\": \"\(placeholder ? "placeholder" : "skipped")\", \"path\": \(jsonStringLiteral(photo.path)), "
                 + "\"reason\": \(jsonStringLiteral(photo.commandLineReason))}")
        } else {
            warning(placeholder ? "\(photo.path): \(photo.commandLineReason); drawn as a placeholder" : "skipping \(photo.path): \(photo.commandLineReason)")
        }
    }

    public func phase(_ phase: Phase) {
        lock.withLock { lastShown = -Double.infinity }
        if style == .json { emit("{\"event\": \"phase\", \"phase\": \"\(phase.rawValue)\"}") }
    }

    public func progress(_ phase: Phase, done: Int, total: Int, seconds: Double, rowWidth: Int) {
        switch style {
        case .none: return
        case .json:
            let now = clock()
            let due = lock.withLock { () -> Bool in
                guard done >= total || now - lastShown >= 1 / Self.jsonEventsPerSecond else { return false }
                lastShown = now
                return true
            }
            guard due else { return }
            let eta = Report.eta(done: done, total: total, seconds: seconds).map { formatDecimal($0, places: 1) } ?? "null"
            emit("{\"event\": \"progress\", \"phase\": \"\(phase.rawValue)\", \"done\": \(done), \"total\": \(total), \"eta_s\": \(eta)}")
        case .bar:
            guard drawsBar else { return }
            let now = clock()
            lock.withLock {
                guard done >= total || now - lastShown >= 1 / Self.barDrawsPerSecond else { return }
                lastShown = now
                let line = Report.progressLine(phase: phase, done: done, total: total, seconds: seconds, rowWidth: rowWidth,
                                               columns: terminalWidth())
                // \r and erase-line: the bar is one line however its length changes.
                standardError("\r\u{1B}[K" + line)
                barVisible = true
                if done >= total { clearBar() }
            }
        }
    }

    public func finished(_ fields: [(String, String)]) {
        guard style == .json else { return }
        emit("{\"event\": \"summary\", " + fields.map { "\(jsonStringLiteral($0.0)): \($0.1)" }.joined(separator: ", ") + "}")
    }

    /// Removes the bar (protected by `lock`), so what follows starts on a clean line.
    private func clearBar() {
        if barVisible { standardError("\r\u{1B}[K") }
        barVisible = false
    }

    private func emit(_ line: String) {
        lock.withLock { standardError(line + "\n") }
    }
}

/// The width of the terminal on standard error, or 80.
public func standardErrorColumns() -> Int {
    var size = winsize()
    guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
    return Int(size.ws_col)
}
