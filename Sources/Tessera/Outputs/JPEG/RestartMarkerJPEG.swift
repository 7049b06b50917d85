// RestartMarkerJPEG.swift — one baseline JPEG encoded in parallel, stripe by stripe, joined with
// restart markers: the whole of the restart-marker logic (segments, header, DRI, RSTn, EOI).
//
// A restart marker resets what the entropy coder carries from one MCU to the next (the DC
// predictions start again from zero and the bit stream is padded to a byte), which is exactly the
// state at the start of an image. So a stripe whose height is a whole number of MCU rows,
// encoded on its own as a complete JPEG with the same quantisation and standard Huffman tables,
// holds between its SOS header and its EOI the very bytes a serial encoder would write for those
// rows with a restart interval of one stripe. The writer emits:
//
//     SOI APP0 DQT SOF(full height) DHT DRI(one stripe's MCUs) SOS
//     segment 0  RST0  segment 1  RST1 ... RST7  segment 8  RST0 ...  segment n-1  EOI
//
// The header is stripe 0's own, with the SOF height patched and a DRI inserted where libjpeg
// puts it (after the DHTs, before SOS), so the file is byte-identical to libjpeg's serial output
// with the same restart interval. Chroma downsampling never reads across a stripe boundary:
// libjpeg averages within an MCU row only, and smoothing is off.
//
// `RestartMarkerJPEGSink` is the output: the workers compress their stripes (`prepare`), or,
// with a pyramid, the writer does in the pyramid's batch (`take`); either way the writer appends
// the segments in order with the header first and RST0...RST7 cycling between them.
//
// Segment format for distributed rendering: an `EncodedStripe` is self-contained (entropy bytes
// plus the index and MCU geometry they were made for); any process that renders stripes
// [a, b) with the same width, quality and subsampling produces segments that the writer can
// splice in order, given stripe 0's header.

/// Collects encoded bytes in memory.
final class MemoryByteSink: EncodedByteSink {
    var bytes: [UInt8] = []
    init(reservingCapacity capacity: Int) { bytes.reserveCapacity(capacity) }
    func append(_ chunk: UnsafeRawBufferPointer) throws(TesseraError) { bytes.append(contentsOf: chunk) }
}

/// One stripe, compressed on its own.
struct EncodedStripe: Sendable {
    /// The stripe's complete standalone JPEG.
    let jpeg: [UInt8]
    /// Where its header ends (the SOS marker starts here).
    let scanHeaderStart: Int
    /// Its entropy-coded data: after the SOS segment, before EOI.
    let entropy: Range<Int>

    /// Encodes `rowCount` RGB rows of `width` pixels as a standalone baseline JPEG and locates
    /// its parts.
    static func encode(rows: UnsafeRawPointer, stride: Int, width: Int, rowCount: Int, quality: Int,
                       subsampling: ChromaSubsampling, label: String, marks: JPEGMarks = JPEGMarks()) throws(TesseraError) -> EncodedStripe {
        let sink = MemoryByteSink(reservingCapacity: width * rowCount / 2)
        let writer = try JPEGScanlineWriter(sink: sink, label: label, width: width, height: rowCount, quality: quality,
                                            subsampling: subsampling, bufferBytes: 64 << 10, marks: marks)
        try writer.write(rows: rows, stride: stride, count: rowCount)
        try writer.finish()
        return try locate(sink.bytes, label: label)
    }

    /// Finds the SOS segment and the entropy-coded data of a baseline JPEG from libjpeg.
    static func locate(_ jpeg: [UInt8], label: String) throws(TesseraError) -> EncodedStripe {
        func malformed(_ why: String) -> TesseraError { .encodeFailed(path: label, reason: "stripe JPEG: \(why)") }
        guard jpeg.count >= 4, jpeg[0] == 0xFF, jpeg[1] == 0xD8, jpeg[jpeg.count - 2] == 0xFF, jpeg[jpeg.count - 1] == 0xD9 else {
            throw malformed("no SOI/EOI")
        }
        var index = 2
        while index + 4 <= jpeg.count {
            guard jpeg[index] == 0xFF else { throw malformed("expected a marker at \(index)") }
            let marker = jpeg[index + 1]
            let length = Int(jpeg[index + 2]) << 8 | Int(jpeg[index + 3])
            if marker == 0xDA {
                return EncodedStripe(jpeg: jpeg, scanHeaderStart: index, entropy: (index + 2 + length)..<(jpeg.count - 2))
            }
            index += 2 + length
        }
        throw malformed("no SOS")
    }

