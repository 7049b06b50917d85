// DocumentationTests.swift — the README and --help say what the tool does: every flag of the
// option tables is in the README's tables and in the help, and nothing else is; the exit codes
// are one table; the README's library example is the file the tests build and run.
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

/// The repository's root (the tests run from a build folder).
let repositoryRoot: String = {
    let file = #filePath
    var path = String(file[..<file.lastIndex(of: "/")!])  // Tests/TesseraCLITests
    for _ in 0..<2 { path = String(path[..<path.lastIndex(of: "/")!]) }
    return path
}()

let readme = String(decoding: readFile(repositoryRoot + "/README.md"), as: UTF8.self)

/// The rows (cells split on unescaped `|`) of every README table whose header is `header`.
func readmeTables(header: String) -> [[String]] {
    var rows: [[String]] = []
    var inside = false
    for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
        if line == header { inside = true; continue }
        guard inside else { continue }
        guard line.hasPrefix("|") else { inside = false; continue }
        if line.hasPrefix("| ---") { continue }
        let cells = line.replacingOccurrences(of: "\\|", with: "\u{1}").split(separator: "|", omittingEmptySubsequences: false)
            .dropFirst().dropLast().map { String($0).trimmingWhitespace().replacingOccurrences(of: "\u{1}", with: "|") }
        rows.append(cells)
    }
    return rows
}

