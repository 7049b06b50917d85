// Report.swift — the text the command line shows: the plan, progress, warnings, summary.
import Tessera

public enum Report {
    /// The note for `--order date` when some photos carry no date taken (no EXIF date: a
    /// screenshot, an edited export, a scan): where they went, so that a grid of a trip whose
    /// end fills with undated pictures is not a surprise. Nil in the other orders, or when every
    /// photo is dated.
    static func undatedNote(_ order: PhotoOrder, photos: PhotoTable) -> String? {
        guard case .dateTaken = order else { return nil }
        var undated = 0
        for photo in photos where photo.header.dateTaken <= 0 { undated += 1 }
        guard undated > 0 else { return nil }
        return "note        \(formatCount(undated)) of the \(formatCount(photos.count)) photos have no date taken (no EXIF date): "
            + (undated == photos.count ? "the order is by path" : "they follow the dated ones, by path")
    }

    /// The render's peak as a dry run shows it. After a mosaic's preparation, a decoder pool's
    /// worth more: what the analysis and the target's decode leave resident under the render
    /// (the decoders' code and arenas, the library's table), measured at 8 MB on a cold mosaic
    /// of 3,900 x 2,700 progressive photos under 40 MiB, where the render's own plan was 21 MiB.
    static func renderPeak(_ plan: RenderPlan, preparationBytes: Int) -> Int {
        plan.estimatedPeakBytes + (preparationBytes > 0 ? plan.decodePoolBytes : 0)
    }

    /// `--dry-run`'s plan, several lines.
    /// A grid's "C x R cells of W x H px"; for a layout of frames, the cells by size: each
    /// size and its count when there are a few, else the range.
    static func cellsDescription(_ layout: CellLayout) -> String {
        guard let framed = layout.framed else {
            return "\(layout.columns) x \(layout.rows) cells of \(layout.cellWidth) x \(layout.cellHeight) px"
        }
        var counts: [Int64: Int] = [:]
        for frame in framed.frames { counts[Int64(frame.width) << 32 | Int64(frame.height), default: 0] += 1 }
        let sizes = counts.keys.sorted { ($0 & 0xFFFF_FFFF) * ($0 >> 32) > ($1 & 0xFFFF_FFFF) * ($1 >> 32) }
        func name(_ key: Int64) -> String { "\(key >> 32) x \(key & 0xFFFF_FFFF) px" }
        guard sizes.count > 6 else {
            return "\(formatCount(framed.frames.count)) cells: " + sizes.map { "\(formatCount(counts[$0]!)) of \(name($0))" }.joined(separator: ", ")
        }
        return "\(formatCount(framed.frames.count)) cells of \(formatCount(sizes.count)) sizes, \(name(sizes.last!)) to \(name(sizes.first!))"
    }

