// RenderingOptions.swift — the options of a render, which `grid` and `mosaic` share: the
// outputs, the layout's shape, the encoder and the budget, the photo search, the shards. Declared
// once here; each command takes the table and adds its own (GridOptions.swift, MosaicOptions.swift).
// The photo lists and --verbose (PhotoSourceOptions) are analyse's too.
import Glibc
import Tessera

/// A render's parse state: the options so far, and what the checks after the last argument need
/// (which options came, the pyramid's settings before --dzi is known to be given).
struct RenderingParse: Sendable {
    var options = GridOptions()
    var sawTileSize = false
    var deepZoom = DeepZoomSettings()
    var deepZoomQuality: Int?
    /// The last pyramid option given (as spelled), for "needs --dzi".
    var deepZoomOptionGiven: String?
    var viewerLabelsGiven = false
    /// Whether --dzi-tile-size and --dzi-overlap came (an IIIF folder changes their defaults).
    var deepZoomTileSizeGiven = false
    var deepZoomOverlapGiven = false
    /// --iiif-id's value, and where it came.
    var iiifIdentifier: String?
    /// Where --seed is, for grid's "--seed orders a shuffle".
    var seedPosition: Int?
    var shardSpec: ShardSpec?
    var shardDirectory: String?
}

enum RenderingOptions {
    /// The outputs: -o and the pyramid's.
    static let outputs: [Option<RenderingParse>] = [
        Option("-o", "--output", value: "OUT.jpg", help: "Where to write the JPEG (required unless another output is given: a pyramid, or a preview alone). It appears only when complete; an existing file is replaced then, and left untouched if the render fails.") { state, given throws(CommandLineError) in
            // A JPEG is what -o writes: a name saying another format would mislead whoever opens it.
            let lower = given.value.lowercased()
            if let other = Formats.imageSuffixes(except: .jpeg).first(where: lower.hasSuffix) {
                let tiff = RenderOutput.isTIFFPath(given.value) ? " (or --tiff \(given.value) for a tiled pyramidal TIFF)" : ""
                throw given.refusal("-o writes a JPEG, but '\(given.value)' ends in \(other): name it .jpg" + tiff)
            }
            // A name without a JPEG's ending (`-o x`, `-o out/`) is a slip: the file would be a
            // JPEG nothing opens as one.
            guard jpegSuffixes.contains(where: lower.hasSuffix) else {
                throw given.refusal("-o \(given.value): name a .jpg/.jpeg file (or --dzi DIR/NAME.dzi)")
            }
            state.options.outputPath = given.value
        },
        Option("--dzi", value: "DIR/NAME.dzi", help: "Also (or instead) write a Deep Zoom pyramid, in the same pass: NAME.dzi, the tiles in NAME_files/LEVEL/COL_ROW.jpg, and NAME.html, a viewer that opens from the disk (no server) and zooms from the whole picture to single photos, naming the photo under the mouse. DIR must exist. Everything appears only when complete. Without -o the picture may be larger than a JPEG can be (65,500 px a side); memory grows with the width (see --dry-run).") { state, given throws(CommandLineError) in
            guard RenderOutput.isDeepZoomPath(given.value) else {
                throw given.refusal("--dzi expects a path ending in NAME.dzi, like out/wall.dzi, got '\(given.value)'")
            }
            state.options.deepZoomPath = given.value
        },
        Option("--szi", value: "DIR/NAME.szi", help: "Also (or instead) write the Deep Zoom pyramid as one file, in the same pass: an uncompressed ZIP of NAME/NAME.dzi and NAME/NAME_files/LEVEL/COL_ROW.jpg, the layout libvips writes for a .szi name, which OpenSeadragon's SZI tile source reads from any static host by range requests. One upload instead of thousands of tiles; with --dzi too, the tiles are encoded once and are the same in both. The --dzi-* options set its tiles. DIR must exist; the file appears only when complete. Beside it, NAME.html shows it from any static web server that answers range requests (not from the disk: use --dzi's page for that); with --dzi of the same NAME in the same folder, the two share one page, which reads the folder when it can.") { state, given throws(CommandLineError) in
            guard RenderOutput.isDeepZoomArchivePath(given.value) else {
                throw given.refusal("--szi expects a path ending in NAME.szi, like out/wall.szi, got '\(given.value)'")
            }
            state.options.deepZoomArchivePath = given.value
        },
        Option("--iiif", value: "DIR", help: "Also (or instead) write the pyramid as IIIF Image API 3.0 level-0 static tiles in the folder DIR (info.json and X,Y,W,H/SW,SH/0/default.jpg), which any web server serves as an image service for Mirador, OpenSeadragon or Universal Viewer. Needs --iiif-id. IIIF tiles do not overlap: with --iiif the pyramid's tiles are 256 px with no overlap (for --dzi and --szi too) unless --dzi-tile-size says otherwise. DIR's folder must exist; DIR appears only when complete, replacing an IIIF folder tessera wrote.") { state, given throws(CommandLineError) in
            guard !given.value.isEmpty, !given.value.hasSuffix("/") || given.value.count > 1 else {
                throw given.refusal("--iiif expects a folder to create, like out/wall")
            }
            try refuseDotFolder(given)
            state.options.iiifPath = given.value.hasSuffix("/") ? String(given.value.dropLast()) : given.value
        },
        Option("--iiif-id", value: "URL", help: "The address the --iiif folder will be served at, without a trailing slash (info.json's id, from which viewers build every tile's address), like https://example.org/iiif/wall.") { state, given throws(CommandLineError) in
            if let problem = IIIFAddress.problem(given.value) {
                throw given.refusal("--iiif-id expects an http or https URL without a trailing slash, query or fragment, like "
                                    + "https://example.org/iiif/wall; got '\(given.value)': \(problem)")
            }
            state.iiifIdentifier = given.value
        },
        Option("--tiff", value: "FILE.tif", help: "Also (or instead) write a tiled pyramidal TIFF, in the same pass: the full picture, then each level half the one before down to one tile, as further pages, in JPEG tiles of 256 px at --quality. One file that libvips, OpenSlide, QuPath and GDAL open as a pyramid (BigTIFF when it may pass 4 GiB), with no 65,500 px limit: without -o the picture may be as large as a Deep Zoom pyramid. The smaller levels wait in --temp-dir (a third of the file at most) until they are copied in at the end. FILE must end in .tif or .tiff and its folder exist; it appears only when complete.") { state, given throws(CommandLineError) in
            guard RenderOutput.isTIFFPath(given.value) else {
                throw given.refusal("--tiff expects a path ending in .tif or .tiff, like out/wall.tif, got '\(given.value)'")
            }
            state.options.tiffPath = given.value
        },
        Option("--preview", value: "FILE.jpg", help: "First write a small JPEG of the same picture (about 2,000 px on its longer side: every cell scaled down alike, the same photos in the same places) in a second or two, to tune by before the full render. Alone, without -o or --dzi, only the preview is made.") { state, given throws(CommandLineError) in
            guard jpegSuffixes.contains(where: given.value.lowercased().hasSuffix) else {
                throw given.refusal("--preview \(given.value): name a .jpg/.jpeg file")
            }
            state.options.previewPath = given.value
        },
        Option("--dzi-tile-size", value: "N", help: "Deep Zoom tile size in pixels, 16-8192 (default 254: 256 px tiles with the overlap).") { state, given throws(CommandLineError) in
            state.deepZoom.tileSize = try given.integer(DeepZoomSettings.tileSizes)
            state.deepZoomOptionGiven = given.name
            state.deepZoomTileSizeGiven = true
        },
        Option("--dzi-overlap", value: "N", help: "Pixels each Deep Zoom tile shares with its neighbours, 0 to half the tile size (default 1).") { state, given throws(CommandLineError) in
            state.deepZoom.overlap = try given.integer(DeepZoomSettings.overlaps(forTileSize: DeepZoomSettings.tileSizes.upperBound))
            state.deepZoomOptionGiven = given.name
            state.deepZoomOverlapGiven = true
        },
        Option("--dzi-quality", value: "Q", help: "JPEG quality of the Deep Zoom tiles, 1-100 (default: --quality).") { state, given throws(CommandLineError) in
            state.deepZoomQuality = try given.integer(RenderSettings.qualities)
            state.deepZoomOptionGiven = given.name
        },
        Option(flag: "--no-viewer", help: "Write the Deep Zoom pyramid (--dzi, --szi) without the viewer page NAME.html and its cells.js.") { state, given throws(CommandLineError) in
            state.deepZoom.viewer = false
            state.deepZoomOptionGiven = given.name
        },
        Option("--viewer-labels", value: "name|path|none", help: "What the viewer names under the mouse: the photo's file name (default), its path as given (this reveals your folders to whoever gets the pyramid), or nothing.") { state, given throws(CommandLineError) in
            state.deepZoom.labels = try given.choice(ViewerLabels.self, "--viewer-labels expects name, path or none, got '\(given.value)'")
            state.viewerLabelsGiven = true
            state.deepZoomOptionGiven = given.name
        },
        Option("--title", value: "TEXT", help: "A title the viewer shows over the picture and names its page with (default: none; the page is named NAME).") { state, given throws(CommandLineError) in
            state.deepZoom.title = given.value
            state.deepZoomOptionGiven = given.name
        },
        Option("--previews", value: "N", help: "Let the viewer show each photo larger when its cell is clicked: every distinct photo drawn is also written whole, N px on its long side (64-4096, e.g. 1024), upright, into NAME_files/viewer/previews (and into the SZI), by the same run after the picture, on every core. Needs --dzi or --szi with the viewer; with --shard, each shard makes every N-th of them and the join gathers them. Disk: --dry-run counts up to N x N x 0.6 bytes a photo at quality 90.") { state, given throws(CommandLineError) in
            state.deepZoom.previews = try given.integer(DeepZoomSettings.previewSizes)
        },
    ]

