// RenderRequest.swift — what to render and where: photos, their layout, the settings, and the
// outputs as values. Validated once, here, before any work; the renderer takes only a request.
//
// An output is a value (`RenderOutput`), not a path plus flags to reconcile: the plan reads
// what is written from the outputs, the renderer makes one sink per output. Adding an output
// kind means a case here, its sink, and its share of the plan.
import Glibc

/// One thing a render writes.
public enum RenderOutput: Equatable, Sendable {
    /// A baseline JPEG (at most 65,500 px a side).
    case jpeg(path: String)
    /// A Deep Zoom pyramid at DIR/NAME.dzi, with NAME_files and (with its viewer) NAME.html.
    case deepZoom(path: String, settings: DeepZoomSettings)
    /// The same pyramid in one file, DIR/NAME.szi: an uncompressed ZIP of NAME/NAME.dzi and
    /// NAME/NAME_files (the layout libvips writes), with the tiles of a `.deepZoom` of the same
    /// settings, and (with the viewer) DIR/NAME.html, which reads it by HTTP range requests.
    /// With a `.deepZoom` beside it the settings must be the same (one pyramid); of the same
    /// NAME in the same folder, the two share one page.
    case deepZoomArchive(path: String, settings: DeepZoomSettings)
    /// The same pyramid as IIIF Image API 3.0 level-0 static tiles in the folder DIR, served
    /// at `identifier` (an http or https address, info.json's `id`). Its tiles do not overlap.
    case iiif(path: String, settings: DeepZoomSettings, identifier: String)
    /// A tiled pyramidal TIFF at DIR/NAME.tif (or .tiff): JPEG tiles, every level a page
    /// (PyramidTIFFGeometry.swift), BigTIFF when it may pass 4 GiB. No side limit but the
    /// render's.
    case tiff(path: String, settings: PyramidTIFFSettings)

    /// The path the output is named by.
    public var path: String {
        switch self {
        case .jpeg(let path), .deepZoom(let path, _), .deepZoomArchive(let path, _), .iiif(let path, _, _), .tiff(let path, _): return path
        }
    }

    /// Whether `path` has a TIFF's form, DIR/NAME.tif or DIR/NAME.tiff (any case, NAME not empty).
    public static func isTIFFPath(_ path: String) -> Bool {
        let file = (path.split(separator: "/").last.map(String.init) ?? "").lowercased()
        return !path.hasSuffix("/") && ((file.hasSuffix(".tif") && file.count > 4) || (file.hasSuffix(".tiff") && file.count > 5))
    }

    /// Whether `path` has an SZI's form, DIR/NAME.szi (NAME not empty).
    public static func isDeepZoomArchivePath(_ path: String) -> Bool {
        let file = path.split(separator: "/").last.map(String.init) ?? ""
        return file.hasSuffix(".szi") && file.count > 4 && !path.hasSuffix("/")
    }

    /// Whether `path` has a Deep Zoom pyramid's form, DIR/NAME.dzi (NAME not empty).
    public static func isDeepZoomPath(_ path: String) -> Bool {
        let file = path.split(separator: "/").last.map(String.init) ?? ""
        return file.hasSuffix(".dzi") && file.count > 4 && !path.hasSuffix("/")
    }

    /// What kind of output, without where: what the plan needs.
    public var kind: OutputKind {
        switch self {
        case .jpeg: return .jpeg
        case .deepZoom(_, let settings), .deepZoomArchive(_, let settings), .iiif(_, let settings, _): return .deepZoom(settings)
        case .tiff(_, let settings): return .tiff(settings)
        }
    }

