// CellDecoder.swift — one photo in, one upright, centre-cropped, cell-sized RGB image out: the
// tail every format shares.
//
// The photo's format (Formats/, asked through `Formats.reader(for:)`) reads its header and
// streams its rows, at the smallest scale its decoder offers that still covers the cell (a
// JPEG's DCT scale 1/8 to 8/8, one that covers it twice over: JPEGFormat.swift; libwebp's
// scaler; a HEIF thumbnail that covers the cell); `draw` takes them from there: through
// AreaResampler into the cell in the stored orientation, converted to sRGB, then
// OrientationTransform into the caller's buffer. Memory is a few rows of the photo's width, plus
// what the format must hold whole (a multi-scan JPEG's buffers, in a spill file when they do not
// fit; a HEIF's planes; a lossless WebP), admitted against the decode budget first.

/// How a photo was decoded.
public enum DecodeMethod: Equatable, Sendable {
    /// libjpeg, one scan, rows streamed (baseline files).
    case streamed
    /// A multi-scan file at 1/8 scale from its DC coefficients (DCScaledJPEGReader).
    case dcOnly(spilled: Bool)
    /// A multi-scan file through libjpeg with its coefficients in memory or in a spill file.
    case coefficients(spilled: Bool)
    /// A HEIF's embedded thumbnail (it covers the cell).
    case thumbnail
    /// A format decoded whole (a HEIF's primary image).
    case wholeImage
    /// A HEIF grid (what phones write) decoded one row of its tiles at a time.
    case tiles
}

/// What decoding one photo noticed that the user may want to hear about.
public struct DecodeNotes: Equatable, Sendable {
    /// libjpeg warnings (corrupt data it skipped over); the cell was still drawn.
    public var warningCount = 0
    public var firstWarning = ""
    public var method = DecodeMethod.streamed
    /// What is missing when part of the picture's data is (a truncated file drawn as far as it
    /// goes, the rest grey or transparent): drawn, with a warning, but a strict run fails on it.
    public var incomplete: String?
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

    /// What transparent pixels (PNG, WebP and HEIF alpha) are drawn over.
    public let background: RGB

    public init(cellWidth: Int, cellHeight: Int, budget: DecodeBudget, cropAspect: Double? = nil,
                cancellation: RenderCancellation? = nil, background: RGB = RenderSettings().background) {
        precondition(cellWidth > 0 && cellHeight > 0)
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
        self.budget = budget
        self.cropAspect = cropAspect
        self.cancellation = cancellation
        self.background = background
    }

    /// A decoder with a budget of its own of `decodePoolBytes`, spilling to the default
    /// temporary directory.
    public init(cellWidth: Int, cellHeight: Int, decodePoolBytes: Int, cropAspect: Double? = nil) {
        self.init(cellWidth: cellWidth, cellHeight: cellHeight,
                  budget: DecodeBudget(poolBytes: decodePoolBytes, spillDirectory: defaultTemporaryDirectory()),
                  cropAspect: cropAspect)
    }

    public var cellBytes: Int { cellWidth * cellHeight * 3 }

    /// The same decoder drawing `width` x `height` cells (a layout of frames draws a photo at
    /// the size of each cell that shows it).
    public func sized(width: Int, height: Int) -> CellDecoder {
        CellDecoder(cellWidth: width, cellHeight: height, budget: budget, cropAspect: cropAspect, cancellation: cancellation,
                    background: background)
    }

    /// What one decode holds besides whole-image buffers, for output rows `outputWidth` px wide:
    /// libjpeg's row buffers (a few MCU rows of samples), ours (16 rows, the resampler's
    /// accumulators, and the cell in its stored orientation when it is not upright: `draw`
    /// resamples an upright photo straight into the cell it is given) and the file buffers. (A
    /// mosaic's target is one cell of 30 MiB: counting it twice refused a 2 x 2 PNG target.)
    func workingBytes(outputWidth: Int, orientation: OrientationTransform) -> Int {
        outputWidth * 3 * 48 + (orientation == .identity ? 0 : cellBytes) + (384 << 10)
    }

    /// Decodes `path` into `cell` (`cellBytes` long), upright and centre-cropped to the cell.
    ///
    /// Single-scan (baseline) files stream through libjpeg at the smallest DCT scale (1/8, 2/8,
    /// 4/8 or 8/8) that covers the cell twice over (JPEGFormat.swift). Multi-scan files
    /// (progressive, or components in separate scans) drawn at 1/8 are decoded from their DC coefficients alone (DCScaledJPEGReader); at larger scales,
    /// or when that decoder declines the file, libjpeg decodes them with its coefficients in
    /// memory when they fit half the budget's pool, else in a spill file. Every decode is
    /// admitted against the budget first.
    public func decode(path: String, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        try decode(file: PathBytes(path), into: cell)
    }