    public static func plan(_ plan: RenderPlan, layout: CellLayout, photoCount: Int, disk: [DiskRequirement],
                            settings: RenderSettings, preparationBytes: Int = 0) -> String {
        let megapixels = Double(plan.width) * Double(plan.height) / 1e6
        // Every run scans its library first; a small render plans less than the scan holds.
        let render = renderPeak(plan, preparationBytes: preparationBytes), scan = PhotoLibrary.plannedScanBytes
        var lines = [
            "output      \(plan.width) x \(plan.height) px (\(formatDecimal(megapixels, places: 1)) MP), " + cellsDescription(layout),
            layout.framed == nil ? "photos      \(formatCount(photoCount)) usable, \(formatCount(plan.distinctPhotos)) distinct in the grid"
                : "photos      \(formatCount(photoCount)) usable, \(formatCount(layout.distinctPhotoCount)) drawn, "
                    + "\(formatCount(plan.distinctPhotos)) decodes (a photo at each size it is drawn)",
            plan.writesJPEG
                ? "jpeg        quality \(settings.quality), \(settings.subsampling.rawValue) subsampling, baseline, \(plan.encoder.rawValue) encoder" + (plan.restartInterval > 0 ? ", restart interval \(plan.restartInterval) MCUs" : "")
                : "jpeg        none (pyramids only)",
            "stripes     \(plan.geometry.stripeCount) of \(plan.geometry.stripeHeight) rows (\(formatBytes(Int64(plan.stripeBytes))) each), \(plan.windowStripes) in flight",
            "workers     \(plan.workers)",
            "decoders    \(formatBytes(Int64(plan.decodePoolBytes))) shared; progressive photos drawn at 1/8 keep 2 bytes a block, larger scales spill their coefficients to \(plan.temporaryDirectory) when over half of that; a photo decoded whole (a single-picture HEIF or AVIF, a lossless WebP, an interlaced GIF) may hold up to \(formatBytes(Int64(plan.wholeImageLimitBytes))), alone",
            "cell cache  \(plan.cellSlots) cells of \(formatBytes(Int64(plan.cellBytes)))",
            "memory      about \(formatBytes(Int64(max(render, preparationBytes, scan)))) peak (budget \(formatBytes(Int64(settings.maxMemoryBytes)))\(budgetRule(settings, plan: plan)))"
                + (preparationBytes > 0 ? "; the mosaic's analysis, target and matching about \(formatBytes(Int64(preparationBytes))), the render about \(formatBytes(Int64(render)))" : "")
                + (scan > max(render, preparationBytes) ? "; the library's scan about \(formatBytes(Int64(scan))), the render about \(formatBytes(Int64(render)))" : ""),
            "disk        " + (plan.writesJPEG ? "jpeg about \(formatBytes(plan.estimatedOutputBytes)) (at \(formatDecimal(RenderPlan.bytesPerPixel(quality: settings.quality, subsampling: settings.subsampling), places: 2)) B/px, generous for photos), " : "")
                + "stripes \(formatBytes(plan.stripeDiskBytes)) in \(plan.stripeDirectory)" + (plan.spillDiskBytes > 0 ? ", cell spill \(formatBytes(plan.spillDiskBytes)) in \(plan.temporaryDirectory)" : ""),
        ]
        if let deepZoom = plan.deepZoom, let zoom = plan.deepZoomSettings {
            lines.insert("deep zoom   \(deepZoom.levels.count) levels, \(deepZoom.tileCount) tiles of \(deepZoom.tileSize) px + \(deepZoom.overlap) overlap at quality \(zoom.quality)\(zoom.viewer && zoom.previews > 0 ? ", up to \(plan.distinctPhotos) photo previews of \(zoom.previews) px" : ""), at most \(formatBytes(plan.deepZoomDiskBytes)), \(plan.deepZoomInodes) files; \(formatBytes(Int64(plan.deepZoomMemoryBytes))) of memory", at: 3)
        }
        if let tiff = plan.tiff, let chosen = plan.tiffSettings {
            let kind = tiff.needsBigTIFF(subsampling: settings.subsampling) ? "BigTIFF" : "classic TIFF"
            lines.insert("tiff        \(tiff.pageCount) level\(tiff.pageCount == 1 ? "" : "s"), \(tiff.tileCount) tiles of \(tiff.tileSize) px at quality \(chosen.quality), \(kind), at most \(formatBytes(plan.tiffDiskBytes)) (the smaller levels, at most \(formatBytes(plan.tiffSpoolBytes)), wait in \(plan.temporaryDirectory)); \(formatBytes(Int64(plan.tiffMemoryBytes))) of memory", at: plan.deepZoom == nil ? 3 : 4)
        }
        for requirement in disk {
            var line = "free space  \(requirement.directory): needs \(formatBytes(requirement.neededBytes)), "
                + (requirement.freeBytes == .max ? "free space not reported by the file system" : "\(formatBytes(requirement.freeBytes)) free")
            if requirement.neededInodes > 0 {
                line += "; \(requirement.neededInodes) files, \(requirement.freeInodes == .max ? "no inode limit" : "\(requirement.freeInodes) inodes free")"
            }
            lines.append(line + (requirement.fits ? "" : "  NOT ENOUGH"))
        }
        return lines.joined(separator: "\n")
    }

    /// Which rule chose the budget, for the dry run's memory line: nothing for a budget given.
    static func budgetRule(_ settings: RenderSettings, plan: RenderPlan) -> String {
        let rule: String
        switch settings.memoryRule {
        case .given: return ""
        case let .cgroup(version, limit):
            rule = "auto: the memory cgroup's limit of \(formatBytes(limit)) (cgroup v\(version)) less a sixteenth, at least 4 MiB"
        case let .machine(available):
            rule = "auto: half of the \(formatBytes(available)) this machine has available"
        case .fallback:
            rule = "auto: no cgroup limit or available memory could be read, so the fixed default"
        }
        let cap = settings.maxMemoryBytes == MemoryBudget.capBytes ? ", at most \(formatBytes(Int64(MemoryBudget.capBytes)))" : ""
        let steady = plan.steadyStateBudgetBytes < settings.maxMemoryBytes
            ? "; stripes and cells planned for \(formatBytes(Int64(plan.steadyStateBudgetBytes))), the rest kept for a photo decoded whole"
            : ""
        return ", " + rule + cap + steady
    }

