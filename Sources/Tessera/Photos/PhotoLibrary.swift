// PhotoLibrary.swift — finds the photos (JPEG, PNG, WebP, HEIF/HEIC, AVIF, GIF, TIFF, camera
// RAW previews) under the paths a user gives.
//
// Files are recognised by content (their first bytes), not by extension. Directories
// are searched recursively; symlinks are followed, but each directory is entered once (by device
// and inode), so a symlink loop ends. Only regular files are opened, with O_NONBLOCK, so a FIFO
// named like a photo is never read. Every candidate's header is read once here (or answered by a
// ScanCache when the file is unchanged), so unreadable photos are known (and reported) before any
// rendering starts.
//
// Memory does not depend on the number of files: the walk hands each file (its path and stat) to
// an ExternalSort, whose runs go to a temporary file; the sorted stream is read in batches, and
// the photos go to a PhotoTable.Builder, which moves them to a file past a few thousand. Photo
// lists are read line by line. So the scan's order (path bytes) costs no sort of the photos, and
// a million files cost what a batch does.
import Dispatch
import Glibc

/// One usable photo.
public struct Photo: Equatable, Sendable {
    /// The path as text, for messages, manifests and the viewer (bytes that are not UTF-8
    /// shown as U+FFFD).
    public let path: String
    public let header: PhotoHeader
    /// The path as the kernel knows it: what the photo is opened by.
    public let file: PathBytes
    /// The file's device and inode when it was scanned (nil for a photo made by hand), so that
    /// checking the outputs against the photos needs no second stat per photo.
    public let identity: OutputDestination.Identity?
    /// The file's size and modification time (ns since the epoch) when it was scanned (nil for a
    /// photo made by hand): what the indexes key a photo by, so a warm run need not stat again.
    public var fileBytes: Int64?
    public var modifiedNanoseconds: Int64?
    /// Its change time (ns since the epoch) when it was scanned (nil: not known): a file deleted
    /// and another made in its place (given the freed inode, its size and mtime set back, as
    /// `cp -p` of a same-sized file does) has a new one, which the feature index checks.
    public var changedNanoseconds: Int64?

    public init(path: String, header: PhotoHeader, file: PathBytes? = nil, identity: OutputDestination.Identity? = nil,
                fileBytes: Int64? = nil, modifiedNanoseconds: Int64? = nil, changedNanoseconds: Int64? = nil) {
        self.path = path
        self.header = header
        self.file = file ?? PathBytes(path)
        self.identity = identity
        self.fileBytes = fileBytes
        self.modifiedNanoseconds = modifiedNanoseconds
        self.changedNanoseconds = changedNanoseconds
    }
}

/// Which files a scan takes from the folders it searches.
public struct PhotoSelection: Equatable, Sendable {
    /// Hidden files and folders (names starting with "."): left out unless this is set.
    public var includeHidden = false
    /// Shell patterns (fnmatch): a file or folder whose name or whole path matches one is left
    /// out (a folder is not entered). Applies to named paths too.
    public var excludes: [String] = []
    /// Tessera's own outputs (JPEGs with its mark, pyramid tile folders) are left out unless
    /// this is set (a mosaic's target may be one).
    public var includeOwnOutputs = false

    public init(includeHidden: Bool = false, excludes: [String] = [], includeOwnOutputs: Bool = false) {
        self.includeHidden = includeHidden
        self.excludes = excludes
        self.includeOwnOutputs = includeOwnOutputs
    }

    /// Folders of generated thumbnails, never photos of their own: the freedesktop cache, NAS
    /// indexers (Synology, QNAP), macOS archive and network-share leftovers.
    public static let thumbnailFolders: Set<String> = ["@eaDir", ".@__thumb", "@__thumb", ".thumbnails", "__MACOSX",
                                                       ".AppleDouble", "#recycle", "#snapshot"]

    func excludes(name: String, path: String) -> Bool {
        excludes.contains { pattern in fnmatch(pattern, name, 0) == 0 || fnmatch(pattern, path, 0) == 0 }
    }
}

/// What a scan left out on purpose (not errors): counted for the dry run and the summary.
public struct LeftOut: Equatable, Sendable {
    /// Hidden files and folders (each folder counts once, its contents are not looked at).
    public var hidden = 0
    /// Thumbnail folders (`PhotoSelection.thumbnailFolders`).
    public var thumbnailFolders = 0
    /// Files and folders matching an exclude pattern.
    public var excluded = 0
    /// JPEGs Tessera rendered (they carry its mark) and Deep Zoom tile folders (`NAME_files`
    /// beside `NAME.dzi`): an earlier run's output written among the photos.
    public var ownOutputs = 0
    /// Videos (by their first bytes: QuickTime, MP4, AVI, Matroska...), Live Photo movies
    /// among them: counted once, not a warning each.
    public var videos = 0

