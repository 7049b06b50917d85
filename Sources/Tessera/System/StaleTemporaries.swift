// StaleTemporaries.swift — names for the few temporaries that are ever visible, and their cleanup.
//
// Almost every temporary Tessera makes has no name (O_TMPFILE). Three can be seen: the hidden
// name an output is linked under just before the rename into place, on filesystems without
// O_TMPFILE mkostemp files, and the directory a Deep Zoom pyramid is built in. Their names carry the pid of the process that made them:
// ".<prefix>tessera-<pid>-<unique>". A later run removes those whose process is gone, and leaves
// alone those of a process that is still alive (another render in the same folder).
import Glibc

public enum StaleTemporaries {
    static let marker = "tessera-"

    /// ".<prefix>tessera-<this pid>-<unique>".
    static func name(prefix: String, unique: String) -> String {
        return "." + prefix + marker + "\(getpid())-" + unique
    }

    /// The pid in a temporary's name, or nil when `name` is not one of ours.
    static func ownerPID(of name: String) -> pid_t? {
        // The last ".tessera-" (an output's own name may contain the word).
        guard name.hasPrefix("."), let range = name.lastRange(of: "." + marker) else { return nil }
        let rest = name[range.upperBound...]
        guard let dash = rest.firstIndex(of: "-"), let pid = pid_t(rest[..<dash]), pid > 0 else { return nil }
        return pid
    }

    /// Removes the temporaries in `directory` whose process no longer exists; returns their paths.
    /// Never fails: a directory that cannot be listed has nothing removed.
    @discardableResult
    public static func remove(in directory: String) -> [String] {
        guard let names = try? listDirectory(directory) else { return [] }
        var removed: [String] = []
        for name in names {
            guard let pid = ownerPID(of: name), pid != getpid() else { continue }
            // kill(pid, 0) probes without signalling: ESRCH means no such process.
            if system_kill(pid, 0) == -1 && errno == ESRCH {
                let path = directory + "/" + name
                // A Deep Zoom pyramid is staged in a directory: remove it whole.
                if removeTree(path) { removed.append(path) }
            }
        }
        return removed.sorted()
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
