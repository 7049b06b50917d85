// ShardTests.swift — a render split into shards and joined is the single-process render, byte
// for byte (JPEG and every file of the pyramid; every tile of a TIFF, read back by Python's
// tifffile); join refuses incomplete or mixed parts and then writes nothing.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

private let landscapes = (1...8).map { fixturesDirectory + "/orientation/Landscape_\($0).jpg" }

/// Every regular file under `root`, by relative path, with its bytes.
func treeContents(_ root: String) -> [String: [UInt8]] {
    var result: [String: [UInt8]] = [:]
    func walk(_ relative: String) {
        let path = relative.isEmpty ? root : root + "/" + relative
        for name in listNames(path) {
            let child = relative.isEmpty ? name : relative + "/" + name
            var info = stat()
            guard lstat(root + "/" + child, &info) == 0 else { continue }
            if (info.st_mode & S_IFMT) == S_IFDIR { walk(child) } else { result[child] = readBytes(root + "/" + child) }
        }
    }
    walk("")
    return result
}

struct ShardCase {
    var columns = 7, rows = 9, cellWidth = 90, cellHeight = 70
    var settings = RenderSettings()
    var zoom: DeepZoomSettings? = DeepZoomSettings()
    var jpeg = true
    var tiff: PyramidTIFFSettings?
    var mosaic = false
    /// Cells of mixed sizes with gaps (FramedLayoutTests' `mixedFrames`), on the canvas the
    /// columns and rows of cells would make.
    var frames = false
}

/// The request for `shape` with outputs in `folder`.
func shardRequest(_ shape: ShardCase, folder: String) throws -> RenderRequest {
    var outputs: [RenderOutput] = []
    if shape.jpeg { outputs.append(.jpeg(path: folder + "/out.jpg")) }
    if let zoom = shape.zoom { outputs.append(.deepZoom(path: folder + "/zoom/out.dzi", settings: zoom)) }
    if let tiff = shape.tiff { outputs.append(.tiff(path: folder + "/out.tif", settings: tiff)) }
    let library = try PhotoLibrary.scan(landscapes)
    let layout: CellLayout
    if shape.frames {
        let width = shape.columns * shape.cellWidth, height = shape.rows * shape.cellHeight
        layout = CellLayout(width: width, height: height, cells: mixedFrames(width: width, height: height, largest: 4 * shape.cellWidth,
                                                                             smallest: shape.cellWidth / 2, photoCount: library.photos.count,
                                                                             seed: 11, holes: true))
    } else if shape.mosaic {
        // A fixed irregular assignment stands for a mosaic's (the matcher's own determinism
        // is MosaicTests'); any table of photo indices renders the same way.
        var random = SplitMix64(seed: 42)
        let cells = (0..<(shape.columns * shape.rows)).map { _ in Int32(random.next() % UInt64(library.photos.count)) }
        layout = CellLayout(columns: shape.columns, rows: shape.rows, cellWidth: shape.cellWidth, cellHeight: shape.cellHeight,
                            photoIndices: cells)
    } else {
        layout = GridLayout.make(photoCount: library.photos.count, columns: shape.columns, rows: shape.rows,
                                 cellWidth: shape.cellWidth, cellHeight: shape.cellHeight, order: .name)
    }
    return RenderRequest(photos: library.photos, layout: layout, settings: shape.settings, outputs: outputs)
}

/// Renders `shape` once whole and once as `shards` shards joined; returns both outputs' files.
func renderBothWays(_ shape: ShardCase, shards: Int, in scratch: ScratchDirectory) throws
    -> (whole: [String: [UInt8]], joined: [String: [UInt8]]) {
    let folder = scratch.file("out")
    let parts = scratch.file("parts-\(shards)")
    _ = removeTree(folder)
    _ = removeTree(parts)
    try makeDirectory(folder)
    try makeDirectory(folder + "/zoom")
    try makeDirectory(parts)
    var whole = shape
    whole.settings.encoder = shape.jpeg ? .parallel : nil
    _ = try StripeRenderer(request: shardRequest(whole, folder: folder)).render()
    var reference = treeContents(folder)
    // A TIFF's tiles lie in the file in the order the cores finished them: compared tile by
    // tile, as an independent reader sees them.
    if shape.tiff != nil { reference["out.tif"] = Array(tiffTiles(folder + "/out.tif").utf8) }
    _ = removeTree(folder)
    try makeDirectory(folder)
    try makeDirectory(folder + "/zoom")
    for k in 1...shards {
        let target = ShardTarget(shard: try ShardSpec(number: k, count: shards), directory: parts)
        _ = try StripeRenderer(request: shardRequest(shape, folder: folder), shard: target).render()
    }
    _ = try ShardJoin.join(directory: parts)
    var joined = treeContents(folder)
    if shape.tiff != nil { joined["out.tif"] = Array(tiffTiles(folder + "/out.tif").utf8) }
    return (reference, joined)
}

