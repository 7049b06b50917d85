// ResamplerTests.swift — the area resampler against block means, the centre crop, and an
// area-weighted mean computed here in double precision for many sizes and crops (its
// horizontal pass pads every pixel to the same tap count and reads four bytes at a time, so
// the edges of the row are where it could go wrong).
import Glibc
import Testing
import CTesseraShims
@testable import Tessera

@Suite struct ResamplerTests {
    @Test func integerDownscaleIsTheBlockMean() {
        // 8 x 4 input, values chosen per pixel; 2 x 1 output averages 4 x 4 blocks.
        let width = 8, height = 4
        var input = [UInt8](repeating: 0, count: width * height * 3)
        for i in 0..<(width * height) {
            input[i * 3] = UInt8((i * 37) % 256)
            input[i * 3 + 1] = UInt8((i * 11) % 256)
            input[i * 3 + 2] = UInt8(i % 2 == 0 ? 255 : 0)
        }
        var resampler = AreaResampler(inputWidth: width, cropX: 0, cropY: 0, cropWidth: 8, cropHeight: 4,
                                      outputWidth: 2, outputHeight: 1)
        var output: [[UInt8]] = []
        input.withUnsafeBufferPointer { pixels in
            for row in 0..<height {
                resampler.push(row: row, pixels: pixels.baseAddress! + row * width * 3) { _, out in output.append(Array(out)) }
            }
        }
        resampler.finish { _, out in output.append(Array(out)) }
        #expect(output.count == 1)
        for block in 0..<2 {
            for channel in 0..<3 {
                var sum = 0
                for y in 0..<4 { for x in (block * 4)..<(block * 4 + 4) { sum += Int(input[(y * width + x) * 3 + channel]) } }
                let mean = Double(sum) / 16
                #expect(abs(Double(output[0][block * 3 + channel]) - mean) <= 0.51)
            }
        }
    }

    @Test func cropTakesTheCentre() {
        // 6 x 2 input whose middle two columns are white: a 2 x 2 crop at x = 2 is all white.
        var input = [UInt8](repeating: 0, count: 6 * 2 * 3)
        for y in 0..<2 { for x in 2..<4 { for c in 0..<3 { input[(y * 6 + x) * 3 + c] = 255 } } }
        var resampler = AreaResampler(inputWidth: 6, cropX: 2, cropY: 0, cropWidth: 2, cropHeight: 2, outputWidth: 1, outputHeight: 1)
        var output: [UInt8] = []
        input.withUnsafeBufferPointer { pixels in
            for row in 0..<2 { resampler.push(row: row, pixels: pixels.baseAddress! + row * 18) { _, out in output = Array(out) } }
        }
        #expect(output == [255, 255, 255])
    }

    /// (input width, height, crop x, y, width, height, output width, height): downscales, upscales,
    /// crops off the edges, rows narrower than the taps, the collage's 480 to 400.
    static let sizes: [(Int, Int, Double, Double, Double, Double, Int, Int)] = [
        (5, 3, 0.0, 0.0, 5.0, 3.0, 3, 2), (7, 4, 0.0, 0.0, 7.0, 4.0, 7, 4), (9, 5, 1.5, 0.5, 6.0, 4.0, 4, 3),
        (3, 3, 0.0, 0.0, 3.0, 3.0, 10, 7), (40, 6, 0.0, 0.0, 40.0, 6.0, 17, 3), (41, 5, 2.25, 0.0, 38.5, 5.0, 13, 2),
        (1, 1, 0.0, 0.0, 1.0, 1.0, 4, 4), (33, 2, 0.0, 0.0, 33.0, 2.0, 5, 1), (16, 2, 0.0, 0.0, 16.0, 2.0, 9, 2),
        (480, 2, 0.0, 0.0, 480.0, 2.0, 400, 2), (100, 3, 20.0, 0.0, 60.0, 3.0, 61, 3)]

