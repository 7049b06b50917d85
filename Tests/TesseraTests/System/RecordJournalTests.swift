// RecordJournalTests.swift — the sorted record store and its journal: cursor answers against a
// dictionary, torn and damaged frames and blocks, hostile lengths, a full disk, a killed writer,
// compaction against a fresh sort, and the memory a cursor holds.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

private func batch(_ records: [(String, String)]) -> RecordBatch {
    var batch = RecordBatch()
    for (key, value) in records { batch.add(key: bytes(key), value: bytes(value)) }
    return batch
}

/// Every record of `sources`, merged, as text.
private func contents(_ sources: [any RecordSource]) -> [(String, String)] {
    var all: [(String, String)] = []
    try? mergeRecords(sources) { key, value in
        all.append((String(decoding: key, as: UTF8.self), String(decoding: value, as: UTF8.self)))
    }
    return all
}

private func flip(_ path: String, at offset: Int) {
    var data = readBytes(path)
    data[offset] ^= 0x5A
    writeBytes(data, to: path)
}

@Suite struct RecordJournalTests {
    /// Random keys over a main file, its journal and a second store (a shard): the cursor's
    /// answer for every key asked (present or not) is the dictionary's, the later source winning.
    @Test func cursorAnswersAsADictionary() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var random = SplitMix64(seed: 7)
        var expected: [String: String] = [:]
        func randomKey() -> String { "k\(random.next() % 5000)" + String(repeating: "x", count: Int(random.next() % 5)) }
        let main = RecordStore(directory: scratch.path, stem: "main", schema: 9, sortChunkBytes: 4096)
        let shard = RecordStore(directory: scratch.path, stem: "main.shard-1-of-2", schema: 9)
        for round in 0..<6 {
            var records: [(String, String)] = []
            for _ in 0..<400 {
                let key = randomKey()
                records.append((key, "v\(round)-\(random.next() % 100)"))
            }
            try main.append(batch(records))
            for (key, value) in records { expected[key] = value }
            if round == 3 { try main.compact() }  // main file and journal both hold records
        }
        var shardRecords: [(String, String)] = []
        for _ in 0..<300 { shardRecords.append((randomKey(), "shard-\(random.next() % 100)")) }
        try shard.append(batch(shardRecords))
        for (key, value) in shardRecords { expected[key] = value }
        #expect(main.mainBytes > 0 && main.journalBytes > 0)