    public var total: Int { hidden + thumbnailFolders + excluded + ownOutputs + videos }
}

/// A photo left out, and why.
public struct SkippedPhoto: Equatable, Sendable {
    public let path: String
    public let reason: String
    /// When the photo was not drawn for want of memory: the budget that would draw it (the
    /// caller words the advice).
    public var budgetToDrawBytes: Int64?

    public init(path: String, reason: String, budgetToDrawBytes: Int64? = nil) {
        self.path = path
        self.reason = reason
        self.budgetToDrawBytes = budgetToDrawBytes
    }

    /// The photo at `path` that failed with `error`: its reason, and the budget to draw it
    /// when that is what it lacked.
    public init(path: String, error: TesseraError) {
        switch error {
        case let .unreadablePhoto(_, reason): self.init(path: path, reason: reason)
        case let .photoNeedsMemory(_, reason, budget): self.init(path: path, reason: reason, budgetToDrawBytes: budget)
        case let .system(operation, code, _): self.init(path: path, reason: "\(operation): \(errnoDescription(code))")
        default: self.init(path: path, reason: error.description)
        }
    }
}

/// The photos found under some paths.
public struct PhotoLibrary: Sendable {
    /// Usable photos, sorted by path bytes.
    public var photos: PhotoTable
    /// Files that look like photos (an image's first bytes, or given by name) but cannot be used:
    /// the first `heldSkippedLimit` found, sorted by path (`skippedCount` counts them all).
    public var skipped: [SkippedPhoto]
    /// Files in searched directories that are not images and not named like one (sidecars,
    /// notes): left out silently. A non-image named .jpg is in `skipped`, with a warning.
    public var ignoredNonJPEGCount: Int
    /// The paths that were searched (the photo lists by their own paths: their lines are not held).
    public var searched: [String] = []
    /// What the selection left out (hidden, thumbnail folders, excluded).
    public var leftOut = LeftOut()
    /// Why the scan's cache (the header index) could not be used or kept, or nil: the scan
    /// read every file instead.
    public var cacheError: TesseraError?
    /// Every skipped photo, held in `skipped` or not.
    public var skippedCount: Int = 0

    /// Skipped photos held in `skipped`: a library of a million broken files warns about a
    /// thousand and counts the rest (`onSkipped` sees every one).
    public static let heldSkippedLimit = 1000

    /// What the process holds before it does any work (the Swift runtime, Foundation, the C
    /// libraries' code and data): the binary asked only its version peaks at 14.2-14.5 MiB on Debian bookworm.
    /// RenderPlan.processAllowanceBytes is a little more (16 MiB, what a render's peak measures).
    static let processBytes = 15 << 20

    /// The most a scan holds, whatever the number of files, as the dry run plans it: the process
    /// itself, then the larger of its two phases, and the skipped photos it keeps.
    /// - the walk: the sorter's run (ExternalSort.plannedRunBytes);
    /// - the reading: the sorter's merge buffers, a batch of paths and headers, the header
    ///   index's journal and sort chunk (a MiB each), and the photo table's builder
    ///   (PhotoTable.residentBytes past its memory limit, with the machinery it leaves).
    /// Measured: 300,000 files that are not photos peak at 19.9 MiB.
    public static var plannedScanBytes: Int {
        let walk = ExternalSort.plannedRunBytes()
        let reading = ExternalSort.mergeBufferBytes + Reading.batchSize * 512 + (2 << 20) + PhotoTable.residentBytes(count: .max)
        return processBytes + max(walk, reading) + heldSkippedLimit * 512
    }

