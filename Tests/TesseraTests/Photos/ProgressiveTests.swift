// ProgressiveTests.swift — multi-scan JPEGs (progressive, and sequential with components in
// separate scans) against their baseline twins.
//
// Every twin is made with libjpeg-turbo's own tools from one baseline file: jpegtran rewrites
// the same quantised coefficients into another scan structure, so a progressive twin holds
// exactly the baseline's picture and any difference in the tiles is the decoder's. The oracle is
// libjpeg decoding the baseline file, not the code under test.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

private let landscape = fixturesDirectory + "/orientation/Landscape_1.jpg"   // 1800 x 1200, 4:2:0
private let rotated = fixturesDirectory + "/orientation/Landscape_6.jpg"     // EXIF orientation 6

/// Decodes `path` into a `width` x `height` tile with `decoder` (or a 64 MiB one).
private func tile(_ path: String, width: Int, height: Int, budget: DecodeBudget? = nil) throws -> (RGBImage, DecodeNotes) {
    let decoder = CellDecoder(cellWidth: width, cellHeight: height,
                              budget: budget ?? DecodeBudget(budgetBytes: 256 << 20, workers: 1))
    var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
    let notes = try bytes.withUnsafeMutableBytes { buffer in
        Result { () throws(TesseraError) in try decoder.decode(path: path, into: buffer) }
    }.get()
    return (RGBImage(width: width, height: height, pixels: bytes), notes)
}

/// A baseline JPEG of `source`'s pixels re-encoded by cjpeg with `options`, in `directory`.
private func baseline(_ source: String, _ options: [String], in scratch: ScratchDirectory, name: String) -> String {
    let ppm = scratch.file(name + ".ppm"), path = scratch.file(name + ".jpg")
    #expect(runTool(["djpeg", "-ppm", source], stdout: ppm) == 0)
    #expect(runTool(["cjpeg", "-quality", "90"] + options + [ppm], stdout: path) == 0)
    return path
}

/// `jpegtran options source`, written to `name` in `scratch`.
private func transcode(_ source: String, _ options: [String], in scratch: ScratchDirectory, name: String) -> String {
    let path = scratch.file(name)
    #expect(runTool(["jpegtran", "-copy", "all"] + options + [source], stdout: path) == 0)
    return path
}

/// A scan script file for jpegtran -scans.
private func scanScript(_ lines: [String], in scratch: ScratchDirectory, name: String) -> String {
    let path = scratch.file(name)
    writeBytes(Array((lines.joined(separator: "\n") + "\n").utf8), to: path)
    return path
}

/// Tile sizes that make the decoder pick DCT scales 1/8, 2/8, 4/8 and 8/8 for a photo of
/// `width` x `height` (stored orientation).
private func cellsForEachScale(width: Int, height: Int) -> [(scale: Int, width: Int, height: Int)] {
    // 2/8 is never a multi-scan file's scale: a cell that 2/8 covers twice over, 1/8 covers,
    // and the DC decoder draws it from there.
    [1, 4, 8].map { n in
        // A little under half the scaled size (the decoder leaves the area average at least
        // 2:1, CellDecoder.sharpEnough), or under the whole at 8/8: this scale, not the next up,
        // for the baseline file and its multi-scan twins alike.
        let w = (width * n + 7) / 8 / (n == 8 ? 1 : 2), h = (height * n + 7) / 8 / (n == 8 ? 1 : 2)
        return (n, w - w / 16, h - h / 16)
    }
}

