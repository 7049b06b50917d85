// SamplePhotos.swift — generated stand-ins for a photo library (demo and benchmark).
//
// Each picture is a smooth two-colour gradient with waves at several scales and grain, so that
// after downscaling to a cell it has photo-like detail (and costs the encoder what a photo does).
// Deterministic for a seed.
import Glibc
import Tessera

public enum SamplePhotos {
    /// Writes `count` JPEGs named photo-0000.jpg... into `directory` (which must exist), alternately
    /// landscape (`longSide` x 3/4) and portrait. Existing files of the same name are replaced.
    /// Returns their paths.
    public static func generate(count: Int, in directory: String, longSide: Int = 1600, seed: UInt64 = 1) throws(TesseraError) -> [String] {
        var paths: [String] = []
        for index in 0..<count {
            let path = directory + "/photo-" + String(repeating: "0", count: max(0, 4 - String(index).count)) + String(index) + ".jpg"
            let landscape = index % 3 != 2
            let width = landscape ? longSide : longSide * 3 / 4
            let height = landscape ? longSide * 3 / 4 : longSide
            try JPEGFile.write(picture(width: width, height: height, seed: seed &+ UInt64(index) &* 7919), to: path, quality: 88)
            paths.append(path)
        }
        return paths
    }

    /// One generated picture.
    public static func picture(width: Int, height: Int, seed: UInt64) -> RGBImage {
        var random = SplitMix64(seed: seed)
        func unit() -> Double { Double(random.next() >> 11) / Double(1 << 53) }
        let from = (unit() * 255, unit() * 255, unit() * 255)
        let to = (unit() * 255, unit() * 255, unit() * 255)
        // Waves along x, along y and diagonally, each with its own period and colour weight.
        func wave(_ length: Int, period: Double, amplitude: Double) -> [Double] {
            let phase = unit() * 6.283
            return (0..<length).map { amplitude * sin(Double($0) / period * 6.283 + phase) }
        }
        let coarseX = wave(width, period: Double(width) / (1 + unit() * 3), amplitude: 40)
        let coarseY = wave(height, period: Double(height) / (1 + unit() * 3), amplitude: 40)
        let fineX = wave(width, period: 6 + unit() * 40, amplitude: 18)
        let fineY = wave(height, period: 6 + unit() * 40, amplitude: 18)
        let tint = (0.6 + unit() * 0.8, 0.6 + unit() * 0.8, 0.6 + unit() * 0.8)
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var grain = SplitMix64(seed: seed ^ 0xA5A5)
        pixels.withUnsafeMutableBufferPointer { out in
            for y in 0..<height {
                let t = Double(y) / Double(max(1, height - 1))
                let base = (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t, from.2 + (to.2 - from.2) * t)
                for x in 0..<width {
                    let shade = coarseX[x] + coarseY[y] + fineX[x] * (t + 0.2) + fineY[y] * 0.5
                    let noise = Double(Int(grain.next() & 31) - 16)
                    let i = (y * width + x) * 3
                    out[i] = clampByte(base.0 + shade * tint.0 + noise)
                    out[i + 1] = clampByte(base.1 + shade * tint.1 + noise)
                    out[i + 2] = clampByte(base.2 + shade * tint.2 + noise)
                }
            }
        }
        return RGBImage(width: width, height: height, pixels: pixels)
    }

    @inline(__always)
    private static func clampByte(_ value: Double) -> UInt8 {
        value <= 0 ? 0 : value >= 255 ? 255 : UInt8(value)
    }
}