    /// Every name the output writes, with what each is: the JPEG; the pyramid's descriptor, tile
    /// folder and viewer page.
    public var files: [OutputFile] {
        switch self {
        case .jpeg(let path):
            return [OutputFile(path: path, role: "the JPEG", isFolder: false)]
        case .deepZoom(let path, let settings):
            var files = [OutputFile(path: path, role: "the Deep Zoom descriptor", isFolder: false)]
            if path.hasSuffix(".dzi") {
                let base = String(path.dropLast(4))
                files.append(OutputFile(path: base + "_files", role: "the Deep Zoom tiles", isFolder: true))
                if settings.viewer { files.append(OutputFile(path: base + ".html", role: DeepZoomViewer.pageRole, isFolder: false)) }
            }
            return files
        case .deepZoomArchive(let path, let settings):
            var files = [OutputFile(path: path, role: "the SZI", isFolder: false)]
            if settings.viewer && path.hasSuffix(".szi") {
                files.append(OutputFile(path: DeepZoomViewer.pagePath(for: path), role: DeepZoomViewer.pageRole, isFolder: false))
            }
            return files
        case .iiif(let path, _, _):
            return [OutputFile(path: path, role: "the IIIF folder", isFolder: true)]
        case .tiff(let path, _):
            return [OutputFile(path: path, role: "the TIFF", isFolder: false)]
        }
    }
}

/// What an output is, without its path.
public enum OutputKind: Equatable, Sendable {
    case jpeg
    case deepZoom(DeepZoomSettings)
    case tiff(PyramidTIFFSettings)
}

/// A name an output writes.
public struct OutputFile: Equatable, Sendable {
    public let path: String
    /// What it is, for messages ("the JPEG", "the Deep Zoom tiles").
    public let role: String
    public let isFolder: Bool

    public init(path: String, role: String, isFolder: Bool) {
        self.path = path
        self.role = role
        self.isFolder = isFolder
    }
}

/// Everything a render needs.
public struct RenderRequest: Sendable {
    public var photos: PhotoTable
    public var layout: CellLayout
    public var settings: RenderSettings
    /// At most one of each kind; at least one.
    public var outputs: [RenderOutput]
    /// A mosaic's per-cell colour shift toward its target, applied as cells are drawn.
    public var tint: CellTint?

    public init(photos: PhotoTable, layout: CellLayout, settings: RenderSettings = RenderSettings(), outputs: [RenderOutput],
                tint: CellTint? = nil) {
        self.photos = photos
        self.layout = layout
        self.settings = settings
        self.outputs = outputs
        self.tint = tint
    }

    public init(photos: [Photo], layout: CellLayout, settings: RenderSettings = RenderSettings(), outputs: [RenderOutput],
                tint: CellTint? = nil) {
        self.init(photos: PhotoTable(photos), layout: layout, settings: settings, outputs: outputs, tint: tint)
    }

    /// The longest side a preview is made at, about (`preview(to:)`).
    public static let previewLongSide = 2_000

    /// A preview of this request: the same layout, photos and tint, every cell scaled by one
    /// factor so the picture's longer side is about `longSide` px (a cell at least 1 px, never
    /// larger than the request's), written as a JPEG to `path`. It shares the plan's
    /// choices, so what a person tunes on it is what the full render draws.
    public func preview(to path: String, longSide: Int = RenderRequest.previewLongSide) -> RenderRequest {
        let scale = min(1, Double(longSide) / Double(max(layout.width, layout.height)))
        return RenderRequest(photos: photos, layout: layout.scaled(by: scale), settings: settings,
                             outputs: [.jpeg(path: path)], tint: tint)
    }

    public var jpegPath: String? {
        for case .jpeg(let path) in outputs { return path }
        return nil
    }

    public var deepZoomPath: String? {
        for case .deepZoom(let path, _) in outputs { return path }
        return nil
    }

    public var deepZoomArchivePath: String? {
        for case .deepZoomArchive(let path, _) in outputs { return path }
        return nil
    }

    /// The IIIF folder and its address, if one is written.
    public var iiif: (path: String, identifier: String)? {
        for case .iiif(let path, _, let identifier) in outputs { return (path, identifier) }
        return nil
    }

    public var tiffPath: String? {
        for case .tiff(let path, _) in outputs { return path }
        return nil
    }