@Suite struct ProgressiveTests {
    /// The twins of one baseline file, each with the scan structure that exercises one path.
    private func twins(of base: String, in scratch: ScratchDirectory, tag: String, colour: Bool) -> [(String, String)] {
        let common = [
            ("progressive", transcode(base, ["-progressive"], in: scratch, name: "\(tag)-progressive.jpg")),
            ("progressive, optimised (Huffman tables between scans)",
             transcode(base, ["-progressive", "-optimize"], in: scratch, name: "\(tag)-optimized.jpg")),
            ("progressive with restart markers every 7 MCUs",
             transcode(base, ["-progressive", "-restart", "7B"], in: scratch, name: "\(tag)-restart.jpg")),
        ]
        guard colour else { return common }  // the scripts below name three components
        // DC first scan at Al = 1 and its refinement last, after every AC scan; one component a
        // scan for the DC too (non-interleaved DC scans).
        let dcLast = scanScript([
            "0: 0 0 0 1;", "1: 0 0 0 1;", "2: 0 0 0 1;",
            "0: 1 5 0 2;", "2: 1 63 0 1;", "1: 1 63 0 1;", "0: 6 63 0 2;",
            "0: 1 63 2 1;", "0: 1 63 1 0;", "2: 1 63 1 0;", "1: 1 63 1 0;",
            "0: 0 0 1 0;", "1: 0 0 1 0;", "2: 0 0 1 0;",
        ], in: scratch, name: "\(tag)-dc-last.txt")
        // Sequential, but each component in a scan of its own (still a multi-scan file).
        let separate = scanScript(["0: 0 63 0 0;", "1: 0 63 0 0;", "2: 0 63 0 0;"], in: scratch, name: "\(tag)-separate.txt")
        return common + [
            ("DC refinement last, non-interleaved DC",
             transcode(base, ["-scans", dcLast], in: scratch, name: "\(tag)-dc-last.jpg")),
            ("sequential, components in separate scans",
             transcode(base, ["-scans", separate], in: scratch, name: "\(tag)-separate.jpg")),
        ]
    }

    private func compareTwins(base: String, width: Int, height: Int, tag: String, colour: Bool = true,
                              scratch: ScratchDirectory) throws {
        let kinds = twins(of: base, in: scratch, tag: tag, colour: colour)
        var largest = 0.0
        for (kind, path) in kinds {
            for cell in cellsForEachScale(width: width, height: height) {
                let (expected, _) = try tile(base, width: cell.width, height: cell.height)
                let (actual, notes) = try tile(path, width: cell.width, height: cell.height)
                let difference = meanAbsoluteDifference(expected, actual)
                largest = max(largest, difference)
                #expect(difference <= 1, "\(tag), \(kind), scale \(cell.scale)/8: mean difference \(difference)")
                if cell.scale == 1 {
                    #expect(notes.method == .dcOnly(spilled: false), "\(tag), \(kind): \(notes.method)")
                    // The DC decoder draws what libjpeg draws at 1/8: the same pixels, but for
                    // 4:2:0 chroma (quarter means without coefficients 3, 5 and 7: measured at
                    // most 0.07 levels).
                    let allowed = tag == "420" ? 0.1 : 0
                    #expect(difference <= allowed, "\(tag), \(kind), scale 1/8: mean difference \(difference), allowed \(allowed)")
                } else {
                    #expect(notes.method == .coefficients(spilled: false), "\(tag), \(kind): \(notes.method)")
                    // Same coefficients, same libjpeg: the same pixels.
                    #expect(difference == 0, "\(tag), \(kind), scale \(cell.scale)/8: mean difference \(difference)")
                }
            }
        }
        print("ProgressiveTests \(tag): largest mean tile difference \(largest)")
    }

