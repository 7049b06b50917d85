// ShardPlan.swift — which rows of a render one shard of N makes, so that N processes that never
// talk to each other produce, between them, exactly the bytes of the single-process render.
//
// Every shard plans the whole render (the same RenderPlan, layout, photo order, seed and mosaic
// assignment, from the same flags and inputs) and then renders only its band:
//
// - JPEG alone: bands are runs of stripes (stripe = restart interval, RestartMarkerJPEG.swift);
//   a shard's part holds its stripes' entropy-coded segments.
// - With a Deep Zoom pyramid: bands are runs of B = T x 2^k canvas rows (T the tile size, k
//   chosen so that there are at least 4 bands a shard when the picture allows). A band boundary
//   is then a tile boundary at levels max ... max-k, and every one of those levels' tiles of
//   the band is the shard's to write; it renders `overlap x 2^(k+1)` rows of margin on each
//   side for the tiles' overlaps (rows the neighbours own, fed to the pyramid only). Below level
//   max-k the band is less than a tile high, so the shard hands over its band of level
//   max-k-1 (1/4^(k+1) of its pixels) and `tessera join` builds levels 0 ... max-k-1 from the
//   bands in order. Every level is averaged 2 x 2 from the one above with pairs aligned to even
//   rows, and band boundaries are multiples of 2^(k+1), so each band's reduced rows are the
//   whole render's.
//   The JPEG's stripes, in the same pass, belong to the band holding their first row.
// - With a tiled pyramidal TIFF (Outputs/TIFF): the TIFF's pyramid is split the same way, over
//   its own levels (tiles of 256 px, no overlap). Alone, it decides the bands as a Deep Zoom
//   pyramid would. Beside a Deep Zoom pyramid, the bands are the Deep Zoom's, which need not lie
//   on the TIFF's tile boundaries: a TIFF tile then belongs to the band holding its first row,
//   and the shard renders on past its band to that tile's end (a margin below only: the TIFF
//   has no overlap). Its levels are chosen so that the margin is at most half a band unit, and
//   band boundaries are multiples of 2^(k'+1) there too, so the reduced rows it hands over are
//   the whole render's. A TIFF of one tile has one page and nothing below it to hand over.
//
// A band may be empty (more shards than bands): its shard writes a part with nothing in it.

/// "Shard K of N" (K from 1), as the command line gives it ("K/N").
public struct ShardSpec: Equatable, Sendable, CustomStringConvertible {
    public let number: Int
    public let count: Int

    /// The most shards a render is split into.
    public static let maxCount = 10_000

    public init(number: Int, count: Int) throws(TesseraError) {
        guard (1...Self.maxCount).contains(count), (1...count).contains(number) else {
            throw .invalidSettings("a shard is K/N with 1 <= K <= N <= \(Self.maxCount), got \(number)/\(count)")
        }
        self.number = number
        self.count = count
    }

    /// Parses "K/N".
    public static func parse(_ text: String) -> ShardSpec? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]) else { return nil }
        return try? ShardSpec(number: k, count: n)
    }

    public var description: String { "\(number)/\(count)" }

    /// The part file's name in the shard folder: "part-0003-of-0008.tessera-part".
    public var partFileName: String {
        func padded(_ value: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, 4 - text.count)) + text
        }
        return "part-\(padded(number))-of-\(padded(count))" + ShardSpec.partExtension
    }

    public static let partExtension = ".tessera-part"
}

/// One shard's share of a render.
public struct ShardBand: Equatable, Sendable {
    public let shard: ShardSpec
    /// Canvas rows the band owns.
    public let rows: Range<Int>
    /// Stripes whose JPEG segments go into the part (those whose first row is in `rows`).
    public let jpegStripes: Range<Int>
    /// Stripes the shard renders: its own, and those holding the pyramid's margin rows.
    public let renderedStripes: Range<Int>
    /// The pyramid's share, when one is written.
    let deepZoom: DeepZoomBand?
    /// The TIFF pyramid's share, when one is written (levels of `plan.tiff!.levels`).
    let tiff: DeepZoomBand?
    /// Canvas rows a band is made of (the last band may be shorter).
    public let bandUnitRows: Int

    /// The pyramid's share of a band.
    struct DeepZoomBand: Equatable, Sendable {
        /// Levels `window.lowest ... maxLevel` are the shard's.
        let window: DeepZoomWindow
        /// The canvas rows the pyramid is fed (the band and its margins).
        let fedRows: Range<Int>
        /// Geometry of the small picture the join builds the lower levels from: level
        /// `window.lowest - 1` of the whole pyramid.
        let reducedWidth: Int
        let reducedHeight: Int
    }

