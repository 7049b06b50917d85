// MosaicOptions.swift — `tessera mosaic`: the rendering options (RenderingOptions.swift) but
// --order, in a mosaic's words where they differ, plus the mosaic's own (its size in a person's
// terms among them: MosaicSize.swift); and its help.
import Tessera

/// A parsed `tessera mosaic` command line.
public struct MosaicOptions: Equatable, Sendable {
    /// The rendering options (the outputs, the shape, the encoder, the search...): a grid's,
    /// whose `order` a mosaic leaves at its default (its order is the matching's, `seed`).
    public var render = GridOptions()
    public var targetPath = ""
    /// In cells; with `adaptive`, in pixels (default there: the smallest cell's width).
    public var minDistance = 1
    /// `--adaptive`: cells split by the target's detail, down to `minCell` px wide (nil: the
    /// default, MosaicSize.adaptiveLevels).
    public var adaptive = false
    public var minCell: Int?
    /// --min-distance was given (else a library too small for the default lowers it).
    public var minDistanceGiven = false
    public var maxUses: Int?
    /// Every picture at least this many times (`--min-uses`, `--use-all` for 1); 0: no minimum.
    public var minUses = 0
    public var tintPercent = 0
    /// Where the placements go (`--manifest`, a rendering option grid shares).
    public var manifestPath: String? {
        get { render.manifestPath }
        set { render.manifestPath = newValue }
    }
    public var subCells = 3
    /// Where the indexes live (`--cache-dir`, a rendering option grid shares).
    public var cacheDirectory: String? {
        get { render.cacheDirectory }
        set { render.cacheDirectory = newValue }
    }
    public var seed: UInt64 = 1
    public var matchEffort = 2
    /// What the command line says of the mosaic's size (--size, --cells, and the --grid,
    /// --columns, --tile-size and --dpi given), resolved into a shape once the target's shape and
    /// the library's photo count are known (MosaicSize.swift). `render` keeps the columns and
    /// cell size as given (none: nil and 0).
    public var sizeRequest = MosaicSizeRequest()

    public init() {}
}

public enum MosaicCommand {
    /// A mosaic's parse state: the rendering options' and the mosaic's own.
    struct Parse: Sendable {
        var render = RenderingParse()
        var mosaic = MosaicOptions()
    }

