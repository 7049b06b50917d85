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

final class ScaledJPEGReader {
    let path: String
    /// The open file, shared with whoever opened it (closed when the last holder lets go).
    let photoFile: PhotoFile
    private var file: FileDescriptor { photoFile.file }
    private let decoder: OpaquePointer
    private let source: SourceBox
    /// The file's size in bytes when opened.
    var fileBytes: Int64 { photoFile.fileBytes }
    /// The JPEG's own bytes: the file's, or a camera RAW's preview's (`limit(toBytes:)`).
    private(set) var dataBytes: Int64
    /// Where the JPEG starts in the file.
    private(set) var dataOffset: Int64 = 0

    /// The JPEG is `bytes` long (a preview inside a RAW): its header's claims and its decoding
    /// work are held to those bytes, not the whole file's. (A 378-byte preview claiming
    /// 65,500 x 65,500 px behind 40 MB of the RAW's data was decoded for 30 s, spilling 8 GB,
    /// where the same JPEG alone is refused at once: a helper's finding.)
    func limit(toBytes bytes: Int64, startingAt offset: Int64) {
        dataBytes = max(0, min(bytes, fileBytes))
        dataOffset = offset
        // Read from `offset` on (the file was sought there; nothing is read before the header).
        source.remaining = dataBytes
        tessera_jpeg_decoder_set_work_limit(decoder, tessera_work_limit_blocks(UInt64(dataBytes)))
    }
    /// The opened file's device and inode.
    var identity: OutputDestination.Identity { photoFile.identity }
    private var spill: SpillFile?
    /// Bytes a pixel in the rows `readRows` returns: 3 (RGB) or 4 (CMYK).
    private(set) var outputComponents = 3

    private final class SourceBox {
        let file: FileDescriptor
        var error: TesseraError?
        /// Bytes the JPEG has left to give (a RAW preview's length): the decoder sees its end there.
        var remaining = Int64.max
        init(_ file: FileDescriptor) { self.file = file }
    }

    /// Opens `path` (a regular file only; FIFOs and devices are refused before any read).
    convenience init(path: String, decoderMemoryBytes: Int) throws(TesseraError) {
        try self.init(file: PathBytes(path), decoderMemoryBytes: decoderMemoryBytes)
    }

    /// Opens the file at `bytes` (any name the kernel allows; `path` is its text for messages).
    convenience init(file bytes: PathBytes, decoderMemoryBytes: Int) throws(TesseraError) {
        try self.init(photo: PhotoFile.open(bytes), decoderMemoryBytes: decoderMemoryBytes)
    }

