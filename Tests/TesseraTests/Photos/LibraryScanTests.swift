// LibraryScanTests.swift — the streaming scan: photos in path-byte order without a final sort,
// a file named and found in a folder counted once, photo lists streamed line by line, a
// ScanCache's hits never opened, and the skipped photos held up to a limit and counted past it.
import Glibc
import Testing
@testable import Tessera

/// A ScanCache in memory: what the scan recorded, and the order it asked in.
final class FakeScanCache: ScanCache, @unchecked Sendable {
    private let lock = Mutex()
    private var entries: [PathBytes: ScanCacheEntry] = [:]
    private(set) var lookups: [PathBytes] = []
    private(set) var recordedCount = 0
    private(set) var finishedCount = 0

    final class Reader: ScanCacheReader {
        let cache: FakeScanCache
        init(cache: FakeScanCache) { self.cache = cache }

        func lookup(_ path: PathBytes, stamp: FileStamp) throws(TesseraError) -> ScanCacheKind? {
            cache.lock.withLock {
                cache.lookups.append(path)
                guard let entry = cache.entries[path], entry.stamp == stamp else {
                    return nil
                }
                return entry.kind
            }
        }
    }

    func makeReader() throws(TesseraError) -> any ScanCacheReader {
        lock.withLock { lookups = [] }
        return Reader(cache: self)
    }

    func record(_ new: [ScanCacheEntry]) throws(TesseraError) {
        lock.withLock {
            for entry in new { entries[entry.path] = entry }
            recordedCount += new.count
        }
    }

    func finish() throws(TesseraError) { lock.withLock { finishedCount += 1 } }

    func entry(_ path: String) -> ScanCacheEntry? { lock.withLock { entries[PathBytes(path)] } }

    /// Changes what the cache says a file is (its stamp kept).
    func replaceKind(_ path: String, with kind: ScanCacheKind) { lock.withLock { entries[PathBytes(path)]?.kind = kind } }
}

