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
// A filesystem without the exchange (EINVAL) has the new file renamed over the old one, which a
// later failure cannot bring back; it is the only case where a failed render can leave an
// output replaced.
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
    private var journal: CommitJournal?

    /// Records a move about to be made, in the journal (made beside the first move's
    /// destination): `from` to `to`, swapped or renamed; `isNew`: what moves is the new output.
    func willMove(_ from: String, to: String, exchange: Bool, isNew: Bool = true) throws(TesseraError) {
        if journal == nil { journal = try CommitJournal(directory: parentDirectory(of: to)) }
        try journal!.willMove(from, to: to, exchange: exchange, isNew: isNew)
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
        journal?.remove()
        journal = nil
    }

    /// Every output is in place: removes what they replaced.
    func finish() {
        undoSteps = []
        let steps = afterSteps
        afterSteps = []
        for step in steps { step() }
        journal?.remove()
        journal = nil
    }

    /// Commits `body`'s moves as one: rolled back if it throws, finished if it does not.
    /// `locking`: the folders the moves go into (their flock held throughout).
    static func all(locking folders: [String] = [], _ body: (OutputCommit) throws(TesseraError) -> Void) throws(TesseraError) {
        let locks = lockFolders(folders)
        defer { for lock in locks { lock.close() } }
        let commit = OutputCommit()
        do throws(TesseraError) {
            try body(commit)
            try commit.journal?.done()
        } catch {
            commit.rollBack()
            throw error
        }
        commit.finish()
    }

    /// flock(2) LOCK_EX on each folder, in order of their resolved paths, waiting for a commit
    /// that holds one. Best effort: a folder that cannot be opened or locked (NFS without
    /// lock support) is committed into without.
    private static func lockFolders(_ folders: [String]) -> [FileDescriptor] {
        let resolved = Set(folders.compactMap { resolvedPath($0.isEmpty ? "." : $0) }).sorted()
        var locks: [FileDescriptor] = []
        for folder in resolved {
            guard let file = try? FileDescriptor.open(folder, flags: O_RDONLY | O_DIRECTORY) else { continue }
            var status: Int32
            repeat { status = system_flock(file.rawValue, LOCK_EX) } while status != 0 && errno == EINTR
            if status == 0 { locks.append(file) } else { file.close() }
        }
        return locks
    }
}
