// DCDecoderAgreementTests.swift — the DC decoder (tessera_dc.c) against libjpeg at 1/8.
//
// The oracle is libjpeg itself: `djpeg -scale 1/8 -rgb` of the same multi-scan file, read back
// and compared pixel by pixel with the DC decoder's own output (before any resampling, so
// nothing averages a difference away). Files are made with libjpeg-turbo's tools: cjpeg
// -sample for the layout, then jpegtran -scans (or cjpeg -scans, for an MCU too large to be
// interleaved) for the scan structure. Corrupt files are byte edits of a progressive one, and
// each test first asks djpeg what libjpeg does with the file, so that the test stays honest.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

/// One component's sampling factors.
private struct Sampling: CustomStringConvertible {
    var h: Int, v: Int
    var description: String { "\(h)x\(v)" }
}

/// The scale libjpeg gives a component's IDCT at a 1/8 output, in eighths (jdmaster.c's rule,
/// restated: doubled while twice the size still divides the largest factors both ways).
private func libjpegIDCTSize(_ c: Sampling, hMax: Int, vMax: Int) -> Int {
    var size = 1
    while size < 8 && hMax % (c.h * size * 2) == 0 && vMax % (c.v * size * 2) == 0 { size *= 2 }
    return size
}

private func writePPM(_ image: RGBImage, to path: String) {
    writeBytes(Array("P6\n\(image.width) \(image.height)\n255\n".utf8) + image.pixels, to: path)
}

/// What the DC decoder makes of `path`: its 1/8 picture, or the reason it handed the file back.
private func decodeWithDCDecoder(_ path: String) throws -> (image: RGBImage?, declined: String?) {
    let reader = try ScaledJPEGReader(path: path, decoderMemoryBytes: 64 << 20)
    let header = try reader.readHeader()
    let dc = try reader.dcReader(memoryLimitBytes: 64 << 20, spillDirectory: temporaryRoot, storedRGB: header.storedRGB)
    switch try dc.decode() {
    case .unsupported(let reason):
        return (nil, reason)
    case .decoded(let width, let height):
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var rows = 0
        try pixels.withUnsafeMutableBytes { buffer in
            while rows < height {
                let count = try dc.readRows(into: buffer.baseAddress! + rows * width * 3, stride: width * 3, maxRows: height - rows)
                if count == 0 { break }
                rows += count
            }
        }
        #expect(rows == height)
        return (RGBImage(width: width, height: height, pixels: pixels), nil)
    }
}

/// Scan scripts for jpegtran/cjpeg -scans, by name; `interleaved` ones need an MCU of at most 10
/// blocks. One component (grey) or three.
private func scanScripts(components: Int) -> [(name: String, interleaved: Bool, lines: [String])] {
    let all = components == 1 ? "0" : "0,1,2"
    let each = Array(0..<components)
    return [
        ("successive approximation, DC refined last, non-interleaved DC", false,
         each.map { "\($0): 0 0 0 1;" }
            + each.flatMap { ["\($0): 1 5 0 2;", "\($0): 6 63 0 2;"] }
            + each.map { "\($0): 1 63 2 1;" } + each.map { "\($0): 1 63 1 0;" }
            + each.map { "\($0): 0 0 1 0;" }),
        ("sequential, components in separate scans", false, each.map { "\($0): 0 63 0 0;" }),
        ("interleaved DC, one AC band a component", true,
         ["\(all): 0 0 0 0;"] + each.map { "\($0): 1 63 0 0;" }),
        ("interleaved DC at Al=2 refined twice, AC in three bands", true,
         ["\(all): 0 0 0 2;"] + each.flatMap { ["\($0): 1 2 0 0;", "\($0): 3 20 0 0;", "\($0): 21 63 0 0;"] }
            + ["\(all): 0 0 2 1;", "\(all): 0 0 1 0;"]),
    ]
}

