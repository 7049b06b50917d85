// ResamplerTests.swift — the area resampler against block means and the centre crop.
import Glibc
import Testing
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
}
