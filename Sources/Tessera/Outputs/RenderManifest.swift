// RenderManifest.swift — where every photo went: one row per cell; in JSON, also what the run
// left out (skipped files, placeholders, photos drawn in part), so a program reading it knows
// what is missing.

/// What a run left out, for a JSON manifest: every photo skipped (the first ones held, all
/// counted), every photo drawn as a placeholder and every photo drawn only in part (a file
/// that ends early), each with the reason in a person's words.
public struct ManifestNotes: Sendable {
    public var skipped: [(path: String, reason: String)]
    public var skippedCount: Int
    public var placeholders: [(path: String, reason: String)]
    public var partial: [(path: String, reason: String)]
    /// The JSON ends after `skipped`: the placeholders and the photos drawn in part are a
    /// sharded render's join's to add, from every part (`RenderManifest.tail`).
    var tailInJoin = false

    public init(skipped: [(path: String, reason: String)] = [], skippedCount: Int? = nil,
                placeholders: [(path: String, reason: String)] = [], partial: [(path: String, reason: String)] = []) {
        self.skipped = skipped
        self.skippedCount = max(skippedCount ?? skipped.count, skipped.count)
        self.placeholders = placeholders
        self.partial = partial
    }
}

public enum RenderManifest {
    public enum Format: Sendable { case csv, json }

    /// JSON when `path` ends in .json, else CSV.
    public static func format(for path: String) -> Format {
        path.lowercased().hasSuffix(".json") ? .json : .csv
    }

    /// The manifest text: CSV `column,row,photo,cost` (cost: the cell's mean Oklab error; an
    /// adaptive mosaic's adds `x,y,width,height`, the cell's rectangle), or a
    /// JSON object whose `cells` are objects with the same fields, beside `notes`.
    public static func text(match: MosaicMatch, photoPaths: [String], format: Format, notes: ManifestNotes = ManifestNotes()) -> String {
        var text = ""
        emit(match: match, path: { photoPaths[$0] }, format: format, notes: notes) { text += $0 }
        return text
    }

    /// A grid's manifest: CSV `column,row,photo`, or JSON objects with those fields (empty
    /// cells left out).
    public static func text(layout: CellLayout, photoPaths: [String], format: Format, notes: ManifestNotes = ManifestNotes()) -> String {
        var text = ""
        emit(layout: layout, path: { photoPaths[$0] }, format: format, notes: notes) { text += $0 }
        return text
    }

    /// Writes a grid's manifest to `path` atomically.
    public static func write(layout: CellLayout, photoPaths: [String], to path: String) throws(TesseraError) {
        try write(layout: layout, photos: PhotoTable(photoPaths.map { Photo(path: $0, header: placeholderHeader) }), to: path)
    }

    /// Writes the manifest to `path` atomically.
    public static func write(match: MosaicMatch, photoPaths: [String], to path: String) throws(TesseraError) {
        try write(match: match, photos: PhotoTable(photoPaths.map { Photo(path: $0, header: placeholderHeader) }), to: path)
    }

    /// Writes a grid's manifest of `photos` to `path` atomically, a MiB at a time: a million
    /// cells' rows are never one string.
    public static func write(layout: CellLayout, photos: PhotoTable, to path: String, notes: ManifestNotes = ManifestNotes()) throws(TesseraError) {
        try streamed(to: path) { out in emit(layout: layout, path: { photos[$0].path }, format: format(for: path), notes: notes, out) }
    }

    /// Writes a mosaic's manifest of `photos` to `path` atomically, a MiB at a time.
    public static func write(match: MosaicMatch, photos: PhotoTable, to path: String, notes: ManifestNotes = ManifestNotes()) throws(TesseraError) {
        try streamed(to: path) { out in emit(match: match, path: { photos[$0].path }, format: format(for: path), notes: notes, out) }
    }

    /// A grid's or collage's manifest written with the render's outputs and moved into place
    /// with them (StripeRenderer.render(manifest:)): `notes` is given the render's summary, for
    /// what was drawn as a placeholder or only in part.
    public static func withOutputs(layout: CellLayout, photos: PhotoTable, to path: String,
                                   notes: @escaping (RenderSummary) -> ManifestNotes) -> ManifestOutput {
        ManifestOutput(path: path, notes: notes) { notes, out in
            emit(layout: layout, path: { photos[$0].path }, format: format(for: path), notes: notes, out)
        }
    }

