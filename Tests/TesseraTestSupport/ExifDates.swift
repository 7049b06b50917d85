// ExifDates.swift — a JPEG given EXIF dates, for the tests of the date taken (the library's
// and the command line's --order date).

/// `jpeg` with an EXIF APP1 segment after its SOI holding `dates` (tag: text, the text padded
/// with a NUL to 20 bytes), little-endian: 0x0132 DateTime in IFD0; 0x9003 DateTimeOriginal and
/// 0x9004 DateTimeDigitized in the Exif IFD.
public func jpegWithDates(_ jpeg: [UInt8], _ dates: [UInt16: String]) -> [UInt8] {
    var tiff: [UInt8] = Array("II".utf8) + [42, 0, 8, 0, 0, 0]
    func u16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    func u32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xFF) } }
    let ifd0Tags = dates.keys.filter { $0 == 0x0132 }.sorted(), exifTags = dates.keys.filter { $0 != 0x0132 }.sorted()
    // IFD0 at 8: its entries, then the Exif IFD pointer; the Exif IFD after; the strings last.
    let ifd0Count = ifd0Tags.count + 1
    let exifAt = 8 + 2 + 12 * ifd0Count + 4
    let stringsAt = exifAt + 2 + 12 * exifTags.count + 4
    var strings: [UInt8] = []
    func entry(_ tag: UInt16) -> [UInt8] {
        var text = Array(dates[tag]!.utf8.prefix(19))
        text += [UInt8](repeating: 0, count: 20 - text.count)
        let offset = UInt32(stringsAt + strings.count)
        strings += text
        return u16(tag) + u16(2) + u32(20) + u32(offset)
    }
    tiff += u16(UInt16(ifd0Count))
    for tag in ifd0Tags { tiff += entry(tag) }
    tiff += u16(0x8769) + u16(4) + u32(1) + u32(UInt32(exifAt))
    tiff += u32(0)
    tiff += u16(UInt16(exifTags.count))
    for tag in exifTags { tiff += entry(tag) }
    tiff += u32(0)
    tiff += strings
    let payload = Array("Exif".utf8) + [0, 0] + tiff
    let length = payload.count + 2
    return [0xFF, 0xD8, 0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload + jpeg.dropFirst(2)
}
