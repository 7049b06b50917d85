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
