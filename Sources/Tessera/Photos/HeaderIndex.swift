// HeaderIndex.swift — what each scanned file was (its header, or not an image, or a video),
// kept between runs on disk, so a warm scan answers an unchanged file (same path, size and
// mtime, change time, device and inode: FileStamp) without opening it (the ScanCache of
// Photos/ScanCache.swift).
//
// One record store (System/RecordJournal.swift) in the cache directory: `headers-v1.idx`, sorted
// by path bytes, and `headers-v1.journal`, which each scan batch is appended to. A record: key =
// the path's bytes; value = size i64, mtime (ns) i64, change time (ns) i64, device u64, inode
// u64 (since version 3), kind u8 (0 photo, 1 not an image,
// 2 video), then for a photo every PhotoHeader field: width, height i64, colour model u8, flags
// u8 (progressive 1, Adobe inverted 2, arithmetic 4, stored RGB 8, alpha 16, colour tag present
// 32), EXIF orientation, minimum data bytes, coefficient bytes, DC decoder bytes, whole-image
// bytes, thumbnail width and height (i64 each), colour tag u64, date taken i64 (YYYYMMDDhhmmss,
// 0: none; since version 2), and the format's name (u8 length, bytes). Little-endian. The store's schema carries `headerParsingVersion`: when header parsing
// changes, it is raised and every old entry is ignored (the files are rewritten at the next
// compaction).
//
// A damaged or unreadable file is an empty cache, never an error: a file it cannot answer for
// is simply read again. An entry that does not decode to a header this Tessera could have made
// (a format it does not read, a size out of range, a byte count past `largestByteCount`) is
// likewise not answered.
//
// What the cache is trusted with: an entry is taken as the file's header only when the file's
// stamp is the one recorded, and every value is one a real header could have; but a forger who
// can write the cache directory and recompute its checksums can make a photo look like another
// size or date (what a layout or an order uses), just as one who can write the photos can. The
// pixels drawn always come from decoding the photo itself.
//
// Threading: any thread may call the methods; a reader is used by one thread.
import Glibc

public final class HeaderIndex: ScanCache, @unchecked Sendable {
    /// Raised whenever header parsing changes what it finds: old entries are then ignored.
    public static let headerParsingVersion: UInt32 = 11
    /// The largest byte count an entry may give (minimum data, coefficients, DC decoder, whole
    /// image): 1 TiB, far past any image a header can describe (65,535 px square at 16 bytes a
    /// pixel is 64 GiB), and small enough that sums of a few cannot overflow.
    static let largestByteCount: Int64 = 1 << 40
    /// The journal is compacted at `finish` when larger than this, or than half the main file.
    static let compactJournalBytes: Int64 = 1 << 20
    /// The main file.
    public let path: String
    let store: RecordStore

    /// The cache in `directory` (created if needed).
    private let directory: String

    public init(directory: String) {
        makeDirectories(directory)
        self.directory = directory
        // A scan has less room than an analysis: its journal is held, and sorted, a MiB at a time.
        store = RecordStore(directory: directory, stem: "headers-v1", schema: 0x4844_0000 | Self.headerParsingVersion,
                            journalHeldLimit: 1 << 20, sortChunkBytes: 1 << 20)
        path = store.mainPath
    }

    public func makeReader() throws(TesseraError) -> any ScanCacheReader {
        Reader(cursor: RecordCursor(sources: store.openSources()))
    }

    /// The free space below which the index records nothing: it only saves a scan time, while
    /// the feature index beside it saves an analysis, so on a nearly full disk the room is left
    /// to that.
    public static let leaveFreeBytes: Int64 = 64 << 20

    public func record(_ entries: [ScanCacheEntry]) throws(TesseraError) {
        // A folder that could not be made (a cache folder below a file) is an error the scan
        // reports once; a disk nearly full is not (the index only saves time).
        guard try freeDiskBytes(directory) >= Self.leaveFreeBytes else { return }
        var batch = RecordBatch()
        for entry in entries {
            entry.path.bytes.withUnsafeBytes { key in _ = batch.add(key: key) { Self.encode(entry, into: &$0) } }
        }
        try store.append(batch)
    }

    public func finish() throws(TesseraError) {
        let journal = store.journalBytes
        if journal > Self.compactJournalBytes || journal > store.mainBytes / 2 || store.mainDamaged { try store.compact() }
    }

    private final class Reader: ScanCacheReader {
        let cursor: RecordCursor
        init(cursor: RecordCursor) { self.cursor = cursor }

        func lookup(_ path: PathBytes, stamp: FileStamp) throws(TesseraError) -> ScanCacheKind? {
            var kind: ScanCacheKind?
            _ = path.bytes.withUnsafeBytes { key in
                cursor.visit(key) { value in
                    guard let entry = HeaderIndex.decode(value), entry.stamp == stamp else { return false }
                    kind = entry.kind
                    return true
                }
            }
            return kind
        }
    }

