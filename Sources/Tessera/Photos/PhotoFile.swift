// PhotoFile.swift — one photo file, open: its size and identity, and what its first bytes say it
// is (Formats/PhotoFormat.swift: Sniffed). Every reader (JPEG, PNG, WebP, HEIF, GIF, TIFF, RAW) starts from one of these, so the checks that make a
// file safe to read (a regular file, opened without blocking; not mostly holes) are made once,
// for every format.
import Glibc

/// The name of an image format Tessera reads (each format's file under Formats/ declares its own:
/// `.jpeg`, `.png`, `.webp`, `.heif`).
public struct ImageFormat: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
}

/// What a photo's header says, in any format.
public struct PhotoHeader: Equatable, Sendable {
    public enum ColorModel: Equatable, Sendable { case gray, rgb, cmyk }
    /// Size as stored after the file's own transforms (a HEIF's irot), before EXIF orientation.
    public var width: Int
    public var height: Int
    public var colorModel: ColorModel
    /// JPEG: multi-scan (progressive, or components in separate scans).
    public var isProgressive: Bool
    /// The EXIF Orientation tag Tessera applies (0 when absent, and for a HEIF whose own
    /// transforms already turned it: never twice).
    public var exifOrientation: Int
    /// Whether an Adobe APP14 marker was seen (CMYK is then stored inverted).
    public var adobeInverted: Bool
    /// Arithmetic-coded rather than Huffman-coded.
    public var isArithmetic = false
    /// Three components stored as R, G, B rather than YCbCr.
    public var storedRGB = false
    /// The least entropy-coded data a file with this header can have (one bit a block).
    public var minimumDataBytes: Int64 = 0
    /// libjpeg's whole-image buffer for a multi-scan decode: 128 bytes a block.
    public var coefficientBytes: Int64 = 0
    /// The DC decoder's whole-image buffers for a multi-scan decode at 1/8 (DCScaledJPEGReader).
    public var dcDecoderBytes: Int64 = 0
    public var format: ImageFormat = .jpeg
    /// A fingerprint of the colour profile (ICC bytes, or H.273 tags) the photo is converted
    /// from; nil when it is drawn as is (untagged, or sRGB in all but name).
    public var colorTag: UInt64? = nil
    /// What a decode of this photo holds whatever the size it is drawn at: a HEIF's whole
    /// planes, a lossless WebP's whole image. 0 for the formats that stream (the JPEG
    /// multi-scan buffers are counted by `coefficientBytes` and `dcDecoderBytes`).
    public var wholeImageBytes: Int64 = 0
    /// Transparent pixels are drawn over the background colour.
    public var hasAlpha = false
    /// A HEIF's largest embedded thumbnail (0 x 0: none), as stored (after its own transforms).
    public var thumbnailWidth = 0
    public var thumbnailHeight = 0
    /// When the photo was taken, from its EXIF (DateTimeOriginal, else DateTimeDigitized, else
    /// DateTime), as the number YYYYMMDDhhmmss in the camera's local time; 0 when unknown.
    public var dateTaken: Int64 = 0

    /// What drawing this photo into a `cellWidth` x `cellHeight` cell must hold at once that
    /// can neither stream nor spill (its format's `wholeImageBytes`): a HEIF's whole decode
    /// unless its thumbnail covers the cell, a lossless WebP's whole image; 0 for the others.
    public func wholeImageBytes(cellWidth: Int, cellHeight: Int) -> Int {
        // A header made by a caller may name a format Tessera does not read: then its own figure.
        guard let reader = Formats.all.first(where: { $0.format == format }) else { return Int(clamping: wholeImageBytes) }
        return reader.wholeImageBytes(self, cellWidth: cellWidth, cellHeight: cellHeight)
    }

