// HEIF.swift — HEIC (HEVC) and AVIF (AV1) photos through libheif (tessera_heif.c): the
// format's entry, its reader, the planes-to-RGB conversion, and its rows into the cell path.
//
// An embedded thumbnail is used only when its centre crop has every pixel of the cell
// (HEIFFormat.thumbnailCovers). Otherwise a grid (what phones write: 512 x 512 HEVC tiles) is
// decoded a row of tiles at a time and fed to the resampler top to bottom, never assembled: the
// shim decodes each tile through libheif as libheif decodes it inside the whole grid (planar
// RGB), and the grid's irot and imir become the orientation the cell path applies. A grid that
// cannot go that way (an alpha plane, a clap crop, tiles of different sizes) and a single
// picture are decoded whole, to their own planes, converted a row at a time. Every decode is
// admitted against the budget first, for what it really holds: a row of tiles, or the whole
// decode at the sizes libheif decodes at, read from the boxes by the shim (a grid's canvas and
// tiles, a picture's SPS or AV1 sequence header), never 'ispe' alone: a file whose boxes
// disagree is refused.
import CTesseraShims

extension ImageFormat {
    /// HEIF: HEIC (HEVC) from phones, and AVIF (AV1), both through libheif.
    public static let heif = ImageFormat(rawValue: "HEIF")
}

enum HEIFFormat: PhotoFormat {
    static let format = ImageFormat.heif
    static let suffixes = [".heic", ".heif", ".hif", ".avif"]
    static let kinds = "HEIF/HEIC, AVIF"

    static func sniff(_ bytes: [UInt8]) -> Sniffed? {
        guard starts(bytes, with: Array("ftyp".utf8), at: 4), bytes.count >= 12 else { return nil }
        // The major brand, then (within the first bytes read) the compatible ones.
        let size = min(bytes.count, max(12, Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])))
        var brands = [String(decoding: bytes[8..<12], as: UTF8.self)]
        var at = 16
        while at + 4 <= size {
            brands.append(String(decoding: bytes[at..<(at + 4)], as: UTF8.self))
            at += 4
        }
        let still = ["heic", "heix", "heim", "heis", "mif1", "mif2", "avif", "miaf"]
        if brands.contains(where: still.contains) { return .readable(format) }
        if brands.contains(where: ["hevc", "hevx", "msf1", "avis"].contains) { return .unreadable("a HEIF image sequence") }
        return nil
    }

    static func header(of photo: PhotoFile, decoderMemoryBytes: Int) throws(TesseraError) -> PhotoHeader {
        try scanHeader(of: photo, openBytes: decoderMemoryBytes)
    }

    /// The boxes, a few small items, and at a decode the items it decodes, each read whole.
    static func readsAhead(decoding: Bool) -> Bool { false }

    static func scanHeader(of photo: PhotoFile, decoderMemoryBytes: Int, openBytes: Int) throws(TesseraError) -> PhotoHeader {
        try scanHeader(of: photo, openBytes: openBytes)
    }

    /// The scan's reading of `photo`, libheif let hold at most `openBytes` to open it
    /// (scanOpenBytes), naming the budget that would let it (scanBudget).
    static func scanHeader(of photo: PhotoFile, openBytes: Int) throws(TesseraError) -> PhotoHeader {
        try HEIFReader(photo: photo, openLimitBytes: openBytes, advice: { Int64(scanBudget(forOpenBytes: $0)) },
                       large: { _, open in HEIFReader.largeOpens.withLock { open() } }).header
    }

    /// What a scan under `budgetBytes` lets libheif hold to open one HEIF: half of what the
    /// budget leaves beside the process (the scan's other worker opens a small one beside it;
    /// larger opens are one at a time), at least 1 MiB.
    static func scanOpenBytes(budgetBytes: Int) -> Int {
        max(HEIFReader.largeOpenBytes, (budgetBytes - RenderPlan.processAllowanceBytes) / 2)
    }

    /// The budget whose scan opens a HEIF holding `openBytes`.
    static func scanBudget(forOpenBytes openBytes: Int) -> Int { 2 * openBytes + RenderPlan.processAllowanceBytes }

    /// The whole decode (`header.wholeImageBytes`), unless the thumbnail covers the cell: then
    /// it is drawn from that, which costs little.
    static func wholeImageBytes(_ header: PhotoHeader, cellWidth: Int, cellHeight: Int) -> Int {
        guard header.wholeImageBytes > 0 else { return 0 }
        let swapped = OrientationTransform(exifOrientation: header.exifOrientation).swapsAxes
        let (width, height) = swapped ? (cellHeight, cellWidth) : (cellWidth, cellHeight)
        let thumbnail = (width: header.thumbnailWidth, height: header.thumbnailHeight)
        if thumbnailCovers(thumbnail, storedCell: (width, height), aspect: Double(width) / Double(height)) { return 0 }
        return Int(clamping: header.wholeImageBytes)
    }

    /// Whether a `thumbnail` (0 x 0: none) cropped at its centre to `aspect` (stored frame)
    /// still has every pixel of a `storedCell`: the one rule for when a thumbnail is enough.
    static func thumbnailCovers(_ thumbnail: (width: Int, height: Int), storedCell: (width: Int, height: Int),
                                aspect: Double) -> Bool {
        guard thumbnail.width > 0 && thumbnail.height > 0 else { return false }
        let cropWidth = min(Double(thumbnail.width), Double(thumbnail.height) * aspect)
        let cropHeight = cropWidth / aspect
        return cropWidth >= Double(storedCell.width) - 1e-9 && cropHeight >= Double(storedCell.height) - 1e-9
    }

    static func decode(_ photo: PhotoFile, with decoder: CellDecoder,
                       into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let budget = decoder.budget
        return try decoder.decodeHEIF(HEIFReader(photo: photo, openLimitBytes: budget.oneDecodeLimitBytes,
                                                 advice: { budget.budgetToDraw(oneDecodeBytes: $0) },
                                                 large: { bytes, open in budget.admitted(bytes: bytes) { open() } }), into: cell)
    }
}

