// PhotoPreviews.swift — the viewer's larger pictures of the photos (the previews setting): for each
// distinct photo the layout draws, one JPEG N px on its long side, upright and whole (the
// photo's own shape, not its cell's crop), in NAME_files/viewer/previews/P.jpg, where P is the
// photo's number in cells.js's names. The viewer shows it when a cell is clicked.
//
// They are made by the render that draws the cells, after its last stripe and before the
// pyramid is finished, on the render's workers: each worker takes the next photo, decodes it
// with the render's decoder (the same budget, colour handling and cancellation) at the preview's
// size, and encodes it; the files are handed to the output one at a time, in the order they are
// done. A photo that cannot be read has no preview (the render drew its cell as a placeholder
// and named it already); the viewer says so when its cell is clicked. A photo whose cell was
// drawn but whose preview could not be made (at the preview's size it needs more memory than the
// budget gives a decode) is returned with its reason, for the caller to name. A photo the render
// already failed to read is not tried again (`failedInRender`): a file that takes long to
// fail (a hostile one, or one over the budget) costs that time once.
//
// Memory: a worker holds one preview's pixels and its JPEG (`workingBytes`); the decoder's own
// needs come from the render's decode pool, as a cell's do.
import CTesseraShims
import Dispatch

struct PhotoPreviews: Sendable {
    /// The valid long sides, in pixels.
    static let sizes = 64...4096

    let photos: PhotoTable
    let layout: CellLayout
    /// The long side, px.
    let longSide: Int
    let quality: Int
    let subsampling: ChromaSubsampling
    /// The render's decoder (its budget, cancellation and background); resized for each photo.
    let decoder: CellDecoder
    let workers: Int
    /// Whether the render failed to read photo i (its cell a placeholder): no preview is tried.
    var failedInRender: @Sendable (Int) -> Bool = { _ in false }
    /// A shard's share (ShardSink.swift): of the photos drawn, in ascending order, those at
    /// positions `index`, `index + count`, ... (every photo once between the shards, and each
    /// shard as many as the next, whichever bands show them). (0, 1): all.
    var share = (index: 0, count: 1)

    /// The entry name of photo `index`'s preview, under NAME_files/.
    static func entryName(_ index: Int) -> String { "viewer/previews/\(index).jpg" }

    /// The preview's size for a photo `width` x `height` as stored, turned by `orientation`:
    /// `longSide` on its long side, the other side in proportion (at least 1 px), never larger
    /// than the photo itself.
    static func size(width: Int, height: Int, exifOrientation: Int, longSide: Int) -> (width: Int, height: Int) {
        let sideways = OrientationTransform(exifOrientation: exifOrientation).swapsAxes
        let w = max(1, sideways ? height : width), h = max(1, sideways ? width : height)
        let long = min(longSide, max(w, h))
        if w >= h { return (long, max(1, Int((Double(h) * Double(long) / Double(w)).rounded()))) }
        return (max(1, Int((Double(w) * Double(long) / Double(h)).rounded())), long)
    }

    /// What one worker holds: the largest preview's pixels and about as much again for its JPEG
    /// and the encoder (and, beside them, the list of photos: 4 bytes a photo drawn, a bit a
    /// photo of the library; a few hundred KiB for a million).
    static func workingBytes(longSide: Int) -> Int { longSide * longSide * 4 + (256 << 10) }

    /// The photos the layout draws, ascending, each once.
    func drawnPhotos() -> [Int32] {
        var drawn = [UInt64](repeating: 0, count: (photos.count + 63) / 64)  // a bit a photo
        var count = 0
        for cell in 0..<layout.cellCount {
            let photo = layout.photo(at: cell)
            guard photo >= 0 && photo < photos.count, drawn[photo >> 6] & (1 << UInt64(photo & 63)) == 0 else { continue }
            drawn[photo >> 6] |= 1 << UInt64(photo & 63)
            count += 1
        }
        var list: [Int32] = []
        list.reserveCapacity(count)
        for (word, bits) in drawn.enumerated() where bits != 0 {
            for bit in 0..<64 where bits & (1 << UInt64(bit)) != 0 { list.append(Int32(word * 64 + bit)) }
        }
        return list
    }

