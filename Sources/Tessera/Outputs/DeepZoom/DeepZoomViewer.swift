// DeepZoomViewer.swift — NAME.html: a page that pans and zooms the pyramid, from the local disk
// (the folder) or from any static web server (the folder, or the SZI by range requests).
//
// It uses Leaflet (vendored, BSD-2-Clause, inlined in the page with its licence) with its
// plain-pixel coordinate system: Leaflet zoom z shows the picture at 2^(z - maxLevel) of its
// size, so integer zooms are exactly the pyramid's levels. A grid layer places each Deep Zoom
// tile in a tileSize box and shifts it by the overlap, so tiles meet edge to edge. The page's
// script and stylesheet are DeepZoomViewerScript.swift; the SZI reader ViewerArchiveReader.swift.
//
// Files, beside NAME.dzi:
//     NAME.html                          the page (Leaflet inside it)
//     NAME_files/viewer/cells.js         the picture's shape and which photo is in each cell
// and beside NAME.szi:
//     NAME.html                          the same page, reading the archive
//     (in the archive) NAME/NAME_files/viewer/cells.js
// A folder and an SZI of one NAME in one folder share one page, which uses the folder when it
// can (from the disk, or when the server has it) and the archive otherwise.
//
// The page's address can carry a view: NAME.html#z=ZOOM&x=X&y=Y centres full-size pixel
// (X, Y) at Leaflet zoom ZOOM; the page keeps the address up to date as you move, so a view
// can be shared. Without a view in the address the page fits the whole picture. The body's
// data-view attribute holds the current zoom and centre.

import Glibc

/// Which photo is drawn in each cell, for the viewer's labels.
public struct CellLabels: Equatable, Sendable {
    public let columns: Int
    public let rows: Int
    public let cellWidth: Int
    public let cellHeight: Int
    /// The photos, whose names are shown (read one at a time as the labels are written: a
    /// library of a million is never a list of names).
    private let photos: PhotoTable
    /// File names, or paths as given.
    private let fileNamesOnly: Bool
    /// Which photo is in each cell (an index into the photos, or -1 for an empty cell); not
    /// copied into a table: a grid's cells are a function of their index.
    public let layout: CellLayout

    /// The labels `shown` asks for: file names, paths, or nil for none.
    public init?(layout: CellLayout, photos: PhotoTable, shown: ViewerLabels) {
        switch shown {
        case .none: return nil
        case .path: self.init(layout: layout, photos: photos, fileNamesOnly: false)
        case .name: self.init(layout: layout, photos: photos, fileNamesOnly: true)
        }
    }

    public init(layout: CellLayout, photoPaths: [String]) {
        self.init(layout: layout, photos: PhotoTable(photoPaths.map { Photo(path: $0, header: CellLabels.noHeader) }), fileNamesOnly: false)
    }

    private init(layout: CellLayout, photos: PhotoTable, fileNamesOnly: Bool) {
        columns = layout.columns
        rows = layout.rows
        cellWidth = layout.cellWidth
        cellHeight = layout.cellHeight
        self.photos = photos
        self.fileNamesOnly = fileNamesOnly
        self.layout = layout
    }

    /// How many names there are.
    public var nameCount: Int { photos.count }

    /// The name shown for photo `index`.
    public func name(_ index: Int) -> String {
        let path = photos[index].path
        guard fileNamesOnly else { return path }
        return path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
    }

    /// Every name, in photo order (small label sets, tests).
    public var names: [String] { (0..<nameCount).map(name) }

    public static func == (a: CellLabels, b: CellLabels) -> Bool {
        a.layout == b.layout && a.names == b.names
    }

    private static let noHeader = PhotoHeader(width: 1, height: 1, colorModel: .rgb, isProgressive: false, exifOrientation: 0,
                                              adobeInverted: false)
}

public enum DeepZoomViewer {
    /// Files written into NAME_files/viewer: cells.js (Leaflet is inlined in the page).
    static let assetCount = 1

    /// What the page is, in the outputs' list of files: one page may serve a folder and an SZI
    /// of the same NAME in the same folder.
    public static let pageRole = "the Deep Zoom viewer"

    /// What every page tessera writes holds in its first bytes (its title's end).
    static let pageMark = " — Tessera Deep Zoom</title>"

    /// Throws `.invalidSettings` when a file stands at the viewer page's `path` that is not a
    /// page tessera wrote (its title's mark in its first 64 KiB): somebody's index.html, which
    /// a pyramid named index.dzi would replace. Nothing there, or a page of ours, may be replaced.
    public static func checkReplaceablePage(_ path: String) throws(TesseraError) {
        guard case .success(let info) = linkStatus(path), (info.st_mode & S_IFMT) == S_IFREG else { return }
        guard let file = try? FileDescriptor.open(path, flags: O_RDONLY | O_NONBLOCK | O_NOFOLLOW) else { return }
        file.close()
        if isOwnPage(path) { return }
        throw .invalidSettings("\(path) exists and is not a viewer page tessera wrote, and the pyramid's viewer would replace it: "
                               + "move it away, choose another name for the pyramid, or write the pyramid without its viewer")
    }

    /// Whether `path` is a regular file holding the mark of a viewer page tessera wrote (in its
    /// first 64 KiB).
    static func isOwnPage(_ path: String) -> Bool {
        guard case .success(let info) = linkStatus(path), (info.st_mode & S_IFMT) == S_IFREG else { return false }
        guard let file = try? FileDescriptor.open(path, flags: O_RDONLY | O_NONBLOCK | O_NOFOLLOW) else { return false }
        defer { file.close() }
        var head = [UInt8](repeating: 0, count: 64 << 10)
        let count = head.withUnsafeMutableBytes { buffer in (try? file.read(into: buffer)) ?? 0 }
        let mark = Array(pageMark.utf8)
        return count >= mark.count
            && (0...(count - mark.count)).contains(where: { head[$0] == mark[0] && head[$0..<($0 + mark.count)].elementsEqual(mark) })
    }