    @Test(arguments: [("2x2", "420"), ("2x1", "422"), ("1x1", "444")])
    func everySubsamplingAndScanStructureMatchesItsBaselineTwin(sampling: String, tag: String) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // An odd size (not whole MCUs) from the 1800 x 1200 fixture.
        let cropped = transcode(landscape, ["-crop", "1001x667+0+0"], in: scratch, name: "crop.jpg")
        let base = baseline(cropped, ["-sample", sampling], in: scratch, name: "base-\(tag)")
        try compareTwins(base: base, width: 1001, height: 667, tag: tag, scratch: scratch)
    }

    @Test func grayscaleMatchesItsBaselineTwin() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let base = baseline(landscape, ["-grayscale"], in: scratch, name: "gray")
        try compareTwins(base: base, width: 1800, height: 1200, tag: "gray", colour: false, scratch: scratch)
    }

    @Test func exifOrientationIsAppliedToProgressivePhotos() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // Stored 1200 x 1800 with orientation 6, shown as the 1800 x 1200 landscape: a 225 x 150
        // cell is 1/8 of it.
        let progressive = transcode(rotated, ["-progressive"], in: scratch, name: "rotated.jpg")
        let (twin, _) = try tile(rotated, width: 225, height: 150)
        let (actual, notes) = try tile(progressive, width: 225, height: 150)
        #expect(notes.method == .dcOnly(spilled: false))
        #expect(meanAbsoluteDifference(twin, actual) <= 1)
        // The upright picture: Landscape_1 is the same one stored upright (encoded separately).
        let (upright, _) = try tile(landscape, width: 225, height: 150)
        #expect(meanAbsoluteDifference(upright, actual) < 6)
        #expect(meanAbsoluteDifference(mirrored(upright), actual) > 12)
    }

    @Test func spilledBuffersGiveTheSamePixels() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let progressive = transcode(landscape, ["-progressive"], in: scratch, name: "p.jpg")
        let small = DecodeBudget(poolBytes: 64 << 10, spillDirectory: scratch.path)
        // 4/8 (2/8 would leave less than 2:1): libjpeg's coefficients (1800 x 1200 4:2:0: 6.3
        // MB) through windows in a spill file.
        let (expectedQuarter, _) = try tile(landscape, width: 400, height: 280)
        let (quarter, quarterNotes) = try tile(progressive, width: 400, height: 280, budget: small)
        #expect(quarterNotes.method == .coefficients(spilled: true))
        #expect(meanAbsoluteDifference(expectedQuarter, quarter) == 0)
        // 1/8: the DC planes through windows in a spill file, the same pixels as in memory.
        let (inMemory, memoryNotes) = try tile(progressive, width: 200, height: 140)
        let (spilled, spilledNotes) = try tile(progressive, width: 200, height: 140, budget: small)
        #expect(memoryNotes.method == .dcOnly(spilled: false))
        #expect(spilledNotes.method == .dcOnly(spilled: true))
        #expect(inMemory == spilled)
        // Spill files have no names: nothing is left in the folder.
        #expect(scratch.contents().filter { !$0.hasSuffix(".jpg") }.isEmpty)
    }

    /// Without its refinement scans a progressive file's coefficients stay coarse, and libjpeg
    /// then smooths blocks (decompress_smooth_data), which reads the coefficient arrays a row
    /// beyond what it asks for at the last iMCU rows. In memory or spilled, the same pixels.
    @Test func blockSmoothingWorksWithOurCoefficientArrays() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let coarse = scanScript(["0 1 2: 0 0 0 1;", "0: 1 63 0 1;", "1: 1 63 0 1;", "2: 1 63 0 1;"],
                                in: scratch, name: "coarse.txt")
        let cropped = transcode(landscape, ["-crop", "1001x667+0+0"], in: scratch, name: "crop.jpg")
        let path = transcode(cropped, ["-scans", coarse], in: scratch, name: "coarse.jpg")
        for (width, height) in [(250, 166), (1001, 667)] {
            let (inMemory, memoryNotes) = try tile(path, width: width, height: height)
            let (spilled, spilledNotes) = try tile(path, width: width, height: height,
                                                   budget: DecodeBudget(poolBytes: 64 << 10, spillDirectory: scratch.path))
            #expect(memoryNotes.method == .coefficients(spilled: false))
            #expect(spilledNotes.method == .coefficients(spilled: true))
            #expect(inMemory == spilled)
            // Coarse, but the picture: close to the complete file's.
            let (full, _) = try tile(cropped, width: width, height: height)
            let difference = meanAbsoluteDifference(full, inMemory)
            #expect(difference > 0 && difference < 4, "\(width) x \(height): \(difference)")
        }
    }

    @Test func decodesSharingABudgetNeverHoldMoreThanItsPool() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let progressive = transcode(landscape, ["-progressive"], in: scratch, name: "p.jpg")
        // A pool that fits about two 2/8 decodes of this photo in memory (6.3 MB of coefficients
        // each would spill past half of it), shared by eight threads.
        let budget = DecodeBudget(poolBytes: 3 << 20, spillDirectory: scratch.path)
        let decoder = CellDecoder(cellWidth: 400, cellHeight: 280, budget: budget)
        let (expected, _) = try tile(landscape, width: 400, height: 280)
        let results = Mutex()
        var differences: [Double] = []
        var threads: [JoinableThread] = []
        for _ in 0..<8 {
            threads.append(try JoinableThread {
                var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
                let ok = bytes.withUnsafeMutableBytes { buffer in
                    (try? decoder.decode(path: progressive, into: buffer)) != nil
                }
                let difference = ok ? meanAbsoluteDifference(expected, RGBImage(width: 400, height: 280, pixels: bytes)) : 999
                results.withLock { differences.append(difference) }
            })
        }
        for thread in threads { thread.join() }
        #expect(differences == Array(repeating: 0, count: 8))
        #expect(budget.peakAdmittedBytes > 0)
        #expect(budget.peakAdmittedBytes <= budget.poolBytes)
    }

    @Test func aScanBombIsRefusedByBothDecoders() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // A real progressive file, then 600 more luma AC scans before its end: each an
        // end-of-band run over every block, with a Huffman table of its own (one symbol, EOB14).
        let progressive = readBytes(transcode(landscape, ["-progressive"], in: scratch, name: "p.jpg"))
        let sof = (0..<(progressive.count - 11)).first { progressive[$0] == 0xFF && progressive[$0 + 1] == 0xC2 }!
        let luma = progressive[sof + 10]
        let table: [UInt8] = [0xFF, 0xC4, 0, 20, 0x10, 1] + Array(repeating: 0, count: 15) + [0xE0]
        // Two EOB14 runs of 32,767 blocks cover 1800 x 1200's 33,750: code 0, 14 one bits, twice,
        // padded with ones; each FF byte stuffed.
        let scan: [UInt8] = [0xFF, 0xDA, 0, 8, 1, luma, 0x00, 1, 63, 0x00, 0x7F, 0xFE, 0xFF, 0x00, 0xFF, 0x00]
        var bomb = Array(progressive[..<(progressive.count - 2)]) + table
        for _ in 0..<600 { bomb += scan }
        bomb += [0xFF, 0xD9]
        let path = scratch.file("bomb.jpg")
        writeBytes(bomb, to: path)
        for (width, height) in [(200, 140), (900, 600)] {   // the DC decoder (1/8), and libjpeg (4/8)
            do {
                _ = try tile(path, width: width, height: height)
                Issue.record("a file of 600 scans decoded at \(width) x \(height)")
            } catch let error as TesseraError {
                guard case .unreadablePhoto(_, let reason) = error else { Issue.record("\(error)"); continue }
                #expect(reason.contains("more than 500 scans"), "\(reason)")
            }
        }
    }

    @Test func scansOutOfProportionToTheFileAreRefused() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // A flat 4000 x 3000 picture compresses to very little: the most work per byte a real
        // photo asks for. Its progressive twin decodes; with 450 empty luma AC scans added (each
        // a pass over 187,500 blocks in a few bytes, under the 500-scan limit) libjpeg's decode
        // is stopped by the work limit, and the DC decoder, which skips those scans by their
        // bytes, draws it at once.
        let flat = scratch.file("flat.jpg")
        try JPEGFile.write(RGBImage(width: 4000, height: 3000, fill: RGB(red: 120, green: 130, blue: 140)), to: flat, quality: 90)
        let progressive = readBytes(transcode(flat, ["-progressive"], in: scratch, name: "flat-progressive.jpg"))
        for (width, height) in [(480, 360), (1900, 1400)] {
            let (expected, _) = try tile(flat, width: width, height: height)
            let (twin, _) = try tile(scratch.file("flat-progressive.jpg"), width: width, height: height)
            #expect(meanAbsoluteDifference(expected, twin) <= 1)
        }
        let sof = (0..<(progressive.count - 11)).first { progressive[$0] == 0xFF && progressive[$0 + 1] == 0xC2 }!
        let luma = progressive[sof + 10]
        let table: [UInt8] = [0xFF, 0xC4, 0, 20, 0x10, 1] + Array(repeating: 0, count: 15) + [0xE0]
        // 187,500 blocks: six EOB14 runs of 32,767 (code 0 and 14 one bits each), padded with ones.
        var bits = ""
        for _ in 0..<6 { bits += "0" + String(repeating: "1", count: 14) }
        let data = entropyCodedBytes(bits)
        let scan: [UInt8] = [0xFF, 0xDA, 0, 8, 1, luma, 0x00, 1, 63, 0x00] + data
        var bomb = Array(progressive[..<(progressive.count - 2)]) + table
        for _ in 0..<450 { bomb += scan }
        bomb += [0xFF, 0xD9]
        let path = scratch.file("bomb.jpg")
        writeBytes(bomb, to: path)
        #expect {
            _ = try tile(path, width: 1900, height: 1400)
        } throws: { error in
            guard case TesseraError.unreadablePhoto(path, let reason) = error else { return false }
            return reason.contains("refused as a decoding bomb")
        }
        let (drawn, notes) = try tile(path, width: 480, height: 360)
        #expect(notes.method == .dcOnly(spilled: false))
        #expect(meanAbsoluteDifference(drawn, try tile(flat, width: 480, height: 360).0) <= 1)
    }

    /// The DC decoder decodes 4:2:0 chroma AC scans (it keeps three coefficients), so empty
    /// chroma AC scans repeated are work for it too: 450 of them over a flat 12 MP photo (each a
    /// pass over 47,000 blocks in 14 bytes) are refused by its work limit, not decoded.
    @Test func repeatedChromaScansAreRefusedByTheDCDecoder() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let flat = scratch.file("flat.jpg")
        try JPEGFile.write(RGBImage(width: 4000, height: 3000, fill: RGB(red: 120, green: 130, blue: 140)), to: flat, quality: 90)
        let progressive = readBytes(transcode(flat, ["-progressive"], in: scratch, name: "flat-progressive.jpg"))
        let sof = (0..<(progressive.count - 14)).first { progressive[$0] == 0xFF && progressive[$0 + 1] == 0xC2 }!
        let blue = progressive[sof + 13]  // Cb, 2000 x 1500: 250 x 188 blocks
        // AC table 0: EOB14 ("00") and EOB13 ("01"); 47,000 blocks = 32,767 + 14,233.
        let table: [UInt8] = [0xFF, 0xC4, 0, 21, 0x10, 0, 2] + Array(repeating: 0, count: 14) + [0xE0, 0xD0]
        let bits = "00" + String(repeating: "1", count: 14) + "01" + String(6041, radix: 2).leftPadded(to: 13)
        let data = entropyCodedBytes(bits)
        let scan: [UInt8] = [0xFF, 0xDA, 0, 8, 1, blue, 0x00, 1, 63, 0x00] + data
        var bomb = Array(progressive[..<(progressive.count - 2)]) + table
        for _ in 0..<450 { bomb += scan }
        bomb += [0xFF, 0xD9]
        let path = scratch.file("chroma-bomb.jpg")
        writeBytes(bomb, to: path)
        #expect {
            _ = try tile(path, width: 480, height: 360)
        } throws: { error in
            guard case TesseraError.unreadablePhoto(path, let reason) = error else { return false }
            return reason.contains("refused as a decoding bomb")
        }
    }

    @Test func aHeaderLargerThanItsDataIsRefusedWhenScanned() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var bytes = readBytes(transcode(landscape, ["-progressive"], in: scratch, name: "p.jpg"))
        let sof = (0..<(bytes.count - 9)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC2 }!
        bytes[sof + 5] = 0xFF; bytes[sof + 6] = 0xDC  // height 65500
        bytes[sof + 7] = 0xFF; bytes[sof + 8] = 0xDC  // width 65500
        writeBytes(bytes, to: scratch.file("claims-65500.jpg"))
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.photos.map(\.path) == [scratch.file("p.jpg")])
        #expect(library.skipped.count == 1)
        #expect(library.skipped.first?.reason.contains("header claims 65500 x 65500 px") == true, "\(library.skipped)")
    }

    /// A scan whose data stops at a marker is drawn past once (a cut file's last scan), but a
    /// file whose scans stop so one after another is refused at the second, instead of each
    /// costing a pass over the picture (a fuzzed 6 MB file of 500 such scans took 0.9 s to draw,
    /// 0.01 s to refuse).
    @Test func scansThatStopEarlyOneAfterAnotherAreRefused() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let bytes = readBytes(transcode(landscape, ["-progressive"], in: scratch, name: "p.jpg"))
        // The first AC scan's header, repeated with no data after it before the end of image.
        var at = 2, header: [UInt8] = []
        while at + 4 < bytes.count, header.isEmpty {
            // (Inside a scan's data, FF 00 is a stuffed byte and FF D0-D7 a restart marker.)
            guard bytes[at] == 0xFF, bytes[at + 1] != 0xFF, bytes[at + 1] != 0, !(0xD0...0xD7).contains(bytes[at + 1]) else { at += 1; continue }
            let length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            if bytes[at + 1] == 0xDA, bytes[at + 5 + 2 * Int(bytes[at + 4])] != 0 { header = Array(bytes[at..<(at + 2 + length)]) }
            at += bytes[at + 1] == 0xD8 ? 2 : 2 + length
        }
        try #require(!header.isEmpty)
        var damaged = Array(bytes[..<(bytes.count - 2)])
        for _ in 0..<40 { damaged += header }
        damaged += [0xFF, 0xD9]
        let path = scratch.file("stops.jpg")
        writeBytes(damaged, to: path)
        for (width, height) in [(200, 140), (900, 600)] {
            #expect {
                _ = try tile(path, width: width, height: height)
            } throws: { error in
                guard case TesseraError.unreadablePhoto(path, let reason) = error else { return false }
                return reason.contains("image data ends early")
            }
        }
    }

    /// A photo with restart markers whose data is damaged in two places (a marker's byte
    /// flipped, as in a camera photo of exif-samples): libjpeg resynchronises at the next
    /// restart marker each time and the picture goes on, but for a band, as djpeg draws it. It
    /// is drawn, the damage named, at 1/8 (where the DC decoder hands it to libjpeg) and at full
    /// size. It was a placeholder: the second stop at a marker was refused.
    @Test func damageThatRestartMarkersResynchronisePastIsDrawn() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var bytes = readBytes(transcode(landscape, ["-restart", "1"], in: scratch, name: "r.jpg"))
        // The restart markers of the picture's data: after its scan header, the last FF DA (a
        // thumbnail's scan comes before it).
        var start = bytes.count - 2
        while start > 0 && !(bytes[start] == 0xFF && bytes[start + 1] == 0xDA) { start -= 1 }
        let restarts = (start..<(bytes.count - 1)).filter { bytes[$0] == 0xFF && (0xD0...0xD7).contains(bytes[$0 + 1]) }
        try #require(restarts.count > 20, "\(restarts.count) restart markers")
        for k in [restarts.count / 3, 2 * restarts.count / 3] { bytes[restarts[k] + 1] = 0x9F }
        let path = scratch.file("damaged.jpg"), ppm = scratch.file("damaged.ppm")
        writeBytes(bytes, to: path)
        #expect(runTool(["djpeg", "-ppm", path], stdout: ppm) == 2)   // drawn, with libjpeg's warning
        let oracle = try #require(readPPM(ppm))
        let whole = try JPEGFile.read(landscape)
        for (width, height) in [(200, 140), (900, 600)] {
            let (cell, notes) = try tile(path, width: width, height: height)
            #expect(notes.incomplete?.hasPrefix("damaged JPEG data") == true, "\(width) x \(height): \(notes)")
            #expect(notes.firstWarning.contains("damaged JPEG data"), "\(notes.firstWarning)")
            let fromOracle = meanAbsoluteDifference(cell, referenceCell(oracle, width: width, height: height))
            #expect(fromOracle < 3, "\(width) x \(height): \(fromOracle) from libjpeg's picture of the damaged file")
            let fromWhole = meanAbsoluteDifference(cell, referenceCell(whole, width: width, height: height))
            #expect(fromWhole < 6, "\(width) x \(height): \(fromWhole) from the whole file's picture")
        }
    }

    /// A progressive photo cut off after a third of its bytes (a copy interrupted) still holds
    /// every block's first scans: it is drawn whole from them, less sharp, as libjpeg draws it
    /// (djpeg of the same cut file is the oracle), with a warning, at 1/8 (where the DC decoder
    /// hands such a file to libjpeg) and at full size. It was a grey placeholder before.
    @Test func truncatedProgressivePhotoIsDrawnFromTheScansItHolds() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let bytes = readBytes(transcode(landscape, ["-progressive"], in: scratch, name: "p.jpg"))
        let path = scratch.file("truncated.jpg"), ppm = scratch.file("truncated.ppm")
        writeBytes(Array(bytes[..<(bytes.count / 3)]), to: path)
        #expect(runTool(["djpeg", "-ppm", path], stdout: ppm) == 2)   // drawn, with libjpeg's warning
        let oracle = try #require(readPPM(ppm))
        let whole = try JPEGFile.read(landscape)
        for (width, height) in [(200, 140), (900, 600)] {
            let (cell, notes) = try tile(path, width: width, height: height)
            #expect(notes.incomplete != nil, "\(width) x \(height): \(notes)")
            #expect(notes.firstWarning.contains("file ends early") && notes.firstWarning.contains("less sharp"), "\(notes.firstWarning)")
            let fromOracle = meanAbsoluteDifference(cell, referenceCell(oracle, width: width, height: height))
            #expect(fromOracle < 3, "\(width) x \(height): \(fromOracle) from libjpeg's picture of the cut file")
            // The picture, not grey: near the whole file's too.
            let fromWhole = meanAbsoluteDifference(cell, referenceCell(whole, width: width, height: height))
            #expect(fromWhole < 6, "\(width) x \(height): \(fromWhole) from the whole file's picture")
        }
    }
}

