// GridOptions.swift — `tessera grid`'s options: one table, parsed in one loop.
import Tessera

/// A parsed `tessera grid` command line.
public struct GridOptions: Equatable, Sendable {
    public var photoPaths: [String] = []
    /// The JPEG to write; empty when only a Deep Zoom pyramid is asked for.
    public var outputPath = ""
    /// The Deep Zoom descriptor to write (DIR/NAME.dzi), or nil.
    public var deepZoomPath: String?
    public var columns: Int?
    public var rows: Int?
    public var cellWidth = 0
    public var cellHeight = 0
    public var order = PhotoOrder.name
    public var seed: UInt64?
    public var settings = RenderSettings()
    /// The pyramid's settings, when --dzi is given.
    public var deepZoom: DeepZoomSettings?
    public var dryRun = false
    /// How progress shows (`--progress`, `--no-progress`).
    public var progress = ProgressStyle.bar
    /// Only errors (`--quiet`).
    public var quiet = false
    public var strict = false
    public var help = false
    /// Which files the folders' search takes (hidden ones, --exclude patterns).
    public var selection = PhotoSelection()
    /// Where every photo went (`--manifest`), or nil.
    public var manifestPath: String?
    /// Render one shard of N into a part file (`--shard K/N --shard-dir DIR`), or nil.
    public var shard: ShardTarget?

    public init() {}

    /// The JPEG to write, or nil.
    public var jpegPath: String? { outputPath.isEmpty ? nil : outputPath }

    /// What the command writes, as the library takes it.
    public var outputs: [RenderOutput] {
        var outputs: [RenderOutput] = []
        if let jpegPath { outputs.append(.jpeg(path: jpegPath)) }
        if let deepZoomPath, let deepZoom { outputs.append(.deepZoom(path: deepZoomPath, settings: deepZoom)) }
        return outputs
    }

    /// The flag that names `path` (an output, a file an output writes, or the temporary folder),
    /// for messages; nil when none does.
    public func flag(naming path: String) -> String? {
        if path == jpegPath { return "-o" }
        if let deepZoomPath, let deepZoom,
           RenderOutput.deepZoom(path: deepZoomPath, settings: deepZoom).files.contains(where: { $0.path == path }) { return "--dzi" }
        if path == settings.temporaryDirectory { return "--temp-dir" }
        if let shard, path == shard.partPath || path == shard.directory { return "--shard-dir" }
        return nil
    }
}

/// One entry of an option table: its spellings, the value's name (nil for a flag), its help.
public struct OptionSpec: Sendable {
    public let names: [String]
    public let valueName: String?
    public let help: String
}

