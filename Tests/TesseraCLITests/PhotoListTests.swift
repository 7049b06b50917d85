// PhotoListTests.swift — photo lists (--photos-from, -0, standard input) and reports that scale
// (issue 27): lists parse, combine with folders and give the same picture as the folder; a list
// that cannot be read is exit 2; skipped photos and a dry run's duplicates are named a few per
// reason and counted, every one with --verbose and in --progress json; the ETA of an analysis.
import Foundation
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

/// Runs the binary with standard input from `input` (a file), standard output and error apart.
func runTessera(_ arguments: [String], input: String) -> (status: Int32, standardOutput: String, standardError: String) {
    let base = "\(testRoot)/tessera-list-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    defer { unlink(base + ".out"); unlink(base + ".err") }
    let command = ([toolPath()] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    let status = system(testCacheAssignment + " " + command + " >'\(base).out' 2>'\(base).err' <'\(input)'")
    return ((status >> 8) & 0xFF, String(decoding: readFile(base + ".out"), as: UTF8.self),
            String(decoding: readFile(base + ".err"), as: UTF8.self))
}

/// Writes `bytes` to `path`.
private func write(_ bytes: [UInt8], to path: String) {
    let file = fopen(path, "wb")!
    _ = bytes.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}

/// A folder for one test, removed after it.
private func scratchFolder(_ name: String) -> String {
    let directory = "\(testRoot)/tessera-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    mkdir(directory, 0o755)
    return directory
}

/// The fixtures' photo paths, sorted.
private let fixturePhotos = listNames(fixtures).filter { $0.hasSuffix(".jpg") }.map { fixtures + "/" + $0 }

@Suite struct PhotoListParsingTests {
    private static let rest = ["-o", "o.jpg", "--columns", "2", "--tile-size", "5"]

    @Test func listsParseRepeatAndStandInForPhotos() throws {
        let options = try GridCommand.parse(["--photos-from", "a.txt", "--photos-from=b.txt", "c.jpg"] + Self.rest)
        #expect(options.photoLists == [PhotoList(path: "a.txt"), PhotoList(path: "b.txt")])
        #expect(options.photoPaths == ["c.jpg"] && options.search.lists.count == 2)
        // A list alone names photos; -0 (before or after) makes every list NUL-separated.
        let nul = try GridCommand.parse(["-0", "--photos-from", "-", "--photos-from", "x"] + Self.rest)
        #expect(nul.photoPaths.isEmpty && nul.photoLists == [PhotoList(path: "-", nulSeparated: true), PhotoList(path: "x", nulSeparated: true)])
        #expect(try GridCommand.parse(["--photos-from", "x", "--null"] + Self.rest).photoLists.allSatisfy(\.nulSeparated))
        let mosaic = try MosaicCommand.parse(["--target", "t.jpg", "--photos-from", "l.txt", "-v"] + Self.rest)
        #expect(mosaic.render.photoLists == [PhotoList(path: "l.txt")] && mosaic.render.verbose)
        let analyse = try AnalyseCommand.parse(["--photos-from", "l.txt", "-0", "--tile-size", "8", "--verbose"])
        #expect(analyse.photoLists == [PhotoList(path: "l.txt", nulSeparated: true)] && analyse.verbose)
        #expect(analyse.search.lists == analyse.photoLists)
        #expect(try !GridCommand.parse(["p"] + Self.rest).verbose)
    }

    @Test func standardInputIsOneListAndMinusZeroNeedsOne() {
        func message(_ arguments: [String]) -> String? {
            do { _ = try GridCommand.parse(arguments + Self.rest); return nil } catch { return error.message }
        }
        #expect(message(["--photos-from", "-", "--photos-from", "-"])
                == "--photos-from -: standard input is read once, and --photos-from - reads it already")
        #expect(message(["--photos-from", "/dev/stdin", "--photos-from", "-"])?.contains("standard input is read once") == true)
        #expect(message(["p", "-0"]) == "-0 says the --photos-from lists are NUL-separated: give --photos-from FILE with it")
        #expect(message(["--photos-from", ""]) == "--photos-from expects a file listing photos, or - for standard input")
        // Still: no photos and no list is the usage error it was.
        #expect(message([])?.hasPrefix("no photos given: name files or directories (or lists of them: --photos-from FILE)") == true)
        #expect(throws: CommandLineError.self) { try AnalyseCommand.parse(["--tile-size", "8"]) }
    }
}

