// ShardBenchmark.swift — renders split into shards: the largest grid as 8 shards run by GNU
// parallel 2 at a time, then the join (wall time against the single process, the join against
// the encode-only floor, bytes compared); the CPU time of 4 shards against one process; and a
// Deep Zoom of several gigapixels as 16 shards under a single-host Slurm (scripts/
// slurm-single-host.sh), its tiles compared with the single-process render's.
import Glibc
import Tessera

/// Runs a command; returns wall seconds, the CPU seconds of it and every child it waited for
/// (wait4's rusage), and its exit status.
func runTimed(_ command: [String], stdout: String = "/dev/null", stderr: String = "/dev/null") -> (seconds: Double, cpu: Double, status: Int32) {
    let start = monotonicSeconds()
    let pid = spawn(command, stdout: stdout, stderr: stderr)
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
    let cpu = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    return (monotonicSeconds() - start, cpu, (status >> 8) & 0xFF)
}

/// The "summary" events of a --progress json log: (seconds, peak RSS bytes) each.
func summaries(_ path: String) -> [(seconds: Double, peak: Int64)] {
    fileLines(path).filter { $0.contains("\"event\": \"summary\"") }.map { line in
        func field(_ name: String) -> String {
            guard let range = line.firstRange(of: "\"\(name)\": ") else { return "" }
            return String(line[range.upperBound...].prefix { $0.isNumber || $0 == "." })
        }
        return (Double(field("seconds")) ?? 0, Int64(field("peak_rss_bytes")) ?? 0)
    }
}

func shellQuoted(_ text: String) -> String { "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'" }

