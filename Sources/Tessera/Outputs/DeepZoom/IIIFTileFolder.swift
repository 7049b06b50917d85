// IIIFTileFolder.swift — the pyramid as IIIF Image API 3.0 level-0 static tiles: a folder that
// any web server serves as an image service (Mirador, OpenSeadragon, Universal Viewer), built
// from the same tiles as the Deep Zoom folder and the SZI (DeepZoomOutput hands it every tile).
//
//     DIR/info.json                                  the image information (ImageService3, level0)
//     DIR/X,Y,W,H/SW,SH/0/default.jpg                a tile: its region in full-size pixels, its size
//     DIR/full/SW,SH/0/default.jpg, DIR/full/max/... the largest level that is one tile, whole
//
// The levels are the Deep Zoom pyramid's, from full size down to the first that fits in one
// tile; level L is scale factor 2^(maxLevel - L), and a tile's size is what its region scaled by
// that factor is (rounded up), which is the Deep Zoom tile's own size. IIIF tiles do not overlap,
// so a render that writes this folder has a pyramid without overlap. Only those names exist (a
// level-0 service answers no other request); `max` is the one-tile level (`maxWidth`,
// `maxHeight` say so when it is smaller than the picture), since a picture of gigapixels has no
// whole-image file.
//
// Like the Deep Zoom folder it is staged in a hidden folder beside DIR (".NAME.iiif.tessera-
// <pid>-<unique>") and moved into place at commit, swapped in one renameat2 exchange with an
// existing DIR that tessera wrote (its marker `.tessera-iiif` inside); a folder of anything else
// is refused before the render. A killed render's staging folder is removed by the next render
// into the same parent folder (StaleTemporaries).
//
// Threading: `writeTile` is called from the pyramid's encoder jobs, several at once: each tile's
// folders are made with mkdir (EEXIST is fine) and its file written whole, so no state is shared.
// `finish`, `commit` and `discard` run on the render's writer thread after the jobs.
import Glibc

final class IIIFTileFolder: @unchecked Sendable {
    let destination: String
    let identifier: String
    let geometry: DeepZoomGeometry
    /// The lowest level written: the first, from the top, that fits in one tile.
    let lowestLevel: Int
    private let staging: String
    private var stagingLock: FileDescriptor?
    private var committed = false

    /// The file inside DIR that says tessera wrote it.
    static let marker = ".tessera-iiif"

    /// `destination`: the folder to write (its parent must exist); `identifier`: the address it
    /// will be served at, which clients build every tile's address from (info.json's `id`).
    init(destination: String, identifier: String, geometry: DeepZoomGeometry) throws(TesseraError) {
        precondition(geometry.overlap == 0, "IIIF tiles do not overlap")
        try IIIFTileFolder.checkReplaceable(destination)
        self.destination = destination
        self.identifier = identifier
        self.geometry = geometry
        var lowest = geometry.maxLevel
        while lowest > 0 && (geometry.levels[lowest].width > geometry.tileSize || geometry.levels[lowest].height > geometry.tileSize) {
            lowest -= 1
        }
        lowestLevel = lowest
        let name = destination.split(separator: "/").last.map(String.init) ?? "iiif"
        var random = SplitMix64(seed: UInt64(bitPattern: Int64(monotonicSeconds() * 1e9)) ^ UInt64(getpid()))
        staging = parentDirectory(of: destination) + "/" + StaleTemporaries.name(prefix: name + ".iiif.", unique: String(random.next() % 1_000_000_000, radix: 36))
        try makeDirectory(staging, mode: 0o755)
        do throws(TesseraError) {
            stagingLock = try StaleTemporaries.lockDirectory(staging)
            try writeNewFile(staging + "/" + Self.marker, UnsafeRawBufferPointer(start: nil, count: 0))
        } catch {
            StaleTemporaries.removeStaging(staging, lock: stagingLock)
            stagingLock = nil
            throw error
        }
    }

    deinit {
        if !committed {
            StaleTemporaries.removeStaging(staging, lock: stagingLock)
        } else {
            stagingLock?.close()
        }
    }