    /// The name endings of a JPEG (.jpg, .jpeg, .jpe, .jfif): what -o accepts.
    static let jpegSuffixes: [String] = {
        let others = Set(Formats.imageSuffixes(except: .jpeg))
        return Formats.suffixes.filter { !others.contains($0) }
    }()

    /// The layout's shape: columns and rows, the cell size.
    static let shape: [Option<RenderingParse>] = [
        Option("--grid", value: "CxR", help: "Columns x rows of cells, e.g. 200x267. Photos repeat when there are more cells than photos. Default (with neither --grid nor --columns): each photo once, in about a square picture (between 3:4 and 4:3, the last row as full as that allows).") { state, given throws(CommandLineError) in
            try refuseGridAndColumns(given)
            guard let (c, r) = parsePair(given.value), c >= 1, r >= 1 else {
                throw given.refusal("--grid expects COLUMNSxROWS like 200x267, got '\(given.value)'")
            }
            // No picture side exceeds this, so no product of sizes below can overflow.
            guard c <= RenderPlan.maxDeepZoomSide && r <= RenderPlan.maxDeepZoomSide else {
                throw given.refusal("--grid: at most \(RenderPlan.maxDeepZoomSide) columns and rows (the largest picture side in pixels), got '\(given.value)'")
            }
            state.options.columns = c
            state.options.rows = r
        },
        Option("--columns", value: "C", help: "Columns only; rows follow from the photo count (each photo once, the last row filled by repeats).") { state, given throws(CommandLineError) in
            try refuseGridAndColumns(given)
            state.options.columns = try given.integer(1...jpegMaxDimension)
            state.options.rows = nil
        },
        Option("--tile-size", value: "N|WxH", help: "Cell size in pixels: 150, or 200x150. Photos are centre-cropped to fill it. Default: \(GridSize.defaultTileSize) px, or smaller when a JPEG would pass \(formatCount(jpegMaxDimension)) px a side (the largest cell that fits).") { state, given throws(CommandLineError) in
            if let single = Int(given.value), single >= 1 {
                (state.options.cellWidth, state.options.cellHeight) = (single, single)
            } else if let (w, h) = parsePair(given.value), w >= 1, h >= 1 {
                (state.options.cellWidth, state.options.cellHeight) = (w, h)
            } else {
                throw given.refusal("--tile-size expects pixels like 150 or 200x150, got '\(given.value)'")
            }
            guard state.options.cellWidth <= jpegMaxDimension && state.options.cellHeight <= jpegMaxDimension else {
                throw given.refusal("--tile-size is larger than a JPEG can be (\(jpegMaxDimension) px)")
            }
            state.sawTileSize = true
        },
    ]