    /// Checks the request as a whole: its outputs (`checkDestinations`) and that none of them is
    /// one of the photos. The plan checks the settings and the canvas (RenderPlan.make).
    public func validate(alsoWriting extra: [OutputFile] = []) throws(TesseraError) {
        try RenderRequest.checkDestinations(outputs, alsoWriting: extra, temporaryDirectory: settings.temporaryDirectory)
        try RenderRequest.checkNotInputs(outputs, alsoWriting: extra, photos: photos)
    }

    /// Checks, before any work (a mosaic analyses and matches before it renders): one output of
    /// each kind at most and one at least; a Deep Zoom path of the form DIR/NAME.dzi; the
    /// temporary folder, if given, exists; each output's folder exists and can be written; its
    /// name leaves room for the hidden name it is written under first; what stands at each name
    /// may be replaced (a regular file, or a pyramid tessera wrote); and no two outputs, or
    /// `extra` files the caller writes beside them (a mosaic's manifest), are one file.
    public static func checkDestinations(_ outputs: [RenderOutput], alsoWriting extra: [OutputFile] = [],
                                         temporaryDirectory: String?) throws(TesseraError) {
        guard !outputs.isEmpty else {
            throw .invalidSettings("nothing to write: ask for a JPEG, a Deep Zoom pyramid, a TIFF, or any of them together")
        }
        guard outputs.filter({ $0.kind == .jpeg }).count <= 1,
              outputs.filter({ if case .deepZoom = $0 { return true } else { return false } }).count <= 1,
              outputs.filter({ if case .deepZoomArchive = $0 { return true } else { return false } }).count <= 1,
              outputs.filter({ if case .iiif = $0 { return true } else { return false } }).count <= 1,
              outputs.filter({ if case .tiff = $0 { return true } else { return false } }).count <= 1 else {
            throw .invalidSettings("at most one JPEG, one Deep Zoom pyramid, one SZI, one IIIF folder and one TIFF per render")
        }
        // A folder and an archive of one pyramid: its tiles are encoded once, for both.
        guard Set(outputs.compactMap { output -> DeepZoomSettings? in
            if case .deepZoom(let settings) = output.kind { return settings } else { return nil }
        }.map { [$0.tileSize, $0.overlap, $0.quality] }).count <= 1 else {
            throw .invalidSettings("a Deep Zoom folder and an SZI in one render share their tiles: give them the same tile size, overlap and quality")
        }
        // The default ($TMPDIR, else /tmp) too: a $TMPDIR naming no folder failed later, exit 1,
        // as "stat failed".
        let temporary = temporaryDirectory ?? defaultTemporaryDirectory()
        guard case .success(let info) = fileStatus(temporary), (info.st_mode & S_IFMT) == S_IFDIR else {
            throw .unusableOutput(path: temporary, reason: temporaryDirectory == nil
                ? "not an existing folder, and $TMPDIR names it as the temporary folder (create it, or unset TMPDIR)"
                : "not an existing folder (create it first)")
        }
        // Writable as the outputs' folders are (below): a read-only mount or /proc failed
        // after the scan, exit 1, as "open(O_TMPFILE) failed".
        do throws(TesseraError) {
            try FileDescriptor.openAnonymousTemporary(in: temporary).close()
        } catch {
            var reason = "no file can be made there"
            if case .system(_, let code, _) = error { reason += " (\(String(cString: strerror(code))))" }
            throw .unusableOutput(path: temporary, reason: "the temporary folder cannot be written: " + reason
                                  + (temporaryDirectory == nil ? " (set TMPDIR to a folder that can be written)" : ""))
        }
        let files = outputs.flatMap(\.files) + extra
        var probed = Set<String>()  // (a pyramid's descriptor, viewer and tiles share one folder)
        for file in files {
            // Written first under a hidden name beside it (".NAME.tessera-PID-XXXXXX", or a staging
            // folder ".NAME.dzi.tessera-PID-XXXXXX"): that name must fit the file system's 255 bytes.
            let name = file.path.split(separator: "/").last.map(String.init) ?? file.path
            guard name.utf8.count <= 255 - 32 else {
                throw .unusableOutput(path: file.path, reason: "the name is \(name.utf8.count) bytes long; at most \(255 - 32) "
                                      + "(it is written under a longer hidden name first, and a name holds 255)")
            }
            let folder = parentDirectory(of: file.path)
            guard case .success(let info) = fileStatus(folder), (info.st_mode & S_IFMT) == S_IFDIR else {
                // A file where the folder should be is named as a file: "does not exist" would send
                // the user looking for something that is there.
                if case .success = fileStatus(folder) {
                    throw .unusableOutput(path: file.path, reason: "\(folder) is a file, not a folder")
                }
                throw .unusableOutput(path: file.path, reason: "the folder \(folder) does not exist (create it first)")
            }
            guard access(folder, W_OK) == 0 else {
                throw .unusableOutput(path: file.path, reason: "the folder \(folder) cannot be written (\(String(cString: strerror(errno))))")
            }
            // Permission bits say nothing to root, nor about /proc, /sys or a read-only mount:
            // the folder is writable only if a file can be made in it. An unnamed one is tried
            // (nothing to clean up), and gone again at once.
            do throws(TesseraError) {
                if probed.insert(folder).inserted { try FileDescriptor.openAnonymousTemporary(in: folder).close() }
            } catch {
                var reason = "no file can be made there"
                if case .system(_, let code, _) = error { reason += " (\(String(cString: strerror(code))))" }
                throw .unusableOutput(path: file.path, reason: "the folder \(folder) cannot be written: " + reason)
            }
            if !file.isFolder { try OutputDestination.checkReplaceable(file.path, role: file.role) }
            if file.role == DeepZoomViewer.pageRole { try DeepZoomViewer.checkReplaceablePage(file.path) }
        }
        for case .deepZoom(let path, let settings) in outputs {
            _ = try DeepZoomOutput.split(path)
            try DeepZoomOutput.checkReplaceable(destination: path, viewer: settings.viewer)
        }
        for case .deepZoomArchive(let path, _) in outputs { _ = try DeepZoomOutput.splitArchive(path) }
        for case .iiif(let path, let settings, let identifier) in outputs {
            guard settings.overlap == 0 else {
                throw .invalidSettings("IIIF tiles do not overlap: a render with an IIIF folder makes its pyramid with an overlap of 0, got \(settings.overlap)")
            }
            if let problem = IIIFAddress.problem(identifier) {
                throw .invalidSettings("an IIIF folder's address must be an http or https URL without a trailing slash, query or "
                                       + "fragment, like https://example.org/iiif/wall; got '\(identifier)': \(problem)")
            }
            try IIIFTileFolder.checkReplaceable(path)
        }
        for case .tiff(let path, let settings) in outputs {
            guard RenderOutput.isTIFFPath(path) else {
                throw .unusableOutput(path: path, reason: "a TIFF's path must end in NAME.tif or NAME.tiff, like out/wall.tif")
            }
            try settings.validate()
        }
        try checkNothingInsideReplacedFolders(files, temporary: temporary)
        var seen: [String: OutputFile] = [:]
        for file in files {
            let canonical = OutputDestination.canonicalPath(file.path)
            if let other = seen[canonical] {
                // A folder and an SZI of one NAME in one folder: one page reads either.
                if other.role == DeepZoomViewer.pageRole && file.role == DeepZoomViewer.pageRole { continue }
                throw .unusableOutput(path: file.path, reason: "\(other.role) (\(other.path)) and \(file.role) name the same file: "
                                      + "each output needs a name of its own")
            }
            seen[canonical] = file
        }
    }

