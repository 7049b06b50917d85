// JoinOptions.swift — `tessera join` and `tessera analyse`: the commands a sharded run adds.
import Tessera

/// A parsed `tessera join` command line.
public struct JoinOptions: Equatable, Sendable {
    public var directory = ""
    /// Join parts as they appear, waiting at most this long for each (`--wait`); nil: all now.
    public var waitSeconds: Double?
    public var workers: Int?
    /// The join's memory budget (`--max-memory`).
    public var maxMemoryBytes = 64 << 20
    /// The outputs (-o, --dzi); empty: the paths the parts name, which the join only creates.
    public var destinations = JoinDestinations()
    public var progress = ProgressStyle.bar
    public var quiet = false
    public var help = false
    public init() {}
}

/// A parsed `tessera analyse` command line.
public struct AnalyseOptions: Equatable, Sendable {
    public var photoPaths: [String] = []
    public var cellWidth = 0
    public var cellHeight = 0
    public var subCells = 3
    public var cacheDirectory: String?
    public var shard: ShardSpec?
    public var settings = RenderSettings()
    public var selection = PhotoSelection()
    public var progress = ProgressStyle.bar
    public var quiet = false
    public var help = false
    public init() {}
}

/// One option as the command line gave it (`scanArguments`).
struct ScannedOption {
    let spec: OptionSpec
    /// As spelled (`-q` or `--quiet`); `spec.names.last` is its long name.
    let name: String
    let value: String
    /// Where the option is on the command line, and where its value is.
    let position: Int
    let valuePosition: Int
    /// The long names of the options before this one.
    let earlier: Set<String>
}

/// Every command's loop over its arguments: positional arguments (everything after `--`
/// too), `--name value`, `--name=value` and flags, from the command's option table. Unknown
/// options, a missing or unexpected value, and an option with a value given twice (only
/// `--exclude` may repeat: a second value would silently replace the first) are refused.
func scanArguments(_ arguments: [String], firstIndex: Int, command: String, options: [OptionSpec],
                   positional: (String) -> Void,
                   handle: (ScannedOption) throws(CommandLineError) -> Void) throws(CommandLineError) {
    var index = 0
    var onlyPositional = false
    var seen = Set<String>()
    while index < arguments.count {
        let argument = arguments[index]
        let position = firstIndex + index
        if onlyPositional || !argument.hasPrefix("-") || argument == "-" {
            positional(argument)
            index += 1
            continue
        }
        if argument == "--" {
            onlyPositional = true
            index += 1
            continue
        }
        var name = argument
        var inlineValue: String?
        if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
            name = String(argument[..<equals])
            inlineValue = String(argument[argument.index(after: equals)...])
        }
        guard let spec = options.first(where: { $0.names.contains(name) }) else {
            throw CommandLineError("unknown option \(name) (see 'tessera \(command) --help')", argumentIndex: position)
        }
        var value = ""
        if spec.valueName != nil {
            if let inlineValue {
                value = inlineValue
            } else {
                guard index + 1 < arguments.count else {
                    throw CommandLineError("\(name) needs a value: \(name) \(spec.valueName!)", argumentIndex: position)
                }
                index += 1
                value = arguments[index]
            }
        } else if inlineValue != nil {
            throw CommandLineError("\(name) takes no value", argumentIndex: position)
        }
        let key = spec.names.last!
        if spec.valueName != nil && key != "--exclude" && seen.contains(key) {
            throw CommandLineError("\(name) is given twice; give it once", argumentIndex: position)
        }
        try handle(ScannedOption(spec: spec, name: name, value: value, position: position,
                                 valuePosition: inlineValue == nil ? firstIndex + index : position, earlier: seen))
        seen.insert(key)
        index += 1
    }
}