    /// The mosaic's own options.
    static let ownTable: [Option<MosaicOptions>] = [
        Option("--target", value: "PICTURE", help: "The picture the mosaic rebuilds (required): an image tessera reads (JPEG, PNG, WebP, HEIF, AVIF, GIF, TIFF), turned upright from its EXIF orientation and centre-cropped to the mosaic's shape.") { mosaic, given in mosaic.targetPath = given.value },
        Option("--min-distance", value: "D", help: "No identical photos within D cells of each other, counted like a chess king's moves (default 1: identical photos never touch; 0: no rule). Needs at least (2D+1)^2 photos. With --adaptive, D is in pixels: the gap between two copies' rectangles (default: the smallest cell's width; 1 only keeps copies from touching). Photos that show the same picture (a copy, an edit, a HEIC and its JPEG export, the same photo turned) count as one photo, here and for --max-uses; --dry-run lists them.") { mosaic, given throws(CommandLineError) in
            mosaic.minDistance = try given.integer(0...MosaicSize.largestPixelDistance)
            mosaic.minDistanceGiven = true
        },
        Option("--max-uses", value: "K", help: "Use one photo at most K times (default: no limit).") { mosaic, given throws(CommandLineError) in
            mosaic.maxUses = try given.integer(1...Int(Int32.max))
        },
        // (Both take the larger minimum, whichever comes first: --use-all with --min-uses 3 is 3.)
        Option("--min-uses", value: "N", help: "Use every picture at least N times (default 0: no minimum). After the first assignment, each picture used fewer times takes the cells where it costs least extra, from photos used more than N times, within --min-distance and --max-uses; the local search never takes a picture below N. Needs at least N x pictures cells (refused before matching, with the --cells and --min-uses that fit), N <= --max-uses, and room for N uses at --min-distance.") { mosaic, given throws(CommandLineError) in
            mosaic.minUses = max(mosaic.minUses, try given.integer(0...Int(Int32.max)))
        },
        Option(flag: "--adaptive", help: "Cells of several sizes: each cell that --grid, --columns, --cells or --size and --tile-size give is split in four where the target has detail and the photos can show it (a quadtree), down to --min-cell, and flat areas keep the large cells. The canvas is the same; the cells end twice as many per halving (4 x with the default quarter: as many as a fixed mosaic of cells half as wide), matched at every size with the same features and rules, --min-distance in pixels. The manifest gives each cell's rectangle (x,y,width,height; column and row count smallest cells); the report and --dry-run count the cells of each size.") { mosaic, _ in
            mosaic.adaptive = true
        },
        Option("--min-cell", value: "PX", help: "With --adaptive: the smallest cells' width in pixels. Default: a quarter of the largest cell's, or half when it does not halve twice. It must be the largest cell (--tile-size) halved once or more, evenly on both sides, and at least \(MosaicSize.smallestCell) px: 100 px cells allow 50 and 25.") { mosaic, given throws(CommandLineError) in
            mosaic.minCell = try given.integer(1...65_535)
        },
        Option(flag: "--use-all", help: "Use every picture at least once: --min-uses 1.") { mosaic, _ in mosaic.minUses = max(mosaic.minUses, 1) },
        Option("--tint", value: "PCT", help: "Shift each cell's colours PCT% of the way toward its part of the target, per sub-cell (default 0).") { mosaic, given throws(CommandLineError) in
            mosaic.tintPercent = try given.integer(0...100)
        },
        Option("--sub-cells", value: "K", help: "Colour features per cell: K x K mean Oklab colours (3...8, default 3).") { mosaic, given throws(CommandLineError) in
            mosaic.subCells = try given.integer(3...8)
        },
        Option("--match-effort", value: "N", help: "Passes of local search after the first assignment: at the default rules every row and column first takes its best photos together; then each cell takes a better photo, or swaps with the neighbour whose photo it wants, whenever the constraints allow and the total error drops (0-20, default 2; 0: the first assignment alone). The report prints the error before and after.") { mosaic, given throws(CommandLineError) in
            mosaic.matchEffort = try given.integer(0...20)
        },
    ]

    /// The size in a person's terms: a print size, a number of cells (MosaicSize.swift).
    static let sizeTable: [Option<MosaicOptions>] = [
        Option("--size", value: "WxH[cm|mm|in]", help: "The picture's size: a print size like 60x90cm, 600x900mm or 24x36in, read at --dpi (default \(MosaicSize.defaultDotsPerInch), written into the JPEG), or pixels like 8000x12000. The canvas is the nearest whole number of cells: square cells of whole pixels, about the default count of them (or --cells N); with --tile-size the grid follows, with --grid or --columns the tile. The target is centre-cropped to this shape. The report says the size made, in pixels and in print.") { mosaic, given throws(CommandLineError) in
            guard let size = PrintSize.parse(given.value) else {
                throw given.refusal("--size expects WIDTHxHEIGHT with an optional unit (cm, mm, in; none for pixels), like 60x90cm, 24x36in or 8000x12000, got '\(given.value)'")
            }
            mosaic.sizeRequest.size = size
        },
        Option("--cells", value: "N", help: "About N cells in the target's shape (or --size's); the default is \(MosaicSize.cellsPerPhoto) per usable photo, \(formatCount(MosaicSize.defaultCells.lowerBound)) to \(formatCount(MosaicSize.defaultCells.upperBound)), in cells of \(MosaicSize.defaultTileSize) px. Not with --grid or --columns, which set the cells themselves.") { mosaic, given throws(CommandLineError) in
            mosaic.sizeRequest.cells = try given.integer(MosaicSize.cellCounts)
        },
    ]

