// ShardTests.swift — a render split into shards and joined is the single-process render, byte
// for byte (JPEG and every file of the pyramid); join refuses incomplete or mixed parts and
// then writes nothing.
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
    var mosaic = false
}

/// The request for `shape` with outputs in `folder`.
func shardRequest(_ shape: ShardCase, folder: String) throws -> RenderRequest {
    var outputs: [RenderOutput] = []
    if shape.jpeg { outputs.append(.jpeg(path: folder + "/out.jpg")) }
    if let zoom = shape.zoom { outputs.append(.deepZoom(path: folder + "/zoom/out.dzi", settings: zoom)) }
    let library = try PhotoLibrary.scan(landscapes)
    let layout: CellLayout
    if shape.mosaic {
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
    let reference = treeContents(folder)
    _ = removeTree(folder)
    try makeDirectory(folder)
    try makeDirectory(folder + "/zoom")
    for k in 1...shards {
        let target = ShardTarget(shard: try ShardSpec(number: k, count: shards), directory: parts)
        _ = try StripeRenderer(request: shardRequest(shape, folder: folder), shard: target).render()
    }
    _ = try ShardJoin.join(directory: parts)
    return (reference, treeContents(folder))
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
    return list
}()

@Suite struct ShardTests {
    @Test(arguments: 0..<shapes.count, [1, 2, 3, 7])
    func joinedRenderIsTheSingleProcessRender(shape: Int, shards: Int) throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (whole, joined) = try renderBothWays(shapes[shape].shape, shards: shards, in: scratch)
        #expect(whole.count >= 1)
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
                }
                #expect(next == plan.height)
                if plan.writesJPEG { #expect(nextStripe == plan.geometry.stripeCount) }
            }
        }
    }
}
