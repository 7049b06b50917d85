// MosaicSize.swift — a mosaic's size in the terms a person thinks in: a print size (`--size
// 60x90cm` at `--dpi`), a number of cells (`--cells 5000`), or nothing at all (a default that
// suits the library), combined with --grid, --columns and --tile-size into columns, rows and a
// cell size. The arithmetic is pure, so it is tested without a render; what contradicts what is
// found from the flags alone, all of it at once, before any photo is read.
import Tessera

/// A size asked with `--size WxH[unit]`: in pixels, or a print size that `--dpi` turns into pixels.
public struct PrintSize: Equatable, Sendable {
    public enum Unit: String, Sendable, CaseIterable {
        case pixels = "px", centimetres = "cm", millimetres = "mm", inches = "in"

        /// Inches in one unit (nil for pixels, which need no density).
        var inches: Double? {
            switch self {
            case .pixels: return nil
            case .centimetres: return 1 / 2.54
            case .millimetres: return 1 / 25.4
            case .inches: return 1
            }
        }
    }

    public var width: Double
    public var height: Double
    public var unit: Unit

    public init(width: Double, height: Double, unit: Unit) {
        self.width = width
        self.height = height
        self.unit = unit
    }

    /// A print size has a physical unit: it needs a density to be pixels.
    public var isPhysical: Bool { unit != .pixels }

    /// "60x90cm", "24x36in", "8000x12000": the number pair, then the unit (none for pixels).
    /// Nil for anything else, a side of 0 or less, or a side past any picture's (10 million of
    /// the unit: no flag text that long can name a real print).
    public static func parse(_ text: String) -> PrintSize? {
        var rest = Substring(text.lowercased())
        var unit = Unit.pixels
        for candidate in Unit.allCases where rest.hasSuffix(candidate.rawValue) {
            unit = candidate
            rest = rest.dropLast(candidate.rawValue.count)
            break
        }
        let parts = rest.split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let width = number(parts[0]), let height = number(parts[1]) else { return nil }
        // Pixels are whole.
        if unit == .pixels && (width != width.rounded() || height != height.rounded()) { return nil }
        return PrintSize(width: width, height: height, unit: unit)
    }

    /// A positive decimal number of at most 10 million, like "60" or "8.5" (no sign, no exponent).
    private static func number(_ text: Substring) -> Double? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let value = Double(text), value > 0, value <= 10_000_000 else { return nil }
        return value
    }

    /// The size in pixels at `dotsPerInch` (ignored for pixels), each side rounded.
    public func pixels(dotsPerInch: Int) -> (width: Int, height: Int) {
        guard let inches = unit.inches else { return (Int(width), Int(height)) }
        let scale = inches * Double(dotsPerInch)
        return (Int((width * scale).rounded()), Int((height * scale).rounded()))
    }

    /// As a person writes it: "60x90cm", "8.5x11in", "8000x12000".
    public var spelled: String {
        func number(_ value: Double) -> String {
            value == value.rounded() ? String(Int(value)) : formatDecimal(value, places: 2).trimmingTrailingZeros
        }
        return number(width) + "x" + number(height) + (unit == .pixels ? "" : unit.rawValue)
    }
}

/// What a mosaic's command line says of its size: each of the flags that can decide it, nil
/// when not given.
public struct MosaicSizeRequest: Equatable, Sendable {
    /// `--size WxH[unit]`.
    public var size: PrintSize?
    /// `--cells N`.
    public var cells: Int?
    /// `--grid CxR` gives both; `--columns C` the columns alone.
    public var columns: Int?
    public var rows: Int?
    /// `--tile-size N|WxH`.
    public var cellWidth: Int?
    public var cellHeight: Int?
    /// `--dpi N` as given.
    public var dotsPerInch: Int?

    public init(size: PrintSize? = nil, cells: Int? = nil, columns: Int? = nil, rows: Int? = nil, cellWidth: Int? = nil,
                cellHeight: Int? = nil, dotsPerInch: Int? = nil) {
        self.size = size
        self.cells = cells
        self.columns = columns
        self.rows = rows
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
        self.dotsPerInch = dotsPerInch
    }

