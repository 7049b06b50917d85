// OutputCommit.swift — the outputs of one render (or join) appear together, or none of them does.
//
// Each output is finished out of sight (an unnamed file, a staging folder) and then moved into
// place, one output after another: the pyramid's folder, the SZI, the IIIF folder, the TIFF, the
// JPEG. Any of those moves can still fail (a folder made append-only, a file planted in a folder
// about to be replaced, an I/O error at the last fsync), and the outputs moved before it would
// then stand new beside old ones, while the exit status says nothing was written. So every move
// that replaces something swaps the new output with the old one (renameat2's exchange), keeping
// the old under the hidden temporary name, and records how to swap them back: a later failure
// undoes the moves made, newest first, and the old outputs stand as they were. Only once every
// output is in place are the old ones, now under hidden names, removed. A process killed in
// between leaves those under names a later run knows as stale temporaries and removes.
//
// A filesystem without the exchange (NFS, FUSE: EINVAL) has the old output renamed aside first,
// to a hidden temporary name, and the new one renamed in: two moves, journaled and undone like
// one, with an instant between them where the name stands empty. (The new file renamed over the
// old one could not be brought back: a failed re-render on an NFS home replaced the manifest
// and failed at the pyramid's folder, which rename(2) cannot put over a folder.)
//
// The undo steps live in memory; a process killed between two moves leaves them in a journal
// on disk (CommitJournal.swift), which a later run's cleanup of the folder reads and undoes.
// And two renders committing to the same names at once (a job resubmitted while the first
// still runs) took turns move by move: both exited 0 and the JPEG was one's, the pyramid the
// other's. A commit holds flock(2) on every folder it moves into (sorted, so two commits never
// wait on each other crosswise), so one commit's moves all come before the other's.
//
// Threading: the one thread that commits the outputs.
import Glibc

final class OutputCommit {
    private var undoSteps: [() -> Void] = []
    private var afterSteps: [() -> Void] = []
    /// A journal in each folder moved into, each holding every step (CommitJournal.swift).
    private var journals: [(folder: String, journal: CommitJournal)] = []
    private var records: [[UInt8]] = []

    /// Records a move about to be made, in the journals: `from` to `to`, swapped or renamed;
    /// `isNew`: what moves is the new output.
    func willMove(_ from: String, to: String, exchange: Bool, isNew: Bool = true) throws(TesseraError) {
        guard let record = CommitJournal.record(from, to: to, exchange: exchange, isNew: isNew) else { return }
        // One a folder however it is named (a bind mount reaches one folder by two paths).
        // None in a staging folder (an old output moved aside into it): it is a temporary
        // itself, beside the folder whose journal names the step, and a journal open in it
        // kept it from being removed on NFS and FUSE.
        let folder = parentDirectory(of: to)
        var info = stat()
        let key = stat(folder.isEmpty ? "." : folder, &info) == 0 ? "\(info.st_dev):\(info.st_ino)" : folder
        let staging = folder.split(separator: "/").last.map { StaleTemporaries.parse(String($0)) != nil } ?? false
        if !staging, !journals.contains(where: { $0.folder == key }) {
            journals.append((key, try CommitJournal(directory: folder, records: records)))
        }
        records.append(record)
        for entry in journals { try entry.journal.append(record) }
    }

    /// Errors of renameat2's exchange that mean the filesystem has none.
    static let noExchange: [Int32] = [EINVAL, ENOSYS, EOPNOTSUPP]

    /// Where a move by `move(_:to:aside:)` left what stood at its destination (nil: nothing
    /// stood there), and how it is taken back (true when it was).
    struct Move {
        let replaced: String?
        let undo: () -> Bool
    }

    /// Moves the output at `from` to `to`, journaled. What stood at `to` is swapped to `from`
    /// (renameat2's exchange), or, on a filesystem without the exchange, renamed to `aside`
    /// first (a name a later run knows as a temporary). Nothing has moved when it throws.
    func move(_ from: String, to: String, aside: String, isNew: Bool = true) throws(TesseraError) -> Move {
        guard case .success = linkStatus(to) else {
            try willMove(from, to: to, exchange: false, isNew: isNew)
            try renameFile(from, to: to)
            return Move(replaced: nil) { (try? renameFile(to, to: from)) != nil }
        }
        try willMove(from, to: to, exchange: true, isNew: isNew)
        switch valueOrErrno("renameat2", path: to, { system_rename_exchange(from, to) }) {
        case .success: return Move(replaced: from) { (try? exchangePaths(from, to)) != nil }
        case .failure(let error) where Self.noExchange.contains(error.rawValue): break
        case .failure(let error): throw .system(operation: "renameat2", errno: error.rawValue, path: to)
        }
        // (The exchange journaled above was not made: a recovery finds the old output at `to`,
        // not the new one it names, and leaves it.)
        try willMove(to, to: aside, exchange: false, isNew: false)
        try renameFile(to, to: aside)
        do throws(TesseraError) {
            try willMove(from, to: to, exchange: false, isNew: isNew)
            try renameFile(from, to: to)
        } catch {
            _ = try? renameFile(aside, to: to)
            throw error
        }
        return Move(replaced: aside) {
            guard linkStatus(from).isFailure, (try? renameFile(to, to: from)) != nil else { return false }
            return (try? renameFile(aside, to: to)) != nil
        }
    }

