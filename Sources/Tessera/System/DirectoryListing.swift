// DirectoryListing.swift — the names in a directory (opendir/readdir).
import Glibc

/// The entry names of `path`, without "." and "..", in no particular order; names that are not
/// valid UTF-8 are left out (our own folders never hold any; photo folders are read with
/// `listDirectoryBytes`).
func listDirectory(_ path: String) throws(TesseraError) -> [String] {
    try listDirectoryBytes(PathBytes(path)).compactMap { name in
        name.withUnsafeBufferPointer { String(validating: $0, as: UTF8.self) }
    }
}

/// The entry names of `path` that `keep` takes (valid UTF-8 only), at most `limit` of them: the
/// others are read past, never held, so a folder of a million entries someone else filled (a
/// shard folder, /tmp, an output's folder) costs the names kept, not its listing (a helper's
/// attack: 79 MiB, OOM-killed in a 64 MiB container).
func listDirectory(_ path: String, limit: Int = Int.max, where keep: (String) -> Bool) throws(TesseraError) -> [String] {
    var names: [String] = []
    try forEachDirectoryEntry(PathBytes(path)) { (bytes: [UInt8]) throws(TesseraError) in
        guard names.count < limit, let name = bytes.withUnsafeBufferPointer({ String(validating: $0, as: UTF8.self) }), keep(name) else { return }
        names.append(name)
    }
    return names
}

/// How many entries `path` holds, counted as they are read.
func entryCount(_ path: String) throws(TesseraError) -> Int {
    var count = 0
    try forEachDirectoryEntry(PathBytes(path)) { (_: [UInt8]) throws(TesseraError) in count += 1 }
    return count
}

/// The entry names of `path` as bytes, without "." and "..", in no particular order.
func listDirectoryBytes(_ path: PathBytes) throws(TesseraError) -> [[UInt8]] {
    var names: [[UInt8]] = []
    try forEachDirectoryEntry(path) { (name: [UInt8]) throws(TesseraError) in names.append(name) }
    return names
}

/// Calls `body` with each entry name of `path` (bytes, without "." and ".."), in the order
/// readdir gives them, while the directory is open: a folder of a million entries is never a
/// list. An error `body` throws ends the listing and is rethrown.
func forEachDirectoryEntry(_ path: PathBytes, _ body: ([UInt8]) throws(TesseraError) -> Void) throws(TesseraError) {
    try forEachDirectoryEntry(path) { (name: [UInt8], _: UInt8) throws(TesseraError) in try body(name) }
}

/// As above, with each entry's kind as readdir gives it (`DT_REG`, `DT_DIR`, `DT_LNK`...;
/// `DT_UNKNOWN` where the file system does not say, and the caller must lstat).
func forEachDirectoryEntry(_ path: PathBytes, _ body: ([UInt8], UInt8) throws(TesseraError) -> Void) throws(TesseraError) {
    if let injected = SyscallFaults.take("opendir", path: path.display) {
        throw TesseraError.system(operation: "opendir", errno: injected, path: path.display)
    }
    guard let directory = system_opendir(path) else {
        throw TesseraError.system(operation: "opendir", errno: errno, path: path.display)
    }
    defer { _ = system_closedir(directory) }
    while let entry = system_readdir(directory) {
        // The name is read in place: a dirent is as long as its name, not the struct's 256-byte
        // field, so copying `entry.pointee.d_name` would read past a short entry (AddressSanitizer
        // found it).
        let field = UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        let length = strnlen(field.assumingMemoryBound(to: CChar.self), 256)
        let name = Array(UnsafeRawBufferPointer(start: field, count: length))
        if name != [UInt8(ascii: ".")] && name != [UInt8(ascii: "."), UInt8(ascii: ".")] { try body(name, entry.pointee.d_type) }
    }
}

/// stat(2) of `path` (bytes), following symlinks.
func fileStatus(_ path: PathBytes) -> Result<stat, Errno> {
    var info = stat()
    return valueOrErrno("stat", path: path.display) { system_stat(path, &info) }.map { _ in info }
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
