// GridOptions.swift — `tessera grid`: the options of a render (parsed from the rendering
// options' table, RenderingOptions.swift), grid's own checks (--seed needs a shuffle), its help.
import Tessera

/// A parsed `tessera grid` command line.
public struct GridOptions: Equatable, Sendable {
    public var photoPaths: [String] = []
    /// Files that list more photos (`--photos-from`).
    public var photoLists: [PhotoList] = []
    /// `-0`: the lists are NUL-separated (each list's `nulSeparated` says so once parsed).
    public var photoListsNulSeparated = false
    /// Every skipped photo, placeholder and duplicate named (`--verbose`), not the first few of each reason.
    public var verbose = false
    /// The JPEG to write; empty when only a Deep Zoom pyramid is asked for.
    public var outputPath = ""
    /// The Deep Zoom descriptor to write (DIR/NAME.dzi), or nil.
    public var deepZoomPath: String?
    /// The pyramid as one file (DIR/NAME.szi), or nil.
    public var deepZoomArchivePath: String?
    /// The pyramid as IIIF level-0 tiles in this folder, served at `iiifIdentifier`, or nil.
    public var iiifPath: String?
    public var iiifIdentifier: String?
    /// A tiled pyramidal TIFF (FILE.tif), or nil.
    public var tiffPath: String?
    /// A small JPEG of the same picture, written first (`--preview`), or nil.
    public var previewPath: String?
    public var columns: Int?
    public var rows: Int?
    public var cellWidth = 0
    public var cellHeight = 0
    public var order = PhotoOrder.name
    public var seed: UInt64?
    public var settings = RenderSettings()
    /// The budget is chosen for the machine when the render starts (`--max-memory auto`, the
    /// default); false once a size is given.
    public var automaticMemory = true
    /// The pyramid's settings, when --dzi or --szi is given.
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
    /// Where the header index (and a mosaic's feature index) live (`--cache-dir`); nil: the
    /// default cache folder.
    public var cacheDirectory: String?
    /// Render one shard of N into a part file (`--shard K/N --shard-dir DIR`), or nil.
    public var shard: ShardTarget?

    public init() {}

    /// These options with the budget chosen for this machine when it is automatic
    /// (MemoryBudget.automatic: the cgroup's limit or the machine's available memory).
    public func withMemoryChosen(_ budget: @autoclosure () -> MemoryBudget = MemoryBudget.automatic()) -> GridOptions {
        guard automaticMemory else { return self }
        var chosen = self
        chosen.settings.useMemoryBudget(budget())
        return chosen
    }

    /// The JPEG to write, or nil.
    public var jpegPath: String? { outputPath.isEmpty ? nil : outputPath }

    /// What the command writes, as the library takes it.
    public var outputs: [RenderOutput] {
        var outputs: [RenderOutput] = []
        if let jpegPath { outputs.append(.jpeg(path: jpegPath)) }
        if let deepZoomPath, let deepZoom { outputs.append(.deepZoom(path: deepZoomPath, settings: deepZoom)) }
        if let deepZoomArchivePath, let deepZoom { outputs.append(.deepZoomArchive(path: deepZoomArchivePath, settings: deepZoom)) }
        if let iiifPath, let iiifIdentifier, let deepZoom { outputs.append(.iiif(path: iiifPath, settings: deepZoom, identifier: iiifIdentifier)) }
        if let tiffPath {
            var tiff = PyramidTIFFSettings()
            tiff.quality = settings.quality
            outputs.append(.tiff(path: tiffPath, settings: tiff))
        }
        return outputs
    }

    /// What the render is planned and checked for: the outputs, or with none but a preview the
    /// preview as the JPEG (the full picture is then never written).
    public var plannedOutputs: [RenderOutput] {
        guard outputs.isEmpty, let previewPath else { return outputs }
        return [.jpeg(path: previewPath)]
    }

