// CommitJournal.swift — what a commit of several outputs has moved so far, on disk, so that a
// process killed in the middle of it (SIGKILL, the OOM killer) leaves what a later run puts
// back. (It is not fsynced: like the rest of the commit's bookkeeping, it guards against the
// process dying, not a power cut.)
//
// OutputCommit undoes the moves made when a later output fails, but only while the process
// lives: killed between two moves, a render left a new pyramid folder under the old
// descriptor, or a new pyramid beside the old JPEG; the next run in that folder then removed
// the staging folder and the hidden file holding the old ones as stale temporaries, and the
// mixed state could not be repaired.
//
// So before each move the commit appends a step to a journal in the folder it moves into, the
// same steps in each such folder (outputs in two folders: a later run may clean either first):
// ".commit.tessera-PID-journal.tmp", 0600, under flock(2) for as long as the commit runs (a
// live commit is never recovered: StaleTemporaries.isAbandoned). Each step names the two paths
// (absolute), whether they are swapped or one renamed to the other, whether what moves is the
// render's new output, and the identity (device and inode) of what moves. Once every move is
// made the commit appends "done"; once the old outputs are removed it removes the journal.
//
// A later run's cleanup of a folder (StaleTemporaries.remove) reads an abandoned journal there
// before it removes any temporary, holding the journal's lock and the locks of every folder
// its steps name (as a commit holds them: two runs recovering at once take turns): without
// "done" it undoes the steps newest first, each only if what stands at its destination is what
// the journal says moved there (a step journaled but not made, or changed since, is left
// alone), and removes the new output it took back or that never moved; so the old outputs
// stand, as after any failed render. With "done" nothing is undone: the old outputs, under
// hidden names, are removed as stale temporaries.
//
// A journal is read as hostile input (the folder may be shared): opened without following a
// link and checked by its descriptor (a name checked, then read, could be swapped between the
// two for another user's link), it must be a regular file of this user's that no one else can
// write, at most 64 KiB and 64 steps, every path absolute and free of NUL, and every step must
// move something to or from a temporary of tessera's shape (StaleTemporaries.parse names it).
//
// Threading: the one thread that commits the outputs.
import Glibc

final class CommitJournal {
    private let file: FileDescriptor
    let path: String
    private var bytes: Int64 = 0

    static let unique = "journal"
    static let prefix = "commit."
    static let magic = Array("TSCOMMIT1\n".utf8)
    static let maxBytes = 64 << 10
    static let maxSteps = 64

    /// A new journal in `directory` holding `records`, locked for as long as this commit runs.
    init(directory: String, records: [[UInt8]]) throws(TesseraError) {
        path = directory + "/" + StaleTemporaries.name(prefix: Self.prefix, unique: Self.unique + ".tmp")
        file = try FileDescriptor.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
        do throws(TesseraError) {
            _ = try file.tryLock()
            try append(Self.magic)
            for record in records { try append(record) }
        } catch {
            file.close()
            removeFile(path)
            throw error
        }
    }

    /// Whether `name` is a journal's name (of any pid).
    static func isJournal(_ name: String) -> Bool {
        name.hasPrefix("." + prefix + StaleTemporaries.marker) && name.hasSuffix("-" + unique + ".tmp")
            && StaleTemporaries.parse(name) != nil
    }

    func append(_ data: [UInt8]) throws(TesseraError) {
        try data.withUnsafeBytes { raw in Result { () throws(TesseraError) in try file.writeAll(raw, at: bytes) } }.get()
        bytes += Int64(data.count)
    }

    /// The step of a move about to be made: `from` to `to`, swapped (`exchange`) or renamed;
    /// `isNew`: what moves is the render's new output (taken back and removed on recovery).
    /// nil when nothing is at `from`.
    static func record(_ from: String, to: String, exchange: Bool, isNew: Bool) -> [UInt8]? {
        guard case .success(let info) = linkStatus(from) else { return nil }
        var record: [UInt8] = [exchange ? UInt8(ascii: "E") : UInt8(ascii: "R"), isNew ? 1 : 0]
        put(UInt64(info.st_dev), into: &record)
        put(UInt64(info.st_ino), into: &record)
        for path in [absolute(from), absolute(to)] {
            let utf8 = Array(path.utf8)
            put(UInt64(utf8.count), into: &record)
            record += utf8
        }
        return record
    }

    /// "Every move is made": nothing is to be undone.
    static let done: [UInt8] = [UInt8(ascii: "D")]

    /// Closes and removes the journal (the commit is over, either way).
    func remove() {
        file.close()
        removeFile(path)
    }

