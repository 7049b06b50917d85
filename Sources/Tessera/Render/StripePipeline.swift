// StripePipeline.swift — one render's stripes: workers fill them, one writer hands them in order
// to the outputs.
//
//      photos ──decode at draw size──▶ CellCache ──CellPainter──▶ stripe slots (StripeStore,
//                  (worker jobs)                                   mmapped; a window of N)
//                                                                        │ in order
//                                                                        ▼
//                                           writer (the caller's thread) ──▶ every StripeSink
//
// Threading contract:
// - The window is `plan.windowStripes` slots; stripe i uses slot i % window. Each slot is in one
//   state: free, filling (a worker owns its bytes), ready (filled, waiting for the writer), or
//   taken (the writer and the sinks own its bytes). `lock` protects the states.
// - A stripe is started only when its slot is free and fewer than `plan.workers` stripes are
//   being filled, so no worker ever waits for a slot: a worker that finds nothing to start ends
//   its job, and the writer starts the next stripes each time it frees a slot. (A worker may
//   still wait, briefly, for a photo another worker is decoding: CellCache.)
// - The writer takes stripe i only once it is ready, gives it to every sink (the sinks' own
//   contract: StripeSink.swift), then frees its slot. The sinks therefore see every row once,
//   in order, never with gaps (the same contract as libvips's sink_disc).
// - Errors: the first error from any thread goes into `errors` (one FirstError); no stripe is
//   started after it, the writer stops at its next wait, and `run` throws it once every worker
//   job has ended (so no worker touches a slot after the store is released).
// - Cancellation: checked before each stripe is started and after each stripe is written.
// - Events reach the observer on the writer's thread only.
//
// Where the workers run: jobs on Dispatch's global concurrent pool, at most `plan.workers` of
// them at once (the `filling` count above), each of which ends when it finds no stripe to
// start, so none ever blocks a pool thread waiting for a slot. (A pool of the pipeline's own
// threads was measured against it on the 1.2-gigapixel grid: equal within noise, and removed;
// docs/performance.md has the numbers.)
import Dispatch

final class StripePipeline: @unchecked Sendable {
    private enum SlotState: Equatable {
        case free
        case filling(Int)
        case ready(Int)
        case taken(Int)
    }

    private let plan: RenderPlan
    private let store: StripeStore
    private let painter: CellPainter
    private let sinks: [StripeSink]
    private let cancellation: RenderCancellation?
    let errors = FirstError()

    private let lock = Mutex()
    private let changed: Condition
    // Protected by `lock`.
    private var slots: [SlotState]
    private var prepared: [[EncodedStripe?]]
    private var nextToStart: Int
    private var filling = 0
    /// The stripes rendered: all of them, or a shard's (ShardPlan.swift).
    private let stripes: Range<Int>

    init(plan: RenderPlan, store: StripeStore, painter: CellPainter, sinks: [StripeSink], cancellation: RenderCancellation?,
         stripes: Range<Int>? = nil) {
        self.plan = plan
        self.stripes = stripes ?? 0..<plan.geometry.stripeCount
        nextToStart = self.stripes.lowerBound
        self.store = store
        self.painter = painter
        self.sinks = sinks
        self.cancellation = cancellation
        changed = Condition(lock)
        slots = Array(repeating: .free, count: plan.windowStripes)
        prepared = Array(repeating: [], count: plan.windowStripes)
    }

    /// Runs the render: starts the workers, writes every stripe in order on this thread, and
    /// returns once every worker job has ended. Throws the first error of any thread.
    func run(observer: (RenderEvent) -> Void) throws(TesseraError) {
        let geometry = plan.geometry
        let window = plan.windowStripes
        lock.withLock { startStripes() }
        for index in stripes {
            let slot = index % window
            let ready: [EncodedStripe?]? = lock.withLock {
                while errors.error == nil && slots[slot] != .ready(index) { changed.wait() }
                guard errors.error == nil else { return nil }
                slots[slot] = .taken(index)
                return prepared[slot]
            }
            guard let ready else { break }
            do throws(TesseraError) {
                let region = try store.mapping(slot: slot)
                try region.withUnsafeMutableBytes { bytes throws(TesseraError) in
                    let stripe = StripeView(index: index, rows: geometry.rows(ofStripe: index), pixels: UnsafeRawPointer(bytes.baseAddress!),
                                            bytesPerRow: geometry.bytesPerRow, width: geometry.width)
                    try write(stripe, prepared: ready)
                }
            } catch {
                errors.record(error)
                break
            }
            lock.withLock {
                slots[slot] = .free
                prepared[slot] = []
                startStripes()
            }
            for event in painter.cache.takeEvents() { observer(event) }
            observer(.progress(rowsWritten: geometry.rows(ofStripe: index).upperBound, totalRows: geometry.height))
            if cancellation?.isCancelled == true {
                errors.record(.cancelled)
                break
            }
        }
        lock.withLock {
            changed.broadcast()
            while filling > 0 { changed.wait() }
        }
        try errors.check()
        for sink in sinks { try sink.finish() }
    }

