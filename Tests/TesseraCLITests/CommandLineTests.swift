// CommandLineTests.swift — parsing, help, and the real `tessera` binary end to end.
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

@Suite struct ParsingTests {
    @Test func parsesEveryGridFlag() throws {
        let options = try GridCommand.parse([
            "photos", "more/a.jpg", "-o", "out.jpg", "--grid", "200x267", "--tile-size", "150", "--quality", "85",
            "--subsampling", "444", "--workers", "3", "--stripe-height", "32", "--max-memory", "48M", "--temp-dir", "/var/tmp",
            "--order", "shuffle", "--seed", "9", "--background", "#102030", "--dry-run", "--no-progress", "--strict",
        ])
        #expect(options.photoPaths == ["photos", "more/a.jpg"])
        #expect(options.outputPath == "out.jpg")
        #expect(options.columns == 200 && options.rows == 267)
        #expect(options.cellWidth == 150 && options.cellHeight == 150)
        #expect(options.settings.quality == 85)
        #expect(options.settings.subsampling == .s444)
        #expect(options.settings.workers == 3)
        #expect(options.settings.stripeHeight == 32)
        #expect(options.settings.maxMemoryBytes == 48 << 20)
        #expect(options.settings.temporaryDirectory == "/var/tmp")
        #expect(options.order == .shuffle(seed: 9))
        #expect(options.settings.background == RGB(red: 0x10, green: 0x20, blue: 0x30))
        #expect(options.dryRun && options.progress == .none && options.strict)
    }

    /// The budget is automatic unless a size is given; `auto` (any case) says so explicitly.
    @Test func maxMemoryIsAutomaticUnlessASizeIsGiven() throws {
        let base = ["p", "-o", "o.jpg", "--grid", "2x2", "--tile-size", "5"]
        #expect(try GridCommand.parse(base).automaticMemory)
        let sized = try GridCommand.parse(base + ["--max-memory", "96M"])
        #expect(!sized.automaticMemory && sized.settings.maxMemoryBytes == 96 << 20)
        #expect(try GridCommand.parse(base + ["--max-memory", "AUTO"]).automaticMemory)
        #expect(try AnalyseCommand.parse(["p", "--tile-size", "5", "--max-memory", "32M"]).automaticMemory == false)
        #expect(throws: CommandLineError.self) { try GridCommand.parse(base + ["--max-memory", "lots"]) }
        do {
            _ = try GridCommand.parse(base + ["--max-memory", "lots"])
        } catch {
            #expect(error.message.contains("auto or a size"), "\(error.message)")
        }
        // The budget chosen when the render starts: a given one is kept, an automatic one taken.
        let chosen = try GridCommand.parse(base).withMemoryChosen(MemoryBudget(bytes: 56 << 20, rule: .cgroup(version: 1, limitBytes: 64 << 20)))
        #expect(chosen.settings.maxMemoryBytes == 56 << 20 && chosen.settings.steadyStateBytes == MemoryBudget.steadyStateBytes)
        #expect(sized.withMemoryChosen(MemoryBudget(bytes: 1 << 30, rule: .machine(availableBytes: 2 << 30))).settings == sized.settings)
    }