final class HEIFReader {
    let photo: PhotoFile
    private let heif: OpaquePointer
    let info: tessera_heif_info
    /// An AVIF (its ftyp's major brand avif or avis): its AV1 decoder (dav1d) holds more than
    /// libde265 for the same picture.
    let isAV1: Bool

    /// Opens that make libheif hold more than this are made through `large` (a scan's workers
    /// each open a file; a phone's items are tiles of about 60 KB).
    static let largeOpenBytes = 1 << 20
    static let largeOpens = Mutex()

    /// Opens `photo`. libheif 1.15 reads every item's data whole to open a file (and keeps the
    /// metadata's): past `openLimitBytes` the open is refused before libheif reads them, naming
    /// the budget `advice` gives for those bytes (one Exif item of 15 extents that are each the
    /// whole 1.5 MB file took 55 MiB under a 32 MiB budget); past `largeOpenBytes` it is made
    /// inside `large` (given the bytes: one at a time at a scan, admitted by a render's budget).
    init(photo: PhotoFile, openLimitBytes: Int, advice: (Int) -> Int64,
         large: (Int, () -> OpaquePointer?) -> OpaquePointer?) throws(TesseraError) {
        self.photo = photo
        var brand = [UInt8](repeating: 0, count: 12)
        let read = (try? brand.withUnsafeMutableBytes { bytes in
            Result { () throws(TesseraError) in try photo.file.read(into: bytes, at: 0) }
        }.get()) ?? 0
        isAV1 = read == 12 && (brand[8..<12].elementsEqual("avif".utf8) || brand[8..<12].elementsEqual("avis".utf8))
        var info = tessera_heif_info()
        var message = [CChar](repeating: 0, count: 200)
        let limit = max(0, openLimitBytes)
        let fileBytes = UInt64(max(0, photo.fileBytes))
        var opened = tessera_heif_open(photo.file.rawValue, fileBytes, UInt64(min(limit, Self.largeOpenBytes)), &info, &message, 200)
        if opened == nil && info.open_bytes > UInt64(min(limit, Self.largeOpenBytes)) {
            let bytes = Int(clamping: info.open_bytes)
            guard bytes <= limit else {
                throw TesseraError.photoNeedsMemory(
                    path: photo.path, reason: "libheif reads every item's data whole to open a HEIF, and this one's come to "
                        + "\(formatBytes(Int64(bytes))), more than the memory budget leaves for it", budgetToDrawBytes: advice(bytes))
            }
            opened = large(bytes) { tessera_heif_open(photo.file.rawValue, fileBytes, UInt64(limit), &info, &message, 200) }
        }
        guard let heif = opened else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "HEIF: \(cMessage(message))")
        }
        self.heif = heif
        self.info = info
        guard info.width > 0, info.height > 0 else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "HEIF: image has no pixels")
        }
    }

    deinit { tessera_heif_close(heif) }

    /// The orientation still to apply: EXIF's, unless the file's own irot/imir did it already
    /// (an iPhone writes both, and they agree: turning by both would turn twice).
    var orientation: Int { info.has_transform != 0 ? 0 : Int(info.exif_orientation) }

    var header: PhotoHeader {
        var header = PhotoHeader(width: Int(info.width), height: Int(info.height), colorModel: .rgb, isProgressive: false,
                                 exifOrientation: orientation, adobeInverted: false)
        header.format = .heif
        header.dateTaken = info.date_taken
        header.hasAlpha = info.has_alpha != 0
        header.colorTag = ColorProfiles.tag(icc: iccProfile, primaries: info.cicp_primaries, transfer: info.cicp_transfer)
        header.wholeImageBytes = decodeBytes
        header.thumbnailWidth = Int(info.thumbnail_width)
        header.thumbnailHeight = Int(info.thumbnail_height)
        return header
    }

    /// What a whole decode of a `width` x `height` image holds, measured with libheif 1.15 and
    /// libde265 on this machine (4000 x 3000, 8 bits, in the tessera process: its peak RSS over
    /// a render of nothing else). A grid (what phones write: 512 x 512 tiles) is decoded a tile
    /// at a time into one planar RGB image, which libheif 1.15 always assembles grids in: 3 bytes
    /// a pixel, plus a tile's decoder and our rows (42 MB measured). One HEVC picture of the
    /// whole size costs libde265's picture and its per-block tables, and libheif's copy (73 MB
    /// measured): about 6.1 bytes a pixel. One AV1 picture through dav1d (two cores; its
    /// frame threads follow the core count) held 90.3 MiB for 4000 x 3000 over the process's
    /// 16.5 MiB on 2026-12-01: 7.9 bytes a pixel, so 8.
    static func decodeBytes(width: Int, height: Int, bits: Int, grid: Bool, av1: Bool = false) -> Int64 {
        let pixels = Int64(width) * Int64(height)
        let depth: Int64 = bits > 8 ? 2 : 1
        if grid { return pixels * 3 * depth + (8 << 20) }
        return (av1 ? pixels * 8 : pixels * 13 / 2) * depth + (2 << 20)
    }

    /// The same for what the shim read from the boxes (`tessera_heif_size`): the size libheif
    /// really decodes at, whatever 'ispe' says, and for a grid its largest tile's decoder too
    /// (the 8 MiB above covers a phone's 512 x 512 tile; a larger one is counted).
    static func decodeBytes(_ size: tessera_heif_size, bits: Int, av1: Bool = false) -> Int64 {
        let grid = size.tile_width > 0
        var bytes = decodeBytes(width: Int(size.width), height: Int(size.height), bits: bits, grid: grid, av1: av1)
        if grid {
            let tile = decodeBytes(width: Int(size.tile_width), height: Int(size.tile_height), bits: bits, grid: false, av1: av1)
            bytes += max(0, tile - (8 << 20))
        }
        return bytes
    }

    /// What drawing the primary image holds: a row of tiles (tiledBytes) or the whole decode.
    /// A picture above 8 bits with alpha also holds the alpha picture's decode and libheif's
    /// 16-bit copies of both beside the colour: a 2048 x 2048 12-bit 4:4:4 AVIF with alpha peaked
    /// at 102.8 MiB under an 84 MiB budget its 16 bytes a pixel admitted (a helper's finding);
    /// 6 bytes a pixel more covers it. A 2048 x 2048 10-bit HEIC with alpha (heif-enc's) held
    /// 87 MiB where 13 bytes a pixel were counted (103.8 MiB at 80M, another helper's): 8 more.
    var decodeBytes: Int64 {
        if info.tiled != 0 { return Self.tiledBytes(info, av1: isAV1) }
        let alpha = info.has_alpha != 0 && info.luma_bits > 8 ? Int64(info.decode.width) * Int64(info.decode.height) * (isAV1 ? 6 : 8) : 0
        return Self.decodeBytes(info.decode, bits: Int(info.luma_bits), av1: isAV1) + alpha
    }

    /// The largest thumbnail's decode (0 when there is none), at its own bits a sample.
    var thumbnailDecodeBytes: Int64 {
        info.thumbnail_width == 0 ? 0 : Self.decodeBytes(info.thumbnail_decode, bits: Int(max(info.thumbnail_bits, 8)), av1: isAV1)
    }

    /// What the tiled path holds at once: one row of decoded tiles (planar RGB, 3 samples a
    /// pixel, as libheif converts each tile), and one tile's decode beside it (its decoder and
    /// libheif's conversion, counted like a single picture of the largest coded tile) with its
    /// coded data twice (ours, in the one-tile HEIF, and libheif's copy for the decoder; the shim
    /// refuses more than 4 bytes a pixel). A
    /// phone's 4032-wide grid of 512 x 512 tiles: 6 MiB + 3.6 MiB + 2 MiB.
    static func tiledBytes(_ info: tessera_heif_info, av1: Bool = false) -> Int64 {
        let depth: Int64 = info.luma_bits > 8 ? 2 : 1
        let tilePixels = Int64(info.grid_tile_width) * Int64(info.grid_tile_height)
        let row = Int64(info.grid_columns) * tilePixels * 3 * depth
        let tile = decodeBytes(width: Int(max(info.decode.tile_width, info.grid_tile_width)),
                               height: Int(max(info.decode.tile_height, info.grid_tile_height)), bits: Int(info.luma_bits), grid: false,
                               av1: av1)
        return row + tile + tilePixels * 8 + (128 << 10)
    }

    var iccProfile: UnsafeRawBufferPointer {
        var length = 0
        return ColorProfiles.bytes(tessera_heif_icc(heif, &length), count: length)
    }

    var conversion: ColorConversion {
        ColorProfiles.conversion(icc: iccProfile, primaries: info.cicp_primaries, transfer: info.cicp_transfer)
    }

    /// Decodes the primary image, or the largest thumbnail; its planes live until the next
    /// decode or `release`.
    func decode(thumbnail: Bool) throws(TesseraError) -> tessera_heif_planes {
        var planes = tessera_heif_planes()
        var message = [CChar](repeating: 0, count: 200)
        guard tessera_heif_decode(heif, thumbnail ? 1 : 0, &planes, &message, 200) == 0 else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "HEIF: \(cMessage(message))")
        }
        return planes
    }

    func release() { tessera_heif_release_image(heif) }

    /// Decodes tile (`column`, `row`) of a tiled grid into its column's slot; its planes live
    /// until that slot's next decode or `releaseTiles`.
    func decodeTile(column: Int, row: Int) throws(TesseraError) -> tessera_heif_planes {
        var planes = tessera_heif_planes()
        var message = [CChar](repeating: 0, count: 200)
        guard tessera_heif_decode_tile(heif, UInt32(column), UInt32(row), &planes, &message, 200) == 0 else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "HEIF: \(cMessage(message))")
        }
        return planes
    }

    func releaseTiles() { tessera_heif_release_tiles(heif) }
}