extension RenderTests {
    /// A full disk where a large progressive photo's decoding data goes: the photo fails with a
    /// message that says what happened and what to do, the spill file leaves nothing behind, and
    /// a render draws it as a placeholder and completes.
    @Test func fullDiskForTheSpillFileGivesAClearMessage() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let progressive = scratch.file("p.jpg")
        #expect(runTool(["jpegtran", "-progressive", fixturesDirectory + "/orientation/Landscape_1.jpg"], stdout: progressive) == 0)
        let spillFolder = scratch.file("spill")
        mkdir(spillFolder, 0o755)
        let decoder = CellDecoder(cellWidth: 400, cellHeight: 280,
                                  budget: DecodeBudget(poolBytes: 64 << 10, spillDirectory: spillFolder))
        SyscallFaults.inject("pwrite", errno: ENOSPC, pathPrefix: spillFolder, count: 1000)
        defer { SyscallFaults.reset() }
        var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
        let result = bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(TesseraError) in try decoder.decode(path: progressive, into: buffer) }
        }
        guard case .failure(.unreadablePhoto(let path, let reason)) = result else {
            Issue.record("decoded with a full disk: \(result)")
            return
        }
        #expect(SyscallFaults.fired("pwrite", pathPrefix: spillFolder) >= 1)
        #expect(path == progressive)
        #expect(reason.contains(spillFolder) && reason.contains("No space left on device") && reason.contains("temporary folder"), "\(reason)")
        #expect(listNames(spillFolder).isEmpty)
    }
}


