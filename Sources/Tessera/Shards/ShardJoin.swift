// ShardJoin.swift — `tessera join DIR`: the outputs of a sharded render, from its parts.
//
// Everything is checked before anything is written: the parts present are all complete part
// files of one render (one fingerprint, one N), shards 1...N each exactly once under their own
// names, every JPEG stripe, pyramid tile and reduced row exactly once, the destinations, every
// record's checksum (PartFile.swift), and the disk has room. Then:
//
// - the JPEG: the header (from the part holding stripe 0), each stripe's segment in order with
//   RST0...RST7 cycling between them and EOI after the last — the bytes of the single-process
//   parallel encoder. A streaming copy: I/O only, a buffer of a few MiB.
// - the pyramid: staged as a render stages it (DeepZoomOutput.swift), the shards' tiles copied
//   in, levels 0...lowest-1 built from the bands' reduced rows in order (DeepZoomWriter.swift),
//   the viewer and descriptor written, then committed.
//
// Both appear atomically, the pyramid first (as in a render); on any failure neither does and
// what stood at their names is untouched. The parts are left in place; the shards' shared cells
// (SharedCells.swift) are removed.
//
// Destinations. A part is untrusted (anyone who can write the shard folder can write one), so
// the paths its header names are not taken on trust: the outputs are the paths given to `join`
// (a JPEG path, a pyramid path), or, when none is given, the ones every part names, after the render's own checks
// (RenderRequest.checkDestinations: the folder exists and can be written, nothing there that is
// not a regular file, a symbolic link, an immutable file, two outputs one file) and three more:
// not inside the shard folder, not one of the parts, and nothing there yet. The last is what
// keeps a part from naming a photo of the render (the join cannot know the photos): taken from
// the parts, a path may only be created; to replace a file, give its path to `join`.
//
// With a wait, the join starts before the shards end: it takes parts 1...N in order
// as they appear and checks each (the same checks, `Joiner.check`) before copying it, so a bad
// part is found after the good ones before it were copied, still into outputs not yet visible.
// The disk check then covers only what each part needs as it comes.
import Glibc

/// What a join wrote.
public struct JoinSummary: Equatable, Sendable {
    public var shards: Int
    public var width: Int
    public var height: Int
    public var jpegPath: String?
    public var jpegBytes: Int64 = 0
    public var deepZoomPath: String?
    public var deepZoomTiles = 0
    public var deepZoomBytes: Int64 = 0
    /// The pyramid's other containers, when the join was asked for them.
    public var archivePath: String?
    public var archiveBytes: Int64 = 0
    public var iiifPath: String?
    /// The tiled pyramidal TIFF, when the parts hold one.
    public var tiffPath: String?
    public var tiffBytes: Int64 = 0
    public var tiffPages = 0
    /// The viewer's previews copied from the parts.
    public var previews = 0
    /// The manifest, when the shards were given one.
    public var manifestPath: String?
    public var seconds: Double = 0
    public var peakResidentBytes: Int64 = 0
}

/// Where a join writes its outputs. Empty: the paths the parts name, checked (ShardJoin.swift).
public struct JoinDestinations: Equatable, Sendable {
    public var jpegPath: String?
    public var deepZoomPath: String?
    /// The parts' pyramid as one file (DIR/NAME.szi), and as IIIF level-0 tiles in a folder
    /// served at `iiifIdentifier`: only when given to the join (parts name only a folder).
    public var archivePath: String?
    public var iiifPath: String?
    public var iiifIdentifier: String?
    public var tiffPath: String?
    /// The manifest (the shards were given one).
    public var manifestPath: String?

    public init(jpegPath: String? = nil, deepZoomPath: String? = nil, archivePath: String? = nil, iiifPath: String? = nil,
                iiifIdentifier: String? = nil, tiffPath: String? = nil, manifestPath: String? = nil) {
        self.tiffPath = tiffPath
        self.manifestPath = manifestPath
        self.jpegPath = jpegPath
        self.deepZoomPath = deepZoomPath
        self.archivePath = archivePath
        self.iiifPath = iiifPath
        self.iiifIdentifier = iiifIdentifier
    }

    public var isEmpty: Bool {
        jpegPath == nil && deepZoomPath == nil && archivePath == nil && iiifPath == nil && tiffPath == nil && manifestPath == nil
    }

    /// Whether a container of the pyramid is given.
    var givesPyramid: Bool { deepZoomPath != nil || archivePath != nil || iiifPath != nil }
}

public enum ShardJoin {
    /// Joins the parts in `directory` into the outputs named when the shards ran. `threads`
    /// encode the pyramid's lowest levels (nil: the online cores).
    ///
    /// `waitSeconds` nil: every part must be there; all are checked before anything is written.
    /// Otherwise the join starts with the parts there are and takes shards 1...N in order as
    /// they appear (a shard's part appears whole, by rename), each checked before it is copied,
    /// waiting at most `waitSeconds` for the next: run beside the shards on one machine, the
    /// copying overlaps their rendering. Either way the outputs appear only when complete.
    /// `progress` hears (parts copied, N) after each part.
    public static func join(directory: String, destinations: JoinDestinations = JoinDestinations(), threads: Int? = nil,
                            memoryBytes: Int = 64 << 20, waitSeconds: Double? = nil, cancellation: RenderCancellation? = nil,
                            progress: (Int, Int) -> Void = { _, _ in }) throws(TesseraError) -> JoinSummary {
        let started = monotonicSeconds()
        var joiner: Joiner
        if let waitSeconds {
            let first = try waitForPart(in: directory, number: nil, count: nil, fingerprint: nil, seconds: waitSeconds,
                                        memoryBytes: memoryBytes, cancellation: cancellation)
            joiner = try Joiner(directory: directory, first: first, memoryBytes: memoryBytes)
            // The parts still to come cannot be compared yet: only the first is known not to be
            // a destination; the others are checked as they come (`check`).
            try joiner.decideDestinations(destinations, parts: [first.part])
            do throws(TesseraError) {
                for number in 1...joiner.shards {
                    let part = number == first.number ? first.part
                        : try waitForPart(in: directory, number: number, count: joiner.shards, fingerprint: joiner.fingerprint,
                                          seconds: waitSeconds, memoryBytes: memoryBytes, cancellation: cancellation).part
                    // Held: the first part (its cells script) and this one.
                    joiner.heldIndexBytes = first.part.indexBytes + (number == first.number ? 0 : part.indexBytes)
                        + joiner.waitingPreviewBytes
                    try joiner.check(part)
                    try joiner.verify(part)
                    try joiner.checkDiskSpace(for: part)
                    try joiner.write(part, threads: threads, cancellation: cancellation)
                    progress(number, joiner.shards)
                }
                try joiner.checkComplete()
                try joiner.commit(cancellation: cancellation)
            } catch {
                joiner.discard()
                throw error
            }
        } else {
            let parts = try openParts(in: directory, memoryBytes: memoryBytes)
            joiner = try Joiner(directory: directory, first: (1, parts[0]), memoryBytes: memoryBytes)
            joiner.heldIndexBytes = parts.reduce(0) { $0 + $1.indexBytes }
            for part in parts { try joiner.check(part) }
            try joiner.checkComplete()
            try joiner.decideDestinations(destinations, parts: parts)
            for part in parts { try joiner.verify(part) }
            try joiner.checkDiskSpace(parts)
            do throws(TesseraError) {
                for (index, part) in parts.enumerated() {
                    try joiner.write(part, threads: threads, cancellation: cancellation)
                    progress(index + 1, parts.count)
                }
                try joiner.commit(cancellation: cancellation)
            } catch {
                joiner.discard()
                throw error
            }
        }
        var summary = joiner.summary
        summary.seconds = monotonicSeconds() - started
        summary.peakResidentBytes = peakResidentBytes()
        return summary
    }