    private func removeJournals() {
        for entry in journals { entry.journal.remove() }
        journals = []
        records = []
    }

    /// What puts back the state before a move, should a later output fail.
    func onUndo(_ step: @escaping () -> Void) { undoSteps.append(step) }

    /// What is left to do once every output is in place (removing the replaced ones).
    func afterwards(_ step: @escaping () -> Void) { afterSteps.append(step) }

    /// Undoes every move so far, newest first; what was to be removed afterwards is not.
    func rollBack() {
        for step in undoSteps.reversed() { step() }
        undoSteps = []
        afterSteps = []
        removeJournals()
    }

    /// Every output is in place: removes what they replaced.
    func finish() {
        undoSteps = []
        let steps = afterSteps
        afterSteps = []
        for step in steps { step() }
        removeJournals()
    }

    /// Commits `body`'s moves as one: rolled back if it throws, finished if it does not.
    /// `locking`: the folders the moves go into (their flock held throughout); waiting for
    /// them stops (`.cancelled`, nothing moved) when `cancellation` is raised.
    static func all(locking folders: [String] = [], cancellation: RenderCancellation? = nil,
                    _ body: (OutputCommit) throws(TesseraError) -> Void) throws(TesseraError) {
        let locks = try lockFolders(folders, cancellation: cancellation) ?? []
        defer { for lock in locks { lock.close() } }
        let commit = OutputCommit()
        do throws(TesseraError) {
            try body(commit)
            for entry in commit.journals { try entry.journal.append(CommitJournal.done) }
        } catch {
            commit.rollBack()
            throw error
        }
        commit.finish()
    }

    /// flock(2) LOCK_EX on each folder, one lock a folder however it is named (by device and
    /// inode: a folder reached by two paths, a bind mount, was locked twice and the render
    /// waited on itself), in the order of their device and inode, so that two commits never
    /// wait on each other crosswise. Polled: a raised `cancellation` stops the wait (Ctrl-C
    /// was ignored while another process held a folder), and past `patienceSeconds` nil is
    /// returned. Best effort otherwise: a folder that cannot be opened or locked (no read
    /// permission, NFS without lock support) is committed into without.
    static func lockFolders(_ folders: [String], cancellation: RenderCancellation? = nil,
                            patienceSeconds: Double? = nil) throws(TesseraError) -> [FileDescriptor]? {
        var opened: [(key: [UInt64], file: FileDescriptor)] = []
        for folder in Set(folders.map { $0.isEmpty ? "." : $0 }) {
            guard let file = try? FileDescriptor.open(folder, flags: O_RDONLY | O_DIRECTORY) else { continue }
            var info = stat()
            guard fstat(file.rawValue, &info) == 0, !opened.contains(where: { $0.key == [UInt64(info.st_dev), UInt64(info.st_ino)] }) else {
                file.close()
                continue
            }
            opened.append(([UInt64(info.st_dev), UInt64(info.st_ino)], file))
        }
        opened.sort { $0.key.lexicographicallyPrecedes($1.key) }
        let started = monotonicSeconds()
        var locks: [FileDescriptor] = []
        func release() {
            for entry in opened { entry.file.close() }
        }
        for entry in opened {
            while system_flock(entry.file.rawValue, LOCK_EX | LOCK_NB) != 0 {
                guard errno == EWOULDBLOCK || errno == EINTR else { break }  // unlockable: without
                if cancellation?.isCancelled == true {
                    release()
                    throw .cancelled
                }
                if let patienceSeconds, monotonicSeconds() - started > patienceSeconds {
                    release()
                    return nil
                }
                usleep(20_000)
            }
            locks.append(entry.file)
        }
        return locks
    }
}