/// Converts the decoded planes of a HEIF to RGB rows, one row at a time.
struct PlanarRows {
    let planes: tessera_heif_planes
    let background: RGB
    private let kr: Float, kb: Float, kg: Float
    private let lumaScale: Float, lumaOffset: Float, chromaScale: Float, center: Float, maxValue: Float
    private let wide: Bool

    init(planes: tessera_heif_planes, background: RGB) {
        self.planes = planes
        self.background = background
        switch planes.matrix {
        case 1: (kr, kb) = (0.2126, 0.0722)
        case 9, 10: (kr, kb) = (0.2627, 0.0593)
        case 4: (kr, kb) = (0.30, 0.11)
        case 7: (kr, kb) = (0.212, 0.087)
        default: (kr, kb) = (0.299, 0.114)  // 5, 6, and unspecified: BT.601, what JPEG uses
        }
        kg = 1 - kr - kb
        let bits = max(8, Int(planes.bits))
        wide = bits > 8
        let scale = Float(1 << (bits - 8))
        maxValue = Float((1 << bits) - 1)
        center = 128 * scale
        if planes.full_range != 0 {
            lumaScale = 255 / maxValue
            lumaOffset = 0
            chromaScale = 255 / maxValue
        } else {
            lumaScale = 255 / (219 * scale)
            lumaOffset = 16 * scale
            chromaScale = 255 / (224 * scale)
        }
    }

