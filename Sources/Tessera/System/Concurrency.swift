// Concurrency.swift — the helpers every concurrent part of Tessera shares.
//
// Tessera's concurrency mechanisms, one each (docs/how-it-works.md lists every lock too):
// - `StripePipeline` (Render/) runs the render's stripes: worker jobs on Dispatch's global pool
//   fill them, one writer (the caller's thread) hands them in order to the outputs.
// - `JobTeam` (Threads.swift): batches of independent jobs on a fixed team (the Deep Zoom
//   writer's per-stripe batches; measured faster there than concurrentPerform, see JobTeam).
// - `JoinableThread` (Threads.swift): a long-running thread with an owner who joins it (the
//   JobTeam's helpers, the pyramid's tile-file writer).
// - `mapInLanes` (here): data-parallel loops over independent items (reading headers, analysing
//   photos, matching cells), on Dispatch's concurrentPerform.
// - `FirstError` (here): the first error any thread met, which everyone else stops for.
// - `RenderCancellation` (StripeRenderer.swift): one flag, relaxed C atomics, that Swift and
//   the C decoders poll; `AtomicCounter` (Mutex.swift): a progress count, a Swift atomic.
// The command line adds Dispatch signal sources, which only raise a RenderCancellation.
import Dispatch

/// A value handed to concurrent code that uses it safely by construction (each lane writes its
/// own elements through a shared pointer).
struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// The first error any of several threads met. Later errors are dropped: they are almost always
/// consequences of the first (a stopped pipeline, a closed file).
///
/// Threading: any thread may record or read.
final class FirstError: @unchecked Sendable {
    private let lock = Mutex()
    private var stored: TesseraError?  // protected by `lock`

    /// Keeps `error` unless one is kept already; returns whether it was the first.
    @discardableResult
    func record(_ error: TesseraError) -> Bool {
        lock.withLock {
            guard stored == nil else { return false }
            stored = error
            return true
        }
    }

    var error: TesseraError? { lock.withLock { stored } }

    /// Throws the kept error, if any.
    func check() throws(TesseraError) {
        if let error { throw error }
    }
}

/// `body(index, &scratch)` for every index in 0..<count, on up to `lanes` lanes at once (lane l
/// takes l, l + lanes, l + 2 x lanes, ...), each lane with scratch space of its own from
/// `makeScratch`. Returns each index's value; nil for the indices a cancellation stopped the
/// lanes before (a lane checks before each item).
///
/// Why concurrentPerform here: these loops never wait on each other, so Dispatch's pool, as
/// wide as the cores, keeps every core busy with nothing to manage.
func mapInLanes<Scratch, Value>(count: Int, lanes requested: Int, cancellation: RenderCancellation? = nil,
                                scratch makeScratch: @Sendable () -> Scratch, _ body: @Sendable (Int, inout Scratch) -> Value) -> [Value?] {
    var results = [Value?](repeating: nil, count: count)
    guard count > 0 else { return results }
    let lanes = max(1, min(requested, count))
    results.withUnsafeMutableBufferPointer { slots in
        let base = UnsafeSendable(slots.baseAddress!)
        DispatchQueue.concurrentPerform(iterations: lanes) { lane in
            var scratch = makeScratch()
            var index = lane
            while index < count {
                if cancellation?.isCancelled == true { return }
                base.value[index] = body(index, &scratch)
                index += lanes
            }
        }
    }
    return results
}
