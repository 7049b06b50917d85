// FramedLayoutTests.swift — layouts of rectangles of any size (collages, adaptive mosaics): the
// stripe pipeline draws them exactly as a slow reference painter does (each photo decoded on its
// own at its cell's size, pasted into a whole canvas), whatever the stripe height, the workers
// and the cache; a collage keeps every photo's shape and fills its rows exactly.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

/// A deterministic mix of cell sizes on a `width` x `height` canvas: squares split into four
/// down to `smallest`, some cells as tall as several of their neighbours, some left empty
/// (the background shows) when `holes`, photos chosen at random among `photoCount`.
func mixedFrames(width: Int, height: Int, largest: Int, smallest: Int, photoCount: Int, seed: UInt64, holes: Bool) -> [CellFrame] {
    var random = SplitMix64(seed: seed)
    var frames: [CellFrame] = []
    func photo() -> Int { holes && random.next() % 9 == 0 ? -1 : Int(random.next() % UInt64(photoCount)) }
    func split(x: Int, y: Int, size: Int) {
        let w = min(size, width - x), h = min(size, height - y)
        guard w > 0, h > 0 else { return }
        if size > smallest && random.next() % 3 != 0 {
            let half = size / 2
            for (dx, dy) in [(0, 0), (half, 0), (0, half), (half, half)] where dx < w && dy < h {
                split(x: x + dx, y: y + dy, size: half)
            }
        } else if holes && random.next() % 5 == 0 && w > 4 {
            // A cell with a gap beside it.
            frames.append(CellFrame(x: x, y: y, width: w - 3, height: h, photo: photo()))
        } else {
            frames.append(CellFrame(x: x, y: y, width: w, height: h, photo: photo()))
        }
    }
    for y in stride(from: 0, to: height, by: largest) {
        for x in stride(from: 0, to: width, by: largest) { split(x: x, y: y, size: largest) }
    }
    return frames
}

/// The reference painter: the background, then every frame's photo decoded alone at its size
/// and pasted; a photo that cannot be decoded leaves the background.
func referenceCanvas(_ layout: CellLayout, photos: PhotoTable, background: RGB) -> RGBImage {
    var canvas = RGBImage(width: layout.width, height: layout.height, fill: background)
    for index in 0..<layout.cellCount {
        let frame = layout.frame(at: index)
        guard frame.photo >= 0 else { continue }
        let w = Int(frame.width), h = Int(frame.height)
        let decoder = CellDecoder(cellWidth: w, cellHeight: h, decodePoolBytes: 64 << 20)
        var cell = [UInt8](repeating: 0, count: w * h * 3)
        let decoded = cell.withUnsafeMutableBytes { bytes in
            (try? decoder.decode(file: photos[Int(frame.photo)].file, into: bytes)) != nil
        }
        guard decoded else { continue }
        for y in 0..<h {
            let target = ((Int(frame.y) + y) * layout.width + Int(frame.x)) * 3
            canvas.pixels.replaceSubrange(target..<target + w * 3, with: cell[(y * w * 3)..<((y + 1) * w * 3)])
        }
    }
    return canvas
}

@Suite struct FramedLayoutTests {
    static let photoNames = ["Landscape_1", "Portrait_3", "Landscape_6", "Portrait_8", "Landscape_0"]

    /// The photos, and one file that is not a photo (drawn as the background).
    private func library(in scratch: ScratchDirectory) throws -> PhotoTable {
        var photos = try PhotoLibrary.scan(Self.photoNames.map { "\(fixturesDirectory)/orientation/\($0).jpg" }).photos.map { $0 }
        let broken = scratch.file("broken.jpg")
        let bytes = readBytes(photos[0].path)
        writeBytes(JPEGFile.failingInItsScan(bytes), to: broken)  // its header reads, its data does not
        photos.append(Photo(path: broken, header: photos[0].header))
        return PhotoTable(photos)
    }

