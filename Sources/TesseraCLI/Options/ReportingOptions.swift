// ReportingOptions.swift — how a command reports (--progress, --no-progress, --quiet) and
// --help: the options every command takes, declared once.

/// A command's options that say how it reports; every command's options conform.
protocol Reporting {
    var progress: ProgressStyle { get set }
    /// Only errors (`--quiet`).
    var quiet: Bool { get set }
    var help: Bool { get set }
}

extension GridOptions: Reporting {}
extension JoinOptions: Reporting {}
extension AnalyseOptions: Reporting {}

enum ReportingOptions {
    /// --progress, --no-progress, -q and -h, in the words of a command (`progressHelp`,
    /// `quietHelp`). `refusingContradictions`: a render refuses --progress bar with --no-progress
    /// rather than take the last; join and analyse take the last.
    static func table<Options: Reporting>(progressHelp: String, quietHelp: String,
                                          refusingContradictions: Bool) -> [Option<Options>] {
        [
            Option("--progress", value: "bar|json|none", help: progressHelp) { options, given throws(CommandLineError) in
                let style = try given.choice(ProgressStyle.self, "--progress expects bar, json or none, got '\(given.value)'")
                if refusingContradictions && given.earlier.contains("--no-progress") && style != .none {
                    throw CommandLineError("--progress \(given.value) contradicts --no-progress: give one", argumentIndex: given.position)
                }
                options.progress = style
            },
            Option(flag: "--no-progress", help: "The same as --progress none.") { options, given throws(CommandLineError) in
                if refusingContradictions && given.earlier.contains("--progress") && options.progress != .none {
                    throw CommandLineError("--no-progress contradicts --progress \(options.progress.rawValue): give one", argumentIndex: given.position)
                }
                options.progress = .none
            },
            Option(flag: "-q", "--quiet", help: quietHelp) { options, _ in options.quiet = true },
            Option(flag: "-h", "--help", help: "Show this help.") { options, _ in options.help = true },
        ]
    }
}
