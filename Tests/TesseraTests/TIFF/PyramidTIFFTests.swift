// PyramidTIFFTests.swift — the TIFF pyramid's sink fed a picture the test computes, read back
// by Python's tifffile (tiles decoded by imagecodecs' libjpeg-turbo): every page the exact 2x2
// averages of the one above, computed by the script from the same formula; edge tiles whole and
// padded with the edge's pixels; classic TIFF and BigTIFF; nothing visible before commit, and a
// discard that leaves what was there. And the pages' shape, computed here independently.
import Glibc
import Testing
@testable import Tessera

/// Reads a TIFF written from `synthetic(x, y)` (the formula below, repeated in Python) and
/// prints, per page: its shape and tags, the mean absolute difference of its pixels from the
/// exact averages, and the same for its last (bottom-right) tile decoded whole against the
/// page's edge pixels repeated to the tile's size.
private let pageChecker = """
import sys, tifffile, imagecodecs, numpy as np
path, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = tifffile.TiffFile(path)
print("bigtiff", t.is_bigtiff)
print("pages", len(t.pages))
X, Y = np.meshgrid(np.arange(w), np.arange(h))
level = np.stack([(X * 255) // (w - 1), (Y * 255) // (h - 1), (X * Y * 200) // ((w - 1) * (h - 1))], axis=-1).astype(np.int64)
for i, p in enumerate(t.pages):
    if i > 0:
        hh, ww = level.shape[:2]
        padded = np.pad(level, ((0, hh % 2), (0, ww % 2), (0, 0)), mode="edge")
        level = (padded[0::2, 0::2] + padded[1::2, 0::2] + padded[0::2, 1::2] + padded[1::2, 1::2] + 2) // 4
    a = p.asarray().astype(np.int64)
    mad = np.abs(a - level).mean() if a.shape == level.shape else 999
    sub = p.tags["YCbCrSubSampling"].value if "YCbCrSubSampling" in p.tags else None
    print("page%d" % i, "%dx%d" % (p.shape[1], p.shape[0]), "tile%dx%d" % (p.tilewidth, p.tilelength), "subfile%d" % int(p.subfiletype),
          "photometric%d" % int(p.photometric), "compression%d" % int(p.compression), "sub%s" % (sub,), "mad%.3f" % mad)
    ts = p.tilewidth
    fh = t.filehandle
    fh.seek(p.dataoffsets[-1])
    tile = imagecodecs.jpeg8_decode(fh.read(p.databytecounts[-1])).astype(np.int64)
    cols, rows = (p.shape[1] + ts - 1) // ts, (p.shape[0] + ts - 1) // ts
    edge = level[(rows - 1) * ts:, (cols - 1) * ts:]
    expected = np.pad(edge, ((0, ts - edge.shape[0]), (0, ts - edge.shape[1]), (0, 0)), mode="edge")
    black = np.pad(edge, ((0, ts - edge.shape[0]), (0, ts - edge.shape[1]), (0, 0)))
    print("edge%d" % i, "%dx%d" % (tile.shape[1], tile.shape[0]), "mad%.3f" % np.abs(tile - expected).mean(),
          "black%.3f" % np.abs(tile - black).mean())
"""

/// The picture the sink is fed, and the checker computes: smooth ramps (JPEG at quality 90
/// keeps them within a level or two).
private func synthetic(width: Int, height: Int, into row: UnsafeMutablePointer<UInt8>, y: Int) {
    for x in 0..<width {
        row[3 * x] = UInt8(x * 255 / (width - 1))
        row[3 * x + 1] = UInt8(y * 255 / (height - 1))
        row[3 * x + 2] = UInt8(x * y * 200 / ((width - 1) * (height - 1)))
    }
}

@Suite struct PyramidTIFFTests {
    /// The pages: the full picture, then each the one above halved and rounded up, down to the
    /// first that fits in one tile (computed here without the Deep Zoom geometry).
    @Test func pagesHalveDownToOneTile() {
        func expected(_ width: Int, _ height: Int, tile: Int) -> [[Int]] {
            var pages = [[width, height]]
            while pages.last![0] > tile || pages.last![1] > tile {
                pages.append([(pages.last![0] + 1) / 2, (pages.last![1] + 1) / 2])
            }
            return pages
        }
        for (width, height) in [(1001, 515), (256, 256), (257, 1), (1, 5000), (30_000, 40_050), (150_000, 150_000)] {
            let geometry = PyramidTIFFGeometry(width: width, height: height, tileSize: 256)
            #expect(geometry.pages.map { [$0.width, $0.height] } == expected(width, height, tile: 256), "\(width) x \(height)")
            #expect(geometry.pageCount == geometry.pages.count)
            #expect(geometry.pages.allSatisfy { $0.columns == ($0.width + 255) / 256 && $0.rows == ($0.height + 255) / 256 })
            #expect(geometry.page(ofLevel: geometry.levels.maxLevel) == 0 && geometry.page(ofLevel: geometry.lowestLevel) == geometry.pageCount - 1)
        }
        // BigTIFF only where the densest JPEG could pass 4 GiB: a 1.2-gigapixel grid fits a classic
        // TIFF, a 150,000 px square does not.
        #expect(!PyramidTIFFGeometry(width: 30_000, height: 40_050, tileSize: 256).needsBigTIFF(subsampling: .s420))
        #expect(PyramidTIFFGeometry(width: 150_000, height: 150_000, tileSize: 256).needsBigTIFF(subsampling: .s420))
    }

