// RenderTests.swift — whole renders, checked against independent expectations.
//
// Serialized: the fault-injection test arms a process-wide switch at the syscall layer, and every
// test that renders lives in this suite so none can trip over it.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite(.serialized)
struct RenderTests {
    // MARK: Orientation

    @Test(arguments: ["Landscape", "Portrait"])
    func everyExifOrientationRendersUpright(kind: String) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let paths = (0...8).map { "\(fixturesDirectory)/orientation/\(kind)_\($0).jpg" }
        let cellWidth = kind == "Landscape" ? 90 : 60
        let cellHeight = kind == "Landscape" ? 60 : 90
        var settings = RenderSettings()
        settings.quality = 95
        settings.subsampling = .s444
        let output = scratch.file("orientation.jpg")
        try renderGrid(paths, to: output, columns: 9, rows: 1, cellWidth: cellWidth, cellHeight: cellHeight, settings: settings)

        let rendered = try JPEGFile.read(output)
        #expect(rendered.width == 9 * cellWidth && rendered.height == cellHeight)
        // The upright reference: the _1 file (orientation 1) decoded in full and box-averaged.
        let upright = referenceCell(try JPEGFile.read(paths[1]), width: cellWidth, height: cellHeight)
        // The check can fail: a mirrored picture is far from the reference.
        #expect(meanAbsoluteDifference(upright, mirrored(upright)) > 15)
        for orientation in 0...8 {
            let cell = crop(rendered, x: orientation * cellWidth, y: 0, width: cellWidth, height: cellHeight)
            let difference = meanAbsoluteDifference(cell, upright)
            #expect(difference < 5, "\(kind)_\(orientation) differs from upright by \(difference)")
        }
    }

    // MARK: Stripes and workers

    /// The default (parallel) encoder: byte-identical for any worker count at a given stripe
    /// height (the restart interval is one stripe), and the same pixels at every stripe height
    /// as the serial encoder's file.
    @Test func parallelOutputIsIdenticalForAnyWorkersAndItsPixelsForAnyStripeHeight() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let paths = ["Landscape_1", "Portrait_3", "Landscape_6", "Portrait_8", "Landscape_0"].map { "\(fixturesDirectory)/orientation/\($0).jpg" }
        func render(_ encoder: EncoderMode, workers: Int, stripeHeight: Int) throws -> String {
            var settings = RenderSettings()
            settings.encoder = encoder
            settings.workers = workers
            settings.stripeHeight = stripeHeight
            settings.temporaryDirectory = scratch.path
            let output = scratch.file("\(encoder)-w\(workers)-s\(stripeHeight).jpg")
            try renderGrid(paths, to: output, columns: 7, rows: 5, cellWidth: 33, cellHeight: 29, settings: settings)
            return output
        }
        let pixels = try JPEGFile.read(try render(.serial, workers: 1, stripeHeight: 145))
        for stripeHeight in [16, 48, 145] {
            let first = readBytes(try render(.parallel, workers: 1, stripeHeight: stripeHeight))
            #expect(first.count > 1000)
            for workers in [2, 3, 8] {
                #expect(readBytes(try render(.parallel, workers: workers, stripeHeight: stripeHeight)) == first,
                        "\(workers) workers at stripe height \(stripeHeight)")
            }
            #expect(try JPEGFile.read(scratch.file("parallel-w1-s\(stripeHeight).jpg")) == pixels, "stripe height \(stripeHeight)")
        }
    }

    @Test func outputIsIdenticalForAnyWorkersAndStripeHeight() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let names = ["Landscape_1", "Portrait_3", "Landscape_6", "Portrait_8", "Landscape_0"]
        let paths = names.map { "\(fixturesDirectory)/orientation/\($0).jpg" }
        // 5 x 4 cells of 40 x 30: 120 rows, so stripe heights below cross cell rows at varied offsets.
        func render(workers: Int, stripeHeight: Int) throws -> [UInt8] {
            var settings = RenderSettings()
            settings.workers = workers
            settings.stripeHeight = stripeHeight
            settings.encoder = .serial  // the parallel encoder adds restart markers: see ParallelEncoderTests
            let output = scratch.file("w\(workers)-s\(stripeHeight).jpg")
            try renderGrid(paths, to: output, columns: 5, rows: 4, cellWidth: 40, cellHeight: 30, settings: settings)
            return readBytes(output)
        }
        // One stripe holding the whole canvas: no seams at all.
        let reference = try render(workers: 1, stripeHeight: 120)
        #expect(reference.count > 1000)
        for workers in [1, 2, 3] {
            for stripeHeight in [1, 7, 16, 29, 30, 33, 64] {
                let bytes = try render(workers: workers, stripeHeight: stripeHeight)
                #expect(bytes == reference, "workers \(workers), stripe height \(stripeHeight) differs from the single-stripe render")
            }
        }
    }

    @Test func cellsStraddlingStripesMatchTheirPhoto() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = "\(fixturesDirectory)/orientation/Landscape_1.jpg"
        var settings = RenderSettings()
        settings.stripeHeight = 7  // does not divide the 60-row cells: every cell straddles stripes
        settings.quality = 95
        settings.subsampling = .s444
        let output = scratch.file("seams.jpg")
        try renderGrid([path], to: output, columns: 2, rows: 2, cellWidth: 90, cellHeight: 60, settings: settings)
        let rendered = try JPEGFile.read(output)
        let expected = referenceCell(try JPEGFile.read(path), width: 90, height: 60)
        for row in 0..<2 {
            for column in 0..<2 {
                let cell = crop(rendered, x: column * 90, y: row * 60, width: 90, height: 60)
                #expect(meanAbsoluteDifference(cell, expected) < 5)
            }
        }
    }

    // MARK: Layout and colours

    @Test func smallGridMatchesIndependentExpectation() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let colours = [RGB(red: 200, green: 30, blue: 30), RGB(red: 30, green: 180, blue: 40), RGB(red: 20, green: 40, blue: 210),
                       RGB(red: 240, green: 220, blue: 40), RGB(red: 120, green: 40, blue: 160)]
        let sizes = [(64, 48), (48, 64), (100, 20), (17, 33), (300, 200)]
        var paths: [String] = []
        for (index, colour) in colours.enumerated() {
            let path = scratch.file("photo-\(index).jpg")
            try writeSolidPhoto(path, width: sizes[index].0, height: sizes[index].1, colour: colour)
            paths.append(path)
        }
        let output = scratch.file("grid.jpg")
        var settings = RenderSettings()
        settings.subsampling = .s444
        settings.quality = 95
        // 4 x 3 = 12 cells from 5 photos: by name, repeating.
        try renderGrid([scratch.path], to: output, columns: 4, rows: 3, cellWidth: 24, cellHeight: 16, settings: settings)
        let rendered = try JPEGFile.read(output)
        #expect(rendered.width == 96 && rendered.height == 48)
        for cell in 0..<12 {
            let column = cell % 4, row = cell / 4
            let expected = colours[cell % 5]
            // Cell interior (JPEG blocks straddle the cell edges).
            for (dx, dy) in [(4, 4), (12, 8), (19, 11)] {
                let pixel = rendered.pixel(x: column * 24 + dx, y: row * 16 + dy)
                #expect(abs(Int(pixel.red) - Int(expected.red)) <= 4 && abs(Int(pixel.green) - Int(expected.green)) <= 4
                        && abs(Int(pixel.blue) - Int(expected.blue)) <= 4,
                        "cell \(cell) at +\(dx),+\(dy) is \(pixel), expected \(expected)")
            }
        }
    }

    // MARK: Bad input

    /// A photo whose header reads but whose data fails while it is drawn (a PNG cut in half:
    /// libspng's rows stop) is a placeholder, named, and the render completes.
    @Test func photoFailingMidDecodeBecomesPlaceholder() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let good = "\(fixturesDirectory)/orientation/Landscape_1.jpg"
        let bytes = readBytes(good)
        let png = readBytes(formatFixtures.directory + "/rgb8.png")
        let truncated = scratch.file("b-truncated.png")
        writeBytes(Array(png[0..<(png.count / 2)]), to: truncated)
        let copy = scratch.file("a-good.jpg")
        writeBytes(bytes, to: copy)
        var settings = RenderSettings()
        settings.background = RGB(red: 255, green: 0, blue: 255)
        settings.subsampling = .s444
        var events: [RenderEvent] = []
        let output = scratch.file("out.jpg")
        let summary = try renderGrid([copy, truncated], to: output, columns: 2, rows: 1, cellWidth: 48, cellHeight: 32,
                                     settings: settings, events: { events.append($0) })
        #expect(summary.failedPhotos.map(\.path) == [truncated])
        #expect(events.contains { if case .photoFailed(let skipped) = $0 { return skipped.path == truncated } else { return false } })
        let rendered = try JPEGFile.read(output)
        let placeholder = rendered.pixel(x: 48 + 24, y: 16)
        #expect(placeholder.red > 240 && placeholder.green < 15 && placeholder.blue > 240)
        let photo = crop(rendered, x: 0, y: 0, width: 48, height: 32)
        #expect(meanAbsoluteDifference(photo, referenceCell(try JPEGFile.read(good), width: 48, height: 32)) < 6)
    }

    /// A baseline JPEG cut off part way (a copy interrupted) is drawn as far as its data goes,
    /// the rest grey, as libjpeg and image viewers show it, with a warning that names it; it is
    /// not a placeholder. (djpeg of the cut file says where its picture stops.)
    @Test func truncatedBaselineJPEGIsDrawnAsFarAsItGoes() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let good = "\(fixturesDirectory)/orientation/Landscape_1.jpg"
        let bytes = readBytes(good)
        let truncated = scratch.file("cut.jpg"), ppm = scratch.file("cut.ppm")
        writeBytes(Array(bytes[0..<(bytes.count / 2)]), to: truncated)
        #expect(runTool(["djpeg", "-ppm", truncated], stdout: ppm) == 2)
        let oracle = try #require(readPPM(ppm))
        var settings = RenderSettings()
        settings.background = RGB(red: 255, green: 0, blue: 255)
        settings.subsampling = .s444
        var events: [RenderEvent] = []
        let output = scratch.file("out.jpg")
        let summary = try renderGrid([truncated], to: output, columns: 1, rows: 1, cellWidth: 90, cellHeight: 60,
                                     settings: settings, events: { events.append($0) })
        #expect(summary.failedPhotos.isEmpty, "\(summary.failedPhotos)")
        // Named once among the photos drawn in part (for the summary and a JSON manifest).
        #expect(summary.partialPhotos.map(\.path) == [truncated], "\(summary.partialPhotos)")
        #expect(summary.partialPhotos.first?.reason.contains("ends early") == true, "\(summary.partialPhotos)")
        #expect(events.contains {
            if case .photoWarning(truncated, let message) = $0 { return message.contains("file ends early") && message.contains("the rest grey") }
            return false
        }, "\(events)")
        let rendered = try JPEGFile.read(output)
        // The oracle's picture, where the photo's data went and where it is grey.
        #expect(meanAbsoluteDifference(rendered, referenceCell(oracle, width: 90, height: 60)) < 4)
        let top = crop(rendered, x: 0, y: 0, width: 90, height: 10)
        let whole = referenceCell(try JPEGFile.read(good), width: 90, height: 60)
        #expect(meanAbsoluteDifference(top, crop(whole, x: 0, y: 0, width: 90, height: 10)) < 6)
        let bottom = crop(rendered, x: 0, y: 55, width: 90, height: 5)
        #expect(bottom.pixels.allSatisfy { $0 >= 118 && $0 <= 138 }, "the rest is libjpeg's grey")
    }

    /// A JPEG whose image data is damaged (bytes flipped in its middle, as bit rot or a bad copy
    /// leaves it: djpeg warns "Corrupt JPEG data") is drawn as decoded, with a warning that says
    /// so, and is counted among the photos drawn in part; a strict render refuses it. libjpeg's
    /// fast Huffman path decodes a bad code as zero without a word, so the damage shows only
    /// where the data meets its next marker: past the rows a cell needs, in a crop.
    @Test func damagedJPEGDataIsNamedAndAStrictRunRefusesIt() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var bytes = readBytes("\(fixturesDirectory)/orientation/Portrait_1.jpg")
        var state: UInt64 = 7
        var flipped = 0
        while flipped < 30 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let at = bytes.count / 3 + Int(state >> 33) % (bytes.count / 3)
            guard bytes[at] != 0xFF, bytes[at - 1] != 0xFF else { continue }
            bytes[at] ^= 0x55
            flipped += 1
        }
        let damaged = scratch.file("damaged.jpg")
        writeBytes(bytes, to: damaged)
        // The oracle: libjpeg's own tool decodes it with a warning (exit 2).
        #expect(runTool(["djpeg", "-ppm", damaged]) == 2)
        // Square cells of a portrait photo: its top and bottom rows are cropped off, so the
        // damage is found past the rows drawn.
        for cell in [40, 300] {
            var events: [RenderEvent] = []
            let output = scratch.file("out-\(cell).jpg")
            let summary = try renderGrid([damaged], to: output, columns: 1, rows: 1, cellWidth: cell, cellHeight: cell,
                                         events: { events.append($0) })
            #expect(summary.failedPhotos.isEmpty, "\(summary.failedPhotos)")
            #expect(summary.partialPhotos.map(\.path) == [damaged], "\(summary.partialPhotos)")
            #expect(summary.partialPhotos.first?.reason.hasPrefix("damaged JPEG data") == true, "\(summary.partialPhotos)")
            #expect(events.contains {
                if case .photoWarning(damaged, let message) = $0 { return message.contains("damaged JPEG data") }
                return false
            }, "\(events)")
            #expect(access(output, F_OK) == 0)
            var strict = RenderSettings()
            strict.failOnPlaceholder = true
            let refused = scratch.file("strict-\(cell).jpg")
            #expect(throws: TesseraError.self) {
                _ = try renderGrid([damaged], to: refused, columns: 1, rows: 1, cellWidth: cell, cellHeight: cell, settings: strict)
            }
            #expect(access(refused, F_OK) != 0, "a strict run writes nothing")
        }
        // A few stray bytes before the end marker (padding some encoders leave, every pixel
        // whole: djpeg warns) are not damage; a hundred are.
        let original = readBytes("\(fixturesDirectory)/orientation/Portrait_1.jpg")
        #expect(original.suffix(2) == [0xFF, 0xD9])
        for (padding, damage) in [(3, false), (100, true)] {
            let padded = scratch.file("padded-\(padding).jpg")
            writeBytes(Array(original.dropLast(2)) + [UInt8](repeating: 0x11, count: padding) + [0xFF, 0xD9], to: padded)
            #expect(runTool(["djpeg", "-ppm", padded]) == 2)
            var warned: [RenderEvent] = []
            let summary = try renderGrid([padded], to: scratch.file("padded.jpg"), columns: 1, rows: 1, cellWidth: 40, cellHeight: 40,
                                         events: { warned.append($0) })
            #expect(summary.partialPhotos.isEmpty == !damage, "\(padding) bytes: \(summary.partialPhotos)")
            // (Bytes the Huffman decoder read ahead are not counted among them.)
            #expect(!damage || warned.contains {
                if case .photoWarning(padded, let message) = $0 { return message.contains("extraneous bytes before marker 0xd9") }
                return false
            }, "\(warned)")
        }
        // The photo it was made from: no warning, whole.
        var events: [RenderEvent] = []
        let summary = try renderGrid(["\(fixturesDirectory)/orientation/Portrait_1.jpg"], to: scratch.file("good.jpg"), columns: 1, rows: 1,
                                     cellWidth: 40, cellHeight: 40, events: { events.append($0) })
        #expect(summary.partialPhotos.isEmpty)
        #expect(!events.contains { if case .photoWarning = $0 { return true } else { return false } }, "\(events)")
    }

    @Test func scanSkipsWhatIsNotAPhoto() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        writeBytes(readBytes("\(fixturesDirectory)/orientation/Portrait_1.jpg"), to: scratch.file("good.jpg"))
        writeBytes(Array("not a picture".utf8), to: scratch.file("text.jpg"))
        writeBytes([], to: scratch.file("empty.jpg"))
        writeBytes([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], to: scratch.file("image.png"))
        writeBytes(Array("notes".utf8), to: scratch.file("README.txt"))
        var jpegStartOnly = [UInt8](readBytes("\(fixturesDirectory)/orientation/Portrait_1.jpg")[0..<300])
        jpegStartOnly[200] = 0xFF
        writeBytes(jpegStartOnly, to: scratch.file("cut.jpg"))
        #expect(mkfifo(scratch.file("pipe.jpg"), 0o644) == 0)
        #expect(symlink(scratch.file("missing.jpg"), scratch.file("dangling.jpg")) == 0)
        #expect(symlink(scratch.path, scratch.file("loop")) == 0)

        let library = try PhotoLibrary.scan([scratch.path, scratch.file("text.jpg")])
        #expect(library.photos.map(\.path) == [scratch.file("good.jpg")])
        let skipped = Set(library.skipped.map(\.path))
        #expect(skipped.contains(scratch.file("pipe.jpg")))
        #expect(skipped.contains(scratch.file("dangling.jpg")))
        #expect(skipped.contains(scratch.file("text.jpg")))   // text named like a photo
        #expect(skipped.contains(scratch.file("empty.jpg")))  // zero bytes named like a photo
        #expect(library.skipped.first { $0.path == scratch.file("empty.jpg") }?.reason == "the file is empty (0 bytes)")
        #expect(skipped.contains(scratch.file("cut.jpg")))    // a JPEG start, then nothing usable
        #expect(!skipped.contains(scratch.file("README.txt")))
        // A damaged image in another format is named, with its reader's complaint (nothing silently).
        #expect(library.skipped.first { $0.path == scratch.file("image.png") }?.reason.hasPrefix("PNG: ") == true)
        #expect(library.ignoredNonJPEGCount == 1)             // README.txt, quietly
        #expect(library.skipped.filter { $0.path == scratch.file("text.jpg") }.count == 1)  // once, though named twice
    }

    @Test func hugeHeaderDoesNotAllocateItsClaimedSize() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        // A real baseline JPEG whose SOF0 is edited to claim 65,500 x 65,500 px.
        try writeSolidPhoto(scratch.file("small.jpg"), width: 64, height: 64, colour: RGB(red: 10, green: 20, blue: 30))
        var bytes = readBytes(scratch.file("small.jpg"))
        let sof = (0..<(bytes.count - 9)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 }!
        bytes[sof + 5] = 0xFF; bytes[sof + 6] = 0xDC  // height 65500
        bytes[sof + 7] = 0xFF; bytes[sof + 8] = 0xDC  // width 65500
        let bomb = scratch.file("bomb.jpg")
        writeBytes(bytes, to: bomb)
        let decoder = CellDecoder(cellWidth: 150, cellHeight: 150, decodePoolBytes: 32 << 20)
        var tile = [UInt8](repeating: 0, count: decoder.cellBytes)
        // 65,500^2 RGB would be 12 GiB: refused before any row, as a file far too small for its
        // header. (The memory of such renders is measured on a real child process in MemoryTests.)
        #expect {
            try tile.withUnsafeMutableBytes { bytes in
                Result { () throws(TesseraError) in _ = try decoder.decode(path: bomb, into: bytes) }
            }.get()
        } throws: { error in
            guard case TesseraError.unreadablePhoto(bomb, let reason) = error else { return false }
            return reason.contains("truncated or corrupt")
        }
    }

    // MARK: Limits and failures

    @Test func outputOverTheJPEGLimitIsRefused() throws {
        let layout = GridLayout.make(photoCount: 1, columns: 437, rows: 1, cellWidth: 150, cellHeight: 150, order: .name)
        #expect(throws: TesseraError.outputTooLarge(width: 65_550, height: 150, limit: 65_500)) {
            try RenderPlan.make(layout: layout, settings: RenderSettings())
        }
    }

    @Test func failedRenderLeavesExistingOutputAndNoTemporaries() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let output = scratch.file("existing.jpg")
        writeBytes(Array("previous contents".utf8), to: output)
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        settings.stripeHeight = 16
        // The third stripe's block reservation fails as on a full disk.
        SyscallFaults.inject("fallocate", errno: ENOSPC, pathPrefix: scratch.path, skip: 2)
        defer { SyscallFaults.reset() }
        #expect {
            try renderGrid(["\(fixturesDirectory)/orientation/Landscape_1.jpg"], to: output, columns: 3, rows: 2,
                           cellWidth: 40, cellHeight: 40, settings: settings)
        } throws: { error in
            guard case TesseraError.system(let operation, let code, _) = error else { return false }
            return operation == "fallocate" && code == ENOSPC
        }
        #expect(SyscallFaults.fired("fallocate", pathPrefix: scratch.path) == 1)
        #expect(readBytes(output) == Array("previous contents".utf8))
        #expect(scratch.contents() == ["existing.jpg"])
    }

    @Test func successfulRenderReplacesOutputAtomically() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let output = scratch.file("out.jpg")
        writeBytes(Array("old".utf8), to: output)
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        let summary = try renderGrid(["\(fixturesDirectory)/orientation/Portrait_1.jpg"], to: output, columns: 2, rows: 2,
                                     cellWidth: 32, cellHeight: 48, settings: settings)
        #expect(Int64(readBytes(output).count) == summary.outputBytes)
        #expect(scratch.contents() == ["out.jpg"])
        let image = try JPEGFile.read(output)
        #expect(image.width == 64 && image.height == 96)
    }
}

