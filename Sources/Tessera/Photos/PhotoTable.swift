// PhotoTable.swift — the photos of a library, in path order, as every later phase reads them
// (the render's cells, the mosaic's analysis and matching, the manifest): by row number.
//
// A table is a random-access collection of `Photo`, so a phase reads one photo, or a run of
// them, when it needs it. It is held in memory when made from an array (tests, small
// libraries, the library's API); a `Builder` past a few thousand photos keeps them in two
// anonymous temporary files instead (fixed-size records, and a heap of their path bytes), read
// back a block of records at a time, so a library of a million photos costs a few hundred KiB
// of memory, not half a GiB.
import Glibc

public final class PhotoTable: RandomAccessCollection, ExpressibleByArrayLiteral, @unchecked Sendable {
    public typealias Element = Photo
    public typealias Index = Int

    private enum Storage {
        case memory([Photo])
        case file(PhotoTableFile)
    }

    private let storage: Storage
    public let count: Int

    /// The photos, in the order given (a scan gives them sorted by path bytes).
    public init(_ photos: [Photo]) {
        storage = .memory(photos)
        count = photos.count
    }

    public convenience init(arrayLiteral photos: Photo...) {
        self.init(photos)
    }

    fileprivate init(file: PhotoTableFile) {
        storage = .file(file)
        count = file.count
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    /// The photo at `position`. A table in a file that can no longer be read (the disk failed
    /// under it) stops the process: use `photo(at:)` where that must be an error.
    public subscript(position: Int) -> Photo {
        do {
            return try photo(at: position)
        } catch {
            fatalError("the photo table could not be read: \(error)")
        }
    }

    /// The photo at `position`, or the error reading it back from its file.
    public func photo(at position: Int) throws(TesseraError) -> Photo {
        precondition(position >= 0 && position < count, "photo table index \(position) out of 0..<\(count)")
        switch storage {
        case .memory(let photos): return photos[position]
        case .file(let file): return try file.photo(at: position)
        }
    }

    /// Whether the photos are in a temporary file rather than in memory.
    public var isFileBacked: Bool {
        if case .file = storage { return true }
        return false
    }

    /// What a table of `count` photos made by a Builder keeps in memory, at most (the plan's
    /// figure before the table exists): the photos themselves up to the builder's limit, past
    /// it four cached blocks of 256 records with their paths (about 4 KiB of path a block).
    public static func residentBytes(count: Int) -> Int {
        count <= Builder.defaultMemoryLimit ? count * (MemoryLayout<Photo>.stride + 64) : 4 * 256 * (PhotoRecord.size + 16) + 4 * (16 << 10) + machineryBytes
    }

    /// What a library past the builder's limit leaves resident besides the table's cache, as
    /// measured: the buffers its sort, builder and index readers used, which malloc keeps in
    /// its arenas (100,000 photos: 0.1-0.5 MiB over a plan that left this out; 2 MiB covered it
    /// until 0.6.0, whose reports and duplicate measure took a 100,000-photo mosaic 0.7 MB and a
    /// scan of 300,000 non-photos 0.2 MiB past it in CI: 3 MiB).
    static let machineryBytes = 3 << 20

    /// What the plan counts for this table: its resident part, and past the builder's limit the
    /// machinery's leftovers (`machineryBytes`).
    var plannedBytes: Int { residentBytes + (isFileBacked ? Self.machineryBytes : 0) }

    /// Bytes of the table kept in the process's memory (what the plan counts).
    public var residentBytes: Int {
        switch storage {
        case .memory(let photos): return photos.count * (MemoryLayout<Photo>.stride + 64)
        case .file(let file): return file.residentBytes
        }
    }

    /// Makes a table from photos given in order: in memory up to `memoryLimit` photos, past that
    /// in anonymous files in `temporaryDirectory` (default `defaultTemporaryDirectory()`).
    public final class Builder {
        /// Photos held in memory before the builder moves to a file: a small library never
        /// touches the disk.
        public static let defaultMemoryLimit = 2048
        private let temporaryDirectory: String
        private let memoryLimit: Int
        private var held: [Photo] = []
        private var writer: PhotoTableFile.Writer?
        private var finished = false

        public init(temporaryDirectory: String? = nil, memoryLimit: Int = Builder.defaultMemoryLimit) {
            self.temporaryDirectory = temporaryDirectory ?? defaultTemporaryDirectory()
            self.memoryLimit = Swift.max(0, memoryLimit)
        }

        /// Photos appended so far.
        public var count: Int { writer?.count ?? held.count }

        /// Adds `photo` as the next row.
        public func append(_ photo: Photo) throws(TesseraError) {
            precondition(!finished, "PhotoTable.Builder used after finish()")
            if let writer {
                try writer.append(photo)
                return
            }
            if held.count < memoryLimit {
                held.append(photo)
                return
            }
            let writer = try PhotoTableFile.Writer(temporaryDirectory: temporaryDirectory)
            for earlier in held { try writer.append(earlier) }
            held = []
            try writer.append(photo)
            self.writer = writer
        }

        /// The table of every photo appended; the builder is done.
        public func finish() throws(TesseraError) -> PhotoTable {
            precondition(!finished, "PhotoTable.Builder finished twice")
            finished = true
            if let writer {
                self.writer = nil
                return PhotoTable(file: try writer.finish())
            }
            defer { held = [] }
            return PhotoTable(held)
        }
    }
}

/// A table's photos in two anonymous files: `records` (one fixed-size record a photo) and `heap`
/// (each photo's path bytes, format name and, when it differs from the bytes' display, its
/// path text, end to end in row order).
final class PhotoTableFile: @unchecked Sendable {
    let count: Int
    private let records: FileDescriptor
    private let heap: FileDescriptor
    private let heapLength: Int64
    private let lock = Mutex()
    /// Recently read blocks, by block number modulo `slots`; protected by `lock`.
    private var cache: [CachedBlock?]

