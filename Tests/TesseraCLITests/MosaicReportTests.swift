// MosaicReportTests.swift — a mosaic's reports through the binary: the library report before
// the work (and in a dry run), the quality report after (CIEDE2000, SSIM, the uses histogram)
// checked against the manifest, unmet constraints as a warning, and --strict refusing them.
import Foundation
import Glibc
import Testing

/// A library of 15 distinct pictures in `directory`: 6 crops of a fixture, 8 flat colours and
/// one 16 x 12 px photo (smaller than a 24 px cell).
private func makeLibrary(_ directory: String) -> Bool {
    var commands = ["mkdir -p '\(directory)/photos'"]
    for (index, (x, y)) in [(0, 0), (600, 0), (1200, 0), (0, 600), (600, 600), (1200, 600)].enumerated() {
        commands.append("convert '\(fixtures)/Landscape_1.jpg' -crop 600x600+\(x)+\(y) +repage -resize 120x120 '\(directory)/photos/crop-\(index).jpg'")
    }
    let colours = ["200,30,30", "30,200,30", "30,30,200", "220,220,40", "40,220,220", "220,40,220", "240,240,240", "20,20,20"]
    for (index, colour) in colours.enumerated() {
        commands.append("convert -size 96x96 'xc:rgb(\(colour))' '\(directory)/photos/flat-\(index).jpg'")
    }
    commands.append("convert -size 16x12 gradient:orange-purple '\(directory)/photos/tiny.jpg'")
    return system(commands.joined(separator: " && ")) == 0
}

/// The photo of each cell of a CSV manifest (column,row,photo,cost), counted by photo.
private func manifestUses(_ path: String) -> [String: Int] {
    let lines = String(decoding: readFile(path), as: UTF8.self).split(separator: "\n").dropFirst()
    var uses: [String: Int] = [:]
    for line in lines {
        // column,row,photo,cost: the photo may hold commas (quoted), the others do not.
        let fields = line.split(separator: ",", omittingEmptySubsequences: false)
        guard fields.count >= 4 else { continue }
        var photo = fields[2..<(fields.count - 1)].joined(separator: ",")
        if photo.hasPrefix("\"") && photo.hasSuffix("\"") { photo = String(photo.dropFirst().dropLast()) }
        uses[photo, default: 0] += 1
    }
    return uses
}

/// The number that follows `prefix` in `text`, if any.
private func number(after prefix: String, in text: String) -> Double? {
    guard let range = text.range(of: prefix) else { return nil }
    return Double(String(text[range.upperBound...].prefix { $0.isNumber || $0 == "." }))
}