    /// --grid and --columns both set the columns: whichever comes second is refused.
    private static func refuseGridAndColumns(_ given: GivenOption) throws(CommandLineError) {
        let other = given.name == "--grid" ? "--columns" : "--grid"
        if given.earlier.contains(other) {
            throw CommandLineError("--grid and --columns both set the columns: give --grid CxR, or --columns C alone (rows then follow)",
                                   argumentIndex: given.position)
        }
    }

    /// The encoder, the workers, the budget and the temporary folder.
    static let encoding: [Option<RenderingParse>] = [
        Option("--quality", value: "Q", help: "JPEG quality 1-100 (default 90).") { state, given throws(CommandLineError) in
            state.options.settings.quality = try given.integer(RenderSettings.qualities)
        },
        Option("--subsampling", value: "420|422|444", help: "Chroma subsampling (default 420).") { state, given throws(CommandLineError) in
            state.options.settings.subsampling = try given.choice(ChromaSubsampling.self, "--subsampling expects 420, 422 or 444, got '\(given.value)'")
        },
        Option("--workers", value: "N", help: "Threads decoding photos and filling stripes, and encoding Deep Zoom tiles (default: the number of cores).") { state, given throws(CommandLineError) in
            state.options.settings.workers = try given.integer(RenderSettings.workerCounts)
        },
        Option("--stripe-height", value: "H", help: "Canvas rows per stripe (default: from the memory budget, at most 64). The parallel encoder rounds it up to whole MCU rows (16 at 4:2:0, 8 otherwise).") { state, given throws(CommandLineError) in
            state.options.settings.stripeHeight = try given.integer(1...jpegMaxDimension)
        },
        Option("--encoder", value: "serial|parallel", help: "parallel (the default with more than one worker): workers compress stripes on their own and the writer joins them with JPEG restart markers, so encoding uses every core; serial: one libjpeg encoder, no restart markers.") { state, given throws(CommandLineError) in
            state.options.settings.encoder = try given.choice(EncoderMode.self, "--encoder expects serial or parallel, got '\(given.value)'")
        },
        Option("--max-memory", value: "SIZE|auto", help: "Budget for everything the renderer holds, e.g. 64M, 1G. The default, auto, fits the machine: in a memory cgroup (a container, a job) its limit less a sixteenth (at least 4 MiB), elsewhere half the memory available, at most 2 GiB; --dry-run says which rule chose it. A render plans its stripes and cell cache for at most 64 MiB of an automatic budget (one that cannot fit in that, such as very wide rows or many workers, takes the least that fits; --dry-run shows it), and the rest is room for a photo that must be decoded whole. A size given is the budget for everything.") { state, given throws(CommandLineError) in
            state.options.automaticMemory = try memoryBudget(given, into: &state.options.settings)
        },
        Option("--temp-dir", value: "DIR", help: "Where the stripe file lives (default: $TMPDIR if set, else /dev/shm when it has room for the stripes, else /tmp), and the decoding data of large progressive photos drawn at 2/8 or more (default $TMPDIR or /tmp; best on a disk). Both are never visible; the stripes need a few stripes of space.") { state, given throws(CommandLineError) in
            state.options.settings.temporaryDirectory = given.value
        },
    ]