    /// The density the size is read at: as given, else 300 for a print size; nil for a size in
    /// pixels (or none) without --dpi.
    public var effectiveDotsPerInch: Int? {
        dotsPerInch ?? (size?.isPhysical == true ? MosaicSize.defaultDotsPerInch : nil)
    }

    /// The canvas --size asks for, in pixels.
    public var canvas: (width: Int, height: Int)? {
        size.map { $0.pixels(dotsPerInch: effectiveDotsPerInch ?? MosaicSize.defaultDotsPerInch) }
    }

    /// Whether the target's shape decides the rows: nothing else gives them (no --size, no
    /// --grid). --columns alone leaves them to the mosaic job, as before (MosaicJob.rows).
    public var needsTargetShape: Bool { size == nil && rows == nil && columns == nil }

    var tileGiven: Bool { cellWidth != nil }
    var gridGiven: Bool { rows != nil }
}

/// A mosaic's shape once resolved: what MosaicSettings takes, and how it was chosen.
public struct MosaicShape: Equatable, Sendable {
    public var columns: Int
    /// nil: from the target's shape (MosaicJob.rows), for --columns without --size.
    public var rows: Int?
    public var cellWidth: Int
    public var cellHeight: Int
    /// Why these numbers, for the report: nil when the flags gave the grid and the tile.
    public var reason: String?
}

/// The rules that turn a request into a shape.
public enum MosaicSize {
    /// The cell size when nothing decides it: a photo is recognisable at it, and 2,500 to 20,000
    /// of them make a 5,000 to 14,000 px picture (42 to 120 cm a side at 300 dpi).
    public static let defaultTileSize = 100
    /// The default cell count: this many cells per usable photo (each photo about 25 times, so
    /// repeats stay few), at least `defaultCells.lowerBound` (below it the target is hard to
    /// make out) and at most `defaultCells.upperBound` (200 megapixels at 100 px: seconds to
    /// render on 2 cores, a 120 cm print at 300 dpi).
    public static let cellsPerPhoto = 25
    public static let defaultCells = 2_500...20_000
    /// The density a print size is read at, and written into the JPEG, without --dpi.
    public static let defaultDotsPerInch = 300
    /// A mosaic's cell is refused below this many pixels a side: it cannot show any photo.
    public static let smallestCell = 4
    /// ...and warned about below this: its photos are colours, not pictures.
    public static let recognisableCell = 16
    /// --min-distance accepts up to this many pixels with --adaptive (a grid's: 100 cells).
    public static let largestPixelDistance = 1_000_000
    /// --cells accepts up to this (the matching refuses what its budget cannot hold).
    public static let cellCounts = 1...100_000_000

    /// The default cell count for a library of `photoCount` usable photos.
    public static func defaultCellCount(photoCount: Int) -> Int {
        let wanted = photoCount.multipliedReportingOverflow(by: cellsPerPhoto)
        return min(max(wanted.overflow ? defaultCells.upperBound : wanted.partialValue, defaultCells.lowerBound), defaultCells.upperBound)
    }

    /// Columns and rows of about `count` cells of `cellWidth` x `cellHeight` px whose picture has
    /// the shape `aspect` (width / height): the shorter side from the area, the longer from the
    /// shape, so the rounding's half a cell falls on the side where it bends the shape least.
    public static func grid(aboutCells count: Int, aspect: Double, cellWidth: Int, cellHeight: Int) -> (columns: Int, rows: Int) {
        // Columns per row of the target's shape, in cells.
        let ratio = aspect * Double(cellHeight) / Double(cellWidth)
        if ratio >= 1 {
            let rows = max(1, Int((Double(count) / ratio).squareRoot().rounded()))
            return (max(1, Int((Double(rows) * ratio).rounded())), rows)
        }
        let columns = max(1, Int((Double(count) * ratio).squareRoot().rounded()))
        return (columns, max(1, Int((Double(columns) / ratio).rounded())))
    }

