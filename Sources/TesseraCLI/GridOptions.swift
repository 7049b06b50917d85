// GridOptions.swift — `tessera grid`: the options of a render (parsed from the rendering
// options' table, RenderingOptions.swift), grid's own checks (--seed needs a shuffle), its help.
import Glibc
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
    /// --tile-size was given (without it the cell size is GridSize's default).
    public var tileSizeGiven = false
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
        return try RenderingOptions.finish(state, command: "grid", example: "~/Pictures -o out.jpg")
    }

    public static let help: String = {
        var text = """
        tessera grid — render a grid of photos into one (giant) JPEG, a Deep Zoom pyramid, a tiled
        pyramidal TIFF, or any of them in one pass, in flat memory

        USAGE
          tessera grid PHOTOS... (-o OUT.jpg | --dzi DIR/NAME.dzi | --szi DIR/NAME.szi | --tiff FILE.tif | --iiif DIR --iiif-id URL)... [--grid CxR | --columns C] [--tile-size N] [options]

        PHOTOS are image files or directories (searched recursively). JPEG, PNG, WebP,
        HEIF/HEIC, AVIF, GIF, TIFF and the previews inside camera RAW files are read, recognised
        by content, not extension; other files named like photos are named in a warning. Hidden files and folders and thumbnail folders
        (@eaDir, .thumbnails...) are left out (see --include-hidden, --exclude). Photos fill the grid row by row and repeat when
        there are more cells than photos. Each photo is turned upright from its EXIF orientation
        (a HEIC's own rotation counts once), converted to sRGB from its colour profile (Display P3,
        Adobe RGB...), decoded at the size it is drawn and centre-cropped to fill its cell;
        transparent pixels show the background colour.

        With no --grid, --columns or --tile-size, each photo is drawn once in cells of \(GridSize.defaultTileSize) px, in
        about a square picture; the "size" line says what was chosen. 300 photos make 20 x 15
        cells (4,000 x 3,000 px); 100,000 photos, 339 x 295 cells of 193 px, the largest cell
        that keeps a JPEG inside \(formatCount(jpegMaxDimension)) px a side.

        OPTIONS

        """
        text += describe(options)
        text += """

        EXAMPLES
          # every photo once, about square, cells of \(GridSize.defaultTileSize) px
          tessera grid ~/Pictures -o wall.jpg

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

/// A grid's shape when the command line leaves part of it out: the columns (each photo once,
/// about a square picture) and the cell size (GridSize.defaultTileSize, smaller when the picture
/// would pass the outputs' side limit). Pure arithmetic, tested without a render.
public struct GridShape: Equatable, Sendable {
    public var columns: Int
    public var rows: Int
    public var cellWidth: Int
    public var cellHeight: Int
    /// How the defaults chose it (the "size" line), or nil when the flags gave it whole.
    public var reason: String?
}

public enum GridSize {
    /// The cell's side when --tile-size is not given: a photo is easily seen at it, and 100,000
    /// photos still fit a JPEG at 193 px.
    public static let defaultTileSize = 200
    /// The shapes the default columns may make: from portrait 3:4 to landscape 4:3.
    static let aspects = 0.75...(4.0 / 3.0)

    /// The shape for `photoCount` photos (at least 1). `columns` and `rows` as --grid or
    /// --columns gave them (rows nil: as many as each photo once needs); `tile` as --tile-size
    /// gave it, or nil; `sideLimit`: the longest side the outputs take (RenderRequest.sideLimit).
    public static func resolve(columns: Int?, rows: Int?, tile: (width: Int, height: Int)?, photoCount: Int, sideLimit: Int) -> GridShape {
        precondition(photoCount > 0)
        var cellWidth = tile?.width ?? defaultTileSize, cellHeight = tile?.height ?? defaultTileSize
        let chosenColumns = columns ?? squareColumns(photoCount: photoCount, cellWidth: cellWidth, cellHeight: cellHeight)
        let chosenRows = rows ?? GridLayout.rows(forPhotoCount: photoCount, columns: chosenColumns)
        var shrunk = false
        if tile == nil {
            // The largest square cell inside the limit (a given grid too large for even 1 px
            // is left to the canvas check, which says so).
            let fits = max(1, min(sideLimit / chosenColumns, sideLimit / chosenRows))
            if fits < cellWidth { (cellWidth, cellHeight, shrunk) = (fits, fits, true) }
        }
        guard columns == nil || tile == nil else {
            return GridShape(columns: chosenColumns, rows: chosenRows, cellWidth: cellWidth, cellHeight: cellHeight, reason: nil)
        }
        var reasons: [String] = []
        if columns == nil {
            let empty = chosenColumns * chosenRows - photoCount
            reasons.append("each of the \(formatCount(photoCount)) photo(s) once in about a square picture"
                           + (empty > 0 ? " (the last row's \(formatCount(empty)) empty cell(s) repeat the first photos)" : ""))
        }
        if tile == nil {
            reasons.append(shrunk ? "cells of \(cellWidth) px, the largest that keep the picture inside \(formatCount(sideLimit)) px a side"
                                  : "cells of \(defaultTileSize) px, the default")
        }
        let flags = [columns == nil ? "--columns C" : nil, tile == nil ? "--tile-size N" : nil].compactMap { $0 }.joined(separator: " and ")
        return GridShape(columns: chosenColumns, rows: chosenRows, cellWidth: cellWidth, cellHeight: cellHeight,
                         reason: reasons.joined(separator: "; ") + " (\(flags) choose\(flags.contains(" and ") ? "" : "s") otherwise)")
    }

    /// The columns that show `photoCount` photos once each: among the pictures between 3:4 and
    /// 4:3, one that leaves the fewest cells of the last row empty, then the nearest a square,
    /// then the wider; when none is that shape (a few photos), the nearest a square.
    static func squareColumns(photoCount: Int, cellWidth: Int, cellHeight: Int) -> Int {
        let square = max(1, Int((Double(photoCount) * Double(cellHeight) / Double(cellWidth)).squareRoot().rounded()))
        // 3:4 to 4:3 is within about 15% of the square's columns either way.
        let span = square / 5 + 2
        var best: Int?, bestScore = (Int.max, Double.infinity, 0), nearest = square, nearestScore = (Double.infinity, Int.max, 0)
        for columns in max(1, square - span)...max(1, min(photoCount, square + span)) {
            let rows = GridLayout.rows(forPhotoCount: photoCount, columns: columns)
            let aspect = Double(columns * cellWidth) / Double(rows * cellHeight)
            let empty = columns * rows - photoCount, distance = abs(log(aspect)).rounded(toPlaces: 9)
            if aspects.contains(aspect), (empty, distance, -columns) < bestScore { (best, bestScore) = (columns, (empty, distance, -columns)) }
            if (distance, empty, -columns) < nearestScore { (nearest, nearestScore) = (columns, (distance, empty, -columns)) }
        }
        return best ?? nearest
    }

    /// The report line of a shape the flags did not give whole.
    public static func describe(_ shape: GridShape) -> String? {
        guard let reason = shape.reason else { return nil }
        let tile = shape.cellWidth == shape.cellHeight ? "\(shape.cellWidth) px" : "\(shape.cellWidth) x \(shape.cellHeight) px"
        return "size        \(formatCount(shape.columns)) x \(formatCount(shape.rows)) cells (\(formatCount(shape.columns * shape.rows))) of \(tile): "
            + "\(formatCount(shape.columns * shape.cellWidth)) x \(formatCount(shape.rows * shape.cellHeight)) px; from \(reason)"
    }
}

extension Double {
    /// Rounded to `places` decimals: equal aspects computed two ways compare equal.
    fileprivate func rounded(toPlaces places: Int) -> Double {
        let scale = pow(10, Double(places))
        return (self * scale).rounded() / scale
    }
}