public enum GridCommand {
    public static let options: [OptionSpec] = [
        OptionSpec(names: ["-o", "--output"], valueName: "OUT.jpg", help: "Where to write the JPEG (required unless --dzi is given). It appears only when complete; an existing file is replaced then, and left untouched if the render fails."),
        OptionSpec(names: ["--dzi"], valueName: "DIR/NAME.dzi", help: "Also (or instead) write a Deep Zoom pyramid, in the same pass: NAME.dzi, the tiles in NAME_files/LEVEL/COL_ROW.jpg, and NAME.html, a viewer that opens from the disk (no server) and zooms from the whole picture to single photos, naming the photo under the mouse. DIR must exist. Everything appears only when complete. Without -o the picture may be larger than a JPEG can be (65,500 px a side); memory grows with the width (see --dry-run)."),
        OptionSpec(names: ["--dzi-tile-size"], valueName: "N", help: "Deep Zoom tile size in pixels, 16-8192 (default 254: 256 px tiles with the overlap)."),
        OptionSpec(names: ["--dzi-overlap"], valueName: "N", help: "Pixels each Deep Zoom tile shares with its neighbours, 0 to half the tile size (default 1)."),
        OptionSpec(names: ["--dzi-quality"], valueName: "Q", help: "JPEG quality of the Deep Zoom tiles, 1-100 (default: --quality)."),
        OptionSpec(names: ["--no-viewer"], valueName: nil, help: "Write the Deep Zoom pyramid without NAME.html and its Leaflet files."),
        OptionSpec(names: ["--viewer-labels"], valueName: "name|path|none", help: "What the viewer names under the mouse: the photo's file name (default), its path as given (this reveals your folders to whoever gets the pyramid), or nothing."),
        OptionSpec(names: ["--title"], valueName: "TEXT", help: "A title the viewer shows over the picture and names its page with (default: none; the page is named NAME)."),
        OptionSpec(names: ["--grid"], valueName: "CxR", help: "Columns x rows of cells, e.g. 200x267. Photos repeat when there are more cells than photos."),
        OptionSpec(names: ["--columns"], valueName: "C", help: "Columns only; rows follow from the photo count (each photo once, the last row filled by repeats)."),
        OptionSpec(names: ["--tile-size"], valueName: "N|WxH", help: "Cell size in pixels (required): 150, or 200x150. Photos are centre-cropped to fill it."),
        OptionSpec(names: ["--quality"], valueName: "Q", help: "JPEG quality 1-100 (default 90)."),
        OptionSpec(names: ["--subsampling"], valueName: "420|422|444", help: "Chroma subsampling (default 420)."),
        OptionSpec(names: ["--workers"], valueName: "N", help: "Threads decoding photos and filling stripes, and encoding Deep Zoom tiles (default: the number of cores)."),
        OptionSpec(names: ["--stripe-height"], valueName: "H", help: "Canvas rows per stripe (default: from --max-memory, at most 64). The parallel encoder rounds it up to whole MCU rows (16 at 4:2:0, 8 otherwise)."),
        OptionSpec(names: ["--encoder"], valueName: "serial|parallel", help: "parallel (the default with more than one worker): workers compress stripes on their own and the writer joins them with JPEG restart markers, so encoding uses every core; serial: one libjpeg encoder, no restart markers."),
        OptionSpec(names: ["--max-memory"], valueName: "SIZE", help: "Budget for everything the renderer holds, e.g. 64M, 1G (default 64MiB). Sizes the stripes and the cell cache."),
        OptionSpec(names: ["--temp-dir"], valueName: "DIR", help: "Where the stripe file lives (default: $TMPDIR if set, else /dev/shm when it has room for the stripes, else /tmp), and the decoding data of large progressive photos drawn at 2/8 or more (default $TMPDIR or /tmp; best on a disk). Both are never visible; the stripes need a few stripes of space."),
        OptionSpec(names: ["--order"], valueName: "name|shuffle", help: "Photo order: sorted by path (default; repeats from the first photo when there are more cells), or shuffled (each pass through the photos shuffled anew; no photo next to itself from 5 photos on)."),
        OptionSpec(names: ["--seed"], valueName: "S", help: "Seed for --order shuffle (default 1); the same seed gives the same grid."),
        OptionSpec(names: ["--dpi"], valueName: "N", help: "Write N dots per inch into the JPEG (JFIF density), so a print shop or a layout program sizes it: 30,000 px at --dpi 300 print 254 cm wide. Default: none (1:1 aspect)."),
        OptionSpec(names: ["--background"], valueName: "RRGGBB", help: "Colour of cells whose photo cannot be decoded (default 808080)."),
        OptionSpec(names: ["--strict"], valueName: nil, help: "Fail before rendering if any photo would be skipped."),
        OptionSpec(names: ["--manifest"], valueName: "FILE", help: "Also write where every photo went: CSV (column,row,photo), or JSON when FILE ends in .json. Checked before any photo is read; written atomically after the picture."),
        OptionSpec(names: ["--exclude"], valueName: "GLOB", help: "Leave out files and folders whose name or path matches this shell pattern (repeatable), e.g. --exclude '*.png' --exclude '*/drafts'. A folder left out is not searched."),
        OptionSpec(names: ["--include-hidden"], valueName: nil, help: "Also search hidden files and folders (names starting with '.'), left out by default, as are thumbnail folders (@eaDir, .thumbnails, __MACOSX...). --dry-run counts what was left out."),
        OptionSpec(names: ["--shard"], valueName: "K/N", help: "Render only shard K of N (K from 1) into a part file in --shard-dir, for a batch scheduler (Slurm job arrays, GNU parallel, Kubernetes Indexed Jobs): run shards 1...N with the same flags and inputs anywhere that sees the same paths, then 'tessera join DIR'. Every shard plans the whole render (the same layout, seed and mosaic matching), renders its band, and decodes only the photos the band shows. The joined outputs are byte for byte those of one process with --encoder parallel."),
        OptionSpec(names: ["--shard-dir"], valueName: "DIR", help: "The folder the shards' part files go to (part-K-of-N.tessera-part with four-digit K and N, e.g. part-0003-of-0008.tessera-part, each written atomically; a shard run again replaces its part). Required with --shard; a folder every shard and the join can reach (a shared volume on a cluster)."),
        OptionSpec(names: ["--dry-run"], valueName: nil, help: "Print the plan (size, stripes, workers, memory and disk) and render nothing."),
        OptionSpec(names: ["--progress"], valueName: "bar|json|none", help: "How progress shows on stderr: a bar naming the phase (the default; drawn only when stderr is a terminal), JSON Lines for programs (every stderr line is one event: phase, progress with done/total/eta_s at most 4 a second, skipped, placeholder, warning, error, and a final summary with the sizes, time, peak RSS and outputs), or nothing."),
        OptionSpec(names: ["--no-progress"], valueName: nil, help: "The same as --progress none."),
        OptionSpec(names: ["-q", "--quiet"], valueName: nil, help: "Print only errors: no progress, warnings or summary (a --dry-run's plan still prints). With --progress json, the events still go to stderr."),
        OptionSpec(names: ["-h", "--help"], valueName: nil, help: "Show this help."),
    ]

