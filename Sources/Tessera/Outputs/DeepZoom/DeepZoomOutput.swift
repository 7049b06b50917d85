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
// alone has no staging folder; its viewer page, DIR/NAME.html, reads the archive by range
// requests and takes the viewer's cells.js from it (an entry NAME/NAME_files/viewer/cells.js),
// and is committed (an AtomicOutputFile too) after the archive. A folder and an SZI of one NAME
// in one folder share the folder's page, which reads either. An IIIF folder
// (IIIFTileFolder.swift) is a third container of the same tiles.
//
// On failure or cancellation `discard` removes the staging folder. If the process is killed,
// the staging folder stays, named with the dead pid, and the next render into that folder
// removes it (StaleTemporaries). Tiles are not fsynced one by one (that would cost a second per
// few thousand tiles): the guarantee is against the process dying, not against a power cut.
import Glibc

final class DeepZoomOutput: StripeSink, PreviewSink {
    /// DIR/NAME.dzi, or nil for an SZI alone.
    let destination: String?
    let name: String
    let folder: String
    let staging: String?
    let writer: DeepZoomWriter
    /// The SZI, when one is asked for.
    let archive: StoredZipWriter?
    /// The IIIF folder, when one is asked for.
    let iiif: IIIFTileFolder?
    /// The name the archive's entries are under (NAME of DIR/NAME.szi).
    private let archiveName: String
    /// The archive's viewer page (DIR/NAME.html beside DIR/NAME.szi), when it is not the
    /// folder's: written by `finish`, committed after the archive.
    private let archivePagePath: String?
    private var archivePage: AtomicOutputFile?
    /// Whether the folder's page reads the archive too (one NAME, one folder).
    private let pageReadsArchive: Bool
    private let labels: CellLabels?
    private var finished = false

    /// The file inside NAME_files that says tessera wrote the pyramid, so that a later render
    /// may replace it.
    static let marker = ".tessera-pyramid"

