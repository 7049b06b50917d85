// PyramidShare.swift — what the parts of a sharded render hold of one pyramid (the Deep Zoom's,
// or the TIFF's), checked part by part as the join reads them (ShardJoin.swift).
//
// Each part gives the levels `lowest...max` of its band as tiles, and its band's rows of level
// `lowest - 1` (the reduced picture) from which the join builds the levels below. Every part
// must split the pyramid at the same level; every tile of levels `lowest...max` must come
// exactly once, within the pyramid and no longer than a tile can be; the reduced rows must come
// in order, each exactly once and a whole row long. Nothing here is taken on trust: the
// geometry is the join's own (from the render's size and settings, which the header gives and
// the join checks), and a part's numbers are compared with it before they size anything.
import Glibc

struct PyramidShare {
    /// What messages call it ("the pyramid", "the TIFF").
    let title: String
    let geometry: DeepZoomGeometry
    /// The header keys' prefix ("dz", "tiff"): PREFIX-lowest, PREFIX-reduced-size.
    let prefix: String
    let tileKind: PartRecordKind
    let rowsKind: PartRecordKind
    /// The smallest level the pyramid has: 0 for Deep Zoom, the last page's for a TIFF.
    let bottom: Int
    /// Tiles encoded whole (a TIFF's).
    let padded: Bool
    /// The most bytes a tile of this pyramid can hold (a record claiming more is refused before
    /// a buffer is sized from it): ~20 bytes a pixel is baseline JPEG's worst case at quality 100
    /// with 4:4:4, byte stuffing included.
    let maxTileBytes: UInt64
    /// The level the parts split it at, and the reduced picture below it, once a band is seen.
    private(set) var lowest: Int?
    private(set) var reduced: DeepZoomGeometry?
    /// What the join's writer of the levels below the bands holds (RenderPlan's measure).
    private(set) var writerBytes = 0
    private var checkedReducedRows = 0
    private var tiles = Set<UInt64>()
    /// Bytes of the tiles so far, and of those of the top level.
    private(set) var tileBytes: Int64 = 0
    private(set) var topTileBytes: Int64 = 0
    var tileCount: Int { tiles.count }

    init(title: String, geometry: DeepZoomGeometry, prefix: String, tileKind: PartRecordKind, rowsKind: PartRecordKind,
         bottom: Int = 0, padded: Bool = false) {
        self.title = title
        self.geometry = geometry
        self.prefix = prefix
        self.tileKind = tileKind
        self.rowsKind = rowsKind
        self.bottom = bottom
        self.padded = padded
        let side = UInt64(geometry.tileSize + 2 * geometry.overlap)
        maxTileBytes = side * side * 24 + (1 << 20)
    }

    /// Takes the band `part` describes (a part with an empty band describes none) and checks it
    /// against the bands before.
    mutating func checkBand(of part: PartReader, bad: (String) -> TesseraError) throws(TesseraError) {
        let name = part.name
        guard let text = part.header[prefix + "-lowest"] else { return }
        // (Compared, not a range: a forged picture may have no level above the bottom.) A
        // pyramid of one level (a TIFF of one tile) is that level alone, with no reduced picture.
        let onlyLevel = bottom == geometry.maxLevel
        guard let level = Int(text), level > bottom || (onlyLevel && level == bottom), level <= geometry.maxLevel else {
            throw bad("\(name)'s band of \(title) is not valid")
        }
        if onlyLevel {
            lowest = level
        } else if lowest == nil {
            let fields = (part.header[prefix + "-reduced-size"] ?? "").split(separator: " ").compactMap { Int($0) }
            // Compared with the level first: the geometry is made only from a size that fits.
            guard fields.count == 2, fields[0] == geometry.levels[level - 1].width, fields[1] == geometry.levels[level - 1].height else {
                throw bad("\(name)'s reduced picture does not fit \(title)")
            }
            let picture = DeepZoomGeometry(width: max(1, fields[0]), height: max(1, fields[1]), tileSize: geometry.tileSize,
                                           overlap: geometry.overlap)
            guard picture.maxLevel == level - 1 else { throw bad("\(name)'s reduced picture does not fit \(title)") }
            // What the levels below the bands take (as a render plans its pyramid: tiles in
            // progress and kept rows a level, a padded tile's widened row), before any is built.
            let tileSide = geometry.tileSize + 2 * geometry.overlap
            let columns = picture.levels[bottom...].reduce(0) { $0 + $1.columns }
            writerBytes = columns * (RenderPlan.tileEncoderBytes + tileSide * tileSide * 3 / 8 + 2 * geometry.overlap * tileSide * 3
                                     + (padded ? geometry.tileSize * 3 : 0))
                + 2 * picture.width * 3
            lowest = level
            reduced = picture
        }
        guard level == lowest else { throw bad("\(name) splits \(title) at another level") }
    }

