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
        #expect(options.dryRun && !options.showProgress && options.strict)
    }

    @Test func columnsAloneLeaveRowsToThePhotoCount() throws {
        let options = try GridCommand.parse(["p", "-o", "o.jpg", "--columns", "10", "--tile-size=200x150"])
        #expect(options.columns == 10 && options.rows == nil)
        #expect(options.cellWidth == 200 && options.cellHeight == 150)
    }

    @Test func errorsNameTheArgument() {
        #expect(throws: CommandLineError("--quality expects a whole number in 1...100, got '0'", argumentIndex: 8)) {
            try GridCommand.parse(["p", "-o", "o.jpg", "--columns", "3", "--quality", "0", "--tile-size", "5"], firstIndex: 2)
        }
        #expect(throws: CommandLineError("unknown option --colour (see 'tessera grid --help')", argumentIndex: 3)) {
            try GridCommand.parse(["p", "--colour", "red"], firstIndex: 2)
        }
        #expect(throws: CommandLineError.self) { try GridCommand.parse(["p", "-o", "o.jpg", "--grid", "10by10", "--tile-size", "5"]) }
        #expect(throws: CommandLineError("--tile-size N is required")) { try GridCommand.parse(["p", "-o", "o.jpg", "--grid", "2x2"]) }
        #expect(throws: CommandLineError("-o OUT.jpg is required")) { try GridCommand.parse(["p", "--grid", "2x2", "--tile-size", "5"]) }
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
        #expect(throws: CommandLineError.self) { try TopLevel.parse(["mosaik"]) }
    }

    @Test func errorsMapToDocumentedExitCodes() {
        #expect(ExitCode(TesseraError.outputTooLarge(width: 70_000, height: 10, limit: 65_500)) == .usage)
        #expect(ExitCode(TesseraError.insufficientDiskSpace(directory: "/", neededBytes: 2, freeBytes: 1)) == .insufficientResources)
        #expect(ExitCode(TesseraError.noPhotos(searched: ["x"])) == .badInput)
        #expect(ExitCode(TesseraError.system(operation: "write", errno: EIO, path: "o")) == .renderFailed)
    }
}

/// The built `tessera`: on Linux the test bundle is an executable in the build products folder,
/// next to the tool.
func toolPath() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let path = String(decoding: buffer[0..<max(0, count)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) + "/tessera"
}

