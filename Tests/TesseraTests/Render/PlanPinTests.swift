// PlanPinTests.swift — render plans over a sweep of settings pinned to what RenderPlan.plan gave
// before it was split into named decisions (issue 26): every field of every plan, and every
// refusal, the same.
import Glibc
import Testing
@testable import Tessera

@Suite struct PlanPinTests {
    static func fnv(_ text: String, into hash: inout UInt64) {
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
    }

    /// `line` without the field added after the pin (issue 28), which a budget given by size
    /// always sets to that budget (checked here): the rest must be what it was.
    static func withoutSteadyState(_ line: String, budget: Int) -> String {
        let field = ", steadyStateBudgetBytes: "
        guard let start = line.range(of: field) else { return line }
        let digits = line[start.upperBound...].prefix { $0.isNumber }
        #expect(Int(digits) == budget, "\(line)")
        return String(line[..<start.lowerBound]) + String(line[digits.endIndex...])
    }

    /// `line` without the TIFF's fields (added after the pin, issue 30), which a plan without a
    /// TIFF always leaves at nil and 0 (checked here): the rest must be what it was.
    static func withoutTIFF(_ line: String) -> String {
        let fields = ", tiff: nil, tiffSettings: nil, tiffMemoryBytes: 0, tiffDiskBytes: 0, tiffSpoolBytes: 0"
        guard line.contains("RenderPlan(") else { return line }
        guard let range = line.range(of: fields) else {
            Issue.record("a plan without a TIFF has TIFF fields set: \(line)")
            return line
        }
        return String(line[..<range.lowerBound]) + String(line[range.upperBound...])
    }

    /// `line` with the pyramid's file count as it was pinned: the viewer's Leaflet, stylesheet and
    /// licence were three files of NAME_files/viewer until they went into the page (issue 30).
    static func withLeafletFiles(_ line: String) -> String {
        let field = "deepZoomInodes: "
        guard let start = line.range(of: field) else { return line }
        let digits = line[start.upperBound...].prefix { $0.isNumber }
        guard let count = Int(digits), count > 0 else { return line }
        return String(line[..<start.upperBound]) + String(count + 3) + String(line[digits.endIndex...])
    }

    /// `line` without the pyramid settings' previews (added after the pin, issue 30), which the
    /// sweep never asks for (checked here: 0 wherever the settings are printed).
    static func withoutPreviews(_ line: String) -> String {
        let field = ", previews: 0"
        #expect(!line.contains("previews: ") || line.contains(field), "\(line)")
        return line.replacing(field, with: "")
    }

    /// A grid in name order as it was stored when the plans were pinned: its sequence of photos
    /// (GridLayout now stores none, issue 27, which lowers a plan by 4 bytes a photo; the pin
    /// checks that the plan's arithmetic is unchanged, so it keeps the old layout).
    static func pinned(photoCount: Int, columns: Int, rows: Int, cellWidth: Int, cellHeight: Int) -> CellLayout {
        CellLayout(columns: columns, rows: rows, cellWidth: cellWidth, cellHeight: cellHeight,
                   repeating: (0..<photoCount).map { Int32($0) })
    }

