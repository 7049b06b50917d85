// RenderManifest.swift — where every photo went: one row per cell.

public enum RenderManifest {
    public enum Format: Sendable { case csv, json }

    /// JSON when `path` ends in .json, else CSV.
    public static func format(for path: String) -> Format {
        path.lowercased().hasSuffix(".json") ? .json : .csv
    }

    /// The manifest text: CSV `column,row,photo,cost` (cost: the cell's mean Oklab error), or a
    /// JSON array of objects with the same fields.
    public static func text(match: MosaicMatch, photoPaths: [String], format: Format) -> String {
        var text = format == .csv ? "column,row,photo,cost\n" : "[\n"
        for cell in 0..<match.assignment.count {
            let column = cell % match.columns, row = cell / match.columns
            let path = photoPaths[Int(match.assignment[cell])]
            let cost = formatDecimal(Double(match.cellErrors[cell]), places: 5)
            switch format {
            case .csv:
                text += "\(column),\(row),\(csvField(path)),\(cost)\n"
            case .json:
                text += "  {\"column\": \(column), \"row\": \(row), \"photo\": \(jsonString(path)), \"cost\": \(cost)}"
                text += cell + 1 < match.assignment.count ? ",\n" : "\n"
            }
        }
        if format == .json { text += "]\n" }
        return text
    }

    /// A grid's manifest: CSV `column,row,photo`, or JSON objects with those fields (empty
    /// cells left out).
    public static func text(layout: CellLayout, photoPaths: [String], format: Format) -> String {
        var lines: [String] = []
        for cell in 0..<layout.cellCount {
            let photo = layout.photo(at: cell)
            guard photo >= 0 else { continue }
            let column = cell % layout.columns, row = cell / layout.columns, path = photoPaths[photo]
            lines.append(format == .csv ? "\(column),\(row),\(csvField(path))"
                                        : "  {\"column\": \(column), \"row\": \(row), \"photo\": \(jsonString(path))}")
        }
        return format == .csv ? "column,row,photo\n" + lines.map { $0 + "\n" }.joined()
                              : "[\n" + lines.joined(separator: ",\n") + (lines.isEmpty ? "" : "\n") + "]\n"
    }

    /// Writes a grid's manifest to `path` atomically.
    public static func write(layout: CellLayout, photoPaths: [String], to path: String) throws(TesseraError) {
        try write(text: text(layout: layout, photoPaths: photoPaths, format: format(for: path)), to: path)
    }

    /// Writes the manifest to `path` atomically.
    public static func write(match: MosaicMatch, photoPaths: [String], to path: String) throws(TesseraError) {
        try write(text: text(match: match, photoPaths: photoPaths, format: format(for: path)), to: path)
    }

    private static func write(text: String, to path: String) throws(TesseraError) {
        let bytes = Array(text.utf8)
        let output = try AtomicOutputFile(destination: path)
        try bytes.withUnsafeBytes { raw in Result { () throws(TesseraError) in try output.append(raw) } }.get()
        try output.commit()
    }

    static func csvField(_ value: String) -> String {
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return value }
        return "\"" + value.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\""
    }

    static func jsonString(_ value: String) -> String { jsonStringLiteral(value) }
}