/// Runs the built `tessera` with `arguments`; returns its exit status and what it printed.
func runTessera(_ arguments: [String]) -> (status: Int32, output: String) {
    let tool = toolPath()
    guard access(tool, X_OK) == 0 else { return (-1, "tessera binary not found: \(tool)") }
    let capture = "/tmp/tessera-cli-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).txt"
    defer { unlink(capture) }
    let command = ([tool] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    let status = system(command + " >" + capture + " 2>&1 </dev/null")
    var text = ""
    if let file = fopen(capture, "r") {
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, 4096, file) != nil { text += String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        fclose(file)
    }
    return ((status >> 8) & 0xFF, text)
}

func readFile(_ path: String) -> [UInt8] { (try? readWholeFile(path)) ?? [] }

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
    @Test func rendersAGridAndSummarises() {
        let output = "/tmp/tessera-cli-\(getpid()).jpg"
        defer { unlink(output) }
        let result = runTessera(["grid", fixtures, "-o", output, "--columns", "6", "--tile-size", "40", "--no-progress"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("wrote \(output): 240 x 120 px"))
        #expect(result.output.contains("MP/s") && result.output.contains("peak RSS"))
        #expect(access(output, F_OK) == 0)
    }

    @Test func dryRunPrintsThePlanAndWritesNothing() {
        let output = "/tmp/tessera-cli-dry-\(getpid()).jpg"
        let result = runTessera(["grid", fixtures, "-o", output, "--grid", "200x267", "--tile-size", "150", "--dry-run"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("30000 x 40050 px"))
        #expect(result.output.contains("stripes") && result.output.contains("workers") && result.output.contains("free space"))
        #expect(access(output, F_OK) != 0)
    }

    @Test func refusesOutputOverTheJPEGLimit() {
        let result = runTessera(["grid", fixtures, "-o", "/tmp/never.jpg", "--grid", "500x2", "--tile-size", "150"])
        #expect(result.status == 2)
        #expect(result.output.contains("65500"))
    }

    @Test func usageErrorsExitWithTwo() {
        #expect(runTessera(["grid", "--tile-size", "x"]).status == 2)
        #expect(runTessera(["frobnicate"]).status == 2)
        #expect(runTessera(["--help"]).status == 0)
        #expect(runTessera(["grid", "--help"]).output.contains("--stripe-height"))
    }

    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143)), (SIGKILL, Int32(-1))])
    func signalStopsTheRenderAndLeavesNothing(signal number: Int32, expected: Int32) throws {
        let directory = "/tmp/tessera-signal-\(getpid())-\(number)"
        mkdir(directory, 0o755)
        defer { unlink(directory + "/big.jpg"); rmdir(directory) }
        // 20,000 x 20,000 px into the same folder as the temporaries: long enough to interrupt.
        let tool = toolPath()
        var pid: pid_t = 0
        let arguments = [tool, "grid", fixtures, "-o", directory + "/big.jpg", "--grid", "100x100", "--tile-size", "200",
                         "--no-progress", "--temp-dir", directory]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        defer { posix_spawn_file_actions_destroy(&actions) }
        #expect(posix_spawn(&pid, tool, &actions, nil, &argv, environ) == 0)
        usleep(700_000)
        kill(pid, number)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if number == SIGKILL {
            #expect(status & 0x7F == SIGKILL)  // killed, no chance to clean up...
        } else {
            #expect((status >> 8) & 0xFF == expected)
        }
        // ...and still nothing is left: the stripe file and the unfinished output had no names.
        var names: [String] = []
        if let listing = opendir(directory) {
            while let entry = readdir(listing) {
                let name = withUnsafePointer(to: entry.pointee.d_name) { $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) } }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(listing)
        }
        #expect(names.isEmpty, "left behind: \(names)")
    }

    @Test func strictRefusesAFolderWithABrokenPhoto() {
        let directory = "/tmp/tessera-strict-\(getpid())"
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
        #expect(lenient.output.contains("1 file(s) skipped") && lenient.output.contains("  skipped      \(broken): "))
    }

    /// Pre-flight on a real 1 MiB tmpfs (needs root, as CI has).
    @Test(.enabled(if: geteuid() == 0, "mounting a tmpfs needs root"))
    func notEnoughDiskExitsWithFourBeforeRendering() {
        let mountPoint = "/tmp/tessera-small-disk-\(getpid())"
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

    @Test func mosaicTakesRowsFromTheTargetAndWritesAManifest() {
        let output = "/tmp/tessera-mosaic-\(getpid()).jpg", manifest = "/tmp/tessera-mosaic-\(getpid()).json"
        let cache = "/tmp/tessera-mosaic-cache-\(getpid())"
        defer { unlink(output); unlink(manifest); _ = system("rm -rf '\(cache)'") }
        // Landscape_1 is 1800 x 1200 upright: 30 columns of square cells make 20 rows.
        let result = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", output, "--columns", "30",
                                 "--tile-size", "8", "--min-distance", "0", "--manifest", manifest, "--cache-dir", cache, "--no-progress"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("wrote \(output): 240 x 160 px"))
        #expect(result.output.contains("mean Oklab error") && result.output.contains("18 photo(s) analysed"))
        let json = String(decoding: readFile(manifest), as: UTF8.self)
        #expect(json.hasPrefix("[\n  {\"column\": 0, \"row\": 0, \"photo\": "))
        #expect(json.components(separatedBy: "\"column\"") == 601)  // 600 cells
        let again = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", output, "--columns", "30",
                                "--tile-size", "8", "--min-distance", "0", "--cache-dir", cache, "--no-progress"])
        #expect(again.output.contains("0 photo(s) analysed, 18 from the index"), "\(again.output)")
        #expect(runTessera(["mosaic", fixtures, "-o", output, "--columns", "3", "--tile-size", "8"]).status == 2)  // no --target
        #expect(runTessera(["help", "mosaic"]).output.contains("--min-distance"))
    }

    @Test func noPhotosExitsWithThree() {
        let result = runTessera(["grid", "/dev/null", "-o", "/tmp/never.jpg", "--columns", "2", "--tile-size", "10"])
        #expect(result.status == 3, "\(result.output)")
    }
}