    /// The summary after a render: one line, counting the photos skipped before rendering
    /// (`skipped`) and those drawn as placeholders.
    public static func summary(_ summary: RenderSummary, outputPath: String?, deepZoomPath: String? = nil,
                               archivePath: String? = nil, iiifPath: String? = nil, tiffPath: String? = nil, skipped: Int = 0, videos: Int = 0,
                               runSeconds: Double? = nil) -> String {
        var names: [String] = [], sizes: [String] = []
        if let outputPath {
            names.append(outputPath)
            sizes.append(formatBytes(summary.outputBytes))
        }
        if let deepZoomPath {
            names.append(deepZoomPath)
            sizes.append("\(summary.deepZoomTiles) tiles (\(formatBytes(summary.deepZoomBytes)) in all)")
        }
        if let archivePath {
            names.append(archivePath)
            sizes.append(deepZoomPath == nil ? "\(summary.deepZoomTiles) tiles in one file of \(formatBytes(summary.archiveBytes))"
                                             : "the same tiles in one file of \(formatBytes(summary.archiveBytes))")
        }
        if let iiifPath {
            names.append(iiifPath)
            sizes.append(deepZoomPath == nil && archivePath == nil ? "its tiles" : "the same tiles as IIIF")
        }
        if summary.previews > 0 { sizes.append("\(summary.previews) photo preview\(summary.previews == 1 ? "" : "s") for the viewer") }
        if let tiffPath {
            names.append(tiffPath)
            sizes.append("a TIFF of \(summary.tiffPages) level\(summary.tiffPages == 1 ? "" : "s") in \(formatBytes(summary.tiffBytes))")
        }
        var line = "wrote \(names.joined(separator: " and ")): \(summary.width) x \(summary.height) px (\(formatDecimal(summary.megapixels, places: 1)) MP), "
        line += "\(sizes.joined(separator: " + ")) in \(formatDecimal(summary.seconds, places: 2)) s, "
        line += "\(formatDecimal(summary.megapixelsPerSecond, places: 1)) MP/s, peak RSS \(formatBytes(summary.peakResidentBytes))"
        // The render is one step of the run: a person waited for all of them (the scan, a
        // mosaic's analysis and matching, the quality read-back).
        if let runSeconds { line += "; \(formatDecimal(runSeconds, places: 2)) s in all" }
        if !summary.failedPhotos.isEmpty { line += ", \(summary.failedPhotos.count) photo(s) drawn as placeholders" }
        if !summary.partialPhotos.isEmpty { line += ", \(summary.partialPhotos.count) photo(s) drawn in part (their files end early or hold damaged data)" }
        if skipped > 0 { line += ", \(skipped) file(s) skipped" }
        // Each was named in a warning when it happened (or counted with its reason, past the
        // first few); not a second time here.
        if skipped > 0 || !summary.failedPhotos.isEmpty || !summary.partialPhotos.isEmpty { line += " (see the warnings above)" }
        // Videos are counted, never named (a phone's folder holds hundreds).
        if videos > 0 { line += ", left out \(Report.videos(videos))" }
        return line
    }

    /// A shard's summary: its band, its part, and what to run when every shard is done.
    public static func shard(_ summary: RenderSummary, target: ShardTarget, band: ShardBand, skipped: Int) -> String {
        var line = "wrote shard \(target.shard) to \(target.partPath): rows \(band.rows.lowerBound)..<\(band.rows.upperBound) of \(summary.height)"
        line += " (\(summary.width) px wide), \(formatBytes(summary.outputBytes)) in \(formatDecimal(summary.seconds, places: 2)) s, "
        line += "peak RSS \(formatBytes(summary.peakResidentBytes)), \(summary.photosDecoded) photo(s) decoded"
        if summary.cellsShared > 0 { line += ", \(summary.cellsShared) cell(s) read from other shards' decodes" }
        if !summary.failedPhotos.isEmpty { line += ", \(summary.failedPhotos.count) drawn as placeholders" }
        if !summary.partialPhotos.isEmpty { line += ", \(summary.partialPhotos.count) drawn in part" }
        if skipped > 0 { line += ", \(skipped) file(s) skipped" }
        return line + "\nwhen all \(target.shard.count) shard(s) are done: tessera join \(target.directory)"
    }