    /// What is wrong with the request: missing pieces cannot be (everything has a default), so
    /// these are flags that contradict each other, a size past any picture's, and cells too small
    /// to show a photo. Each says what to do; an empty list is a request that resolves.
    /// `sideLimit`: the largest side the outputs can have (a JPEG's 65,500 px with -o).
    public static func problems(_ request: MosaicSizeRequest, sideLimit: Int = RenderPlan.maxDeepZoomSide) -> [String] {
        var problems: [String] = []
        if request.cells != nil && request.gridGiven {
            problems.append("--cells and --grid both set how many cells there are: give --grid CxR for that grid, or --cells N for about N in the target's shape")
        } else if request.cells != nil && request.columns != nil {
            problems.append("--cells and --columns both set the columns: give --columns C (rows from the target's shape), or --cells N")
        }
        if let size = request.size, let (width, height) = request.canvas {
            let at = size.isPhysical ? " at \(request.effectiveDotsPerInch!) dpi" : ""
            if width > sideLimit || height > sideLimit {
                let what = sideLimit == jpegMaxDimension ? "a JPEG" : "any picture"
                problems.append("--size \(size.spelled) is \(formatCount(width)) x \(formatCount(height)) px\(at), more than \(what) can be (\(formatCount(sideLimit)) px a side): give a smaller size" + (size.isPhysical ? " or a lower --dpi" : ""))
                return problems
            }
            if width < smallestCell || height < smallestCell {
                problems.append("--size \(size.spelled) is \(width) x \(height) px\(at), smaller than one cell can be (\(smallestCell) px): give a larger size" + (size.isPhysical ? " or a higher --dpi" : ""))
                return problems
            }
            let disagreement = sizeAgreement(request, size: size, width: width, height: height, at: at)
            // A size the flags disagree on has no cell size to judge.
            if !disagreement.isEmpty { return problems + disagreement }
        }
        if let tile = resolvedTileWithoutLibrary(request), min(tile.width, tile.height) < smallestCell {
            problems.append("cells of \(tile.width) x \(tile.height) px cannot show a photo (a mosaic needs at least \(smallestCell) px a side, \(recognisableCell) to recognise one): "
                            + (request.tileGiven ? "give --tile-size \(recognisableCell) or more, or leave it out (\(defaultTileSize) px)" : "ask for fewer cells or a larger --size"))
        }
        return problems
    }

    /// --size with the flags that also set the cells: over-decided, or disagreeing on the canvas.
    private static func sizeAgreement(_ request: MosaicSizeRequest, size: PrintSize, width: Int, height: Int, at: String) -> [String] {
        let asked = "--size \(size.spelled) is \(formatCount(width)) x \(formatCount(height)) px\(at)"
        if request.cells != nil && request.tileGiven && request.columns == nil {
            return ["--size, --cells and --tile-size: any two of them decide the third; drop one"]
        }
        if request.cells != nil && request.cells! > width * height {
            return ["--cells \(formatCount(request.cells!)) is more cells than \(asked) has pixels: ask for fewer cells or a larger size"]
        }
        guard let columns = request.columns, let cellWidth = request.cellWidth, let cellHeight = request.cellHeight else { return [] }
        let wide = columns * cellWidth
        if let rows = request.rows {
            let tall = rows * cellHeight
            if nearestCells(width, cellWidth) != columns || nearestCells(height, cellHeight) != rows {
                let tile = cellWidth == cellHeight ? "\(cellWidth)" : "\(cellWidth)x\(cellHeight)"
                return ["\(asked), but --grid \(columns)x\(rows) of --tile-size \(tile) makes \(formatCount(wide)) x \(formatCount(tall)) px: give two of the three (--size with --grid sets the tile; --size with --tile-size, the grid)"]
            }
        } else if nearestCells(width, cellWidth) != columns {
            return ["\(asked), but --columns \(columns) of --tile-size \(cellWidth) px makes \(formatCount(wide)) px wide: give two of the three (--size with --columns sets the tile; --size with --tile-size, the columns)"]
        }
        return []
    }