    /// Every output pixel of `width` x `height` input scaled from crop (x, y, w, h) to
    /// `outWidth` x `outHeight`, against the area-weighted mean of the input it covers.
    @Test(arguments: 0..<sizes.count)
    func everyPixelIsTheAreaMeanOfWhatItCovers(_ number: Int) {
        let c = Self.sizes[number]
        let (width, height, cropX, cropY, cropWidth, cropHeight, outWidth, outHeight) = c
        var input = [UInt8](repeating: 0, count: width * height * 3)
        for i in input.indices { input[i] = UInt8(((i &* 2_654_435_761) >> 7) & 255) }
        var resampler = AreaResampler(inputWidth: width, cropX: cropX, cropY: cropY, cropWidth: cropWidth, cropHeight: cropHeight,
                                      outputWidth: outWidth, outputHeight: outHeight)
        var output = [[UInt8]](repeating: [], count: outHeight)
        input.withUnsafeBufferPointer { pixels in
            for row in 0..<height {
                resampler.push(row: row, pixels: pixels.baseAddress! + row * width * 3) { index, out in output[index] = Array(out) }
            }
        }
        resampler.finish { index, out in output[index] = Array(out) }
        func overlap(_ i: Int, _ low: Double, _ high: Double) -> Double { max(0, min(Double(i + 1), high) - max(Double(i), low)) }
        var worst = 0.0
        for oy in 0..<outHeight {
            #expect(output[oy].count == outWidth * 3)
            guard output[oy].count == outWidth * 3 else { continue }
            let top = cropY + Double(oy) * cropHeight / Double(outHeight), bottom = top + cropHeight / Double(outHeight)
            for ox in 0..<outWidth {
                let left = cropX + Double(ox) * cropWidth / Double(outWidth), right = left + cropWidth / Double(outWidth)
                for channel in 0..<3 {
                    var sum = 0.0, weight = 0.0
                    for y in 0..<height {
                        let wy = overlap(y, top, bottom)
                        for x in 0..<width where wy > 0 {
                            let w = wy * overlap(x, left, right)
                            sum += w * Double(input[(y * width + x) * 3 + channel])
                            weight += w
                        }
                    }
                    worst = max(worst, abs(Double(output[oy][ox * 3 + channel]) - sum / weight))
                }
            }
        }
        // Rounding to a byte is half a level; single precision adds a little.
        #expect(worst <= 0.51, "worst difference \(worst) for \(c)")
    }

    /// The AVX2 loops (tessera_resample.c) against the baseline's on the same rows: the same bytes,
    /// for downscales, upscales, crops and widths that end inside and outside the 8-pixel steps.
    /// (On a processor without AVX2 both runs take the baseline's loops, and agree trivially.)
    @Test func theWideLoopsGiveTheBaselinesBytes() {
        var random = SplitMix64(seed: 31)
        func resample(_ input: [UInt8], _ c: (Int, Int, Double, Double, Double, Double, Int, Int)) -> [UInt8] {
            var resampler = AreaResampler(inputWidth: c.0, cropX: c.2, cropY: c.3, cropWidth: c.4, cropHeight: c.5,
                                          outputWidth: c.6, outputHeight: c.7)
            var output = [UInt8](repeating: 0, count: c.6 * c.7 * 3)
            let store = { (index: Int, out: UnsafeBufferPointer<UInt8>) in
                for i in out.indices { output[index * c.6 * 3 + i] = out[i] }
            }
            input.withUnsafeBufferPointer { pixels in
                for row in 0..<c.1 { resampler.push(row: row, pixels: pixels.baseAddress! + row * c.0 * 3, emit: store) }
            }
            resampler.finish(emit: store)
            return output
        }
        var cases = Self.sizes
        for _ in 0..<40 {
            let width = 1 + Int(random.next() % 700), height = 1 + Int(random.next() % 40)
            let cropX = Double(random.next() % UInt64(max(1, width / 4))), cropWidth = Double(width) - cropX * 2
            cases.append((width, height, cropX, 0, max(1, cropWidth), Double(height), 1 + Int(random.next() % 900), 1 + Int(random.next() % 50)))
        }
        for c in cases {
            var input = [UInt8](repeating: 0, count: c.0 * c.1 * 3)
            for i in input.indices { input[i] = UInt8(truncatingIfNeeded: random.next()) }
            _ = tessera_resample_use_avx2(0)
            let baseline = resample(input, c)
            _ = tessera_resample_use_avx2(1)
            let wide = resample(input, c)
            let differing = zip(baseline, wide).filter { $0 != $1 }.count
            #expect(baseline.count == wide.count && differing == 0, "\(differing) of \(baseline.count) bytes differ for \(c)")
        }
    }
}
