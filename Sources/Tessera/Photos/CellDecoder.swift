// CellDecoder.swift — one photo in, one upright, centre-cropped, cell-sized RGB image out.
//
// Pipeline per photo: header (with EXIF orientation) → the smallest DCT scale M/8 whose output
// still covers the cell → rows streamed (from libjpeg, or from the DC decoder for a multi-scan
// file at 1/8) through AreaResampler into the cell in the stored orientation →
// OrientationTransform into the caller's buffer. Memory is proportional to the photo's width (a
// few rows at a time), plus, for a multi-scan file, its whole-image buffer: 2 bytes a block at
// 1/8, libjpeg's 128 otherwise, in a spill file when it does not fit the budget.

/// How a photo was decoded.
public enum DecodeMethod: Equatable, Sendable {
    /// libjpeg, one scan, rows streamed (baseline files).
    case streamed
    /// A multi-scan file at 1/8 scale from its DC coefficients (DCScaledJPEGReader).
    case dcOnly(spilled: Bool)
    /// A multi-scan file through libjpeg with its coefficients in memory or in a spill file.
    case coefficients(spilled: Bool)
}

/// What decoding one photo noticed that the user may want to hear about.
public struct DecodeNotes: Equatable, Sendable {
    /// libjpeg warnings (corrupt data it skipped over); the cell was still drawn.
    public var warningCount = 0
    public var firstWarning = ""
    public var method = DecodeMethod.streamed
}

public struct CellDecoder: Sendable {
    public let cellWidth: Int
    public let cellHeight: Int
    /// The memory all decodes share, and where their spill files go.
    public let budget: DecodeBudget

    /// The upright aspect ratio (width / height) of the centre crop; nil: the cell's own. A
    /// mosaic's analysis uses a k x k image of a cell-shaped crop.
    public let cropAspect: Double?

    /// When given and cancelled, a decode stops within a scan or a few rows and throws
    /// `.cancelled` (the C decoders poll its flag).
    public let cancellation: RenderCancellation?

    public init(cellWidth: Int, cellHeight: Int, budget: DecodeBudget, cropAspect: Double? = nil,
                cancellation: RenderCancellation? = nil) {
        precondition(cellWidth > 0 && cellHeight > 0)
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
        self.budget = budget
        self.cropAspect = cropAspect
        self.cancellation = cancellation
    }

    /// A decoder with a budget of its own of `decodePoolBytes`, spilling to the default
    /// temporary directory.
    public init(cellWidth: Int, cellHeight: Int, decodePoolBytes: Int, cropAspect: Double? = nil) {
        self.init(cellWidth: cellWidth, cellHeight: cellHeight,
                  budget: DecodeBudget(poolBytes: decodePoolBytes, spillDirectory: defaultTemporaryDirectory()),
                  cropAspect: cropAspect)
    }

    public var cellBytes: Int { cellWidth * cellHeight * 3 }

    /// What one decode holds besides whole-image buffers, for output rows `outputWidth` px wide:
    /// libjpeg's row buffers (a few MCU rows of samples), ours (16 rows, the resampler's
    /// accumulators, the cell in its stored orientation) and the file buffers.
    func workingBytes(outputWidth: Int) -> Int {
        outputWidth * 3 * 48 + cellBytes + (384 << 10)
    }

    /// Decodes `path` into `cell` (`cellBytes` long), upright and centre-cropped to the cell.
    ///
    /// Single-scan (baseline) files stream through libjpeg at the smallest DCT scale M/8 that
    /// covers the cell. Multi-scan files (progressive, or components in separate scans) drawn at
    /// 1/8 are decoded from their DC coefficients alone (DCScaledJPEGReader); at larger scales,
    /// or when that decoder declines the file, libjpeg decodes them with its coefficients in
    /// memory when they fit half the budget's pool, else in a spill file. Every decode is
    /// admitted against the budget first.
    public func decode(path: String, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        try decode(file: PathBytes(path), into: cell)
    }

