// FeatureStore.swift — the photos' features as the matcher reads them: k*k*3 floats a photo,
// photo after photo. The matcher never needs them all at once: it reads them a run of photos at
// a time (ranking, a full scan) or one photo at a time (a photo it placed), so the store can be
// the caller's arrays, one allocation, or an anonymous temporary file that holds a library too
// large for the memory budget (a million photos' features are 108 MB at k = 3).
import Glibc

public final class FeatureStore: @unchecked Sendable {
    /// Photos stored.
    public let count: Int
    /// Floats per photo (k*k*3).
    public let valuesPerPhoto: Int

    private enum Backing {
        /// One photo's features after another, owned.
        case memory(UnsafeMutableBufferPointer<Float>)
        /// The caller's arrays, one a photo (not copied).
        case arrays([[Float]])
        /// An anonymous temporary file, photo after photo.
        case file(FileDescriptor)
    }
    private let backing: Backing
    private let lock = Mutex()
    private var reads = (calls: 0, photos: 0, largest: 0)  // protected by `lock`
    /// Reads so far, the photos they copied and the most photos one copied (what the matcher
    /// held at once).
    var readStatistics: (calls: Int, photos: Int, largest: Int) { lock.withLock { reads } }

    /// Features held in memory (`features.count` a multiple of `valuesPerPhoto`), copied.
    public convenience init(features: [Float], valuesPerPhoto: Int) {
        precondition(valuesPerPhoto > 0 && features.count % valuesPerPhoto == 0)
        self.init(count: features.count / valuesPerPhoto, valuesPerPhoto: valuesPerPhoto) { buffer in
            _ = buffer.initialize(from: features)
        }
    }

    /// The photos' own arrays, one a photo, read where they are.
    public init(photos: [[Float]], valuesPerPhoto: Int) {
        precondition(photos.allSatisfy { $0.count == valuesPerPhoto })
        count = photos.count
        self.valuesPerPhoto = valuesPerPhoto
        backing = .arrays(photos)
    }

    /// `count` photos' features written by `fill` straight into the store's allocation.
    public init(count: Int, valuesPerPhoto: Int, fill: (UnsafeMutableBufferPointer<Float>) -> Void) {
        self.count = count
        self.valuesPerPhoto = valuesPerPhoto
        let storage = UnsafeMutableBufferPointer<Float>.allocate(capacity: max(1, count * valuesPerPhoto))
        fill(UnsafeMutableBufferPointer(rebasing: storage[0..<(count * valuesPerPhoto)]))
        backing = .memory(storage)
    }

