// DeepZoomOutput.swift — a pyramid built in a hidden folder and moved into place when complete.
//
// The pyramid is staged in ".NAME.dzi.tessera-<pid>-<unique>" beside the destination (the
// same filesystem, so moving it is a rename), laid out exactly as it will be:
//
//     staging/NAME_files/...   staging/NAME.html   staging/NAME.dzi
//
// `commit` moves them into the destination folder in this order: NAME_files (swapped with an
// existing one in one renameat2(RENAME_EXCHANGE) step, so a viewer never sees a folder that is
// half old and half new), NAME.html, then NAME.dzi. The descriptor comes last, so a NAME.dzi
// that exists always describes a complete pyramid. The old NAME_files, swapped into the
// staging folder, is then removed with it. Whatever can refuse the commit is checked before
// the first rename, and a step that still fails undoes the ones before it.
//
// Only a pyramid tessera wrote is replaced: NAME_files holds a marker file (`.tessera-pyramid`),
// and an existing NAME_files without one (somebody's folder that happens to have the name) is
// refused before the render starts (`checkDeepZoomDestination`).
//
// An SZI (`archive`, DIR/NAME.szi) is the same pyramid in one uncompressed ZIP, laid out as
// libvips writes one: NAME/NAME.dzi and NAME/NAME_files/LEVEL/COL_ROW.jpg. The writer hands each
// tile to the folder, the archive or both (the tiles are encoded once); the archive is an
// AtomicOutputFile, committed after the folder, so it too appears only when complete. An SZI
// alone has no staging folder and no viewer page.
//
// On failure or cancellation `discard` removes the staging folder. If the process is killed,
// the staging folder stays, named with the dead pid, and the next render into that folder
// removes it (StaleTemporaries). Tiles are not fsynced one by one (that would cost a second per
// few thousand tiles): the guarantee is against the process dying, not against a power cut.
import Glibc

final class DeepZoomOutput: StripeSink {
    /// DIR/NAME.dzi, or nil for an SZI alone.
    let destination: String?
    let name: String
    let folder: String
    let staging: String?
    let writer: DeepZoomWriter
    /// The SZI, when one is asked for.
    let archive: StoredZipWriter?
    /// The name the archive's entries are under (NAME of DIR/NAME.szi).
    private let archiveName: String
    private let labels: CellLabels?
    private var finished = false

    /// The file inside NAME_files that says tessera wrote the pyramid, so that a later render
    /// may replace it.
    static let marker = ".tessera-pyramid"