    /// Rows read from the file at once: a sequential pass makes one pair of preads per block.
    static let blockRows = 256
    /// Blocks kept: a few threads reading in different places do not evict each other at once.
    static let slots = 4

    private struct CachedBlock {
        let block: Int
        let records: [UInt8]
        /// The heap bytes of the block's rows, from the first row's offset.
        let heap: [UInt8]
        let heapStart: Int64
    }

    fileprivate init(count: Int, records: FileDescriptor, heap: FileDescriptor, heapLength: Int64) {
        self.count = count
        self.records = records
        self.heap = heap
        self.heapLength = heapLength
        cache = Array(repeating: nil, count: Self.slots)
    }

    deinit {
        records.close()
        heap.close()
    }

    /// What the table holds in memory: the cached blocks at most (the heap part of a block is
    /// its rows' paths, a few hundred bytes a row in any real library).
    var residentBytes: Int {
        lock.withLock {
            cache.reduce(Self.slots * MemoryLayout<CachedBlock?>.stride + 256) { sum, block in
                sum + (block.map { $0.records.capacity + $0.heap.capacity } ?? Self.blockRows * PhotoRecord.size)
            }
        }
    }

    func photo(at row: Int) throws(TesseraError) -> Photo {
        let block = row / Self.blockRows
        let slot = block % Self.slots
        lock.lock()
        defer { lock.unlock() }
        let cached: CachedBlock
        if let hit = cache[slot], hit.block == block {
            cached = hit
        } else {
            cached = try readBlock(block)
            cache[slot] = cached
        }
        let offset = (row - block * Self.blockRows) * PhotoRecord.size
        return try cached.records.withTypedBytes { bytes throws(TesseraError) in
            let record = PhotoRecord(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + PhotoRecord.size]))
            let start = record.heapOffset - cached.heapStart
            guard start >= 0, start + Int64(record.heapLength) <= Int64(cached.heap.count) else {
                throw TesseraError.system(operation: "read photo table (a damaged record)", errno: EIO, path: heap.path)
            }
            return try cached.heap.withTypedBytes { heapBytes throws(TesseraError) in
                try record.photo(heap: UnsafeRawBufferPointer(rebasing: heapBytes[Int(start)..<Int(start) + record.heapLength]),
                                 path: heap.path)
            }
        }
    }

    /// One block's records and the heap bytes they point into (contiguous: rows are written in
    /// order).
    private func readBlock(_ block: Int) throws(TesseraError) -> CachedBlock {
        let first = block * Self.blockRows
        let rows = min(Self.blockRows, count - first)
        var recordBytes = [UInt8](repeating: 0, count: rows * PhotoRecord.size)
        let records = self.records
        try recordBytes.withTypedMutableBytes { b throws(TesseraError) in
            try records.readAll(into: b, at: Int64(first) * Int64(PhotoRecord.size))
        }
        let (start, end) = recordBytes.withUnsafeBytes { b in
            let head = PhotoRecord(UnsafeRawBufferPointer(rebasing: b[0..<PhotoRecord.size]))
            let tail = PhotoRecord(UnsafeRawBufferPointer(rebasing: b[(rows - 1) * PhotoRecord.size..<rows * PhotoRecord.size]))
            return (head.heapOffset, tail.heapOffset + Int64(tail.heapLength))
        }
        guard start >= 0, end >= start, end <= heapLength else {
            throw .system(operation: "read photo table (a damaged block)", errno: EIO, path: heap.path)
        }
        var heapBytes = [UInt8](repeating: 0, count: Int(end - start))
        let heap = self.heap
        if !heapBytes.isEmpty {
            try heapBytes.withTypedMutableBytes { b throws(TesseraError) in try heap.readAll(into: b, at: start) }
        }
        return CachedBlock(block: block, records: recordBytes, heap: heapBytes, heapStart: start)
    }

    /// Appends rows to the two files through write buffers.
    final class Writer {
        private let records: FileDescriptor
        private let heap: FileDescriptor
        private var recordBuffer: [UInt8] = []
        private var heapBuffer: [UInt8] = []
        private var recordsWritten: Int64 = 0
        private var heapWritten: Int64 = 0
        private(set) var count = 0
        private var closed = false
        private static let flushBytes = 64 << 10

        init(temporaryDirectory: String) throws(TesseraError) {
            records = try FileDescriptor.openAnonymousTemporary(in: temporaryDirectory)
            do {
                heap = try FileDescriptor.openAnonymousTemporary(in: temporaryDirectory)
            } catch {
                records.close()
                throw error
            }
            recordBuffer.reserveCapacity(Self.flushBytes + PhotoRecord.size)
        }

        deinit {
            if !closed {
                records.close()
                heap.close()
            }
        }

        func append(_ photo: Photo) throws(TesseraError) {
            let heapOffset = heapWritten + Int64(heapBuffer.count)
            PhotoRecord.encode(photo, heapOffset: heapOffset, record: &recordBuffer, heap: &heapBuffer)
            count += 1
            if recordBuffer.count >= Self.flushBytes { try flushRecords() }
            if heapBuffer.count >= Self.flushBytes { try flushHeap() }
        }

        private func flushRecords() throws(TesseraError) {
            let (file, offset) = (records, recordsWritten)
            try recordBuffer.withTypedBytes { b throws(TesseraError) in try file.writeAll(b, at: offset) }
            recordsWritten += Int64(recordBuffer.count)
            recordBuffer.removeAll(keepingCapacity: true)
        }

        private func flushHeap() throws(TesseraError) {
            let (file, offset) = (heap, heapWritten)
            try heapBuffer.withTypedBytes { b throws(TesseraError) in try file.writeAll(b, at: offset) }
            heapWritten += Int64(heapBuffer.count)
            heapBuffer.removeAll(keepingCapacity: true)
        }

        func finish() throws(TesseraError) -> PhotoTableFile {
            try flushRecords()
            try flushHeap()
            closed = true
            return PhotoTableFile(count: count, records: records, heap: heap, heapLength: heapWritten)
        }
    }
}