    @Test func mixedSizesRenderAsTheReferencePainterDrawsThem() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let photos = try library(in: scratch)
        let background = RGB(red: 10, green: 200, blue: 90)
        // Beside the mix, one cell much taller than the rest (it crosses every stripe below 190
        // rows).
        let frames = mixedFrames(width: 200, height: 190, largest: 64, smallest: 8, photoCount: photos.count, seed: 7, holes: true)
            + [CellFrame(x: 200, y: 0, width: 50, height: 190, photo: 1)]
        let layout = CellLayout(width: 250, height: 190, cells: frames)
        #expect(!layout.framed!.tiles)  // the holes show the background
        #expect(layout.framed!.drawings.count > photos.count)  // photos at several sizes
        let reference = referenceCanvas(layout, photos: photos, background: background)
        try JPEGFile.write(reference, to: scratch.file("reference.jpg"), quality: 100, subsampling: .s444)
        let expected = try JPEGFile.read(scratch.file("reference.jpg"))
        for (stripeHeight, workers) in [(1, 1), (7, 2), (16, 3), (64, 2), (190, 1)] {
            var settings = RenderSettings()
            settings.quality = 100
            settings.subsampling = .s444
            settings.encoder = .serial
            settings.stripeHeight = stripeHeight
            settings.workers = workers
            settings.background = background
            settings.temporaryDirectory = scratch.path
            let output = scratch.file("framed-\(stripeHeight).jpg")
            let request = RenderRequest(photos: photos, layout: layout, settings: settings, outputs: [.jpeg(path: output)])
            let summary = try StripeRenderer(request: request).render()
            #expect(summary.failedPhotos.map(\.path) == [photos[photos.count - 1].path])  // told once, drawn at each size
            let rendered = try JPEGFile.read(output)
            #expect(rendered == expected, "stripes of \(stripeHeight) rows, \(workers) workers: \(differences(rendered, expected))")
        }
    }

    /// A cache of two slots for five frames 40 rows tall, one above the other, each a photo of
    /// its own at a width of its own.
    func fiveFrameCache(in scratch: ScratchDirectory) throws -> (CellCache, CellDrawings) {
        let photos = try library(in: scratch)
        let frames = (0..<5).map { CellFrame(x: 0, y: $0 * 40, width: 30 + $0 * 7, height: 40, photo: $0) }
        let layout = CellLayout(width: 60, height: 200, cells: frames)
        let drawings = CellDrawings(layout: layout, photoCount: photos.count)
        let decoder = CellDecoder(cellWidth: layout.cellWidth, cellHeight: layout.cellHeight, decodePoolBytes: 16 << 20)
        return (CellCache(photos: photos, decoder: decoder, slotCount: 2, spillDirectory: scratch.path, drawings: drawings), drawings)
    }

    /// A cell whose every row has been drawn gives its slot back without going to the spill
    /// file (asked for again, it is decoded again); one evicted with rows still to draw is
    /// spilled and read back as before.
    @Test func drawnCellsLeaveTheCacheUnspilled() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let (cache, _) = try fiveFrameCache(in: scratch)
        // Drawings 0-3 drawn whole (in two bands, the second after the slot is released), 4 only
        // its top 25 rows.
        for key in 0..<5 {
            guard case .cell(_, let slot) = try cache.acquire(photo: key, wait: true, partial: true) else {
                Issue.record("drawing \(key) not decoded")
                return
            }
            cache.drew(key, rows: 25)
            cache.release(slot: slot)
            if key < 4 { cache.drew(key, rows: 15) }
        }
        #expect(cache.decodedCount == 5)
        // Drawings 0 and 1 again, held at once: with partial reads a spilled drawing would come
        // back `.onDisk`, so `.cell` means decoded again, never written to the spill file; the
        // second needs 4's slot, and 4, with rows left, is spilled to free it.
        var held: [Int] = []
        for key in 0..<2 {
            guard case .cell(_, let slot) = try cache.acquire(photo: key, wait: true, partial: true) else {
                Issue.record("drawing \(key) was not decoded again")
                return
            }
            held.append(slot)
        }
        for slot in held { cache.release(slot: slot) }
        #expect(cache.decodedCount == 7)
        guard case .onDisk = try cache.acquire(photo: 4, wait: true, partial: true) else {
            Issue.record("drawing 4, evicted with rows to draw, is not in the spill file")
            return
        }
    }

    /// Acquires `key` in `cache` (decoding it) and releases it; false, recorded, if it failed.
    private func decodedAndReleased(_ cache: CellCache, _ key: Int) throws -> Bool {
        guard case .cell(_, let slot) = try cache.acquire(photo: key, wait: true, partial: true) else {
            Issue.record("drawing \(key) not decoded")
            return false
        }
        cache.release(slot: slot)
        return true
    }

    /// A drawing spilled with rows still to draw, then drawn to its last row: its copy in the
    /// spill file is dropped (the hole punched), so asked for again it is decoded again, not
    /// read back; one with rows left is still read from the spill file.
    @Test func aSpilledDrawingDrawnToItsEndLeavesTheSpillFile() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let (cache, _) = try fiveFrameCache(in: scratch)
        // The arena holds two of the largest (58 x 40); drawings 0-2 (30, 37 and 44 px wide) fit
        // at once, and 3 and 4 evict them.
        for key in 0..<5 where !(try decodedAndReleased(cache, key)) { return }
        guard case .onDisk = try cache.acquire(photo: 0, wait: true, partial: true) else {
            Issue.record("drawing 0 is not in the spill file")
            return
        }
        cache.drew(0, rows: 40)
        #expect(cache.decodedCount == 5)
        guard case .cell(_, let slot) = try cache.acquire(photo: 0, wait: true, partial: true) else {
            Issue.record("drawing 0, drawn to its last row, came back from the spill file")
            return
        }
        cache.release(slot: slot)
        #expect(cache.decodedCount == 6)
        guard case .onDisk = try cache.acquire(photo: 1, wait: true, partial: true) else {
            Issue.record("drawing 1, with rows to draw, is not in the spill file")
            return
        }
    }

    /// The cell cache's arena: first fit, and what is given back merged with its free
    /// neighbours, so cells of many sizes share the memory fixed slots of the largest wasted.
    @Test func theArenaTakesTheFirstFitAndMergesWhatComesBack() {
        var arena = CellArena(bytes: 1000)
        #expect(arena.take(300) == 0)
        #expect(arena.take(300) == 300)
        #expect(arena.take(300) == 600)
        #expect(arena.take(200) == nil)
        arena.free(offset: 300, length: 300)
        #expect(arena.take(400) == nil, "300 and 100 bytes apart are not 400")
        arena.free(offset: 600, length: 300)
        #expect(arena.free.map(\.offset) == [300] && arena.free.map(\.length) == [700])
        #expect(arena.take(650) == 300)
        #expect(arena.take(40) == 950)
        arena.free(offset: 0, length: 300)
        #expect(arena.take(10) == 0)
        arena.free(offset: 300, length: 650)
        arena.free(offset: 0, length: 10)
        arena.free(offset: 950, length: 40)
        #expect(arena.free.map(\.offset) == [0] && arena.free.map(\.length) == [1000])
        #expect(CellArena.rounded(1) == 64 && CellArena.rounded(64) == 64 && CellArena.rounded(65) == 128)
    }

    /// The spill file's bound: the bytes of the drawings whose rows, first to last, cross a
    /// stretch of `reach` rows together, three times (a shard's edges).
    @Test func theSpillHoldsOnlyTheDrawingsLiveTogether() {
        // Three rows of two 10 x 10 cells (300 bytes each), the first photo again at the end.
        var frames: [CellFrame] = []
        for row in 0..<3 {
            for column in 0..<2 { frames.append(CellFrame(x: column * 10, y: row * 10, width: 10, height: 10, photo: row * 2 + column)) }
        }
        let separate = CellLayout(width: 20, height: 30, cells: frames).framed!
        #expect(separate.mostSpilledBytes(reach: 0) == 3 * 600)
        #expect(separate.mostSpilledBytes(reach: 5) == 3 * 1200)
        frames[5].photo = 0
        let reused = CellLayout(width: 20, height: 30, cells: frames).framed!
        // Photo 0 is live from the first row to the last: three drawings in the middle row.
        #expect(reused.mostSpilledBytes(reach: 0) == 3 * 900)
        #expect(reused.mostSpilledBytes(reach: 5) == 3 * 1200)
        // Photo 0 in every row (one drawing): two live in each.
        frames[3].photo = 0
        let twice = CellLayout(width: 20, height: 30, cells: frames).framed!
        #expect(twice.mostSpilledBytes(reach: 0) == 3 * 600)
    }

    /// Cells evicted from a cache too small for them are read back a band of rows at a time
    /// from the spill file, and those rows are the cell's.
    @Test func evictedCellsAreReadBackRowsAtATime() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let (cache, drawings) = try fiveFrameCache(in: scratch)
        var whole: [[UInt8]] = []
        for key in 0..<5 {
            guard case .cell(let bytes, let slot) = try cache.acquire(photo: key, wait: true, partial: true) else {
                Issue.record("drawing \(key) not decoded")
                return
            }
            let size = drawings.size(key)
            whole.append(Array(UnsafeRawBufferPointer(start: bytes, count: size.width * size.height * 3)))
            cache.release(slot: slot)
        }
        // The first three were evicted to make room: each is now on disk, and its rows 5..<33
        // come back into a buffer with a stride of its own.
        var readBack = 0
        for key in 0..<5 {
            let span = drawings.size(key).width * 3, stride = span + 11
            switch try cache.acquire(photo: key, wait: true, partial: true) {
            case .onDisk:
                var rows = [UInt8](repeating: 0, count: 28 * stride)
                try rows.withUnsafeMutableBytes { try cache.readRows(key, rows: 5..<33, into: $0.baseAddress!, stride: stride) }
                for row in 0..<28 {
                    #expect(Array(rows[(row * stride)..<(row * stride + span)]) == Array(whole[key][((row + 5) * span)..<((row + 6) * span)]),
                            "drawing \(key), row \(row + 5)")
                }
                readBack += 1
            case .cell(_, let slot):
                cache.release(slot: slot)
            default:
                Issue.record("drawing \(key) neither in memory nor on disk")
            }
        }
        #expect(readBack == 3)
        #expect(cache.decodedCount == 5)
    }

    /// A render whose cache holds far fewer cells than it draws (a budget of 24 MiB, cells of
    /// 48 KiB to 300 KiB): the spill path draws the same picture.
    @Test func aSmallCacheDrawsTheSamePicture() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let photos = try library(in: scratch)
        // 300 cells, each photo at many sizes.
        var frames: [CellFrame] = []
        for row in 0..<10 {
            var x = 0, k = 0
            while x < 3000 {
                let w = min(3000 - x, 100 + ((row * 7 + k * 13) % 9) * 30)
                frames.append(CellFrame(x: x, y: row * 100, width: w, height: 100, photo: (row + k) % 5))
                x += w
                k += 1
            }
        }
        let layout = CellLayout(width: 3000, height: 1000, cells: frames)
        var settings = RenderSettings()
        settings.quality = 100
        settings.subsampling = .s444
        settings.encoder = .serial
        settings.stripeHeight = 16
        settings.workers = 2
        settings.temporaryDirectory = scratch.path
        settings.maxMemoryBytes = 24 << 20
        let request = RenderRequest(photos: photos, layout: layout, settings: settings, outputs: [.jpeg(path: scratch.file("small.jpg"))])
        let renderer = try StripeRenderer(request: request)
        #expect(renderer.plan.cellSlots < layout.distinctDrawingCount)
        _ = try renderer.render()
        try JPEGFile.write(referenceCanvas(layout, photos: photos, background: settings.background), to: scratch.file("reference.jpg"),
                           quality: 100, subsampling: .s444)
        #expect(try JPEGFile.read(scratch.file("small.jpg")) == JPEGFile.read(scratch.file("reference.jpg")))
    }

    /// `tiles` (a skyline over the spans between cell edges) against each pixel's count of cells
    /// covering it: layouts that tile, then the same with a cell moved, shrunk, doubled or
    /// dropped (an overlap or a hole), and a canvas far wider than its cells' pixels count.
    @Test func tilingIsTheSameAsEveryPixelCoveredOnce() {
        func covered(_ frames: [CellFrame], width: Int, height: Int) -> Bool {
            var count = [Int](repeating: 0, count: width * height)
            for f in frames { for y in Int(f.y)..<f.bottom { for x in Int(f.x)..<f.right { count[y * width + x] += 1 } } }
            return count.allSatisfy { $0 == 1 }
        }
        var random = SplitMix64(seed: 5)
        for seed in 0..<40 {
            let tiled = mixedFrames(width: 96, height: 64, largest: 32, smallest: 4, photoCount: 5, seed: UInt64(seed), holes: false)
            var variants = [tiled]
            var i = Int(random.next() % UInt64(tiled.count))
            var moved = tiled
            moved[i] = CellFrame(x: Int(moved[i].x) + (moved[i].right < 96 ? 1 : -1), y: Int(moved[i].y), width: Int(moved[i].width),
                                 height: Int(moved[i].height), photo: 0)
            variants.append(moved)
            var shrunk = tiled
            shrunk[i] = CellFrame(x: Int(shrunk[i].x), y: Int(shrunk[i].y), width: Int(shrunk[i].width),
                                  height: Int(shrunk[i].height) - 1 > 0 ? Int(shrunk[i].height) - 1 : 1, photo: 0)
            variants.append(shrunk)
            variants.append(tiled + [tiled[i]])
            i = Int(random.next() % UInt64(tiled.count))
            variants.append(tiled.enumerated().filter { $0.offset != i }.map(\.element))
            for frames in variants {
                let layout = CellLayout(width: 96, height: 64, cells: frames)
                #expect(layout.framed!.tiles == covered(frames, width: 96, height: 64), "seed \(seed)")
            }
        }
        #expect(CellLayout(width: 96, height: 64, cells: mixedFrames(width: 96, height: 64, largest: 32, smallest: 4, photoCount: 5,
                                                                   seed: 1, holes: false)).framed!.tiles)
        // Two cells across 16 million pixels: the check holds three spans, not a skyline per pixel.
        let wide = CellLayout(width: 1 << 24, height: 10, cells: [CellFrame(x: 0, y: 0, width: 1 << 23, height: 10, photo: 0),
                                                                 CellFrame(x: 1 << 23, y: 0, width: 1 << 23, height: 10, photo: 1)])
        #expect(wide.framed!.tiles)
        let gap = CellLayout(width: 1 << 24, height: 10, cells: [CellFrame(x: 0, y: 0, width: 1 << 23, height: 10, photo: 0),
                                                                CellFrame(x: (1 << 23) + 1, y: 0, width: (1 << 23) - 1, height: 10, photo: 1)])
        #expect(!gap.framed!.tiles)
    }

    @Test func aPreviewScalesEveryEdgeSoCellsStillTouch() {
        let layout = CellLayout(width: 300, height: 200, cells: mixedFrames(width: 300, height: 200, largest: 40, smallest: 5,
                                                                             photoCount: 3, seed: 3, holes: false))
        #expect(layout.framed!.tiles)
        let preview = layout.scaled(by: 0.37)
        #expect(preview.width == 111 && preview.height == 74)
        #expect(preview.framed!.tiles)  // no gap opened, no overlap made
    }
}

