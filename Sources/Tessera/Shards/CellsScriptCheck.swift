// CellsScriptCheck.swift — the viewer's cells.js from part 1, checked piece by piece before the
// join copies it: the page runs it as a script, so a part from a shard folder others can write
// must not be able to put code in it.
//
// What DeepZoomViewer.cellsScript writes, and all that is let through: `window.TESSERA = {`,
// then keys from a fixed list, each once, each with a value of its kind (a number, a JSON
// string, null, an array of numbers or of strings, the grid's object of numbers), then `};`.
// No expression, call or other name can appear, so the script can only assign that literal.
// The picture's size and the pyramid's tile settings must be the render's own; the names are
// counted (a preview of a photo beyond them is refused). Whitespace runs are short, strings
// and numbers bounded, so the file is no larger than the tokens the part holds.
//
// The check streams: a piece at a time, a token at most carried over between pieces.

struct CellsScriptCheck {
    /// The render's own figures the script must give.
    let expected: [String: Int]
    /// Why the script was refused (nil while it passes).
    private(set) var failure: String?
    /// Entries of the top-level `names` array.
    private(set) var nameCount = 0

    private static let prefix = Array("window.TESSERA = {".utf8)
    /// The top-level keys and what each holds.
    private enum Kind { case number, string, grid, strings, numbers }
    private static let topKeys: [String: Kind] = [
        "name": .string, "width": .number, "height": .number, "tileSize": .number, "overlap": .number, "maxLevel": .number,
        "previews": .number, "tallest": .number, "grid": .grid, "names": .strings, "cells": .numbers, "frames": .numbers,
    ]
    private static let gridKeys: Set<String> = ["columns", "rows", "cellWidth", "cellHeight"]
    private static let longestString = 64 << 10
    private static let longestWhitespace = 8

    private enum Stage { case prefix(Int), body, semicolon, end }
    private enum Expect { case keyOrClose, key, colon, value, valueOrClose, commaOrClose }
    private struct Level {
        let isObject: Bool
        var expect: Expect
        /// The key whose value this container is (a top-level key), for its items' kind.
        let key: String
    }
    private var stage = Stage.prefix(0)
    private var stack: [Level] = []
    private var word: [UInt8] = []
    private var inWord = false
    private var inString = false, stringLength = 0
    /// 0: none; 1: after a backslash; 2...5: that many hex digits of \u to go, plus one.
    private var escape = 0
    private var whitespace = 0
    private var key = ""
    private var seenKeys: Set<String> = []
    private var numbers: [String: Int] = [:]

