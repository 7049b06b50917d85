// ProgressiveBenchmark.swift — a library of large progressive photos against their baseline twins.
//
// 40 generated photos of 12 to 48 megapixels (long sides 4,000 to 8,000 px), saved as baseline
// JPEGs, and their progressive twins made by `jpegtran -progressive` (the same coefficients in
// another scan structure, so both render the same picture). Measured in this run:
//   - a 100 x 100 grid of 150 px cells (225 MP) from each set: time, MP/s, peak RSS, the ratio
//     progressive / baseline, and the mean pixel difference between the two renders;
//   - the same at 300 px cells (50 x 50: every photo still at 1/8, the DC decoder) and 600 px
//     cells (25 x 25: the photos of 12-27 MP at 2/8 through libjpeg, the others at 1/8), at the
//     default memory budget (libjpeg's whole coefficient arrays in a spill file) and at 512 MiB
//     (the compact arrays of tessera_coefficients.c in memory instead);
//   - the 1.2 GP grid over the 120 sample photos plus the 40 large ones in one folder, baseline
//     twins against progressive.
import Glibc
import Tessera
import TesseraTestSupport

/// The 40 baseline photos and their progressive twins, generated once beside the build.
@MainActor
func progressiveLibrary() -> (baseline: String, progressive: String) {
    let baseline = products + "/bench-large-baseline", progressive = products + "/bench-large-progressive"
    let marker = progressive + "/.complete-40"
    if access(marker, F_OK) != 0 {
        print("generating 40 large photos (12-48 MP) and their progressive twins (jpegtran) ...")
        mkdir(baseline, 0o755)
        mkdir(progressive, 0o755)
        let sides = [4000, 5000, 6000, 7000, 8000]
        for index in 0..<40 {
            let name = "/large-" + String(repeating: "0", count: index < 10 ? 1 : 0) + String(index) + ".jpg"
            let side = sides[index % sides.count]
            let landscape = index % 3 != 2
            let picture = SamplePhotos.picture(width: landscape ? side : side * 3 / 4, height: landscape ? side * 3 / 4 : side,
                                               seed: 5000 + UInt64(index) * 7919)
            do { try JPEGFile.write(picture, to: baseline + name, quality: 88) } catch { fail("\(error)") }
            let status = run(["/bin/sh", "-c", "jpegtran -progressive -copy all '\(baseline + name)' > '\(progressive + name)'"]).status
            guard status == 0 else { fail("jpegtran failed (install libjpeg-turbo-progs)") }
        }
        close(open(marker, O_CREAT | O_WRONLY, 0o644))
    }
    return (baseline, progressive)
}

/// Mean absolute difference of two renders' pixels, per channel value.
func meanPixelDifference(_ a: String, _ b: String) -> Double {
    do {
        let x = try JPEGFile.read(a, maxPixels: 1 << 31), y = try JPEGFile.read(b, maxPixels: 1 << 31)
        guard x.width == y.width && x.height == y.height else { return .infinity }
        var total = 0
        for i in 0..<x.pixels.count { total += abs(Int(x.pixels[i]) - Int(y.pixels[i])) }
        return Double(total) / Double(x.pixels.count)
    } catch { fail("\(error)") }
}

