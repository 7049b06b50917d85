// ScaledJPEGReader.swift — reads a JPEG's header and streams its rows, scaled in the DCT domain.
//
// Memory: the file is read through a 64 KiB buffer and rows come out a few at a time. libjpeg's
// whole-image coefficient buffers (needed only by multi-scan files: progressive, or components
// in separate scans) are kept in memory up to `decoderMemoryBytes` and beyond that in a spill file
// given by `useCoefficientStorage` (tessera_coefficients.c), so a header that claims 65,500 x
// 65,500 px never costs gigabytes of memory.
//
// Threading: an instance belongs to one thread at a time; several readers run at once on
// different threads (each has its own libjpeg state and error buffer).
import CTesseraShims
import Glibc

/// What a JPEG's header says.
public struct JPEGHeader: Equatable, Sendable {
    public enum ColorModel: Equatable, Sendable { case gray, rgb, cmyk }
    public var width: Int
    public var height: Int
    public var colorModel: ColorModel
    public var isProgressive: Bool
    /// The EXIF Orientation tag as stored (0 when absent).
    public var exifOrientation: Int
    /// Whether an Adobe APP14 marker was seen (CMYK is then stored inverted).
    public var adobeInverted: Bool
    /// Arithmetic-coded rather than Huffman-coded.
    public var isArithmetic = false
    /// Three components stored as R, G, B rather than YCbCr.
    public var storedRGB = false
    /// The least entropy-coded data a file with this header can have (one bit a block).
    public var minimumDataBytes: Int64 = 0
    /// libjpeg's whole-image buffer for a multi-scan decode: 128 bytes a block.
    public var coefficientBytes: Int64 = 0
    /// The DC decoder's whole-image buffers for a multi-scan decode at 1/8 (DCScaledJPEGReader).
    public var dcDecoderBytes: Int64 = 0
}

final class ScaledJPEGReader {
    let path: String
    private let file: FileDescriptor
    private let decoder: OpaquePointer
    private let source: SourceBox
    /// The file's size in bytes when opened.
    let fileBytes: Int64
    /// The opened file's device and inode.
    let identity: OutputDestination.Identity
    private var spill: SpillFile?
    /// Bytes a pixel in the rows `readRows` returns: 3 (RGB) or 4 (CMYK).
    private(set) var outputComponents = 3

    private final class SourceBox {
        let file: FileDescriptor
        var error: TesseraError?
        init(_ file: FileDescriptor) { self.file = file }
    }

    /// Opens `path` (a regular file only; FIFOs and devices are refused before any read).
    convenience init(path: String, decoderMemoryBytes: Int) throws(TesseraError) {
        try self.init(file: PathBytes(path), decoderMemoryBytes: decoderMemoryBytes)
    }