    @Test func parsesDeepZoomFlags() throws {
        let both = try GridCommand.parse(["p", "-o", "o.jpg", "--dzi", "z/wall.dzi", "--grid", "2x2", "--tile-size", "5",
                                          "--quality", "80", "--dzi-tile-size", "510", "--dzi-overlap", "2"])
        #expect(both.jpegPath == "o.jpg" && both.deepZoomPath == "z/wall.dzi")
        #expect(both.outputs.count == 2 && both.outputs.first == .jpeg(path: "o.jpg"))
        #expect(both.deepZoom?.tileSize == 510 && both.deepZoom?.overlap == 2)
        #expect(both.deepZoom?.quality == 80)  // follows --quality unless --dzi-quality is given
        #expect(both.deepZoom?.viewer == true)
        let alone = try GridCommand.parse(["p", "--dzi", "wall.dzi", "--grid", "2x2", "--tile-size", "5", "--dzi-quality", "70", "--no-viewer"])
        #expect(alone.jpegPath == nil && alone.outputs.count == 1)
        #expect(alone.deepZoom?.quality == 70 && alone.deepZoom?.viewer == false)
        #expect(throws: CommandLineError("--dzi-quality needs --dzi DIR/NAME.dzi or --szi DIR/NAME.szi (or --iiif DIR)")) {
            try GridCommand.parse(["p", "-o", "o.jpg", "--grid", "2x2", "--tile-size", "5", "--dzi-quality", "70"])
        }
        // The viewer's flags need a viewer: not offered --iiif, and refused beside it alone.
        #expect(throws: CommandLineError("--title needs --dzi DIR/NAME.dzi or --szi DIR/NAME.szi")) {
            try GridCommand.parse(["p", "-o", "o.jpg", "--grid", "2x2", "--tile-size", "5", "--title", "Hello"])
        }
        for flag in [["--title", "Hello"], ["--no-viewer"], ["--viewer-labels", "path"]] {
            #expect {
                try GridCommand.parse(["p", "--iiif", "ii", "--iiif-id", "https://x.org/a", "--grid", "2x2", "--tile-size", "5"] + flag)
            } throws: { ($0 as? CommandLineError)?.message.hasPrefix("\(flag[0]) is for the viewer page of --dzi or --szi") == true }
        }
        #expect {
            try GridCommand.parse(["p", "--dzi", "wall.html", "--grid", "2x2", "--tile-size", "5"])
        } throws: { ($0 as? CommandLineError)?.message == "--dzi expects a path ending in NAME.dzi, like out/wall.dzi, got 'wall.html'" }
        #expect {
            try GridCommand.parse(["p", "--dzi", "dir/.dzi", "--grid", "2x2", "--tile-size", "5"])
        } throws: { ($0 as? CommandLineError)?.message == "--dzi expects a path ending in NAME.dzi, like out/wall.dzi, got 'dir/.dzi'" }
        #expect(throws: CommandLineError("--dzi-overlap must be at most half of --dzi-tile-size (127), got 200")) {
            try GridCommand.parse(["p", "--dzi", "w.dzi", "--grid", "2x2", "--tile-size", "5", "--dzi-overlap", "200"])
        }
        #expect(GridCommand.help.contains("--dzi DIR/NAME.dzi") && MosaicCommand.help.contains("--dzi DIR/NAME.dzi"))
    }

    /// --exclude repeats; --include-hidden; a dry run counts what the search left out.
    @Test func selectionFlagsAndTheDryRunCount() throws {
        let options = try GridCommand.parse(["p", "-o", "o.jpg", "--columns", "2", "--tile-size", "5", "--exclude", "*.png",
                                             "--exclude", "*/drafts", "--include-hidden"])
        #expect(options.selection == PhotoSelection(includeHidden: true, excludes: ["*.png", "*/drafts"]))
        let folder = "\(testRoot)/tessera-selection-\(getpid())"
        #expect(system("mkdir -p '\(folder)/photos/@eaDir' && cp '\(fixtures)/Landscape_1.jpg' '\(folder)/photos/' && "
                       + "cp '\(fixtures)/Landscape_1.jpg' '\(folder)/photos/.copy.jpg' && "
                       + "cp '\(fixtures)/Landscape_1.jpg' '\(folder)/photos/@eaDir/thumb.jpg'") == 0)
        defer { _ = system("rm -rf '\(folder)'") }
        let run = runTessera(["grid", folder + "/photos", "-o", folder + "/out.jpg", "--columns", "2", "--tile-size", "10", "--dry-run"])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("left out    1 hidden (--include-hidden takes them), 1 thumbnail folder(s)"), "\(run.output)")
        #expect(run.output.contains("photos      1 usable"), "\(run.output)")
    }

    @Test func columnsAloneLeaveRowsToThePhotoCount() throws {
        let options = try GridCommand.parse(["p", "-o", "o.jpg", "--columns", "10", "--tile-size=200x150"])
        #expect(options.columns == 10 && options.rows == nil)
        #expect(options.cellWidth == 200 && options.cellHeight == 150)
    }

    @Test func errorsNameTheArgument() throws {
        #expect(throws: CommandLineError("--quality expects a whole number in 1...100, got '0'", argumentIndex: 8)) {
            try GridCommand.parse(["p", "-o", "o.jpg", "--columns", "3", "--quality", "0", "--tile-size", "5"], firstIndex: 2)
        }
        #expect(throws: CommandLineError("unknown option --colour (see 'tessera grid --help')", argumentIndex: 3)) {
            try GridCommand.parse(["p", "--colour", "red"], firstIndex: 2)
        }
        #expect {
            try GridCommand.parse(["p", "-o", "o.jpg", "--grid", "10by10", "--tile-size", "5"])
        } throws: { ($0 as? CommandLineError)?.message == "--grid expects COLUMNSxROWS like 200x267, got '10by10'" }
        #expect(try GridCommand.parse(["p", "-o", "o.jpg", "--grid", "2x2"]).tileSizeGiven == false)
        #expect(try GridCommand.parse(["p", "-o", "o.jpg", "--grid", "2x2", "--tile-size", "7"]).tileSizeGiven)
        #expect(throws: CommandLineError("-o OUT.jpg, --dzi DIR/NAME.dzi, --szi DIR/NAME.szi, --iiif DIR or --tiff FILE.tif (any of them together, or --preview FILE.jpg alone) is required")) { try GridCommand.parse(["p", "--grid", "2x2", "--tile-size", "5"]) }
    }

    /// Flags that conflict, repeat or do nothing are refused, not silently resolved (issue 13).
    @Test func conflictingRepeatedAndUselessFlagsAreRefused() throws {
        func message(_ arguments: [String]) -> String? {
            do { _ = try GridCommand.parse(arguments); return nil } catch { return error.message }
        }
        #expect(message(["p", "-o", "a.jpg", "-o", "b.jpg", "--columns", "2", "--tile-size", "5"]) == "-o is given twice; give it once")
        #expect(message(["p", "-o", "a.jpg", "--grid", "2x2", "--columns", "2", "--tile-size", "5"])?.hasPrefix("--grid and --columns") == true)
        #expect(message(["p", "-o", "a.jpg", "--columns", "2", "--grid", "2x2", "--tile-size", "5"])?.hasPrefix("--grid and --columns") == true)
        #expect(message(["p", "-o", "a.PNG", "--columns", "2", "--tile-size", "5"]) == "-o writes a JPEG, but 'a.PNG' ends in .png: name it .jpg")
        #expect(message(["p", "-o", "a.jpg", "--columns", "2", "--tile-size", "5", "--seed", "4"])?.hasPrefix("--seed orders a shuffle") == true)
        // What stays allowed: --seed with a shuffle (either order), --exclude repeated, a mosaic's --seed.
        #expect(message(["p", "-o", "a.jpg", "--columns", "2", "--tile-size", "5", "--seed", "4", "--order", "shuffle"]) == nil)
        #expect(message(["p", "-o", "a.jpg", "--columns", "2", "--tile-size", "5", "--exclude", "x", "--exclude", "y"]) == nil)
        _ = try MosaicCommand.parse(["p", "--target", "t.jpg", "-o", "m.jpg", "--columns", "2", "--tile-size", "5", "--seed", "4",
                                     "--min-distance", "2"])
        // At the default rules a mosaic's placing is not random: a seed would change nothing.
        #expect {
            try MosaicCommand.parse(["p", "--target", "t.jpg", "-o", "m.jpg", "--columns", "2", "--tile-size", "5", "--seed", "4"])
        } throws: { ($0 as? CommandLineError)?.message.contains("every seed gives the same mosaic") == true }
        #expect(throws: CommandLineError("no help for 'foo': the commands are grid, mosaic, collage, join and analyse (try 'tessera help grid')", argumentIndex: 2)) {
            try TopLevel.parse(["help", "foo"])
        }
        // Through the binary: exit 2, and a missing --target named before any photo is read.
        #expect(runTessera(["help", "foo"]).status == 2)
        let missing = runTessera(["mosaic", "--target", "/nonexistent/target.jpg", fixtures, "-o", "\(testRoot)/m.jpg",
                                  "--columns", "4", "--tile-size", "8"])
        #expect(missing.status == 2 && missing.output.contains("/nonexistent/target.jpg"), "\(missing)")
    }

    /// Help says what the commands do (issue 13): a mosaic's --grid, --columns and --seed in its
    /// own words, example lines that continue with a backslash, the big pyramid example with
    /// the memory it needs, and a mosaic without photos suggests a --target.
    @Test func helpMatchesBehaviour() {
        let mosaic = MosaicCommand.help
        #expect(mosaic.contains("  --grid CxR\n") && mosaic.contains("rows follow from the target's shape"))
        #expect(mosaic.contains("the same seed gives the same mosaic") && !mosaic.contains("--order shuffle"))
        #expect(mosaic.contains("--dzi zoom/mosaic.dzi \\\n"))
        #expect(GridCommand.help.contains("--grid 1000x1000 --tile-size 150 --max-memory 192M"))
        #expect(throws: CommandLineError("no photos given: name files or directories (or lists of them: --photos-from FILE), e.g. tessera mosaic --target portrait.jpg ~/Pictures -o out.jpg")) {
            try MosaicCommand.parse(["--target", "t.jpg", "-o", "m.jpg", "--columns", "3", "--tile-size", "5"])
        }
    }

    /// `grid --manifest` says where every photo went, in CSV or JSON, and a manifest that cannot
    /// be written is refused before any photo is read.
    @Test func gridManifestNamesEveryCell() {
        let directory = "\(testRoot)/tessera-grid-manifest-\(getpid())"
        mkdir(directory, 0o755)
        defer { _ = system("rm -rf '\(directory)'") }
        let photos = listNames(fixtures).filter { $0.hasSuffix(".jpg") }.map { fixtures + "/" + $0 }
        for name in ["m.csv", "m.json"] {
            let result = runTessera(["grid", fixtures, "-o", directory + "/g.jpg", "--grid", "5x4", "--tile-size", "8",
                                     "--manifest", directory + "/" + name, "--no-progress"])
            #expect(result.status == 0, "\(result.output)")
            let text = String(decoding: readFile(directory + "/" + name), as: UTF8.self)
            if name == "m.csv" {
                let lines = text.split(separator: "\n").map(String.init)
                #expect(lines.count == 21 && lines[0] == "column,row,photo")
                // Name order, repeating: cell i holds photo i mod 18.
                for cell in 0..<20 { #expect(lines[cell + 1] == "\(cell % 5),\(cell / 5),\(photos[cell % photos.count])") }
            } else {
                #expect(text.hasPrefix("{\"cells\": [\n  {\"column\": 0, \"row\": 0, \"photo\": \"\(photos[0])\"}"), "\(text.prefix(200))")
                #expect(text.hasSuffix("\"placeholders\": [],\n  \"partial\": []\n}\n") && text.split(separator: "\"column\"", omittingEmptySubsequences: false).count == 21)
            }
        }
        let refused = runTessera(["grid", fixtures, "-o", directory + "/h.jpg", "--grid", "5x4", "--tile-size", "8",
                                  "--manifest", directory + "/missing/m.csv", "--no-progress"])
        #expect(refused.status == 2 && refused.output.contains("--manifest"), "\(refused.output)")
        #expect(access(directory + "/h.jpg", F_OK) != 0)
    }

    @Test func sizesAndColours() {
        #expect(parseByteSize("64M") == 64 << 20)
        #expect(parseByteSize("64MiB") == 64 << 20)
        #expect(parseByteSize("1.5G") == 3 << 29)
        #expect(parseByteSize("4096") == 4096)
        #expect(parseByteSize("lots") == nil)
        #expect(parseColour("ff8000") == RGB(red: 255, green: 128, blue: 0))
        #expect(parseColour("fff") == nil)
    }

    @Test func helpExplainsEveryFlagWithExamples() {
        for spec in GridCommand.options {
            for name in spec.names { #expect(GridCommand.help.contains(name), "help lacks \(name)") }
        }
        #expect(GridCommand.help.contains("EXAMPLES"))
        #expect(TopLevel.help.contains("EXIT CODES"))
        #expect(throws: CommandLineError("unknown command 'mosaik' (try 'tessera --help')", argumentIndex: 1)) {
            try TopLevel.parse(["mosaik"])
        }
    }

    @Test func errorsMapToDocumentedExitCodes() {
        #expect(ExitCode(TesseraError.outputTooLarge(width: 70_000, height: 10, limit: 65_500)) == .usage)
        #expect(ExitCode(TesseraError.insufficientDiskSpace(directory: "/", neededBytes: 2, freeBytes: 1)) == .insufficientResources)
        #expect(ExitCode(TesseraError.noPhotos(searched: ["x"])) == .badInput)
        // A mosaic's target too large for the budget: the budget is short, as the message says.
        #expect(ExitCode(TesseraError.photoNeedsMemory(path: "t.heic", reason: "r", budgetToDrawBytes: 100 << 20)) == .insufficientResources)
        #expect(ExitCode(TesseraError.system(operation: "write", errno: EIO, path: "o")) == .renderFailed)
    }
}