    /// Waits for a part of the render in `directory`: shard `number` of `count` (nil: any), or
    /// fails after `seconds`. A part of another render there is refused at once.
    /// The part files' names in `directory`, sorted: only those are kept from the listing, and
    /// no more than a render makes and one (which the count check then refuses).
    static func partNames(in directory: String) throws(TesseraError) -> [String] {
        try listDirectory(directory, limit: ShardSpec.maxCount + 1) { !$0.hasPrefix(".") && $0.hasSuffix(ShardSpec.partExtension) }.sorted()
    }

    /// At most two parts are open at once (the first and the one being joined): each index may
    /// take a quarter of the budget.
    private static func waitForPart(in directory: String, number: Int?, count: Int?, fingerprint: String?, seconds: Double,
                                    memoryBytes: Int, cancellation: RenderCancellation?) throws(TesseraError) -> (number: Int, part: PartReader) {
        let deadline = monotonicSeconds() + seconds
        var unfinished: TesseraError?  // a part still being copied in, as it last stood
        while true {
            try checkFolder(directory)
            let names = try partNames(in: directory)
            unfinished = nil
            for name in names {
                if let number, let count, name != (try? ShardSpec(number: number, count: count))?.partFileName { continue }
                let part: PartReader
                do throws(TesseraError) {
                    part = try PartReader(path: directory + "/" + name, directory: directory,
                                          indexBudget: IndexBudget(budgetBytes: memoryBytes, fraction: 4, heldBytes: 0))
                } catch {
                    // Not whole yet (copied in front to back): waited for, up to the deadline,
                    // then refused with what is wrong with it.
                    guard PartReader.lacksItsEnd(directory + "/" + name) else { throw error }
                    unfinished = error
                    continue
                }
                if let fingerprint, part.header["fingerprint"] != fingerprint || part.header["shards"] != count.map(String.init) {
                    throw .unusableParts(directory: directory, reason: "\(name) is a part of another render (fingerprint "
                                         + "\(part.header["fingerprint"] ?? "none"), not \(fingerprint) like the parts before): "
                                         + "run that shard again with the same flags and inputs as the others")
                }
                guard let shard = Int(part.header["shard"] ?? ""), let shards = Int(part.header["shards"] ?? ""),
                      name == (try? ShardSpec(number: shard, count: shards))?.partFileName else {
                    throw .unusableParts(directory: directory, reason: "\(name) is not named for the shard it holds")
                }
                return (shard, part)
            }
            if cancellation?.isCancelled == true { throw .cancelled }
            guard monotonicSeconds() < deadline else {
                if let unfinished { throw unfinished }
                let what = number.map { "shard \($0) of \(count!) has no part" } ?? "no part appeared"
                throw .unusableParts(directory: directory, reason: "\(what) after waiting \(formatDecimal(seconds, places: 0)) s: "
                                     + "did that shard fail? run it again, then join again")
            }
            usleep(100_000)
        }
    }

    /// A part's file name, for messages.
    static func name(_ part: PartReader) -> String { part.name }

    /// What the join holds besides the pyramid's levels: the copy and verify buffers (4 MiB
    /// each), a batch of reduced rows (4 MiB) and the process itself.
    static let fixedBytes = 28 << 20

    /// Throws unless `directory` is a folder: a file there is named as one, not as missing.
    static func checkFolder(_ directory: String) throws(TesseraError) {
        switch fileStatus(directory) {
        case .success(let info) where (info.st_mode & S_IFMT) == S_IFDIR: return
        case .success(let info):
            let what = (info.st_mode & S_IFMT) == S_IFREG ? "a file" : "not a regular file (a FIFO, socket or device)"
            throw .unusableParts(directory: directory, reason: "it is \(what), not a folder (give the folder the shards wrote their parts to)")
        case .failure:
            throw .unusableParts(directory: directory, reason: "there is no such folder (give the folder the shards wrote their parts to)")
        }
    }

    /// The parts in `directory`, ordered by shard, after checking that they are shards 1...N of
    /// one render, each once, under their own names.
    /// Every part is open at once: their indexes together may take half the budget `memoryBytes`.
    static func openParts(in directory: String, memoryBytes: Int) throws(TesseraError) -> [PartReader] {
        func bad(_ why: String) -> TesseraError { .unusableParts(directory: directory, reason: why) }
        try checkFolder(directory)
        let names = try partNames(in: directory)
        guard !names.isEmpty else {
            throw .noParts(directory: directory)
        }
        var parts: [PartReader] = []
        var indexBytes = 0
        for name in names {
            let part = try PartReader(path: directory + "/" + name, directory: directory,
                                      indexBudget: IndexBudget(budgetBytes: memoryBytes, fraction: 2, heldBytes: indexBytes))
            indexBytes += part.indexBytes
            parts.append(part)
        }
        // One render: the fingerprint most parts carry; any other part is foreign.
        var counts: [String: Int] = [:]
        for part in parts { counts[(part.header["fingerprint"] ?? "") + " " + (part.header["shards"] ?? ""), default: 0] += 1 }
        let (key, _) = counts.max { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) }!
        let fingerprint = String(key.split(separator: " ").first ?? "")
        for part in parts where (part.header["fingerprint"] ?? "") + " " + (part.header["shards"] ?? "") != key {
            throw bad("\(name(part)) is a part of another render (fingerprint \(part.header["fingerprint"] ?? "none"), "
                      + "\(part.header["shards"] ?? "?") shards; the other parts: \(fingerprint), \(key.split(separator: " ").last ?? "?") shards): "
                      + "remove it, or run that shard again with the same flags and inputs as the others")
        }
        guard let shards = Int(parts[0].header["shards"] ?? ""), shards >= 1 else { throw bad("\(name(parts[0])) has no valid shard count") }
        var byNumber: [Int: PartReader] = [:]
        var claims: [Int: [String]] = [:]
        for part in parts { claims[Int(part.header["shard"] ?? "") ?? 0, default: []].append(name(part)) }
        if let (number, names) = claims.filter({ $0.value.count > 1 }).min(by: { $0.key < $1.key }) {
            throw bad("\(names.joined(separator: " and ")) each claim to be shard \(number) of \(shards): keep only "
                      + ((try? ShardSpec(number: number, count: shards))?.partFileName ?? "one"))
        }
        for part in parts {
            guard let number = Int(part.header["shard"] ?? ""), (1...shards).contains(number),
                  let spec = try? ShardSpec(number: number, count: shards) else {
                throw bad("\(name(part)) has no valid shard number")
            }
            guard name(part) == spec.partFileName else {
                throw bad("\(name(part)) holds shard \(number) of \(shards) but is not named \(spec.partFileName): rename or remove it")
            }
            byNumber[number] = part
        }
        let missing = (1...shards).filter { byNumber[$0] == nil }
        guard missing.isEmpty else {
            let list = missing.prefix(10).map(String.init).joined(separator: ", ") + (missing.count > 10 ? ", ..." : "")
            throw bad("shard(s) \(list) of \(shards) have no part yet: run them (or wait for them to finish), then join again")
        }
        return (1...shards).map { byNumber[$0]! }
    }
}