    /// The band of `shard` in a render planned as `plan`. Throws for a pyramid that cannot be
    /// split (a 1 x 1 px canvas).
    public static func make(plan: RenderPlan, shard: ShardSpec) throws(TesseraError) -> ShardBand {
        let geometry = plan.geometry
        let height = geometry.height
        var unit = geometry.stripeHeight
        var k = 0
        // The pyramid that decides the bands: the Deep Zoom's, else the TIFF's (down to the level
        // above its last page: the join builds at least that page; a TIFF of one page, one
        // tile, is its top level alone, written by the band holding row 0).
        let deciding = plan.deepZoom.map { ($0, $0.maxLevel - 1) }
            ?? plan.tiff.map { ($0.levels, max(0, $0.levels.maxLevel - $0.lowestLevel - 1)) }
        if let (zoom, deepest) = deciding {
            guard zoom.maxLevel >= 1 else {
                let what = plan.deepZoom != nil ? "a Deep Zoom pyramid" : "a TIFF pyramid"
                throw .invalidSettings("\(what) of a \(zoom.width) x \(zoom.height) px picture (one pixel, one level) cannot be split "
                                       + "into shards: render it in one process")
            }
            // The largest k (at most `deepest`) giving at least 4 bands a shard, else 0.
            func unitRows(_ k: Int) -> Int {
                let rows = zoom.tileSize << k
                return rows % (1 << (k + 1)) == 0 ? rows : rows * 2
            }
            k = 0
            for candidate in stride(from: deepest, through: 0, by: -1)
            where (height + unitRows(candidate) - 1) / unitRows(candidate) >= 4 * shard.count {
                k = candidate
                break
            }
            unit = unitRows(k)
        }
        let bands = (height + unit - 1) / unit
        let firstBand = (shard.number - 1) * bands / shard.count
        let endBand = shard.number * bands / shard.count
        let rows = min(height, firstBand * unit)..<min(height, endBand * unit)
        let stripeHeight = geometry.stripeHeight
        let jpegStripes = rows.isEmpty || !plan.writesJPEG ? 0..<0
            : (rows.lowerBound + stripeHeight - 1) / stripeHeight..<(rows.upperBound + stripeHeight - 1) / stripeHeight
        var needed = jpegStripes.isEmpty ? nil : Optional(jpegStripes.lowerBound * stripeHeight..<min(height, jpegStripes.upperBound * stripeHeight))
        var deepZoom: DeepZoomBand?
        if let zoom = plan.deepZoom, !rows.isEmpty {
            let band = pyramidBand(zoom, rows: rows, levels: k)
            deepZoom = band
            needed = needed.map { min($0.lowerBound, band.fedRows.lowerBound)..<max($0.upperBound, band.fedRows.upperBound) } ?? band.fedRows
        }
        var tiff: DeepZoomBand?
        if let pages = plan.tiff, !rows.isEmpty {
            // Beside a Deep Zoom pyramid: the most levels whose pairs the band's boundaries align
            // and whose tiles reach at most half a band unit past it (at least the top level).
            var levels = k
            if plan.deepZoom != nil {
                levels = 0
                for candidate in stride(from: pages.levels.maxLevel - pages.lowestLevel - 1, through: 1, by: -1)
                where unit % (1 << (candidate + 1)) == 0 && pages.tileSize << candidate <= unit / 2 {
                    levels = candidate
                    break
                }
            }
            let band = pyramidBand(pages.levels, rows: rows, levels: levels)
            tiff = band
            needed = needed.map { min($0.lowerBound, band.fedRows.lowerBound)..<max($0.upperBound, band.fedRows.upperBound) } ?? band.fedRows
        }
        let rendered = needed.map { $0.lowerBound / stripeHeight..<($0.upperBound + stripeHeight - 1) / stripeHeight } ?? 0..<0
        return ShardBand(shard: shard, rows: rows, jpegStripes: jpegStripes, renderedStripes: rendered, deepZoom: deepZoom,
                         tiff: tiff, bandUnitRows: unit)
    }

    /// The share of pyramid `zoom`'s levels max ... max-k of the band of canvas rows `rows`
    /// (its boundaries multiples of 2^(k+1)): at each level, the tile rows whose first row is
    /// in the band, and the rows to feed for them and their overlaps; the band's rows of level
    /// max-k-1, for the join. On tile boundaries (a Deep Zoom band) the tiles are exactly the
    /// band's; off them (a TIFF beside a Deep Zoom pyramid) the last tiles reach past it.
    static func pyramidBand(_ zoom: DeepZoomGeometry, rows: Range<Int>, levels k: Int) -> DeepZoomBand {
        let height = zoom.height
        let top = zoom.maxLevel, lowest = top - k, overlap = zoom.overlap, tileSize = zoom.tileSize
        var tileRows = Array(repeating: 0..<0, count: top + 1)
        var fedEnd = rows.upperBound + (overlap << k)
        for level in lowest...top {
            let shift = top - level
            let info = zoom.levels[level]
            let first = ((rows.lowerBound >> shift) + tileSize - 1) / tileSize
            let end = rows.upperBound == height ? info.rows : min(info.rows, ((rows.upperBound >> shift) + tileSize - 1) / tileSize)
            tileRows[level] = min(first, end)..<end
            if end > first { fedEnd = max(fedEnd, (end * tileSize + overlap) << shift) }
        }
        let fed = max(0, rows.lowerBound - (overlap << (k + 1)))..<min(height, fedEnd)
        var fedRows = Array(repeating: 0..<0, count: top + 1)
        fedRows[top] = fed
        for level in stride(from: top - 1, through: lowest, by: -1) {
            let above = fedRows[level + 1], aboveHeight = zoom.levels[level + 1].height
            fedRows[level] = above.lowerBound / 2..<(above.upperBound == aboveHeight ? zoom.levels[level].height : above.upperBound / 2)
        }
        let reducedLevel = zoom.levels[lowest - 1]
        let reduced = (rows.lowerBound >> (k + 1))..<(rows.upperBound == height ? reducedLevel.height : rows.upperBound >> (k + 1))
        return DeepZoomBand(window: DeepZoomWindow(lowest: lowest, fedRows: fedRows, tileRows: tileRows, reducedRows: reduced),
                            fedRows: fed, reducedWidth: reducedLevel.width, reducedHeight: reducedLevel.height)
    }
}