@Suite struct CancellationTests {
    /// A long decode (a noisy 12 MP progressive photo at full size, its coefficients spilled)
    /// stops when cancelled from another thread, with `.cancelled`, not a placeholder's error.
    @Test func aLongDecodeStopsWhenCancelled() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let noisy = scratch.file("noisy.jpg"), progressive = scratch.file("noisy-progressive.jpg")
        #expect(system("convert -size 4000x3000 xc:gray +noise Random -quality 90 '\(noisy)'") == 0)
        #expect(runTool(["jpegtran", "-progressive", noisy], stdout: progressive) == 0)
        for path in [noisy, progressive] {
            let cancellation = RenderCancellation()
            let decoder = CellDecoder(cellWidth: 4000, cellHeight: 3000,
                                      budget: DecodeBudget(poolBytes: 4 << 20, spillDirectory: scratch.path),
                                      cancellation: cancellation)
            let canceller = try JoinableThread {
                usleep(200_000)
                cancellation.cancel()
            }
            var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
            let result = bytes.withUnsafeMutableBytes { buffer in
                Result { () throws(TesseraError) in try decoder.decode(path: path, into: buffer) }
            }
            canceller.join()
            #expect(result.map { _ in "decoded" } == .failure(.cancelled), "\(path)")
        }
        // Cancelled before it starts: nothing is opened.
        let cancelled = RenderCancellation()
        cancelled.cancel()
        let decoder = CellDecoder(cellWidth: 150, cellHeight: 100, decodePoolBytes: 8 << 20)
        let early = CellDecoder(cellWidth: 150, cellHeight: 100, budget: decoder.budget, cancellation: cancelled)
        var bytes = [UInt8](repeating: 0, count: early.cellBytes)
        let result = bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(TesseraError) in try early.decode(path: progressive, into: buffer) }
        }
        #expect(result.map { _ in "decoded" } == .failure(.cancelled))
    }

    /// Every phase before the render looks at the flag: the scan, the analysis, the matching.
    @Test func scanAnalysisAndMatchingStopWhenCancelled() throws {
        let cancelled = RenderCancellation()
        cancelled.cancel()
        let orientation = fixturesDirectory + "/orientation"
        #expect(throws: TesseraError.cancelled) { try PhotoLibrary.scan([orientation], cancellation: cancelled) }
        let library = try PhotoLibrary.scan([orientation])
        let analysis = MosaicAnalysis.photoFeatures(library.photos, subCells: 3, cellAspect: 1, workers: 2, index: nil,
                                                    cancellation: cancelled)
        #expect(analysis.features.allSatisfy { $0 == nil })
        #expect(analysis.failed.isEmpty)
        let features = MosaicAnalysis.photoFeatures(library.photos, subCells: 3, cellAspect: 1, workers: 2, index: nil)
            .features.compactMap { $0 }
        #expect(features.count == library.photos.count)
        let target = [Float](repeating: 0.5, count: 20 * 20 * 27)
        #expect(throws: TesseraError.cancelled) {
            try MosaicMatcher.match(target: target, columns: 20, rows: 20, subCells: 3, photoFeatures: features,
                                    minDistance: 1, maxUses: nil, seed: 1, workers: 2, cancellation: cancelled)
        }
        _ = try MosaicMatcher.match(target: target, columns: 20, rows: 20, subCells: 3, photoFeatures: features,
                                    minDistance: 1, maxUses: nil, seed: 1, workers: 2)
    }
}

