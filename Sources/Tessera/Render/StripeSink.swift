// StripeSink.swift — an output, as the stripe pipeline sees it: something that receives the
// canvas's finished stripes, in order, and makes a file (or a pyramid) of them.
//
// The pipeline (StripePipeline.swift) knows nothing of JPEG or Deep Zoom; it hands every stripe to
// every sink. Adding an output is a new sink and a case of RenderOutput: the pipeline does not
// change.
//
// Threading contract:
// - `prepare` runs on a worker thread, right after the worker filled the stripe, for different
//   stripes at once; it may touch only the stripe's rows and its own thread-safe state. What it
//   returns comes back to `take` with the stripe (the parallel JPEG compresses here).
// - `take`, `finish`, `commit`, `discard` and `record` run on the pipeline's writer thread, one at
//   a time, with stripes in canvas order, each exactly once.
// - A sink that `runsBatches` (a pyramid: Deep Zoom, TIFF) spreads each stripe's work over jobs
//   on all cores. The first such sink runs the stripe's batch; the other sinks hand it their
//   work for the same stripe as jobs (`jobs(for:prepared:)`: one job that calls `take` for a
//   sink that does not batch, such as the JPEG's; its own planned jobs for another pyramid),
//   which it runs in the same batch (`alongside`), so the outputs share one team of threads
//   instead of oversubscribing the cores. Once the batch has run, the writer calls each such
//   sink's `complete`, in order. Without a sink that batches, the writer calls each `take`
//   itself.

/// A stripe's work for one sink as jobs that another sink's batch runs (see the threading
/// contract).
struct StripeJobs {
    /// How many jobs; `run(0)` ... `run(count - 1)` each run once, on any thread, at once.
    let count: Int
    let run: (Int) -> Void
    /// After every job ran, on the writer's thread: ends the stripe's work (passes on what the
    /// jobs made) and throws the jobs' first error.
    let complete: () throws(TesseraError) -> Void

    /// No jobs.
    static var none: StripeJobs { StripeJobs(count: 0, run: { _ in }, complete: {}) }

    /// Runs every job on this thread, in order.
    func runAll() {
        for job in 0..<count { run(job) }
    }

    /// `parts`' jobs as one numbering, in their order (completed in their order too).
    static func combining(_ parts: [StripeJobs]) -> StripeJobs {
        if parts.count == 1 { return parts[0] }
        var starts: [Int] = []
        var total = 0
        for part in parts {
            starts.append(total)
            total += part.count
        }
        return StripeJobs(count: total, run: { job in
            var index = parts.count - 1
            while starts[index] > job { index -= 1 }
            parts[index].run(job - starts[index])
        }, complete: { () throws(TesseraError) in
            for part in parts { try part.complete() }
        })
    }
}

/// A finished stripe's rows, valid while the sink is being given them.
struct StripeView {
    /// The stripe's number (stripes are handed over in this order, from 0).
    let index: Int
    /// The canvas rows it holds.
    let rows: Range<Int>
    /// Its first row; `rows.count` rows of `width` RGB pixels, `bytesPerRow` apart.
    let pixels: UnsafeRawPointer
    let bytesPerRow: Int
    let width: Int
}

protocol StripeSink: AnyObject {
    /// Work a worker does on the stripe it has just filled (nil: none).
    func prepare(_ stripe: StripeView) throws(TesseraError) -> EncodedStripe?
    /// Whether `take` runs a batch of jobs on all cores (see the threading contract).
    var runsBatches: Bool { get }
    /// Takes the next stripe. `prepared` is what `prepare` returned for it; `alongside`, given
    /// only to a sink that runs batches, is the other sinks' work for this stripe: jobs to run in
    /// the same batch (their `complete` is the writer's to call).
    func take(_ stripe: StripeView, prepared: EncodedStripe?, alongside: StripeJobs?) throws(TesseraError)
    /// This sink's work for the next stripe as jobs another sink's batch runs, in place of
    /// `take`. By default one job that calls `take`; a sink that runs batches gives its batch's
    /// jobs.
    func jobs(for stripe: StripeView, prepared: EncodedStripe?) throws(TesseraError) -> StripeJobs
    /// After the last stripe: completes the output (still invisible).
    func finish() throws(TesseraError)
    /// Makes the output appear under its name, replacing what was there, as one of the render's
    /// outputs: undone through `commit` if a later one fails (OutputCommit).
    func commit(in commit: OutputCommit) throws(TesseraError)
    /// Abandons the output; nothing of it is left (what was at its name stays).
    func discard()
    /// Adds what this output wrote to the render's summary.
    func record(into summary: inout RenderSummary)
}

extension StripeSink {
    func prepare(_ stripe: StripeView) throws(TesseraError) -> EncodedStripe? { nil }
    var runsBatches: Bool { false }

    func jobs(for stripe: StripeView, prepared: EncodedStripe?) throws(TesseraError) -> StripeJobs {
        let errors = FirstError()
        return StripeJobs(count: 1, run: { _ in
            do throws(TesseraError) {
                try self.take(stripe, prepared: prepared, alongside: nil)
            } catch {
                errors.record(error)
            }
        }, complete: { () throws(TesseraError) in try errors.check() })
    }
}
