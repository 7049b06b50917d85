// AreaResampler.swift — streaming area-average (box filter) resampling of a cropped region.
//
// Rows are pushed in order, top to bottom; finished output rows are emitted as soon as every
// input row covering them has arrived. Memory: one float accumulator row of the output width
// and one horizontally resampled row, whatever the input height.

/// Resamples the rectangle [cropX, cropX + cropWidth) x [cropY, cropY + cropHeight) of a stream of
/// `inputWidth`-pixel RGB rows to `outputWidth` x `outputHeight`, each output pixel the
/// area-weighted mean of the input pixels it covers. Works for upscaling too (each output pixel
/// then covers a fraction of one input pixel, or straddles two).
import CTesseraShims

struct AreaResampler {
    let inputWidth: Int
    let outputWidth: Int
    let outputHeight: Int
    private let cropY: Double
    private let rowsPerOutput: Double
    /// For output column x: the first input column and its `taps` weights at
    /// `weights[x * taps ...]`. Every column has `taps` of them, the most any column needs: the
    /// others are padded with zeros (the sums are the same to the bit, tessera_resample.c), at
    /// the front when the padding would run past the row's last pixel.
    private var firsts: [Int32] = []
    private var taps: Int32 = 1
    private var weights: [Float] = []
    /// The output columns before this read no further than the byte after their last tap
    /// without leaving the row (tessera_resample.c's vector loop).
    private var vectorEnd = 0
    private var horizontal: [Float]
    private var accumulator: [Float]
    /// The output row being emitted.
    private var out: [UInt8]
    private var accumulatedWeight: Double = 0
    /// The next output row to emit.
    private(set) var nextOutputRow = 0
    /// The first input row past the crop: rows from here on are not needed.
    let inputRowsNeeded: Int

    init(inputWidth: Int, cropX: Double, cropY: Double, cropWidth: Double, cropHeight: Double,
         outputWidth: Int, outputHeight: Int) {
        precondition(outputWidth > 0 && outputHeight > 0 && cropWidth > 0 && cropHeight > 0)
        self.inputWidth = inputWidth
        self.outputWidth = outputWidth
        self.outputHeight = outputHeight
        self.cropY = cropY
        rowsPerOutput = cropHeight / Double(outputHeight)
        inputRowsNeeded = min(Int((cropY + cropHeight).rounded(.up)), Int.max)
        // One float past the last pixel's three: the vector loop stores four.
        horizontal = [Float](repeating: 0, count: outputWidth * 3 + 1)
        accumulator = [Float](repeating: 0, count: outputWidth * 3)
        out = [UInt8](repeating: 0, count: outputWidth * 3)
        let columnsPerOutput = cropWidth / Double(outputWidth)
        var spans: [(first: Int, last: Int)] = []
        spans.reserveCapacity(outputWidth)
        var widest = 1
        for x in 0..<outputWidth {
            let left = cropX + Double(x) * columnsPerOutput
            let right = left + columnsPerOutput
            let first = max(0, Int(left.rounded(.down)))
            let last = min(inputWidth - 1, max(first, Int(right.rounded(.up)) - 1))
            spans.append((first, last))
            widest = max(widest, last - first + 1)
        }
        taps = Int32(widest)
        weights = [Float](repeating: 0, count: outputWidth * widest)
        firsts.reserveCapacity(outputWidth)
        for x in 0..<outputWidth {
            let left = cropX + Double(x) * columnsPerOutput
            let right = left + columnsPerOutput
            let (first, last) = spans[x]
            // Padding after the taps while it stays inside the row, before them past that.
            let padded = min(first, inputWidth - widest)
            var total: Double = 0
            for i in first...last { total += max(0, min(Double(i + 1), right) - max(Double(i), left)) }
            for i in first...last {
                let overlap = max(0, min(Double(i + 1), right) - max(Double(i), left))
                weights[x * widest + i - padded] = total > 0 ? Float(overlap / total) : Float(1 / Double(last - first + 1))
            }
            firsts.append(Int32(padded))
            if padded + widest < inputWidth { vectorEnd = x + 1 }
        }
    }

    /// Adds input row `index` (RGB, `inputWidth` pixels). Calls `emit(row, pixels)` for each
    /// output row this completes, with `outputWidth` RGB pixels.
    mutating func push(row index: Int, pixels: UnsafePointer<UInt8>,
                       emit: (Int, UnsafeBufferPointer<UInt8>) -> Void) {
        guard nextOutputRow < outputHeight else { return }
        let rowTop = Double(index), rowBottom = Double(index + 1)
        // Skip rows entirely above the crop.
        if rowBottom <= cropY { return }
        resampleHorizontally(pixels)
        while nextOutputRow < outputHeight {
            let top = cropY + Double(nextOutputRow) * rowsPerOutput
            let bottom = top + rowsPerOutput
            let overlap = min(rowBottom, bottom) - max(rowTop, top)
            if overlap > 0 {
                let weight = Float(overlap)
                accumulatedWeight += overlap
                horizontal.withUnsafeBufferPointer { h in
                    accumulator.withUnsafeMutableBufferPointer { a in
                        tessera_resample_accumulate(a.baseAddress!, h.baseAddress!, weight, a.count)
                    }
                }
            }
            // Emit when this input row reaches the bottom of the output row (within rounding).
            if bottom <= rowBottom + 1e-9 {
                emitRow(emit)
            } else {
                break
            }
        }
    }

    /// Emits whatever output rows are still open (rounding can leave the last one unclosed).
    mutating func finish(emit: (Int, UnsafeBufferPointer<UInt8>) -> Void) {
        while nextOutputRow < outputHeight { emitRow(emit) }
    }

    private mutating func resampleHorizontally(_ pixels: UnsafePointer<UInt8>) {
        let (width, taps, vectorEnd) = (outputWidth, taps, vectorEnd)
        firsts.withUnsafeBufferPointer { first in
            weights.withUnsafeBufferPointer { w in
                horizontal.withUnsafeMutableBufferPointer { h in
                    tessera_resample_horizontal(pixels, first.baseAddress!, taps, w.baseAddress!, h.baseAddress!, width, vectorEnd)
                }
            }
        }
    }

    private mutating func emitRow(_ emit: (Int, UnsafeBufferPointer<UInt8>) -> Void) {
        let scale: Float = accumulatedWeight > 0 ? Float(1 / accumulatedWeight) : 0
        // Into a row kept for the resampler's life, in C (tessera_resample.c): no allocation, and a
        // loop the compiler vectorises (a 400 x 300 cell spent most of its decode here).
        let count = outputWidth * 3
        accumulator.withUnsafeMutableBufferPointer { a in
            out.withUnsafeMutableBufferPointer { o in tessera_resample_emit_row(a.baseAddress!, scale, o.baseAddress!, count) }
        }
        accumulatedWeight = 0
        out.withUnsafeBufferPointer { emit(nextOutputRow, $0) }
        nextOutputRow += 1
    }
}
