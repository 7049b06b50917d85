// MemoryBudgetTests.swift — the automatic memory budget: the rule on figures, the files it
// reads (fake /proc and /sys trees for cgroup v1 and v2), and what a plan does with a budget
// larger than its steady state.
import Glibc
import Testing
@testable import Tessera

/// A folder laid out like / with the given files (path relative to the root, contents).
private func fakeRoot(_ files: [String: String]) -> String {
    let root = "\(testScratch)/memory-root-\(UInt32.random(in: 0...UInt32.max))"
    for (path, text) in files {
        let full = root + path
        let folder = String(full[..<full.lastIndex(of: "/")!])
        #expect(system("mkdir -p '\(folder)'") == 0)
        let file = fopen(full, "w")!
        fputs(text, file)
        fclose(file)
    }
    return root
}

private let testScratch: String = {
    let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    return base
}()

private let meminfo = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\nBuffers: 1 kB\n"

@Suite struct MemoryBudgetRuleTests {
    /// (An eighth, at least 8 MiB, until the process's allowance grew by 4 MiB: a plan inside
    /// a 48 or 64 MiB cgroup has the room it had.)
    @Test func aCgroupLimitLessASixteenthWithAtLeast4MiBOfHeadroom() {
        let small = MemoryBudget.choose(cgroupLimit: (1, 64 << 20), availableBytes: 20 << 30)
        #expect(small.bytes == 60 << 20 && small.rule == .cgroup(version: 1, limitBytes: 64 << 20) && !small.capped)
        #expect(small.bytes - RenderPlan.processAllowanceBytes == (56 << 20) - (12 << 20), "the room a plan had")
        let smaller = MemoryBudget.choose(cgroupLimit: (2, 48 << 20), availableBytes: 20 << 30)
        #expect(smaller.bytes == 44 << 20, "at least 4 MiB of headroom: \(smaller.bytes >> 20) MiB")
        let large = MemoryBudget.choose(cgroupLimit: (2, 1 << 30), availableBytes: 20 << 30)
        #expect(large.bytes == (1 << 30) - (64 << 20))
        // A limit past the cap, or past half the machine, is cut.
        let capped = MemoryBudget.choose(cgroupLimit: (2, 16 << 30), availableBytes: 20 << 30)
        #expect(capped.bytes == MemoryBudget.capBytes && capped.capped)
        let crowded = MemoryBudget.choose(cgroupLimit: (1, 16 << 30), availableBytes: 1 << 30)
        #expect(crowded.bytes == 512 << 20 && crowded.capped)
    }

    @Test func withoutACgroupHalfTheAvailableMemoryAtMostTheCap() {
        let open = MemoryBudget.choose(cgroupLimit: nil, availableBytes: 20 << 30)
        #expect(open.bytes == MemoryBudget.capBytes && open.rule == .machine(availableBytes: 20 << 30) && open.capped)
        let small = MemoryBudget.choose(cgroupLimit: nil, availableBytes: 1 << 30)
        #expect(small.bytes == 512 << 20 && !small.capped)
        let none = MemoryBudget.choose(cgroupLimit: nil, availableBytes: nil)
        #expect(none.bytes == 64 << 20 && none.rule == .fallback)
    }

    @Test func readsACgroupV1LimitAlongThePath() {
        let root = fakeRoot([
            "/proc/meminfo": meminfo,
            "/proc/self/cgroup": "9:name=systemd:/\n4:memory:/jobs/job7\n3:cpuset:/\n0::/\n",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
            "/sys/fs/cgroup/memory/jobs/memory.limit_in_bytes": "\(96 << 20)\n",
            "/sys/fs/cgroup/memory/jobs/job7/memory.limit_in_bytes": "9223372036854771712\n",
        ])
        defer { _ = system("rm -rf '\(root)'") }
        // The job's own limit is unlimited; its parent's 96 MiB is what holds.
        let budget = MemoryBudget.automatic(root: root)
        #expect(budget.rule == .cgroup(version: 1, limitBytes: 96 << 20))
        #expect(budget.bytes == 90 << 20)
    }

    @Test func readsACgroupV2LimitAndItsMax() {
        let root = fakeRoot([
            "/proc/meminfo": meminfo,
            "/proc/self/cgroup": "0::/user.slice/app.scope\n",
            "/sys/fs/cgroup/user.slice/memory.max": "max\n",
            "/sys/fs/cgroup/user.slice/app.scope/memory.max": "\(64 << 20)\n",
        ])
        defer { _ = system("rm -rf '\(root)'") }
        let budget = MemoryBudget.automatic(root: root)
        #expect(budget.rule == .cgroup(version: 2, limitBytes: 64 << 20) && budget.bytes == 60 << 20)
    }

