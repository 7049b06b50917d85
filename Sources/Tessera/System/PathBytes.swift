// PathBytes.swift — a file path as the kernel sees it: bytes, not text.
//
// Linux names are any bytes but '/' and NUL. Swift's String holds only valid Unicode and compares
// canonically ("é" in NFC equals it in NFD), so a photo's path is kept as its bytes from the
// directory listing to the open(2) that reads it; `display` is for messages only (invalid UTF-8
// shown as U+FFFD).
public struct PathBytes: Hashable, Sendable, Comparable {
    /// The path's bytes, without a terminating NUL.
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The path of a String (its UTF-8 bytes, as typed).
    public init(_ string: String) { bytes = Array(string.utf8) }

    /// The path as text, for messages (bytes that are not UTF-8 become U+FFFD).
    public var display: String { String(decoding: bytes, as: UTF8.self) }

    /// `self/name`.
    func appending(_ name: [UInt8]) -> PathBytes {
        PathBytes(bytes.last == UInt8(ascii: "/") ? bytes + name : bytes + [UInt8(ascii: "/")] + name)
    }

    /// The same path without what names nothing: repeated slashes, `.` segments and a trailing
    /// slash ("./in//a/./b.jpg" → "in/a/b.jpg"; "/" and "." stay). `..` is kept: past a symbolic
    /// link it is not the lexical parent.
    var lexicallyNormal: PathBytes {
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        let absolute = bytes.first == slash
        let parts = bytes.split(separator: slash, omittingEmptySubsequences: true).filter { !($0.count == 1 && $0.first == dot) }
        var out: [UInt8] = absolute ? [slash] : []
        for (index, part) in parts.enumerated() {
            if index > 0 { out.append(slash) }
            out.append(contentsOf: part)
        }
        if out.isEmpty { out = [dot] }
        return PathBytes(out)
    }

    /// Runs `body` with the path as a NUL-terminated C string.
    func withCString<T>(_ body: (UnsafePointer<CChar>) -> T) -> T {
        let terminated = bytes.map { CChar(bitPattern: $0) } + [0]
        return terminated.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    public static func < (a: PathBytes, b: PathBytes) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
}

/// A name as a line of text shows it: control characters (a newline, an escape sequence that
/// would recolour the terminal or retitle its window, DEL, C1) and the bidirectional overrides
/// written as `\n`, `\r`, `\t` or `\xNN`, so that a file named to forge a line or drive the
/// terminal is named, not obeyed. (A backslash stays as it is: such names are rare, and shown as
/// typed.) Messages that name files someone else made (a photo, a shard part) name them so.
public func displayedName(_ path: String) -> String {
    guard path.unicodeScalars.contains(where: needsEscapeInText) else { return path }
    var text = ""
    for scalar in path.unicodeScalars {
        switch scalar {
        case "\n": text += "\\n"
        case "\r": text += "\\r"
        case "\t": text += "\\t"
        case _ where needsEscapeInText(scalar):
            let digits = String(scalar.value, radix: 16, uppercase: true)
            text += "\\x" + (digits.count < 2 ? "0" + digits : digits)
        default: text.unicodeScalars.append(scalar)
        }
    }
    return text
}

/// C0, DEL and C1 controls, and the bidirectional overrides and isolates (U+202A-202E,
/// U+2066-2069), which make a name read backwards.
public func needsEscapeInText(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || (0x202A...0x202E).contains(scalar.value)
        || (0x2066...0x2069).contains(scalar.value)
}
