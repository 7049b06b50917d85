// FirstHourTests.swift — issue 29's first hour through the binary: a mosaic with no flag but
// the target, the library and -o renders (a small library's default distance lowered with a
// warning, not refused); --preview alone, with -o, and its refusals; a hostile folder keeps
// standard error short while the JSON events name every bad file; the result line counts the
// whole run.
import Foundation
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

private func scratch(_ name: String) -> String {
    let directory = "\(testRoot)/tessera-first-hour-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    precondition(mkdir(directory, 0o755) == 0)
    return directory
}

@Suite struct FirstHourTests {
    /// A --cache-dir whose folders are missing is made, as the default cache is: the mosaic
    /// saves its index there without a warning, and the grid its header index.
    @Test func aMissingCacheDirIsMade() {
        let directory = scratch("cache-dir")
        defer { _ = system("rm -rf '\(directory)'") }
        let mosaic = runTessera(["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", directory + "/m.jpg", "--columns", "6",
                                 "--tile-size", "8", "--min-distance", "0", "--cache-dir", directory + "/new/deeper", "--no-progress"])
        #expect(mosaic.status == 0 && !mosaic.output.contains("cannot save"), "\(mosaic.output)")
        #expect(!listNames(directory + "/new/deeper").filter { $0.hasPrefix("features") }.isEmpty)
        let grid = runTessera(["grid", fixtures, "-o", directory + "/g.jpg", "--columns", "6", "--tile-size", "8",
                               "--cache-dir", directory + "/other/deeper", "--no-progress"])
        #expect(grid.status == 0 && listNames(directory + "/other/deeper").contains { $0.hasPrefix("headers") }, "\(grid.output)")
    }

    /// A --cache-dir below a regular file cannot be made: said, not silently kept empty.
    @Test func aCacheDirBelowAFileIsNamed() {
        let directory = scratch("cache-under-file")
        defer { _ = system("rm -rf '\(directory)'") }
        writeFile(Array("a file".utf8), to: directory + "/file")
        let grid = runTesseraSplit(["grid", fixtures, "-o", directory + "/g.jpg", "--columns", "6", "--tile-size", "8",
                                    "--cache-dir", directory + "/file/cache", "--no-progress"])
        #expect(grid.status == 0 && grid.standardError.contains("the header index could not be used or saved"), "\(grid.standardError)")
    }