    /// Throws `.invalidSettings` unless what stands at `destination` may be replaced: nothing, an
    /// empty folder (made ready for it), or a folder tessera wrote (its marker inside) that holds
    /// nothing tessera does not write there (WrittenFolder.swift).
    static func checkReplaceable(_ destination: String) throws(TesseraError) {
        guard case .success(let info) = linkStatus(destination) else { return }
        if (info.st_mode & S_IFMT) == S_IFDIR, (try? listDirectoryBytes(PathBytes(destination)))?.isEmpty == true { return }
        guard (info.st_mode & S_IFMT) == S_IFDIR, access(destination + "/" + marker, F_OK) == 0 else {
            throw .invalidSettings("\(destination) exists and is not an IIIF folder tessera wrote (no \(marker) inside): move it away or choose another name")
        }
        if let stranger = WrittenFolder.iiifTiles.firstStranger(under: destination) {
            throw .invalidSettings("\(destination) holds \(stranger), which tessera did not write there; a new render "
                                   + "replaces the whole folder, so move it out first (or choose another name)")
        }
    }

    /// The scale factor of Deep Zoom level `level`.
    func scaleFactor(level: Int) -> Int { 1 << (geometry.maxLevel - level) }

    /// The path of tile (`column`, `row`) of `level` under the folder: "X,Y,W,H/SW,SH/0/default.jpg".
    func tilePath(level: Int, column: Int, row: Int) -> String {
        let scale = scaleFactor(level: level), side = geometry.tileSize * scale
        let x = column * side, y = row * side
        let width = min(side, geometry.width - x), height = min(side, geometry.height - y)
        let levelInfo = geometry.levels[level]
        let scaledWidth = min(geometry.tileSize, levelInfo.width - column * geometry.tileSize)
        let scaledHeight = min(geometry.tileSize, levelInfo.height - row * geometry.tileSize)
        return "\(x),\(y),\(width),\(height)/\(scaledWidth),\(scaledHeight)/0/default.jpg"
    }

    /// Writes one tile of the pyramid (levels below `lowestLevel` are not part of the service).
    func writeTile(level: Int, column: Int, row: Int, bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        guard level >= lowestLevel else { return }
        let path = tilePath(level: level, column: column, row: row)
        // Two levels can name the same tile: a strip at the picture's edge no wider than half a
        // tile and narrow enough to keep its size at both scales (a 513 px picture in 256 px
        // tiles: "512,512,1,1/1,1" at scale factors 1 and 2). It is one request of the service:
        // the finer level's file stands (the same whichever tile comes first, and in a join).
        if level == geometry.maxLevel || path != tilePath(level: level + 1, column: 2 * column, row: 2 * row) {
            try writeFile(path, bytes)
        }
        // The one-tile level is also the whole picture at its size, and `max`.
        if level == lowestLevel {
            let whole = geometry.levels[level]
            try writeFile("full/\(whole.width),\(whole.height)/0/default.jpg", bytes)
            try writeFile("full/max/0/default.jpg", bytes)
        }
    }

    /// Makes the folders of `relative` (already there is fine) and writes the file.
    private func writeFile(_ relative: String, _ bytes: UnsafeRawBufferPointer) throws(TesseraError) {
        var folder = staging
        for part in relative.split(separator: "/").dropLast() {
            folder += "/" + part
            if mkdir(folder, 0o755) != 0 && errno != EEXIST {
                throw .system(operation: "mkdir", errno: errno, path: folder)
            }
        }
        try writeNewFile(staging + "/" + relative, bytes)
    }

    /// The image information: ImageService3 at level 0, the tiles and their scale factors, the
    /// whole-picture size, and `maxWidth`/`maxHeight` when `max` is smaller than the picture.
    var information: String {
        let factors = (lowestLevel...geometry.maxLevel).reversed().map { String(scaleFactor(level: $0)) }
        let whole = geometry.levels[lowestLevel]
        var fields = [
            "\"@context\": \"http://iiif.io/api/image/3/context.json\"",
            "\"id\": \(jsonStringLiteral(identifier))",
            "\"type\": \"ImageService3\"",
            "\"protocol\": \"http://iiif.io/api/image\"",
            "\"profile\": \"level0\"",
            "\"width\": \(geometry.width)",
            "\"height\": \(geometry.height)",
        ]
        if lowestLevel < geometry.maxLevel {
            fields.append("\"maxWidth\": \(whole.width)")
            fields.append("\"maxHeight\": \(whole.height)")
        }
        fields.append("\"sizes\": [{\"width\": \(whole.width), \"height\": \(whole.height)}]")
        fields.append("\"tiles\": [{\"width\": \(geometry.tileSize), \"height\": \(geometry.tileSize), \"scaleFactors\": [\(factors.joined(separator: ", "))]}]")
        return "{\n  " + fields.joined(separator: ",\n  ") + "\n}\n"
    }

