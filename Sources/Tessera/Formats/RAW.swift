// RAW.swift — camera RAW files drawn from the JPEG preview the camera embedded: the format's
// entry, and Tessera's own walk of their TIFF structure.
//
// Tessera does not develop sensor data. DNG, CR2, NEF, ARW, ORF, PEF and SRW files are TIFF
// structured: their IFDs (the chain from the header, and SubIFDs) are walked for JPEG previews,
// named by JPEGInterchangeFormat/Length or by a single strip with Compression 6 or 7. RAF
// (Fujifilm) names its JPEG in its own header. Each candidate's markers are read up to its
// frame header: only a DCT JPEG (baseline, extended or progressive) libjpeg draws counts, which
// leaves out the lossless JPEGs sensor data is stored in. The largest preview is decoded like
// any JPEG (JPEGFormat, from its offset in the file), turned by its own EXIF orientation, or
// by IFD0's Orientation tag when it has none. Every offset and count is checked against the
// file's size, every IFD is read once (a loop of IFDs ends), and the walk reads at most 64.
import CTesseraShims
import Glibc

extension ImageFormat {
    public static let raw = ImageFormat(rawValue: "camera RAW")
}

enum RAWFormat: PhotoFormat {
    static let format = ImageFormat.raw
    static let suffixes = [".dng", ".cr2", ".nef", ".nrw", ".arw", ".orf", ".raf", ".pef", ".srw"]
    static let kinds = "camera RAW previews"

    /// The RAWs whose first bytes say so: CR2 (a TIFF with "CR" at 8), ORF ("IIRO", "IIRS",
    /// "MMOR"), RAF. A DNG, NEF or ARW starts as any TIFF does: TIFFFormat finds it by its tags.
    static func sniff(_ bytes: [UInt8]) -> Sniffed? {
        if starts(bytes, with: Array("FUJIFILMCCD-RAW ".utf8)) { return .readable(format) }
        if starts(bytes, with: [0x49, 0x49, 0x2A, 0x00]) && starts(bytes, with: Array("CR".utf8), at: 8) { return .readable(format) }
        if starts(bytes, with: Array("IIRO".utf8)) || starts(bytes, with: Array("IIRS".utf8)) || starts(bytes, with: Array("MMOR".utf8)) {
            return .readable(format)
        }
        return nil
    }

    static func header(of photo: PhotoFile, decoderMemoryBytes: Int) throws(TesseraError) -> PhotoHeader {
        let (preview, orientation) = try RAWStructure(photo: photo).preview()
        try photo.seek(to: preview.offset)
        let reader = try ScaledJPEGReader(photo: photo, decoderMemoryBytes: decoderMemoryBytes)
        reader.limit(toBytes: preview.length, startingAt: preview.offset)
        var header = try reader.readHeader()
        header.format = .raw
        if header.exifOrientation == 0 { header.exifOrientation = orientation }
        // A preview seldom carries EXIF: the date is the RAW's own (its EXIF IFD, as a TIFF's).
        if header.dateTaken == 0 { header.dateTaken = tessera_tiff_date_taken(photo.file.rawValue, UInt64(max(0, photo.fileBytes))) }
        return header
    }

    /// A JPEG's: rows stream, a multi-scan preview's buffers spill.
    static func wholeImageBytes(_ header: PhotoHeader, cellWidth: Int, cellHeight: Int) -> Int { 0 }

    static func decode(_ photo: PhotoFile, with decoder: CellDecoder,
                       into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        let (preview, orientation) = try RAWStructure(photo: photo).preview()
        return try decoder.decodeJPEG(photo, startingAt: preview.offset, length: preview.length, orientationIfNone: orientation, into: cell)
    }
}

/// A JPEG embedded in a RAW file.
struct RAWPreview: Equatable {
    let offset: Int64
    let length: Int64
    let width: Int
    let height: Int
}

/// What a walk of a RAW's structure found.
struct RAWStructure {
    let photo: PhotoFile
    /// Every JPEG preview libjpeg can draw.
    private(set) var previews: [RAWPreview] = []
    /// IFD0's Orientation tag (0: none).
    private(set) var orientation = 0
    /// Whether the file holds sensor data (a DNGVersion tag, a colour filter array or linear
    /// raw photometric, or the first bytes of a CR2, ORF or RAF): a camera RAW, not a TIFF image.
    private(set) var isCameraRAW = false
    /// The kind for messages ("a NEF" is not known from a TIFF's tags: "a camera RAW file").
    private(set) var kind = "camera RAW file"