@MainActor
func runProgressiveBenchmark() {
    let (baselineFolder, progressiveFolder) = progressiveLibrary()
    print("\nprogressive library: 40 photos of 12-48 MP, baseline against progressive twins (jpegtran), median of \(options.runs) after 1 warm-up")
    for (cells, cell, memory) in [(100, 150, ""), (50, 300, ""), (25, 600, ""), (25, 600, "512M")] {
        let megapixels = Double(cells * cell) * Double(cells * cell) / 1e6
        var medians: [String: (seconds: Double, peak: Int64)] = [:]
        let outputs = ["baseline": scratch + "/large-baseline.jpg", "progressive": scratch + "/large-progressive.jpg"]
        // Alternate the two in each round, so that both see the same machine.
        var times: [String: [Double]] = [:], peaks: [String: [Int64]] = [:]
        for attempt in 0...options.runs {
            for (kind, folder) in [("baseline", baselineFolder), ("progressive", progressiveFolder)] {
                let result = run([tessera, "grid", folder, "-o", outputs[kind]!, "--grid", "\(cells)x\(cells)",
                                  "--tile-size", String(cell)] + flags + (memory.isEmpty ? [] : ["--max-memory", memory]))
                guard result.status == 0 else { fail("tessera failed on the \(kind) library (status \(result.status))") }
                if attempt > 0 {
                    times[kind, default: []].append(result.seconds)
                    peaks[kind, default: []].append(result.peakBytes)
                }
            }
        }
        for kind in ["baseline", "progressive"] { medians[kind] = (median(times[kind]!), peaks[kind]!.max()!) }
        let difference = meanPixelDifference(outputs["baseline"]!, outputs["progressive"]!)
        for path in outputs.values { unlink(path) }
        print("  grid \(cells)x\(cells) of \(cell) px (\(fixed(megapixels, 0)) MP)\(memory.isEmpty ? "" : ", memory budget " + memory):")
        for kind in ["baseline", "progressive"] {
            let m = medians[kind]!
            print("    \(kind + String(repeating: " ", count: 11 - kind.count)) \(fixed(m.seconds)) s  \(fixed(megapixels / m.seconds, 0)) MP/s  peak RSS \(fixed(Double(m.peak) / 1e6, 1)) MB   runs \(times[kind]!.map { fixed($0) }.joined(separator: " "))")
        }
        print("    progressive / baseline: x\(fixed(medians["progressive"]!.seconds / medians["baseline"]!.seconds)); mean pixel difference between the renders \(fixed(difference, 3)) levels")
    }

    // The 1.2 GP grid with the 40 large photos in its folder (160 photos): their baseline twins,
    // then the progressive ones, alternating in each round.
    if let size = options.sizes.max() {
        let rows = max(1, Int((size * 1e9 / Double(columns * cell * cell)).rounded()))
        let megapixels = Double(columns * cell) * Double(rows * cell) / 1e6
        var times: [String: [Double]] = [:], peaks: [String: [Int64]] = [:]
        let folders = [("baseline", baselineFolder), ("progressive", progressiveFolder)]
        for (kind, large) in folders {
            let mixed = scratch + "/mixed-" + kind
            mkdir(mixed, 0o755)
            symlink(photoDirectory, mixed + "/sample")
            symlink(large, mixed + "/large")
        }
        defer {
            for (kind, _) in folders {
                let mixed = scratch + "/mixed-" + kind
                unlink(mixed + "/sample"); unlink(mixed + "/large"); rmdir(mixed)
            }
        }
        for attempt in 0...options.runs {
            for (kind, _) in folders {
                let result = run([tessera, "grid", scratch + "/mixed-" + kind, "-o", output, "--grid", "\(columns)x\(rows)",
                                  "--tile-size", String(cell)] + flags)
                guard result.status == 0 else { fail("tessera failed on the mixed \(kind) folder (status \(result.status))") }
                if attempt > 0 { times[kind, default: []].append(result.seconds); peaks[kind, default: []].append(result.peakBytes) }
            }
        }
        unlink(output)
        print("  grid \(columns)x\(rows) (\(fixed(megapixels, 1)) MP) from the 120 sample photos + the 40 large ones:")
        for (kind, _) in folders {
            let seconds = median(times[kind]!)
            let floorNote = floorAtLargest.map { ", \(fixed(seconds / $0)) x the floor" } ?? ""
            print("    \(kind + String(repeating: " ", count: 11 - kind.count)) \(fixed(seconds)) s  \(fixed(megapixels / seconds, 0)) MP/s  peak RSS \(fixed(Double(peaks[kind]!.max()!) / 1e6, 1)) MB\(floorNote)   runs \(times[kind]!.map { fixed($0) }.joined(separator: " "))")
        }
        print("    progressive / baseline: x\(fixed(median(times["progressive"]!) / median(times["baseline"]!)))")
    }
}
