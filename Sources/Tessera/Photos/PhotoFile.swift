// PhotoFile.swift — one photo file, open: its size and identity, and what its first bytes say it
// is. Every reader (JPEG, PNG, WebP, HEIF) starts from one of these, so the checks that make a
// file safe to read (a regular file, opened without blocking; not mostly holes) are made once,
// for every format.
import Glibc

/// The image formats Tessera reads, recognised by content.
public enum ImageFormat: String, Equatable, Sendable, CaseIterable {
    case jpeg = "JPEG"
    case png = "PNG"
    case webp = "WebP"
    /// HEIF: HEIC (HEVC) from phones, and AVIF (AV1), both through libheif.
    case heif = "HEIF"
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

    /// What drawing this photo into a `cellWidth` x `cellHeight` cell must hold at once beyond
    /// streaming: `wholeImageBytes`, unless a thumbnail covers the cell (then it is drawn from
    /// that, which costs little).
    public func wholeImageBytes(cellWidth: Int, cellHeight: Int) -> Int {
        guard wholeImageBytes > 0 else { return 0 }
        let swapped = OrientationTransform(exifOrientation: exifOrientation).swapsAxes
        let (width, height) = swapped ? (cellHeight, cellWidth) : (cellWidth, cellHeight)
        if thumbnailWidth > 0 && thumbnailHeight > 0 {
            // The thumbnail's centre crop to the cell's shape must cover the cell.
            let aspect = Double(width) / Double(height)
            let cropWidth = min(Double(thumbnailWidth), Double(thumbnailHeight) * aspect)
            let cropHeight = cropWidth / aspect
            if cropWidth >= Double(width) - 1e-9 && cropHeight >= Double(height) - 1e-9 { return 0 }
        }
        return Int(clamping: wholeImageBytes)
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

    /// What the first bytes say (pread: no reader's position moves).
    func sniff() throws(TesseraError) -> Sniffed {
        var magic = [UInt8](repeating: 0, count: 64)
        let count = try magic.withUnsafeMutableBytes { bytes in
            Result { () throws(TesseraError) in try file.read(into: bytes, at: 0) }
        }.get()
        return Sniffed(startingWith: Array(magic[0..<count]))
    }

    enum Sniffed: Equatable {
        case readable(ImageFormat)
        /// A JPEG or Deep Zoom tile Tessera rendered (`JPEGMarks.isOwnOutput`): not a photo.
        case ownOutput
        /// An image Tessera can name but not read ("a GIF image").
        case unreadable(String)
        case notAnImage

        init(startingWith bytes: [UInt8]) {
            func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
                bytes.count >= offset + prefix.count && Array(bytes[offset..<(offset + prefix.count)]) == prefix
            }
            if starts([0xFF, 0xD8, 0xFF]) {
                let ownOutput = bytes.withUnsafeBytes { JPEGMarks.isOwnOutput($0) }
                self = ownOutput ? .ownOutput : .readable(.jpeg)
                return
            }
            if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { self = .readable(.png); return }
            if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { self = .readable(.webp); return }
            if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { self = .unreadable("a GIF image"); return }
            if starts(Array("ftyp".utf8), at: 4), bytes.count >= 12 {
                // The major brand, then (within the first bytes read) the compatible ones.
                let size = min(bytes.count, max(12, Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])))
                var brands = [String(decoding: bytes[8..<12], as: UTF8.self)]
                var at = 16
                while at + 4 <= size {
                    brands.append(String(decoding: bytes[at..<(at + 4)], as: UTF8.self))
                    at += 4
                }
                let still = ["heic", "heix", "heim", "heis", "mif1", "mif2", "avif", "miaf"]
                if brands.contains(where: still.contains) { self = .readable(.heif); return }
                if brands.contains(where: ["hevc", "hevx", "msf1", "avis"].contains) {
                    self = .unreadable("a HEIF image sequence"); return
                }
            }
            if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) {
                self = .unreadable("a TIFF image (or a camera RAW file)"); return
            }
            if starts([0x42, 0x4D]) && bytes.count >= 14 { self = .unreadable("a BMP image"); return }
            self = .notAnImage
        }
    }
}