/// One photo's fixed-size record: every field of `Photo` and `PhotoHeader`, and where its
/// variable-length parts are in the heap. Integers little endian; `Int` fields as 64 bits.
struct PhotoRecord {
    static let size = 152

    /// Bits of `flags`.
    private enum Flag {
        static let progressive: UInt16 = 1 << 0
        static let adobeInverted: UInt16 = 1 << 1
        static let arithmetic: UInt16 = 1 << 2
        static let storedRGB: UInt16 = 1 << 3
        static let hasAlpha: UInt16 = 1 << 4
        static let hasColorTag: UInt16 = 1 << 5
        static let hasIdentity: UInt16 = 1 << 6
        static let hasFileBytes: UInt16 = 1 << 7
        static let hasModified: UInt16 = 1 << 8
        /// The path text is stored (it is not the display of the path bytes).
        static let ownPathText: UInt16 = 1 << 9
        static let hasChanged: UInt16 = 1 << 12
        /// Colour model in bits 10-11: 0 gray, 1 rgb, 2 cmyk.
        static let colorShift: UInt16 = 10
    }

    // Offsets in a record.
    private static let heapOffsetAt = 0, fileLengthAt = 8, pathLengthAt = 12, formatLengthAt = 16, flagsAt = 18
    private static let integersAt = 24  // 16 Int64s: 128 bytes, to 152