    /// The photos' order (a grid's; a mosaic refuses it) and the seed.
    static let order: [Option<RenderingParse>] = [
        Option("--order", value: "name|date|shuffle", help: "Photo order: sorted by path (default; repeats from the first photo when there are more cells), by the date each was taken (its EXIF date, oldest first; photos without one after them, by path), or shuffled (each pass through the photos shuffled anew; no photo next to itself from 5 photos on).") { state, given throws(CommandLineError) in
            switch given.value {
            case "name": state.options.order = .name
            case "date": state.options.order = .dateTaken
            case "shuffle": state.options.order = .shuffle(seed: state.options.seed ?? 1)
            default: throw given.refusal("--order expects name, date or shuffle, got '\(given.value)'")
            }
        },
        Option("--seed", value: "S", help: "Seed for --order shuffle (default 1); the same seed gives the same grid.") { state, given throws(CommandLineError) in
            state.seedPosition = given.position
            guard let seed = UInt64(given.value) else { throw given.refusal("--seed expects a whole number, got '\(given.value)'") }
            state.options.seed = seed
        },
    ]

    /// The picture's density, the placeholder colour, --strict, the manifest, the photo search,
    /// the shards and the dry run.
    static let rest: [Option<RenderingParse>] = [
        Option("--dpi", value: "N", help: "Write N dots per inch into the JPEG (JFIF density), so a print shop or a layout program sizes it: 30,000 px at --dpi 300 print 254 cm wide. Only the JPEG carries it (a --tiff has no resolution tags). Default: none (1:1 aspect).") { state, given throws(CommandLineError) in
            state.options.settings.dotsPerInch = try given.integer(1...65_535)
        },
        Option("--background", value: "RRGGBB", help: "Colour of cells whose photo cannot be decoded (default 808080).") { state, given throws(CommandLineError) in
            guard let colour = parseColour(given.value) else {
                throw given.refusal("--background expects a hex colour like 202020, got '\(given.value)'")
            }
            state.options.settings.background = colour
        },
        Option(flag: "--strict", help: "Fail before rendering (exit 3) if any photo would be skipped; for a mosaic, also if any cell could not meet --min-distance and --max-uses. A photo found broken only while it is drawn fails the render too, as does a truncated JPEG (drawn as far as it goes without --strict), and nothing is written.") { state, _ in
            state.options.strict = true
            state.options.settings.failOnPlaceholder = true
        },
        Option("--manifest", value: "FILE", help: "Also write where every photo went: CSV (column,row,photo), or JSON when FILE ends in .json. Checked before any photo is read; written atomically after the picture.") { state, given in state.options.manifestPath = given.value },
        Option("--cache-dir", value: "DIR", help: "Where Tessera keeps what it learnt about the photos, so the next run need not read them again: every photo's header (a warm scan opens no unchanged file) and a mosaic's analysed features (default $XDG_CACHE_HOME/tessera or ~/.cache/tessera). An analysis that is interrupted keeps every photo it finished.") { state, given in state.options.cacheDirectory = given.value },
        Option("--exclude", value: "GLOB", help: "Leave out files and folders whose name or path matches this shell pattern (repeatable), e.g. --exclude '*.png' --exclude '*/drafts'. A folder left out is not searched.") { state, given throws(CommandLineError) in
            guard !given.value.isEmpty else { throw given.refusal("--exclude expects a pattern like '*.png'") }
            state.options.selection.excludes.append(given.value)
        },
        Option(flag: "--include-hidden", help: "Also search hidden files and folders (names starting with '.'), left out by default, as are thumbnail folders (@eaDir, .thumbnails, __MACOSX...). --dry-run counts what was left out.") { state, _ in state.options.selection.includeHidden = true },
    ] + PhotoSourceOptions.table().map { $0.lifted(\RenderingParse.options) } + [
        Option("--shard", value: "K/N", help: "Render only shard K of N (K from 1) into a part file in --shard-dir, for a batch scheduler (Slurm job arrays, GNU parallel, Kubernetes Indexed Jobs): run shards 1...N with the same flags and inputs anywhere that sees the same paths, then 'tessera join DIR'. Every shard plans the whole render (the same layout, seed and mosaic matching), renders its band, and decodes only the photos the band shows. The joined JPEG and pyramid are byte for byte those of one process with --encoder parallel, and a --tiff holds the same tiles.") { state, given throws(CommandLineError) in
            state.shardSpec = try shardSpec(given)
        },
        Option("--shard-dir", value: "DIR", help: "The folder the shards' part files go to (part-K-of-N.tessera-part with four-digit K and N, e.g. part-0003-of-0008.tessera-part, each written atomically; a shard run again replaces its part). Required with --shard; a folder every shard and the join can reach (a shared volume on a cluster).") { state, given throws(CommandLineError) in
            guard !given.value.isEmpty else { throw given.refusal("--shard-dir expects a folder") }
            state.shardDirectory = given.value
        },
        Option(flag: "--dry-run", help: "Print the plan (size, stripes, workers, memory and disk) and render nothing.") { state, _ in state.options.dryRun = true },
    ]