    /// Checks a tile or reduced row of this pyramid from part `name`; `memoryBytes`: the join's
    /// budget (a tile is copied whole, in a buffer of its size).
    mutating func check(_ record: PartRecord, of name: String, memoryBytes: Int, bad: (String) -> TesseraError) throws(TesseraError) {
        if record.kind == tileKind {
            let level = Int(record.a), column = Int(record.b), row = Int(record.c)
            let tile = "\(padded ? "TIFF " : "")tile \(record.a)/\(record.b)_\(record.c)"
            guard let lowest, level >= lowest, level <= geometry.maxLevel, column < geometry.levels[level].columns,
                  row < geometry.levels[level].rows,
                  tiles.insert(UInt64(level) << 56 | UInt64(column) << 28 | UInt64(row)).inserted else {
                throw bad("\(name) holds \(tile), which is out of \(title) or held twice")
            }
            // A TIFF's tiles below page 0 wait in a spool, whose index holds lengths of 24 bits.
            let most = padded && level < geometry.maxLevel ? min(maxTileBytes, UInt64(TileSpool.maximumTileBytes)) : maxTileBytes
            guard record.length <= most else {
                throw bad("\(name) holds \(tile) of \(record.length) bytes, more than a tile of \(title) can be "
                          + "(\(most)): it is damaged or not a part")
            }
            // At least a JPEG's SOI and EOI, and no more than a quarter of the budget.
            guard record.length >= 4 else { throw bad("\(name) holds \(tile) of \(record.length) bytes, too short for a JPEG") }
            guard record.length <= UInt64(memoryBytes / 4) else {
                throw .budgetTooSmall(budgetBytes: memoryBytes, neededBytes: Int(record.length) * 4)
            }
            tileBytes += Int64(record.length)
            if level == geometry.maxLevel { topTileBytes += Int64(record.length) }
        } else if record.kind == rowsKind {
            guard let reduced, checkedReducedRows < reduced.height, Int(record.a) == checkedReducedRows, record.b == 1,
                  Int(record.length) == reduced.width * 3 else {
                let expected = reduced.map { "row \(checkedReducedRows) of \($0.width * 3) bytes" } ?? "none: it gives no band"
                throw bad("\(name)'s reduced rows of \(title) do not follow the band before (row \(record.a) of \(record.length) bytes; "
                          + "expected \(expected))")
            }
            checkedReducedRows += 1
        }
    }

    /// Whether `bytes` are what the shard's encoder makes for tile `record`: a baseline JPEG of
    /// the tile's size with 3 components sampled as `subsampling` says, whole (ending in EOI).
    /// Its entropy-coded data is not decoded: a forger who keeps the frame can spoil the tile's
    /// pixels, not the file around it or the TIFF's word for its subsampling.
    func isTile(_ bytes: [UInt8], of record: PartRecord, subsampling: ChromaSubsampling) -> Bool {
        let level = geometry.levels[Int(record.a)]
        let width = padded ? geometry.tileSize : geometry.span(tile: Int(record.b), extent: level.width).count
        let height = padded ? geometry.tileSize : geometry.span(tile: Int(record.c), extent: level.height).count
        let factors = subsampling.lumaFactors
        guard let frame = JPEGFrame(bytes) else { return false }
        return frame.isBaseline && frame.width == width && frame.height == height
            && frame.sampling == [UInt8(factors.h << 4 | factors.v), 0x11, 0x11] && frame.endsWhole
    }

    /// After the last part: every tile of the bands' levels and every reduced row came.
    func checkComplete(bad: (String) -> TesseraError) throws(TesseraError) {
        guard let lowest, reduced != nil || bottom == geometry.maxLevel else { throw bad("no part holds a band of \(title)") }
        let expected = geometry.levels[lowest...].reduce(0) { $0 + $1.columns * $1.rows }
        guard tiles.count == expected else {
            throw bad("the parts hold \(tiles.count) of \(title)'s \(expected) tiles of levels \(lowest)...\(geometry.maxLevel): "
                      + "a shard did not finish; run it again")
        }
        guard checkedReducedRows == reduced?.height ?? 0 else {
            throw bad("the parts hold \(checkedReducedRows) of \(reduced?.height ?? 0) reduced rows of \(title)")
        }
    }