/// "did you mean": an unknown option or command names the nearest one the table has, and
/// nothing when none is near; the message itself stays as it was.
@Suite struct SuggestionTests {
    /// The suggestion a command line's error makes (nil: none, or no error).
    func suggestion(_ parse: () throws -> Void) -> String? {
        do { try parse(); return nil } catch { return (error as? CommandLineError)?.suggestion }
    }

    @Test func unknownOptionsSuggestTheNearestSpelling() throws {
        // Cut short: --tile is --tile-size (not --title, one letter from it); --dzi-tile is --dzi-tile-size.
        #expect(suggestion { _ = try GridCommand.parse(["p", "--tile", "5"]) } == "--tile-size")
        #expect(suggestion { _ = try GridCommand.parse(["p", "--dzi-tile", "5"]) } == "--dzi-tile-size")
        // Mistyped: a letter missing, two swapped, one wrong.
        #expect(suggestion { _ = try GridCommand.parse(["p", "--qualty", "5"]) } == "--quality")
        #expect(suggestion { _ = try GridCommand.parse(["p", "--titel", "x"]) } == "--title")
        #expect(suggestion { _ = try GridCommand.parse(["p", "--encodr=serial"]) } == "--encoder")
        // Each command suggests from its own table.
        #expect(suggestion { _ = try MosaicCommand.parse(["p", "--targit", "t.jpg"]) } == "--target")
        #expect(suggestion { _ = try GridCommand.parse(["p", "--targit", "t.jpg"]) } == nil)
        #expect(suggestion { _ = try JoinCommand.parse(["parts", "--wiat", "3"]) } == "--wait")
        #expect(suggestion { _ = try AnalyseCommand.parse(["p", "--sub-cell", "3"]) } == "--sub-cells")
        // Nothing near: no suggestion, and the message is the one it always was.
        #expect(suggestion { _ = try GridCommand.parse(["p", "--colour", "red"]) } == nil)
        #expect(suggestion { _ = try GridCommand.parse(["p", "--xyz"]) } == nil)
        let error = try #require(throws: CommandLineError.self) { try GridCommand.parse(["p", "--tile", "5"], firstIndex: 2) }
        #expect(error.message == "unknown option --tile (see 'tessera grid --help')" && error.argumentIndex == 3)
        #expect(error.description == "unknown option --tile (see 'tessera grid --help'); did you mean --tile-size?")
    }

    @Test func unknownCommandsSuggestTheNearestCommand() throws {
        #expect(suggestion { _ = try TopLevel.parse(["mosiac"]) } == "mosaic")
        #expect(suggestion { _ = try TopLevel.parse(["mosaik", "p"]) } == "mosaic")
        #expect(suggestion { _ = try TopLevel.parse(["gird"]) } == "grid")
        #expect(suggestion { _ = try TopLevel.parse(["joni"]) } == "join")
        #expect(suggestion { _ = try TopLevel.parse(["analyss"]) } == "analyse")
        #expect(suggestion { _ = try TopLevel.parse(["--verison"]) } == "--version")
        #expect(suggestion { _ = try TopLevel.parse(["help", "mosiac"]) } == "mosaic")
        #expect(suggestion { _ = try TopLevel.parse(["render"]) } == nil)
        let error = try #require(throws: CommandLineError.self) { try TopLevel.parse(["mosiac"]) }
        #expect(error.description == "unknown command 'mosiac' (try 'tessera --help'); did you mean 'mosaic'?")
        // Through the binary: the same exit code, the suggestion on the error's line.
        let run = runTessera(["mosiac", "p"])
        #expect(run.status == 2 && run.output == "tessera: unknown command 'mosiac' (try 'tessera --help'); did you mean 'mosaic'?\n", "\(run)")
        let option = runTessera(["grid", "p", "--tile", "5"])
        #expect(option.status == 2 && option.output.contains("did you mean --tile-size?"), "\(option)")
    }

    @Test func editDistanceCountsEdits() {
        #expect(editDistance("kitten", "sitting") == 3)
        #expect(editDistance("mosiac", "mosaic") == 1)  // a swap is one edit
        #expect(editDistance("", "abc") == 3 && editDistance("abc", "") == 3 && editDistance("same", "same") == 0)
        #expect(editDistance("--colour", "--columns") == 4)
    }

    /// By construction a spelling belongs to one option of a command: no table names one twice,
    /// and every documented option is one the parser takes (the docs are the parser's table).
    @Test func everyCommandsTableNamesEachSpellingOnce() {
        let tables: [(String, [OptionSpec])] = [("grid", GridCommand.table.map(\.spec)), ("mosaic", MosaicCommand.table.map(\.spec)),
                                                ("join", JoinCommand.table.map(\.spec)), ("analyse", AnalyseCommand.table.map(\.spec))]
        for (name, specs) in tables {
            let spellings = specs.flatMap(\.names)
            #expect(Set(spellings).count == spellings.count, "\(name) names a spelling twice")
        }
        #expect(GridCommand.options == GridCommand.table.map(\.spec))
        #expect(MosaicCommand.table.filter(\.isHidden).map(\.spec.longName) == ["--order"])
        #expect(Set((MosaicCommand.options + MosaicCommand.renderingOptions).map(\.longName))
                == Set(MosaicCommand.table.filter { !$0.isHidden }.map(\.spec.longName)))
    }
}