    /// Every rendering option in the order grid's help gives them, --order included, then the
    /// progress options.
    static let table: [Option<RenderingParse>] = outputs + shape + encoding + order + rest
        + ReportingOptions.table(progressHelp: "How progress shows on stderr: a bar naming the phase (the default; drawn only when stderr is a terminal), JSON Lines for programs (every stderr line is one event: phase, progress with done/total/eta_s at most 4 a second, skipped, placeholder, warning, error, and a final summary with the sizes, time, peak RSS and outputs), or nothing.", quietHelp: "Print only errors: no progress, warnings or summary (a --dry-run's plan still prints). With --progress json, the events still go to stderr.", refusingContradictions: true)
            .map { $0.lifted(\RenderingParse.options) }

    /// The checks after the last argument, and the options they complete: the pyramid's
    /// settings, the outputs, the shape and the shard. `command` and `example` word the message
    /// for a command line without photos. What is missing (photos, outputs) and `problems` (the
    /// command's own) are refused together, in one error. The shape may be left out: each
    /// command has defaults for it (GridSize, MosaicSize). `dpiConverts`: --dpi has a use
    /// without a JPEG (it turns a print size into pixels).
    static func finish(_ state: RenderingParse, command: String, example: String,
                       dpiConverts: Bool = false, problems commandProblems: [String] = []) throws(CommandLineError) -> GridOptions {
        var options = state.options
        options.tileSizeGiven = state.sawTileSize
        var deepZoom = state.deepZoom
        if options.help { return options }
        if !deepZoom.viewer, let useless = [("--title", deepZoom.title != nil), ("--viewer-labels", state.viewerLabelsGiven),
                                            ("--previews", deepZoom.previews > 0)]
            .first(where: { $0.1 })?.0 {
            throw CommandLineError("\(useless) is for the viewer, and --no-viewer leaves it out: give one of them")
        }
        if deepZoom.labels == ViewerLabels.none && deepZoom.previews > 0 {
            throw CommandLineError("--previews shows a clicked cell's photo, and --viewer-labels none leaves out which photo each cell is: give one of them")
        }
        if options.iiifPath != nil {
            guard let identifier = state.iiifIdentifier else {
                throw CommandLineError("--iiif needs --iiif-id URL: the address the folder will be served at (info.json's id), like https://example.org/iiif/\(options.iiifPath!.split(separator: "/").last.map(String.init) ?? "wall")")
            }
            options.iiifIdentifier = identifier
            if state.deepZoomOverlapGiven && deepZoom.overlap != 0 {
                throw CommandLineError("--iiif: IIIF tiles do not overlap, so the pyramid has no overlap: drop --dzi-overlap \(deepZoom.overlap)")
            }
            deepZoom.overlap = 0
            if !state.deepZoomTileSizeGiven { deepZoom.tileSize = 256 }
        } else if state.iiifIdentifier != nil {
            throw CommandLineError("--iiif-id is the address of the --iiif folder: give --iiif DIR too")
        }
        if options.deepZoomPath != nil || options.deepZoomArchivePath != nil || options.iiifPath != nil {
            deepZoom.quality = state.deepZoomQuality ?? options.settings.quality
            guard DeepZoomSettings.overlaps(forTileSize: deepZoom.tileSize).contains(deepZoom.overlap) else {
                throw CommandLineError("--dzi-overlap must be at most half of --dzi-tile-size (\(deepZoom.tileSize / 2)), got \(deepZoom.overlap)")
            }
            options.deepZoom = deepZoom
        } else if let given = state.deepZoomOptionGiven {
            let viewer = ["--title", "--no-viewer", "--viewer-labels"].contains(given)
            throw CommandLineError("\(given) needs --dzi DIR/NAME.dzi or --szi DIR/NAME.szi\(viewer ? "" : " (or --iiif DIR)")")
        }
        // The viewer's flags do nothing for an IIIF folder alone (it has no viewer page).
        if options.deepZoomPath == nil && options.deepZoomArchivePath == nil && options.iiifPath != nil,
           let useless = [("--title", deepZoom.title != nil), ("--viewer-labels", state.viewerLabelsGiven), ("--no-viewer", !deepZoom.viewer)]
            .first(where: { $0.1 })?.0 {
            throw CommandLineError("\(useless) is for the viewer page of --dzi or --szi, which an IIIF folder does not have: "
                                   + "add --dzi DIR/NAME.dzi or --szi DIR/NAME.szi, or drop \(useless)")
        }
        try PhotoSourceOptions.finish(&options)
        var problems: [String] = []
        if !options.namesPhotos {
            problems.append("no photos given: name files or directories (or lists of them: --photos-from FILE), e.g. tessera \(command) \(example)")
        }
        if options.outputPath.isEmpty && options.deepZoomPath == nil && options.deepZoomArchivePath == nil && options.iiifPath == nil
            && options.tiffPath == nil && options.previewPath == nil {
            problems.append("-o OUT.jpg, --dzi DIR/NAME.dzi, --szi DIR/NAME.szi, --iiif DIR or --tiff FILE.tif (any of them together, or --preview FILE.jpg alone) is required")
        } else if options.settings.dotsPerInch != nil && options.outputPath.isEmpty && !dpiConverts {
            problems.append("--dpi sets the JPEG's density, and only a pyramid is written: add -o OUT.jpg or drop --dpi")
        }
        problems += commandProblems
        if !problems.isEmpty { throw CommandLineError.combining(problems) }
        options.shard = try shardTarget(state.shardSpec, state.shardDirectory, encoder: options.settings.encoder)
        if let shard = options.shard {
            // The join writes the outputs the shards name, and never inside the shard folder
            // (where the parts are): refused here, not after every shard has run.
            // (By the links resolved where the folders exist, and by the names where they do
            // not yet: the shard makes its folder.)
            func inside(_ path: String, _ folder: String) -> Bool { path.hasPrefix(folder == "/" ? "/" : folder + "/") }
            for (flag, path) in [("-o", options.jpegPath), ("--dzi", options.deepZoomPath), ("--tiff", options.tiffPath)] {
                guard let path, inside(OutputDestination.canonicalPath(path), OutputDestination.canonicalPath(shard.directory))
                    || inside(lexicalPath(path), lexicalPath(shard.directory)) else { continue }
                throw CommandLineError("\(flag) \(path) is inside the shard folder \(shard.directory), where the join writes nothing "
                                       + "(the parts are there): name the output in another folder")
            }
        }
        if options.shard != nil, let flag = options.deepZoomArchivePath != nil ? "--szi" : options.iiifPath != nil ? "--iiif" : nil {
            throw CommandLineError("\(flag) is written by the join, not by each shard: give the shards --dzi DIR/NAME.dzi"
                                   + (flag == "--iiif" ? " --dzi-overlap 0" : "") + ", then 'tessera join DIR \(flag) ...'")
        }
        if deepZoom.previews > 0 && options.deepZoomPath == nil && options.deepZoomArchivePath == nil {
            throw CommandLineError("--previews are shown by the Deep Zoom viewer" + (options.iiifPath != nil ? ", which --iiif does not have" : "")
                                   + ": add --dzi DIR/NAME.dzi or --szi DIR/NAME.szi")
        }
        if options.shard != nil && options.previewPath != nil {
            throw CommandLineError("--preview draws the whole picture, and --shard renders a band of it: make the preview without --shard")
        }
        if let preview = options.previewPath, preview == options.outputPath {
            throw CommandLineError("--preview and -o both name \(preview): give the preview a name of its own")
        }
        if options.manifestPath != nil && options.previewPath != nil && options.outputPath.isEmpty && options.deepZoomPath == nil
            && options.deepZoomArchivePath == nil && options.iiifPath == nil && options.tiffPath == nil {
            // It was left unwritten without a word (a new user's trial).
            throw CommandLineError("--manifest says where every photo went in the picture rendered, and --preview alone renders "
                                   + "none: add -o OUT.jpg (or a pyramid), or drop --manifest")
        }
        return options
    }

