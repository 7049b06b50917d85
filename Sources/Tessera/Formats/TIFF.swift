// TIFF.swift — TIFF photos through libtiff (tessera_tiff.c): the format's entry, its reader,
// and its rows into the cell path.
//
// The first page is drawn. libtiff turns every layout it knows (8 and 16 bits; grey, RGB,
// palette, CMYK, YCbCr; alpha; strips or tiles, contiguous or planar) into RGBA, one chunk at a
// time: a strip, or a row of tiles, so what is held is one chunk, never the whole picture (but
// for a TIFF stored as one strip, whose strip is the picture: counted, as `wholeImageBytes`,
// against the budget). The Orientation tag and the ICC profile go through the same steps as
// EXIF orientation and embedded profiles do for the other formats (a CMYK page's inks, 8-bit and
// contiguous, are taken as stored for its CMYK profile to convert). A file starting as a TIFF
// that holds camera sensor data (a DNG, NEF, ARW...) is a camera RAW: RAWFormat draws its
// preview.
import CTesseraShims

extension ImageFormat {
    public static let tiff = ImageFormat(rawValue: "TIFF")
}

enum TIFFFormat: PhotoFormat {
    static let format = ImageFormat.tiff
    static let suffixes = [".tif", ".tiff"]

    /// TIFF and BigTIFF, either byte order.
    static func sniff(_ bytes: [UInt8]) -> Sniffed? {
        let magic: [[UInt8]] = [[0x49, 0x49, 0x2A, 0x00], [0x4D, 0x4D, 0x00, 0x2A], [0x49, 0x49, 0x2B, 0x00], [0x4D, 0x4D, 0x00, 0x2B]]
        return magic.contains(where: { starts(bytes, with: $0) }) ? .readable(format) : nil
    }

    static func header(of photo: PhotoFile, decoderMemoryBytes: Int) throws(TesseraError) -> PhotoHeader {
        try header(of: photo, decoderMemoryBytes: decoderMemoryBytes, tagBytes: TIFFReader.mostTagBytes)
    }

    static func header(of photo: PhotoFile, decoderMemoryBytes: Int, tagBytes: Int) throws(TesseraError) -> PhotoHeader {
        if try RAWStructure(photo: photo).isCameraRAW { return try RAWFormat.header(of: photo, decoderMemoryBytes: decoderMemoryBytes) }
        return try TIFFReader(photo: photo, maxAllocation: decoderMemoryBytes, tagBytes: tagBytes).header
    }

    /// Pages whose tags hold more than this are opened by one of the scan's workers at a time.
    static let largeTagBytes = 1 << 20
    private static let largeTagOpens = Mutex()

    /// Runs the scan's reading of `photo` (`body`: whether Tessera wrote it, its header) within
    /// `tagBytes`: libtiff holds the page's tags whole while it is open, outside any budget, so a
    /// page whose tags hold more is refused before it is opened, naming the budget that reads
    /// it, and one whose tags hold more than 1 MiB is opened by one worker at a time (an 8 MB
    /// file of eight 7.7 MiB private tags took 88 MiB to scan under a 32 MiB budget, and was
    /// killed in a 64 MiB container at the default budget: a helper's finding).
    static func scan<T>(_ photo: PhotoFile, tagBytes: Int, _ body: (Int) throws(TesseraError) -> T) throws(TesseraError) -> T {
        var profileRefused: Int32 = 0
        let tags = Int(clamping: tessera_tiff_tag_bytes(photo.file.rawValue, UInt64(max(0, photo.fileBytes)), &profileRefused))
        let cap = min(tagBytes, TIFFReader.mostTagBytes)
        // (A profile too large for any budget is refused by the open, before libtiff reads a tag.)
        if tags > cap && profileRefused == 0 {
            guard tags <= TIFFReader.mostTagBytes else {
                throw TesseraError.unreadablePhoto(path: photo.path, reason: "TIFF: its tags hold \(formatBytes(Int64(tags))), which libtiff "
                                                   + "would hold in memory to open the page: more than the \(formatBytes(Int64(TIFFReader.mostTagBytes))) Tessera lets it")
            }
            throw TesseraError.photoNeedsMemory(path: photo.path, reason: "its TIFF tags hold \(formatBytes(Int64(tags))), which libtiff "
                                                + "holds in memory to open the page", budgetToDrawBytes: Int64(scanBudget(forTagBytes: tags)))
        }
        guard tags > largeTagBytes else { return try body(cap) }
        largeTagOpens.lock()
        defer { largeTagOpens.unlock() }
        return try body(cap)
    }

    /// The most a scan under `budgetBytes` lets a page's tags hold: half of what the budget
    /// leaves beside the process (libtiff holds a tag twice while it sets it), 1 to 64 MiB.
    static func scanTagBytes(budgetBytes: Int) -> Int {
        min(TIFFReader.mostTagBytes, max(1 << 20, (budgetBytes - RenderPlan.processAllowanceBytes) / 2))
    }

    /// The budget whose scan reads a page of `tagBytes` of tags.
    static func scanBudget(forTagBytes tagBytes: Int) -> Int { 2 * tagBytes + RenderPlan.processAllowanceBytes }

