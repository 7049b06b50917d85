// StoredZipWriterTests.swift — the SZI's container against independent readers: ZIP's CRC-32 on
// published vectors and its byte-at-a-time reference; archives read back by Python's zipfile and
// Info-ZIP's unzip, past 65,535 entries (the ZIP64 end records); the end records' fields at the
// 4 GiB boundaries; nothing visible until commit.
import Glibc
import Testing
@testable import Tessera

@Suite struct StoredZipWriterTests {
    @Test func crc32MatchesPublishedVectorsAndTheReference() {
        func crc(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { ZipCRC32.checksum($0) } }
        // The check value of CRC-32/ISO-HDLC (the catalogue of parametrised CRC algorithms).
        #expect(crc(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(crc(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
        #expect(crc([]) == 0)
        var random = SplitMix64(seed: 7)
        let data = (0..<300).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        for start in 0..<9 {
            for length in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 250] where start + length <= data.count {
                var reference = ZipCRC32()
                for byte in data[start..<(start + length)] { reference.update(byte: byte) }
                let fast = data.withUnsafeBytes { ZipCRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<(start + length)])) }
                #expect(fast == reference.value, "start \(start), length \(length)")
            }
        }
    }

    /// 70,000 entries (past the classic end record's 65,535) written from two threads: zipfile
    /// and unzip read every one back with its bytes and CRC; nothing is at the name before
    /// commit.
    @Test func manyEntriesFromTwoThreadsReadBack() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = scratch.file("many.szi")
        let zip = try StoredZipWriter(destination: path, temporaryDirectory: scratch.path)
        let count = 70_000
        let failures = FirstError()
        let threads = try (0..<2).map { thread in
            try JoinableThread {
                for index in stride(from: thread, to: count, by: 2) {
                let bytes = Array("entry \(index) ".utf8) + [UInt8](repeating: UInt8(index % 251), count: index % 97)
                do throws(TesseraError) {
                    try bytes.withUnsafeBytes { raw in
                        Result { () throws(TesseraError) in try zip.add(name: "many/many_files/\(index % 7)/\(index).jpg", bytes: raw) }
                    }.get()
                } catch {
                    failures.record(error)
                }
                }
            }
        }
        for thread in threads { thread.join() }
        #expect(failures.error == nil)
        try zip.finish()
        #expect(access(path, F_OK) != 0, "the archive is visible before commit")
        try zip.commit()
        let script = """
        import zipfile, sys
        z = zipfile.ZipFile(sys.argv[1])
        assert z.testzip() is None
        infos = z.infolist()
        ok = 0
        for i in infos:
            index = int(i.filename.rsplit('/', 1)[1][:-4])
            expected = ('entry %d ' % index).encode() + bytes([index % 251]) * (index % 97)
            if z.read(i) == expected and i.compress_type == 0: ok += 1
        print(len(infos), ok)
        """
        writeBytes(Array(script.utf8), to: scratch.file("check.py"))
        #expect(runTool(["python3", scratch.file("check.py"), path], stdout: scratch.file("out.txt")) == 0)
        #expect(String(decoding: readBytes(scratch.file("out.txt")), as: UTF8.self) == "\(count) \(count)\n")
        // Info-ZIP's own test of every entry, when it is installed (it reads ZIP64 end records).
        if access("/usr/bin/unzip", X_OK) == 0 {
            #expect(runTool(["/usr/bin/unzip", "-tqq", path], stdout: scratch.file("unzip.txt")) == 0,
                    "\(String(decoding: readBytes(scratch.file("unzip.txt")), as: UTF8.self))")
        }
    }

    /// The end records at their limits: the classic record alone below them, the ZIP64 record
    /// and locator from 65,535 entries or a 4 GiB offset, with the classic fields at their maxima.
    @Test func endRecordsSwitchToZip64AtTheLimits() {
        func u16(_ b: [UInt8], _ at: Int) -> Int { Int(b[at]) | Int(b[at + 1]) << 8 }
        func u32(_ b: [UInt8], _ at: Int) -> Int64 { (0..<4).reduce(Int64(0)) { $0 | Int64(b[at + $1]) << (8 * Int64($1)) } }
        func u64(_ b: [UInt8], _ at: Int) -> Int64 { (0..<8).reduce(Int64(0)) { $0 | Int64(b[at + $1]) << (8 * Int64($1)) } }
        let small = StoredZipWriter.endRecords(entries: 65_534, directoryOffset: 0xFFFF_FFFE, directoryBytes: 100)
        #expect(small.count == 22 && u32(small, 0) == 0x0605_4B50 && u16(small, 10) == 65_534 && u32(small, 16) == 0xFFFF_FFFE)
        for (entries, offset) in [(65_535, Int64(1000)), (10, Int64(0xFFFF_FFFF)), (1_000_000, Int64(6) << 30)] {
            let end = StoredZipWriter.endRecords(entries: entries, directoryOffset: offset, directoryBytes: 4096)
            #expect(end.count == 56 + 20 + 22)
            #expect(u32(end, 0) == 0x0606_4B50 && u64(end, 4) == 44 && u64(end, 24) == Int64(entries) && u64(end, 32) == Int64(entries))
            #expect(u64(end, 40) == 4096 && u64(end, 48) == offset)
            #expect(u32(end, 56) == 0x0706_4B50 && u64(end, 64) == offset + 4096 && u32(end, 72) == 1)
            #expect(u32(end, 76) == 0x0605_4B50 && u16(end, 86) == min(entries, 0xFFFF) && u32(end, 92) == min(offset, 0xFFFF_FFFF))
        }
    }

    /// An entry handed over in pieces (the viewer's cells.js, too large to hold at once) reads
    /// back with its bytes and CRC between two plain entries; a producer that hands other bytes
    /// the second time is refused, and the archive with it.
    @Test func anEntryInPiecesReadsBack() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = scratch.file("pieces.szi")
        let zip = try StoredZipWriter(destination: path, temporaryDirectory: scratch.path)
        var random = SplitMix64(seed: 11)
        let pieces = (0..<5).map { index in (0..<(index * 70_001 + 3)).map { _ in UInt8(truncatingIfNeeded: random.next()) } }
        func add(_ name: String, _ bytes: [UInt8]) throws {
            try bytes.withUnsafeBytes { raw in try Result { () throws(TesseraError) in try zip.add(name: name, bytes: raw) }.get() }
        }
        try add("p/first.jpg", [1, 2, 3])
        var passes = 0
        try Result { () throws(TesseraError) in
            try zip.add(name: "p/p_files/viewer/cells.js") { write throws(TesseraError) in
                passes += 1
                for piece in pieces { try piece.withUnsafeBytes { raw in Result { () throws(TesseraError) in try write(raw) } }.get() }
            }
        }.get()
        try add("p/last.jpg", [4, 5])
        try zip.finish()
        try zip.commit()
        #expect(passes == 2)
        writeBytes(pieces.flatMap { $0 }, to: scratch.file("expected.bin"))
        let script = """
        import zipfile, sys
        z = zipfile.ZipFile(sys.argv[1])
        print(z.testzip(), z.namelist(), z.read("p/p_files/viewer/cells.js") == open(sys.argv[2], "rb").read())
        """
        writeBytes(Array(script.utf8), to: scratch.file("check.py"))
        #expect(runTool(["python3", scratch.file("check.py"), path, scratch.file("expected.bin")], stdout: scratch.file("out.txt")) == 0)
        #expect(String(decoding: readBytes(scratch.file("out.txt")), as: UTF8.self)
                == "None ['p/first.jpg', 'p/p_files/viewer/cells.js', 'p/last.jpg'] True\n")

        let changing = try StoredZipWriter(destination: scratch.file("changing.szi"), temporaryDirectory: scratch.path)
        var pass = 0
        #expect(throws: TesseraError.self) {
            try Result { () throws(TesseraError) in
                try changing.add(name: "c/c_files/viewer/cells.js") { write throws(TesseraError) in
                    pass += 1
                    try [UInt8](repeating: 7, count: 10 + pass).withUnsafeBytes { raw in Result { () throws(TesseraError) in try write(raw) } }.get()
                }
            }.get()
        }
        #expect(throws: TesseraError.self) { try changing.finish() }
        changing.discard()
        #expect(access(scratch.file("changing.szi"), F_OK) != 0)
    }

    /// A discarded archive leaves nothing, and an existing file at its name is untouched.
    @Test func discardLeavesWhatWasThere() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let path = scratch.file("kept.szi")
        writeBytes(Array("before".utf8), to: path)
        let zip = try StoredZipWriter(destination: path, temporaryDirectory: scratch.path)
        try [UInt8](repeating: 1, count: 1000).withUnsafeBytes { raw in
            try Result { () throws(TesseraError) in try zip.add(name: "kept/kept.dzi", bytes: raw) }.get()
        }
        zip.discard()
        #expect(readBytes(path) == Array("before".utf8))
        #expect(scratch.contents() == ["kept.szi"])
    }
}