    @Test func aContainersOwnCgroupIsTheMountsRoot() {
        // Inside a container the path names a host folder the container cannot see.
        let root = fakeRoot([
            "/proc/meminfo": meminfo,
            "/proc/self/cgroup": "0::/kubepods/pod1/container2\n",
            "/sys/fs/cgroup/memory.max": "\(128 << 20)\n",
        ])
        defer { _ = system("rm -rf '\(root)'") }
        #expect(MemoryBudget.automatic(root: root).rule == .cgroup(version: 2, limitBytes: 128 << 20))
    }

    @Test func unlimitedGarbledOrMissingFilesFallBack() {
        let unlimited = fakeRoot([
            "/proc/meminfo": meminfo,
            "/proc/self/cgroup": "4:memory:/\n0::/\n",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
            "/sys/fs/cgroup/memory.max": "max\n",
        ])
        let garbled = fakeRoot(["/proc/meminfo": "MemAvailable: lots\n", "/proc/self/cgroup": "junk\n"])
        defer { _ = system("rm -rf '\(unlimited)' '\(garbled)'") }
        #expect(MemoryBudget.automatic(root: unlimited).rule == .machine(availableBytes: 20_000_000 * 1024))
        #expect(MemoryBudget.automatic(root: garbled) == MemoryBudget(bytes: 64 << 20, rule: .fallback))
        #expect(MemoryBudget.automatic(root: "/nonexistent-\(getpid())").rule == .fallback)
    }

    /// This machine's own files are readable and give a budget the plan can use.
    @Test func thisMachineGivesABudget() {
        let budget = MemoryBudget.automatic()
        #expect(budget.rule != .fallback)
        #expect(budget.bytes >= 1 << 20 && budget.bytes <= MemoryBudget.capBytes)
    }
}

@Suite struct LargeBudgetPlanTests {
    private func automatic(_ bytes: Int) -> RenderSettings {
        var settings = RenderSettings()
        settings.workers = 2
        settings.useMemoryBudget(MemoryBudget(bytes: bytes, rule: .machine(availableBytes: Int64(bytes) * 2)))
        return settings
    }

    /// The 1.2-gigapixel grid under a 2 GiB automatic budget plans the steady state of 64 MiB:
    /// the same stripes, cells and pool, so the same small peak.
    @Test func aLargeAutomaticBudgetKeepsTheSteadyState() throws {
        let layout = GridLayout.make(photoCount: 105, columns: 200, rows: 267, cellWidth: 150, cellHeight: 150, order: .name)
        var fixed = RenderSettings()
        fixed.workers = 2
        let small = try RenderPlan.make(layout: layout, settings: fixed)
        let large = try RenderPlan.make(layout: layout, settings: automatic(2 << 30))
        #expect(large.geometry == small.geometry && large.cellSlots == small.cellSlots && large.decodePoolBytes == small.decodePoolBytes)
        #expect(large.estimatedPeakBytes == small.estimatedPeakBytes && large.steadyStateBudgetBytes == 64 << 20)
        // The rest is room for one photo decoded whole.
        #expect(large.wholeImageLimitBytes > (2 << 30) - (64 << 20))
        #expect(small.wholeImageLimitBytes < 64 << 20)
    }

    /// A photo that must be decoded whole gets room beside the steady state, and the estimate
    /// counts it: the peak planned is the steady state and that decode.
    @Test func aWholeDecodeIsCountedBesideTheSteadyState() throws {
        let layout = GridLayout.make(photoCount: 32, columns: 8, rows: 4, cellWidth: 300, cellHeight: 300, order: .name)
        let decode = 150 << 20
        let plan = try RenderPlan.make(layout: layout, settings: automatic(2 << 30), wholeImageBytes: decode)
        let without = try RenderPlan.make(layout: layout, settings: automatic(2 << 30))
        #expect(plan.wholeImageLimitBytes >= decode)
        #expect(plan.estimatedPeakBytes >= decode && plan.estimatedPeakBytes <= without.estimatedPeakBytes + decode)
        #expect(plan.estimatedPeakBytes < 256 << 20, "\(plan.estimatedPeakBytes >> 20) MiB")
    }