    /// Writes info.json, still in the staging folder.
    func finish() throws(TesseraError) {
        let bytes = Array(information.utf8)
        try bytes.withUnsafeBytes { raw in Result { () throws(TesseraError) in try writeNewFile(staging + "/info.json", raw) } }.get()
    }

    /// Moves the folder into place: swapped with one tessera wrote, or renamed in.
    func commit(in commit: OutputCommit) throws(TesseraError) {
        try IIIFTileFolder.checkReplaceable(destination)
        // The staging lock is the folder's own file: it is not published. (Released first: on
        // NFS and FUSE a removed file still open stays as a hidden file, here in the output. A
        // sweep of stale temporaries meanwhile sees this process alive.)
        stagingLock?.close()
        stagingLock = nil
        _ = system_unlink(staging + "/" + StaleTemporaries.lockName)
        let name = destination.split(separator: "/").last.map(String.init) ?? "iiif"
        let aside = parentDirectory(of: destination) + "/"
            + StaleTemporaries.name(prefix: name + ".iiif.", unique: String(UInt32.random(in: 0..<2_176_782_336), radix: 36))
        let move = try commit.move(staging, to: destination, aside: aside)
        committed = true
        guard let replaced = move.replaced else {
            commit.onUndo { [self] in if move.undo() { committed = false } }
            return
        }
        // The old folder, swapped or moved aside: given a lock file (removed last), so that a
        // removal cut short (the process killed) leaves a folder a later run knows as a stale
        // temporary and removes, not one it no longer recognises once its marker is gone.
        let lock = try? StaleTemporaries.lockDirectory(replaced)
        commit.onUndo { [self] in
            lock?.close()
            removeFile(replaced + "/" + StaleTemporaries.lockName)
            if move.undo() { committed = false }
        }
        commit.afterwards { StaleTemporaries.removeStaging(replaced, lock: lock) }
    }

    /// Removes the staging folder; what stood at `destination` stays.
    func discard() {
        guard !committed else { return }
        committed = true
        StaleTemporaries.removeStaging(staging, lock: stagingLock)
        stagingLock = nil
    }
}

/// The address an IIIF folder is served at (`info.json`'s id).
public enum IIIFAddress {
    /// Why `identifier` cannot be an IIIF image service's address, or nil. Viewers build every
    /// tile's address by appending `/x,y,w,h/w,h/0/default.jpg` to it, so it must be an http or
    /// https URL with a host and a path that such a suffix extends: no trailing slash, no query
    /// (`?`) or fragment (`#`), which would swallow the suffix, and nothing a URL must
    /// percent-encode (spaces, quotes, control characters, letters outside ASCII: written as
    /// %XX they are fine).
    public static func problem(_ identifier: String) -> String? {
        let scheme = identifier.hasPrefix("https://") ? 8 : identifier.hasPrefix("http://") ? 7 : 0
        guard scheme > 0 else { return "not an http or https URL" }
        let rest = identifier.utf8.dropFirst(scheme)
        guard let first = rest.first, first != UInt8(ascii: "/") else { return "no host after its scheme" }
        if identifier.hasSuffix("/") { return "a trailing slash" }
        if identifier.contains("?") { return "a query ('?'), which the tiles' addresses would be appended to" }
        if identifier.contains("#") { return "a fragment ('#'), which the tiles' addresses would be appended to" }
        // RFC 3986: unreserved, sub-delims, ':', '@', '/' and '%' of a percent-encoding.
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/%".utf8)
        if let bad = rest.first(where: { !allowed.contains($0) }) {
            let shown = bad < 0x21 || bad >= 0x7F ? "byte 0x\(bad < 16 ? "0" : "")\(String(bad, radix: 16, uppercase: true))" : "'\(Character(UnicodeScalar(bad)))'"
            return "\(shown), which a URL must percent-encode (as %XX)"
        }
        return nil
    }
}