    /// Parses the arguments after `grid`. `firstIndex` is the position of `arguments[0]` in the
    /// whole command line, for error positions. Another command that takes every grid option
    /// plus its own passes them as `extraOptions` and handles them in `extra` (name, value,
    /// position of the value); `command` names it in messages.
    public static func parse(_ arguments: [String], firstIndex: Int = 2, command: String = "grid",
                             extraOptions: [OptionSpec] = [],
                             extra: (String, String, Int) throws(CommandLineError) -> Void = { _, _, _ in }) throws(CommandLineError) -> GridOptions {
        var options = GridOptions()
        var sawTileSize = false
        var deepZoom = DeepZoomSettings()
        var deepZoomQuality: Int?
        var deepZoomOptionGiven: String?
        // The options given (by their long name), for the checks after the loop. (A value given
        // twice, two -o say, is refused by scanArguments: which file?)
        var given: Set<String> = []
        var seedPosition: Int?
        var shardSpec: ShardSpec?
        var shardDirectory: String?
        try scanArguments(arguments, firstIndex: firstIndex, command: command, options: GridCommand.options + extraOptions,
                          positional: { options.photoPaths.append($0) }) { option throws(CommandLineError) in
            let (spec, name, value, position, valuePosition) = (option.spec, option.name, option.value, option.position, option.valuePosition)
            let earlier = option.earlier
            let key = spec.names.last!
            given.insert(key)
            if (key == "--grid" && earlier.contains("--columns")) || (key == "--columns" && earlier.contains("--grid")) {
                throw CommandLineError("--grid and --columns both set the columns: give --grid CxR, or --columns C alone (rows then follow)",
                                       argumentIndex: position)
            }
            if key == "--seed" { seedPosition = position }
            if key == "--order" && command == "mosaic" {
                throw CommandLineError("--order is a grid's: a mosaic places photos by matching the target (--seed sets its order)",
                                       argumentIndex: position)
            }
            func integer(_ range: ClosedRange<Int>) throws(CommandLineError) -> Int {
                guard let number = Int(value), range.contains(number) else {
                    throw CommandLineError("\(name) expects a whole number in \(range.lowerBound)...\(range.upperBound), got '\(value)'",
                                           argumentIndex: valuePosition)
                }
                return number
            }
            switch spec.names.last! {
            case "--output":
                // A JPEG is what -o writes: a name saying another format would mislead whoever opens it.
                let lower = value.lowercased()
                if let other = [".png", ".webp", ".heic", ".heif", ".avif", ".gif", ".tif", ".tiff", ".bmp"].first(where: lower.hasSuffix) {
                    throw CommandLineError("-o writes a JPEG, but '\(value)' ends in \(other): name it .jpg", argumentIndex: valuePosition)
                }
                options.outputPath = value
            case "--dzi":
                guard RenderOutput.isDeepZoomPath(value) else {
                    throw CommandLineError("--dzi expects a path ending in NAME.dzi, like out/wall.dzi, got '\(value)'", argumentIndex: valuePosition)
                }
                options.deepZoomPath = value
            case "--dzi-tile-size":
                deepZoom.tileSize = try integer(DeepZoomSettings.tileSizes)
                deepZoomOptionGiven = name
            case "--dzi-overlap":
                deepZoom.overlap = try integer(DeepZoomSettings.overlaps(forTileSize: DeepZoomSettings.tileSizes.upperBound))
                deepZoomOptionGiven = name
            case "--dzi-quality":
                deepZoomQuality = try integer(RenderSettings.qualities)
                deepZoomOptionGiven = name
            case "--viewer-labels":
                guard let labels = ViewerLabels(rawValue: value) else {
                    throw CommandLineError("--viewer-labels expects name, path or none, got '\(value)'", argumentIndex: valuePosition)
                }
                deepZoom.labels = labels
                deepZoomOptionGiven = name
            case "--title":
                deepZoom.title = value
                deepZoomOptionGiven = name
            case "--no-viewer":
                deepZoom.viewer = false
                deepZoomOptionGiven = name
            case "--grid":
                guard let (c, r) = parsePair(value), c >= 1, r >= 1 else {
                    throw CommandLineError("--grid expects COLUMNSxROWS like 200x267, got '\(value)'", argumentIndex: valuePosition)
                }
                // No picture side exceeds this, so no product of sizes below can overflow.
                guard c <= RenderPlan.maxDeepZoomSide && r <= RenderPlan.maxDeepZoomSide else {
                    throw CommandLineError("--grid: at most \(RenderPlan.maxDeepZoomSide) columns and rows (the largest picture side in pixels), got '\(value)'",
                                           argumentIndex: valuePosition)
                }
                options.columns = c
                options.rows = r
            case "--columns":
                options.columns = try integer(1...jpegMaxDimension)
                options.rows = nil
            case "--tile-size":
                if let single = Int(value), single >= 1 {
                    options.cellWidth = single
                    options.cellHeight = single
                } else if let (w, h) = parsePair(value), w >= 1, h >= 1 {
                    options.cellWidth = w
                    options.cellHeight = h
                } else {
                    throw CommandLineError("--tile-size expects pixels like 150 or 200x150, got '\(value)'", argumentIndex: valuePosition)
                }
                guard options.cellWidth <= jpegMaxDimension && options.cellHeight <= jpegMaxDimension else {
                    throw CommandLineError("--tile-size is larger than a JPEG can be (\(jpegMaxDimension) px)", argumentIndex: valuePosition)
                }
                sawTileSize = true
            case "--quality": options.settings.quality = try integer(RenderSettings.qualities)
            case "--subsampling":
                guard let mode = ChromaSubsampling(rawValue: value) else {
                    throw CommandLineError("--subsampling expects 420, 422 or 444, got '\(value)'", argumentIndex: valuePosition)
                }
                options.settings.subsampling = mode
            case "--workers": options.settings.workers = try integer(RenderSettings.workerCounts)
            case "--stripe-height": options.settings.stripeHeight = try integer(1...jpegMaxDimension)
            case "--max-memory":
                guard let bytes = parseByteSize(value), bytes >= 1 << 20 else {
                    throw CommandLineError("--max-memory expects a size of at least 1M like 64M, 512MiB, 2G, got '\(value)'", argumentIndex: valuePosition)
                }
                options.settings.maxMemoryBytes = bytes
            case "--temp-dir": options.settings.temporaryDirectory = value
            case "--encoder":
                guard let mode = EncoderMode(rawValue: value) else {
                    throw CommandLineError("--encoder expects serial or parallel, got '\(value)'", argumentIndex: valuePosition)
                }
                options.settings.encoder = mode
            case "--order":
                switch value {
                case "name": options.order = .name
                case "shuffle": options.order = .shuffle(seed: options.seed ?? 1)
                default: throw CommandLineError("--order expects name or shuffle, got '\(value)'", argumentIndex: valuePosition)
                }
            case "--seed":
                guard let seed = UInt64(value) else {
                    throw CommandLineError("--seed expects a whole number, got '\(value)'", argumentIndex: valuePosition)
                }
                options.seed = seed
            case "--background":
                guard let colour = parseColour(value) else {
                    throw CommandLineError("--background expects a hex colour like 202020, got '\(value)'", argumentIndex: valuePosition)
                }
                options.settings.background = colour
            case "--strict": options.strict = true
            case "--exclude":
                guard !value.isEmpty else { throw CommandLineError("--exclude expects a pattern like '*.png'", argumentIndex: valuePosition) }
                options.selection.excludes.append(value)
            case "--include-hidden": options.selection.includeHidden = true
            case "--manifest": options.manifestPath = value
            case "--shard":
                guard let spec = ShardSpec.parse(value) else {
                    throw CommandLineError("--shard expects K/N with 1 <= K <= N <= \(ShardSpec.maxCount), like 3/8, got '\(value)'",
                                           argumentIndex: valuePosition)
                }
                shardSpec = spec
            case "--shard-dir":
                guard !value.isEmpty else { throw CommandLineError("--shard-dir expects a folder", argumentIndex: valuePosition) }
                shardDirectory = value
            case "--dry-run": options.dryRun = true
            case "--no-progress":
                if earlier.contains("--progress") && options.progress != .none {
                    throw CommandLineError("--no-progress contradicts --progress \(options.progress.rawValue): give one", argumentIndex: position)
                }
                options.progress = .none
            case "--progress":
                guard let style = ProgressStyle(rawValue: value) else {
                    throw CommandLineError("--progress expects bar, json or none, got '\(value)'", argumentIndex: valuePosition)
                }
                if earlier.contains("--no-progress") && style != .none {
                    throw CommandLineError("--progress \(value) contradicts --no-progress: give one", argumentIndex: position)
                }
                options.progress = style
            case "--quiet": options.quiet = true
            case "--dpi": options.settings.dotsPerInch = try integer(1...65_535)
            case "--help": options.help = true
            default:
                guard extraOptions.contains(where: { $0.names.contains(name) }) else {
                    fatalError("option table and switch disagree on \(name)")
                }
                try extra(spec.names.last!, value, valuePosition)
            }
        }
        if case .shuffle = options.order, let seed = options.seed { options.order = .shuffle(seed: seed) }
        if command == "grid", let seedPosition, case .name = options.order {
            throw CommandLineError("--seed orders a shuffle: give --order shuffle with it (a grid in name order has nothing to seed)",
                                   argumentIndex: seedPosition)
        }
        if options.help { return options }
        if !deepZoom.viewer, let useless = [("--title", deepZoom.title != nil), ("--viewer-labels", given.contains("--viewer-labels"))]
            .first(where: { $0.1 })?.0 {
            throw CommandLineError("\(useless) is for the viewer, and --no-viewer leaves it out: give one of them")
        }
        if options.deepZoomPath != nil {
            deepZoom.quality = deepZoomQuality ?? options.settings.quality
            guard DeepZoomSettings.overlaps(forTileSize: deepZoom.tileSize).contains(deepZoom.overlap) else {
                throw CommandLineError("--dzi-overlap must be at most half of --dzi-tile-size (\(deepZoom.tileSize / 2)), got \(deepZoom.overlap)")
            }
            options.deepZoom = deepZoom
        } else if let deepZoomOptionGiven {
            throw CommandLineError("\(deepZoomOptionGiven) needs --dzi DIR/NAME.dzi")
        }
        guard !options.photoPaths.isEmpty else {
            throw CommandLineError("no photos given: name files or directories, e.g. tessera \(command) "
                                   + (command == "mosaic" ? "--target portrait.jpg " : "") + "~/Pictures -o out.jpg --grid 20x15 --tile-size 150")
        }
        guard !options.outputPath.isEmpty || options.deepZoomPath != nil else {
            throw CommandLineError("-o OUT.jpg or --dzi DIR/NAME.dzi (or both) is required")
        }
        if options.settings.dotsPerInch != nil && options.outputPath.isEmpty {
            throw CommandLineError("--dpi sets the JPEG's density, and only --dzi is written: add -o OUT.jpg or drop --dpi")
        }
        guard options.columns != nil else { throw CommandLineError("--grid CxR or --columns C is required") }
        guard sawTileSize else { throw CommandLineError("--tile-size N is required") }
        switch (shardSpec, shardDirectory) {
        case (nil, nil): break
        case (let spec?, let directory?):
            if options.settings.encoder == .serial {
                throw CommandLineError("--shard joins the parallel encoder's restart-marker stripes, which --encoder serial does not make: drop --encoder serial")
            }
            options.shard = ShardTarget(shard: spec, directory: directory)
        case (nil, _?): throw CommandLineError("--shard-dir is where --shard K/N writes its part: give --shard too")
        case (_?, nil): throw CommandLineError("--shard K/N needs --shard-dir DIR, the folder its part goes to (and 'tessera join DIR' reads)")
        }
        return options
    }