/// The built `tessera`: on Linux the test bundle is an executable in the build products folder,
/// next to the tool. $TESSERA_TOOL overrides it, to run these tests against another build (an
/// older commit's, to show what they catch).
func toolPath() -> String {
    if let override = getenv("TESSERA_TOOL"), override.pointee != 0 { return String(cString: override) }
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let path = String(decoding: buffer[0..<max(0, count)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) + "/tessera"
}

/// Runs the built `tessera` with `arguments`; returns its exit status and what it printed.
/// The `names` and `cells` arrays of a viewer's cells.js, whose lines are
///     names: ["first.jpg",        cells: [0,1,2,...,
///       "second.jpg"],              7,8]
/// (the photo names used in tests contain no quotes or backslashes).
func viewerLabels(_ script: String) -> (names: [String], cells: [Int]) {
    var names: [String] = [], cells: [Int] = []
    var section = ""
    for line in script.split(separator: "\n") {
        var text = line.drop { $0 == " " }
        if text.hasPrefix("names: [") {
            section = "names"
            text = text.dropFirst(8)
        } else if text.hasPrefix("cells: [") {
            section = "cells"
            text = text.dropFirst(8)
        } else if !(text.hasPrefix("\"") || text.first?.isNumber == true || text.hasPrefix("-")) {
            section = ""
        }
        if section == "names", let open = text.firstIndex(of: "\""), let close = text.lastIndex(of: "\""), open < close {
            names.append(String(text[text.index(after: open)..<close]))
        } else if section == "cells" {
            cells += text.split(whereSeparator: { $0 == "," || $0 == "]" }).compactMap { Int($0) }
        }
    }
    return (names, cells)
}

/// Starts the tool with `arguments` (stderr to /dev/null) and returns its pid without waiting.
func spawnTessera(_ arguments: [String]) -> pid_t {
    let tool = toolPath()
    var pid: pid_t = 0
    var argv: [UnsafeMutablePointer<CChar>?] = ([tool] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    defer { posix_spawn_file_actions_destroy(&actions) }
    var environment = testEnvironment()
    defer { freeEnvironment(environment) }
    #expect(posix_spawn(&pid, tool, &actions, nil, &argv, &environment) == 0)
    return pid
}

/// The names in `directory`, sorted, hidden ones included.
func listNames(_ directory: String) -> [String] {
    var names: [String] = []
    if let listing = opendir(directory) {
        while let entry = readdir(listing) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) } }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(listing)
    }
    return names.sorted()
}

func runTessera(_ arguments: [String]) -> (status: Int32, output: String) {
    let tool = toolPath()
    guard access(tool, X_OK) == 0 else { return (-1, "tessera binary not found: \(tool)") }
    let capture = "\(testRoot)/tessera-cli-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).txt"
    defer { unlink(capture) }
    let command = ([tool] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    let status = system(testCacheAssignment + " " + command + " >" + capture + " 2>&1 </dev/null")
    var text = ""
    if let file = fopen(capture, "r") {
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, 4096, file) != nil { text += String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        fclose(file)
    }
    return ((status >> 8) & 0xFF, text)
}

func readFile(_ path: String) -> [UInt8] { (try? readWholeFile(path)) ?? [] }

func writeFile(_ bytes: [UInt8], to path: String) {
    let file = fopen(path, "wb")!
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}

/// Waits (up to two minutes) until process `pid` has a file open for writing only (the output;
/// the stripe files are read-write) in `directory`, and that file has bytes: the render is
/// drawing and encoding. False if the process ended or the time ran out first.
func waitUntilWriting(pid: pid_t, under directory: String) -> Bool {
    let deadline = monotonicNow() + 120
    while monotonicNow() < deadline {
        if kill(pid, 0) != 0 { return false }
        for name in listNames("/proc/\(pid)/fd") {
            var buffer = [CChar](repeating: 0, count: 4096)
            let count = readlink("/proc/\(pid)/fd/\(name)", &buffer, buffer.count - 1)
            guard count > 0 else { continue }
            let target = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard target.hasPrefix(directory + "/") else { continue }
            let info = String(decoding: readFile("/proc/\(pid)/fdinfo/\(name)"), as: UTF8.self)
            guard let flagsLine = info.split(separator: "\n").first(where: { $0.hasPrefix("flags:") }),
                  let flags = Int(flagsLine.dropFirst(6).filter { !$0.isWhitespace }, radix: 8),
                  flags & Int(O_ACCMODE) == Int(O_WRONLY) else { continue }
            var status = stat()
            if stat("/proc/\(pid)/fd/\(name)", &status) == 0 && status.st_size > 0 { return true }
        }
        usleep(2_000)
    }
    return false
}

/// Waits (up to two minutes) until a staging folder named `stagingPrefix`... in `directory`
/// holds a tile of the full-size level. False if process `pid` ended or the time ran out first.
func waitUntilTileWritten(under directory: String, stagingPrefix: String, pid: pid_t) -> Bool {
    let deadline = monotonicNow() + 120
    while monotonicNow() < deadline {
        if kill(pid, 0) != 0 { return false }
        for staging in listNames(directory) where staging.hasPrefix(stagingPrefix) {
            for files in listNames(directory + staging) where files.hasSuffix("_files") {
                let levels = listNames(directory + staging + "/" + files).compactMap { Int($0) }
                if let top = levels.max(), !listNames(directory + staging + "/" + files + "/\(top)").isEmpty { return true }
            }
        }
        usleep(2_000)
    }
    return false
}

/// Seconds on the monotonic clock.
func monotonicNow() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// This test process's own folder under $TMPDIR (or /tmp), made once and removed at exit: every
/// path a test makes is inside it, so two test processes never share a name.
let testRoot: String = {
    let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(base)/tessera-cli-tests-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
    precondition(made, "mkdtemp in \(base) failed")
    let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    testRootToRemove = strdup(path)
    atexit { if let path = testRootToRemove { _ = system("rm -rf '\(String(cString: path))'") } }
    return path
}()
nonisolated(unsafe) private var testRootToRemove: UnsafeMutablePointer<CChar>?

/// The tool's default cache folder ($XDG_CACHE_HOME/tessera) for the runs the tests start, in
/// the test root: a test run's libraries (hundreds of thousands of photos) must not grow the
/// user's own header index, which every later scan then reads and every compaction rewrites.
/// A test that passes --cache-dir or its own XDG_CACHE_HOME still gets its own.
let testCacheHome: String = testRoot + "/xdg-cache"

/// `XDG_CACHE_HOME='...'`, to put before a shell command.
var testCacheAssignment: String { "XDG_CACHE_HOME='\(testCacheHome)'" }

/// This process's environment with XDG_CACHE_HOME set to `testCacheHome`, for posix_spawn
/// (free with `freeEnvironment`).
func testEnvironment() -> [UnsafeMutablePointer<CChar>?] {
    var entries: [UnsafeMutablePointer<CChar>?] = []
    var at = environ
    while let entry = at.pointee {
        if strncmp(entry, "XDG_CACHE_HOME=", 15) != 0 { entries.append(strdup(entry)) }
        at += 1
    }
    return entries + [strdup("XDG_CACHE_HOME=" + testCacheHome), nil]
}

func freeEnvironment(_ entries: [UnsafeMutablePointer<CChar>?]) { entries.forEach { free($0) } }

private extension String {
    /// How many pieces `separator` cuts the string into.
    func components(separatedBy separator: String) -> Int {
        var count = 1
        var rest = Substring(self)
        while let range = rest.firstRange(of: separator) {
            count += 1
            rest = rest[range.upperBound...]
        }
        return count
    }

    func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: Character(target), omittingEmptySubsequences: false).joined(separator: replacement)
    }
}

let fixtures: String = {
    let file = #filePath
    let tests = file[..<file.lastIndex(of: "/")!]
    return String(tests[..<tests.lastIndex(of: "/")!]) + "/TesseraTests/Fixtures/orientation"
}()