    /// `--dry-run --shard`: the band.
    public static func band(_ band: ShardBand, plan: RenderPlan) -> String {
        var line = "shard       \(band.shard) of rows \(band.rows.lowerBound)..<\(band.rows.upperBound) (bands of \(band.bandUnitRows) rows), "
        line += "rendering stripes \(band.renderedStripes.lowerBound)..<\(band.renderedStripes.upperBound) of \(plan.geometry.stripeCount)"
        if plan.writesJPEG { line += ", JPEG stripes \(band.jpegStripes.lowerBound)..<\(band.jpegStripes.upperBound)" }
        return line
    }

    /// `tessera join`'s summary.
    public static func join(_ summary: JoinSummary, directory: String) -> String {
        var names: [String] = []
        if let path = summary.jpegPath { names.append("\(path) (\(formatBytes(summary.jpegBytes)))") }
        if let path = summary.deepZoomPath { names.append("\(path) (\(summary.deepZoomTiles) tiles, \(formatBytes(summary.deepZoomBytes)) in all)") }
        if let path = summary.archivePath { names.append("\(path) (\(formatBytes(summary.archiveBytes)))") }
        if let path = summary.iiifPath { names.append(path) }
        if summary.previews > 0 { names.append("\(summary.previews) photo preview\(summary.previews == 1 ? "" : "s") for the viewer") }
        if let path = summary.tiffPath {
            names.append("\(path) (a TIFF of \(summary.tiffPages) level\(summary.tiffPages == 1 ? "" : "s") in \(formatBytes(summary.tiffBytes)))")
        }
        if let path = summary.manifestPath { names.append("the manifest \(path)") }
        return "joined \(summary.shards) part(s) from \(directory): wrote \(names.joined(separator: " and ")), \(summary.width) x \(summary.height) px, "
            + "in \(formatDecimal(summary.seconds, places: 2)) s, peak RSS \(formatBytes(summary.peakResidentBytes))"
    }

    /// The mosaic's own summary: how close its colours are to the target's (CIEDE2000, in words)
    /// and, after a render, how alike the pictures look (SSIM); repeats and the uses of the
    /// pictures; then the matching's figures (the Oklab error it minimised) and where the time
    /// went before rendering. `similarity`: the SSIM, or why it was not measured; nil: not asked
    /// (a dry run).
    public static func mosaic(_ prepared: PreparedMosaic, similarity: Result<StructuralSimilarity, SimilaritySkipped>? = nil) -> String {
        let match = prepared.match
        let uses = prepared.uses
        var line = "mosaic: " + colourMatch(prepared.colour)
        if let similarity { line += "\n        " + likeness(similarity) }
        let repeats = match.frames == nil ? match.smallestRepeatDistance.map { "identical photos at least \($0) cell(s) apart" }
            : match.smallestRepeatGap.map { "identical photos at least \($0) px apart" }
        line += "\n        " + (repeats ?? "no photo repeated")
        line += ", \(uses.used) of \(prepared.photoCount) pictures used" + (uses.unused > 0 ? " (\(formatCount(uses.unused)) never)" : "")
        if uses.mostUsed >= 0 && uses.mostUses > 1 && uses.mostUsed < prepared.request.photos.count {
            line += "; most used \(prepared.request.photos[uses.mostUsed].path) in \(formatCount(uses.mostUses)) cells "
                + "(\(formatDecimal(uses.mostUsedShare * 100, places: 1))%)"
        }
        if prepared.duplicateCount > 0 { line += "; \(prepared.duplicateCount) duplicate photo(s) of pictures already counted left out" }
        if prepared.unmet.any { line += "; \(unmetCells(prepared.unmet)) cell(s) could not meet the placement rules (see the warning)" }
        line += "\n        matching: mean Oklab error \(formatDecimal(match.meanError, places: 4)) per sub-cell"
        if match.improvementPasses > 0 {
            line += ", \(formatDecimal(match.greedyMeanError, places: 4)) after the greedy pass; "
            line += "total cost \(formatDecimal(match.greedyCost, places: 2)) -> \(formatDecimal(match.totalCost, places: 2)), "
            line += "\(match.improvements) local-search move(s) in \(match.improvementPasses) pass(es)"
        }
        line += "\n        analysis \(prepared.analysed) photo(s) analysed, \(prepared.reused) from the index in \(formatDecimal(prepared.analysisSeconds, places: 2)) s; "
        line += "target \(formatDecimal(prepared.targetSeconds, places: 2)) s; matching \(match.assignment.count) cells \(formatDecimal(prepared.matchSeconds, places: 2)) s "
        line += "(ranking \(formatDecimal(match.rankingSeconds, places: 2)) s\(match.usedTree ? ", feature tree" : "")"
        if match.runs > 1 { line += " over \(match.runs) runs of up to \(match.runPhotos) photos" }
        line += ", "
        line += "greedy \(formatDecimal(match.greedySeconds, places: 2)) s, local search \(formatDecimal(match.improvementSeconds, places: 2)) s; "
        line += "about \(formatBytes(Int64(match.plannedBytes))) planned)"
        return line
    }

