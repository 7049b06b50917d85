// AdaptiveMosaicCLITests.swift — `tessera mosaic --adaptive` through the binary (issue 31): the
// manifest's rectangles tile the canvas exactly, every output keeps --max-uses, --min-uses and
// --min-distance in pixels, the same seed gives the same mosaic, shards joined and Deep Zoom are
// the single process's, --dry-run counts the cells of each size, and bad flags are refused.
import Glibc
import Testing

@Suite struct AdaptiveMosaicCLITests {
    struct Cell: Equatable {
        var column: Int, row: Int, photo: String, x: Int, y: Int, width: Int, height: Int
    }

    /// A 20 x 14 adaptive mosaic of 16 px cells (320 x 224 px) of MinUsesCLITests' 40 photos.
    static func mosaic(_ name: String, _ flags: [String]) -> (status: Int32, output: String, cells: [Cell], manifest: String) {
        let folder = testRoot + "/adaptive-" + name
        _ = system("rm -rf '\(folder)'; mkdir -p '\(folder)'")
        let run = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", MinUsesCLITests.library, "-o", folder + "/m.jpg",
                              "--grid", "20x14", "--tile-size", "16", "--adaptive", "--manifest", folder + "/m.csv",
                              "--cache-dir", testRoot + "/adaptive-cache", "--no-progress"] + flags)
        let manifest = String(decoding: readFile(folder + "/m.csv"), as: UTF8.self)
        return (run.status, run.output, cells(manifest), manifest)
    }

    static func cells(_ manifest: String) -> [Cell] {
        let lines = manifest.split(separator: "\n")
        guard lines.first == "column,row,photo,cost,x,y,width,height" else { return [] }
        return lines.dropFirst().compactMap { line in
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard f.count == 8, let c = Int(f[0]), let r = Int(f[1]), let x = Int(f[4]), let y = Int(f[5]), let w = Int(f[6]),
                  let h = Int(f[7]) else { return nil }
            return Cell(column: c, row: r, photo: f[2], x: x, y: y, width: w, height: h)
        }
    }

    static func gap(_ a: Cell, _ b: Cell) -> Int {
        max(max(0, max(a.x, b.x) - min(a.x + a.width, b.x + b.width)), max(0, max(a.y, b.y) - min(a.y + a.height, b.y + b.height)))
    }

    /// Every pixel of the canvas in exactly one cell; cells of 16, 8 or 4 px, on the 4 px grid,
    /// column and row their corner in 4 px cells.
    static func tilesExactly(_ cells: [Cell], unit: Int, width: Int = 320, height: Int = 224) -> Bool {
        var cover = [Int](repeating: 0, count: width * height)
        for cell in cells {
            guard [16, 8, 4].contains(cell.width), cell.width >= unit, cell.height == cell.width, cell.x % unit == 0, cell.y % unit == 0,
                  cell.column == cell.x / unit, cell.row == cell.y / unit, cell.x + cell.width <= width, cell.y + cell.height <= height else { return false }
            for y in cell.y..<(cell.y + cell.height) { for x in cell.x..<(cell.x + cell.width) { cover[y * width + x] += 1 } }
        }
        return cover.allSatisfy { $0 == 1 }
    }

    @Test func theRectanglesTileTheCanvasAndKeepEveryRule() throws {
        for (name, flags, distance, most, fewest) in [
            ("default", [String](), 4, Int.max, 0),
            ("far", ["--min-distance", "8"], 8, Int.max, 0),
            ("rules", ["--min-distance", "6", "--max-uses", "40", "--use-all"], 6, 40, 1),
            ("min-uses", ["--min-distance", "1", "--min-uses", "3", "--min-cell", "8"], 1, Int.max, 3),
        ] as [(String, [String], Int, Int, Int)] {
            let run = Self.mosaic(name, flags)
            try #require(run.status == 0, "\(flags): \(run.output)")
            // 280 largest cells: 4 x 280 by default (two halvings), 2 x 280 with --min-cell 8
            // (less 1: each split adds 3 cells).
            let unit = flags.contains("--min-cell") ? 8 : 4
            #expect(run.cells.count == (unit == 8 ? 559 : 1120), "\(flags): \(run.cells.count)")
            #expect(Self.tilesExactly(run.cells, unit: unit), "\(flags)")
            #expect(Set(run.cells.map(\.width)).count > 1, "\(flags): one size only")
            var uses: [String: [Cell]] = [:]
            for cell in run.cells { uses[cell.photo, default: []].append(cell) }
            if fewest > 0 { #expect(uses.count == 40 && uses.values.allSatisfy { $0.count >= fewest }, "\(flags)") }
            #expect(uses.values.allSatisfy { $0.count <= most }, "\(flags)")
            var closest = Int.max
            for same in uses.values {
                for i in 0..<same.count { for j in (i + 1)..<same.count { closest = min(closest, Self.gap(same[i], same[j])) } }
            }
            #expect(closest >= distance, "\(flags): copies \(closest) px apart")
            #expect(!run.output.contains("could not meet"), "\(flags): \(run.output)")
            #expect(run.output.contains("identical photos at least \(closest) px apart"), "\(flags): \(run.output)")
        }
    }

    @Test func theSameSeedGivesTheSameMosaicForAnyWorkers() throws {
        let one = Self.mosaic("seed-a", ["--seed", "4", "--workers", "1"])
        let two = Self.mosaic("seed-b", ["--seed", "4", "--workers", "2"])
        let other = Self.mosaic("seed-c", ["--seed", "5", "--workers", "2"])
        try #require(one.status == 0 && two.status == 0 && other.status == 0, "\(one.output)\(two.output)\(other.output)")
        #expect(one.manifest == two.manifest && !one.cells.isEmpty)
        // The cells are the target's (the same for any seed); the photos in them are the seed's.
        #expect(one.cells.map { [$0.x, $0.y, $0.width] } == other.cells.map { [$0.x, $0.y, $0.width] })
        #expect(one.cells.map(\.photo) != other.cells.map(\.photo))
    }

    @Test func theDryRunCountsTheCellsOfEachSize() throws {
        let run = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", MinUsesCLITests.library, "-o", testRoot + "/adaptive-dry.jpg",
                              "--grid", "20x14", "--tile-size", "16", "--adaptive", "--dry-run", "--cache-dir", testRoot + "/adaptive-cache",
                              "--no-progress"])
        try #require(run.status == 0, "\(run.output)")
        let line = run.output.split(separator: "\n").first { $0.hasPrefix("cells ") }.map(String.init) ?? ""
        #expect(line.contains("1,120 adaptive, by size: "), "\(run.output)")
        // "N of 16 x 16 px, M of 8 x 8 px, L of 4 x 4 px": the counts sum to the cells, the areas to the canvas.
        var cells = 0, area = 0
        for size in [16, 8, 4] {
            let marker = " of \(size) x \(size) px"
            let before = try #require(line.range(of: marker)).lowerBound
            let count = Int(line[..<before].split(whereSeparator: { $0 == " " }).last!.replacingOccurrences(of: ",", with: ""))!
            cells += count
            area += count * size * size
        }
        #expect(cells == 1120 && area == 320 * 224, "\(line)")
        #expect(access(testRoot + "/adaptive-dry.jpg", F_OK) != 0)
    }

    /// A small PNG target of fine cells: the target is one cell of about 33 MiB, which the PNG
    /// decoder counted twice (the stored cell a photo that is not upright needs, besides the cell
    /// itself) and refused under 56 MiB, asking for 112 MiB, where a JPEG of it rendered.
    /// A distance that reaches past thousands of small cells needs gigabytes of neighbour
    /// lists: the refusal (exit 4) says that the distance is what asks for it, before the
    /// budget it would need, and nothing is written.
    @Test func aDistanceTooFarForTheBudgetIsNamed() {
        let output = testRoot + "/adaptive-far.jpg"
        let run = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", MinUsesCLITests.library, "-o", output,
                              "--adaptive", "--grid", "50x50", "--tile-size", "64", "--min-cell", "4", "--min-distance", "500",
                              "--max-memory", "256M", "--cache-dir", testRoot + "/adaptive-cache", "--no-progress"])
        #expect(run.status == 4, "\(run.output)")
        #expect(run.output.contains("--min-distance 500 px: each cell of this adaptive mosaic lists every cell within 500 px")
                && run.output.contains("a smaller --min-distance or a larger --min-cell needs less")
                && run.output.contains("memory budget 256.0 MiB is too small"), "\(run.output)")
        #expect(access(output, F_OK) != 0)
    }

    @Test func aSmallPNGTargetOfFineCellsFitsTheBudget() {
        let folder = testRoot + "/adaptive-png-target"
        _ = system("rm -rf '\(folder)'; mkdir -p '\(folder)'")
        defer { _ = system("rm -rf '\(folder)'") }
        #expect(system("convert -size 2x2 xc:'#336699' '\(folder)/t.png'") == 0)
        let run = runTessera(["mosaic", "--target", folder + "/t.png", MinUsesCLITests.library, "-o", folder + "/m.jpg", "--adaptive",
                              "--columns", "30", "--tile-size", "128", "--min-cell", "4", "--max-memory", "56M", "--min-distance", "0",
                              "--cache-dir", testRoot + "/adaptive-cache", "--dry-run", "--no-progress"])
        #expect(run.status == 0 && run.output.contains("3840 x 3840 px"), "\(run.output)")
    }

    @Test func badFlagsAreRefusedClearly() {
        let base = ["mosaic", "--target", fixtures + "/Landscape_1.jpg", MinUsesCLITests.library, "-o", testRoot + "/adaptive-bad.jpg",
                    "--grid", "20x14", "--cache-dir", testRoot + "/adaptive-cache", "--no-progress"]
        let alone = runTessera(base + ["--tile-size", "16", "--min-cell", "8"])
        #expect(alone.status == 2 && alone.output.contains("--min-cell sets the smallest cell of an adaptive mosaic: add --adaptive"), "\(alone.output)")
        let uneven = runTessera(base + ["--tile-size", "16", "--adaptive", "--min-cell", "5"])
        #expect(uneven.status != 0 && uneven.output.contains("--min-cell 5 is not the largest cell (16 px) halved evenly")
                    && uneven.output.contains("8 or 4 px wide"), "\(uneven.output)")
        let odd = runTessera(base + ["--tile-size", "15", "--adaptive"])
        #expect(odd.status != 0 && odd.output.contains("do not halve evenly"), "\(odd.output)")
        let far = runTessera(base + ["--tile-size", "16", "--min-distance", "500"])
        #expect(far.status == 2 && far.output.contains("--min-distance 500 is in cells, at most 100"), "\(far.output)")
        #expect(access(testRoot + "/adaptive-bad.jpg", F_OK) != 0)
    }

    /// An adaptive mosaic's shards each split, match and render their band: joined, the
    /// single-process mosaic and its Deep Zoom pyramid, byte for byte (tinted per cell).
    @Test func aShardedAdaptiveMosaicIsTheSingleProcessMosaic() throws {
        let directory = "\(testRoot)/tessera-adaptive-shards-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/out' '\(directory)/parts' '\(directory)/ref'") == 0)
        let flags = ["--target", fixtures + "/Portrait_3.jpg", fixtures, "--grid", "12x15", "--tile-size", "64", "--adaptive", "--min-cell", "16",
                     "--min-distance", "0", "--max-uses", "400", "--tint", "15", "--cache-dir", directory + "/cache", "--seed", "5",
                     "--stripe-height", "48", "-q"]
        let whole = runTesseraSplit(["mosaic"] + flags + ["-o", directory + "/ref/m.jpg", "--dzi", directory + "/ref/m.dzi", "--encoder", "parallel"])
        #expect(whole.status == 0, "\(whole.standardError)")
        for k in 1...3 {
            let shard = runTesseraSplit(["mosaic"] + flags + ["-o", directory + "/out/m.jpg", "--dzi", directory + "/out/m.dzi",
                                                              "--shard", "\(k)/3", "--shard-dir", directory + "/parts"])
            #expect(shard.status == 0, "\(shard.standardError)")
        }
        let joined = runTesseraSplit(["join", directory + "/parts", "-q"])
        #expect(joined.status == 0, "\(joined.standardError)")
        #expect(system("diff -r '\(directory)/ref' '\(directory)/out'") == 0)
    }
}
