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
                    _ = try decoder.decode(file: path, into: bytes)
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

    /// The target's features: `columns * rows` cells of k*k*3 floats, row-major, from its
    /// upright centre crop to the mosaic's aspect ratio.
    public static func targetFeatures(path: String, columns: Int, rows: Int, subCells k: Int,
                                      budget: DecodeBudget? = nil, cancellation: RenderCancellation? = nil) throws(TesseraError) -> [Float] {
        let width = columns * k, height = rows * k
        let decoder = CellDecoder(cellWidth: width, cellHeight: height, budget: budget ?? DecodeBudget(budgetBytes: 64 << 20, workers: 1),
                                  cancellation: cancellation)
        var pixels = [UInt8](repeating: 0, count: decoder.cellBytes)
        try pixels.withUnsafeMutableBytes { bytes in
            Result { () throws(TesseraError) in _ = try decoder.decode(path: path, into: bytes) }
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