    /// The most IFDs walked, and entries read in one: a real RAW has a handful of each.
    static let ifdLimit = 64
    static let entryLimit = 2_000

    init(photo: PhotoFile) throws(TesseraError) {
        self.photo = photo
        let start = try bytes(at: 0, count: 16) ?? []
        if starts(start, with: Array("FUJIFILMCCD-RAW ".utf8)) {
            isCameraRAW = true
            kind = "RAF"
            try readRAF()
            return
        }
        guard start.count >= 8 else { return }
        let bigEndian: Bool
        switch (start[0], start[1]) {
        case (0x49, 0x49): bigEndian = false
        case (0x4D, 0x4D): bigEndian = true
        default: return
        }
        let magic = Self.number(start, at: 2, size: 2, bigEndian: bigEndian)
        // 42: TIFF; "RO" and "RS": Olympus's ORF.
        guard magic == 42 || magic == 0x4F52 || magic == 0x5352 else { return }
        if magic != 42 { isCameraRAW = true; kind = "ORF" }
        if !bigEndian && starts(start, with: Array("CR".utf8), at: 8) { isCameraRAW = true; kind = "CR2" }
        try walk(firstIFD: Int64(Self.number(start, at: 4, size: 4, bigEndian: bigEndian)), bigEndian: bigEndian)
    }

    /// The largest preview and the orientation it is drawn with when it carries none; a RAW
    /// without one is refused, saying so.
    func preview() throws(TesseraError) -> (RAWPreview, Int) {
        guard let best = previews.max(by: { ($0.width * $0.height, $0.length) < ($1.width * $1.height, $1.length) }) else {
            throw TesseraError.unreadablePhoto(
                path: photo.path, reason: "a \(kind) with no JPEG preview Tessera can draw (it draws a RAW's embedded "
                    + "preview, and does not develop sensor data)")
        }
        return (best, orientation)
    }

