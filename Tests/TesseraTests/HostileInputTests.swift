// HostileInputTests.swift — what a real photo folder and a real disk throw at a render.
// Tests that inject syscall failures extend the serialized RenderTests suite.
import Glibc
import Testing
@testable import Tessera

private let baseJPEG = fixturesDirectory + "/variants/base.jpg"

/// Decodes `path` into a 60 x 40 tile; the error, if any.
private func decodeTile(_ path: String) -> Result<RGBImage, TesseraError> {
    let decoder = CellDecoder(cellWidth: 60, cellHeight: 40, decodePoolBytes: 32 << 20)
    var bytes = [UInt8](repeating: 0, count: decoder.cellBytes)
    do throws(TesseraError) {
        try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(TesseraError) in _ = try decoder.decode(path: path, into: buffer) }
        }.get()
        return .success(RGBImage(width: 60, height: 40, pixels: bytes))
    } catch {
        return .failure(error)
    }
}

/// `jpeg` with `segment` (a whole marker segment) inserted right after SOI.
private func inserting(_ segment: [UInt8], into jpeg: [UInt8]) -> [UInt8] {
    return Array(jpeg[0..<2]) + segment + Array(jpeg[2...])
}

/// An APP1 EXIF segment holding one Orientation entry (big-endian TIFF).
private func exifSegment(orientation: UInt16) -> [UInt8] {
    let tiff: [UInt8] = [0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8,  // "MM", 42, IFD0 at 8
                         0, 1,                                   // one entry
                         0x01, 0x12, 0, 3, 0, 0, 0, 1,           // Orientation, SHORT, 1 value
                         UInt8(orientation >> 8), UInt8(orientation & 0xFF), 0, 0,
                         0, 0, 0, 0]                             // no next IFD
    let payload = Array("Exif".utf8) + [0, 0] + tiff
    let length = payload.count + 2
    return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
}

@Suite struct HostilePhotoTests {
    @Test func bitFlippedPhotosNeverCrash() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let original = readBytes(baseJPEG)
        var random = SplitMix64(seed: 42)
        var decoded = 0, refused = 0
        for round in 0..<300 {
            var bytes = original
            for _ in 0..<(1 + Int(random.next() % 8)) {
                let index = 2 + Int(random.next() % UInt64(bytes.count - 2))
                bytes[index] ^= UInt8(1 << (random.next() % 8))
            }
            let path = scratch.file("flip-\(round).jpg")
            writeBytes(bytes, to: path)
            switch decodeTile(path) {
            case .success: decoded += 1
            case .failure(.unreadablePhoto(let failedPath, let reason)):
                #expect(failedPath == path && !reason.isEmpty)
                refused += 1
            case .failure(let other):
                Issue.record("unexpected error \(other)")
            }
            unlink(path)
        }
        #expect(decoded + refused == 300)
    }

    @Test(arguments: [UInt16(0), 9, 0xFFFF])
    func invalidOrientationIsUpright(value: UInt16) throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = scratch.file("odd-orientation.jpg")
        writeBytes(inserting(exifSegment(orientation: value), into: readBytes(baseJPEG)), to: path)
        let photo = try PhotoLibrary.scan([path]).photos[0]
        #expect(photo.header.exifOrientation == Int(value))
        let upright = try decodeTile(baseJPEG).get()
        #expect(meanAbsoluteDifference(try decodeTile(path).get(), upright) < 1)
        // A valid tag on the same file does turn it: the tag is really read.
        let turned = scratch.file("turned.jpg")
        writeBytes(inserting(exifSegment(orientation: 3), into: readBytes(baseJPEG)), to: turned)
        #expect(meanAbsoluteDifference(try decodeTile(turned).get(), upright) > 10)
    }

    @Test func garbageExifAndHugeSegmentsAreHarmless() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var random = SplitMix64(seed: 7)
        // An APP1 that starts like EXIF and is then noise, at the largest size a segment can have.
        let noise = (0..<65_527).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let garbageExif = [0xFF, 0xE1, 0xFF, 0xFF] + Array("Exif".utf8) + [0, 0] + noise
        // Twenty more maximal APPn segments before the image.
        var bytes = readBytes(baseJPEG)
        for marker in 0..<20 {
            bytes = inserting([0xFF, 0xE2 + UInt8(marker % 12), 0xFF, 0xFF] + [UInt8](repeating: 0x5A, count: 65_533), into: bytes)
        }
        bytes = inserting(garbageExif, into: bytes)
        let path = scratch.file("segments.jpg")
        writeBytes(bytes, to: path)
        let upright = try decodeTile(baseJPEG).get()
        #expect(meanAbsoluteDifference(try decodeTile(path).get(), upright) < 1)
    }

    @Test func progressiveBombFailsWithinTheMemoryCap() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var bytes = readBytes(fixturesDirectory + "/variants/progressive.jpg")
        let sof = (0..<(bytes.count - 9)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC2 }!
        bytes[sof + 5] = 0xFF; bytes[sof + 6] = 0xDC  // height 65500
        bytes[sof + 7] = 0xFF; bytes[sof + 8] = 0xDC  // width 65500
        let path = scratch.file("progressive-bomb.jpg")
        writeBytes(bytes, to: path)
        // Its whole-image coefficient buffers would need about 12 GiB: refused, as a file far too
        // small for its header. (The memory of such renders is measured on a real child process
        // in MemoryTests.)
        guard case .failure(.unreadablePhoto(let failed, let reason)) = decodeTile(path) else {
            Issue.record("a progressive 65,500 x 65,500 header decoded")
            return
        }
        #expect(failed == path)
        #expect(reason.contains("truncated or corrupt"), "\(reason)")
    }
}

