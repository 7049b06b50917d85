// MosaicManifest.swift — where every photo went: one row per cell.

public enum MosaicManifest {
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

    /// Writes the manifest to `path` atomically.
    public static func write(match: MosaicMatch, photoPaths: [String], to path: String) throws(TesseraError) {
        let bytes = Array(text(match: match, photoPaths: photoPaths, format: format(for: path)).utf8)
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