    @inline(__always)
    private func sample(_ plane: UnsafePointer<UInt8>, stride: Int32, x: Int, y: Int) -> Float {
        if wide {
            return Float(UnsafeRawPointer(plane + Int(stride) * y).load(fromByteOffset: x * 2, as: UInt16.self))
        }
        return Float(plane[Int(stride) * y + x])
    }

    @inline(__always)
    private func clamp(_ value: Float) -> UInt8 {
        let v = value + 0.5
        return v <= 0 ? 0 : (v >= 255 ? 255 : UInt8(v))
    }

    /// Row `y` as RGB into `rgb` (`planes.width` pixels).
    func row(_ y: Int, into rgb: UnsafeMutablePointer<UInt8>) {
        row(y, pixels: Int(planes.width), into: rgb)
    }

    /// The first `width` pixels (at most `planes.width`) of row `y` as RGB into `rgb`.
    func row(_ y: Int, pixels width: Int, into rgb: UnsafeMutablePointer<UInt8>) {
        let y0 = planes.y!
        switch planes.layout {
        case 0:
            for x in 0..<width {
                let v = clamp((sample(y0, stride: planes.y_stride, x: x, y: y) - lumaOffset) * lumaScale)
                rgb[x * 3] = v; rgb[x * 3 + 1] = v; rgb[x * 3 + 2] = v
            }
        case 3:
            let scale = 255 / maxValue
            for x in 0..<width {
                rgb[x * 3] = clamp(sample(y0, stride: planes.y_stride, x: x, y: y) * scale)
                rgb[x * 3 + 1] = clamp(sample(planes.cb!, stride: planes.cb_stride, x: x, y: y) * scale)
                rgb[x * 3 + 2] = clamp(sample(planes.cr!, stride: planes.cr_stride, x: x, y: y) * scale)
            }
        default:
            let shiftX = planes.layout == 444 ? 0 : 1
            let cy = planes.layout == 420 ? y >> 1 : y
            let crToR = 2 * (1 - kr), cbToB = 2 * (1 - kb)
            let cbToG = -2 * (1 - kb) * kb / kg, crToG = -2 * (1 - kr) * kr / kg
            for x in 0..<width {
                let luma = (sample(y0, stride: planes.y_stride, x: x, y: y) - lumaOffset) * lumaScale
                let cx = x >> shiftX
                let cb = (sample(planes.cb!, stride: planes.cb_stride, x: cx, y: cy) - center) * chromaScale
                let cr = (sample(planes.cr!, stride: planes.cr_stride, x: cx, y: cy) - center) * chromaScale
                rgb[x * 3] = clamp(luma + crToR * cr)
                rgb[x * 3 + 1] = clamp(luma + cbToG * cb + crToG * cr)
                rgb[x * 3 + 2] = clamp(luma + cbToB * cb)
            }
        }
        if let alpha = planes.alpha {
            let alphaMax = Float((1 << max(8, Int(planes.alpha_bits))) - 1)
            let alphaWide = planes.alpha_bits > 8
            let back = (Float(background.red), Float(background.green), Float(background.blue))
            for x in 0..<width {
                let raw = alphaWide ? Float(UnsafeRawPointer(alpha + Int(planes.alpha_stride) * y).load(fromByteOffset: x * 2, as: UInt16.self))
                                    : Float(alpha[Int(planes.alpha_stride) * y + x])
                let a = raw / alphaMax
                if a >= 1 { continue }
                rgb[x * 3] = clamp(Float(rgb[x * 3]) * a + back.0 * (1 - a))
                rgb[x * 3 + 1] = clamp(Float(rgb[x * 3 + 1]) * a + back.1 * (1 - a))
                rgb[x * 3 + 2] = clamp(Float(rgb[x * 3 + 2]) * a + back.2 * (1 - a))
            }
        }
    }
}

