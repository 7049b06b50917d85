// JPEGFormat.swift — JPEG photos: the format's entry. Its two readers are ScaledJPEGReader
// (libjpeg, at the smallest DCT scale that covers the cell twice over) and DCScaledJPEGReader (multi-scan
// files at 1/8 from their DC coefficients); this file chooses between them and admits their
// buffers against the decode budget.
import CTesseraShims

extension ImageFormat {
    public static let jpeg = ImageFormat(rawValue: "JPEG")
}

enum JPEGFormat: PhotoFormat {
    static let format = ImageFormat.jpeg
    static let suffixes = [".jpg", ".jpeg", ".jpe", ".jfif"]
    /// A scan reads the header, in 64 KB reads from the start: read-ahead there had read 1.2 MB
    /// of a 2.7 MB phone JPEG (where a disk's read_ahead_kb is 8 MiB). A decode reads it all.
    static func readsAhead(decoding: Bool) -> Bool { decoding }

    /// A JPEG, or one of Tessera's own outputs (a JPEG or Deep Zoom tile it rendered: not a photo).
    static func sniff(_ bytes: [UInt8]) -> Sniffed? {
        guard starts(bytes, with: [0xFF, 0xD8, 0xFF]) else { return nil }
        return bytes.withUnsafeBytes { JPEGMarks.isOwnOutput($0) } ? .ownOutput : .readable(format)
    }

    static func header(of photo: PhotoFile, decoderMemoryBytes: Int) throws(TesseraError) -> PhotoHeader {
        try ScaledJPEGReader(photo: photo, decoderMemoryBytes: decoderMemoryBytes).readHeader()
    }

    /// Rows stream; a multi-scan file's buffers spill to disk when they do not fit: nothing
    /// must be held whole.
    static func wholeImageBytes(_ header: PhotoHeader, cellWidth: Int, cellHeight: Int) -> Int { 0 }

    static func decode(_ photo: PhotoFile, with decoder: CellDecoder,
                       into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        try decoder.decodeJPEG(photo, into: cell)
    }
}