@Suite struct CollageLayoutTests {
    /// Shapes of a phone library: 4:3 both ways, 16:9 both ways, square, a panorama.
    static let shapes: [Double] = [4.0 / 3, 3.0 / 4, 16.0 / 9, 9.0 / 16, 1, 3.1]
    static let aspects: [Double] = (0..<997).map { (i: Int) -> Double in shapes[(i * 7 + i / 5) % shapes.count] }

    /// How far the photo, scaled to cover its cell, overhangs it: what the centre crop cuts.
    static func overhang(_ frame: CellFrame, aspect: Double) -> Double {
        let w = Double(frame.width), h = Double(frame.height)
        return w / h > aspect ? w / aspect - h : h * aspect - w
    }

    @Test(arguments: [0, 4])
    func justifiedRowsAreExactlyTheWidthAndKeepEveryShape(gap: Int) throws {
        let sequence = CollageLayout.sequence(photoCount: Self.aspects.count, order: .shuffle(seed: 5))
        let layout = try CollageLayout.make(aspects: Self.aspects, sequence: sequence, width: 4000, style: .rows(rowHeight: 120), gap: gap)
        let frames = layout.framed!.frames
        #expect(frames.count == Self.aspects.count)
        #expect(Set(frames.map(\.photo)) == Set(0..<Int32(Self.aspects.count)))  // every photo once
        var rows: [Int32: [CellFrame]] = [:]
        for frame in frames { rows[frame.y, default: []].append(frame) }
        var y = gap
        for top in rows.keys.sorted() {
            let row = rows[top]!.sorted { $0.x < $1.x }
            #expect(Int(top) == y)
            #expect(Set(row.map(\.height)).count == 1)  // one height a row
            // Exactly the width: the gaps, then the photos edge to edge.
            #expect(row.reduce(gap) { $0 + Int($1.width) + gap } == 4000, "row at \(top)")
            #expect(row.first!.x == Int32(gap))
            for frame in row {
                #expect(Self.overhang(frame, aspect: Self.aspects[Int(frame.photo)]) <= 1.0 + 1e-9, "photo \(frame.photo): \(frame)")
            }
            // About the asked height: within a third either way.
            #expect(abs(Int(row[0].height) - 120) <= 40, "row at \(top) is \(row[0].height) px tall")
            y += Int(row[0].height) + gap
        }
        #expect(layout.height == y)
        #expect(layout.framed!.tiles == (gap == 0))
    }

