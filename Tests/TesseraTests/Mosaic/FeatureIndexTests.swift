// FeatureIndexTests.swift — the feature index and the header index on the record store: round
// trips, what makes an entry unusable, shards, the old text format's import, an interrupted
// analysis, and a damaged or foreign header cache.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

private func handMadePhoto(_ path: String, bytes: Int64 = 1000, mtime: Int64 = 5, colorTag: UInt64? = nil) -> Photo {
    var header = PhotoHeader(width: 64, height: 48, colorModel: .rgb, isProgressive: false, exifOrientation: 0, adobeInverted: false)
    header.colorTag = colorTag
    return Photo(path: path, header: header, fileBytes: bytes, modifiedNanoseconds: mtime)
}

private func features(_ seed: Int) -> [Float] { (0..<27).map { Float(($0 * 37 + seed * 11) % 100) / 100 - 0.3 } }

/// What `lookup` finds for `photos`: the features by row, and the rows it did not find.
private func look(_ index: FeatureIndex, _ photos: [Photo]) throws -> (found: [Int: [Float]], missing: [Int32]) {
    var found: [Int: [Float]] = [:]
    let missing = try index.lookup(photos) { row, values throws(TesseraError) in found[row] = Array(values) }
    return (found, missing)
}

@Suite struct FeatureIndexTests {
    /// With neither $HOME nor $XDG_CACHE_HOME the cache is in /tmp, shared with everyone: this
    /// user's own folder, 0700, and never one someone else made or can write (another user's
    /// "/tmp/tessera-cache" let them read the photos' paths and plant forged sizes).
    @Test func theCacheInTmpIsThisUsersAlone() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        func isPrivate(_ path: String) -> Bool {
            guard case .success(let info) = linkStatus(path) else { return false }
            return (info.st_mode & S_IFMT) == S_IFDIR && info.st_uid == geteuid() && info.st_mode & 0o077 == 0
        }
        let own = scratch.file("tessera-cache-\(geteuid())")
        #expect(privateTemporaryCache(in: scratch.path) == own && isPrivate(own))
        #expect(privateTemporaryCache(in: scratch.path) == own, "this user's folder is used again")
        // Made by someone else, writable by others, or a link: another folder, private.
        var taken: [String] = []
        chmod(own, 0o777)
        taken.append(privateTemporaryCache(in: scratch.path))
        chmod(own, 0o700)
        if geteuid() == 0 {
            chown(own, 65534, 65534)
            taken.append(privateTemporaryCache(in: scratch.path))
            chown(own, 0, 0)
        }
        rmdir(own)
        mkdir(scratch.file("elsewhere"), 0o700)
        symlink(scratch.file("elsewhere"), own)
        taken.append(privateTemporaryCache(in: scratch.path))
        for path in taken {
            #expect(path != own && path.hasPrefix(own + "-") && isPrivate(path), "\(path)")
        }
        #expect(Set(taken).count == taken.count)
    }

    @Test func featuresRoundTripAndMissWhenThePhotoChanged() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let cache = scratch.file("cache")
        let photos = (0..<5).map { handMadePhoto("/library/p\($0).jpg") }
        let index = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        try index.append([(photos[0], features(0)), (photos[1], features(1))])
        try index.append([(photos[3], features(3)), (photos[4], [Float](repeating: .nan, count: 27)), (photos[2], [0.5])])
        let reopened = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        let first = try look(reopened, photos)
        #expect(first.found == [0: features(0), 1: features(1), 3: features(3)])
        #expect(first.missing == [2, 4] && reopened.hits == 3)
        // Another size, mtime or decode (a colour profile): analysed again.
        let changed = [handMadePhoto("/library/p0.jpg", bytes: 1001), handMadePhoto("/library/p1.jpg", mtime: 6),
                       handMadePhoto("/library/p3.jpg", colorTag: 0xABC)]
        #expect(try look(reopened, changed).missing == [0, 1, 2])
        // The same path, size and mtime in another file (another folder's in/p.jpg, run from
        // there; a photo rewritten and renamed over the old one): another inode, analysed again.
        let scanned = Photo(path: "in/p.jpg", header: photos[0].header, identity: OutputDestination.Identity(device: 7, inode: 8),
                            fileBytes: 1000, modifiedNanoseconds: 5)
        let elsewhere = Photo(path: "in/p.jpg", header: photos[0].header, identity: OutputDestination.Identity(device: 7, inode: 9),
                              fileBytes: 1000, modifiedNanoseconds: 5)
        try reopened.append([(scanned, features(4))])
        #expect(try look(reopened, [scanned]).found == [0: features(4)])
        #expect(try look(reopened, [elsewhere]).missing == [0])
        // A file deleted and another made in its place with the freed inode, its size and mtime
        // set back: a new change time, analysed again. An entry or a photo that knows no change
        // time (0, nil: written before 0.6.15, made by hand) is compared without it.
        var recorded = scanned, recreated = scanned, unknown = scanned
        recorded.changedNanoseconds = 50
        recreated.changedNanoseconds = 60
        unknown.changedNanoseconds = nil
        try reopened.append([(recorded, features(5))])
        #expect(try look(reopened, [recorded]).found == [0: features(5)])
        #expect(try look(reopened, [recreated]).missing == [0])
        #expect(try look(reopened, [unknown]).found == [0: features(5)])
        try reopened.append([(unknown, features(6))])
        #expect(try look(reopened, [recreated]).found == [0: features(6)])
        try reopened.compact()
        #expect(RecordStore.fileBytes(cache + "/features-k3-a1.0000.journal") == nil)
        #expect(try look(FeatureIndex(directory: cache, subCells: 3, cellAspect: 1), photos).found.count == 3)
        // A photo made by hand without size and mtime is stat'ed.
        let real = scratch.file("real.jpg")
        writeBytes([UInt8](repeating: 1, count: 10), to: real)
        let unstated = Photo(path: real, header: photos[0].header)
        try reopened.append([(unstated, features(9))])
        #expect(try look(reopened, [unstated]).found == [0: features(9)])
    }

    /// Values that are not colours (nan, inf, 12.5) or a value of another shape, written behind
    /// the index's back, are misses, not crashes.
    @Test func implausibleStoredValuesAreMisses() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let cache = scratch.file("cache")
        let index = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        let photos = (0..<5).map { handMadePhoto("/library/p\($0).jpg") }
        try index.append(photos.map { ($0, features(1)) })
        let raw = RecordStore(directory: cache, stem: "features-k3-a1.0000", schema: 0x0200_0000 | 27)
        var batch = RecordBatch()
        for (number, bad) in [Float.nan, .infinity, 12.5].enumerated() {
            var value: [UInt8] = []
            value.appendLittleEndian(Int64(1000))
            value.appendLittleEndian(Int64(5))
            for _ in 0..<3 { value.appendLittleEndian(Int64(0)) }  // change time, device, inode
            let key = Array(FeatureIndex.decodeKey(photos[0].header).utf8)
            value.append(UInt8(key.count))
            value += key
            for feature in [bad] + features(1).dropFirst() { value.appendLittleEndian(feature.bitPattern) }
            batch.add(key: Array(photos[number].file.bytes), value: value)
        }
        batch.add(key: Array(photos[3].file.bytes), value: [1, 2, 3])
        try raw.append(batch)
        #expect(try look(index, photos).missing == [0, 1, 2, 3])
    }

    /// Each shard appends to files of its own; an index of the same shape reads them all.
    @Test func shardsWriteTheirOwnFilesAndEveryIndexReadsThem() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let cache = scratch.file("cache")
        let photos = (0..<4).map { handMadePhoto("/library/p\($0).jpg") }
        let first = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1.5, shard: try ShardSpec(number: 1, count: 2))
        let second = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1.5, shard: try ShardSpec(number: 2, count: 2))
        #expect(first.path == cache + "/features-k3-a1.5000.shard-1-of-2.idx")
        try first.append([(photos[0], features(0)), (photos[1], features(1))])
        try second.append([(photos[2], features(2))])
        try second.compact()
        let main = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1.5)
        let seen = try look(main, photos)
        #expect(seen.found == [0: features(0), 1: features(1), 2: features(2)] && seen.missing == [3])
        // An entry the main run makes later is found too (the newest usable entry wins).
        try main.append([(photos[3], features(3))])
        #expect(try look(FeatureIndex(directory: cache, subCells: 3, cellAspect: 1.5), photos).missing.isEmpty)
    }

    /// The old text format is imported once, streamed, keeping the users' analysis; its bad lines
    /// are left out.
    @Test func theOldTextFormatIsImportedOnce() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let cache = scratch.file("cache")
        try makeDirectory(cache)
        let photos = (0..<4).map { handMadePhoto("/library/p\($0).jpg") }
        var text = ""
        for (number, photo) in photos.enumerated() {
            var values = features(number).map { String($0) }
            if number == 2 { values[4] = "nan" }
            if number == 3 { values.removeLast() }
            text += photo.path + "\t1000\t5\t\(FeatureIndex.decodeKey(photo.header))\t" + values.joined(separator: "\t") + "\n"
        }
        writeBytes(Array(text.utf8), to: cache + "/features-k3-a1.0000.tsv")
        let index = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        #expect(RecordStore.fileBytes(index.path) != nil)
        let seen = try look(index, photos)
        #expect(seen.found == [0: features(0), 1: features(1)] && seen.missing == [2, 3])
        // Not again: a newer entry for p0 stays when the text file is still there.
        try index.append([(photos[0], features(7))])
        try index.compact()
        #expect(try look(FeatureIndex(directory: cache, subCells: 3, cellAspect: 1), photos).found[0] == features(7))
    }

    /// An analysis stopped after some batches (no compaction, no save): the next run finds
    /// every batch appended, and only the rest is missing.
    @Test func anInterruptedAnalysisKeepsEveryBatch() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let cache = scratch.file("cache")
        let photos = (0..<3000).map { handMadePhoto("/library/photo-\(10_000 + $0).jpg") }
        do {
            let index = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
            for start in stride(from: 0, to: 2048, by: 1024) {
                try index.append((start..<start + 1024).map { (photos[$0], features($0 % 50)) })
            }
        }
        let next = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        let seen = try look(next, photos)
        #expect(seen.found.count == 2048 && seen.missing == (2048..<3000).map { Int32($0) })
        #expect(seen.found[1500] == features(1500 % 50))
    }

    /// The per-photo methods the analysis still calls keep working over the store.
    @Test func thePerPhotoMethodsStillWork() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let cache = scratch.file("cache")
        let paths = (0..<3).map { scratch.file("p\($0).jpg") }
        for path in paths { writeBytes([1, 2, 3], to: path) }
        let index = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1)
        for (number, path) in paths.enumerated() { index.store(path, decoded: "jpeg-srgb-d2", features: features(number)) }
        try index.save()
        #expect(RecordStore.fileBytes(cache + "/features-k3-a1.0000.journal") == nil)
        let only = FeatureIndex(directory: cache, subCells: 3, cellAspect: 1, only: Set(paths.prefix(2)))
        #expect(only.heldEntries == 2)
        #expect(only.lookup(paths[1], decoded: "jpeg-srgb-d2") == features(1))
        #expect(only.lookup(paths[1], decoded: "png-srgb-d2") == nil)
        #expect(only.hits == 1)
        #expect(FeatureIndex(directory: cache, subCells: 3, cellAspect: 1).heldEntries == 3)
    }
}