    /// Feeds `part`'s reduced rows of this pyramid (checked) to `writer`, a batch at a time.
    func feedReducedRows(of part: PartReader, to writer: DeepZoomWriter) throws(TesseraError) {
        guard let reduced else { return }
        let rowBytes = reduced.width * 3
        let batchRows = max(1, min(64, (4 << 20) / rowBytes))
        let rows = part.records.filter { $0.kind == rowsKind }
        var batch = [UInt8](repeating: 0, count: min(rows.count, batchRows) * rowBytes)
        var index = 0
        while index < rows.count {
            let count = min(batchRows, rows.count - index)
            for i in 0..<count {
                let record = rows[index + i]
                try batch.withUnsafeMutableBytes { raw in
                    Result { () throws(TesseraError) in
                        guard record.length == UInt64(rowBytes) else {
                            throw .unusableParts(directory: part.directory, reason: "\(part.name): a reduced row of \(record.length) bytes, not \(rowBytes)")
                        }
                        try part.read(whole: record, into: UnsafeMutableRawBufferPointer(rebasing: raw[(i * rowBytes)...]))
                    }
                }.get()
            }
            try batch.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in try writer.append(rows: raw.baseAddress!, stride: rowBytes, count: count) }
            }.get()
            index += count
        }
    }
}

/// Entropy-coded data checked as tessera's encoder writes it, in pieces: every 0xFF is stuffed
/// (0xFF00), or is a restart marker where `restarts` allows them; so no other marker (a frame,
/// an end of image) is inside. The 0xFF bytes are found with memchr: entropy-coded data has
/// about one in 256.
struct EntropyCodedData {
    let restarts: Bool
    /// The last piece ended on a 0xFF whose pair is the next piece's first byte (data that ends
    /// so is not whole).
    private(set) var endsOnFF = false

    /// Checks the next piece; the byte after an unstuffed 0xFF if there is one (nil: it passes).
    mutating func take(_ piece: UnsafeRawBufferPointer) -> UInt8? {
        guard let base = piece.baseAddress, !piece.isEmpty else { return nil }
        func allowed(_ byte: UInt8) -> Bool { byte == 0x00 || (restarts && (0xD0...0xD7).contains(byte)) }
        if endsOnFF && !allowed(piece[0]) { return piece[0] }
        var at = endsOnFF ? 1 : 0
        endsOnFF = false
        while at < piece.count, let found = memchr(base + at, 0xFF, piece.count - at) {
            let index = base.distance(to: UnsafeRawPointer(found))
            guard index + 1 < piece.count else {
                endsOnFF = true
                return nil
            }
            if !allowed(piece[index + 1]) { return piece[index + 1] }
            at = index + 2
        }
        return nil
    }
}

/// What a JPEG Tessera encoded says of itself, read from its bytes without decoding, and whether
/// it is made as Tessera's encoder makes one (`init` is nil otherwise): SOI; then only APP0 and
/// COM (a header too: an Exif orientation or a colour profile planted there would turn or
/// recolour the joined picture), 8-bit quantisation tables, Huffman tables that a decoder can
/// build (no code past its length, DC symbols at most 15), at most one restart interval, one
/// baseline frame (SOF0) of 8-bit samples and distinct components whose tables are defined,
/// and one interleaved scan of every component, 0-63 with no approximation, whose tables are
/// defined. A `header` (a sharded JPEG's: everything up to its first segment) ends right after
/// the scan header; anything else then holds entropy-coded data in which every 0xFF is
/// stuffed (0xFF00) or a restart marker where an interval is set, and ends with EOI. What is
/// not checked is the entropy-coded data itself: a forger who keeps to this can spoil a
/// tile's pixels, not make a decoder refuse the file.
struct JPEGFrame {
    let width: Int, height: Int
    /// SOF0: baseline (always, when the parse succeeds).
    let isBaseline: Bool
    /// Each component's sampling factors (horizontal << 4 | vertical).
    let sampling: [UInt8]
    /// The bytes end with EOI (always, when the parse succeeds and it is not a header).
    let endsWhole: Bool
    /// The restart interval its DRI sets, in MCUs (0: none).
    let restartInterval: Int

    init?(_ bytes: [UInt8], header: Bool = false) {
        guard let frame = bytes.withUnsafeBufferPointer({ JPEGFrame.parse($0, header: header) }) else { return nil }
        self = frame
    }

    private init(width: Int, height: Int, sampling: [UInt8], endsWhole: Bool, restartInterval: Int) {
        self.width = width
        self.height = height
        isBaseline = true
        self.sampling = sampling
        self.endsWhole = endsWhole
        self.restartInterval = restartInterval
    }