/// The output options `join` and `analyse` share (`--progress`, `--no-progress`, `--quiet`,
/// `--help`); false for any other.
private func takeOutputOption(_ option: ScannedOption, progress: inout ProgressStyle, quiet: inout Bool,
                              help: inout Bool) throws(CommandLineError) -> Bool {
    switch option.spec.names.last! {
    case "--progress": progress = try progressStyle(option.value, option.valuePosition)
    case "--no-progress": progress = .none
    case "--quiet": quiet = true
    case "--help": help = true
    default: return false
    }
    return true
}

private func wholeNumber(_ name: String, _ value: String, _ range: ClosedRange<Int>, _ position: Int) throws(CommandLineError) -> Int {
    guard let number = Int(value), range.contains(number) else {
        throw CommandLineError("\(name) expects a whole number in \(range.lowerBound)...\(range.upperBound), got '\(value)'",
                               argumentIndex: position)
    }
    return number
}

private func progressStyle(_ value: String, _ position: Int) throws(CommandLineError) -> ProgressStyle {
    guard let style = ProgressStyle(rawValue: value) else {
        throw CommandLineError("--progress expects bar, json or none, got '\(value)'", argumentIndex: position)
    }
    return style
}

public enum JoinCommand {
    public static let options: [OptionSpec] = [
        OptionSpec(names: ["-o", "--output"], valueName: "OUT.jpg", help: "Write the JPEG here, replacing a file already there (checked as a render checks -o). Without -o and --dzi the join writes where the shards were told to, but only if nothing is there yet: those paths come from the parts, which anyone who can write the shard folder can change."),
        OptionSpec(names: ["--dzi"], valueName: "DIR/NAME.dzi", help: "Write the pyramid here (as -o; with both outputs in the parts, give both)."),
        OptionSpec(names: ["--wait"], valueName: "SECONDS", help: "Start before the shards are done: take parts 1...N in order as they appear, each checked before it is copied, waiting at most SECONDS for the next (then exit 3, writing nothing). Run beside the shards on one machine, the join's copying overlaps their rendering. Without it, every part must be there and all are checked first."),
        OptionSpec(names: ["--workers"], valueName: "N", help: "Threads encoding the pyramid's lowest levels, the join's only encoding (default: the number of cores)."),
        OptionSpec(names: ["--max-memory"], valueName: "SIZE", help: "Budget for the levels of the pyramid the join builds and the tiles it copies (default 64MiB, at least 32M): a part whose sizes need more is refused before anything is written (exit 4, naming what would fit)."),
        OptionSpec(names: ["--progress"], valueName: "bar|json|none", help: "How progress shows on stderr; json ends with a summary event (shards, sizes, time, peak RSS)."),
        OptionSpec(names: ["--no-progress"], valueName: nil, help: "The same as --progress none."),
        OptionSpec(names: ["-q", "--quiet"], valueName: nil, help: "Print only errors."),
        OptionSpec(names: ["-h", "--help"], valueName: nil, help: "Show this help."),
    ]

    public static func parse(_ arguments: [String], firstIndex: Int = 2) throws(CommandLineError) -> JoinOptions {
        var options = JoinOptions()
        var folders: [String] = []
        try scanArguments(arguments, firstIndex: firstIndex, command: "join", options: Self.options,
                          positional: { folders.append($0) }) { option throws(CommandLineError) in
            if try takeOutputOption(option, progress: &options.progress, quiet: &options.quiet, help: &options.help) { return }
            let (name, value, position) = (option.spec.names.last!, option.value, option.valuePosition)
            switch name {
            case "--workers": options.workers = try wholeNumber(name, value, RenderSettings.workerCounts, position)
            case "--max-memory":
                guard let bytes = parseByteSize(value), bytes >= 32 << 20 else {
                    throw CommandLineError("--max-memory expects a size of at least 32M like 64M, 512MiB, 2G, got '\(value)'", argumentIndex: position)
                }
                options.maxMemoryBytes = bytes
            case "--output": options.destinations.jpegPath = value
            case "--dzi":
                guard RenderOutput.isDeepZoomPath(value) else {
                    throw CommandLineError("--dzi expects a path ending in NAME.dzi, like out/wall.dzi, got '\(value)'", argumentIndex: position)
                }
                options.destinations.deepZoomPath = value
            case "--wait": options.waitSeconds = Double(try wholeNumber(name, value, 1...604_800, position))
            default: fatalError("option table and switch disagree on \(name)")
            }
        }
        if options.help { return options }
        guard folders.count == 1 else {
            throw CommandLineError(folders.isEmpty ? "join needs the shard folder: tessera join DIR"
                                                   : "join takes one shard folder, got \(folders.count): \(folders.joined(separator: " "))")
        }
        options.directory = folders[0]
        return options
    }


