// PNG.swift — PNG photos through libspng (tessera_png.c): the format's entry, its reader, and
// its rows into the cell path.
//
// PNG streams row by row: a row or two of the photo's width. An Adam7 interlaced PNG, or one
// whose rows are too wide for the decode pool, comes row by row (pass by pass) and is binned
// into the cell as it comes, or into the picture's own size when that is smaller than the cell:
// never a whole image.
import CTesseraShims

extension ImageFormat {
    public static let png = ImageFormat(rawValue: "PNG")
}

enum PNGFormat: PhotoFormat {
    static let format = ImageFormat.png
    static let suffixes = [".png"]

    static func sniff(_ bytes: [UInt8]) -> Sniffed? {
        starts(bytes, with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) ? .readable(format) : nil
    }

    static func header(of photo: PhotoFile, decoderMemoryBytes: Int) throws(TesseraError) -> PhotoHeader {
        try PNGReader(photo: photo).header
    }

    /// Rows stream, or are binned: nothing is held whole.
    static func wholeImageBytes(_ header: PhotoHeader, cellWidth: Int, cellHeight: Int) -> Int { 0 }

    static func decode(_ photo: PhotoFile, with decoder: CellDecoder,
                       into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        try decoder.decodePNG(PNGReader(photo: photo), into: cell)
    }
}

final class PNGReader {
    let photo: PhotoFile
    private let png: OpaquePointer
    let info: tessera_png_info

    init(photo: PhotoFile) throws(TesseraError) {
        self.photo = photo
        var info = tessera_png_info()
        var message = [CChar](repeating: 0, count: 200)
        guard let png = tessera_png_open(photo.file.rawValue, UInt64(max(0, photo.fileBytes)), &info, &message, 200) else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "PNG: \(cMessage(message))")
        }
        self.png = png
        self.info = info
        // Deflate cannot expand data more than 1032 times: a header that claims more pixels
        // than the file could hold is refused now, not after minutes of decompressing nothing.
        let bitsPerPixel = Int64(info.bit_depth) * Int64(Self.channels(colorType: Int(info.color_type)))
        let rawBytes = Int64(info.height) * ((Int64(info.width) * bitsPerPixel + 7) / 8 + 1)
        if rawBytes > 1032 * photo.fileBytes + (1 << 16) {
            throw TesseraError.unreadablePhoto(
                path: photo.path, reason: "its PNG header claims \(info.width) x \(info.height) px, more than its "
                    + "\(formatBytes(photo.fileBytes)) can hold: it is truncated or corrupt")
        }
        // The rule every format meets (PhotoLibrary.tooMuchPicture), of the picture's own
        // compressed bytes: a 583 KB bomb padded with 19 MB of zeros after its end passed.
        var size = PhotoHeader(width: Int(info.width), height: Int(info.height), colorModel: .rgb, isProgressive: false,
                               exifOrientation: 0, adobeInverted: false)
        size.format = .png
        if let problem = PhotoLibrary.tooMuchPicture(size, fileBytes: Int64(clamping: info.image_data_bytes)) {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: problem)
        }
    }

    deinit { tessera_png_close(png) }

    static func channels(colorType: Int) -> Int {
        switch colorType { case 2: 3; case 4: 2; case 6: 4; default: 1 }
    }

    var header: PhotoHeader {
        var header = PhotoHeader(width: Int(info.width), height: Int(info.height),
                                 colorModel: info.color_type == 0 || info.color_type == 4 ? .gray : .rgb,
                                 isProgressive: info.interlaced != 0, exifOrientation: Int(info.exif_orientation),
                                 adobeInverted: false)
        header.format = .png
        header.dateTaken = info.date_taken
        header.hasAlpha = info.has_alpha != 0
        header.colorTag = ColorProfiles.tag(icc: iccProfile, primaries: info.cicp_primaries, transfer: info.cicp_transfer)
        return header
    }

    var iccProfile: UnsafeRawBufferPointer {
        var length = 0
        return ColorProfiles.bytes(tessera_png_icc(png, &length), count: length)
    }

    /// A grey PNG is drawn as its grey levels, its profile (a grey one: PNG allows no other)
    /// unused, as a grey JPEG's and TIFF's are: applied as RGB, it was refused with a warning
    /// for every grey scan and screenshot that carried one.
    var conversion: ColorConversion {
        guard info.color_type != 0 && info.color_type != 4 else { return .none }
        return ColorProfiles.conversion(icc: iccProfile, primaries: info.cicp_primaries, transfer: info.cicp_transfer)
    }

    func start() throws(TesseraError) {
        guard tessera_png_start(png) == 0 else { throw failure() }
    }

    /// The next row as RGBA into `rgba` (`width` * 4 bytes): its row number and Adam7 pass, or
    /// nil at the end.
    func readRow(into rgba: UnsafeMutablePointer<UInt8>) throws(TesseraError) -> (row: Int, pass: Int)? {
        var row: UInt32 = 0
        var pass: Int32 = 0
        let status = tessera_png_read_row(png, rgba, Int(info.width) * 4, &row, &pass)
        if status < 0 { throw failure() }
        return status == 0 ? nil : (Int(row), Int(pass))
    }

    /// Reads what is left of the image after the rows drawn (the rest of its rows, then the
    /// chunks after it, which is when libspng checks the last CRC) and says what was wrong with
    /// the data: nil when nothing was. `rgba` is a row buffer as for `readRow`.
    func finish(rgba: UnsafeMutablePointer<UInt8>, cancellation: RenderCancellation?) throws(TesseraError) -> String? {
        var problems: [String] = []
        do throws(TesseraError) {
            var rows = 0
            while try readRow(into: rgba) != nil {
                rows += 1
                if rows & 63 == 0, cancellation?.isCancelled == true { throw .cancelled }
            }
            if tessera_png_finish(png) != 0 { problems.append(String(cString: tessera_png_message(png))) }
        } catch .cancelled {
            throw .cancelled
        } catch {
            problems.append("after the rows drawn, " + String(cString: tessera_png_message(png)))
        }
        var entries: UInt32 = 0
        let bad = tessera_png_bad_palette_pixels(png, &entries)
        if bad > 0 { problems.insert("\(bad) pixel(s) have a palette index past its \(entries) colours (drawn black)", at: 0) }
        return problems.isEmpty ? nil : "PNG: " + problems.joined(separator: "; ")
    }

    /// What libspng holds while it decodes rows: the scanline it inflates into and the one
    /// before it (filters refer to it), each the stored row's bytes, and its RGBA8 output row
    /// and working row. An upper bound: with it, a 1,048,576 x 64 grey PNG drawn into 100 px
    /// cells with a 32 MiB budget took the whole process to 18.4 MiB (release build).
    var decoderBytes: Int {
        let bitsPerPixel = Int(info.bit_depth) * Self.channels(colorType: Int(info.color_type))
        let scanline = (Int(info.width) * bitsPerPixel + 7) / 8 + 1
        return 3 * scanline + 2 * Int(info.width) * 4 + (256 << 10)
    }

    private func failure() -> TesseraError {
        .unreadablePhoto(path: photo.path, reason: "PNG: " + String(cString: tessera_png_message(png)))
    }
}