extension RenderTests {
    @Test func staleTemporariesOfDeadProcessesAreRemoved() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let pid = deadProcessID()  // a pid that just ended
        let dead = [".out.jpg.tessera-\(pid)-123.tmp", ".tessera-\(pid)-Ab12Cd"]
        let kept = [".out.jpg.tessera-1-77.tmp",          // pid 1 is alive
                    "out.tessera-\(pid)-1",                // not hidden: not ours
                    "holiday.jpg"]
        for name in dead + kept { writeBytes([1, 2, 3], to: scratch.file(name)) }
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        var removed: [String] = []
        try renderGrid([baseJPEG], to: scratch.file("out.jpg"), columns: 1, rows: 1, cellWidth: 16, cellHeight: 16,
                       settings: settings) { event in
            if case .staleTemporaryRemoved(let path) = event { removed.append(path) }
        }
        #expect(removed == dead.map { scratch.file($0) }.sorted())
        #expect(scratch.contents() == (kept + ["out.jpg"]).sorted())
    }

    @Test func preflightNamesTheDirectoryAndTheShortfall() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let layout = GridLayout.make(photoCount: 1, columns: 100, rows: 100, cellWidth: 100, cellHeight: 100, order: .name)
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        let plan = try RenderPlan.make(layout: layout, settings: settings)
        let output = scratch.file("big.jpg")
        let requirements = try DiskPreflight.requirements(plan: plan, outputPath: output) { _ in 1 << 20 }
        #expect(requirements.count == 1)  // output and temporaries share a filesystem
        #expect(requirements[0].neededBytes == plan.estimatedOutputBytes + plan.temporaryDiskBytes)
        #expect(requirements[0].neededBytes > 50_000_000)  // 100 megapixels at 0.6 B/px
        #expect(throws: TesseraError.insufficientDiskSpace(directory: scratch.path, neededBytes: requirements[0].neededBytes,
                                                           freeBytes: 1 << 20)) {
            try DiskPreflight.check(plan: plan, outputPath: output) { _ in 1 << 20 }
        }
        try DiskPreflight.check(plan: plan, outputPath: output) { _ in 1 << 40 }
    }

    @Test func diskFillingDuringTheRenderFailsCleanly() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let output = scratch.file("existing.jpg")
        writeBytes(Array("keep me".utf8), to: output)
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        // The pre-flight passed; then the output's second write finds the disk full.
        SyscallFaults.inject("write", errno: ENOSPC, pathPrefix: output, skip: 1)
        defer { SyscallFaults.reset() }
        #expect(throws: TesseraError.system(operation: "write", errno: ENOSPC, path: output)) {
            try renderGrid([baseJPEG], to: output, columns: 40, rows: 40, cellWidth: 32, cellHeight: 32, settings: settings)
        }
        #expect(SyscallFaults.fired("write", pathPrefix: output) == 1)
        #expect(readBytes(output) == Array("keep me".utf8))
        #expect(scratch.contents() == ["existing.jpg"])
    }

    @Test func interruptedSystemCallsAreRetried() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        let clean = scratch.file("clean.jpg")
        try renderGrid([baseJPEG, fixturesDirectory + "/variants/cmyk.jpg"], to: clean, columns: 30, rows: 30,
                       cellWidth: 32, cellHeight: 32, settings: settings)
        let interrupted = scratch.file("interrupted.jpg")
        SyscallFaults.inject("write", errno: EINTR, pathPrefix: interrupted, count: 5)
        defer { SyscallFaults.reset() }
        try renderGrid([baseJPEG, fixturesDirectory + "/variants/cmyk.jpg"], to: interrupted, columns: 30, rows: 30,
                       cellWidth: 32, cellHeight: 32, settings: settings)
        // All five interruptions were met (and retried): the file is whole all the same.
        #expect(SyscallFaults.fired("write", pathPrefix: interrupted) == 5)
        #expect(readBytes(interrupted) == readBytes(clean))
    }

    /// A real full filesystem: a 3 MiB tmpfs, mounted only where the tests run as root (CI does).
    @Test(.enabled(if: geteuid() == 0, "mounting a tmpfs needs root"))
    func realFullFilesystemFailsCleanly() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let mountPoint = scratch.file("small-disk")
        mkdir(mountPoint, 0o755)
        #expect(system("mount -t tmpfs -o size=3m tessera-test '\(mountPoint)'") == 0)
        defer { _ = system("umount '\(mountPoint)'") }
        let output = mountPoint + "/existing.jpg"
        writeBytes(Array("keep me".utf8), to: output)
        var settings = RenderSettings()
        settings.temporaryDirectory = mountPoint
        let library = try PhotoLibrary.scan([baseJPEG])
        let layout = GridLayout.make(photoCount: 1, columns: 20, rows: 20, cellWidth: 50, cellHeight: 50, order: .name)
        let renderer = try StripeRenderer(photos: library.photos, layout: layout, settings: settings, jpeg: output)
        try DiskPreflight.check(plan: renderer.plan, outputPath: output)  // fits: 1000 x 1000 px
        // Another process fills the disk after the check.
        let filler = mountPoint + "/filler"
        let free = try freeDiskBytes(mountPoint)
        writeBytes([UInt8](repeating: 7, count: Int(free) - 64 * 1024), to: filler)
        #expect {
            try renderer.render()
        } throws: { error in
            guard case TesseraError.system(_, let code, let path) = error else { return false }
            return code == ENOSPC && path.hasPrefix(mountPoint)
        }
        #expect(readBytes(output) == Array("keep me".utf8))
        var names = (try? listDirectory(mountPoint).sorted()) ?? []
        names.removeAll { $0 == "lost+found" }
        #expect(names == ["existing.jpg", "filler"])
    }
}