    /// Refuses a file or folder written inside a folder another output replaces whole (the Deep
    /// Zoom tiles, an IIIF folder), and the temporary folder there: the new folder is made
    /// beside the old and swapped in, so what another output had put in the old one would go
    /// with it (after a run that said it was written), or a folder moved away under a run
    /// would fail it half done.
    static func checkNothingInsideReplacedFolders(_ files: [OutputFile], temporary: String) throws(TesseraError) {
        for folder in files where folder.isFolder {
            // As named, and as the link it may be resolves.
            var prefixes = [OutputDestination.canonicalPath(folder.path)]
            if let resolved = resolvedPath(folder.path) { prefixes.append(resolved) }
            func isInside(_ path: String) -> Bool {
                let canonical = OutputDestination.canonicalPath(path)
                return prefixes.contains { canonical.hasPrefix($0 == "/" ? "/" : $0 + "/") }
            }
            for file in files where file != folder && isInside(file.path) {
                throw .unusableOutput(path: file.path, reason: "it is inside \(folder.role) (\(folder.path)), which the render replaces "
                                      + "whole: put \(file.role) elsewhere")
            }
            if isInside(temporary + "/x") {
                throw .unusableOutput(path: temporary, reason: "the temporary folder is inside \(folder.role) (\(folder.path)), which "
                                      + "the render replaces whole: choose another temporary folder")
            }
        }
    }