    /// Searches `paths` (files or directories). `workers` headers are read at once.
    /// A named path that does not exist or cannot be listed is skipped like a broken photo.
    /// Throws `.cancelled` once `cancellation` is (checked for every directory entry and header).
    ///
    /// The walk hands every file to an external sort (in `temporaryDirectory`, default
    /// `defaultTemporaryDirectory()`); the sorted files are then read `Reading.batchSize` at a
    /// time, in path order, so the photos come out sorted and only a batch is held.
    /// `memoryBudgetBytes`: the run's budget, which bounds what a TIFF's tags may hold while
    /// the scan reads its header (TIFFFormat.scan); nil: 64 MiB.
    /// `lists`: files naming photos or folders, one a line (PhotoList), taken as named paths.
    /// `cache`: answers the files unchanged since it recorded them (they are not opened), and
    /// records what this scan read. `onSkipped`: every skipped photo as it is found, on the
    /// scanning thread.
    public static func scan(_ paths: [String], lists: [PhotoList] = [], workers: Int = 1, decoderMemoryBytes: Int = 64 << 20,
                            memoryBudgetBytes: Int? = nil, cancellation: RenderCancellation? = nil,
                            selection: PhotoSelection = PhotoSelection(),
                            progress: (@Sendable (Int, Int) -> Void)? = nil,
                            cache: (any ScanCache)? = nil, temporaryDirectory: String? = nil,
                            onSkipped: ((SkippedPhoto) -> Void)? = nil) throws(TesseraError) -> PhotoLibrary {
        let directory = temporaryDirectory ?? defaultTemporaryDirectory()
        var walk = Walk(sorter: ExternalSort(temporaryDirectory: directory), selection: selection, cancellation: cancellation,
                        progress: progress, skips: SkipSink(onSkipped: onSkipped))
        progress?(0, 0)
        for path in paths { try walk.named(PathBytes(path)) }
        for list in lists {
            try forEachLine(of: list, cancellation: cancellation) { (line: [UInt8]) throws(TesseraError) in
                if cancellation?.isCancelled == true { throw .cancelled }
                try walk.named(PathBytes(line))
            }
        }
        let tiffTagBytes = memoryBudgetBytes.map { TIFFFormat.scanTagBytes(budgetBytes: $0) } ?? TIFFReader.mostTagBytes
        let openBytes = HEIFFormat.scanOpenBytes(budgetBytes: memoryBudgetBytes ?? decoderMemoryBytes)
        var reading = try Reading(workers: workers, decoderMemoryBytes: decoderMemoryBytes, tiffTagBytes: tiffTagBytes,
                                  openBytes: openBytes, ownOutputs: selection.includeOwnOutputs,
                                  cancellation: cancellation, progress: progress, found: walk.found, cache: cache,
                                  builder: PhotoTable.Builder(temporaryDirectory: directory), skips: walk.skips)
        try walk.sorter.finish { (key: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) throws(TesseraError) in
            try reading.take(Candidate(path: key, payload: payload))
        }
        try reading.finish()
        if let cache = reading.cache {
            do throws(TesseraError) { try cache.finish() } catch { reading.dropCache(error) }
        }
        var skipped = reading.skips.held
        skipped.sort { $0.path < $1.path }
        var library = PhotoLibrary(photos: try reading.builder.finish(), skipped: skipped, ignoredNonJPEGCount: reading.ignored,
                                   searched: paths + lists.map(\.path))
        library.leftOut = walk.leftOut
        library.cacheError = reading.cacheError
        releaseFreedMemory()
        library.leftOut.ownOutputs += reading.leftOut.ownOutputs
        library.leftOut.videos += reading.leftOut.videos
        library.skippedCount = reading.skips.count
        return library
    }

    /// Skipped photos: every one counted and handed on, the first `heldSkippedLimit` kept.
    private struct SkipSink {
        let onSkipped: ((SkippedPhoto) -> Void)?
        var held: [SkippedPhoto] = []
        var count = 0

        mutating func add(_ skipped: SkippedPhoto) {
            count += 1
            onSkipped?(skipped)
            if held.count < PhotoLibrary.heldSkippedLimit { held.append(skipped) }
        }
    }

    /// One file the walk found: its path and what its stat said, as the sorter carries it
    /// (payload: named, regular, then size, mtime, device, inode and ctime as little-endian 64
    /// bits).
    private struct Candidate {
        var path: PathBytes
        var named: Bool
        var regular: Bool
        var fileBytes: Int64
        var modifiedNanoseconds: Int64
        var changedNanoseconds: Int64
        var identity: OutputDestination.Identity

        static let payloadBytes = 42

        /// What the header index compares.
        var stamp: FileStamp {
            FileStamp(fileBytes: fileBytes, modifiedNanoseconds: modifiedNanoseconds, changedNanoseconds: changedNanoseconds,
                      device: identity.device, inode: identity.inode)
        }

        init(path: PathBytes, named: Bool, info: stat) {
            self.path = path
            self.named = named
            regular = (info.st_mode & S_IFMT) == S_IFREG
            let stamp = FileStamp(info)
            fileBytes = stamp.fileBytes
            modifiedNanoseconds = stamp.modifiedNanoseconds
            changedNanoseconds = stamp.changedNanoseconds
            identity = OutputDestination.Identity(device: stamp.device, inode: stamp.inode)
        }

        init(path: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) throws(TesseraError) {
            guard payload.count == Self.payloadBytes else {
                throw .system(operation: "scan (a damaged sort record)", errno: EIO, path: "(temporary file)")
            }
            self.path = PathBytes(Array(path))
            named = payload[0] != 0
            regular = payload[1] != 0
            func integer(_ index: Int) -> Int64 { Int64(littleEndian: payload.loadUnaligned(fromByteOffset: 2 + 8 * index, as: Int64.self)) }
            fileBytes = integer(0)
            modifiedNanoseconds = integer(1)
            identity = OutputDestination.Identity(device: UInt64(bitPattern: integer(2)), inode: UInt64(bitPattern: integer(3)))
            changedNanoseconds = integer(4)
        }