/// Creates a file whose name is any bytes (not UTF-8 too).
private func writeFile(bytes path: [UInt8], _ content: [UInt8]) {
    let name = path.map { CChar(bitPattern: $0) } + [0]
    let fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    precondition(fd >= 0, "open failed")
    _ = content.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

@Suite struct LibraryScanTests {
    /// Folders and names whose byte order differs from a naive walk's: "b" (a folder) sorts
    /// after "b-c" and "b.jpg" ('-' and '.' are below '/'); a name that is not UTF-8 sorts by its bytes.
    @Test func photosComeInPathByteOrderAndANamedFileCountsOnce() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let jpeg = readBytes(baseJPEG)
        for folder in ["b", "b/c", "b-c", "a", "a/z"] { #expect(mkdir(scratch.file(folder), 0o755) == 0) }
        let names = ["b.jpg", "b/c.jpg", "b/c/d.jpg", "b/a.jpg", "b-c/x.jpg", "b-c.jpg", "a/z/1.jpg", "a/z.jpg", "A.jpg", "a0.jpg"]
        for name in names { writeBytes(jpeg, to: scratch.file(name)) }
        let strange = Array(scratch.file("b/").utf8) + [0xC3, 0x28, 0x2E, 0x6A, 0x70, 0x67]  // invalid UTF-8
        writeFile(bytes: strange, jpeg)
        // Named once on its own, and again inside the named folder; and twice on its own.
        let library = try PhotoLibrary.scan([scratch.file("b/c.jpg"), scratch.path, scratch.file("b/c.jpg")], workers: 2)
        let files = library.photos.map(\.file)
        let expected = (names.map { PathBytes(scratch.file($0)) } + [PathBytes(strange)]).sorted()
        #expect(files == expected)
        #expect(files == files.sorted())
        #expect(library.photos.count == names.count + 1)
        #expect(library.skipped.isEmpty, "\(library.skipped)")
        // Each photo carries the walk's stat.
        var info = stat()
        #expect(stat(scratch.file("b/c.jpg"), &info) == 0)
        let photo = try #require(library.photos.first { $0.file == PathBytes(scratch.file("b/c.jpg")) })
        #expect(photo.fileBytes == Int64(info.st_size))
        #expect(photo.modifiedNanoseconds == Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
        #expect(photo.identity == OutputDestination.Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
    }

    /// A named non-image named like a photo warns once even when its folder is walked too (it
    /// is the named one: a walked one would be a silent sidecar only without the suffix).
    @Test func aNamedNonImageInANamedFolderIsNamedOnce() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        writeBytes(Array("notes".utf8), to: scratch.file("notes.txt"))
        let library = try PhotoLibrary.scan([scratch.path, scratch.file("notes.txt")])
        // Named: a warning (a named file that is not an image is never silent).
        #expect(library.skipped.map(\.path) == [scratch.file("notes.txt")])
        #expect(library.ignoredNonJPEGCount == 0)
        let walkedOnly = try PhotoLibrary.scan([scratch.path])
        #expect(walkedOnly.skipped.isEmpty)
        #expect(walkedOnly.ignoredNonJPEGCount == 1)
    }

    /// A list with no end to its first line (/dev/zero) is refused once the line is longer than
    /// any path, not read forever (a review found it hanging, deaf to Ctrl-C).
    @Test func aListWithAnEndlessLineIsRefused() throws {
        #expect(throws: TesseraError.self) { _ = try PhotoLibrary.scan([], lists: [PhotoList(path: "/dev/zero")]) }
    }

    /// A cancelled scan stops reading an endless list (NUL-separated /dev/zero: empty entries
    /// forever) at its next read.
    @Test func aCancelledScanStopsReadingAnEndlessList() throws {
        let cancellation = RenderCancellation()
        cancellation.cancel()
        #expect(throws: TesseraError.cancelled) {
            _ = try PhotoLibrary.scan([], lists: [PhotoList(path: "/dev/zero", nulSeparated: true)], cancellation: cancellation)
        }
    }

    @Test func photoListsAreNamedPaths() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let jpeg = readBytes(baseJPEG)
        #expect(mkdir(scratch.file("listed"), 0o755) == 0)
        #expect(mkdir(scratch.file("photos"), 0o755) == 0)
        for name in ["listed/1.jpg", "listed/2.jpg", "photos/a.jpg", "photos/b.jpg", "photos/c.jpg", "unlisted.jpg"] {
            writeBytes(jpeg, to: scratch.file(name))
        }
        let strange = Array(scratch.file("photos/").utf8) + [0xFF, 0x2E, 0x6A, 0x70, 0x67]
        writeFile(bytes: strange, jpeg)
        // LF and CRLF lines, blank lines, a missing entry and a folder.
        let text = "\(scratch.file("photos/a.jpg"))\n\n\(scratch.file("photos/b.jpg"))\r\n\r\n\(scratch.file("missing.jpg"))\n"
            + "\(scratch.file("listed"))\n\(scratch.file("photos/a.jpg"))"
        writeBytes(Array(text.utf8), to: scratch.file("list.txt"))
        // NUL-separated, with a name that is not UTF-8 and no final separator.
        writeBytes(Array(scratch.file("photos/c.jpg").utf8) + [0, 0] + strange, to: scratch.file("list.nul"))
        let library = try PhotoLibrary.scan([], lists: [PhotoList(path: scratch.file("list.txt")),
                                                        PhotoList(path: scratch.file("list.nul"), nulSeparated: true)])
        let expected = (["listed/1.jpg", "listed/2.jpg", "photos/a.jpg", "photos/b.jpg", "photos/c.jpg"].map { PathBytes(scratch.file($0)) }
            + [PathBytes(strange)]).sorted()
        #expect(library.photos.map(\.file) == expected)
        #expect(library.skipped == [SkippedPhoto(path: scratch.file("missing.jpg"), reason: "no such file or folder")])
        #expect(library.skippedCount == 1)
        // A list that cannot be opened is an error, not an empty list.
        #expect(throws: TesseraError.self) { try PhotoLibrary.scan([], lists: [PhotoList(path: scratch.file("nope.txt"))]) }
    }

    /// A file named in several spellings ("/./", "//", a trailing slash on its folder) beside the
    /// folder that holds it is one photo.
    @Test func aFileInSeveralSpellingsCountsOnce() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let jpeg = readBytes(baseJPEG)
        for name in ["a.jpg", "b.jpg"] { writeBytes(jpeg, to: scratch.file(name)) }
        let library = try PhotoLibrary.scan([scratch.path + "/", scratch.path + "/./a.jpg", scratch.path + "//a.jpg", scratch.file("b.jpg")])
        #expect(library.photos.map(\.path) == [scratch.file("a.jpg"), scratch.file("b.jpg")])
        #expect(PathBytes("./in//a/./b.jpg").lexicallyNormal == PathBytes("in/a/b.jpg"))
        #expect(PathBytes("/").lexicallyNormal == PathBytes("/") && PathBytes("./").lexicallyNormal == PathBytes("."))
        #expect(PathBytes("../x/..").lexicallyNormal == PathBytes("../x/.."))
    }

    /// A file the cache knows unchanged (same FileStamp) is not opened: the cache's answer is
    /// taken as it is. A file edited in place with its mtime put back (as exiftool -P does) has
    /// a new change time, so it is read again.
    @Test func aCacheHitIsNotOpenedAndAnEditInPlaceIsAMiss() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let jpeg = readBytes(baseJPEG)
        for name in ["a.jpg", "b.jpg", "c.jpg"] { writeBytes(jpeg, to: scratch.file(name)) }
        writeBytes(Array("sidecar".utf8), to: scratch.file("a.xmp"))
        let cache = FakeScanCache()
        let first = try PhotoLibrary.scan([scratch.path], cache: cache)
        #expect(first.photos.count == 3)
        #expect(cache.recordedCount == 4)  // three photos and the sidecar
        #expect(cache.finishedCount == 1)
        #expect(cache.entry(scratch.file("a.xmp"))?.kind == .notAnImage)
        var info = stat()
        #expect(stat(scratch.file("b.jpg"), &info) == 0)
        let stamp = try #require(cache.entry(scratch.file("b.jpg"))?.stamp)
        #expect(stamp.inode == UInt64(info.st_ino) && stamp.device == UInt64(info.st_dev))
        #expect(stamp.changedNanoseconds == Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))

        // The cache says b.jpg is a photo of another size: a warm scan says so too (not opened).
        var claimed = first.photos[1].header
        claimed.width += 1
        cache.replaceKind(scratch.file("b.jpg"), with: .photo(claimed))
        let warm = try PhotoLibrary.scan([scratch.path], cache: cache)
        #expect(warm.photos.map(\.path) == [scratch.file("a.jpg"), scratch.file("b.jpg"), scratch.file("c.jpg")])
        #expect(warm.photos[1].header == claimed)
        #expect(warm.ignoredNonJPEGCount == 1)
        #expect(cache.recordedCount == 4)  // nothing new read
        #expect(cache.lookups == cache.lookups.sorted())
        #expect(cache.lookups.count == 4)

        // Edited in place, size and mtime put back: the change time differs, so it is read again.
        writeBytes([UInt8](repeating: 0x41, count: jpeg.count), to: scratch.file("b.jpg"))
        var times = [info.st_atim, info.st_mtim]
        #expect(utimensat(AT_FDCWD, scratch.file("b.jpg"), &times, 0) == 0)
        let edited = try PhotoLibrary.scan([scratch.path], cache: cache)
        #expect(edited.photos.map(\.path) == [scratch.file("a.jpg"), scratch.file("c.jpg")])
        #expect(edited.skipped.map(\.path) == [scratch.file("b.jpg")])
        #expect(cache.recordedCount == 5)
        #expect(cache.entry(scratch.file("b.jpg"))?.kind == .notAnImage)
    }

    /// More broken photos than are held: the first thousand kept (sorted), all counted, each
    /// handed to `onSkipped`. Past the builder's limit the photos live in a file, still in order.
    @Test func skippedPhotosAreCountedPastTheHeldLimit() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let jpeg = readBytes(baseJPEG)
        let broken = PhotoLibrary.heldSkippedLimit + 50
        for index in 0..<broken { writeBytes(Array("not a picture".utf8), to: scratch.file("broken-\(index).jpg")) }
        let photoCount = PhotoTable.Builder.defaultMemoryLimit + 100
        writeBytes(jpeg, to: scratch.file("photo-0.jpg"))
        for index in 1..<photoCount { #expect(link(scratch.file("photo-0.jpg"), scratch.file("photo-\(index).jpg")) == 0) }
        var seen: [String] = []
        let library = try PhotoLibrary.scan([scratch.path], workers: 2, temporaryDirectory: scratch.path,
                                            onSkipped: { seen.append($0.path) })
        #expect(library.skippedCount == broken)
        #expect(library.skipped.count == PhotoLibrary.heldSkippedLimit)
        #expect(library.skipped.map(\.path) == library.skipped.map(\.path).sorted())
        #expect(seen.count == broken)
        #expect(Set(seen).count == broken)
        #expect(library.photos.count == photoCount)
        #expect(library.photos.isFileBacked)
        let paths = library.photos.map(\.path)
        #expect(paths == (0..<photoCount).map { scratch.file("photo-\($0).jpg") }.sorted())
        #expect(library.photos.allSatisfy { $0.header.width > 0 })
        // The anonymous files leave no name behind in the temporary directory.
        #expect(scratch.contents().allSatisfy { $0.hasPrefix("photo-") || $0.hasPrefix("broken-") })
    }

    /// A JPEG's header, at a scan, is read without the kernel's read-ahead: only the pages of
    /// what was read come into the page cache (past two 64 KB reads of its start, read-ahead had
    /// read 1.2 MB of a 2.7 MB phone JPEG where read_ahead_kb is 8 MiB). With read-ahead asked
    /// back (a decode, a PNG's walk), the kernel reads ahead again.
    @Test func aHeaderIsReadWithoutReadAhead() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = scratch.file("photo.jpg")
        var bytes = [UInt8](repeating: 0x5A, count: 4 << 20)
        bytes[0] = 0xFF; bytes[1] = 0xD8; bytes[2] = 0xFF
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(fd >= 0)
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
        #expect(fsync(fd) == 0)
        close(fd)
        /// The file's pages in the page cache after `body` has read it.
        func residentPages(_ body: (PhotoFile) throws(TesseraError) -> Void) throws -> Int {
            let evict = open(path, O_RDONLY)
            #expect(posix_fadvise(evict, 0, 0, POSIX_FADV_DONTNEED) == 0)
            close(evict)
            let photo = try PhotoFile.open(PathBytes(path))
            try body(photo)
            let pages = bytes.count / Int(getpagesize())
            let view = open(path, O_RDONLY)
            defer { close(view) }
            let mapped = mmap(nil, bytes.count, PROT_READ, MAP_SHARED, view, 0)
            try #require(mapped != MAP_FAILED)
            defer { munmap(mapped, bytes.count) }
            var resident = [UInt8](repeating: 0, count: pages)
            #expect(mincore(mapped, bytes.count, &resident) == 0)
            return resident.filter { $0 & 1 != 0 }.count
        }
        func reads(readAhead: Bool) -> (PhotoFile) throws(TesseraError) -> Void { { (photo: PhotoFile) throws(TesseraError) -> Void in
            _ = try photo.sniff()
            photo.readAhead(readAhead)
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            for at in [0, 64 << 10] {
                _ = try chunk.withUnsafeMutableBytes { buffer in
                    Result { () throws(TesseraError) in try photo.file.read(into: buffer, at: Int64(at)) }
                }.get()
            }
        } }
        // (A file system in memory keeps every page: this needs one on a disk.)
        guard try residentPages({ _ in }) == 0 else {
            Issue.record("\(scratch.path) keeps its pages (tmpfs?): set TMPDIR to a folder on a disk")
            return
        }
        let header = try residentPages(reads(readAhead: false))
        let decode = try residentPages(reads(readAhead: true))
        print("two 64 KB reads of a 4 MiB file bring in \(header) pages for a header, \(decode) for a decode")
        #expect(header <= (128 << 10) / Int(getpagesize()) + 2, "\(header) pages in the page cache")
        #expect(decode > header, "\(decode) pages with read-ahead, \(header) without")
        // With it, the first read starts read-ahead as on a file never read (the sniffed page
        // dropped), and a PNG's chunk walk, an 8-byte read every 8 KB, grows it: more than the
        // megabyte walked comes in (with the sniffed page kept, each read was a page of its own).
        let walked = try residentPages { (photo) throws(TesseraError) in
            _ = try photo.sniff()
            photo.readAhead(true)
            var header = [UInt8](repeating: 0, count: 8)
            for at in stride(from: 0, to: 1 << 20, by: 8 << 10) {
                _ = try header.withUnsafeMutableBytes { buffer in
                    Result { () throws(TesseraError) in try photo.file.read(into: buffer, at: Int64(at)) }
                }.get()
            }
        }
        print("a walk of 128 reads over 1 MiB brings in \(walked) pages")
        #expect(walked > (1 << 20) / Int(getpagesize()), "\(walked) pages")
    }
}
