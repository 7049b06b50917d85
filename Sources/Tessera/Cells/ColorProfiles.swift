// ColorProfiles.swift — photos in other colour spaces (Display P3 from phones, Adobe RGB from
// cameras) converted to sRGB before they are drawn, with Little CMS (tessera_color.c).
//
// One transform per distinct profile, made on first use and kept for the process (keyed by a
// hash of the ICC bytes, or by the H.273 tags). A conversion runs on a photo's pixels once they
// are reduced to the cell, not on the full-size rows: a cell of 150 x 150 px costs 22,500 pixel
// conversions whatever the camera. (Reducing first averages encoded values rather than
// converted ones; for a matrix profile the difference is a fraction of a level.) Photos without
// a profile, or with a profile that is sRGB in all but name, are drawn as they are, so their
// output stays byte-identical to a build without colour management.
import CTesseraShims

/// What a decode does to its pixels to make them sRGB.
struct ColorConversion: @unchecked Sendable {
    /// An lcms2 transform (shared; never freed while cached), or nil: nothing to do.
    fileprivate let transform: UnsafeMutableRawPointer?
    /// Freed after use: made when the cache was full.
    fileprivate let owned: Bool
    /// Why a profile the photo carries could not be used (drawn unconverted, with a warning).
    let problem: String?
    /// From CMYK inks (`applyCMYK`, on the decoded rows), not from RGB (`apply`, on the cell).
    var fromCMYK = false

    static let none = ColorConversion(transform: nil, owned: false, problem: nil)

    /// No conversion, for a profile that is not used: the photo is drawn with a warning.
    static func unused(_ problem: String, fromCMYK: Bool) -> ColorConversion {
        var made = ColorConversion(transform: nil, owned: false, problem: problem)
        made.fromCMYK = fromCMYK
        return made
    }

    var converts: Bool { transform != nil }

    /// Converts `pixels` RGB pixels in place (nothing for a conversion from CMYK).
    func apply(_ rgb: UnsafeMutableRawPointer, pixels: Int) {
        guard let transform, !fromCMYK, pixels > 0 else { return }
        tessera_color_transform_apply(transform, rgb.assumingMemoryBound(to: UInt8.self), pixels)
    }

    /// Converts `pixels` CMYK pixels into RGB; false when this is no conversion from CMYK.
    func applyCMYK(_ cmyk: UnsafePointer<UInt8>, into rgb: UnsafeMutablePointer<UInt8>, pixels: Int) -> Bool {
        guard let transform, fromCMYK else { return false }
        if pixels > 0 { tessera_color_transform_apply_cmyk(transform, cmyk, rgb, pixels) }
        return true
    }

    /// Lets go of a transform made outside the cache.
    func release() {
        if owned { tessera_color_transform_free(transform) }
    }
}

enum ColorProfiles {
    /// Distinct profiles kept; past this (a hostile folder of unique profiles) each decode
    /// makes and frees its own.
    static let cacheLimit = 256
    /// The most the kept transforms may hold in all (a matrix profile's, Adobe RGB's or
    /// ProPhoto's, keeps 150 KB of Little CMS's 8-bit tables: about 50 of them): past it, each
    /// decode makes and frees its own.
    static let cacheBytesLimit = 8 << 20

    private final class Cache: @unchecked Sendable {
        let lock = Mutex()
        var entries: [UInt64: (transform: UnsafeMutableRawPointer?, problem: String?)] = [:]
        var bytes = 0
        /// One transform is made at a time: what Little CMS may hold while it makes one
        /// (TESSERA_COLOR_MAKING_BYTES) is then held once, not once a worker.
        let making = Mutex()
    }
    private static let cache = Cache()

