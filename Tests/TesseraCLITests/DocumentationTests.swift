// DocumentationTests.swift — the README, docs/ and --help say what the tool does: every flag of
// the option tables is in docs/cli.md's tables and in the help, and nothing else is; the exit
// codes are one table (the README's); the README's library example is the file the tests build
// and run; the README stays a front door (at most 1,500 words of prose, a picture the tool
// made); every relative link of the README and docs/ reaches a file and a heading.
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
/// The command-line reference: the option tables.
let cliReference = String(decoding: readFile(repositoryRoot + "/docs/cli.md"), as: UTF8.self)

/// The rows (cells split on unescaped `|`) of every table of `document` whose header is `header`.
func markdownTables(header: String, in document: String) -> [[String]] {
    var rows: [[String]] = []
    var inside = false
    for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
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
        let rows = markdownTables(header: "| flag | meaning | default |", in: cliReference)
        try #require(rows.count > 30, "docs/cli.md's option tables were not found")
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
        let collage = Set(CollageCommand.options.flatMap(\.names))
        let all = grid.union(mosaic).union(shards).union(collage)
        let readmeOnly = documented.subtracting(all).sorted(), codeOnly = all.subtracting(documented).sorted()
        #expect(documented == all, "docs/cli.md only: \(readmeOnly); code only: \(codeOnly)")
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
        // A collage's own flags parse, with the grid's that a collage takes.
        for spec in CollageCommand.options + CollageCommand.renderingOptions where !spec.names.contains("--help") {
            var arguments = ["p", "-o", "o.jpg"]
            if !arguments.contains(spec.names[0]) {
                arguments += [spec.names[0]] + (spec.valueName == nil ? [] : [Self.sampleValue(for: spec)])
            }
            arguments += Self.companions(of: spec.names[0])
            if spec.names[0] == "--columns" { arguments += ["--layout", "columns"] }
            if spec.names[0] == "--seed" { arguments += ["--order", "shuffle"] }
            do {
                _ = try CollageCommand.parse(arguments)
            } catch {
                Issue.record("collage \(arguments.joined(separator: " ")): \(error.message)")
            }
        }
        // And every flag the help offers parses (no option table entry without its case).
        for spec in GridCommand.options + MosaicCommand.options where !spec.names.contains("--help") && spec.names != ["--order"] {
            var arguments = ["--target", "t.jpg", "p", "-o", "o.jpg", "--grid", "2x2", "--tile-size", "8"]
            if !arguments.contains(spec.names[0]) {
                arguments += [spec.names[0]] + (spec.valueName == nil ? [] : [Self.sampleValue(for: spec)])
            }
            arguments += Self.companions(of: spec.names[0])
            // --columns replaces --grid; --cells sets the count --grid would.
            if ["--columns", "--cells"].contains(spec.names[0]) { arguments.removeSubrange(5...6) }
            if spec.names[0] == "--min-cell" { arguments += ["--adaptive"] }
            if spec.names[0] == "--seed" { arguments += ["--min-distance", "2"] }
            do {
                _ = try MosaicCommand.parse(arguments)
            } catch {
                Issue.record("mosaic \(arguments.joined(separator: " ")): \(error.message)")
            }
        }
    }

    /// The flags a flag needs beside it to parse (the pyramid for its settings, the other half
    /// of a pair).
    static func companions(of flag: String) -> [String] {
        if ["--dzi-tile-size", "--dzi-overlap", "--dzi-quality", "--no-viewer", "--viewer-labels", "--title", "--previews"].contains(flag) {
            return ["--dzi", "z.dzi"]
        }
        switch flag {
        case "--iiif": return ["--iiif-id", "https://example.org/iiif/wall"]
        case "--iiif-id": return ["--iiif", "wall"]
        case "--shard": return ["--shard-dir", "d"]
        case "--shard-dir": return ["--shard", "1/2"]
        case "-0": return ["--photos-from", "list.txt"]
        default: return []
        }
    }

    static func sampleValue(for spec: OptionSpec) -> String {
        switch spec.names.last! {
        case "--grid": return "3x3"
        case "--dzi-tile-size": return "64"
        case "--tile-size", "--columns", "--quality", "--workers", "--stripe-height", "--dzi-quality", "--dpi",
             "--sub-cells", "--max-uses", "--min-uses", "--match-effort", "--min-distance", "--tint", "--seed", "--dzi-overlap": return "3"
        case "--width": return "2000"
        case "--previews": return "256"
        case "--row-height", "--gap": return "10"
        case "--layout": return "columns"
        case "--subsampling": return "444"
        case "--size": return "16x16"  // the --grid 2x2 of 8 px cells the other flags ask for
        case "--cells": return "100"
        case "--min-cell": return "4"  // the 8 px cells halved
        case "--shard": return "1/2"
        case "--encoder": return "serial"
        case "--order": return "shuffle"
        case "--max-memory": return "64M"
        case "--background": return "202020"
        case "--viewer-labels": return "none"
        case "--progress": return "json"
        case "--dzi": return "z.dzi"
        case "--szi": return "z.szi"
        case "--iiif": return "wall"
        case "--iiif-id": return "https://example.org/iiif/wall"
        case "--tiff": return "z.tif"
        case "--output": return "o.jpg"
        case "--preview": return "p.jpg"
        default: return "x"
        }
    }

    @Test func theExitCodesAreOneTable() throws {
        let rows = markdownTables(header: "| code | meaning |", in: readme)
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

    @Test func theReadmeIsAFrontDoor() throws {
        #expect(proseWordCount("One two.\n```sh\nnot counted\n```\n| --- | --- |\n| a | 3 |\n- x\n") == 5)
        let words = proseWordCount(readme)
        #expect(words <= 1500, "README.md has \(words) words of prose (at most 1,500): move the rest to docs/")
        #expect(words > 300, "README.md's prose was not found (\(words) words)")
        // Its two set-up commands, which .ci/run and the packaging scripts rely on.
        #expect(readme.contains("\nscripts/demo.sh ") && readme.contains("\nswift test "))
        // One picture, small, that the tool made: every JPEG Tessera writes carries its comment.
        let pictures = markdownLinkTargets(readme).filter { $0.hasPrefix("docs/images/") && $0.hasSuffix(".jpg") }
        try #require(!pictures.isEmpty, "README.md shows no picture from docs/images")
        for picture in pictures {
            let bytes = readFile(repositoryRoot + "/" + picture)
            #expect(bytes.count > 1000 && bytes.count < 150_000, "\(picture) is \(bytes.count) bytes")
            #expect(bytes.starts(with: [0xFF, 0xD8, 0xFF]), "\(picture) is not a JPEG")
            let comment = Array("Tessera output: not a photo".utf8)
            #expect(bytes.indices.contains { bytes[$0...].starts(with: comment) }, "\(picture) was not made by tessera")
        }
    }

    /// docs/how-it-works.md's source map lists every file under Sources/, under a heading naming
    /// its folder, and nothing that is not there: a moved file must move in the map too.
    @Test func theSourceMapNamesEverySourceFile() throws {
        let map = String(decoding: readFile(repositoryRoot + "/docs/how-it-works.md"), as: UTF8.self)
        let files = sourceFiles(under: repositoryRoot + "/Sources")
        try #require(files.count > 50, "Sources/ was not found")
        var listed = Set<String>()
        var folder: String?
        for line in map.split(separator: "\n") {
            if line.hasPrefix("**`Sources/") && line.hasSuffix("`**") {
                folder = String(line.dropFirst("**`Sources/".count).dropLast(3))
            } else if line.hasPrefix("#") {
                folder = nil
            } else if let folder, line.hasPrefix("- `"), let end = line.dropFirst(3).firstIndex(of: "`") {
                listed.insert(folder + "/" + line[line.index(line.startIndex, offsetBy: 3)..<end])
            }
        }
        for file in files where !listed.contains(file) { Issue.record("the source map does not list Sources/\(file)") }
        for file in listed.subtracting(files) { Issue.record("the source map lists Sources/\(file), which does not exist") }
    }

    @Test func everyRelativeLinkReachesAFileAndAHeading() throws {
        let docs = markdownFiles(in: repositoryRoot + "/docs")
        try #require(docs.contains("cli.md") && docs.contains("how-it-works.md"), "docs/ was not found")
        var checked = 0
        for document in ["README.md"] + docs.map({ "docs/" + $0 }) {
            let text = String(decoding: readFile(repositoryRoot + "/" + document), as: UTF8.self)
            let folder = document.hasPrefix("docs/") ? "docs/" : ""
            for target in markdownLinkTargets(text) where !target.contains("://") && !target.hasPrefix("mailto:") {
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let file = parts[0].isEmpty ? document : folder + parts[0]
                var status = stat()
                guard stat(repositoryRoot + "/" + file, &status) == 0 else {
                    Issue.record("\(document) links to \(target): no such file")
                    continue
                }
                if parts.count == 2 && file.hasSuffix(".md") {
                    let anchors = headingAnchors(String(decoding: readFile(repositoryRoot + "/" + file), as: UTF8.self))
                    #expect(anchors.contains(String(parts[1])), "\(document) links to \(target): no such heading")
                }
                checked += 1
            }
        }
        #expect(checked > 20, "only \(checked) links found")
    }
}