    /// `count` photos' features in an anonymous temporary file in `directory` (nothing is left
    /// there, however the process ends), written `batch` photos at a time: `fill(first, buffer)`
    /// writes photos first..<first + buffer.count / valuesPerPhoto into `buffer`. Holds one batch
    /// in memory, never the whole store.
    public init(count: Int, valuesPerPhoto: Int, directory: String, batch: Int = 16_384,
                fill: (Int, UnsafeMutableBufferPointer<Float>) throws(TesseraError) -> Void) throws(TesseraError) {
        self.count = count
        self.valuesPerPhoto = valuesPerPhoto
        let file = try FileDescriptor.openAnonymousTemporary(in: directory)
        let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: max(1, min(batch, count) * valuesPerPhoto))
        defer { buffer.deallocate() }
        do {
            // The blocks first: a full disk is an error here, not a short write later.
            try file.reserve(offset: 0, length: Int64(count * valuesPerPhoto * 4))
            var first = 0
            while first < count {
                let photos = min(batch, count - first)
                let part = UnsafeMutableBufferPointer(rebasing: buffer[0..<(photos * valuesPerPhoto)])
                try fill(first, part)
                try file.writeAll(UnsafeRawBufferPointer(part), at: Int64(first * valuesPerPhoto * 4))
                first += photos
            }
        } catch {
            file.close()
            throw error
        }
        backing = .file(file)
    }

    /// `count` photos' features to be written photo by photo (`write`), in any order: in memory
    /// when they take at most `memoryLimitBytes`, else in an anonymous temporary file in
    /// `directory` (its blocks reserved first, so a full disk is found here). Unwritten photos
    /// read as zeros.
    public init(writableCount count: Int, valuesPerPhoto: Int, directory: String, memoryLimitBytes: Int = 1 << 20) throws(TesseraError) {
        self.count = count
        self.valuesPerPhoto = valuesPerPhoto
        let bytes = count * valuesPerPhoto * 4
        if bytes <= memoryLimitBytes {
            let storage = UnsafeMutableBufferPointer<Float>.allocate(capacity: max(1, count * valuesPerPhoto))
            storage.initialize(repeating: 0)
            backing = .memory(storage)
        } else {
            let file = try FileDescriptor.openAnonymousTemporary(in: directory)
            do {
                try file.reserve(offset: 0, length: Int64(bytes))
            } catch {
                file.close()
                throw error
            }
            backing = .file(file)
        }
    }

    /// Sets photo `photo`'s features (`valuesPerPhoto` floats). Safe from several threads for
    /// different photos.
    public func write(_ photo: Int, _ values: UnsafeBufferPointer<Float>) throws(TesseraError) {
        precondition(photo >= 0 && photo < count && values.count == valuesPerPhoto)
        switch backing {
        case .memory(let storage):
            (storage.baseAddress! + photo * valuesPerPhoto).update(from: values.baseAddress!, count: valuesPerPhoto)
        case .file(let file):
            try file.writeAll(UnsafeRawBufferPointer(values), at: Int64(photo * valuesPerPhoto * 4))
        case .arrays:
            preconditionFailure("a store of the caller's arrays is read-only")
        }
    }

    /// Photo `photo`'s features, copied.
    public func features(of photo: Int) throws(TesseraError) -> [Float] {
        var values = [Float](repeating: 0, count: valuesPerPhoto)
        try values.withUnsafeMutableBufferPointer { buffer in
            Result { () throws(TesseraError) in try read(photo, 1, into: buffer.baseAddress!) }
        }.get()
        return values
    }

    deinit {
        switch backing {
        case .memory(let storage): storage.deallocate()
        case .file(let file): file.close()
        case .arrays: break
        }
    }

    /// Bytes of features this store keeps in the process's memory (the file's are not).
    public var residentBytes: Int {
        switch backing {
        case .memory, .arrays: return count * valuesPerPhoto * 4
        case .file: return 0
        }
    }

    /// Copies photos first..<first + photos into `into` (photos * valuesPerPhoto floats).
    func read(_ first: Int, _ photos: Int, into destination: UnsafeMutablePointer<Float>) throws(TesseraError) {
        precondition(first >= 0 && photos >= 0 && first + photos <= count)
        lock.withLock { reads = (reads.calls + 1, reads.photos + photos, max(reads.largest, photos)) }
        let d = valuesPerPhoto
        switch backing {
        case .memory(let storage):
            destination.update(from: storage.baseAddress! + first * d, count: photos * d)
        case .arrays(let arrays):
            for photo in 0..<photos {
                arrays[first + photo].withUnsafeBufferPointer { destination.advanced(by: photo * d).update(from: $0.baseAddress!, count: d) }
            }
        case .file(let file):
            try file.readAll(into: UnsafeMutableRawBufferPointer(start: destination, count: photos * d * 4), at: Int64(first * d * 4))
        }
    }
}

/// Rearranges `order.count` records of `width` floats at `records` so that record s becomes the
/// one that was at `order[s]` (a permutation), in place: each cycle of the permutation is
/// followed once, carrying one record, so no second copy of the records is ever held.
func permuteRecords(_ records: UnsafeMutablePointer<Float>, width: Int, order: [Int32]) {
    var placed = [Bool](repeating: false, count: order.count)
    var carried = [Float](repeating: 0, count: width)
    for start in 0..<order.count where !placed[start] {
        for i in 0..<width { carried[i] = records[start * width + i] }
        var slot = start
        while true {
            placed[slot] = true
            let source = Int(order[slot])
            if source == start {
                for i in 0..<width { records[slot * width + i] = carried[i] }
                break
            }
            for i in 0..<width { records[slot * width + i] = records[source * width + i] }
            slot = source
        }
    }
}
