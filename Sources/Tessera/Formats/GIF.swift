// GIF.swift — GIF photos through giflib (tessera_gif.c): the format's entry, its reader, and its
// rows into the cell path.
//
// The first frame is drawn, on the canvas of the logical screen; its transparent index, and the
// screen the frame leaves uncovered, are drawn over the background like PNG alpha. A
// non-interlaced frame streams row by row; an interlaced one comes in four passes, so it is read
// whole first (one byte a pixel), which `wholeImageBytes` counts for the plan and the budget.
import CTesseraShims

extension ImageFormat {
    public static let gif = ImageFormat(rawValue: "GIF")
}

enum GIFFormat: PhotoFormat {
    static let format = ImageFormat.gif
    static let suffixes = [".gif"]

    static func sniff(_ bytes: [UInt8]) -> Sniffed? {
        starts(bytes, with: Array("GIF87a".utf8)) || starts(bytes, with: Array("GIF89a".utf8)) ? .readable(format) : nil
    }

    static func header(of photo: PhotoFile, decoderMemoryBytes: Int) throws(TesseraError) -> PhotoHeader {
        try GIFReader(photo: photo).header
    }

    /// An interlaced frame, held whole (a byte a pixel); 0 for one that streams.
    static func wholeImageBytes(_ header: PhotoHeader, cellWidth: Int, cellHeight: Int) -> Int {
        Int(clamping: header.wholeImageBytes)
    }

    static func decode(_ photo: PhotoFile, with decoder: CellDecoder,
                       into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        try decoder.decodeGIF(GIFReader(photo: photo), into: cell)
    }
}

final class GIFReader {
    let photo: PhotoFile
    private let gif: OpaquePointer
    let info: tessera_gif_info

    /// The most pixels one byte of LZW data can make: a 12-bit code stands for at most 4,096
    /// pixels, so about 2,730 a byte; a canvas larger than its file can describe is refused
    /// before any row is drawn (the part of the screen no frame covers costs no data, but a
    /// real GIF's screen is about its frame's size).
    static let pixelsPerByte: Int64 = 2_800

    init(photo: PhotoFile) throws(TesseraError) {
        self.photo = photo
        var info = tessera_gif_info()
        var message = [CChar](repeating: 0, count: 200)
        guard let gif = tessera_gif_open(photo.file.rawValue, UInt64(max(0, photo.fileBytes)), &info, &message, 200) else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "GIF: \(cMessage(message))")
        }
        self.gif = gif
        self.info = info
        let pixels = Int64(info.width) * Int64(info.height)
        if pixels > Self.pixelsPerByte * photo.fileBytes + (1 << 20) {
            throw TesseraError.unreadablePhoto(
                path: photo.path, reason: "its GIF header claims \(info.width) x \(info.height) px, more than its "
                    + "\(formatBytes(photo.fileBytes)) can describe: it is truncated or corrupt")
        }
    }

    deinit { tessera_gif_close(gif) }

    var header: PhotoHeader {
        var header = PhotoHeader(width: Int(info.width), height: Int(info.height), colorModel: .rgb,
                                 isProgressive: info.interlaced != 0, exifOrientation: 0, adobeInverted: false)
        header.format = .gif
        header.hasAlpha = info.has_alpha != 0
        header.wholeImageBytes = frameBytes
        return header
    }

    /// The interlaced frame read whole; 0 when the frame streams.
    var frameBytes: Int64 { info.interlaced != 0 ? Int64(info.frame_width) * Int64(info.frame_height) : 0 }

    /// giflib's decoder (its LZW tables, about 16 KiB) and a frame row of indices.
    var decoderBytes: Int { Int(info.frame_width) + (64 << 10) }

    func start() throws(TesseraError) {
        guard tessera_gif_start(gif) == 0 else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "GIF: " + String(cString: tessera_gif_message(gif)))
        }
    }

    /// The next canvas row as RGBA into `rgba` (`width` * 4 bytes); false after the last.
    func readRow(into rgba: UnsafeMutablePointer<UInt8>) -> Bool { tessera_gif_read_row(gif, rgba) == 1 }

    /// What was wrong with the frame's data (drawn transparent from there on); nil when nothing.
    var problem: String? { tessera_gif_problem(gif).map { "GIF: " + String(cString: $0) } }
}

extension CellDecoder {
    func decodeGIF(_ reader: GIFReader, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let width = Int(reader.info.width), height = Int(reader.info.height)
        // GIF has no EXIF and no colour profile Tessera reads: drawn as stored, as sRGB.
        let orientation = OrientationTransform(exifOrientation: 0)
        let request = workingBytes(outputWidth: width, orientation: orientation) + width * 4 + reader.decoderBytes + Int(clamping: reader.frameBytes)
        let interlaced = reader.info.interlaced != 0
        try budget.check(oneDecodeBytes: request, photo: reader.photo.path,
                         what: "decoding this \(width) x \(height) GIF\(interlaced ? " (interlaced: its frame read whole)" : "")")
        return try budget.admitted(bytes: request) { () throws(TesseraError) -> DecodeNotes in
            try reader.start()
            if cancellation?.isCancelled == true { throw .cancelled }
            let rgba = UnsafeMutablePointer<UInt8>.allocate(capacity: width * 4)
            defer { rgba.deallocate() }
            try draw(path: reader.photo.path, orientation: orientation, scaled: (width, height), components: 3,
                     adobeInverted: false, conversion: .none, rows: { buffer, stride, count throws(TesseraError) in
                var rows = 0
                while rows < count, reader.readRow(into: rgba) {
                    compositeRGBA(rgba, into: (buffer + rows * stride).assumingMemoryBound(to: UInt8.self),
                                  width: width, background: background)
                    rows += 1
                }
                if cancellation?.isCancelled == true { throw .cancelled }
                return rows
            }, into: cell)
            var notes = DecodeNotes(method: interlaced ? .wholeImage : .streamed)
            if let problem = reader.problem {
                notes.warningCount = 1
                notes.incomplete = problem
                notes.firstWarning = problem + "; the rest drawn transparent"
            }
            return notes
        }
    }
}
