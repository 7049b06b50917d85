// AdaptiveCellsTests.swift — an adaptive mosaic's cells (issue 31): the quadtree splits where
// the target has detail and tiles the canvas, the neighbours within a distance in pixels are
// exactly those a comparison of every pair finds, the matcher keeps the rules over them, and
// the tint moves each cell of every size toward its own part of the target.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct AdaptiveCellsTests {
    /// A target of `columns` x `rows` largest cells sampled at k = 3 a side of the smallest
    /// (`levels` halvings): flat grey on the left half, a fine checkerboard on the right.
    static func halfDetailed(columns: Int, rows: Int, levels: Int) -> [UInt8] {
        let width = (columns << levels) * 3, height = (rows << levels) * 3
        var pixels = [UInt8](repeating: 128, count: width * height * 3)
        for y in 0..<height {
            for x in (width / 2)..<width where (x + y) % 2 == 0 {
                for c in 0..<3 { pixels[(y * width + x) * 3 + c] = 250 }
            }
        }
        return pixels
    }

    static func tiles(_ cells: AdaptiveCells) -> Bool {
        var cover = [Int](repeating: 0, count: cells.unitColumns * cells.unitRows)
        for cell in cells.cells {
            for y in Int(cell.y)..<Int(cell.y + cell.side) { for x in Int(cell.x)..<Int(cell.x + cell.side) { cover[y * cells.unitColumns + x] += 1 } }
        }
        return cover.allSatisfy { $0 == 1 }
    }

    @Test func detailGetsTheSmallCellsAndTheCellsTileTheCanvas() {
        let pixels = Self.halfDetailed(columns: 8, rows: 6, levels: 2)
        let split = AdaptiveCells.split(pixels: pixels, columns: 8, rows: 6, largestWidth: 40, largestHeight: 40, levels: 2, subCells: 3,
                                        count: AdaptiveCells.defaultCount(roots: 48, levels: 2))
        let cells = split.cells
        #expect(cells.cells.count == 48 * 4)
        #expect(Self.tiles(cells))
        #expect(split.features.count == cells.cells.count * 27)
        // Sorted as a framed layout sorts its frames: by top, then left.
        #expect(cells.cells == cells.cells.sorted { ($0.y, $0.x) < ($1.y, $1.x) })
        // The flat half keeps its largest cells; the detailed half has the smallest ones.
        let left = cells.cells.filter { Int($0.x) < cells.unitColumns / 2 }
        #expect(left.allSatisfy { $0.side == 4 })
        #expect(cells.cells.filter { Int($0.x) >= cells.unitColumns / 2 }.contains { $0.side == 1 })
        let histogram = cells.sizeHistogram
        #expect(histogram.map(\.width) == [40, 20, 10] && histogram.reduce(0) { $0 + $1.cells } == cells.cells.count)
        #expect(histogram.reduce(0) { $0 + $1.cells * $1.width * $1.height } == 320 * 240)
        // The layout holds the same rectangles in the same order.
        let layout = cells.layout(assignment: (0..<Int32(cells.cells.count)).map { $0 })
        #expect((0..<cells.cells.count).allSatisfy { layout.frame(at: $0) == cells.frame($0, photo: Int32($0)) })
        // The same target gives the same cells.
        #expect(AdaptiveCells.split(pixels: pixels, columns: 8, rows: 6, largestWidth: 40, largestHeight: 40, levels: 2, subCells: 3,
                                    count: 192).cells == cells)
    }

    /// Ctrl-C during the split (tens of seconds for millions of cells, where Ctrl-C waited for
    /// all of it): a raised cancellation stops it at once, before the first root's gain is read,
    /// and what it returns is not the split asked for (the caller throws).
    @Test func aCancelledSplitStopsAtOnce() {
        let pixels = Self.halfDetailed(columns: 8, rows: 6, levels: 2)
        let cancellation = RenderCancellation()
        cancellation.cancel()
        let split = AdaptiveCells.split(pixels: pixels, columns: 8, rows: 6, largestWidth: 40, largestHeight: 40, levels: 2, subCells: 3,
                                        count: AdaptiveCells.defaultCount(roots: 48, levels: 2), cancellation: cancellation)
        #expect(split.cells.cells.count < 48 * 4, "\(split.cells.cells.count)")
        #expect(split.features.count < 48 * 4 * 27)
    }

    /// A flat target: every split is worth the same, so the cells split first are spread over
    /// the picture, not a band across its top (a flat red target had all 8,000 of its small
    /// cells in the top fifth). Each quarter of the canvas gets about a quarter of them.
    @Test func aFlatTargetSpreadsItsSmallCellsEvenly() {
        let columns = 16, rows = 12, levels = 1, k = 3
        let pixels = [UInt8](repeating: 0, count: (columns << levels) * k * (rows << levels) * k * 3).enumerated().map { $0.offset % 3 == 0 ? UInt8(200) : UInt8(30) }
        // 48 of the 192 largest cells split in four.
        let split = AdaptiveCells.split(pixels: pixels, columns: columns, rows: rows, largestWidth: 40, largestHeight: 40, levels: levels,
                                        subCells: k, count: 192 + 48 * 3)
        let small = split.cells.cells.filter { $0.side == 1 }
        #expect(small.count == 48 * 4)
        #expect(Self.tiles(split.cells))
        for (top, left) in [(true, true), (true, false), (false, true), (false, false)] {
            let quarter = small.filter { (Int($0.y) < rows) == top && (Int($0.x) < columns) == left }.count
            #expect((40...56).contains(quarter), "\(quarter) small cells in the \(top ? "top" : "bottom") \(left ? "left" : "right") quarter")
        }
    }

    /// A one-colour target of a colour whose sums round (not 0 or 255): every cell is worth the
    /// same, so with fewer splits than the largest cells' level holds, none is split twice (the
    /// rounding of the sums made a few cells worth more, and the split went down to the smallest
    /// cells in clumps there).
    @Test func aFlatTargetOfAnyColourSplitsLevelByLevel() {
        let columns = 6, rows = 4, levels = 3, k = 3
        let colour: [UInt8] = [51, 102, 170]
        let pixels = (0..<((columns << levels) * k * (rows << levels) * k * 3)).map { colour[$0 % 3] }
        // Photos to match (as the command weighs splits by them): colours near the target's.
        var random = SplitMix64(seed: 3)
        let photos = (0..<(8 * k * k * 3)).map { _ in Float(random.next() % 1000) / 5000 }
        let split = AdaptiveCells.split(pixels: pixels, columns: columns, rows: rows, largestWidth: 64, largestHeight: 64, levels: levels,
                                        subCells: k, count: 24 + 20 * 3, photos: photos)
        #expect(split.cells.cells.allSatisfy { $0.side >= 1 << (levels - 1) }, "\(split.cells.cells.map(\.side))")
        #expect(split.cells.cells.filter { $0.side == 1 << (levels - 1) }.count == 20 * 4)
    }

    /// The largest --min-distance a library keeps everywhere: in cells for a grid; in pixels
    /// for an adaptive mosaic, that many smallest cells (copies may not stand less than D px
    /// apart, so 64 px between 32 px cells asks a 5 x 5 block, and 65 a 7 x 7 one). Checked
    /// against the neighbours themselves: at the keepable distance, a smallest cell's
    /// neighbourhood is the block the pictures fill, and one pixel more is a larger block.
    @Test func theDistanceALibraryKeepsIsInPixelsForAdaptiveMosaics() {
        #expect(MosaicJob.keepableDistance(pictures: 46, smallestCell: nil) == 2)
        #expect(MosaicJob.keepableDistance(pictures: 46, smallestCell: (32, 32)) == 64)
        #expect(MosaicJob.keepableDistance(pictures: 46, smallestCell: (48, 32)) == 64)
        #expect(MosaicJob.keepableDistance(pictures: 8, smallestCell: (32, 32)) == 0)
        // Around a largest cell of 8 x 8 smallest ones, 4 rings of 8 px cells are 16^2 - 8^2 =
        // 192 neighbours: 200 pictures give each its own; 5 rings (260) would not.
        #expect(MosaicJob.guaranteedDistance(pictures: 200, smallestCell: (8, 8), levels: 3) == 32)
        #expect(MosaicJob.guaranteedDistance(pictures: 193, smallestCell: (8, 8), levels: 3) == 32)
        #expect(MosaicJob.guaranteedDistance(pictures: 192, smallestCell: (8, 8), levels: 3) == 24)
        #expect(MosaicJob.guaranteedDistance(pictures: 8, smallestCell: (16, 12), levels: 1) == 0)
        #expect(MosaicJob.guaranteedDistance(pictures: 13, smallestCell: (16, 12), levels: 1) == 12)
        #expect(MosaicJob.keepableDistance(pictures: 9, smallestCell: (16, 24)) == 16)
        // A canvas of 9 x 9 cells of 8 px, all of the smallest size: the middle cell's block.
        let cells = (0..<81).map { AdaptiveCells.Cell(x: Int32($0 % 9), y: Int32($0 / 9), side: 1) }
        let adaptive = AdaptiveCells(columns: 9, rows: 9, largestWidth: 8, largestHeight: 8, levels: 0, cells: cells)
        for pictures in [9, 25, 49] {
            let keepable = MosaicJob.keepableDistance(pictures: pictures, smallestCell: (8, 8))
            let block = Int(Double(pictures).squareRoot())
            #expect(CellNeighbours(adaptive, minDistance: keepable).of(40).count + 1 == block * block)
            #expect(CellNeighbours(adaptive, minDistance: keepable + 1).of(40).count + 1 > block * block)
        }
    }

    @Test func theCountIsWhatSplitsInFourReach() {
        #expect(AdaptiveCells.reachableCount(560, roots: 280, levels: 1) == 559)
        #expect(AdaptiveCells.reachableCount(1120, roots: 280, levels: 2) == 1120)
        #expect(AdaptiveCells.reachableCount(1, roots: 10, levels: 2) == 10)
        #expect(AdaptiveCells.reachableCount(10_000, roots: 10, levels: 2) == 160)
        #expect(AdaptiveCells.allowedSmallest(largestWidth: 100, largestHeight: 100) == [50, 25])
        #expect(AdaptiveCells.allowedSmallest(largestWidth: 96, largestHeight: 64) == [48, 24, 12, 6])
        #expect(AdaptiveCells.allowedSmallest(largestWidth: 15, largestHeight: 15).isEmpty)
        #expect(AdaptiveCells.levels(largestWidth: 100, largestHeight: 100, smallestWidth: 25) == 2)
        #expect(AdaptiveCells.levels(largestWidth: 100, largestHeight: 100, smallestWidth: 30) == nil)
    }

    @Test(arguments: [1, 3, 4, 5, 9, 17, 40])
    func theNeighboursAreEveryPairNearerThanTheDistance(distance: Int) {
        // Cells of 24 x 16 px down to 6 x 4 (not square: the gap is in pixels on each axis).
        let pixels = Self.halfDetailed(columns: 5, rows: 4, levels: 2)
        let cells = AdaptiveCells.split(pixels: pixels, columns: 5, rows: 4, largestWidth: 24, largestHeight: 16, levels: 2, subCells: 3,
                                        count: 110).cells
        let neighbours = CellNeighbours(cells, minDistance: distance)
        for a in 0..<cells.cells.count {
            let expected = (0..<cells.cells.count).filter { $0 != a && CellNeighbours.gap(cells.frame(a), cells.frame($0)) < distance }
            #expect(neighbours.of(a).map(Int.init) == expected, "cell \(a) at \(distance) px")
        }
        #expect(CellNeighbours.gap(CellFrame(x: 0, y: 0, width: 6, height: 4, photo: 0), CellFrame(x: 6, y: 4, width: 6, height: 4, photo: 0)) == 0)
        #expect(CellNeighbours.gap(CellFrame(x: 0, y: 0, width: 6, height: 4, photo: 0), CellFrame(x: 9, y: 12, width: 6, height: 4, photo: 0)) == 8)
    }

    @Test(arguments: [(4, nil), (8, 30), (10, nil)] as [(Int, Int?)])
    func theMatcherKeepsTheRulesInPixelsAndTheSeed(distance: Int, maxUses: Int?) throws {
        let pixels = Self.halfDetailed(columns: 10, rows: 8, levels: 2)
        let split = AdaptiveCells.split(pixels: pixels, columns: 10, rows: 8, largestWidth: 16, largestHeight: 16, levels: 2, subCells: 3,
                                        count: 320)
        let neighbours = CellNeighbours(split.cells, minDistance: distance)
        var random = SplitMix64(seed: 7)
        let photos = (0..<60).map { _ in (0..<27).map { _ in Float(random.next() % 1000) / 1000 } }
        func matched(_ seed: UInt64, workers: Int) throws -> MosaicMatch {
            try MosaicMatcher.match(target: split.features, columns: split.cells.cells.count, rows: 1, subCells: 3,
                                    store: FeatureStore(photos: photos, valuesPerPhoto: 27), minDistance: distance, maxUses: maxUses,
                                    seed: seed, workers: workers, effort: 2, neighbours: neighbours)
        }
        let match = try matched(3, workers: 1)
        #expect(match.constraintViolations == 0)
        #expect(MosaicQuality.tooClose(assignment: match.assignment, neighbours: neighbours) == 0)
        if let maxUses { #expect(MosaicQuality.usesHistogram(assignment: match.assignment, pictures: 60).mostUses <= maxUses) }
        // Every pair of copies at least `distance` px apart, by comparing every pair.
        for a in 0..<match.assignment.count {
            for b in (a + 1)..<match.assignment.count where match.assignment[a] == match.assignment[b] {
                #expect(CellNeighbours.gap(split.cells.frame(a), split.cells.frame(b)) >= distance)
            }
        }
        #expect(try matched(3, workers: 2) == match)
        #expect(try matched(4, workers: 2).assignment != match.assignment)
        // Without the rule, copies stand nearer (the test would otherwise prove nothing).
        let free = try MosaicMatcher.match(target: split.features, columns: split.cells.cells.count, rows: 1, subCells: 3, photoFeatures: photos,
                                           minDistance: 0, maxUses: maxUses, seed: 3, workers: 1, effort: 2)
        #expect(MosaicQuality.tooClose(assignment: free.assignment, neighbours: neighbours) > 0)
    }

    /// An adaptive mosaic tinted all the way: each cell, whatever its size, shows its own part of
    /// the target (the tint's target is per frame, in the layout's order), far closer than the
    /// untinted mosaic or than the tint of another cell's target.
    @Test func theTintMovesEveryCellTowardItsOwnPartOfTheTarget() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var paths: [String] = []
        for (index, grey) in [30, 90, 150, 210, 250].enumerated() {
            let path = scratch.file("flat-\(index).jpg")
            try writeSolidPhoto(path, width: 64, height: 64, colour: RGB(red: UInt8(grey), green: UInt8(255 - grey), blue: 100))
            paths.append(path)
        }
        let library = try PhotoLibrary.scan(paths)
        var mosaic = MosaicSettings(targetPath: "\(fixturesDirectory)/orientation/Landscape_1.jpg", columns: 6, rows: 4, cellWidth: 48, cellHeight: 48)
        mosaic.adaptiveLevels = 2
        mosaic.minDistance = 0
        mosaic.tintPercent = 100
        mosaic.cacheDirectory = scratch.file("cache")
        var settings = RenderSettings()
        settings.subsampling = .s444
        settings.quality = 95
        let output = scratch.file("tinted.jpg")
        let prepared = try MosaicJob.prepare(library: library, mosaic: mosaic, settings: settings, outputs: [.jpeg(path: output)])
        let adaptive = try #require(prepared.adaptive)
        #expect(Set(adaptive.cells.map(\.side)).count > 1)
        let tint = try #require(prepared.request.tint)
        #expect(tint.target.count == adaptive.cells.count * 27)
        _ = try StripeRenderer(request: prepared.request).render()
        let image = try JPEGFile.read(output)
        #expect(image.width == 288 && image.height == 192)
        // The centre pixel of each sub-cell against its target colour, and against the next cell's.
        var own = 0.0, shifted = 0.0, count = 0.0
        for cell in 0..<adaptive.cells.count {
            let frame = adaptive.frame(cell)
            for s in 0..<9 {
                let x = Int(frame.x) + (2 * (s % 3) + 1) * Int(frame.width) / 6, y = Int(frame.y) + (2 * (s / 3) + 1) * Int(frame.height) / 6
                let pixel = image.pixel(x: x, y: y)
                func distance(_ other: Int) -> Double {
                    let t = other * 27 + s * 3
                    let rgb = Oklab.toSRGB(OklabColor(l: tint.target[t], a: tint.target[t + 1], b: tint.target[t + 2]))
                    return abs(Double(pixel.red) - Double(rgb.0)) + abs(Double(pixel.green) - Double(rgb.1)) + abs(Double(pixel.blue) - Double(rgb.2))
                }
                own += distance(cell)
                shifted += distance((cell + 7) % adaptive.cells.count)
                count += 1
            }
        }
        #expect(own / count < 20, "\(own / count)")
        #expect(own < shifted * 0.5, "\(own / count) against \(shifted / count)")
    }
}
