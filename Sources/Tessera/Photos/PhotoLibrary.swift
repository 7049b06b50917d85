// PhotoLibrary.swift — finds the photos (JPEG, PNG, WebP, HEIF/HEIC, AVIF) under the paths a
// user gives.
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

    public init(path: String, header: PhotoHeader, file: PathBytes? = nil, identity: OutputDestination.Identity? = nil) {
        self.path = path
        self.header = header
        self.file = file ?? PathBytes(path)
        self.identity = identity
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
    /// Files and folders matching an `--exclude` pattern.
    public var excluded = 0
    /// JPEGs Tessera rendered (they carry its mark) and Deep Zoom tile folders (`NAME_files`
    /// beside `NAME.dzi`): an earlier run's output written among the photos.
    public var ownOutputs = 0

    public var total: Int { hidden + thumbnailFolders + excluded + ownOutputs }
}

/// A photo left out, and why.
public struct SkippedPhoto: Equatable, Sendable {
    public let path: String
    public let reason: String
}

/// The photos found under some paths.
public struct PhotoLibrary: Sendable {
    /// Usable photos, sorted by path.
    public var photos: [Photo]
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
    public static func scan(_ paths: [String], workers: Int = 1, decoderMemoryBytes: Int = 64 << 20,
                            cancellation: RenderCancellation? = nil,
                            selection: PhotoSelection = PhotoSelection(),
                            progress: (@Sendable (Int, Int) -> Void)? = nil) throws(TesseraError) -> PhotoLibrary {
        var candidates: [(path: PathBytes, named: Bool)] = []
        var skipped: [SkippedPhoto] = []
        var ignored = 0
        var visited = Set<DirectoryIdentity>()
        var leftOut = LeftOut()
        for path in paths {
            if selection.excludes(name: String(path.split(separator: "/").last ?? Substring(path)), path: path) {
                leftOut.excluded += 1
                continue
            }
            switch fileStatus(path) {
            case .failure(let code):
                // One path among several that is not there (a typo, a card unplugged) costs its
                // photos, not the run: skipped with the others, and refused under --strict.
                skipped.append(SkippedPhoto(path: path, reason: code.rawValue == ENOENT ? "no such file or folder" : errnoDescription(code.rawValue)))
            case .success(let info) where (info.st_mode & S_IFMT) == S_IFDIR:
                do {
                    try collect(directory: PathBytes(path), info: info, into: &candidates, skipped: &skipped, visited: &visited,
                                selection: selection, leftOut: &leftOut, cancellation: cancellation)
                } catch .cancelled {
                    throw .cancelled
                } catch {
                    skipped.append(SkippedPhoto(path: path, reason: reason(of: error)))
                }
            case .success:
                candidates.append((PathBytes(path), true))
            }
        }
        // A file reached twice (named, and inside a named folder) counts once. Keyed by the
        // path's bytes: Swift's String equality is canonical, so "é.jpg" in NFC and in NFD
        // (two files) would compare equal.
        var seen: [PathBytes: Int] = [:]
        var unique: [(path: PathBytes, named: Bool)] = []
        for candidate in candidates {
            if let index = seen[candidate.path] {
                unique[index].named = unique[index].named || candidate.named
            } else {
                seen[candidate.path] = unique.count
                unique.append(candidate)
            }
        }
        candidates = unique
        // Read headers in parallel; each slot is written by exactly one iteration.
        let files = candidates.map(\.path)
        let headersRead = AtomicCounter()
        progress?(0, files.count)
        let results = mapInLanes(count: files.count, lanes: workers, cancellation: cancellation, scratch: {}) { index, _ in
            defer { progress?(headersRead.increment(), files.count) }
            return readPhoto(files[index], decoderMemoryBytes: decoderMemoryBytes, ownOutputs: selection.includeOwnOutputs)
        }
        if cancellation?.isCancelled == true { throw .cancelled }
        var photos: [Photo] = []
        for (candidate, result) in zip(candidates, results) {
            switch result! {
            case .success(.some(let photo)): photos.append(photo)
            case .success(.none): leftOut.ownOutputs += 1
            case .failure(.unreadablePhoto(_, let reason))
                where reason == notJPEGReason && !candidate.named && !looksLikePhotoName(candidate.path.display):
                // Sidecars, notes, other files under their own names: not photos, no warning.
                ignored += 1
            case .failure(let error):
                skipped.append(SkippedPhoto(path: candidate.path.display, reason: reason(of: error)))
            }
        }
        photos.sort { $0.file < $1.file }
        skipped.sort { $0.path < $1.path }
        var library = PhotoLibrary(photos: photos, skipped: skipped, ignoredNonJPEGCount: ignored, searched: paths)
        library.leftOut = leftOut
        return library
    }

    private struct DirectoryIdentity: Hashable {
        let device: UInt64
        let inode: UInt64
    }

