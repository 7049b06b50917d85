// ArchitectureTests.swift — the seams issue 26 made stay made: the library names no command-line
// flag (TesseraCLI words its errors), the renderer and the cell cache know nothing of shards
// (they reach the core through RenderPart and CellSource), and each image format is declared in
// one file and listed once.
import Glibc
import Testing

@Suite struct ArchitectureTests {
    private func text(_ relative: String) -> String {
        String(decoding: readFile(repositoryRoot + "/" + relative), as: UTF8.self)
    }

    @Test func theLibraryNamesNoFlag() throws {
        let files = sourceFiles(under: repositoryRoot + "/Sources/Tessera")
        try #require(files.count > 50)
        for file in files {
            for (number, line) in text("Sources/Tessera/" + file).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let characters = Array(line.utf8)
                for i in characters.indices.dropLast(2) where characters[i] == UInt8(ascii: "-") && characters[i + 1] == UInt8(ascii: "-")
                    && (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(characters[i + 2]) {
                    Issue.record("Sources/Tessera/\(file):\(number + 1) names a flag: \(line)")
                    break
                }
            }
        }
    }

    @Test func theRendererAndTheCellCacheKnowNoShard() {
        for file in ["Sources/Tessera/Render/StripeRenderer.swift", "Sources/Tessera/Cells/CellCache.swift"] {
            let source = text(file).lowercased()
            #expect(!source.isEmpty, "\(file) was not found")
            #expect(!source.contains("shard"), "\(file) mentions shards: they reach the core through RenderPart and CellSource")
        }
    }

    @Test func eachFormatIsListedOnce() throws {
        let list = text("Sources/Tessera/Formats/PhotoFormat.swift")
        let line = try #require(list.split(separator: "\n").first { $0.contains("static let all: [any PhotoFormat.Type]") })
        let names = line.split(whereSeparator: { !$0.isLetter && !$0.isNumber }).map(String.init).filter { $0.hasSuffix("Format") && $0 != "PhotoFormat" }
        #expect(names.count >= 4 && Set(names).count == names.count, "\(names)")
        // Every format type is declared in one file under Formats/, and nowhere else.
        let files = sourceFiles(under: repositoryRoot + "/Sources/Tessera")
        for name in names {
            let declaring = files.filter { text("Sources/Tessera/" + $0).contains("enum \(name): PhotoFormat") }
            #expect(declaring.count == 1 && declaring[0].hasPrefix("Formats/"), "\(name) is declared in \(declaring)")
        }
        // Nothing outside Formats/ switches over the formats.
        for file in files where !file.hasPrefix("Formats/") {
            for format in ["case .png", "case .webp", "case .heif", ".readable(.png)", ".readable(.heif)", ".readable(.webp)"] {
                #expect(!text("Sources/Tessera/" + file).contains(format), "\(file) decides by format (\(format))")
            }
        }
    }
}