    /// Throws `.invalidSettings` unless what stands at the pyramid's names may be replaced: the
    /// descriptor and the viewer page absent or regular files, and NAME_files absent or a
    /// pyramid tessera wrote (its marker inside; or, for pyramids from before the marker, only
    /// level folders and `viewer` inside, beside an existing NAME.dzi), holding nothing tessera
    /// does not write there (WrittenFolder.swift). A folder of anything else is somebody's, and
    /// is never swapped away.
    static func checkReplaceable(destination: String, viewer: Bool) throws(TesseraError) {
        let (folder, name) = try split(destination)
        try OutputDestination.checkReplaceable(destination, role: "the Deep Zoom descriptor")
        if viewer {
            try OutputDestination.checkReplaceable(folder + "/" + name + ".html", role: DeepZoomViewer.pageRole)
            try DeepZoomViewer.checkReplaceablePage(folder + "/" + name + ".html")
        }
        let tiles = folder + "/" + name + "_files"
        guard case .success(let info) = linkStatus(tiles) else { return }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw .invalidSettings("\(tiles) exists and is not a folder, so not a pyramid tessera wrote: move it away or choose another name")
        }
        // An empty folder (made ready for the pyramid) holds nothing to lose.
        let count = (try? entryCount(tiles)) ?? -1
        if count == 0 { return }
        if access(tiles + "/" + marker, F_OK) != 0 {
            // (Counted, not listed: only the entries not like ours are kept, and at most one.)
            let strangers = (try? listDirectory(tiles, limit: 1, where: { !($0 == "viewer" || (!$0.isEmpty && $0.allSatisfy(\.isNumber))) }))
            let looksLikeOurs = access(destination, F_OK) == 0 && strangers?.isEmpty == true
            guard looksLikeOurs else {
                throw .invalidSettings("\(tiles) exists and is not a pyramid tessera wrote (no \(marker) inside; it holds "
                                       + "\(max(0, count)) entries): move it away or choose another name")
            }
        }
        if let stranger = WrittenFolder.deepZoomTiles.firstStranger(under: tiles) {
            throw .invalidSettings("\(tiles) holds \(stranger), which tessera did not write there; a new pyramid "
                                   + "replaces the whole folder, so move it out first (or choose another name)")
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
    /// wrote the others). `cells`: produces the viewer's cells.js, a piece at a time (default:
    /// from `labels`). `archive`: DIR/NAME.szi, the same tiles in one file (with or without
    /// `destination`); its central directory waits in `temporaryDirectory` (default: its folder).
    /// `iiif`: a folder of IIIF level-0 tiles and its address (the pyramid must not overlap).
    init(destination: String?, archive archivePath: String? = nil, iiif: (path: String, identifier: String)? = nil,
         geometry: DeepZoomGeometry, settings: DeepZoomSettings,
         subsampling: ChromaSubsampling, labels: CellLabels?, threads: Int, writerGeometry: DeepZoomGeometry? = nil,
         temporaryDirectory: String? = nil, cells: CellsProducer? = nil) throws(TesseraError) {
        precondition(destination != nil || archivePath != nil || iiif != nil, "a pyramid with nowhere to go")
        pyramid = geometry
        writeCells = cells
        var archive: StoredZipWriter?
        var archiveName = ""
        var service: IIIFTileFolder?
        do throws(TesseraError) {
            if let archivePath {
                (_, archiveName) = try DeepZoomOutput.splitArchive(archivePath)
                archive = try StoredZipWriter(destination: archivePath,
                                              temporaryDirectory: temporaryDirectory ?? parentDirectory(of: archivePath))
            }
            if let iiif { service = try IIIFTileFolder(destination: iiif.path, identifier: iiif.identifier, geometry: geometry) }
        } catch {
            archive?.discard()
            throw error
        }
        self.archive = archive
        self.archiveName = archiveName
        self.iiif = service
        // One page for a folder and an SZI of one NAME in one folder (RenderRequest lets the two
        // outputs name the same page, and only then).
        let folderPage = destination.map(DeepZoomViewer.pagePath(for:))
        let szisPage = archivePath.map(DeepZoomViewer.pagePath(for:))
        pageReadsArchive = settings.viewer && folderPage != nil && szisPage != nil
            && OutputDestination.canonicalPath(folderPage!) == OutputDestination.canonicalPath(szisPage!)
        archivePagePath = settings.viewer && !pageReadsArchive ? szisPage : nil
        title = settings.title
        // The containers besides the folder, each handed every tile.
        let tilePrefix = archiveName + "/" + archiveName + "_files/"
        let handler: TileDestination? = archive == nil && service == nil ? nil : .handler { [archive, service] level, column, row, bytes throws(TesseraError) in
            if let archive { try archive.add(name: tilePrefix + "\(level)/\(column)_\(row).jpg", bytes: bytes) }
            try service?.writeTile(level: level, column: column, row: row, bytes: bytes)
        }
        guard let destination else {
            self.destination = nil
            let named = archivePath ?? iiif!.path
            (folder, name) = (parentDirectory(of: named), archivePath == nil ? "iiif" : archiveName)
            staging = nil
            self.labels = archivePath != nil && settings.viewer ? labels : nil
            do throws(TesseraError) {
                writer = try DeepZoomWriter(geometry: writerGeometry ?? geometry, quality: settings.quality, subsampling: subsampling,
                                            filesDirectory: named, threads: threads, destination: handler)
            } catch {
                archive?.discard()
                service?.discard()
                throw error
            }
            viewer = false
            return
        }
        self.labels = settings.viewer ? labels : nil
        let (folder, name) = try DeepZoomOutput.split(destination)
        try DeepZoomOutput.checkReplaceable(destination: destination, viewer: settings.viewer)
        self.destination = destination
        self.folder = folder
        self.name = name
        var random = SplitMix64(seed: UInt64(bitPattern: Int64(monotonicSeconds() * 1e9)) ^ UInt64(getpid()))
        let unique = String(random.next() % 1_000_000_000, radix: 36)
        let staging = folder + "/" + StaleTemporaries.name(prefix: name + ".dzi.", unique: unique)
        self.staging = staging
        do throws(TesseraError) {
            try makeDirectory(staging, mode: 0o755)
        } catch {
            archive?.discard()
            service?.discard()
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
            StaleTemporaries.removeStaging(staging, lock: stagingLock)
            stagingLock = nil
            archive?.discard()
            service?.discard()
            throw error
        }
        viewer = settings.viewer
    }

    /// "DIR/NAME.szi" → ("DIR", "NAME"); throws for any other shape.
    static func splitArchive(_ path: String) throws(TesseraError) -> (folder: String, name: String) {
        guard RenderOutput.isDeepZoomArchivePath(path) else {
            throw .unusableOutput(path: path, reason: "an SZI's path must end in NAME.szi, like out/wall.szi")
        }
        let file = path.split(separator: "/").last.map(String.init) ?? ""
        return (parentDirectory(of: path), String(file.dropLast(4)))
    }

    /// Whether the folder has a viewer page.
    private var viewer = true
    private let title: String?
    /// The whole pyramid's shape (the descriptor's).
    let pyramid: DeepZoomGeometry
    /// Hands the viewer's cells.js, a piece at a time, to its argument.
    typealias CellsProducer = (_ write: (UnsafeRawBufferPointer) throws(TesseraError) -> Void) throws(TesseraError) -> Void
    private let writeCells: CellsProducer?

    /// cells.js, a piece at a time: what `cells` gives (a join's, from part 1), or the script
    /// of `labels` under `scriptName`.
    private func produceCells(scriptName: String, _ write: (UnsafeRawBufferPointer) throws(TesseraError) -> Void) throws(TesseraError) {
        if let writeCells {
            try writeCells(write)
        } else {
            try DeepZoomViewer.cellsScript(name: scriptName, geometry: pyramid, labels: labels, previews: previews?.longSide ?? 0, write: write)
        }
    }
    /// Held while the staging folder exists, so that no other render takes it for abandoned.
    private var stagingLock: FileDescriptor?

    deinit { stagingLock?.close() }

    /// Finishes the pyramid and writes the descriptor and viewer, all still in the staging
    /// folder, and the archive's descriptor and central directory.
    func finish() throws(TesseraError) {
        try writer.finish()
        try writePreviews()
        if let archive {
            if archivePagePath != nil || pageReadsArchive {
                try archive.add(name: archiveName + "/" + archiveName + "_files/viewer/cells.js") { write throws(TesseraError) in
                    try produceCells(scriptName: archiveName, write)
                }
            }
            let bytes = Array(pyramid.descriptor.utf8)
            try bytes.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in try archive.add(name: archiveName + "/" + archiveName + ".dzi", bytes: raw) }
            }.get()
            try archive.finish()
        }
        if let archivePagePath { try writeArchivePage(archivePagePath) }
        try iiif?.finish()
        guard let staging else { return }
        var files: [(path: String, contents: String)] = []
        if viewer {
            if !previewFolderMade { try makeDirectory(staging + "/" + name + "_files/viewer") }
            files = [(name + ".html", DeepZoomViewer.page(name: name, title: title, folder: true, archive: pageReadsArchive))]
            let cellsPath = staging + "/" + name + "_files/viewer/cells.js"
            let file = try FileDescriptor.open(cellsPath, flags: O_WRONLY | O_CREAT | O_EXCL)
            defer { file.close() }
            try produceCells(scriptName: name) { bytes throws(TesseraError) in try file.writeAll(bytes) }
        }
        files.append((name + ".dzi", pyramid.descriptor))
        for file in files {
            let bytes = Array(file.contents.utf8)
            try bytes.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in try writeNewFile(staging + "/" + file.path, raw) }
            }.get()
        }
    }

    /// The viewer's previews of the photos (PhotoPreviews.swift), when asked for: set by the
    /// renderer, which has the decoder, before the render.
    var previews: PhotoPreviews?
    /// How many previews were written, and how many photos had none (unreadable).
    private(set) var previewCounts = (made: 0, unreadable: 0)
    /// Photos drawn whose preview could not be made (PhotoPreviews.make).
    private(set) var previewsMissed: [SkippedPhoto] = []

    /// Whether the archive carries the viewer's files (its page reads them from it).
    private var archiveHasViewer: Bool { archive != nil && (archivePagePath != nil || pageReadsArchive) }

    /// Each preview into the folder's viewer/previews and the archive's, as the viewer reads
    /// them; nothing when there is no viewer to show them.
    private func writePreviews() throws(TesseraError) {
        guard let previews, (viewer && staging != nil) || archiveHasViewer else { return }
        let made = try previews.make { index, bytes throws(TesseraError) in try addPreview(index: index, bytes: bytes) }
        previewCounts.unreadable = made.unreadable
        previewsMissed = made.missed
    }

    /// Photo `index`'s preview (a JPEG), into the folder's viewer/previews and the archive's:
    /// one a render made, or a join took from a part. Nothing without a viewer to show it.
    func addPreview(index: Int, bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        guard (viewer && staging != nil) || archiveHasViewer else { return }
        let folder = viewer ? staging.map { $0 + "/" + name + "_files/" } : nil
        if let folder, !previewFolderMade {
            try makeDirectory(folder + "viewer")
            try makeDirectory(folder + "viewer/previews")
        }
        previewFolderMade = true
        let entry = PhotoPreviews.entryName(index)
        if let folder { try writeNewFile(folder + entry, bytes) }
        if archiveHasViewer { try archive?.add(name: archiveName + "/" + archiveName + "_files/" + entry, bytes: bytes) }
        previewCounts.made += 1
    }
    /// Whether viewer/previews is made in the staging folder.
    private var previewFolderMade = false

    /// The archive's page, to appear with the archive.
    private func writeArchivePage(_ path: String) throws(TesseraError) {
        let page = try AtomicOutputFile(destination: path)
        archivePage = page
        let bytes = Array(DeepZoomViewer.page(name: archiveName, title: title, folder: false, archive: true).utf8)
        try bytes.withUnsafeBytes { raw in Result { () throws(TesseraError) in try page.append(raw) } }.get()
    }

    /// Moves the finished pyramid into place, then the archive and its page, as some of the
    /// render's outputs (OutputCommit).
    func commit(in commit: OutputCommit) throws(TesseraError) {
        // The SZI's page, like the folder's (commitFolder), is checked again before anything
        // moves: a hand-written page put there during the render is kept.
        if let archivePagePath { try DeepZoomViewer.checkReplaceablePage(archivePagePath) }
        if let destination, let staging { try commitFolder(destination: destination, staging: staging, in: commit) }
        try archive?.commit(in: commit)
        try archivePage?.commit(in: commit)
        try iiif?.commit(in: commit)
    }

    private func commitFolder(destination: String, staging: String, in commit: OutputCommit) throws(TesseraError) {
        // Everything that can be refused is checked before the first rename (the names may have
        // changed since the render started).
        try DeepZoomOutput.checkReplaceable(destination: destination, viewer: viewer)
        // NAME_files, then NAME.html, each swapped with what stood there (renameat2 exchange),
        // or moved in (what stood there moved aside into the staging folder first, where the
        // filesystem cannot swap: OutputCommit.move); the descriptor last, the same way. If a
        // step fails, the steps before are undone in reverse, so the old pyramid stays whole
        // under its old descriptor and the new one goes with the staging folder.
        var undo: [() -> Void] = []
        func moveIn(_ entry: String) throws(TesseraError) {
            let move = try commit.move(staging + "/" + entry, to: folder + "/" + entry, aside: staging + "/replaced-" + entry)
            undo.append { _ = move.undo() }
        }
        do throws(TesseraError) {
            try moveIn(name + "_files")
            if viewer { try moveIn(name + ".html") }
            // Without a viewer, the page an earlier render left would look for the cells the new
            // folder no longer has, and say the tiles are missing: it goes with the staging
            // folder, unless an archive of the same name beside it may be what it shows.
            let page = folder + "/" + name + ".html"
            if !viewer, access(folder + "/" + name + ".szi", F_OK) != 0, DeepZoomViewer.isOwnPage(page) {
                let parked = staging + "/" + name + ".html"
                try commit.willMove(page, to: parked, exchange: false, isNew: false)
                try renameFile(page, to: parked)
                undo.append { try? renameFile(parked, to: page) }
            }
            // The descriptor too is swapped (the old one kept in the staging folder), so that a
            // later output's failure can put it back.
            try moveIn(name + ".dzi")
        } catch {
            for step in undo.reversed() { step() }
            throw error
        }
        finished = true
        // Undone if a later output fails: the old pyramid back, the new one in the staging
        // folder again for `discard`. Else the staging folder, holding the old one, goes.
        commit.onUndo { [self] in
            for step in undo.reversed() { step() }
            finished = false
        }
        commit.afterwards { [self] in
            StaleTemporaries.removeStaging(staging, lock: stagingLock)
            stagingLock = nil
        }
    }

    /// Removes everything this output made (nothing of an existing pyramid is touched).
    func discard() {
        writer.abandon()
        archive?.discard()
        archivePage?.discard()
        iiif?.discard()
        if !finished, let staging {
            StaleTemporaries.removeStaging(staging, lock: stagingLock)
            stagingLock = nil
        }
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
        summary.previews = previewCounts.made
        summary.previewsMissed = previewsMissed
    }
}