    private static func parse(_ b: UnsafeBufferPointer<UInt8>, header: Bool) -> JPEGFrame? {
        let count = b.count
        guard count >= 4, b[0] == 0xFF, b[1] == 0xD8 else { return nil }
        var quantDefined = [Bool](repeating: false, count: 4)
        var dcDefined = [false, false], acDefined = [false, false]
        var frame: (width: Int, height: Int, ids: [UInt8], sampling: [UInt8], tables: [Int])?
        var restartInterval = 0, restartsSet = false
        var at = 2
        while true {
            guard at + 4 <= count, b[at] == 0xFF else { return nil }
            let marker = b[at + 1]
            if marker == 0xFF { at += 1; continue }
            let length = Int(b[at + 2]) << 8 | Int(b[at + 3])
            guard length >= 2, at + 2 + length <= count else { return nil }
            let body = at + 4, end = at + 2 + length
            switch marker {
            case 0xE0, 0xFE:
                break
            case 0xDB:  // DQT: 8-bit tables of 64 entries
                var p = body
                while p < end {
                    guard b[p] >> 4 == 0, b[p] & 0x0F <= 3, p + 65 <= end else { return nil }
                    quantDefined[Int(b[p] & 0x0F)] = true
                    p += 65
                }
            case 0xC4:  // DHT
                var p = body
                while p < end {
                    guard p + 17 <= end, b[p] >> 4 <= 1, b[p] & 0x0F <= 1 else { return nil }
                    let isDC = b[p] >> 4 == 0, slot = Int(b[p] & 0x0F)
                    var symbols = 0, code = 0
                    for length in 1...16 {
                        let n = Int(b[p + length])
                        symbols += n
                        code += n
                        guard code < 1 << length else { return nil }
                        code <<= 1
                    }
                    guard symbols <= 256, p + 17 + symbols <= end else { return nil }
                    if isDC { guard (0..<symbols).allSatisfy({ b[p + 17 + $0] <= 15 }) else { return nil } }
                    if isDC { dcDefined[slot] = true } else { acDefined[slot] = true }
                    p += 17 + symbols
                }
            case 0xDD:  // DRI
                guard length == 4, !restartsSet else { return nil }
                restartsSet = true
                restartInterval = Int(b[body]) << 8 | Int(b[body + 1])
            case 0xC0:  // SOF0
                guard frame == nil, length >= 8 else { return nil }
                let components = Int(b[body + 5])
                guard b[body] == 8, components >= 1, components <= 4, length == 8 + 3 * components else { return nil }
                let height = Int(b[body + 1]) << 8 | Int(b[body + 2]), width = Int(b[body + 3]) << 8 | Int(b[body + 4])
                let ids = (0..<components).map { b[body + 6 + 3 * $0] }
                let sampling = (0..<components).map { b[body + 7 + 3 * $0] }
                let tables = (0..<components).map { Int(b[body + 8 + 3 * $0]) }
                guard width >= 1, height >= 1, Set(ids).count == components, tables.allSatisfy({ $0 <= 3 }),
                      sampling.allSatisfy({ (1...4).contains($0 >> 4) && (1...4).contains($0 & 0x0F) }) else { return nil }
                frame = (width, height, ids, sampling, tables)
            case 0xDA:  // SOS: every component, interleaved, the whole band of coefficients
                guard let frame, length >= 6 else { return nil }
                let components = Int(b[body])
                guard components == frame.ids.count, length == 6 + 2 * components else { return nil }
                var seen = Set<UInt8>()
                for i in 0..<components {
                    let id = b[body + 1 + 2 * i], dc = Int(b[body + 2 + 2 * i] >> 4), ac = Int(b[body + 2 + 2 * i] & 0x0F)
                    guard frame.ids.contains(id), seen.insert(id).inserted, dc <= 1, ac <= 1, dcDefined[dc], acDefined[ac] else { return nil }
                }
                let tail = body + 1 + 2 * components
                guard b[tail] == 0, b[tail + 1] == 63, b[tail + 2] == 0,
                      frame.tables.allSatisfy({ quantDefined[$0] }) else { return nil }
                if header {
                    guard end == count else { return nil }
                    return JPEGFrame(width: frame.width, height: frame.height, sampling: frame.sampling, endsWhole: false,
                                     restartInterval: restartInterval)
                }
                // The entropy-coded data, then EOI as the last two bytes and nowhere before.
                guard count >= end + 2, b[count - 2] == 0xFF, b[count - 1] == 0xD9 else { return nil }
                var scan = EntropyCodedData(restarts: restartInterval > 0)
                guard scan.take(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(b)[end..<(count - 2)])) == nil,
                      !scan.endsOnFF else { return nil }
                return JPEGFrame(width: frame.width, height: frame.height, sampling: frame.sampling, endsWhole: true,
                                 restartInterval: restartInterval)
            default:
                return nil
            }
            at = end
        }
    }
}
