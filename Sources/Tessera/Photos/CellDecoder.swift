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
    /// A HEIF's embedded thumbnail (it covers the cell).
    case thumbnail
    /// A format decoded whole (a HEIF's primary image).
    case wholeImage
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
        let photo = try PhotoFile.open(file)
        switch try photo.sniff() {
        case .readable(.png): return try decodePNG(PNGReader(photo: photo), into: cell)
        case .readable(.webp): return try decodeWebP(WebPReader(photo: photo), into: cell)
        case .readable(.heif): return try decodeHEIF(HEIFReader(photo: photo), into: cell)
        case .unreadable(let name):
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "\(name), which Tessera does not read")
        case .readable(.jpeg), .ownOutput, .notAnImage:
            // Anything else is handed to libjpeg, whose message says what it found.
            return try decodeJPEG(photo, into: cell)
        }
    }

    /// The cell in the frame the photo is stored in: turned back when it is stored sideways.
    private func storedCell(_ orientation: OrientationTransform) -> (width: Int, height: Int) {
        orientation.swapsAxes ? (cellHeight, cellWidth) : (cellWidth, cellHeight)
    }

    /// The centre crop of a `width` x `height` picture (stored frame) to the cell's aspect ratio.
    private func crop(width: Int, height: Int, orientation: OrientationTransform)
        -> (x: Double, y: Double, width: Double, height: Double) {
        let stored = storedCell(orientation)
        var aspect = Double(stored.width) / Double(stored.height)
        if let cropAspect { aspect = orientation.swapsAxes ? 1 / cropAspect : cropAspect }
        var cropWidth = Double(width), cropHeight = Double(height)
        if cropWidth / cropHeight > aspect { cropWidth = cropHeight * aspect } else { cropHeight = cropWidth / aspect }
        return ((Double(width) - cropWidth) / 2, (Double(height) - cropHeight) / 2, cropWidth, cropHeight)
    }

    /// Notes for a decode whose colour profile could not be used.
    private func notes(_ conversion: ColorConversion, method: DecodeMethod = .streamed) -> DecodeNotes {
        guard let problem = conversion.problem else { return DecodeNotes(method: method) }
        return DecodeNotes(warningCount: 1, firstWarning: "\(problem); drawn as if it were sRGB", method: method)
    }

    private func decodeJPEG(_ photo: PhotoFile, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let path = photo.path
        let reader = try ScaledJPEGReader(photo: photo, decoderMemoryBytes: budget.poolBytes)
        if let cancellation { reader.setCancelFlag(cancellation.flag) }
        let header = try reader.readHeader()
        let conversion = header.colorModel == .rgb ? ColorProfiles.conversion(icc: reader.iccProfile) : .none
        defer { conversion.release() }
        let orientation = OrientationTransform(exifOrientation: header.exifOrientation)
        let stored = storedCell(orientation)

        // Smallest DCT scale whose output still covers the cell; full size (8/8) if none does,
        // and the resampler then enlarges.
        var scaled = (width: header.width, height: header.height)
        var numerator = 8
        for candidate in 1...8 {
            scaled = try reader.scaledSize(numerator: candidate)
            numerator = candidate
            if scaled.width >= stored.width && scaled.height >= stored.height { break }
        }
        let working = workingBytes(outputWidth: scaled.width)
        let inMemoryShare = budget.poolBytes / 2
        let blockRows = max(1, (header.height + 7) / 8)
        let draw = { (rows: (UnsafeMutableRawPointer, Int, Int) throws(TesseraError) -> Int, components: Int,
                      size: (width: Int, height: Int)) throws(TesseraError) in
            try self.draw(path: path, orientation: orientation, scaled: size, components: components,
                          adobeInverted: header.adobeInverted, conversion: conversion, rows: rows, into: cell)
        }

        if header.isProgressive && numerator == 1 && header.colorModel != .cmyk && !header.isArithmetic {
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
                return notes(conversion, method: .dcOnly(spilled: dc.spilled))
            }
            if let done { return done }
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
            var result = notes(conversion, method: header.isProgressive ? .coefficients(spilled: reader.coefficientsSpilled) : .streamed)
            if warnings.count > 0 {
                result.warningCount += warnings.count
                result.firstWarning = warnings.first
            }
            return result
        }
    }

    private func decodePNG(_ reader: PNGReader, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let width = Int(reader.info.width), height = Int(reader.info.height)
        let orientation = OrientationTransform(exifOrientation: Int(reader.info.exif_orientation))
        let conversion = reader.conversion
        defer { conversion.release() }
        let stored = storedCell(orientation)
        let region = crop(width: width, height: height, orientation: orientation)
        let interlaced = reader.info.interlaced != 0
        // Rows streamed through the resampler (16 at a time), unless the picture is interlaced
        // (its rows come pass by pass) or its rows are too wide for that to fit the pool: those
        // are binned as they come into the cell, or into the crop's own size when that is
        // smaller than the cell (then resampled up), so what is held is a row and the bins.
        let streamedBytes = workingBytes(outputWidth: width) + width * 4 + reader.decoderBytes
        let binned = interlaced || streamedBytes > budget.poolBytes
        let bins = (width: min(stored.width, max(1, Int(region.width))), height: min(stored.height, max(1, Int(region.height))))
        let binnedBytes = reader.decoderBytes + width * 4 + bins.width * bins.height * 16 + 2 * cellBytes
            + (bins == stored ? 0 : workingBytes(outputWidth: bins.width))
        let request = binned ? binnedBytes : streamedBytes
        try budget.check(oneDecodeBytes: request, photo: reader.photo.path,
                         what: "decoding this \(width) x \(height) PNG\(interlaced ? " (Adam7)" : "") row by row")
        return try budget.admitted(bytes: request) { () throws(TesseraError) -> DecodeNotes in
            try reader.start()
            let rgba = UnsafeMutablePointer<UInt8>.allocate(capacity: width * 4)
            defer { rgba.deallocate() }
            if binned {
                try drawBinned(reader: reader, rgba: rgba, region: region, bins: bins, orientation: orientation,
                               conversion: conversion, into: cell)
            } else {
                try draw(path: reader.photo.path, orientation: orientation, scaled: (width, height), components: 3,
                         adobeInverted: false, conversion: conversion, rows: { buffer, stride, count throws(TesseraError) in
                    var rows = 0
                    while rows < count, try reader.readRow(into: rgba) != nil {
                        compositeRGBA(rgba, into: (buffer + rows * stride).assumingMemoryBound(to: UInt8.self),
                                      width: width, background: background)
                        rows += 1
                    }
                    if cancellation?.isCancelled == true { throw .cancelled }
                    return rows
                }, into: cell)
            }
            var result = notes(conversion)
            if let problem = try reader.finish(rgba: rgba, cancellation: cancellation) {
                result.warningCount += 1
                result.firstWarning = result.firstWarning.isEmpty ? problem + "; drawn as read" : result.firstWarning
            }
            return result
        }
    }

    /// The rows of an RGBA image held in memory, laid over the background, as `draw` reads them.
    private func rows(ofRGBA image: UnsafePointer<UInt8>, width: Int, height: Int)
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

    /// A PNG row by row (an Adam7 one pass by pass): every pixel of the crop added to the bin it
    /// falls in, `bins` across the crop (the stored cell, or fewer when the crop is smaller:
    /// each bin then holds at least one pixel, and the bins are resampled up to the cell).
    private func drawBinned(reader: PNGReader, rgba: UnsafeMutablePointer<UInt8>,
                            region: (x: Double, y: Double, width: Double, height: Double), bins: (width: Int, height: Int),
                            orientation: OrientationTransform, conversion: ColorConversion,
                            into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        let width = Int(reader.info.width), height = Int(reader.info.height)
        let stored = storedCell(orientation)
        let interlaced = reader.info.interlaced != 0
        func bin(_ i: Int, start: Double, length: Double, count: Int) -> Int {
            let position = (Double(i) + 0.5 - start) / length
            return position < 0 || position >= 1 ? -1 : min(count - 1, Int(position * Double(count)))
        }
        // The crop's columns and the bin each falls in; computed per pixel rather than kept in
        // an array, which for a 1,048,576 px row would be 4 MiB more.
        let firstColumn = max(0, Int((region.x - 0.5).rounded(.up)))
        let columnScale = Double(bins.width) / region.width
        var sums = [UInt32](repeating: 0, count: bins.width * bins.height * 3)
        var counts = [UInt32](repeating: 0, count: bins.width * bins.height)
        let passColumns = [(0, 8), (4, 8), (0, 4), (2, 4), (0, 2), (1, 2), (0, 1)]
        let br = Int(background.red), bg = Int(background.green), bb = Int(background.blue)
        var rowsRead = 0
        while let (row, pass) = try reader.readRow(into: rgba) {
            rowsRead += 1
            if rowsRead & 63 == 0, cancellation?.isCancelled == true { throw .cancelled }
            guard row < height, pass >= 0, pass < 7 else { continue }
            let outRow = bin(row, start: region.y, length: region.height, count: bins.height)
            if outRow < 0 { continue }
            let (first, step) = interlaced ? passColumns[pass] : (0, 1)
            var x = first
            if x < firstColumn { x += (firstColumn - x + step - 1) / step * step }
            while x < width {
                let position = (Double(x) + 0.5 - region.x) * columnScale
                if position >= Double(bins.width) { break }
                let outColumn = position < 0 ? -1 : Int(position)
                if outColumn >= 0 {
                    let target = outRow * bins.width + outColumn
                    let a = Int(rgba[x * 4 + 3]), na = 255 - a
                    counts[target] += 1
                    sums[target * 3] += UInt32((Int(rgba[x * 4]) * a + br * na + 127) / 255)
                    sums[target * 3 + 1] += UInt32((Int(rgba[x * 4 + 1]) * a + bg * na + 127) / 255)
                    sums[target * 3 + 2] += UInt32((Int(rgba[x * 4 + 2]) * a + bb * na + 127) / 255)
                }
                x += step
            }
        }
        let binBytes = bins.width * bins.height * 3
        let averaged = UnsafeMutableRawBufferPointer.allocate(byteCount: max(binBytes, cellBytes), alignment: 16)
        defer { averaged.deallocate() }
        for i in 0..<(bins.width * bins.height) {
            let n = max(1, counts[i])
            for c in 0..<3 { averaged[i * 3 + c] = UInt8((sums[i * 3 + c] + n / 2) / n) }
        }
        if bins == stored {
            conversion.apply(averaged.baseAddress!, pixels: stored.width * stored.height)
            orientation.apply(stored: UnsafeRawBufferPointer(averaged), storedWidth: stored.width,
                              storedHeight: stored.height, upright: cell)
            return
        }
        // Fewer bins than the cell: the bins are the picture (the crop, at its own size),
        // resampled up like any picture smaller than its cell.
        var next = 0
        try draw(path: reader.photo.path, orientation: orientation, scaled: bins, components: 3, adobeInverted: false,
                 conversion: conversion, rows: { buffer, stride, count throws(TesseraError) in
            let made = min(count, bins.height - next)
            for i in 0..<made {
                (buffer + i * stride).copyMemory(from: averaged.baseAddress! + (next + i) * bins.width * 3, byteCount: bins.width * 3)
            }
            next += made
            return made
        }, into: cell)
    }

    private func decodeWebP(_ reader: WebPReader, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let width = Int(reader.info.width), height = Int(reader.info.height)
        let orientation = OrientationTransform(exifOrientation: Int(reader.info.exif_orientation))
        let conversion = reader.conversion
        defer { conversion.release() }
        let stored = storedCell(orientation)
        // libwebp scales as it decodes: to twice the cell (the resampler makes the last step by
        // area), or full size when the picture is smaller than that.
        let region = crop(width: width, height: height, orientation: orientation)
        let factor = min(1, 2 * Double(stored.width) / region.width)
        let scaled = (width: max(1, min(width, Int((Double(width) * factor).rounded(.up)))),
                      height: max(1, min(height, Int((Double(height) * factor).rounded(.up)))))
        let output = scaled.width * scaled.height * 4
        let request = workingBytes(outputWidth: scaled.width) + output + Int(clamping: reader.wholeImageBytes)
        let kind = reader.info.lossless != 0 ? "lossless WebP (libwebp decodes it whole)"
            : reader.info.has_alpha != 0 ? "WebP with alpha (libwebp decodes its alpha plane whole)" : "WebP"
        try budget.check(oneDecodeBytes: request, photo: reader.photo.path, what: "decoding this \(width) x \(height) \(kind)")
        return try budget.admitted(bytes: request) { () throws(TesseraError) -> DecodeNotes in
            let rgba = UnsafeMutablePointer<UInt8>.allocate(capacity: output)
            defer { rgba.deallocate() }
            try reader.decode(width: scaled.width, height: scaled.height, into: rgba)
            if cancellation?.isCancelled == true { throw .cancelled }
            try draw(path: reader.photo.path, orientation: orientation, scaled: scaled, components: 3, adobeInverted: false,
                     conversion: conversion, rows: rows(ofRGBA: rgba, width: scaled.width, height: scaled.height), into: cell)
            return notes(conversion)
        }
    }

    private func decodeHEIF(_ reader: HEIFReader, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let orientation = OrientationTransform(exifOrientation: reader.orientation)
        let conversion = reader.conversion
        defer { conversion.release() }
        let stored = storedCell(orientation)
        // The thumbnail when its crop covers the cell: a few hundred pixels instead of millions.
        let thumbnail = (width: Int(reader.info.thumbnail_width), height: Int(reader.info.thumbnail_height))
        var useThumbnail = false
        if thumbnail.width > 0 && thumbnail.height > 0 {
            let region = crop(width: thumbnail.width, height: thumbnail.height, orientation: orientation)
            useThumbnail = region.width >= Double(stored.width) - 1e-9 && region.height >= Double(stored.height) - 1e-9
        }
        let bits = Int(reader.info.luma_bits)
        let fullBytes = HEIFReader.decodeBytes(reader.info.decode, bits: bits)
        var warning: String?
        if !useThumbnail && fullBytes > Int64(budget.wholeImageLimitBytes) {
            let needed = formatBytes(DecodeBudget.budgetToDraw(bytes: fullBytes))
            if thumbnail.width > 0 {
                useThumbnail = true
                warning = "drawn from its \(thumbnail.width) x \(thumbnail.height) thumbnail: decoding the \(reader.info.width) x "
                    + "\(reader.info.height) image takes about \(formatBytes(fullBytes)), more than --max-memory leaves for it "
                    + "(\(needed) or more would draw it sharp)"
            } else {
                throw TesseraError.unreadablePhoto(
                    path: reader.photo.path, reason: "decoding this \(reader.info.width) x \(reader.info.height) HEIF "
                        + "(\(reader.info.is_grid != 0 ? "tiles" : "one picture, not tiled"), no thumbnail) takes about \(formatBytes(fullBytes)), more than --max-memory leaves for it; "
                        + "give --max-memory \(needed) or more to draw it")
            }
        }
        let size = useThumbnail ? thumbnail : (Int(reader.info.width), Int(reader.info.height))
        let whole = useThumbnail ? HEIFReader.decodeBytes(reader.info.thumbnail_decode, bits: bits) : fullBytes
        let request = workingBytes(outputWidth: size.0) + Int(clamping: whole)
        return try budget.admitted(bytes: request) { () throws(TesseraError) -> DecodeNotes in
            let planes = try reader.decode(thumbnail: useThumbnail)
            defer { reader.release() }
            if cancellation?.isCancelled == true { throw .cancelled }
            let rows = PlanarRows(planes: planes, background: background)
            let width = Int(planes.width), height = Int(planes.height)
            var next = 0
            try draw(path: reader.photo.path, orientation: orientation, scaled: (width, height), components: 3,
                     adobeInverted: false, conversion: conversion, rows: { buffer, stride, count throws(TesseraError) in
                let made = min(count, height - next)
                for i in 0..<made {
                    rows.row(next + i, into: (buffer + i * stride).assumingMemoryBound(to: UInt8.self))
                }
                next += made
                return made
            }, into: cell)
            var result = notes(conversion, method: useThumbnail ? .thumbnail : .wholeImage)
            if let warning {
                result.warningCount += 1
                if result.firstWarning.isEmpty { result.firstWarning = warning }
            }
            return result
        }
    }

    /// Streams `scaled` rows from `rows` through the resampler into an upright, centre-cropped
    /// cell, converted to sRGB.
    private func draw(path: String, orientation: OrientationTransform, scaled: (width: Int, height: Int), components: Int,
                      adobeInverted: Bool, conversion: ColorConversion,
                      rows readRows: (UnsafeMutableRawPointer, Int, Int) throws(TesseraError) -> Int,
                      into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) {
        let (storedCellWidth, storedCellHeight) = storedCell(orientation)
        let region = crop(width: scaled.width, height: scaled.height, orientation: orientation)
        var resampler = AreaResampler(inputWidth: scaled.width, cropX: region.x, cropY: region.y,
                                      cropWidth: region.width, cropHeight: region.height,
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
                    convertCMYKRow(pixels, into: rgbRow, width: scaled.width, inverted: adobeInverted)
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
