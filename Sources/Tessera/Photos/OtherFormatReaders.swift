// OtherFormatReaders.swift — PNG, WebP and HEIF photos: their headers, and their pixels as RGB
// rows for CellDecoder, each through its Debian library behind a C shim (tessera_png.c,
// tessera_webp.c, tessera_heif.c).
//
// Memory, per format:
// - PNG streams row by row through libspng: a row or two of the photo's width. An Adam7
//   interlaced PNG, or one whose rows are too wide for the decode pool, comes row by row (pass
//   by pass) and is binned into the cell as it comes, or into the picture's own size when that
//   is smaller than the cell: never a whole image.
// - WebP is decoded by libwebp straight at about the size drawn (its scaler runs inside the
//   decoder). The file is mapped read-only. A lossless WebP is decoded whole inside libwebp
//   (4 bytes a pixel: its backward references reach anywhere above), and a lossy one's alpha
//   plane is decoded whole at full size (1 byte a pixel); both are admitted against the decode
//   budget like a progressive JPEG's buffers, or refused when over what it allows one photo.
// - HEIF: libheif 1.15 decodes whole images only, so an embedded thumbnail is used when it
//   covers the cell; otherwise the primary image is decoded to its own YCbCr planes (1.5 bytes a
//   pixel at 4:2:0, never an RGB copy) and converted a row at a time, admitted against the
//   budget. The sizes budgeted are what libheif will decode at, read from the boxes by the
//   shim (a grid's canvas and tiles, a picture's SPS or AV1 sequence header), never 'ispe'
//   alone: a file whose boxes disagree is refused. Decoding an iPhone HEIC's 512 x 512 grid tiles one at a time would need a tile API
//   libheif 1.15 does not have (heif_image_handle_decode_image_tile came in 1.19).
import CTesseraShims
import Glibc

/// A C message buffer as one line (libheif's end in a newline).
func cMessage(_ message: [CChar]) -> String {
    var line = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    while line.last?.isWhitespace == true { line.removeLast() }
    return line.split(separator: "\n").joined(separator: "; ")
}

/// Alpha over the background: RGBA8 row to RGB8 row.
@inline(__always)
func compositeRGBA(_ rgba: UnsafePointer<UInt8>, into rgb: UnsafeMutablePointer<UInt8>, width: Int, background: RGB) {
    let br = Int(background.red), bg = Int(background.green), bb = Int(background.blue)
    for x in 0..<width {
        let a = Int(rgba[x * 4 + 3])
        if a == 255 {
            rgb[x * 3] = rgba[x * 4]
            rgb[x * 3 + 1] = rgba[x * 4 + 1]
            rgb[x * 3 + 2] = rgba[x * 4 + 2]
        } else {
            let na = 255 - a
            rgb[x * 3] = UInt8((Int(rgba[x * 4]) * a + br * na + 127) / 255)
            rgb[x * 3 + 1] = UInt8((Int(rgba[x * 4 + 1]) * a + bg * na + 127) / 255)
            rgb[x * 3 + 2] = UInt8((Int(rgba[x * 4 + 2]) * a + bb * na + 127) / 255)
        }
    }
}

// MARK: PNG

final class PNGReader {
    let photo: PhotoFile
    private let png: OpaquePointer
    let info: tessera_png_info