/// Words of prose in a Markdown text: whitespace-separated tokens holding a letter or a digit,
/// outside ``` fences (tables and headings count). scripts/readme-words.py counts the same way.
func proseWordCount(_ text: String) -> Int {
    var words = 0, fenced = false
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.drop(while: \.isWhitespace).hasPrefix("```") { fenced.toggle(); continue }
        if fenced { continue }
        words += line.split(whereSeparator: \.isWhitespace).filter { $0.contains { $0.isLetter || $0.isNumber } }.count
    }
    return words
}

/// The targets of a Markdown text's inline links and pictures, `[text](target)`, outside code.
func markdownLinkTargets(_ text: String) -> [String] {
    var targets: [String] = []
    var fenced = false
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.drop(while: \.isWhitespace).hasPrefix("```") { fenced.toggle(); continue }
        if fenced { continue }
        // Between backticks is code: the even pieces are the text around the code spans.
        for (index, piece) in line.split(separator: "`", omittingEmptySubsequences: false).enumerated() where index % 2 == 0 {
            var rest = piece[...]
            while let open = rest.firstRange(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                targets.append(String(after[..<close]))
                rest = after[close...]
            }
        }
    }
    return targets
}

/// The anchors of a Markdown text's headings, as GitHub makes them: lower case, spaces as `-`,
/// every other character that is not a letter, a digit, `-` or `_` left out.
func headingAnchors(_ text: String) -> Set<String> {
    var anchors = Set<String>()
    var fenced = false
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.drop(while: \.isWhitespace).hasPrefix("```") { fenced.toggle(); continue }
        guard !fenced, line.hasPrefix("#") else { continue }
        var anchor = ""
        for character in line.drop(while: { $0 == "#" }).drop(while: { $0 == " " }).lowercased() {
            if character.isLetter || character.isNumber || character == "-" || character == "_" {
                anchor.append(character)
            } else if character == " " {
                anchor.append("-")
            }
        }
        anchors.insert(anchor)
    }
    return anchors
}

/// The names of the `.md` files in `folder`, sorted.
/// The source files (.swift, .c, .h) under `folder`, as paths relative to it, sorted.
func sourceFiles(under folder: String, prefix: String = "") -> [String] {
    guard let directory = opendir(folder) else { return [] }
    defer { closedir(directory) }
    var files: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name.hasPrefix(".") { continue }
        if entry.pointee.d_type == UInt8(DT_DIR) {
            files += sourceFiles(under: folder + "/" + name, prefix: prefix + name + "/")
        } else if name.hasSuffix(".swift") || name.hasSuffix(".c") || name.hasSuffix(".h") {
            files.append(prefix + name)
        }
    }
    return files.sorted()
}

func markdownFiles(in folder: String) -> [String] {
    guard let directory = opendir(folder) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name.hasSuffix(".md") { names.append(name) }
    }
    return names.sorted()
}
