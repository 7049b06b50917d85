// WebP.swift — WebP photos through libwebp (tessera_webp.c): the format's entry, its reader,
// and its rows into the cell path.
//
// WebP is decoded by libwebp straight at about the size drawn (its scaler runs inside the
// decoder). The file is mapped read-only. A lossless WebP is decoded whole inside libwebp (4
// bytes a pixel: its backward references reach anywhere above), and a lossy one's alpha plane is
// decoded whole at full size (1 byte a pixel); both are admitted against the decode budget like
// a progressive JPEG's buffers, or refused when over what it allows one photo.
import CTesseraShims

extension ImageFormat {
    public static let webp = ImageFormat(rawValue: "WebP")
}

enum WebPFormat: PhotoFormat {
    static let format = ImageFormat.webp
    static let suffixes = [".webp"]

    static func sniff(_ bytes: [UInt8]) -> Sniffed? {
        starts(bytes, with: Array("RIFF".utf8)) && starts(bytes, with: Array("WEBP".utf8), at: 8) ? .readable(format) : nil
    }

    static func header(of photo: PhotoFile, decoderMemoryBytes: Int) throws(TesseraError) -> PhotoHeader {
        try WebPReader(photo: photo, cap: decoderMemoryBytes).header
    }

    /// libwebp's whole-image buffers (WebPReader.wholeImageBytes), whatever the cell.
    static func wholeImageBytes(_ header: PhotoHeader, cellWidth: Int, cellHeight: Int) -> Int {
        Int(clamping: header.wholeImageBytes)
    }

    static func decode(_ photo: PhotoFile, with decoder: CellDecoder,
                       into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        try decoder.decodeWebP(WebPReader(photo: photo, cap: decoder.budget.wholeImageLimitBytes), into: cell)
    }
}

final class WebPReader {
    let photo: PhotoFile
    private let webp: OpaquePointer
    let info: tessera_webp_info

    /// Opens `photo`; what its lossless stream needs is counted up to `cap` bytes (past that,
    /// no budget that cap comes from would admit it, and the count stops).
    init(photo: PhotoFile, cap: Int) throws(TesseraError) {
        self.photo = photo
        var info = tessera_webp_info()
        var message = [CChar](repeating: 0, count: 200)
        guard let webp = tessera_webp_open(photo.file.rawValue, UInt64(max(0, photo.fileBytes)), UInt64(max(0, cap)), &info,
                                           &message, 200) else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "WebP: \(cMessage(message))")
        }
        self.webp = webp
        self.info = info
    }

    deinit { tessera_webp_close(webp) }

    var header: PhotoHeader {
        var header = PhotoHeader(width: Int(info.width), height: Int(info.height), colorModel: .rgb, isProgressive: false,
                                 exifOrientation: Int(info.exif_orientation), adobeInverted: false)
        header.format = .webp
        header.dateTaken = info.date_taken
        header.hasAlpha = info.has_alpha != 0
        header.colorTag = ColorProfiles.tag(icc: iccProfile)
        header.wholeImageBytes = wholeImageBytes
        return header
    }

    /// libwebp's own whole-image buffers, plus the mapped file. A lossless picture is decoded
    /// whole, and its stream says what libwebp allocates beside: the transforms' images, the
    /// entropy image, and a table of about 12 KiB for each prefix-code group, of which a hostile
    /// stream can ask for 65,536 (a 295 KB file took 378 MiB under a 64 MiB budget). That is
    /// read from the stream before libwebp sees it (tessera_vp8l_measure), as is a lossy
    /// picture's alpha stream: its plane is decoded whole at full size whatever size it is
    /// scaled to, one byte a pixel, and as much again (or four times, for a stream libwebp
    /// cannot decode a byte at a time). An uncompressed alpha plane: 1 byte a pixel, and
    /// about an eighth more (measured). A lossy decode's rows of macroblocks cost about 64
    /// bytes a column.
    var wholeImageBytes: Int64 {
        let pixels = Int64(info.width) * Int64(info.height), lossless = Int64(clamping: info.lossless_bytes)
        if info.lossless != 0 { return lossless + photo.fileBytes }
        let alpha = info.has_alpha == 0 ? 0 : lossless > 0 ? lossless : pixels + pixels / 8
        return alpha + Int64(info.width) * 64 + photo.fileBytes
    }

    var iccProfile: UnsafeRawBufferPointer {
        var length = 0
        return ColorProfiles.bytes(tessera_webp_icc(webp, &length), count: length)
    }

    var conversion: ColorConversion { ColorProfiles.conversion(icc: iccProfile) }

    /// Decodes at `width` x `height` into `rgba` (rows `width` * 4 bytes).
    func decode(width: Int, height: Int, into rgba: UnsafeMutablePointer<UInt8>) throws(TesseraError) {
        var message = [CChar](repeating: 0, count: 200)
        guard tessera_webp_decode(webp, Int32(width), Int32(height), rgba, width * 4, &message, 200) == 0 else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "WebP: \(cMessage(message))")
        }
    }
}

extension CellDecoder {
    func decodeWebP(_ reader: WebPReader, into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
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
        let request = workingBytes(outputWidth: scaled.width, orientation: orientation) + output + Int(clamping: reader.wholeImageBytes)
        let groups = (reader.info.groups > 100 ? ", with tables for \(reader.info.groups) prefix-code groups" : "")
            + (reader.info.at_least != 0 ? ", counted only until it passed what the budget allows one photo" : "")
        let kind = reader.info.lossless != 0 ? "lossless WebP (libwebp decodes it whole\(groups))"
            : reader.info.has_alpha != 0 ? "WebP with alpha (libwebp decodes its alpha plane whole\(groups))" : "WebP"
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
}