@Suite struct FileNameTests {
    /// "é.jpg" in NFC and in NFD are two files; both are photos. A name that is not UTF-8 is a
    /// photo too, found, opened and drawn by its bytes (shown with U+FFFD in messages).
    @Test func namesAreTheirBytes() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let photo = readBytes(baseJPEG)
        let nfc = scratch.path + "/\u{E9}.jpg", nfd = scratch.path + "/e\u{301}.jpg"
        #expect(Array(nfc.utf8) != Array(nfd.utf8) && nfc == nfd)  // Swift calls them equal
        writeBytes(photo, to: nfc)
        writeBytes(photo, to: nfd)
        #expect(scratch.contents().count == 2)
        // A name with a byte that is not UTF-8, in a folder whose name is not UTF-8 either.
        let folder = Array(scratch.path.utf8) + [0x2F, 0xFE, 0x64]
        let file = folder + [0x2F, 0xFF] + Array("x.jpg".utf8)
        var folderC = folder.map { CChar(bitPattern: $0) } + [0], fileC = file.map { CChar(bitPattern: $0) } + [0]
        #expect(mkdir(&folderC, 0o755) == 0)
        let fd = open(&fileC, O_WRONLY | O_CREAT, 0o644)
        #expect(fd >= 0)
        photo.withUnsafeBytes { _ = write(fd, $0.baseAddress, $0.count) }
        close(fd)
        defer { unlink(&fileC); rmdir(&folderC) }
        let library = try PhotoLibrary.scan([scratch.path])
        #expect(library.skipped.isEmpty, "\(library.skipped)")
        #expect(library.photos.count == 3)
        let odd = try #require(library.photos.first { $0.file.bytes == file })
        #expect(odd.path.contains("\u{FFFD}"))
        // And it decodes, by its bytes, to the same tile as the plain copy.
        let decoder = CellDecoder(cellWidth: 30, cellHeight: 20, decodePoolBytes: 16 << 20)
        var a = [UInt8](repeating: 0, count: decoder.cellBytes), b = a
        _ = try a.withUnsafeMutableBytes { t in Result { () throws(TesseraError) in try decoder.decode(file: odd.file, into: t) } }.get()
        _ = try b.withUnsafeMutableBytes { t in Result { () throws(TesseraError) in try decoder.decode(path: nfc, into: t) } }.get()
        #expect(a == b)
    }
}
