// Console.swift — where a command's words go: results on standard output; warnings, errors and
// progress on standard error, as a human bar, as JSON Lines for programs (`--progress json`),
// or not at all (`--progress none`, `--quiet`). The Runner says what happened; the console
// decides how it is shown. Everything here writes through two closures, so tests run it
// without a terminal.
//
// A library of a million photos can skip ten thousand: skipped photos, placeholders and photo
// warnings are grouped by reason (ReasonTally) and said in one line per reason when the step
// ends, with a count and the first few names, so fifty broken files are three lines, not fifty
// lines burying the result; a dry run's duplicates name a few and count the rest. --verbose
// names every one as it comes, and `--progress json` has an event for every one either way.
import Glibc
import Tessera

/// The steps of a run, as progress names them.
public enum Phase: String, Sendable {
    case scan, analysis, target, matching, preview, render
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
    /// A warning about one photo that is still drawn (a decoder's "corrupt data"), grouped by
    /// its message like skipped photos; `--progress json`'s warning event as `warning` gives it.
    func photoWarning(_ path: String, _ message: String)
    /// A mosaic's photo `path` shows the same picture as `sameAs`, and is left out (a dry run
    /// lists them; a result line, grouped like skipped photos).
    func duplicate(_ path: String, sameAs: String)
    /// The step's grouped reports end: one line per reason for the photos and duplicates not
    /// named, and the counts start again. A `StreamConsole` also does this by itself when a
    /// phase starts and before a result, an error or the summary, so a caller need not.
    func summarise()
}

extension Console {
    public func photoWarning(_ path: String, _ message: String) { warning("\(shown(path)): \(message)") }
    public func duplicate(_ path: String, sameAs: String) { result(duplicateLine(path, sameAs: sameAs)) }
    public func summarise() {}
}

/// A dry run's line for a duplicate picture.
func duplicateLine(_ path: String, sameAs: String) -> String { "duplicate   \(shown(path)): the same picture as \(shown(sameAs))" }

/// A file name as a line of text shows it (Tessera's `displayedName`): control characters (a
/// newline, an escape sequence that would recolour the terminal or retitle its window, DEL, C1)
/// written as `\n`, `\r`, `\t` or `\xNN`, so that a photo named to forge a line or drive the
/// terminal is named, not obeyed. JSON events carry the name as it is, escaped by JSON.
func shown(_ path: String) -> String { displayedName(path) }

private func needsEscape(_ scalar: Unicode.Scalar) -> Bool { needsEscapeInText(scalar) }

/// A message's text with what a terminal would obey (escape sequences and other controls but
/// newlines and tabs) replaced by "?": the last guard for names that reach a message unshown.
func terminalText(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: { needsEscape($0) && $0 != "\n" && $0 != "\t" }) else { return text }
    var clean = ""
    for scalar in text.unicodeScalars {
        clean.unicodeScalars.append(needsEscape(scalar) && scalar != "\n" && scalar != "\t" ? "?" : scalar)
    }
    return clean
}


/// The console of the `tessera` executable, and of the tests that read what it would write.
public final class StreamConsole: Console, @unchecked Sendable {
    public let style: ProgressStyle
    public let quiet: Bool
    /// Every skipped photo, placeholder and duplicate is named (`--verbose`).
    public let verbose: Bool
    private let standardOutput: (String) -> Void
    private let standardError: (String) -> Void
    private let drawsBar: Bool
    private let terminalWidth: () -> Int
    private let clock: () -> Double
    private let lock = Mutex()
    // Protected by `lock`:
    private var lastShown = -Double.infinity
    private var barVisible = false
    private var tally = ReasonTally(limit: StreamConsole.reasonsKept)

    /// Progress events a second at most (the last of a phase always shows).
    static let jsonEventsPerSecond = 4.0
    static let barDrawsPerSecond = 10.0
    /// Photos named per reason before the rest are only counted (without --verbose).
    public static let namedPerReason = 3
    /// Distinct reasons counted apart; past them, "other reasons" (so memory stays bounded
    /// whatever the libraries' messages are).
    public static let reasonsKept = 64

    public init(style: ProgressStyle, quiet: Bool, verbose: Bool = false, standardOutput: @escaping (String) -> Void,
                standardError: @escaping (String) -> Void, errorIsTerminal: Bool,
                terminalWidth: @escaping () -> Int = { 80 }, clock: @escaping () -> Double = monotonicSeconds) {
        self.style = quiet && style == .bar ? .none : style
        self.quiet = quiet
        self.verbose = verbose
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.drawsBar = style == .bar && !quiet && errorIsTerminal
        self.terminalWidth = terminalWidth
        self.clock = clock
    }