    private static func put(_ value: UInt64, into record: inout [UInt8]) {
        for shift in stride(from: 0, to: 64, by: 8) { record.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let directory = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (directory == "/" ? "" : directory) + "/" + (path.hasPrefix("./") ? String(path.dropFirst(2)) : path)
    }

    struct Step: Equatable {
        var exchange: Bool
        var isNew: Bool
        var device: UInt64
        var inode: UInt64
        var from: String
        var to: String
    }

    /// The steps of a journal and whether it says "done", or nil when it is not one tessera
    /// wrote (see the file's header).
    static func parse(_ data: [UInt8]) -> (steps: [Step], done: Bool)? {
        guard data.count <= maxBytes, data.starts(with: magic) else { return nil }
        var at = magic.count
        func number() -> UInt64? {
            guard at + 8 <= data.count else { return nil }
            var value: UInt64 = 0
            for i in 0..<8 { value |= UInt64(data[at + i]) << UInt64(8 * i) }
            at += 8
            return value
        }
        func path() -> String? {
            guard let length = number(), length > 1, length <= UInt64(PATH_MAX), at + Int(length) <= data.count else { return nil }
            let bytes = data[at..<at + Int(length)]
            at += Int(length)
            guard bytes.first == UInt8(ascii: "/"), !bytes.contains(0) else { return nil }
            return String(validating: bytes, as: UTF8.self)
        }
        var steps: [Step] = []
        while at < data.count {
            let kind = data[at]
            if kind == UInt8(ascii: "D") { return at + 1 == data.count ? (steps, true) : nil }
            guard kind == UInt8(ascii: "E") || kind == UInt8(ascii: "R"), at + 2 <= data.count, data[at + 1] <= 1,
                  steps.count < maxSteps else { return nil }
            let isNew = data[at + 1] == 1
            at += 2
            // A step cut short by the kill is the last: it was not made.
            guard let device = number(), let inode = number(), let from = path(), let to = path() else { return (steps, false) }
            guard touchesTemporary(from) || touchesTemporary(to) else { return nil }
            steps.append(Step(exchange: kind == UInt8(ascii: "E"), isNew: isNew, device: device, inode: inode, from: from, to: to))
        }
        return (steps, false)
    }

    /// Whether some component of `path` is a temporary of tessera's shape.
    private static func touchesTemporary(_ path: String) -> Bool {
        path.split(separator: "/").contains { StaleTemporaries.parse(String($0)) != nil }
    }

    /// Puts back what the abandoned journal at `path` says was moved (see the file's header),
    /// then removes it; leaves it for a later run when another holds it or its folders.
    static func recover(_ path: String) {
        guard let file = try? FileDescriptor.open(path, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK) else { return }
        defer { file.close() }
        var info = stat()
        guard fstat(file.rawValue, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid(),
              info.st_mode & 0o022 == 0, info.st_size <= maxBytes, (try? file.tryLock()) == true else { return }
        var data = [UInt8](repeating: 0, count: Int(info.st_size))
        let count = data.withUnsafeMutableBytes { buffer in (try? file.read(into: buffer, at: 0)) ?? -1 }
        guard count == data.count, let (steps, done) = parse(data) else {
            removeFile(path)
            return
        }
        if !done {
            let folders = steps.flatMap { [parentDirectory(of: $0.from), parentDirectory(of: $0.to)] }
            guard let locks = try? OutputCommit.lockFolders(folders, patienceSeconds: 10) else { return }
            defer { for lock in locks { lock.close() } }
            undo(steps)
        }
        removeFile(path)
    }

    private static func undo(_ steps: [Step]) {
        func holds(_ path: String, _ step: Step) -> Bool {
            guard case .success(let standing) = linkStatus(path) else { return false }
            return UInt64(standing.st_dev) == step.device && UInt64(standing.st_ino) == step.inode
        }
        for step in steps.reversed() {
            if holds(step.to, step) {
                if step.exchange {
                    guard (try? exchangePaths(step.from, step.to)) != nil else { continue }
                } else {
                    guard linkStatus(step.from).isFailure, (try? renameFile(step.to, to: step.from)) != nil else { continue }
                }
                // An old IIIF folder put back drops the lock file it was given to wait for its
                // removal under (IIIFTileFolder.commit).
                if let old = step.exchange ? (step.isNew ? step.to : nil) : (step.isNew ? nil : step.from) { dropLock(in: old) }
            }
            // The new output, taken back or never moved (an IIIF folder whose staging lock was
            // already gone), goes: no later cleanup would know it.
            if step.isNew, holds(step.from, step) { _ = removeTree(step.from) }
        }
    }

    /// Removes `folder`'s staging lock file, when it is one (a regular file nobody holds).
    private static func dropLock(in folder: String) {
        let path = folder + "/" + StaleTemporaries.lockName
        guard case .success(let info) = linkStatus(path), (info.st_mode & S_IFMT) == S_IFREG,
              let file = try? FileDescriptor.open(path, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK) else { return }
        let free = (try? file.tryLock()) == true
        file.close()
        if free { removeFile(path) }
    }
}

extension Result {
    var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}
