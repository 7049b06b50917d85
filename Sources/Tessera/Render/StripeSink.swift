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
// - A sink that `runsBatches` (the Deep Zoom pyramid) spreads each stripe's work over jobs on all
//   cores; the pipeline then gives it the other sinks' work for the same stripe (`alongside`) to
//   run as one more job of its batch, so the outputs share the cores instead of oversubscribing
//   them. Without such a sink, the writer runs each sink's work itself.

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
    /// only to a sink that runs batches, is the other sinks' work for this stripe.
    func take(_ stripe: StripeView, prepared: EncodedStripe?, alongside: (() -> Void)?) throws(TesseraError)
    /// After the last stripe: completes the output (still invisible).
    func finish() throws(TesseraError)
    /// Makes the output appear under its name, replacing what was there.
    func commit() throws(TesseraError)
    /// Abandons the output; nothing of it is left (what was at its name stays).
    func discard()
    /// Adds what this output wrote to the render's summary.
    func record(into summary: inout RenderSummary)
}

extension StripeSink {
    func prepare(_ stripe: StripeView) throws(TesseraError) -> EncodedStripe? { nil }
    var runsBatches: Bool { false }
}
