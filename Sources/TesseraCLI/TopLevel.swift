// TopLevel.swift — `tessera`'s subcommands, exit codes and top-level help.
import Tessera

/// The version: the one place it is written (the package, the manual and `--version` read it
/// here; CHANGELOG.md's newest heading must name it, which a test checks).
public let tesseraVersion = "0.6.20"
/// When this version was made, for the manual page's header.
public let tesseraReleaseDate = "2026-12-01"

/// The process exit codes, documented in `tessera --help` and the README. An Error too, so a
/// step of the tool can fail with the code it wants.
public enum ExitCode: Int32, Error, Sendable {
    case success = 0
    /// The render failed (I/O error, encoder error); nothing was written under the output name.
    case renderFailed = 1
    /// The command line is wrong.
    case usage = 2
    /// No usable photo, or a photo skipped (a mosaic's cell off its constraints) under --strict.
    case badInput = 3
    /// Not enough disk space or memory budget, found before rendering.
    case insufficientResources = 4
    /// Stopped by SIGHUP (128 + 1): the terminal went away.
    case hungUp = 129
    /// Interrupted by SIGINT (128 + 2).
    case interrupted = 130
    /// Terminated by SIGTERM (128 + 15).
    case terminated = 143

    /// The exit codes as `tessera --help` and the README's table give them (one source: a test
    /// compares the README with this).
    public static let documented: [(code: String, meaning: String)] = [
        ("0", "the JPEG and/or the pyramid was written"),
        ("1", "the render failed (I/O or encoder error); nothing was written under the output names"),
        ("2", "bad command line or settings, found before any photo is read: an unknown or conflicting flag, an output that cannot be written, a --target that is missing or not a file (a folder, a FIFO), a JPEG over 65,500 px a side"),
        ("3", "no usable photo found, or a photo would be skipped (a mosaic: a cell could not meet its constraints) under --strict; for join, a part missing, duplicated, truncated, damaged (a checksum), not a readable file or of another render"),
        ("4", "not enough disk space, inodes, memory budget or open files, found before rendering started (the message says what would fit)"),
        ("129 / 130 / 143", "hung up (SIGHUP) / interrupted (SIGINT) / terminated (SIGTERM); nothing written, temporaries removed"),
    ]

    /// The exit code for a library error.
    public init(_ error: TesseraError) {
        switch error {
        case .invalidSettings, .minUsesImpossible, .unusableOutput, .outputTooLarge, .shardedSerialEncoder, .joinOutputs, .joinPathFromParts: self = .usage
        case .noPhotos, .unreadablePhoto, .unusableParts, .tooManyPartsOpen, .noParts: self = .badInput
        // (A photo that reaches here needing more memory is a mosaic's target: the budget, not
        // the file, is what is short, and the message names the budget that reads it.)
        case .budgetTooSmall, .photoNeedsMemory, .partIndexTooLarge, .insufficientDiskSpace, .insufficientInodes: self = .insufficientResources
        case .cancelled: self = .interrupted
        case .system, .encodeFailed: self = .renderFailed
        }
    }
}

/// A parsed `tessera` invocation.
public enum Invocation: Equatable, Sendable {
    case help
    case version(json: Bool)
    /// `tessera man`: the manual page, as roff.
    case manPage
    /// `tessera completions SHELL`.
    case completions(shell: String)
    case grid(GridOptions)
    case mosaic(MosaicOptions)
    case collage(CollageOptions)
    case join(JoinOptions)
    case analyse(AnalyseOptions)
}

/// A subcommand of `tessera`: how the manual and the completions describe it, and its parser.
public struct Subcommand: Sendable {
    public let description: CommandDescription
    /// Other spellings that run it (`analyze`).
    public let aliases: [String]
    /// Parses the arguments after the command's name; the first is at position 2.
    let parse: @Sendable ([String]) throws(CommandLineError) -> Invocation
    /// What `tessera help NAME` runs: the command with --help.
    let help: Invocation

    /// Every spelling that runs it.
    var names: [String] { [description.name] + aliases }
}