    public func result(_ text: String) {
        summarise()
        writeResult(text)
    }

    private func writeResult(_ text: String) {
        guard !quiet else { return }
        lock.withLock { clearBar() }
        // Output paths are the user's, but a join's come from its parts (someone else's files).
        standardOutput(terminalText(text) + "\n")
    }

    public func message(_ text: String) {
        summarise()
        if style == .json {
            emit("{\"event\": \"error\", \"message\": \(jsonStringLiteral(text))}")
        } else {
            lock.withLock { clearBar() }
            standardError("tessera: " + terminalText(text) + "\n")
        }
    }

    public func warning(_ text: String) {
        if style == .json {
            emit("{\"event\": \"warning\", \"message\": \(jsonStringLiteral(text))}")
        } else if !quiet {
            lock.withLock { clearBar() }
            standardError("tessera: warning: " + terminalText(text) + "\n")
        }
    }

    public func photo(_ photo: SkippedPhoto, placeholder: Bool) {
        if style == .json {
            emit("{\"event\": \"\(placeholder ? "placeholder" : "skipped")\", \"path\": \(jsonStringLiteral(photo.path)), "
                 + "\"reason\": \(jsonStringLiteral(photo.commandLineReason))}")
            return
        }
        guard !quiet else { return }
        if !verbose {
            let reason = photo.commandLineReason
            lock.withLock {
                tally.add(placeholder ? .placeholder : .skipped, reason: reasonClass(reason, path: photo.path), path: photo.path, said: reason)
            }
            return
        }
        warning(Self.photoLine(placeholder ? .placeholder : .skipped, path: photo.path, reason: photo.commandLineReason))
    }

    public func photoWarning(_ path: String, _ message: String) {
        if style != .json && !quiet && !verbose {
            lock.withLock { tally.add(.photoWarning, reason: reasonClass(message, path: path), path: path, said: message) }
            return
        }
        warning(Self.photoLine(.photoWarning, path: path, reason: message))
    }

    /// The warning for one photo of `kind`.
    static func photoLine(_ kind: ReasonTally.Kind, path: String, reason: String) -> String {
        switch kind {
        case .skipped: return "skipping \(shown(path)): \(reason)"
        case .placeholder: return "\(shown(path)): \(reason); drawn as a placeholder"
        case .photoWarning, .duplicate: return "\(shown(path)): \(reason)"
        }
    }

    /// One reason's line: its photo alone, or how many, what they have in common and the first
    /// few names.
    static func groupLine(_ group: ReasonTally.Group) -> String {
        if group.count == 1, let path = group.names.first, let said = group.said {
            return photoLine(group.kind, path: path, reason: said)
        }
        let more = group.count - group.names.count
        let names = group.names.map(shown).joined(separator: ", ") + (more > 0 ? " and \(formatCount(more)) more (--verbose names every one)" : "")
        let files = "\(formatCount(group.count)) files"
        // The first photo's own words when every photo of the group said the same, else what
        // they have in common (numbers as N).
        let reason = group.said ?? group.reason
        switch (group.kind, reason) {
        case (.skipped, let reason?): return "skipping \(files): \(reason): \(names)"
        case (.skipped, nil): return "skipping \(files) for other reasons: \(names)"
        case (.placeholder, let reason?): return "\(formatCount(group.count)) photos drawn as placeholders: \(reason): \(names)"
        case (.placeholder, nil): return "\(formatCount(group.count)) photos drawn as placeholders for other reasons: \(names)"
        case (.photoWarning, let reason?): return "\(formatCount(group.count)) photos drawn with a warning: \(reason): \(names)"
        case (.photoWarning, nil), (.duplicate, _): return "\(formatCount(group.count)) photos drawn with other warnings: \(names)"
        }
    }

    public func duplicate(_ path: String, sameAs: String) {
        if style == .json {
            emit("{\"event\": \"duplicate\", \"path\": \(jsonStringLiteral(path)), \"same_as\": \(jsonStringLiteral(sameAs))}")
        }
        guard !quiet else { return }
        if !verbose {
            let count = lock.withLock { tally.add(.duplicate, reason: "", path: "", said: "") }
            guard count <= Self.namedPerReason else { return }
        }
        writeResult(duplicateLine(path, sameAs: sameAs))
    }

    public func summarise() {
        let groups = lock.withLock { () -> [ReasonTally.Group] in
            defer { tally.removeAll() }
            return tally.groups
        }
        for group in groups {
            if group.kind == .duplicate {
                guard group.count > Self.namedPerReason else { continue }
                let all = "(\(formatCount(group.count)) in all; --verbose names every one)"
                writeResult("duplicate   and \(formatCount(group.count - Self.namedPerReason)) more \(all)")
            } else {
                warning(Self.groupLine(group))
            }
        }
    }

