// ProgressiveCgroupTests.swift — large progressive photos rendered inside a 64 MiB memory
// cgroup, as in a memory-constrained container: the process must not be OOM-killed and no photo
// may become a placeholder. Needs root and a cgroup-v1 memory controller (CI has both).
import Glibc
import Testing

private let memoryControllers = "/sys/fs/cgroup/memory"

/// Runs `tessera grid PHOTOS -o OUT ARGS` once for each `runs` entry inside one memory cgroup of
/// `limitMiB`: each must exit 0, draw every photo (no placeholder, no warning) and write its output.
private func renderInside64MiB(_ photos: String, name: String, limitMiB: Int = 64, runs: [(label: String, arguments: String)]) {
    let scratch = "\(testRoot)/tessera-cgroup-\(name)-\(getpid())"
    #expect(system("mkdir -p '\(scratch)'") == 0)
    defer { _ = system("rm -rf '\(scratch)'") }
    let group = memoryControllers + "/tessera-test-\(name)-\(getpid())"
    #expect(mkdir(group, 0o755) == 0)
    defer { rmdir(group) }
    #expect(system("echo \(limitMiB << 20) > '\(group)/memory.limit_in_bytes'") == 0)
    for run in runs {
        let output = scratch + "/out.jpg", log = scratch + "/log.txt"
        let command = "sh -c 'echo $$ > \(group)/cgroup.procs && exec \"$0\" \"$@\"' '\(toolPath())' grid '\(photos)' "
            + "-o '\(output)' \(run.arguments) --no-progress >'\(log)' 2>&1"
        let status = system(command)
        let text = String(decoding: readFile(log), as: UTF8.self)
        #expect((status >> 8) & 0xFF == 0 && status & 0x7F == 0, "\(run.label): status \(status): \(text)")
        #expect(!text.contains("placeholder"), "\(run.label): \(text)")
        #expect(!text.contains("warning"), "\(run.label): \(text)")
        #expect(access(output, F_OK) == 0)
        unlink(output)
    }
}

@Suite(.serialized) struct ProgressiveCgroupTests {
    /// Ten progressive photos of 3900 x 2700 px with default flags, then eight workers on two
    /// cores; 150 px cells (the photos drawn at 1/8 by the DC decoder) and 600 px cells (at 2/8
    /// by libjpeg, its coefficients spilled).
    @Test(.enabled(if: geteuid() == 0 && access(memoryControllers + "/cgroup.procs", W_OK) == 0,
                   "needs root and a cgroup-v1 memory controller"))
    func largeProgressivePhotosRenderInside64MiB() throws {
        renderInside64MiB(largeProgressivePhotos, name: "progressive", runs: [
            ("150 px", "--grid 6x6 --tile-size 150"), ("150 px --workers 8", "--grid 6x6 --tile-size 150 --workers 8"),
            ("600 px", "--grid 6x6 --tile-size 600"), ("600 px --workers 8", "--grid 6x6 --tile-size 600 --workers 8"),
        ])
    }

    /// A folder mixing every format Tessera reads (MemoryTests.swift: PNG, WebP, tiled and
    /// single-picture HEIC, AVIF, profile-tagged JPEGs), default flags, inside 64 MiB: at 150 px
    /// (HEIC thumbnails) and 600 px (every HEIC decoded whole), every photo drawn.
    @Test(.enabled(if: geteuid() == 0 && access(memoryControllers + "/cgroup.procs", W_OK) == 0,
                   "needs root and a cgroup-v1 memory controller"))
    func mixedFormatsRenderInside64MiB() throws {
        renderInside64MiB(mixedFormatPhotos, name: "mixed", runs: [("150 px", "--columns 4 --tile-size 150"),
                                                                   ("600 px", "--columns 4 --tile-size 600")])
    }
}

/// With no memory flag inside a memory cgroup, the budget comes from the cgroup's limit (less a
/// sixteenth, at least 4 MiB), the dry run says so, and the mixed library renders inside it:
/// never OOM-killed, every photo drawn.
@Suite(.serialized) struct AutomaticBudgetCgroupTests {
    @Test(.enabled(if: geteuid() == 0 && access(memoryControllers + "/cgroup.procs", W_OK) == 0,
                   "needs root and a cgroup-v1 memory controller"),
          arguments: [(64, "60.0 MiB"), (48, "44.0 MiB")])
    func theDefaultBudgetFitsTheCgroup(limitMiB: Int, budget: String) throws {
        let group = memoryControllers + "/tessera-test-auto-\(limitMiB)-\(getpid())"
        #expect(mkdir(group, 0o755) == 0)
        defer { rmdir(group) }
        #expect(system("echo \(limitMiB << 20) > '\(group)/memory.limit_in_bytes'") == 0)
        let log = "\(testRoot)/tessera-auto-\(limitMiB)-\(getpid()).txt"
        defer { unlink(log) }
        let command = "sh -c 'echo $$ > \(group)/cgroup.procs && exec \"$0\" \"$@\"' '\(toolPath())' grid '\(mixedFormatPhotos)' "
            + "-o \(testRoot)/unused.jpg --columns 4 --tile-size 600 --dry-run >'\(log)' 2>&1"
        #expect(system(command) == 0)
        let plan = String(decoding: readFile(log), as: UTF8.self)
        #expect(plan.contains("budget \(budget), auto: the memory cgroup's limit of \(limitMiB).0 MiB (cgroup v1)"), "\(plan)")
        renderInside64MiB(mixedFormatPhotos, name: "auto-render-\(limitMiB)", limitMiB: limitMiB,
                          runs: [("150 px", "--columns 4 --tile-size 150"), ("600 px", "--columns 4 --tile-size 600")])
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
            // "matching: mean Oklab error 0.2012 per sub-cell, ..."
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