@Suite struct ToolTests {
    /// Every documented exit code, from the binary itself (129, 130 and 143: the signal tests).
    @Test func everyExitCodeThroughTheBinary() {
        let directory = "\(testRoot)/tessera-exit-codes"
        mkdir(directory, 0o755)
        defer { _ = system("rm -rf '\(directory)'") }
        let grid = ["grid", fixtures, "--no-progress", "--temp-dir", directory]
        // 0: success.
        let success = runTessera(grid + ["-o", directory + "/ok.jpg", "--grid", "4x4", "--tile-size", "16"])
        #expect(success.status == 0, "\(success.output)")
        // 1: the render failed: here a write crossing a file-size limit (EFBIG); the output that
        // was there is kept.
        writeFile(Array("kept".utf8), to: directory + "/big.jpg")
        let command = "ulimit -f 256; exec '\(toolPath())' grid '\(fixtures)' -o '\(directory)/big.jpg' --grid 40x40 "
            + "--tile-size 100 --no-progress --temp-dir '\(directory)' >'\(directory)/log' 2>&1"
        let status = system("sh -c \"\(command)\"")
        let log = String(decoding: readFile(directory + "/log"), as: UTF8.self)
        #expect(status & 0x7F == 0 && (status >> 8) & 0xFF == 1, "status \(status): \(log)")
        #expect(log.contains("File too large"), "\(log)")
        #expect(readFile(directory + "/big.jpg") == Array("kept".utf8))
        // 4: a limit on open files below what a render needs (soft and hard: ulimit -n sets both),
        // said before any photo is read (it died with SIGILL inside Dispatch).
        // (The log opened first: the test process may hold more than 16 files its child inherits.)
        let few = "exec >'\(directory)/log' 2>&1; ulimit -n 16; exec '\(toolPath())' grid '\(fixtures)' -o '\(directory)/few.jpg' "
            + "--dzi '\(directory)/few.dzi' --tiff '\(directory)/few.tif' --grid 4x4 --tile-size 16 --no-progress --temp-dir '\(directory)'"
        let fewStatus = system("sh -c \"\(few)\"")
        let fewLog = String(decoding: readFile(directory + "/log"), as: UTF8.self)
        #expect(fewStatus & 0x7F == 0 && (fewStatus >> 8) & 0xFF == 4, "status \(fewStatus): \(fewLog)")
        #expect(fewLog.contains("may open at most 16 files (ulimit -n), and a render needs at least 64"), "\(fewLog)")
        #expect(access(directory + "/few.jpg", F_OK) != 0)
        // 2: usage.
        let usage = runTessera(grid + ["-o", directory + "/u.jpg", "--grid", "4x4", "--tile-size", "0"])
        #expect(usage.status == 2, "\(usage.output)")
        // 3: bad input (no photos).
        let empty = directory + "/empty"
        mkdir(empty, 0o755)
        let noPhotos = runTessera(["grid", empty, "-o", directory + "/n.jpg", "--grid", "4x4", "--tile-size", "16"])
        #expect(noPhotos.status == 3 && noPhotos.output.contains("no photos (JPEG, PNG, WebP, HEIF/HEIC, AVIF, GIF, camera RAW previews, TIFF) in"), "\(noPhotos.output)")
        // 4: not enough memory for the smallest plan.
        let memory = runTessera(grid + ["-o", directory + "/m.jpg", "--grid", "400x10", "--tile-size", "150", "--max-memory", "16M"])
        #expect(memory.status == 4, "\(memory.output)")
        #expect(listNames(directory) == ["big.jpg", "empty", "log", "ok.jpg"])
    }

    @Test func rendersAGridAndSummarises() {
        let output = "\(testRoot)/tessera-cli-\(getpid()).jpg"
        defer { unlink(output) }
        let result = runTessera(["grid", fixtures, "-o", output, "--columns", "6", "--tile-size", "40", "--no-progress"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("wrote \(output): 240 x 120 px"))
        #expect(result.output.contains("MP/s") && result.output.contains("peak RSS"))
        #expect(access(output, F_OK) == 0)
    }

    @Test func dryRunPrintsThePlanAndWritesNothing() {
        let output = "\(testRoot)/tessera-cli-dry-\(getpid()).jpg"
        let result = runTessera(["grid", fixtures, "-o", output, "--grid", "200x267", "--tile-size", "150", "--dry-run"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("30000 x 40050 px"))
        #expect(result.output.contains("stripes") && result.output.contains("workers") && result.output.contains("free space"))
        #expect(access(output, F_OK) != 0)
    }

    @Test func refusesOutputOverTheJPEGLimit() {
        let result = runTessera(["grid", fixtures, "-o", "\(testRoot)/never-1.jpg", "--grid", "500x2", "--tile-size", "150"])
        #expect(result.status == 2)
        #expect(result.output.contains("65500"))
    }

    @Test func usageErrorsExitWithTwo() {
        #expect(runTessera(["grid", "--tile-size", "x"]).status == 2)
        #expect(runTessera(["frobnicate"]).status == 2)
        #expect(runTessera(["--help"]).status == 0)
        #expect(runTessera(["grid", "--help"]).output.contains("--stripe-height"))
        let missing = runTessera(["grid", fixtures, "--dzi", "\(testRoot)/tessera-no-such-folder-\(getpid())/w.dzi", "--columns", "2", "--tile-size", "8"])
        #expect(missing.status == 2 && missing.output.contains("does not exist (create it first)"), "\(missing.output)")
        // A mosaic says so before analysing anything (it would have written its feature index).
        let cache = "\(testRoot)/tessera-no-analysis-\(getpid())"
        let mosaicMissing = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o",
                                        "\(testRoot)/tessera-no-such-folder-\(getpid())/m.jpg", "--columns", "2", "--tile-size", "8",
                                        "--cache-dir", cache])
        #expect(mosaicMissing.status == 2, "\(mosaicMissing.output)")
        #expect(access(cache, F_OK) != 0, "the mosaic analysed its photos before finding the folder missing")
        _ = system("rm -rf '\(cache)'")
    }

