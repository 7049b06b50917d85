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
// staging folder, is then removed with it.
//
// On failure or cancellation `discard` removes the staging folder. If the process is killed,
// the staging folder stays, named with the dead pid, and the next render into that folder
// removes it (StaleTemporaries). Tiles are not fsynced one by one (that would cost a second per
// few thousand tiles): the guarantee is against the process dying, not against a power cut.
import Glibc

final class DeepZoomOutput {
    let destination: String
    let name: String
    let folder: String
    let staging: String
    let writer: DeepZoomWriter
    private let labels: CellLabels?
    private var finished = false

    /// "DIR/NAME.dzi" → ("DIR", "NAME"); throws for any other shape.
    static func split(_ destination: String) throws(TesseraError) -> (folder: String, name: String) {
        let folder = parentDirectory(of: destination)
        let file = destination.split(separator: "/").last.map(String.init) ?? ""
        guard file.hasSuffix(".dzi"), file.count > 4, !destination.hasSuffix("/") else {
            throw .invalidSettings("--dzi expects a path ending in NAME.dzi, got '\(destination)'")
        }
        return (folder, String(file.dropLast(4)))
    }

    init(destination: String, geometry: DeepZoomGeometry, settings: DeepZoomSettings, subsampling: ChromaSubsampling,
         labels: CellLabels?, threads: Int) throws(TesseraError) {
        let (folder, name) = try DeepZoomOutput.split(destination)
        self.destination = destination
        self.folder = folder
        self.name = name
        self.labels = settings.viewer ? labels : nil
        var random = SplitMix64(seed: UInt64(bitPattern: Int64(monotonicSeconds() * 1e9)) ^ UInt64(getpid()))
        let unique = String(random.next() % 1_000_000_000, radix: 36)
        staging = folder + "/" + StaleTemporaries.name(prefix: name + ".dzi.", unique: unique)
        try makeDirectory(staging, mode: 0o755)
        do throws(TesseraError) {
            try makeDirectory(staging + "/" + name + "_files")
            writer = try DeepZoomWriter(geometry: geometry, quality: settings.quality, subsampling: subsampling,
                                        filesDirectory: staging + "/" + name + "_files", threads: threads)
        } catch {
            removeTree(staging)
            throw error
        }
        viewer = settings.viewer
    }

    private var viewer = true

    /// Finishes the pyramid, writes the descriptor and viewer, and moves it all into place.
    func commit() throws(TesseraError) {
        try writer.finish()
        var files: [(path: String, contents: String)] = []
        if viewer {
            try makeDirectory(staging + "/" + name + "_files/viewer")
            files = DeepZoomViewer.files(name: name)
            try DeepZoomViewer.writeCellsScript(to: staging + "/" + name + "_files/viewer/cells.js", name: name,
                                                geometry: writer.geometry, labels: labels)
        }
        files.append((name + ".dzi", writer.geometry.descriptor))
        for file in files {
            let bytes = Array(file.contents.utf8)
            try bytes.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in try writeNewFile(staging + "/" + file.path, raw) }
            }.get()
        }
        let tiles = name + "_files"
        var existing = stat()
        if system_lstat(folder + "/" + tiles, &existing) == 0 {
            try exchangePaths(staging + "/" + tiles, folder + "/" + tiles)
        } else {
            try renameFile(staging + "/" + tiles, to: folder + "/" + tiles)
        }
        if viewer { try renameFile(staging + "/" + name + ".html", to: folder + "/" + name + ".html") }
        try renameFile(staging + "/" + name + ".dzi", to: destination)
        finished = true
        removeTree(staging)
    }

    /// Removes everything this output made (nothing of an existing pyramid is touched).
    func discard() {
        writer.abandon()
        if !finished { removeTree(staging) }
    }

    var tilesWritten: Int { writer.tilesWritten }
    var bytesWritten: Int64 { writer.bytesWritten }
}
