// DiskTests.swift — what a render leaves on disk: stale temporaries of dead processes, the
// free-space pre-flight, a disk that fills mid-render (injected and real), interrupted system calls.
import Glibc
import Testing
@testable import Tessera

extension RenderTests {
    @Test func staleTemporariesOfDeadProcessesAreRemoved() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let pid = deadProcessID()  // a pid that just ended
        let deadFiles = [".out.jpg.tessera-\(pid)-123.tmp", ".tessera-\(pid)-Ab12Cd.tmp"]
        let kept = [".out.jpg.tessera-1-77.tmp",          // pid 1 is alive
                    "out.tessera-\(pid)-1",                // not hidden: not ours
                    ".wall.tessera-\(pid)-final.jpg",      // a hidden output someone named so
                    ".x.dzi.tessera-\(pid)-abc",           // a staging folder's name, but a file
                    "holiday.jpg"]
        for name in deadFiles + kept { writeBytes([1, 2, 3], to: scratch.file(name)) }
        // Folders of notes whose names look like temporaries' (one a staging folder's, without its
        // lock file), a link with a file's name, a pid no process here can have.
        for folder in [".notes.tessera-\(pid)-drafts", ".notes.dzi.tessera-\(pid)-drafts", ".photos.iiif.tessera-\(pid)-old"] {
            mkdir(scratch.file(folder), 0o755)
            writeBytes(Array("draft".utf8), to: scratch.file(folder + "/chapter1.txt"))
        }
        #expect(symlink("holiday.jpg", scratch.file(".y.jpg.tessera-\(pid)-9.tmp")) == 0)
        writeBytes([1], to: scratch.file(".big.jpg.tessera-999999999-1.tmp"))
        // An empty staging folder (a removal killed just before its last rmdir, its lock gone)
        // of a dead process goes; a live one's stays.
        mkdir(scratch.file(".w.dzi.tessera-\(pid)-k3x9"), 0o755)
        mkdir(scratch.file(".w.iiif.tessera-1-k3x9"), 0o755)
        let dead = deadFiles + [".w.dzi.tessera-\(pid)-k3x9"]
        let keptToo = [".notes.tessera-\(pid)-drafts", ".notes.dzi.tessera-\(pid)-drafts", ".photos.iiif.tessera-\(pid)-old",
                       ".y.jpg.tessera-\(pid)-9.tmp", ".big.jpg.tessera-999999999-1.tmp", ".w.iiif.tessera-1-k3x9"]
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        var removed: [String] = []
        try renderGrid([baseJPEG], to: scratch.file("out.jpg"), columns: 1, rows: 1, cellWidth: 16, cellHeight: 16,
                       settings: settings) { event in
            if case .staleTemporaryRemoved(let path) = event { removed.append(path) }
        }
        #expect(removed == dead.map { scratch.file($0) }.sorted())
        #expect(scratch.contents() == (kept + keptToo + ["out.jpg"]).sorted())
        #expect(readBytes(scratch.file(".notes.tessera-\(pid)-drafts/chapter1.txt")) == Array("draft".utf8))
    }

    /// removeTree removes a link, never what it points to, and names that are not UTF-8.
    @Test func removeTreeNeverFollowsALinkAndTakesEveryName() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let victim = scratch.file("victim"), tree = scratch.file("tree")
        mkdir(victim, 0o755)
        writeBytes(Array("keep".utf8), to: victim + "/important.txt")
        mkdir(tree, 0o755)
        mkdir(tree + "/a", 0o755)
        mkdir(tree + "/a/b", 0o755)
        writeBytes([1], to: tree + "/a/b/tile.jpg")
        #expect(symlink(victim, tree + "/a/linked") == 0)
        #expect(symlink(victim + "/important.txt", tree + "/file-link") == 0)
        // A name that is not UTF-8 (0xFF), made through its bytes.
        let odd: [CChar] = Array((tree + "/a/bad").utf8CString.dropLast()) + [CChar(bitPattern: 0xFF), 0]
        let fd = odd.withUnsafeBufferPointer { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644) }
        #expect(fd >= 0)
        close(fd)
        #expect(removeTree(tree))
        #expect(access(tree, F_OK) != 0)
        #expect(readBytes(victim + "/important.txt") == Array("keep".utf8))
    }

    /// A folder of more entries than a batch (and a folder of them inside) is emptied a batch
    /// at a time, every entry gone; a staging folder's lock file goes last, so a removal cut
    /// short leaves the folder still a stale temporary: here a name the removal cannot take
    /// (a folder past the depth limit) keeps the folder and its lock.
    @Test func removeTreeEmptiesLargeFoldersInBatchesAndTheLockLast() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let tree = scratch.file("tree")
        mkdir(tree, 0o755)
        mkdir(tree + "/level", 0o755)
        for i in 0..<(removeTreeBatch + 1_000) {
            let fd = open(tree + "/level/\(i)_0.jpg", O_WRONLY | O_CREAT | O_EXCL, 0o644)
            if fd >= 0 { close(fd) }
        }
        for i in 0..<(removeTreeBatch / 2) {
            let fd = open(tree + "/\(i).jpg", O_WRONLY | O_CREAT | O_EXCL, 0o644)
            if fd >= 0 { close(fd) }
        }
        writeBytes([1], to: tree + "/" + StaleTemporaries.lockName)
        #expect(removeTree(tree))
        #expect(access(tree, F_OK) != 0)
        // Too deep to remove whole: what is left is the deep folder, and the lock beside it.
        let staged = scratch.file("staged")
        var deep = staged
        mkdir(staged, 0o755)
        for level in 0...removeTreeDepth {
            deep += "/\(level)"
            mkdir(deep, 0o755)
        }
        writeBytes([1], to: staged + "/" + StaleTemporaries.lockName)
        writeBytes([1], to: staged + "/tile.jpg")
        #expect(!removeTree(staged))
        #expect(try listDirectory(staged).sorted() == [StaleTemporaries.lockName, "0"])
        _ = system("rm -rf '\(staged)'")
    }

    /// A commit's journal is read as hostile: only what tessera writes is undone, and a step
    /// only where what stands at its destination is what the journal says moved there. (The
    /// kill itself, through the binary: CommitCrashTests.)
    @Test func aCommitJournalUndoesOnlyItsOwnMoves() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let old = scratch.file("out.jpg"), hidden = scratch.file(".out.jpg.tessera-999999-x1.tmp")
        let other = scratch.file("notes.txt"), otherNew = scratch.file("notes-new.txt")
        writeBytes(Array("old".utf8), to: old)
        writeBytes(Array("new".utf8), to: hidden)
        writeBytes(Array("mine".utf8), to: other)
        writeBytes(Array("replacement".utf8), to: otherNew)
        // Written as a commit writes it, then the move made and the process "killed".
        let journal = try CommitJournal(directory: scratch.path, records: [])
        try journal.append(try #require(CommitJournal.record(hidden, to: old, exchange: true, isNew: true)))
        try exchangePaths(hidden, old)
        let written = try readWholeFile(journal.path)
        let parsed = CommitJournal.parse(written)
        #expect(parsed?.steps.count == 1 && parsed?.done == false && parsed?.steps.first?.to == old)
        // Hostile or damaged: a step that touches no temporary (it would swap a user's files),
        // bytes after "done", another magic.
        var hostile = CommitJournal.magic
        hostile += Array(written[CommitJournal.magic.count...]).prefix(2 + 16)
        func path(_ text: String) -> [UInt8] { withUnsafeBytes(of: UInt64(text.utf8.count).littleEndian, Array.init) + Array(text.utf8) }
        hostile += path(otherNew) + path(other)
        #expect(CommitJournal.parse(hostile) == nil)
        #expect(CommitJournal.parse(written + [UInt8(ascii: "D"), 0]) == nil)
        #expect(CommitJournal.parse(Array("TSCOMMIT2\n".utf8) + written.dropFirst(CommitJournal.magic.count)) == nil)
        #expect(CommitJournal.parse(written + [UInt8(ascii: "D")])?.done == true)
        // A step cut short (the kill came while it was written) is not one.
        #expect(CommitJournal.parse(written + [UInt8(ascii: "E"), 1, 7])?.steps.count == 1)
        // A link to a journal: not followed (another user could swap the name for one between
        // a check and the read).
        let copy = scratch.file(".commit.tessera-999999-journal.tmp")
        journal.remove()
        writeBytes(written, to: scratch.file("elsewhere"))
        chmod(scratch.file("elsewhere"), 0o600)
        symlink(scratch.file("elsewhere"), copy)
        CommitJournal.recover(copy)
        #expect(readBytes(old) == Array("new".utf8) && readBytes(hidden) == Array("old".utf8))
        unlink(copy)
        // Writable by others: not read at all.
        writeBytes(written, to: copy)
        chmod(copy, 0o666)
        CommitJournal.recover(copy)
        #expect(readBytes(old) == Array("new".utf8) && readBytes(hidden) == Array("old".utf8))
        // Recovered: the old file back, the new one gone, the journal gone.
        writeBytes(written, to: copy)
        chmod(copy, 0o600)
        CommitJournal.recover(copy)
        #expect(readBytes(old) == Array("old".utf8))
        #expect(access(hidden, F_OK) != 0 && access(copy, F_OK) != 0)
        #expect(readBytes(other) == Array("mine".utf8))
        // Replayed once more (the file at the destination is no longer the one that moved):
        // nothing is touched.
        writeBytes(written, to: copy)
        chmod(copy, 0o600)
        CommitJournal.recover(copy)
        #expect(readBytes(old) == Array("old".utf8))
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

extension RenderTests {
    /// The outputs of a render appear together or not at all: when the last one (the JPEG)
    /// cannot be moved into place, the manifest, the pyramid folder, its page and the TIFF moved
    /// in before it are put back as they were, and nothing of the failed render is left; with
    /// the fault gone the same render replaces all of them.
    @Test func aFailureAtTheLastOutputPutsBackTheOnesMovedInBeforeIt() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let folder = scratch.file("out"), jpeg = scratch.file("out") + "/out.jpg"
        try makeDirectory(folder)
        try makeDirectory(folder + "/zoom")
        // Each render's manifest carries a word of its own, so a manifest put back is told
        // from one written again.
        func manifest(_ word: String, _ request: RenderRequest) -> ManifestOutput {
            RenderManifest.withOutputs(layout: request.layout, photos: request.photos, to: folder + "/out.json") { _ in
                ManifestNotes(skipped: [(path: word, reason: "the render that wrote this manifest")])
            }
        }
        var first = ShardCase()
        first.tiff = PyramidTIFFSettings()
        let firstRequest = try shardRequest(first, folder: folder)
        _ = try StripeRenderer(request: firstRequest).render(manifest: manifest("first", firstRequest))
        let before = treeContents(folder)
        #expect(before.keys.contains("zoom/out.dzi") && before.keys.contains("out.tif") && before.keys.contains("out.jpg"))
        #expect(String(decoding: before["out.json"] ?? [], as: UTF8.self).contains("\"first\""))
        var second = first
        second.settings.quality = 60
        second.zoom?.quality = 60
        second.tiff?.quality = 60
        // (Only a filesystem without the exchange, EINVAL, has the JPEG renamed over the old one.)
        SyscallFaults.inject("renameat2", errno: EPERM, pathPrefix: jpeg)
        defer { SyscallFaults.reset(pathPrefix: jpeg) }
        let secondRequest = try shardRequest(second, folder: folder)
        #expect(throws: TesseraError.system(operation: "renameat2", errno: EPERM, path: jpeg)) {
            _ = try StripeRenderer(request: secondRequest).render(manifest: manifest("second", secondRequest))
        }
        #expect(SyscallFaults.fired("renameat2", pathPrefix: jpeg) == 1)
        let after = treeContents(folder)
        #expect(Set(after.keys) == Set(before.keys), "\(Set(after.keys).symmetricDifference(Set(before.keys)).sorted())")
        for (name, bytes) in before where after[name] != bytes { Issue.record("\(name) is not as it was") }
        #expect(!listNames(folder).contains { $0.hasPrefix(".") } && !listNames(folder + "/zoom").contains { $0.hasPrefix(".") })
        SyscallFaults.reset(pathPrefix: jpeg)
        _ = try StripeRenderer(request: secondRequest).render(manifest: manifest("second", secondRequest))
        let replaced = treeContents(folder)
        #expect(String(decoding: replaced["out.json"] ?? [], as: UTF8.self).contains("\"second\""))
        #expect(Set(replaced.keys) == Set(before.keys), "\(Set(replaced.keys).symmetricDifference(Set(before.keys)).sorted())")
        let tiles = before.keys.filter { $0.hasPrefix("zoom/out_files/") && $0.hasSuffix(".jpg") }
        #expect(!tiles.isEmpty)
        for name in ["out.jpg", "out.tif", "out.json"] + tiles {
            let changed = replaced[name] != before[name]
            #expect(changed, "\(name) was not replaced")
        }
    }
}