extension CellDecoder {
    func decodeHEIF(_ reader: HEIFReader, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let orientation = OrientationTransform(exifOrientation: reader.orientation)
        let conversion = reader.conversion
        defer { conversion.release() }
        let stored = storedCell(orientation)
        // The thumbnail when its crop covers the cell: a few hundred pixels instead of millions.
        let thumbnail = (width: Int(reader.info.thumbnail_width), height: Int(reader.info.thumbnail_height))
        // A thumbnail is decoded whole, on its own: one the budget cannot hold is not used (a
        // helper's 8192 x 8192 12-bit thumbnail of a cheap grid was decoded at 978 MiB under 32M).
        let thumbnailFits = reader.thumbnailDecodeBytes <= Int64(budget.wholeImageLimitBytes)
        var useThumbnail = thumbnailFits && HEIFFormat.thumbnailCovers(thumbnail, storedCell: stored, aspect: cropAspect(orientation))
        let fullBytes = reader.decodeBytes
        var warning: String?
        if !useThumbnail && fullBytes > Int64(budget.wholeImageLimitBytes) {
            let needed = formatBytes(budget.budgetToDraw(oneDecodeBytes: Int(clamping: fullBytes)))
            if thumbnail.width > 0 && thumbnailFits {
                useThumbnail = true
                warning = "drawn from its \(thumbnail.width) x \(thumbnail.height) thumbnail: decoding the \(reader.info.width) x "
                    + "\(reader.info.height) image takes about \(formatBytes(fullBytes)), more than the memory budget leaves for it "
                    + "(a budget of \(needed) or more would draw it sharp)"
            } else {
                throw TesseraError.photoNeedsMemory(
                    path: reader.photo.path, reason: "decoding this \(reader.info.width) x \(reader.info.height) HEIF "
                        + "(\(reader.info.is_grid != 0 ? "tiles" : "one picture, not tiled"), "
                        + (reader.info.thumbnail_passed_over != 0 ? "its thumbnail turned otherwise than the picture, so not used" : "no thumbnail")
                        + ") takes about "
                        + "\(formatBytes(fullBytes)), more than the memory budget leaves for it",
                    budgetToDrawBytes: budget.budgetToDraw(oneDecodeBytes: Int(clamping: fullBytes)))
            }
        }
        do {
            return try drawHEIF(reader, thumbnail: useThumbnail, orientation: orientation, conversion: conversion, warning: warning, into: cell)
        } catch .unreadablePhoto(_, let reason) where useThumbnail && warning == nil {
            // The thumbnail was chosen for its size, and the image itself may be whole (an
            // editor that rewrote the picture but not its thumbnail, a damaged copy): drawn
            // from the image, as it would be without the thumbnail.
            let note = "its thumbnail cannot be decoded (\(reason)); drawn from the full image"
            return try drawHEIF(reader, thumbnail: false, orientation: orientation, conversion: conversion, warning: note, into: cell)
        }
    }