    /// --shard K/N and --shard-dir DIR, which come together, and not with the serial encoder.
    private static func shardTarget(_ spec: ShardSpec?, _ directory: String?, encoder: EncoderMode?) throws(CommandLineError) -> ShardTarget? {
        switch (spec, directory) {
        case (nil, nil): return nil
        case (let spec?, let directory?):
            if encoder == .serial {
                throw CommandLineError("--shard joins the parallel encoder's restart-marker stripes, which --encoder serial does not make: drop --encoder serial")
            }
            return ShardTarget(shard: spec, directory: directory)
        case (nil, _?): throw CommandLineError("--shard-dir is where --shard K/N writes its part: give --shard too")
        case (_?, nil): throw CommandLineError("--shard K/N needs --shard-dir DIR, the folder its part goes to (and 'tessera join DIR' reads)")
        }
    }
}

/// `path` made absolute from the current folder by its names alone ("." and ".." taken, no link
/// followed): "parts/../parts/x" and "./parts/x" are the same place whether or not it exists.
func lexicalPath(_ path: String) -> String {
    var base = path.hasPrefix("/") ? "" : (currentDirectory() ?? "")
    base += "/" + path
    var parts: [Substring] = []
    for part in base.split(separator: "/") where part != "." {
        if part == ".." { _ = parts.popLast() } else { parts.append(part) }
    }
    return "/" + parts.joined(separator: "/")
}