    let bytes: UnsafeRawBufferPointer

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var heapOffset: Int64 { Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.heapOffsetAt, as: Int64.self)) }
    private var fileLength: Int { Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.fileLengthAt, as: UInt32.self))) }
    private var pathLength: Int { Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.pathLengthAt, as: UInt32.self))) }
    private var formatLength: Int { Int(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.formatLengthAt, as: UInt16.self))) }
    private var flags: UInt16 { UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.flagsAt, as: UInt16.self)) }
    var heapLength: Int { fileLength + pathLength + formatLength }

    private func integer(_ index: Int) -> Int64 {
        Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.integersAt + 8 * index, as: Int64.self))
    }

    /// The photo, its variable parts from `heap` (exactly `heapLength` bytes).
    func photo(heap: UnsafeRawBufferPointer, path label: String) throws(TesseraError) -> Photo {
        let flags = self.flags
        let file = PathBytes(Array(heap[0..<fileLength]))
        let format = String(decoding: heap[fileLength..<fileLength + formatLength], as: UTF8.self)
        let path = flags & Flag.ownPathText != 0
            ? String(decoding: heap[fileLength + formatLength..<heapLength], as: UTF8.self) : file.display
        let colorModel: PhotoHeader.ColorModel
        switch (flags >> Flag.colorShift) & 3 {
        case 0: colorModel = .gray
        case 1: colorModel = .rgb
        case 2: colorModel = .cmyk
        default: throw .system(operation: "read photo table (a damaged record)", errno: EIO, path: label)
        }
        var header = PhotoHeader(width: Int(integer(0)), height: Int(integer(1)), colorModel: colorModel,
                                 isProgressive: flags & Flag.progressive != 0, exifOrientation: Int(integer(2)),
                                 adobeInverted: flags & Flag.adobeInverted != 0, isArithmetic: flags & Flag.arithmetic != 0,
                                 storedRGB: flags & Flag.storedRGB != 0, minimumDataBytes: integer(3),
                                 coefficientBytes: integer(4), dcDecoderBytes: integer(5))
        header.format = ImageFormat(rawValue: format)
        header.colorTag = flags & Flag.hasColorTag != 0 ? UInt64(bitPattern: integer(6)) : nil
        header.wholeImageBytes = integer(7)
        header.hasAlpha = flags & Flag.hasAlpha != 0
        header.thumbnailWidth = Int(integer(8))
        header.thumbnailHeight = Int(integer(9))
        header.dateTaken = integer(14)
        let identity = flags & Flag.hasIdentity != 0
            ? OutputDestination.Identity(device: UInt64(bitPattern: integer(10)), inode: UInt64(bitPattern: integer(11))) : nil
        return Photo(path: path, header: header, file: file, identity: identity,
                     fileBytes: flags & Flag.hasFileBytes != 0 ? integer(12) : nil,
                     modifiedNanoseconds: flags & Flag.hasModified != 0 ? integer(13) : nil,
                     changedNanoseconds: flags & Flag.hasChanged != 0 ? integer(15) : nil)
    }

    /// Appends `photo`'s record to `record` and its variable parts to `heap`.
    static func encode(_ photo: Photo, heapOffset: Int64, record: inout [UInt8], heap: inout [UInt8]) {
        let header = photo.header
        let format = Array(header.format.rawValue.utf8.prefix(Int(UInt16.max)))
        let ownText = photo.path != photo.file.display
        let text = ownText ? Array(photo.path.utf8) : []
        var flags: UInt16 = 0
        if header.isProgressive { flags |= Flag.progressive }
        if header.adobeInverted { flags |= Flag.adobeInverted }
        if header.isArithmetic { flags |= Flag.arithmetic }
        if header.storedRGB { flags |= Flag.storedRGB }
        if header.hasAlpha { flags |= Flag.hasAlpha }
        if header.colorTag != nil { flags |= Flag.hasColorTag }
        if photo.identity != nil { flags |= Flag.hasIdentity }
        if photo.fileBytes != nil { flags |= Flag.hasFileBytes }
        if photo.modifiedNanoseconds != nil { flags |= Flag.hasModified }
        if photo.changedNanoseconds != nil { flags |= Flag.hasChanged }
        if ownText { flags |= Flag.ownPathText }
        switch header.colorModel {
        case .gray: break
        case .rgb: flags |= 1 << Flag.colorShift
        case .cmyk: flags |= 2 << Flag.colorShift
        }
        func put<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { record.append(contentsOf: $0) }
        }
        put(heapOffset)
        put(UInt32(photo.file.bytes.count))
        put(UInt32(text.count))
        put(UInt16(format.count))
        put(flags)
        put(UInt32(0))
        let integers: [Int64] = [
            Int64(header.width), Int64(header.height), Int64(header.exifOrientation), header.minimumDataBytes,
            header.coefficientBytes, header.dcDecoderBytes, Int64(bitPattern: header.colorTag ?? 0), header.wholeImageBytes,
            Int64(header.thumbnailWidth), Int64(header.thumbnailHeight),
            Int64(bitPattern: photo.identity?.device ?? 0), Int64(bitPattern: photo.identity?.inode ?? 0),
            photo.fileBytes ?? 0, photo.modifiedNanoseconds ?? 0, header.dateTaken, photo.changedNanoseconds ?? 0,
        ]
        for value in integers { put(value) }
        heap.append(contentsOf: photo.file.bytes)
        heap.append(contentsOf: format)
        heap.append(contentsOf: text)
    }
}