    public static let help: String = {
        var text = """
        tessera grid — render a grid of photos into one (giant) JPEG and/or a Deep Zoom pyramid,
        in flat memory

        USAGE
          tessera grid PHOTOS... (-o OUT.jpg | --dzi DIR/NAME.dzi)... (--grid CxR | --columns C) --tile-size N [options]

        PHOTOS are image files or directories (searched recursively). JPEG, PNG, WebP and
        HEIF/HEIC (and AVIF) are read, recognised by content, not extension; other images (GIF,
        TIFF, camera RAW) are named in a warning. Hidden files and folders and thumbnail folders
        (@eaDir, .thumbnails...) are left out (see --include-hidden, --exclude). Photos fill the grid row by row and repeat when
        there are more cells than photos. Each photo is turned upright from its EXIF orientation
        (a HEIC's own rotation counts once), converted to sRGB from its colour profile (Display P3,
        Adobe RGB...), decoded at the size it is drawn and centre-cropped to fill its cell;
        transparent pixels show the background colour.

        OPTIONS

        """
        text += describe(options)
        text += """

        EXAMPLES
          # 200 x 267 cells of 150 px: a 30,000 x 40,050 px (1.2 gigapixel) JPEG
          tessera grid ~/Pictures -o wall.jpg --grid 200x267 --tile-size 150

          # each photo once, 10 per row, shuffled the same way every time
          tessera grid trip/*.jpg -o trip.jpg --columns 10 --tile-size 300 --order shuffle --seed 7

          # the same picture as a Deep Zoom pyramid to explore in a browser, in the same pass
          tessera grid ~/Pictures -o wall.jpg --dzi zoom/wall.dzi --grid 200x267 --tile-size 150
          xdg-open zoom/wall.html

          # 150,000 x 150,000 px: too big for one JPEG, fine as a pyramid (its rows need more memory)
          tessera grid ~/Pictures --dzi huge/wall.dzi --grid 1000x1000 --tile-size 150 --max-memory 192M

          # what would it take? (memory, disk, stripes), without rendering
          tessera grid ~/Pictures -o wall.jpg --grid 200x267 --tile-size 150 --dry-run

          # inside a small container: cap the renderer's memory
          tessera grid photos -o out.jpg --grid 100x100 --tile-size 200 --max-memory 48M

          # for a GUI or a script: one JSON event per line on stderr (phases, progress, skipped
          # photos, a summary with sizes, time and peak RSS); the result line on stdout
          tessera grid ~/Pictures -o wall.jpg --grid 200x267 --tile-size 150 --progress json 2>events.jsonl

          # a print at 300 dpi with a pyramid to share: a title, file names only under the mouse
          tessera grid ~/Pictures -o print.jpg --dpi 300 --dzi share/wall.dzi --title "Summer 2026" --grid 60x40 --tile-size 300
        """
        return text
    }()
}