    /// Throws `.invalidSettings` unless what stands at the pyramid's names may be replaced: the
    /// descriptor and the viewer page absent or regular files, and NAME_files absent or a
    /// pyramid tessera wrote (its marker inside; or, for pyramids from before the marker, only
    /// level folders and `viewer` inside, beside an existing NAME.dzi). A folder of anything
    /// else is somebody's, and is never swapped away.
    static func checkReplaceable(destination: String, viewer: Bool) throws(TesseraError) {
        let (folder, name) = try split(destination)
        try OutputDestination.checkReplaceable(destination, role: "the Deep Zoom descriptor")
        if viewer { try OutputDestination.checkReplaceable(folder + "/" + name + ".html", role: "the Deep Zoom viewer") }
        let tiles = folder + "/" + name + "_files"
        guard case .success(let info) = linkStatus(tiles) else { return }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw .invalidSettings("\(tiles) exists and is not a folder, so not a pyramid tessera wrote: move it away or choose another name")
        }
        if access(tiles + "/" + marker, F_OK) == 0 { return }
        let entries = (try? listDirectory(tiles)) ?? []
        let looksLikeOurs = access(destination, F_OK) == 0
            && entries.allSatisfy { $0 == "viewer" || (!$0.isEmpty && $0.allSatisfy(\.isNumber)) }
        guard looksLikeOurs else {
            throw .invalidSettings("\(tiles) exists and is not a pyramid tessera wrote (no \(marker) inside; it holds "
                                   + "\(entries.count) entries): move it away or choose another name")
        }
    }

    /// "DIR/NAME.dzi" → ("DIR", "NAME"); throws for any other shape.
    static func split(_ destination: String) throws(TesseraError) -> (folder: String, name: String) {
        let folder = parentDirectory(of: destination)
        let file = destination.split(separator: "/").last.map(String.init) ?? ""
        guard RenderOutput.isDeepZoomPath(destination) else {
            throw .unusableOutput(path: destination, reason: "a Deep Zoom pyramid's path must end in NAME.dzi, like out/wall.dzi")
        }
        return (folder, String(file.dropLast(4)))
    }

    /// `writerGeometry`: the picture the writer is fed, when it is not the whole pyramid's (the
    /// join of shards feeds the small picture of level L and builds levels 0...L; the shards
    /// wrote the others). `cells`: writes the viewer's cells.js at the path given (default:
    /// from `labels`). `archive`: DIR/NAME.szi, the same tiles in one file (with or without
    /// `destination`); its central directory waits in `temporaryDirectory` (default: its folder).
    init(destination: String?, archive archivePath: String? = nil, geometry: DeepZoomGeometry, settings: DeepZoomSettings,
         subsampling: ChromaSubsampling, labels: CellLabels?, threads: Int, writerGeometry: DeepZoomGeometry? = nil,
         temporaryDirectory: String? = nil, cells: ((String) throws(TesseraError) -> Void)? = nil) throws(TesseraError) {
        precondition(destination != nil || archivePath != nil, "a pyramid with neither a folder nor an archive")
        pyramid = geometry
        writeCells = cells
        var archive: StoredZipWriter?
        var archiveName = ""
        if let archivePath {
            (_, archiveName) = try DeepZoomOutput.splitArchive(archivePath)
            archive = try StoredZipWriter(destination: archivePath,
                                          temporaryDirectory: temporaryDirectory ?? parentDirectory(of: archivePath))
        }
        self.archive = archive
        self.archiveName = archiveName
        let handler: TileDestination? = archive.map { zip in
            let prefix = archiveName + "/" + archiveName + "_files/"
            return .handler { level, column, row, bytes throws(TesseraError) in
                try zip.add(name: prefix + "\(level)/\(column)_\(row).jpg", bytes: bytes)
            }
        }
        guard let destination else {
            self.destination = nil
            (folder, name) = (parentDirectory(of: archivePath!), archiveName)
            staging = nil
            self.labels = nil
            do throws(TesseraError) {
                writer = try DeepZoomWriter(geometry: writerGeometry ?? geometry, quality: settings.quality, subsampling: subsampling,
                                            filesDirectory: archivePath!, threads: threads, destination: handler)
            } catch {
                archive?.discard()
                throw error
            }
            viewer = false
            return
        }
        let (folder, name) = try DeepZoomOutput.split(destination)
        try DeepZoomOutput.checkReplaceable(destination: destination, viewer: settings.viewer)
        self.destination = destination
        self.folder = folder
        self.name = name
        self.labels = settings.viewer ? labels : nil
        var random = SplitMix64(seed: UInt64(bitPattern: Int64(monotonicSeconds() * 1e9)) ^ UInt64(getpid()))
        let unique = String(random.next() % 1_000_000_000, radix: 36)
        let staging = folder + "/" + StaleTemporaries.name(prefix: name + ".dzi.", unique: unique)
        self.staging = staging
        do throws(TesseraError) {
            try makeDirectory(staging, mode: 0o755)
        } catch {
            archive?.discard()
            throw error
        }
        do throws(TesseraError) {
            stagingLock = try StaleTemporaries.lockDirectory(staging)
            try makeDirectory(staging + "/" + name + "_files")
            try writeNewFile(staging + "/" + name + "_files/" + DeepZoomOutput.marker,
                             UnsafeRawBufferPointer(start: nil, count: 0))
            writer = try DeepZoomWriter(geometry: writerGeometry ?? geometry, quality: settings.quality, subsampling: subsampling,
                                        filesDirectory: staging + "/" + name + "_files", threads: threads, alsoTo: handler)
        } catch {
            removeTree(staging)
            stagingLock?.close()
            archive?.discard()
            throw error
        }
        viewer = settings.viewer
        title = settings.title
    }

    /// "DIR/NAME.szi" → ("DIR", "NAME"); throws for any other shape.
    static func splitArchive(_ path: String) throws(TesseraError) -> (folder: String, name: String) {
        guard RenderOutput.isDeepZoomArchivePath(path) else {
            throw .unusableOutput(path: path, reason: "an SZI's path must end in NAME.szi, like out/wall.szi")
        }
        let file = path.split(separator: "/").last.map(String.init) ?? ""
        return (parentDirectory(of: path), String(file.dropLast(4)))
    }

    private var viewer = true
    private var title: String?
    /// The whole pyramid's shape (the descriptor's).
    let pyramid: DeepZoomGeometry
    private let writeCells: ((String) throws(TesseraError) -> Void)?
    /// Held while the staging folder exists, so that no other render takes it for abandoned.
    private var stagingLock: FileDescriptor?

    deinit { stagingLock?.close() }

    /// Finishes the pyramid and writes the descriptor and viewer, all still in the staging
    /// folder, and the archive's descriptor and central directory.
    func finish() throws(TesseraError) {
        try writer.finish()
        if let archive {
            let bytes = Array(pyramid.descriptor.utf8)
            try bytes.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in try archive.add(name: archiveName + "/" + archiveName + ".dzi", bytes: raw) }
            }.get()
            try archive.finish()
        }
        guard let staging else { return }
        var files: [(path: String, contents: String)] = []
        if viewer {
            try makeDirectory(staging + "/" + name + "_files/viewer")
            files = DeepZoomViewer.files(name: name, title: title)
            let cellsPath = staging + "/" + name + "_files/viewer/cells.js"
            if let writeCells {
                try writeCells(cellsPath)
            } else {
                try DeepZoomViewer.writeCellsScript(to: cellsPath, name: name, geometry: pyramid, labels: labels)
            }
        }
        files.append((name + ".dzi", pyramid.descriptor))
        for file in files {
            let bytes = Array(file.contents.utf8)
            try bytes.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in try writeNewFile(staging + "/" + file.path, raw) }
            }.get()
        }
    }

    /// Moves the finished pyramid into place, then the archive.
    func commit() throws(TesseraError) {
        if let destination, let staging { try commitFolder(destination: destination, staging: staging) }
        try archive?.commit()
    }

    private func commitFolder(destination: String, staging: String) throws(TesseraError) {
        // Everything that can be refused is checked before the first rename (the names may have
        // changed since the render started).
        try DeepZoomOutput.checkReplaceable(destination: destination, viewer: viewer)
        // NAME_files, then NAME.html, each swapped with what stood there (renameat2 exchange) or
        // moved in; the descriptor last. If a step fails, the steps before are undone in reverse,
        // so the old pyramid stays whole under its old descriptor and the new one goes with the
        // staging folder.
        var undo: [() -> Void] = []
        func moveIn(_ entry: String) throws(TesseraError) {
            let from = staging + "/" + entry, to = folder + "/" + entry
            var existing = stat()
            if system_lstat(to, &existing) == 0 {
                try exchangePaths(from, to)
                undo.append { try? exchangePaths(from, to) }
            } else {
                try renameFile(from, to: to)
                undo.append { try? renameFile(to, to: from) }
            }
        }
        do throws(TesseraError) {
            try moveIn(name + "_files")
            if viewer { try moveIn(name + ".html") }
            try renameFile(staging + "/" + name + ".dzi", to: destination)
        } catch {
            for step in undo.reversed() { step() }
            throw error
        }
        finished = true
        removeTree(staging)
    }

    /// Removes everything this output made (nothing of an existing pyramid is touched).
    func discard() {
        writer.abandon()
        archive?.discard()
        if !finished, let staging { removeTree(staging) }
    }

    var tilesWritten: Int { writer.tilesWritten }
    var bytesWritten: Int64 { writer.bytesWritten }

    // As a sink of the stripe pipeline: each stripe is one batch of jobs on every core, and the
    // other outputs' work for the stripe runs as more jobs of it (or, beside another pyramid
    // that runs the batch, its jobs run in that one).
    var runsBatches: Bool { true }

    func take(_ stripe: StripeView, prepared: EncodedStripe?, alongside: StripeJobs?) throws(TesseraError) {
        try writer.append(rows: stripe.pixels, stride: stripe.bytesPerRow, count: stripe.rows.count, alongside: alongside)
    }

    func jobs(for stripe: StripeView, prepared: EncodedStripe?) throws(TesseraError) -> StripeJobs {
        writer.jobs(rows: stripe.pixels, stride: stripe.bytesPerRow, count: stripe.rows.count)
    }

    func record(into summary: inout RenderSummary) {
        summary.deepZoomTiles = tilesWritten
        summary.deepZoomBytes = bytesWritten
        summary.archiveBytes = archive?.bytesWritten ?? 0
    }
}