    /// A grid with fewer cells than photos says how many it leaves out.
    @Test func aGridSmallerThanTheLibraryNamesWhatItLeavesOut() {
        let run = runTessera(["grid", fixtures, "-o", "\(testRoot)/never.jpg", "--grid", "2x2", "--tile-size", "20", "--dry-run"])
        #expect(run.status == 0 && run.output.contains("the grid's 4 cells show 4 of the 18 photos found; the other 14 are left out"),
                "\(run.output)")
    }

    /// A budget past the machine's memory (2T typed for 2G) is planned for, so it is named.
    @Test func aBudgetPastTheMachinesMemoryIsNamed() {
        let run = runTessera(["grid", fixtures, "-o", "\(testRoot)/never.jpg", "--columns", "3", "--tile-size", "20",
                              "--max-memory", "1000T", "--dry-run"])
        #expect(run.status == 0 && run.output.contains("--max-memory 1000.0 TiB is more than this machine's memory"), "\(run.output)")
    }

    /// A photo whose header reads but whose data ends early is found only while it is drawn:
    /// by default it is drawn as far as its data goes, with a warning; with --strict the render
    /// fails and writes nothing.
    @Test func strictRefusesAPhotoThatBreaksWhileDrawn() throws {
        let directory = scratch("strict-draw")
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory + "/in", 0o755)
        let whole = readFile(fixtures + "/Landscape_1.jpg")
        writeFile(Array(whole.prefix(whole.count * 6 / 10)), to: directory + "/in/cut.jpg")
        #expect(system("cp '\(fixtures)/Portrait_1.jpg' '\(directory)/in/'") == 0)
        let shape = ["grid", directory + "/in", "--columns", "2", "--tile-size", "40", "--no-progress"]
        let plain = runTessera(shape + ["-o", directory + "/o.jpg"])
        #expect(plain.status == 0 && plain.output.contains("cut.jpg: file ends early (truncated or damaged JPEG): drawn as far as it goes")
                && !plain.output.contains("placeholder"), "\(plain.output)")
        let strict = runTessera(shape + ["-o", directory + "/s.jpg", "--strict"])
        #expect(strict.status == 3 && strict.output.contains("cut.jpg") && strict.output.contains("a strict run draws no placeholder"),
                "\(strict.output)")
        #expect(access(directory + "/s.jpg", F_OK) != 0)
    }

    /// A mosaic's target cut short is refused (exit 3), not rebuilt with its missing part grey:
    /// the mosaic would copy the grey.
    @Test func aCutTargetIsRefused() throws {
        let directory = scratch("cut-target")
        defer { _ = system("rm -rf '\(directory)'") }
        let whole = readFile(fixtures + "/Landscape_1.jpg")
        writeFile(Array(whole.prefix(whole.count * 6 / 10)), to: directory + "/cut.jpg")
        let run = runTessera(["mosaic", "--target", directory + "/cut.jpg", fixtures, "-o", directory + "/m.jpg",
                              "--cache-dir", directory + "/cache", "--no-progress"])
        #expect(run.status == 3 && run.output.contains("cut.jpg") && run.output.contains("file ends early"), "\(run.output)")
        #expect(access(directory + "/m.jpg", F_OK) != 0)
    }

    /// The fixtures hold two distinct pictures, too few for the default distance of 1: with no
    /// flag the mosaic renders all the same, says why identical photos touch, and its last line
    /// names the output and the whole run's time. Asking for the distance keeps it a refusal.
    @Test func aMosaicWithNoFlagsRendersEvenFromATinyLibrary() throws {
        let directory = scratch("tiny")
        defer { _ = system("rm -rf '\(directory)'") }
        let base = ["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "--cache-dir", directory + "/cache", "--no-progress"]
        let run = runTesseraSplit(base + ["-o", directory + "/m.jpg"])
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardError.contains("only 2 distinct picture(s): identical photos may touch"), "\(run.standardError)")
        let last = run.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.hasPrefix("wrote \(directory)/m.jpg: ") && last.hasSuffix(" s in all"), "\(run.standardOutput)")
        // The whole run is at least its render.
        let render = try #require(last.firstMatch(of: #/in ([0-9.]+) s, /#)?.1).description
        let all = try #require(last.firstMatch(of: #/; ([0-9.]+) s in all/#)?.1).description
        #expect(Double(all)! >= Double(render)!, "\(last)")
        let jpeg = readFile(directory + "/m.jpg")
        let size = try #require(jpegSize(jpeg))
        // 2,500 cells of 100 px in the target's 3:2 shape.
        #expect(size.0 % 100 == 0 && size.1 % 100 == 0 && abs(Double(size.0) / Double(size.1) - 1.5) < 0.05, "\(size)")
        let given = runTesseraSplit(base + ["-o", directory + "/n.jpg", "--min-distance", "1"])
        #expect(given.status == 2 && given.standardError.contains("needs at least 9 different pictures"), "\(given.standardError)")
        #expect(access(directory + "/n.jpg", F_OK) != 0)
        // --strict holds the default rule too: refused before anything is written.
        let strict = runTesseraSplit(base + ["-o", directory + "/s.jpg", "--strict"])
        #expect(strict.status == 3 && strict.standardError.contains("--strict: only 2 distinct picture(s)"), "\(strict.standardError)")
        #expect(access(directory + "/s.jpg", F_OK) != 0)
    }

    /// --preview alone writes only the preview, about 2,000 px on its longer side; with -o it
    /// comes first and the JPEG is the full size; its name must be a JPEG's, and a shard cannot
    /// make one.
    @Test func previewAloneAndBeforeTheFullRender() throws {
        let directory = scratch("preview")
        defer { _ = system("rm -rf '\(directory)'") }
        let base = ["mosaic", "--target", samples + "/target/chelsea.jpg", samples + "/library", "--grid", "60x40", "--tile-size", "100",
                    "--cache-dir", directory + "/cache"]
        let alone = runTesseraSplit(base + ["--preview", directory + "/p.jpg", "--progress", "json"])
        #expect(alone.status == 0, "\(alone.standardError)")
        let preview = try #require(jpegSize(readFile(directory + "/p.jpg")))
        #expect(max(preview.0, preview.1) <= 2_000 && max(preview.0, preview.1) >= 1_900 && preview.0 % 60 == 0, "\(preview)")
        #expect(listNames(directory).sorted() == ["cache", "p.jpg"])
        let summary = try #require(jsonLines(alone.standardError).last)
        #expect((summary["outputs"] as? [String: Any])?["preview"] as? String == directory + "/p.jpg", "\(summary)")
        let both = runTesseraSplit(base + ["--preview", directory + "/q.jpg", "-o", directory + "/full.jpg", "--no-progress"])
        #expect(both.status == 0, "\(both.standardError)")
        let lines = both.standardOutput.split(separator: "\n")
        let previewLine = lines.firstIndex { $0.hasPrefix("preview: wrote \(directory)/q.jpg") }
        let fullLine = lines.firstIndex { $0.hasPrefix("wrote \(directory)/full.jpg: 6000 x 4000 px") }
        #expect(previewLine != nil && fullLine != nil && previewLine! < fullLine!, "\(both.standardOutput)")
        #expect(try #require(jpegSize(readFile(directory + "/q.jpg"))) == preview)
        let png = runTesseraSplit(base + ["--preview", directory + "/p.png"])
        #expect(png.status == 2 && png.standardError.contains("--preview \(directory)/p.png: name a .jpg/.jpeg file"), "\(png.standardError)")
        let shard = runTesseraSplit(base + ["--preview", directory + "/s.jpg", "-o", directory + "/s-full.jpg", "--shard", "1/2",
                                            "--shard-dir", directory + "/parts"])
        #expect(shard.status == 2 && shard.standardError.contains("--preview draws the whole picture"), "\(shard.standardError)")
        // A manifest of a preview alone was left unwritten without a word: refused, before any work.
        let manifest = runTesseraSplit(base + ["--preview", directory + "/m.jpg", "--manifest", directory + "/m.csv"])
        #expect(manifest.status == 2 && manifest.standardError.contains("--preview alone renders none"), "\(manifest.standardError)")
        #expect(access(directory + "/m.jpg", F_OK) != 0 && access(directory + "/m.csv", F_OK) != 0)
    }

    /// A photo whose file ends early is left out of a mosaic, named with why (its grey part
    /// matched the target's greys: one filled 298 of 2,451 cells); whole copies of it are used.
    @Test func aCutPhotoIsLeftOutOfAMosaic() throws {
        let directory = scratch("cut-photo")
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory + "/library", 0o755)
        #expect(system("cp '\(samples)'/library/* '\(directory)/library/'") == 0)
        let whole = readFile(fixtures + "/Landscape_1.jpg")
        writeFile(Array(whole.prefix(whole.count / 2)), to: directory + "/library/zz-cut.jpg")
        let run = runTesseraSplit(["mosaic", "--target", samples + "/target/chelsea.jpg", directory + "/library", "-o", directory + "/m.jpg",
                                   "--grid", "30x20", "--tile-size", "32", "--manifest", directory + "/m.csv",
                                   "--cache-dir", directory + "/cache", "--no-progress", "-v"])
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardError.contains("zz-cut.jpg") && run.standardError.contains("left out of the mosaic"), "\(run.standardError)")
        let cells = String(decoding: readFile(directory + "/m.csv"), as: UTF8.self)
        #expect(cells.split(separator: "\n").count == 601 && !cells.contains("zz-cut.jpg"), "\(cells.prefix(300))")
        // A grid still draws it: the user named it for a cell of its own.
        let grid = runTesseraSplit(["grid", directory + "/library/zz-cut.jpg", "-o", directory + "/g.jpg", "--columns", "1",
                                    "--tile-size", "64", "--no-progress"])
        #expect(grid.status == 0 && grid.standardOutput.contains("drawn in part"), "\(grid.standardOutput)")
    }

    /// Photos without a preview: the advice names a smaller --previews only when there is one.
    @Test func missedPreviewsAdviseWhatCanHelp() {
        let budget = [SkippedPhoto(path: "a.heic", reason: "needs memory", budgetToDrawBytes: 90 << 20)]
        let unread = [SkippedPhoto(path: "b.jpg", reason: "cut")]
        #expect(Runner.missedPreviews(budget, previewSide: 1024)?.hasSuffix("--max-memory 90M or a smaller --previews would make them") == true)
        #expect(Runner.missedPreviews(budget, previewSide: 64)?.hasSuffix("--max-memory 90M would make them") == true)
        #expect(Runner.missedPreviews(unread, previewSide: 512)?.hasSuffix("a smaller --previews may make them") == true)
        #expect(Runner.missedPreviews(unread, previewSide: 64)?.hasSuffix("they could not be read at that size") == true)
        #expect(Runner.missedPreviews([], previewSide: 64) == nil)
    }

    /// A print size of another shape than the target's says how much of the target it cuts.
    @Test func aPrintSizeOfAnotherShapeSaysWhatItCuts() throws {
        let directory = scratch("crop")
        defer { _ = system("rm -rf '\(directory)'") }
        let base = ["mosaic", "--target", fixtures + "/Landscape_1.jpg", fixtures, "-o", directory + "/m.jpg", "--cache-dir", directory + "/cache",
                    "--dry-run"]
        let portrait = runTesseraSplit(base + ["--size", "60x90cm"])
        #expect(portrait.status == 0 && portrait.standardOutput.contains("of its width is left out"), "\(portrait.standardOutput)")
        let landscape = runTesseraSplit(base + ["--size", "90x60cm"])
        #expect(landscape.status == 0 && !landscape.standardOutput.contains("is left out"), "\(landscape.standardOutput)")
        #expect(MosaicSize.cropNote(canvasAspect: 2.0 / 3.0, targetAspect: 1.5)?.contains("56% of its width") == true)
        #expect(MosaicSize.cropNote(canvasAspect: 1.5, targetAspect: 0.75)?.contains("50% of its height") == true)
        #expect(MosaicSize.cropNote(canvasAspect: 1.45, targetAspect: 1.5) == nil)
    }

    /// 50 bad files of three kinds among 20 photos: at most 12 lines on standard error (here one
    /// a kind), every bad file an event in JSON.
    @Test func aHostileFolderKeepsStandardErrorShort() throws {
        let directory = scratch("hostile")
        defer { _ = system("rm -rf '\(directory)'") }
        let photos = directory + "/photos"
        #expect(mkdir(photos, 0o755) == 0)
        for name in listNames(samples + "/library").sorted().prefix(20) {
            #expect(system("cp '\(samples)/library/\(name)' '\(photos)/'") == 0)
        }
        let good = readFile(photos + "/" + listNames(photos).sorted()[0])
        for index in 0..<50 {
            let bytes: [UInt8]
            switch index % 3 {
            case 0: bytes = Array("not a photo \(index)".utf8)
            case 1: bytes = Array(good.prefix(600))
            default: bytes = [0xFF, 0xD8, 0xFF, 0xE0] + Array(repeating: UInt8(index), count: 40)
            }
            writeFile(bytes, to: photos + String(format: "/bad-%02d.jpg", index))
        }
        let base = ["mosaic", "--target", samples + "/target/chelsea.jpg", photos, "-o", directory + "/m.jpg", "--grid", "30x20",
                    "--tile-size", "16", "--cache-dir", directory + "/cache"]
        let plain = runTesseraSplit(base + ["--no-progress"])
        #expect(plain.status == 0, "\(plain.standardError)")
        let lines = plain.standardError.split(separator: "\n")
        #expect(lines.count <= 12 && lines.count >= 1, "\(plain.standardError)")
        #expect(plain.standardOutput.contains("50 file(s) skipped"), "\(plain.standardOutput)")
        let json = runTesseraSplit(base + ["--progress", "json"])
        #expect(json.status == 0)
        let skipped = jsonLines(json.standardError).filter { $0["event"] as? String == "skipped" }.compactMap { $0["path"] as? String }
        #expect(Set(skipped) == Set((0..<50).map { photos + String(format: "/bad-%02d.jpg", $0) }), "\(skipped.count) skipped events")
    }
}