/// Every page of the TIFF at `path` as Python's tifffile reads it (size, tile size, subfile
/// type) and a digest of each of its tiles' bytes, in tile order: one line a page.
func tiffTiles(_ path: String) -> String {
    let script = """
    import hashlib, sys, tifffile
    t = tifffile.TiffFile(sys.argv[1])
    for i, p in enumerate(t.pages):
        digests = []
        for offset, count in zip(p.dataoffsets, p.databytecounts):
            t.filehandle.seek(offset)
            digests.append(hashlib.sha256(t.filehandle.read(count)).hexdigest()[:16])
        print(i, p.shape, p.tilewidth, p.tilelength, int(p.subfiletype), len(digests), " ".join(digests))
    """
    let output = path + ".tiles.txt"
    defer { removeFile(output) }
    guard runTool(["python3", "-c", script, path], stdout: output) == 0 else { return "tifffile could not read \(path)" }
    return String(decoding: readBytes(output), as: UTF8.self)
}

/// The shapes the identity is checked on: each changes what decides band boundaries.
private let shapes: [(name: String, shape: ShardCase)] = {
    var list: [(String, ShardCase)] = [("grid, JPEG + pyramid, 4:2:0, 254 px tiles", ShardCase())]
    var small = ShardCase()
    small.zoom!.tileSize = 32  // many tile rows: bands of several levels (k > 0)
    list.append(("grid, 32 px tiles", small))
    var odd = ShardCase()
    odd.zoom!.tileSize = 45  // odd tiles: bands of 2 x 45 x 2^k rows
    odd.zoom!.overlap = 3
    odd.settings.subsampling = .s444
    odd.zoom!.title = "Odd"
    list.append(("grid, 45 px tiles, overlap 3, 4:4:4", odd))
    var jpeg = ShardCase()
    jpeg.zoom = nil
    jpeg.settings.stripeHeight = 16  // 40 stripes: 3 and 7 shards do not divide them
    list.append(("grid, JPEG only, 40 stripes", jpeg))
    var jpeg444 = jpeg
    jpeg444.settings.subsampling = .s444
    jpeg444.settings.stripeHeight = 24
    jpeg444.settings.dotsPerInch = 300
    list.append(("grid, JPEG only, 4:4:4, 27 stripes, 300 dpi", jpeg444))
    var zoomOnly = ShardCase()
    zoomOnly.jpeg = false
    zoomOnly.zoom!.tileSize = 40
    zoomOnly.zoom!.overlap = 0
    zoomOnly.zoom!.labels = .path
    list.append(("grid, pyramid only, overlap 0", zoomOnly))
    var wide = ShardCase()
    wide.columns = 19
    wide.rows = 5
    wide.zoom!.tileSize = 50
    wide.settings.subsampling = .s422
    list.append(("wide grid, 50 px tiles, 4:2:2", wide))
    var mosaic = ShardCase()
    mosaic.mosaic = true
    mosaic.columns = 23
    mosaic.rows = 17
    mosaic.cellWidth = 20
    mosaic.cellHeight = 30
    mosaic.zoom!.tileSize = 64
    mosaic.settings.workers = 3
    list.append(("mosaic table, 64 px tiles, 3 workers", mosaic))
    var mosaic444 = mosaic
    mosaic444.settings.subsampling = .s444
    mosaic444.zoom = nil
    list.append(("mosaic table, JPEG only, 4:4:4", mosaic444))
    var frames = ShardCase()
    frames.frames = true
    frames.cellWidth = 24
    frames.cellHeight = 24
    frames.columns = 30
    frames.rows = 25
    frames.zoom!.tileSize = 64
    frames.settings.stripeHeight = 16
    list.append(("cells of mixed sizes with gaps, 64 px tiles, 16-row stripes", frames))
    var framesJPEG = frames
    framesJPEG.zoom = nil
    framesJPEG.settings.subsampling = .s444
    framesJPEG.settings.stripeHeight = 8
    list.append(("cells of mixed sizes with gaps, JPEG only, 4:4:4, 8-row stripes", framesJPEG))
    // A TIFF beside a Deep Zoom pyramid: the bands are the Deep Zoom's (254 rows), off the
    // TIFF's 64 px tiles, so shards render on past their bands.
    var tiff = ShardCase()
    tiff.tiff = PyramidTIFFSettings()
    tiff.tiff!.tileSize = 64
    list.append(("grid, JPEG + pyramid + TIFF of 64 px tiles", tiff))
    // A TIFF alone decides the bands (32 x 2^k rows).
    var tiffOnly = ShardCase()
    tiffOnly.jpeg = false
    tiffOnly.zoom = nil
    tiffOnly.tiff = PyramidTIFFSettings()
    tiffOnly.tiff!.tileSize = 32
    tiffOnly.tiff!.quality = 80
    list.append(("grid, TIFF only, 32 px tiles", tiffOnly))
    // Deep Zoom bands of 32 x 2^k rows and a TIFF of 48 px tiles split one level lower.
    var tiffMixed = ShardCase()
    tiffMixed.mosaic = true
    tiffMixed.columns = 23
    tiffMixed.rows = 41
    tiffMixed.cellWidth = 20
    tiffMixed.cellHeight = 30
    tiffMixed.zoom!.tileSize = 32
    tiffMixed.zoom!.overlap = 1
    tiffMixed.settings.subsampling = .s444
    tiffMixed.tiff = PyramidTIFFSettings()
    tiffMixed.tiff!.tileSize = 48
    list.append(("mosaic table, pyramid of 32 px tiles, TIFF of 48 px tiles, 4:4:4", tiffMixed))
    // A TIFF of one tile (one page, no level below the bands), alone and beside a pyramid.
    var oneTile = ShardCase()
    oneTile.jpeg = false
    oneTile.zoom = nil
    oneTile.columns = 2
    oneTile.rows = 2
    oneTile.tiff = PyramidTIFFSettings()
    list.append(("grid of 180 x 140 px, TIFF of one tile only", oneTile))
    var oneTileBeside = oneTile
    oneTileBeside.jpeg = true
    oneTileBeside.zoom = DeepZoomSettings()
    oneTileBeside.zoom!.tileSize = 32
    list.append(("grid of 180 x 140 px, JPEG + pyramid of 32 px tiles + TIFF of one tile", oneTileBeside))
    // The viewer's previews: each shard makes every N-th, the join gathers them.
    var previews = ShardCase()
    previews.zoom!.previews = 64
    previews.zoom!.tileSize = 64
    list.append(("grid, JPEG + pyramid with previews of 64 px", previews))
    return list
}()