@Suite struct MosaicReportTests {
    @Test func theReportsAgreeWithTheManifest() throws {
        let directory = "\(testRoot)/tessera-mosaic-report-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        try #require(makeLibrary(directory))
        let arguments = ["mosaic", "--target", fixtures + "/Landscape_1.jpg", directory + "/photos", "-o", directory + "/m.jpg",
                         "--columns", "12", "--tile-size", "24", "--manifest", directory + "/m.csv", "--cache-dir", directory + "/cache"]
        // The dry run reports the library, and writes nothing.
        let dry = runTesseraSplit(arguments + ["--dry-run", "--no-progress"])
        #expect(dry.status == 0, "\(dry.standardError)")
        #expect(dry.standardOutput.contains("library     15 usable photo(s), 15 distinct picture(s)"), "\(dry.standardOutput)")
        #expect(dry.standardOutput.contains("1 smaller than the 24 x 24 px cell"), "\(dry.standardOutput)")
        #expect(dry.standardOutput.contains("about 6.4 uses per picture (96 cells, 15 pictures)"), "\(dry.standardOutput)")
        #expect(access(directory + "/m.jpg", F_OK) != 0)

        let run = runTesseraSplit(arguments + ["--progress", "json"])
        #expect(run.status == 0, "\(run.standardError)")
        let uses = manifestUses(directory + "/m.csv")
        #expect(uses.values.reduce(0, +) == 96, "\(uses)")
        let events = jsonLines(run.standardError)
        let figures = try #require(events.last?["mosaic"] as? [String: Any])
        #expect(figures["photos"] as? Int == 15)
        #expect(figures["photos_used"] as? Int == uses.count)
        #expect(figures["unused_pictures"] as? Int == 15 - uses.count)
        let most = try #require(figures["most_used"] as? [String: Any])
        let mostPhoto = try #require(most["photo"] as? String)
        #expect(most["cells"] as? Int == uses.values.max() && uses[mostPhoto] == uses.values.max(), "\(most) \(uses)")
        #expect(abs((most["share"] as? Double ?? -1) - Double(uses.values.max() ?? 0) / 96) < 0.0001)
        let histogram = try #require(figures["uses_histogram"] as? [String: Int])
        #expect(histogram.values.reduce(0, +) == 15, "\(histogram)")
        #expect((histogram["0"] ?? 0) == 15 - uses.count)
        #expect((histogram["1"] ?? 0) == uses.values.filter { $0 == 1 }.count)
        let tooSmall = try #require(figures["too_small"] as? [String: Any])
        #expect(tooSmall["photos"] as? Int == 1 && tooSmall["cells"] as? Int == uses[directory + "/photos/tiny.jpg"] ?? 0, "\(tooSmall)")
        let deltaE = try #require(figures["mean_delta_e2000"] as? Double)
        #expect(deltaE > 0.5 && deltaE < 60, "\(deltaE)")
        #expect((figures["mean_error"] as? Double ?? -1) > 0)
        let ssim = try #require(figures["ssim"] as? Double)
        #expect(ssim > 0 && ssim < 1, "\(ssim)")
        #expect(figures["ssim_size"] as? [Int] == [288, 192])
        #expect((figures["constraints_unmet"] as? [String: Any])?["cells"] as? Int == 0)
        #expect(!run.standardError.contains("could not meet"))
        // The words say the same.
        let wordsDeltaE = try #require(number(after: "colour match: mean ΔE2000 ", in: run.standardOutput), "\(run.standardOutput)")
        #expect(abs(wordsDeltaE - deltaE) <= 0.05 + 1e-9)
        let wordsSSIM = try #require(number(after: "likeness: SSIM ", in: run.standardOutput), "\(run.standardOutput)")
        #expect(abs(wordsSSIM - ssim) <= 0.0005 + 1e-9)
        #expect(run.standardOutput.contains("most used \(mostPhoto) in \(uses[mostPhoto] ?? 0) cells"), "\(run.standardOutput)")
        #expect(!run.standardOutput.contains("mosaic: mean Oklab error"))
    }