    /// DIR/NAME.html for a pyramid at DIR/NAME.dzi or DIR/NAME.szi.
    public static func pagePath(for pyramid: String) -> String { String(pyramid.dropLast(4)) + ".html" }

    /// window.TESSERA (the pyramid's shape and the cell labels), handed to `write` 64 KiB at a
    /// time: a 20-gigapixel grid has close to a million cells, and the whole text at once would
    /// be several megabytes held at the render's end.
    static func cellsScript(name: String, geometry: DeepZoomGeometry, labels: CellLabels?, previews: Int = 0,
                            write: (UnsafeRawBufferPointer) throws(TesseraError) -> Void) throws(TesseraError) {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 16)
        func emit(_ text: String) throws(TesseraError) {
            buffer.append(contentsOf: text.utf8)
            if buffer.count >= 1 << 16 { try flush() }
        }
        func flush() throws(TesseraError) {
            try buffer.withUnsafeBytes { raw in Result { () throws(TesseraError) in try write(raw) } }.get()
            buffer.removeAll(keepingCapacity: true)
        }
        try emit("window.TESSERA = {\n")
        try emit("  name: \(jsonString(name)),\n")
        try emit("  width: \(geometry.width), height: \(geometry.height),\n")
        try emit("  tileSize: \(geometry.tileSize), overlap: \(geometry.overlap), maxLevel: \(geometry.maxLevel),\n")
        // The long side of the photos' previews in viewer/previews/P.jpg (0: none).
        if previews > 0 { try emit("  previews: \(previews),\n") }
        if let labels {
            try emit("  grid: {columns: \(labels.columns), rows: \(labels.rows), cellWidth: \(labels.cellWidth), cellHeight: \(labels.cellHeight)},\n")
            try emit("  names: [")
            for i in 0..<labels.nameCount { try emit((i > 0 ? ",\n    " : "") + jsonString(labels.name(i))) }
            try emit("],\n")
            try emit("  cells: [")
            for i in 0..<labels.layout.cellCount {
                let cell = labels.layout.photo(at: i)
                try emit(i == 0 ? "" : i % 40 == 0 ? ",\n    " : ",")
                try emit(String(cell))
            }
            try emit("]")
            if let framed = labels.layout.framed {
                // A layout of frames: each cell's x, y, width and height, top to bottom (the
                // page finds the cell under the pointer by its top edge).
                try emit(",\n  frames: [")
                for (i, frame) in framed.frames.enumerated() {
                    try emit(i == 0 ? "" : i % 10 == 0 ? ",\n    " : ",")
                    try emit("\(frame.x),\(frame.y),\(frame.width),\(frame.height)")
                }
                try emit("], tallest: \(framed.tallest)")
            }
            try emit("\n")
        } else {
            try emit("  grid: null, names: [], cells: []\n")
        }
        try emit("};\n")
        try flush()
    }

    /// A JSON string literal safe inside a script (see `jsonStringLiteral`).
    static func jsonString(_ text: String) -> String { jsonStringLiteral(text) }

    /// Escapes text for HTML element content and attribute values.
    static func htmlEscaped(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    /// `text` with every byte but the unreserved ones percent-encoded, for a relative URL.
    static func percentEncoded(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            if (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || "-._~".utf8.contains(byte) {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                encoded += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return encoded
    }

    /// The page, NAME.html, which needs nothing but what it names: `folder`, the folder
    /// NAME_files beside it; `archive`, NAME.szi beside it (both: the folder when it can, the
    /// archive otherwise). Leaflet and its licence are inside it (DeepZoomViewerScript.swift
    /// says how it works). `title` (nil: none) heads it and names the browser tab. Every name
    /// in it is relative.
    static func page(name: String, title: String? = nil, folder: Bool = true, archive: Bool = false) -> String {
        let folderName = name + "_files", archiveName = name + ".szi"
        var attributes = "data-page=\"\(htmlEscaped(name + ".html"))\" data-title=\"\(htmlEscaped(title ?? ""))\" "
            + "data-folder-name=\"\(htmlEscaped(folderName))\" data-archive-name=\"\(htmlEscaped(archiveName))\""
        if folder { attributes += " data-folder=\"\(percentEncoded(folderName))\"" }
        if archive { attributes += " data-archive=\"\(percentEncoded(archiveName))\"" }
        // The folder's cells.js by a <script> tag, which browsers load from file:// too; if it is
        // missing, window.TESSERA is not set and the page says so (or reads the archive).
        let cells = folder ? "<script src=\"\(percentEncoded(folderName))/viewer/cells.js\"></script>\n" : ""
        return """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(htmlEscaped(title ?? name)) — Tessera Deep Zoom</title>
        <style>
        \(LeafletAssets.css)
        </style>
        <style>
        \(DeepZoomViewerScript.style)
        </style>
        </head>
        <body data-state="loading">
        <div id="map" \(attributes)></div>
        <div id="tessera-message" role="alert" hidden></div>
        <script>
        /*! Leaflet \(LeafletAssets.version), https://leafletjs.com, used under its licence:

        \(LeafletAssets.license)
        */
        \(LeafletAssets.javascript)
        </script>
        \(cells)<script>
        (function () {
          "use strict";
        \(ViewerArchiveReader.script)
        \(DeepZoomViewerScript.main)
        })();
        </script>
        </body>
        </html>

        """
    }
}