        var payload: [UInt8] {
            var bytes: [UInt8] = [named ? 1 : 0, regular ? 1 : 0]
            bytes.reserveCapacity(Self.payloadBytes)
            for value in [fileBytes, modifiedNanoseconds, Int64(bitPattern: identity.device), Int64(bitPattern: identity.inode),
                          changedNanoseconds] {
                withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
            }
            return bytes
        }
    }

    /// The walk: every selection rule and LeftOut count; each file found goes to the sorter.
    private struct Walk {
        let sorter: ExternalSort
        let selection: PhotoSelection
        let cancellation: RenderCancellation?
        let progress: (@Sendable (Int, Int) -> Void)?
        var skips: SkipSink
        var leftOut = LeftOut()
        var visited = Set<DirectoryIdentity>()
        /// Files handed to the sorter (a file both named and found in a folder counts twice
        /// here; the reading drops the second).
        var found = 0

        init(sorter: ExternalSort, selection: PhotoSelection, cancellation: RenderCancellation?,
             progress: (@Sendable (Int, Int) -> Void)?, skips: SkipSink) {
            self.sorter = sorter
            self.selection = selection
            self.cancellation = cancellation
            self.progress = progress
            self.skips = skips
        }

        mutating func add(_ candidate: Candidate) throws(TesseraError) {
            try sorter.append(key: candidate.path.bytes, payload: candidate.payload)
            found += 1
            if found % Reading.batchSize == 0 { progress?(0, found) }
        }

        /// A path named on the command line or in a list: a file is a named file, a folder is
        /// walked, a missing one is skipped.
        mutating func named(_ given: PathBytes) throws(TesseraError) {
            // One spelling per file: "./in/a.jpg" beside "in" is the same photo, counted once.
            let path = given.lexicallyNormal
            let text = path.display
            let last = path.bytes.split(separator: UInt8(ascii: "/")).last.map { String(decoding: $0, as: UTF8.self) } ?? text
            if selection.excludes(name: last, path: text) {
                leftOut.excluded += 1
                return
            }
            switch fileStatus(path) {
            case .failure(let code):
                // One path among several that is not there (a typo, a card unplugged) costs its
                // photos, not the run: skipped with the others, and refused by a strict run.
                skips.add(SkippedPhoto(path: text, reason: code.rawValue == ENOENT ? "no such file or folder" : errnoDescription(code.rawValue)))
            case .success(let info) where (info.st_mode & S_IFMT) == S_IFDIR:
                do {
                    try PhotoLibrary.collect(directory: path, info: info, walk: &self)
                } catch .cancelled {
                    throw .cancelled
                } catch {
                    skips.add(SkippedPhoto(path: text, error: error))
                }
            case .success(let info):
                try add(Candidate(path: path, named: true, info: info))
            }
        }
    }

    /// The sorted files, a batch at a time: repeated paths dropped, the cache asked, the misses'
    /// headers read in parallel, the photos appended in order.
    private struct Reading {
        /// Enough files for the workers to read in parallel, few enough that their paths and
        /// results are a few hundred KiB.
        static let batchSize = 1024
        let workers: Int
        let decoderMemoryBytes: Int
        /// The most a TIFF's tags may hold (TIFFFormat.scan).
        let tiffTagBytes: Int
        /// The most a library may hold whole to open a file (libheif a HEIF's items: PhotoFormat.scanHeader).
        let openBytes: Int
        let ownOutputs: Bool
        let cancellation: RenderCancellation?
        let progress: (@Sendable (Int, Int) -> Void)?
        /// The cache, until it fails: a header index that cannot be read or written (a full
        /// disk, a read-only cache folder) costs the scan its speed, never its photos.
        var cache: (any ScanCache)?
        var cacheReader: (any ScanCacheReader)?
        /// Why the cache stopped being used, or nil.
        var cacheError: TesseraError?
        let builder: PhotoTable.Builder
        var skips: SkipSink
        /// Files to read: `total` less the repeats dropped so far.
        var total: Int
        var done = 0
        var ignored = 0
        var leftOut = LeftOut()
        /// The last file taken, held until the next shows it is not repeated.
        var pending: Candidate?
        var batch: [Candidate] = []

        init(workers: Int, decoderMemoryBytes: Int, tiffTagBytes: Int, openBytes: Int, ownOutputs: Bool, cancellation: RenderCancellation?,
             progress: (@Sendable (Int, Int) -> Void)?, found: Int, cache: (any ScanCache)?, builder: PhotoTable.Builder,
             skips: SkipSink) throws(TesseraError) {
            self.workers = workers
            self.decoderMemoryBytes = decoderMemoryBytes
            self.tiffTagBytes = tiffTagBytes
            self.openBytes = openBytes
            self.ownOutputs = ownOutputs
            self.cancellation = cancellation
            self.progress = progress
            self.cache = cache
            self.builder = builder
            do throws(TesseraError) {
                cacheReader = try cache?.makeReader()
            } catch {
                self.cache = nil
                cacheError = error
            }
            self.skips = skips
            total = found
            batch.reserveCapacity(Self.batchSize)
        }