    @Test func unmetConstraintsWarnAndStrictRefuses() throws {
        let directory = "\(testRoot)/tessera-mosaic-strict-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        try #require(makeLibrary(directory))
        // 9 flat colours (the least --min-distance 1 takes) at most 11 times each for 96 cells:
        // feasible by count, but the greedy placement alone (no local search to mend it) puts
        // identical photos side by side.
        #expect(system("rm '\(directory)'/photos/crop-* '\(directory)/photos/tiny.jpg' && "
                       + "convert -size 96x96 'xc:rgb(128,64,0)' '\(directory)/photos/flat-8.jpg'") == 0)
        let arguments = ["mosaic", "--target", fixtures + "/Landscape_1.jpg", directory + "/photos", "-o", directory + "/m.jpg",
                         "--columns", "12", "--tile-size", "24", "--min-distance", "1", "--max-uses", "11", "--match-effort", "0",
                         "--cache-dir", directory + "/cache", "--manifest", directory + "/m.csv"]
        let warned = runTesseraSplit(arguments + ["--progress", "json"])
        #expect(warned.status == 0, "\(warned.standardError)")
        let events = jsonLines(warned.standardError)
        let warning = events.first { $0["event"] as? String == "warning" && ($0["message"] as? String ?? "").contains("could not meet") }
        let text = try #require(warning?["message"] as? String, "\(warned.standardError)")
        #expect(text.contains("identical photo within --min-distance 1") && text.contains("lower --min-distance or raise --max-uses"), "\(text)")
        let figures = try #require(events.last?["mosaic"] as? [String: Any])
        let unmet = try #require(figures["constraints_unmet"] as? [String: Any])
        let cells = try #require(unmet["cells"] as? Int)
        let rules = try #require(unmet["constraints"] as? [[String: Any]])
        #expect(cells > 0 && rules.count == 1 && rules.first?["constraint"] as? String == "min_distance" && rules.first?["cells"] as? Int == cells,
                "\(unmet)")
        #expect(figures["smallest_repeat_distance"] as? Int == 1)
        #expect(text.hasPrefix("\(cells) of 96 cell(s)"), "\(text)")
        // The manifest agrees: that many cells touch an identical photo.
        var placed: [Int: String] = [:]
        for line in String(decoding: readFile(directory + "/m.csv"), as: UTF8.self).split(separator: "\n").dropFirst() {
            let fields = line.split(separator: ",")
            placed[Int(fields[1])! * 12 + Int(fields[0])!] = String(fields[2])
        }
        let touching = (0..<96).filter { cell in
            (-1...1).contains { dy in (-1...1).contains { dx in
                let row = cell / 12 + dy, column = cell % 12 + dx
                return (dx != 0 || dy != 0) && (0..<8).contains(row) && (0..<12).contains(column) && placed[row * 12 + column] == placed[cell]
            } }
        }
        #expect(touching.count == cells)
        #expect(unlink(directory + "/m.jpg") == 0)

        let strict = runTesseraSplit(arguments + ["--strict", "--no-progress"])
        #expect(strict.status == 3, "\(strict.standardError)")
        #expect(strict.standardError.contains("tessera: --strict: \(cells) cell(s)") && strict.standardError.contains("nothing rendered"),
                "\(strict.standardError)")
        #expect(access(directory + "/m.jpg", F_OK) != 0)
        let strictDry = runTesseraSplit(arguments + ["--strict", "--dry-run", "--no-progress"])
        #expect(strictDry.status == 3, "\(strictDry.standardError)")
    }

    @Test func aDeepZoomAloneSaysWhySSIMIsNotMeasured() throws {
        let directory = "\(testRoot)/tessera-mosaic-dzi-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        try #require(makeLibrary(directory))
        mkdir(directory + "/z", 0o755)
        let run = runTesseraSplit(["mosaic", "--target", fixtures + "/Landscape_1.jpg", directory + "/photos", "--dzi", directory + "/z/m.dzi",
                                   "--columns", "12", "--tile-size", "24", "--cache-dir", directory + "/cache", "--progress", "json"])
        #expect(run.status == 0, "\(run.standardError)")
        let figures = try #require(jsonLines(run.standardError).last?["mosaic"] as? [String: Any])
        #expect(figures["ssim"] is NSNull && (figures["ssim_skipped"] as? String ?? "").contains("Deep Zoom"), "\(figures)")
        #expect((figures["mean_delta_e2000"] as? Double ?? 0) > 0)
        #expect(run.standardOutput.contains("likeness: SSIM not measured: only a Deep Zoom pyramid"), "\(run.standardOutput)")
    }

    /// A $XDG_CACHE_HOME that does not exist yet is made (0700, as the XDG spec asks), and the
    /// feature index saved in it: every mosaic warned "cannot save the feature index" and read
    /// its photos again.
    @Test func aMissingXDGCacheHomeIsMade() throws {
        let directory = testRoot + "/xdg-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(directory, 0o755)
        defer { _ = system("rm -rf '\(directory)'") }
        let samples = repositoryRoot + "/Samples"
        let capture = directory + "/output.txt"
        let status = system("XDG_CACHE_HOME='\(directory)/cache' '\(toolPath())' mosaic --target '\(samples)/target/chelsea.jpg' "
                            + "'\(samples)/library' -o '\(directory)/m.jpg' --grid 20x14 --tile-size 16 --no-progress >'\(capture)' 2>&1 </dev/null")
        let output = String(decoding: readFile(capture), as: UTF8.self)
        #expect(status == 0, "\(output)")
        #expect(!output.contains("cannot save"), "\(output)")
        var info = stat()
        #expect(stat(directory + "/cache/tessera", &info) == 0, "\(output)")
        #expect(stat(directory + "/cache", &info) == 0 && info.st_mode & 0o777 == 0o700)
    }
}