    /// "colour match: mean ΔE2000 4.1 (1 = just noticeable; under 10 looks close at cell size)".
    static func colourMatch(_ colour: ColourDifference) -> String {
        var line = "colour match: mean ΔE2000 \(formatDecimal(colour.meanDeltaE2000, places: 1)) against the target "
        if colour.tint > 0 { line += "with the \(Int((colour.tint * 100).rounded()))% tint " }
        line += "(1 = just noticeable side by side; under \(Int(MosaicQuality.farDeltaE)) looks close at cell size)"
        if colour.subCells > 0 {
            line += ", \(formatDecimal(colour.farShare * 100, places: 1))% of the sub-cells over \(Int(MosaicQuality.farDeltaE))"
        }
        return line
    }

    /// "likeness: SSIM 0.43 ..." or why it was not measured.
    static func likeness(_ similarity: Result<StructuralSimilarity, SimilaritySkipped>) -> String {
        switch similarity {
        case .success(let measured):
            return "likeness: SSIM \(formatDecimal(measured.ssim, places: 3)) against the target (1 = the same picture; on luma at "
                + "\(measured.width) x \(measured.height) px, \(MosaicQuality.ssimWindow)x\(MosaicQuality.ssimWindow) Gaussian windows)"
        case .failure(let skipped):
            return "likeness: SSIM not measured: \(skipped.reason)"
        }
    }

    /// The library as the mosaic will use it, before the render: at most four lines.
    /// `usable`: the photos the scan found that analysis could read.
    public static func library(_ prepared: PreparedMosaic, usable: Int) -> String {
        let layout = prepared.request.layout
        let cells = layout.columns * layout.rows
        var lines: [String] = []
        var first = "library     \(formatCount(usable)) usable photo(s), \(formatCount(prepared.photoCount)) distinct picture(s)"
        if prepared.duplicateCount > 0 {
            let groups = Set(prepared.duplicates.map(\.sameAs)).count
            let more = prepared.duplicateCount > prepared.duplicates.count ? "at least " : ""
            first += "; \(formatCount(prepared.duplicateCount)) near-duplicate(s) in \(more)\(formatCount(groups)) group(s) counted once"
        }
        lines.append(first)
        let small = prepared.tooSmall
        if small.count > 0 {
            var line = "            \(formatCount(small.count)) smaller than the \(layout.cellWidth) x \(layout.cellHeight) px cell, "
                + "enlarged into \(formatCount(small.cells)) cell(s)"
            let named = small.held.prefix(3).map { photo in
                "\(photo.path) (\(photo.width) x \(photo.height) px, \(formatDecimal(photo.enlargement, places: photo.enlargement < 2 ? 2 : 1))x, \(formatCount(photo.uses)) cell(s))"
            }
            line += ": " + named.joined(separator: ", ") + (small.count > named.count ? ", and \(formatCount(small.count - named.count)) more" : "")
            lines.append(line)
        }
        let perPicture = Double(cells) / Double(max(1, prepared.photoCount))
        if prepared.photoCount > cells {
            lines.append("            more pictures than cells (\(formatCount(cells)) cells, \(formatCount(prepared.photoCount)) pictures): "
                         + "at most \(formatCount(cells)) can appear; --cells or --size for more cells")
            return lines.joined(separator: "\n")
        }
        lines.append("            about \(formatDecimal(perPicture, places: perPicture < 10 ? 1 : 0)) uses per picture "
                     + "(\(formatCount(cells)) cells, \(formatCount(prepared.photoCount)) pictures): --cells or --size to change it, "
                     + "--min-uses/--use-all to use every picture")
        return lines.joined(separator: "\n")
    }