    public init(width: Int, height: Int, colorModel: ColorModel, isProgressive: Bool, exifOrientation: Int,
                adobeInverted: Bool, isArithmetic: Bool = false, storedRGB: Bool = false, minimumDataBytes: Int64 = 0,
                coefficientBytes: Int64 = 0, dcDecoderBytes: Int64 = 0) {
        self.width = width
        self.height = height
        self.colorModel = colorModel
        self.isProgressive = isProgressive
        self.exifOrientation = exifOrientation
        self.adobeInverted = adobeInverted
        self.isArithmetic = isArithmetic
        self.storedRGB = storedRGB
        self.minimumDataBytes = minimumDataBytes
        self.coefficientBytes = coefficientBytes
        self.dcDecoderBytes = dcDecoderBytes
    }
}

final class PhotoFile {
    let path: String
    let file: FileDescriptor
    /// The file's size in bytes when opened.
    let fileBytes: Int64
    /// The opened file's device and inode.
    let identity: OutputDestination.Identity

    private init(path: String, file: FileDescriptor, fileBytes: Int64, identity: OutputDestination.Identity) {
        self.path = path
        self.file = file
        self.fileBytes = fileBytes
        self.identity = identity
    }

    /// Opens the file at `bytes` (a regular file only: FIFOs and devices are refused before any
    /// read; any name the kernel allows).
    static func open(_ bytes: PathBytes) throws(TesseraError) -> PhotoFile {
        let path = bytes.display
        let (file, info) = try FileDescriptor.openRegularFileForReading(bytes)
        let fileBytes = Int64(info.st_size)
        // A file with most of its length unstored (a sparse file: a header over terabytes of
        // holes reads as zeros forever) is not a photo; a real one is stored whole. Small files
        // are exempt (a filesystem may keep a small file's bytes inline, with no blocks).
        let storedBytes = Int64(info.st_blocks) * 512
        if fileBytes > 1 << 20 && storedBytes < fileBytes / 4 {
            file.close()
            throw TesseraError.unreadablePhoto(
                path: path, reason: "a sparse file, \(formatBytes(fileBytes)) long with only \(formatBytes(storedBytes)) stored "
                    + "(not a photo: a damaged or hostile file)")
        }
        return PhotoFile(path: path, file: file, fileBytes: fileBytes,
                         identity: OutputDestination.Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
    }

    deinit {
        // The photo's page cache is of no further use to this render.
        file.dropCache(offset: 0, length: 0)
        file.close()
    }

    /// What the first bytes say (pread: no reader's position moves). Read without the kernel's
    /// read-ahead, which stays off until `readAhead` (a first read starts it at several times
    /// its size, and the reads after it grow it: 320 KB of a phone's HEIC for these 64 bytes
    /// where a disk's read_ahead_kb is 8 MiB, when its scan reads 40 KB in all).
    func sniff() throws(TesseraError) -> Sniffed {
        var magic = [UInt8](repeating: 0, count: 64)
        file.adviseRandomAccess(true)
        let count = try magic.withUnsafeMutableBytes { bytes in
            Result { () throws(TesseraError) in try file.read(into: bytes, at: 0) }
        }.get()
        return Sniffed(startingWith: Array(magic[0..<count]))
    }

    /// After `sniff`: whether the reads that follow have the kernel's read-ahead. Where a reader
    /// reads a few places (a JPEG's or a HEIF's header, at a scan; a HEIF's items, which it
    /// reads whole), not: two reads of a JPEG's first 64 KB had read 1.2 MB of a 2.7 MB phone
    /// JPEG (200 of them: 241 MiB to scan, now 7 to 11). Where it walks the file (a PNG's
    /// chunks, every 8 KB) or decodes it, it has: the sniffed page is dropped, so that the
    /// reader's first read starts read-ahead as on a file never read (with page 0 kept and no
    /// read-ahead begun, each chunk header of a PNG was a read from the disk of its own).
    func readAhead(_ on: Bool) {
        guard on else { return }
        file.adviseRandomAccess(false)
        file.dropCache(offset: 0, length: Int64(getpagesize()))
    }
}
