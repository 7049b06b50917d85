// CommitCrashTests.swift — a render killed while it moves its outputs into place, and two
// renders committing to the same names at once (OutputCommit.swift, CommitJournal.swift),
// through the binary. strace kills the render at its Nth renameat2: between the pyramid's
// folder, its page, its descriptor and the JPEG; and, making every renameat2 fail as a
// filesystem without the exchange does, at its Nth rename.
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

    private func render(_ directory: String, grid: String, more: [String] = [], prefix: String = "") -> Int32 {
        let command = (["grid", fixtures, "--dzi", "w.dzi", "-o", "w.jpg", "--grid", grid, "--tile-size", "40", "--no-progress"] + more)
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
            let restored = afterTheNextRun(in: directory, listing: snapshot)
            #expect(restored == before, "move \(move): the old outputs are not as they were:\n\(restored)\nbefore:\n\(before)")
        }
    }

    /// A filesystem without renameat2's exchange (NFS, FUSE: EINVAL, injected here by strace):
    /// a re-render with every kind of output (a JPEG, a manifest, a pyramid folder, an SZI, an
    /// IIIF folder) moves each old output aside and the new one in, and leaves nothing hidden
    /// (it failed at the pyramid's folder with the manifest already replaced, and an IIIF
    /// re-render spun forever). Killed at each of those renames, the next run in the folder
    /// puts every old output back.
    @Test func withoutTheExchangeOldOutputsAreMovedAsideAndBack() throws {
        guard access("/usr/bin/strace", X_OK) == 0 else {
            Issue.record("strace is needed (apt-get install strace)")
            return
        }
        let noExchange = "strace -f -o /dev/null -e inject=renameat2:error=EINVAL"
        let replaced = folder("no-exchange")
        defer { _ = system("rm -rf '\(replaced)'") }
        #expect(render(replaced, grid: "3x2", more: outputs) == 0)
        let first = tree(replaced)
        #expect(render(replaced, grid: "6x3", more: outputs, prefix: noExchange) == 0)
        let second = tree(replaced)
        #expect(second != first && hidden(second).isEmpty, "left: \(hidden(second))")
        for name in ["w.jpg", "w.dzi", "w.szi", "m.json", "ii/info.json"] {
            #expect(!first.contains(checksum(replaced + "/" + name)), "\(name) is not the new one")
        }
        for rename in 1...14 {
            let directory = folder("no-exchange-\(rename)")
            defer { _ = system("rm -rf '\(directory)'") }
            #expect(render(directory, grid: "3x2", more: outputs) == 0)
            let before = tree(directory)
            let killed = render(directory, grid: "6x3", more: outputs,
                                prefix: noExchange + " -e inject=rename:signal=SIGKILL:when=\(rename)")
            #expect(killed == 128 + SIGKILL, "rename \(rename): exit \(killed)")
            let restored = afterTheNextRun(in: directory, listing: tree)
            #expect(restored == before, "rename \(rename): the old outputs are not as they were:\n\(restored)\nbefore:\n\(before)")
        }
    }

    /// On a FUSE folder (bindfs): no exchange either, and a file removed while it is open
    /// stays in its folder as a hidden .fuse_hidden file until it is closed (NFS does the
    /// same with .nfs files). Rendering into it again and again: every render ends, and
    /// nothing is left beside the outputs. (An IIIF re-render spun forever removing the hidden
    /// file its own open lock left, and each render left an empty staging folder.)
    @Test func aFUSEFolderIsRenderedIntoAgainWithNothingLeft() throws {
        guard geteuid() == 0 else {
            if getenv("TESSERA_TESTS_NEED_ROOT") != nil { Issue.record("TESSERA_TESTS_NEED_ROOT is set (.ci/run) but the tests do not run as root") }
            return
        }
        guard access("/usr/bin/bindfs", X_OK) == 0 else {
            Issue.record("bindfs is needed (apt-get install bindfs)")
            return
        }
        let backing = folder("fuse-backing"), mounted = folder("fuse")
        try #require(system("bindfs '\(backing)' '\(mounted)'") == 0, "bindfs failed")
        defer { _ = system("fusermount -u '\(mounted)' 2>/dev/null || umount -l '\(mounted)'; rm -rf '\(backing)' '\(mounted)'") }
        var sums: [String] = []
        for grid in ["3x2", "6x3", "4x4"] {
            // Killed after two minutes: a render that spins fails the test instead of hanging it.
            let status = render(mounted, grid: grid, more: outputs, prefix: "timeout -s KILL 120")
            #expect(status == 0, "\(grid): exit \(status)")
            let listing = tree(backing)
            #expect(hidden(listing).isEmpty, "\(grid): left \(hidden(listing))")
            sums.append(checksum(backing + "/w.jpg"))
        }
        #expect(Set(sums).count == 3, "a render did not replace the JPEG")
        // A render that fails at its commit (an I/O error at its first rename) and one stopped by
        // SIGTERM while it draws (at its third mkdir): the outputs as they were, nothing left
        // (the IIIF staging folder was, its lock removed while open).
        let before = tree(backing)
        let failed = render(mounted, grid: "5x5", more: outputs, prefix: "timeout -s KILL 120 strace -f -o /dev/null -e inject=rename:error=EIO:when=1")
        #expect(failed == 1, "exit \(failed)")
        #expect(tree(backing) == before, "\(hidden(tree(backing)))")
        let stopped = render(mounted, grid: "5x5", more: outputs, prefix: "timeout -s KILL 120 strace -f -o /dev/null -e inject=mkdir:signal=SIGTERM:when=3")
        #expect(stopped == 143, "exit \(stopped)")
        #expect(tree(backing) == before, "\(hidden(tree(backing)))")
    }

    /// What `listing` says of `directory` after another render there (which finds what a
    /// killed one left, and says so).
    private func afterTheNextRun(in directory: String, listing: (String) -> String) -> String {
        let next = runTessera(["grid", fixtures + "/Portrait_1.jpg", "-o", directory + "/other.jpg", "--grid", "1x1", "--tile-size", "8",
                               "--no-progress"])
        #expect(next.status == 0 && next.output.contains("left by an earlier run that was killed"), "\(next.output)")
        unlink(directory + "/other.jpg")
        return listing(directory)
    }

    private let outputs = ["--szi", "w.szi", "--iiif", "ii", "--iiif-id", "https://example.org/ii", "--manifest", "m.json"]

    /// The files and folders under `directory`, with the files' checksums.
    private func tree(_ directory: String) -> String {
        let listing = directory + ".tree"
        defer { unlink(listing) }
        _ = system("cd '\(directory)' && (find . -type d; find . -type f -exec md5sum {} +) | sort > '\(listing)'")
        return String(decoding: readFile(listing), as: UTF8.self)
    }

    /// The lines of a `tree` that name a temporary of tessera's, a lock or a FUSE hidden file.
    private func hidden(_ tree: String) -> [Substring] {
        tree.split(separator: "\n").filter { $0.contains(/\.tessera-[0-9]/) || $0.contains("/.lock") || $0.contains(".fuse_hidden") }
    }

    private func checksum(_ path: String) -> String {
        let sum = path + ".md5"
        defer { unlink(sum) }
        _ = system("md5sum < '\(path)' | cut -c1-32 > '\(sum)'")
        return String(decoding: readFile(sum), as: UTF8.self).filter { $0 != "\n" }
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