    @Test func masonryColumnsStackEachPhotoInTheShortestColumn() throws {
        let sequence = CollageLayout.sequence(photoCount: 50, order: .name)
        let layout = try CollageLayout.make(aspects: Array(Self.aspects.prefix(50)), sequence: sequence, width: 1003, style: .columns(count: 4), gap: 5)
        let frames = layout.framed!.frames
        let widths = Set(frames.map(\.width))
        #expect(widths.max()! - widths.min()! <= 1)  // columns differ by a pixel at most
        for frame in frames {
            #expect(Self.overhang(frame, aspect: Self.aspects[Int(frame.photo)]) <= 0.5 + 1e-9)
        }
        // Photo i went to the column that was shortest after photos 0..<i.
        var bottoms: [Int32: Int] = [:]
        for x in Set(frames.map(\.x)) { bottoms[x] = 5 }
        for photo in 0..<50 {
            let frame = frames.first { $0.photo == photo }!
            let shortest = bottoms.min { ($0.value, $0.key) < ($1.value, $1.key) }!
            #expect(frame.x == shortest.key && Int(frame.y) == shortest.value, "photo \(photo)")
            bottoms[frame.x] = frame.bottom + 5
        }
        #expect(layout.height == bottoms.values.max()!)
    }

    @Test func aShuffleIsTheSameForTheSameSeedAndEveryPhotoOnce() {
        let a = CollageLayout.sequence(photoCount: 200, order: .shuffle(seed: 9))
        #expect(a == CollageLayout.sequence(photoCount: 200, order: .shuffle(seed: 9)))
        #expect(a != CollageLayout.sequence(photoCount: 200, order: .shuffle(seed: 10)))
        #expect(a.sorted() == (0..<200).map { Int32($0) })
    }

