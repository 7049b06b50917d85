// PhotoLibrary.swift — finds the photos (JPEG, PNG, WebP, HEIF/HEIC, AVIF, GIF, TIFF, camera
// RAW previews) under the paths a user gives.
//
// Files are recognised by content (their first bytes), not by extension. Directories
// are searched recursively; symlinks are followed, but each directory is entered once (by device
// and inode), so a symlink loop ends. Only regular files are opened, with O_NONBLOCK, so a FIFO
// named like a photo is never read. Every candidate's header is read once here, so unreadable
// photos are known (and reported) before any rendering starts.
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

    public init(path: String, header: PhotoHeader, file: PathBytes? = nil, identity: OutputDestination.Identity? = nil,
                fileBytes: Int64? = nil, modifiedNanoseconds: Int64? = nil) {
        self.path = path
        self.header = header
        self.file = file ?? PathBytes(path)
        self.identity = identity
        self.fileBytes = fileBytes
        self.modifiedNanoseconds = modifiedNanoseconds
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
    /// Usable photos, sorted by path.
    public var photos: PhotoTable
    /// Files that look like photos (an image's first bytes, or given by name) but cannot be used.
    public var skipped: [SkippedPhoto]
    /// Files in searched directories that are not images and not named like one (sidecars,
    /// notes): left out silently. A non-image named .jpg is in `skipped`, with a warning.
    public var ignoredNonJPEGCount: Int
    /// The paths that were searched.
    public var searched: [String] = []
    /// What the selection left out (hidden, thumbnail folders, excluded).
    public var leftOut = LeftOut()

    /// Searches `paths` (files or directories). `workers` headers are read at once.
    /// A named path that does not exist or cannot be listed is skipped like a broken photo.
    /// Throws `.cancelled` once `cancellation` is (checked for every directory entry and header).
    ///
    /// Files are read as they are found, `Scan.batchSize` at a time, and only photos and
    /// warnings are kept: a folder of a hundred thousand sidecars, empty files or notes costs
    /// a batch while it is read, and nothing after it.
    /// `lists`: files naming photos or folders, one a line (PhotoList), taken as named paths.
    public static func scan(_ paths: [String], lists: [PhotoList] = [], workers: Int = 1, decoderMemoryBytes: Int = 64 << 20,
                            cancellation: RenderCancellation? = nil,
                            selection: PhotoSelection = PhotoSelection(),
                            progress: (@Sendable (Int, Int) -> Void)? = nil) throws(TesseraError) -> PhotoLibrary {
        // (Read whole for now: a streaming reader replaces this.)
        var paths = paths
        for list in lists {
            var text: [UInt8] = []
            let file = list.path == "-" ? fdopen(dup(0), "rb") : fopen(list.path, "rb")
            guard let file else { throw .system(operation: "open", errno: errno, path: list.path) }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = fread(&buffer, 1, buffer.count, file)
                if count <= 0 { break }
                text += buffer[0..<count]
            }
            fclose(file)
            let separator = list.nulSeparated ? UInt8(0) : UInt8(ascii: "\n")
            for line in text.split(separator: separator) where !line.isEmpty {
                paths.append(String(decoding: line, as: UTF8.self))
            }
        }
        var scan = Scan(workers: workers, decoderMemoryBytes: decoderMemoryBytes, ownOutputs: selection.includeOwnOutputs,
                        cancellation: cancellation, progress: progress)
        // A file reached twice (named, and inside a named folder) counts once, as the named one.
        // Keyed by the path's bytes: Swift's String equality is canonical, so "é.jpg" in NFC
        // and in NFD (two files) would compare equal.
        var visited = Set<DirectoryIdentity>()
        var named = Set<PathBytes>()
        for path in paths where !selection.excludes(name: String(path.split(separator: "/").last ?? Substring(path)), path: path) {
            if case .success(let info) = fileStatus(path), (info.st_mode & S_IFMT) != S_IFDIR { named.insert(PathBytes(path)) }
        }
        scan.named = named
        var namedTaken = Set<PathBytes>()
        progress?(0, 0)
        for path in paths {
            if selection.excludes(name: String(path.split(separator: "/").last ?? Substring(path)), path: path) {
                scan.leftOut.excluded += 1
                continue
            }
            switch fileStatus(path) {
            case .failure(let code):
                // One path among several that is not there (a typo, a card unplugged) costs its
                // photos, not the run: skipped with the others, and refused by a strict run.
                scan.skipped.append(SkippedPhoto(path: path, reason: code.rawValue == ENOENT ? "no such file or folder" : errnoDescription(code.rawValue)))
            case .success(let info) where (info.st_mode & S_IFMT) == S_IFDIR:
                do {
                    try collect(directory: PathBytes(path), info: info, scan: &scan, visited: &visited, selection: selection)
                } catch .cancelled {
                    throw .cancelled
                } catch {
                    scan.skipped.append(SkippedPhoto(path: path, error: error))
                }
            case .success:
                if namedTaken.insert(PathBytes(path)).inserted { try scan.add(PathBytes(path), named: true) }
            }
        }
        try scan.flush()
        scan.photos.sort { $0.file < $1.file }
        scan.skipped.sort { $0.path < $1.path }
        var library = PhotoLibrary(photos: PhotoTable(scan.photos), skipped: scan.skipped, ignoredNonJPEGCount: scan.ignored, searched: paths)
        library.leftOut = scan.leftOut
        return library
    }

    /// A scan in progress: the files found and not read yet (at most `batchSize`), and what the
    /// read ones gave.
    private struct Scan {
        /// Enough files for the workers to read in parallel, few enough that their paths and
        /// results are a few hundred KiB.
        static let batchSize = 1024
        let workers: Int
        let decoderMemoryBytes: Int
        let ownOutputs: Bool
        let cancellation: RenderCancellation?
        let progress: (@Sendable (Int, Int) -> Void)?
        /// Regular files named on the command line: a folder's walk leaves them to their name.
        var named = Set<PathBytes>()
        var batch: [(path: PathBytes, named: Bool)] = []
        var found = 0
        var read = 0
        var photos: [Photo] = []
        var skipped: [SkippedPhoto] = []
        var ignored = 0
        var leftOut = LeftOut()

        init(workers: Int, decoderMemoryBytes: Int, ownOutputs: Bool, cancellation: RenderCancellation?,
             progress: (@Sendable (Int, Int) -> Void)?) {
            self.workers = workers
            self.decoderMemoryBytes = decoderMemoryBytes
            self.ownOutputs = ownOutputs
            self.cancellation = cancellation
            self.progress = progress
            batch.reserveCapacity(Self.batchSize)
        }

        mutating func add(_ path: PathBytes, named: Bool) throws(TesseraError) {
            batch.append((path, named))
            found += 1
            if batch.count >= Self.batchSize { try flush() }
        }

        /// Reads the batch's headers in parallel (each slot is written by exactly one
        /// iteration) and keeps the photos and the warnings.
        mutating func flush() throws(TesseraError) {
            guard !batch.isEmpty else { return }
            let files = batch.map(\.path)
            let (decoderMemoryBytes, ownOutputs, progress) = (self.decoderMemoryBytes, self.ownOutputs, self.progress)
            let headersRead = AtomicCounter()
            let (before, found) = (read, self.found)
            let results = mapInLanes(count: files.count, lanes: workers, cancellation: cancellation, scratch: {}) { index, _ in
                defer { progress?(before + headersRead.increment(), found) }
                return readPhoto(files[index], decoderMemoryBytes: decoderMemoryBytes, ownOutputs: ownOutputs)
            }
            if cancellation?.isCancelled == true { throw .cancelled }
            for (candidate, result) in zip(batch, results) {
                switch result! {
                case .success(.photo(let photo)): photos.append(photo)
                case .success(.ownOutput): leftOut.ownOutputs += 1
                case .success(.video): leftOut.videos += 1
                case .success(.notAnImage) where !candidate.named && !Formats.hasPhotoSuffix(candidate.path.display):
                    // Sidecars, notes, other files under their own names: not photos, no warning.
                    ignored += 1
                case .success(.notAnImage):
                    skipped.append(SkippedPhoto(path: candidate.path.display, reason: notAnImageReason))
                case .failure(let error):
                    skipped.append(SkippedPhoto(path: candidate.path.display, error: error))
                }
            }
            read += batch.count
            batch.removeAll(keepingCapacity: true)
        }
    }

    private struct DirectoryIdentity: Hashable {
        let device: UInt64
        let inode: UInt64
    }

    /// Walks `directory` depth first, its subfolders in byte order (so which of two paths to one
    /// folder is taken does not depend on the file system's listing order). The files are
    /// handed to `scan` as they are listed; only the subfolders wait, and only their names.
    private static func collect(directory: PathBytes, info: stat, scan: inout Scan, visited: inout Set<DirectoryIdentity>,
                                selection: PhotoSelection) throws(TesseraError) {
        let identity = DirectoryIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        guard visited.insert(identity).inserted else { return }  // a symlink loop, or seen already
        var folders: [[UInt8]] = []  // names only: a stat is 144 bytes, and a folder may hold 100,000 folders
        // By bytes, end to end: a name that is not UTF-8 is still a file that can be opened.
        try forEachDirectoryEntry(directory) { (name: [UInt8]) throws(TesseraError) in
            if scan.cancellation?.isCancelled == true { throw .cancelled }
            let path = directory.appending(name)
            // Hidden entries (".DS_Store", ".trash/", editors' copies) are not looked at.
            if !selection.includeHidden && name.first == UInt8(ascii: ".") {
                scan.leftOut.hidden += 1
                return
            }
            let text = String(decoding: name, as: UTF8.self)
            if selection.excludes(name: text, path: path.display) {
                scan.leftOut.excluded += 1
                return
            }
            switch fileStatus(path) {
            case .failure(let code):
                if code.rawValue == ENOENT || code.rawValue == ELOOP {
                    scan.skipped.append(SkippedPhoto(path: path.display, reason: code.rawValue == ELOOP ? "symlink loop" : "dangling symlink"))
                } else {
                    scan.skipped.append(SkippedPhoto(path: path.display, reason: errnoDescription(code.rawValue)))
                }
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFDIR && PhotoSelection.thumbnailFolders.contains(text):
                scan.leftOut.thumbnailFolders += 1
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFDIR && !selection.includeOwnOutputs && text.hasSuffix("_files")
                && isRegularFile(directory.appending(Array(name.dropLast(6)) + Array(".dzi".utf8))):
                // A Deep Zoom pyramid's tiles, beside its NAME.dzi: thousands of tiles, none a photo.
                scan.leftOut.ownOutputs += 1
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFDIR:
                folders.append(name)
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFREG:
                if !scan.named.contains(path) { try scan.add(path, named: false) }
            case .success:
                // FIFOs, sockets, devices: never opened. Reported only when named like a photo.
                if Formats.hasPhotoSuffix(text) {
                    scan.skipped.append(SkippedPhoto(path: path.display, reason: "not a regular file"))
                }
            }
        }
        folders.sort { $0.lexicographicallyPrecedes($1) }
        for name in folders {
            let path = directory.appending(name)
            // Stat again: a folder that went away since the listing is skipped like any other.
            guard case .success(let info) = fileStatus(path), (info.st_mode & S_IFMT) == S_IFDIR else { continue }
            do {
                try collect(directory: path, info: info, scan: &scan, visited: &visited, selection: selection)
            } catch .cancelled {
                throw .cancelled
            } catch {
                scan.skipped.append(SkippedPhoto(path: path.display, error: error))
            }
        }
    }

    private static let notAnImageReason = "not an image Tessera reads (\(Formats.names))"

    /// What a file of the scan turned out to be.
    private enum Found {
        case photo(Photo)
        /// One of Tessera's own outputs.
        case ownOutput
        /// Not an image at all (a sidecar, notes).
        case notAnImage
        case video
    }

    /// The photo at `file`, or what else it is.
    private static func readPhoto(_ file: PathBytes, decoderMemoryBytes: Int, ownOutputs: Bool) -> Result<Found, TesseraError> {
        let path = file.display
        do {
            let opened = try PhotoFile.open(file)
            let header: PhotoHeader
            switch try opened.sniff() {
            case .readable(let format):
                header = try Formats.reader(for: format).header(of: opened, decoderMemoryBytes: decoderMemoryBytes)
            case .ownOutput where ownOutputs:
                header = try JPEGFormat.header(of: opened, decoderMemoryBytes: decoderMemoryBytes)
            case .unreadable(let format):
                // An image in a format Tessera cannot read is named in a warning (and refused by
                // a strict run), never left out silently.
                return .failure(.unreadablePhoto(path: path, reason: "\(format), which Tessera does not read"))
            case .notAnImage:
                return .success(.notAnImage)
            case .video:
                return .success(.video)
            case .ownOutput:
                return .success(.ownOutput)
            }
            guard header.width > 0, header.height > 0 else {
                return .failure(.unreadablePhoto(path: path, reason: "image has no pixels"))
            }
            return .success(.photo(Photo(path: path, header: header, file: file, identity: opened.identity)))
        } catch {
            return .failure(error)
        }
    }

    private static func isRegularFile(_ path: PathBytes) -> Bool {
        if case .success(let info) = fileStatus(path) { return (info.st_mode & S_IFMT) == S_IFREG }
        return false
    }
}
