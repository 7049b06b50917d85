// DirectoryListing.swift — the names in a directory (opendir/readdir).
import Glibc

/// The entry names of `path`, without "." and "..", in no particular order.
func listDirectory(_ path: String) throws(TesseraError) -> [String] {
    try listDirectoryEntries(path).names
}

/// The names in `path`, and apart the names that are not valid UTF-8 (decoded with
/// replacement characters, for messages only: no file can be opened by them).
func listDirectoryEntries(_ path: String) throws(TesseraError) -> (names: [String], invalid: [String]) {
    if let injected = SyscallFaults.take("opendir", path: path) {
        throw TesseraError.system(operation: "opendir", errno: injected, path: path)
    }
    guard let directory = system_opendir(path) else {
        throw TesseraError.system(operation: "opendir", errno: errno, path: path)
    }
    defer { _ = system_closedir(directory) }
    var names: [String] = [], invalid: [String] = []
    while let entry = system_readdir(directory) {
        let name = withUnsafePointer(to: entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { pointer -> String? in
                if let valid = String(validatingCString: pointer) { return valid }
                invalid.append(String(cString: pointer))
                return nil
            }
        }
        if let name, name != "." && name != ".." { names.append(name) }
    }
    return (names, invalid)
}

/// stat(2) of `path`, following symlinks; nil with the errno when it fails.
func fileStatus(_ path: String) -> Result<stat, Errno> {
    var info = stat()
    return valueOrErrno("stat", path: path) { system_stat(path, &info) }.map { _ in info }
}

/// lstat(2): the entry itself, a symbolic link not followed.
func linkStatus(_ path: String) -> Result<stat, Errno> {
    var info = stat()
    return valueOrErrno("lstat", path: path) { system_lstat(path, &info) }.map { _ in info }
}

/// realpath(3): the absolute path with every symbolic link resolved; nil when it does not exist.
func resolvedPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}