/// One join: the render's description (from the first part), what the parts checked so far
/// hold, and the outputs being written.
private struct Joiner {
    let directory: String
    let fingerprint: String
    let shards: Int
    var summary: JoinSummary
    private let stripeCount: Int
    private var zoomPath: String?
    /// The pyramid's other containers (given to the join only).
    private var archivePath: String?
    private var iiif: (path: String, identifier: String)?
    /// Whether the join writes the pyramid, in any container.
    private var writesPyramid: Bool { zoomPath != nil || archivePath != nil || iiif != nil }
    /// The outputs part 1 names: every part must name the same.
    private let namedJPEG: String?, namedZoom: String?
    /// The words of the first part's header that describe the render, and their keys.
    private let renderWords: [String: String]
    private static let renderKeys = ["width", "height", "stripe-height", "stripe-count", "band-unit", "subsampling", "restart-interval",
                                     "dz-tile-size", "dz-overlap", "dz-quality", "dz-viewer", "dz-labels", "dz-title", "dz-previews",
                                     "tiff-tile-size", "tiff-quality"]
    /// The TIFF part 1 names, and where the join writes it.
    private let namedTIFF: String?
    private var tiffPath: String?
    private var zoomSettings = DeepZoomSettings()
    private var tiffSettings = PyramidTIFFSettings()
    private var subsampling = ChromaSubsampling.s420
    // What the checks have seen, in order.
    private var checkedStripes = 0
    private var headerSeen = false
    private var jpegBytes: Int64 = 0
    /// The parts' tiles and reduced rows of each pyramid (PyramidShare.swift).
    private var zoomShare: PyramidShare?
    private var tiffShare: PyramidShare?
    private var firstHasCells = false
    /// The manifest the parts hold (JoinedManifest.swift).
    private var manifest: JoinedManifest?
    /// The viewer's previews' long side (0: none), the photos the parts hold one of, and their bytes.
    private var previewSide = 0
    private var previewPhotos = Set<UInt32>()
    private var previewBytes: Int64 = 0
    /// Part 1's cells.js: its bytes, and the photo names it gives (a preview is of one of them).
    private var cellsBytes: Int64 = 0
    private var photoNames = 0
    /// The most bytes a JPEG stripe's segment can hold (a stripe's pixels at the worst case of
    /// baseline JPEG, as a tile's bound).
    private var maxSegmentBytes: UInt64 = 0
    private var segmentStripeHeight = 0

    /// Whether `header` is byte for byte the header tessera's encoder writes for this picture at
    /// some quality 1-100 (a stripe JPEG's, its frame's size and restart interval set as a
    /// shard sets them), with the density its JFIF segment gives (dots per inch, or none).
    static func isEncodersHeader(_ header: [UInt8], width: Int, height: Int, subsampling: ChromaSubsampling,
                                 restartInterval: Int) -> Bool {
        guard header.count > 18, header[2] == 0xFF, header[3] == 0xE0 else { return false }
        let units = header[13], x = Int(header[14]) << 8 | Int(header[15]), y = Int(header[16]) << 8 | Int(header[17])
        let marks = JPEGMarks.output(dotsPerInch: units == 1 && x == y ? x : nil)
        let grey = [UInt8](repeating: 128, count: 16 * 16 * 3)
        for quality in 1...100 {
            guard let stripe = try? grey.withUnsafeBytes({ raw throws(TesseraError) in
                try EncodedStripe.encode(rows: raw.baseAddress!, stride: 48, width: 16, rowCount: 16, quality: quality,
                                         subsampling: subsampling, label: "the join's reference header", marks: marks)
            }), var expected = try? stripe.fileHeader(height: height, restartInterval: restartInterval, label: "") else { return false }
            guard expected.count == header.count,
                  let sof = (2..<(expected.count - 8)).first(where: { expected[$0] == 0xFF && expected[$0 + 1] == 0xC0 }) else { continue }
            expected[sof + 7] = UInt8(width >> 8)
            expected[sof + 8] = UInt8(width & 0xFF)
            if expected == header { return true }
        }
        return false
    }

    /// The fewest bytes stripe `stripe`'s segment can hold: every block of its MCUs costs at
    /// least two bits (a DC code and an end of block, each a bit or more), and a segment ends on
    /// a byte. An empty or cut segment (checksums recomputed) would join into a picture that
    /// decoders warn about; it is refused.
    private func minimumSegmentBytes(stripe: Int) -> UInt64 {
        let factors = subsampling.lumaFactors
        let mcuWidth = 8 * Int(factors.h), mcuHeight = 8 * Int(factors.v)
        let top = stripe * segmentStripeHeight, rows = max(0, min(summary.height, top + segmentStripeHeight) - top)
        let mcus = UInt64((summary.width + mcuWidth - 1) / mcuWidth) * UInt64((rows + mcuHeight - 1) / mcuHeight)
        return (mcus * UInt64(Int(factors.h * factors.v) + 2) * 2 + 7) / 8
    }
    // The outputs, once begun.
    private var jpegOutput: AtomicOutputFile?
    private var zoomOutput: DeepZoomOutput?
    /// The TIFF, and the writer of its pages below the bands (none for a TIFF of one page).
    private var tiffOutput: (file: PyramidTIFFFile, writer: DeepZoomWriter?)?
    private var writtenStripes = 0
    private var buffer: [UInt8] = []
    private var verifyBuffer: [UInt8] = []
    /// The join's memory budget: what building the levels below the bands and
    /// copying tiles may hold. Sizes a part gives are checked against it before they size anything.
    private let memoryBytes: Int
    /// The files already at the destinations (given to join): a part that comes later with
    /// a wait must not be one of them.
    private var destinationIdentities: [OutputDestination.Identity: String] = [:]
    /// Part 1 (always joined first): it holds the viewer's cells.js.
    private var firstPart: PartReader?
    /// Parts joined before any band whose previews wait for the pyramid to begin.
    /// (Their preview records only, not the parts: a join that waits holds two parts open.)
    private var previewsWaiting: [(path: String, name: String, identity: OutputDestination.Identity, previews: [PartRecord])] = []
    /// What `previewsWaiting` holds in memory.
    var waitingPreviewBytes: Int { previewsWaiting.reduce(0) { $0 + $1.previews.count * PartReader.recordBytesInMemory } }
    /// What the open parts' indexes take in memory (set by the join as it opens them).
    var heldIndexBytes = 0

