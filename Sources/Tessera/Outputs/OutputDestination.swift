// OutputDestination.swift — what may stand at an output's path before a render replaces it.
//
// An output is written beside its destination and renamed over it (AtomicOutputFile), which
// replaces whatever the name held: a photo, a device node, a symbolic link. So before any work:
// a destination that exists must be a regular file (not a device, FIFO, socket or folder), and
// not a symbolic link (the rename would replace the link, not the file it points to; give that
// file's path instead). Outputs named twice, and an output that is one of the input photos, are
// refused too (`sameFile`).
import CTesseraShims
import Glibc

public enum OutputDestination {
    /// The device and inode of the file at `path`, following symbolic links; nil when there is none.
    public struct Identity: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64
    }

    /// Throws `.invalidSettings` when `path` exists and is not a regular file, or is a symbolic
    /// link. `role` names the output in the message ("the JPEG output").
    public static func checkReplaceable(_ path: String, role: String) throws(TesseraError) {
        guard case .success(let info) = linkStatus(path) else { return }  // nothing there (or unreadable: the write will say)
        let kind: String
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            // An immutable or append-only file cannot be renamed over: the render would fail at
            // its very end.
            if system_is_immutable(path) == 1 {
                throw .invalidSettings("\(role) \(path) is immutable or append-only (chattr +i or +a) and cannot be replaced")
            }
            return
        case S_IFLNK:
            throw .invalidSettings("\(role) \(path) is a symbolic link; tessera replaces the file at the path it is given, "
                                   + "which would replace the link: give the path of the file it points to instead")
        case S_IFDIR: kind = "a folder"
        case S_IFCHR: kind = "a character device"
        case S_IFBLK: kind = "a block device"
        case S_IFIFO: kind = "a FIFO"
        case S_IFSOCK: kind = "a socket"
        default: kind = "not a regular file"
        }
        throw .invalidSettings("\(role) \(path) exists and is \(kind); tessera replaces only regular files")
    }

    /// The identity of the file at `path`, or nil when there is none.
    public static func identity(_ path: String) -> Identity? {
        guard case .success(let info) = fileStatus(path) else { return nil }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// The path as the file system will resolve it for creating: the real path of its folder,
    /// then its last component. Two outputs with the same canonical path are the same file
    /// (whether or not it exists yet).
    public static func canonicalPath(_ path: String) -> String {
        let folder = parentDirectory(of: path)
        let name = path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
        guard let base = resolvedPath(folder) else { return path }
        return (base == "/" ? "" : base) + "/" + name
    }
}