public enum TopLevel {
    /// The subcommands, in the order the manual gives them.
    public static let commands: [Subcommand] = [
        Subcommand(description: CommandDescription(
                       name: "grid", summary: "lay photos out in a grid of equal cells, as one JPEG and/or a Deep Zoom pyramid",
                       synopsis: "PHOTOS... (-o OUT.jpg | --dzi | --szi | --tiff | --iiif)... (--grid CxR | --columns C) --tile-size N [options]",
                       options: GridCommand.options),
                   aliases: [], parse: { arguments throws(CommandLineError) in .grid(try GridCommand.parse(arguments)) },
                   help: .grid({ var options = GridOptions(); options.help = true; return options }())),
        Subcommand(description: CommandDescription(
                       name: "mosaic", summary: "rebuild a target picture out of the photos, matched by colour",
                       synopsis: "--target PICTURE PHOTOS... (-o OUT.jpg | --dzi | --szi | --tiff | --iiif)... [--size WxH[cm|mm|in] | --cells N | --grid CxR | --columns C] [--tile-size N] [options]",
                       options: MosaicCommand.options + MosaicCommand.renderingOptions),
                   aliases: [], parse: { arguments throws(CommandLineError) in .mosaic(try MosaicCommand.parse(arguments)) },
                   help: .mosaic({ var options = MosaicOptions(); options.render.help = true; return options }())),
        Subcommand(description: CommandDescription(
                       name: "collage", summary: "every photo once, keeping its shape, in justified rows or masonry columns",
                       synopsis: "PHOTOS... (-o OUT.jpg | --dzi | --szi | --tiff | --iiif)... [--width PX] [--row-height PX | --layout columns [--columns N]] [options]",
                       options: CollageCommand.options + CollageCommand.renderingOptions),
                   aliases: [], parse: { arguments throws(CommandLineError) in .collage(try CollageCommand.parse(arguments)) },
                   help: .collage({ var options = CollageOptions(); options.render.help = true; return options }())),
        Subcommand(description: CommandDescription(
                       name: "join", summary: "join the parts of a render run as shards (--shard K/N --shard-dir DIR) into its outputs",
                       synopsis: "DIR [options]", options: JoinCommand.options),
                   aliases: [], parse: { arguments throws(CommandLineError) in .join(try JoinCommand.parse(arguments)) },
                   help: .join({ var options = JoinOptions(); options.help = true; return options }())),
        Subcommand(description: CommandDescription(
                       name: "analyse", summary: "fill a mosaic's feature index ahead, optionally in shards",
                       synopsis: "PHOTOS... --tile-size N [--shard K/N] [options]", options: AnalyseCommand.options),
                   aliases: ["analyze"], parse: { arguments throws(CommandLineError) in .analyse(try AnalyseCommand.parse(arguments)) },
                   help: .analyse({ var options = AnalyseOptions(); options.help = true; return options }())),
    ]

    /// The words that may stand first besides the commands, each with what it does.
    static let otherWords = ["help", "man", "completions", "--help", "--version"]

    /// The subcommand `name` runs, or nil.
    static func command(named name: String) -> Subcommand? { commands.first { $0.names.contains(name) } }

    /// Parses `arguments` (without the program name).
    public static func parse(_ arguments: [String]) throws(CommandLineError) -> Invocation {
        guard let first = arguments.first else { return .help }
        switch first {
        case "-h", "--help", "help":
            guard arguments.count > 1 else { return .help }
            if let command = command(named: arguments[1]) { return command.help }
            throw CommandLineError("no help for '\(arguments[1])': the commands are grid, mosaic, collage, join and analyse (try 'tessera help grid')",
                                   argumentIndex: 2, suggestion: nearestSpelling(to: arguments[1], among: commands.flatMap(\.names)))
        case "--version", "-V":
            let rest = arguments.dropFirst()
            if rest.isEmpty { return .version(json: false) }
            if rest.count == 1 && rest.first == "--json" { return .version(json: true) }
            throw CommandLineError("--version takes only --json, got '\(rest.first!)'", argumentIndex: rest.first == "--json" ? 3 : 2)
        case "man":
            guard arguments.count == 1 else { throw CommandLineError("man takes no arguments", argumentIndex: 2) }
            return .manPage
        case "completions":
            guard arguments.count == 2, Distribution.completion(shell: arguments[1]) != nil else {
                throw CommandLineError("completions expects bash, zsh or fish, e.g. tessera completions bash > /etc/bash_completion.d/tessera",
                                       argumentIndex: 2)
            }
            return .completions(shell: arguments[1])
        default:
            if let command = command(named: first) { return try command.parse(Array(arguments.dropFirst())) }
            throw CommandLineError("unknown command '\(first)' (try 'tessera --help')", argumentIndex: 1,
                                   suggestion: nearestSpelling(to: first, among: commands.flatMap(\.names) + otherWords))
        }
    }