    /// The warning for cells placed without meeting every constraint: which constraints, how
    /// many cells break each, and what would help. nil when every cell meets them.
    public static func unmetConstraints(_ prepared: PreparedMosaic, minDistance: Int, maxUses: Int?, minUses: Int = 0) -> String? {
        let unmet = prepared.unmet
        guard unmet.any else { return nil }
        let cells = prepared.match.assignment.count, pictures = max(1, prepared.photoCount)
        var broken: [String] = []
        if unmet.tooClose > 0 { broken.append("\(formatCount(unmet.tooClose)) have an identical photo within --min-distance \(minDistance)") }
        if unmet.overUsed > 0, let maxUses { broken.append("\(formatCount(unmet.overUsed)) use a photo past --max-uses \(maxUses)") }
        var line = unmetCells(unmet) == 0 ? ""
            : "\(formatCount(unmetCells(unmet))) of \(formatCount(cells)) cell(s) could not meet the placement rules and took their best photo "
                + "all the same: " + broken.joined(separator: ", ")
        if unmet.underUsed > 0 {
            line += (line.isEmpty ? "" : "; ") + "\(formatCount(unmet.underUsed)) picture(s) are used fewer than --min-uses \(minUses) times "
                + "(\(formatCount(unmet.missingUses)) use(s) missing): the minimum distance left them no cell"
        }
        var help: [String] = []
        if unmet.underUsed > 0 { help.append("lower --min-distance or --min-uses, or ask for more cells (--cells)") }
        if unmet.tooClose > 0 {
            // An adaptive mosaic's distance is in pixels (its smallest cells' block).
            let smallest = prepared.adaptive.map { (width: max(1, $0.largestWidth >> $0.levels), height: max(1, $0.largestHeight >> $0.levels)) }
            let cellsFit = MosaicJob.keepableDistance(pictures: pictures, smallestCell: nil)
            if let adaptive = prepared.adaptive, let smallest {
                // In pixels, the distance every cell keeps, the largest among the smallest too.
                let fits = MosaicJob.guaranteedDistance(pictures: pictures, smallestCell: smallest, levels: adaptive.levels)
                help.append(minDistance > fits && fits > 0
                    ? "lower --min-distance to \(fits) px (\(pictures) pictures are enough for every cell within \(fits) px of a "
                        + "\(adaptive.largestWidth) x \(adaptive.largestHeight) px cell, all \(smallest.width) x \(smallest.height) px cells)"
                    : "lower --min-distance" + (maxUses != nil ? " or raise --max-uses" : "") + ", or add photos")
            } else {
                help.append(minDistance > cellsFit
                    ? "lower --min-distance to \(cellsFit) (\(pictures) pictures hold a \(2 * cellsFit + 1) x \(2 * cellsFit + 1) block without repeats)"
                    : "lower --min-distance" + (maxUses != nil ? " or raise --max-uses" : "") + ", or add photos")
            }
        }
        if unmet.overUsed > 0 { help.append("raise --max-uses to at least \((cells + pictures - 1) / pictures), or add photos") }
        return line + "; " + help.joined(separator: "; ") + " (--strict refuses such a mosaic)"
    }

    /// Cells breaking a rule (a cell may break both; counted once at most as the larger).
    static func unmetCells(_ unmet: UnmetConstraints) -> Int { max(unmet.tooClose, unmet.overUsed) }

    /// What the photo search left out on purpose, as a dry run shows it; nil when nothing was.
    public static func leftOut(_ leftOut: LeftOut) -> String? {
        guard leftOut.total > 0 else { return nil }
        var parts: [String] = []
        if leftOut.hidden > 0 { parts.append("\(leftOut.hidden) hidden (--include-hidden takes them)") }
        if leftOut.thumbnailFolders > 0 { parts.append("\(leftOut.thumbnailFolders) thumbnail folder(s)") }
        if leftOut.excluded > 0 { parts.append("\(leftOut.excluded) by --exclude") }
        if leftOut.ownOutputs > 0 { parts.append("\(leftOut.ownOutputs) Tessera output(s) (JPEGs and TIFFs it rendered, pyramid tile folders)") }
        if leftOut.videos > 0 { parts.append(videos(leftOut.videos)) }
        return "left out    " + parts.joined(separator: ", ")
    }

    /// "12 videos": the videos (Live Photo movies, clips) a search found, counted, not named.
    static func videos(_ count: Int) -> String { count == 1 ? "1 video" : "\(count) videos" }

    /// Seconds left at the rate so far, or nil while that rate says little: before a second has
    /// passed and `etaFraction(phase)` of the work is done. A scan has none: its total is the
    /// files found so far, which grows while folders are walked, so a rate against it would
    /// promise the end too soon.
    public static func eta(_ phase: Phase = .render, done: Int, total: Int, seconds: Double) -> Double? {
        guard phase != .scan, total > 0, done > 0, done <= total, seconds >= 1,
              Double(done) >= Double(total) * etaFraction(phase) else { return nil }
        return Double(total - done) * seconds / Double(done)
    }

    /// How much of a phase must be done before its rate is trusted: a tenth of a render (the
    /// first stripes wait for the slowest photos; an early guess was 30 times too long), a
    /// fiftieth of the rest (an analysis reads photo after photo at an even pace, and a million
    /// photos' fiftieth is already minutes).
    static func etaFraction(_ phase: Phase) -> Double { phase == .render ? 0.1 : 0.02 }

