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
    /// As a render's (`GridOptions.photoLists`, `--photos-from`).
    public var photoLists: [PhotoList] = []
    public var photoListsNulSeparated = false
    /// As a render's (`--verbose`).
    public var verbose = false
    public var cellWidth = 0
    public var cellHeight = 0
    public var subCells = 3
    public var cacheDirectory: String?
    public var shard: ShardSpec?
    public var settings = RenderSettings()
    /// As a render's (`GridOptions.automaticMemory`).
    public var automaticMemory = true
    public var selection = PhotoSelection()
    public var progress = ProgressStyle.bar
    public var quiet = false
    public var help = false
    public init() {}
}

public enum JoinCommand {
    /// join's parse state: the options, and the folders named (one is taken).
    struct Parse: Sendable {
        var options = JoinOptions()
        var folders: [String] = []
    }

    static let ownTable: [Option<JoinOptions>] = [
        Option("-o", "--output", value: "OUT.jpg", help: "Write the JPEG here, replacing a file already there (checked as a render checks -o). Without -o and --dzi the join writes where the shards were told to, but only if nothing is there yet: those paths come from the parts, which anyone who can write the shard folder can change.") { options, given in options.destinations.jpegPath = given.value },
        Option("--dzi", value: "DIR/NAME.dzi", help: "Write the pyramid here (as -o; with both outputs in the parts, give both).") { options, given throws(CommandLineError) in
            guard RenderOutput.isDeepZoomPath(given.value) else {
                throw given.refusal("--dzi expects a path ending in NAME.dzi, like out/wall.dzi, got '\(given.value)'")
            }
            options.destinations.deepZoomPath = given.value
        },
        Option("--szi", value: "DIR/NAME.szi", help: "Also (or instead of --dzi) write the parts' pyramid as one file, as a render's --szi does (the tiles are the same).") { options, given throws(CommandLineError) in
            guard RenderOutput.isDeepZoomArchivePath(given.value) else {
                throw given.refusal("--szi expects a path ending in NAME.szi, like out/wall.szi, got '\(given.value)'")
            }
            options.destinations.archivePath = given.value
        },
        Option("--iiif", value: "DIR", help: "Also (or instead of --dzi) write the parts' pyramid as IIIF level-0 tiles in the folder DIR, as a render's --iiif does; needs --iiif-id, and shards rendered with --dzi-overlap 0.") { options, given throws(CommandLineError) in
            guard !given.value.isEmpty else { throw given.refusal("--iiif expects a folder to create, like out/wall") }
            try refuseDotFolder(given)
            options.destinations.iiifPath = given.value.count > 1 && given.value.hasSuffix("/") ? String(given.value.dropLast()) : given.value
        },
        Option("--iiif-id", value: "URL", help: "The address the --iiif folder will be served at, without a trailing slash (info.json's id).") { options, given throws(CommandLineError) in
            if let problem = IIIFAddress.problem(given.value) {
                throw given.refusal("--iiif-id expects an http or https URL without a trailing slash, query or fragment, like "
                                    + "https://example.org/iiif/wall; got '\(given.value)': \(problem)")
            }
            options.destinations.iiifIdentifier = given.value
        },
        Option("--tiff", value: "FILE.tif", help: "Write the parts' TIFF here (as -o; the shards were given --tiff). With other outputs in the parts, give those too.") { options, given throws(CommandLineError) in
            guard RenderOutput.isTIFFPath(given.value) else {
                throw given.refusal("--tiff expects a path ending in NAME.tif or NAME.tiff, like out/wall.tif, got '\(given.value)'")
            }
            options.destinations.tiffPath = given.value
        },
        Option("--manifest", value: "FILE", help: "Write the manifest here (as -o; the shards were given --manifest): CSV, or JSON for a name ending in .json, as the shards were given. A JSON manifest lists the placeholders and photos drawn in part of every shard.") { options, given throws(CommandLineError) in
            guard !given.value.isEmpty else { throw given.refusal("--manifest expects a file to write, like out/wall.json") }
            options.destinations.manifestPath = given.value
        },
        Option("--wait", value: "SECONDS", help: "Start before the shards are done: take parts 1...N in order as they appear (one still being copied in, once it ends), each checked before it is copied, waiting at most SECONDS for the next (then exit 3, writing nothing). Run beside the shards on one machine, the join's copying overlaps their rendering. Without it, every part must be there and all are checked first.") { options, given throws(CommandLineError) in
            options.waitSeconds = Double(try given.integer(1...604_800))
        },
        Option("--workers", value: "N", help: "Threads encoding the pyramid's lowest levels, the join's only encoding (default: the number of cores).") { options, given throws(CommandLineError) in
            options.workers = try given.integer(RenderSettings.workerCounts)
        },
        Option("--max-memory", value: "SIZE", help: "Budget for the levels of the pyramid the join builds and the tiles it copies (default 64MiB, at least 32M): a part whose sizes need more is refused before anything is written (exit 4, naming what would fit).") { options, given throws(CommandLineError) in
            guard let bytes = parseByteSize(given.value), bytes >= 32 << 20 else {
                throw given.refusal("--max-memory expects a size of at least 32M like 64M, 512MiB, 2G, got '\(given.value)'")
            }
            options.maxMemoryBytes = bytes
        },
    ]

    static let table: [Option<Parse>] = (ownTable
        + ReportingOptions.table(progressHelp: "How progress shows on stderr; json ends with a summary event (shards, sizes, time, peak RSS).", quietHelp: "Print only errors.", refusingContradictions: false))
        .map { $0.lifted(\Parse.options) }

    /// join's options, as its help, the manual and the completions give them.
    public static let options: [OptionSpec] = table.specs()