extension CellDecoder {
    func decodePNG(_ reader: PNGReader, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
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
        let streamedBytes = workingBytes(outputWidth: width, orientation: orientation) + width * 4 + reader.decoderBytes
        let binned = interlaced || streamedBytes > budget.poolBytes
        let bins = (width: min(stored.width, max(1, Int(region.width))), height: min(stored.height, max(1, Int(region.height))))
        let binnedBytes = reader.decoderBytes + width * 4 + bins.width * bins.height * 32 + 2 * cellBytes
            + (bins == stored ? 0 : workingBytes(outputWidth: bins.width, orientation: orientation))
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

    /// A PNG row by row (an Adam7 one pass by pass): every pixel of the crop added to the bin it
    /// falls in, `bins` across the crop (the stored cell, or fewer when the crop is smaller:
    /// each bin then holds at least one pixel, and the bins are resampled up to the cell).
    func drawBinned(reader: PNGReader, rgba: UnsafeMutablePointer<UInt8>,
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
        // 64-bit: one bin of a picture drawn far smaller than it is collects every pixel of its
        // share (a 17,000 px square into one 4 px cell: 18 million white pixels overflowed 32
        // bits, and the run stopped on Swift's overflow trap).
        var sums = [UInt64](repeating: 0, count: bins.width * bins.height * 3)
        var counts = [UInt64](repeating: 0, count: bins.width * bins.height)
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
                    sums[target * 3] += UInt64((Int(rgba[x * 4]) * a + br * na + 127) / 255)
                    sums[target * 3 + 1] += UInt64((Int(rgba[x * 4 + 1]) * a + bg * na + 127) / 255)
                    sums[target * 3 + 2] += UInt64((Int(rgba[x * 4 + 2]) * a + bb * na + 127) / 255)
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
}