    /// Reads the JPEG open as `photo`, from its first byte.
    init(photo: PhotoFile, decoderMemoryBytes: Int) throws(TesseraError) {
        path = photo.path
        photoFile = photo
        dataBytes = photo.fileBytes
        source = SourceBox(photo.file)
        let callback: tessera_jpeg_source = { context, buffer, capacity in
            let box = Unmanaged<SourceBox>.fromOpaque(context!).takeUnretainedValue()
            do throws(TesseraError) {
                let count = try box.file.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: Int(min(Int64(capacity), box.remaining))))
                box.remaining -= Int64(count)
                return count
            } catch {
                box.error = error
                return -1
            }
        }
        guard let decoder = tessera_jpeg_decoder_create(callback, Unmanaged.passUnretained(source).toOpaque(), 64 << 10, decoderMemoryBytes) else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "out of memory creating a decoder")
        }
        self.decoder = decoder
        tessera_jpeg_decoder_set_work_limit(decoder, tessera_work_limit_blocks(UInt64(max(0, photo.fileBytes))))
    }

    deinit {
        tessera_jpeg_decoder_destroy(decoder)
    }

    /// jpeg_read_header, with EXIF orientation and Adobe marker (tessera_jpeg_decoder_read_header).
    func readHeader() throws(TesseraError) -> PhotoHeader {
        var raw = tessera_jpeg_header()
        guard tessera_jpeg_decoder_read_header(decoder, &raw) == TESSERA_JPEG_OK else { throw failure() }
        let model: PhotoHeader.ColorModel
        switch raw.color_model {
        case Int32(TESSERA_COLOR_GRAY.rawValue): model = .gray
        case Int32(TESSERA_COLOR_CMYK.rawValue): model = .cmyk
        default: model = .rgb
        }
        var header = PhotoHeader(width: Int(raw.width), height: Int(raw.height), colorModel: model,
                                isProgressive: raw.progressive != 0, exifOrientation: Int(raw.exif_orientation),
                                adobeInverted: raw.adobe_inverted != 0, isArithmetic: raw.arithmetic != 0,
                                storedRGB: raw.stored_rgb != 0, minimumDataBytes: Int64(raw.min_data_bytes),
                                coefficientBytes: Int64(raw.coefficient_bytes),
                                dcDecoderBytes: Int64(raw.dc_decoder_bytes))
        header.colorTag = model == .cmyk ? ColorProfiles.tag(cmykICC: iccProfile, inverted: header.adobeInverted)
            : ColorProfiles.tag(icc: iccProfile)
        header.dateTaken = raw.date_taken
        // A header whose picture cannot fit in the file is refused now, before a decode would
        // spend seconds (or a whole-image buffer) on it.
        if header.minimumDataBytes > dataBytes {
            throw TesseraError.unreadablePhoto(
                path: path,
                reason: "its \(dataBytes < fileBytes ? "preview's " : "")header claims \(header.width) x \(header.height) px, which takes at least "
                    + "\(formatBytes(header.minimumDataBytes)) of image data, but the \(dataBytes < fileBytes ? "preview" : "file") holds only \(formatBytes(dataBytes))"
                    + ": it is truncated or corrupt")
        }
        return header
    }

    /// The ICC profile of the APP2 markers (after readHeader); empty when none. Valid while the
    /// reader lives.
    var iccProfile: UnsafeRawBufferPointer {
        var length = 0
        return ColorProfiles.bytes(tessera_jpeg_decoder_icc_profile(decoder, &length), count: length)
    }

    /// Where a multi-scan file's coefficients go: in memory up to `memoryLimitBytes`, beyond that
    /// in an unnamed file in `spillDirectory` through windows that fit the limit. Before `start`.
    func useCoefficientStorage(memoryLimitBytes: Int, spillDirectory: String) {
        let spill = SpillFile(directory: spillDirectory)
        self.spill = spill
        var c = spill.cValue
        tessera_jpeg_decoder_set_coefficient_storage(decoder, memoryLimitBytes, &c)
    }

    /// Draws a file whose data ends early as far as it goes (the rest grey, or a progressive
    /// file's missing scans left out) instead of failing; `endedEarly` says whether it did.
    /// Before `readHeader`.
    func allowEarlyEnd() { tessera_jpeg_decoder_allow_early_end(decoder, 1) }

    /// Whether the data ended before the picture did (with `allowEarlyEnd`).
    var endedEarly: Bool { tessera_jpeg_decoder_ended_early(decoder) != 0 }

    /// Makes the decode fail soon after `flag` is raised (RenderCancellation.flag).
    func setCancelFlag(_ flag: UnsafeMutablePointer<Int32>) { tessera_jpeg_decoder_set_cancel_flag(decoder, flag) }

    /// Whether the last start put the coefficients in the spill file.
    var coefficientsSpilled: Bool { tessera_jpeg_decoder_coefficients_spilled(decoder) != 0 }

    /// What a multi-scan file's coefficient arrays take at DCT scale `numerator`/8, which this
    /// sets as `scaledSize` does: the blocks as stored (only the coefficients that scale's
    /// inverse DCT reads), the whole-block windows libjpeg decodes into (always in memory), and
    /// the least the arrays hold when they spill (tessera_coefficients.c).
    func coefficientPlan(numerator: Int) throws(TesseraError) -> (stored: Int, windows: Int, minimumSpilled: Int) {
        var stored: UInt64 = 0, windows: UInt64 = 0, minimum: UInt64 = 0
        guard tessera_jpeg_decoder_coefficient_plan(decoder, Int32(numerator), &stored, &windows, &minimum) == TESSERA_JPEG_OK else {
            throw failure()
        }
        return (Int(clamping: stored), Int(clamping: windows), Int(clamping: minimum))
    }

    /// Whether the coefficient arrays keep only what the scale reads (the default) or all 64
    /// coefficients a block, as libjpeg's own do (for tests). Before `start`.
    func keepEveryCoefficient(_ every: Bool) { tessera_jpeg_decoder_set_coefficient_compaction(decoder, every ? 0 : 1) }

    /// After `start`: the bytes the coefficient arrays take, and what they hold in memory.
    var coefficientBytes: (total: Int, allocated: Int) {
        (Int(clamping: tessera_jpeg_decoder_coefficient_bytes(decoder)),
         Int(clamping: tessera_jpeg_decoder_coefficient_allocated_bytes(decoder)))
    }

    /// A DC decoder over the same JPEG (from its first byte: the file's, or a RAW preview's),
    /// for a multi-scan file drawn at 1/8.
    func dcReader(memoryLimitBytes: Int, spillDirectory: String, storedRGB: Bool) throws(TesseraError) -> DCScaledJPEGReader {
        try DCScaledJPEGReader(file: file, path: path, startingAt: dataOffset, fileBytes: dataBytes, memoryLimitBytes: memoryLimitBytes,
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

    /// libjpeg's warnings (corrupt data it worked around), how many of them say the image data
    /// is damaged, and the first one's text (the first damage's, when there is some).
    var warnings: (count: Int, damage: Int, first: String) {
        (Int(tessera_jpeg_decoder_warnings(decoder)), Int(tessera_jpeg_decoder_corrupt_warnings(decoder)),
         String(cString: tessera_jpeg_decoder_message(decoder)))
    }

    /// After the rows drawn: reads the rest of the image's data to its end, so that damage
    /// libjpeg only sees there (the Huffman stream out of step at the next marker) is among the
    /// warnings. Returns why the rest cannot be decoded, if it cannot.
    func finish() -> String? {
        tessera_jpeg_decoder_finish(decoder) == TESSERA_JPEG_OK ? nil : String(cString: tessera_jpeg_decoder_message(decoder))
    }

    private func failure() -> TesseraError {
        if tessera_jpeg_decoder_source_failed(decoder) != 0, let error = source.error { return error }
        if let reason = spill?.failureReason { return .unreadablePhoto(path: path, reason: reason) }
        return .unreadablePhoto(path: path, reason: String(cString: tessera_jpeg_decoder_message(decoder)))
    }
}