    public func phase(_ phase: Phase) {
        summarise()
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
            let eta = Report.eta(phase, done: done, total: total, seconds: seconds).map { formatDecimal($0, places: 1) } ?? "null"
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
        summarise()
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

/// How many photos of each reason a console has reported since its last summary, in the order
/// the reasons came: at most `limit` reasons, the rest counted as other reasons (a nil reason),
/// so its size does not grow with the photos or the variety of the messages.
struct ReasonTally {
    enum Kind: Hashable { case skipped, placeholder, photoWarning, duplicate }

    struct Group: Equatable {
        let kind: Kind
        /// The reason class (`reasonClass`); nil: the reasons past the limit.
        let reason: String?
        var count: Int
        /// The first `pathsKept` photos' paths.
        var names: [String] = []
        /// What every photo of the group said, while they all said the same; nil once two differ.
        var said: String?
    }

    /// Paths kept a group.
    static let pathsKept = 3

    private struct Key: Hashable {
        let kind: Kind
        let reason: String?
    }

    let limit: Int
    private(set) var groups: [Group] = []
    private var indices: [Key: Int] = [:]
    /// Reasons kept apart so far (the other-reasons groups not counted).
    private var named = 0

    init(limit: Int) { self.limit = limit }

    /// One more photo of `kind` for `reason` (its class), at `path`, which said `said`; how many
    /// its group holds now.
    @discardableResult
    mutating func add(_ kind: Kind, reason: String, path: String = "", said: String = "") -> Int {
        var key = Key(kind: kind, reason: reason)
        if indices[key] == nil && named >= limit { key = Key(kind: kind, reason: nil) }
        if let index = indices[key] {
            groups[index].count += 1
            if groups[index].names.count < Self.pathsKept { groups[index].names.append(path) }
            if groups[index].said != said { groups[index].said = nil }
            return groups[index].count
        }
        if key.reason != nil { named += 1 }
        indices[key] = groups.count
        groups.append(Group(kind: kind, reason: key.reason, count: 1, names: [path], said: said))
        return 1
    }

    mutating func removeAll() {
        groups.removeAll()
        indices.removeAll()
        named = 0
    }
}

/// What a reason says whatever the file: `path` and its name as FILE, and numbers as N (a
/// truncated photo's "ends after 12 of 400 rows", the memory a photo needs), so one kind of
/// failure is one group. Numbers inside words (AV1, H.264) stay. At most about 200 characters,
/// cut between words and marked "...": a message may quote a file's own bytes.
func reasonClass(_ reason: String, path: String) -> String {
    var text = String(reason.prefix(1000))
    if !path.isEmpty { text = text.replacingAll(path, with: "FILE") }
    if let name = path.split(separator: "/").last, name.count >= 2 { text = text.replacingAll(String(name), with: "FILE") }
    let characters = Array(text)
    var out = ""
    var index = 0
    while index < characters.count && out.count < 200 {
        let character = characters[index]
        let previous = out.last
        // A digit after a letter is part of a word (AV1, x265), but "12x400" is two numbers.
        let inWord = previous.map { $0.isLetter && !($0 == "x" && out.dropLast().hasSuffix("N")) } ?? false
        guard isDigit(character) && !inWord else {
            out.append(character)
            index += 1
            continue
        }
        // One number: 0xd9, 4.02, 12,000 (a full stop ending a sentence after a number is rare in a reason).
        if character == "0", index + 2 < characters.count, characters[index + 1] == "x", characters[index + 2].isHexDigit {
            index += 2
            while index < characters.count && characters[index].isHexDigit { index += 1 }
        } else {
            while index < characters.count
                    && (isDigit(characters[index])
                        || ((characters[index] == "." || characters[index] == ",") && index + 1 < characters.count && isDigit(characters[index + 1]))) {
                index += 1
            }
        }
        out.append("N")
    }
    // Cut at the last space before the limit, not inside a word ("... or more to dra").
    if index < characters.count, let space = out.lastIndex(of: " ") {
        out = String(out[..<space]) + " ..."
    }
    return out
}

private func isDigit(_ character: Character) -> Bool { character.isASCII && character.isNumber }

/// 12345 → "12,345": counts people read in a summary line.
func formatCount(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (index, digit) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
        out.append(digit)
    }
    return (value < 0 ? "-" : "") + out
}

extension String {
    /// Every occurrence of `target` replaced (no Foundation in this module).
    func replacingAll(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            out += rest[..<range.lowerBound]
            out += replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }
}

/// The width of the terminal on standard error, or 80.
public func standardErrorColumns() -> Int {
    var size = winsize()
    guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
    return Int(size.ws_col)
}
