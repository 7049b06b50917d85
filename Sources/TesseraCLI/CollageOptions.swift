// CollageOptions.swift — `tessera collage`: every photo once, keeping its shape, in justified
// rows or masonry columns (Layouts/CollageLayout.swift), with the rendering options of a grid
// but its shape flags (--grid, --tile-size), and its help.
import Tessera

/// How a collage is laid out, as the command line says it.
public enum CollageArrangement: String, Equatable, Sendable, CaseIterable {
    case rows
    case columns
}

/// A parsed `tessera collage` command line.
public struct CollageOptions: Equatable, Sendable {
    /// The rendering options (outputs, order, seed, background, memory...): a grid's, whose
    /// `columns` are the masonry columns here and whose cell size is unused.
    public var render = GridOptions()
    /// The canvas width in pixels, or nil for the default (about a square picture).
    public var width: Int?
    /// Justified rows' height (about: rows are scaled to fill the width exactly).
    public var rowHeight: Int?
    public var arrangement = CollageArrangement.rows
    /// Pixels between photos and around the edge, in the background colour.
    public var gap = 0

    public init() {}

    /// Rows about this tall unless --row-height says otherwise; columns this wide by default.
    public static let defaultRowHeight = 300
    public static let defaultColumnWidth = 300
}

public enum CollageCommand {
    struct Parse: Sendable {
        var render = RenderingParse()
        var collage = CollageOptions()
        var rowHeightGiven = false
    }

    /// The collage's own options.
    static let ownTable: [Option<Parse>] = [
        Option("--width", value: "PX", help: "The picture's width in pixels (default: about as wide as the collage is tall, at most a JPEG's \(formatCount(jpegMaxDimension)) px, and never wider than the photos side by side at the row height). The height follows from the photos.") { state, given throws(CommandLineError) in
            state.collage.width = try given.integer(1...RenderPlan.maxDeepZoomSide)
        },
        Option("--row-height", value: "PX", help: "The height rows are made about (default \(CollageOptions.defaultRowHeight)): photos fill each row at one height, scaled so the row is exactly --width wide, and rows break where every row comes nearest this height.") { state, given throws(CommandLineError) in
            state.collage.rowHeight = try given.integer(1...jpegMaxDimension)
            state.rowHeightGiven = true
        },
        Option("--layout", value: "rows|columns", help: "rows (default): justified rows, as photo sites show galleries; columns: masonry, --columns columns of equal width, each photo at its own height in the shortest column so far.") { state, given throws(CommandLineError) in
            state.collage.arrangement = try given.choice(CollageArrangement.self, "--layout expects rows or columns, got '\(given.value)'")
        },
        Option("--gap", value: "PX", help: "Pixels between photos and around the edge, in the --background colour (default 0).") { state, given throws(CommandLineError) in
            state.collage.gap = try given.integer(0...1000)
        },
    ]

    /// The rendering options a collage takes, in its words: not the cell shape of a grid.
    static let renderingTable: [Option<RenderingParse>] = RenderingOptions.table.map { option in
        switch option.spec.longName {
        case "--grid": return option.refused("--grid is a grid's: a collage's cells follow from its photos' shapes (--width and --row-height, or --layout columns --columns N)")
        case "--tile-size": return option.refused("--tile-size is a grid's: a collage keeps each photo's shape (--row-height sets the rows' height)")
        case "--columns": return option.withHelp("With --layout columns: how many columns (default: about a square picture, or --width / \(CollageOptions.defaultColumnWidth)).")
        case "--order": return option.withHelp("Photo order: sorted by path (default), by the date each was taken (its EXIF date, oldest first; photos without one after them, by path), or shuffled (--seed). Each photo appears once.")
        case "--seed": return option.withHelp("Seed for --order shuffle (default 1); the same seed gives the same collage.")
        case "--background": return option.withHelp("Colour of the gaps (--gap) and of photos that cannot be decoded (default 808080).")
        case "--manifest": return option.withHelp("Also write where every photo went: CSV (x,y,width,height,photo: its rectangle in pixels), or JSON when FILE ends in .json. Checked before any photo is read; written atomically after the picture.")
        case "--preview": return option.withHelp("First write a small JPEG of the same collage (about 2,000 px on its longer side), to tune by before the full render. Alone, without -o or --dzi, only the preview is made.")
        default: return option
        }
    }

