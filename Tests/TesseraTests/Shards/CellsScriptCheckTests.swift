// CellsScriptCheckTests.swift — the join's check of part 1's cells.js (CellsScriptCheck.swift):
// what DeepZoomViewer.cellsScript writes passes, cut into pieces anywhere (a token split between
// two); code, another size, and every one-byte change that would make it something else are
// refused, and nothing makes the check trap.
import Testing
@testable import Tessera

@Suite struct CellsScriptCheckTests {
    /// Photos with names that need escaping (quotes, a backslash, a newline, U+2028, non-ASCII).
    private func photos() throws -> PhotoTable {
        let header = try #require(PhotoLibrary.scan([baseJPEG]).photos.first).header
        let names = ["a \"quoted\" name.jpg", "back\\slash.jpg", "new\nline.jpg", "sep\u{2028}arator.jpg", "été 📷.jpg", "plain.jpg"]
        return PhotoTable(names.map { Photo(path: "/photos/" + $0, header: header) })
    }

    /// The script for `layout` with `shown` labels, whole.
    private func script(_ layout: CellLayout, geometry: DeepZoomGeometry, shown: ViewerLabels, previews: Int = 0) throws -> [UInt8] {
        let labels = CellLabels(layout: layout, photos: try photos(), shown: shown)
        var bytes: [UInt8] = []
        try DeepZoomViewer.cellsScript(name: "w\"all", geometry: geometry, labels: labels, previews: previews) { bytes += $0 }
        return bytes
    }

    private func expected(_ geometry: DeepZoomGeometry, previews: Int = 0) -> [String: Int] {
        ["width": geometry.width, "height": geometry.height, "tileSize": geometry.tileSize, "overlap": geometry.overlap,
         "maxLevel": geometry.maxLevel, "previews": previews]
    }

    /// Checks `bytes` fed in pieces cut at `cuts`.
    private func check(_ bytes: [UInt8], _ expected: [String: Int], cuts: [Int] = []) -> CellsScriptCheck {
        var check = CellsScriptCheck(expected: expected)
        var start = 0
        for end in (cuts.filter { $0 > 0 && $0 < bytes.count }.sorted() + [bytes.count]) {
            bytes[start..<end].withUnsafeBytes { check.feed($0) }
            start = end
        }
        _ = check.finish()
        return check
    }

    /// Whether byte `at` of `bytes` is within a JSON string (escapes followed).
    private func isInsideString(_ bytes: [UInt8], _ at: Int) -> Bool {
        var inside = false, escaped = false
        for byte in bytes[..<at] {
            if escaped { escaped = false } else if inside && byte == UInt8(ascii: "\\") { escaped = true }
            else if byte == UInt8(ascii: "\"") { inside.toggle() }
        }
        return inside
    }

    @Test func whatTesseraWritesPassesInAnyPieces() throws {
        let grid = CellLayout(columns: 3, rows: 2, cellWidth: 40, cellHeight: 30, repeating: [0, 1, 2, 3, 4, 5])
        let gridGeometry = DeepZoomGeometry(width: 120, height: 60, tileSize: 254, overlap: 1)
        var frames: [CellFrame] = []
        for i in 0..<6 { frames.append(CellFrame(x: (i % 3) * 50, y: (i / 3) * 40, width: 50, height: 40, photo: i == 5 ? -1 : i)) }
        let framed = CellLayout(width: 150, height: 80, cells: frames)
        let framedGeometry = DeepZoomGeometry(width: 150, height: 80, tileSize: 128, overlap: 0)
        var random = SplitMix64(seed: 5)
        for (layout, geometry, shown, previews) in [(grid, gridGeometry, ViewerLabels.name, 0), (grid, gridGeometry, .path, 256),
                                                    (grid, gridGeometry, .none, 0), (framed, framedGeometry, .name, 64)] {
            let bytes = try script(layout, geometry: geometry, shown: shown, previews: previews)
            let whole = check(bytes, expected(geometry, previews: previews))
            #expect(whole.failure == nil, "\(whole.failure ?? ""): \(String(decoding: bytes, as: UTF8.self))")
            #expect(whole.nameCount == (shown == .none ? 0 : 6))
            for _ in 0..<50 {
                let cuts = (0..<Int(random.next() % 8)).map { _ in Int(random.next() % UInt64(bytes.count)) }
                #expect(check(bytes, expected(geometry, previews: previews), cuts: cuts).failure == nil, "cut at \(cuts)")
            }
            // Every third byte changed to each of a few others: refused, or still a literal (a
            // number for a number, a letter inside a string); never a trap.
            for at in stride(from: 0, to: bytes.count, by: 3) {
                for replacement in Array("(;=.`\"}]x9 ".utf8) where replacement != bytes[at] {
                    var changed = bytes
                    changed[at] = replacement
                    let result = check(changed, expected(geometry, previews: previews))
                    if result.failure == nil {
                        // Let through: the change is inside a string, or a digit of a cell.
                        let inside = isInsideString(bytes, at)
                        // (A digit, sign, comma or blank among numbers: still numbers.)
                        let numeric = Array("0123456789-, \n".utf8)
                        #expect(inside || (numeric.contains(replacement) && numeric.contains(bytes[at])),
                                "byte \(at) as \(replacement) passed: \(String(decoding: changed, as: UTF8.self))")
                    }
                }
            }
        }
    }

    @Test func codeAnotherSizeAndExcessAreRefused() throws {
        let grid = CellLayout(columns: 3, rows: 2, cellWidth: 40, cellHeight: 30, repeating: [0, 1, 2, 3, 4, 5])
        let geometry = DeepZoomGeometry(width: 120, height: 60, tileSize: 254, overlap: 1)
        let text = String(decoding: try script(grid, geometry: geometry, shown: .name), as: UTF8.self)
        for (forged, words) in [("alert(1);" + text, "does not begin"),
                                (text.replacing("width: 120", with: "width: 121"), "it gives width 121"),
                                (text.replacing("width: 120", with: "width: alert(1)"), "'a' where a value belongs"),
                                (text.replacing("width: 120", with: "width: 12e0"), "12e0 where a number or null belongs"),
                                (text.replacing("name: ", with: "constructor: "), "a key tessera does not write"),
                                (text.replacing("height: 60,", with: "height: 60, height: 60,"), "it gives height twice"),
                                (text.replacing("};\n", with: "}; alert(1)\n"), "goes on after its end"),
                                (text.replacing("};\n", with: "}"), "breaks off"),
                                (text.replacing("cells: [", with: "cells: [[1],"), "an array where"),
                                (text.replacing("names: [", with: "names: [1,"), "a number where"),
                                (text.replacing("width: 120,", with: "width: 120," + String(repeating: " ", count: 100)), "run of blanks"),
                                (text.replacing("\"w\\\"all\"", with: "\"w\\xall\""), "an escape JSON does not have")] {
            let result = check(Array(forged.utf8), expected(geometry))
            #expect(result.failure?.contains(words) == true, "\(words): \(result.failure ?? "passed")")
        }
        #expect(check(Array(text.utf8), expected(geometry, previews: 64)).failure?.contains("previews nothing where the render has 64") == true)
    }
}
