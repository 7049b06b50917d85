// UnitTests.swift — resampling, layouts and planning, without rendering.
import Testing
@testable import Tessera

@Suite struct ResamplerTests {
    @Test func integerDownscaleIsTheBlockMean() {
        // 8 x 4 input, values chosen per pixel; 2 x 1 output averages 4 x 4 blocks.
        let width = 8, height = 4
        var input = [UInt8](repeating: 0, count: width * height * 3)
        for i in 0..<(width * height) {
            input[i * 3] = UInt8((i * 37) % 256)
            input[i * 3 + 1] = UInt8((i * 11) % 256)
            input[i * 3 + 2] = UInt8(i % 2 == 0 ? 255 : 0)
        }
        var resampler = AreaResampler(inputWidth: width, cropX: 0, cropY: 0, cropWidth: 8, cropHeight: 4,
                                      outputWidth: 2, outputHeight: 1)
        var output: [[UInt8]] = []
        input.withUnsafeBufferPointer { pixels in
            for row in 0..<height {
                resampler.push(row: row, pixels: pixels.baseAddress! + row * width * 3) { _, out in output.append(Array(out)) }
            }
        }
        resampler.finish { _, out in output.append(Array(out)) }
        #expect(output.count == 1)
        for block in 0..<2 {
            for channel in 0..<3 {
                var sum = 0
                for y in 0..<4 { for x in (block * 4)..<(block * 4 + 4) { sum += Int(input[(y * width + x) * 3 + channel]) } }
                let mean = Double(sum) / 16
                #expect(abs(Double(output[0][block * 3 + channel]) - mean) <= 0.51)
            }
        }
    }

    @Test func cropTakesTheCentre() {
        // 6 x 2 input whose middle two columns are white: a 2 x 2 crop at x = 2 is all white.
        var input = [UInt8](repeating: 0, count: 6 * 2 * 3)
        for y in 0..<2 { for x in 2..<4 { for c in 0..<3 { input[(y * 6 + x) * 3 + c] = 255 } } }
        var resampler = AreaResampler(inputWidth: 6, cropX: 2, cropY: 0, cropWidth: 2, cropHeight: 2, outputWidth: 1, outputHeight: 1)
        var output: [UInt8] = []
        input.withUnsafeBufferPointer { pixels in
            for row in 0..<2 { resampler.push(row: row, pixels: pixels.baseAddress! + row * 18) { _, out in output = Array(out) } }
        }
        #expect(output == [255, 255, 255])
    }
}

@Suite struct OrientationTests {
    @Test func invalidValuesAreUpright() {
        #expect(OrientationTransform(exifOrientation: 0) == .identity)
        #expect(OrientationTransform(exifOrientation: 9) == .identity)
        #expect(OrientationTransform(exifOrientation: 6) == .rotate90Clockwise)
    }

    @Test func rotate90ClockwiseMovesTheTopRowToTheRight() {
        // Stored 3 x 2 image: top row A B C, bottom row D E F. Turned clockwise it is 2 x 3:
        // D A / E B / F C.
        let stored: [UInt8] = [1, 2, 3, 4, 5, 6].flatMap { [UInt8($0), 0, 0] }
        var upright = [UInt8](repeating: 0, count: 18)
        stored.withUnsafeBytes { source in
            upright.withUnsafeMutableBytes { target in
                OrientationTransform.rotate90Clockwise.apply(stored: source, storedWidth: 3, storedHeight: 2, upright: target)
            }
        }
        #expect(stride(from: 0, to: 18, by: 3).map { upright[$0] } == [4, 1, 5, 2, 6, 3])
    }
}

@Suite struct LayoutTests {
    @Test func photosRepeatInOrder() {
        let layout = GridLayout.make(photoCount: 3, columns: 4, rows: 2, cellWidth: 10, cellHeight: 10, order: .name)
        #expect(layout.photoIndices == [0, 1, 2, 0, 1, 2, 0, 1])
        #expect(GridLayout.rows(forPhotoCount: 105, columns: 10) == 11)
    }

    @Test func shuffleIsFixedBySeed() {
        let a = GridLayout.make(photoCount: 50, columns: 10, rows: 5, cellWidth: 1, cellHeight: 1, order: .shuffle(seed: 7))
        let b = GridLayout.make(photoCount: 50, columns: 10, rows: 5, cellWidth: 1, cellHeight: 1, order: .shuffle(seed: 7))
        let c = GridLayout.make(photoCount: 50, columns: 10, rows: 5, cellWidth: 1, cellHeight: 1, order: .shuffle(seed: 8))
        #expect(a == b)
        #expect(a != c)
        #expect(Set(a.photoIndices).count == 50)  // a permutation: every photo once
    }
}

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

    @Test func stripeGeometryCoversEveryRowOnce() {
        let geometry = StripeGeometry(width: 10, height: 100, stripeHeight: 33)
        #expect(geometry.stripeCount == 4)
        #expect((0..<4).flatMap { Array(geometry.rows(ofStripe: $0)) } == Array(0..<100))
    }
}

@Suite struct JobTeamTests {
    /// Every job of every batch runs exactly once, whatever the batch sizes, and `run` returns
    /// only when its batch is done.
    @Test func everyJobRunsOnceBeforeRunReturns() throws {
        let team = try JobTeam(helpers: 3)
        let lock = Mutex()
        for size in [0, 1, 2, 7, 130, 1, 64, 0, 500] {
            var counts = [Int](repeating: 0, count: size)
            team.run(jobs: size) { job in lock.withLock { counts[job] += 1 } }
            #expect(counts == [Int](repeating: 1, count: size), "batch of \(size)")
        }
        team.stop()
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
                            refused += 1
                        }
                    }
                }
            }
        }
        #expect(planned > 0 && refused > 0)
    }
}
