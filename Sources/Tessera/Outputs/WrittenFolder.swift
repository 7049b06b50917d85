// WrittenFolder.swift — whether a folder tessera wrote (a Deep Zoom pyramid's NAME_files, an
// IIIF folder) still holds only what tessera writes there, before a new render replaces it.
//
// A render swaps the old folder out whole and removes it. Its marker says tessera made it, not
// that nothing was put in it since: a note or a photo copied into NAME_files would go with it.
// So every entry is checked against the shape tessera writes (names, and folders or files),
// and the first one that does not fit is named and the folder kept. Symbolic links are never
// ours; names that are not UTF-8 are never ours. What a desktop's file manager leaves behind
// (.DS_Store, Thumbs.db, AppleDouble files) goes with the folder. The walk reads names and kinds as readdir gives
// them (lstat only where the file system does not say): a pyramid of 33,035 tiles is checked
// in about 30 ms, where an lstat of each entry took 0.3 s.
import Glibc

/// The shape of what tessera writes in a folder it owns.
struct WrittenFolder: Sendable {
    /// Whether the entry at `path` (its components below the folder) of that kind is one
    /// tessera writes there.
    let admits: @Sendable (_ path: [Substring], _ isFolder: Bool) -> Bool

    /// A Deep Zoom pyramid's NAME_files: the marker, level folders of `C_R.jpg` tiles, and
    /// `viewer` with `cells.js` and `previews/P.jpg`. In both kinds, `.lock` at the top: the
    /// lock a replaced folder is given while it is removed, which a kill then (the folder put
    /// back by the next run's recovery) left inside it, and every later render there was refused.
    static let deepZoomTiles = WrittenFolder { path, isFolder in
        switch (path.count, isFolder) {
        case (1, false): return path[0] == DeepZoomOutput.marker || path[0] == StaleTemporaries.lockName
        case (1, true): return path[0] == "viewer" || isNumber(path[0])
        case (2, false) where path[0] == "viewer": return path[1] == "cells.js"
        case (2, true) where path[0] == "viewer": return path[1] == "previews"
        case (2, false): return isNumber(path[0]) && isTileName(path[1])
        case (3, false): return path[0] == "viewer" && path[1] == "previews" && isNumberedJPEG(path[2])
        default: return false
        }
    }

    /// An IIIF level-0 folder: the marker, `info.json`, and `REGION/SIZE/0/default.jpg`, where
    /// REGION is `full` or `X,Y,W,H` and SIZE `W,H` or (under `full`) `max`.
    static let iiifTiles = WrittenFolder { path, isFolder in
        switch (path.count, isFolder) {
        case (1, false): return path[0] == IIIFTileFolder.marker || path[0] == "info.json" || path[0] == StaleTemporaries.lockName
        case (1, true): return path[0] == "full" || isNumberList(path[0], count: 4)
        case (2, true): return isNumberList(path[1], count: 2) || (path[0] == "full" && path[1] == "max")
        case (3, true): return path[2] == "0"
        case (4, false): return path[3] == "default.jpg"
        default: return false
        }
    }

    /// The first entry under `root` that tessera does not write there, as a path below it, or
    /// nil when every entry is one it writes. Entries that cannot be read count as not ours.
    func firstStranger(under root: String) -> String? {
        firstStranger(under: root, below: [])
    }

    private func firstStranger(under root: String, below prefix: [Substring]) -> String? {
        let folder = ([root] + prefix.map(String.init)).joined(separator: "/")
        var stranger: String?
        var folders: [Substring] = []
        do throws(TesseraError) {
            try forEachDirectoryEntry(PathBytes(folder)) { (bytes: [UInt8], type: UInt8) throws(TesseraError) in
                guard stranger == nil else { return }
                guard let name = String(validating: bytes, as: UTF8.self) else {
                    stranger = (prefix.map(String.init) + [String(decoding: bytes, as: UTF8.self)]).joined(separator: "/")
                    return
                }
                let path = prefix + [Substring(name)]
                var isFolder = Int(type) == DT_DIR, isFile = Int(type) == DT_REG
                if Int(type) == DT_UNKNOWN {
                    var info = stat()
                    let kind = system_lstat(folder + "/" + name, &info) == 0 ? info.st_mode & S_IFMT : 0
                    (isFolder, isFile) = (kind == S_IFDIR, kind == S_IFREG)
                }
                if isFile && WrittenFolder.isDesktopLitter(name, in: folder) { return }
                guard isFolder || isFile, admits(path, isFolder) else {
                    stranger = path.joined(separator: "/")
                    return
                }
                if isFolder { folders.append(Substring(name)) }
            }
        } catch {
            return stranger ?? (prefix.isEmpty ? "." : prefix.joined(separator: "/"))
        }
        if let stranger { return stranger }
        for name in folders {
            if let found = firstStranger(under: root, below: prefix + [name]) { return found }
        }
        return nil
    }

    /// Files a desktop's file manager leaves in any folder it shows, which hold nothing of a
    /// person's: macOS's `.DS_Store` and its `._NAME` AppleDouble files (over a network share or
    /// a FAT/exFAT disk; checked by their magic number), Windows's `Thumbs.db`, `ehthumbs.db` and
    /// `desktop.ini`, KDE's `.directory`. A pyramid opened in Finder or Explorer once has them,
    /// and a new render refused to replace it for them.
    static func isDesktopLitter(_ name: String, in folder: String) -> Bool {
        if [".DS_Store", "Thumbs.db", "ehthumbs.db", "desktop.ini", ".directory"].contains(name) { return true }
        guard name.hasPrefix("._") && name.utf8.count > 2 else { return false }
        // AppleDouble: 00 05 16 07, then version 2 (00 02 00 00); a few KiB at most.
        let fd = system_open(folder + "/" + name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0)
        guard fd >= 0 else { return false }
        defer { _ = system_close(fd) }
        var info = stat(), head = [UInt8](repeating: 0, count: 8)
        guard system_fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size <= 1 << 20,
              system_read(fd, &head, 8) == 8 else { return false }
        return head == [0x00, 0x05, 0x16, 0x07, 0x00, 0x02, 0x00, 0x00]
    }

    private static func isNumber(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.count <= 10 && text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// "12,0,254,254": `count` numbers between commas.
    private static func isNumberList(_ text: Substring, count: Int) -> Bool {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        return parts.count == count && parts.allSatisfy(isNumber)
    }

    /// "3_17.jpg".
    private static func isTileName(_ text: Substring) -> Bool {
        guard text.hasSuffix(".jpg") else { return false }
        let parts = text.dropLast(4).split(separator: "_", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy(isNumber)
    }

    /// "42.jpg".
    private static func isNumberedJPEG(_ text: Substring) -> Bool {
        text.hasSuffix(".jpg") && isNumber(text.dropLast(4))
    }
}