extension CellDecoder {
    /// `offset` and `length`: where the JPEG lies in the file (a camera RAW's preview, RAW.swift);
    /// the libjpeg reader reads on from there, the DC decoder from `offset`, and the header's
    /// claims and the decoding work are held to `length`. `orientationIfNone`: the orientation
    /// when the JPEG carries none (the RAW's).
    func decodeJPEG(_ photo: PhotoFile, startingAt offset: Int64 = 0, length: Int64? = nil, orientationIfNone: Int = 0,
                    into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let path = photo.path
        if offset > 0 { try photo.seek(to: offset) }
        let reader = try ScaledJPEGReader(photo: photo, decoderMemoryBytes: budget.poolBytes)
        if let length { reader.limit(toBytes: length, startingAt: offset) }
        if let cancellation { reader.setCancelFlag(cancellation.flag) }
        reader.allowEarlyEnd()
        let header = try reader.readHeader()
        let conversion = header.colorModel == .rgb ? ColorProfiles.conversion(icc: reader.iccProfile)
            : header.colorModel == .cmyk ? ColorProfiles.conversion(cmykICC: reader.iccProfile, inverted: header.adobeInverted) : .none
        defer { conversion.release() }
        let orientation = OrientationTransform(exifOrientation: header.exifOrientation == 0 ? orientationIfNone : header.exifOrientation)
        let stored = storedCell(orientation)

        // Smallest DCT scale whose output covers the cell twice over (sharpEnough), or covers
        // it at all for the DC decoder; full size (8/8) if none does, and the resampler then
        // enlarges. Only 1/8, 2/8, 4/8 and 8/8: libjpeg-turbo's inverse
        // DCT at the other scales (and the chroma IDCTs they pair with) has no SIMD path, and
        // decoding at them takes longer than at the next power of two up, larger output and
        // all (tjbench on a 1800 x 1200 photo: 7/8 57 fps, 3/4 75, 5/8 87 against 8/8's 103;
        // 3/8 138 against 4/8's 158), resampling the extra pixels included (docs/performance.md).
        var scaled = (width: header.width, height: header.height)
        var numerator = 8
        // (A RAW's progressive preview too, from its offset: decoded whole, a 16,000 x 65,000 px
        // preview spilled 2 GB and took 18-25 s, against 0.6-0.9 s alone: a helper's finding.)
        let dcEligible = (offset == 0 || length != nil) && header.isProgressive && header.colorModel != .cmyk && !header.isArithmetic
        for candidate in [1, 2, 4, 8] {
            scaled = try reader.scaledSize(numerator: candidate)
            numerator = candidate
            if Self.sharpEnough(scaled, for: stored, numerator: candidate, dcDecoder: dcEligible) { break }
        }
        let working = workingBytes(outputWidth: scaled.width, orientation: orientation)
        let inMemoryShare = budget.poolBytes / 2
        let blockRows = max(1, (header.height + 7) / 8)
        let draw = { (rows: (UnsafeMutableRawPointer, Int, Int) throws(TesseraError) -> Int, components: Int,
                      size: (width: Int, height: Int)) throws(TesseraError) in
            try self.draw(path: path, orientation: orientation, scaled: size, components: components,
                          adobeInverted: header.adobeInverted, conversion: conversion, rows: rows, into: cell)
        }

        if dcEligible && numerator == 1 {
            // Two bytes a block (18 for 4:2:0 chroma) instead of libjpeg's 128.
            let planeBytes = Int(clamping: header.dcDecoderBytes)
            let inMemory = planeBytes + working <= inMemoryShare
            let limit = inMemory ? planeBytes : max(16 << 10, 8 * planeBytes / blockRows)
            let done = try budget.admitted(bytes: working + limit) { () throws(TesseraError) -> DecodeNotes? in
                let dc = try reader.dcReader(memoryLimitBytes: limit, spillDirectory: budget.spillDirectory,
                                             storedRGB: header.storedRGB)
                if let cancellation { dc.setCancelFlag(cancellation.flag) }
                guard case .decoded(let width, let height) = try dc.decode() else { return nil }
                try draw({ buffer, stride, count throws(TesseraError) in try dc.readRows(into: buffer, stride: stride, maxRows: count) },
                         3, (width, height))
                var result = notes(conversion, method: .dcOnly(spilled: dc.spilled))
                if dc.endedEarly { result.noteEndedEarly(progressive: true) }
                return result
            }
            if let done { return done }
            // Declined (a kind of file it does not handle, or data it finds corrupt): libjpeg
            // decodes it below, from where the header left off.
        }

        var request = working
        if header.isProgressive {
            request += try useCoefficientStorage(reader, header: header, numerator: numerator, working: working,
                                                 inMemoryShare: inMemoryShare, blockRows: blockRows)
        }
        return try budget.admitted(bytes: request) { () throws(TesseraError) -> DecodeNotes in
            let output = try reader.start()
            try draw({ buffer, stride, count throws(TesseraError) in try reader.readRows(into: buffer, stride: stride, maxRows: count) },
                     reader.outputComponents, output)
            let endedEarly = reader.endedEarly
            let unfinished = endedEarly ? nil : reader.finish()
            if let cancellation, cancellation.isCancelled { throw .cancelled }
            let warnings = reader.warnings
            var result = notes(conversion, method: header.isProgressive ? .coefficients(spilled: reader.coefficientsSpilled) : .streamed)
            // Drawn first: the warning the user sees for such a photo is this one.
            if endedEarly { result.noteEndedEarly(progressive: header.isProgressive) }
            if warnings.count > 0 {
                result.warningCount += warnings.count
                if result.firstWarning.isEmpty { result.firstWarning = warnings.first }
            }
            if let damage = unfinished ?? (warnings.damage > 0 ? warnings.first : nil) { result.noteDamaged(damage) }
            return result
        }
    }

    /// Whether a JPEG decoded at `numerator`/8 to `scaled` is the scale to draw a `stored` cell
    /// from: one that leaves the area average at least half of the shrink (2:1 or more), as
    /// libvips' thumbnail leaves its final resize, or full size. A scale that only just covers
    /// the cell is softer than the photo allows: a 4000 x 3000 photo in 300 px cells came out
    /// 38.0 dB from the exact full-size area average at 1/8 (500 x 375, then 1.25:1), 45.7 dB
    /// at 2/8. The exception is a multi-scan file that 1/8 covers (`dcDecoder`): the DC
    /// decoder reads only its DC scans, and 2/8 would decode every scan into coefficient arrays
    /// (several times the time and memory, docs/performance.md), so it stays at 1/8.
    static func sharpEnough(_ scaled: (width: Int, height: Int), for stored: (width: Int, height: Int),
                            numerator: Int, dcDecoder: Bool) -> Bool {
        let covers = scaled.width >= stored.width && scaled.height >= stored.height
        if numerator == 8 || (numerator == 1 && dcDecoder) { return covers }
        return scaled.width >= 2 * stored.width && scaled.height >= 2 * stored.height
    }

