// DeepZoomGeometry.swift — the shape of a Deep Zoom pyramid: its levels, tiles and descriptor.
//
// The Deep Zoom format (Microsoft's, read by OpenSeadragon, Leaflet plugins and libvips):
//
//     NAME.dzi                  <Image TileSize Overlap Format><Size Width Height/></Image>
//     NAME_files/LEVEL/COL_ROW.jpg
//
// Level `maxLevel` is the full picture, maxLevel = ceil(log2(max(width, height))); each level
// below is half the size of the one above, rounded up, down to level 0 at 1 x 1 px. Tile
// (c, r) of a level covers pixels [c*T, (c+1)*T) x [r*T, (r+1)*T) plus `overlap` pixels on every
// side that has a neighbour, clipped to the level. This is what libvips's dzsave writes in
// its Deep Zoom layout, and what OpenSeadragon expects.

/// What a Deep Zoom viewer shows of the photo under the mouse.
public enum ViewerLabels: String, Equatable, Sendable, CaseIterable {
    /// The file name ("IMG_0042.HEIC").
    case name
    /// The path as the photos were named on the command line (reveals folders).
    case path
    /// Nothing: no photo names are written at all.
    case none
}

/// Choices for a Deep Zoom pyramid.
public struct DeepZoomSettings: Equatable, Sendable {
    /// Tile side without the overlap (the DZI TileSize), 16...8192. 254 + 2 x 1 overlap gives
    /// 256 px tiles, the usual choice.
    public var tileSize = 254
    /// Pixels each tile repeats from its neighbours on every inner side, 0...tileSize/2.
    public var overlap = 1
    /// JPEG quality of the tiles, 1...100.
    public var quality = 90
    /// Writes NAME.html, a viewer that opens from the local disk.
    public var viewer = true
    /// What the viewer says of the photo under the mouse. A pyramid is made to be shared: the
    /// default names the file only, never the folders it was found in.
    public var labels = ViewerLabels.name
    /// A title the viewer shows over the picture and names its page with (nil: none; the tab
    /// shows NAME).
    public var title: String?
    /// The long side in pixels of the larger picture of each photo the viewer shows when its
    /// cell is clicked (PhotoPreviews), 64...4096; 0: none.
    public var previews = 0

    public init() {}

    /// The valid ranges, for the library's checks and any front end's (one source of truth).
    public static let tileSizes = 16...8192
    public static let previewSizes = PhotoPreviews.sizes
    public static func overlaps(forTileSize tileSize: Int) -> ClosedRange<Int> { 0...(tileSize / 2) }

    /// Throws for out-of-range values.
    public func validate() throws(TesseraError) {
        guard Self.tileSizes.contains(tileSize) else {
            throw .invalidSettings("Deep Zoom tile size must be \(Self.tileSizes) px, got \(tileSize)")
        }
        guard Self.overlaps(forTileSize: tileSize).contains(overlap) else {
            throw .invalidSettings("Deep Zoom overlap must be \(Self.overlaps(forTileSize: tileSize)) px (half the tile size), got \(overlap)")
        }
        guard RenderSettings.qualities.contains(quality) else {
            throw .invalidSettings("Deep Zoom quality must be \(RenderSettings.qualities), got \(quality)")
        }
        guard previews == 0 || Self.previewSizes.contains(previews) else {
            throw .invalidSettings("the viewer's previews must be \(Self.previewSizes) px on their long side (or 0 for none), got \(previews)")
        }
    }
}

public struct DeepZoomGeometry: Equatable, Sendable {
    public struct Level: Equatable, Sendable {
        public let index: Int
        public let width: Int
        public let height: Int
        public let columns: Int
        public let rows: Int
    }

    public let width: Int
    public let height: Int
    public let tileSize: Int
    public let overlap: Int
    /// Index 0 (1 x 1 px) ... maxLevel (full size).
    public let levels: [Level]

    public init(width: Int, height: Int, tileSize: Int, overlap: Int) {
        precondition(width > 0 && height > 0 && tileSize > 0 && overlap >= 0)
        self.width = width
        self.height = height
        self.tileSize = tileSize
        self.overlap = overlap
        var maxLevel = 0
        while (1 << maxLevel) < max(width, height) { maxLevel += 1 }
        var levels: [Level] = []
        for index in 0...maxLevel {
            let shift = maxLevel - index
            let w = (width + (1 << shift) - 1) >> shift
            let h = (height + (1 << shift) - 1) >> shift
            levels.append(Level(index: index, width: w, height: h,
                                columns: (w + tileSize - 1) / tileSize, rows: (h + tileSize - 1) / tileSize))
        }
        self.levels = levels
    }

    public var maxLevel: Int { levels.count - 1 }

    /// Pixels of tile number `index` along an axis `extent` pixels long: its own `tileSize`
    /// plus the overlap on each side that has a neighbour.
    public func span(tile index: Int, extent: Int) -> Range<Int> {
        return max(0, index * tileSize - overlap)..<min(extent, (index + 1) * tileSize + overlap)
    }

    /// Number of tile files.
    public var tileCount: Int { levels.reduce(0) { $0 + $1.columns * $1.rows } }

    /// Inodes the pyramid takes: every tile, a directory per level, NAME_files and its marker,
    /// the viewer's folder and its files, the descriptor and the page.
    public var inodeCount: Int { tileCount + levels.count + 2 + DeepZoomViewer.assetCount + 1 + 2 }

    /// A generous estimate of the pyramid's size on disk: every level's pixels (with overlaps)
    /// at `bytesPerPixel`, plus half a 4 KiB block per file lost to rounding, plus directories.
    public func estimatedBytes(bytesPerPixel: Double) -> Int64 {
        var pixels = 0.0
        for level in levels {
            let overlapFactorX = Double(level.width + 2 * overlap * max(0, level.columns - 1)) / Double(level.width)
            let overlapFactorY = Double(level.height + 2 * overlap * max(0, level.rows - 1)) / Double(level.height)
            pixels += Double(level.width) * Double(level.height) * overlapFactorX * overlapFactorY
        }
        // Tiles smaller than a few kilobytes still take a block: count at least 2 KiB each.
        return Int64(pixels * bytesPerPixel) + Int64(tileCount) * 2048 + Int64(levels.count + 4) * 4096 + (1 << 20)
    }

    /// The .dzi descriptor.
    public var descriptor: String {
        return """
        <?xml version="1.0" encoding="UTF-8"?>
        <Image xmlns="http://schemas.microsoft.com/deepzoom/2008" Format="jpg" Overlap="\(overlap)" TileSize="\(tileSize)">
          <Size Width="\(width)" Height="\(height)"/>
        </Image>

        """
    }
}
