// JoinedManifest.swift — a sharded render's manifest, written by the join.
//
// No shard knows what the others drew as placeholders, so none can write the manifest: part 1
// holds it whole but for a JSON manifest's last lines (`manifestPiece` records), and every part
// the photos it drew as placeholders or only in part (`manifestNote` records). The join checks
// them with the rest of the part, writes part 1's pieces and then those lines from every part's
// notes, each photo once, by path (as one process lists them), and commits the manifest
// with the other outputs (ShardJoin.swift).
//
// The pieces come from a part, so they are checked as text (UTF-8, no NUL, no longer than the
// writer cuts them) but not as the render's cells: the join has no layout to compare them with.
// The checksums find a damaged part, not one written on purpose; what a part can do is write a
// text file at the manifest's path, which the join's destination checks bound as for the JPEG.

/// The manifest a join writes, from its parts.
struct JoinedManifest {
    /// The path part 1 names, and its format.
    let named: String
    let format: RenderManifest.Format
    /// Where the join writes it (the path given to the join, or `named`).
    var path: String
    /// Part 1's pieces: how many, and their bytes.
    private(set) var pieces = 0
    private(set) var bodyBytes: Int64 = 0
    /// Every part's notes so far, each photo once per list, and what they hold in memory.
    private var lists: [[(path: String, reason: String)]] = [[], []]
    private var seen: [Set<String>] = [[], []]
    private(set) var heldBytes = 0
    private(set) var noteBytes: Int64 = 0
    private var output: AtomicOutputFile?

    /// The manifest part 1's `header` names (nil: none).
    init?(header: PartHeader, name: String, bad: (String) -> TesseraError) throws(TesseraError) {
        guard let named = header["manifest"] else {
            guard header["manifest-format"] == nil else { throw bad("\(name) gives a manifest's format but no manifest") }
            return nil
        }
        switch header["manifest-format"] {
        case "json": format = .json
        case "csv": format = .csv
        default: throw bad("\(name) names a manifest without a format tessera writes: it is damaged or not a part")
        }
        guard RenderManifest.format(for: named) == format else {
            throw bad("\(name) names a \(format == .json ? "JSON" : "CSV") manifest at a path that says otherwise: it is damaged or not a part")
        }
        self.named = named
        path = named
    }

    /// Checks `part`'s manifest records: a note (JSON only) is a path, a NUL and a reason, each
    /// UTF-8; the pieces are part 1's only, in order, text, each no longer than the writer makes
    /// them (read through once here). Holds the notes, each photo once.
    /// `mostHeldBytes`: what the notes may hold in all (a part forged with thousands of 64 KiB
    /// notes grew the join past 200 MB before its budget was compared).
    mutating func check(_ part: PartReader, first: Bool, buffer: inout [UInt8], mostHeldBytes: Int,
                        bad: (String) -> TesseraError) throws(TesseraError) {
        let name = ShardJoin.name(part)
        // What this part's notes would hold at the most, for the budget a refusal names.
        let most = heldBytes + part.records.reduce(0) { $0 + ($1.kind == .manifestNote ? 2 * Int(min($1.length, 1 << 20)) + 96 : 0) }
        for record in part.records {
            switch record.kind {
            case .manifestNote:
                guard format == .json, record.a <= 1, record.length <= UInt64(PartFormat.maxManifestNoteBytes) else {
                    throw bad("\(name) holds a manifest note no render writes: it is damaged or not a part")
                }
                try part.read(record, into: &buffer)
                let fields = buffer.split(separator: 0, omittingEmptySubsequences: false)
                guard fields.count == 2, !fields[0].isEmpty, let path = String(validating: fields[0], as: UTF8.self),
                      let reason = String(validating: fields[1], as: UTF8.self) else {
                    throw bad("\(name) holds a manifest note that is not a photo's path and a reason: it is damaged or not a part")
                }
                let list = Int(record.a)
                noteBytes += Int64(record.length) + 16
                if seen[list].insert(path).inserted {
                    lists[list].append((path, reason))
                    heldBytes += 2 * path.utf8.count + reason.utf8.count + 96
                    guard heldBytes <= mostHeldBytes else {
                        throw .partIndexTooLarge(directory: part.directory, reason: "\(name) holds more photos drawn as placeholders or in "
                                                 + "part than the manifest's quarter of the join's budget holds (\(formatBytes(Int64(mostHeldBytes))))",
                                                 neededBytes: 4 * most + (16 << 20))
                    }
                }
            case .manifestPiece:
                guard first, Int(record.a) == pieces, record.length <= UInt64(PartFormat.maxManifestPieceBytes) else {
                    throw bad("\(name) holds \(PartReader.describe(record)) of \(record.length) bytes where "
                              + (first ? "piece \(pieces) of at most \(PartFormat.maxManifestPieceBytes)" : "none (only part 1 holds the manifest)")
                              + " was due: it is damaged or not a part")
                }
                try part.read(record, into: &buffer)
                guard !buffer.contains(0), String(validating: buffer, as: UTF8.self) != nil else {
                    throw bad("\(name)'s \(PartReader.describe(record)) is not text: it is damaged or not a part")
                }
                pieces += 1
                bodyBytes += Int64(record.length)
            default: continue
            }
        }
        if first && pieces == 0 { throw bad("\(name) names a manifest but holds none of it: it is damaged or not a part") }
    }

    /// The bytes the manifest takes on disk, at the most.
    var diskBytes: Int64 { bodyBytes + noteBytes + 4096 }

    /// Writes the manifest under a hidden name beside `path`: part 1's pieces, then the last
    /// lines from every part's notes.
    mutating func stage(from first: PartReader, buffer: inout [UInt8]) throws(TesseraError) {
        let file = try AtomicOutputFile(destination: path)
        output = file
        if buffer.count < 1 << 20 { buffer = [UInt8](repeating: 0, count: 1 << 20) }
        for record in first.records where record.kind == .manifestPiece {
            try first.copy(record, using: &buffer) { (bytes) throws(TesseraError) in try file.append(bytes) }
        }
        if format == .json {
            let tail = RenderManifest.tail(placeholders: lists[0], partial: lists[1])
            try Array(tail.utf8).withUnsafeBytes { raw in Result { () throws(TesseraError) in try file.append(raw) } }.get()
        }
    }

    func commit(in commit: OutputCommit) throws(TesseraError) { try output?.commit(in: commit) }

    func discard() { output?.discard() }
}