        /// The next file in path order. A path seen twice (named, and in a named folder; or
        /// named twice) is one file: named if either was.
        mutating func take(_ candidate: Candidate) throws(TesseraError) {
            if var held = pending, held.path == candidate.path {
                held.named = held.named || candidate.named
                pending = held
                total -= 1
                return
            }
            if let held = pending {
                batch.append(held)
                if batch.count >= Self.batchSize { try flush() }
            }
            pending = candidate
        }

        mutating func finish() throws(TesseraError) {
            if let held = pending { batch.append(held) }
            pending = nil
            try flush()
        }

        /// What each file of the batch is: from the cache when it knows the file unchanged,
        /// else read (each slot written by exactly one iteration).
        private mutating func flush() throws(TesseraError) {
            guard !batch.isEmpty else { return }
            if cancellation?.isCancelled == true { throw .cancelled }
            var known = [ScanCacheKind?](repeating: nil, count: batch.count)
            if let cacheReader {
                do throws(TesseraError) {
                    for (index, candidate) in batch.enumerated() where candidate.regular {
                        known[index] = try cacheReader.lookup(candidate.path, stamp: candidate.stamp)
                    }
                } catch {
                    known = [ScanCacheKind?](repeating: nil, count: batch.count)
                    dropCache(error)
                }
            }
            let misses = batch.indices.filter { known[$0] == nil }
            let files = misses.map { batch[$0].path }
            let (decoderMemoryBytes, tiffTagBytes, openBytes) = (self.decoderMemoryBytes, self.tiffTagBytes, self.openBytes)
            let (ownOutputs, progress) = (self.ownOutputs, self.progress)
            let headersRead = AtomicCounter()
            let (before, total) = (done + batch.count - misses.count, self.total)
            if misses.count < batch.count { progress?(before, total) }
            let results = mapInLanes(count: files.count, lanes: workers, cancellation: cancellation, scratch: {}) { index, _ in
                defer { progress?(before + headersRead.increment(), total) }
                return readPhoto(files[index], decoderMemoryBytes: decoderMemoryBytes, tiffTagBytes: tiffTagBytes,
                                 openBytes: openBytes, ownOutputs: ownOutputs)
            }
            if cancellation?.isCancelled == true { throw .cancelled }
            var read = [FileRead?](repeating: nil, count: batch.count)
            for (slot, result) in zip(misses, results) { read[slot] = result }
            var entries: [ScanCacheEntry] = []
            for (index, candidate) in batch.enumerated() {
                if let kind = known[index] {
                    try keep(candidate, found: Self.found(of: kind, path: candidate.path))
                } else if let result = read[index] {
                    try keep(candidate, found: result.found)
                    if cache != nil, let entry = Self.entry(candidate, read: result) { entries.append(entry) }
                }
            }
            if let cache, !entries.isEmpty {
                do throws(TesseraError) { try cache.record(entries) } catch { dropCache(error) }
            }
            done += batch.count
            batch.removeAll(keepingCapacity: true)
        }

        /// Stops using the cache after `error` (the first one is kept for the caller's warning).
        mutating func dropCache(_ error: TesseraError) {
            cache = nil
            cacheReader = nil
            if cacheError == nil { cacheError = error }
        }

        private static func found(of kind: ScanCacheKind, path: PathBytes) -> Result<Found, TesseraError> {
            switch kind {
            case .photo(let header): return .success(.photo(Photo(path: path.display, header: header, file: path), ownOutput: false))
            case .notAnImage: return .success(.notAnImage)
            case .video: return .success(.video)
            }
        }

        /// What the cache keeps of a file read: photos (not Tessera's own outputs, which a
        /// later run may leave out), non-images and videos, only when the file opened is the one
        /// the walk stat'ed (same inode and size); failures are read again next time.
        private static func entry(_ candidate: Candidate, read: FileRead) -> ScanCacheEntry? {
            guard candidate.regular, read.identity == candidate.identity, read.fileBytes == candidate.fileBytes else { return nil }
            let kind: ScanCacheKind
            switch read.found {
            case .success(.photo(let photo, false)): kind = .photo(photo.header)
            case .success(.notAnImage): kind = .notAnImage
            case .success(.video): kind = .video
            default: return nil
            }
            return ScanCacheEntry(path: candidate.path, stamp: candidate.stamp, kind: kind)
        }