    /// Makes every preview and hands each to `emit` (photo number, JPEG bytes), one call at a
    /// time. Returns how many were made, how many photos could not be read, and the photos
    /// drawn in the render that have no preview all the same, with why. Throws what `emit`
    /// throws, `.cancelled`, or an encoder's failure.
    func make(_ emit: (Int, UnsafeRawBufferPointer) throws(TesseraError) -> Void) throws(TesseraError)
        -> (made: Int, unreadable: Int, missed: [SkippedPhoto]) {
        let drawn = drawnPhotos()
        let list = share.count == 1 ? drawn : stride(from: share.index, to: drawn.count, by: share.count).map { drawn[$0] }
        let next = AtomicCounter(), tally = Tally()
        withoutActuallyEscaping(emit) { emit in
            let shared = UnsafeSendable(emit)
            DispatchQueue.concurrentPerform(iterations: max(1, min(workers, list.count))) { _ in
                var pixels: [UInt8] = []
                let encoder = tessera_jpeg_encoder_create(nil, nil, 64 << 10)
                defer { if let encoder { tessera_jpeg_encoder_destroy(encoder) } }
                while true {
                    let position = next.increment() - 1
                    guard position < list.count, !tally.failed else { return }
                    let index = Int(list[position])
                    if failedInRender(index) {
                        tally.unreadable()
                        continue
                    }
                    do throws(TesseraError) {
                        guard let encoder else { throw TesseraError.encodeFailed(path: "a preview", reason: "out of memory creating an encoder") }
                        let made = try preview(of: index, pixels: &pixels, encoder: encoder)
                        guard case .success(let bytes) = made else {
                            if case .failure(let error) = made { tally.missed(SkippedPhoto(path: photos[index].path, error: error)) }
                            continue
                        }
                        try tally.emit { () throws(TesseraError) in try shared.value(index, bytes) }
                    } catch {
                        tally.fail(error)
                        return
                    }
                }
            }
        }
        return try tally.result()
    }

    /// What the workers share: the counts and the first failure, under one lock, which also
    /// makes the hand-over to `emit` one at a time.
    private final class Tally: @unchecked Sendable {
        private let lock = Mutex()
        private var made = 0, unreadableCount = 0  // protected by `lock`
        private var missedPhotos: [SkippedPhoto] = []  // protected by `lock`
        private var failure: TesseraError?  // protected by `lock`
        var failed: Bool { lock.withLock { failure != nil } }
        func unreadable() { lock.withLock { unreadableCount += 1 } }
        func missed(_ photo: SkippedPhoto) {
            lock.withLock {
                unreadableCount += 1
                missedPhotos.append(photo)
            }
        }
        func fail(_ error: TesseraError) { lock.withLock { if failure == nil { failure = error } } }
        func emit(_ body: () throws(TesseraError) -> Void) throws(TesseraError) {
            lock.lock()
            defer { lock.unlock() }
            guard failure == nil else { return }
            try body()
            made += 1
        }
        func result() throws(TesseraError) -> (made: Int, unreadable: Int, missed: [SkippedPhoto]) {
            let (made, unreadable, missed, failure) = lock.withLock { (self.made, unreadableCount, missedPhotos, self.failure) }
            if let failure { throw failure }
            return (made, unreadable, missed.sorted { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) })
        }
    }

    /// Photo `index`'s preview as JPEG bytes (valid until `encoder` is used again), or why the
    /// photo could not be read at the preview's size.
    private func preview(of index: Int, pixels: inout [UInt8], encoder: OpaquePointer) throws(TesseraError)
        -> Result<UnsafeRawBufferPointer, TesseraError> {
        let photo = photos[index]
        let size = Self.size(width: photo.header.width, height: photo.header.height,
                             exifOrientation: photo.header.exifOrientation, longSide: longSide)
        let sized = decoder.sized(width: size.width, height: size.height)
        if pixels.count < sized.cellBytes { pixels = [UInt8](repeating: 0, count: sized.cellBytes) }
        do throws(TesseraError) {
            try pixels.withUnsafeMutableBytes { raw in
                Result { () throws(TesseraError) in _ = try sized.decodeWhole(file: photo.file, into: raw) }
            }.get()
        } catch {
            if case .cancelled = error { throw error }
            return .failure(error)
        }
        let factors = subsampling.lumaFactors
        func check(_ status: Int32) throws(TesseraError) {
            guard status == 0 else {
                throw TesseraError.encodeFailed(path: Self.entryName(index), reason: String(cString: tessera_jpeg_encoder_message(encoder)))
            }
        }
        tessera_jpeg_encoder_set_marks(encoder, 0, JPEGMarks.outputComment)
        try check(tessera_jpeg_encoder_start(encoder, UInt32(size.width), UInt32(size.height), Int32(quality), factors.h, factors.v, 0))
        try pixels.withUnsafeBytes { raw in
            Result { () throws(TesseraError) in
                try check(tessera_jpeg_encoder_write_rows(encoder, raw.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                          size.width * 3, UInt32(size.height)))
            }
        }.get()
        try check(tessera_jpeg_encoder_finish(encoder))
        var bytes: UnsafePointer<UInt8>?
        let length = tessera_jpeg_encoder_memory_output(encoder, &bytes)
        return .success(UnsafeRawBufferPointer(start: bytes, count: length))
    }
}