@Suite struct DCDecoderAgreementTests {
    /// The layouts the issue named, the common ones, then random ones libjpeg accepts.
    private func layouts(seed: UInt64, randomCount: Int) -> [[Sampling]] {
        let named: [[(Int, Int)]] = [
            [(1, 1)], [(2, 2)], [(1, 1), (1, 1), (1, 1)], [(2, 2), (1, 1), (1, 1)], [(2, 1), (1, 1), (1, 1)],
            [(1, 2), (1, 1), (1, 1)], [(4, 2), (1, 1), (1, 1)], [(2, 4), (1, 1), (1, 1)], [(4, 4), (1, 1), (1, 1)],
            [(1, 1), (4, 4), (4, 4)], [(4, 4), (2, 1), (2, 1)], [(4, 2), (1, 2), (1, 1)],
        ]
        var result = named.map { $0.map { Sampling(h: $0.0, v: $0.1) } }
        var random = SplitMix64(seed: seed)
        while result.count < named.count + randomCount {
            let components = random.next() % 5 == 0 ? 1 : 3
            let layout = (0..<components).map { _ in Sampling(h: Int(random.next() % 4) + 1, v: Int(random.next() % 4) + 1) }
            let hMax = layout.map(\.h).max()!, vMax = layout.map(\.v).max()!
            // libjpeg refuses factors that do not divide the largest (tested below); not a layout.
            if layout.allSatisfy({ hMax % $0.h == 0 && vMax % $0.v == 0 }) { result.append(layout) }
        }
        return result
    }

    @Test func everySamplingLayoutDrawsWhatLibjpegDrawsAtOneEighth() throws {
        let seed: UInt64 = 20251201
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var random = SplitMix64(seed: seed ^ 0x9E37)
        var report: [String] = []
        for (index, layout) in layouts(seed: seed, randomCount: 120).enumerated() {
            let hMax = layout.map(\.h).max()!, vMax = layout.map(\.v).max()!
            let sizes = layout.map { libjpegIDCTSize($0, hMax: hMax, vMax: vMax) }
            // libjpeg draws a component at 2/8 with no upsampling only when it is half the
            // largest factors both ways; otherwise it replicates the 2 x 2 samples.
            let replicatedAfterIDCT = zip(layout, sizes).contains { $1 == 2 && ($0.h * 2 != hMax || $0.v * 2 != vMax) }
            let handedToLibjpeg = sizes.contains(4) || replicatedAfterIDCT || sizes[0] == 2
            let blocksInMCU = layout.map { $0.h * $0.v }.reduce(0, +)
            let name = layout.map(\.description).joined(separator: ",")
            // Sizes not multiples of the MCU (odd ones too), at least 12 x 8 px at 1/8: a mean
            // over fewer pixels says little about an approximation (44 x 15: 0.81 from a few
            // pixels off by 2 or 3).
            let width = 96 + Int(random.next() % 320), height = 64 + Int(random.next() % 256)
            let ppm = scratch.file("\(index).ppm")
            let picture = SamplePhotos.picture(width: width, height: height, seed: seed &+ UInt64(index))
            writePPM(layout.count == 1 ? grey(picture) : picture, to: ppm)
            let sample = (layout.count == 1 ? ["-grayscale"] : []) + ["-sample", name]
            let scripts = scanScripts(components: layout.count).filter { !$0.interleaved || blocksInMCU <= 10 }
            let script = scripts[Int(random.next() % UInt64(scripts.count))]
            let scriptPath = scratch.file("\(index).txt")
            writeBytes(Array((script.lines.joined(separator: "\n") + "\n").utf8), to: scriptPath)
            let path = scratch.file("\(index).jpg")
            let context = "seed \(seed), case \(index): \(name) sampling, \(width) x \(height), \(script.name)"
            if blocksInMCU <= 10 {
                let base = scratch.file("\(index)-baseline.jpg")
                #expect(runTool(["cjpeg", "-quality", "90"] + sample + [ppm], stdout: base) == 0, "\(context)")
                let options = random.next() % 3 == 0 ? ["-progressive"] : ["-scans", scriptPath]
                #expect(runTool(["jpegtran"] + options + [base], stdout: path) == 0, "\(context)")
            } else {
                // libjpeg refuses to interleave an MCU over 10 blocks: every scan of one component.
                #expect(runTool(["cjpeg", "-quality", "90"] + sample + ["-scans", scriptPath, ppm], stdout: path) == 0, "\(context)")
            }
            let oraclePath = scratch.file("\(index)-libjpeg.ppm")
            #expect(runTool(["djpeg", "-scale", "1/8", "-rgb", path], stdout: oraclePath) == 0, "\(context)")
            let expected = try #require(readPPM(oraclePath), "\(context)")
            let decoded = try decodeWithDCDecoder(path)
            if handedToLibjpeg {
                // A component libjpeg draws at 4/8 (1 x 1 beside 4 x 4) needs nearly all its
                // coefficients; for luma at 2/8, or a component replicated after its 2/8 IDCT,
                // the three-coefficient approximation is too far off (measured 1.0 and 0.86
                // levels): handed to libjpeg.
                #expect(decoded.image == nil, "\(context): expected the DC decoder to hand it to libjpeg")
                let (_, notes) = try tileAtOneEighth(path, width: expected.width, height: expected.height)
                #expect(notes.method == .coefficients(spilled: false), "\(context): \(notes.method)")
                report.append("\(name): libjpeg")
                continue
            }
            let image = try #require(decoded.image, "\(context): declined: \(decoded.declined ?? "")")
            #expect(image.width == expected.width && image.height == expected.height, "\(context)")
            guard image.width == expected.width && image.height == expected.height else { continue }
            let difference = meanAbsoluteDifference(image, expected)
            let largest = zip(image.pixels, expected.pixels).map { abs(Int($0) - Int($1)) }.max() ?? 0
            // Components libjpeg draws at 1/8 are one DC value a block: exact. Those it draws at
            // 2/8 come from three low-frequency coefficients (tessera_dc.c): within 0.6 levels.
            let allowed = sizes.contains(2) ? 0.6 : 0
            #expect(difference <= allowed, "\(context): mean difference \(difference) (largest \(largest)), allowed \(allowed)")
            report.append("\(name): mean \((difference * 1000).rounded() / 1000), max \(largest)")
        }
        print("DCDecoderAgreementTests (seed \(seed)):\n  " + report.joined(separator: "\n  "))
    }