    /// Whether the TIFF is one Tessera wrote (a pyramidal TIFF output): its ImageDescription is the output
    /// comment a rendered JPEG carries. Left out of a scan as the JPEG is (its IFD lies at the
    /// file's end, past the bytes `sniff` sees).
    static func isOwnOutput(_ photo: PhotoFile, decoderMemoryBytes: Int, tagBytes: Int = TIFFReader.mostTagBytes) -> Bool {
        guard let reader = try? TIFFReader(photo: photo, maxAllocation: decoderMemoryBytes, tagBytes: tagBytes),
              let text = tessera_tiff_description(reader.tiff) else { return false }
        return String(cString: text) == JPEGMarks.outputComment
    }

    /// One chunk (a strip, or a row of tiles) and libtiff's buffers for it, whatever the cell.
    static func wholeImageBytes(_ header: PhotoHeader, cellWidth: Int, cellHeight: Int) -> Int {
        Int(clamping: header.wholeImageBytes)
    }

    static func decode(_ photo: PhotoFile, with decoder: CellDecoder,
                       into cell: UnsafeMutableRawBufferPointer) throws(TesseraError) -> DecodeNotes {
        if try RAWStructure(photo: photo).isCameraRAW { return try RAWFormat.decode(photo, with: decoder, into: cell) }
        let cap = decoder.budget.oneDecodeLimitBytes
        var profileRefused: Int32 = 0
        let tags = Int(clamping: tessera_tiff_tag_bytes(photo.file.rawValue, UInt64(max(0, photo.fileBytes)), &profileRefused))
        guard tags > largeTagBytes, profileRefused == 0 else { return try decoder.decodeTIFF(TIFFReader(photo: photo, maxAllocation: cap), into: cell) }
        // libtiff holds the page's tags from its open to its close: they are admitted before it
        // opens (they were held outside the budget: 88 MiB under a 32 MiB budget), one such page
        // at a time, since each takes two admissions that two workers could each half-hold.
        try decoder.budget.check(oneDecodeBytes: tags, photo: photo.path,
                                 what: "opening this TIFF's page (libtiff holds its tags whole)")
        largeTagOpens.lock()
        defer { largeTagOpens.unlock() }
        return try decoder.budget.admitted(bytes: tags) { () throws(TesseraError) -> DecodeNotes in
            try decoder.decodeTIFF(TIFFReader(photo: photo, maxAllocation: cap, tagBytes: cap), into: cell, tagsAdmitted: true)
        }
    }
}

final class TIFFReader {
    let photo: PhotoFile
    fileprivate let tiff: OpaquePointer
    let info: tessera_tiff_info

    /// The most decoded bytes one byte of a TIFF's data makes (LZW: a 12-bit code stands for
    /// up to 4,096 bytes): a page that claims more than its file can hold is refused before
    /// libtiff spends minutes decoding nothing.
    static let bytesPerByte: Int64 = 3_000

    /// The most a page's tags may hold (libtiff holds them while it is open): its cap on one
    /// allocation at the scan's default, so that a layered Photoshop TIFF of tens of MB is read.
    static let mostTagBytes = 64 << 20