@Suite struct PhotoListToolTests {
    /// A list of the fixtures, by lines, by NULs and on standard input, gives the picture the
    /// folder gives; combined with a folder, the photos of both (each once).
    @Test func aListGivesTheFoldersPicture() throws {
        let directory = scratchFolder("lists")
        defer { _ = system("rm -rf '\(directory)'") }
        let shape = ["--columns", "6", "--tile-size", "12", "--no-progress"]
        let folder = runTessera(["grid", fixtures, "-o", directory + "/folder.jpg"] + shape)
        #expect(folder.status == 0, "\(folder.output)")
        let expected = readFile(directory + "/folder.jpg")
        try #require(expected.count > 1000)

        write(Array((fixturePhotos.joined(separator: "\n") + "\n\n").utf8), to: directory + "/lines.txt")
        write(Array(fixturePhotos.joined(separator: "\0").utf8), to: directory + "/nul.txt")
        let lines = runTessera(["grid", "--photos-from", directory + "/lines.txt", "-o", directory + "/lines.jpg"] + shape)
        #expect(lines.status == 0 && !lines.output.contains("warning"), "\(lines.output)")
        #expect(readFile(directory + "/lines.jpg") == expected)
        let nul = runTessera(["grid", "--photos-from", directory + "/nul.txt", "-0", "-o", directory + "/nul.jpg"] + shape)
        #expect(nul.status == 0 && !nul.output.contains("warning"), "\(nul.output)")
        #expect(readFile(directory + "/nul.jpg") == expected)
        let piped = runTessera(["grid", "--photos-from", "-", "-o", directory + "/stdin.jpg"] + shape, input: directory + "/lines.txt")
        #expect(piped.status == 0 && piped.standardError.isEmpty, "\(piped.standardError)")
        #expect(readFile(directory + "/stdin.jpg") == expected)

        // Half the photos listed, the folder named too: every photo once, the same picture.
        write(Array(fixturePhotos.prefix(9).joined(separator: "\n").utf8), to: directory + "/half.txt")
        let mixed = runTessera(["grid", fixtures, "--photos-from", directory + "/half.txt", "-o", directory + "/mixed.jpg"] + shape)
        #expect(mixed.status == 0, "\(mixed.output)")
        #expect(readFile(directory + "/mixed.jpg") == expected)
        let dry = runTessera(["grid", "--photos-from", directory + "/half.txt", "--photos-from", directory + "/lines.txt",
                              "-o", directory + "/x.jpg", "--columns", "6", "--tile-size", "12", "--dry-run"])
        #expect(dry.output.contains("photos      18 usable"), "\(dry.output)")
    }