    public static func parse(_ arguments: [String], firstIndex: Int = 2) throws(CommandLineError) -> JoinOptions {
        var state = Parse()
        try parseArguments(arguments, firstIndex: firstIndex, command: "join", table: table, into: &state) { $0.folders.append($1) }
        var options = state.options
        let folders = state.folders
        if options.help { return options }
        guard folders.count == 1 else {
            throw CommandLineError(folders.isEmpty ? "join needs the shard folder: tessera join DIR"
                                                   : "join takes one shard folder, got \(folders.count): \(folders.joined(separator: " "))")
        }
        options.directory = folders[0]
        let destinations = options.destinations
        if destinations.iiifPath != nil && destinations.iiifIdentifier == nil {
            throw CommandLineError("--iiif needs --iiif-id URL: the address the folder will be served at (info.json's id)")
        }
        if destinations.iiifIdentifier != nil && destinations.iiifPath == nil {
            throw CommandLineError("--iiif-id is the address of the --iiif folder: give --iiif DIR too")
        }
        return options
    }

    public static let help: String = """
    tessera join — the outputs of a sharded render, from its part files

    USAGE
      tessera join DIR [options]

    DIR is the --shard-dir every shard wrote its part to. The join checks that the parts are
    shards 1...N of one render (the same flags and inputs: each part carries the render's
    fingerprint), each present once and complete, and that the disk has room; then it writes
    the JPEG, the pyramid and the TIFF the shards were given, byte for byte the single-process
    render's JPEG and tiles (with --encoder parallel), each appearing only when complete. A part is untrusted: every record's checksum
    is verified first, and a missing, duplicated, truncated, damaged or foreign part is named,
    and nothing is written (exit 3). The outputs go where -o, --dzi and --tiff say; without them, to the
    paths the shards were given, only if nothing is there yet (exit 2 otherwise). The JPEG
    is a streaming copy of the shards' stripes (I/O only); the pyramid's lowest levels are
    built from the small pictures the shards left. The parts are kept: remove DIR when done.

    OPTIONS

    """ + describe(options) + """

    EXAMPLES
      # 8 shards on this machine, 2 at a time (GNU parallel), then the join
      mkdir -p parts
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
    /// analyse's parse state: the options, and whether --tile-size came.
    struct Parse: Sendable {
        var options = AnalyseOptions()
        var sawTileSize = false
    }

    static let ownTable: [Option<Parse>] = [
        Option("--tile-size", value: "N|WxH", help: "The mosaic's cell size (required): the features are kept per cell shape, so give the one the mosaic will use.") { state, given throws(CommandLineError) in
            if let single = Int(given.value), single >= 1, single <= jpegMaxDimension {
                (state.options.cellWidth, state.options.cellHeight) = (single, single)
            } else if let (w, h) = parsePair(given.value), (1...jpegMaxDimension).contains(w), (1...jpegMaxDimension).contains(h) {
                (state.options.cellWidth, state.options.cellHeight) = (w, h)
            } else {
                throw given.refusal("--tile-size expects pixels like 150 or 200x150, got '\(given.value)'")
            }
            state.sawTileSize = true
        },
        Option("--sub-cells", value: "K", help: "Colour features per cell, K x K (3...8, default 3): as the mosaic will use.") { state, given throws(CommandLineError) in
            state.options.subCells = try given.integer(3...8)
        },
        Option("--cache-dir", value: "DIR", help: "The feature index's folder (default $XDG_CACHE_HOME/tessera or ~/.cache/tessera); on a cluster, a folder the shards and the mosaic share.") { state, given in state.options.cacheDirectory = given.value },
        Option("--shard", value: "K/N", help: "Analyse only share K of N of the photos (in path order) into an index file of this shard's own, features-...shard-K-of-N.idx (and its journal), which every later run merges on load: a job array analyses a million photos, each task its share, with no two writing one file.") { state, given throws(CommandLineError) in
            state.options.shard = try shardSpec(given)
        },
        Option("--workers", value: "N", help: "Threads decoding photos (default: the number of cores).") { state, given throws(CommandLineError) in
            state.options.settings.workers = try given.integer(RenderSettings.workerCounts)
        },
        Option("--max-memory", value: "SIZE|auto", help: "Budget for the decoders (default auto, as for a render: see tessera grid --help).") { state, given throws(CommandLineError) in
            state.options.automaticMemory = try memoryBudget(given, into: &state.options.settings)
        },
        Option("--exclude", value: "GLOB", help: "Leave out files and folders matching this pattern (repeatable).") { state, given in state.options.selection.excludes.append(given.value) },
        Option(flag: "--include-hidden", help: "Also search hidden files and folders.") { state, _ in state.options.selection.includeHidden = true },
    ]

    static let table: [Option<Parse>] = ownTable
        + (PhotoSourceOptions.table()
           + ReportingOptions.table(progressHelp: "How progress shows on stderr.", quietHelp: "Print only errors.", refusingContradictions: false))
            .map { $0.lifted(\Parse.options) }

    /// analyse's options, as its help, the manual and the completions give them.
    public static let options: [OptionSpec] = table.specs()

    public static func parse(_ arguments: [String], firstIndex: Int = 2) throws(CommandLineError) -> AnalyseOptions {
        var state = Parse()
        try parseArguments(arguments, firstIndex: firstIndex, command: "analyse", table: table, into: &state) {
            $0.options.photoPaths.append($1)
        }
        var options = state.options
        if options.help { return options }
        try PhotoSourceOptions.finish(&options)
        guard options.namesPhotos else {
            throw CommandLineError("no photos given: tessera analyse PHOTOS... --tile-size N (or lists of them: --photos-from FILE)")
        }
        guard state.sawTileSize else { throw CommandLineError("--tile-size N is required: the mosaic's cell size (features are kept per cell shape)") }
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