    /// `maxAllocation`: the most libtiff may allocate at once; `tagBytes`: the most the page's
    /// tags may hold in all (at most `mostTagBytes`).
    init(photo: PhotoFile, maxAllocation: Int, tagBytes: Int = mostTagBytes) throws(TesseraError) {
        self.photo = photo
        var info = tessera_tiff_info()
        var message = [CChar](repeating: 0, count: 300)
        guard let tiff = tessera_tiff_open(photo.file.rawValue, UInt64(max(0, photo.fileBytes)), UInt64(max(1, maxAllocation)),
                                           UInt64(max(1, tagBytes)), &info, &message, 300) else {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "TIFF: \(cMessage(message))")
        }
        self.tiff = tiff
        self.info = info
        if info.width == 0 || info.height == 0 {
            throw TesseraError.unreadablePhoto(path: photo.path, reason: "TIFF: its first page is \(info.width) x \(info.height) px")
        }
        if Int64(clamping: info.image_bytes) > Self.bytesPerByte * photo.fileBytes + (1 << 20) {
            throw TesseraError.unreadablePhoto(
                path: photo.path, reason: "its TIFF header claims \(info.width) x \(info.height) px, more than its "
                    + "\(formatBytes(photo.fileBytes)) can hold: it is truncated or corrupt")
        }
    }

    deinit { tessera_tiff_close(tiff) }

    /// What libtiff said was wrong with the data decoded so far (tessera_tiff_problem).
    var problem: String? { tessera_tiff_problem(tiff).map { String(cString: $0) } }

    /// Grey (min-is-white, min-is-black), CMYK (separated), or RGB (RGB, palette, YCbCr, ...).
    var colorModel: PhotoHeader.ColorModel {
        switch info.photometric { case 0, 1: .gray; case 5: .cmyk; default: .rgb }
    }

    var header: PhotoHeader {
        var header = PhotoHeader(width: Int(info.width), height: Int(info.height), colorModel: colorModel,
                                 isProgressive: false, exifOrientation: Int(info.orientation), adobeInverted: false)
        header.format = .tiff
        header.hasAlpha = info.has_alpha != 0
        header.colorTag = colorModel == .rgb ? ColorProfiles.tag(icc: iccProfile)
            : inksConvertible ? ColorProfiles.tag(cmykICC: iccProfile, inverted: false) : nil
        // The tags' values too: libtiff holds them while the page is open (eight private tags of
        // 7.7 MiB each, 91.5 MB with a 32 MiB budget: a helper's finding).
        header.wholeImageBytes = Int64(clamping: info.chunk_bytes) + Int64(clamping: info.tag_bytes)
        header.dateTaken = tessera_tiff_date_taken(photo.file.rawValue, UInt64(max(0, photo.fileBytes)))
        return header
    }

    var iccProfile: UnsafeRawBufferPointer {
        var length = 0
        return ColorProfiles.bytes(tessera_tiff_icc(tiff, &length), count: length)
    }

    /// Whether the page's inks can go through a CMYK profile: 8-bit contiguous CMYK, the layout
    /// almost every CMYK TIFF has, whose inks libtiff hands over as stored. libtiff converts
    /// any other CMYK layout by formula inside its RGBA interface.
    var inksConvertible: Bool { colorModel == .cmyk && tessera_tiff_keep_inks(tiff, 0) == 1 }

    /// The page's profile, as the JPEG reader uses it: an RGB page's RGB profile; a CMYK page's
    /// CMYK profile, through which its inks are converted (not libtiff's formula); a grey
    /// page's none.
    var conversion: ColorConversion {
        switch colorModel {
        case .rgb: return ColorProfiles.conversion(icc: iccProfile)
        case .cmyk where iccProfile.count > 0:
            guard inksConvertible else {
                // 8-bit CMYK in separate planes, which libtiff's RGBA interface converts itself.
                return .unused("its CMYK profile is not used for this TIFF's layout of inks", fromCMYK: true)
            }
            return ColorProfiles.conversion(cmykICC: iccProfile, inverted: false)
        default: return .none
        }
    }

    /// Has `readRows` give the page's CMYK inks as stored, for `conversion` to convert.
    func keepInks() { _ = tessera_tiff_keep_inks(tiff, 1) }

    func start() throws(TesseraError) {
        guard tessera_tiff_start(tiff) == 0 else { throw failure() }
    }

    /// Up to `maxRows` RGB rows, alpha over `background` (CMYK rows after `keepInks`); 0 at the end.
    func readRows(into buffer: UnsafeMutableRawPointer, stride: Int, maxRows: Int, background: RGB) throws(TesseraError) -> Int {
        let rows = tessera_tiff_read_rows(tiff, buffer.assumingMemoryBound(to: UInt8.self), stride, Int32(maxRows),
                                          background.red, background.green, background.blue)
        guard rows >= 0 else { throw failure() }
        return Int(rows)
    }

    private func failure() -> TesseraError {
        .unreadablePhoto(path: photo.path, reason: "TIFF: " + String(cString: tessera_tiff_message(tiff)))
    }
}

extension CellDecoder {
    /// `tagsAdmitted`: the page's tags were admitted before it was opened (TIFFFormat.decode).
    func decodeTIFF(_ reader: TIFFReader, into cell: UnsafeMutableRawBufferPointer, tagsAdmitted: Bool = false) throws(TesseraError) -> DecodeNotes {
        let width = Int(reader.info.width), height = Int(reader.info.height)
        let orientation = OrientationTransform(exifOrientation: Int(reader.info.orientation))
        let conversion = reader.conversion
        defer { conversion.release() }
        let request = workingBytes(outputWidth: width, orientation: orientation) + Int(clamping: reader.info.chunk_bytes)
            + Int(clamping: reader.info.tag_bytes)
        let layout = reader.info.tiled != 0 ? "a row of tiles" : "a strip"
        try budget.check(oneDecodeBytes: request, photo: reader.photo.path,
                         what: "decoding this \(width) x \(height) TIFF \(layout) (\(reader.info.chunk_rows) rows) at a time")
        let inks = conversion.fromCMYK && conversion.converts
        let tags = tagsAdmitted ? Int(clamping: reader.info.tag_bytes) : 0
        return try budget.admitted(bytes: request - tags, holding: tags) { () throws(TesseraError) -> DecodeNotes in
            if inks { reader.keepInks() }
            try reader.start()
            try draw(path: reader.photo.path, orientation: orientation, scaled: (width, height), components: inks ? 4 : 3,
                     adobeInverted: false, conversion: conversion, rows: { buffer, stride, count throws(TesseraError) in
                let rows = try reader.readRows(into: buffer, stride: stride, maxRows: count, background: background)
                if cancellation?.isCancelled == true { throw .cancelled }
                return rows
            }, into: cell)
            var result = notes(conversion)
            if let problem = reader.problem {
                result.incomplete = "damaged TIFF data (\(problem))"
                result.warningCount += 1
                result.firstWarning = "damaged TIFF data (\(problem)): drawn as decoded, the rest of that strip or tile black"
            }
            return result
        }
    }
}