    /// A path holding a newline is one path in a NUL-separated list; read by lines, the list is
    /// refused at its NUL byte.
    @Test func nulSeparatedListsTakeAnyName() {
        let directory = scratchFolder("nul-names")
        defer { _ = system("rm -rf '\(directory)'") }
        let odd = directory + "/two\nlines.jpg"
        #expect(system("cp '\(fixtures)/Portrait_1.jpg' '\(odd)'") == 0)
        write(Array((odd + "\0").utf8), to: directory + "/list")
        let arguments = ["grid", "--photos-from", directory + "/list", "-o", directory + "/o.jpg", "--columns", "1", "--tile-size", "8",
                         "--no-progress"]
        let nul = runTessera(arguments + ["-0"])
        #expect(nul.status == 0 && !nul.output.contains("warning"), "\(nul.output)")
        // Read by lines, its first line is a missing path, and its second holds the NUL: refused.
        let byLines = runTessera(arguments)
        #expect(byLines.status == 3, "\(byLines.output)")
        #expect(byLines.output.contains("warning: skipping \(directory)/two: no such file or folder")
                && byLines.output.contains("holds NUL bytes"), "\(byLines.output)")
        // Two paths (find -print0) read as lines: one line holding a NUL, which no path can. It
        // is refused, naming -0, rather than drawn as its first path alone.
        write(Array("\(fixturePhotos[0])\0\(fixturePhotos[1])\0".utf8), to: directory + "/printed")
        let printed = runTessera(["grid", "--photos-from", directory + "/printed", "-o", directory + "/p.jpg", "--columns", "2",
                                  "--tile-size", "8", "--no-progress"])
        #expect(printed.status == 3 && printed.output.contains("holds NUL bytes") && printed.output.contains("give -0"), "\(printed.output)")
        #expect(access(directory + "/p.jpg", F_OK) != 0)
    }

    /// A list that cannot be read is exit 2 naming --photos-from and the path, before any photo
    /// is read; a folder given as a list is refused so. Entries that are missing or broken are
    /// skipped with the warnings a folder's scan gives.
    @Test func badListsAndBadEntries() {
        let directory = scratchFolder("bad-lists")
        defer { _ = system("rm -rf '\(directory)'") }
        let output = directory + "/o.jpg"
        let shape = ["-o", output, "--columns", "2", "--tile-size", "8", "--no-progress"]
        let missing = runTessera(["grid", fixtures, "--photos-from", directory + "/no-list.txt"] + shape)
        #expect(missing.status == 2, "\(missing.output)")
        #expect(missing.output.contains("tessera: --photos-from \(directory)/no-list.txt: no such file"), "\(missing.output)")
        let folder = runTessera(["mosaic", "--target", fixturePhotos[0], "--photos-from", fixtures] + shape)
        #expect(folder.status == 2 && folder.output.contains("--photos-from \(fixtures) is a folder"), "\(folder.output)")
        let analyse = runTessera(["analyse", "--photos-from", directory + "/no-list.txt", "--tile-size", "8", "--cache-dir", directory + "/c"])
        #expect(analyse.status == 2 && analyse.output.contains("--photos-from"), "\(analyse.output)")
        #expect(access(output, F_OK) != 0 && access(directory + "/c", F_OK) != 0)

        // The same broken photo, found in a folder and named in a list: the same warning.
        mkdir(directory + "/photos", 0o755)
        let broken = directory + "/photos/broken.jpg"
        #expect(system("head -c 300 '\(fixturePhotos[0])' > '\(broken)'") == 0)
        write(Array("\(broken)\n\(directory)/gone.jpg\n\(fixturePhotos[1])\n".utf8), to: directory + "/list.txt")
        let scanned = runTesseraSplit(["grid", directory + "/photos", fixturePhotos[1]] + shape)
        let listed = runTesseraSplit(["grid", "--photos-from", directory + "/list.txt"] + shape)
        #expect(scanned.status == 0 && listed.status == 0, "\(scanned) \(listed)")
        let warning = scanned.standardError.split(separator: "\n").filter { $0.contains("broken.jpg") }
        #expect(warning.count == 1 && listed.standardError.split(separator: "\n").filter { $0.contains("broken.jpg") } == warning,
                "\(scanned.standardError) | \(listed.standardError)")
        #expect(listed.standardError.contains("warning: skipping \(directory)/gone.jpg: no such file or folder"))
        let strict = runTessera(["grid", "--photos-from", directory + "/list.txt", "--strict"] + shape)
        #expect(strict.status == 3 && strict.output.contains("--strict: 2 photo(s) would be skipped"), "\(strict.output)")
        // No photo at all: the lists are named, not the paths in them.
        write(Array("\(directory)/gone.jpg\n".utf8), to: directory + "/none.txt")
        let none = runTessera(["grid", "--photos-from", directory + "/none.txt"] + shape)
        #expect(none.status == 3 && none.output.contains("in the list \(directory)/none.txt"), "\(none.output)")
        // An output that is the list itself (the manifest, or -o of a list named like a JPEG)
        // is refused before anything is written, and the list kept.
        let list = readFile(directory + "/list.txt")
        let overList = runTessera(["grid", "--photos-from", directory + "/list.txt", "--manifest", directory + "/list.txt"] + shape)
        #expect(overList.status == 2 && overList.output.contains("it is the list of photos read"), "\(overList.output)")
        #expect(readFile(directory + "/list.txt") == list)
        write(list, to: directory + "/list.jpg")
        let jpegList = runTessera(["grid", "--photos-from", directory + "/list.jpg", "-o", directory + "/list.jpg", "--columns", "2",
                                   "--tile-size", "8", "--no-progress"])
        #expect(jpegList.status == 2 && jpegList.output.contains("it is the list of photos read"), "\(jpegList.output)")
        #expect(readFile(directory + "/list.jpg") == list)
        // The same list on standard input, redirected from the output's file.
        let standardInput = runTessera(["grid", "--photos-from", "-", "-o", directory + "/list.jpg", "--columns", "2", "--tile-size", "8",
                                        "--no-progress"], input: directory + "/list.jpg")
        #expect(standardInput.status == 2 && standardInput.standardError.contains("it is the list of photos read"), "\(standardInput)")
        #expect(readFile(directory + "/list.jpg") == list)
    }

    /// 20,000 paths in a list render the picture their folder does. The photos are hard links
    /// to three 16 px JPEGs (Tessera's own renders of fixtures, their mark rewritten so they
    /// count as photos), so the test costs the scan and not 20,000 decodes of 350 KiB photos.
    @Test func twentyThousandListedPhotos() throws {
        let directory = scratchFolder("many")
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory + "/photos", 0o755)
        var small: [String] = []
        for index in 0..<3 {
            let path = directory + "/small\(index).jpg"
            let made = runTessera(["grid", fixturePhotos[index], "-o", path, "--columns", "1", "--tile-size", "16", "--no-progress"])
            try #require(made.status == 0, "\(made.output)")
            var bytes = readFile(path)
            let mark = Array(JPEGMarks.outputComment.utf8), other = Array("a small photo for the lists".utf8)
            try #require(mark.count == other.count)
            let at = try #require((0...(bytes.count - mark.count)).first { Array(bytes[$0..<$0 + mark.count]) == mark })
            bytes.replaceSubrange(at..<at + mark.count, with: other)
            write(bytes, to: path)
            small.append(path)
        }
        var paths: [String] = []
        for index in 0..<20_000 {
            let path = directory + "/photos/" + String(format: "p%05d.jpg", index)
            #expect(link(small[index % 3], path) == 0)
            paths.append(path)
        }
        write(Array(paths.shuffled().joined(separator: "\n").utf8), to: directory + "/list.txt")
        let shape = ["--columns", "200", "--tile-size", "2", "--no-progress"]
        let folder = runTessera(["grid", directory + "/photos", "-o", directory + "/folder.jpg"] + shape)
        #expect(folder.status == 0 && folder.output.contains("400 x 200 px"), "\(folder.output)")
        let listed = runTessera(["grid", "--photos-from", directory + "/list.txt", "-o", directory + "/list.jpg"] + shape)
        #expect(listed.status == 0 && !listed.output.contains("warning"), "\(listed.output)")
        let picture = readFile(directory + "/folder.jpg")
        try #require(picture.count > 1000)
        #expect(readFile(directory + "/list.jpg") == picture)
    }

    /// 50 broken photos: one line (their count, their reason, 3 named), all 50 with --verbose,
    /// and 50 events in JSON.
    @Test func skippedPhotosAreSummarised() throws {
        let directory = scratchFolder("fifty")
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory + "/photos", 0o755)
        #expect(system("cp '\(fixturePhotos[0])' '\(directory)/photos/good.jpg'") == 0)
        for index in 0..<50 {
            write(Array(repeating: UInt8(index), count: 100 + index), to: directory + "/photos/" + String(format: "b%02d.jpg", index))
        }
        let arguments = ["grid", directory + "/photos", "-o", directory + "/o.jpg", "--columns", "2", "--tile-size", "8"]
        let plain = runTesseraSplit(arguments + ["--no-progress", "--manifest", directory + "/m.json"])
        #expect(plain.status == 0, "\(plain.standardError)")
        // The JSON manifest names every one with its reason.
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(readFile(directory + "/m.json"))) as? [String: Any])
        let listed = try #require(manifest["skipped"] as? [[String: String]])
        #expect(manifest["skipped_count"] as? Int == 50 && listed.count == 50)
        #expect(listed.allSatisfy { $0["path"]?.hasPrefix(directory + "/photos/b") == true && $0["reason"]?.hasPrefix("not an image") == true })
        let lines = plain.standardError.split(separator: "\n")
        #expect(lines.count == 1, "\(plain.standardError)")
        let photos = directory + "/photos/"
        #expect(lines.first?.hasPrefix("tessera: warning: skipping 50 files: not an image") == true, "\(plain.standardError)")
        #expect(lines.first?.hasSuffix(": \(photos)b00.jpg, \(photos)b01.jpg, \(photos)b02.jpg and 47 more (--verbose names every one)") == true,
                "\(plain.standardError)")
        #expect(plain.standardOutput.contains("50 file(s) skipped (see the warnings above)"), "\(plain.standardOutput)")

        let verbose = runTesseraSplit(arguments + ["--no-progress", "-v"])
        let named = verbose.standardError.split(separator: "\n").filter { $0.hasPrefix("tessera: warning: skipping \(directory)/photos/b") }
        #expect(named.count == 50 && !verbose.standardError.contains("more ("), "\(verbose.standardError)")
        #expect(verbose.standardError.split(separator: "\n").count == 50, "\(verbose.standardError)")

        let json = runTesseraSplit(arguments + ["--progress", "json"])
        let events = jsonLines(json.standardError)
        #expect(events.filter { $0["event"] as? String == "skipped" }.count == 50)
        #expect(!events.contains { ($0["message"] as? String ?? "").contains("more (") })
        #expect(events.last?["skipped"] as? Int == 50)
    }

    /// A photo whose file ends early is drawn as far as it goes and said so three times: in a
    /// warning, in the summary line and in the JSON manifest's `partial` (not among the
    /// placeholders), and counted in the JSON summary event.
    @Test func aPhotoDrawnInPartIsNamedInTheManifestAndTheSummary() throws {
        let directory = scratchFolder("partial")
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory + "/photos", 0o755)
        #expect(system("cp '\(fixturePhotos[0])' '\(directory)/photos/good.jpg'") == 0)
        let whole = readFile(fixturePhotos[1])
        write(Array(whole[0..<(whole.count / 2)]), to: directory + "/photos/cut.jpg")
        let arguments = ["grid", directory + "/photos", "-o", directory + "/o.jpg", "--columns", "2", "--tile-size", "64"]
        let plain = runTesseraSplit(arguments + ["--no-progress", "--manifest", directory + "/m.json"])
        #expect(plain.status == 0, "\(plain.standardError)")
        #expect(plain.standardError.contains("cut.jpg") && plain.standardError.contains("file ends early"), "\(plain.standardError)")
        #expect(plain.standardOutput.contains("1 photo(s) drawn in part (their files end early or hold damaged data) (see the warnings above)"),
                "\(plain.standardOutput)")
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(readFile(directory + "/m.json"))) as? [String: Any])
        let partial = try #require(manifest["partial"] as? [[String: String]])
        #expect(partial.map { $0["path"] } == [directory + "/photos/cut.jpg"], "\(partial)")
        #expect(partial.first?["reason"]?.contains("ends early") == true, "\(partial)")
        #expect((manifest["placeholders"] as? [Any])?.isEmpty == true && (manifest["cells"] as? [Any])?.count == 2)
        let json = runTesseraSplit(arguments + ["--progress", "json"])
        #expect(jsonLines(json.standardError).last?["partial"] as? Int == 1, "\(json.standardError)")
    }

    /// A mosaic's dry run names 3 duplicates and counts the rest; --verbose names all; JSON has
    /// an event for each.
    @Test func dryRunDuplicatesAreSummarised() throws {
        let directory = scratchFolder("duplicates")
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory + "/photos", 0o755)
        #expect(system("cp '\(fixturePhotos[0])' '\(directory)/photos/'") == 0)
        for index in 0..<10 { #expect(link(fixturePhotos[0], directory + "/photos/zz-copy\(index).jpg") == 0) }
        let arguments = ["mosaic", "--target", fixturePhotos[1], directory + "/photos", "-o", directory + "/m.jpg", "--columns", "6",
                         "--tile-size", "8", "--min-distance", "0", "--cache-dir", directory + "/cache", "--dry-run"]
        let plain = runTesseraSplit(arguments)
        #expect(plain.status == 0, "\(plain.standardError)")
        let lines = plain.standardOutput.split(separator: "\n").filter { $0.hasPrefix("duplicate   ") }
        #expect(lines.count == 4, "\(plain.standardOutput)")
        #expect(lines.last == "duplicate   and 7 more (10 in all; --verbose names every one)", "\(plain.standardOutput)")
        let verbose = runTesseraSplit(arguments + ["--verbose"])
        let all = verbose.standardOutput.split(separator: "\n").filter { $0.hasPrefix("duplicate   ") }
        #expect(all.count == 10 && all.allSatisfy { $0.contains(": the same picture as ") }, "\(verbose.standardOutput)")
        let json = runTesseraSplit(arguments + ["--progress", "json"])
        let events = jsonLines(json.standardError).filter { $0["event"] as? String == "duplicate" }
        #expect(events.count == 10 && events.allSatisfy { ($0["same_as"] as? String)?.isEmpty == false }, "\(json.standardError)")
    }
}