    init(directory: String, first: (number: Int, part: PartReader), memoryBytes: Int) throws(TesseraError) {
        self.directory = directory
        self.memoryBytes = memoryBytes
        let header = first.part.header
        let name = ShardJoin.name(first.part)
        func bad(_ why: String) -> TesseraError { .unusableParts(directory: directory, reason: why) }
        guard header["format"] == PartFormat.version else {
            throw bad("\(name) was made by another version of tessera (part format \(header["format"] ?? "none"); this one reads "
                      + "format \(PartFormat.version)): run its shard again with this version")
        }
        guard let fingerprint = header["fingerprint"], Fingerprint.isWellFormed(fingerprint),
              let shards = Int(header["shards"] ?? ""), (1...ShardSpec.maxCount).contains(shards),
              let width = Int(header["width"] ?? ""), let height = Int(header["height"] ?? ""), width > 0, height > 0 else {
            throw bad("\(name) has no valid description of its render")
        }
        // No bigger than a render could have made: its own limits (RenderPlan), before any
        // size, level count or loop is derived from them.
        let side = header["jpeg"] != nil ? jpegMaxDimension : RenderPlan.maxDeepZoomSide
        guard width <= side, height <= side else {
            throw bad("\(name) claims a picture of \(width) x \(height) px, more than a render makes (\(side) px a side "
                      + (header["jpeg"] != nil ? "with a JPEG" : "for a pyramid") + "): it is damaged or not a part")
        }
        self.fingerprint = fingerprint
        self.shards = shards
        manifest = try JoinedManifest(header: header, name: name, bad: bad)
        summary = JoinSummary(shards: shards, width: width, height: height)
        namedJPEG = header["jpeg"]
        namedZoom = header["dzi"]
        namedTIFF = header["tiff"]
        tiffPath = namedTIFF
        renderWords = header.values.filter { Self.renderKeys.contains($0.key) }
        summary.jpegPath = namedJPEG
        summary.deepZoomPath = namedZoom
        stripeCount = Int(header["stripe-count"] ?? "") ?? 0
        if summary.jpegPath != nil {
            guard stripeCount > 0, stripeCount <= height else { throw bad("\(name) gives \(stripeCount) stripes for \(height) rows") }
            let stripeHeight = Int(header["stripe-height"] ?? "") ?? 0
            guard stripeHeight > 0, stripeHeight <= height else { throw bad("\(name) gives stripes of \(stripeHeight) rows for \(height) rows") }
            maxSegmentBytes = UInt64(width) * UInt64(stripeHeight) * 24 + (1 << 20)
            segmentStripeHeight = stripeHeight
        }
        zoomPath = namedZoom
        if zoomPath != nil {
            func number(_ key: String) throws(TesseraError) -> Int {
                guard let value = Int(header[key] ?? "") else { throw bad("\(name) has no valid \(key)") }
                return value
            }
            zoomSettings.tileSize = try number("dz-tile-size")
            zoomSettings.overlap = try number("dz-overlap")
            zoomSettings.quality = try number("dz-quality")
            zoomSettings.viewer = header["dz-viewer"] == "1"
            zoomSettings.labels = ViewerLabels(rawValue: header["dz-labels"] ?? "") ?? .name
            zoomSettings.title = header["dz-title"]
            do throws(TesseraError) {
                try zoomSettings.validate()
            } catch {
                throw bad("\(name) has pyramid settings no render has (\(error)): it is damaged or not a part")
            }
            if let text = header["dz-previews"] {
                guard let side = Int(text), PhotoPreviews.sizes.contains(side), zoomSettings.viewer else {
                    throw bad("\(name) has previews no render has: it is damaged or not a part")
                }
                previewSide = side
                zoomSettings.previews = side
            }
            zoomShare = PyramidShare(title: "the pyramid",
                                     geometry: DeepZoomGeometry(width: width, height: height, tileSize: zoomSettings.tileSize,
                                                                overlap: zoomSettings.overlap),
                                     prefix: "dz", tileKind: .tile, rowsKind: .reducedRows)
        }
        if namedTIFF != nil {
            tiffSettings.tileSize = Int(header["tiff-tile-size"] ?? "") ?? 0
            tiffSettings.quality = Int(header["tiff-quality"] ?? "") ?? 0
            do throws(TesseraError) {
                try tiffSettings.validate()
            } catch {
                throw bad("\(name) has TIFF settings no render has (\(error)): it is damaged or not a part")
            }
            let pages = PyramidTIFFGeometry(width: width, height: height, tileSize: tiffSettings.tileSize)
            tiffShare = PyramidShare(title: "the TIFF", geometry: pages.levels, prefix: "tiff", tileKind: .tiffTile,
                                     rowsKind: .tiffReducedRows, bottom: pages.lowestLevel, padded: true)
        }
        // Every output's sampling (the JPEG's header and every tile are checked against it).
        if zoomShare != nil || tiffShare != nil || header["subsampling"] != nil {
            guard let mode = ChromaSubsampling(rawValue: header["subsampling"] ?? "") else { throw bad("\(name) has no valid subsampling") }
            subsampling = mode
        }
    }

    /// Decides the outputs: `given` (the paths the join is given), or the paths the parts name, and
    /// checks them as a render checks its own, and against `parts` and the shard folder (the
    /// file's header says why). Throws `.invalidSettings` or `.unusableOutput` (exit 2, as a
    /// render's destination would), before anything is written.
    mutating func decideDestinations(_ given: JoinDestinations, parts: [PartReader]) throws(TesseraError) {
        if !given.isEmpty {
            if given.jpegPath != nil && namedJPEG == nil {
                throw .joinOutputs(.noJPEGInParts)
            }
            if given.givesPyramid && namedZoom == nil {
                throw .joinOutputs(.noPyramidInParts)
            }
            if given.jpegPath == nil && namedJPEG != nil {
                throw .joinOutputs(.jpegNotGiven)
            }
            if !given.givesPyramid && namedZoom != nil {
                throw .joinOutputs(.pyramidNotGiven)
            }
            if given.tiffPath != nil && namedTIFF == nil {
                throw .joinOutputs(.noTIFFInParts)
            }
            if given.tiffPath == nil && namedTIFF != nil {
                throw .joinOutputs(.tiffNotGiven)
            }
            if given.manifestPath != nil && manifest == nil {
                throw .joinOutputs(.noManifestInParts)
            }
            if given.manifestPath == nil && manifest != nil {
                throw .joinOutputs(.manifestNotGiven)
            }
            if let path = given.manifestPath { manifest?.path = path }
            tiffPath = given.tiffPath
            summary.jpegPath = given.jpegPath
            summary.deepZoomPath = given.deepZoomPath
            zoomPath = given.deepZoomPath
            archivePath = given.archivePath
            summary.archivePath = given.archivePath
            if let path = given.iiifPath {
                guard let identifier = given.iiifIdentifier else {
                    throw .invalidSettings("an IIIF folder needs the address it will be served at")
                }
                iiif = (path, identifier)
                summary.iiifPath = path
            }
        }
        // A NUL would end the path where the kernel reads it: "evil.sh\0.jpg" passes the checks
        // below as a .jpg and creates evil.sh.
        for path in [summary.jpegPath, zoomPath, archivePath, iiif?.path, tiffPath, manifest?.path].compactMap({ $0 }) where path.utf8.contains(0) {
            throw .unusableOutput(path: path.replacing("\u{0}", with: "\\0"), reason: "a part names a path with a NUL byte in it: it is damaged or not a part")
        }
        var outputs: [RenderOutput] = []
        if let path = summary.jpegPath { outputs.append(.jpeg(path: path)) }
        if let path = zoomPath {
            guard RenderOutput.isDeepZoomPath(path) else {
                throw .unusableOutput(path: path, reason: "a part names this as the pyramid, but a pyramid's path ends in NAME.dzi")
            }
            outputs.append(.deepZoom(path: path, settings: zoomSettings))
        }
        if let path = archivePath { outputs.append(.deepZoomArchive(path: path, settings: zoomSettings)) }
        if let iiif { outputs.append(.iiif(path: iiif.path, settings: zoomSettings, identifier: iiif.identifier)) }
        if let path = tiffPath {
            guard RenderOutput.isTIFFPath(path) else {
                throw .unusableOutput(path: path, reason: "a part names this as the TIFF, but a TIFF's path ends in NAME.tif or NAME.tiff")
            }
            outputs.append(.tiff(path: path, settings: tiffSettings))
        }
        summary.tiffPath = tiffPath
        // A shard names its outputs by absolute paths: a relative one would land wherever the
        // join runs.
        if let manifest, RenderManifest.format(for: manifest.path) != manifest.format {
            throw .unusableOutput(path: manifest.path, reason: manifest.format == .json
                ? "the parts hold a JSON manifest: give a path ending in .json" : "the parts hold a CSV manifest: give a path not ending in .json")
        }
        if given.isEmpty, let path = [summary.jpegPath, zoomPath, tiffPath, manifest?.path].compactMap({ $0 }).first(where: { !$0.hasPrefix("/") }) {
            throw .unusableOutput(path: path, reason: "a part names this relative path as an output, and a shard names absolute paths: "
                                  + "it is damaged or not a part (give the outputs' paths to the join)")
        }
        if given.isEmpty, let path = summary.jpegPath, !(path.lowercased().hasSuffix(".jpg") || path.lowercased().hasSuffix(".jpeg")) {
            throw .joinPathFromParts(path: path, output: .jpeg, file: "the JPEG", problem: .notJPEGName)
        }
        let manifestFile = manifest.map { [OutputFile(path: $0.path, role: OutputRole.manifest.rawValue, isFolder: false)] } ?? []
        try RenderRequest.checkDestinations(outputs, alsoWriting: manifestFile, temporaryDirectory: nil)
        summary.manifestPath = manifest?.path
        let folder = resolvedPath(directory) ?? directory
        let partsByIdentity = Dictionary(parts.map { ($0.identity, $0.name) }, uniquingKeysWith: { first, _ in first })
        for file in outputs.flatMap(\.files) + manifestFile {
            let canonical = OutputDestination.canonicalPath(file.path)
            if canonical == folder || canonical.hasPrefix(folder == "/" ? "/" : folder + "/") {
                throw .unusableOutput(path: file.path, reason: "\(file.role) would be inside the shard folder \(directory), "
                                      + "where the parts are: choose another folder")
            }
            if let identity = OutputDestination.identity(file.path), let part = partsByIdentity[identity] {
                throw .unusableOutput(path: file.path, reason: "it is the part \(part); writing \(file.role) there would destroy it")
            }
            if let identity = OutputDestination.identity(file.path) { destinationIdentities[identity] = file.path }
            if given.isEmpty, case .success = linkStatus(file.path) {
                throw .joinPathFromParts(path: file.path, output: OutputRole(rawValue: file.role) ?? .pyramid, file: file.role, problem: .exists)
            }
        }
    }

