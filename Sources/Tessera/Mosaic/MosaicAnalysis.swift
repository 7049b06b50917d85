// MosaicAnalysis.swift — colour features of photos and of the target, in Oklab sub-cells.
//
// A photo's feature is the mean Oklab colour of each of k x k sub-cells of its cell-shaped centre
// crop (upright from EXIF), k*k*3 floats. The target is cut into columns*k x rows*k sub-cells the
// same way. Both are decoded through CellDecoder, so memory follows the width of one picture at
// a time, never its area: a 100-megapixel target costs its (columns*k) x (rows*k) sub-cells.
import Dispatch

public enum MosaicAnalysis {
    /// Pixels a sub-cell is averaged from (per side) when a photo is analysed.
    static let samplesPerSubCell = 4
    /// The most photos `analyse` decodes between two appends to the index.
    static let largestBatch = 4096

    /// The features of every photo (k*k*3 floats each, photo after photo), reusing `index`
    /// entries whose file is unchanged and adding the others to it. Photos that fail to decode
    /// get nil features and are listed.
    /// Decodes are admitted against `budget` (nil: a budget of the default 64 MiB).
    public static func photoFeatures<Photos: RandomAccessCollection<Photo>>(_ photos: Photos, subCells k: Int, cellAspect: Double, workers: Int,
                                     index: FeatureIndex?, budget: DecodeBudget? = nil,
                                     cancellation: RenderCancellation? = nil,
                                     progress: (@Sendable (Int, Int) -> Void)? = nil) -> (features: [[Float]?], failed: [SkippedPhoto], analysed: Int)
        where Photos.Index == Int, Photos: Sendable {
        var results = [[Float]?](repeating: nil, count: photos.count)
        var toAnalyse: [Int] = []
        for (number, photo) in photos.enumerated() {
            if let cached = index?.lookup(photo.path, decoded: FeatureIndex.decodeKey(photo.header)) {
                results[number] = cached
            } else {
                toAnalyse.append(number)
            }
        }
        let side = k * samplesPerSubCell
        let decoder = CellDecoder(cellWidth: side, cellHeight: side,
                                  budget: budget ?? DecodeBudget(budgetBytes: 64 << 20, workers: workers), cropAspect: cellAspect,
                                  cancellation: cancellation)
        let work = toAnalyse
        let finished = AtomicCounter()
        progress?(0, work.count)
        // Cancelled: the lanes stop; the photos not reached keep nil features.
        let fresh = mapInLanes(count: work.count, lanes: workers, cancellation: cancellation,
                               scratch: { [UInt8](repeating: 0, count: decoder.cellBytes) }) { i, cell in
            let path = photos[work[i]].file
            return cell.withUnsafeMutableBytes { bytes in
                Result { () throws(TesseraError) -> [Float] in
                    defer { progress?(finished.increment(), work.count) }
                    try wholeForTheMosaic(decoder.decode(file: path, into: bytes), path: photos[work[i]].path)
                    return subCellMeans(UnsafeRawBufferPointer(bytes), width: side, height: side, k: k)
                }
            }
        }
        var failed: [SkippedPhoto] = []
        for (i, number) in toAnalyse.enumerated() {
            guard let result = fresh[i] else { continue }  // not reached before a cancellation
            if case .failure(.cancelled) = result { continue }
            switch result {
            case .success(let features):
                results[number] = features
                index?.store(photos[number].path, decoded: FeatureIndex.decodeKey(photos[number].header), features: features)
            case .failure(let error):
                failed.append(SkippedPhoto(path: photos[number].path, error: error))
            }
        }
        return (results, failed, toAnalyse.count)
    }

    /// What `analyse` did.
    public struct Outcome: Sendable {
        /// Photos that could not be analysed, and why.
        public var failed: [SkippedPhoto] = []
        /// Photos analysed now (their features written to the store, and to the index).
        public var analysed = 0
        /// Why the index could not keep a batch (the analysis goes on; the features are in the
        /// store), or nil.
        public var indexError: TesseraError?
    }

