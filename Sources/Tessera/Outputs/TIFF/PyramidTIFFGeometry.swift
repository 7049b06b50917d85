// PyramidTIFFGeometry.swift — the shape of a tiled pyramidal TIFF: its pages, their tiles, and
// whether it needs BigTIFF.
//
// The layout libvips's tiffsave writes when asked for tiles, a pyramid and JPEG compression, and
// OpenSlide's generic tiled TIFF, QuPath and GDAL read as a pyramid: page 0 (the first image file
// directory) is the full picture; each later page is marked reduced-resolution (NewSubfileType 1)
// and is half the one before, down to the first that fits in one tile. Every page is cut into
// square tiles, each a JPEG stream of the whole tile (the tiles past the right and bottom edges
// padded). The halving is the Deep Zoom writer's, rounded up, so page k is the Deep Zoom level
// `maxLevel - k` of a pyramid with the same tile size and no overlap, and the writer makes both.

/// Choices for a tiled pyramidal TIFF.
public struct PyramidTIFFSettings: Equatable, Sendable {
    /// Tile side in pixels (TileWidth = TileLength): a multiple of 16, as TIFF requires. 256 is
    /// what libvips and the slide scanners write.
    public var tileSize = 256
    /// JPEG quality of the tiles, 1...100.
    public var quality = 90

    public init() {}

    /// The valid tile sides (multiples of 16 within these).
    public static let tileSizes = 16...1024

    /// Throws for out-of-range values.
    public func validate() throws(TesseraError) {
        guard Self.tileSizes.contains(tileSize), tileSize % 16 == 0 else {
            throw .invalidSettings("TIFF tile size must be a multiple of 16 in \(Self.tileSizes) px, got \(tileSize)")
        }
        guard RenderSettings.qualities.contains(quality) else {
            throw .invalidSettings("TIFF quality must be \(RenderSettings.qualities), got \(quality)")
        }
    }
}

public struct PyramidTIFFGeometry: Equatable, Sendable {
    /// The Deep Zoom levels the pages are (tile size as the TIFF's, no overlap).
    public let levels: DeepZoomGeometry
    /// The Deep Zoom level of the last page: the first, going down, that fits in one tile.
    public let lowestLevel: Int

    public init(width: Int, height: Int, tileSize: Int) {
        levels = DeepZoomGeometry(width: width, height: height, tileSize: tileSize, overlap: 0)
        var lowest = levels.maxLevel
        while lowest > 0 && (levels.levels[lowest].width > tileSize || levels.levels[lowest].height > tileSize) { lowest -= 1 }
        lowestLevel = lowest
    }

    public var width: Int { levels.width }
    public var height: Int { levels.height }
    public var tileSize: Int { levels.tileSize }

    /// The pages, the full picture first.
    public var pages: [DeepZoomGeometry.Level] { levels.levels[lowestLevel...].reversed() }
    public var pageCount: Int { levels.maxLevel - lowestLevel + 1 }
    /// The page a Deep Zoom level is.
    public func page(ofLevel level: Int) -> Int { levels.maxLevel - level }

    /// Tiles of every page, and of page 0 alone.
    public var tileCount: Int { pages.reduce(0) { $0 + $1.columns * $1.rows } }
    public var fullPageTileCount: Int { levels.levels[levels.maxLevel].columns * levels.levels[levels.maxLevel].rows }

    /// A generous estimate of the file's size: every page's tiles (whole, padded) at
    /// `bytesPerPixel`, and its directory (16 bytes a tile, and its tags). From `fromPage` on:
    /// 1 for what waits in the spool.
    public func estimatedBytes(bytesPerPixel: Double, fromPage: Int = 0) -> Int64 {
        var bytes: Int64 = 1 << 16
        for page in pages.dropFirst(fromPage) {
            let tiles = Int64(page.columns * page.rows)
            bytes += Int64(Double(tiles * Int64(tileSize * tileSize)) * bytesPerPixel) + tiles * 16 + 4096
        }
        return bytes
    }

    /// Whether the file must be a BigTIFF: when its tiles at the densest a JPEG of this
    /// subsampling can be (`densestBytesPerPixel`: noise at quality 100) might pass what a
    /// classic TIFF's 32-bit offsets reach. Decided before the first byte is written, so the file
    /// never fails late for being a classic TIFF; every reader named above reads BigTIFF. (Until
    /// 0.6.13 photos' rate at Q100 stood in, and a 960 MP picture of noise at Q100 4:4:4 failed
    /// after its render.)
    public func needsBigTIFF(subsampling: ChromaSubsampling) -> Bool {
        estimatedBytes(bytesPerPixel: RenderPlan.densestBytesPerPixel(subsampling: subsampling)) >= Int64(UInt32.max) - (64 << 20)
    }
}
