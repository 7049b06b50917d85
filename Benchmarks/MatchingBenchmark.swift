// MatchingBenchmark.swift — mosaic matching at library scale, with no files: 53,400 cells (the
// 200 x 267 mosaic) against 1,000, 100,000 and 1,000,000 synthetic photos (SyntheticFeatures:
// a base colour, a gradient and noise per photo). Each size runs in a child process (this
// program with `--match-synthetic N`) so that its peak RSS is its own. The photos' features are
// generated 16,384 photos at a time into the matcher's store (FeatureStore) in an anonymous
// temporary file, which the matcher reads a run of photos at a time: the features are never all
// in memory.
import Glibc
import Tessera
import TesseraTestSupport

/// In the child: builds the features, matches, prints one line of figures, exits.
func runSyntheticMatching(photoCount: Int, workers: Int, temporaryDirectory: String) -> Never {
    let k = 3, columns = 200, rows = 267
    var started = monotonicSeconds()
    let d = k * k * 3
    let target = photoLikeFeatures(count: columns * rows, k: k, seed: 18, clusters: 0)
    do {
        // The photos' features into the store's file, 16,384 photos at a time.
        let store = try FeatureStore(count: photoCount, valuesPerPhoto: d, directory: temporaryDirectory, batch: 16_384) { first, buffer in
            let chunk = photoLikeFeatures(count: buffer.count / d, k: k, seed: 17 &+ UInt64(first), clusters: 0)
            _ = buffer.initialize(from: chunk)
        }
        let generated = monotonicSeconds() - started
        // Runs as large as the default budget allows, as a mosaic plans them.
        let run = MosaicMatcher.runPhotos(cells: columns * rows, photos: photoCount, subCells: k,
                                          budgetBytes: RenderSettings().maxMemoryBytes)
        started = monotonicSeconds()
        let match = try MosaicMatcher.match(target: target, columns: columns, rows: rows, subCells: k, store: store,
                                            minDistance: 1, maxUses: nil, seed: 1, workers: workers, effort: 2,
                                            chunkPhotos: run)
        let seconds = monotonicSeconds() - started
        print("seconds \(seconds) ranking \(match.rankingSeconds) greedy \(match.greedySeconds) local \(match.improvementSeconds) "
              + "tree \(match.usedTree) greedy-error \(match.greedyMeanError) error \(match.meanError) moves \(match.improvements) "
              + "generated \(generated) features-bytes \(photoCount * d * 4) resident-features \(store.residentBytes) run \(run) runs \(match.runs)")
        exit(0)
    } catch {
        print("error \(error)")
        exit(1)
    }
}

/// In the parent: each size as a child, its figures and peak RSS.
func runMatchingBenchmark(sizes: [Int]) {
    let k = 3
    print("\nmatching at library scale: 200 x 267 = 53,400 cells, k = \(k), --min-distance 1, --match-effort 2, synthetic photos")
    let me = productsDirectory() + "/tessera-bench"
    for size in sizes {
        let out = "/tmp/tessera-bench-match-\(getpid())-\(size).txt"
        defer { unlink(out) }
        let result = run([me, "--match-synthetic", String(size)], stdout: out)
        let text = String(decoding: (try? readWholeFile(out)) ?? [], as: UTF8.self)
        var fields: [String: String] = [:]
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        for i in stride(from: 0, to: words.count - 1, by: 2) { fields[words[i]] = words[i + 1] }
        guard result.status == 0, let seconds = Double(fields["seconds"] ?? "") else {
            print("  \(size) photos: failed (status \(result.status)): \(text)")
            continue
        }
        func number(_ key: String) -> Double { Double(fields[key] ?? "") ?? 0 }
        let featureBytes = Double(size * k * k * 3 * 4)
        print("  \(size) photos: matching \(fixed(seconds, 2)) s (ranking \(fixed(number("ranking"), 2)) s\(fields["tree"] == "true" ? " with the feature tree" : ", every photo compared") "
              + "in \(fields["runs"] ?? "?") run(s) of up to \(fields["run"] ?? "?") photos, "
              + "greedy \(fixed(number("greedy"), 2)) s, local search \(fixed(number("local"), 2)) s), "
              + "peak RSS \(fixed(Double(result.peakBytes) / 1e6, 1)) MB (\(result.peakBytes <= 64 << 20 ? "inside" : "over") the default 64 MiB budget; "
              + "the photos' features, \(fixed(featureBytes / 1e6, 1)) MB, read from a temporary file), "
              + "mean error \(fixed(number("greedy-error"), 4)) -> \(fixed(number("error"), 4)) in \(fields["moves"] ?? "?") moves")
    }
}