@Suite struct ShardTests {
    @Test(arguments: 0..<shapes.count, [1, 2, 3, 7])
    func joinedRenderIsTheSingleProcessRender(shape: Int, shards: Int) throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (whole, joined) = try renderBothWays(shapes[shape].shape, shards: shards, in: scratch)
        #expect(whole.count >= 1)
        if shapes[shape].shape.zoom?.previews ?? 0 > 0 {
            // Every photo drawn (8 landscapes) has its preview.
            #expect(whole.keys.filter { $0.contains("viewer/previews/") }.count == 8, "\(whole.keys.sorted())")
        }
        if shapes[shape].shape.tiff != nil {
            // Read by tifffile: several pages, each with its tiles.
            let pages = String(decoding: whole["out.tif"] ?? [], as: UTF8.self).split(separator: "\n")
            #expect(pages.count >= (shapes[shape].shape.rows == 2 ? 1 : 3) && pages.allSatisfy { $0.split(separator: " ").count > 6 }, "\(pages)")
        }
        #expect(Set(whole.keys) == Set(joined.keys), "\(shapes[shape].name)")
        for (name, bytes) in whole where joined[name] != bytes {
            Issue.record("\(shapes[shape].name), \(shards) shards: \(name) differs (\(bytes.count) vs \(joined[name]?.count ?? -1) bytes)")
        }
    }

    @Test func bandsCoverTheCanvasOnceAndLieOnTileBoundaries() throws {
        for shape in shapes.map(\.shape) {
            let request = try shardRequest(shape, folder: "/tmp")
            var settings = request.settings
            settings.encoder = shape.jpeg ? .parallel : nil
            let plan = try RenderPlan.make(layout: request.layout, settings: settings, writing: request.outputs.map(\.kind))
            for count in [1, 2, 3, 4, 7, 16, 100] {
                var next = 0, nextStripe = 0
                var tiffNext: [Int: Int] = [:], tiffLowest: Int?
                for k in 1...count {
                    let band = try ShardBand.make(plan: plan, shard: ShardSpec(number: k, count: count))
                    #expect(band.rows.lowerBound == next || band.rows.isEmpty)
                    if !band.rows.isEmpty { next = band.rows.upperBound }
                    if plan.writesJPEG {
                        #expect(band.jpegStripes.lowerBound == nextStripe || band.jpegStripes.isEmpty)
                        if !band.jpegStripes.isEmpty { nextStripe = band.jpegStripes.upperBound }
                    }
                    if let zoom = plan.deepZoom, let window = band.deepZoom {
                        // Boundaries on tile boundaries at every level the shard writes.
                        for level in window.window.lowest...zoom.maxLevel where band.rows.lowerBound > 0 {
                            #expect((band.rows.lowerBound >> (zoom.maxLevel - level)) % zoom.tileSize == 0)
                            #expect(band.rows.lowerBound % (1 << (zoom.maxLevel - level + 1)) == 0)
                        }
                    }
                    if let pages = plan.tiff, let window = band.tiff {
                        let levels = pages.levels, top = levels.maxLevel, lowest = window.window.lowest
                        if let first = tiffLowest { #expect(lowest == first) } else { tiffLowest = lowest }
                        #expect((lowest > pages.lowestLevel || pages.lowestLevel == top) && lowest <= top)
                        #expect(band.rows.lowerBound % (1 << (top - lowest + 1)) == 0)
                        // Tile rows in order, each once; each fed whole (it reaches past the band at most
                        // as far as the shard renders).
                        for level in lowest...top {
                            let rows = window.window.tileRows[level]
                            #expect(rows.lowerBound == tiffNext[level, default: 0] || rows.isEmpty, "level \(level)")
                            if !rows.isEmpty { tiffNext[level] = rows.upperBound }
                            let info = levels.levels[level], fed = window.window.fedRows[level]
                            if !rows.isEmpty {
                                #expect(fed.lowerBound <= rows.lowerBound * levels.tileSize
                                        && fed.upperBound >= min(info.height, rows.upperBound * levels.tileSize), "level \(level)")
                            }
                        }
                        #expect(band.renderedStripes.upperBound * plan.geometry.stripeHeight >= window.fedRows.upperBound)
                    }
                }
                #expect(next == plan.height)
                if let pages = plan.tiff, let lowest = tiffLowest {
                    for level in lowest...pages.levels.maxLevel { #expect(tiffNext[level] == pages.levels.levels[level].rows, "level \(level)") }
                }
                if plan.writesJPEG { #expect(nextStripe == plan.geometry.stripeCount) }
            }
        }
    }
}

/// Renders shards `numbers` of `count` of `shape` into `parts`, outputs named in `folder`.
func renderShards(_ shape: ShardCase, numbers: [Int], of count: Int, parts: String, folder: String,
                  cancellation: RenderCancellation? = nil) throws {
    for k in numbers {
        let target = ShardTarget(shard: try ShardSpec(number: k, count: count), directory: parts)
        _ = try StripeRenderer(request: shardRequest(shape, folder: folder), cancellation: cancellation, shard: target).render()
    }
}

@Suite struct ShardJoinFailureTests {
    /// A scratch folder with the outputs' folders, a sentinel file at the JPEG's name (which a
    /// failed join must leave as it was), and the 3 parts of a render.
    private func setUp() throws -> (scratch: ScratchDirectory, folder: String, parts: String) {
        let scratch = try ScratchDirectory()
        let folder = scratch.file("out"), parts = scratch.file("parts")
        try makeDirectory(folder)
        try makeDirectory(folder + "/zoom")
        try makeDirectory(parts)
        writeBytes(Array("old picture".utf8), to: folder + "/out.jpg")
        try renderShards(ShardCase(), numbers: [1, 2, 3], of: 3, parts: parts, folder: folder)
        return (scratch, folder, parts)
    }

    /// The outputs given to the join (the sentinel stands at the JPEG's name, which a join
    /// replaces only when given it).
    private func given(_ folder: String) -> JoinDestinations {
        JoinDestinations(jpegPath: folder + "/out.jpg", deepZoomPath: folder + "/zoom/out.dzi")
    }

    /// Join throws `.unusableParts` whose reason contains `words`, and writes nothing.
    private func expectRefused(_ parts: String, folder: String, saying words: String) {
        do {
            _ = try ShardJoin.join(directory: parts, destinations: given(folder))
            Issue.record("join accepted the parts; expected a refusal saying '\(words)'")
        } catch let error as TesseraError {
            guard case .unusableParts(_, let reason) = error else {
                Issue.record("expected unusableParts, got \(error)")
                return
            }
            #expect(reason.contains(words), "\(reason)")
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(readBytes(folder + "/out.jpg") == Array("old picture".utf8))
        #expect(listNames(folder) == ["out.jpg", "zoom"])
        #expect(listNames(folder + "/zoom").isEmpty)
    }

    @Test func aMissingPartIsNamedAndNothingIsWritten() throws {
        let (scratch, folder, parts) = try setUp()
        defer { scratch.remove() }
        removeFile(parts + "/part-0002-of-0003.tessera-part")
        expectRefused(parts, folder: folder, saying: "shard(s) 2 of 3 have no part yet")
    }

    @Test func aTruncatedPartIsRefused() throws {
        let (scratch, folder, parts) = try setUp()
        defer { scratch.remove() }
        let path = parts + "/part-0003-of-0003.tessera-part"
        let bytes = readBytes(path)
        for cut in [1, 40, bytes.count / 2, bytes.count - 9] {
            writeBytes(Array(bytes[0..<cut]), to: path)
            expectRefused(parts, folder: folder, saying: "part-0003-of-0003.tessera-part is truncated")
        }
        // One byte of its index changed: the record no longer fits its data.
        var damaged = bytes
        damaged[damaged.count - 45] ^= 0xFF
        writeBytes(damaged, to: path)
        #expect(throws: TesseraError.self) { try ShardJoin.join(directory: parts, destinations: given(folder)) }
    }

    @Test func aDuplicatedPartIsRefused() throws {
        let (scratch, folder, parts) = try setUp()
        defer { scratch.remove() }
        writeBytes(readBytes(parts + "/part-0002-of-0003.tessera-part"), to: parts + "/part-0002-of-0003 (copy).tessera-part")
        expectRefused(parts, folder: folder, saying: "each claim to be shard 2 of 3")
    }

    @Test func aForeignPartIsRefused() throws {
        let (scratch, folder, parts) = try setUp()
        defer { scratch.remove() }
        // Shard 2 of the same grid at another quality: another render.
        var other = ShardCase()
        other.settings.quality = 70
        try renderShards(other, numbers: [2], of: 3, parts: parts, folder: folder)
        expectRefused(parts, folder: folder, saying: "part-0002-of-0003.tessera-part is a part of another render")
        // A part of a 2-shard split of the same render, beside the 3.
        try renderShards(ShardCase(), numbers: [2], of: 3, parts: parts, folder: folder)
        try renderShards(ShardCase(), numbers: [1], of: 2, parts: parts, folder: folder)
        expectRefused(parts, folder: folder, saying: "part-0001-of-0002.tessera-part is a part of another render")
        removeFile(parts + "/part-0001-of-0002.tessera-part")
        // Not a part at all.
        writeBytes(Array("hello".utf8) + [UInt8](repeating: 0, count: 100), to: parts + "/notes.tessera-part")
        expectRefused(parts, folder: folder, saying: "notes.tessera-part is not a Tessera part file")
        removeFile(parts + "/notes.tessera-part")
        _ = try ShardJoin.join(directory: parts, destinations: given(folder))
        #expect(readBytes(folder + "/out.jpg").starts(with: [0xFF, 0xD8]))
    }

    /// A photo replaced by another picture of the same size and orientation between shard runs
    /// makes another render: shards run again over the cells an earlier run kept draw the new
    /// picture (the joined JPEG is the single-process render of the changed folder), and a part
    /// from before the change is refused beside one from after it.
    @Test func aPhotoReplacedBetweenShardRunsMakesAnotherRender() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let library = scratch.file("lib"), folder = scratch.file("out"), whole = scratch.file("whole")
        for path in [library, folder, whole] { try makeDirectory(path) }
        for path in landscapes { writeBytes(readBytes(path), to: library + "/" + path.split(separator: "/").last!) }
        let changed = library + "/Landscape_1.jpg"
        func replace(negated: Bool) {
            // A new file moved into place, as a sync or an editor's save does.
            #expect(runTool(["convert", landscapes[0]] + (negated ? ["-negate"] : []) + [scratch.file("new.jpg")]) == 0)
            #expect(rename(scratch.file("new.jpg"), changed) == 0)
        }
        func request(_ out: String) throws -> RenderRequest {
            let photos = try PhotoLibrary.scan([library]).photos
            let layout = GridLayout.make(photoCount: photos.count, columns: 7, rows: 9, cellWidth: 90, cellHeight: 70, order: .name)
            return RenderRequest(photos: photos, layout: layout, settings: RenderSettings(), outputs: [.jpeg(path: out + "/out.jpg")])
        }
        func shards(_ numbers: [Int], into parts: String) throws {
            for k in numbers {
                let target = ShardTarget(shard: try ShardSpec(number: k, count: 2), directory: parts)
                _ = try StripeRenderer(request: request(folder), shard: target).render()
            }
        }
        let parts = scratch.file("parts")
        try makeDirectory(parts)
        try shards([1], into: parts)  // keeps its cells in the shard folder
        replace(negated: true)
        try shards([1, 2], into: parts)
        _ = try ShardJoin.join(directory: parts)
        var single = try request(whole)
        single.settings.encoder = .parallel
        _ = try StripeRenderer(request: single).render()
        let same = readBytes(folder + "/out.jpg") == readBytes(whole + "/out.jpg")
        #expect(same, "the joined JPEG drew the photo as it was")
        removeFile(folder + "/out.jpg")

        let mixed = scratch.file("mixed")
        try makeDirectory(mixed)
        try shards([1], into: mixed)
        replace(negated: false)
        try shards([2], into: mixed)
        var refusal = "joined"
        do { _ = try ShardJoin.join(directory: mixed) } catch { refusal = "\(error)" }
        #expect(refusal.contains("is a part of another render"), "parts from before and after a photo changed: \(refusal)")
    }

    @Test func anEmptyOrMissingFolderIsRefused() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        try makeDirectory(scratch.file("empty"))
        #expect(throws: TesseraError.noParts(directory: scratch.file("empty"))) {
            try ShardJoin.join(directory: scratch.file("empty"))
        }
        #expect(throws: TesseraError.self) { try ShardJoin.join(directory: scratch.file("none")) }
    }

    @Test func aShardRunAgainReplacesItsPart() throws {
        let (scratch, folder, parts) = try setUp()
        defer { scratch.remove() }
        // A stale one first: the run replaces it whole.
        writeBytes(Array("stale".utf8), to: parts + "/part-0002-of-0003.tessera-part")
        try renderShards(ShardCase(), numbers: [2], of: 3, parts: parts, folder: folder)
        #expect(listNames(parts).filter { !$0.hasPrefix(".") }
                == ["part-0001-of-0003.tessera-part", "part-0002-of-0003.tessera-part", "part-0003-of-0003.tessera-part"])
        _ = try ShardJoin.join(directory: parts, destinations: given(folder))
        #expect(listNames(folder).contains("out.jpg") && listNames(folder + "/zoom").contains("out.dzi"))
    }

    @Test func aCancelledShardLeavesNoPart() throws {
        let (scratch, folder, parts) = try setUp()
        defer { scratch.remove() }
        removeFile(parts + "/part-0003-of-0003.tessera-part")
        let cancellation = RenderCancellation()
        cancellation.cancel()
        #expect(throws: TesseraError.cancelled) {
            try renderShards(ShardCase(), numbers: [3], of: 3, parts: parts, folder: folder, cancellation: cancellation)
        }
        #expect(listNames(parts).filter { !$0.hasPrefix(".") } == ["part-0001-of-0003.tessera-part", "part-0002-of-0003.tessera-part"])
    }

    @Test func aJoinThatWaitsGivesUpOnAMissingPartAndWritesNothing() throws {
        let (scratch, folder, parts) = try setUp()
        defer { scratch.remove() }
        removeFile(parts + "/part-0002-of-0003.tessera-part")
        let started = monotonicSeconds()
        #expect(throws: TesseraError.unusableParts(directory: parts, reason: "shard 2 of 3 has no part after waiting 1 s: did that shard fail? run it again, then join again")) {
            try ShardJoin.join(directory: parts, destinations: given(folder), waitSeconds: 1)
        }
        #expect(monotonicSeconds() - started >= 1)
        #expect(readBytes(folder + "/out.jpg") == Array("old picture".utf8))
        #expect(listNames(folder) == ["out.jpg", "zoom"] && listNames(folder + "/zoom").isEmpty)
    }

    @Test func theSerialEncoderCannotBeSharded() throws {
        var shape = ShardCase()
        shape.settings.encoder = .serial
        let target = ShardTarget(shard: try ShardSpec(number: 1, count: 2), directory: "/tmp")
        #expect(throws: TesseraError.self) { try StripeRenderer(request: shardRequest(shape, folder: "/tmp"), shard: target) }
        #expect(throws: TesseraError.self) { try ShardSpec(number: 3, count: 2) }
        #expect(ShardSpec.parse("0/4") == nil && ShardSpec.parse("2/4")?.partFileName == "part-0002-of-0004.tessera-part")
    }
}

