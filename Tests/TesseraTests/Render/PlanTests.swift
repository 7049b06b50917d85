// PlanTests.swift — the render plan: memory, stripes, refusals.
import Glibc
import Testing
@testable import Tessera

@Suite struct PlanTests {
    @Test func gigapixelPlanFitsTheDefaultBudget() throws {
        let layout = GridLayout.make(photoCount: 105, columns: 200, rows: 267, cellWidth: 150, cellHeight: 150, order: .name)
        var settings = RenderSettings()
        settings.workers = 2
        let plan = try RenderPlan.make(layout: layout, settings: settings)
        #expect(plan.width == 30_000 && plan.height == 40_050)
        #expect(plan.geometry.stripeHeight % 16 == 0)
        #expect(plan.estimatedPeakBytes <= settings.maxMemoryBytes)
        #expect(plan.cellSlots >= 105)
        // Independent of the height: the same plan for a grid a tenth as tall, but for the stripe count.
        let short = try RenderPlan.make(layout: GridLayout.make(photoCount: 105, columns: 200, rows: 27, cellWidth: 150,
                                                                cellHeight: 150, order: .name), settings: settings)
        #expect(short.estimatedPeakBytes == plan.estimatedPeakBytes)
    }

    /// A library with more distinct photos than the cell cache can hold still fits the default
    /// budget: the cache takes what is left after everything else (the parallel encoder's
    /// waiting segments included), and the rest spills to disk.
    @Test(arguments: [1, 2, 3])
    func aLargeLibraryFitsTheDefaultBudgetWithASmallerCache(workers: Int) throws {
        let layout = GridLayout.make(photoCount: 10_000, columns: 200, rows: 267, cellWidth: 150, cellHeight: 150, order: .name)
        var settings = RenderSettings()
        settings.workers = workers
        let plan = try RenderPlan.make(layout: layout, settings: settings)
        #expect(plan.estimatedPeakBytes <= settings.maxMemoryBytes)
        #expect(plan.cellSlots < 10_000 && plan.spillDiskBytes == Int64(10_000 * 150 * 150 * 3))
        // Nearly all of the budget is used: the cache is not smaller than it needs to be.
        #expect(settings.maxMemoryBytes - plan.estimatedPeakBytes < plan.cellBytes, "\(plan.estimatedPeakBytes)")
    }

    /// A pyramid without a JPEG may take stripes of 8 rows when 16 do not fit the budget (no
    /// MCU rows to keep whole): a TIFF 150,000 px wide plans inside 128 MiB, where the same
    /// render with a JPEG beside it (at its own limit of 65,500 px) keeps the 16-row floor.
    @Test func aWidePyramidAloneTakesNarrowStripesBeforeRefusing() throws {
        var settings = RenderSettings()
        settings.workers = 2
        settings.maxMemoryBytes = 128 << 20
        let wide = GridLayout.make(photoCount: 18, columns: 1000, rows: 1000, cellWidth: 150, cellHeight: 150, order: .name)
        let plan = try RenderPlan.make(layout: wide, settings: settings, writing: [.tiff(PyramidTIFFSettings())])
        #expect(plan.geometry.stripeHeight == 8 && plan.estimatedPeakBytes <= 128 << 20, "\(plan.geometry)")
        // Where 16 rows fit, they are taken (the floor is unchanged).
        settings.maxMemoryBytes = 512 << 20
        let roomy = try RenderPlan.make(layout: wide, settings: settings, writing: [.tiff(PyramidTIFFSettings())])
        #expect(roomy.geometry.stripeHeight >= 16)
        // With a JPEG the stripes stay whole MCU rows of at least 16: at the smallest budget
        // where a 65,400 px pyramid alone plans (on 8 rows), the same with a JPEG is refused.
        let jpegWide = GridLayout.make(photoCount: 18, columns: 436, rows: 2, cellWidth: 150, cellHeight: 150, order: .name)
        settings.workers = 1
        var smallest: RenderPlan?
        for mib in 16...128 {
            settings.maxMemoryBytes = mib << 20
            if let plan = try? RenderPlan.make(layout: jpegWide, settings: settings, writing: [.deepZoom(DeepZoomSettings())]) {
                smallest = plan
                break
            }
        }
        let alone = try #require(smallest)
        #expect(alone.geometry.stripeHeight == 8)
        #expect(throws: TesseraError.self) {
            try RenderPlan.make(layout: jpegWide, settings: settings, writing: [.jpeg, .deepZoom(DeepZoomSettings())])
        }
    }

    @Test func tooSmallBudgetIsRefused() {
        let layout = GridLayout.make(photoCount: 10, columns: 400, rows: 10, cellWidth: 150, cellHeight: 150, order: .name)
        var settings = RenderSettings()
        settings.maxMemoryBytes = 16 << 20
        #expect {
            try RenderPlan.make(layout: layout, settings: settings)
        } throws: { error in
            guard case TesseraError.budgetTooSmall(16 << 20, let needed) = error else { return false }
            return needed > 16 << 20
        }
    }
}

@Suite struct PlanBudgetTests {
    /// Whatever the budget, workers, cell size and library, a plan either fits its budget (its
    /// own estimate of the peak, every part counted) or is refused as too small. (A 600 px grid
    /// of 40 photos used to be planned at 66.7 MiB under 64 MiB: the encoder's waiting segments
    /// were left out of the cell cache's share.)
    @Test func aPlanFitsItsBudgetOrIsRefused() {
        var planned = 0, refused = 0
        for budget in [24 << 20, 48 << 20, 64 << 20, 128 << 20] {
            for workers in [1, 2, 8, 16] {
                for (cell, columns) in [(150, 200), (600, 25), (300, 100)] {
                    for distinct in [1, 40, 1000] {
                        var settings = RenderSettings()
                        settings.maxMemoryBytes = budget
                        settings.workers = workers
                        let layout = CellLayout(columns: columns, rows: columns, cellWidth: cell, cellHeight: cell,
                                                repeating: (0..<distinct).map(Int32.init))
                        do {
                            let plan = try RenderPlan.make(layout: layout, settings: settings)
                            #expect(plan.estimatedPeakBytes <= budget,
                                    "budget \(budget >> 20) MiB, \(workers) workers, \(cell) px, \(distinct) photos: \(plan.estimatedPeakBytes >> 20) MiB")
                            planned += 1
                        } catch {
                            guard case .budgetTooSmall(let refusedBudget, let needed) = error else {
                                Issue.record("\(error)")
                                continue
                            }
                            #expect(refusedBudget == budget && needed > budget)
                            // The budget named is the smallest that fits: it plans, a MiB less does not.
                            settings.maxMemoryBytes = needed
                            #expect((try? RenderPlan.make(layout: layout, settings: settings)) != nil, "\(needed >> 20) MiB was named and does not fit")
                            settings.maxMemoryBytes = needed - (1 << 20)
                            #expect((try? RenderPlan.make(layout: layout, settings: settings)) == nil, "\(needed >> 20) MiB was named; 1 MiB less fits")
                            refused += 1
                        }
                    }
                }
            }
        }
        #expect(planned > 0 && refused > 0)
    }
}
