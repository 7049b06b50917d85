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
        if let zoom = plan.deepZoom {
            guard zoom.maxLevel >= 1 else {
                throw .invalidSettings("a Deep Zoom pyramid of a \(zoom.width) x \(zoom.height) px picture cannot be split into shards")
            }
            // The largest k (at most maxLevel - 1) giving at least 4 bands a shard, else 0.
            func unitRows(_ k: Int) -> Int {
                let rows = zoom.tileSize << k
                return rows % (1 << (k + 1)) == 0 ? rows : rows * 2
            }
            k = 0
            for candidate in stride(from: zoom.maxLevel - 1, through: 0, by: -1)
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
            let top = zoom.maxLevel, lowest = top - k, overlap = zoom.overlap
            let fed = max(0, rows.lowerBound - (overlap << (k + 1)))..<min(height, rows.upperBound + (overlap << k))
            var fedRows = Array(repeating: 0..<0, count: top + 1)
            var tileRows = Array(repeating: 0..<0, count: top + 1)
            fedRows[top] = fed
            for level in stride(from: top, through: lowest, by: -1) {
                let shift = top - level
                let info = zoom.levels[level]
                if level < top {
                    let above = fedRows[level + 1], aboveHeight = zoom.levels[level + 1].height
                    fedRows[level] = above.lowerBound / 2..<(above.upperBound == aboveHeight ? info.height : above.upperBound / 2)
                }
                let first = (rows.lowerBound >> shift) / zoom.tileSize
                let end = rows.upperBound == height ? info.rows : (rows.upperBound >> shift) / zoom.tileSize
                tileRows[level] = first..<end
            }
            let reducedLevel = zoom.levels[lowest - 1]
            let reduced = (rows.lowerBound >> (k + 1))..<(rows.upperBound == height ? reducedLevel.height : rows.upperBound >> (k + 1))
            deepZoom = DeepZoomBand(window: DeepZoomWindow(lowest: lowest, fedRows: fedRows, tileRows: tileRows, reducedRows: reduced),
                                    fedRows: fed, reducedWidth: reducedLevel.width, reducedHeight: reducedLevel.height)
            needed = needed.map { min($0.lowerBound, fed.lowerBound)..<max($0.upperBound, fed.upperBound) } ?? fed
        }
        let rendered = needed.map { $0.lowerBound / stripeHeight..<($0.upperBound + stripeHeight - 1) / stripeHeight } ?? 0..<0
        return ShardBand(shard: shard, rows: rows, jpegStripes: jpegStripes, renderedStripes: rendered, deepZoom: deepZoom,
                         bandUnitRows: unit)
    }
}