    /// The exit-code table for --help.
    static var exitCodeTable: String {
        ExitCode.documented.map { row in
            "  " + row.code.padding(toLength: 17) + wrap(row.meaning, indent: 19, width: 96).dropFirst(19)
        }.joined(separator: "\n")
    }

    public static let help = """
    tessera \(tesseraVersion) — giant photo grids, mosaics and collages as one JPEG and/or a Deep Zoom pyramid, on all cores, in flat memory

    USAGE
      tessera grid PHOTOS... (-o OUT.jpg | --dzi | --szi | --tiff | --iiif)... (--grid CxR | --columns C) --tile-size N [options]
      tessera mosaic --target PICTURE PHOTOS... (-o OUT.jpg | --dzi | --szi | --tiff | --iiif)... [--size WxH[cm|mm|in] | --cells N | --grid CxR] [options]
      tessera collage PHOTOS... (-o OUT.jpg | --dzi | --szi | --tiff | --iiif)... [--width PX] [--row-height PX] [options]
      tessera join DIR          the outputs of a render run as shards (--shard K/N --shard-dir DIR)
      tessera analyse PHOTOS... --tile-size N [--shard K/N]    fill a mosaic's feature index ahead
      tessera help grid         every option of grid, with examples
      tessera help mosaic       every option of mosaic, with examples
      tessera help collage      every option of collage, with examples
      tessera help join         sharded renders: the join, and recipes for Slurm and GNU parallel
      tessera help analyse      analysing a large library ahead, in shards
      tessera man               the manual page (roff: tessera man | man -l -)
      tessera completions SHELL the completion script for bash, zsh or fish
      tessera --version         the version, its commit and the image libraries' (--json for scripts)

    The canvas is never held in memory: it is rendered in horizontal stripes of a temporary
    file, filled and JPEG-compressed by all cores, and joined in order with restart markers into
    one baseline JPEG. A 30,000 x 40,050 px grid needs about 40 MB of memory and a few stripes
    of temporary space. With --dzi the same stripes also feed a Deep Zoom pyramid, level by
    level, with a viewer (NAME.html) that opens from the disk; about 55 MB for that grid.

    Photos may be JPEG, PNG, WebP, HEIF/HEIC, AVIF, GIF, TIFF or the preview in a camera RAW
    file, recognised by content; each is decoded at the size it is drawn, turned upright and
    converted to sRGB from its colour profile.

    EXAMPLES
      tessera grid ~/Pictures -o wall.jpg --grid 200x267 --tile-size 150
      tessera mosaic --target portrait.jpg ~/Pictures -o mosaic.jpg --size 60x90cm
      tessera collage ~/Pictures -o wall.jpg --width 30000 --row-height 300
      tessera grid ~/Pictures -o wall.jpg --dzi wall.dzi --grid 200x267 --tile-size 150   # + wall.html
      mkdir -p parts; parallel -j2 tessera grid ~/Pictures -o wall.jpg --grid 200x267 --tile-size 150 --shard {}/8 --shard-dir parts ::: $(seq 8)
      tessera join parts                                      # the same wall.jpg, from 8 shards

    EXIT CODES
    \(exitCodeTable)
    """
}