    init(expected: [String: Int]) { self.expected = expected }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            guard failure == nil else { return }
            take(byte)
        }
    }

    /// After the last piece: whether the script was whole and right.
    mutating func finish() -> Bool {
        if failure == nil, case .end = stage {
            // (No previews: the script gives none.)
            for (key, value) in expected where (numbers[key] ?? (key == "previews" ? 0 : nil)) != value {
                failure = "it gives \(key) \(numbers[key].map(String.init) ?? "nothing") where the render has \(value)"
            }
        } else if failure == nil {
            failure = "it breaks off"
        }
        return failure == nil
    }

    private mutating func fail(_ why: String) { if failure == nil { failure = why } }

    private mutating func take(_ byte: UInt8) {
        switch stage {
        case .prefix(let at):
            guard byte == Self.prefix[at] else { return fail("it does not begin as tessera's does") }
            if at + 1 == Self.prefix.count {
                stage = .body
                stack = [Level(isObject: true, expect: .keyOrClose, key: "")]
            } else {
                stage = .prefix(at + 1)
            }
        case .body: body(byte)
        case .semicolon: if byte == UInt8(ascii: ";") { stage = .end } else { fail("it does not end as tessera's does") }
        case .end: if byte != UInt8(ascii: "\n") { fail("it goes on after its end") }
        }
    }

    private mutating func body(_ byte: UInt8) {
        if inString { return string(byte) }
        if inWord {
            if isWordByte(byte) {
                word.append(byte)
                return word.count > 24 ? fail("it has a word or number too long") : ()
            }
            inWord = false
            endWord()
            guard failure == nil else { return }
        }
        if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") {
            whitespace += 1
            return whitespace > Self.longestWhitespace ? fail("it has a run of blanks tessera does not write") : ()
        }
        whitespace = 0
        guard var level = stack.last else { return fail("it goes on after its end") }
        if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
            let closes = byte == UInt8(ascii: "}") ? level.isObject && (level.expect == .keyOrClose || level.expect == .commaOrClose)
                : !level.isObject && (level.expect == .valueOrClose || level.expect == .commaOrClose)
            return closes ? close() : fail("it has \(describe(byte)) where tessera writes none")
        }
        switch (level.expect, byte) {
        case (.keyOrClose, _), (.key, _):
            guard isLetter(byte) else { return fail("it has \(describe(byte)) where a key belongs") }
            startWord(byte)
        case (.colon, UInt8(ascii: ":")):
            level.expect = .value
            stack[stack.count - 1] = level
        case (.commaOrClose, UInt8(ascii: ",")):
            level.expect = level.isObject ? .key : .value
            stack[stack.count - 1] = level
        case (.value, _), (.valueOrClose, _): value(byte)
        default: fail("it has \(describe(byte)) where tessera writes none")
        }
    }

    /// The kind the next value must be: from its key (top level) or its container's key.
    private var wanted: Kind? {
        if stack.count == 1 { return Self.topKeys[key] }
        guard let level = stack.last else { return nil }
        if level.isObject { return .number }  // the grid's figures
        return Self.topKeys[level.key] == .strings ? .string : .number
    }

    private mutating func value(_ byte: UInt8) {
        guard let kind = wanted else { return fail("it has a value tessera does not write") }
        switch byte {
        case UInt8(ascii: "\""):
            guard kind == .string else { return fail("it has a string where tessera writes \(kind)") }
            inString = true
            stringLength = 0
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            guard kind == .number else { return fail("it has a number where tessera writes \(kind)") }
            startWord(byte)
        case UInt8(ascii: "n"):
            guard kind == .grid else { return fail("it has null where tessera writes \(kind)") }
            startWord(byte)
        case UInt8(ascii: "{"):
            guard kind == .grid, stack.count == 1 else { return fail("it has an object where tessera writes \(kind)") }
            stack.append(Level(isObject: true, expect: .keyOrClose, key: key))
        case UInt8(ascii: "["):
            guard kind == .strings || kind == .numbers, stack.count == 1 else { return fail("it has an array where tessera writes \(kind)") }
            stack.append(Level(isObject: false, expect: .valueOrClose, key: key))
        default: fail("it has \(describe(byte)) where a value belongs")
        }
    }

    private mutating func string(_ byte: UInt8) {
        stringLength += 1
        guard stringLength <= Self.longestString else { return fail("it has a string longer than a path can be") }
        switch escape {
        case 0:
            if byte == UInt8(ascii: "\"") {
                inString = false
                valueDone()
            } else if byte == UInt8(ascii: "\\") {
                escape = 1
            } else if byte < 0x20 {
                fail("it has a control character in a string")
            }
        case 1:
            if byte == UInt8(ascii: "u") {
                escape = 5
            } else if Array("\"\\/bfnrt".utf8).contains(byte) {
                escape = 0
            } else {
                fail("it has an escape JSON does not have")
            }
        default:
            guard isHexDigit(byte) else { return fail("it has a \\u escape without four hex digits") }
            escape = escape == 2 ? 0 : escape - 1
        }
    }

    private mutating func startWord(_ byte: UInt8) {
        word.removeAll(keepingCapacity: true)
        word.append(byte)
        inWord = true
    }

    private mutating func endWord() {
        let text = String(decoding: word, as: UTF8.self)
        guard var level = stack.last else { return fail("it goes on after its end") }
        if level.expect == .keyOrClose || level.expect == .key {
            if stack.count == 1 {
                guard Self.topKeys[text] != nil else { return fail("it has a key tessera does not write (\(text))") }
                guard seenKeys.insert(text).inserted else { return fail("it gives \(text) twice") }
                key = text
            } else {
                guard Self.gridKeys.contains(text) else { return fail("its grid has a key tessera does not write (\(text))") }
            }
            level.expect = .colon
            stack[stack.count - 1] = level
            return
        }
        if text == "null" { return valueDone() }
        let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
        guard let number = Int(text), !digits.isEmpty, digits.count <= 12, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
              digits == "0" || !digits.hasPrefix("0") else {
            return fail("it has \(text) where a number or null belongs")
        }
        if stack.count == 1 { numbers[key] = number }
        valueDone()
    }

    /// A value ends: its container expects a comma or its end.
    private mutating func valueDone() {
        guard var level = stack.last else { return }
        if !level.isObject && level.key == "names" && stack.count == 2 { nameCount += 1 }
        level.expect = .commaOrClose
        stack[stack.count - 1] = level
    }

    private mutating func close() {
        stack.removeLast()
        if stack.isEmpty {
            stage = .semicolon
        } else {
            valueDone()
        }
    }

    private func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }
    private func isWordByte(_ byte: UInt8) -> Bool { isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
    private func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }
    private func describe(_ byte: UInt8) -> String {
        byte >= 0x21 && byte < 0x7F ? "'\(Character(Unicode.Scalar(byte)))'" : "byte \(byte)"
    }
}
