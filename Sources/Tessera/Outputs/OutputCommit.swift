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
// Threading: the one thread that commits the outputs.
import Glibc

final class OutputCommit {
    private var undoSteps: [() -> Void] = []
    private var afterSteps: [() -> Void] = []

    /// What puts back the state before a move, should a later output fail.
    func onUndo(_ step: @escaping () -> Void) { undoSteps.append(step) }

    /// What is left to do once every output is in place (removing the replaced ones).
    func afterwards(_ step: @escaping () -> Void) { afterSteps.append(step) }

    /// Undoes every move so far, newest first; what was to be removed afterwards is not.
    func rollBack() {
        for step in undoSteps.reversed() { step() }
        undoSteps = []
        afterSteps = []
    }

    /// Every output is in place: removes what they replaced.
    func finish() {
        undoSteps = []
        let steps = afterSteps
        afterSteps = []
        for step in steps { step() }
    }

    /// Commits `body`'s moves as one: rolled back if it throws, finished if it does not.
    static func all(_ body: (OutputCommit) throws(TesseraError) -> Void) throws(TesseraError) {
        let commit = OutputCommit()
        do throws(TesseraError) {
            try body(commit)
        } catch {
            commit.rollBack()
            throw error
        }
        commit.finish()
    }
}