    /// The common layouts keep the fast path: decoded by the DC decoder, planes in memory.
    @Test(arguments: ["2x2,1x1,1x1", "2x1,1x1,1x1", "1x1,1x1,1x1", "1x2,1x1,1x1", "grey"])
    func commonLayoutsKeepTheDCDecoder(layout: String) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let ppm = scratch.file("photo.ppm"), base = scratch.file("base.jpg"), path = scratch.file("photo.jpg")
        writePPM(SamplePhotos.picture(width: 1203, height: 797, seed: 11), to: ppm)
        let options = layout == "grey" ? ["-grayscale"] : ["-sample", layout]
        #expect(runTool(["cjpeg", "-quality", "90"] + options + [ppm], stdout: base) == 0)
        #expect(runTool(["jpegtran", "-progressive", base], stdout: path) == 0)
        let (_, notes) = try tileAtOneEighth(path, width: 140, height: 90)
        #expect(notes.method == .dcOnly(spilled: false), "\(layout): \(notes.method)")
    }
}

/// Cut files: a progressive photo cut anywhere after its first scan began is drawn by the DC
/// decoder itself, as libjpeg draws the cut file (djpeg -scale 1/8 of it is the oracle): the
/// blocks before the cut from every scan that reached them, the rest from the scans before.
/// (Cut before every component's AC scans began, libjpeg smooths the DC values: a few levels.) Handed to libjpeg instead, such a file took 5 to 20 times as long at 1/8 and
/// spilled up to 827 MB of coefficients for a 48 MP photo (a helper measured it).
@Suite struct DCDecoderCutFileTests {
    @Test(arguments: ["2x2,1x1,1x1", "1x1,1x1,1x1", "grey"])
    func aCutFileIsDrawnAsLibjpegDrawsIt(layout: String) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let ppm = scratch.file("photo.ppm"), base = scratch.file("base.jpg"), whole = scratch.file("whole.jpg")
        writePPM(SamplePhotos.picture(width: 640, height: 480, seed: 31), to: ppm)
        let options = layout == "grey" ? ["-grayscale"] : ["-sample", layout]
        #expect(runTool(["cjpeg", "-quality", "90"] + options + [ppm], stdout: base) == 0)
        #expect(runTool(["jpegtran", "-progressive", base], stdout: whole) == 0)
        let bytes = readBytes(whole)
        let firstScan = try #require((0..<(bytes.count - 1)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA })
        var drawnExactly = 0
        for eighth in 1...7 {
            let cut = firstScan + 40 + (bytes.count - firstScan - 40) * eighth / 8
            let path = scratch.file("cut-\(eighth).jpg"), oracle = scratch.file("cut-\(eighth).ppm")
            writeBytes(Array(bytes[..<cut]), to: path)
            #expect(runTool(["djpeg", "-scale", "1/8", "-rgb", "-ppm", path], stdout: oracle) == 2, "libjpeg draws it, warning")
            let expected = try #require(readPPM(oracle))
            let decoded = try decodeWithDCDecoder(path)
            let (_, notes) = try tileAtOneEighth(path, width: 80, height: 60)
            #expect(notes.incomplete != nil && notes.method == .dcOnly(spilled: false), "\(layout), cut at \(eighth)/8: \(notes)")
            let image = try #require(decoded.image, "\(layout), cut at \(eighth)/8: handed to libjpeg: \(decoded.declined ?? "")")
            try #require(image.width == expected.width && image.height == expected.height)
            // Before the cut, as exact as a whole file (4:2:0 chroma within 0.6 levels); past it
            // within a level or two (libjpeg goes on smoothing the blocks the cut scan did not
            // reach, by the scans before it), but for the blocks where the data ran out: which
            // MCU gets the zeros libjpeg pads with can differ by one. Cut before every
            // component's AC scans began, libjpeg smooths the DC values themselves: a few levels.
            let difference = meanAbsoluteDifference(image, expected)
            let far = (0..<(image.width * image.height)).filter { i in
                (0..<3).contains { abs(Int(image.pixels[3 * i + $0]) - Int(expected.pixels[3 * i + $0])) > 4 }
            }
            if try endsWhereLibjpegSmooths(path) {
                #expect(difference <= 3, "\(layout), cut at \(eighth)/8 (smoothed by libjpeg): mean difference \(difference)")
            } else {
                drawnExactly += 1
                #expect(difference <= 0.6 && far.count <= 8,
                        "\(layout), cut at \(eighth)/8: mean difference \(difference), \(far.count) pixels over 4 levels apart")
            }
        }
        // Most cuts come after every component's first AC scan (jpegtran's progression).
        #expect(drawnExactly >= 4, "\(layout): \(drawnExactly) of 7 cuts where libjpeg does not smooth")
    }
}