    /// The whole number of cells of `cell` px nearest to `length` px (at least 1).
    static func nearestCells(_ length: Int, _ cell: Int) -> Int { max(1, Int((Double(length) / Double(cell)).rounded())) }

    /// The cell size the flags decide before the library is known: given, or from --size with
    /// --grid, --columns or --cells. Nil when the default count decides it (after the scan).
    static func resolvedTileWithoutLibrary(_ request: MosaicSizeRequest) -> (width: Int, height: Int)? {
        if let width = request.cellWidth, let height = request.cellHeight { return (width, height) }
        guard let (width, height) = request.canvas else { return nil }
        if let columns = request.columns, let rows = request.rows {
            return (max(1, Int((Double(width) / Double(columns)).rounded())), max(1, Int((Double(height) / Double(rows)).rounded())))
        }
        if let columns = request.columns {
            let side = max(1, Int((Double(width) / Double(columns)).rounded()))
            return (side, side)
        }
        if let cells = request.cells {
            let side = max(1, Int((Double(width) * Double(height) / Double(cells)).squareRoot().rounded()))
            return (side, side)
        }
        return nil
    }

    /// The shape of a request without problems, for a target of upright shape `aspect` (width /
    /// height; read only when `needsTargetShape`) and a library of `photoCount` usable photos.
    public static func resolve(_ request: MosaicSizeRequest, targetAspect aspect: Double, photoCount: Int) -> MosaicShape {
        let defaultCount = defaultCellCount(photoCount: photoCount)
        let rule = "\(cellsPerPhoto) a photo for \(formatCount(photoCount)) photo(s) found, \(formatCount(defaultCells.lowerBound)) to \(formatCount(defaultCells.upperBound)); --cells N asks for another count"
        if let size = request.size, let (width, height) = request.canvas {
            return resolve(request, size: size, width: width, height: height, defaultCount: defaultCount, rule: rule)
        }
        let cellWidth = request.cellWidth ?? defaultTileSize, cellHeight = request.cellHeight ?? defaultTileSize
        if let columns = request.columns {
            return MosaicShape(columns: columns, rows: request.rows, cellWidth: cellWidth, cellHeight: cellHeight,
                               reason: request.tileGiven ? nil : "the default tile of \(defaultTileSize) px")
        }
        let count = request.cells ?? defaultCount
        let (columns, rows) = grid(aboutCells: count, aspect: aspect, cellWidth: cellWidth, cellHeight: cellHeight)
        let why = request.cells != nil ? "--cells \(formatCount(count))" : "about \(formatCount(count)) cells (\(rule))"
        return MosaicShape(columns: columns, rows: rows, cellWidth: cellWidth, cellHeight: cellHeight,
                           reason: why + " in the target's shape" + (request.tileGiven ? "" : ", cells of \(defaultTileSize) px (the default tile)")
                               + (request.cells == nil ? "; --size WxH[cm|mm|in] asks for a print size" : ""))
    }

    /// The shape for --size: the canvas is the nearest whole number of cells.
    private static func resolve(_ request: MosaicSizeRequest, size: PrintSize, width: Int, height: Int, defaultCount: Int,
                                rule: String) -> MosaicShape {
        let asked = "--size \(size.spelled)" + (size.isPhysical || request.dotsPerInch != nil ? " at \(request.effectiveDotsPerInch!) dpi" : "")
        if let tile = resolvedTileWithoutLibrary(request) {
            let columns = request.columns ?? nearestCells(width, tile.width)
            let rows = request.rows ?? nearestCells(height, tile.height)
            return MosaicShape(columns: columns, rows: rows, cellWidth: tile.width, cellHeight: tile.height, reason: asked)
        }
        // The default count, in cells no smaller than a photo can be recognised at (a small
        // canvas gets fewer cells rather than cells of a few pixels).
        let fitted = Int((Double(width) * Double(height) / Double(defaultCount)).squareRoot().rounded())
        let side = max(fitted, min(recognisableCell, width, height))
        let columns = nearestCells(width, side), rows = nearestCells(height, side)
        // Say when the smallest recognisable cell, not the count, decided the grid.
        let capped = side > fitted ? "; fewer, \(formatCount(columns * rows)), since cells under \(side) px would not show a photo" : ""
        return MosaicShape(columns: columns, rows: rows, cellWidth: side, cellHeight: side,
                           reason: asked + ", about \(formatCount(defaultCount)) cells (\(rule))" + capped)
    }

