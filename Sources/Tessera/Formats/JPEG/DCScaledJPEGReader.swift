// DCScaledJPEGReader.swift — a multi-scan JPEG at 1/8 scale from its DC coefficients alone.
//
// Wraps tessera_dc.c (see there for what is decoded and how the output differs from libjpeg's).
// Its whole-image buffers are the DC planes, 2 bytes a block (about 1 MB for 24 megapixels),
// in memory up to `memoryLimitBytes`, beyond that in a spill file. The file is read with pread
// from its first byte, so the libjpeg reader that read the header is untouched.
//
// Threading: an instance belongs to one thread at a time.
import CTesseraCodec
import CTesseraShims

final class DCScaledJPEGReader {
    let path: String
    private let decoder: OpaquePointer
    private let source: SourceBox
    private let spill: SpillFile

    private final class SourceBox {
        let file: FileDescriptor
        var offset: Int64 = 0
        /// Where the JPEG ends (a RAW preview's end): the decoder sees its end there.
        var end = Int64.max
        var error: TesseraError?
        init(_ file: FileDescriptor) { self.file = file }
    }

    /// The result of `decode`.
    enum Outcome {
        case decoded(width: Int, height: Int)
        /// Not a file this decoder handles (a sampling layout libjpeg draws from more than the
        /// DC, arithmetic coding, scans out of progression order): use libjpeg. Data that
        /// libjpeg would refuse as corrupt is a thrown error instead.
        case unsupported(reason: String)
    }

    /// `offset`: where the JPEG starts in the file (a camera RAW's preview); `fileBytes`: its length.
    init(file: FileDescriptor, path: String, startingAt offset: Int64 = 0, fileBytes: Int64, memoryLimitBytes: Int, spillDirectory: String,
         storedRGB: Bool) throws(TesseraError) {
        self.path = path
        source = SourceBox(file)
        source.offset = offset
        source.end = offset + fileBytes
        spill = SpillFile(directory: spillDirectory)
        let callback: tessera_jpeg_source = { context, buffer, capacity in
            let box = Unmanaged<SourceBox>.fromOpaque(context!).takeUnretainedValue()
            do throws(TesseraError) {
                let count = try box.file.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: Int(min(Int64(capacity), max(0, box.end - box.offset)))),
                                              at: box.offset)
                box.offset += Int64(count)
                return count
            } catch {
                box.error = error
                return -1
            }
        }
        var c = spill.cValue
        guard let decoder = tessera_dc_create(callback, Unmanaged.passUnretained(source).toOpaque(), 256 << 10,
                                              memoryLimitBytes, &c, storedRGB ? 1 : 0) else {
            throw TesseraError.unreadablePhoto(path: path, reason: "out of memory creating a decoder")
        }
        self.decoder = decoder
        tessera_dc_set_work_limit(decoder, tessera_work_limit_blocks(UInt64(max(0, fileBytes))))
    }

    deinit { tessera_dc_destroy(decoder) }

    /// Reads the whole file (tessera_dc_decode).
    func decode() throws(TesseraError) -> Outcome {
        switch tessera_dc_decode(decoder) {
        case TESSERA_JPEG_OK:
            var width: UInt32 = 0, height: UInt32 = 0
            tessera_dc_output_size(decoder, &width, &height)
            return .decoded(width: Int(width), height: Int(height))
        case TESSERA_JPEG_UNSUPPORTED:
            return .unsupported(reason: String(cString: tessera_dc_message(decoder)))
        default:
            throw failure()
        }
    }

    /// Makes the decode fail soon after `flag` is raised (RenderCancellation.flag).
    func setCancelFlag(_ flag: UnsafeMutablePointer<Int32>) { tessera_dc_set_cancel_flag(decoder, flag) }

    /// Whether the file ended before the picture did (drawn as far as its data goes).
    var endedEarly: Bool { tessera_dc_ended_early(decoder) != 0 }

    /// Whether it ended before every component's AC scans had begun, where libjpeg smooths the
    /// DC values (a few levels apart from this decoder's, which are as the file holds them).
    var endedWhereLibjpegSmooths: Bool { tessera_dc_ended_early(decoder) == 2 }

    /// The DC planes' size in bytes (known once the frame header was read).
    var planeBytes: Int { Int(tessera_dc_plane_bytes(decoder)) }

    /// Whether the planes went to the spill file.
    var spilled: Bool { spill.wasUsed }

    /// Reads up to `maxRows` RGB rows into `buffer` (rows `stride` bytes apart); returns how many.
    func readRows(into buffer: UnsafeMutableRawPointer, stride: Int, maxRows: Int) throws(TesseraError) -> Int {
        let count = tessera_dc_read_rows(decoder, buffer.assumingMemoryBound(to: UInt8.self), stride, Int32(maxRows))
        guard count >= 0 else { throw failure() }
        return Int(count)
    }

    private func failure() -> TesseraError {
        if tessera_dc_source_failed(decoder) != 0, let error = source.error { return error }
        if let reason = spill.failureReason { return .unreadablePhoto(path: path, reason: reason) }
        return .unreadablePhoto(path: path, reason: String(cString: tessera_dc_message(decoder)))
    }
}
