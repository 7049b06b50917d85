// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Tessera",
    products: [
        .library(name: "Tessera", targets: ["Tessera"]),
        .executable(name: "tessera", targets: ["tessera"]),
    ],
    targets: [
        // C libraries from Debian: libjpeg62-turbo-dev; for the other formats and colour,
        // libspng-dev, libwebp-dev, libheif-dev (with libdav1d-dev: AV1 on one thread,
        // tessera_av1.c), libgif-dev, libtiff-dev and liblcms2-dev (used
        // from C only). EXIF is read by Tessera's own bounded reader (tessera_exif.c).
        .systemLibrary(name: "CJPEG", path: "Sources/CJPEG"),
        // The setjmp-guarded libjpeg calls, the bounded EXIF reader, and the PNG,
        // WebP, HEIF, GIF, TIFF and Little CMS readers behind plain C structs.
        // The system-library targets' `link` lines reach only Swift importers, so the libraries are
        // named here as well for this C target.
        // Tessera's own decoding pieces, not a shim: the DC decoder (multi-scan JPEGs at 1/8),
        // the row store, and the coefficient arrays the libjpeg shim installs.
        .target(name: "CTesseraCodec", dependencies: ["CJPEG"], path: "Sources/CTesseraCodec"),
        .target(name: "CTesseraShims", dependencies: ["CJPEG", "CTesseraCodec"], path: "Sources/CTesseraShims",
                linkerSettings: [.linkedLibrary("jpeg"), .linkedLibrary("spng"),
                                 .linkedLibrary("webp"), .linkedLibrary("webpdemux"), .linkedLibrary("heif"),
                                 .linkedLibrary("lcms2"), .linkedLibrary("gif"), .linkedLibrary("tiff"), .linkedLibrary("dav1d"),
                                 .linkedLibrary("z")]),
        // The engine: photos in, stripes, encoder out. Never prints.
        .target(name: "Tessera", dependencies: ["CTesseraShims", "CTesseraCodec"], path: "Sources/Tessera"),
        // Command-line parsing and help, testable without running a process.
        .target(name: "TesseraCLI", dependencies: ["Tessera"], path: "Sources/TesseraCLI"),
        // The thin executable: parse, call the library, draw progress, map errors to exit codes.
        .executableTarget(name: "tessera", dependencies: ["TesseraCLI", "Tessera"], path: "Sources/tessera"),
        // Helpers for the tests and the benchmark that the library does not ship: whole-image JPEG
        // files in memory, generated sample photos.
        .target(name: "TesseraTestSupport", dependencies: ["Tessera"], path: "Tests/TesseraTestSupport"),
        // What the tests make with libheif, Little CMS and libjpeg that Debian's tools cannot: HEICs
        // turned by irot/imir boxes, a Display P3 profile, libraries of 100,000 distinct JPEGs.
        .target(name: "CTesseraTestShims", path: "Tests/CTesseraTestShims",
                linkerSettings: [.linkedLibrary("heif"), .linkedLibrary("lcms2"), .linkedLibrary("jpeg")]),
        // Performance instrument, no test framework: `swift run -c release tessera-bench`.
        .executableTarget(name: "tessera-bench", dependencies: ["Tessera", "TesseraTestSupport", "CTesseraTestShims"], path: "Benchmarks"),
        // The README's library example, built (and run) by the tests so that it stays true.
        .executableTarget(name: "tessera-example", dependencies: ["Tessera"], path: "Examples/LibraryExample"),
        // Mutation fuzzer for decode + EXIF + orientation: `scripts/fuzz.sh SECONDS`. Not run by CI.
        .executableTarget(name: "tessera-fuzz", dependencies: ["Tessera"], path: "Fuzz"),
        .testTarget(name: "TesseraTests", dependencies: ["Tessera", "CTesseraShims", "CTesseraCodec", "TesseraTestSupport", "CTesseraTestShims"], path: "Tests/TesseraTests",
                    exclude: ["Fixtures"]),
        .testTarget(name: "TesseraCLITests", dependencies: ["TesseraCLI", "tessera", "tessera-example", "CTesseraTestShims", "TesseraTestSupport"], path: "Tests/TesseraCLITests"),
    ]
)
