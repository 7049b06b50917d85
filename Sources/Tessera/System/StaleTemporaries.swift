// StaleTemporaries.swift — names for the few temporaries that are ever visible, and their cleanup.
//
// Almost every temporary Tessera makes has no name (O_TMPFILE). Three can be seen: the hidden
// name an output is linked under just before the rename into place, on filesystems without
// O_TMPFILE mkostemp files, and the directory a Deep Zoom pyramid is built in. Their names
// carry the pid of the process that made them: ".<prefix>tessera-<pid>-<unique>".
//
// Only those exact shapes are ours: a file ".NAME.tessera-PID-U.tmp" (U: 1 to 10 letters or
// digits), a folder ".NAME.dzi.tessera-PID-U" or ".NAME.iiif.tessera-PID-U" (U: 1 to 6 of
// 0-9a-z), of the kind the shape says and owned by this user. The cleanup runs in /tmp and
// /dev/shm, shared with everyone: a hidden folder of someone's notes named
// ".notes.tessera-2023-drafts", or another user's file, is never taken for a temporary.
//
// Whether one is still in use is told first by a lock: the maker holds flock(2) on the file
// (or on `.lock` inside the directory) for as long as it needs it, and the kernel drops the
// lock when the process ends, however it ends. A pid alone cannot tell this across PID
// namespaces: a render in another container sharing the folder has a pid that may look dead
// here. So a temporary whose lock is held is never removed. One whose lock is free (or that
// has none: made by a version before the lock, or in the instant between a staging folder's
// mkdir and its lock) is removed when its pid is gone, as before; a pid that is alive here
// keeps it (it may be reused by an unrelated process: the temporary then waits for a later run).
import Glibc

public enum StaleTemporaries {
    static let marker = "tessera-"

    /// ".<prefix>tessera-<this pid>-<unique>".
    static func name(prefix: String, unique: String) -> String {
        return "." + prefix + marker + "\(getpid())-" + unique
    }

    /// The pid in a temporary's name, or nil when `name` is not one of ours.
    static func ownerPID(of name: String) -> pid_t? { parse(name)?.pid }

    /// The pid in a temporary's name and whether the name is a folder's (a pyramid's staging)
    /// or a file's, or nil when `name` is not exactly one of the shapes tessera makes.
    static func parse(_ name: String) -> (pid: pid_t, folder: Bool)? {
        // The last ".tessera-" (an output's own name may contain the word).
        guard name.hasPrefix("."), let range = name.lastRange(of: "." + marker) else { return nil }
        let rest = name[range.upperBound...]
        guard let dash = rest.firstIndex(of: "-") else { return nil }
        let digits = rest[..<dash], unique = rest[rest.index(after: dash)...]
        guard (1...10).contains(digits.utf8.count), digits.utf8.allSatisfy(isDigit),
              let pid = pid_t(digits), pid > 0 else { return nil }
        let stem = name[..<range.lowerBound]
        if unique.hasSuffix(".tmp") {
            let letters = unique.utf8.dropLast(4)
            guard (1...10).contains(letters.count), letters.allSatisfy({ isDigit($0) || isLetter($0) }) else { return nil }
            return (pid, false)
        }
        guard stem.hasSuffix(".dzi") || stem.hasSuffix(".iiif"), (1...6).contains(unique.utf8.count),
              unique.utf8.allSatisfy({ isDigit($0) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) }) else { return nil }
        return (pid, true)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    /// Removes the temporaries in `directory` whose process no longer exists; returns their paths.
    /// Never fails: a directory that cannot be listed has nothing removed.
    @discardableResult
    public static func remove(in directory: String) -> [String] {
        // Only names of a temporary's shape are kept from the listing (/tmp may hold millions).
        guard var names = try? listDirectory(directory, limit: 4096, where: { parse($0) != nil }) else { return [] }
        // A commit's journal first: a commit killed half-way is undone (CommitJournal.swift)
        // before the temporaries holding the outputs it replaced are removed.
        names.sort { CommitJournal.isJournal($0) && !CommitJournal.isJournal($1) }
        var removed: [String] = []
        for name in names {
            guard let (pid, folder) = parse(name) else { continue }
            let path = directory + "/" + name
            // Of the kind its name says, and this user's (root's cleanup of /tmp leaves other
            // users' files alone).
            guard case .success(let info) = linkStatus(path), info.st_uid == geteuid(),
                  (info.st_mode & S_IFMT) == (folder ? S_IFDIR : S_IFREG) else { continue }
            // A staging folder holds its lock file (made the instant after the folder): a folder
            // of someone's named ".notes.dzi.tessera-2023-drafts" does not (and goes only if empty).
            if folder, case .success(let lock) = linkStatus(path + "/" + lockName), (lock.st_mode & S_IFMT) == S_IFREG {
            } else if folder {
                // An empty one is what a removal cut short just before its last step leaves (the
                // lock goes last but for the folder): rmdir(2) removes nothing else.
                if pid <= Self.largestPID, pid != getpid(), system_kill(pid, 0) == -1, errno == ESRCH, system_rmdir(path) == 0 {
                    removed.append(path)
                }
                continue
            }
            guard pid <= Self.largestPID else { continue }
            guard isAbandoned(path, pid: pid) else { continue }
            if CommitJournal.isJournal(name) {
                CommitJournal.recover(path)
                removed.append(path)
                continue
            }
            // A Deep Zoom pyramid is staged in a directory: remove it whole.
            if removeTree(path) { removed.append(path) }
        }
        return removed.sorted()
    }