    init(photo: PhotoFile) throws(TesseraError) {
        self.photo = photo
        var info = tessera_png_info()
        var message = [CChar](repeating: 0, count: 200)
        guard let png = tessera_png_open(photo.file.rawValue, UInt64(max(0, photo.fileBytes)), &info, &message, 200) else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "PNG: \(cMessage(message))")
        }
        self.png = png
        self.info = info
        // Deflate cannot expand data more than 1032 times: a header that claims more pixels
        // than the file could hold is refused now, not after minutes of decompressing nothing.
        let bitsPerPixel = Int64(info.bit_depth) * Int64(Self.channels(colorType: Int(info.color_type)))
        let rawBytes = Int64(info.height) * ((Int64(info.width) * bitsPerPixel + 7) / 8 + 1)
        if rawBytes > 1032 * photo.fileBytes + (1 << 16) {
            throw TesseraError.unreadablePhoto(
                path: photo.path, reason: "its PNG header claims \(info.width) x \(info.height) px, more than its "
                    + "\(formatBytes(photo.fileBytes)) can hold: it is truncated or corrupt")
        }
    }

    deinit { tessera_png_close(png) }

    static func channels(colorType: Int) -> Int {
        switch colorType { case 2: 3; case 4: 2; case 6: 4; default: 1 }
    }

    var header: PhotoHeader {
        var header = PhotoHeader(width: Int(info.width), height: Int(info.height),
                                 colorModel: info.color_type == 0 || info.color_type == 4 ? .gray : .rgb,
                                 isProgressive: info.interlaced != 0, exifOrientation: Int(info.exif_orientation),
                                 adobeInverted: false)
        header.format = .png
        header.hasAlpha = info.has_alpha != 0
        header.colorTag = ColorProfiles.tag(icc: iccProfile, primaries: info.cicp_primaries, transfer: info.cicp_transfer)
        return header
    }

    var iccProfile: UnsafeRawBufferPointer {
        var length = 0
        return ColorProfiles.bytes(tessera_png_icc(png, &length), count: length)
    }

    var conversion: ColorConversion {
        ColorProfiles.conversion(icc: iccProfile, primaries: info.cicp_primaries, transfer: info.cicp_transfer)
    }

    func start() throws(TesseraError) {
        guard tessera_png_start(png) == 0 else { throw failure() }
    }

    /// The next row as RGBA into `rgba` (`width` * 4 bytes): its row number and Adam7 pass, or
    /// nil at the end.
    func readRow(into rgba: UnsafeMutablePointer<UInt8>) throws(TesseraError) -> (row: Int, pass: Int)? {
        var row: UInt32 = 0
        var pass: Int32 = 0
        let status = tessera_png_read_row(png, rgba, Int(info.width) * 4, &row, &pass)
        if status < 0 { throw failure() }
        return status == 0 ? nil : (Int(row), Int(pass))
    }

    /// Reads what is left of the image after the rows drawn (the rest of its rows, then the
    /// chunks after it, which is when libspng checks the last CRC) and says what was wrong with
    /// the data: nil when nothing was. `rgba` is a row buffer as for `readRow`.
    func finish(rgba: UnsafeMutablePointer<UInt8>, cancellation: RenderCancellation?) throws(TesseraError) -> String? {
        var problems: [String] = []
        do throws(TesseraError) {
            var rows = 0
            while try readRow(into: rgba) != nil {
                rows += 1
                if rows & 63 == 0, cancellation?.isCancelled == true { throw .cancelled }
            }
            if tessera_png_finish(png) != 0 { problems.append(String(cString: tessera_png_message(png))) }
        } catch .cancelled {
            throw .cancelled
        } catch {
            problems.append("after the rows drawn, " + String(cString: tessera_png_message(png)))
        }
        var entries: UInt32 = 0
        let bad = tessera_png_bad_palette_pixels(png, &entries)
        if bad > 0 { problems.insert("\(bad) pixel(s) have a palette index past its \(entries) colours (drawn black)", at: 0) }
        return problems.isEmpty ? nil : "PNG: " + problems.joined(separator: "; ")
    }

    /// What libspng holds while it decodes rows: the scanline it inflates into and the one
    /// before it (filters refer to it), each the stored row's bytes, and its RGBA8 output row
    /// and working row. An upper bound: with it, a 1,048,576 x 64 grey PNG drawn into 100 px
    /// cells at --max-memory 32M took the whole process to 18.4 MiB (release build).
    var decoderBytes: Int {
        let bitsPerPixel = Int(info.bit_depth) * Self.channels(colorType: Int(info.color_type))
        let scanline = (Int(info.width) * bitsPerPixel + 7) / 8 + 1
        return 3 * scanline + 2 * Int(info.width) * 4 + (256 << 10)
    }

    private func failure() -> TesseraError {
        .unreadablePhoto(path: photo.path, reason: "PNG: " + String(cString: tessera_png_message(png)))
    }
}

// MARK: WebP

final class WebPReader {
    let photo: PhotoFile
    private let webp: OpaquePointer
    let info: tessera_webp_info