    /// The same for a path given as bytes (a photo's `file`: any name the kernel allows).
    public func decode(file: PathBytes, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        precondition(cell.count >= cellBytes)
        if cancellation?.isCancelled == true { throw .cancelled }
        do {
            return try decodeUncancelled(file: file, into: cell)
        } catch {
            // The decoders fail with "cancelled" when the flag is raised mid-decode.
            if cancellation?.isCancelled == true { throw .cancelled }
            throw error
        }
    }

    private func decodeUncancelled(file: PathBytes, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let path = file.display
        let reader = try ScaledJPEGReader(file: file, decoderMemoryBytes: budget.poolBytes)
        if let cancellation { reader.setCancelFlag(cancellation.flag) }
        let header = try reader.readHeader()
        let orientation = OrientationTransform(exifOrientation: header.exifOrientation)
        // The cell in the stored frame: the cell, turned back when the photo is stored sideways.
        let storedCellWidth = orientation.swapsAxes ? cellHeight : cellWidth
        let storedCellHeight = orientation.swapsAxes ? cellWidth : cellHeight

        // Smallest DCT scale whose output still covers the cell; full size (8/8) if none does,
        // and the resampler then enlarges.
        var scaled = (width: header.width, height: header.height)
        var numerator = 8
        for candidate in 1...8 {
            scaled = try reader.scaledSize(numerator: candidate)
            numerator = candidate
            if scaled.width >= storedCellWidth && scaled.height >= storedCellHeight { break }
        }
        let working = workingBytes(outputWidth: scaled.width)
        let inMemoryShare = budget.poolBytes / 2
        let blockRows = max(1, (header.height + 7) / 8)
        let draw = { (rows: (UnsafeMutableRawPointer, Int, Int) throws(TesseraError) -> Int, components: Int,
                      size: (width: Int, height: Int)) throws(TesseraError) in
            try self.draw(path: path, header: header, orientation: orientation, storedCellWidth: storedCellWidth,
                          storedCellHeight: storedCellHeight, scaled: size, components: components, rows: rows, into: cell)
        }

        if header.isProgressive && numerator == 1 && header.colorModel != .cmyk && !header.isArithmetic {
            // Two bytes a block (18 for 4:2:0 chroma) instead of libjpeg's 128.
            let planeBytes = Int(clamping: header.dcDecoderBytes)
            let inMemory = planeBytes + working <= inMemoryShare
            let limit = inMemory ? planeBytes : max(16 << 10, 8 * planeBytes / blockRows)
            let notes = try budget.admitted(bytes: working + limit) { () throws(TesseraError) -> DecodeNotes? in
                let dc = try reader.dcReader(memoryLimitBytes: limit, spillDirectory: budget.spillDirectory,
                                             storedRGB: header.storedRGB)
                if let cancellation { dc.setCancelFlag(cancellation.flag) }
                guard case .decoded(let width, let height) = try dc.decode() else { return nil }
                try draw({ buffer, stride, count throws(TesseraError) in try dc.readRows(into: buffer, stride: stride, maxRows: count) },
                         3, (width, height))
                return DecodeNotes(method: .dcOnly(spilled: dc.spilled))
            }
            if let notes { return notes }
            // Declined (a kind of file it does not handle, or data it finds corrupt): libjpeg
            // decodes it below, from where the header left off.
        }

        var request = working
        if header.isProgressive {
            let coefficients = Int(clamping: header.coefficientBytes)
            // Whole in memory when it fits; else windows of about a dozen block rows of every
            // component, which is what libjpeg touches at once (5 iMCU rows with block smoothing).
            let limit = coefficients + working <= inMemoryShare
                ? coefficients : max(256 << 10, 12 * coefficients / blockRows)
            reader.useCoefficientStorage(memoryLimitBytes: limit, spillDirectory: budget.spillDirectory)
            request += limit
        }
        return try budget.admitted(bytes: request) { () throws(TesseraError) -> DecodeNotes in
            let output = try reader.start()
            try draw({ buffer, stride, count throws(TesseraError) in try reader.readRows(into: buffer, stride: stride, maxRows: count) },
                     reader.outputComponents, output)
            let warnings = reader.warnings
            return DecodeNotes(warningCount: warnings.count, firstWarning: warnings.count > 0 ? warnings.first : "",
                               method: header.isProgressive ? .coefficients(spilled: reader.coefficientsSpilled) : .streamed)
        }
    }

