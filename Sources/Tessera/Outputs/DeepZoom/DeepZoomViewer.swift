// DeepZoomViewer.swift — NAME.html: a page that pans and zooms the pyramid from the local disk.
//
// It uses Leaflet (vendored, BSD-2-Clause) with its plain-pixel coordinate system: Leaflet zoom
// z shows the picture at 2^(z - maxLevel) of its size, so integer zooms are exactly the
// pyramid's levels. A grid layer places each Deep Zoom tile in a tileSize box and shifts it by
// the overlap, so tiles meet edge to edge. Everything it loads is a <script>, <link> or <img>
// next to it, which browsers allow from file:// (fetch and XHR they do not).
//
// Files, beside NAME.dzi:
//     NAME.html                          the page
//     NAME_files/viewer/leaflet.js       Leaflet, and its stylesheet and licence
//     NAME_files/viewer/cells.js         the picture's shape and which photo is in each cell
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
    /// Files written into NAME_files/viewer.
    static let assetCount = 4

    /// The viewer's small files, as (path relative to the pyramid's folder, contents); cells.js,
    /// which can be large, is written by `writeCellsScript`.
    static func files(name: String, title: String? = nil) -> [(path: String, contents: String)] {
        let viewer = name + "_files/viewer/"
        return [
            (viewer + "leaflet.js", LeafletAssets.javascript),
            (viewer + "leaflet.css", LeafletAssets.css),
            (viewer + "LICENSE-leaflet.txt", LeafletAssets.license),
            (name + ".html", page(name: name, title: title)),
        ]
    }

    /// Writes window.TESSERA (the pyramid's shape and the cell labels) to a new file at `path`,
    /// 64 KiB at a time: a 20-gigapixel grid has close to a million cells, and the whole text
    /// at once would be several megabytes held at the render's end.
    static func writeCellsScript(to path: String, name: String, geometry: DeepZoomGeometry, labels: CellLabels?) throws(TesseraError) {
        let file = try FileDescriptor.open(path, flags: O_WRONLY | O_CREAT | O_EXCL)
        defer { file.close() }
        try cellsScript(name: name, geometry: geometry, labels: labels) { bytes throws(TesseraError) in try file.writeAll(bytes) }
    }

    /// The same text, handed to `write` 64 KiB at a time.
    static func cellsScript(name: String, geometry: DeepZoomGeometry, labels: CellLabels?,
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
            try emit("]\n")
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

    /// The page; `title` (nil: none) heads it and names the browser tab.
    static func page(name: String, title: String? = nil) -> String {
        // The folder name goes into URLs: percent-encode all but unreserved characters.
        var folder = ""
        for byte in (name + "_files").utf8 {
            if (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || "-._~".utf8.contains(byte) {
                folder.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                folder += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(htmlEscaped(title ?? name)) — Tessera Deep Zoom</title>
        <link rel="stylesheet" href="\(folder)/viewer/leaflet.css">
        <style>
          html, body { margin: 0; height: 100%; background: #111; }
          #map { position: absolute; inset: 0; background: #111; }
          /* Not clipped: each tile's overlap reaches over its neighbours' edges, so that at a
             fractional zoom, where tiles are scaled and their edges blended, the page colour
             never shows between them (a dark seam along every tile edge otherwise). */
          .tessera-tile { overflow: visible; }
          .tessera-tile img { position: absolute; max-width: none; max-height: none; }
          #tessera-title { font: 600 18px/1.3 system-ui, sans-serif; color: #fff; background: rgba(0,0,0,.6);
                           padding: 4px 10px; border-radius: 4px; max-width: 50vw; }
          .tessera-buttons a { font: 18px/30px system-ui, sans-serif; text-align: center; cursor: pointer; }
          #tessera-navigator { position: relative; background: #000; border: 1px solid #888; cursor: pointer; line-height: 0; }
          #tessera-navigator img { display: block; width: 100%; height: 100%; }
          #tessera-view { position: absolute; border: 2px solid #e33; box-sizing: border-box; pointer-events: none; }
          #tessera-label { font: 14px/1.4 system-ui, sans-serif; background: rgba(0,0,0,.72); color: #fff;
                           padding: 4px 8px; border-radius: 4px; max-width: 60vw; overflow-wrap: anywhere; }
          #tessera-label:empty { display: none; }
          #tessera-help { font: 12px/1.4 system-ui, sans-serif; color: #bbb; background: rgba(0,0,0,.6); padding: 2px 6px; }
        </style>
        </head>
        <body>
        <div id="map" data-title="\(htmlEscaped(title ?? ""))"></div>
        <script src="\(folder)/viewer/leaflet.js"></script>
        <script src="\(folder)/viewer/cells.js"></script>
        <script>
        (function () {
          "use strict";
          var T = window.TESSERA, folder = "\(folder)";
          var size = T.tileSize, overlap = T.overlap, maxLevel = T.maxLevel;
          // Plain pixels: at zoom maxLevel one map unit is one picture pixel.
          var map = L.map("map", { crs: L.CRS.Simple, zoomSnap: 0, zoomDelta: 0.5, wheelPxPerZoomLevel: 90,
                                   minZoom: 0, maxZoom: maxLevel + 3, attributionControl: false,
                                   fadeAnimation: false });
          function point(x, y) { return map.unproject([x, y], maxLevel); }
          var bounds = L.latLngBounds(point(0, T.height), point(T.width, 0));
          function levelSize(z) {
            var shift = Math.pow(2, maxLevel - z);
            return { w: Math.ceil(T.width / shift), h: Math.ceil(T.height / shift) };
          }
          var Pyramid = L.GridLayer.extend({
            createTile: function (coords, done) {
              var box = document.createElement("div");
              box.className = "tessera-tile";
              var level = levelSize(coords.z);
              if (coords.x < 0 || coords.y < 0 || coords.x * size >= level.w || coords.y * size >= level.h) {
                setTimeout(function () { done(null, box); }, 0);
                return box;
              }
              var img = document.createElement("img");
              img.alt = "";
              img.style.left = (coords.x > 0 ? -overlap : 0) + "px";
              img.style.top = (coords.y > 0 ? -overlap : 0) + "px";
              img.onload = function () {
                // Without an overlap there is nothing to reach over the seam with: the tile is
                // stretched by one pixel instead (a 1/size error at its far edge).
                if (overlap === 0) {
                  img.style.width = (img.naturalWidth + 1) + "px";
                  img.style.height = (img.naturalHeight + 1) + "px";
                }
                done(null, box);
              };
              img.onerror = function () { done(new Error("missing tile " + img.src), box); };
              img.src = folder + "/" + coords.z + "/" + coords.x + "_" + coords.y + ".jpg";
              box.appendChild(img);
              return box;
            }
          });
          new Pyramid({ tileSize: size, bounds: bounds, noWrap: true, minNativeZoom: 0, maxNativeZoom: maxLevel,
                        keepBuffer: 1, updateWhenZooming: false }).addTo(map);
          map.setMaxBounds(bounds.pad(0.5));

          // Which photo is under the mouse (grids and mosaics).
          var Label = L.Control.extend({
            onAdd: function () {
              var div = L.DomUtil.create("div");
              div.id = "tessera-label";
              L.DomEvent.disableClickPropagation(div);
              return div;
            }
          });
          new Label({ position: "topright" }).addTo(map);
          var label = document.getElementById("tessera-label");
          function cellAt(latlng) {
            if (!T.grid) return null;
            var p = map.project(latlng, maxLevel);
            var column = Math.floor(p.x / T.grid.cellWidth), row = Math.floor(p.y / T.grid.cellHeight);
            if (column < 0 || row < 0 || column >= T.grid.columns || row >= T.grid.rows) return null;
            var photo = T.cells[row * T.grid.columns + column];
            return { column: column, row: row, name: photo >= 0 ? T.names[photo] : "(empty cell)" };
          }
          function baseName(path) { var parts = path.split("/"); return parts[parts.length - 1] || path; }
          function show(cell) {
            if (!cell) { label.textContent = ""; label.removeAttribute("data-cell"); return; }
            label.textContent = baseName(cell.name);
            label.title = cell.name;
            label.setAttribute("data-cell", cell.column + "," + cell.row);
            label.setAttribute("data-path", cell.name);
          }
          map.on("mousemove", function (e) { show(cellAt(e.latlng)); });
          map.on("click", function (e) {
            var cell = cellAt(e.latlng);
            show(cell);
            if (cell) {
              var content = document.createElement("div");
              content.textContent = cell.name + "  (column " + (cell.column + 1) + ", row " + (cell.row + 1) + ")";
              L.popup().setLatLng(e.latlng).setContent(content).openOn(map);
            }
          });
          var help = L.control({ position: "bottomleft" });
          help.onAdd = function () {
            var div = L.DomUtil.create("div");
            div.id = "tessera-help";
            div.textContent = T.width + " x " + T.height + " px" + (T.grid ? " — point at a photo to see its name, click to keep it" : "");
            return div;
          };
          help.addTo(map);

          // The title, when the pyramid was given one (its title setting).
          var title = document.getElementById("map").getAttribute("data-title");
          if (title) {
            var heading = L.control({ position: "topleft" });
            heading.onAdd = function () {
              var div = L.DomUtil.create("div");
              div.id = "tessera-title";
              div.textContent = title;
              return div;
            };
            heading.addTo(map);
          }

          // Home (the whole picture) and full screen, under the zoom buttons; keys 0 and f.
          function home() { map.fitBounds(bounds, { animate: false }); }
          function toggleFullScreen() {
            if (document.fullscreenElement) { document.exitFullscreen(); }
            else if (document.documentElement.requestFullscreen) { document.documentElement.requestFullscreen(); }
          }
          var buttons = L.control({ position: "topleft" });
          buttons.onAdd = function () {
            var bar = L.DomUtil.create("div", "leaflet-bar tessera-buttons");
            function button(id, icon, label, action) {
              var a = L.DomUtil.create("a", "", bar);
              a.id = id;
              // Drawn, not a glyph: not every font has one for these.
              a.innerHTML = '<svg width="16" height="16" viewBox="0 0 16 16" style="vertical-align: -3px" fill="none" '
                + 'stroke="#333" stroke-width="2">' + icon + '</svg>';
              a.title = label;
              a.setAttribute("role", "button");
              a.setAttribute("aria-label", label);
              a.href = "#";
              L.DomEvent.on(a, "click", function (e) { L.DomEvent.preventDefault(e); L.DomEvent.stopPropagation(e); action(); });
            }
            button("tessera-home", '<path d="M2 8 L8 2 L14 8 M4 7 V14 H12 V7"/>', "Whole picture (0)", home);
            if (document.fullscreenEnabled !== false) {
              button("tessera-fullscreen", '<path d="M1 5 V1 H5 M11 1 H15 V5 M15 11 V15 H11 M5 15 H1 V11"/>', "Full screen (f)", toggleFullScreen);
            }
            L.DomEvent.disableClickPropagation(bar);
            return bar;
          };
          buttons.addTo(map);
          document.addEventListener("keydown", function (e) {
            if (e.target !== document.body && e.target !== document.documentElement && e.target.id !== "map") return;
            if (e.key === "0" || e.key === "Home") home();
            if (e.key === "f") toggleFullScreen();
          });

          // The navigator: the whole picture small (the largest level that is one tile), with
          // the view as a rectangle; a click there moves the view. Shown while zoomed in.
          var navLevel = 0;
          for (var z = 0; z <= maxLevel; z++) {
            var s = levelSize(z);
            if (s.w <= size && s.h <= size) navLevel = z;
          }
          var navWidth = T.width >= T.height ? 180 : Math.max(24, Math.round(180 * T.width / T.height));
          var navHeight = Math.max(24, Math.round(navWidth * T.height / T.width));
          var navigator = L.control({ position: "bottomright" });
          var viewBox;
          navigator.onAdd = function () {
            var div = L.DomUtil.create("div");
            div.id = "tessera-navigator";
            div.style.width = navWidth + "px";
            div.style.height = navHeight + "px";
            var img = L.DomUtil.create("img", "", div);
            img.alt = "";
            img.src = folder + "/" + navLevel + "/0_0.jpg";
            viewBox = L.DomUtil.create("div", "", div);
            viewBox.id = "tessera-view";
            L.DomEvent.disableClickPropagation(div);
            L.DomEvent.disableScrollPropagation(div);
            L.DomEvent.on(div, "click", function (e) {
              var r = div.getBoundingClientRect();
              map.panTo(point((e.clientX - r.left) / navWidth * T.width, (e.clientY - r.top) / navHeight * T.height), { animate: false });
            });
            return div;
          };
          navigator.addTo(map);
          function drawNavigator() {
            var b = map.getBounds(), nw = map.project(b.getNorthWest(), maxLevel), se = map.project(b.getSouthEast(), maxLevel);
            var x0 = Math.max(0, nw.x) / T.width * navWidth, y0 = Math.max(0, nw.y) / T.height * navHeight;
            var x1 = Math.min(T.width, se.x) / T.width * navWidth, y1 = Math.min(T.height, se.y) / T.height * navHeight;
            viewBox.style.left = x0 + "px";
            viewBox.style.top = y0 + "px";
            viewBox.style.width = Math.max(4, x1 - x0) + "px";
            viewBox.style.height = Math.max(4, y1 - y0) + "px";
            // With the whole picture in view it would only cover part of it.
            var whole = nw.x <= 0 && nw.y <= 0 && se.x >= T.width && se.y >= T.height;
            document.getElementById("tessera-navigator").style.display = whole ? "none" : "";
          }
          map.on("move zoom resize", drawNavigator);

          // The view: from the address (#z=&x=&y=), else the whole picture.
          function readHash() {
            var values = {};
            location.hash.replace(/^#/, "").split("&").forEach(function (pair) {
              var kv = pair.split("=");
              if (kv.length === 2) values[kv[0]] = decodeURIComponent(kv[1]);
            });
            return values;
          }
          var view = readHash();
          if (view.z !== undefined && view.x !== undefined && view.y !== undefined) {
            map.setView(point(parseFloat(view.x), parseFloat(view.y)), parseFloat(view.z), { animate: false });
          } else {
            map.fitBounds(bounds, { animate: false });
          }
          // The view as the page holds it (zoom, then the centre in full-size pixels), for scripts.
          function recordView() {
            var c = map.project(map.getCenter(), maxLevel);
            document.body.setAttribute("data-view", map.getZoom() + "," + c.x + "," + c.y);
          }
          recordView();
          drawNavigator();
          map.on("moveend", recordView);
          map.on("moveend", function () {
            var c = map.project(map.getCenter(), maxLevel);
            var hash = "#z=" + map.getZoom().toFixed(2) + "&x=" + Math.round(c.x) + "&y=" + Math.round(c.y);
            history.replaceState(null, "", hash);
          });
        })();
        </script>
        </body>
        </html>

        """
    }
}