    /// Chooses where a multi-scan file's coefficient arrays go and how they keep blocks, and
    /// returns the bytes they hold in memory (what the decode is admitted with).
    ///
    /// libjpeg's whole arrays (128 bytes a block) in memory when they fit beside the decode's
    /// other buffers in `inMemoryShare`; else the compact arrays (only the coefficients the
    /// scale's inverse DCT reads, tessera_coefficients.c: 66 bytes a block at 2/8) when they
    /// fit there; else the whole arrays in a spill file, through windows of about a dozen block
    /// rows of every component, which is what libjpeg touches at once (5 iMCU rows with block
    /// smoothing). The compact arrays cost time to fold blocks in and out of their whole-block
    /// windows on every scan (measured, 25 x 25 cells of 600 px from 40 large progressive photos
    /// at a 512 MiB budget: about a tenth more CPU time than whole arrays in a spill file), and
    /// the spill file costs less than that when the page cache holds it; their gain is a photo
    /// drawn without a spill file, in about half the memory of whole arrays in memory.
    private func useCoefficientStorage(_ reader: ScaledJPEGReader, header: PhotoHeader, numerator: Int, working: Int,
                                       inMemoryShare: Int, blockRows: Int) throws(TesseraError) -> Int {
        let whole = Int(clamping: header.coefficientBytes)
        let plan = try reader.coefficientPlan(numerator: numerator)
        let compact = plan.stored + plan.windows
        let useCompact = whole + working > inMemoryShare && compact + working <= inMemoryShare
        reader.keepEveryCoefficient(!useCompact)
        let limit = useCompact ? compact : whole + working <= inMemoryShare ? whole : max(256 << 10, 12 * whole / blockRows)
        reader.useCoefficientStorage(memoryLimitBytes: limit, spillDirectory: budget.spillDirectory)
        return limit
    }
}

extension PhotoHeader {
    /// What a multi-scan (progressive) JPEG's whole-image buffers take when it is drawn into a
    /// `cellWidth` x `cellHeight` cell: the DC decoder's planes at 1/8, libjpeg's coefficient
    /// arrays (128 bytes a block) at larger scales; 0 for a baseline JPEG and other formats.
    /// The scale is estimated from the sizes (the decoder picks the smallest whose output
    /// covers the cell), so at a scale's edge this may count the larger figure. These buffers
    /// spill to a file when the decode pool cannot hold them: a plan with room to spare gives
    /// the pool that much more (RenderPlan).
    public func multiScanBytes(cellWidth: Int, cellHeight: Int) -> Int {
        guard format == .jpeg, isProgressive, width > 0, height > 0 else { return 0 }
        let swapped = OrientationTransform(exifOrientation: exifOrientation).swapsAxes
        let (cellAcross, cellDown) = swapped ? (cellHeight, cellWidth) : (cellWidth, cellHeight)
        let needed = max(Double(cellAcross) / Double(width), Double(cellDown) / Double(height))
        let numerator = Int((needed * 8).rounded(.up))
        return Int(clamping: numerator <= 1 && !isArithmetic && colorModel != .cmyk ? dcDecoderBytes : coefficientBytes)
    }
}

extension DecodeNotes {
    /// A JPEG whose image data libjpeg found damaged (a bad Huffman code, bytes where a marker
    /// should be: bit rot, a bad copy) and decoded on regardless: the picture may show garbage
    /// from there on. Drawn, with a warning, and counted as drawn in part (a strict run refuses
    /// it; a mosaic leaves it out). A JPEG that also ends early keeps that warning.
    mutating func noteDamaged(_ libjpegSays: String) {
        guard incomplete == nil else { return }
        let said = libjpegSays.hasPrefix("Corrupt JPEG data: ") ? String(libjpegSays.dropFirst(19)) : libjpegSays
        incomplete = "damaged JPEG data (\(said))"
        if warningCount == 0 { warningCount = 1 }
        firstWarning = "damaged JPEG data (\(said)): drawn as decoded, which may show garbage from the damage on"
    }

    /// A JPEG drawn as far as its data goes: incomplete (a strict run refuses it), with the
    /// warning that says how it was drawn.
    mutating func noteEndedEarly(progressive: Bool) {
        let missing = "file ends early (truncated or damaged JPEG)"
        incomplete = missing
        warningCount += 1
        // A progressive file cut inside its first scan is grey below where that scan stopped
        // (as libvips shows it), not only less sharp: both are said.
        firstWarning = missing + (progressive ? ": drawn from the part that was read, less sharp, grey where even its first scan did not reach"
                                              : ": drawn as far as it goes, the rest grey")
    }
}