    /// Opens the file at `bytes` (any name the kernel allows; `path` is its text for messages).
    init(file bytes: PathBytes, decoderMemoryBytes: Int) throws(TesseraError) {
        let path = bytes.display
        self.path = path
        let (file, info) = try FileDescriptor.openRegularFileForReading(bytes)
        self.file = file
        fileBytes = Int64(info.st_size)
        identity = OutputDestination.Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        // A file with most of its length unstored (a sparse file: a header over terabytes of
        // holes reads as zeros forever) is not a photo; a real JPEG is stored whole. Small files
        // are exempt (a filesystem may keep a small file's bytes inline, with no blocks).
        let storedBytes = Int64(info.st_blocks) * 512
        if fileBytes > 1 << 20 && storedBytes < fileBytes / 4 {
            file.close()
            throw TesseraError.unreadablePhoto(
                path: path, reason: "a sparse file, \(formatBytes(fileBytes)) long with only \(formatBytes(storedBytes)) stored "
                    + "(not a photo: a damaged or hostile file)")
        }
        source = SourceBox(file)
        let callback: tessera_jpeg_source = { context, buffer, capacity in
            let box = Unmanaged<SourceBox>.fromOpaque(context!).takeUnretainedValue()
            do throws(TesseraError) {
                return try box.file.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity))
            } catch {
                box.error = error
                return -1
            }
        }
        guard let decoder = tessera_jpeg_decoder_create(callback, Unmanaged.passUnretained(source).toOpaque(), 64 << 10, decoderMemoryBytes) else {
            file.close()
            throw TesseraError.unreadablePhoto(path: path, reason: "out of memory creating a decoder")
        }
        self.decoder = decoder
        tessera_jpeg_decoder_set_work_limit(decoder, tessera_work_limit_blocks(UInt64(max(0, fileBytes))))
    }

    deinit {
        tessera_jpeg_decoder_destroy(decoder)
        // The photo's page cache is of no further use to this render.
        file.dropCache(offset: 0, length: 0)
        file.close()
    }

    /// Whether the file starts with a JPEG start-of-image and marker (FF D8 FF). Uses pread, so
    /// the decoder's position is untouched.
    func startsLikeJPEG() throws(TesseraError) -> Bool {
        var magic: (UInt8, UInt8, UInt8) = (0, 0, 0)
        let count = try withUnsafeMutableBytes(of: &magic) { bytes throws(TesseraError) in
            try file.read(into: bytes, at: 0)
        }
        return count == 3 && magic == (0xFF, 0xD8, 0xFF)
    }

    /// The name of the image format the file's first bytes show, when it is an image but not a
    /// JPEG (PNG, GIF, WebP, HEIF/HEIC, AVIF, TIFF and the camera RAW files built on it, BMP);
    /// nil for anything else. Uses pread.
    func otherImageFormat() throws(TesseraError) -> String? {
        var magic = [UInt8](repeating: 0, count: 16)
        let count = try magic.withUnsafeMutableBytes { bytes in
            Result { () throws(TesseraError) in try file.read(into: bytes, at: 0) }
        }.get()
        return imageFormat(startingWith: Array(magic[0..<count]))
    }

    /// jpeg_read_header, with EXIF orientation and Adobe marker (tessera_jpeg_decoder_read_header).
    func readHeader() throws(TesseraError) -> JPEGHeader {
        var raw = tessera_jpeg_header()
        guard tessera_jpeg_decoder_read_header(decoder, &raw) == TESSERA_JPEG_OK else { throw failure() }
        let model: JPEGHeader.ColorModel
        switch raw.color_model {
        case Int32(TESSERA_COLOR_GRAY.rawValue): model = .gray
        case Int32(TESSERA_COLOR_CMYK.rawValue): model = .cmyk
        default: model = .rgb
        }
        let header = JPEGHeader(width: Int(raw.width), height: Int(raw.height), colorModel: model,
                                isProgressive: raw.progressive != 0, exifOrientation: Int(raw.exif_orientation),
                                adobeInverted: raw.adobe_inverted != 0, isArithmetic: raw.arithmetic != 0,
                                storedRGB: raw.stored_rgb != 0, minimumDataBytes: Int64(raw.min_data_bytes),
                                coefficientBytes: Int64(raw.coefficient_bytes),
                                dcDecoderBytes: Int64(raw.dc_decoder_bytes))
        // A header whose picture cannot fit in the file is refused now, before a decode would
        // spend seconds (or a whole-image buffer) on it.
        if header.minimumDataBytes > fileBytes {
            throw TesseraError.unreadablePhoto(
                path: path,
                reason: "its header claims \(header.width) x \(header.height) px, which takes at least "
                    + "\(formatBytes(header.minimumDataBytes)) of image data, but the file holds only \(formatBytes(fileBytes))"
                    + ": it is truncated or corrupt")
        }
        return header
    }

    /// Where a multi-scan file's coefficients go: in memory up to `memoryLimitBytes`, beyond that
    /// in an unnamed file in `spillDirectory` through windows that fit the limit. Before `start`.
    func useCoefficientStorage(memoryLimitBytes: Int, spillDirectory: String) {
        let spill = SpillFile(directory: spillDirectory)
        self.spill = spill
        var c = spill.cValue
        tessera_jpeg_decoder_set_coefficient_storage(decoder, memoryLimitBytes, &c)
    }

    /// Makes the decode fail soon after `flag` is raised (RenderCancellation.flag).
    func setCancelFlag(_ flag: UnsafeMutablePointer<Int32>) { tessera_jpeg_decoder_set_cancel_flag(decoder, flag) }

    /// Whether the last start put the coefficients in the spill file.
    var coefficientsSpilled: Bool { tessera_jpeg_decoder_coefficients_spilled(decoder) != 0 }

    /// A DC decoder over the same file (from its first byte), for a multi-scan file drawn at 1/8.
    func dcReader(memoryLimitBytes: Int, spillDirectory: String, storedRGB: Bool) throws(TesseraError) -> DCScaledJPEGReader {
        try DCScaledJPEGReader(file: file, path: path, fileBytes: fileBytes, memoryLimitBytes: memoryLimitBytes,
                               spillDirectory: spillDirectory, storedRGB: storedRGB)
    }

    /// The output size at DCT scale `numerator`/8 (jpeg_calc_output_dimensions).
    func scaledSize(numerator: Int) throws(TesseraError) -> (width: Int, height: Int) {
        var width: UInt32 = 0
        var height: UInt32 = 0
        guard tessera_jpeg_decoder_scaled_size(decoder, Int32(numerator), &width, &height) == TESSERA_JPEG_OK else {
            throw failure()
        }
        return (Int(width), Int(height))
    }

    /// jpeg_start_decompress at the last scale set; returns the output size.
    func start() throws(TesseraError) -> (width: Int, height: Int) {
        var width: UInt32 = 0
        var height: UInt32 = 0
        var components: Int32 = 0
        guard tessera_jpeg_decoder_start(decoder, &width, &height, &components) == TESSERA_JPEG_OK else {
            throw failure()
        }
        outputComponents = Int(components)
        return (Int(width), Int(height))
    }

    /// Reads up to `maxRows` rows into `buffer` (rows `stride` bytes apart); returns how many.
    func readRows(into buffer: UnsafeMutableRawPointer, stride: Int, maxRows: Int) throws(TesseraError) -> Int {
        let count = tessera_jpeg_decoder_read_rows(decoder, buffer.assumingMemoryBound(to: UInt8.self), stride, Int32(maxRows))
        guard count >= 0 else { throw failure() }
        return Int(count)
    }

    /// libjpeg's warnings (corrupt data it worked around) and the first one's text.
    var warnings: (count: Int, first: String) {
        (Int(tessera_jpeg_decoder_warnings(decoder)), String(cString: tessera_jpeg_decoder_message(decoder)))
    }

    private func failure() -> TesseraError {
        if tessera_jpeg_decoder_source_failed(decoder) != 0, let error = source.error { return error }
        if let reason = spill?.failureReason { return .unreadablePhoto(path: path, reason: reason) }
        return .unreadablePhoto(path: path, reason: String(cString: tessera_jpeg_decoder_message(decoder)))
    }
}

/// The image format `bytes` (a file's first 16 or fewer) begin with, if it is one Tessera can
/// name but not read; nil otherwise.
func imageFormat(startingWith bytes: [UInt8]) -> String? {
    func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
        bytes.count >= offset + prefix.count && Array(bytes[offset..<(offset + prefix.count)]) == prefix
    }
    if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "a PNG image" }
    if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return "a GIF image" }
    if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return "a WebP image" }
    if starts(Array("ftyp".utf8), at: 4), bytes.count >= 12 {
        let brand = String(decoding: bytes[8..<12], as: UTF8.self)
        if ["avif", "avis"].contains(brand) { return "an AVIF image" }
        if ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"].contains(brand) { return "a HEIF/HEIC image" }
    }
    if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return "a TIFF image (or a camera RAW file)" }
    if starts([0x42, 0x4D]) && bytes.count >= 14 { return "a BMP image" }
    return nil
}