@Suite struct GroupedReportTests {
    final class Captured: @unchecked Sendable {
        var out = "", err = "", now = 0.0
        func console(_ style: ProgressStyle, verbose: Bool = false, quiet: Bool = false) -> StreamConsole {
            StreamConsole(style: style, quiet: quiet, verbose: verbose, standardOutput: { self.out += $0 }, standardError: { self.err += $0 },
                          errorIsTerminal: false, clock: { self.now })
        }
    }

    @Test func reasonsGroupByWhatTheySayNotTheirNumbersOrFiles() {
        #expect(reasonClass("image data ends after 12 of 400 rows", path: "a.jpg") == reasonClass("image data ends after 7 of 3,000 rows", path: "b.jpg"))
        #expect(reasonClass("image data ends after 12 of 400 rows", path: "a.jpg") == "image data ends after N of N rows")
        #expect(reasonClass("needs 4.02 GiB; give --max-memory 4.1 GiB or more", path: "") == "needs N GiB; give --max-memory N GiB or more")
        #expect(reasonClass("TIFF: IMG_0001.tif: Not a TIFF file", path: "/photos/IMG_0001.tif") == "TIFF: FILE: Not a TIFF file")
        #expect(reasonClass("an AV1 image of 12x400 px", path: "") == "an AV1 image of NxN px")
        // A long reason is cut between words, not inside one (a helper saw "... or more to dra").
        let long = reasonClass("the mosaic's render could only draw it grey: decoding this 8000 x 6000 HEIF whole takes about "
                               + "137.3 MiB, more than the memory budget of 30.0 MiB leaves for one photo (14.1 MiB); give "
                               + "--max-memory 131 MiB or more to draw it", path: "")
        #expect(long.count <= 204 && long.hasSuffix(" ...") && long.hasPrefix("the mosaic's render could only draw it grey"), "\(long)")
        #expect(!long.contains(" dra ..."), "\(long)")
        #expect(reasonClass("marker 0xd9 at 1,024. Then 3.", path: "") == "marker N at N. Then N.")
        #expect(reasonClass(String(repeating: "y", count: 10_000), path: "").count == 200)
        #expect(formatCount(9_997) == "9,997" && formatCount(1_000_000) == "1,000,000" && formatCount(12) == "12")
    }

