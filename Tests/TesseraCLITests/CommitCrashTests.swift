// CommitCrashTests.swift — a render killed while it moves its outputs into place, and two
// renders committing to the same names at once (OutputCommit.swift, CommitJournal.swift),
// through the binary. strace kills the render at its Nth renameat2: between the pyramid's
// folder, its page, its descriptor and the JPEG.
import Glibc
import Testing

@Suite struct CommitCrashTests {
    private func folder(_ name: String) -> String {
        let path = testRoot + "/commit-\(name)-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o755)
        return path
    }

    /// Every file under `directory` with its checksum, hidden names included (`find`).
    private func snapshot(_ directory: String) -> String {
        let listing = directory + ".listing"
        defer { unlink(listing) }
        _ = system("cd '\(directory)' && find . -type f -print0 | sort -z | xargs -0 -r md5sum > '\(listing)'")
        return String(decoding: readFile(listing), as: UTF8.self)
    }

    private func render(_ directory: String, grid: String, prefix: String = "") -> Int32 {
        let command = ["grid", fixtures, "--dzi", "w.dzi", "-o", "w.jpg", "--grid", grid, "--tile-size", "40", "--no-progress"]
            .map { "'\($0)'" }.joined(separator: " ")
        let status = system("cd '\(directory)' && \(testCacheAssignment) \(prefix) '\(toolPath())' \(command) >/dev/null 2>&1")
        return (status >> 8) & 0xFF
    }

    /// Killed (SIGKILL) at each of the commit's moves — the pyramid's folder swapped, its page,
    /// its descriptor, the JPEG: the next run in the folder, rendering something else, finds the
    /// journal, puts the old outputs back whole and removes the new ones. (Killed after the
    /// folder's swap, the old tiles stood under the new descriptor... and the next run removed
    /// the staging folder holding the old ones for good.)
    @Test func aRenderKilledWhileItMovesItsOutputsInIsUndoneByTheNextRun() throws {
        guard access("/usr/bin/strace", X_OK) == 0 else {
            Issue.record("strace is needed (apt-get install strace)")
            return
        }
        for move in 1...4 {
            let directory = folder("killed-\(move)")
            defer { _ = system("rm -rf '\(directory)'") }
            #expect(render(directory, grid: "3x2") == 0)
            let before = snapshot(directory)
            #expect(before.contains("./w.jpg") && before.contains("./w.dzi") && before.contains("./w_files/"))
            let killed = render(directory, grid: "6x3",
                                prefix: "strace -f -o /dev/null -e trace=renameat2 -e inject=renameat2:signal=SIGKILL:when=\(move)")
            #expect(killed == 128 + SIGKILL, "move \(move): exit \(killed)")
            let after = snapshot(directory)
            #expect(after != before && after.contains("journal"), "move \(move): the kill left no journal")
            let next = runTessera(["grid", fixtures + "/Portrait_1.jpg", "-o", directory + "/other.jpg", "--grid", "1x1", "--tile-size", "8",
                                   "--no-progress"])
            #expect(next.status == 0 && next.output.contains("left by an earlier run that was killed"), "\(next.output)")
            unlink(directory + "/other.jpg")
            let restored = snapshot(directory)
            #expect(restored == before, "move \(move): the old outputs are not as they were:\n\(restored)\nbefore:\n\(before)")
        }
    }

    /// A commit holds its folders' locks: while another process holds the folder's, a render
    /// that has drawn everything (its staged pyramid has its descriptor) waits to move its
    /// outputs in; SIGTERM there stops it (143) with nothing moved and nothing left (it was
    /// ignored until the lock came); once the folder is free, a render commits. Two renders to
    /// the same names at once took turns move by move before: the JPEG one's, the pyramid the
    /// other's.
    @Test func aRenderWaitsForTheFolderWhileAnotherCommitHoldsIt() throws {
        let directory = folder("locked")
        defer { _ = system("rm -rf '\(directory)'") }
        #expect(render(directory, grid: "3x2") == 0)
        let before = snapshot(directory)
        let held = open(directory, O_RDONLY | O_DIRECTORY)
        #expect(held >= 0 && flock(held, LOCK_EX) == 0)
        let pid = spawnTessera(["grid", fixtures, "--dzi", directory + "/w.dzi", "-o", directory + "/w.jpg", "--grid", "6x3",
                                "--tile-size", "40", "--no-progress"])
        // Polled (at most a minute): the staged descriptor is written just before the commit.
        var staged = false, exited = false, status: Int32 = 0
        for _ in 0..<600 where !staged && !exited {
            usleep(100_000)
            staged = listNames(directory).contains { $0.hasPrefix(".w.dzi.tessera-\(pid)-") && access(directory + "/" + $0 + "/w.dzi", F_OK) == 0 }
            exited = waitpid(pid, &status, WNOHANG) == pid
        }
        #expect(staged && !exited, "the render never reached its commit, or did not wait for the folder (status \(status))")
        usleep(500_000)
        #expect(waitpid(pid, &status, WNOHANG) == 0, "the render committed past the folder's lock")
        kill(pid, SIGTERM)
        // Polled (at most a minute), so that a render that goes on waiting fails the test.
        var waited = 0
        while waitpid(pid, &status, WNOHANG) == 0 && waited < 600 {
            usleep(100_000)
            waited += 1
        }
        if waited == 600 {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
            Issue.record("still waiting for the folder's lock a minute after SIGTERM")
        }
        #expect(status & 0x7F == 0 && (status >> 8) & 0xFF == 143, "status \(status)")
        close(held)
        #expect(snapshot(directory) == before, "the render waiting for the lock moved something in, or left something")
        #expect(render(directory, grid: "6x3") == 0)
        #expect(snapshot(directory) != before)
    }
}