    /// The flag that names `path` (an output, a file an output writes, or the temporary folder),
    /// for messages; nil when none does.
    public func flag(naming path: String) -> String? {
        // First: a temporary folder that is also an output's name is refused as the temporary folder.
        if path == settings.temporaryDirectory { return "--temp-dir" }
        if path == jpegPath { return "-o" }
        if path == previewPath { return "--preview" }
        if let deepZoomPath, let deepZoom,
           RenderOutput.deepZoom(path: deepZoomPath, settings: deepZoom).files.contains(where: { $0.path == path }) { return "--dzi" }
        if let deepZoomArchivePath, let deepZoom,
           RenderOutput.deepZoomArchive(path: deepZoomArchivePath, settings: deepZoom).files.contains(where: { $0.path == path }) { return "--szi" }
        if path == iiifPath { return "--iiif" }
        if path == tiffPath { return "--tiff" }
        if let shard, path == shard.partPath || path == shard.directory { return "--shard-dir" }
        return nil
    }
}

public enum GridCommand {
    /// What grid takes: every rendering option.
    static let table: [Option<RenderingParse>] = RenderingOptions.table

    /// grid's options, as its help, the manual and the completions give them.
    public static let options: [OptionSpec] = table.specs()

    /// Parses the arguments after `grid`. `firstIndex` is the position of `arguments[0]` in the
    /// whole command line, for error positions.
    public static func parse(_ arguments: [String], firstIndex: Int = 2) throws(CommandLineError) -> GridOptions {
        var state = RenderingParse()
        try parseArguments(arguments, firstIndex: firstIndex, command: "grid", table: table, into: &state) { $0.options.photoPaths.append($1) }
        if case .shuffle = state.options.order, let seed = state.options.seed { state.options.order = .shuffle(seed: seed) }
        if let seedPosition = state.seedPosition, !state.options.order.isShuffle {
            throw CommandLineError("--seed orders a shuffle: give --order shuffle with it (a grid in name or date order has nothing to seed)",
                                   argumentIndex: seedPosition)
        }
        return try RenderingOptions.finish(state, command: "grid", example: "~/Pictures -o out.jpg --grid 20x15 --tile-size 150")
    }

    public static let help: String = {
        var text = """
        tessera grid — render a grid of photos into one (giant) JPEG, a Deep Zoom pyramid, a tiled
        pyramidal TIFF, or any of them in one pass, in flat memory

        USAGE
          tessera grid PHOTOS... (-o OUT.jpg | --dzi DIR/NAME.dzi | --szi DIR/NAME.szi | --tiff FILE.tif | --iiif DIR --iiif-id URL)... (--grid CxR | --columns C) --tile-size N [options]

        PHOTOS are image files or directories (searched recursively). JPEG, PNG, WebP,
        HEIF/HEIC, AVIF, GIF, TIFF and the previews inside camera RAW files are read, recognised
        by content, not extension; other files named like photos are named in a warning. Hidden files and folders and thumbnail folders
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

          # the photos a search found, from a list (NUL-separated: any file name), with a folder
          find /data/photos -name '*.jpg' -mtime -365 -print0 |
              tessera grid --photos-from - -0 ~/Pictures/best -o year.jpg --columns 300 --tile-size 100

          # the same picture as a Deep Zoom pyramid to explore in a browser, in the same pass
          tessera grid ~/Pictures -o wall.jpg --dzi wall.dzi --grid 200x267 --tile-size 150
          xdg-open wall.html

          # 150,000 x 150,000 px: too big for one JPEG, fine as a pyramid (its rows need more memory)
          tessera grid ~/Pictures --dzi huge/wall.dzi --grid 1000x1000 --tile-size 150 --max-memory 192M

          # the same as one file to send: a tiled pyramidal TIFF that libvips, OpenSlide and QuPath open
          tessera grid ~/Pictures --tiff huge/wall.tif --grid 1000x1000 --tile-size 150

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