    /// Draws the thumbnail, the tiles or the whole image into the cell, `warning` added to the
    /// notes.
    private func drawHEIF(_ reader: HEIFReader, thumbnail useThumbnail: Bool, orientation: OrientationTransform, conversion: ColorConversion,
                          warning: String?, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let thumbnail = (width: Int(reader.info.thumbnail_width), height: Int(reader.info.thumbnail_height))
        let fullBytes = reader.decodeBytes
        if !useThumbnail && fullBytes > Int64(budget.wholeImageLimitBytes) {
            throw TesseraError.photoNeedsMemory(
                path: reader.photo.path, reason: "its thumbnail cannot be decoded, and decoding the \(reader.info.width) x \(reader.info.height) "
                    + "HEIF takes about \(formatBytes(fullBytes)), more than the memory budget leaves for it",
                budgetToDrawBytes: budget.budgetToDraw(oneDecodeBytes: Int(clamping: fullBytes)))
        }
        let tiled = !useThumbnail && reader.info.tiled != 0
        let size = useThumbnail ? thumbnail : tiled ? (Int(reader.info.canvas_width), Int(reader.info.canvas_height))
                                                    : (Int(reader.info.width), Int(reader.info.height))
        let whole = useThumbnail ? reader.thumbnailDecodeBytes : fullBytes
        let request = workingBytes(outputWidth: size.0, orientation: orientation) + Int(clamping: whole)
        return try budget.admitted(bytes: request) { () throws(TesseraError) -> DecodeNotes in
            if tiled {
                // The tiles are the stored canvas: the grid's irot and imir still to apply (or,
                // with neither, EXIF's, as for a whole decode).
                let turn = reader.info.has_transform != 0 ? Int(reader.info.grid_orientation) : reader.orientation
                try drawTiles(reader, orientation: OrientationTransform(exifOrientation: turn), conversion: conversion, into: cell)
            } else {
                try drawWhole(reader, thumbnail: useThumbnail, orientation: orientation, conversion: conversion, into: cell)
            }
            var result = notes(conversion, method: useThumbnail ? .thumbnail : tiled ? .tiles : .wholeImage)
            if let warning {
                result.warningCount += 1
                if result.firstWarning.isEmpty { result.firstWarning = warning }
            }
            return result
        }
    }