    /// A signal arrives mid-render (after the output has bytes, not after a guessed sleep): the
    /// exit status says which, nothing of the render is left, and the output that was there
    /// before is untouched, byte for byte.
    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143)), (SIGHUP, Int32(129)), (SIGKILL, Int32(-1))])
    func signalStopsTheRenderAndLeavesNothing(signal number: Int32, expected: Int32) throws {
        let directory = "\(testRoot)/tessera-signal-\(number)"
        mkdir(directory, 0o755)
        defer { _ = system("rm -rf '\(directory)'") }
        let previous = Array("the picture rendered yesterday".utf8)
        writeFile(previous, to: directory + "/big.jpg")
        // 20,000 x 20,000 px into the same folder as the temporaries: long enough to interrupt.
        let pid = spawnTessera(["grid", fixtures, "-o", directory + "/big.jpg", "--grid", "100x100", "--tile-size", "200",
                                "--no-progress", "--temp-dir", directory])
        let started = waitUntilWriting(pid: pid, under: directory)
        #expect(started, "the render never started writing its output")
        kill(pid, number)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if number == SIGKILL {
            #expect(status & 0x7F == SIGKILL)  // killed, no chance to clean up...
        } else {
            #expect(status & 0x7F == 0 && (status >> 8) & 0xFF == expected, "status \(status)")
        }
        // ...and still nothing is left: the stripe file and the unfinished output had no names.
        #expect(listNames(directory) == ["big.jpg"])
        #expect(readFile(directory + "/big.jpg") == previous)
    }

    /// A run waiting for its --photos-from list (a FIFO no one has opened yet) stops at SIGINT
    /// or SIGTERM with its exit code, writing nothing: it waited in open() past both.
    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143))])
    func aSignalStopsARunWaitingForItsList(signal number: Int32, expected: Int32) throws {
        let directory = "\(testRoot)/tessera-list-signal-\(number)-\(getpid())"
        mkdir(directory, 0o755)
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(mkfifo(directory + "/list", 0o600) == 0)
        let pid = spawnTessera(["grid", "--photos-from", directory + "/list", "-o", directory + "/out.jpg", "--columns", "2",
                                "--tile-size", "8", "--no-progress"])
        usleep(500_000)
        kill(pid, number)
        var status: Int32 = 0
        var waited = 0
        // Polled, so that a run that goes on waiting fails the test instead of hanging it.
        while waitpid(pid, &status, WNOHANG) == 0 && waited < 100 {
            usleep(100_000)
            waited += 1
        }
        if waited == 100 {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
            Issue.record("still waiting for its list 10 s after the signal")
        }
        #expect(status & 0x7F == 0 && (status >> 8) & 0xFF == expected, "status \(status)")
        #expect(listNames(directory) == ["list"])
    }

    /// A Deep Zoom render is staged in a folder: SIGINT and SIGTERM remove it; after SIGKILL it
    /// stays, named with the dead pid, and the next render there removes it and says so. The
    /// pyramid that was there before is untouched in every case.
    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143)), (SIGKILL, Int32(-1))])
    func signalStopsADeepZoomRender(signal number: Int32, expected: Int32) throws {
        let directory = "\(testRoot)/tessera-dzi-signal-\(number)"
        mkdir(directory, 0o755)
        defer { _ = system("rm -rf '\(directory)'") }
        let old = runTessera(["grid", fixtures + "/Portrait_1.jpg", "--dzi", directory + "/big.dzi", "--grid", "3x3",
                              "--tile-size", "32", "--no-progress"])
        #expect(old.status == 0, "\(old.output)")
        let oldFiles = ["big.dzi", "big.html", "big_files/6/0_0.jpg", "big_files/0/0_0.jpg", "big_files/viewer/cells.js"]
        let oldBytes = oldFiles.map { readFile(directory + "/" + $0) }
        #expect(oldBytes.allSatisfy { !$0.isEmpty })
        let pid = spawnTessera(["grid", fixtures, "--dzi", directory + "/big.dzi", "--grid", "100x100", "--tile-size", "200",
                                "--no-progress", "--temp-dir", directory])
        let started = waitUntilTileWritten(under: directory + "/", stagingPrefix: ".big.dzi.tessera-\(pid)-", pid: pid)
        #expect(started, "the render never wrote a tile")
        kill(pid, number)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let left = listNames(directory).filter { !["big.dzi", "big.html", "big_files"].contains($0) }
        #expect(oldFiles.map { readFile(directory + "/" + $0) } == oldBytes, "the old pyramid changed")
        if number == SIGKILL {
            #expect(status & 0x7F == SIGKILL)
            #expect(left.count == 1 && left.first?.hasPrefix(".big.dzi.tessera-\(pid)-") == true, "left behind: \(left)")
            let next = runTessera(["grid", fixtures + "/Landscape_1.jpg", "--dzi", directory + "/small.dzi", "--grid", "2x2",
                                   "--tile-size", "16", "--no-progress", "--temp-dir", directory])
            #expect(next.status == 0, "\(next.output)")
            #expect(next.output.contains("removed \(directory)/\(left.first ?? "")"), "\(next.output)")
            #expect(listNames(directory) == ["big.dzi", "big.html", "big_files", "small.dzi", "small.html", "small_files"])
        } else {
            #expect(status & 0x7F == 0 && (status >> 8) & 0xFF == expected, "status \(status)")
            #expect(left.isEmpty, "left behind: \(left)")
        }
    }

    /// Standard output and error closed by their reader (`tessera ... 2>&1 | head -1`): the render
    /// goes on, writes its output and exits 0 (SIGPIPE used to kill it, leaving no output).
    @Test func aClosedPipeDoesNotStopTheRender() throws {
        let directory = "\(testRoot)/tessera-pipe-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        // A broken photo, so that a warning is written before the render starts.
        #expect(system("mkdir -p '\(directory)/photos' && cp '\(fixtures)'/Landscape_*.jpg '\(directory)/photos/' && "
                       + "head -c 300 '\(fixtures)/Portrait_1.jpg' > '\(directory)/photos/broken.jpg'") == 0)
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let tool = toolPath()
        let arguments = [tool, "grid", directory + "/photos", "-o", directory + "/out.jpg", "--grid", "60x60", "--tile-size", "100"]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 2)
        posix_spawn_file_actions_addclose(&actions, ends[0])
        var pid: pid_t = 0
        var environment = testEnvironment()
        defer { freeEnvironment(environment) }
        #expect(posix_spawn(&pid, tool, &actions, nil, &argv, &environment) == 0)
        close(ends[1])
        close(ends[0])  // no reader left: every write of the tool's fails with EPIPE
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        #expect(status & 0x7F == 0, "killed by signal \(status & 0x7F)")
        #expect((status >> 8) & 0xFF == 0)
        #expect(access(directory + "/out.jpg", F_OK) == 0)
        #expect(listNames(directory) == ["out.jpg", "photos"])
    }

    /// What stands at an output's name must be a regular file tessera may replace, not one of
    /// the photos, and no two outputs may be the same file; all refused before any work, exit 2,
    /// with nothing changed.
    @Test func destinationsThatAreNotOursAreRefused() throws {
        let directory = "\(testRoot)/tessera-destinations-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/photos' '\(directory)/a-folder.jpg' && cp '\(fixtures)'/Landscape_1.jpg '\(fixtures)'/Portrait_1.jpg '\(directory)/photos/' && "
                       + "mkfifo '\(directory)/fifo.jpg' && echo precious > '\(directory)/target.jpg' && "
                       + "ln -s target.jpg '\(directory)/link.jpg'") == 0)
        let photo = directory + "/photos/Landscape_1.jpg"
        let photoBytes = readFile(photo)
        let grid = ["grid", directory + "/photos", "--grid", "2x2", "--tile-size", "16", "--no-progress"]
        for (output, words) in [(directory + "/fifo.jpg", "is a FIFO"), (directory + "/a-folder.jpg", "is a folder"),
                                (directory + "/link.jpg", "symbolic link"), (photo, "is one of the photos")] {
            let result = runTessera(grid + ["-o", output])
            #expect(result.status == 2, "\(output): \(result.output)")
            #expect(result.output.contains(words), "\(output): \(result.output)")
        }
        var info = stat()
        #expect(lstat(directory + "/fifo.jpg", &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO)
        #expect(lstat(directory + "/link.jpg", &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK)
        #expect(String(decoding: readFile(directory + "/target.jpg"), as: UTF8.self) == "precious\n")
        #expect(readFile(photo) == photoBytes)
        // Two outputs that are one file: -o must name a JPEG, so the viewer's page cannot be it.
        let twice = runTessera(grid + ["-o", directory + "/wall.html", "--dzi", directory + "/wall.dzi"])
        #expect(twice.status == 2 && twice.output.contains("name a .jpg/.jpeg file"), "\(twice.output)")
        let mosaic = ["mosaic", "--target", photo, directory + "/photos", "--columns", "2", "--tile-size", "16",
                      "--no-progress", "--cache-dir", directory + "/cache"]
        let manifest = runTessera(mosaic + ["-o", directory + "/m.jpg", "--manifest", directory + "/./m.jpg"])
        #expect(manifest.status == 2 && manifest.output.contains("name the same file"), "\(manifest.output)")
        // The mosaic's target is an input too.
        let target = runTessera(mosaic + ["-o", photo])
        #expect(target.status == 2 && target.output.contains("is one of the photos"), "\(target.output)")
        #expect(readFile(photo) == photoBytes)
        #expect(featureIndexFiles(directory + "/cache").isEmpty, "the mosaic analysed its photos before refusing")
        // And a plain existing file is replaced, as before.
        let fine = runTessera(grid + ["-o", directory + "/target.jpg"])
        #expect(fine.status == 0, "\(fine.output)")
    }

    /// Sizes past what any picture can have are refused when parsed, never multiplied into an
    /// overflow; a legal but vast grid is planned without a table of its cells (a 65,500 x 65,500
    /// grid of 1 px cells would be 17 GB of them): its dry run fits in 2 GB of address space.
    @Test func absurdSizesAreRefusedAndVastGridsPlannedCheaply() {
        let huge = runTessera(["grid", fixtures, "-o", "\(testRoot)/never-2.jpg", "--grid", "9223372036854775807x1", "--tile-size", "2"])
        #expect(huge.status == 2 && huge.output.contains("at most 16777216 columns"), "\(huge.output)")
        let wide = runTessera(["grid", fixtures, "-o", "\(testRoot)/never-3.jpg", "--grid", "16777216x1", "--tile-size", "16777216"])
        #expect(wide.status == 2, "\(wide.output)")
        let capture = "\(testRoot)/tessera-vast-\(getpid()).txt"
        defer { unlink(capture) }
        let status = system("sh -c 'ulimit -v 2000000; exec \"$0\" \"$@\"' '\(toolPath())' grid '\(fixtures)' -o \(testRoot)/never-99.jpg "
                            + "--grid 65500x65500 --tile-size 1 --dry-run > '\(capture)' 2>&1")
        let text = String(decoding: readFile(capture), as: UTF8.self)
        #expect(status == 0, "\(text)")
        #expect(text.contains("65500 x 65500 cells of 1 x 1 px"), "\(text)")
        // A Deep Zoom side of 2^24 px is allowed, but not in 64 MiB: refused by the plan, exit 4.
        let deep = runTessera(["grid", fixtures, "--dzi", "\(testRoot)/vast.dzi", "--grid", "16777216x16777216", "--tile-size", "1", "--dry-run"])
        #expect(deep.status == 4 && deep.output.contains("too small"), "\(deep.output)")
    }

    /// What can be known before rendering is checked before rendering: a missing --temp-dir and
    /// an output name too long for its hidden temporary name are usage errors (exit 2), not
    /// failures after the whole render (exit 1).
    @Test func lateFailuresComeEarly() {
        let long = testRoot + "/" + String(repeating: "a", count: 240) + ".jpg"
        let tooLong = runTessera(["grid", fixtures, "-o", long, "--grid", "300x300", "--tile-size", "64", "--no-progress"])
        #expect(tooLong.status == 2 && tooLong.output.contains("bytes long"), "\(tooLong.output)")
        let noTemp = runTessera(["grid", fixtures, "-o", "\(testRoot)/never-4.jpg", "--grid", "300x300", "--tile-size", "64",
                                 "--temp-dir", "/nonexistent-\(getpid())", "--no-progress"])
        #expect(noTemp.status == 2 && noTemp.output.contains("--temp-dir"), "\(noTemp.output)")
        #expect(access(long, F_OK) != 0 && access("\(testRoot)/never-4.jpg", F_OK) != 0)
    }

    /// A SIGKILLed pyramid render's staging folder can hold most of a small disk: it is removed
    /// before the free-space pre-flight, not after it refused the next render.
    @Test(.enabled(if: geteuid() == 0, "mounting a tmpfs needs root"))
    func staleStagingIsRemovedBeforeThePreflight() throws {
        let mountPoint = "\(testRoot)/tessera-small-disk-\(getpid())"
        mkdir(mountPoint, 0o755)
        defer { rmdir(mountPoint) }
        #expect(system("mount -t tmpfs -o size=8m tessera-test '\(mountPoint)'") == 0)
        defer { _ = system("umount '\(mountPoint)'") }
        // A process that has ended, so its pid names a dead render.
        var pid: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { free(argv[0]) }
        #expect(posix_spawn(&pid, "/bin/true", nil, nil, &argv, environ) == 0)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        let stale = mountPoint + "/.big.dzi.tessera-\(pid)-abc"
        #expect(system("mkdir -p '\(stale)/big_files/0' && touch '\(stale)/.lock' && head -c 6000000 /dev/zero > '\(stale)/big_files/0/0_0.jpg'") == 0)
        // The pyramid needs 2.6 MiB by the pre-flight's count; 2 MiB are free until the stale
        // folder goes. Before the fix the pre-flight refused (exit 4) and the render that would
        // have removed the folder never ran: no "removed" line, the folder still there. (Whether
        // the render then fits is the pre-flight's own business, tested elsewhere; in one full
        // run of the suite out of about ten, under heavy parallel load, the tmpfs reported less
        // free space than the removal should have left, a cause not found.)
        let result = runTessera(["grid", fixtures, "--dzi", mountPoint + "/small.dzi", "--grid", "10x10", "--tile-size", "100",
                                 "--temp-dir", mountPoint, "--no-progress"])
        #expect(result.output.contains("removed \(stale)"), "\(result.output)")
        #expect(!listNames(mountPoint).contains(".big.dzi.tessera-\(pid)-abc"))
        if result.status == 0 { #expect(listNames(mountPoint) == ["small.dzi", "small.html", "small_files"]) }
    }

    /// An argument that is not UTF-8 is refused (it would name another file); an output in a
    /// folder that cannot be written, or over an immutable file, is refused before any work.
    @Test func unusableNamesAndDestinationsAreRefusedEarly() throws {
        let directory = "\(testRoot)/tessera-names-\(getpid())"
        defer { _ = system("chattr -i '\(directory)/locked.jpg' 2>/dev/null; chmod 755 '\(directory)/readonly' 2>/dev/null; rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/readonly' && echo old > '\(directory)/locked.jpg'") == 0)
        // -o with a byte that is not UTF-8, through posix_spawn (a Swift String cannot hold it).
        let tool = toolPath()
        var output: [CChar] = Array((directory + "/").utf8).map { CChar(bitPattern: $0) } + [CChar(bitPattern: 0xFF), 0x6F, 0x2E, 0x6A, 0x70, 0x67, 0]
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup(tool), strdup("grid"), strdup(fixtures), strdup("-o"),
                                                    output.withUnsafeMutableBufferPointer { strdup($0.baseAddress!) },
                                                    strdup("--grid"), strdup("2x2"), strdup("--tile-size"), strdup("8"), nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var environment = testEnvironment()
        defer { freeEnvironment(environment) }
        #expect(posix_spawn(&pid, tool, &actions, nil, &argv, &environment) == 0)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        #expect((status >> 8) & 0xFF == 2)
        #expect(listNames(directory) == ["locked.jpg", "readonly"])
        if geteuid() == 0 {
            // Root may write anywhere, but not over an immutable file.
            if system("chattr +i '\(directory)/locked.jpg' 2>/dev/null") == 0 {
                let locked = runTessera(["grid", fixtures, "-o", directory + "/locked.jpg", "--grid", "2x2", "--tile-size", "8"])
                #expect(locked.status == 2 && locked.output.contains("immutable"), "\(locked.output)")
            }
        } else {
            chmod(directory + "/readonly", 0o555)
            let readonly = runTessera(["grid", fixtures, "-o", directory + "/readonly/out.jpg", "--grid", "2x2", "--tile-size", "8"])
            #expect(readonly.status == 2 && readonly.output.contains("cannot be written"), "\(readonly.output)")
        }
    }

    @Test func strictRefusesAFolderWithABrokenPhoto() {
        let directory = "\(testRoot)/tessera-strict-\(getpid())"
        mkdir(directory, 0o755)
        let good = directory + "/good.jpg", broken = directory + "/broken.jpg", output = directory + "/out.jpg"
        defer { unlink(good); unlink(broken); unlink(output); rmdir(directory) }
        #expect(system("cp '\(fixtures)/Portrait_1.jpg' '\(good)' && head -c 300 '\(good)' > '\(broken)'") == 0)
        let strict = runTessera(["grid", directory, "-o", output, "--columns", "2", "--tile-size", "20", "--strict"])
        #expect(strict.status == 3, "\(strict.output)")
        #expect(strict.output.contains("broken.jpg") && access(output, F_OK) != 0)
        let lenient = runTessera(["grid", directory, "-o", output, "--columns", "2", "--tile-size", "20", "--no-progress"])
        #expect(lenient.status == 0, "\(lenient.output)")
        #expect(lenient.output.contains("warning: skipping \(broken)"))
        // Named once, in the warning; the summary counts it.
        #expect(lenient.output.contains("1 file(s) skipped (see the warnings above)"))
        #expect(lenient.output.components(separatedBy: broken).count == 2, "\(lenient.output)")
    }

    /// Pre-flight on a real 1 MiB tmpfs (needs root, as CI has).
    @Test(.enabled(if: geteuid() == 0, "mounting a tmpfs needs root"))
    func notEnoughDiskExitsWithFourBeforeRendering() {
        let mountPoint = "\(testRoot)/tessera-small-disk-mosaic-\(getpid())"
        mkdir(mountPoint, 0o755)
        defer { rmdir(mountPoint) }
        #expect(system("mount -t tmpfs -o size=1m tessera-test '\(mountPoint)'") == 0)
        defer { _ = system("umount '\(mountPoint)'") }
        let result = runTessera(["grid", fixtures, "-o", mountPoint + "/out.jpg", "--grid", "40x40", "--tile-size", "100",
                                 "--temp-dir", mountPoint])
        #expect(result.status == 4, "\(result.output)")
        #expect(result.output.contains("not enough disk space in \(mountPoint): needs"))
        #expect(result.output.contains("free"))
        let dry = runTessera(["grid", fixtures, "-o", mountPoint + "/out.jpg", "--grid", "40x40", "--tile-size", "100",
                              "--temp-dir", mountPoint, "--dry-run"])
        #expect(dry.status == 4 && dry.output.contains("NOT ENOUGH"))
    }

    /// On a disk with room for the preview's work but not the full render's: exit 4 before the
    /// preview is written, so the one an earlier run wrote stands (it was replaced, and then
    /// the render refused).
    @Test(.enabled(if: geteuid() == 0, "mounting a tmpfs needs root"))
    func notEnoughDiskForTheRenderLeavesThePreviewAsItWas() {
        let mountPoint = "\(testRoot)/tessera-small-disk-preview-\(getpid())"
        let preview = "\(testRoot)/tessera-small-disk-preview-\(getpid()).jpg"
        mkdir(mountPoint, 0o755)
        defer { rmdir(mountPoint); unlink(preview) }
        #expect(system("mount -t tmpfs -o size=2m tessera-test '\(mountPoint)'") == 0)
        defer { _ = system("umount '\(mountPoint)'") }
        writeFile(Array("an earlier preview".utf8), to: preview)
        let result = runTessera(["grid", fixtures, "-o", mountPoint + "/out.jpg", "--grid", "40x40", "--tile-size", "100",
                                 "--temp-dir", mountPoint, "--preview", preview])
        #expect(result.status == 4 && result.output.contains("not enough disk space in \(mountPoint)"), "\(result.output)")
        #expect(!result.output.contains("preview: wrote"), "\(result.output)")
        #expect(readFile(preview) == Array("an earlier preview".utf8))
    }

    /// A mosaic's Deep Zoom viewer names, for every cell, the photo the manifest says is there.
    @Test func mosaicViewerLabelsAgreeWithTheManifest() throws {
        let directory = "\(testRoot)/tessera-mosaic-dzi-\(getpid())"
        mkdir(directory, 0o755)
        defer { _ = system("rm -rf '\(directory)'") }
        let result = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "--dzi", directory + "/m.dzi",
                                 "--columns", "30", "--tile-size", "8", "--min-distance", "0", "--manifest", directory + "/m.csv",
                                 "--cache-dir", directory + "/cache", "--no-progress"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("wrote \(directory)/m.dzi: 240 x 160 px"), "\(result.output)")
        #expect(listNames(directory) == ["cache", "m.csv", "m.dzi", "m.html", "m_files"])
        let script = String(decoding: readFile(directory + "/m_files/viewer/cells.js"), as: UTF8.self)
        let (names, cells) = viewerLabels(script)
        #expect(cells.count == 600 && script.contains("grid: {columns: 30, rows: 20, cellWidth: 8, cellHeight: 8}"))
        let rows = String(decoding: readFile(directory + "/m.csv"), as: UTF8.self).split(separator: "\n").dropFirst()
        #expect(rows.count == 600)
        for row in rows {
            let fields = row.split(separator: ",").map(String.init)
            guard fields.count >= 3, let column = Int(fields[0]), let line = Int(fields[1]) else {
                Issue.record("manifest line \(row)")
                continue
            }
            let photo = fields[2].hasPrefix("\"") ? String(fields[2].dropFirst().dropLast()) : fields[2]
            // The viewer names the file, not the folders it came from.
            #expect(names[cells[line * 30 + column]] == String(photo.split(separator: "/").last!), "cell \(column),\(line)")
        }
        #expect(!script.contains(fixtures) && !String(decoding: readFile(directory + "/m.html"), as: UTF8.self).contains(fixtures))
        // --viewer-labels path writes the paths as given; none, no names at all.
        for (labels, expectPaths) in [("path", true), ("none", false)] {
            let again = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "--dzi", directory + "/m.dzi",
                                    "--columns", "30", "--tile-size", "8", "--min-distance", "0", "--viewer-labels", labels,
                                    "--cache-dir", directory + "/cache", "--no-progress"])
            #expect(again.status == 0, "\(again.output)")
            let text = String(decoding: readFile(directory + "/m_files/viewer/cells.js"), as: UTF8.self)
            #expect(text.contains(fixtures + "/") == expectPaths, "\(labels): \(text.prefix(300))")
            if !expectPaths { #expect(text.contains("names: []") && !text.contains(".jpg"), "\(text.prefix(300))") }
        }
    }

    @Test func mosaicTakesRowsFromTheTargetAndWritesAManifest() {
        let output = "\(testRoot)/tessera-mosaic-\(getpid()).jpg", manifest = "\(testRoot)/tessera-mosaic-\(getpid()).json"
        let cache = "\(testRoot)/tessera-mosaic-cache-\(getpid())"
        defer { unlink(output); unlink(manifest); _ = system("rm -rf '\(cache)'") }
        // Landscape_1 is 1800 x 1200 upright: 30 columns of square cells make 20 rows.
        let result = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", output, "--columns", "30",
                                 "--tile-size", "8", "--min-distance", "0", "--manifest", manifest, "--cache-dir", cache, "--no-progress"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("wrote \(output): 240 x 160 px"))
        #expect(result.output.contains("colour match: mean ΔE2000") && result.output.contains("18 photo(s) analysed"))
        let json = String(decoding: readFile(manifest), as: UTF8.self)
        #expect(json.hasPrefix("{\"cells\": [\n  {\"column\": 0, \"row\": 0, \"photo\": "))
        #expect(json.components(separatedBy: "\"column\"") == 601)  // 600 cells
        let again = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", output, "--columns", "30",
                                "--tile-size", "8", "--min-distance", "0", "--cache-dir", cache, "--no-progress"])
        #expect(again.output.contains("0 photo(s) analysed, 18 from the index"), "\(again.output)")
        #expect(runTessera(["mosaic", fixtures, "-o", output, "--columns", "3", "--tile-size", "8"]).status == 2)  // no --target
        #expect(runTessera(["help", "mosaic"]).output.contains("--min-distance"))
    }

    @Test func noPhotosExitsWithThree() {
        let result = runTessera(["grid", "/dev/null", "-o", "\(testRoot)/never-6.jpg", "--columns", "2", "--tile-size", "10"])
        #expect(result.status == 3, "\(result.output)")
    }
}
