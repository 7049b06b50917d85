// Report.swift — the text the command line shows: the plan, progress, warnings, summary.
import Tessera

public enum Report {
    /// `--dry-run`'s plan, several lines.
    public static func plan(_ plan: RenderPlan, layout: CellLayout, photoCount: Int, disk: [DiskRequirement],
                            settings: RenderSettings) -> String {
        let megapixels = Double(plan.width) * Double(plan.height) / 1e6
        var lines = [
            "output      \(plan.width) x \(plan.height) px (\(formatDecimal(megapixels, places: 1)) MP), \(layout.columns) x \(layout.rows) cells of \(layout.cellWidth) x \(layout.cellHeight) px",
            "photos      \(photoCount) usable, \(plan.distinctPhotos) distinct in the grid",
            plan.writesJPEG
                ? "jpeg        quality \(settings.quality), \(settings.subsampling.rawValue) subsampling, baseline, \(plan.encoder.rawValue) encoder" + (plan.restartInterval > 0 ? ", restart interval \(plan.restartInterval) MCUs" : "")
                : "jpeg        none (Deep Zoom only)",
            "stripes     \(plan.geometry.stripeCount) of \(plan.geometry.stripeHeight) rows (\(formatBytes(Int64(plan.stripeBytes))) each), \(plan.windowStripes) in flight",
            "workers     \(plan.workers)",
            "decoders    \(formatBytes(Int64(plan.decodePoolBytes))) shared; progressive photos drawn at 1/8 keep 2 bytes a block, larger scales spill their coefficients to \(plan.temporaryDirectory) when over half of that; a photo decoded whole (HEIF, lossless WebP) may hold up to \(formatBytes(Int64(plan.wholeImageLimitBytes))), alone",
            "cell cache  \(plan.cellSlots) cells of \(formatBytes(Int64(plan.cellBytes)))",
            "memory      about \(formatBytes(Int64(plan.estimatedPeakBytes))) peak (budget \(formatBytes(Int64(settings.maxMemoryBytes))))",
            "disk        " + (plan.writesJPEG ? "jpeg about \(formatBytes(plan.estimatedOutputBytes)) (at most \(formatDecimal(RenderPlan.bytesPerPixel(quality: settings.quality, subsampling: settings.subsampling), places: 2)) B/px), " : "")
                + "stripes \(formatBytes(plan.stripeDiskBytes)) in \(plan.stripeDirectory)" + (plan.spillDiskBytes > 0 ? ", cell spill \(formatBytes(plan.spillDiskBytes)) in \(plan.temporaryDirectory)" : ""),
        ]
        if let deepZoom = plan.deepZoom, let zoom = plan.deepZoomSettings {
            lines.insert("deep zoom   \(deepZoom.levels.count) levels, \(deepZoom.tileCount) tiles of \(deepZoom.tileSize) px + \(deepZoom.overlap) overlap at quality \(zoom.quality), at most \(formatBytes(plan.deepZoomDiskBytes)), \(plan.deepZoomInodes) files; \(formatBytes(Int64(plan.deepZoomMemoryBytes))) of memory", at: 3)
        }
        for requirement in disk {
            var line = "free space  \(requirement.directory): needs \(formatBytes(requirement.neededBytes)), \(formatBytes(requirement.freeBytes)) free"
            if requirement.neededInodes > 0 {
                line += "; \(requirement.neededInodes) files, \(requirement.freeInodes == .max ? "no inode limit" : "\(requirement.freeInodes) inodes free")"
            }
            lines.append(line + (requirement.fits ? "" : "  NOT ENOUGH"))
        }
        return lines.joined(separator: "\n")
    }