    /// Reads every record of a checked part and compares its checksum, before anything of it is
    /// written. Pieces of 4 MiB: the memory does not grow with the part.
    mutating func verify(_ part: PartReader) throws(TesseraError) {
        if verifyBuffer.isEmpty { verifyBuffer = [UInt8](repeating: 0, count: 4 << 20) }
        try part.verify(using: &verifyBuffer)
        // Every later part names the same outputs; one that does not has been refused by `check`.
    }

    private func bad(_ why: String) -> TesseraError { .unusableParts(directory: directory, reason: why) }

    private func numbers(_ key: String, in part: PartReader) throws(TesseraError) -> (Int, Int) {
        let fields = (part.header[key] ?? "").split(separator: " ").compactMap { Int($0) }
        guard fields.count == 2, fields[0] >= 0, fields[1] >= 0 else { throw bad("\(ShardJoin.name(part)) has no valid \(key)") }
        return (fields[0], fields[1])
    }

    /// Checks the next part (in shard order) against the render and the parts before it.
    mutating func check(_ part: PartReader) throws(TesseraError) {
        let name = ShardJoin.name(part)
        guard part.header["fingerprint"] == fingerprint, part.header["shards"] == String(shards) else {
            throw bad("\(name) is a part of another render")
        }
        if let path = destinationIdentities[part.identity] {
            throw .unusableOutput(path: path, reason: "it is the part \(name); writing the output there would destroy it")
        }
        guard part.header["jpeg"] == namedJPEG, part.header["dzi"] == namedZoom, part.header["tiff"] == namedTIFF,
              part.header["manifest"] == manifest?.named,
              part.header["manifest-format"] == manifest.map({ $0.format == .json ? "json" : "csv" }) else {
            throw bad("\(name) names other outputs than the part before it: it is damaged or not a part of this render")
        }
        // What the first part's description decided (the outputs' settings, the picture): the
        // same in every part (a shard of this render writes the same words).
        for key in Self.renderKeys where part.header[key] != renderWords[key] {
            throw bad("\(name) describes the render otherwise than the first part (\(key)): it is damaged or not a part of this render")
        }
        if part.header["shard"] == "1" { firstHasCells = part.records.contains { $0.kind == .cellsScript } }
        if summary.jpegPath != nil {
            let owned = try numbers("jpeg-stripes", in: part)
            for record in part.records where record.kind == .jpegHeader || record.kind == .jpegSegment {
                if record.kind == .jpegHeader {
                    guard !headerSeen, checkedStripes == 0 else { throw bad("\(name) holds a second JPEG header") }
                    headerSeen = true
                    // The picture's size is the JPEG's own (its SOF), not only the header's word.
                    guard record.length <= PartFormat.maxJPEGHeaderBytes else { throw bad("\(name)'s JPEG header is too long") }
                    try part.read(record, into: &buffer)
                    let factors = subsampling.lumaFactors
                    guard let frame = JPEGFrame(buffer, header: true), frame.width == summary.width, frame.height == summary.height,
                          frame.sampling == [UInt8(factors.h << 4 | factors.v), 0x11, 0x11] else {
                        throw bad("\(name)'s JPEG header is not that of a \(summary.width) x \(summary.height) px picture in "
                                  + "\(subsampling.rawValue) sampling, as its description says, made as tessera makes one: "
                                  + "it is damaged or not a part")
                    }
                    // The segments are joined a stripe to a restart interval: the stripes must tile the
                    // picture in whole MCU rows, and the interval be a stripe's MCUs, or the joined
                    // file has its restart markers where no decoder looks for them (exit 0 before).
                    let mcuHeight = subsampling.mcuHeight
                    let interval = subsampling.mcusPerRow(width: summary.width) * ((segmentStripeHeight + mcuHeight - 1) / mcuHeight)
                    guard stripeCount == (summary.height + segmentStripeHeight - 1) / segmentStripeHeight,
                          segmentStripeHeight % mcuHeight == 0 || stripeCount == 1,
                          frame.restartInterval == interval, part.header["restart-interval"] == String(interval) else {
                        throw bad("\(name)'s JPEG stripes (\(stripeCount) of \(segmentStripeHeight) rows, a restart interval of "
                                  + "\(frame.restartInterval) MCUs) do not divide a \(summary.width) x \(summary.height) px picture as a render "
                                  + "divides one (\(interval) MCUs a stripe): it is damaged or not a part")
                    }
                    // Its tables and markers too: a forged Huffman table (still buildable) joined into a
                    // file djpeg calls corrupt, and components named R, G, B recoloured it, each with
                    // exit 0. The header is what tessera's encoder writes at some quality.
                    guard Self.isEncodersHeader(buffer, width: summary.width, height: summary.height, subsampling: subsampling,
                                                restartInterval: interval) else {
                        throw bad("\(name)'s JPEG header is not the one tessera writes for a \(summary.width) x \(summary.height) px "
                                  + "picture in \(subsampling.rawValue) sampling at any quality (its tables or markers differ): "
                                  + "it is damaged or not a part")
                    }
                } else {
                    let stripe = Int(record.a)
                    guard record.length <= maxSegmentBytes else {
                        throw bad("\(name) holds a segment of stripe \(stripe) of \(record.length) bytes, more than a stripe of this picture can be: "
                                  + "it is damaged or not a part")
                    }
                    guard record.length >= minimumSegmentBytes(stripe: stripe) else {
                        throw bad("\(name) holds a segment of stripe \(stripe) of \(record.length) bytes, fewer than the "
                                  + "\(minimumSegmentBytes(stripe: stripe)) its blocks take at the least: it is damaged or not a part")
                    }
                    guard stripe >= owned.0, stripe < owned.1 else {
                        throw bad("\(name) holds stripe \(stripe), outside its own band (stripes \(owned.0)..<\(owned.1)): it is damaged or not a part")
                    }
                    guard stripe == checkedStripes, stripe >= owned.0, stripe < owned.1, stripe < stripeCount, headerSeen else {
                        throw bad("\(name) holds stripe \(stripe) where stripe \(checkedStripes) was due: a part is missing or not its own")
                    }
                    checkedStripes += 1
                }
                jpegBytes += Int64(record.length) + 2
            }
            guard checkedStripes == owned.1 || owned.0 >= owned.1 else {
                throw bad("\(name) holds stripes up to \(checkedStripes), not all of \(owned.0)..<\(owned.1): run its shard again")
            }
        }
        // (After the JPEG's header, whose frame says the picture's size first.)
        if part.header["shard"] == "1" && firstHasCells { try checkCells(part) }
        let directory = self.directory
        let bad = { (why: String) -> TesseraError in .unusableParts(directory: directory, reason: why) }
        try zoomShare?.checkBand(of: part, bad: bad)
        try tiffShare?.checkBand(of: part, bad: bad)
        // The levels the join builds below the bands, both pyramids' (and libtiff's table of the
        // page it writes, and the spool's index), and the parts' indexes, within the budget
        // before any is built.
        let tiffTables = tiffShare.map { share in share.geometry.levels[share.bottom...].reduce(0) { $0 + $1.columns * $1.rows } * 24 } ?? 0
        if manifest != nil {
            try manifest!.check(part, first: part.header["shard"] == "1", buffer: &buffer, mostHeldBytes: memoryBytes / 4, bad: bad)
        } else if let record = part.records.first(where: { $0.kind == .manifestPiece || $0.kind == .manifestNote }) {
            throw bad("\(name) holds \(PartReader.describe(record)), but its render wrote no manifest")
        }
        let need = (zoomShare?.writerBytes ?? 0) + (tiffShare?.writerBytes ?? 0) + tiffTables + ShardJoin.fixedBytes + heldIndexBytes
            + (manifest?.heldBytes ?? 0)
        guard need <= memoryBytes else { throw .budgetTooSmall(budgetBytes: memoryBytes, neededBytes: need) }
        for record in part.records {
            switch record.kind {
            case .tile, .reducedRows:
                guard zoomShare != nil else { throw bad("\(name) holds \(PartReader.describe(record)), but its render wrote no pyramid") }
                try zoomShare!.check(record, of: name, memoryBytes: memoryBytes, bad: bad)
            case .tiffTile, .tiffReducedRows:
                guard tiffShare != nil else { throw bad("\(name) holds \(PartReader.describe(record)), but its render wrote no TIFF") }
                try tiffShare!.check(record, of: name, memoryBytes: memoryBytes, bad: bad)
            case .preview:
                try checkPreview(record, of: name)
            default: break
            }
        }
    }