    /// A mosaic's manifest written with the render's outputs (as the grid's above).
    public static func withOutputs(match: MosaicMatch, photos: PhotoTable, to path: String,
                                   notes: @escaping (RenderSummary) -> ManifestNotes) -> ManifestOutput {
        ManifestOutput(path: path, notes: notes) { notes, out in
            emit(match: match, path: { photos[$0].path }, format: format(for: path), notes: notes, out)
        }
    }

    private static func emit(match: MosaicMatch, path: (Int) -> String, format: Format, notes: ManifestNotes, _ out: (String) -> Void) {
        // An adaptive mosaic's cells also give their rectangle in pixels (column and row: the
        // top-left corner in smallest cells).
        let frames = match.frames
        out(format == .csv ? "column,row,photo,cost" + (frames != nil ? ",x,y,width,height\n" : "\n") : "{\"cells\": [\n")
        for cell in 0..<match.assignment.count {
            let (column, row) = match.position(of: cell)
            let path = path(Int(match.assignment[cell]))
            let cost = formatDecimal(Double(match.cellErrors[cell]), places: 5)
            switch format {
            case .csv:
                let rectangle = frames.map { ",\($0[cell].x),\($0[cell].y),\($0[cell].width),\($0[cell].height)" } ?? ""
                out("\(column),\(row),\(csvField(path)),\(cost)\(rectangle)\n")
            case .json:
                let rectangle = frames.map { ", \"x\": \($0[cell].x), \"y\": \($0[cell].y), \"width\": \($0[cell].width), \"height\": \($0[cell].height)" } ?? ""
                out("  {\"column\": \(column), \"row\": \(row), \"photo\": \(jsonString(path)), \"cost\": \(cost)\(rectangle)}"
                    + (cell + 1 < match.assignment.count ? ",\n" : "\n"))
            }
        }
        if format == .json { emitNotes(notes, out) }
    }

    private static func emit(layout: CellLayout, path: (Int) -> String, format: Format, notes: ManifestNotes, _ out: (String) -> Void) {
        if layout.framed != nil { return emitFrames(layout: layout, path: path, format: format, notes: notes, out) }
        out(format == .csv ? "column,row,photo\n" : "{\"cells\": [\n")
        var first = true
        for cell in 0..<layout.cellCount {
            let photo = layout.photo(at: cell)
            guard photo >= 0 else { continue }
            let column = cell % layout.columns, row = cell / layout.columns, path = path(photo)
            if format == .csv {
                out("\(column),\(row),\(csvField(path))\n")
            } else {
                out((first ? "" : ",\n") + "  {\"column\": \(column), \"row\": \(row), \"photo\": \(jsonString(path))}")
            }
            first = false
        }
        if format == .json {
            if !first { out("\n") }
            emitNotes(notes, out)
        }
    }

    /// A layout of frames' manifest (a collage): CSV `x,y,width,height,photo`, each cell's
    /// rectangle on the canvas in pixels, or JSON objects with those fields.
    private static func emitFrames(layout: CellLayout, path: (Int) -> String, format: Format, notes: ManifestNotes,
                                   _ out: (String) -> Void) {
        out(format == .csv ? "x,y,width,height,photo\n" : "{\"cells\": [\n")
        var first = true
        for cell in 0..<layout.cellCount {
            let frame = layout.frame(at: cell)
            guard frame.photo >= 0 else { continue }
            let path = path(Int(frame.photo))
            if format == .csv {
                out("\(frame.x),\(frame.y),\(frame.width),\(frame.height),\(csvField(path))\n")
            } else {
                out((first ? "" : ",\n") + "  {\"x\": \(frame.x), \"y\": \(frame.y), \"width\": \(frame.width), "
                    + "\"height\": \(frame.height), \"photo\": \(jsonString(path))}")
            }
            first = false
        }
        if format == .json {
            if !first { out("\n") }
            emitNotes(notes, out)
        }
    }