/// Help text for an option table: each option's spellings, then its explanation indented.
func describe(_ specs: [OptionSpec]) -> String {
    var text = ""
    for spec in specs {
        let left = spec.names.joined(separator: ", ") + (spec.valueName.map { " " + $0 } ?? "")
        text += "  " + left + "\n"
        text += wrap(spec.help, indent: 6, width: 92) + "\n"
    }
    return text
}

/// "200x267" → (200, 267).
func parsePair(_ text: String) -> (Int, Int)? {
    let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
    guard parts.count == 2, let a = Int(parts[0]), let b = Int(parts[1]) else { return nil }
    return (a, b)
}

/// "64M", "64MiB", "1.5G", "1048576" → bytes (binary units; a bare number is bytes).
public func parseByteSize(_ text: String) -> Int? {
    var digits = text.trimmingWhitespace().uppercased()
    var multiplier = 1.0
    for (suffixes, scale) in [(["KIB", "KB", "K"], 1024.0), (["MIB", "MB", "M"], 1048576.0),
                              (["GIB", "GB", "G"], 1073741824.0), (["TIB", "TB", "T"], 1099511627776.0)] {
        if let suffix = suffixes.first(where: { digits.hasSuffix($0) }) {
            digits = String(digits.dropLast(suffix.count))
            multiplier = scale
            break
        }
    }
    if digits.hasSuffix("B") && multiplier == 1 { digits = String(digits.dropLast()) }
    guard let number = Double(digits.trimmingWhitespace()), number >= 0, number * multiplier < 9e18 else { return nil }
    return Int(number * multiplier)
}