    public static let help: String = """
    tessera join — the outputs of a sharded render, from its part files

    USAGE
      tessera join DIR [options]

    DIR is the --shard-dir every shard wrote its part to. The join checks that the parts are
    shards 1...N of one render (the same flags and inputs: each part carries the render's
    fingerprint), each present once and complete, and that the disk has room; then it writes
    the JPEG and/or the pyramid, byte for byte the single-process render's (with --encoder
    parallel), each appearing only when complete. A part is untrusted: every record's checksum
    is verified first, and a missing, duplicated, truncated, damaged or foreign part is named,
    and nothing is written (exit 3). The outputs go where -o and --dzi say; without them, to the
    paths the shards were given, only if nothing is there yet (exit 2 otherwise). The JPEG
    is a streaming copy of the shards' stripes (I/O only); the pyramid's lowest levels are
    built from the small pictures the shards left. The parts are kept: remove DIR when done.

    OPTIONS

    """ + describe(options) + """

    EXAMPLES
      # 8 shards on this machine, 2 at a time (GNU parallel), then the join
      parallel -j2 tessera grid ~/Pictures -o wall.jpg --grid 200x267 --tile-size 150 \\
          --shard {}/8 --shard-dir parts ::: 1 2 3 4 5 6 7 8
      tessera join parts

      # the same, the join copying each part as soon as it appears
      tessera join parts --wait 600 & parallel -j2 tessera grid ... --shard {}/8 --shard-dir parts ::: 1 2 3 4 5 6 7 8; wait

      # a Slurm job array and a join that runs when every shard succeeded
      jid=$(sbatch --parsable --array=1-16 --wrap 'tessera grid /data/photos --dzi /data/out/wall.dzi \\
          --grid 1000x1000 --tile-size 150 --shard $SLURM_ARRAY_TASK_ID/16 --shard-dir /data/parts')
      sbatch --dependency=afterok:$jid --wrap 'tessera join /data/parts'
    """
}

public enum AnalyseCommand {
    public static let options: [OptionSpec] = [
        OptionSpec(names: ["--tile-size"], valueName: "N|WxH", help: "The mosaic's cell size (required): the features are kept per cell shape, so give the one the mosaic will use."),
        OptionSpec(names: ["--sub-cells"], valueName: "K", help: "Colour features per cell, K x K (3...8, default 3): as the mosaic will use."),
        OptionSpec(names: ["--cache-dir"], valueName: "DIR", help: "The feature index's folder (default $XDG_CACHE_HOME/tessera or ~/.cache/tessera); on a cluster, a folder the shards and the mosaic share."),
        OptionSpec(names: ["--shard"], valueName: "K/N", help: "Analyse only share K of N of the photos (in path order) into an index file of this shard's own, features-...shard-K-of-N.tsv, which every later run merges on load: a job array analyses a million photos, each task its share, with no two writing one file."),
        OptionSpec(names: ["--workers"], valueName: "N", help: "Threads decoding photos (default: the number of cores)."),
        OptionSpec(names: ["--max-memory"], valueName: "SIZE", help: "Budget for the decoders (default 64MiB)."),
        OptionSpec(names: ["--exclude"], valueName: "GLOB", help: "Leave out files and folders matching this pattern (repeatable)."),
        OptionSpec(names: ["--include-hidden"], valueName: nil, help: "Also search hidden files and folders."),
        OptionSpec(names: ["--progress"], valueName: "bar|json|none", help: "How progress shows on stderr."),
        OptionSpec(names: ["--no-progress"], valueName: nil, help: "The same as --progress none."),
        OptionSpec(names: ["-q", "--quiet"], valueName: nil, help: "Print only errors."),
        OptionSpec(names: ["-h", "--help"], valueName: nil, help: "Show this help."),
    ]