    static let table: [Option<Parse>] = renderingTable.map { $0.lifted(\Parse.render) } + ownTable

    /// The collage's own options, as its help, the manual and the completions give them.
    public static let options: [OptionSpec] = ownTable.specs()
    public static let renderingOptions: [OptionSpec] = renderingTable.specs()

    /// Parses the arguments after `collage`.
    public static func parse(_ arguments: [String], firstIndex: Int = 2) throws(CommandLineError) -> CollageOptions {
        var state = Parse()
        try parseArguments(arguments, firstIndex: firstIndex, command: "collage", table: table, into: &state) {
            $0.render.options.photoPaths.append($1)
        }
        var collage = state.collage
        var problems: [String] = []
        let columns = state.render.options.columns
        switch collage.arrangement {
        case .rows:
            if columns != nil { problems.append("--columns sets masonry columns: add --layout columns (justified rows take --row-height)") }
        case .columns:
            if state.rowHeightGiven { problems.append("--row-height is for justified rows: --layout columns takes --columns N and --width") }
        }
        // At least a pixel a photo (a column) between the gaps.
        if let width = collage.width {
            if let columns, collage.arrangement == .columns, width < columns + collage.gap * (columns + 1) {
                problems.append("--width \(width) has no room for --columns \(columns) (a pixel each) with gaps of \(collage.gap) px: "
                                + "at most \(max(0, (width - collage.gap) / (collage.gap + 1))) columns fit")
            } else if width < 1 + 2 * collage.gap {
                problems.append("--width \(width) leaves no room for a photo between gaps of \(collage.gap) px: give --gap \((width - 1) / 2) or less")
            }
        }
        collage.render = try RenderingOptions.finish(state.render, command: "collage", example: "~/Pictures -o wall.jpg --width 20000", problems: problems)
        if case .shuffle = collage.render.order, let seed = collage.render.seed { collage.render.order = .shuffle(seed: seed) }
        if let seedPosition = state.render.seedPosition, !collage.render.order.isShuffle {
            throw CommandLineError("--seed orders a shuffle: give --order shuffle with it (a collage in name or date order has nothing to seed)",
                                   argumentIndex: seedPosition)
        }
        return collage
    }

