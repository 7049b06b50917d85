// MatcherPinTests.swift — seeded matches pinned to what the matcher gave before its phases were
// split into named steps (issue 26): the refactor promised the same assignment, costs, move
// counts and progress reports, bit for bit, for every seed and input.
import Testing
import Tessera
import TesseraTestSupport

@Suite struct MatcherPinTests {
    /// One seeded match: the library, the mosaic and the settings.
    struct Case: CustomStringConvertible, Sendable {
        let photos: Int, clusters: Int, columns: Int, rows: Int
        let minDistance: Int, maxUses: Int?, effort: Int, useTree: Bool?, chunk: Int, candidates: Int, seed: UInt64
        /// FNV-1a over everything the match reports but its timings, and the progress reports.
        let checksum: UInt64

        var description: String {
            "\(photos) photos (clusters \(clusters)), \(columns) x \(rows), D \(minDistance), K \(maxUses.map(String.init) ?? "-"), "
                + "effort \(effort), tree \(useTree.map(String.init) ?? "auto"), runs of \(chunk), m \(candidates), seed \(seed)"
        }
    }

    /// The checksums were computed by the matcher of main at 2c02df8, before the split; computed
    /// again when the plan took in the chain moves' scratch (every checksum: it hashes the planned
    /// bytes; no assignment changed but the one case at D 1 with no most of uses and moves to make).
    /// Three again in 0.6.13, when the scan past a cell's candidates stopped skipping allowed
    /// photos dearer than a held one (those at seeds 4, 12 and 6, whose late cells scan).
    static let cases: [Case] = [
        // Every photo used exactly 20 times: late cells scan all photos, a run of 7 at a time.
        Case(photos: 60, clusters: 0, columns: 40, rows: 30, minDistance: 1, maxUses: 20, effort: 1, useTree: nil, chunk: 7,
             candidates: 24, seed: 4, checksum: 0x0a6dfc94e5cf4b09),
        // Used-up photos: the local search swaps with a cell holding one.
        Case(photos: 60, clusters: 0, columns: 40, rows: 30, minDistance: 1, maxUses: 40, effort: 4, useTree: nil, chunk: 32_768,
             candidates: 24, seed: 3, checksum: 0xb6c3e32159b21df3),
        Case(photos: 60, clusters: 0, columns: 40, rows: 30, minDistance: 3, maxUses: 60, effort: 4, useTree: nil, chunk: 32_768,
             candidates: 24, seed: 3, checksum: 0x262ba0de5512d5c2),
        // Clustered photos with exact copies (ties), trees over runs and exhaustive runs.
        Case(photos: 1500, clusters: 30, columns: 60, rows: 40, minDistance: 2, maxUses: 5, effort: 2, useTree: true, chunk: 700,
             candidates: 24, seed: 9, checksum: 0x496ddb259d22a0b0),
        Case(photos: 1500, clusters: 30, columns: 60, rows: 40, minDistance: 0, maxUses: 2, effort: 2, useTree: false, chunk: 333,
             candidates: 24, seed: 9, checksum: 0x82748e2f0f32852e),
        Case(photos: 1500, clusters: 30, columns: 60, rows: 40, minDistance: 1, maxUses: nil, effort: 3, useTree: true, chunk: 256,
             candidates: 24, seed: 10, checksum: 0x195e4a01b9640392),
        // Just as many photos as a 7 x 7 block needs.
        Case(photos: 49, clusters: 0, columns: 20, rows: 15, minDistance: 3, maxUses: nil, effort: 2, useTree: nil, chunk: 32_768,
             candidates: 24, seed: 5, checksum: 0x0bbaea9449ca12ec),
        // As few photos as a 3 x 3 or 5 x 5 block needs, and uses for barely all cells: violations.
        Case(photos: 9, clusters: 0, columns: 20, rows: 15, minDistance: 1, maxUses: 34, effort: 2, useTree: nil, chunk: 4,
             candidates: 24, seed: 11, checksum: 0xcd0a1e97b0b0ddf2),
        Case(photos: 25, clusters: 0, columns: 20, rows: 15, minDistance: 2, maxUses: 12, effort: 3, useTree: nil, chunk: 32_768,
             candidates: 24, seed: 12, checksum: 0x8e150e3fcfb8d172),
        // Two candidates a cell: many cells fall back to a scan of all photos.
        Case(photos: 200, clusters: 10, columns: 30, rows: 20, minDistance: 2, maxUses: 8, effort: 2, useTree: nil, chunk: 64,
             candidates: 2, seed: 6, checksum: 0xffe3086994b6c733),
        // More photos than the slot table holds: the slots in a dictionary.
        Case(photos: 70_000, clusters: 0, columns: 30, rows: 20, minDistance: 1, maxUses: nil, effort: 2, useTree: nil, chunk: 32_768,
             candidates: 24, seed: 7, checksum: 0x8585abf5134530f8),
    ]

    static func checksum(_ match: MosaicMatch, progress: [(Int, Int)]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ value: UInt64) {
            for byte in 0..<8 {
                hash ^= (value >> (8 * UInt64(byte))) & 0xFF
                hash = hash &* 0x100_0000_01b3
            }
        }
        mix(UInt64(match.columns))
        mix(UInt64(match.rows))
        for photo in match.assignment { mix(UInt64(UInt32(bitPattern: photo))) }
        for error in match.cellErrors { mix(UInt64(error.bitPattern)) }
        for value in [match.constraintViolations, match.improvements, match.improvementPasses, match.runs, match.runPhotos,
                      match.plannedBytes, match.usedTree ? 1 : 0] {
            mix(UInt64(bitPattern: Int64(value)))
        }
        for value in [match.greedyCost, match.totalCost, match.greedyMeanError] { mix(value.bitPattern) }
        for (done, total) in progress {
            mix(UInt64(done))
            mix(UInt64(total))
        }
        return hash
    }

    @Test(arguments: MatcherPinTests.cases)
    func seededMatchIsWhatItWasBeforeTheSplit(_ pin: Case) throws {
        let photos = photoLikeFeatures(count: pin.photos, k: 3, seed: 1000 &+ pin.seed, clusters: pin.clusters)
        let target = photoLikeFeatures(count: pin.columns * pin.rows, k: 3, seed: 2000 &+ pin.seed)
        var reports: [(Int, Int)] = []
        func run(workers: Int) throws -> MosaicMatch {
            reports = []
            return try MosaicMatcher.match(target: target, columns: pin.columns, rows: pin.rows, subCells: 3, photos: photos,
                                           minDistance: pin.minDistance, maxUses: pin.maxUses, seed: pin.seed, workers: workers,
                                           candidateCount: pin.candidates, effort: pin.effort, useTree: pin.useTree,
                                           chunkPhotos: pin.chunk, progress: { reports.append(($0, $1)) })
        }
        let match = try run(workers: 2)
        let sum = Self.checksum(match, progress: reports)
        #expect(sum == pin.checksum,
                "\(pin): checksum 0x\(String(sum, radix: 16)), violations \(match.constraintViolations), moves \(match.improvements) in \(match.improvementPasses) passes, tree \(match.usedTree), cost \(match.greedyCost) -> \(match.totalCost)")
        let single = try run(workers: 1)
        #expect(Self.checksum(single, progress: reports) == sum, "the same for one worker")
    }
}
