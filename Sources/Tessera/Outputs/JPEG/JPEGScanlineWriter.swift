// JPEGScanlineWriter.swift — libjpeg's scanline encoder, fed rows in order.
//
// Threading: one thread (the pipeline's writer) owns an instance and calls it top to bottom.
import CTesseraShims

/// Chroma subsampling of the output.
public enum ChromaSubsampling: String, Sendable, CaseIterable {
    case s420 = "420"
    case s422 = "422"
    case s444 = "444"

    /// Luma sampling factors (horizontal, vertical).
    var lumaFactors: (h: Int32, v: Int32) {
        switch self {
        case .s420: return (2, 2)
        case .s422: return (2, 1)
        case .s444: return (1, 1)
        }
    }

    /// Rows in one MCU row: stripes of this many rows are most efficient for the encoder.
    public var mcuHeight: Int { self == .s420 ? 16 : 8 }

    /// Columns in one MCU.
    public var mcuWidth: Int { self == .s444 ? 8 : 16 }

    /// MCUs in one MCU row of an image `width` pixels wide.
    public func mcusPerRow(width: Int) -> Int { (width + mcuWidth - 1) / mcuWidth }
}

/// Where encoded bytes go.
protocol EncodedByteSink: AnyObject {
    func append(_ bytes: UnsafeRawBufferPointer) throws(TesseraError)
}

extension AtomicOutputFile: EncodedByteSink {}

/// Baseline JPEG encoder over an RGB scanline stream (jpeg_write_scanlines), with standard
/// Huffman tables and no optimize_coding or progression, since both would buffer the whole image.
final class JPEGScanlineWriter {
    private let encoder: OpaquePointer
    private let sinkBox: SinkBox
    private let label: String
    private(set) var rowsWritten = 0
    let height: Int

    /// Holds the sink and the first error it threw, for the C callback.
    private final class SinkBox {
        let sink: EncodedByteSink
        var error: TesseraError?
        init(_ sink: EncodedByteSink) { self.sink = sink }
    }

    /// Starts an encode of a `width` x `height` RGB image (tessera_jpeg_encoder_start).
    init(sink: EncodedByteSink, label: String, width: Int, height: Int, quality: Int,
         subsampling: ChromaSubsampling, restartInterval: Int = 0, bufferBytes: Int = 256 << 10,
         marks: JPEGMarks = JPEGMarks()) throws(TesseraError) {
        self.label = label
        self.height = height
        sinkBox = SinkBox(sink)
        let callback: tessera_jpeg_sink = { context, bytes, count in
            let box = Unmanaged<SinkBox>.fromOpaque(context!).takeUnretainedValue()
            do throws(TesseraError) {
                try box.sink.append(UnsafeRawBufferPointer(start: bytes, count: count))
                return 0
            } catch {
                if box.error == nil { box.error = error }
                return 1
            }
        }
        guard let encoder = tessera_jpeg_encoder_create(callback, Unmanaged.passUnretained(sinkBox).toOpaque(), bufferBytes) else {
            throw TesseraError.encodeFailed(path: label, reason: "out of memory creating the encoder")
        }
        self.encoder = encoder
        tessera_jpeg_encoder_set_marks(encoder, UInt32(marks.dotsPerInch), marks.comment)
        let factors = subsampling.lumaFactors
        if tessera_jpeg_encoder_start(encoder, UInt32(width), UInt32(height), Int32(quality), factors.h, factors.v,
                                      UInt32(restartInterval)) != TESSERA_JPEG_OK {
            // (deinit destroys the encoder: a class whose stored properties are all set runs its
            // deinit when its init throws.)
            throw failure()
        }
    }

    deinit { tessera_jpeg_encoder_destroy(encoder) }