    /// Part 1's cells.js (which the viewer runs as a script): its pieces in order, each no longer
    /// than the writer makes them, and together what tessera writes for this render
    /// (CellsScriptCheck), read through once before anything is written.
    private mutating func checkCells(_ part: PartReader) throws(TesseraError) {
        let name = ShardJoin.name(part)
        guard let geometry = zoomShare?.geometry, zoomSettings.viewer else {
            throw bad("\(name) holds the viewer's cells, but its render wrote no viewer")
        }
        var check = CellsScriptCheck(expected: ["width": summary.width, "height": summary.height, "tileSize": geometry.tileSize,
                                                "overlap": geometry.overlap, "maxLevel": geometry.maxLevel, "previews": previewSide])
        var piece: UInt32 = 0
        if buffer.count < 1 << 20 { buffer = [UInt8](repeating: 0, count: 1 << 20) }
        for record in part.records where record.kind == .cellsScript {
            guard record.a == piece, record.length <= UInt64(PartFormat.maxCellsPieceBytes) else {
                throw bad("\(name) holds \(PartReader.describe(record)) of \(record.length) bytes where piece \(piece) of at most "
                          + "\(PartFormat.maxCellsPieceBytes) was due: it is damaged or not a part")
            }
            piece += 1
            cellsBytes += Int64(record.length)
            try part.copy(record, using: &buffer) { (bytes) throws(TesseraError) in check.feed(bytes) }
            if let why = check.failure { throw bad("\(name)'s viewer cells (cells.js) are not what tessera writes: \(why)") }
        }
        guard check.finish() else {
            throw bad("\(name)'s viewer cells (cells.js) are not what tessera writes: \(check.failure ?? "")")
        }
        photoNames = check.nameCount
    }

    /// A preview: asked for, of a photo no other record gave, no longer than a JPEG of its size
    /// can be (as a tile's bound) and a quarter of the budget (it is copied whole).
    private mutating func checkPreview(_ record: PartRecord, of name: String) throws(TesseraError) {
        guard previewSide > 0 else { throw bad("\(name) holds \(PartReader.describe(record)), but its render wrote no previews") }
        guard Int(record.a) < photoNames else {
            throw bad("\(name) holds a preview of photo \(record.a), but the render's cells name \(photoNames) photos: it is damaged or not a part")
        }
        guard previewPhotos.insert(record.a).inserted else { throw bad("\(name) holds a second preview of photo \(record.a)") }
        let most = UInt64(previewSide * previewSide) * 24 + (1 << 20)
        guard record.length >= 4, record.length <= most else {
            throw bad("\(name) holds a preview of photo \(record.a) of \(record.length) bytes, which no JPEG of \(previewSide) px is: "
                      + "it is damaged or not a part")
        }
        guard record.length <= UInt64(memoryBytes / 4) else {
            throw .budgetTooSmall(budgetBytes: memoryBytes, neededBytes: Int(record.length) * 4)
        }
        previewBytes += Int64(record.length)
    }

    /// After the last part: everything the outputs need was there.
    func checkComplete() throws(TesseraError) {
        if summary.jpegPath != nil {
            guard checkedStripes == stripeCount, headerSeen else {
                throw bad("the parts hold \(checkedStripes) of the JPEG's \(stripeCount) stripes: a shard did not finish; run it again")
            }
        }
        if let zoomShare {
            try zoomShare.checkComplete(bad: bad)
            if zoomSettings.viewer && !firstHasCells { throw bad("part 1 holds no viewer cells") }
        }
        try tiffShare?.checkComplete(bad: bad)
        if let manifest, manifest.pieces == 0 { throw bad("part 1 holds no manifest, though the parts name one") }
    }

    /// Room for the outputs (what dead runs left in their folders goes first).
    func checkDiskSpace(_ parts: [PartReader]) throws(TesseraError) {
        var needs: [String: Int64] = [:]
        if let path = summary.jpegPath { needs[parentDirectory(of: path), default: 0] += jpegBytes + (1 << 20) }
        if let share = zoomShare, let reduced = share.reduced {
            let pyramidBytes = share.tileBytes + Int64(share.tileCount) * 2048
                + reduced.estimatedBytes(bytesPerPixel: RenderPlan.bytesPerPixel(quality: zoomSettings.quality, subsampling: subsampling))
            // Each container holds every tile (IIIF's in three folders of their own); the folder
            // and the archive the viewer's previews.
            for (path, perTile) in [(zoomPath, Int64(0)), (archivePath, Int64(0)), (iiif?.path, Int64(3 * 4096))] {
                guard let path else { continue }
                needs[parentDirectory(of: path), default: 0] += pyramidBytes + Int64(share.tileCount) * perTile
                    + (path == iiif?.path ? 0 : previewBytes + Int64(previewPhotos.count) * 4096 + cellsBytes)
            }
        }
        // A TIFF: the top page once, the smaller pages twice (spooled beside it, then copied in),
        // the pages the join builds as a render estimates them, the directories.
        if let share = tiffShare, let path = tiffPath {
            // (A TIFF of one page builds none.)
            let built = share.reduced.map {
                PyramidTIFFGeometry(width: $0.width, height: $0.height, tileSize: $0.tileSize)
                    .estimatedBytes(bytesPerPixel: RenderPlan.bytesPerPixel(quality: 100, subsampling: subsampling))
            } ?? 0
            needs[parentDirectory(of: path), default: 0] += share.topTileBytes + 2 * (share.tileBytes - share.topTileBytes + built)
                + Int64(share.tileCount) * 24
        }
        if let manifest { needs[parentDirectory(of: manifest.path), default: 0] += manifest.diskBytes }
        for (folder, bytes) in needs {
            _ = StaleTemporaries.remove(in: folder)
            let free = try freeDiskBytes(folder)
            guard free >= bytes else { throw .insufficientDiskSpace(directory: folder, neededBytes: bytes, freeBytes: free) }
        }
    }