    /// The JSON manifest's end: its cells' array closed, then what the run left out.
    private static func emitNotes(_ notes: ManifestNotes, _ out: (String) -> Void) {
        out("],\n  \"skipped_count\": \(notes.skippedCount),\n  \"skipped\": \(list(notes.skipped)),\n")
        if !notes.tailInJoin { out(tail(placeholders: notes.placeholders, partial: notes.partial)) }
    }

    /// The JSON manifest's last lines: the photos drawn as placeholders and those drawn in part,
    /// each list in the byte order of the paths. (In the order their decodes ended, two runs of
    /// one render listed them differently, and a sharded render's join otherwise again.)
    static func tail(placeholders: [(path: String, reason: String)], partial: [(path: String, reason: String)]) -> String {
        "  \"placeholders\": \(list(sorted(placeholders))),\n  \"partial\": \(list(sorted(partial)))\n}\n"
    }

    private static func sorted(_ photos: [(path: String, reason: String)]) -> [(path: String, reason: String)] {
        photos.sorted { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
    }

    private static func list(_ photos: [(path: String, reason: String)]) -> String {
        photos.isEmpty ? "[]" : "[\n" + photos.map { "    {\"path\": \(jsonString($0.path)), \"reason\": \(jsonString($0.reason))}" }
            .joined(separator: ",\n") + "\n  ]"
    }

    /// Collects what `body` emits and appends it to a new file at `path` a MiB at a time,
    /// committed when complete.
    private static func streamed(to path: String, _ body: ((String) -> Void) -> Void) throws(TesseraError) {
        try staged(to: path, body).commit()
    }

    /// The same, finished but not yet in place: the caller commits it (with a render's outputs,
    /// OutputCommit) or discards it. Discarded here if writing fails.
    static func staged(to path: String, _ body: ((String) -> Void) -> Void) throws(TesseraError) -> AtomicOutputFile {
        let output = try AtomicOutputFile(destination: path)
        var pending = ""
        var failure: TesseraError?
        func flush() {
            guard failure == nil, !pending.isEmpty else { return }
            do throws(TesseraError) {
                try Array(pending.utf8).withUnsafeBytes { raw in Result { () throws(TesseraError) in try output.append(raw) } }.get()
            } catch { failure = error }
            pending = ""
        }
        body { piece in
            pending += piece
            if pending.utf8.count >= 1 << 20 { flush() }
        }
        flush()
        if let failure {
            output.discard()
            throw failure
        }
        return output
    }

    private static let placeholderHeader = PhotoHeader(width: 1, height: 1, colorModel: .rgb, isProgressive: false,
                                                       exifOrientation: 0, adobeInverted: false)

    static func csvField(_ value: String) -> String {
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return value }
        return "\"" + value.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\""
    }

    static func jsonString(_ value: String) -> String { jsonStringLiteral(value) }
}

/// A manifest that a render writes once its stripes are done, when it knows which photos were
/// drawn as placeholders, and commits with its outputs: a run killed or failing before the last
/// of them is in place leaves the old manifest beside the old outputs, never a new one beside
/// old outputs or an old one beside new. A sharded render's is written by its join: part 1
/// holds the manifest but its last lines, and every part the photos it drew as placeholders or
/// in part (`ManifestSink`).
public struct ManifestOutput {
    public let path: String
    /// What the run left out, from the render's summary.
    let notes: (RenderSummary) -> ManifestNotes
    let emit: (ManifestNotes, (String) -> Void) -> Void

    public var format: RenderManifest.Format { RenderManifest.format(for: path) }

    /// The manifest, finished under a hidden name, for the render to commit.
    func stage(_ summary: RenderSummary) throws(TesseraError) -> AtomicOutputFile {
        let notes = notes(summary)
        return try RenderManifest.staged(to: path) { out in emit(notes, out) }
    }

    /// The manifest without its JSON's last lines (all of a CSV), for a join to finish.
    func emitAllButTail(_ summary: RenderSummary, _ out: (String) -> Void) {
        var notes = notes(summary)
        notes.tailInJoin = true
        emit(notes, out)
    }
}