    /// The rendering options a mosaic takes: all but --order (refused: a mosaic's order is its
    /// matching's), with the shape, the seed and the manifest in a mosaic's words.
    static let renderingTable: [Option<RenderingParse>] = RenderingOptions.table.map { option in
        switch option.spec.longName {
        case "--order": return option.refused("--order is a grid's: a mosaic places photos by matching the target (--seed sets its order)")
        case "--grid": return option.withHelp("Columns x rows of cells, e.g. 200x267; the target is centre-cropped to that shape. Default: the target's shape in about \(MosaicSize.cellsPerPhoto) cells per usable photo, \(formatCount(MosaicSize.defaultCells.lowerBound)) to \(formatCount(MosaicSize.defaultCells.upperBound)) (see --cells, --size).")
        case "--columns": return option.withHelp("Columns only; rows follow from the target's shape (upright), or from --size WxH when it is given.")
        case "--tile-size": return option.withHelp("Cell size in pixels: 150, or 200x150 (default \(MosaicSize.defaultTileSize), or what --size and the cell count make). Photos are centre-cropped to fill it. Below \(MosaicSize.smallestCell) px refused, below \(MosaicSize.recognisableCell) px warned: the photos turn into dots of colour.")
        case "--dpi": return option.withHelp("Dots per inch: what a print --size is read at (default \(MosaicSize.defaultDotsPerInch) for cm, mm and in), and the density written into the JPEG (JFIF), so a print shop or a layout program sizes it. Default without a print size: none (1:1 aspect).")
        case "--seed": return option.withHelp("Seed of the matching order (default 1); the same seed gives the same mosaic. It orders the placing with --min-distance above 1, --max-uses, --min-uses or --adaptive; at the default rules rows are placed from the top and it changes nothing.")
        case "--manifest":
            return option.withHelp("Write where every photo went: CSV (column,row,photo,cost: the cell's mean Oklab error), or JSON when FILE ends in .json.")
        default: return option
        }
    }

    /// The mosaic's own options and its size's.
    static let mosaicTable: [Option<MosaicOptions>] = ownTable + sizeTable

    /// Everything mosaic parses.
    static let table: [Option<Parse>] = renderingTable.map { $0.lifted(\Parse.render) } + mosaicTable.map { $0.lifted(\Parse.mosaic) }

    /// The mosaic's own options, as its help, the manual and the completions give them.
    public static let options: [OptionSpec] = mosaicTable.specs()
    /// The rendering options a mosaic takes, in its words.
    public static let renderingOptions: [OptionSpec] = renderingTable.specs()

    /// Parses the arguments after `mosaic`.
    public static func parse(_ arguments: [String], firstIndex: Int = 2) throws(CommandLineError) -> MosaicOptions {
        var state = Parse()
        try parseArguments(arguments, firstIndex: firstIndex, command: "mosaic", table: table, into: &state) {
            $0.render.options.photoPaths.append($1)
        }
        var mosaic = state.mosaic
        let given = state.render.options
        var request = mosaic.sizeRequest
        (request.columns, request.rows) = (given.columns, given.rows)
        if state.render.sawTileSize { (request.cellWidth, request.cellHeight) = (given.cellWidth, given.cellHeight) }
        request.dotsPerInch = given.settings.dotsPerInch
        // Everything missing or contradictory at once, the rendering options' with the mosaic's.
        var problems: [String] = []
        if mosaic.targetPath.isEmpty { problems.append("--target PICTURE is required: the picture the mosaic rebuilds") }
        if mosaic.minCell != nil && !mosaic.adaptive {
            problems.append("--min-cell sets the smallest cell of an adaptive mosaic: add --adaptive, or leave --min-cell out")
        }
        if !mosaic.adaptive && mosaic.minDistance > 100 {
            problems.append("--min-distance \(mosaic.minDistance) is in cells, at most 100 (with --adaptive it is in pixels)")
        }
        if state.render.seedPosition != nil && !mosaic.adaptive && mosaic.minDistance <= 1 && mosaic.maxUses == nil && mosaic.minUses == 0 {
            problems.append("--seed orders the placing only with --min-distance above 1, --max-uses, --min-uses or --adaptive: "
                            + "at these rules every seed gives the same mosaic, so drop --seed")
        }
        problems += MosaicSize.problems(request, sideLimit: given.outputPath.isEmpty ? RenderPlan.maxDeepZoomSide : jpegMaxDimension)
        mosaic.render = try RenderingOptions.finish(state.render, command: "mosaic", example: "--target portrait.jpg ~/Pictures -o out.jpg", dpiConverts: request.size?.isPhysical == true,
                                                    problems: problems)
        if let seed = mosaic.render.seed { mosaic.seed = seed }
        if mosaic.render.help { return mosaic }
        // A print size's density goes into the JPEG, given or not (a pyramid alone has no use
        // for it past the size).
        mosaic.render.settings.dotsPerInch = mosaic.render.jpegPath != nil ? request.effectiveDotsPerInch : nil
        mosaic.sizeRequest = request
        return mosaic
    }

