// Oklab.swift — sRGB <-> Oklab (Björn Ottosson's perceptual colour space), for matching photos to
// a target by how alike their colours look.

/// A colour in Oklab: L lightness (0...1), a green-red, b blue-yellow.
public struct OklabColor: Equatable, Sendable {
    public var l: Float, a: Float, b: Float
    public init(l: Float, a: Float, b: Float) { self.l = l; self.a = a; self.b = b }

    /// Squared Euclidean distance.
    @inline(__always)
    public func distanceSquared(_ other: OklabColor) -> Float {
        let dl = l - other.l, da = a - other.a, db = b - other.b
        return dl * dl + da * da + db * db
    }
}

public enum Oklab {
    /// sRGB byte → linear light, tabulated.
    private static let linear: [Float] = (0..<256).map { value in
        let c = Float(value) / 255
        return c <= 0.04045 ? c / 12.92 : Float(pow(Double((c + 0.055) / 1.055), 2.4))
    }

    /// An sRGB colour (bytes) in Oklab.
    public static func fromSRGB(_ red: UInt8, _ green: UInt8, _ blue: UInt8) -> OklabColor {
        return fromLinear(linear[Int(red)], linear[Int(green)], linear[Int(blue)])
    }

    /// A mean linear-light colour in Oklab.
    public static func fromLinear(_ r: Float, _ g: Float, _ b: Float) -> OklabColor {
        let l = cbrtf(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b)
        let m = cbrtf(0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b)
        let s = cbrtf(0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b)
        return OklabColor(l: 0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s,
                          a: 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s,
                          b: 0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s)
    }

    /// Linear light of an sRGB byte.
    @inline(__always)
    public static func linearLight(_ value: UInt8) -> Float { linear[Int(value)] }

    /// An Oklab colour as sRGB (each channel 0...255, unclamped float).
    public static func toSRGB(_ color: OklabColor) -> (Float, Float, Float) {
        let l_ = color.l + 0.3963377774 * color.a + 0.2158037573 * color.b
        let m_ = color.l - 0.1055613458 * color.a - 0.0638541728 * color.b
        let s_ = color.l - 0.0894841775 * color.a - 1.2914855480 * color.b
        let l = l_ * l_ * l_, m = m_ * m_ * m_, s = s_ * s_ * s_
        let r = 4.0767416621 * l - 3.3077115913 * m + 0.2309699292 * s
        let g = -1.2684380046 * l + 2.6097574011 * m - 0.3413193965 * s
        let b = -0.0041960863 * l - 0.7034186147 * m + 1.7076147010 * s
        func encode(_ c: Float) -> Float {
            let clamped = min(max(c, 0), 1)
            let v = clamped <= 0.0031308 ? 12.92 * clamped : Float(1.055 * pow(Double(clamped), 1 / 2.4) - 0.055)
            return v * 255
        }
        return (encode(r), encode(g), encode(b))
    }
}

import Glibc