    /// The report line of a shape the flags did not give whole: the grid, the canvas, and its
    /// print size at the density (the asked unit for a print size, cm otherwise).
    public static func describe(_ shape: MosaicShape, rows: Int, request: MosaicSizeRequest) -> String? {
        guard let reason = shape.reason else { return nil }
        let width = shape.columns * shape.cellWidth, height = rows * shape.cellHeight
        let tile = shape.cellWidth == shape.cellHeight ? "\(shape.cellWidth) px" : "\(shape.cellWidth) x \(shape.cellHeight) px"
        var line = "size        \(formatCount(shape.columns)) x \(formatCount(rows)) cells (\(formatCount(shape.columns * rows))) of \(tile): "
            + "\(formatCount(width)) x \(formatCount(height)) px"
        if let dpi = request.effectiveDotsPerInch {
            let unit = request.size?.isPhysical == true ? request.size!.unit : .centimetres
            let perPixel = 1 / (Double(dpi) * unit.inches!)
            let places = unit == .millimetres ? 0 : 1
            line += ", \(printLength(Double(width) * perPixel, places)) x \(printLength(Double(height) * perPixel, places)) \(unit.rawValue) at \(dpi) dpi"
        }
        return line + "; from \(reason)"
    }

    /// The report line when the target is centre-cropped to a canvas of another shape by more
    /// than a tenth of a side, or nil.
    static func cropNote(canvasAspect: Double, targetAspect: Double) -> String? {
        guard canvasAspect > 0, targetAspect > 0 else { return nil }
        let ratio = canvasAspect / targetAspect
        guard ratio < 0.9 || ratio > 1 / 0.9 else { return nil }
        let side = ratio < 1 ? "width" : "height", kept = ratio < 1 ? ratio : 1 / ratio
        return "crop        the target (\(formatDecimal(targetAspect, places: 2)):1) is centre-cropped to the picture's shape "
            + "(\(formatDecimal(canvasAspect, places: 2)):1): \(Int(((1 - kept) * 100).rounded()))% of its \(side) is left out; "
            + "a --size of the target's shape keeps it whole"
    }

    /// A print length to `places` decimals ("60.4"), whole when it is.
    private static func printLength(_ value: Double, _ places: Int) -> String { formatDecimal(value, places: places).trimmingTrailingZeros }
}

extension String {
    /// "60.40" → "60.4", "60.0" → "60": a decimal without the zeros that say nothing.
    var trimmingTrailingZeros: String {
        guard contains(".") else { return self }
        var text = Substring(self)
        while text.hasSuffix("0") { text = text.dropLast() }
        if text.hasSuffix(".") { text = text.dropLast() }
        return String(text)
    }
}