    /// Refuses outputs that are one of the files read: `photos` (by the identity their scan
    /// recorded; stat'ed here only when they have none), `otherInputs` (a mosaic's target) or
    /// `lists` (the files that named photos). Writing one would destroy it.
    public static func checkNotInputs(_ outputs: [RenderOutput], alsoWriting extra: [OutputFile] = [],
                                      photos: some Collection<Photo>, otherInputs: [String] = [], lists: [String] = []) throws(TesseraError) {
        var existing: [OutputDestination.Identity: OutputFile] = [:]
        for file in outputs.flatMap(\.files) + extra where !file.isFolder {
            if let identity = OutputDestination.identity(file.path) { existing[identity] = file }
        }
        guard !existing.isEmpty else { return }
        // Photo by photo: a library of a million is never a second list.
        func check(_ input: String, _ known: OutputDestination.Identity?) throws(TesseraError) {
            if let identity = known ?? OutputDestination.identity(input), let file = existing[identity] {
                throw .unusableOutput(path: file.path, reason: "it is one of the photos (\(input)); writing \(file.role) there "
                                      + "would destroy the photo: choose another name")
            }
        }
        for list in lists {
            if let identity = OutputDestination.identity(list), let file = existing[identity] {
                throw .unusableOutput(path: file.path, reason: "it is the list of photos read (\(list)); writing \(file.role) there "
                                      + "would destroy the list: choose another name")
            }
        }
        for photo in photos { try check(photo.path, photo.identity) }
        for input in otherInputs { try check(input, nil) }
    }

    /// The longest side a picture written to `outputs` may have: 65,500 px with a JPEG,
    /// RenderPlan.maxDeepZoomSide for pyramids (Deep Zoom, TIFF) alone.
    public static func sideLimit(outputs: [OutputKind]) -> Int {
        outputs.contains(.jpeg) ? jpegMaxDimension : RenderPlan.maxDeepZoomSide
    }

    /// The canvas of `columns` x `rows` cells of `cellWidth` x `cellHeight` px, refused before a
    /// layout is made when a side exceeds what the outputs can hold: 65,500 px with a JPEG,
    /// RenderPlan.maxDeepZoomSide for pyramids (Deep Zoom, TIFF) alone. Overflow-safe whatever the numbers.
    public static func checkCanvas(columns: Int, rows: Int, cellWidth: Int, cellHeight: Int,
                                   outputs: [OutputKind]) throws(TesseraError) {
        let limit = sideLimit(outputs: outputs)
        let (width, wide) = columns.multipliedReportingOverflow(by: cellWidth)
        let (height, tall) = rows.multipliedReportingOverflow(by: cellHeight)
        guard !wide, !tall, width <= limit, height <= limit else {
            throw .outputTooLarge(width: wide ? Int.max : width, height: tall ? Int.max : height, limit: limit)
        }
    }
}