@Suite struct HeaderIndexTests {
    /// Every PhotoHeader field comes back exactly; a changed size or mtime is not answered.
    @Test func everyHeaderFieldRoundTrips() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var header = PhotoHeader(width: 4032, height: 3024, colorModel: .cmyk, isProgressive: true, exifOrientation: 6, adobeInverted: true,
                                 isArithmetic: true, storedRGB: true, minimumDataBytes: 11, coefficientBytes: 22, dcDecoderBytes: 33)
        header.format = .heif
        header.colorTag = 0xDEAD_BEEF_0123_4567
        header.wholeImageBytes = 44
        header.hasAlpha = true
        header.thumbnailWidth = 320
        header.thumbnailHeight = 240
        header.dateTaken = 2024_02_29_23_59_58
        // A field added to PhotoHeader must be added to HeaderIndex's encoding (and this test).
        #expect(Mirror(reflecting: header).children.count == 18)
        var plain = PhotoHeader(width: 1, height: 2, colorModel: .gray, isProgressive: false, exifOrientation: 0, adobeInverted: false)
        plain.format = .png
        let entries = [ScanCacheEntry(path: PathBytes("/a/1.heic"), fileBytes: 9_000_000, modifiedNanoseconds: 1_700_000_000_123_456_789,
                                      kind: .photo(header)),
                       ScanCacheEntry(path: PathBytes([0x2F, 0x61, 0x2F, 0xFF]), fileBytes: 1, modifiedNanoseconds: -5, kind: .photo(plain)),
                       ScanCacheEntry(path: PathBytes("/a/notes.txt"), fileBytes: 12, modifiedNanoseconds: 3, kind: .notAnImage),
                       ScanCacheEntry(path: PathBytes("/a/clip.mov"), fileBytes: 13, modifiedNanoseconds: 4, kind: .video)]
        let cache = HeaderIndex(directory: scratch.file("cache"))
        try cache.record(Array(entries[0..<2]))
        try cache.record(Array(entries[2...]))
        let sorted = entries.sorted { $0.path < $1.path }
        let reader = try cache.makeReader()
        for entry in sorted {
            #expect(try reader.lookup(entry.path, fileBytes: entry.fileBytes, modifiedNanoseconds: entry.modifiedNanoseconds) == entry.kind)
        }
        try cache.finish()
        #expect(RecordStore.fileBytes(cache.store.journalPath) == nil)
        let again = try HeaderIndex(directory: scratch.file("cache")).makeReader()
        #expect(try again.lookup(entries[0].path, fileBytes: entries[0].fileBytes + 1, modifiedNanoseconds: entries[0].modifiedNanoseconds) == nil)
        #expect(try again.lookup(entries[1].path, fileBytes: 1, modifiedNanoseconds: -5) == entries[1].kind)
        #expect(try again.lookup(PathBytes("/a/zzz"), fileBytes: 1, modifiedNanoseconds: 1) == nil)
    }

    /// An entry answers only for the file it was made from: another change time, device or inode
    /// (an edit with the mtime put back; another folder's `in/p.jpg` of the same size and time) is
    /// a miss. An entry whose byte counts no header could have (a forged one) is not answered.
    @Test func anEntryAnswersOnlyForItsOwnFile() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        var header = PhotoHeader(width: 40, height: 30, colorModel: .rgb, isProgressive: false, exifOrientation: 1, adobeInverted: false)
        header.format = .jpeg
        let stamp = FileStamp(fileBytes: 100, modifiedNanoseconds: 5, changedNanoseconds: 6, device: 7, inode: 8)
        let cache = HeaderIndex(directory: scratch.file("cache"))
        var forged = header
        forged.wholeImageBytes = 0x7FFF_FFFF_F000_0000
        try cache.record([ScanCacheEntry(path: PathBytes("in/p.jpg"), stamp: stamp, kind: .photo(header)),
                          ScanCacheEntry(path: PathBytes("in/q.jpg"), stamp: stamp, kind: .photo(forged))])
        #expect(try cache.makeReader().lookup(PathBytes("in/p.jpg"), stamp: stamp) == .photo(header))
        for other in [FileStamp(fileBytes: 100, modifiedNanoseconds: 5, changedNanoseconds: 9, device: 7, inode: 8),
                      FileStamp(fileBytes: 100, modifiedNanoseconds: 5, changedNanoseconds: 6, device: 7, inode: 9),
                      FileStamp(fileBytes: 100, modifiedNanoseconds: 5, changedNanoseconds: 6, device: 1, inode: 8)] {
            #expect(try cache.makeReader().lookup(PathBytes("in/p.jpg"), stamp: other) == nil)
        }
        #expect(try cache.makeReader().lookup(PathBytes("in/q.jpg"), stamp: stamp) == nil)
        // At the limit it is still a header.
        forged.wholeImageBytes = HeaderIndex.largestByteCount
        try cache.record([ScanCacheEntry(path: PathBytes("in/q.jpg"), stamp: stamp, kind: .photo(forged))])
        #expect(try cache.makeReader().lookup(PathBytes("in/q.jpg"), stamp: stamp) == .photo(forged))
    }

    /// A cache file that is garbage, or of another parsing version, is an empty cache.
    @Test func aDamagedOrForeignCacheIsEmpty() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let directory = scratch.file("cache")
        let cache = HeaderIndex(directory: directory)
        writeBytes([UInt8](repeating: 0xFF, count: 5000), to: cache.path)
        writeBytes([UInt8](repeating: 0x41, count: 300), to: cache.store.journalPath)
        #expect(try cache.makeReader().lookup(PathBytes("/a"), fileBytes: 1, modifiedNanoseconds: 1) == nil)
        // Written by another parsing version: not answered, and overwritten by this one.
        let foreign = RecordStore(directory: directory, stem: "headers-v1", schema: 0x4844_0000 | (HeaderIndex.headerParsingVersion + 1))
        removeFile(foreign.journalPath)
        var batch = RecordBatch()
        var value: [UInt8] = []
        HeaderIndex.encode(ScanCacheEntry(path: PathBytes("/a"), fileBytes: 1, modifiedNanoseconds: 1, kind: .video), into: &value)
        batch.add(key: Array("/a".utf8), value: value)
        try foreign.append(batch)
        #expect(try cache.makeReader().lookup(PathBytes("/a"), fileBytes: 1, modifiedNanoseconds: 1) == nil)
        try cache.record([ScanCacheEntry(path: PathBytes("/a"), fileBytes: 1, modifiedNanoseconds: 1, kind: .notAnImage)])
        try cache.finish()
        #expect(try cache.makeReader().lookup(PathBytes("/a"), fileBytes: 1, modifiedNanoseconds: 1) == .notAnImage)
    }

    /// A main file that is garbage is rewritten at the end of the scan that met it, however few
    /// entries the scan adds (it stayed for good while the journal was small beside it).
    @Test func aGarbageCacheFileIsRewrittenAtTheEndOfTheScan() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let cache = HeaderIndex(directory: scratch.file("cache"))
        writeBytes((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7919 >> 3) }, to: cache.path)
        #expect(try cache.makeReader().lookup(PathBytes("/a"), fileBytes: 1, modifiedNanoseconds: 1) == nil)
        try cache.record([ScanCacheEntry(path: PathBytes("/a"), fileBytes: 1, modifiedNanoseconds: 1, kind: .notAnImage)])
        try cache.finish()
        #expect(readBytes(cache.path).starts(with: Array("TSRSORT1".utf8)), "the garbage file is still there")
        #expect(try cache.makeReader().lookup(PathBytes("/a"), fileBytes: 1, modifiedNanoseconds: 1) == .notAnImage)
    }
}