    /// Encodes `count` rows starting at `rows`, `stride` bytes apart (tessera_jpeg_encoder_write_rows).
    func write(rows: UnsafeRawPointer, stride: Int, count: Int) throws(TesseraError) {
        guard count > 0 else { return }
        if tessera_jpeg_encoder_write_rows(encoder, rows.assumingMemoryBound(to: UInt8.self), stride, UInt32(count)) != TESSERA_JPEG_OK {
            throw failure()
        }
        rowsWritten += count
    }

    /// Writes the end of the image (tessera_jpeg_encoder_finish).
    func finish() throws(TesseraError) {
        if tessera_jpeg_encoder_finish(encoder) != TESSERA_JPEG_OK { throw failure() }
    }

    private func failure() -> TesseraError {
        if tessera_jpeg_encoder_sink_failed(encoder) != 0, let error = sinkBox.error { return error }
        return .encodeFailed(path: label, reason: String(cString: tessera_jpeg_encoder_message(encoder)))
    }
}

/// The JPEG of a render encoded serially: one libjpeg scanline encoder fed every stripe's rows
/// in order, straight into the output file.
final class SerialJPEGSink: StripeSink {
    private let output: AtomicOutputFile
    private let encoder: JPEGScanlineWriter

    init(path: String, width: Int, height: Int, quality: Int, subsampling: ChromaSubsampling, restartInterval: Int,
         marks: JPEGMarks) throws(TesseraError) {
        output = try AtomicOutputFile(destination: path)
        do throws(TesseraError) {
            encoder = try JPEGScanlineWriter(sink: output, label: path, width: width, height: height, quality: quality,
                                             subsampling: subsampling, restartInterval: restartInterval, marks: marks)
        } catch {
            output.discard()
            throw error
        }
    }

    func take(_ stripe: StripeView, prepared: EncodedStripe?, alongside: StripeJobs?) throws(TesseraError) {
        alongside?.runAll()
        try encoder.write(rows: stripe.pixels, stride: stripe.bytesPerRow, count: stripe.rows.count)
    }

    func finish() throws(TesseraError) { try encoder.finish() }
    func commit(in commit: OutputCommit) throws(TesseraError) { try output.commit(in: commit) }
    func discard() { output.discard() }
    func record(into summary: inout RenderSummary) { summary.outputBytes = output.bytesWritten }
}

/// What a JPEG says about itself besides its pixels: its density (JFIF, dots per inch; 0 leaves
/// libjpeg's 1:1 aspect) and a comment (COM marker) right after the JFIF header.
public struct JPEGMarks: Equatable, Sendable {
    public var dotsPerInch = 0
    public var comment = ""

    public init(dotsPerInch: Int = 0, comment: String = "") {
        self.dotsPerInch = dotsPerInch
        self.comment = comment
    }

    /// The comment every JPEG and Deep Zoom tile Tessera renders carries, so that a later run
    /// given the folder it was written into does not draw it as a photo (`isOwnOutput`).
    public static let outputComment = "Tessera output: not a photo"

    /// The marks of a rendered JPEG: the output comment, and `dotsPerInch` when given.
    public static func output(dotsPerInch: Int?) -> JPEGMarks {
        JPEGMarks(dotsPerInch: dotsPerInch ?? 0, comment: outputComment)
    }

    /// Whether a JPEG starting with `prefix` (its first 64 bytes or more) is one Tessera rendered:
    /// SOI, the 18-byte JFIF APP0 libjpeg writes, then the output comment.
    public static func isOwnOutput(_ prefix: UnsafeRawBufferPointer) -> Bool {
        let comment = Array(outputComment.utf8)
        let start = 2 + 18
        guard prefix.count >= start + 4 + comment.count, prefix[0] == 0xFF, prefix[1] == 0xD8, prefix[2] == 0xFF, prefix[3] == 0xE0,
              prefix[start] == 0xFF, prefix[start + 1] == 0xFE,
              Int(prefix[start + 2]) << 8 | Int(prefix[start + 3]) == comment.count + 2 else { return false }
        return comment.indices.allSatisfy { prefix[start + 4 + $0] == comment[$0] }
    }
}