    /// One line of progress (no newline) fitting `columns`: the phase, a bar as wide as the
    /// terminal leaves, the percentage, the speed of a render and the time left once known; for
    /// the scan, the files read and their rate.
    public static func progressLine(phase: Phase, done: Int, total: Int, seconds: Double, rowWidth: Int, columns: Int) -> String {
        // The scan's total is what it has found so far (each batch is read as soon as it is
        // found, so done meets it again and again): a bar of it would sit near 100%. Its
        // files and rate say how it goes.
        if phase == .scan {
            var line = "scan \(formatCount(done)) files read"
            if seconds >= 1 { line += ", \(formatCount(Int(Double(done) / seconds))) a second" }
            return String(line.prefix(max(0, columns - 1)))
        }
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 1
        var tail = " \(Int(fraction * 100))%"
        if phase == .render && seconds > 0 && rowWidth > 0 {
            tail += "  \(formatDecimal(Double(done) * Double(rowWidth) / seconds / 1e6, places: 0)) MP/s"
        } else if phase != .render {
            tail += "  \(done)/\(total)"
        }
        if let eta = eta(phase, done: done, total: total, seconds: seconds) { tail += "  ETA \(formatDecimal(eta, places: 0)) s" }
        let head = phase.rawValue + " "
        // The cursor must not reach the last column (some terminals wrap there).
        let room = columns - 1 - head.count - tail.count - 2
        guard room >= 10 else { return String((head + tail.dropFirst()).prefix(max(0, columns - 1))) }
        let width = min(room, 50)
        let filled = Int(fraction * Double(width))
        return head + "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]" + tail
    }

    /// The figures of a finished render for `--progress json`'s summary event.
    public static func summaryFields(_ summary: RenderSummary, jpeg: String?, deepZoom: String?, archive: String? = nil, iiif: String? = nil,
                                     tiff: String? = nil, manifest: String?, skipped: Int, runSeconds: Double? = nil, preview: String? = nil) -> [(String, String)] {
        var outputs: [String] = []
        if let jpeg { outputs.append("\"jpeg\": \(jsonStringLiteral(jpeg))") }
        if let deepZoom { outputs.append("\"dzi\": \(jsonStringLiteral(deepZoom))") }
        if let archive { outputs.append("\"szi\": \(jsonStringLiteral(archive))") }
        if let iiif { outputs.append("\"iiif\": \(jsonStringLiteral(iiif))") }
        if let tiff { outputs.append("\"tiff\": \(jsonStringLiteral(tiff))") }
        if let manifest { outputs.append("\"manifest\": \(jsonStringLiteral(manifest))") }
        if let preview { outputs.append("\"preview\": \(jsonStringLiteral(preview))") }
        return [("width", "\(summary.width)"), ("height", "\(summary.height)"),
                ("bytes", "\(summary.outputBytes + summary.deepZoomBytes + summary.archiveBytes + summary.tiffBytes)"),
                ("jpeg_bytes", "\(summary.outputBytes)"), ("dzi_tiles", "\(summary.deepZoomTiles)"),
                ("dzi_bytes", "\(summary.deepZoomBytes)"), ("szi_bytes", "\(summary.archiveBytes)"),
                ("tiff_bytes", "\(summary.tiffBytes)"), ("tiff_levels", "\(summary.tiffPages)"), ("previews", "\(summary.previews)"),
                ("previews_missed", "\(summary.previewsMissed.count)"),
                ("seconds", formatDecimal(summary.seconds, places: 3)), ("peak_rss_bytes", "\(summary.peakResidentBytes)"),
                ("placeholders", "\(summary.failedPhotos.count)"), ("partial", "\(summary.partialPhotos.count)"), ("skipped", "\(skipped)"),
                ("outputs", "{" + outputs.joined(separator: ", ") + "}")]
            + (runSeconds.map { [("run_seconds", formatDecimal($0, places: 3))] } ?? [])
    }