@Suite struct CellCacheTests {
    @Test func moreDistinctPhotosThanSlotsAreDecodedOnceAndSpilled() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var photos: [Photo] = []
        for index in 0..<5 {
            let path = scratch.file("p\(index).jpg")
            try writeSolidPhoto(path, width: 32, height: 32, colour: RGB(red: UInt8(index * 50), green: 100, blue: 200))
            photos.append(try PhotoLibrary.scan([path]).photos[0])
        }
        let decoder = CellDecoder(cellWidth: 8, cellHeight: 8, decodePoolBytes: 16 << 20)
        let cache = CellCache(photos: PhotoTable(photos), decoder: decoder, slotCount: 2, spillDirectory: scratch.path)
        var first: [Int: [UInt8]] = [:]
        for round in 0..<3 {
            for index in 0..<5 {
                guard case .cell(let bytes, let slot) = try cache.acquire(photo: index, wait: true) else {
                    Issue.record("photo \(index) not decoded")
                    return
                }
                let copy = Array(UnsafeRawBufferPointer(start: bytes, count: decoder.cellBytes))
                if round == 0 { first[index] = copy } else { #expect(copy == first[index], "photo \(index) changed after a spill") }
                cache.release(slot: slot)
            }
        }
        #expect(cache.decodedCount == 5)                 // each photo decoded once, not three times
        #expect(first[0]![0] <= 4 && first[4]![0] >= 192)  // and the tiles are the photos' colours
        #expect(scratch.contents().count == 5)            // the spill file is anonymous
    }
}

