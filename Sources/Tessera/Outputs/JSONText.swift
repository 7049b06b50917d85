// JSONText.swift — JSON string literals, for every output that writes JSON or JavaScript (the
// mosaic's manifest, the Deep Zoom viewer's cells.js).

/// A JSON string literal for `text`. Besides what JSON requires (quote, backslash, control
/// characters), `<` and U+2028/U+2029 are escaped too, so that the literal is also safe inside
/// an HTML script element (no name can close it) and in older JavaScript. Used by the manifest
/// and by the Deep Zoom viewer's cells.js.
public func jsonStringLiteral(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case "<": out += "\\u003c"
        case "\u{2028}": out += "\\u2028"
        case "\u{2029}": out += "\\u2029"
        default:
            if scalar.value < 0x20 {
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}
