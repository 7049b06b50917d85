// ProgressiveCgroupTests.swift — large progressive photos rendered inside a 64 MiB memory
// cgroup, as in a memory-constrained container: the process must not be OOM-killed and no photo
// may become a placeholder. Needs root and a cgroup-v1 memory controller (CI has both).
import Glibc
import Testing

private let memoryControllers = "/sys/fs/cgroup/memory"

@Suite(.serialized) struct ProgressiveCgroupTests {
    @Test(.enabled(if: geteuid() == 0 && access(memoryControllers + "/cgroup.procs", W_OK) == 0,
                   "needs root and a cgroup-v1 memory controller"))
    func largeProgressivePhotosRenderInside64MiB() throws {
        let scratch = "\(testRoot)/tessera-cgroup-test-\(getpid())"
        let photos = largeProgressivePhotos  // ten progressive photos of 3900 x 2700 px
        #expect(system("mkdir -p '\(scratch)'") == 0)
        defer { _ = system("rm -rf '\(scratch)'") }
        let group = memoryControllers + "/tessera-test-\(getpid())"
        #expect(mkdir(group, 0o755) == 0)
        defer { rmdir(group) }
        #expect(system("echo \(64 << 20) > '\(group)/memory.limit_in_bytes'") == 0)
        // Default flags, then eight workers on two cores; 150 px cells (the photos drawn at 1/8
        // by the DC decoder) and 600 px cells (at 2/8 by libjpeg, its coefficients spilled).
        for (cell, extra) in [(150, ""), (150, " --workers 8"), (600, ""), (600, " --workers 8")] {
            let output = scratch + "/out.jpg", log = scratch + "/log.txt"
            let command = "sh -c 'echo $$ > \(group)/cgroup.procs && exec \"$0\" \"$@\"' '\(toolPath())' grid '\(photos)' "
                + "-o '\(output)' --grid 6x6 --tile-size \(cell) --no-progress\(extra) >'\(log)' 2>&1"
            let status = system(command)
            let text = String(decoding: readFile(log), as: UTF8.self)
            #expect((status >> 8) & 0xFF == 0 && status & 0x7F == 0, "\(cell) px\(extra): status \(status): \(text)")
            #expect(!text.contains("placeholder"), "\(cell) px\(extra): \(text)")
            #expect(!text.contains("warning"), "\(cell) px\(extra): \(text)")
            #expect(access(output, F_OK) == 0)
            unlink(output)
        }
    }

    /// A folder mixing every format Tessera reads (MemoryTests.swift: PNG, WebP, tiled and
    /// single-picture HEIC, AVIF, profile-tagged JPEGs), default flags, inside 64 MiB: at 150 px
    /// (HEIC thumbnails) and 600 px (every HEIC decoded whole), every photo drawn.
    @Test(.enabled(if: geteuid() == 0 && access(memoryControllers + "/cgroup.procs", W_OK) == 0,
                   "needs root and a cgroup-v1 memory controller"))
    func mixedFormatsRenderInside64MiB() throws {
        let scratch = "\(testRoot)/tessera-cgroup-mixed-\(getpid())"
        let photos = mixedFormatPhotos
        #expect(system("mkdir -p '\(scratch)'") == 0)
        defer { _ = system("rm -rf '\(scratch)'") }
        let group = memoryControllers + "/tessera-test-mixed-\(getpid())"
        #expect(mkdir(group, 0o755) == 0)
        defer { rmdir(group) }
        #expect(system("echo \(64 << 20) > '\(group)/memory.limit_in_bytes'") == 0)
        for cell in [150, 600] {
            let output = scratch + "/out.jpg", log = scratch + "/log.txt"
            let command = "sh -c 'echo $$ > \(group)/cgroup.procs && exec \"$0\" \"$@\"' '\(toolPath())' grid '\(photos)' "
                + "-o '\(output)' --columns 4 --tile-size \(cell) --no-progress >'\(log)' 2>&1"
            let status = system(command)
            let text = String(decoding: readFile(log), as: UTF8.self)
            #expect((status >> 8) & 0xFF == 0 && status & 0x7F == 0, "\(cell) px: status \(status): \(text)")
            #expect(!text.contains("placeholder") && !text.contains("warning"), "\(cell) px: \(text)")
            #expect(access(output, F_OK) == 0)
            unlink(output)
        }
    }
}

@Suite struct ProgressiveMosaicTests {
    /// Progressive photos and a progressive target make as good a mosaic as their baseline twins:
    /// analysis, the target and the render all go through the progressive decoders. (Not the
    /// same placements: the fixtures hold one picture in several orientations, whose identical
    /// features tie, and the decoders' rounding breaks the ties differently.)
    @Test func progressiveLibraryAndTargetMakeAsGoodAMosaic() {
        let directory = "\(testRoot)/tessera-progressive-mosaic-\(getpid())"
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(system("mkdir -p '\(directory)/photos' && for f in '\(fixtures)'/*.jpg; do "
                       + "jpegtran -progressive -copy all \"$f\" > '\(directory)/photos/'$(basename \"$f\") || exit 1; done") == 0)
        var errors: [Double] = []
        for (photos, target) in [(fixtures, fixtures + "/Landscape_1.jpg"),
                                 (directory + "/photos", directory + "/photos/Landscape_1.jpg")] {
            let result = runTessera(["mosaic", "--target", target, photos, "-o", directory + "/m.jpg", "--columns", "30",
                                     "--tile-size", "40", "--min-distance", "0",
                                     "--cache-dir", directory + "/cache-\(errors.count)", "--no-progress"])
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains("18 photo(s) analysed"), "\(result.output)")
            #expect(!result.output.contains("warning") && !result.output.contains("placeholder"), "\(result.output)")
            // "mosaic: mean Oklab error 0.2012 per sub-cell, ..."
            let words = result.output.split(whereSeparator: { $0 == " " || $0 == "\n" })
            if let at = words.firstIndex(of: "error"), at + 1 < words.count, let value = Double(words[at + 1]) {
                errors.append(value)
            } else {
                Issue.record("no mean Oklab error in: \(result.output)")
            }
        }
        #expect(errors.count == 2)
        if errors.count == 2 { #expect(abs(errors[0] - errors[1]) <= 0.002, "\(errors)") }
    }
}