    /// The joined file's header, made from stripe 0: SOF height set to `height`, and a DRI of
    /// `restartInterval` MCUs inserted before SOS.
    func fileHeader(height: Int, restartInterval: Int, label: String) throws(TesseraError) -> [UInt8] {
        var header = Array(jpeg[0..<scanHeaderStart])
        guard let sof = (2..<(header.count - 8)).first(where: { header[$0] == 0xFF && header[$0 + 1] == 0xC0 }) else {
            throw .encodeFailed(path: label, reason: "stripe JPEG: no SOF0")
        }
        header[sof + 5] = UInt8(height >> 8)
        header[sof + 6] = UInt8(height & 0xFF)
        header += [0xFF, 0xDD, 0x00, 0x04, UInt8(restartInterval >> 8), UInt8(restartInterval & 0xFF)]
        header += jpeg[scanHeaderStart..<entropy.lowerBound]
        return header
    }
}

/// The JPEG of a render whose stripes are compressed one by one and joined with restart markers.
final class RestartMarkerJPEGSink: StripeSink {
    private let output: AtomicOutputFile
    private let geometry: StripeGeometry
    private let quality: Int
    private let subsampling: ChromaSubsampling
    private let restartInterval: Int
    /// Whether the workers compress their stripes (else `take` does, in the pyramid's batch).
    private let onWorkers: Bool
    /// Stripe 0's header is the file's: its density and comment are the file's.
    private let marks: JPEGMarks

    init(path: String, geometry: StripeGeometry, quality: Int, subsampling: ChromaSubsampling, restartInterval: Int,
         compressOnWorkers: Bool, marks: JPEGMarks) throws(TesseraError) {
        self.marks = marks
        output = try AtomicOutputFile(destination: path)
        self.geometry = geometry
        self.quality = quality
        self.subsampling = subsampling
        self.restartInterval = restartInterval
        onWorkers = compressOnWorkers
    }

    func prepare(_ stripe: StripeView) throws(TesseraError) -> EncodedStripe? {
        guard onWorkers else { return nil }
        return try encode(stripe)
    }

    func take(_ stripe: StripeView, prepared: EncodedStripe?, alongside: StripeJobs?) throws(TesseraError) {
        alongside?.runAll()
        let segment: EncodedStripe
        if let prepared { segment = prepared } else { segment = try encode(stripe) }
        if stripe.index == 0 {
            let header = try segment.fileHeader(height: geometry.height, restartInterval: restartInterval, label: output.destination)
            try append(header[...])
        }
        try segment.jpeg.withUnsafeBytes { bytes in
            Result { () throws(TesseraError) in try output.append(UnsafeRawBufferPointer(rebasing: bytes[segment.entropy])) }
        }.get()
        try append(Self.trailer(afterStripe: stripe.index, of: geometry.stripeCount)[...])
    }

    /// The marker after stripe `index`'s entropy-coded data: RST0...RST7 cycling between
    /// stripes, EOI after the last. The one splice rule: `tessera join` writes the same.
    static func trailer(afterStripe index: Int, of stripeCount: Int) -> [UInt8] {
        index + 1 < stripeCount ? [0xFF, 0xD0 + UInt8(index % 8)] : [0xFF, 0xD9]
    }

    func finish() throws(TesseraError) {}
    func commit(in commit: OutputCommit) throws(TesseraError) { try output.commit(in: commit) }
    func discard() { output.discard() }
    func record(into summary: inout RenderSummary) { summary.outputBytes = output.bytesWritten }

    private func encode(_ stripe: StripeView) throws(TesseraError) -> EncodedStripe {
        try EncodedStripe.encode(rows: stripe.pixels, stride: stripe.bytesPerRow, width: stripe.width, rowCount: stripe.rows.count,
                                 quality: quality, subsampling: subsampling, label: output.destination, marks: marks)
    }

    private func append(_ bytes: ArraySlice<UInt8>) throws(TesseraError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(TesseraError) in try output.append(raw) } }.get()
    }
}

/// Which encoder a render uses.
public enum EncoderMode: String, Equatable, Sendable {
    /// One writer thread feeds libjpeg's scanline encoder: a single core at most.
    case serial
    /// Workers compress stripes in parallel; the writer joins them with restart markers.
    case parallel
}