@Suite struct DocumentationTests {
    @Test func everyFlagIsInTheReadmeAndTheHelpAndNothingElseIs() throws {
        let rows = readmeTables(header: "| flag | meaning | default |")
        try #require(rows.count > 30, "the README's option tables were not found")
        // The flags a row documents: each backticked spelling's first word, when it is a flag.
        var documented = Set<String>()
        for row in rows {
            for part in row[0].components(separatedBy: "`").enumerated() where part.offset % 2 == 1 {
                if let word = part.element.split(separator: " ").first, word.hasPrefix("-") { documented.insert(String(word)) }
            }
        }
        let grid = Set(GridCommand.options.flatMap(\.names))
        let mosaic = Set(MosaicCommand.options.flatMap(\.names))
        let shards = Set((JoinCommand.options + AnalyseCommand.options).flatMap(\.names))
        let all = grid.union(mosaic).union(shards)
        let readmeOnly = documented.subtracting(all).sorted(), codeOnly = all.subtracting(documented).sorted()
        #expect(documented == all, "README only: \(readmeOnly); code only: \(codeOnly)")
        for spec in JoinCommand.options {
            #expect(JoinCommand.help.contains("\n  " + spec.names.joined(separator: ", ") + (spec.valueName.map { " " + $0 } ?? "") + "\n"))
        }
        for spec in AnalyseCommand.options {
            #expect(AnalyseCommand.help.contains("\n  " + spec.names.joined(separator: ", ") + (spec.valueName.map { " " + $0 } ?? "") + "\n"))
        }
        for spec in GridCommand.options {
            let spelled = spec.names.joined(separator: ", ") + (spec.valueName.map { " " + $0 } ?? "")
            #expect(GridCommand.help.contains("\n  " + spelled + "\n"), "grid --help lacks \(spelled)")
            // A mosaic's order is its matching's: it takes every grid option but --order.
            #expect(MosaicCommand.help.contains("\n  " + spelled + "\n") == (spec.names != ["--order"]), "mosaic --help and \(spelled)")
        }
        #expect(throws: CommandLineError.self) {
            try MosaicCommand.parse(["--target", "t.jpg", "p", "-o", "o.jpg", "--grid", "2x2", "--tile-size", "8", "--order", "shuffle"])
        }
        for spec in MosaicCommand.options {
            let spelled = spec.names.joined(separator: ", ") + (spec.valueName.map { " " + $0 } ?? "")
            #expect(MosaicCommand.help.contains("\n  " + spelled + "\n"), "mosaic --help lacks \(spelled)")
            #expect(!GridCommand.help.contains("\n  " + spelled + "\n"), "grid --help offers the mosaic's \(spelled)")
        }
        // And every flag the help offers parses (no option table entry without its case).
        for spec in GridCommand.options + MosaicCommand.options where !spec.names.contains("--help") && spec.names != ["--order"] {
            var arguments = ["--target", "t.jpg", "p", "-o", "o.jpg", "--grid", "2x2", "--tile-size", "8"]
            if !arguments.contains(spec.names[0]) {
                arguments += [spec.names[0]] + (spec.valueName == nil ? [] : [Self.sampleValue(for: spec)])
            }
            if ["--dzi-tile-size", "--dzi-overlap", "--dzi-quality", "--no-viewer", "--viewer-labels", "--title"].contains(spec.names[0]) {
                arguments += ["--dzi", "z.dzi"]
            }
            if spec.names[0] == "--columns" { arguments.removeSubrange(5...6) }
            if spec.names[0] == "--shard" { arguments += ["--shard-dir", "d"] }
            if spec.names[0] == "--shard-dir" { arguments += ["--shard", "1/2"] }
            do {
                _ = try MosaicCommand.parse(arguments)
            } catch {
                Issue.record("mosaic \(arguments.joined(separator: " ")): \(error.message)")
            }
        }
    }

    static func sampleValue(for spec: OptionSpec) -> String {
        switch spec.names.last! {
        case "--grid": return "3x3"
        case "--dzi-tile-size": return "64"
        case "--tile-size", "--columns", "--quality", "--workers", "--stripe-height", "--dzi-quality", "--dpi",
             "--sub-cells", "--max-uses", "--match-effort", "--min-distance", "--tint", "--seed", "--dzi-overlap": return "3"
        case "--subsampling": return "444"
        case "--shard": return "1/2"
        case "--encoder": return "serial"
        case "--order": return "shuffle"
        case "--max-memory": return "64M"
        case "--background": return "202020"
        case "--viewer-labels": return "none"
        case "--progress": return "json"
        case "--dzi": return "z.dzi"
        case "--output": return "o.jpg"
        default: return "x"
        }
    }

    @Test func theExitCodesAreOneTable() throws {
        let rows = readmeTables(header: "| code | meaning |")
        #expect(rows.map { $0[0] } == ExitCode.documented.map(\.code))
        #expect(rows.map { $0[1] } == ExitCode.documented.map(\.meaning))
        for (code, meaning) in ExitCode.documented {
            #expect(TopLevel.help.contains("  " + code + " "), "--help lacks exit code \(code)")
            #expect(TopLevel.help.replacingOccurrences(of: "\n ", with: " ").split(separator: " ").joined(separator: " ")
                        .contains(meaning.split(separator: " ").joined(separator: " ")), "--help words exit code \(code) otherwise")
        }
        // Every listed code is one the tool can return.
        let codes = Set([ExitCode.success, .renderFailed, .usage, .badInput, .insufficientResources, .hungUp, .interrupted, .terminated]
            .map { String($0.rawValue) })
        #expect(Set(ExitCode.documented.flatMap { $0.code.components(separatedBy: " / ") }) == codes)
    }

    @Test func theLibraryExampleIsTheBuiltFileAndWorks() throws {
        let source = String(decoding: readFile(repositoryRoot + "/Examples/LibraryExample/main.swift"), as: UTF8.self)
        try #require(source.contains("StripeRenderer"))
        #expect(readme.contains("```swift\n" + source + "```\n"), "the README's library example differs from Examples/LibraryExample/main.swift")
        let example = String(toolPath().dropLast("tessera".count)) + "tessera-example"
        let output = "\(testRoot)/tessera-example-\(getpid()).jpg"
        defer { unlink(output) }
        let status = system("'\(example)' '\(fixtures)' '\(output)' >/dev/null 2>&1")
        #expect((status >> 8) & 0xFF == 0)
        let bytes = readFile(output)
        // 18 photos in 4 columns of 200 px: 800 x 1000 (5 rows).
        let sof = try #require((2..<(bytes.count - 9)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 })
        #expect(Int(bytes[sof + 5]) << 8 | Int(bytes[sof + 6]) == 1000 && Int(bytes[sof + 7]) << 8 | Int(bytes[sof + 8]) == 800)
    }
}