    public static let help: String = {
        var text = """
        tessera mosaic — rebuild a target picture out of your photos, at gigapixel size

        USAGE
          tessera mosaic --target PICTURE PHOTOS... (-o OUT.jpg | --dzi DIR/NAME.dzi | --szi DIR/NAME.szi | --tiff FILE.tif | --iiif DIR --iiif-id URL)... [--size WxH[cm|mm|in] | --cells N | --grid CxR | --columns C] [--tile-size N] [options]

        Every photo is analysed once (its k x k mean Oklab colours, cached on disk), the target is
        cut into the same sub-cells, and each cell gets the photo that matches it best, with no
        identical photos within --min-distance cells and at most --max-uses uses of one photo.
        With --min-distance above 1, --max-uses, --min-uses or --adaptive, cells are matched in a
        random order fixed by --seed, so repeats spread evenly and the same seed gives the same
        mosaic (else rows are placed from the top). --columns alone takes the rows from the
        target's shape.
        Rendering is tessera grid's: stripes on all cores, flat memory, atomic output.

        SIZE
        With no size flag the mosaic has the target's upright shape and about \(MosaicSize.cellsPerPhoto) cells per
        usable photo the scan found (duplicates are known only later), at least \(formatCount(MosaicSize.defaultCells.lowerBound)) and at most
        \(formatCount(MosaicSize.defaultCells.upperBound)), of \(MosaicSize.defaultTileSize) px: 5,000 to 14,000 px a side, seconds to render. --size WxH[unit]
        asks for a print (60x90cm, 600x900mm, 24x36in at --dpi, default \(MosaicSize.defaultDotsPerInch)) or pixels (8000x12000);
        --cells N for about N cells; --grid, --columns and --tile-size for exact numbers. Any two of
        --size, a cell count (--cells, --grid, --columns) and --tile-size decide the third; flags
        that disagree are all named in one error. The report's "size" line says what was made.

        MOSAIC OPTIONS

        """
        text += describe(options)
        text += "\nRENDERING OPTIONS (as for tessera grid; --grid, --columns, --tile-size, --seed, --dpi and --manifest in a mosaic's words)\n\n"
        text += describe(renderingOptions)
        text += """

        EXAMPLES
          # the target's shape, a cell count that suits the library, cells of 100 px
          tessera mosaic --target portrait.jpg ~/Pictures -o mosaic.jpg

          # a 60 x 90 cm poster at 300 dpi (7087 x 10630 px), about 5,000 cells
          tessera mosaic --target portrait.jpg ~/Pictures -o poster.jpg --size 60x90cm --cells 5000

          # a 30,000 x 40,050 px mosaic of a portrait from a photo library
          tessera mosaic --target portrait.jpg ~/Pictures -o mosaic.jpg --grid 200x267 --tile-size 150

          # each photo at most 10 times, never within 2 cells of itself, tinted 20% toward the target
          tessera mosaic --target sunset.jpg trip/ -o sunset-mosaic.jpg --columns 120 --tile-size 100 \\
              --max-uses 10 --min-distance 2 --tint 20 --manifest placements.csv

          # the mosaic and a Deep Zoom viewer that names the photo under the mouse, in one pass
          tessera mosaic --target portrait.jpg ~/Pictures -o mosaic.jpg --dzi zoom/mosaic.dzi \\
              --grid 200x267 --tile-size 150
          xdg-open zoom/mosaic.html
        """
        return text
    }()
}