extension Runner {
    /// The mosaic's shape for this command line and this library (`photoCount` usable photos),
    /// reading the target's upright shape when the flags do not give one; says how it was
    /// chosen (the "size" line) when the flags did not give it whole, and warns about cells too
    /// small to recognise a photo in.
    func mosaicShape(_ mosaic: MosaicOptions, photoCount: Int) throws(TesseraError) -> MosaicShape {
        let request = mosaic.sizeRequest
        let aspect = request.needsTargetShape ? try MosaicSize.uprightAspect(ofPicture: mosaic.targetPath) : 1
        let shape = MosaicSize.resolve(request, targetAspect: aspect, photoCount: photoCount)
        if shape.reason != nil {
            var rows = shape.rows ?? 0
            if shape.rows == nil {
                rows = try MosaicJob.rows(for: MosaicSettings(targetPath: mosaic.targetPath, columns: shape.columns,
                                                              cellWidth: shape.cellWidth, cellHeight: shape.cellHeight))
            }
            if let line = MosaicSize.describe(shape, rows: rows, request: request) { console.result(line) }
            // A size given whole takes its shape from the flags: a target of another shape is
            // cut to it, which a landscape photo asked for as a portrait print lost half its
            // width to without a word (a new user's trial).
            if request.size != nil, rows > 0, let line = MosaicSize.cropNote(
                canvasAspect: Double(shape.columns * shape.cellWidth) / Double(rows * shape.cellHeight),
                targetAspect: try MosaicSize.uprightAspect(ofPicture: mosaic.targetPath)) {
                console.result(line)
            }
        }
        if min(shape.cellWidth, shape.cellHeight) < MosaicSize.recognisableCell {
            console.warning("cells of \(shape.cellWidth) x \(shape.cellHeight) px are too small to recognise a photo in (from \(MosaicSize.recognisableCell) px they are): "
                            + "the mosaic shows the photos as dots of colour; give a larger --tile-size, fewer cells or a larger --size")
        }
        return shape
    }
}

extension MosaicSize {
    /// The upright shape (width / height) of the picture at `path`, from its header and EXIF
    /// orientation, as the mosaic job reads it (MosaicJob.rows).
    static func uprightAspect(ofPicture path: String) throws(TesseraError) -> Double {
        let scanned = try PhotoLibrary.scan([path], selection: PhotoSelection(includeOwnOutputs: true))
        guard let picture = scanned.photos.first, picture.header.width > 0, picture.header.height > 0 else {
            throw .unreadablePhoto(path: path, reason: scanned.skipped.first?.reason ?? "not a picture Tessera reads")
        }
        let turned = OrientationTransform(exifOrientation: picture.header.exifOrientation).swapsAxes
        return turned ? Double(picture.header.height) / Double(picture.header.width)
                      : Double(picture.header.width) / Double(picture.header.height)
    }
}

extension MosaicSize {
    /// An adaptive mosaic's halvings from the largest cell (`shape`'s) to `--min-cell` (nil: a
    /// quarter of the largest, or half when it does not halve twice), or why none fits.
    public static func adaptiveLevels(_ shape: MosaicShape, minCell: Int?) throws(TesseraError) -> Int {
        let width = shape.cellWidth, height = shape.cellHeight
        let allowed = AdaptiveCells.allowedSmallest(largestWidth: width, largestHeight: height, smallestSide: smallestCell)
        let tile = width == height ? "\(width) px" : "\(width) x \(height) px"
        guard !allowed.isEmpty else {
            throw .invalidSettings("--adaptive splits cells in four, but cells of \(tile) do not halve evenly into cells of at least \(smallestCell) px: "
                                   + "give a --tile-size whose sides halve to at least \(smallestCell) px (like 100, which allows --min-cell 50 or 25)")
        }
        guard let minCell else { return min(2, allowed.count) }
        guard let levels = AdaptiveCells.levels(largestWidth: width, largestHeight: height, smallestWidth: minCell, smallestSide: smallestCell) else {
            let list = allowed.map(String.init)
            throw .invalidSettings("--min-cell \(minCell) is not the largest cell (\(tile)) halved evenly: cells split in four, so the smallest can be "
                                   + (list.count == 1 ? list[0] : list.dropLast().joined(separator: ", ") + " or " + list.last!) + " px wide")
        }
        return levels
    }

    /// "cells       2,000 adaptive: 200 of 100 x 100 px, ...": the cells of each size.
    public static func describeCells(_ adaptive: AdaptiveCells) -> String {
        let sizes = adaptive.sizeHistogram.map { "\(formatCount($0.cells)) of \($0.width) x \($0.height) px" }
        return "cells       \(formatCount(adaptive.cells.count)) adaptive, by size: " + sizes.joined(separator: ", ")
            + " (the \(formatCount(adaptive.columns * adaptive.rows)) largest split where the target has detail)"
    }
}