    /// Inside a 64 MiB container (a budget of 60 MiB), a canvas 20,000 px wide: the stripes
    /// shrink to leave a phone's 3 MP HEIC (21 MiB decoded whole) its room, where 64-row stripes
    /// left it 18.5 MiB and it was drawn grey; and a 12 MP one that no plan there can hold does
    /// not take that room from it.
    @Test func wideStripesLeaveRoomForAWholeDecode() throws {
        let layout = GridLayout.make(photoCount: 17, columns: 50, rows: 1, cellWidth: 400, cellHeight: 400, order: .name)
        var settings = RenderSettings()
        settings.workers = 2
        settings.useMemoryBudget(MemoryBudget(bytes: 60 << 20, rule: .cgroup(version: 1, limitBytes: 64 << 20)))
        let phone = 21 << 20, camera = 75 << 20
        let without = try RenderPlan.make(layout: layout, settings: settings)
        #expect(without.wholeImageLimitBytes < phone)  // what the 64-row stripes leave
        let plan = try RenderPlan.make(layout: layout, settings: settings, wholeImageNeeds: [phone, 0, phone])
        #expect(plan.wholeImageLimitBytes >= phone, "\(plan.wholeImageLimitBytes >> 20) MiB")
        #expect(plan.geometry.stripeHeight < without.geometry.stripeHeight && plan.estimatedPeakBytes <= 60 << 20)
        let both = try RenderPlan.make(layout: layout, settings: settings, wholeImageNeeds: [camera, phone])
        #expect(both.wholeImageLimitBytes >= phone && both.wholeImageLimitBytes < camera)
        // A budget that keeps room past its steady state (an automatic 2 GiB one plans the steady
        // state for 64 MiB; here for the same 60 MiB): the stripes stay as they were.
        var roomy = settings
        roomy.maxMemoryBytes = 2 << 30
        roomy.steadyStateBytes = 60 << 20
        let free = try RenderPlan.make(layout: layout, settings: roomy)
        let freeWhole = try RenderPlan.make(layout: layout, settings: roomy, wholeImageNeeds: [phone])
        #expect(freeWhole.geometry == free.geometry && freeWhole.wholeImageLimitBytes >= phone)
    }

    /// A steady state that needs more than 64 MiB (sixteen workers) takes the least that fits
    /// out of a larger automatic budget, not all of it (the decode pool is a share of it).
    @Test func aLargerSteadyStateTakesTheLeastThatFits() throws {
        let layout = GridLayout.make(photoCount: 105, columns: 60, rows: 60, cellWidth: 150, cellHeight: 150, order: .name)
        var settings = automatic(2 << 30)
        settings.workers = 16
        var fixed = settings
        fixed.useMemoryBudget(MemoryBudget(bytes: 64 << 20, rule: .given))
        #expect(throws: TesseraError.self) { try RenderPlan.make(layout: layout, settings: fixed) }
        let plan = try RenderPlan.make(layout: layout, settings: settings)
        #expect(plan.steadyStateBudgetBytes > 64 << 20 && plan.steadyStateBudgetBytes < 128 << 20, "\(plan.steadyStateBudgetBytes >> 20)")
        #expect(plan.estimatedPeakBytes <= plan.steadyStateBudgetBytes)
        // An automatic budget too small for even that is refused, as a named one is.
        var tight = automatic(48 << 20)
        tight.workers = 16
        #expect(throws: TesseraError.self) { try RenderPlan.make(layout: layout, settings: tight) }
    }

    /// The budget a refused photo is told to use draws it: a plan at that budget leaves the
    /// photo's decode room (the shortfall rule: the limit grows with the budget byte for byte).
    @Test(arguments: [(48, 60), (64, 90), (64, 200), (100, 300)])
    func theBudgetToDrawAPhotoDrawsIt(budgetMiB: Int, decodeMiB: Int) throws {
        let layout = GridLayout.make(photoCount: 40, columns: 40, rows: 30, cellWidth: 300, cellHeight: 300, order: .name)
        var settings = RenderSettings()
        settings.workers = 2
        settings.maxMemoryBytes = budgetMiB << 20
        let plan = try RenderPlan.make(layout: layout, settings: settings, wholeImageBytes: decodeMiB << 20)
        #expect(plan.wholeImageLimitBytes < decodeMiB << 20)
        let advised = DecodeBudget.budgetToDraw(bytes: Int64(decodeMiB << 20), budgetBytes: Int64(settings.maxMemoryBytes),
                                                limitBytes: Int64(plan.wholeImageLimitBytes))
        var enough = settings
        enough.maxMemoryBytes = Int(advised)
        let drawn = try RenderPlan.make(layout: layout, settings: enough, wholeImageBytes: decodeMiB << 20)
        #expect(drawn.wholeImageLimitBytes >= decodeMiB << 20, "advised \(advised >> 20) MiB")
        #expect(drawn.estimatedPeakBytes <= enough.maxMemoryBytes)
        // Not the old rule of thumb (twice the decode and 8 MiB): at most the decode and the steady state.
        #expect(advised < Int64(decodeMiB << 20) * 2 + (8 << 20))
    }
}