    /// FNV-1a, 64 bits: a profile's key (ICC profiles are a few kilobytes).
    static func fingerprint(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var hash: UInt64 = 0xcbf29ce484222325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x100000001b3
        }
        return hash ^ UInt64(bytes.count)
    }

    private static func cicpKey(primaries: Int, transfer: Int) -> UInt64 {
        0xC1C9_0000_0000_0000 | UInt64(primaries & 0xFF) << 8 | UInt64(transfer & 0xFF)
    }

    /// The conversion for an embedded ICC profile (empty: none).
    static func conversion(icc: UnsafeRawBufferPointer) -> ColorConversion {
        guard icc.count > 0, let base = icc.baseAddress else { return .none }
        // Refused before a byte of it is read (a mapped file's pages stay out of memory).
        if icc.count > Int(TESSERA_COLOR_MAKING_BYTES) {
            return ColorConversion(transform: nil, owned: false,
                                   problem: "its ICC profile of \(icc.count) bytes is larger than a profile may be (\(TESSERA_COLOR_MAKING_BYTES >> 20) MiB)")
        }
        return conversion(key: fingerprint(icc)) { isSRGB, message in
            tessera_color_transform_from_icc(base.assumingMemoryBound(to: UInt8.self), icc.count, &isSRGB, message, 200)
        }
    }

    /// A CMYK JPEG's key: its profile's, apart from the same bytes read as RGB, and by the ink
    /// convention (Adobe's inverted inks or not).
    private static func cmykKey(_ icc: UnsafeRawBufferPointer, inverted: Bool) -> UInt64 {
        fingerprint(icc) ^ (inverted ? 0xC3C4_0000_0000_0001 : 0xC3C4_0000_0000_0002)
    }

    /// The conversion of a CMYK JPEG's or TIFF's inks through its embedded CMYK profile (empty: none,
    /// and the inks are converted by formula, as they are when the profile cannot be used).
    static func conversion(cmykICC icc: UnsafeRawBufferPointer, inverted: Bool) -> ColorConversion {
        guard icc.count > 0, let base = icc.baseAddress else { return .none }
        if icc.count > Int(TESSERA_COLOR_MAKING_BYTES) {
            return ColorConversion(transform: nil, owned: false,
                                   problem: "its ICC profile of \(icc.count) bytes is larger than a profile may be (\(TESSERA_COLOR_MAKING_BYTES >> 20) MiB)")
        }
        var made = conversion(key: cmykKey(icc, inverted: inverted)) { _, message in
            tessera_color_transform_from_cmyk_icc(base.assumingMemoryBound(to: UInt8.self), icc.count, inverted ? 1 : 0, message, 200)
        }
        made.fromCMYK = true
        return made
    }

    /// The tag a CMYK photo's header keeps: nil when its inks are converted by formula.
    static func tag(cmykICC icc: UnsafeRawBufferPointer, inverted: Bool) -> UInt64? {
        let made = conversion(cmykICC: icc, inverted: inverted)
        defer { made.release() }
        return made.converts ? cmykKey(icc, inverted: inverted) : nil
    }

    /// The conversion for H.273 colour primaries and transfer characteristics.
    static func conversion(primaries: Int, transfer: Int) -> ColorConversion {
        conversion(key: cicpKey(primaries: primaries, transfer: transfer)) { isSRGB, message in
            tessera_color_transform_from_cicp(Int32(primaries), Int32(transfer), &isSRGB, message, 200)
        }
    }

    /// The conversion for a photo tagged with an ICC profile (empty: none) and/or H.273 code
    /// points (`primaries` < 0: none); the profile wins when it has both, as in browsers.
    static func conversion(icc: UnsafeRawBufferPointer, primaries: Int32, transfer: Int32) -> ColorConversion {
        if icc.count > 0 { return conversion(icc: icc) }
        return primaries >= 0 ? conversion(primaries: Int(primaries), transfer: Int(transfer)) : .none
    }

    /// The tag a photo's header keeps for the same: nil when nothing is converted.
    static func tag(icc: UnsafeRawBufferPointer, primaries: Int32, transfer: Int32) -> UInt64? {
        if icc.count > 0 { return tag(icc: icc) }
        return primaries >= 0 ? tag(primaries: Int(primaries), transfer: Int(transfer)) : nil
    }

    /// A profile a C reader hands over (NULL: none), as bytes.
    static func bytes(_ start: UnsafePointer<UInt8>?, count: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: start, count: start == nil ? 0 : count)
    }

    /// The tag a photo's header keeps: nil when nothing is converted.
    static func tag(icc: UnsafeRawBufferPointer) -> UInt64? {
        let made = conversion(icc: icc)
        defer { made.release() }
        return made.converts ? fingerprint(icc) : nil
    }

    static func tag(primaries: Int, transfer: Int) -> UInt64? {
        let made = conversion(primaries: primaries, transfer: transfer)
        defer { made.release() }
        return made.converts ? cicpKey(primaries: primaries, transfer: transfer) : nil
    }

    private static func conversion(key: UInt64,
                                   make: (inout Int32, UnsafeMutablePointer<CChar>) -> UnsafeMutableRawPointer?) -> ColorConversion {
        if let entry = cache.lock.withLock({ cache.entries[key] }) {
            return ColorConversion(transform: entry.transform, owned: false, problem: entry.problem)
        }
        var isSRGB: Int32 = 0
        var message = [CChar](repeating: 0, count: 200)
        let transform = cache.making.withLock { message.withUnsafeMutableBufferPointer { make(&isSRGB, $0.baseAddress!) } }
        let problem: String? = transform == nil && isSRGB == 0 ? cMessage(message) : nil
        let bytes = tessera_color_transform_bytes(transform)
        let kept: (transform: UnsafeMutableRawPointer?, problem: String?)? = cache.lock.withLock {
            if let existing = cache.entries[key] { return existing }  // another worker made it first
            guard cache.entries.count < cacheLimit, cache.bytes + bytes <= cacheBytesLimit else { return nil }
            cache.bytes += bytes
            cache.entries[key] = (transform, problem)
            return (transform, problem)
        }
        guard let kept else { return ColorConversion(transform: transform, owned: true, problem: problem) }
        if kept.transform != transform { tessera_color_transform_free(transform) }
        return ColorConversion(transform: kept.transform, owned: false, problem: kept.problem)
    }
}