    /// Draws the primary image (or the thumbnail) decoded whole, converted a row at a time.
    private func drawWhole(_ reader: HEIFReader, thumbnail: Bool, orientation: OrientationTransform, conversion: ColorConversion,
                           into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        let planes = try reader.decode(thumbnail: thumbnail)
        defer { reader.release() }
        if cancellation?.isCancelled == true { throw .cancelled }
        let rows = PlanarRows(planes: planes, background: background)
        let width = Int(planes.width), height = Int(planes.height)
        var next = 0
        try draw(path: reader.photo.path, orientation: orientation, scaled: (width, height), components: 3,
                 adobeInverted: false, conversion: conversion, rows: { buffer, stride, count throws(TesseraError) in
            let made = min(count, height - next)
            for i in 0..<made {
                rows.row(next + i, into: (buffer + i * stride).assumingMemoryBound(to: UInt8.self))
            }
            next += made
            return made
        }, into: cell)
    }

    /// Draws a tiled grid's canvas (stored frame) a row of tiles at a time: each row of tiles is
    /// decoded when the resampler reaches it and its rows fed top to bottom. Tiles wholly outside
    /// the centre crop are not decoded (their pixels are never read), nor rows below it.
    private func drawTiles(_ reader: HEIFReader, orientation: OrientationTransform, conversion: ColorConversion,
                           into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        defer { reader.releaseTiles() }
        let info = reader.info
        let columns = Int(info.grid_columns), tileWidth = Int(info.grid_tile_width), tileHeight = Int(info.grid_tile_height)
        let width = Int(info.canvas_width), height = Int(info.canvas_height)
        let region = crop(width: width, height: height, orientation: orientation)
        let firstRow = max(0, Int(region.y.rounded(.down)) / tileHeight)
        let used = (0..<columns).map { c in
            Double(c * tileWidth) < region.x + region.width + 1 && Double((c + 1) * tileWidth) > region.x - 1
        }
        var tiles = [PlanarRows?](repeating: nil, count: columns)
        var tileRow = -1, next = 0
        try draw(path: reader.photo.path, orientation: orientation, scaled: (width, height), components: 3,
                 adobeInverted: false, conversion: conversion, rows: { buffer, stride, count throws(TesseraError) in
            var made = 0
            while made < count && next < height {
                let out = (buffer + made * stride).assumingMemoryBound(to: UInt8.self)
                if next / tileHeight < firstRow {
                    // Above the crop: the resampler skips these rows.
                    out.initialize(repeating: 0, count: width * 3)
                } else {
                    if next / tileHeight != tileRow {
                        if cancellation?.isCancelled == true { throw .cancelled }
                        tileRow = next / tileHeight
                        for c in 0..<columns {
                            tiles[c] = used[c] ? PlanarRows(planes: try reader.decodeTile(column: c, row: tileRow), background: background) : nil
                        }
                    }
                    let y = next - tileRow * tileHeight
                    for c in 0..<columns {
                        let pixels = min(tileWidth, width - c * tileWidth)
                        if let tile = tiles[c] {
                            tile.row(y, pixels: pixels, into: out + c * tileWidth * 3)
                        } else {
                            (out + c * tileWidth * 3).initialize(repeating: 0, count: pixels * 3)
                        }
                    }
                }
                made += 1
                next += 1
            }
            return made
        }, into: cell)
    }
}
