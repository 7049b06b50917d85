// MosaicOptions.swift — `tessera mosaic`: the rendering options (RenderingOptions.swift) but
// --order, in a mosaic's words where they differ, plus the mosaic's own; and its help.
import Tessera

/// A parsed `tessera mosaic` command line.
public struct MosaicOptions: Equatable, Sendable {
    /// The rendering options (the outputs, the shape, the encoder, the search...): a grid's,
    /// whose `order` a mosaic leaves at its default (its order is the matching's, `seed`).
    public var render = GridOptions()
    public var targetPath = ""
    public var minDistance = 1
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
        Option("--target", value: "PICTURE", help: "The picture the mosaic rebuilds (required): a JPEG, PNG, WebP or HEIF, turned upright from its EXIF orientation and centre-cropped to the mosaic's shape.") { mosaic, given in mosaic.targetPath = given.value },
        Option("--min-distance", value: "D", help: "No identical photos within D cells of each other, counted like a chess king's moves (default 1: identical photos never touch; 0: no rule). Needs at least (2D+1)^2 photos. Photos that show the same picture (a copy, an edit, a HEIC and its JPEG export, the same photo turned) count as one photo, here and for --max-uses; --dry-run lists them.") { mosaic, given throws(CommandLineError) in
            mosaic.minDistance = try given.integer(0...100)
        },
        Option("--max-uses", value: "K", help: "Use one photo at most K times (default: no limit).") { mosaic, given throws(CommandLineError) in
            mosaic.maxUses = try given.integer(1...Int(Int32.max))
        },
        // (Both take the larger minimum, whichever comes first: --use-all with --min-uses 3 is 3.)
        Option("--min-uses", value: "N", help: "Use every picture at least N times (default 0: no minimum). After the first assignment, each picture used fewer times takes the cells where it costs least extra, from photos used more than N times, within --min-distance and --max-uses; the local search never takes a picture below N. Needs at least N x pictures cells (refused before matching, with the --cells and --min-uses that fit), N <= --max-uses, and room for N uses at --min-distance.") { mosaic, given throws(CommandLineError) in
            mosaic.minUses = max(mosaic.minUses, try given.integer(0...Int(Int32.max)))
        },
        Option(flag: "--use-all", help: "Use every picture at least once: --min-uses 1.") { mosaic, _ in mosaic.minUses = max(mosaic.minUses, 1) },
        Option("--tint", value: "PCT", help: "Shift each cell's colours PCT% of the way toward its part of the target, per sub-cell (default 0).") { mosaic, given throws(CommandLineError) in
            mosaic.tintPercent = try given.integer(0...100)
        },
        Option("--sub-cells", value: "K", help: "Colour features per cell: K x K mean Oklab colours (3...8, default 3).") { mosaic, given throws(CommandLineError) in
            mosaic.subCells = try given.integer(3...8)
        },
        Option("--match-effort", value: "N", help: "Passes of local search after the first assignment: each cell takes a better photo, or swaps with the neighbour whose photo it wants, whenever the constraints allow and the total error drops (0-20, default 2; 0: the greedy assignment alone). The report prints the error before and after.") { mosaic, given throws(CommandLineError) in
            mosaic.matchEffort = try given.integer(0...20)
        },
    ]

    /// The rendering options a mosaic takes: all but --order (refused: a mosaic's order is its
    /// matching's), with the shape, the seed and the manifest in a mosaic's words.
    static let renderingTable: [Option<RenderingParse>] = RenderingOptions.table.map { option in
        switch option.spec.longName {
        case "--order": return option.refused("--order is a grid's: a mosaic places photos by matching the target (--seed sets its order)")
        case "--grid": return option.withHelp("Columns x rows of cells, e.g. 200x267; the target is centre-cropped to that shape.")
        case "--columns": return option.withHelp("Columns only; rows follow from the target's shape (upright).")
        case "--seed": return option.withHelp("Seed of the matching order (default 1); the same seed gives the same mosaic.")
        case "--manifest":
            return option.withHelp("Write where every photo went: CSV (column,row,photo,cost: the cell's mean Oklab error), or JSON when FILE ends in .json.")
        default: return option
        }
    }

    /// Everything mosaic parses.
    static let table: [Option<Parse>] = renderingTable.map { $0.lifted(\Parse.render) } + ownTable.map { $0.lifted(\Parse.mosaic) }

    /// The mosaic's own options, as its help, the manual and the completions give them.
    public static let options: [OptionSpec] = ownTable.specs()
    /// The rendering options a mosaic takes, in its words.
    public static let renderingOptions: [OptionSpec] = renderingTable.specs()

    /// Parses the arguments after `mosaic`.
    public static func parse(_ arguments: [String], firstIndex: Int = 2) throws(CommandLineError) -> MosaicOptions {
        var state = Parse()
        try parseArguments(arguments, firstIndex: firstIndex, command: "mosaic", table: table, into: &state) {
            $0.render.options.photoPaths.append($1)
        }
        var mosaic = state.mosaic
        mosaic.render = try RenderingOptions.finish(state.render, command: "mosaic",
                                                    example: "--target portrait.jpg ~/Pictures -o out.jpg --grid 20x15 --tile-size 150")
        if let seed = mosaic.render.seed { mosaic.seed = seed }
        if mosaic.render.help { return mosaic }
        guard !mosaic.targetPath.isEmpty else { throw CommandLineError("--target PICTURE is required") }
        return mosaic
    }

    public static let help: String = {
        var text = """
        tessera mosaic — rebuild a target picture out of your photos, at gigapixel size

        USAGE
          tessera mosaic --target PICTURE PHOTOS... (-o OUT.jpg | --dzi DIR/NAME.dzi)... (--grid CxR | --columns C) --tile-size N [options]

        Every photo is analysed once (its k x k mean Oklab colours, cached on disk), the target is
        cut into the same sub-cells, and each cell gets the photo that matches it best, with no
        identical photos within --min-distance cells and at most --max-uses uses of one photo.
        Cells are matched in a random order fixed by --seed, so repeats spread evenly and the same
        seed gives the same mosaic. --columns alone takes the rows from the target's shape.
        Rendering is tessera grid's: stripes on all cores, flat memory, atomic output.

        MOSAIC OPTIONS

        """
        text += describe(options)
        text += "\nRENDERING OPTIONS (as for tessera grid; --grid, --columns, --seed and --manifest in a mosaic's words)\n\n"
        text += describe(renderingOptions)
        text += """

        EXAMPLES
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