    /// A picture that must be whole (a mosaic's target, a viewer's preview of a photo): one
    /// whose data ends early is refused, as unreadable, instead of drawn in part.
    public func decodeWhole(file: PathBytes, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let notes = try decode(file: file, into: cell)
        if let missing = notes.incomplete { throw .unreadablePhoto(path: file.display, reason: missing) }
        return notes
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
        let photo = try PhotoFile.open(file)
        let sniffed = try photo.sniff()
        if case .readable(let format) = sniffed { photo.readAhead(Formats.reader(for: format).readsAhead(decoding: true)) }
        else { photo.readAhead(true) }
        switch sniffed {
        case .readable(let format): return try Formats.reader(for: format).decode(photo, with: self, into: cell)
        case .unreadable(let name):
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "\(name), which Tessera does not read")
        case .video: throw TesseraError.unreadablePhoto(path: photo.path, reason: "a video, not a photo")
        case .ownOutput, .notAnImage:
            // Anything else is handed to libjpeg, whose message says what it found.
            return try JPEGFormat.decode(photo, with: self, into: cell)
        }
    }

    /// The cell in the frame the photo is stored in: turned back when it is stored sideways.
    func storedCell(_ orientation: OrientationTransform) -> (width: Int, height: Int) {
        orientation.swapsAxes ? (cellHeight, cellWidth) : (cellWidth, cellHeight)
    }

    /// The aspect ratio (width / height) of the centre crop, in the stored frame.
    func cropAspect(_ orientation: OrientationTransform) -> Double {
        if let cropAspect { return orientation.swapsAxes ? 1 / cropAspect : cropAspect }
        let stored = storedCell(orientation)
        return Double(stored.width) / Double(stored.height)
    }

    /// The centre crop of a `width` x `height` picture (stored frame) to the cell's aspect ratio.
    func crop(width: Int, height: Int, orientation: OrientationTransform)
        -> (x: Double, y: Double, width: Double, height: Double) {
        let aspect = cropAspect(orientation)
        var cropWidth = Double(width), cropHeight = Double(height)
        if cropWidth / cropHeight > aspect { cropWidth = cropHeight * aspect } else { cropHeight = cropWidth / aspect }
        return ((Double(width) - cropWidth) / 2, (Double(height) - cropHeight) / 2, cropWidth, cropHeight)
    }

    /// Notes for a decode whose colour profile could not be used.
    func notes(_ conversion: ColorConversion, method: DecodeMethod = .streamed) -> DecodeNotes {
        guard let problem = conversion.problem else { return DecodeNotes(method: method) }
        let drawn = conversion.fromCMYK ? "its inks converted by formula" : "drawn as if it were sRGB"
        return DecodeNotes(warningCount: 1, firstWarning: "\(problem); \(drawn)", method: method)
    }

    /// The rows of an RGBA image held in memory, laid over the background, as `draw` reads them.
    func rows(ofRGBA image: UnsafePointer<UInt8>, width: Int, height: Int)
        -> (UnsafeMutableRawPointer, Int, Int) throws(TesseraError) -> Int {
        var next = 0
        return { buffer, stride, count throws(TesseraError) in
            let rows = min(count, height - next)
            for i in 0..<rows {
                compositeRGBA(image + (next + i) * width * 4, into: (buffer + i * stride).assumingMemoryBound(to: UInt8.self),
                              width: width, background: self.background)
            }
            next += rows
            return rows
        }
    }

    /// Streams `scaled` rows from `rows` through the resampler into an upright, centre-cropped
    /// cell, converted to sRGB.
    func draw(path: String, orientation: OrientationTransform, scaled: (width: Int, height: Int), components: Int,
                      adobeInverted: Bool, conversion: ColorConversion,
                      rows readRows: (UnsafeMutableRawPointer, Int, Int) throws(TesseraError) -> Int,
                      into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        let (storedCellWidth, storedCellHeight) = storedCell(orientation)
        let region = crop(width: scaled.width, height: scaled.height, orientation: orientation)
        // A decoder may give less than its header said (a damaged HEIF decoded to 0 x 0): a
        // photo that cannot be drawn, not a failed precondition.
        guard scaled.width > 0, scaled.height > 0, region.width > 0, region.height > 0, storedCellWidth > 0, storedCellHeight > 0 else {
            throw TesseraError.unreadablePhoto(path: path, reason: "it decodes to an empty image (\(scaled.width) x \(scaled.height) px)")
        }
        var resampler = AreaResampler(inputWidth: scaled.width, cropX: region.x, cropY: region.y,
                                      cropWidth: region.width, cropHeight: region.height,
                                      outputWidth: storedCellWidth, outputHeight: storedCellHeight)
        let batch = 16
        let rowBytes = scaled.width * components
        let rows = UnsafeMutableRawPointer.allocate(byteCount: rowBytes * batch, alignment: 16)
        defer { rows.deallocate() }
        let rgbRow = UnsafeMutablePointer<UInt8>.allocate(capacity: scaled.width * 3)
        defer { rgbRow.deallocate() }
        // An upright photo is resampled straight into the cell. Any other goes through a stored
        // cell, turned into `cell` at the end: allocated for each photo, and for a collage's
        // large cells (823 KiB) given back to the system each time (glibc trims a thread's heap
        // past 128 KiB free), so that each photo faulted it in again: a million page faults,
        // 2 s of system time, over 10,000 photos before upright ones skipped it.
        let upright = orientation == .identity
        let storedCell = upright ? UnsafeMutableRawBufferPointer(rebasing: cell[0..<cellBytes])
            : UnsafeMutableRawBufferPointer.allocate(byteCount: cellBytes, alignment: 16)
        defer { if !upright { storedCell.deallocate() } }

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
                    // Through the photo's CMYK profile when it has one that converts, else by formula.
                    if !conversion.applyCMYK(pixels, into: rgbRow, pixels: scaled.width) {
                        convertCMYKRow(pixels, into: rgbRow, width: scaled.width, inverted: adobeInverted)
                    }
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
        conversion.apply(storedCell.baseAddress!, pixels: storedCellWidth * storedCellHeight)
        if !upright {
            orientation.apply(stored: UnsafeRawBufferPointer(storedCell), storedWidth: storedCellWidth,
                              storedHeight: storedCellHeight, upright: cell)
        }
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