    /// Gives `stripe` to every sink. With a sink that runs batches, the others' work for the
    /// stripe runs as jobs of its batch: first the sinks that do not batch (one job each, the
    /// JPEG's stripe being the longest), then the jobs of the other sinks that batch (a TIFF
    /// beside a Deep Zoom folder), so every output shares one team of threads; each is then
    /// completed in that order. Without one, each sink's `take` in turn on this thread.
    private func write(_ stripe: StripeView, prepared: [EncodedStripe?]) throws(TesseraError) {
        func mine(_ number: Int) -> EncodedStripe? { prepared.isEmpty ? nil : prepared[number] }
        guard let batching = sinks.firstIndex(where: { $0.runsBatches }) else {
            for (number, sink) in sinks.enumerated() { try sink.take(stripe, prepared: mine(number), alongside: nil) }
            return
        }
        var side: [StripeJobs] = []
        for batches in [false, true] {
            for (number, sink) in sinks.enumerated() where number != batching && sink.runsBatches == batches {
                side.append(try sink.jobs(for: stripe, prepared: mine(number)))
            }
        }
        let alongside = side.isEmpty ? nil : StripeJobs.combining(side)
        try sinks[batching].take(stripe, prepared: mine(batching), alongside: alongside)
        try alongside?.complete()
    }

    /// Starts every stripe that may start now: its slot free, fewer than `plan.workers` being
    /// filled, no error, not cancelled. Called with `lock` held.
    private func startStripes() {
        let window = plan.windowStripes
        while filling < plan.workers && nextToStart < stripes.upperBound
                && slots[nextToStart % window] == .free && errors.error == nil {
            if cancellation?.isCancelled == true {
                errors.record(.cancelled)
                changed.broadcast()
                return
            }
            let index = nextToStart
            nextToStart += 1
            filling += 1
            slots[index % window] = .filling(index)
            DispatchQueue.global().async { [self] in fillStripes(from: index) }
        }
    }

    /// A worker's job: fills stripe `first`, publishes it, and goes on with the next stripe that
    /// may start, if any; otherwise ends (it never waits for a slot).
    private func fillStripes(from first: Int) {
        var index = first
        while true {
            let slot = index % plan.windowStripes
            var made: [EncodedStripe?] = []
            do throws(TesseraError) {
                let region = try store.mapping(slot: slot)
                let rows = plan.geometry.rows(ofStripe: index)
                try region.withUnsafeMutableBytes { bytes throws(TesseraError) in
                    try painter.fill(stripe: index, into: bytes)
                    let stripe = StripeView(index: index, rows: rows, pixels: UnsafeRawPointer(bytes.baseAddress!),
                                            bytesPerRow: plan.geometry.bytesPerRow, width: plan.geometry.width)
                    for sink in sinks { made.append(try sink.prepare(stripe)) }
                }
            } catch {
                errors.record(error)
            }
            let next: Int? = lock.withLock {
                slots[slot] = .ready(index)
                prepared[slot] = made
                changed.broadcast()
                // Go on with the next stripe if it may start; else end this job.
                let window = plan.windowStripes
                if cancellation?.isCancelled == true { errors.record(.cancelled) }
                guard errors.error == nil, nextToStart < stripes.upperBound,
                      slots[nextToStart % window] == .free else {
                    filling -= 1
                    changed.broadcast()
                    return nil
                }
                let claimed = nextToStart
                nextToStart += 1
                slots[claimed % window] = .filling(claimed)
                return claimed
            }
            guard let next else { return }
            index = next
        }
    }
}