    /// Room for what one part adds to the outputs (a join that waits cannot add up the rest).
    func checkDiskSpace(for part: PartReader) throws(TesseraError) {
        var needs: [String: Int64] = [:]
        for record in part.records {
            switch record.kind {
            case .jpegHeader, .jpegSegment:
                if let path = summary.jpegPath { needs[parentDirectory(of: path), default: 0] += Int64(record.length) + 2 }
            case .tile, .reducedRows:
                for path in [zoomPath, archivePath, iiif?.path] {
                    if let path { needs[parentDirectory(of: path), default: 0] += Int64(record.length) + 2048 }
                }
            case .tiffTile, .tiffReducedRows:
                if let path = tiffPath { needs[parentDirectory(of: path), default: 0] += 2 * Int64(record.length) + 24 }
            case .preview:
                for path in [zoomPath, archivePath] {
                    if let path { needs[parentDirectory(of: path), default: 0] += Int64(record.length) + 4096 }
                }
            case .cellsScript:
                for path in [zoomPath, archivePath] {
                    if let path { needs[parentDirectory(of: path), default: 0] += Int64(record.length) }
                }
            case .manifestPiece, .manifestNote:
                if let path = manifest?.path { needs[parentDirectory(of: path), default: 0] += Int64(record.length) + 16 }
            }
        }
        for (folder, bytes) in needs {
            let free = try freeDiskBytes(folder)
            guard free >= bytes + (1 << 20) else { throw .insufficientDiskSpace(directory: folder, neededBytes: bytes + (1 << 20), freeBytes: free) }
        }
    }

    /// Copies a checked part into the outputs (begun at the first part).
    mutating func write(_ part: PartReader, threads: Int?, cancellation: RenderCancellation?) throws(TesseraError) {
        if part.header["shard"] == "1" { firstPart = part }
        if let path = summary.jpegPath {
            if jpegOutput == nil {
                _ = StaleTemporaries.remove(in: parentDirectory(of: path))
                jpegOutput = try AtomicOutputFile(destination: path)
            }
            let output = jpegOutput!
            for record in part.records where record.kind == .jpegHeader || record.kind == .jpegSegment {
                guard record.kind == .jpegSegment else {
                    try copy(part, record, to: output)
                    continue
                }
                try copySegment(part, record, to: output)
                let marker = RestartMarkerJPEGSink.trailer(afterStripe: writtenStripes, of: stripeCount)
                try marker.withUnsafeBytes { raw in Result { () throws(TesseraError) in try output.append(raw) } }.get()
                writtenStripes += 1
            }
        }
        if writesPyramid, let share = zoomShare { try writePyramid(part, share: share, threads: threads) }
        if let share = tiffShare, tiffPath != nil { try writeTIFF(part, share: share, threads: threads) }
        if cancellation?.isCancelled == true { throw .cancelled }
    }

    /// Copies a part's pyramid tiles into the pyramid's containers (begun at the first part),
    /// and feeds its reduced rows to the levels below.
    private mutating func writePyramid(_ part: PartReader, share: PyramidShare, threads: Int?) throws(TesseraError) {
        guard let lowest = share.lowest, let reduced = share.reduced else {
            // A part before any band (a join that waits takes the parts as they come, and a
            // shard's band may be empty): its previews are written once the pyramid is begun.
            let previews = part.records.filter { $0.kind == .preview }
            if !previews.isEmpty { previewsWaiting.append((part.path, part.name, part.identity, previews)) }
            return
        }
        if zoomOutput == nil {
            for path in [zoomPath, archivePath, iiif?.path] {
                if let path { _ = StaleTemporaries.remove(in: parentDirectory(of: path)) }
            }
            guard let cellsPart = firstPart else { throw bad("part 1 was not joined first") }
            let output = try DeepZoomOutput(
                destination: zoomPath, archive: archivePath, iiif: iiif, geometry: share.geometry, settings: zoomSettings,
                subsampling: subsampling, labels: nil, threads: threads ?? onlineCoreCount(), writerGeometry: reduced,
                cells: { write throws(TesseraError) in
                    // Part 1's pieces of cells.js, in order (for the folder, and for the
                    // archive when the page reads it).
                    let part = cellsPart
                    // (In pieces: a piece's length is the part's word, not a size to allocate.)
                    var buffer = [UInt8](repeating: 0, count: 1 << 20)
                    for record in part.records where record.kind == .cellsScript {
                        try part.copy(record, using: &buffer) { (piece) throws(TesseraError) in try write(piece) }
                    }
                })
            zoomOutput = output
            if zoomPath != nil {
                for level in lowest...share.geometry.maxLevel { try makeDirectory(output.writer.filesDirectory + "/\(level)") }
            }
        }
        let output = zoomOutput!
        for waiting in previewsWaiting { try copyWaitingPreviews(waiting, into: output) }
        previewsWaiting = []
        try copyTilesAndPreviews(of: part, into: output, share: share)
        try share.feedReducedRows(of: part, to: output.writer)
    }

