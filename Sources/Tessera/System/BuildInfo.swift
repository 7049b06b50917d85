// BuildInfo.swift — what a binary was built from and what it runs with, for the version report.
import CTesseraShims

public enum BuildInfo {
    /// The commit the build was given (scripts/build-release.sh passes `git rev-parse`), or nil
    /// for a build that was not given one (a plain `swift build`).
    public static var commit: String? {
        let text = String(cString: tessera_build_commit())
        return text.isEmpty ? nil : text
    }

    /// The image libraries Tessera links, with their versions: libjpeg-turbo's from the headers
    /// it was built with (like giflib's, it has no run-time call), the others from the library loaded.
    public static var libraries: [(name: String, version: String)] {
        func text(_ fill: (UnsafeMutablePointer<CChar>, Int32) -> Void) -> String {
            var buffer = [CChar](repeating: 0, count: 32)
            buffer.withUnsafeMutableBufferPointer { fill($0.baseAddress!, Int32($0.count)) }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return [
            ("libjpeg-turbo", String(cString: tessera_libjpeg_turbo_version())),
            ("libheif", String(cString: tessera_libheif_version())),
            ("libwebp", text { tessera_libwebp_version($0, $1) }),
            ("libspng", String(cString: tessera_libspng_version())),
            ("lcms2", text { tessera_lcms2_version($0, $1) }),
            ("giflib", String(cString: tessera_giflib_version())),
            ("libtiff", text { tessera_libtiff_version($0, $1) }),
        ]
    }
}