/// A cancellation stops the pipeline at once: nothing is started after it, and no stripe is
/// written after the one during which it came.
@Suite struct RenderCancellationTests {
    static let photos = ["Landscape_1", "Portrait_3", "Landscape_6", "Portrait_8"].map { "\(fixturesDirectory)/orientation/\($0).jpg" }

    /// A renderer of 8 columns x `rows` cells of 24 px into `scratch`, with a cancellation of its own.
    private func renderer(rows: Int, stripeHeight: Int, in scratch: ScratchDirectory) throws -> (StripeRenderer, RenderCancellation) {
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        settings.workers = 2
        settings.stripeHeight = stripeHeight
        let cancellation = RenderCancellation()
        let library = try PhotoLibrary.scan(Self.photos)
        let layout = GridLayout.make(photoCount: library.photos.count, columns: 8, rows: rows, cellWidth: 24, cellHeight: 24, order: .name)
        let renderer = try StripeRenderer(photos: library.photos, layout: layout, settings: settings, jpeg: scratch.file("out.jpg"),
                                          cancellation: cancellation)
        return (renderer, cancellation)
    }

    @Test func aRenderCancelledBeforeItStartsWritesNothing() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let (renderer, cancellation) = try renderer(rows: 8, stripeHeight: 16, in: scratch)
        cancellation.cancel()
        var progress = 0
        #expect(throws: TesseraError.cancelled) {
            try renderer.render { event in if case .progress = event { progress += 1 } }
        }
        #expect(progress == 0, "\(progress) stripes written after the cancellation")
        #expect(scratch.contents().isEmpty)
    }

    /// Nothing is even started: a render cancelled before it starts maps no stripe (every mmap
    /// of its stripe file fails by injection, and none may be tried; its decoders, which check
    /// the flag too, would open no photo either).
    @Test func aRenderCancelledBeforeItStartsMapsNoStripe() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove(); SyscallFaults.reset(pathPrefix: scratch.path) }
        let (renderer, cancellation) = try renderer(rows: 8, stripeHeight: 16, in: scratch)
        SyscallFaults.inject("mmap", errno: ENOMEM, pathPrefix: scratch.path, count: 1000)
        cancellation.cancel()
        #expect(throws: TesseraError.cancelled) { try renderer.render() }
        #expect(SyscallFaults.fired("mmap", pathPrefix: scratch.path) == 0, "stripes were started after the cancellation")
    }

    @Test func noStripeIsWrittenAfterTheOneDuringWhichTheCancellationCame() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let (renderer, cancellation) = try renderer(rows: 12, stripeHeight: 16, in: scratch)
        var progress = 0
        #expect(throws: TesseraError.cancelled) {
            try renderer.render { event in
                guard case .progress = event else { return }
                progress += 1
                cancellation.cancel()  // during the first stripe's event
            }
        }
        #expect(progress == 1, "\(progress - 1) stripes written after the cancellation")
        #expect(scratch.contents().isEmpty)
    }

    /// A cancellation during the last stripe's event still cancels: nothing is committed, even
    /// though every stripe was already drawn (here the only one).
    @Test func aCancellationAfterTheLastStripeStillCommitsNothing() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let (renderer, cancellation) = try renderer(rows: 2, stripeHeight: 64, in: scratch)
        #expect(renderer.plan.geometry.stripeCount == 1)
        #expect(throws: TesseraError.cancelled) {
            try renderer.render { event in if case .progress = event { cancellation.cancel() } }
        }
        #expect(scratch.contents().isEmpty)
    }
}