    init(photo: PhotoFile) throws(TesseraError) {
        self.photo = photo
        var info = tessera_webp_info()
        var message = [CChar](repeating: 0, count: 200)
        guard let webp = tessera_webp_open(photo.file.rawValue, UInt64(max(0, photo.fileBytes)), &info, &message, 200) else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "WebP: \(cMessage(message))")
        }
        self.webp = webp
        self.info = info
    }

    deinit { tessera_webp_close(webp) }

    var header: PhotoHeader {
        var header = PhotoHeader(width: Int(info.width), height: Int(info.height), colorModel: .rgb, isProgressive: false,
                                 exifOrientation: Int(info.exif_orientation), adobeInverted: false)
        header.format = .webp
        header.hasAlpha = info.has_alpha != 0
        header.colorTag = ColorProfiles.tag(icc: iccProfile)
        header.wholeImageBytes = wholeImageBytes
        return header
    }

    /// libwebp's own whole-image buffers, plus the mapped file: a lossless picture is decoded
    /// whole (4 bytes a pixel); a lossy one with alpha has its alpha plane decoded whole at full
    /// size whatever size it is scaled to: 1 byte a pixel, and about an eighth more for the
    /// lossless decoder of the plane (measured, 8000 x 8000 lossy drawn into a 100 px cell at
    /// --max-memory 160M: 15.2 MiB peak opaque, 83.6 MiB with alpha, 68.4 MiB more for 64 MP).
    /// A lossy decode's rows of macroblocks cost about 64 bytes a column.
    var wholeImageBytes: Int64 {
        let pixels = Int64(info.width) * Int64(info.height)
        if info.lossless != 0 { return pixels * 4 + photo.fileBytes }
        return (info.has_alpha != 0 ? pixels + pixels / 8 : 0) + Int64(info.width) * 64 + photo.fileBytes
    }

    var iccProfile: UnsafeRawBufferPointer {
        var length = 0
        return ColorProfiles.bytes(tessera_webp_icc(webp, &length), count: length)
    }

    var conversion: ColorConversion { ColorProfiles.conversion(icc: iccProfile) }

    /// Decodes at `width` x `height` into `rgba` (rows `width` * 4 bytes).
    func decode(width: Int, height: Int, into rgba: UnsafeMutablePointer<UInt8>) throws(TesseraError) {
        var message = [CChar](repeating: 0, count: 200)
        guard tessera_webp_decode(webp, Int32(width), Int32(height), rgba, width * 4, &message, 200) == 0 else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "WebP: \(cMessage(message))")
        }
    }
}

// MARK: HEIF

final class HEIFReader {
    let photo: PhotoFile
    private let heif: OpaquePointer
    let info: tessera_heif_info

    init(photo: PhotoFile) throws(TesseraError) {
        self.photo = photo
        var info = tessera_heif_info()
        var message = [CChar](repeating: 0, count: 200)
        guard let heif = tessera_heif_open(photo.file.rawValue, UInt64(max(0, photo.fileBytes)), &info, &message, 200) else {
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
        header.hasAlpha = info.has_alpha != 0
        header.colorTag = ColorProfiles.tag(icc: iccProfile, primaries: info.cicp_primaries, transfer: info.cicp_transfer)
        header.wholeImageBytes = Self.decodeBytes(info.decode, bits: Int(info.luma_bits))
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
    /// measured): about 6.1 bytes a pixel.
    static func decodeBytes(width: Int, height: Int, bits: Int, grid: Bool) -> Int64 {
        let pixels = Int64(width) * Int64(height)
        let depth: Int64 = bits > 8 ? 2 : 1
        return grid ? pixels * 3 * depth + (8 << 20) : pixels * 13 / 2 * depth + (2 << 20)
    }

    /// The same for what the shim read from the boxes (`tessera_heif_size`): the size libheif
    /// really decodes at, whatever 'ispe' says, and for a grid its largest tile's decoder too
    /// (the 8 MiB above covers a phone's 512 x 512 tile; a larger one is counted).
    static func decodeBytes(_ size: tessera_heif_size, bits: Int) -> Int64 {
        let grid = size.tile_width > 0
        var bytes = decodeBytes(width: Int(size.width), height: Int(size.height), bits: bits, grid: grid)
        if grid {
            let tile = decodeBytes(width: Int(size.tile_width), height: Int(size.tile_height), bits: bits, grid: false)
            bytes += max(0, tile - (8 << 20))
        }
        return bytes
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
        let width = Int(planes.width)
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