    /// Every plan (or refusal) of the sweep, one line each.
    static func sweep(_ each: (String) -> Void) {
        let layouts = [
            pinned(photoCount: 105, columns: 200, rows: 267, cellWidth: 150, cellHeight: 150),
            pinned(photoCount: 40, columns: 25, rows: 10, cellWidth: 600, cellHeight: 600),
            pinned(photoCount: 1000, columns: 100, rows: 30, cellWidth: 300, cellHeight: 200),
            pinned(photoCount: 3, columns: 5, rows: 2, cellWidth: 64, cellHeight: 48),
            pinned(photoCount: 10, columns: 436, rows: 2, cellWidth: 150, cellHeight: 150),
        ]
        var tiles = DeepZoomSettings()
        tiles.tileSize = 510
        tiles.overlap = 3
        tiles.viewer = false
        tiles.quality = 70
        let outputs: [[OutputKind]] = [[.jpeg], [.deepZoom(DeepZoomSettings())], [.jpeg, .deepZoom(DeepZoomSettings())], [.deepZoom(tiles)]]
        for (l, layout) in layouts.enumerated() {
            for budget in [16 << 20, 24 << 20, 48 << 20, 64 << 20, 512 << 20] {
                for workers in [1, 2, 3, 8] {
                    for encoder in [nil, EncoderMode.serial, .parallel] {
                        for stripeHeight in [nil, 1, 17, 64, 500] {
                            for (s, subsampling) in [ChromaSubsampling.s420, .s422, .s444].enumerated() {
                                for (o, kinds) in outputs.enumerated() {
                                    for whole in [0, 30 << 20] {
                                        var settings = RenderSettings()
                                        settings.maxMemoryBytes = budget
                                        settings.workers = workers
                                        settings.encoder = encoder
                                        settings.stripeHeight = stripeHeight
                                        settings.subsampling = subsampling
                                        settings.quality = [90, 75, 96][(l + s) % 3]
                                        settings.serialRestartInterval = o == 2 ? 12 : 0
                                        settings.temporaryDirectory = "/pinned"
                                        let key = "\(l) \(budget >> 20) \(workers) \(encoder.map { "\($0)" } ?? "-") \(stripeHeight ?? 0) \(s) \(o) \(whole): "
                                        do throws(TesseraError) {
                                            each(key + withLeafletFiles(withoutSteadyState(withoutTIFF(withoutPreviews(
                                                "\(try RenderPlan.plan(layout: layout, settings: settings, writing: kinds, wholeImageBytes: whole))")),
                                                budget: budget)))
                                        } catch {
                                            each(key + "\(error)")
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Computed by RenderPlan.plan of main at 2c02df8, before the split; re-pinned when a
    /// render without a JPEG could take stripes of 8 rows before being refused (issue 30). The
    /// sweep's lines were compared before and after that change (TESSERA_PLAN_SWEEP_DUMP=FILE
    /// writes them): 54 differed, every one a refusal of a pyramid-only render (--grid 436x2 of
    /// 150 px at 64 MiB) become a plan of 8-row stripes; no other line changed. Re-pinned when
    /// the pyramid's writer came to count the tiles waiting for its file thread (4 MiB and a
    /// tile, 2026-12-06): 27,000 lines differed, every one a render with a pyramid (884 plans
    /// became refusals, the rest kept less for the cell cache); no JPEG-only line changed. And
    /// when the smallest cache became two cells a worker only up to the distinct photos (the
    /// same day): 6,546 lines differed, every one a layout of fewer photos than that (3 photos
    /// at 2, 3 and 8 workers; 10 at 8): 4,186 plans changed (their caches and stripes), 2,360
    /// refusals name smaller budgets. And when the stripes chosen by the plan came to leave
    /// room for a photo decoded whole (a phone's HEIC drawn grey on a wide canvas, 0.6.7): 151
    /// lines differed, every one a plan with stripes chosen by the plan and a whole decode of
    /// 30 MiB, each with shorter stripes; no refusal changed (with that room set to 0 the sweep
    /// summed to the old pin). And when the process's allowance grew from 12 to 16 MiB, to
    /// what a render's resident code and runtime measure (0.6.8): every line differed (each
    /// plan's peak counts the 4 MiB, or its cache keeps less; each refusal names a larger
    /// budget); 1,680 plans became refusals, every one at a budget of 16 to 512 MiB that had
    /// fit only by those 4 MiB, and no refusal became a plan; with the allowance set back to 12
    /// MiB the sweep summed to the old pin. And when a pyramid's unfinished tiles came to be
    /// counted at their quality and subsampling, and the disk check's figure above Q95 rose from
    /// 1.6 to 2.4 bytes a pixel (0.6.13: Q100 4:4:4 tiles peaked at twice their budget): 13,492
    /// of the 36,000 lines differed, every one a pyramid with 4:2:2 or 4:4:4 tiles (their Q90
    /// tiles now counted at 0.49 and 0.64 bytes a pixel, not 0.375; 196 plans became refusals,
    /// no refusal a plan) or a render at Q96 (its disk estimate); no line of 4:2:0 tiles or of a
    /// JPEG at Q95 or less changed.
    static let pinnedChecksum: UInt64 = 0xd921ffd6c43281c1
    static let pinnedPlans = 14524

    @Test func everyPlanOfTheSweepIsWhatItWasBeforeTheSplit() {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var plans = 0, refusals = 0
        PlanPinTests.sweep { line in
            Self.fnv(line + "\n", into: &hash)
            if line.contains("RenderPlan(") { plans += 1 } else { refusals += 1 }
        }
        // The sweep's lines, for comparing a deliberate change of the plans line by line.
        if let dump = getenv("TESSERA_PLAN_SWEEP_DUMP") {
            var lines = ""
            PlanPinTests.sweep { lines += $0 + "\n" }
            let file = fopen(dump, "w")
            fputs(lines, file)
            fclose(file)
        }
        #expect(hash == Self.pinnedChecksum && plans == Self.pinnedPlans,
                "checksum 0x\(String(hash, radix: 16)), \(plans) plans, \(refusals) refusals")
        #expect(plans > 1000 && refusals > 1000, "the sweep covers both")
    }

    /// The smallest budget a refusal names is found by planning again: pinned too.
    @Test func theSmallestBudgetNamedIsWhatItWasBeforeTheSplit() {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for (columns, cell) in [(200, 150), (25, 600), (436, 150)] {
            for workers in [1, 2, 8] {
                for outputs in [[OutputKind.jpeg], [.jpeg, .deepZoom(DeepZoomSettings())]] {
                    for whole in [0, 40 << 20] {
                        var settings = RenderSettings()
                        settings.maxMemoryBytes = 8 << 20
                        settings.workers = workers
                        settings.temporaryDirectory = "/pinned"
                        let layout = Self.pinned(photoCount: 50, columns: columns, rows: 20, cellWidth: cell, cellHeight: cell)
                        do throws(TesseraError) {
                            let plan = try RenderPlan.make(layout: layout, settings: settings, writing: outputs, wholeImageBytes: whole)
                            Self.fnv(Self.withoutSteadyState("\(plan)", budget: plan.steadyStateBudgetBytes), into: &hash)
                        } catch {
                            Self.fnv("\(error)", into: &hash)
                        }
                    }
                }
            }
        }
        #expect(hash == Self.pinnedBudgetChecksum, "checksum 0x\(String(hash, radix: 16))")
    }

    /// (Re-pinned with the sweep, 2026-12-06: the pyramid's file thread counted; and the
    /// process's allowance of 16 MiB.)
    static let pinnedBudgetChecksum: UInt64 = 0xadda766c607cc7f5
}