    /// Copies the previews of a part joined before the pyramid began: the part is opened again
    /// and must be the same file with the same previews, each matching its checksum as read.
    private mutating func copyWaitingPreviews(_ waiting: (path: String, name: String, identity: OutputDestination.Identity,
                                                          previews: [PartRecord]),
                                              into output: DeepZoomOutput) throws(TesseraError) {
        let changed = bad("\(waiting.name) changed while the join waited for the parts after it: run its shard again")
        let part = try PartReader(path: waiting.path, directory: directory,
                                  indexBudget: IndexBudget(budgetBytes: memoryBytes, fraction: 4, heldBytes: 0))
        guard part.identity == waiting.identity, part.records.filter({ $0.kind == .preview }) == waiting.previews else { throw changed }
        for record in waiting.previews {
            try part.read(record, into: &buffer)
            guard buffer.withUnsafeBytes({ CRC32C.checksum($0) }) == record.checksum else { throw changed }
            try checkPreviewBytes(record, of: part)
            try buffer.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in try output.addPreview(index: Int(record.a), bytes: raw) }
            }.get()
        }
    }

    /// The preview in `buffer` (`record`'s) is a JPEG no larger than the previews' side.
    private func checkPreviewBytes(_ record: PartRecord, of part: PartReader) throws(TesseraError) {
        guard let frame = JPEGFrame(buffer), frame.isBaseline, frame.endsWhole, frame.sampling.count == 3,
              max(frame.width, frame.height) <= previewSide, min(frame.width, frame.height) >= 1 else {
            throw bad("\(part.name) holds a preview of photo \(record.a) that is not a JPEG of at most \(previewSide) px: "
                      + "it is damaged or not a part")
        }
    }

    /// Copies a part's pyramid tiles and previews (each checked) into the pyramid's containers.
    private mutating func copyTilesAndPreviews(of part: PartReader, into output: DeepZoomOutput, share: PyramidShare) throws(TesseraError) {
        for record in part.records where record.kind == .tile || record.kind == .preview {
            try part.read(record, into: &buffer)
            if record.kind == .tile {
                try checkTile(record, of: part, share: share)
            } else {
                try checkPreviewBytes(record, of: part)
            }
            try buffer.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in
                    if record.kind == .preview {
                        try output.addPreview(index: Int(record.a), bytes: raw)
                    } else {
                        try output.writer.writeTile(level: Int(record.a), column: Int(record.b), row: Int(record.c), bytes: raw)
                    }
                }
            }.get()
        }
    }

    /// Copies a part's TIFF tiles into the TIFF (begun at the first part: page 0's tiles into
    /// the file, the others into its spool), and feeds its reduced rows to a writer of the pages
    /// below the bands (made as a render's TIFF makes its pages: PyramidTIFFOutput.swift).
    private mutating func writeTIFF(_ part: PartReader, share: PyramidShare, threads: Int?) throws(TesseraError) {
        guard let path = tiffPath, share.lowest != nil else { return }
        let pages = PyramidTIFFGeometry(width: summary.width, height: summary.height, tileSize: tiffSettings.tileSize)
        if tiffOutput == nil {
            let folder = parentDirectory(of: path)
            _ = StaleTemporaries.remove(in: folder)
            let file = try PyramidTIFFFile(destination: path, geometry: pages, subsampling: subsampling, temporaryDirectory: folder)
            do throws(TesseraError) {
                let writer = try share.reduced.map { reduced throws(TesseraError) in try DeepZoomWriter(
                    geometry: reduced, quality: tiffSettings.quality, subsampling: subsampling, filesDirectory: path,
                    threads: threads ?? onlineCoreCount(),
                    destination: .handler { level, column, row, bytes throws(TesseraError) in
                        try file.add(page: pages.page(ofLevel: level), tile: row * pages.levels.levels[level].columns + column, bytes: bytes)
                    },
                    window: .levels(from: pages.lowestLevel, of: reduced), padEdgeTiles: true) }
                tiffOutput = (file, writer)
            } catch {
                file.discard()
                throw error
            }
        }
        let file = tiffOutput!.file
        for record in part.records where record.kind == .tiffTile {
            let level = Int(record.a)
            try part.read(record, into: &buffer)
            try checkTile(record, of: part, share: share)
            try buffer.withUnsafeBytes { raw in
                Result { () throws(TesseraError) in
                    try file.add(page: pages.page(ofLevel: level), tile: Int(record.c) * pages.levels.levels[level].columns + Int(record.b),
                                 bytes: raw)
                }
            }.get()
        }
        if let writer = tiffOutput!.writer { try share.feedReducedRows(of: part, to: writer) }
    }

    /// The tile in `buffer` (`record`'s) is a JPEG of that tile as the render encodes it.
    private func checkTile(_ record: PartRecord, of part: PartReader, share: PyramidShare) throws(TesseraError) {
        guard share.isTile(buffer, of: record, subsampling: subsampling) else {
            throw bad("\(part.name) holds \(PartReader.describe(record)), which is not a JPEG of that tile's size and "
                      + "\(subsampling.rawValue) sampling: it is damaged or not a part")
        }
    }

    /// A stripe's entropy-coded segment, checked as it is copied as a tile's is (JPEGFrame): every
    /// 0xFF stuffed with a 0x00, none last, so no marker of the part's comes between the join's
    /// restart markers (a second frame, an end of image, data after it).
    private mutating func copySegment(_ part: PartReader, _ record: PartRecord, to output: AtomicOutputFile) throws(TesseraError) {
        if buffer.count < 4 << 20 { buffer = [UInt8](repeating: 0, count: 4 << 20) }
        var scan = EntropyCodedData(restarts: false)
        let directory = self.directory
        try part.copy(record, using: &buffer) { (piece) throws(TesseraError) in
            if let byte = scan.take(piece) {
                throw .unusableParts(directory: directory, reason: "\(part.name)'s segment of stripe \(record.a) holds a marker "
                                     + "(0xFF 0x\(String(byte, radix: 16, uppercase: true))) where tessera's encoder writes only entropy-coded data: "
                                     + "it is damaged or not a part")
            }
            try output.append(piece)
        }
        guard !scan.endsOnFF else {
            throw bad("\(part.name)'s segment of stripe \(record.a) ends in 0xFF, which tessera's encoder never writes: it is damaged or not a part")
        }
    }

    private mutating func copy(_ part: PartReader, _ record: PartRecord, to output: AtomicOutputFile) throws(TesseraError) {
        if buffer.count < 4 << 20 { buffer = [UInt8](repeating: 0, count: 4 << 20) }
        try part.copy(record, using: &buffer) { (piece) throws(TesseraError) in try output.append(piece) }
    }

    /// Finishes and commits the outputs, the pyramid first (as a render commits); removes the
    /// shards' shared cells.
    mutating func commit(cancellation: RenderCancellation? = nil) throws(TesseraError) {
        try zoomOutput?.finish()
        try tiffOutput?.writer?.finish()
        try tiffOutput?.file.finish()
        // As one (OutputCommit): a failure puts back what the outputs before it replaced.
        if manifest != nil, let firstPart { try manifest!.stage(from: firstPart, buffer: &buffer) }
        let folders = [summary.jpegPath, zoomPath, archivePath, iiif?.path, tiffPath, manifest?.path].compactMap { $0 }.map { parentDirectory(of: $0) }
        let manifest = self.manifest
        try OutputCommit.all(locking: folders, cancellation: cancellation) { commit throws(TesseraError) in
            try manifest?.commit(in: commit)
            try zoomOutput?.commit(in: commit)
            try tiffOutput?.file.commit(in: commit)
            try jpegOutput?.commit(in: commit)
        }
        if let zoomOutput {
            summary.deepZoomTiles = zoomOutput.tilesWritten
            summary.deepZoomBytes = zoomOutput.bytesWritten
            summary.archiveBytes = zoomOutput.archive?.bytesWritten ?? 0
            summary.previews = zoomOutput.previewCounts.made
        }
        if let tiffOutput {
            summary.tiffBytes = tiffOutput.file.bytesWritten
            summary.tiffPages = tiffOutput.file.geometry.pageCount
        }
        if let jpegOutput {
            summary.jpegBytes = jpegOutput.bytesWritten
        }
        _ = removeTree(SharedCells.directory(shardDirectory: directory, fingerprint: fingerprint))
    }

    func discard() {
        manifest?.discard()
        zoomOutput?.discard()
        tiffOutput?.writer?.abandon()
        tiffOutput?.file.discard()
        jpegOutput?.discard()
    }
}

extension ShardJoin {
    /// Opens the part at `path` and checks it as a join checks its first part: its shape, the
    /// header's description of the render, its records against that render, and every
    /// checksum. Returns the number of records. Writes nothing (the fuzzer's part entry point).
    public static func verifyPart(at path: String) throws(TesseraError) -> Int {
        let directory = parentDirectory(of: path)
        let part = try PartReader(path: path, directory: directory, indexBudget: IndexBudget(budgetBytes: 64 << 20, fraction: 2, heldBytes: 0))
        var joiner = try Joiner(directory: directory, first: (1, part), memoryBytes: 64 << 20)
        joiner.heldIndexBytes = part.indexBytes
        try joiner.check(part)
        try joiner.verify(part)
        return part.records.count
    }
}
