// JPEGFile.swift — whole-image JPEG reading and writing, for the tests and the benchmark (not
// shipped in the library: the TesseraTestSupport target).
//
// The renderer never uses these for its canvas: they hold a whole image in memory and are meant
// for small pictures (generated sample photos, decoding a test's output) and for the benchmark's
// encode-only floor, which pushes rows from one in-memory band through the same encoder.
import Tessera

/// An RGB image held in memory, rows top to bottom, 3 bytes a pixel.
public struct RGBImage: Equatable, Sendable {
    public let width: Int
    public let height: Int
    public var pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(pixels.count == width * height * 3)
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    public init(width: Int, height: Int, fill: RGB = RGB(red: 0, green: 0, blue: 0)) {
        self.width = width
        self.height = height
        pixels = [UInt8](repeating: 0, count: width * height * 3)
        for i in 0..<(width * height) {
            pixels[i * 3] = fill.red
            pixels[i * 3 + 1] = fill.green
            pixels[i * 3 + 2] = fill.blue
        }
    }

    public func pixel(x: Int, y: Int) -> RGB {
        let i = (y * width + x) * 3
        return RGB(red: pixels[i], green: pixels[i + 1], blue: pixels[i + 2])
    }
}

public enum JPEGFile {
    /// Encodes `image` as a baseline JPEG at `path` (written atomically).
    public static func write(_ image: RGBImage, to path: String, quality: Int = 90,
                             subsampling: ChromaSubsampling = .s420) throws(TesseraError) {
        let writer = try JPEGFileWriter(path: path, width: image.width, height: image.height, quality: quality, subsampling: subsampling)
        try image.pixels.withUnsafeBytes { bytes in
            Result { () throws(TesseraError) in
                try writer.write(rows: bytes.baseAddress!, stride: image.width * 3, count: image.height)
            }
        }.get()
        try writer.finish()
    }

    /// Encodes a `band.width` x `height` image whose rows repeat `band`'s rows cyclically, to
    /// `path` — the same encoder, settings and output path as a render, with no cell work: the
    /// benchmark's floor. Returns the bytes written.
    public static func encodeRepeating(band: RGBImage, height: Int, to path: String, quality: Int,
                                       subsampling: ChromaSubsampling) throws(TesseraError) -> Int64 {
        let writer = try JPEGFileWriter(path: path, width: band.width, height: height, quality: quality, subsampling: subsampling)
        try band.pixels.withUnsafeBytes { bytes in
            Result { () throws(TesseraError) in
                var row = 0
                while row < height {
                    let count = min(band.height, height - row)
                    try writer.write(rows: bytes.baseAddress!, stride: band.width * 3, count: count)
                    row += count
                }
            }
        }.get()
        return try writer.finish()
    }

    /// Decodes the whole of `path` to RGB at full size (no EXIF orientation applied).
    /// Refuses images over `maxPixels`.
    public static func read(_ path: String, maxPixels: Int = 200_000_000) throws(TesseraError) -> RGBImage {
        let reader = try JPEGFileReader(path: path)
        guard reader.width * reader.height <= maxPixels else {
            throw .unreadablePhoto(path: path, reason: "\(reader.width) x \(reader.height) px is more than \(maxPixels) pixels")
        }
        var pixels = [UInt8](repeating: 0, count: reader.width * reader.height * 3)
        var row = 0
        while row < reader.height {
            let count = try pixels.withUnsafeMutableBytes { bytes in
                Result { () throws(TesseraError) in
                    try reader.readRows(into: bytes.baseAddress! + row * reader.width * 3, stride: reader.width * 3, maxRows: 16)
                }
            }.get()
            if count == 0 { throw .unreadablePhoto(path: path, reason: "image data ends after \(row) rows") }
            row += count
        }
        return RGBImage(width: reader.width, height: reader.height, pixels: pixels)
    }
}

extension JPEGFile {
    /// `jpeg` (a baseline JPEG's bytes) with its scan pointing at Huffman tables it never
    /// defines: the header reads, so the folder's scan keeps it, and libjpeg refuses it when its
    /// data starts to be decoded ("Huffman table 0x03 was not defined"). The test's photo that
    /// fails while it is drawn (a truncated file no longer does: it is drawn as far as it goes).
    public static func failingInItsScan(_ jpeg: [UInt8]) -> [UInt8] {
        var bytes = jpeg
        guard let sos = (2..<(bytes.count - 5)).first(where: { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA }) else {
            preconditionFailure("no scan in the JPEG")
        }
        for component in 0..<Int(bytes[sos + 4]) { bytes[sos + 6 + 2 * component] = 0x33 }
        return bytes
    }
}