    private static func collect(directory: PathBytes, info: stat, into candidates: inout [(path: PathBytes, named: Bool)],
                                skipped: inout [SkippedPhoto], visited: inout Set<DirectoryIdentity>,
                                selection: PhotoSelection, leftOut: inout LeftOut,
                                cancellation: RenderCancellation?) throws(TesseraError) {
        let identity = DirectoryIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        guard visited.insert(identity).inserted else { return }  // a symlink loop, or seen already
        // By bytes, end to end: a name that is not UTF-8 is still a file that can be opened.
        let names = try listDirectoryBytes(directory).sorted { $0.lexicographicallyPrecedes($1) }
        for name in names {
            if cancellation?.isCancelled == true { throw .cancelled }
            let path = directory.appending(name)
            // Hidden entries (".DS_Store", ".trash/", editors' copies) are not looked at.
            if !selection.includeHidden && name.first == UInt8(ascii: ".") {
                leftOut.hidden += 1
                continue
            }
            let text = String(decoding: name, as: UTF8.self)
            if selection.excludes(name: text, path: path.display) {
                leftOut.excluded += 1
                continue
            }
            switch fileStatus(path) {
            case .failure(let code):
                if code.rawValue == ENOENT || code.rawValue == ELOOP {
                    skipped.append(SkippedPhoto(path: path.display, reason: code.rawValue == ELOOP ? "symlink loop" : "dangling symlink"))
                } else {
                    skipped.append(SkippedPhoto(path: path.display, reason: errnoDescription(code.rawValue)))
                }
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFDIR && PhotoSelection.thumbnailFolders.contains(text):
                leftOut.thumbnailFolders += 1
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFDIR && !selection.includeOwnOutputs && text.hasSuffix("_files")
                && isRegularFile(directory.appending(Array(name.dropLast(6)) + Array(".dzi".utf8))):
                // A Deep Zoom pyramid's tiles, beside its NAME.dzi: thousands of tiles, none a photo.
                leftOut.ownOutputs += 1
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFDIR:
                do {
                    try collect(directory: path, info: entry, into: &candidates, skipped: &skipped, visited: &visited,
                                selection: selection, leftOut: &leftOut, cancellation: cancellation)
                } catch .cancelled {
                    throw .cancelled
                } catch {
                    skipped.append(SkippedPhoto(path: path.display, reason: reason(of: error)))
                }
            case .success(let entry) where (entry.st_mode & S_IFMT) == S_IFREG:
                candidates.append((path, false))
            case .success:
                // FIFOs, sockets, devices: never opened. Reported only when named like a photo.
                if looksLikePhotoName(String(decoding: name, as: UTF8.self)) {
                    skipped.append(SkippedPhoto(path: path.display, reason: "not a regular file"))
                }
            }
        }
    }

    private static let notJPEGReason = "not an image Tessera reads (JPEG, PNG, WebP, HEIF/HEIC, AVIF)"

    /// The photo at `file`, or nil for one of Tessera's own outputs.
    private static func readPhoto(_ file: PathBytes, decoderMemoryBytes: Int, ownOutputs: Bool) -> Result<Photo?, TesseraError> {
        let path = file.display
        do {
            let opened = try PhotoFile.open(file)
            let header: PhotoHeader
            switch try opened.sniff() {
            case .readable(.jpeg), .ownOutput where ownOutputs:
                header = try ScaledJPEGReader(photo: opened, decoderMemoryBytes: decoderMemoryBytes).readHeader()
            case .readable(.png): header = try PNGReader(photo: opened).header
            case .readable(.webp): header = try WebPReader(photo: opened).header
            case .readable(.heif): header = try HEIFReader(photo: opened).header
            case .unreadable(let format):
                // An image in a format Tessera cannot read is named in a warning (and refused by
                // --strict), never left out silently.
                return .failure(.unreadablePhoto(path: path, reason: "\(format), which Tessera does not read"))
            case .notAnImage:
                return .failure(.unreadablePhoto(path: path, reason: notJPEGReason))
            case .ownOutput:
                return .success(nil)
            }
            guard header.width > 0, header.height > 0 else {
                return .failure(.unreadablePhoto(path: path, reason: "image has no pixels"))
            }
            return .success(Photo(path: path, header: header, file: file, identity: opened.identity))
        } catch {
            return .failure(error)
        }
    }

    private static func reason(of error: TesseraError) -> String {
        if case .unreadablePhoto(_, let reason) = error { return reason }
        if case .system(let operation, let code, _) = error { return "\(operation): \(errnoDescription(code))" }
        return error.description
    }

    private static func isRegularFile(_ path: PathBytes) -> Bool {
        if case .success(let info) = fileStatus(path) { return (info.st_mode & S_IFMT) == S_IFREG }
        return false
    }

    private static func looksLikePhotoName(_ name: String) -> Bool {
        let lower = name.lowercased()
        return [".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".webp", ".heic", ".heif", ".hif", ".avif"]
            .contains { lower.hasSuffix($0) }
    }
}