        let cursor = RecordCursor(sources: main.openSources() + shard.openSources())
        let asked = (0..<3000).map { _ in bytes(randomKey()) }.sorted { $0.lexicographicallyPrecedes($1) }
        var found = 0
        for key in asked {
            let answer = cursor.value(key).map { String(decoding: $0, as: UTF8.self) }
            #expect(answer == expected[String(decoding: key, as: UTF8.self)])
            if answer != nil { found += 1 }
        }
        #expect(found > 100)
        // Out of order: still right.
        #expect(cursor.value(bytes("k1")).map { String(decoding: $0, as: UTF8.self) } == expected["k1"])
    }

    /// Compaction (the journal sorted in 4 KiB chunks: many runs) gives what a fresh sort of
    /// the same records gives, and removes the journal.
    @Test func compactionEqualsAFreshSort() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var random = SplitMix64(seed: 11)
        var expected: [String: String] = [:]
        let store = RecordStore(directory: scratch.path, stem: "s", schema: 1, sortChunkBytes: 4096)
        for round in 0..<10 {
            var records: [(String, String)] = []
            for _ in 0..<500 { records.append(("key-\(random.next() % 3000)", "value-\(round)-\(random.next())")) }
            try store.append(batch(records))
            for (key, value) in records { expected[key] = value }
            if round == 4 { try store.compact() }
        }
        try store.compact()
        #expect(RecordStore.fileBytes(store.journalPath) == nil)
        let merged = contents(store.openSources())
        let sorted = expected.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
        #expect(merged.map(\.0) == sorted.map(\.key))
        #expect(merged.map(\.1) == sorted.map(\.value))
    }

    /// A journal cut at every byte of its last frame keeps every earlier frame and drops the
    /// torn one; the next append cuts the torn bytes off and is read back.
    /// A symbolic link planted at the journal's name is refused, never written through (a
    /// review found the appends overwriting the file it pointed to).
    @Test func aJournalThatIsASymlinkIsRefusedAndItsTargetKept() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        writeBytes(Array("precious".utf8), to: scratch.file("victim"))
        #expect(symlink(scratch.file("victim"), scratch.file("l.journal")) == 0)
        let store = RecordStore(directory: scratch.path, stem: "l", schema: 1)
        #expect(throws: TesseraError.self) { try store.append(batch([("a", "1")])) }
        #expect(readBytes(scratch.file("victim")) == Array("precious".utf8))
    }

    @Test func aTornLastFrameIsDroppedAndTheNextAppendWorks() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let store = RecordStore(directory: scratch.path, stem: "t", schema: 1)
        try store.append(batch([("a", "1"), ("b", "2")]))
        try store.append(batch([("c", "3")]))
        let beforeLast = Int(store.journalBytes)
        try store.append(batch([("d", "4"), ("a", "5")]))
        let whole = readBytes(store.journalPath)
        #expect(whole.count > beforeLast + 16)
        for cut in beforeLast..<whole.count {
            writeBytes(Array(whole[0..<cut]), to: store.journalPath)
            let reopened = RecordStore(directory: scratch.path, stem: "t", schema: 1)
            let seen = contents(reopened.openSources())
            #expect(seen.map(\.0) == ["a", "b", "c"] && seen.map(\.1) == ["1", "2", "3"], "cut at \(cut)")
            try reopened.append(batch([("e", "\(cut)")]))
            let after = contents(reopened.openSources())
            #expect(after.map(\.0) == ["a", "b", "c", "e"] && after.last?.1 == "\(cut)", "cut at \(cut)")
            #expect(reopened.journalBytes == Int64(beforeLast + 16 + 8 + 1 + "\(cut)".utf8.count))
        }
    }

    /// A flipped byte in a frame or block loses that frame's or block's records and no others;
    /// random flips anywhere never crash and never give a value that was not stored.
    @Test func damagedFramesAndBlocksAreJustMissing() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let store = RecordStore(directory: scratch.path, stem: "d", schema: 1)
        try store.append(batch([("a", "1")]))
        let second = Int(store.journalBytes)
        try store.append(batch([("b", "2")]))
        try store.append(batch([("c", "3")]))
        let journal = readBytes(store.journalPath)
        flip(store.journalPath, at: second + 20)  // inside the second frame's record
        #expect(contents(store.openSources()).map(\.0) == ["a", "c"])
        writeBytes(journal, to: store.journalPath)
        flip(store.journalPath, at: second + 5)  // the second frame's length
        #expect(contents(store.openSources()).map(\.0) == ["a", "c"])

        // A main file of several blocks: a flip in one loses about a block's records.
        let big = RecordStore(directory: scratch.path, stem: "m", schema: 1)
        var expected: [String: String] = [:]
        var records: [(String, String)] = []
        for number in 0..<4000 {
            records.append(("key-\(100_000 + number)", "value-\(number)-" + String(repeating: "v", count: 40)))
            expected[records.last!.0] = records.last!.1
        }
        try big.append(batch(records))
        try big.compact()
        let main = readBytes(big.mainPath)
        #expect(main.count > 4 * RecordFormat.blockTargetBytes)
        flip(big.mainPath, at: main.count / 2)
        let survivors = contents(big.openSources())
        #expect(survivors.count < 4000 && survivors.count > 4000 - 1200)
        #expect(survivors.allSatisfy { expected[$0.0] == $0.1 })
        var random = SplitMix64(seed: 3)
        for _ in 0..<300 {
            var damaged = main
            for _ in 0..<3 { damaged[Int(random.next() % UInt64(main.count))] = UInt8(truncatingIfNeeded: random.next()) }
            writeBytes(damaged, to: big.mainPath)
            #expect(contents(big.openSources()).allSatisfy { expected[$0.0] == $0.1 })
        }
        writeBytes(main, to: big.mainPath)
        for _ in 0..<300 {
            var damaged = journal
            damaged[Int(random.next() % UInt64(journal.count))] = UInt8(truncatingIfNeeded: random.next())
            writeBytes(damaged, to: store.journalPath)
            #expect(contents(store.openSources()).allSatisfy { ["a": "1", "b": "2", "c": "3"][$0.0] == $0.1 })
        }
    }

    /// Lengths and counts of 2^32-1 in a frame or block, with or without a matching CRC, are
    /// refused before anything is allocated for them; a wrong schema is an empty store.
    /// A journal with another name (a hard link: a cache copied with `cp -al`, or planted) is not
    /// appended to, so the other name's file is kept.
    @Test func aJournalWithAnotherNameIsRefusedAndTheOtherKept() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        writeBytes(Array("precious".utf8), to: scratch.file("victim"))
        #expect(link(scratch.file("victim"), scratch.file("l.journal")) == 0)
        let store = RecordStore(directory: scratch.path, stem: "l", schema: 1)
        #expect(throws: TesseraError.self) { try store.append(batch([("a", "1")])) }
        #expect(readBytes(scratch.file("victim")) == Array("precious".utf8))
    }

    /// Files that are mostly holes: a main file is not read (and compaction replaces it), a
    /// journal is cut off at the next append; neither is waded through.
    @Test func sparseFilesAreDamagedWhole() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let store = RecordStore(directory: scratch.path, stem: "s", schema: 1)
        try store.append(batch([("a", "1")]))
        try store.compact()
        let main = readBytes(store.mainPath)
        // The good main file, then a hole of 1 GiB, then the same blocks again.
        func sparse(_ path: String, head: [UInt8], tail: [UInt8]) {
            writeBytes(head, to: path)
            let fd = open(path, O_WRONLY)
            _ = tail.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(1 << 30)) }
            close(fd)
        }
        sparse(store.mainPath, head: main, tail: Array(main[RecordFormat.fileHeaderBytes...]))
        #expect(contents(store.openSources()).isEmpty)
        try store.append(batch([("b", "2")]))
        try store.compact()
        #expect(contents(store.openSources()).map(\.0) == ["b"])
        #expect(RecordStore.fileBytes(store.mainPath)! < 1 << 20)
        // A sparse journal: cut off at the next append, which then stands alone.
        let journal = RecordFormat.fileHeader(magic: RecordFormat.journalMagic, schema: 1)
        sparse(store.journalPath, head: journal, tail: [1, 2, 3])
        try store.append(batch([("c", "3")]))
        #expect(RecordStore.fileBytes(store.journalPath)! < 1 << 20)
        #expect(contents(store.openSources()).map(\.0) == ["b", "c"])
    }

    /// A main file sprayed with chunk headers that each claim 2 MiB (every 16 bytes, each with a
    /// plausible record count) costs a bounded read, not 2 MiB per 16 bytes; the store knows it is
    /// damaged, and compaction rewrites it without the damage.
    @Test func aSprayedFileCostsABoundedRead() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let store = RecordStore(directory: scratch.path, stem: "y", schema: 1)
        var main = RecordFormat.fileHeader(magic: RecordFormat.mainMagic, schema: 1)
        for _ in 0..<(3 << 20) / 16 {
            main.appendLittleEndian(RecordFormat.blockMagic)
            main.appendLittleEndian(UInt32(RecordFormat.maxChunkBytes))
            main.appendLittleEndian(UInt32(1))
            main.appendLittleEndian(UInt32(0))
        }
        writeBytes(main, to: store.mainPath)
        let source = try #require(BlockFileSource.open(main: store.mainPath, schema: 1))
        #expect(source.current == nil)
        #expect(source.failedBytes > 0 && source.failedBytes <= (16 << 20) + Int64(RecordFormat.maxChunkBytes), "\(source.failedBytes)")
        #expect(contents(store.openSources()).isEmpty && store.mainDamaged)
        try store.append(batch([("a", "1")]))
        try store.compact()
        #expect(RecordStore.fileBytes(store.mainPath)! < 4096)
        let again = RecordStore(directory: scratch.path, stem: "y", schema: 1)
        #expect(contents(again.openSources()).map(\.0) == ["a"] && !again.mainDamaged)
    }

    /// A journal that could not be folded into the main file (its name taken by a folder) is
    /// never read once past the held limit, so appends to it stop there instead of growing it.
    @Test func aJournalThatCannotBeCompactedStopsGrowing() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let store = RecordStore(directory: scratch.path, stem: "g", schema: 1, journalHeldLimit: 1024)
        mkdir(store.mainPath, 0o755)
        for index in 0..<20 { try store.append(batch([("k\(index)", String(repeating: "v", count: 100))])) }
        #expect(store.journalBytes > 1024)
        _ = store.openSources()  // tries to compact, and cannot
        let size = store.journalBytes
        #expect(throws: TesseraError.self) { try store.append(batch([("more", "1")])) }
        #expect(store.journalBytes == size)
    }

    /// A batch larger than a frame may be is cut into frames, each record whole; all are read back.
    @Test func aLargeBatchIsCutIntoFrames() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let store = RecordStore(directory: scratch.path, stem: "f", schema: 1, journalHeldLimit: 64 << 20)
        var big = RecordBatch()
        let value = [UInt8](repeating: 7, count: 300_000)
        for index in 0..<20 { big.add(key: bytes("k\(100 + index)"), value: value) }
        let frames = big.frames(limit: RecordFormat.maxChunkBytes)
        #expect(frames.map(\.count) == [6, 6, 6, 2])
        #expect(frames.allSatisfy { $0.range.count <= RecordFormat.maxChunkBytes })
        #expect(frames.reduce(0) { $0 + $1.count } == 20 && frames.last!.range.upperBound == big.bytes.count)
        try store.append(big)
        #expect(contents(store.openSources()).map(\.0) == (0..<20).map { "k\(100 + $0)" })
    }

    @Test func hostileLengthsAreRefused() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let store = RecordStore(directory: scratch.path, stem: "h", schema: 1)
        try store.append(batch([("a", "1")]))
        let good = readBytes(store.journalPath)
        func frame(length: UInt32, count: UInt32, payload: [UInt8]) -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.appendLittleEndian(RecordFormat.frameMagic)
            bytes.appendLittleEndian(length)
            bytes.appendLittleEndian(count)
            var crc = CRC32C()
            bytes.withUnsafeBytes { crc.update(UnsafeRawBufferPointer(rebasing: $0[4..<12])) }
            payload.withUnsafeBytes { crc.update($0) }
            bytes.appendLittleEndian(crc.value)
            return bytes + payload
        }
        var record: [UInt8] = []
        record.appendLittleEndian(UInt32.max)  // a key of 4 GiB
        record.appendLittleEndian(UInt32(1))
        let hostile = [frame(length: UInt32.max, count: UInt32.max, payload: []),
                       frame(length: 8, count: UInt32.max, payload: record),
                       frame(length: 8, count: 1, payload: record),
                       frame(length: 0, count: UInt32.max, payload: [])]
        for extra in hostile {
            writeBytes(good + extra, to: store.journalPath)
            let sources = store.openSources()
            #expect(contents(sources).map(\.0) == ["a"])
            #expect(sources.reduce(0) { $0 + $1.heldBytes } < 1 << 16)
        }
        // A main file whose one block claims 4 GiB.
        var main = RecordFormat.fileHeader(magic: RecordFormat.mainMagic, schema: 1)
        main.appendLittleEndian(RecordFormat.blockMagic)
        main.appendLittleEndian(UInt32.max)
        main.appendLittleEndian(UInt32.max)
        main.appendLittleEndian(UInt32(0))
        writeBytes(main, to: store.mainPath)
        let sources = store.openSources()
        #expect(contents(sources).map(\.0) == ["a"])
        #expect(sources.reduce(0) { $0 + $1.heldBytes } < 1 << 16)
        // Another schema: the files are there, but not of this store.
        #expect(contents(RecordStore(directory: scratch.path, stem: "h", schema: 2).openSources()).isEmpty)
    }

    /// A full disk (ENOSPC at the write, or at the fdatasync) throws, keeps every earlier batch
    /// and leaves the journal as it was; the next append works.
    @Test func aFullDiskKeepsEarlierBatches() throws {
        let scratch = ScratchDirectory()
        defer {
            SyscallFaults.reset(pathPrefix: scratch.path)
            scratch.remove()
        }
        let store = RecordStore(directory: scratch.path, stem: "f", schema: 1)
        try store.append(batch([("a", "1")]))
        try store.append(batch([("b", "2")]))
        let before = readBytes(store.journalPath)
        for operation in ["pwrite", "fdatasync"] {
            SyscallFaults.inject(operation, errno: ENOSPC, pathPrefix: scratch.path)
            #expect(throws: TesseraError.system(operation: operation, errno: ENOSPC, path: store.journalPath)) {
                try store.append(batch([("c", "3")]))
            }
            #expect(SyscallFaults.fired(operation, pathPrefix: scratch.path) == 1)
            #expect(readBytes(store.journalPath) == before)
            #expect(contents(store.openSources()).map(\.0) == ["a", "b"])
        }
        try store.append(batch([("c", "3")]))
        #expect(contents(store.openSources()).map(\.0) == ["a", "b", "c"])
    }

    /// On a real small filesystem (root only: a tmpfs), appending until the disk is full throws
    /// ENOSPC at last, and every batch appended before is read back.
    @Test func aRealFullDiskKeepsEarlierBatches() throws {
        guard mayMount() else { return }
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        guard let mount = mountTmpfs(size: "256k", in: scratch, name: "small") else { return }
        defer { _ = system("umount '\(mount)'") }
        let store = RecordStore(directory: mount, stem: "full", schema: 1)
        var appended = 0
        var failure: TesseraError?
        while failure == nil && appended < 10_000 {
            do throws(TesseraError) {
                try store.append(batch([("key-\(100_000 + appended)", String(repeating: "v", count: 2000))]))
                appended += 1
            } catch { failure = error }
        }
        #expect(failure == .system(operation: "pwrite", errno: ENOSPC, path: store.journalPath))
        #expect(appended > 10 && contents(store.openSources()).count == appended)
    }

    /// A writer killed (SIGKILL) part way through writing the journal: whatever prefix landed,
    /// every frame wholly in it is read, and no torn one.
    @Test func aKilledWriterLeavesEveryCompleteFrame() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let source = RecordStore(directory: scratch.path, stem: "whole", schema: 1)
        var ends: [Int] = []
        for number in 0..<200 {
            try source.append(batch((0..<20).map { ("key-\(number)-\($0)", String(repeating: "v", count: 100)) }))
            ends.append(Int(source.journalBytes))
        }
        var random = SplitMix64(seed: 5)
        for attempt in 0..<4 {
            let target = RecordStore(directory: scratch.path, stem: "copy\(attempt)", schema: 1)
            // dd copies 512 bytes a write; it is killed after a random short while.
            var pid: pid_t = 0
            let command = "exec dd if='\(source.journalPath)' of='\(target.journalPath)' bs=512 2>/dev/null"
            let arguments: [String] = ["/bin/sh", "-c", command]
            var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            #expect(posix_spawn(&pid, "/bin/sh", nil, nil, &argv, environ) == 0)
            usleep(UInt32(random.next() % 3000))
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            let landed = Int(RecordStore.fileBytes(target.journalPath) ?? 0)
            let complete = ends.filter { $0 <= landed }.count
            #expect(contents(target.openSources()).count == complete * 20, "\(landed) bytes landed")
            try target.append(batch([("zz", "after")]))
            #expect(contents(target.openSources()).count == complete * 20 + 1)
        }
    }

    /// A million records looked up by one cursor pass: what the cursor holds stays a few blocks,
    /// not the store.
    @Test func aCursorHoldsBlocksNotTheStore() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let store = RecordStore(directory: scratch.path, stem: "million", schema: 1)
        func key(_ number: Int) -> [UInt8] { bytes("photo-\(1_000_000 + number)") }
        // The main file written directly, in order (the store's own writer).
        let output = try AtomicOutputFile(destination: store.mainPath)
        try RecordFormat.fileHeader(magic: RecordFormat.mainMagic, schema: 1).withUnsafeBytes { try output.append($0) }
        let writer = BlockWriter { bytes throws(TesseraError) in try output.append(bytes) }
        for number in 0..<1_000_000 {
            var value: [UInt8] = []
            value.appendLittleEndian(UInt64(number))
            try key(number).withUnsafeBytes { key in try value.withUnsafeBytes { try writer.add(key: key, value: $0) } }
        }
        try writer.finish()
        try output.commit()
        try store.append(batch([("photo-1000007", "journal")]))
        let cursor = RecordCursor(sources: store.openSources())
        var most = 0, matched = 0
        for number in stride(from: 0, to: 1_000_000, by: 1) {
            let found = key(number).withUnsafeBytes { key in
                cursor.visit(key) { value in
                    number == 7 ? value.count == 7 : value.count == 8 && value.loadLittleEndian(0, as: UInt64.self) == UInt64(number)
                }
            }
            if found { matched += 1 }
            if number % 1000 == 0 { most = max(most, cursor.heldBytes) }
        }
        #expect(matched == 1_000_000)
        #expect(most < 1 << 20, "\(most) bytes held")
        #expect(store.mainBytes > 16 << 20)
    }

    /// A few keys far apart in a store of 400,000 records (some 200 blocks): each is found by
    /// searching the blocks ahead, reading a few dozen of them; with bytes damaged anywhere, a
    /// lookup finds exactly the records a full read of the file keeps, with their values.
    @Test func aFarLookupSearchesTheBlocksAhead() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let store = RecordStore(directory: scratch.path, stem: "far", schema: 1)
        let count = 400_000
        func key(_ number: Int) -> String { "photo-\(1_000_000 + number)" }
        let output = try AtomicOutputFile(destination: store.mainPath)
        try RecordFormat.fileHeader(magic: RecordFormat.mainMagic, schema: 1).withUnsafeBytes { try output.append($0) }
        let writer = BlockWriter { bytes throws(TesseraError) in try output.append(bytes) }
        for number in 0..<count {
            try bytes(key(number)).withUnsafeBytes { key in try bytes("value-\(number)").withUnsafeBytes { try writer.add(key: key, value: $0) } }
        }
        try writer.finish()
        try output.commit()
        let blocks = Int(store.mainBytes) / RecordFormat.blockTargetBytes
        #expect(blocks > 150)
        // Present keys far apart (the first, the middle, the last) and absent keys beside them.
        let wanted = [3, count / 2, count - 1].map(key)
        let asked = (wanted + wanted.map { $0 + "x" }).sorted { bytes($0).lexicographicallyPrecedes(bytes($1)) }
        func expectAnswers(_ sources: [any RecordSource], _ expected: (String) -> String?) {
            let cursor = RecordCursor(sources: sources)
            for name in asked {
                let answer = cursor.value(bytes(name)).map { String(decoding: $0, as: UTF8.self) }
                #expect(answer == expected(name), "\(name)")
            }
        }
        let sources = store.openSources()
        expectAnswers(sources) { name in
            name.hasSuffix("x") ? nil : "value-\(Int(name.dropFirst(6))! - 1_000_000)"
        }
        let read = sources.compactMap { $0 as? BlockFileSource }.reduce(0) { $0 + $1.blocksRead }
        #expect(read > 0 && read < blocks / 6, "\(read) of \(blocks) blocks read")
        // Landing inside a block while searching is not damage (which would have every scan
        // rewrite the index).
        #expect(!store.mainDamaged)

        let main = readBytes(store.mainPath)
        var random = SplitMix64(seed: 11)
        for _ in 0..<5 {
            var damaged = main
            for _ in 0..<6 { damaged[24 + Int(random.next() % UInt64(main.count - 24))] ^= UInt8(1 + random.next() % 255) }
            // Most damage where the searches land: around the keys asked.
            for place in [main.count / 2, main.count - 100] { damaged[place + Int(random.next() % 64)] ^= 0xA5 }
            writeBytes(damaged, to: store.mainPath)
            var kept: [String: String] = [:]
            try? mergeRecords(store.openSources()) { key, value in
                let name = String(decoding: key, as: UTF8.self)
                if asked.contains(name) { kept[name] = String(decoding: value, as: UTF8.self) }
            }
            expectAnswers(store.openSources()) { kept[$0] }
        }
    }
}