        /// Keeps the photo (with the walk's stat) or the warning.
        private mutating func keep(_ candidate: Candidate, found: Result<Found, TesseraError>) throws(TesseraError) {
            switch found {
            case .success(.photo(let photo, _)):
                try builder.append(Photo(path: photo.path, header: photo.header, file: candidate.path, identity: candidate.identity,
                                         fileBytes: candidate.fileBytes, modifiedNanoseconds: candidate.modifiedNanoseconds,
                                         changedNanoseconds: candidate.changedNanoseconds))
            case .success(.ownOutput): leftOut.ownOutputs += 1
            case .success(.video): leftOut.videos += 1
            case .success(.notAnImage) where !candidate.named && !Formats.hasPhotoSuffix(candidate.path.display):
                // Sidecars, notes, other files under their own names: not photos, no warning.
                ignored += 1
            case .success(.notAnImage):
                // An empty file named like a photo (a copy that never ran, a sync placeholder)
                // is said to be empty: "not an image" sent people looking at its format.
                skips.add(SkippedPhoto(path: candidate.path.display,
                                       reason: candidate.fileBytes == 0 ? "the file is empty (0 bytes)" : PhotoLibrary.notAnImageReason))
            case .failure(let error):
                skips.add(SkippedPhoto(path: candidate.path.display, error: error))
            }
        }
    }

    private struct DirectoryIdentity: Hashable {
        let device: UInt64
        let inode: UInt64
    }

    /// Walks `directory` depth first, its subfolders in byte order (so which of two paths to one
    /// folder is taken does not depend on the file system's listing order). The files go to the
    /// sorter as they are listed; only the subfolders wait, and only their names.
    private static func collect(directory: PathBytes, info: stat, walk: inout Walk) throws(TesseraError) {
        let identity = DirectoryIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        guard walk.visited.insert(identity).inserted else { return }  // a symlink loop, or seen already
        var folders: [[UInt8]] = []  // names only: a stat is 144 bytes, and a folder may hold 100,000 folders
        let selection = walk.selection
        // By bytes, end to end: a name that is not UTF-8 is still a file that can be opened.
        try forEachDirectoryEntry(directory) { (name: [UInt8]) throws(TesseraError) in
            if walk.cancellation?.isCancelled == true { throw .cancelled }
            let path = directory.appending(name)
            // Hidden entries (".DS_Store", ".trash/", editors' copies) are not looked at.
            if !selection.includeHidden && name.first == UInt8(ascii: ".") {
                walk.leftOut.hidden += 1
                return
            }
            let text = String(decoding: name, as: UTF8.self)
            if selection.excludes(name: text, path: path.display) {
                walk.leftOut.excluded += 1
                return
            }
            switch fileStatus(path) {
            case .failure(let code):
                if code.rawValue == ENOENT || code.rawValue == ELOOP {
                    walk.skips.add(SkippedPhoto(path: path.display, reason: code.rawValue == ELOOP ? "symlink loop" : "dangling symlink"))
                } else {
                    walk.skips.add(SkippedPhoto(path: path.display, reason: errnoDescription(code.rawValue)))
                }
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFDIR && PhotoSelection.thumbnailFolders.contains(text):
                walk.leftOut.thumbnailFolders += 1
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFDIR && !selection.includeOwnOutputs && text.hasSuffix("_files")
                && isRegularFile(directory.appending(Array(name.dropLast(6)) + Array(".dzi".utf8))):
                // A Deep Zoom pyramid's tiles, beside its NAME.dzi: thousands of tiles, none a photo.
                walk.leftOut.ownOutputs += 1
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFDIR:
                folders.append(name)
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFREG:
                try walk.add(Candidate(path: path, named: false, info: entry))
            case .success:
                // FIFOs, sockets, devices: never opened. Reported only when named like a photo.
                if Formats.hasPhotoSuffix(text) {
                    walk.skips.add(SkippedPhoto(path: path.display, reason: "not a regular file"))
                }
            }
        }
        folders.sort { $0.lexicographicallyPrecedes($1) }
        for name in folders {
            let path = directory.appending(name)
            // Stat again: a folder that went away since the listing is skipped like any other.
            guard case .success(let info) = fileStatus(path), (info.st_mode & S_IFMT) == S_IFDIR else { continue }
            do {
                try collect(directory: path, info: info, walk: &walk)
            } catch .cancelled {
                throw .cancelled
            } catch {
                walk.skips.add(SkippedPhoto(path: path.display, error: error))
            }
        }
    }