    public static func parse(_ arguments: [String], firstIndex: Int = 2) throws(CommandLineError) -> AnalyseOptions {
        var options = AnalyseOptions()
        var sawTileSize = false
        try scanArguments(arguments, firstIndex: firstIndex, command: "analyse", options: Self.options,
                          positional: { options.photoPaths.append($0) }) { option throws(CommandLineError) in
            if try takeOutputOption(option, progress: &options.progress, quiet: &options.quiet, help: &options.help) { return }
            let (name, value, position) = (option.spec.names.last!, option.value, option.valuePosition)
            switch name {
            case "--tile-size":
                if let single = Int(value), single >= 1, single <= jpegMaxDimension {
                    (options.cellWidth, options.cellHeight) = (single, single)
                } else if let (w, h) = parsePair(value), (1...jpegMaxDimension).contains(w), (1...jpegMaxDimension).contains(h) {
                    (options.cellWidth, options.cellHeight) = (w, h)
                } else {
                    throw CommandLineError("--tile-size expects pixels like 150 or 200x150, got '\(value)'", argumentIndex: position)
                }
                sawTileSize = true
            case "--sub-cells": options.subCells = try wholeNumber(name, value, 3...8, position)
            case "--cache-dir": options.cacheDirectory = value
            case "--shard":
                guard let spec = ShardSpec.parse(value) else {
                    throw CommandLineError("--shard expects K/N with 1 <= K <= N <= \(ShardSpec.maxCount), like 3/8, got '\(value)'",
                                           argumentIndex: position)
                }
                options.shard = spec
            case "--workers": options.settings.workers = try wholeNumber(name, value, RenderSettings.workerCounts, position)
            case "--max-memory":
                guard let bytes = parseByteSize(value), bytes >= 1 << 20 else {
                    throw CommandLineError("--max-memory expects a size of at least 1M like 64M, got '\(value)'", argumentIndex: position)
                }
                options.settings.maxMemoryBytes = bytes
            case "--exclude": options.selection.excludes.append(value)
            case "--include-hidden": options.selection.includeHidden = true
            default: fatalError("option table and switch disagree on \(name)")
            }
        }
        if options.help { return options }
        guard !options.photoPaths.isEmpty else { throw CommandLineError("no photos given: tessera analyse PHOTOS... --tile-size N") }
        guard sawTileSize else { throw CommandLineError("--tile-size N is required: the mosaic's cell size (features are kept per cell shape)") }
        return options
    }


    public static let help: String = """
    tessera analyse — fill the mosaic feature index ahead of time, in shards if the library is large

    USAGE
      tessera analyse PHOTOS... --tile-size N [--sub-cells K] [--cache-dir DIR] [--shard K/N] [options]

    A mosaic analyses every photo (its K x K mean colours, at the cell's shape) before matching,
    and keeps the results in a feature index so that later runs skip it. For a large library,
    analyse it beforehand, and split the work: with --shard K/N each task analyses its share of
    the photos (in path order) into its own index file beside the main one; every mosaic run
    merges them when it loads the index. Photos already analysed (unchanged since) are skipped.

    OPTIONS

    """ + describe(options) + """

    EXAMPLES
      # a Slurm job array of 64 tasks over a million photos, then the mosaic
      sbatch --array=1-64 --wrap 'tessera analyse /data/photos --tile-size 150 --cache-dir /data/index --shard $SLURM_ARRAY_TASK_ID/64'
      tessera mosaic --target portrait.jpg /data/photos --cache-dir /data/index -o m.jpg --grid 400x400 --tile-size 150
    """
}
