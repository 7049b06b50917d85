// TileDecoder.swift — one photo in, one upright, centre-cropped cell-sized RGB tile out.
//
// Pipeline per photo: header (with EXIF orientation) → the smallest libjpeg DCT scale M/8 whose
// output still covers the cell → rows streamed through AreaResampler into a tile in the stored
// orientation → OrientationTransform into the caller's buffer. Memory is proportional to the
// photo's width (a few rows at a time), not its area.

/// What decoding one photo noticed that the user may want to hear about.
public struct DecodeNotes: Equatable, Sendable {
    /// libjpeg warnings (corrupt data it skipped over); the tile was still produced.
    public var warningCount = 0
    public var firstWarning = ""
}

public struct TileDecoder: Sendable {
    public let cellWidth: Int
    public let cellHeight: Int
    /// Cap on libjpeg's whole-image buffers (progressive files); see ScaledJPEGReader.
    public let maxDecodeMemoryBytes: Int

    /// The upright aspect ratio (width / height) of the centre crop; nil: the cell's own. A
    /// mosaic's analysis uses a k x k tile of a cell-shaped crop.
    public let cropAspect: Double?

    public init(cellWidth: Int, cellHeight: Int, maxDecodeMemoryBytes: Int, cropAspect: Double? = nil) {
        precondition(cellWidth > 0 && cellHeight > 0)
        self.cellWidth = cellWidth
        self.cellHeight = cellHeight
        self.maxDecodeMemoryBytes = maxDecodeMemoryBytes
        self.cropAspect = cropAspect
    }

    public var tileBytes: Int { cellWidth * cellHeight * 3 }

    /// Decodes `path` into `tile` (`tileBytes` long), upright and centre-cropped to the cell.
    public func decode(path: String, into tile: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        precondition(tile.count >= tileBytes)
        let reader = try ScaledJPEGReader(path: path, maxMemoryBytes: maxDecodeMemoryBytes)
        let header = try reader.readHeader()
        let orientation = OrientationTransform(exifOrientation: header.exifOrientation)
        // The tile in the stored frame: the cell, turned back when the photo is stored sideways.
        let storedTileWidth = orientation.swapsAxes ? cellHeight : cellWidth
        let storedTileHeight = orientation.swapsAxes ? cellWidth : cellHeight

        // Smallest DCT scale whose output still covers the cell; full size (8/8) if none does,
        // and the resampler then enlarges.
        var scaled = (width: header.width, height: header.height)
        for numerator in 1...8 {
            scaled = try reader.scaledSize(numerator: numerator)
            if scaled.width >= storedTileWidth && scaled.height >= storedTileHeight { break }
        }
        let output = try reader.start()
        scaled = output

        // Centre crop to the cell's aspect ratio.
        var aspect = Double(storedTileWidth) / Double(storedTileHeight)
        if let cropAspect { aspect = orientation.swapsAxes ? 1 / cropAspect : cropAspect }
        var cropWidth = Double(scaled.width), cropHeight = Double(scaled.height)
        if cropWidth / cropHeight > aspect { cropWidth = cropHeight * aspect } else { cropHeight = cropWidth / aspect }
        let cropX = (Double(scaled.width) - cropWidth) / 2
        let cropY = (Double(scaled.height) - cropHeight) / 2

        var resampler = AreaResampler(inputWidth: scaled.width, cropX: cropX, cropY: cropY,
                                      cropWidth: cropWidth, cropHeight: cropHeight,
                                      outputWidth: storedTileWidth, outputHeight: storedTileHeight)
        let components = reader.outputComponents
        let batch = 16
        let rowBytes = scaled.width * components
        let rows = UnsafeMutableRawPointer.allocate(byteCount: rowBytes * batch, alignment: 16)
        defer { rows.deallocate() }
        let rgbRow = UnsafeMutablePointer<UInt8>.allocate(capacity: scaled.width * 3)
        defer { rgbRow.deallocate() }
        let storedTile = UnsafeMutableRawBufferPointer.allocate(byteCount: tileBytes, alignment: 16)
        defer { storedTile.deallocate() }

        let emit: (Int, UnsafeBufferPointer<UInt8>) -> Void = { row, pixels in
            let start = row * storedTileWidth * 3
            UnsafeMutableRawBufferPointer(rebasing: storedTile[start..<(start + storedTileWidth * 3)])
                .copyMemory(from: UnsafeRawBufferPointer(pixels))
        }
        var inputRow = 0
        while inputRow < min(scaled.height, resampler.inputRowsNeeded) {
            let count = try reader.readRows(into: rows, stride: rowBytes, maxRows: batch)
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
        orientation.apply(stored: UnsafeRawBufferPointer(storedTile), storedWidth: storedTileWidth,
                          storedHeight: storedTileHeight, upright: tile)
        let warnings = reader.warnings
        return DecodeNotes(warningCount: warnings.count, firstWarning: warnings.count > 0 ? warnings.first : "")
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