    /// Calls `body` with each path of `list` (bytes; blank lines left out; in a line-separated
    /// list a trailing CR dropped, as a list saved on Windows has), reading 64 KiB at a time: a
    /// list of a million paths is never held. `-` is standard input; a FIFO (a shell's
    /// `<(find ...)`) is read as it is written.
    /// Throws `.cancelled` once `cancellation` is, between reads and while it waits for one: a
    /// list that never ends (a pipe that keeps writing), a pipe whose writer is slow and a FIFO
    /// nobody has opened yet are stopped by Ctrl-C like the rest of the scan. (Signals never
    /// interrupt a read here: they arrive through Dispatch. So a read starts only once poll
    /// says it will not block, and a FIFO is opened without waiting for its writer.)
    static func forEachLine(of list: PhotoList, cancellation: RenderCancellation? = nil,
                            _ body: ([UInt8]) throws(TesseraError) -> Void) throws(TesseraError) {
        let file = list.path == "-" ? FileDescriptor(rawValue: 0, path: "(standard input)")
            : try FileDescriptor.open(list.path, flags: O_RDONLY | O_NONBLOCK)
        defer { if list.path != "-" { file.close() } }
        // Opened without waiting; read as any file (blocking, once poll says there is data).
        if list.path != "-" { _ = system_clear_nonblocking(file.rawValue) }
        let separator = list.nulSeparated ? UInt8(0) : UInt8(ascii: "\n")
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        func emit() throws(TesseraError) {
            defer { pending.removeAll(keepingCapacity: true) }
            if !list.nulSeparated && pending.last == UInt8(ascii: "\r") { pending.removeLast() }
            // No path holds a NUL byte: a line that does is a NUL-separated list read as lines
            // (find -print0 without -0), whose first path would otherwise stand for all of them.
            if !list.nulSeparated && pending.contains(0) {
                throw .invalidSettings("the list \(list.path == "-" ? "on standard input" : list.path) holds NUL bytes, which no path can: "
                                       + "it is separated by NUL bytes (find -print0); give -0 to read it so")
            }
            if !pending.isEmpty { try body(pending) }
        }
        while true {
            if cancellation?.isCancelled == true { throw .cancelled }
            if let cancellation {
                // Four times a second, until there is something to read (or the end).
                while !system_poll_readable(file.rawValue, milliseconds: 250) {
                    if cancellation.isCancelled { throw .cancelled }
                }
            }
            let count = try chunk.withUnsafeMutableBytes { buffer in
                Result { () throws(TesseraError) in try file.read(into: buffer) }
            }.get()
            // The end, or a signal that stopped the run while it waited: not a list that ended.
            if count == 0 && cancellation?.isCancelled == true { throw .cancelled }
            if count == 0 { break }
            var start = 0
            for i in 0..<count where chunk[i] == separator {
                try append(chunk[start..<i])
                try emit()
                start = i + 1
            }
            try append(chunk[start..<count])
        }
        try emit()

        // A hostile list (one endless line: /dev/zero) costs a bounded buffer, then an error,
        // as soon as the line is too long (not at its end, which may never come).
        func append(_ bytes: ArraySlice<UInt8>) throws(TesseraError) {
            if pending.count + bytes.count > maximumListLine {
                throw .invalidSettings("the list \(list.path) has a line longer than any path (\(maximumListLine) bytes or more): "
                                       + "it is not a list of paths")
            }
            pending.append(contentsOf: bytes)
        }
    }

    /// Past this many pixels, a photo in a format that has no scaled decoding (all but JPEG and
    /// a RAW file's JPEG preview: every pixel is decoded, whatever the cell) must bring a byte
    /// of file for every `pixelsPerFileByte` of its first `densePixels`, and one for every
    /// `pixelsPerFileByteBeyond` of the rest.
    static let freePixels: Int64 = 100_000_000
    static let densePixels: Int64 = 1_000_000_000
    static let pixelsPerFileByte: Int64 = 200
    static let pixelsPerFileByteBeyond: Int64 = 20

    /// Why a photo's picture is more work than its file can honestly ask for, or nil. Each
    /// format's own check bounds the pixels by what its compression can reach (PNG's deflate:
    /// 1,032 bytes a byte), which still let a 583 KB 1-bit PNG of 62,000 x 62,000 px take 258 s
    /// of decoding, an 11 KB HEIC grid of one tile referenced 4,096 times over a minute and a
    /// 1.6 MB GIF of a 65,535 px screen 28 s a cell (a helper's files). Photos compress to a
    /// byte for every 2 to 20 px (a flat HEIC), so 200 px a byte refuses no photo; up to 100 MP
    /// anything is drawn. Flat pictures reach 200 px a byte honestly (a 144 MP map-like PNG of
    /// 6 colours: 150 px a byte; a 1-bit line drawing: 56), and decode in seconds. But a 22 MB
    /// 1-bit PNG of 60,000 x 60,000 px (163 px a byte) took 232 s as a mosaic's target (a
    /// helper's file). So pixels past the first gigapixel must bring a byte for every 20, which
    /// a photograph does (PNG and TIFF 0.3 to 3 px a byte, HEIC and WebP 2 to 20): that file
    /// would need 135 MB. A flat drawing of several gigapixels is refused; one of 1 GP at 200 px
    /// a byte, the most this allows, takes about a minute in 1-bit.
    /// (PNG asks it again of its IDAT chunks' bytes: zeros after IEND do not buy pixels.)
    static func tooMuchPicture(_ header: PhotoHeader, fileBytes: Int64) -> String? {
        guard header.format != .jpeg, header.format != .raw else { return nil }
        let pixels = Int64(header.width) * Int64(header.height)
        guard pixels > freePixels else { return nil }
        let needed = min(pixels, densePixels) / pixelsPerFileByte + max(0, pixels - densePixels) / pixelsPerFileByteBeyond
        guard needed > fileBytes else { return nil }
        return "its picture of \(header.width) x \(header.height) px (\(pixels / 1_000_000) MP) is far more than a "
            + "\(formatBytes(fileBytes)) photo holds (it would need \(formatBytes(needed)): past \(freePixels / 1_000_000) MP, "
            + "a byte for every \(pixelsPerFileByte) px of the first \(densePixels / 1_000_000) MP and every \(pixelsPerFileByteBeyond) px of the rest): "
            + "every pixel would be decoded, so it is not drawn (a decompression bomb?)"
    }

