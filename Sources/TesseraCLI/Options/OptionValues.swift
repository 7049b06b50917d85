// OptionValues.swift — reading an option's value (numbers, sizes, colours, pairs), with the
// messages every command words the same way, and the text helpers the help is made with.
import Tessera

extension GivenOption {
    /// The value as a whole number in `range`. `name` is the option as spelled unless given.
    func integer(_ range: ClosedRange<Int>, naming name: String? = nil) throws(CommandLineError) -> Int {
        guard let number = Int(value), range.contains(number) else {
            throw CommandLineError("\(name ?? self.name) expects a whole number in \(range.lowerBound)...\(range.upperBound), got '\(value)'",
                                   argumentIndex: valuePosition)
        }
        return number
    }

    /// The value as one of `Value`'s raw values, or `message` as the error.
    func choice<Value: RawRepresentable>(_ type: Value.Type, _ message: String) throws(CommandLineError) -> Value
    where Value.RawValue == String {
        guard let chosen = Value(rawValue: value) else { throw CommandLineError(message, argumentIndex: valuePosition) }
        return chosen
    }

    /// A refusal of this option's value.
    func refusal(_ message: String) -> CommandLineError { CommandLineError(message, argumentIndex: valuePosition) }
}

/// Refuses a folder to create named by `.` or `..` (`--iiif .`, `--iiif out/.`): the new folder
/// would be staged inside the one it replaces, and the refusal blamed tessera's own staging
/// folder for being there.
func refuseDotFolder(_ given: GivenOption) throws(CommandLineError) {
    let last = given.value.split(separator: "/").last.map(String.init) ?? ""
    guard last == "." || last == ".." else { return }
    throw given.refusal("\(given.name) names the folder to create, not '\(last)': give the folder's own name, like out/wall (got '\(given.value)')")
}

/// "200x267" → (200, 267).
func parsePair(_ text: String) -> (Int, Int)? {
    let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
    guard parts.count == 2, let a = Int(parts[0]), let b = Int(parts[1]) else { return nil }
    return (a, b)
}

/// "64M", "64MiB", "1.5G", "1048576" → bytes (binary units; a bare number is bytes).
public func parseByteSize(_ text: String) -> Int? {
    var digits = text.trimmingWhitespace().uppercased()
    var multiplier = 1.0
    for (suffixes, scale) in [(["KIB", "KB", "K"], 1024.0), (["MIB", "MB", "M"], 1048576.0),
                              (["GIB", "GB", "G"], 1073741824.0), (["TIB", "TB", "T"], 1099511627776.0)] {
        if let suffix = suffixes.first(where: { digits.hasSuffix($0) }) {
            digits = String(digits.dropLast(suffix.count))
            multiplier = scale
            break
        }
    }
    if digits.hasSuffix("B") && multiplier == 1 { digits = String(digits.dropLast()) }
    guard let number = Double(digits.trimmingWhitespace()), number >= 0, number * multiplier < 9e18 else { return nil }
    return Int(number * multiplier)
}

/// "202020" or "#202020" → RGB.
func parseColour(_ text: String) -> RGB? {
    let hex = text.hasPrefix("#") ? String(text.dropFirst()) : text
    guard hex.count == 6, let value = UInt32(hex, radix: 16) else { return nil }
    return RGB(red: UInt8(value >> 16), green: UInt8((value >> 8) & 0xFF), blue: UInt8(value & 0xFF))
}

/// Word-wraps `text` to `width` columns, every line indented by `indent` spaces.
func wrap(_ text: String, indent: Int, width: Int) -> String {
    let pad = String(repeating: " ", count: indent)
    var lines: [String] = []
    var line = pad
    for word in text.split(separator: " ") {
        if line.count > indent && line.count + 1 + word.count > width {
            lines.append(line)
            line = pad
        }
        line += (line.count > indent ? " " : "") + word
    }
    lines.append(line)
    return lines.joined(separator: "\n")
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while scalars.first?.isWhitespace == true { scalars.removeFirst() }
        while scalars.last?.isWhitespace == true { scalars.removeLast() }
        return String(scalars)
    }

    /// Padded with spaces to `length` characters (longer strings are left as they are).
    func padding(toLength length: Int) -> String {
        count >= length ? self + " " : self + String(repeating: " ", count: length - count)
    }
}