@MainActor
func runShardBenchmark() {
    guard let size = options.sizes.max() else { return }
    guard runTimed(["sh", "-c", "command -v parallel"]).status == 0 else {
        print("\nshards: GNU parallel is not installed (apt-get install parallel); skipped")
        return
    }
    let rows = max(1, Int((size * 1e9 / Double(columns * cell * cell)).rounded()))
    let megapixels = Double(columns * cell) * Double(rows * cell) / 1e6
    let folder = scratch + "/shards"
    _ = run(["rm", "-rf", folder])
    mkdir(folder, 0o755)
    mkdir(folder + "/parts", 0o755)
    mkdir(folder + "/out", 0o755)
    defer { _ = run(["rm", "-rf", folder]) }
    // The shards report in JSON (their own time and peak RSS); the flags' --no-progress would contradict it.
    let flags = flags.filter { $0 != "--no-progress" }
    let grid = [photoDirectory, "--grid", "\(columns)x\(rows)", "--tile-size", String(cell)] + flags
    print("\nshards on grid \(columns)x\(rows) (\(fixed(megapixels, 1)) MP), 1 run each")
    let single = runTimed([tessera, "grid"] + grid + ["-o", folder + "/single.jpg", "--encoder", "parallel", "--no-progress"])
    guard single.status == 0 else { fail("the single-process render failed (status \(single.status))") }
    print("  one process                 : \(fixed(single.seconds)) s wall, \(fixed(single.cpu)) s CPU")

    // 8 shards, 2 at a time, by GNU parallel; each shard's own summary (time, peak RSS) kept.
    let shardCommand = ([tessera, "grid"] + grid + ["-o", folder + "/out/wall.jpg", "--shard", "{}/8", "--shard-dir", folder + "/parts",
                                                    "--progress", "json"]).map(shellQuoted).joined(separator: " ")
        + " 2>" + shellQuoted(folder) + "/shard-{}.jsonl"
    let sharded = runTimed(["parallel", "--will-cite", "-j2", "--halt", "now,fail=1", shardCommand, ":::"] + (1...8).map(String.init))
    guard sharded.status == 0 else { fail("the 8 shards under GNU parallel failed (status \(sharded.status))") }
    let join = runTimed([tessera, "join", folder + "/parts", "--no-progress"])
    guard join.status == 0 else { fail("tessera join failed (status \(join.status))") }
    let same = runTimed(["cmp", folder + "/single.jpg", folder + "/out/wall.jpg"]).status == 0
    var shardSummaries: [(seconds: Double, peak: Int64)] = []
    for k in 1...8 { shardSummaries += summaries(folder + "/shard-\(k).jsonl") }
    let total = sharded.seconds + join.seconds
    print("  8 shards, parallel -j2      : \(fixed(sharded.seconds)) s wall, \(fixed(sharded.cpu)) s CPU; shards' peak RSS "
          + "\(fixed(Double(shardSummaries.map(\.peak).min() ?? 0) / 1e6, 1))-\(fixed(Double(shardSummaries.map(\.peak).max() ?? 0) / 1e6, 1)) MB, "
          + "each \(fixed(shardSummaries.map(\.seconds).min() ?? 0))-\(fixed(shardSummaries.map(\.seconds).max() ?? 0)) s")
    let floorNote = floorAtLargest.map { ", x\(fixed(join.seconds / $0)) of the encode-only floor (\(fixed($0)) s)" } ?? ""
    print("  tessera join                : \(fixed(join.seconds)) s\(floorNote)")
    print("  shards + join               : \(fixed(total)) s, x\(fixed(total / single.seconds)) of one process; output \(same ? "byte-identical" : "DIFFERENT")")

    // The same with the join started first (--wait): its copying overlaps the shards.
    _ = run(["rm", "-rf", folder + "/parts", folder + "/out/wall.jpg"])
    mkdir(folder + "/parts", 0o755)
    let overlapped = runTimed(["bash", "-c", shellQuoted(tessera) + " join " + shellQuoted(folder + "/parts") + " --wait 600 --no-progress & "
                               + "parallel --will-cite -j2 --halt now,fail=1 " + shellQuoted(shardCommand) + " ::: 1 2 3 4 5 6 7 8 && wait $!"])
    guard overlapped.status == 0 else { fail("shards with join --wait failed (status \(overlapped.status))") }
    let sameAgain = runTimed(["cmp", folder + "/single.jpg", folder + "/out/wall.jpg"]).status == 0
    print("  join --wait beside the shards: \(fixed(overlapped.seconds)) s in all, x\(fixed(overlapped.seconds / single.seconds)) of one process; "
          + "output \(sameAgain ? "byte-identical" : "DIFFERENT")")

    // CPU: 4 shards one after the other against one process.
    _ = run(["rm", "-rf", folder + "/parts4"])
    mkdir(folder + "/parts4", 0o755)
    var cpu4 = 0.0
    for k in 1...4 {
        let shard = runTimed([tessera, "grid"] + grid + ["-o", folder + "/out/wall.jpg", "--shard", "\(k)/4", "--shard-dir", folder + "/parts4",
                                                         "--no-progress"])
        guard shard.status == 0 else { fail("shard \(k)/4 failed (status \(shard.status))") }
        cpu4 += shard.cpu
    }
    print("  4 shards' CPU time, summed  : \(fixed(cpu4)) s, x\(fixed(cpu4 / single.cpu)) of one process's \(fixed(single.cpu)) s")
    _ = run(["rm", "-rf", folder + "/parts4", folder + "/parts", folder + "/single.jpg", folder + "/out/wall.jpg"])

    // A Deep Zoom of several gigapixels as 16 shards under a single-host Slurm.
    guard options.shardDeepZoomGigapixels > 0 else { return }
    // The repository's script, found from the build folder upwards.
    var root = products
    while !root.isEmpty && access(root + "/scripts/slurm-single-host.sh", X_OK) != 0 {
        root = String(root[..<(root.lastIndex(of: "/") ?? root.startIndex)])
    }
    let script = root + "/scripts/slurm-single-host.sh"
    guard runTimed(["sh", "-c", "command -v slurmctld && command -v sbatch"]).status == 0, access(script, X_OK) == 0 else {
        print("  Slurm: slurm-wlm is not installed (apt-get install slurm-wlm) or \(script) is missing; skipped")
        return
    }
    let zoomRows = max(1, Int((options.shardDeepZoomGigapixels * 1e9 / Double(columns * cell * cell)).rounded()))
    let zoomMegapixels = Double(columns * cell) * Double(zoomRows * cell) / 1e6
    let zoomGrid = [photoDirectory, "--grid", "\(columns)x\(zoomRows)", "--tile-size", String(cell)] + flags
    print("\nDeep Zoom of grid \(columns)x\(zoomRows) (\(fixed(zoomMegapixels / 1000, 2)) GP) as 16 shards under a single-host Slurm, 1 run")
    mkdir(folder + "/whole", 0o755)
    let whole = runTimed([tessera, "grid"] + zoomGrid + ["--dzi", folder + "/whole/wall.dzi", "--no-progress"])
    guard whole.status == 0 else { fail("the single-process pyramid failed (status \(whole.status))") }
    print("  one process                 : \(fixed(whole.seconds)) s wall, \(fixed(whole.cpu)) s CPU")
    _ = run(["mv", folder + "/whole", folder + "/reference"])
    mkdir(folder + "/whole", 0o755)
    mkdir(folder + "/zparts", 0o755)
    let cluster = folder + "/cluster"
    let started = runTimed([script, "start", cluster], stdout: folder + "/cluster.txt", stderr: folder + "/cluster.txt")
    guard started.status == 0 else {
        print("  the single-host Slurm did not start:")
        for line in fileLines(folder + "/cluster.txt") { print("  | " + line) }
        return
    }
    defer { _ = runTimed([script, "stop", cluster]) }
    let shard = ([tessera, "grid"] + zoomGrid + ["--dzi", folder + "/whole/wall.dzi", "--shard"]).map(shellQuoted).joined(separator: " ")
        + " \\$SLURM_ARRAY_TASK_ID/16 --shard-dir " + shellQuoted(folder + "/zparts") + " --progress json"
    let environment = "export SLURM_CONF=" + shellQuoted(cluster + "/slurm.conf") + "; cd " + shellQuoted(folder) + "; "
    let submit = environment + "jid=$(sbatch --parsable --array=1-16 -o shard-%a.out -e shard-%a.jsonl --wrap \"\(shard)\") && "
        + "join=$(sbatch --parsable --dependency=afterok:$jid -o join.out --wrap " + shellQuoted(shellQuoted(tessera) + " join zparts --no-progress")
        + ") && " + shellQuoted(script) + " wait " + shellQuoted(cluster) + " $join"
    let scheduled = runTimed(["bash", "-c", submit], stdout: folder + "/sbatch.txt", stderr: folder + "/sbatch.txt")
    guard scheduled.status == 0 else {
        print("  the Slurm jobs failed (status \(scheduled.status)):")
        for line in fileLines(folder + "/sbatch.txt") + fileLines(folder + "/join.out") { print("  | " + line) }
        return
    }
    print("  16 shards + join under Slurm: \(fixed(scheduled.seconds)) s wall (submission to the join's end), x\(fixed(scheduled.seconds / whole.seconds)) of one process")
    for k in 1...16 {
        let summary = summaries(folder + "/shard-\(k).jsonl").first
        print("    shard \(k < 10 ? " " : "")\(k)/16: \(fixed(summary?.seconds ?? 0)) s, peak RSS \(fixed(Double(summary?.peak ?? 0) / 1e6, 1)) MB")
    }
    for line in fileLines(folder + "/join.out") { print("  | " + line) }
    let compared = runTimed(["diff", "-r", "-q", folder + "/reference", folder + "/whole"], stdout: folder + "/diff.txt")
    let tileCount = scratch + "/tiles.txt"
    _ = run(["sh", "-c", "find '\(folder)/whole/wall_files' -name '*_*.jpg' | wc -l"], stdout: tileCount)
    print("  pyramid: \(fileLines(tileCount).first ?? "?") tiles, \(compared.status == 0 ? "every file identical to the single-process render's" : "DIFFERENT: \(fileLines(folder + "/diff.txt").prefix(5))")")
    unlink(tileCount)
}