    /// The longest line a photo list may have: far past PATH_MAX (4,096).
    static let maximumListLine = 1 << 16

    static let notAnImageReason = "not an image Tessera reads (\(Formats.names))"

    /// What a file of the scan turned out to be.
    private enum Found {
        /// A photo (`ownOutput`: one of Tessera's own, taken because the selection asks).
        case photo(Photo, ownOutput: Bool)
        /// One of Tessera's own outputs.
        case ownOutput
        /// Not an image at all (a sidecar, notes).
        case notAnImage
        case video
    }

    /// What reading one file gave, and the size and identity of the file opened (nil when it
    /// could not be opened).
    private struct FileRead {
        var found: Result<Found, TesseraError>
        var fileBytes: Int64?
        var identity: OutputDestination.Identity?
    }

    /// The photo at `file`, or what else it is.
    private static func readPhoto(_ file: PathBytes, decoderMemoryBytes: Int, tiffTagBytes: Int, openBytes: Int,
                                  ownOutputs: Bool) -> FileRead {
        let path = file.display
        var read = FileRead(found: .success(.notAnImage))
        do {
            let opened = try PhotoFile.open(file)
            (read.fileBytes, read.identity) = (opened.fileBytes, opened.identity)
            let header: PhotoHeader
            var isOwnOutput = false
            let sniffed = try opened.sniff()
            switch sniffed {
            case .readable(let format): opened.readAhead(Formats.reader(for: format).readsAhead(decoding: false))
            case .ownOutput: opened.readAhead(JPEGFormat.readsAhead(decoding: false))
            default: break
            }
            switch sniffed {
            case .readable(let format) where format == .tiff && (try? RAWStructure(photo: opened).isCameraRAW) == true:
                // (A camera RAW is drawn from its preview: libtiff never opens it, whatever its tags hold.)
                header = try RAWFormat.header(of: opened, decoderMemoryBytes: decoderMemoryBytes)
            case .readable(let format) where format == .tiff:
                let scanned = try TIFFFormat.scan(opened, tagBytes: tiffTagBytes) { (cap) throws(TesseraError) -> PhotoHeader? in
                    if TIFFFormat.isOwnOutput(opened, decoderMemoryBytes: decoderMemoryBytes, tagBytes: cap) {
                        guard ownOutputs else { return nil }
                        isOwnOutput = true
                    }
                    return try TIFFFormat.header(of: opened, decoderMemoryBytes: decoderMemoryBytes, tagBytes: cap)
                }
                guard let scanned else {
                    read.found = .success(.ownOutput)
                    return read
                }
                header = scanned
            case .readable(let format):
                header = try Formats.reader(for: format).scanHeader(of: opened, decoderMemoryBytes: decoderMemoryBytes,
                                                                    openBytes: openBytes)
            case .ownOutput where ownOutputs:
                header = try JPEGFormat.header(of: opened, decoderMemoryBytes: decoderMemoryBytes)
                isOwnOutput = true
            case .unreadable(let format):
                // An image in a format Tessera cannot read is named in a warning (and refused by
                // a strict run), never left out silently.
                read.found = .failure(.unreadablePhoto(path: path, reason: "\(format), which Tessera does not read"))
                return read
            case .notAnImage:
                return read
            case .video:
                read.found = .success(.video)
                return read
            case .ownOutput:
                read.found = .success(.ownOutput)
                return read
            }
            guard header.width > 0, header.height > 0 else {
                read.found = .failure(.unreadablePhoto(path: path, reason: "image has no pixels"))
                return read
            }
            if let problem = tooMuchPicture(header, fileBytes: opened.fileBytes) {
                read.found = .failure(.unreadablePhoto(path: path, reason: problem))
                return read
            }
            read.found = .success(.photo(Photo(path: path, header: header, file: file, identity: opened.identity), ownOutput: isOwnOutput))
        } catch {
            read.found = .failure(error)
        }
        return read
    }

    private static func isRegularFile(_ path: PathBytes) -> Bool {
        if case .success(let info) = fileStatus(path) { return (info.st_mode & S_IFMT) == S_IFREG }
        return false
    }
}