    /// The summary after a render: one line, then one line for each photo that was skipped before
    /// rendering (`skipped`) or drawn as a placeholder.
    public static func summary(_ summary: RenderSummary, outputPath: String?, deepZoomPath: String? = nil,
                               skipped: [SkippedPhoto] = []) -> String {
        var names: [String] = [], sizes: [String] = []
        if let outputPath {
            names.append(outputPath)
            sizes.append(formatBytes(summary.outputBytes))
        }
        if let deepZoomPath {
            names.append(deepZoomPath)
            sizes.append("\(summary.deepZoomTiles) tiles of \(formatBytes(summary.deepZoomBytes))")
        }
        var line = "wrote \(names.joined(separator: " and ")): \(summary.width) x \(summary.height) px (\(formatDecimal(summary.megapixels, places: 1)) MP), "
        line += "\(sizes.joined(separator: " + ")) in \(formatDecimal(summary.seconds, places: 2)) s, "
        line += "\(formatDecimal(summary.megapixelsPerSecond, places: 1)) MP/s, peak RSS \(formatBytes(summary.peakResidentBytes))"
        if !summary.failedPhotos.isEmpty { line += ", \(summary.failedPhotos.count) photo(s) drawn as placeholders" }
        if !skipped.isEmpty { line += ", \(skipped.count) file(s) skipped" }
        for photo in skipped { line += "\n  skipped      \(photo.path): \(photo.reason)" }
        for photo in summary.failedPhotos { line += "\n  placeholder  \(photo.path): \(photo.reason)" }
        return line
    }

    /// The mosaic's own summary: fit, repeats, and where the time went before rendering.
    public static func mosaic(_ match: MosaicMatch, photoCount: Int, analysed: Int, reused: Int,
                              analysisSeconds: Double, targetSeconds: Double, matchSeconds: Double, duplicates: Int = 0) -> String {
        let distinct = Set(match.assignment).count
        var line = "mosaic: mean Oklab error \(formatDecimal(match.meanError, places: 4)) per sub-cell, "
        line += match.smallestRepeatDistance.map { "identical photos at least \($0) cell(s) apart" } ?? "no photo repeated"
        line += ", \(distinct) of \(photoCount) photos used"
        if duplicates > 0 { line += " (\(duplicates) duplicate photo(s) of pictures already counted left out)" }
        if match.constraintViolations > 0 { line += ", \(match.constraintViolations) cell(s) could not meet the constraints" }
        line += "\n        analysis \(analysed) photo(s) analysed, \(reused) from the index in \(formatDecimal(analysisSeconds, places: 2)) s; "
        line += "target \(formatDecimal(targetSeconds, places: 2)) s; matching \(match.assignment.count) cells \(formatDecimal(matchSeconds, places: 2)) s"
        return line
    }

    /// What the photo search left out on purpose, as a dry run shows it; nil when nothing was.
    public static func leftOut(_ leftOut: LeftOut) -> String? {
        guard leftOut.total > 0 else { return nil }
        var parts: [String] = []
        if leftOut.hidden > 0 { parts.append("\(leftOut.hidden) hidden (--include-hidden takes them)") }
        if leftOut.thumbnailFolders > 0 { parts.append("\(leftOut.thumbnailFolders) thumbnail folder(s)") }
        if leftOut.excluded > 0 { parts.append("\(leftOut.excluded) by --exclude") }
        return "left out    " + parts.joined(separator: ", ")
    }

    /// A progress bar line (no newline) for `done` of `total` rows after `seconds`.
    public static func progressBar(done: Int, total: Int, pixelsPerRow: Int, seconds: Double, width: Int = 30) -> String {
        let fraction = total > 0 ? Double(done) / Double(total) : 1
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let rate = seconds > 0 ? Double(done) / seconds : 0
        let eta = rate > 0 ? Double(total - done) / rate : 0
        let megapixelsPerSecond = rate * Double(pixelsPerRow) / 1e6
        return "[\(bar)] \(Int(fraction * 100))%  \(formatDecimal(megapixelsPerSecond, places: 0)) MP/s  ETA \(formatDecimal(eta, places: 0)) s"
    }
}
