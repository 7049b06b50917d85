// CompactCoefficientTests.swift — multi-scan JPEGs at 1/8 to 7/8 through libjpeg with compact
// coefficient arrays (tessera_coefficients.c: only the coefficients each scale's inverse DCT
// reads are stored), against libjpeg's own picture.
//
// The oracle is libjpeg itself: `djpeg -scale N/8 -rgb` of the same file, which keeps every
// coefficient in its own memory manager. The pictures must be equal byte for byte: the
// coefficients left out are ones the reduced IDCTs never read. Files are made with
// libjpeg-turbo's tools (cjpeg -progressive, jpegtran -progressive, cjpeg -scans with
// successive approximation of the AC bands, restart intervals), in several samplings and
// sizes that are not multiples of the MCU. Corrupt and truncated files must come out as they
// do with every coefficient kept: the same error, or the same picture and warnings.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

private func writePPM(_ image: RGBImage, grey: Bool, to path: String) {
    var pixels = image.pixels
    if grey {
        for i in Swift.stride(from: 0, to: pixels.count, by: 3) {
            let g = UInt8((Int(pixels[i]) + 2 * Int(pixels[i + 1]) + Int(pixels[i + 2])) / 4)
            pixels[i] = g; pixels[i + 1] = g; pixels[i + 2] = g
        }
    }
    writeBytes(Array("P6\n\(image.width) \(image.height)\n255\n".utf8) + pixels, to: path)
}

/// What one decode through ScaledJPEGReader gave.
private struct Decoded {
    var image: RGBImage
    var warnings: Int
    var plan: (stored: Int, windows: Int, minimumSpilled: Int)
    var bytes: (total: Int, allocated: Int)
    var spilled: Bool
}

/// `path` at `numerator`/8 through libjpeg, its coefficients under `limit` bytes of memory (or
/// in memory whole when nil), compact or (`every`) with all 64 coefficients a block.
private func decode(_ path: String, numerator: Int, limit: Int?, every: Bool = false) throws -> Decoded {
    let reader = try ScaledJPEGReader(path: path, decoderMemoryBytes: 64 << 20)
    _ = try reader.readHeader()
    let plan = try reader.coefficientPlan(numerator: numerator)
    reader.useCoefficientStorage(memoryLimitBytes: limit ?? (plan.stored + plan.windows), spillDirectory: temporaryRoot)
    reader.keepEveryCoefficient(every)
    let size = try reader.start()
    var pixels = [UInt8](repeating: 0, count: size.width * size.height * 3)
    var rows = 0
    try pixels.withUnsafeMutableBytes { buffer in
        while rows < size.height {
            let count = try reader.readRows(into: buffer.baseAddress! + rows * size.width * 3, stride: size.width * 3,
                                            maxRows: size.height - rows)
            if count == 0 { break }
            rows += count
        }
    }
    #expect(rows == size.height)
    return Decoded(image: RGBImage(width: size.width, height: size.height, pixels: pixels), warnings: reader.warnings.count,
                   plan: plan, bytes: reader.coefficientBytes, spilled: reader.coefficientsSpilled)
}

/// A scan script with successive approximation in every band, AC split at 5 and refined twice
/// (jpegtran -progressive's shape, with different cut points), for three components or one.
private func approximationScript(components: Int) -> String {
    if components == 1 {
        return "0: 0 0 0 2;\n0: 1 2 0 3;\n0: 3 20 0 3;\n0: 21 63 0 3;\n0: 0 0 2 1;\n0: 1 63 3 2;\n0: 1 63 2 1;\n0: 0 0 1 0;\n0: 1 63 1 0;\n"
    }
    return "0,1,2: 0 0 0 1;\n0: 1 5 0 2;\n2: 1 63 0 1;\n1: 1 63 0 1;\n0: 6 63 0 2;\n0: 1 63 2 1;\n"
        + "0,1,2: 0 0 1 0;\n2: 1 63 1 0;\n1: 1 63 1 0;\n0: 1 63 1 0;\n"
}

/// A file of each kind the tests use, made from a generated picture of `width` x `height`.
private func makeFile(_ kind: String, width: Int, height: Int, in scratch: ScratchDirectory) -> String {
    let grey = kind.hasPrefix("grey")
    let ppm = scratch.file("\(kind).ppm"), path = scratch.file("\(kind).jpg"), base = scratch.file("\(kind)-base.jpg")
    writePPM(SamplePhotos.picture(width: width, height: height, seed: UInt64(width * 7 + height)), grey: grey, to: ppm)
    let sampling: [String] = grey ? ["-grayscale"] : kind.contains("444") ? ["-sample", "1x1"]
        : kind.contains("422") ? ["-sample", "2x1"] : kind.contains("440") ? ["-sample", "1x2"] : []
    let script = scratch.file("\(kind).scans")
    writeBytes(Array(approximationScript(components: grey ? 1 : 3).utf8), to: script)
    if kind.contains("jpegtran") {
        #expect(runTool(["cjpeg", "-quality", "92"] + sampling + [ppm], stdout: base) == 0, "\(kind)")
        #expect(runTool(["jpegtran", "-progressive"] + (kind.contains("restart") ? ["-restart", "3B"] : []) + [base], stdout: path) == 0, "\(kind)")
    } else {
        let scans = kind.contains("scans") ? ["-scans", script] : ["-progressive"]
        let restart = (kind.contains("restart") ? ["-restart", "1"] : []) + (kind.contains("arithmetic") ? ["-arithmetic"] : [])
        #expect(runTool(["cjpeg", "-quality", "92"] + sampling + scans + restart + [ppm], stdout: path) == 0, "\(kind)")
    }
    return path
}

