// PhotoFormat.swift — what every image format Tessera reads provides, and the one list of them.
//
// A format is one type conforming to `PhotoFormat`, in a file (or folder) of its own under
// Formats/: how its first bytes are recognised, its header, what drawing it into a cell must
// hold whole, and its rows into the cell path (Cells/CellDecoder.swift's shared tail: crop,
// resampling, colour, orientation). The scan, the decoder, the plan, the mosaic and the CLI ask
// `Formats.all`; adding a format is a new file and one line there.

/// One image format Tessera reads.
protocol PhotoFormat {
    /// Its name, as `PhotoHeader.format` and messages give it.
    static var format: ImageFormat { get }
    /// The name endings (lower case, with the dot) its files are given: a file named so that is
    /// not readable gets a warning rather than being passed over as a sidecar.
    static var suffixes: [String] { get }
    /// How messages list it among the formats read ("HEIF/HEIC, AVIF"); its name by default.
    static var kinds: String { get }
    /// What the first bytes (up to 64) say, when they are this format's; nil when not.
    static func sniff(_ bytes: [UInt8]) -> Sniffed?
    /// The header of an opened photo. `decoderMemoryBytes` caps what the reader may allocate.
    static func header(of photo: PhotoFile, decoderMemoryBytes: Int) throws(TesseraError) -> PhotoHeader
    /// The header as a scan reads it: `openBytes` caps what a library may hold whole to open
    /// the file under the scan's budget (`header` by default).
    static func scanHeader(of photo: PhotoFile, decoderMemoryBytes: Int, openBytes: Int) throws(TesseraError) -> PhotoHeader
    /// Whether the kernel should read ahead of this reader's reads (`PhotoFile.readAhead`), at
    /// a decode or at a scan: not where it reads a few places (a JPEG's header; a HEIF's boxes
    /// and whole items), where read-ahead only reads what is not needed; yes where it walks
    /// the file (a PNG's chunks) or decodes it from start to end (the default).
    static func readsAhead(decoding: Bool) -> Bool
    /// What drawing the photo into a `cellWidth` x `cellHeight` cell must hold at once that
    /// can neither stream nor spill: the figure the plan leaves room for, the mosaic admits
    /// photos by, and the decoder checks before it allocates. 0 for formats that stream.
    static func wholeImageBytes(_ header: PhotoHeader, cellWidth: Int, cellHeight: Int) -> Int
    /// Decodes the photo into `cell` through the decoder's shared tail.
    static func decode(_ photo: PhotoFile, with decoder: CellDecoder,
                       into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes
}

extension PhotoFormat {
    static var kinds: String { format.rawValue }
    static func scanHeader(of photo: PhotoFile, decoderMemoryBytes: Int, openBytes: Int) throws(TesseraError) -> PhotoHeader {
        try header(of: photo, decoderMemoryBytes: decoderMemoryBytes)
    }
    static func readsAhead(decoding: Bool) -> Bool { true }
}

/// What a file's first bytes say it is.
enum Sniffed: Equatable {
    case readable(ImageFormat)
    /// A JPEG or Deep Zoom tile Tessera rendered (`JPEGMarks.isOwnOutput`): not a photo.
    case ownOutput
    /// An image Tessera can name but not read ("a BMP image").
    case unreadable(String)
    /// A video (a phone's Live Photo movie beside its picture, a clip): not a photo, and
    /// counted rather than warned about one by one.
    case video
    case notAnImage

    init(startingWith bytes: [UInt8]) {
        for format in Formats.all {
            if let sniffed = format.sniff(bytes) { self = sniffed; return }
        }
        if Formats.isVideo(bytes) { self = .video; return }
        for known in Formats.namedOnly where known.magic.contains(where: { starts(bytes, with: $0) }) {
            self = .unreadable(known.name)
            return
        }
        self = .notAnImage
    }
}

public enum Formats {
    /// Every format Tessera reads, in the order their first bytes are tried.
    /// (RAW before TIFF: a CR2 starts as a TIFF does.)
    static let all: [any PhotoFormat.Type] = [JPEGFormat.self, PNGFormat.self, WebPFormat.self, HEIFFormat.self,
                                              GIFFormat.self, RAWFormat.self, TIFFFormat.self]

    /// Images Tessera recognises but does not read, by their first bytes: named in a warning
    /// (and refused by a strict run), never passed over silently.
    static let namedOnly: [(name: String, magic: [[UInt8]], suffixes: [String])] = [
        ("a BMP image", [[0x42, 0x4D]], [".bmp"]),
    ]

    /// The ISO BMFF brands of videos (QuickTime, MP4, M4V, 3GPP): asked after HEIF, whose
    /// brands are pictures.
    static let videoBrands: Set<String> = ["qt  ", "isom", "iso2", "iso4", "iso5", "iso6", "mp41", "mp42", "mp71", "avc1",
                                           "M4V ", "M4VH", "M4VP", "3gp4", "3gp5", "3gp6", "3gp7", "3g2a", "3g2b", "3g2c",
                                           "MSNV", "dash", "f4v ", "XAVC", "NDAS", "caqv"]

    /// Whether the first bytes are a video's: an ISO BMFF file of a video brand (or an old
    /// QuickTime movie starting with its movie, data or padding atom), RIFF AVI, Matroska/WebM,
    /// MPEG program stream, ASF (WMV).
    static func isVideo(_ bytes: [UInt8]) -> Bool {
        if bytes.count >= 12, String(decoding: bytes[4..<8], as: UTF8.self) == "ftyp" {
            return videoBrands.contains(String(decoding: bytes[8..<12], as: UTF8.self))
        }
        if bytes.count >= 8, ["moov", "mdat", "wide"].contains(String(decoding: bytes[4..<8], as: UTF8.self)) { return true }
        if starts(bytes, with: Array("RIFF".utf8)) && starts(bytes, with: Array("AVI ".utf8), at: 8) { return true }
        return starts(bytes, with: [0x1A, 0x45, 0xDF, 0xA3]) || starts(bytes, with: [0x00, 0x00, 0x01, 0xBA])
            || starts(bytes, with: [0x30, 0x26, 0xB2, 0x75, 0x8E, 0x66, 0xCF, 0x11])
    }

    /// The type that reads `format`, one that a sniff found (so one of `all`).
    static func reader(for format: ImageFormat) -> any PhotoFormat.Type {
        all.first { $0.format == format }!
    }

    /// Whether `name` ends as a photo's name does, in any format read.
    static func hasPhotoSuffix(_ name: String) -> Bool {
        let lower = name.lowercased()
        return all.contains { $0.suffixes.contains { lower.hasSuffix($0) } }
    }

    /// Every name ending of a format read (".jpg", ".png", ...), for a caller's lists.
    public static var suffixes: [String] { all.flatMap { $0.suffixes } }

    /// The name endings of every image format Tessera knows (read or only named) but `format`:
    /// a caller writing `format` refuses an output named like another kind of image.
    public static func imageSuffixes(except format: ImageFormat) -> [String] {
        all.filter { $0.format != format }.flatMap { $0.suffixes } + namedOnly.flatMap(\.suffixes)
    }

    /// The formats read, for messages: "JPEG, PNG, WebP, HEIF/HEIC, AVIF, GIF, ...".
    public static var names: String { all.map { $0.kinds }.joined(separator: ", ") }
}

/// Whether `bytes` holds `prefix` at `offset`.
func starts(_ bytes: [UInt8], with prefix: [UInt8], at offset: Int = 0) -> Bool {
    bytes.count >= offset + prefix.count && Array(bytes[offset..<(offset + prefix.count)]) == prefix
}