    /// Analyses the photos at `rows` (ascending) of `photos` into `store` (row for row) and
    /// marks them in `have`, a batch at a time. After each batch, its features are appended to
    /// `index` as one durable record, so an interruption (Ctrl-C, SIGKILL, a full disk) keeps
    /// every batch finished: the next run analyses only the rest. A batch is sized to take
    /// about half a second (starting at two photos a worker, doubling while batches are quick),
    /// so an interruption loses at most the photos in flight and the last half second's, and
    /// a library of tiny photos is not slowed by a sync a photo.
    /// Cancelled: returns at the end of the batch in flight (what it finished is kept).
    public static func analyse(_ photos: PhotoTable, rows: [Int32], into store: FeatureStore, have: inout [Bool],
                               subCells k: Int, cellAspect: Double, workers: Int, index: FeatureIndex?, budget: DecodeBudget,
                               cancellation: RenderCancellation? = nil,
                               progress: (@Sendable (Int, Int) -> Void)? = nil) throws(TesseraError) -> Outcome {
        let side = k * samplesPerSubCell
        let decoder = CellDecoder(cellWidth: side, cellHeight: side, budget: budget, cropAspect: cellAspect, cancellation: cancellation)
        var outcome = Outcome()
        var batchSize = max(1, 2 * workers)
        var start = 0
        progress?(0, rows.count)
        while start < rows.count, cancellation?.isCancelled != true {
            let began = monotonicSeconds()
            let batch = Array(rows[start..<min(rows.count, start + batchSize)])
            let results = mapInLanes(count: batch.count, lanes: workers, cancellation: cancellation,
                                     scratch: { [UInt8](repeating: 0, count: decoder.cellBytes) }) { i, cell in
                let file = photos[Int(batch[i])].file
                return cell.withUnsafeMutableBytes { bytes in
                    Result { () throws(TesseraError) -> [Float] in
                        try wholeForTheMosaic(decoder.decode(file: file, into: bytes), path: photos[Int(batch[i])].path)
                        return subCellMeans(UnsafeRawBufferPointer(bytes), width: side, height: side, k: k)
                    }
                }
            }
            var entries: [(photo: Photo, features: [Float])] = []
            for (i, result) in results.enumerated() {
                guard let result else { continue }  // not reached before a cancellation
                let row = Int(batch[i])
                switch result {
                case .success(let features):
                    try features.withUnsafeBufferPointer { buffer in Result { () throws(TesseraError) in try store.write(row, buffer) } }.get()
                    have[row] = true
                    entries.append((photos[row], features))
                case .failure(.cancelled):
                    continue
                case .failure(let error):
                    outcome.failed.append(SkippedPhoto(path: photos[row].path, error: error))
                }
            }
            outcome.analysed += entries.count
            if let index, !entries.isEmpty, outcome.indexError == nil {
                do throws(TesseraError) { try index.append(entries) } catch { outcome.indexError = error }
            }
            start += batch.count
            progress?(start, rows.count)
            let seconds = monotonicSeconds() - began
            if seconds < 0.25 { batchSize = min(batchSize * 2, largestBatch) } else if seconds > 1 { batchSize = max(workers, batchSize / 2) }
        }
        return outcome
    }

    /// The target's features: `columns * rows` cells of k*k*3 floats, row-major, from its
    /// upright centre crop to the mosaic's aspect ratio.
    public static func targetFeatures(path: String, columns: Int, rows: Int, subCells k: Int,
                                      budget: DecodeBudget? = nil, cancellation: RenderCancellation? = nil) throws(TesseraError) -> [Float] {
        let width = columns * k, height = rows * k
        let decoder = CellDecoder(cellWidth: width, cellHeight: height, budget: budget ?? DecodeBudget(budgetBytes: 64 << 20, workers: 1),
                                  cancellation: cancellation)
        var pixels = [UInt8](repeating: 0, count: decoder.cellBytes)
        try pixels.withUnsafeMutableBytes { bytes in
            Result { () throws(TesseraError) in _ = try decoder.decodeWhole(file: PathBytes(path), into: bytes) }
        }.get()
        var features = [Float](repeating: 0, count: columns * rows * k * k * 3)
        for row in 0..<rows {
            for column in 0..<columns {
                let cell = row * columns + column
                for sy in 0..<k {
                    for sx in 0..<k {
                        let i = ((row * k + sy) * width + column * k + sx) * 3
                        let lab = Oklab.fromSRGB(pixels[i], pixels[i + 1], pixels[i + 2])
                        let f = (cell * k * k + sy * k + sx) * 3
                        features[f] = lab.l
                        features[f + 1] = lab.a
                        features[f + 2] = lab.b
                    }
                }
            }
        }
        return features
    }

    /// Throws for a photo drawn only in part (a file that ends early): a mosaic leaves it out.
    /// Its grey part matched the target's greys, and one such file of a phone library filled
    /// 298 of 2,451 cells of a mosaic, each a picture with a grey half, where whole copies of
    /// it were in the library (a new user's trial). A grid or a collage still draws it: there
    /// the user named it for a cell of its own.
    static func wholeForTheMosaic(_ notes: DecodeNotes, path: String) throws(TesseraError) {
        if let missing = notes.incomplete {
            throw .unreadablePhoto(path: path, reason: "\(missing): left out of the mosaic, whose cells show whole photos")
        }
    }

    /// Mean Oklab colour (averaged in linear light) of each of k x k blocks of an RGB image.
    static func subCellMeans(_ pixels: UnsafeRawBufferPointer, width: Int, height: Int, k: Int) -> [Float] {
        var features = [Float](repeating: 0, count: k * k * 3)
        for sy in 0..<k {
            for sx in 0..<k {
                let x0 = sx * width / k, x1 = (sx + 1) * width / k
                let y0 = sy * height / k, y1 = (sy + 1) * height / k
                var r: Float = 0, g: Float = 0, b: Float = 0
                for y in y0..<y1 {
                    for x in x0..<x1 {
                        let i = (y * width + x) * 3
                        r += Oklab.linearLight(pixels[i])
                        g += Oklab.linearLight(pixels[i + 1])
                        b += Oklab.linearLight(pixels[i + 2])
                    }
                }
                let count = Float(max(1, (x1 - x0) * (y1 - y0)))
                let lab = Oklab.fromLinear(r / count, g / count, b / count)
                let f = (sy * k + sx) * 3
                features[f] = lab.l
                features[f + 1] = lab.a
                features[f + 2] = lab.b
            }
        }
        return features
    }
}