    static func encode(_ entry: ScanCacheEntry, into value: inout [UInt8]) {
        value.appendLittleEndian(entry.stamp.fileBytes)
        value.appendLittleEndian(entry.stamp.modifiedNanoseconds)
        value.appendLittleEndian(entry.stamp.changedNanoseconds)
        value.appendLittleEndian(entry.stamp.device)
        value.appendLittleEndian(entry.stamp.inode)
        switch entry.kind {
        case .notAnImage: value.append(1)
        case .video: value.append(2)
        case .photo(let header):
            value.append(0)
            value.appendLittleEndian(Int64(header.width))
            value.appendLittleEndian(Int64(header.height))
            value.append(header.colorModel == .gray ? 0 : header.colorModel == .rgb ? 1 : 2)
            var flags: UInt8 = 0
            if header.isProgressive { flags |= 1 }
            if header.adobeInverted { flags |= 2 }
            if header.isArithmetic { flags |= 4 }
            if header.storedRGB { flags |= 8 }
            if header.hasAlpha { flags |= 16 }
            if header.colorTag != nil { flags |= 32 }
            value.append(flags)
            for number in [Int64(header.exifOrientation), header.minimumDataBytes, header.coefficientBytes, header.dcDecoderBytes,
                           header.wholeImageBytes, Int64(header.thumbnailWidth), Int64(header.thumbnailHeight)] {
                value.appendLittleEndian(number)
            }
            value.appendLittleEndian(header.colorTag ?? 0)
            value.appendLittleEndian(header.dateTaken)
            let name = Array(header.format.rawValue.utf8.prefix(255))
            value.append(UInt8(name.count))
            value.append(contentsOf: name)
        }
    }

    /// A value read back, every field checked: nil when it is not one `encode` could have written
    /// for a header this Tessera finds.
    static func decode(_ value: UnsafeRawBufferPointer) -> ScanCacheEntry? {
        let kindAt = 40
        guard value.count > kindAt else { return nil }
        let stamp = FileStamp(fileBytes: value.loadLittleEndian(0, as: Int64.self), modifiedNanoseconds: value.loadLittleEndian(8, as: Int64.self),
                              changedNanoseconds: value.loadLittleEndian(16, as: Int64.self), device: value.loadLittleEndian(24, as: UInt64.self),
                              inode: value.loadLittleEndian(32, as: UInt64.self))
        let empty = PathBytes([UInt8]())
        switch value[kindAt] {
        case 1: return value.count == kindAt + 1 ? ScanCacheEntry(path: empty, stamp: stamp, kind: .notAnImage) : nil
        case 2: return value.count == kindAt + 1 ? ScanCacheEntry(path: empty, stamp: stamp, kind: .video) : nil
        case 0: break
        default: return nil
        }
        let at = kindAt + 1
        let fixed = at + 16 + 2 + 7 * 8 + 8 + 8 + 1
        guard value.count >= fixed, value.count == fixed + Int(value[fixed - 1]) else { return nil }
        let width = value.loadLittleEndian(at, as: Int64.self), height = value.loadLittleEndian(at + 8, as: Int64.self)
        let model = value[at + 16], flags = value[at + 17]
        var numbers: [Int64] = []
        for index in 0..<7 { numbers.append(value.loadLittleEndian(at + 18 + 8 * index, as: Int64.self)) }
        let tag = value.loadLittleEndian(at + 74, as: UInt64.self)
        let taken = value.loadLittleEndian(at + 82, as: Int64.self)
        let name = String(decoding: UnsafeRawBufferPointer(rebasing: value[fixed...]), as: UTF8.self)
        let limit = Int64(Int32.max)
        guard (1...limit).contains(width), (1...limit).contains(height), model <= 2, flags < 64, (0...8).contains(numbers[0]),
              numbers[1...4].allSatisfy({ (0...largestByteCount).contains($0) }), (0...limit).contains(numbers[5]),
              (0...limit).contains(numbers[6]), (0...9999_12_31_23_59_60).contains(taken),
              Formats.all.contains(where: { $0.format.rawValue == name }) else { return nil }
        var header = PhotoHeader(width: Int(width), height: Int(height), colorModel: model == 0 ? .gray : model == 1 ? .rgb : .cmyk,
                                 isProgressive: flags & 1 != 0, exifOrientation: Int(numbers[0]), adobeInverted: flags & 2 != 0,
                                 isArithmetic: flags & 4 != 0, storedRGB: flags & 8 != 0, minimumDataBytes: numbers[1],
                                 coefficientBytes: numbers[2], dcDecoderBytes: numbers[3])
        header.wholeImageBytes = numbers[4]
        header.thumbnailWidth = Int(numbers[5])
        header.thumbnailHeight = Int(numbers[6])
        header.hasAlpha = flags & 16 != 0
        header.colorTag = flags & 32 != 0 ? tag : nil
        header.format = ImageFormat(rawValue: name)
        header.dateTaken = taken
        return ScanCacheEntry(path: empty, stamp: stamp, kind: .photo(header))
    }
}