/// getcwd(3), or nil.
private func currentDirectory() -> String? {
    guard let buffer = getcwd(nil, 0) else { return nil }
    defer { free(buffer) }
    return String(cString: buffer)
}

/// --shard's value, K/N (grid, mosaic and analyse).
func shardSpec(_ given: GivenOption) throws(CommandLineError) -> ShardSpec {
    guard let spec = ShardSpec.parse(given.value) else {
        throw given.refusal("--shard expects K/N with 1 <= K <= N <= \(ShardSpec.maxCount), like 3/8, got '\(given.value)'")
    }
    return spec
}

/// `--max-memory SIZE|auto` into `settings`: whether the budget is to be chosen for the machine
/// (auto), which the command does when it runs (MemoryBudget.automatic).
func memoryBudget(_ given: GivenOption, into settings: inout RenderSettings) throws(CommandLineError) -> Bool {
    if given.value.lowercased() == "auto" {
        settings.maxMemoryBytes = RenderSettings().maxMemoryBytes
        return true
    }
    guard let bytes = parseByteSize(given.value), bytes >= 1 << 20 else {
        throw given.refusal("--max-memory expects auto or a size of at least 1M like 64M, 512MiB, 2G, got '\(given.value)'")
    }
    settings.maxMemoryBytes = bytes
    return false
}