    /// A mosaic's figures for the summary event. `similarity`: as for `mosaic`.
    public static func mosaicFields(_ prepared: PreparedMosaic, similarity: Result<StructuralSimilarity, SimilaritySkipped>?,
                                    minDistance: Int, maxUses: Int?) -> (String, String) {
        let match = prepared.match
        let uses = prepared.uses
        var fields = ["\"mean_error\": \(formatDecimal(match.meanError, places: 5))",
                      "\"greedy_mean_error\": \(formatDecimal(match.greedyMeanError, places: 5))",
                      "\"total_cost\": \(formatDecimal(match.totalCost, places: 4))", "\"greedy_cost\": \(formatDecimal(match.greedyCost, places: 4))",
                      "\"improvements\": \(match.improvements)",
                      "\"photos_used\": \(uses.used)", "\"photos\": \(prepared.photoCount)",
                      "\"duplicates\": \(prepared.duplicateCount)", "\"analysed\": \(prepared.analysed)", "\"reused\": \(prepared.reused)",
                      "\"smallest_repeat_distance\": \(match.smallestRepeatDistance.map(String.init) ?? "null")",
                      "\"smallest_repeat_gap_px\": \(match.smallestRepeatGap.map(String.init) ?? "null")",
                      "\"constraint_violations\": \(match.constraintViolations)",
                      "\"analysis_s\": \(formatDecimal(prepared.analysisSeconds, places: 3))", "\"target_s\": \(formatDecimal(prepared.targetSeconds, places: 3))",
                      "\"matching_s\": \(formatDecimal(prepared.matchSeconds, places: 3))"]
        fields.append("\"mean_delta_e2000\": \(formatDecimal(prepared.colour.meanDeltaE2000, places: 4))")
        fields.append("\"delta_e2000_over_10_share\": \(formatDecimal(prepared.colour.farShare, places: 4))")
        switch similarity {
        case .success(let measured)?:
            fields.append("\"ssim\": \(formatDecimal(measured.ssim, places: 4))")
            fields.append("\"ssim_size\": [\(measured.width), \(measured.height)]")
            fields.append("\"ssim_window\": \(jsonStringLiteral("gaussian \(MosaicQuality.ssimWindow)x\(MosaicQuality.ssimWindow) sigma \(MosaicQuality.ssimSigma), luma"))")
        case .failure(let skipped)?:
            fields.append("\"ssim\": null")
            fields.append("\"ssim_skipped\": \(jsonStringLiteral(skipped.reason))")
        case nil:
            fields.append("\"ssim\": null")
        }
        let mostUsed = uses.mostUsed >= 0 && uses.mostUsed < prepared.request.photos.count
            ? "{\"photo\": \(jsonStringLiteral(prepared.request.photos[uses.mostUsed].path)), \"cells\": \(uses.mostUses), "
                + "\"share\": \(formatDecimal(uses.mostUsedShare, places: 4))}"
            : "null"
        fields.append("\"most_used\": \(mostUsed)")
        fields.append("\"unused_pictures\": \(uses.unused)")
        fields.append("\"uses_histogram\": {" + uses.buckets.map { bucket in
            "\"\(bucket.lower == bucket.upper ? "\(bucket.lower)" : "\(bucket.lower)-\(bucket.upper)")\": \(bucket.pictures)"
        }.joined(separator: ", ") + "}")
        fields.append("\"too_small\": {\"photos\": \(prepared.tooSmall.count), \"cells\": \(prepared.tooSmall.cells), \"named\": ["
                      + prepared.tooSmall.held.prefix(10).map { photo in
                          "{\"photo\": \(jsonStringLiteral(photo.path)), \"width\": \(photo.width), \"height\": \(photo.height), "
                              + "\"uses\": \(photo.uses), \"enlargement\": \(formatDecimal(photo.enlargement, places: 3))}"
                      }.joined(separator: ", ") + "]}")
        var unmet: [String] = []
        if prepared.unmet.tooClose > 0 { unmet.append("{\"constraint\": \"min_distance\", \"value\": \(minDistance), \"cells\": \(prepared.unmet.tooClose)}") }
        if prepared.unmet.underUsed > 0 {
            unmet.append("{\"constraint\": \"min_uses\", \"value\": \(prepared.match.minUses), \"pictures\": \(prepared.unmet.underUsed), "
                         + "\"missing_uses\": \(prepared.unmet.missingUses)}")
        }
        if prepared.unmet.overUsed > 0 {
            unmet.append("{\"constraint\": \"max_uses\", \"value\": \(maxUses ?? 0), \"cells\": \(prepared.unmet.overUsed)}")
        }
        fields.append("\"constraints_unmet\": {\"cells\": \(unmetCells(prepared.unmet)), \"constraints\": [\(unmet.joined(separator: ", "))]}")
        return ("mosaic", "{" + fields.joined(separator: ", ") + "}")
    }
}

/// Why a mosaic's SSIM was not measured (a Deep Zoom output alone, a shard's part, an output
/// that could not be read back).
public struct SimilaritySkipped: Error, Equatable, Sendable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}
