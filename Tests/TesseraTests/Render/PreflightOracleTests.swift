// PreflightOracleTests.swift — the free-space pre-flight against real small filesystems.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

@Suite struct PreflightOracleTests {
    static let photos = ["Landscape_1", "Portrait_3", "Landscape_6", "Portrait_8", "Landscape_0", "Portrait_5"]
        .map { "\(fixturesDirectory)/orientation/\($0).jpg" }

    /// The pre-flight against real filesystems: a small tmpfs for the output, then for the
    /// stripes. The refusal names the folder and statvfs's own free bytes, before any file is made;
    /// and over a sweep of sizes every render either is refused before it starts or succeeds
    /// (never a disk found full halfway).
    @Test func preflightAgainstRealSmallFilesystems() throws {
        guard mayMount() else { return }
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let library = try PhotoLibrary.scan(Self.photos)
        // 1,000 x 600 px of photos.
        let layout = GridLayout.make(photoCount: library.photos.count, columns: 20, rows: 12, cellWidth: 50, cellHeight: 50, order: .name)
        // The real output size, rendered where there is room: the estimate must not be below it.
        var roomy = RenderSettings()
        roomy.temporaryDirectory = scratch.path
        let real = try StripeRenderer(photos: library.photos, layout: layout, settings: roomy, jpeg: scratch.file("real.jpg")).render()
        let estimate = try RenderPlan.make(layout: layout, settings: roomy).estimatedOutputBytes
        #expect(estimate >= real.outputBytes, "estimated \(estimate) bytes for a \(real.outputBytes)-byte JPEG")

        // The output's folder on a tmpfs smaller than the JPEG.
        guard let small = mountTmpfs(size: "\(max(64, real.outputBytes / 2048))k", in: scratch, name: "small") else { return }
        defer { _ = system("umount '\(small)'") }
        let free = statvfsFreeBytes(small)
        #expect(free < real.outputBytes)
        // As the command line does: the pre-flight, then the render.
        func checkedRender(_ settings: RenderSettings, to output: String) throws {
            let renderer = try StripeRenderer(photos: library.photos, layout: layout, settings: settings, jpeg: output)
            try DiskPreflight.check(plan: renderer.plan, outputPath: output)
            try renderer.render()
        }
        #expect {
            try checkedRender(roomy, to: small + "/out.jpg")
        } throws: { error in
            guard case TesseraError.insufficientDiskSpace(small, let needed, free) = error else { return false }
            return needed >= real.outputBytes
        }
        #expect(listNames(small).filter { $0 != "lost+found" }.isEmpty)

        // The stripes on tmpfs filesystems of several sizes (the output where there is room).
        var outcomes = (rendered: 0, refused: 0)
        for kib in [128, 384, 640, 896, 1_152, 1_664, 4_096] {
            guard let mountPoint = mountTmpfs(size: "\(kib)k", in: scratch, name: "temp-\(kib)") else { continue }
            defer { _ = system("umount '\(mountPoint)'") }
            var settings = RenderSettings()
            settings.temporaryDirectory = mountPoint
            settings.workers = 2
            let output = scratch.file("out-\(kib).jpg")
            do {
                try checkedRender(settings, to: output)
                #expect(try JPEGFile.read(output).width == 1_000, "\(kib) KiB")
                outcomes.rendered += 1
            } catch TesseraError.insufficientDiskSpace(let directory, let needed, let freeBytes) {
                #expect(directory == mountPoint && freeBytes == statvfsFreeBytes(mountPoint) && needed > freeBytes, "\(kib) KiB")
                #expect(access(output, F_OK) != 0)
                outcomes.refused += 1
            } catch {
                Issue.record("\(kib) KiB of temporary space: the pre-flight passed and the render failed: \(error)")
            }
            #expect(listNames(mountPoint).isEmpty, "\(kib) KiB: left \(listNames(mountPoint))")
        }
        #expect(outcomes.rendered >= 1 && outcomes.refused >= 1, "\(outcomes)")
    }

    /// A layout of frames at the smallest budget that plans it, its cache a few cells where a row
    /// holds hundreds: almost every cell goes through the spill file. Each one's copy is punched
    /// out once drawn, so the spill file needs only what the pre-flight counts (a small part of
    /// every cell's size), and a tmpfs of that much draws the picture the roomy render draws.
    @Test func aCollageSpillsNoMoreThanThePreflightCounts() throws {
        guard mayMount() else { return }
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let library = try PhotoLibrary.scan(Self.photos)
        // 32 rows 100 to 131 px tall, 6,000 px wide, of cells 150 to 209 px wide: a photo at a
        // size of its own almost every time (about 1,050 drawings).
        var frames: [CellFrame] = []
        var y = 0
        for row in 0..<32 {
            var x = 0, k = 0
            while x < 6_000 {
                let width = min(6_000 - x, 150 + (row * 7 + k * 13) % 60)
                frames.append(CellFrame(x: x, y: y, width: width, height: 100 + row, photo: (row + k) % library.photos.count))
                x += width
                k += 1
            }
            y += 100 + row
        }
        let layout = CellLayout(width: 6_000, height: y, cells: frames)
        var roomy = RenderSettings()
        roomy.encoder = .serial
        roomy.stripeHeight = 16
        roomy.workers = 2
        roomy.temporaryDirectory = scratch.path
        var tight = roomy
        tight.maxMemoryBytes = try #require(RenderPlan.smallestBudget(from: 8 << 20) { bytes in
            var trial = roomy
            trial.maxMemoryBytes = bytes
            return (try? RenderPlan.make(layout: layout, settings: trial)) != nil
        })
        let plan = try RenderPlan.make(layout: layout, settings: tight)
        let everyCell = Int64(layout.distinctDrawingCount) * Int64(plan.cellBytes)
        #expect(plan.cellSlots * plan.cellBytes < 6_000 * 100 * 3, "the cache holds a row: nothing would spill")
        #expect(plan.spillDiskBytes > 0 && plan.spillDiskBytes * 5 < everyCell, "spill counted \(plan.spillDiskBytes) of \(everyCell)")

        _ = try StripeRenderer(photos: library.photos, layout: layout, settings: roomy, jpeg: scratch.file("roomy.jpg")).render()
        let kib = (plan.temporaryDiskBytes + 65_535) / 65_536 * 64
        guard let temporary = mountTmpfs(size: "\(kib)k", in: scratch, name: "spill") else { return }
        defer { _ = system("umount '\(temporary)'") }
        tight.temporaryDirectory = temporary
        let renderer = try StripeRenderer(photos: library.photos, layout: layout, settings: tight, jpeg: scratch.file("tight.jpg"))
        try DiskPreflight.check(plan: renderer.plan, outputPath: scratch.file("tight.jpg"))
        _ = try renderer.render()
        #expect(readBytes(scratch.file("tight.jpg")) == readBytes(scratch.file("roomy.jpg")))
        #expect(listNames(temporary).isEmpty)
    }
}