/// Whether the DC decoder finds `path` cut before every component's AC scans began.
private func endsWhereLibjpegSmooths(_ path: String) throws -> Bool {
    let reader = try ScaledJPEGReader(path: path, decoderMemoryBytes: 64 << 20)
    let header = try reader.readHeader()
    let dc = try reader.dcReader(memoryLimitBytes: 64 << 20, spillDirectory: temporaryRoot, storedRGB: header.storedRGB)
    _ = try dc.decode()
    return dc.endedWhereLibjpegSmooths
}

/// `image` in grey (the luma cjpeg would compute is not needed: any grey picture will do).
private func grey(_ image: RGBImage) -> RGBImage {
    var out = image
    for i in Swift.stride(from: 0, to: image.pixels.count, by: 3) {
        let g = UInt8((Int(image.pixels[i]) + 2 * Int(image.pixels[i + 1]) + Int(image.pixels[i + 2])) / 4)
        out.pixels[i] = g; out.pixels[i + 1] = g; out.pixels[i + 2] = g
    }
    return out
}

/// Decodes `path` through the library into a cell a little under its 1/8 size (so 1/8 is the
/// scale chosen).
private func tileAtOneEighth(_ path: String, width: Int, height: Int) throws -> (RGBImage, DecodeNotes) {
    let cellWidth = max(1, width - width / 16), cellHeight = max(1, height - height / 16)
    let decoder = CellDecoder(cellWidth: cellWidth, cellHeight: cellHeight, budget: DecodeBudget(budgetBytes: 256 << 20, workers: 1))
    var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
    let notes = try bytes.withUnsafeMutableBytes { buffer in
        Result { () throws(TesseraError) in try decoder.decode(path: path, into: buffer) }
    }.get()
    return (RGBImage(width: cellWidth, height: cellHeight, pixels: bytes), notes)
}

// MARK: Corrupt files

