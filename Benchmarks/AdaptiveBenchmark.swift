// AdaptiveBenchmark.swift — `tessera mosaic --adaptive` against the fixed mosaic at the same
// number of cells and the same canvas (issue 31), on each of the project's targets and libraries.
//
// The fixed mosaic: C x 2R cells of S px. The adaptive one: C/2 x R largest cells of 2S px,
// split down to S/2 px, as many cells in the end (4 x C/2 x R = C x 2R). Both with copies of a
// photo at least S px apart (the fixed mosaic's default --min-distance 1 is one cell), the same
// seed and effort. Each is measured on the written picture against the target, in this run:
//   ΔE2000 (fixed grid)  mean CIEDE2000 over the fixed mosaic's own sub-cells (C*3 x 2R*3
//                        samples, every picture area-averaged to them): the fixed mosaic's home
//                        ground, where its matcher minimises the error;
//   ΔE2000 (fine)        the same over the smallest cells' sub-cells (twice as fine each way);
//   SSIM                 on luma at the common size (MosaicQuality.structuralSimilarity).
// With time and peak RSS (each run a child process).
import Glibc
import Tessera

@MainActor
func runAdaptiveComparison() {
    let repository = products + "/../../.."
    let fixtures = repository + "/Tests/TesseraTests/Fixtures/orientation"
    let targets = [fixtures + "/Portrait_1.jpg", fixtures + "/Landscape_1.jpg", repository + "/Samples/target/chelsea.jpg"]
    var libraries = [(photoDirectory, "the \(options.photos == nil ? "120 generated" : "given") photos")]
    if access(repository + "/Samples/library", F_OK) == 0 { libraries.append((repository + "/Samples/library", "Samples/library (46 real photos)")) }
    let columns = 80, cell = 40, k = 3
    // Copies apart: the adaptive mosaic's default (the smallest cell's width), or with
    // TESSERA_BENCH_ADAPTIVE_DISTANCE the pixels asked.
    let distance = getenv("TESSERA_BENCH_ADAPTIVE_DISTANCE").flatMap { Int(String(cString: $0)) } ?? cell / 2
    print("\nadaptive against fixed at the same cell count: fixed \(columns) x 2R cells of \(cell) px; adaptive \(columns / 2) x R of \(2 * cell) px "
          + "split down to \(cell / 2) px, as many cells; copies at least one cell apart (\(cell) px) in the fixed one, \(distance) px in the adaptive one; ΔE2000 on the written pictures")
    var wins = (colour: 0, ssim: 0, both: 0, cases: 0)
    for (library, libraryName) in libraries {
        let cache = scratch + "/adaptive-cache"
        for target in targets {
            let aspect: Double
            do {
                guard let header = try PhotoLibrary.scan([target], selection: PhotoSelection(includeOwnOutputs: true)).photos.first?.header else {
                    fail("cannot read \(target)")
                }
                let turned = OrientationTransform(exifOrientation: header.exifOrientation).swapsAxes
                aspect = turned ? Double(header.height) / Double(header.width) : Double(header.width) / Double(header.height)
            } catch { fail("\(error)") }
            let rows = max(1, Int((Double(columns * cell) / aspect / Double(2 * cell)).rounded()))
            let width = columns * cell, height = 2 * rows * cell
            let name = String(target.split(separator: "/").last!)
            print("  \(name), \(libraryName): \(width) x \(height) px, \(columns * 2 * rows) cells")
            var figures: [(colour: Double, fine: Double, ssim: Double)] = []
            for adaptive in [false, true] {
                let out = scratch + "/adaptive-\(adaptive).jpg", report = scratch + "/adaptive-report.txt"
                let shape = adaptive ? ["--grid", "\(columns / 2)x\(rows)", "--tile-size", String(2 * cell), "--adaptive", "--min-cell", String(cell / 2),
                                        "--min-distance", String(distance)]
                                     : ["--grid", "\(columns)x\(2 * rows)", "--tile-size", String(cell), "--min-distance", "1"]
                let result = run([tessera, "mosaic", "--target", target, library, "-o", out, "--quality", "90", "--no-progress",
                                  "--cache-dir", cache] + (adaptive ? ["--seed", "1"] : []) + shape, stdout: report)
                guard result.status == 0 else {
                    print("    \(adaptive ? "adaptive" : "fixed   "): failed (status \(result.status))")
                    for line in fileLines(report) { print("    | " + line) }
                    figures.append((.nan, .nan, .nan))
                    continue
                }
                do {
                    let coarse = try MosaicAnalysis.targetFeatures(path: out, columns: columns, rows: 2 * rows, subCells: k)
                    let coarseTarget = try MosaicAnalysis.targetFeatures(path: target, columns: columns, rows: 2 * rows, subCells: k)
                    let fine = try MosaicAnalysis.targetFeatures(path: out, columns: 2 * columns, rows: 4 * rows, subCells: k)
                    let fineTarget = try MosaicAnalysis.targetFeatures(path: target, columns: 2 * columns, rows: 4 * rows, subCells: k)
                    let budget = DecodeBudget(budgetBytes: 64 << 20, workers: 1)
                    let ssim = try MosaicQuality.structuralSimilarity(output: out, width: width, height: height, target: target, budget: budget)
                    let measured = (meanDeltaE2000(coarse, coarseTarget), meanDeltaE2000(fine, fineTarget), ssim.ssim)
                    figures.append(measured)
                    let cells = fileLines(report).first { $0.hasPrefix("cells ") }.map { " | " + $0.dropFirst(12) } ?? ""
                    print("    \(adaptive ? "adaptive" : "fixed   "): ΔE2000 \(fixed(measured.0, 2)) (fixed grid), \(fixed(measured.1, 2)) (fine), "
                          + "SSIM \(fixed(measured.2, 3)); \(fixed(result.seconds)) s, peak RSS \(fixed(Double(result.peakBytes) / 1e6, 1)) MB\(cells)")
                } catch { fail("\(error)") }
                unlink(out)
                unlink(report)
            }
            guard figures.count == 2, !figures[1].colour.isNaN, !figures[0].colour.isNaN else { continue }
            let colour = figures[1].colour < figures[0].colour, ssim = figures[1].ssim > figures[0].ssim
            wins.cases += 1
            if colour { wins.colour += 1 }
            if ssim { wins.ssim += 1 }
            if colour && ssim { wins.both += 1 }
            print("    adaptive - fixed: ΔE2000 \(fixed(figures[1].colour - figures[0].colour, 2)) (fixed grid), "
                  + "\(fixed(figures[1].fine - figures[0].fine, 2)) (fine), SSIM \(fixed(figures[1].ssim - figures[0].ssim, 3))")
        }
        _ = run(["rm", "-rf", cache])
    }
    print("  adaptive better on the fixed grid's ΔE2000 in \(wins.colour) of \(wins.cases), SSIM in \(wins.ssim), both in \(wins.both)")
}
