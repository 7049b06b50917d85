// ShardJoin.swift — `tessera join DIR`: the outputs of a sharded render, from its parts.
//
// Everything is checked before anything is written: the parts present are all complete part
// files of one render (one fingerprint, one N), shards 1...N each exactly once under their own
// names, every JPEG stripe, pyramid tile and reduced row exactly once, and the disk has room.
// Then:
//
// - the JPEG: the header (from the part holding stripe 0), each stripe's segment in order with
//   RST0...RST7 cycling between them and EOI after the last — the bytes of the single-process
//   parallel encoder. A streaming copy: I/O only, a buffer of a few MiB.
// - the pyramid: staged as a render stages it (DeepZoomOutput.swift), the shards' tiles copied
//   in, levels 0...lowest-1 built from the bands' reduced rows in order (DeepZoomWriter.swift),
//   the viewer and descriptor written, then committed.
//
// Both appear atomically, the pyramid first (as in a render); on any failure neither does and
// what stood at their names is untouched. The parts are left in place.
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
    public var seconds: Double = 0
    public var peakResidentBytes: Int64 = 0
}

public enum ShardJoin {
    /// Joins the parts in `directory` into the outputs named when the shards ran. `threads`
    /// encode the pyramid's lowest levels (nil: the online cores).
    public static func join(directory: String, threads: Int? = nil,
                            cancellation: RenderCancellation? = nil) throws(TesseraError) -> JoinSummary {
        let started = monotonicSeconds()
        let parts = try openParts(in: directory)
        let first = parts[0].header
        func number(_ key: String, in header: PartHeader = first) throws(TesseraError) -> Int {
            guard let text = header[key], let value = Int(text) else {
                throw .unusableParts(directory: directory, reason: "a part has no valid \(key)")
            }
            return value
        }
        func numbers(_ key: String, in header: PartHeader) throws(TesseraError) -> (Int, Int) {
            let fields = (header[key] ?? "").split(separator: " ").compactMap { Int($0) }
            guard fields.count == 2, fields[0] >= 0, fields[1] >= 0 else {
                throw .unusableParts(directory: directory, reason: "a part has no valid \(key)")
            }
            return (fields[0], fields[1])
        }
        func pair(_ key: String, in header: PartHeader) throws(TesseraError) -> Range<Int> {
            let (low, high) = try numbers(key, in: header)
            guard low <= high else { throw .unusableParts(directory: directory, reason: "a part has no valid \(key)") }
            return low..<high
        }
        let width = try number("width"), height = try number("height")
        var summary = JoinSummary(shards: parts.count, width: width, height: height)
        summary.jpegPath = first["jpeg"]
        summary.deepZoomPath = first["dzi"]
        func bad(_ why: String) -> TesseraError { .unusableParts(directory: directory, reason: why) }

        // The JPEG's stripes: each exactly once, in the part whose band holds it.
        var segments: [(part: PartReader, record: PartRecord)?] = []
        var jpegHeader: (part: PartReader, record: PartRecord)?
        var jpegBytes: Int64 = 0
        if summary.jpegPath != nil {
            let stripeCount = try number("stripe-count")
            guard stripeCount > 0, stripeCount <= height else { throw bad("the parts give \(stripeCount) stripes") }
            segments = Array(repeating: nil, count: stripeCount)
            for part in parts {
                let owned = try pair("jpeg-stripes", in: part.header)
                for record in part.records where record.kind == .jpegSegment || record.kind == .jpegHeader {
                    if record.kind == .jpegHeader {
                        guard jpegHeader == nil else { throw bad("two parts hold the JPEG's header") }
                        jpegHeader = (part, record)
                    } else {
                        let stripe = Int(record.a)
                        guard owned.contains(stripe), stripe < stripeCount, segments[stripe] == nil else {
                            throw bad("\(name(part)) holds stripe \(stripe), which is not its own or is held twice")
                        }
                        segments[stripe] = (part, record)
                    }
                    jpegBytes += Int64(record.length) + 2
                }
            }
            if let missing = segments.firstIndex(where: { $0 == nil }) {
                throw bad("no part holds the JPEG's stripe \(missing) of \(stripeCount): a shard did not finish; run it again")
            }
            guard jpegHeader != nil else { throw bad("no part holds the JPEG's header") }
        }

        // The pyramid: its settings, the tiles the shards wrote, the reduced rows in order.
        var zoom: (path: String, geometry: DeepZoomGeometry, reduced: DeepZoomGeometry, settings: DeepZoomSettings,
                   subsampling: ChromaSubsampling, lowest: Int)?
        var reducedRows: [(part: PartReader, record: PartRecord)] = []
        var tileBytes: Int64 = 0, tileCount = 0
        if let path = summary.deepZoomPath {
            var settings = DeepZoomSettings()
            settings.tileSize = try number("dz-tile-size")
            settings.overlap = try number("dz-overlap")
            settings.quality = try number("dz-quality")
            settings.viewer = first["dz-viewer"] == "1"
            settings.labels = ViewerLabels(rawValue: first["dz-labels"] ?? "") ?? .name
            settings.title = first["dz-title"]
            try settings.validate()
            guard let subsampling = ChromaSubsampling(rawValue: first["subsampling"] ?? "") else { throw bad("a part has no valid subsampling") }
            let geometry = DeepZoomGeometry(width: width, height: height, tileSize: settings.tileSize, overlap: settings.overlap)
            guard let withBand = parts.first(where: { $0.header["dz-lowest"] != nil }) else { throw bad("no part holds a band of the pyramid") }
            let lowest = try number("dz-lowest", in: withBand.header)
            let size = try numbers("dz-reduced-size", in: withBand.header)
            guard (1...geometry.maxLevel).contains(lowest), size.0 > 0, size.1 > 0 else { throw bad("a part's pyramid band is not valid") }
            let reduced = DeepZoomGeometry(width: size.0, height: size.1, tileSize: settings.tileSize, overlap: settings.overlap)
            guard reduced.maxLevel == lowest - 1, reduced.width == geometry.levels[lowest - 1].width,
                  reduced.height == geometry.levels[lowest - 1].height else { throw bad("a part's reduced picture does not fit the pyramid") }
            var seen = Set<UInt64>()
            var nextRow = 0
            for part in parts {
                if part.header["dz-lowest"] != nil {
                    guard try number("dz-lowest", in: part.header) == lowest else { throw bad("\(name(part)) splits the pyramid at another level") }
                }
                for record in part.records {
                    switch record.kind {
                    case .tile:
                        let level = Int(record.a), column = Int(record.b), row = Int(record.c)
                        guard level >= lowest, level <= geometry.maxLevel, column < geometry.levels[level].columns,
                              row < geometry.levels[level].rows,
                              seen.insert(UInt64(level) << 56 | UInt64(column) << 28 | UInt64(row)).inserted else {
                            throw bad("\(name(part)) holds tile \(level)/\(column)_\(row), which is out of the pyramid or held twice")
                        }
                        tileBytes += Int64(record.length)
                        tileCount += 1
                    case .reducedRows:
                        guard Int(record.a) == nextRow, record.b == 1, Int(record.length) == reduced.width * 3 else {
                            throw bad("\(name(part))'s reduced rows do not follow the band before (row \(record.a), expected \(nextRow))")
                        }
                        nextRow += 1
                        reducedRows.append((part, record))
                    default: break
                    }
                }
            }
            let expected = geometry.levels[lowest...].reduce(0) { $0 + $1.columns * $1.rows }
            guard tileCount == expected else { throw bad("the parts hold \(tileCount) of the pyramid's \(expected) tiles of levels \(lowest)...\(geometry.maxLevel): a shard did not finish; run it again") }
            guard nextRow == reduced.height else { throw bad("the parts hold \(nextRow) of \(reduced.height) reduced rows") }
            if settings.viewer && !parts[0].records.contains(where: { $0.kind == .cellsScript }) {
                throw bad("\(name(parts[0])) holds no viewer cells")
            }
            zoom = (path, geometry, reduced, settings, subsampling, lowest)
        }

        // Room for the outputs, before any is begun (what dead runs left goes first).
        var needs: [String: Int64] = [:]
        if let path = summary.jpegPath { needs[parentDirectory(of: path), default: 0] += jpegBytes + (1 << 20) }
        if let zoom {
            needs[parentDirectory(of: zoom.path), default: 0] += tileBytes + Int64(tileCount) * 2048
                + zoom.reduced.estimatedBytes(bytesPerPixel: RenderPlan.bytesPerPixel(quality: zoom.settings.quality, subsampling: zoom.subsampling))
        }
        for (folder, bytes) in needs {
            _ = StaleTemporaries.remove(in: folder)
            let free = try freeDiskBytes(folder)
            guard free >= bytes else { throw .insufficientDiskSpace(directory: folder, neededBytes: bytes, freeBytes: free) }
        }

        var zoomOutput: DeepZoomOutput?
        var jpegOutput: AtomicOutputFile?
        do throws(TesseraError) {
            if let zoom {
                let cellsPart = parts[0]
                let output = try DeepZoomOutput(
                    destination: zoom.path, geometry: zoom.geometry, settings: zoom.settings, subsampling: zoom.subsampling,
                    labels: nil, threads: threads ?? onlineCoreCount(), writerGeometry: zoom.reduced,
                    cells: { path throws(TesseraError) in
                        let file = try FileDescriptor.open(path, flags: O_WRONLY | O_CREAT | O_EXCL)
                        defer { file.close() }
                        var buffer: [UInt8] = []
                        for record in cellsPart.records where record.kind == .cellsScript {
                            try cellsPart.read(record, into: &buffer)
                            try buffer.withUnsafeBytes { raw in Result { () throws(TesseraError) in try file.writeAll(raw) } }.get()
                        }
                    })
                zoomOutput = output
                for level in zoom.lowest...zoom.geometry.maxLevel { try makeDirectory(output.writer.filesDirectory + "/\(level)") }
                var buffer: [UInt8] = []
                for part in parts {
                    for record in part.records where record.kind == .tile {
                        try part.read(record, into: &buffer)
                        try buffer.withUnsafeBytes { raw in
                            Result { () throws(TesseraError) in
                                try output.writer.writeTile(level: Int(record.a), column: Int(record.b), row: Int(record.c), bytes: raw)
                            }
                        }.get()
                    }
                    if cancellation?.isCancelled == true { throw .cancelled }
                }
                // The levels below: the reduced rows in order, a batch of rows at a time.
                let rowBytes = zoom.reduced.width * 3
                let batchRows = max(1, min(64, (4 << 20) / rowBytes))
                var rows = [UInt8](repeating: 0, count: batchRows * rowBytes)
                var index = 0
                while index < reducedRows.count {
                    let count = min(batchRows, reducedRows.count - index)
                    for i in 0..<count {
                        let (part, record) = reducedRows[index + i]
                        try rows.withUnsafeMutableBytes { raw in
                            Result { () throws(TesseraError) in
                                try part.read(record, from: 0, count: rowBytes,
                                              into: UnsafeMutableRawBufferPointer(rebasing: raw[(i * rowBytes)...]))
                            }
                        }.get()
                    }
                    try rows.withUnsafeBytes { raw in
                        Result { () throws(TesseraError) in try output.writer.append(rows: raw.baseAddress!, stride: rowBytes, count: count) }
                    }.get()
                    index += count
                }
                try output.finish()
            }
            if let path = summary.jpegPath, let jpegHeader {
                let output = try AtomicOutputFile(destination: path)
                jpegOutput = output
                var buffer = [UInt8](repeating: 0, count: 4 << 20)
                func copy(_ part: PartReader, _ record: PartRecord) throws(TesseraError) {
                    var done = 0
                    while done < Int(record.length) {
                        let count = min(buffer.count, Int(record.length) - done)
                        try buffer.withUnsafeMutableBytes { raw in
                            Result { () throws(TesseraError) in
                                try part.read(record, from: done, count: count, into: raw)
                                try output.append(UnsafeRawBufferPointer(rebasing: raw[0..<count]))
                            }
                        }.get()
                        done += count
                    }
                }
                try copy(jpegHeader.part, jpegHeader.record)
                for (stripe, segment) in segments.enumerated() {
                    try copy(segment!.part, segment!.record)
                    let marker: [UInt8] = stripe + 1 < segments.count ? [0xFF, 0xD0 + UInt8(stripe % 8)] : [0xFF, 0xD9]
                    try marker.withUnsafeBytes { raw in Result { () throws(TesseraError) in try output.append(raw) } }.get()
                    if stripe % 64 == 63, cancellation?.isCancelled == true { throw .cancelled }
                }
            }
            // The pyramid first, as a render commits; a failed commit leaves neither.
            if let zoomOutput {
                try zoomOutput.commit()
                summary.deepZoomTiles = zoomOutput.tilesWritten
                summary.deepZoomBytes = zoomOutput.bytesWritten
            }
            if let jpegOutput {
                try jpegOutput.commit()
                summary.jpegBytes = jpegOutput.bytesWritten
            }
        } catch {
            zoomOutput?.discard()
            jpegOutput?.discard()
            throw error
        }
        summary.seconds = monotonicSeconds() - started
        summary.peakResidentBytes = peakResidentBytes()
        return summary
    }

    private static func name(_ part: PartReader) -> String { part.path.split(separator: "/").last.map(String.init) ?? part.path }

    /// The parts in `directory`, ordered by shard, after checking that they are shards 1...N of
    /// one render, each once, under their own names.
    static func openParts(in directory: String) throws(TesseraError) -> [PartReader] {
        func bad(_ why: String) -> TesseraError { .unusableParts(directory: directory, reason: why) }
        guard case .success(let info) = fileStatus(directory), (info.st_mode & S_IFMT) == S_IFDIR else {
            throw bad("there is no such folder (give the --shard-dir the shards wrote to)")
        }
        let names = try listDirectory(directory).filter { !$0.hasPrefix(".") && $0.hasSuffix(ShardSpec.partExtension) }.sorted()
        guard !names.isEmpty else {
            throw bad("it holds no part files (*\(ShardSpec.partExtension)): run the shards with --shard K/N --shard-dir \(directory) first")
        }
        var parts: [PartReader] = []
        for name in names { parts.append(try PartReader(path: directory + "/" + name, directory: directory)) }
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