    /// Rows of thousands of photos (a wide canvas, short rows): each start weighs a window of
    /// ends, and the row to the last photo is weighed too. 5,000 photos of a phone's shapes
    /// 65,500 px wide at rows of 13 px were broken into rows of 15 and 22 px (cost 0.56) where
    /// one row of 9 px costs 0.09: the breaks found cost no more than one row, or any two rows.
    @Test func rowsOfThousandsOfPhotosStillWeighTheLastEnd() {
        let shapes: [Double] = [480.0 / 360, 360.0 / 480, 480.0 / 270, 480.0 / 360, 270.0 / 480, 1, 480.0 / 360, 3]
        let aspects = (0..<5000).map { shapes[$0 % shapes.count] }
        let (width, target) = (65_500, 13.0)
        func cost(_ breaks: [Int]) -> Double {
            var start = 0, total = 0.0
            for end in breaks {
                let height = Double(width) / aspects[start..<end].reduce(0, +)
                total += ((height - target) / target) * ((height - target) / target)
                start = end
            }
            return total
        }
        let breaks = CollageLayout.rowBreaks(aspects, width: width, rowHeight: 13, gap: 0)
        #expect(breaks.last == aspects.count)
        #expect(cost(breaks) <= cost([aspects.count]) + 1e-9, "\(breaks): \(cost(breaks))")
        for split in stride(from: 100, to: aspects.count, by: 100) {
            #expect(cost(breaks) <= cost([split, aspects.count]) + 1e-9, "\(breaks) against \(split)")
        }
    }

    @Test func aCollageTallerThanTheOutputsHoldIsRefused() {
        #expect(throws: TesseraError.outputTooLarge(width: 100, height: 100_000, limit: 65_500)) {
            try CollageLayout.make(aspects: [1], sequence: Array(repeating: 0, count: 1000), width: 100, style: .columns(count: 1), gap: 0,
                                   heightLimit: 65_500)
        }
    }

    @Test func theShapeComesFromTheUprightHeader() {
        var header = PhotoHeader(width: 400, height: 300, colorModel: .rgb, isProgressive: false, exifOrientation: 1, adobeInverted: false)
        #expect(CollageLayout.aspect(of: header) == 4.0 / 3)
        header.exifOrientation = 6  // stored sideways
        #expect(CollageLayout.aspect(of: header) == 3.0 / 4)
        header.width = 100_000
        header.exifOrientation = 1
        #expect(CollageLayout.aspect(of: header) == CollageLayout.aspectLimit)
        header.width = 0
        #expect(CollageLayout.aspect(of: header) == 1)
    }
}