@Suite struct CompactCoefficientTests {
    /// Progressive files of every kind the brief names, at every scale below 8/8, in memory and
    /// spilled: libjpeg's picture exactly, and the arrays as large as planned.
    @Test(arguments: ["420 cjpeg", "444 jpegtran", "422 cjpeg restart", "grey cjpeg", "420 scans", "444 scans restart",
                      "grey scans", "440 jpegtran restart", "420 jpegtran"])
    func compactArraysDrawWhatLibjpegDraws(kind: String) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // Sizes that are not multiples of 16 (or 8), one side odd.
        let path = makeFile(kind.replacingOccurrences(of: " ", with: "-"), width: 611, height: 389, in: scratch)
        let wholeBytes = try ScaledJPEGReader(path: path, decoderMemoryBytes: 64 << 20).readHeader().coefficientBytes
        for numerator in 1...7 {
            let context = "\(kind) at \(numerator)/8"
            let oraclePath = scratch.file("oracle-\(numerator).ppm")
            #expect(runTool(["djpeg", "-scale", "\(numerator)/8", "-rgb", path], stdout: oraclePath) == 0, "\(context)")
            let expected = try #require(readPPM(oraclePath), "\(context)")
            let inMemory = try decode(path, numerator: numerator, limit: nil)
            #expect(inMemory.image == expected, "\(context): in memory, \(differingPixels(inMemory.image, expected)) pixels differ")
            #expect(inMemory.warnings == 0, "\(context)")
            #expect(!inMemory.spilled, "\(context)")
            // The figure the budget is asked for is what the arrays take and hold.
            #expect(inMemory.bytes.total == inMemory.plan.stored + inMemory.plan.windows, "\(context): \(inMemory.bytes) against \(inMemory.plan)")
            #expect(inMemory.bytes.allocated == inMemory.bytes.total, "\(context)")
            // Spilled through the smallest windows the plan allows.
            let spilled = try decode(path, numerator: numerator, limit: inMemory.plan.minimumSpilled)
            #expect(spilled.image == expected, "\(context): spilled, \(differingPixels(spilled.image, expected)) pixels differ")
            #expect(spilled.spilled, "\(context)")
            #expect(spilled.bytes.allocated <= inMemory.plan.minimumSpilled, "\(context): \(spilled.bytes.allocated) > \(inMemory.plan.minimumSpilled)")
            // Stored: fewer bytes than libjpeg's whole arrays at every scale below 8/8 (4:2:0
            // chroma is drawn at 8/8 by a 4/8 output, so kept whole there); at 2/8, 29
            // coefficients of 64 and a mask for luma (and grey) and for 4:4:4 chroma.
            #expect(Int64(inMemory.plan.stored) < wholeBytes, "\(context): stored \(inMemory.plan.stored) of \(wholeBytes)")
            if numerator == 2 && (kind.hasPrefix("grey") || kind.hasPrefix("444")) {
                #expect(Int64(inMemory.plan.stored) * 128 == wholeBytes * 66, "\(context): stored \(inMemory.plan.stored) of \(wholeBytes)")
            }
        }
        // At 8/8 every coefficient is read: stored whole, as libjpeg's own, and no windows.
        let full = try decode(path, numerator: 8, limit: nil)
        #expect(Int64(full.plan.stored) == wholeBytes && full.plan.windows == 0, "\(kind) at 8/8: \(full.plan)")
    }

    /// Arithmetic-coded progressive files keep libjpeg's whole arrays (its AC refinement reads
    /// outside the band being decoded), and say so in the plan the budget is asked for.
    @Test func arithmeticCodingKeepsWholeArrays() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = makeFile("420-arithmetic", width: 301, height: 203, in: scratch)
        let wholeBytes = try ScaledJPEGReader(path: path, decoderMemoryBytes: 64 << 20).readHeader().coefficientBytes
        for numerator in [2, 4] {
            let oraclePath = scratch.file("oracle-\(numerator).ppm")
            #expect(runTool(["djpeg", "-scale", "\(numerator)/8", "-rgb", path], stdout: oraclePath) == 0)
            let expected = try #require(readPPM(oraclePath))
            let decoded = try decode(path, numerator: numerator, limit: nil)
            #expect(decoded.image == expected, "at \(numerator)/8: \(differingPixels(decoded.image, expected)) pixels differ")
            #expect(Int64(decoded.plan.stored) == wholeBytes && decoded.plan.windows == 0, "at \(numerator)/8: \(decoded.plan)")
            #expect(Int64(decoded.bytes.total) == wholeBytes, "at \(numerator)/8: \(decoded.bytes)")
        }
    }

    /// Truncated and corrupted progressive files come out of the compact arrays exactly as they
    /// do with every coefficient kept: the same error, or the same picture and warning count.
    @Test(arguments: ["420 cjpeg", "444 scans", "grey scans"])
    func damagedFilesBehaveAsWithEveryCoefficient(kind: String) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let original = readBytes(makeFile(kind.replacingOccurrences(of: " ", with: "-"), width: 333, height: 251, in: scratch))
        var random = SplitMix64(seed: 0xC0EF)
        var outcomes: [String: Int] = [:]
        for trial in 0..<60 {
            var bytes = original
            if trial % 3 == 0 {
                bytes = Array(bytes[0..<(600 + Int(random.next() % UInt64(bytes.count - 600)))])
            } else {
                for _ in 0..<(1 + Int(random.next() % 4)) {
                    let at = 600 + Int(random.next() % UInt64(bytes.count - 600))
                    bytes[at] = UInt8(truncatingIfNeeded: random.next())
                }
            }
            let path = scratch.file("damaged-\(trial).jpg")
            writeBytes(bytes, to: path)
            for numerator in [2, 4] {
                let context = "\(kind), trial \(trial), at \(numerator)/8"
                let every = Result { try decode(path, numerator: numerator, limit: nil, every: true) }
                let compact = Result { try decode(path, numerator: numerator, limit: nil) }
                switch (every, compact) {
                case (.success(let a), .success(let b)):
                    #expect(a.image == b.image, "\(context): \(differingPixels(a.image, b.image)) pixels differ")
                    #expect(a.warnings == b.warnings, "\(context)")
                    outcomes[a.warnings > 0 ? "warned" : "drawn", default: 0] += 1
                case (.failure(let a), .failure(let b)):
                    #expect(String(describing: a) == String(describing: b), "\(context)")
                    outcomes["refused", default: 0] += 1
                default:
                    Issue.record("\(context): every coefficient \(every), compact \(compact)")
                }
            }
        }
        // The damage is varied enough to reach each outcome.
        #expect(outcomes["refused", default: 0] > 0 && outcomes["warned", default: 0] + outcomes["drawn", default: 0] > 0, "\(outcomes)")
    }

    /// A cell drawn from a progressive photo at 2/8 admits what the compact arrays take, far
    /// less than libjpeg's whole arrays, and keeps them in memory when that fits the pool. The
    /// file is one the DC decoder does not take (CMYK), in a cell that 2/8 covers twice over and
    /// 1/8 does not (CellDecoder.sharpEnough). An RGB file's cell that 2/8 covers twice over,
    /// 1/8 covers, and the DC decoder draws it from there.
    @Test func aCellAtTwoEighthsAdmitsTheCompactFigure() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let rgb = makeFile("420-jpegtran", width: 2403, height: 1597, in: scratch), path = scratch.file("cmyk.jpg")
        #expect(runTool(["convert", rgb, "-colorspace", "CMYK", "-interlace", "JPEG", "-quality", "92", path]) == 0)
        let reader = try ScaledJPEGReader(path: path, decoderMemoryBytes: 64 << 20)
        let header = try reader.readHeader()
        let plan = try reader.coefficientPlan(numerator: 2)
        #expect(plan.stored + plan.windows < Int(header.coefficientBytes) * 3 / 4, "\(plan) against \(header.coefficientBytes)")
        // A pool whose in-memory share (half) holds the compact arrays and the decode's row
        // buffers and cell (about 1.2 MB here), but not libjpeg's whole arrays.
        let pool = 2 * (plan.stored + plan.windows + (2 << 20))
        #expect(Int(header.coefficientBytes) > plan.stored + plan.windows + (2 << 20))
        let decoder = CellDecoder(cellWidth: 300, cellHeight: 199, decodePoolBytes: pool)
        let tile = UnsafeMutableRawBufferPointer.allocate(byteCount: decoder.cellBytes, alignment: 16)
        defer { tile.deallocate() }
        let notes = try decoder.decode(path: path, into: tile)
        #expect(notes.method == .coefficients(spilled: false), "\(notes.method)")
    }
}

/// Pixels (of 3 bytes) where two images differ; every pixel when their sizes do.
private func differingPixels(_ a: RGBImage, _ b: RGBImage) -> Int {
    guard a.width == b.width && a.height == b.height else { return max(a.width * a.height, b.width * b.height) }
    var count = 0
    for i in Swift.stride(from: 0, to: a.pixels.count, by: 3) where a.pixels[i] != b.pixels[i] || a.pixels[i + 1] != b.pixels[i + 1] || a.pixels[i + 2] != b.pixels[i + 2] {
        count += 1
    }
    return count
}