    @Test func aTallyKeepsAtMostItsLimitOfReasons() {
        var tally = ReasonTally(limit: 64)
        for index in 0..<1000 { _ = tally.add(.skipped, reason: "reason \(Character(UnicodeScalar(0x4E00 + index)!))") }
        _ = tally.add(.placeholder, reason: "reason 一")
        #expect(tally.groups.count == 66)
        #expect(tally.groups.filter { $0.reason == nil }.map(\.count) == [936, 1])
        #expect(tally.groups.reduce(0) { $0 + $1.count } == 1001)
        tally.removeAll()
        #expect(tally.add(.skipped, reason: "a") == 1 && tally.add(.skipped, reason: "a") == 2 && tally.groups.count == 1)
    }

    @Test func theConsoleNamesAFewPerReasonAndCountsTheRest() {
        let skipped = (0..<50).map { SkippedPhoto(path: "p\($0).jpg", reason: "image data ends after \($0) of 99 rows") }
            + (0..<5).map { SkippedPhoto(path: "q\($0).heic", reason: "HEIF: bad box") }
        let captured = Captured()
        let console = captured.console(.bar)
        for photo in skipped { console.photo(photo, placeholder: false) }
        console.photo(SkippedPhoto(path: "late.jpg", reason: "cut"), placeholder: true)
        console.result("wrote it")  // the summary comes before the result, by itself
        let lines = captured.err.split(separator: "\n")
        #expect(lines == ["tessera: warning: skipping 50 files: image data ends after N of N rows: p0.jpg, p1.jpg, p2.jpg and 47 more "
                            + "(--verbose names every one)",
                          "tessera: warning: skipping 5 files: HEIF: bad box: q0.heic, q1.heic, q2.heic and 2 more (--verbose names every one)",
                          "tessera: warning: late.jpg: cut; drawn as a placeholder"], "\(captured.err)")
        #expect(captured.out == "wrote it\n")
        for index in 0..<5 { console.photoWarning("w\(index).jpg", "Corrupt JPEG data: \(index) extraneous bytes before marker 0xd9") }
        console.photo(SkippedPhoto(path: "a.jpg", reason: "cut"), placeholder: true)
        console.photo(SkippedPhoto(path: "b.jpg", reason: "cut"), placeholder: true)
        console.phase(.render)
        #expect(captured.err.hasSuffix("tessera: warning: 5 photos drawn with a warning: Corrupt JPEG data: N extraneous bytes before marker N: "
                                       + "w0.jpg, w1.jpg, w2.jpg and 2 more (--verbose names every one)\n"
                                       + "tessera: warning: 2 photos drawn as placeholders: cut: a.jpg, b.jpg\n"), "\(captured.err)")
        // Counted anew after a summary.
        console.photo(skipped[0], placeholder: false)
        console.summarise()
        #expect(captured.err.hasSuffix("skipping p0.jpg: image data ends after 0 of 99 rows\n"))

        let verbose = Captured()
        let every = verbose.console(.bar, verbose: true)
        for photo in skipped { every.photo(photo, placeholder: false) }
        every.summarise()
        #expect(verbose.err.split(separator: "\n").count == 55)
        let json = Captured()
        let events = json.console(.json)
        for photo in skipped { events.photo(photo, placeholder: false) }
        events.duplicate("a.jpg", sameAs: "b.jpg")
        events.summarise()
        #expect(jsonLines(json.err).count == 56)
        #expect(jsonLines(json.err).last?["same_as"] as? String == "b.jpg")
        let quiet = Captured()
        let silent = quiet.console(.bar, quiet: true)
        for photo in skipped { silent.photo(photo, placeholder: false) }
        silent.message("an error")
        #expect(quiet.err == "tessera: an error\n")
    }

    /// A photo named to drive the terminal (an escape sequence, a window title) or to forge a
    /// line is named with its controls written out, alone or in a group; a message that holds
    /// one anyway has it replaced. JSON keeps the name as it is.
    @Test func namesThatHoldControlCharactersAreShownNotObeyed() throws {
        let colour = "\u{1B}[31mRED\u{1B}[0m\u{1B}]0;title\u{07}.jpg", forged = "fake\nwrote everything fine: 0 errors.jpg"
        let captured = Captured()
        let console = captured.console(.bar, verbose: true)
        console.photo(SkippedPhoto(path: colour, reason: "not an image"), placeholder: false)
        console.photoWarning(forged, "file ends early")
        console.message("removed \(colour)")
        let lines = captured.err.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines == ["tessera: warning: skipping \\x1B[31mRED\\x1B[0m\\x1B]0;title\\x07.jpg: not an image",
                          "tessera: warning: fake\\nwrote everything fine: 0 errors.jpg: file ends early",
                          "tessera: removed ?[31mRED?[0m?]0;title?.jpg", ""], "\(captured.err)")
        let grouped = Captured()
        let tally = grouped.console(.bar)
        for index in 0..<4 { tally.photo(SkippedPhoto(path: "\(index)" + forged, reason: "not an image"), placeholder: false) }
        tally.summarise()
        #expect(!grouped.err.dropLast().contains("\n") && grouped.err.contains("0fake\\nwrote"), "\(grouped.err)")
        let json = Captured()
        json.console(.json).photo(SkippedPhoto(path: colour, reason: "not an image"), placeholder: false)
        #expect(jsonLines(json.err).first?["path"] as? String == colour)
    }

    /// An analysis has an ETA once a second and a fiftieth have passed, a render once a tenth
    /// has, a scan never (its total grows while it walks).
    @Test func etaFromTheRateSoFar() throws {
        #expect(Report.eta(.analysis, done: 10, total: 1000, seconds: 5) == nil)
        #expect(Report.eta(.analysis, done: 20, total: 1000, seconds: 0.9) == nil)
        #expect(Report.eta(.analysis, done: 20, total: 1000, seconds: 2) == 98)
        #expect(Report.eta(.render, done: 50, total: 1000, seconds: 5) == nil)
        #expect(Report.eta(.render, done: 100, total: 1000, seconds: 5) == 45)
        #expect(Report.eta(.scan, done: 900, total: 1000, seconds: 50) == nil)
        #expect(Report.eta(.analysis, done: 2000, total: 1000, seconds: 50) == nil)
        #expect(Report.progressLine(phase: .analysis, done: 300, total: 1000, seconds: 3, rowWidth: 0, columns: 80).contains("ETA 7 s"))
        #expect(Report.progressLine(phase: .scan, done: 30_000, total: 31_000, seconds: 3, rowWidth: 0, columns: 80)
                == "scan 30,000 files read, 10,000 a second")
        #expect(Report.progressLine(phase: .scan, done: 30_000, total: 31_000, seconds: 3, rowWidth: 0, columns: 12).count == 11)

        let captured = Captured()
        let console = captured.console(.json)
        for done in 0...100 {
            captured.now = Double(done) / 10
            console.progress(.analysis, done: done * 10, total: 1000, seconds: captured.now, rowWidth: 0)
        }
        let events = jsonLines(captured.err)
        let first = try #require(events.first)
        #expect(first["eta_s"] is NSNull)
        let timed = events.filter { $0["eta_s"] is Double }
        #expect(!timed.isEmpty && timed.allSatisfy { ($0["eta_s"] as? Double ?? -1) >= 0 })
        #expect(events.last?["eta_s"] as? Double == 0)
    }
}