/// The options of a command that takes photos (grid, mosaic, analyse): the paths named, the
/// lists that name more (--photos-from) and how each photo left out is reported (--verbose).
protocol PhotoSources {
    var photoPaths: [String] { get set }
    var photoLists: [PhotoList] { get set }
    /// `-0`: the lists are NUL-separated (applied to every list when the parse ends).
    var photoListsNulSeparated: Bool { get set }
    var verbose: Bool { get set }
}

extension PhotoSources {
    /// Photos are named, on the command line or in a list.
    var namesPhotos: Bool { !photoPaths.isEmpty || !photoLists.isEmpty }
}

extension GridOptions: PhotoSources {}
extension AnalyseOptions: PhotoSources {}

enum PhotoSourceOptions {
    /// --photos-from, -0 and --verbose, for any command whose options are `PhotoSources`.
    static func table<Options: PhotoSources>() -> [Option<Options>] {
        [
            Option("--photos-from", value: "FILE", help: "Also take the photos and folders listed in FILE, one path per line (empty lines skipped; relative paths from the current folder), or - for standard input; repeatable, and combined with PHOTOS. An entry is searched like a path named on the command line: one missing or unreadable is skipped with a warning (a render's --strict refuses it), a folder is searched. The list is read as the scan goes, so a list of a million paths needs no more memory than the photos it names. A list that cannot be read is exit 2, before any photo is read.") { options, given throws(CommandLineError) in
                guard !given.value.isEmpty else { throw given.refusal("--photos-from expects a file listing photos, or - for standard input") }
                if readsStandardInput(given.value), let earlier = options.photoLists.first(where: { readsStandardInput($0.path) }) {
                    throw given.refusal("--photos-from \(given.value): standard input is read once, and --photos-from \(earlier.path) reads it already")
                }
                options.photoLists.append(PhotoList(path: given.value))
            },
            Option(flag: "-0", "--null", help: "The --photos-from lists are separated by NUL bytes, not lines (find -print0, fd -0, locate -0): any path, even one holding a newline.") { options, _ in
                options.photoListsNulSeparated = true
            },
            Option(flag: "-v", "--verbose", help: "Name every photo skipped or drawn as a placeholder, and every duplicate picture a mosaic's dry run finds. Without it, the first \(StreamConsole.namedPerReason) of each reason are named and the rest counted in one line per reason (--progress json has an event for every one either way).") { options, _ in
                options.verbose = true
            },
        ]
    }

    /// The checks after the last argument: -0 needs a list, and applies to every list.
    static func finish<Options: PhotoSources>(_ options: inout Options) throws(CommandLineError) {
        guard options.photoListsNulSeparated else { return }
        guard !options.photoLists.isEmpty else {
            throw CommandLineError("-0 says the --photos-from lists are NUL-separated: give --photos-from FILE with it")
        }
        for index in options.photoLists.indices { options.photoLists[index].nulSeparated = true }
    }

    /// Whether a list path is this process's standard input (which only one list can read).
    static func readsStandardInput(_ path: String) -> Bool {
        ["-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"].contains(path)
    }
}