/// The segments of a JPEG: marker code, offset of its FF and the offset after it (after the
/// entropy-coded data, for a scan).
private func segments(_ bytes: [UInt8]) -> [(marker: UInt8, start: Int, end: Int)] {
    var result: [(UInt8, Int, Int)] = []
    var i = 2
    while i + 3 < bytes.count, bytes[i] == 0xFF {
        let marker = bytes[i + 1]
        if marker == 0xD9 { result.append((marker, i, i + 2)); break }
        var end = i + 2 + Int(bytes[i + 2]) << 8 + Int(bytes[i + 3])
        if marker == 0xDA {
            while end + 1 < bytes.count && !(bytes[end] == 0xFF && bytes[end + 1] != 0 && !(0xD0...0xD7).contains(bytes[end + 1])) {
                end += 1
            }
        }
        result.append((marker, i, end))
        i = end
    }
    return result
}

/// A scan's header fields: component ids, and the offset of its Ss byte (Se and Ah/Al follow).
private func scanFields(_ bytes: [UInt8], at start: Int) -> (components: [UInt8], ss: Int) {
    let count = Int(bytes[start + 4])
    return ((0..<count).map { bytes[start + 5 + 2 * $0] }, start + 5 + 2 * count)
}

/// Bits ("0" and "1") as entropy-coded bytes: padded with ones, FF stuffed.
private func entropyBytes(_ bits: String) -> [UInt8] {
    var padded = Array(bits.utf8)
    while padded.count % 8 != 0 { padded.append(UInt8(ascii: "1")) }
    var out: [UInt8] = []
    for start in Swift.stride(from: 0, to: padded.count, by: 8) {
        let byte = padded[start..<(start + 8)].reduce(UInt8(0)) { $0 << 1 | ($1 == UInt8(ascii: "1") ? 1 : 0) }
        out.append(byte)
        if byte == 0xFF { out.append(0) }
    }
    return out
}

/// The corruption classes of issue 25, each a byte edit of a 640 x 480 4:2:0 progressive file
/// made by jpegtran -progressive (scans: DC at Al=1 interleaved, then Y 1-5, Cr, Cb, Y 6-63,
/// the Y refinement, the DC refinement, ...).
enum DCCorruption: String, CaseIterable, CustomStringConvertible {
    case lumaACScanEndsAt70, lumaACScanStartsAfterItsEnd, successiveApproximationAl14, refinementNotOneBitDown
    case dcCategory15, mcuOf18Blocks, fractionalSampling431
    case refinementBeforeItsFirstScan, noDCScan, dcRefinementFirst

    var description: String { rawValue }

    /// What libjpeg does with the file: refuse it (djpeg's exit status 1), draw it with a warning
    /// (2), or draw it without a word (0).
    var libjpegStatus: Int32 {
        switch self {
        case .refinementBeforeItsFirstScan, .noDCScan, .dcRefinementFirst: return 2
        case .dcCategory15: return 0
        default: return 1
        }
    }

    /// Words of the reason the photo is refused for (libjpegStatus 1 and 0).
    var reason: String {
        switch self {
        case .lumaACScanEndsAt70: return "invalid progressive scan (Ss=1 Se=70 Ah=0 Al=2)"
        case .lumaACScanStartsAfterItsEnd: return "invalid progressive scan (Ss=6 Se=5 Ah=0 Al=2)"
        case .successiveApproximationAl14: return "invalid progressive scan (Ss=0 Se=0 Ah=0 Al=14)"
        case .refinementNotOneBitDown: return "invalid progressive scan (Ss=1 Se=63 Ah=3 Al=0)"
        case .dcCategory15: return "corrupt DC data (a difference over 11 bits)"
        case .mcuOf18Blocks: return "an interleaved scan of 18 blocks an MCU"
        case .fractionalSampling431: return "fractional sampling factors"
        default: return "Inconsistent progression sequence"   // libjpeg's warning
        }
    }

