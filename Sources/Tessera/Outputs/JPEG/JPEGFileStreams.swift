// JPEGFileStreams.swift — a JPEG file written or read row by row, for tools around the
// renderer (sample photos, the benchmark's encode-only floor, reading an output back). The
// renderer itself writes through its sinks (StripeSink.swift) and reads photos at draw size
// (CellDecoder); these two are the same libjpeg paths with nothing of the render around them.

/// Writes a baseline JPEG row by row; the file appears under its name only when `finish` is
/// called (AtomicOutputFile), and not at all if the writer is dropped before.
public final class JPEGFileWriter {
    private let output: AtomicOutputFile
    private let encoder: JPEGScanlineWriter

    public init(path: String, width: Int, height: Int, quality: Int = 90, subsampling: ChromaSubsampling = .s420) throws(TesseraError) {
        output = try AtomicOutputFile(destination: path)
        encoder = try JPEGScanlineWriter(sink: output, label: path, width: width, height: height, quality: quality,
                                         subsampling: subsampling)
    }

    /// The next `count` RGB rows, `stride` bytes apart.
    public func write(rows: UnsafeRawPointer, stride: Int, count: Int) throws(TesseraError) {
        try encoder.write(rows: rows, stride: stride, count: count)
    }

    /// Completes the file and makes it appear; returns its size in bytes.
    @discardableResult
    public func finish() throws(TesseraError) -> Int64 {
        try encoder.finish()
        try output.commit()
        return output.bytesWritten
    }
}

/// Reads a JPEG row by row at full size as RGB (CMYK and YCCK converted; no EXIF orientation
/// applied).
public final class JPEGFileReader {
    public let width: Int
    public let height: Int
    private let reader: ScaledJPEGReader
    private let components: Int
    private let adobeInverted: Bool
    private var scratch: [UInt8]

    public init(path: String) throws(TesseraError) {
        reader = try ScaledJPEGReader(path: path, decoderMemoryBytes: 1 << 30)
        let header = try reader.readHeader()
        adobeInverted = header.adobeInverted
        _ = try reader.scaledSize(numerator: 8)
        (width, height) = try reader.start()
        components = reader.outputComponents
        scratch = [UInt8](repeating: 0, count: width * components * 16)
    }

    /// Reads up to `maxRows` (at most 16) rows of RGB into `buffer`, `stride` bytes apart; returns
    /// how many (0 at the end of the data).
    public func readRows(into buffer: UnsafeMutableRawPointer, stride: Int, maxRows: Int) throws(TesseraError) -> Int {
        let width = width, components = components, inverted = adobeInverted
        let wanted = min(maxRows, 16)
        let count = try scratch.withUnsafeMutableBytes { bytes in
            Result { () throws(TesseraError) in try reader.readRows(into: bytes.baseAddress!, stride: width * components, maxRows: wanted) }
        }.get()
        scratch.withUnsafeMutableBufferPointer { source in
            for i in 0..<count {
                let from = source.baseAddress! + i * width * components
                let to = (buffer + i * stride).assumingMemoryBound(to: UInt8.self)
                if components == 4 {
                    convertCMYKRow(from, into: to, width: width, inverted: inverted)
                } else {
                    to.update(from: from, count: width * 3)
                }
            }
        }
        return count
    }
}