    /// The collage's style and width for `aspects` (each photo's upright shape, in order): what
    /// was given, or the defaults (about a square picture), clamped to what the outputs hold.
    static func shape(_ collage: CollageOptions, aspects: [Double], sideLimit: Int) -> (style: CollageStyle, width: Int) {
        let gap = collage.gap
        switch collage.arrangement {
        case .rows:
            let rowHeight = collage.rowHeight ?? CollageOptions.defaultRowHeight
            if let width = collage.width { return (.rows(rowHeight: rowHeight), width) }
            // Rows of height h over a width W hold about W / h of aspect: the collage is about
            // h * h * sum(aspects) / W tall, square when W = h * sqrt(sum). Gaps and odd shapes
            // move that: a few steps toward the square (W to the mean of W and the height the
            // rows then make), each the exact layout's height.
            // Never wider than every photo side by side at the row height: a wider row would
            // draw them taller than it (a single portrait went from 225 x 300 to 461 x 614, a
            // phone screenshot to 1066 x 2487, as each step widened the one row). Photos that
            // make less than two rows' worth are that one row.
            let total = aspects.reduce(0, +)
            let widest = Int((Double(rowHeight) * (aspects.max() ?? 1)).rounded()) + 2 * gap
            let least = max(widest, 2 * gap + 1)
            let oneRow = Int((Double(rowHeight) * total).rounded()) + gap * (aspects.count + 1)
            let most = min(sideLimit, max(least, oneRow))
            if total < 2.25 { return (.rows(rowHeight: rowHeight), most) }
            var width = min(most, max(Int((Double(rowHeight) * total.squareRoot()).rounded()) + 2 * gap, least))
            for _ in 0..<4 {
                let height = CollageLayout.height(aspects: aspects, width: width, rowHeight: rowHeight, gap: gap)
                let next = min(most, max(least, Int((Double(width) * Double(height)).squareRoot().rounded())))
                if abs(next - width) <= width / 50 { break }
                width = next
            }
            // With few rows a step can overshoot the square (18 photos of 4:3 made 1290 x 1980,
            // three to a row): also the widths of a whole number of rows near the square, and
            // whichever comes nearest it.
            func skew(_ width: Int) -> Double {
                let height = Double(max(1, CollageLayout.height(aspects: aspects, width: width, rowHeight: rowHeight, gap: gap)))
                return max(Double(width) / height, height / Double(width))
            }
            var best = (width: width, skew: skew(width))
            let square = Int(total.squareRoot().rounded())
            for rows in max(1, square - 2)...(square + 2) {
                let perRow = Double(aspects.count) / Double(rows)
                let candidate = min(most, max(least, Int((Double(rowHeight) * total / Double(rows) + Double(gap) * (perRow + 1)).rounded())))
                let candidateSkew = skew(candidate)
                if candidateSkew < best.skew { best = (candidate, candidateSkew) }
            }
            return (.rows(rowHeight: rowHeight), best.width)
        case .columns:
            let columns: Int
            if let given = collage.render.columns {
                columns = given
            } else if let width = collage.width {
                columns = max(1, min(aspects.count, width / (CollageOptions.defaultColumnWidth + gap)))
            } else {
                // Each photo adds width / aspect to its column: square when columns^2 = sum(1 / aspect).
                // No more columns than photos, nor than the widest picture holds at the default
                // column width (tall photos asked for 2 columns of 1 photo; wide gaps for more
                // than 65,500 px).
                let square = Int(aspects.reduce(0) { $0 + 1 / $1 }.squareRoot().rounded())
                columns = max(1, min(square, aspects.count, (sideLimit - gap) / (CollageOptions.defaultColumnWidth + gap)))
            }
            let width = collage.width ?? min(sideLimit, columns * (CollageOptions.defaultColumnWidth + gap) + gap)
            return (.columns(count: columns), width)
        }
    }

    public static let help: String = {
        var text = """
        tessera collage — every photo once, keeping its shape, in one (giant) picture

        USAGE
          tessera collage PHOTOS... (-o OUT.jpg | --dzi DIR/NAME.dzi | --szi DIR/NAME.szi | --tiff FILE.tif | --iiif DIR --iiif-id URL)... [--width PX] [--row-height PX | --layout columns [--columns N]] [options]

        Where a grid crops every photo to one cell shape, a collage keeps each photo's own shape
        (upright, from its EXIF orientation): in justified rows (the default) each row holds
        consecutive photos at one height, scaled to fill --width exactly, and rows break where
        every row comes nearest --row-height; in masonry columns (--layout columns) each photo
        goes, at its own height, to the shortest of --columns columns. The height follows. Shapes
        beyond 16:1 (a banner, a long screenshot) are centre-cropped to 16:1. Each photo is
        decoded at the size it is drawn; rendering is tessera grid's: stripes on all cores, flat
        memory, atomic output, Deep Zoom, TIFF and shards.

        COLLAGE OPTIONS

        """
        text += describe(options)
        text += "\nRENDERING OPTIONS (as for tessera grid; --columns, --order, --seed, --background, --preview and --manifest in a collage's words)\n\n"
        text += describe(renderingOptions)
        text += """

        EXAMPLES
          # every photo of a trip, rows about 300 px tall, 20,000 px wide
          tessera collage trip/ -o trip.jpg --width 20000

          # masonry: 40 columns with 8 px white gaps, shuffled
          tessera collage ~/Pictures -o wall.jpg --layout columns --columns 40 --gap 8 --background ffffff --order shuffle

          # ten thousand photos as a pyramid to explore, with a page naming the photo under the mouse
          tessera collage ~/Pictures --dzi wall.dzi --width 30000 --row-height 240

          # what would it take? (size, memory, disk), without rendering
          tessera collage ~/Pictures -o wall.jpg --width 30000 --dry-run
        """
        return text
    }()
}