    func apply(to original: [UInt8]) -> [UInt8] {
        var bytes = original
        let all = segments(bytes)
        let scans = all.filter { $0.marker == 0xDA }
        let sof = all.first { $0.marker == 0xC2 }!.start
        let luma = bytes[sof + 10]
        let firstLumaAC = scans.first { let f = scanFields(bytes, at: $0.start); return f.components == [luma] && bytes[f.ss] == 1 }!
        let acFields = scanFields(bytes, at: firstLumaAC.start).ss
        switch self {
        case .lumaACScanEndsAt70:
            bytes[acFields + 1] = 70
        case .lumaACScanStartsAfterItsEnd:
            bytes[acFields] = 6; bytes[acFields + 1] = 5
        case .successiveApproximationAl14:
            bytes[scanFields(bytes, at: scans[0].start).ss + 2] = 0x0E
        case .refinementNotOneBitDown:
            bytes[scanFields(bytes, at: scans.last!.start).ss + 2] = 0x30
        case .refinementBeforeItsFirstScan:
            bytes[acFields + 2] = 0x32   // Ah = 3 where nothing was sent yet
        case .dcRefinementFirst:
            bytes[scanFields(bytes, at: scans[0].start).ss + 2] = 0x21
        case .mcuOf18Blocks:
            bytes[sof + 11] = 0x44       // luma 4 x 4 beside 1 x 1 chroma, still one interleaved DC scan
        case .fractionalSampling431:
            bytes[sof + 11] = 0x41; bytes[sof + 14] = 0x31; bytes[sof + 17] = 0x11
        case .noDCScan:
            let dc = scans.filter { bytes[scanFields(bytes, at: $0.start).ss] == 0 }
            for scan in dc.reversed() { bytes.removeSubrange(scan.start..<scan.end) }
        case .dcCategory15:
            // DC tables 0 and 1 of two 2-bit codes, "00" for category 0 and "01" for 15; the
            // first DC scan rewritten: the first block's difference is 2^14, every other 0.
            let table: [UInt8] = [0, 2] + [UInt8](repeating: 0, count: 14) + [0, 15]
            let dht: [UInt8] = [0xFF, 0xC4, 0, 40, 0x00] + table + [0x01] + table
            let first = scans[0], header = scanFields(bytes, at: first.start).ss + 3
            let blocks = (640 / 16) * (480 / 16) * 6
            let data = entropyBytes("01" + "1" + String(repeating: "0", count: 14) + String(repeating: "00", count: blocks - 1))
            bytes = Array(bytes[..<first.start]) + dht + Array(bytes[first.start..<header]) + data + Array(bytes[first.end...])
        }
        return bytes
    }
}

@Suite struct DCDecoderCorruptFileTests {
    @Test(arguments: DCCorruption.allCases)
    func aCorruptFileIsNeverDrawnSilently(corruption: DCCorruption) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let base = scratch.file("base.jpg"), progressive = scratch.file("progressive.jpg")
        try JPEGFile.write(SamplePhotos.picture(width: 640, height: 480, seed: 25), to: base, quality: 90)
        #expect(runTool(["jpegtran", "-progressive", base], stdout: progressive) == 0)
        let path = scratch.file("\(corruption).jpg")
        writeBytes(corruption.apply(to: readBytes(progressive)), to: path)
        // What libjpeg does with it, at 1/8 as at 2/8.
        #expect(runTool(["djpeg", "-scale", "1/8", path]) == corruption.libjpegStatus, "\(corruption)")
        #expect(runTool(["djpeg", "-scale", "2/8", path]) == corruption.libjpegStatus, "\(corruption)")

        // A grid of 48 x 32 cells draws the 640 x 480 photo at 1/8, where the DC decoder reads it.
        var events: [RenderEvent] = []
        let summary = try renderGrid([path], to: scratch.file("out.jpg"), columns: 1, rows: 1, cellWidth: 48, cellHeight: 32,
                                     events: { events.append($0) })
        if corruption.libjpegStatus == 2 {
            // libjpeg only warns about a progression out of order and draws the file its way:
            // the DC decoder hands it over, so the cell is libjpeg's, with its warning.
            #expect(summary.failedPhotos.isEmpty, "\(corruption): \(summary.failedPhotos)")
            let warned = events.contains {
                if case .photoWarning(path, let message) = $0 { return message.contains(corruption.reason) } else { return false }
            }
            #expect(warned, "\(corruption): \(events)")
        } else {
            // Refused: a placeholder, and the failure names the photo and says why.
            #expect(summary.failedPhotos.map(\.path) == [path], "\(corruption)")
            #expect(summary.failedPhotos.first?.reason.contains(corruption.reason) == true, "\(corruption): \(summary.failedPhotos)")
            #expect(events.contains { if case .photoFailed(let skipped) = $0 { return skipped.path == path } else { return false } })
        }
    }
}