    /// Streams `scaled` rows from `rows` through the resampler into an upright, centre-cropped cell.
    private func draw(path: String, header: JPEGHeader, orientation: OrientationTransform, storedCellWidth: Int,
                      storedCellHeight: Int, scaled: (width: Int, height: Int), components: Int,
                      rows readRows: (UnsafeMutableRawPointer, Int, Int) throws(TesseraError) -> Int,
                      into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        // Centre crop to the cell's aspect ratio.
        var aspect = Double(storedCellWidth) / Double(storedCellHeight)
        if let cropAspect { aspect = orientation.swapsAxes ? 1 / cropAspect : cropAspect }
        var cropWidth = Double(scaled.width), cropHeight = Double(scaled.height)
        if cropWidth / cropHeight > aspect { cropWidth = cropHeight * aspect } else { cropHeight = cropWidth / aspect }
        let cropX = (Double(scaled.width) - cropWidth) / 2
        let cropY = (Double(scaled.height) - cropHeight) / 2

        var resampler = AreaResampler(inputWidth: scaled.width, cropX: cropX, cropY: cropY,
                                      cropWidth: cropWidth, cropHeight: cropHeight,
                                      outputWidth: storedCellWidth, outputHeight: storedCellHeight)
        let batch = 16
        let rowBytes = scaled.width * components
        let rows = UnsafeMutableRawPointer.allocate(byteCount: rowBytes * batch, alignment: 16)
        defer { rows.deallocate() }
        let rgbRow = UnsafeMutablePointer<UInt8>.allocate(capacity: scaled.width * 3)
        defer { rgbRow.deallocate() }
        let storedCell = UnsafeMutableRawBufferPointer.allocate(byteCount: cellBytes, alignment: 16)
        defer { storedCell.deallocate() }

        let emit: (Int, UnsafeBufferPointer<UInt8>) -> Void = { row, pixels in
            let start = row * storedCellWidth * 3
            UnsafeMutableRawBufferPointer(rebasing: storedCell[start..<(start + storedCellWidth * 3)])
                .copyMemory(from: UnsafeRawBufferPointer(pixels))
        }
        var inputRow = 0
        while inputRow < min(scaled.height, resampler.inputRowsNeeded) {
            let count = try readRows(rows, rowBytes, batch)
            if count == 0 { break }
            for i in 0..<count {
                var pixels = (rows + i * rowBytes).assumingMemoryBound(to: UInt8.self)
                if components == 4 {
                    convertCMYKRow(pixels, into: rgbRow, width: scaled.width, inverted: header.adobeInverted)
                    pixels = rgbRow
                }
                resampler.push(row: inputRow + i, pixels: UnsafePointer(pixels), emit: emit)
            }
            inputRow += count
        }
        if inputRow < min(scaled.height, resampler.inputRowsNeeded) {
            throw TesseraError.unreadablePhoto(path: path, reason: "image data ends after \(inputRow) of \(scaled.height) rows")
        }
        resampler.finish(emit: emit)
        orientation.apply(stored: UnsafeRawBufferPointer(storedCell), storedWidth: storedCellWidth,
                          storedHeight: storedCellHeight, upright: cell)
    }
}

/// CMYK (as libjpeg delivers CMYK and YCCK files) to RGB. Adobe's files store the inks
/// inverted (255 = no ink), which is what almost every CMYK JPEG in the wild is.
@inline(__always)
func convertCMYKRow(_ cmyk: UnsafeMutablePointer<UInt8>, into rgb: UnsafeMutablePointer<UInt8>, width: Int, inverted: Bool) {
    for x in 0..<width {
        var c = Int(cmyk[x * 4]), m = Int(cmyk[x * 4 + 1]), y = Int(cmyk[x * 4 + 2]), k = Int(cmyk[x * 4 + 3])
        if !inverted { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k }
        rgb[x * 3] = UInt8((c * k + 127) / 255)
        rgb[x * 3 + 1] = UInt8((m * k + 127) / 255)
        rgb[x * 3 + 2] = UInt8((y * k + 127) / 255)
    }
}