/// "202020" or "#202020" → RGB.
func parseColour(_ text: String) -> RGB? {
    let hex = text.hasPrefix("#") ? String(text.dropFirst()) : text
    guard hex.count == 6, let value = UInt32(hex, radix: 16) else { return nil }
    return RGB(red: UInt8(value >> 16), green: UInt8((value >> 8) & 0xFF), blue: UInt8(value & 0xFF))
}

/// Word-wraps `text` to `width` columns, every line indented by `indent` spaces.
func wrap(_ text: String, indent: Int, width: Int) -> String {
    let pad = String(repeating: " ", count: indent)
    var lines: [String] = []
    var line = pad
    for word in text.split(separator: " ") {
        if line.count > indent && line.count + 1 + word.count > width {
            lines.append(line)
            line = pad
        }
        line += (line.count > indent ? " " : "") + word
    }
    lines.append(line)
    return lines.joined(separator: "\n")
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while scalars.first?.isWhitespace == true { scalars.removeFirst() }
        while scalars.last?.isWhitespace == true { scalars.removeLast() }
        return String(scalars)
    }
}

extension String {
    /// Padded with spaces to `length` characters (longer strings are left as they are).
    func padding(toLength length: Int) -> String {
        count >= length ? self + " " : self + String(repeating: " ", count: length - count)
    }
}
