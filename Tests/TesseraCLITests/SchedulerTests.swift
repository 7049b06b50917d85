// SchedulerTests.swift — sharded renders under the schedulers users run them with: a real
// single-host Slurm (slurmctld + slurmd from Debian's slurm-wlm, scripts/slurm-single-host.sh)
// running the shards as a job array and the join as a job that depends on it (afterok), and
// GNU parallel with an --sshloginfile. Each joined output is compared, file by file, with the
// single-process render. Both tools are installed by scripts/demo.sh and .ci/run; a machine
// without them fails these tests, saying what to install.
import Foundation
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

/// Runs `command` with bash; returns its exit status and what it printed (both streams).
private func shell(_ command: String) -> (status: Int32, output: String) {
    let log = "\(testRoot)/shell-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
    defer { unlink(log) }
    let quoted = "'" + command.replacingOccurrences(of: "'", with: "'\\''") + "'"
    let status = system("bash -c \(quoted) >'\(log)' 2>&1 </dev/null")
    return ((status >> 8) & 0xFF, String(decoding: readFile(log), as: UTF8.self))
}

private func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

@Suite(.serialized) struct SchedulerTests {
    /// The render both schedulers split: a grid into a JPEG and a pyramid.
    private func flags(_ out: String) -> String {
        "\(quote(fixtures)) --grid 36x24 --tile-size 40x30 --dzi-tile-size 50 -o \(quote(out))/w.jpg --dzi \(quote(out))/w.dzi"
    }

    private func referenceRender(in directory: String) -> String {
        let reference = directory + "/reference"
        let run = shell("mkdir -p \(quote(reference)) && \(quote(toolPath())) grid \(flags(reference)) --encoder parallel -q")
        #expect(run.status == 0, "\(run.output)")
        return reference
    }

    @Test func slurmJobArrayAndDependentJoin() throws {
        let installed = shell("command -v slurmctld && command -v slurmd && command -v sbatch")
        try #require(installed.status == 0, "slurm-wlm is not installed: apt-get install slurm-wlm (scripts/demo.sh and .ci/run do)")
        let directory = "\(testRoot)/slurm-\(getpid())"
        let cluster = directory + "/cluster"
        let out = directory + "/out"
        defer {
            _ = shell("\(quote(repositoryRoot))/scripts/slurm-single-host.sh stop \(quote(cluster))")
            _ = system("rm -rf \(quote(directory))")
        }
        #expect(system("mkdir -p \(quote(out)) \(quote(directory))/parts") == 0)
        let reference = referenceRender(in: directory)
        // Ports of this run's own, so that a cluster left by another run does not answer.
        let base = 20_000 + Int(getpid() % 20_000)
        let started = shell("SLURMCTLD_PORT=\(base) SLURMD_PORT=\(base + 1) \(quote(repositoryRoot))/scripts/slurm-single-host.sh start \(quote(cluster))")
        try #require(started.status == 0, "the single-host Slurm did not start: \(started.output)")
        let environment = "export SLURM_CONF=\(quote(cluster))/slurm.conf; cd \(quote(directory)); "
        // 4 shards as an array; the join waits for all of them (afterok), and the test for the join.
        let shard = "\(quote(toolPath())) grid \(flags(out)) --shard \\$SLURM_ARRAY_TASK_ID/4 --shard-dir parts --no-progress"
        let array = shell(environment + "sbatch --parsable --array=1-4 -o shard-%a.log --wrap \"\(shard)\"")
        try #require(array.status == 0, "\(array.output)")
        let jobID = array.output.split(separator: "\n").last.map(String.init) ?? ""
        #expect(Int(jobID) != nil, "sbatch printed \(array.output)")
        let join = shell(environment + "join=$(sbatch --parsable --dependency=afterok:\(jobID) -o join.log --wrap \"\(quote(toolPath())) join parts\") && "
                         + "\(quote(repositoryRoot))/scripts/slurm-single-host.sh wait \(quote(cluster)) $join")
        let logs = shell("cat \(quote(directory))/*.log").output
        #expect(join.status == 0, "join job: \(join.output)\n\(logs)")
        for k in 1...4 { #expect(logs.contains("wrote shard \(k)/4"), "\(logs)") }
        #expect(logs.contains("joined 4 part(s) from parts"), "\(logs)")
        let compared = shell("diff -r \(quote(reference)) \(quote(out))")
        #expect(compared.status == 0, "\(compared.output)")
    }

    @Test func gnuParallelWithAnSSHLoginFile() throws {
        let installed = shell("command -v parallel")
        try #require(installed.status == 0, "GNU parallel is not installed: apt-get install parallel (scripts/demo.sh and .ci/run do)")
        let directory = "\(testRoot)/parallel-\(getpid())"
        let out = directory + "/out"
        defer { _ = system("rm -rf \(quote(directory))") }
        #expect(system("mkdir -p \(quote(out)) \(quote(directory))/parts") == 0)
        let reference = referenceRender(in: directory)
        // ':' in a login file is this machine (no ssh here); on a cluster it lists user@host lines.
        #expect(system("echo 2/: > \(quote(directory))/hosts") == 0)
        let run = shell("cd \(quote(directory)) && parallel --will-cite --halt now,fail=1 --sshloginfile hosts "
                        + "\(quote(toolPath())) grid \(flags(out)) --shard {}/5 --shard-dir parts --no-progress ::: 1 2 3 4 5 "
                        + "&& \(quote(toolPath())) join parts")
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("joined 5 part(s) from parts"))
        let compared = shell("diff -r \(quote(reference)) \(quote(out))")
        #expect(compared.status == 0, "\(compared.output)")
    }
}
