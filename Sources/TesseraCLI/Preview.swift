// Preview.swift — `--preview FILE`: the render's plan drawn small (about 2,000 px on its longer
// side) before the full outputs, so a person can tune a mosaic or a grid in seconds and render
// the gigapixel once.
import Tessera

extension Runner {
    /// Writes the preview of `request` to `path` (the same layout, photos and tint, smaller
    /// cells), with its own pre-flight and progress; reports it and returns its summary. In a dry
    /// run it only says what it would write.
    func writePreview(of request: RenderRequest, to path: String, dryRun: Bool) throws(TesseraError) -> RenderSummary? {
        let preview = request.preview(to: path)
        if dryRun {
            console.result("preview     would write \(path): \(preview.layout.width) x \(preview.layout.height) px, "
                           + (preview.layout.framed == nil ? "cells of " : "cells up to ")
                           + "\(preview.layout.cellWidth) x \(preview.layout.cellHeight) px")
            return nil
        }
        let renderer = try StripeRenderer(request: preview, cancellation: cancellation)
        for stale in renderer.removeStaleTemporaries() { console.warning("removed \(stale), left by an earlier run that was killed") }
        try DiskPreflight.check(plan: renderer.plan, outputPath: path)
        console.phase(.preview)
        let started = monotonicSeconds()
        let console = self.console
        // A photo that fails here fails the same way in the full render, which reports it: the
        // preview does not name it twice.
        let summary = try renderer.render { event in
            if case .progress(let done, let total) = event {
                console.progress(.preview, done: done, total: total, seconds: monotonicSeconds() - started, rowWidth: preview.layout.width)
            }
        }
        console.result(Self.previewLine(summary, path: path, cellWidth: preview.layout.cellWidth, cellHeight: preview.layout.cellHeight,
                                        mixed: preview.layout.framed != nil))
        return summary
    }

    /// The line a preview reports.
    static func previewLine(_ summary: RenderSummary, path: String, cellWidth: Int, cellHeight: Int, mixed: Bool = false) -> String {
        "preview: wrote \(path): \(summary.width) x \(summary.height) px (cells \(mixed ? "up to" : "of") \(cellWidth) x \(cellHeight) px), "
            + "\(formatBytes(summary.outputBytes)) in \(formatDecimal(summary.seconds, places: 2)) s"
    }

    /// The end of a run that asked only for a preview: its summary for programs. (Its line was
    /// said when it was written; a dry run said what it would write.)
    func previewOnly(_ summary: RenderSummary?, path: String, skipped: Int) -> ExitCode {
        guard let summary else { return .success }
        console.finished([("width", "\(summary.width)"), ("height", "\(summary.height)"), ("bytes", "\(summary.outputBytes)"),
                          ("seconds", formatDecimal(summary.seconds, places: 3)), ("peak_rss_bytes", "\(summary.peakResidentBytes)"),
                          ("skipped", "\(skipped)"), ("outputs", "{\"preview\": \(jsonStringLiteral(path))}")])
        return .success
    }
}