extension ProgressiveTests {
    /// A baseline header claiming 65,500 x 65,500 px over a 20 GB sparse file (holes read as
    /// zeros, which decode as data for as long as there are rows) is refused when scanned.
    @Test func aSparseFileIsNotAPhoto() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var bytes = readBytes(fixturesDirectory + "/variants/base.jpg")
        let sof = (0..<(bytes.count - 9)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 }!
        bytes[sof + 5] = 0xFF; bytes[sof + 6] = 0xDC
        bytes[sof + 7] = 0xFF; bytes[sof + 8] = 0xDC
        // Drop the entropy data and the end marker: the header, then 20 GB of holes.
        let sos = (0..<(bytes.count - 1)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA }!
        let length = Int(bytes[sos + 2]) << 8 | Int(bytes[sos + 3])
        let path = scratch.file("sparse.jpg")
        writeBytes(Array(bytes[..<(sos + 2 + length)]), to: path)
        #expect(truncate(path, 20 << 30) == 0)
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.photos.isEmpty)
        #expect(library.skipped.first?.reason.contains("sparse file") == true, "\(library.skipped)")
    }
}

/// A scan's entropy-coded bytes from its bits ("0" and "1"): padded with one bits to a whole
/// byte, 0xFF stuffed with 0x00.
private func entropyCodedBytes(_ bits: String) -> [UInt8] {
    var bits = bits
    while bits.count % 8 != 0 { bits += "1" }
    var data: [UInt8] = []
    var index = bits.startIndex
    while index < bits.endIndex {
        let next = bits.index(index, offsetBy: 8)
        let byte = UInt8(bits[index..<next], radix: 2)!
        data.append(byte)
        if byte == 0xFF { data.append(0) }
        index = next
    }
    return data
}

private extension String {
    /// The string with "0"s in front, `count` characters long at least.
    func leftPadded(to count: Int) -> String { String(repeating: "0", count: max(0, count - self.count)) + self }
}