    /// `count` bytes at `offset`, or nil when the file does not hold them all.
    private func bytes(at offset: Int64, count: Int) throws(TesseraError) -> [UInt8]? {
        guard offset >= 0, count >= 0, offset + Int64(count) <= photo.fileBytes else { return nil }
        var buffer = [UInt8](repeating: 0, count: count)
        let read = try buffer.withUnsafeMutableBytes { raw in
            Result { () throws(TesseraError) -> Int in
                var done = 0
                while done < count {
                    let n = try photo.file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[done...]), at: offset + Int64(done))
                    if n == 0 { break }
                    done += n
                }
                return done
            }
        }.get()
        return read == count ? buffer : nil
    }

    static func number(_ bytes: [UInt8], at offset: Int, size: Int, bigEndian: Bool) -> UInt32 {
        var value: UInt32 = 0
        for i in 0..<size {
            let byte = UInt32(bytes[offset + (bigEndian ? i : size - 1 - i)])
            value = value << 8 | byte
        }
        return value
    }

    private mutating func readRAF() throws(TesseraError) {
        // The header: "FUJIFILMCCD-RAW ", a version, the camera; at 84 the JPEG's offset and
        // length (big-endian).
        guard let field = try bytes(at: 84, count: 8) else { return }
        try consider(offset: Int64(Self.number(field, at: 0, size: 4, bigEndian: true)),
                     length: Int64(Self.number(field, at: 4, size: 4, bigEndian: true)))
    }

    /// One IFD's entries that matter here.
    private struct Entries {
        var values: [UInt16: [UInt32]] = [:]
        func first(_ tag: UInt16) -> UInt32? { values[tag]?.first }
    }

    private mutating func walk(firstIFD: Int64, bigEndian: Bool) throws(TesseraError) {
        var queue: [(offset: Int64, isFirst: Bool)] = [(firstIFD, true)]
        var visited = Set<Int64>()
        while !queue.isEmpty, visited.count < Self.ifdLimit {
            let (offset, isFirst) = queue.removeFirst()
            guard offset >= 8, visited.insert(offset).inserted else { continue }
            guard let (entries, next) = try readIFD(at: offset, bigEndian: bigEndian) else { continue }
            if next != 0 { queue.append((next, false)) }
            for sub in entries.values[0x14A] ?? [] { queue.append((Int64(sub), false)) }
            if isFirst, let value = entries.first(0x112), (1...8).contains(value) { orientation = Int(value) }
            if entries.values[0xC612] != nil { isCameraRAW = true; kind = "DNG" }
            if let photometric = entries.first(0x106), photometric == 32803 || photometric == 34892 { isCameraRAW = true }
            if let start = entries.first(0x201), let length = entries.first(0x202) {
                try consider(offset: Int64(start), length: Int64(length))
            }
            if let compression = entries.first(0x103), compression == 6 || compression == 7,
               let strips = entries.values[0x111], strips.count == 1, let counts = entries.values[0x117], counts.count == 1 {
                try consider(offset: Int64(strips[0]), length: Int64(counts[0]))
            }
        }
    }

    /// The tags of the IFD at `offset` that this walk reads (their values, up to 64 each) and
    /// the next IFD's offset; nil when the IFD is not inside the file.
    private func readIFD(at offset: Int64, bigEndian: Bool) throws(TesseraError) -> (Entries, Int64)? {
        guard let countBytes = try bytes(at: offset, count: 2) else { return nil }
        let count = Int(Self.number(countBytes, at: 0, size: 2, bigEndian: bigEndian))
        guard count > 0, count <= Self.entryLimit, let table = try bytes(at: offset + 2, count: count * 12 + 4) else { return nil }
        let wanted: Set<UInt16> = [0x103, 0x106, 0x111, 0x112, 0x117, 0x14A, 0x201, 0x202, 0xC612]
        var entries = Entries()
        for i in 0..<count {
            let at = i * 12
            let tag = UInt16(Self.number(table, at: at, size: 2, bigEndian: bigEndian))
            guard wanted.contains(tag) else { continue }
            let type = Self.number(table, at: at + 2, size: 2, bigEndian: bigEndian)
            let valueCount = Int(Self.number(table, at: at + 4, size: 4, bigEndian: bigEndian))
            // SHORT (3), LONG (4), IFD (13); BYTE (1) for DNGVersion, whose value is not read.
            let size: Int
            switch type { case 3: size = 2; case 4, 13: size = 4; case 1: size = 1; default: continue }
            guard valueCount > 0, valueCount <= 64 else { continue }
            let total = size * valueCount
            let data: [UInt8]
            if total <= 4 {
                data = Array(table[(at + 8)..<(at + 12)])
            } else {
                guard let read = try bytes(at: Int64(Self.number(table, at: at + 8, size: 4, bigEndian: bigEndian)), count: total) else { continue }
                data = read
            }
            entries.values[tag] = (0..<valueCount).map { Self.number(data, at: $0 * size, size: size, bigEndian: bigEndian) }
        }
        return (entries, Int64(Self.number(table, at: count * 12, size: 4, bigEndian: bigEndian)))
    }

    /// Adds the JPEG at `offset` when it is one libjpeg draws: its markers read up to the frame
    /// header, within its length and the first 256 KiB.
    private mutating func consider(offset: Int64, length: Int64) throws(TesseraError) {
        guard offset > 0, length >= 64, offset + length <= photo.fileBytes, !previews.contains(where: { $0.offset == offset }) else { return }
        guard let data = try bytes(at: offset, count: Int(min(length, 256 << 10))), data[0] == 0xFF, data[1] == 0xD8 else { return }
        var at = 2
        while at + 4 <= data.count {
            guard data[at] == 0xFF else { return }
            let marker = data[at + 1]
            if marker == 0xFF { at += 1; continue }
            if marker == 0x01 || (0xD0...0xD7).contains(marker) { at += 2; continue }
            let segment = Int(data[at + 2]) << 8 | Int(data[at + 3])
            if (0xC0...0xC2).contains(marker) {
                guard at + 9 <= data.count else { return }
                let height = Int(data[at + 5]) << 8 | Int(data[at + 6]), width = Int(data[at + 7]) << 8 | Int(data[at + 8])
                if width > 0 && height > 0 { previews.append(RAWPreview(offset: offset, length: length, width: width, height: height)) }
                return
            }
            // Any other frame (lossless, hierarchical, arithmetic), an end or a scan before a
            // frame: not a preview libjpeg draws at size.
            if (0xC3...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC { return }
            if marker == 0xD9 || marker == 0xDA || segment < 2 { return }
            at += 2 + segment
        }
    }
}

extension PhotoFile {
    /// Moves the file's position to `offset`, where a reader that reads on from it starts (a
    /// RAW's JPEG preview).
    func seek(to offset: Int64) throws(TesseraError) {
        guard lseek(file.rawValue, off_t(offset), SEEK_SET) == off_t(offset) else {
            throw TesseraError.unreadablePhoto(path: path, reason: "lseek to \(offset): \(errnoDescription(errno))")
        }
    }
}