    /// The lock file of a staging directory.
    static let lockName = ".lock"

    /// The largest pid this system gives (/proc/sys/kernel/pid_max; Linux's most, 4,194,304,
    /// when it cannot be read): a name with a larger one was not made by a process here.
    static let largestPID: pid_t = {
        guard let text = try? readWholeFile("/proc/sys/kernel/pid_max"),
              let value = pid_t(String(decoding: text.filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }, as: UTF8.self)),
              value > 0 else { return 4_194_304 }
        return value
    }()

    /// Whether no process uses the temporary at `path` any more: nobody holds its lock (the file
    /// itself, or `.lock` inside a directory), and `pid` is gone.
    static func isAbandoned(_ path: String, pid: pid_t) -> Bool {
        var lockPath = path
        if case .success(let info) = linkStatus(path), (info.st_mode & S_IFMT) == S_IFDIR { lockPath = path + "/" + lockName }
        if case .success(let fd) = valueOrErrno("open", path: lockPath, { system_open(lockPath, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0) }) {
            let file = FileDescriptor(rawValue: fd, path: lockPath)
            defer { file.close() }  // releases the lock if it was taken here
            if (try? file.tryLock()) != true { return false }  // held: a live render, in any namespace
        }
        // kill(pid, 0) probes without signalling: ESRCH means no such process.
        guard pid != getpid() else { return false }
        return system_kill(pid, 0) == -1 && errno == ESRCH
    }

    /// Removes the staging folder `directory` whose lock `lock` holds, then releases the lock.
    /// On NFS and FUSE a removed file still open (the lock) stays in its folder under a hidden
    /// name (.nfsXXXX, .fuse_hiddenXXXX) until it is closed, and the folder with it: so the
    /// folder is removed again once the lock is released (an empty staging folder was left
    /// beside every output on such a folder).
    @discardableResult
    static func removeStaging(_ directory: String, lock: FileDescriptor?) -> Bool {
        if removeTree(directory) {
            lock?.close()
            return true
        }
        lock?.close()
        return removeTree(directory)
    }

    /// Creates `directory`'s lock file and takes its lock, for as long as the returned file is
    /// open (close it when the directory is removed).
    static func lockDirectory(_ directory: String) throws(TesseraError) -> FileDescriptor {
        let file = try FileDescriptor.open(directory + "/" + lockName, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        guard try file.tryLock() else {
            file.close()
            throw TesseraError.system(operation: "flock", errno: EWOULDBLOCK, path: directory + "/" + lockName)
        }
        return file
    }
}

private extension String {
    /// The last occurrence of `needle` (no Foundation in the library).
    func lastRange(of needle: String) -> Range<Index>? {
        var found: Range<Index>?
        var start = startIndex
        while let end = index(start, offsetBy: needle.count, limitedBy: endIndex) {
            if self[start..<end] == needle { found = start..<end }
            if start == endIndex { break }
            start = index(after: start)
        }
        return found
    }
}