    /// Writes a 1001 x 515 picture in 64-row stripes through the sink; returns the checker's
    /// lines as a dictionary (first word: the rest), after checking nothing showed before commit.
    private func writeAndCheck(_ scratch: ScratchDirectory, name: String, subsampling: ChromaSubsampling,
                               bigTIFF: Bool) throws -> [String: String] {
        let (width, height) = (1001, 515)
        let path = scratch.file(name)
        let output = try PyramidTIFFOutput(destination: path, geometry: PyramidTIFFGeometry(width: width, height: height, tileSize: 256),
                                           settings: PyramidTIFFSettings(), subsampling: subsampling, threads: 2,
                                           temporaryDirectory: scratch.path, bigTIFF: bigTIFF)
        let stripe = UnsafeMutablePointer<UInt8>.allocate(capacity: 64 * width * 3)
        defer { stripe.deallocate() }
        var index = 0
        for first in stride(from: 0, to: height, by: 64) {
            let rows = first..<min(height, first + 64)
            for y in rows { synthetic(width: width, height: height, into: stripe + (y - first) * width * 3, y: y) }
            try output.take(StripeView(index: index, rows: rows, pixels: UnsafeRawPointer(stripe), bytesPerRow: width * 3, width: width),
                            prepared: nil, alongside: nil)
            index += 1
        }
        try output.finish()
        #expect(access(path, F_OK) != 0, "the TIFF is visible before commit")
        try OutputCommit.all { commit throws(TesseraError) in try output.commit(in: commit) }
        writeBytes(Array(pageChecker.utf8), to: scratch.file("check.py"))
        let log = scratch.file(name + ".txt")
        #expect(runTool(["python3", scratch.file("check.py"), path, String(width), String(height)], stdout: log) == 0,
                "\(String(decoding: readBytes(log), as: UTF8.self))")
        var fields: [String: String] = ["text": String(decoding: readBytes(log), as: UTF8.self)]
        for line in fields["text"]!.split(separator: "\n") {
            let words = line.split(separator: " ", maxSplits: 1)
            if words.count == 2 { fields[String(words[0])] = String(words[1]) }
        }
        return fields
    }

    /// The number after `prefix` in the words of `line` ("mad1.234" → 1.234).
    private func number(_ line: String?, _ prefix: String) -> Double {
        guard let word = line?.split(separator: " ").first(where: { $0.hasPrefix(prefix) }) else { return .infinity }
        return Double(word.dropFirst(prefix.count)) ?? .infinity
    }

    @Test(arguments: [(ChromaSubsampling.s420, false), (.s444, true)])
    func everyPageIsTheAveragesOfTheOneAbove(subsampling: ChromaSubsampling, bigTIFF: Bool) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let checked = try writeAndCheck(scratch, name: "ramps.tif", subsampling: subsampling, bigTIFF: bigTIFF)
        let text = checked["text"] ?? ""
        #expect(checked["bigtiff"] == (bigTIFF ? "True" : "False"), "\(text)")
        #expect(checked["pages"] == "3", "\(text)")
        let factors = subsampling == .s420 ? "(2, 2)" : "(1, 1)"
        for (page, size) in [(0, "1001x515"), (1, "501x258"), (2, "251x129")] {
            let line = checked["page\(page)"]
            // YCbCr (6) in JPEG (7), the render's subsampling, pages after the first reduced (1).
            #expect(line?.hasPrefix("\(size) tile256x256 subfile\(page == 0 ? 0 : 1) photometric6 compression7 sub\(factors)") == true, "\(text)")
            #expect(number(line, "mad") < 1.5, "page \(page): \(text)")
            // The last tile is a whole 256 x 256 JPEG whose pixels past the edge repeat it.
            let edge = checked["edge\(page)"]
            #expect(edge?.hasPrefix("256x256 ") == true, "\(text)")
            #expect(number(edge, "mad") < 2 && number(edge, "black") > 20, "page \(page): \(text)")
        }
        // The spool is gone with the commit: only the TIFF and the checker's files are left.
        #expect(scratch.contents().sorted() == ["check.py", "ramps.tif", "ramps.tif.txt"])
    }

    /// A discarded TIFF leaves the file that was at its name and nothing else.
    @Test func discardLeavesWhatWasThere() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = scratch.file("kept.tif")
        writeBytes(Array("before".utf8), to: path)
        let output = try PyramidTIFFOutput(destination: path, geometry: PyramidTIFFGeometry(width: 600, height: 300, tileSize: 256),
                                           settings: PyramidTIFFSettings(), subsampling: .s420, threads: 2,
                                           temporaryDirectory: scratch.path)
        let rows = [UInt8](repeating: 90, count: 64 * 600 * 3)
        try rows.withUnsafeBytes { raw in
            try Result { () throws(TesseraError) in
                try output.take(StripeView(index: 0, rows: 0..<64, pixels: raw.baseAddress!, bytesPerRow: 600 * 3, width: 600),
                                prepared: nil, alongside: nil)
            }.get()
        }
        output.discard()
        #expect(readBytes(path) == Array("before".utf8))
        #expect(scratch.contents() == ["kept.tif"])
    }
}