/// The single-process render's files, and the output folder emptied again (with its zoom
/// folder) for the shards' join to write into.
func referenceAndEmptyOutputs(in scratch: ScratchDirectory) throws -> (whole: [String: [UInt8]], folder: String) {
    let (whole, _) = try renderBothWays(ShardCase(), shards: 1, in: scratch)
    let folder = scratch.file("out")
    _ = removeTree(folder)
    try makeDirectory(folder)
    try makeDirectory(folder + "/zoom")
    return (whole, folder)
}

/// Every file of `whole` is in `folder` with the same bytes, and no other.
func expectSameFiles(_ folder: String, as whole: [String: [UInt8]]) {
    let joined = treeContents(folder)
    #expect(Set(joined.keys) == Set(whole.keys))
    for (name, bytes) in whole where joined[name] != bytes { Issue.record("\(name) differs") }
}

@Suite struct ShardSharingTests {
    /// A join started before the shards takes each part as it appears: the same files.
    @Test func aJoinStartedFirstWaitsForThePartsInOrder() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (whole, folder) = try referenceAndEmptyOutputs(in: scratch)
        let parts = scratch.file("waiting")
        try makeDirectory(parts)
        let outcome = ThreadOutcome()
        let joiner = try JoinableThread {
            do { outcome.set(try ShardJoin.join(directory: parts, waitSeconds: 60)) } catch { outcome.fail("\(error)") }
        }
        // Shards in reverse: the join must still copy 1, 2, 3 in order.
        try renderShards(ShardCase(), numbers: [3, 2, 1], of: 3, parts: parts, folder: folder)
        joiner.join()
        #expect(outcome.failure == nil, "\(outcome.failure ?? "")")
        #expect(outcome.summary?.shards == 3)
        expectSameFiles(folder, as: whole)
    }

    /// A part copied in by hand (cp, scp: front to back) is seen before it ends: a waiting join
    /// waits for its end instead of refusing it as truncated, and joins the same files; one
    /// that never ends is refused as truncated when the wait runs out, not as missing.
    @Test func aWaitingJoinWaitsForAPartStillBeingCopiedIn() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (whole, folder) = try referenceAndEmptyOutputs(in: scratch)
        let made = scratch.file("made"), parts = scratch.file("waiting")
        try makeDirectory(made)
        try makeDirectory(parts)
        try renderShards(ShardCase(), numbers: [1, 2, 3], of: 3, parts: made, folder: folder)
        let names = listNames(made).filter { $0.hasSuffix(ShardSpec.partExtension) }
        try #require(names.count == 3)
        let outcome = ThreadOutcome()
        let joiner = try JoinableThread {
            do { outcome.set(try ShardJoin.join(directory: parts, waitSeconds: 60)) } catch { outcome.fail("\(error)") }
        }
        for name in names {
            let bytes = readBytes(made + "/" + name)
            writeBytes(Array(bytes.prefix(bytes.count / 2)), to: parts + "/" + name)   // the first half, for a while
            usleep(400_000)
            writeBytes(bytes, to: parts + "/" + name)
        }
        joiner.join()
        #expect(outcome.failure == nil, "\(outcome.failure ?? "")")
        expectSameFiles(folder, as: whole)

        let stuck = scratch.file("stuck")
        try makeDirectory(stuck)
        let bytes = readBytes(made + "/" + names[0])
        writeBytes(Array(bytes.prefix(bytes.count / 2)), to: stuck + "/" + names[0])
        #expect {
            _ = try ShardJoin.join(directory: stuck, waitSeconds: 1)
        } throws: { error in
            guard case TesseraError.unusableParts(_, let reason) = error else { return false }
            return reason.contains("is truncated or not a part")
        }
    }

    /// A column of distinct photos: each shard decodes only the photos of its own band.
    @Test func aShardDecodesOnlyThePhotosItsBandShows() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        try makeDirectory(scratch.file("parts"))
        let library = try PhotoLibrary.scan(landscapes)
        let layout = CellLayout(columns: 1, rows: 8, cellWidth: 64, cellHeight: 64, photoIndices: (0..<8).map { Int32($0) })
        var settings = RenderSettings()
        settings.stripeHeight = 64
        let request = RenderRequest(photos: library.photos, layout: layout, settings: settings, outputs: [.jpeg(path: scratch.file("o.jpg"))])
        var decoded = 0
        for k in 1...4 {
            let target = ShardTarget(shard: try ShardSpec(number: k, count: 4), directory: scratch.file("parts"))
            let summary = try StripeRenderer(request: request, shard: target).render()
            #expect(summary.photosDecoded == 2, "shard \(k)/4 decoded \(summary.photosDecoded) photos for its 2 rows")
            decoded += summary.photosDecoded
        }
        #expect(decoded == 8)
    }

    /// Photos every band draws are decoded by the first shard and read by the others; the
    /// join removes what they shared.
    @Test func laterShardsReadTheCellsEarlierShardsDecoded() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let folder = scratch.file("out"), parts = scratch.file("parts")
        try makeDirectory(folder)
        try makeDirectory(folder + "/zoom")
        try makeDirectory(parts)
        var shape = ShardCase()
        shape.zoom = nil
        var summaries: [RenderSummary] = []
        for k in 1...3 {
            let target = ShardTarget(shard: try ShardSpec(number: k, count: 3), directory: parts)
            summaries.append(try StripeRenderer(request: shardRequest(shape, folder: folder), shard: target).render())
        }
        let distinct = try shardRequest(shape, folder: folder).layout.distinctPhotoCount
        #expect(summaries[0].photosDecoded == distinct && summaries[0].cellsShared == 0)
        #expect(summaries[1].photosDecoded == 0 && summaries[1].cellsShared == distinct)
        #expect(summaries[2].photosDecoded == 0 && summaries[2].cellsShared == distinct)
        #expect(listNames(parts).contains { $0.hasPrefix(".cells-") })
        _ = try ShardJoin.join(directory: parts)
        #expect(!listNames(parts).contains { $0.hasPrefix(".cells-") })
    }

    /// The shard folder is untrusted, and so are the cells shards leave in it. Shard 1 keeps
    /// its cells; then someone else's files take their names: a FIFO (whose open would wait
    /// forever), a symlink to /dev/zero, a cell with its pixels changed (the checksum no longer
    /// holds), one cut short, and a FIFO at a lock's name. Shards 2 and 3 decode those photos
    /// again, and the joined files are the single-process render's, byte for byte.
    @Test func cellsSomeoneElsePlacedAreNeverTrusted() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (whole, folder) = try referenceAndEmptyOutputs(in: scratch)
        let parts = scratch.file("parts")
        try makeDirectory(parts)
        try renderShards(ShardCase(), numbers: [1], of: 3, parts: parts, folder: folder)
        let cells = parts + "/" + (try #require(listNames(parts).first { $0.hasPrefix(".cells-") }))
        let kept = listNames(cells).filter { $0.hasSuffix(".rgb") }
        try #require(kept.count >= 5, "\(kept)")
        unlink(cells + "/" + kept[0])
        #expect(mkfifo(cells + "/" + kept[0], 0o644) == 0)
        unlink(cells + "/" + kept[1])
        #expect(symlink("/dev/zero", cells + "/" + kept[1]) == 0)
        var changed = readBytes(cells + "/" + kept[2])
        for i in 0..<300 { changed[i] = 255 - changed[i] }
        writeBytes(changed, to: cells + "/" + kept[2])
        let cut = readBytes(cells + "/" + kept[3])
        writeBytes(Array(cut.prefix(cut.count / 2)), to: cells + "/" + kept[3])
        let lock = cells + "/." + kept[4].replacingOccurrences(of: ".rgb", with: ".lock")
        unlink(lock)
        unlink(cells + "/" + kept[4])
        #expect(mkfifo(lock, 0o644) == 0)
        try renderShards(ShardCase(), numbers: [2, 3], of: 3, parts: parts, folder: folder)
        _ = try ShardJoin.join(directory: parts)
        expectSameFiles(folder, as: whole)
    }

    /// A `.cells-` folder that is a symlink to another folder: nothing is read from it or
    /// written into it, and the render is the same.
    @Test func aCellsFolderThatIsASymlinkIsNotUsed() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (whole, folder) = try referenceAndEmptyOutputs(in: scratch)
        let parts = scratch.file("parts"), elsewhere = scratch.file("elsewhere")
        try makeDirectory(parts)
        try makeDirectory(elsewhere)
        try renderShards(ShardCase(), numbers: [1], of: 3, parts: parts, folder: folder)
        let cells = parts + "/" + (try #require(listNames(parts).first { $0.hasPrefix(".cells-") }))
        #expect(removeTree(cells))
        #expect(symlink(elsewhere, cells) == 0)
        try renderShards(ShardCase(), numbers: [1, 2, 3], of: 3, parts: parts, folder: folder)
        #expect(listNames(elsewhere).isEmpty, "\(listNames(elsewhere))")
        _ = try ShardJoin.join(directory: parts)
        expectSameFiles(folder, as: whole)
    }
}

/// What a test's helper thread returns.
final class ThreadOutcome: @unchecked Sendable {
    private let lock = Mutex()
    private var value: JoinSummary?
    private var error: String?
    func set(_ summary: JoinSummary) { lock.withLock { value = summary } }
    func fail(_ message: String) { lock.withLock { error = message } }
    var summary: JoinSummary? { lock.withLock { value } }
    var failure: String? { lock.withLock { error } }
}
