// DeepZoomViewerScript.swift — the viewer page's own stylesheet and JavaScript (the page is put
// together in DeepZoomViewer.page; Leaflet is inlined before this script).
//
// Where the pyramid comes from (the #map element's data- attributes say what the page has):
//   - the folder: NAME_files/viewer/cells.js, loaded by a <script> tag before this script (which
//     browsers allow from file://), and each tile an <img> of NAME_files/LEVEL/COL_ROW.jpg;
//   - the archive: NAME.szi read by range requests (ViewerArchiveReader.swift), cells.js an entry
//     of it (NAME/NAME_files/viewer/cells.js; an SZI without one shows the picture without
//     labels, from its NAME/NAME.dzi), each tile a Blob URL, revoked when Leaflet drops the
//     tile, at most `mostFetchesAtOnce` tiles fetched at once.
// A page written beside both uses the folder when its cells.js loads, the archive otherwise.
//
// What is wrong is said on the page (#tessera-message), never a blank page: the folder missing,
// the archive opened from file:// (browsers do not let a page fetch from the disk), not found,
// damaged, or on a server without range requests; a tile that cannot be loaded (named).
//
// The fitted picture is placed between the controls: the buttons and title in a row along the
// top, the photo's name or the help line along the bottom, so that nothing covers it, on a
// phone as on a desktop. Zoom stops at twice full size (maxLevel + 1) however asked: wheel,
// buttons, keys, pinch (bounceAtZoomLimits off, so a pinch stops there instead of springing
// back) and the address.
//
// For scripts and tests, the body records: data-state (loading, ready, error), data-error (what
// is wrong), data-source (folder or archive), data-view (zoom, then the centre in full-size
// pixels), data-tiles-drawn, data-missing-tiles, data-blob-urls (Blob URLs alive),
// data-most-at-once (the most tile requests at once), data-range ("whole" when the server sent
// the archive whole), data-window and data-picture (the window's size and the picture's
// rectangle on screen: x,y,width,height); each control its data-rect (empty when hidden). The
// document gets a "tesseraready" event when the map is up. A clicked cell's preview (cells.js's
// `previews`, the long side; NAME_files/viewer/previews/P.jpg in the folder or the archive) is
// #tessera-preview, with data-photo (P) and data-state (loading, shown, missing).

enum DeepZoomViewerScript {
    static let style = """
      html, body { margin: 0; height: 100%; background: #111; overflow: hidden; }
      #map { position: fixed; inset: 0; background: #111; }
      /* Not clipped: each tile's overlap reaches over its neighbours' edges, so that at a
         fractional zoom, where tiles are scaled and their edges blended, the page colour
         never shows between them (a dark seam along every tile edge otherwise). */
      .tessera-tile { overflow: visible; }
      .tessera-tile img { position: absolute; max-width: none; max-height: none; }
      /* The top row: buttons, then the title, which is cut short with an ellipsis rather than
         wrapped over the picture. */
      .leaflet-top.leaflet-left { right: 0; display: flex; align-items: flex-start; }
      .leaflet-top.leaflet-left .leaflet-control { float: none; clear: none; flex: none; }
      .leaflet-top.leaflet-left #tessera-title { flex: 0 1 auto; min-width: 0; margin-right: 10px; }
      #tessera-title { font: 600 17px/24px system-ui, sans-serif; color: #fff; background: rgba(0,0,0,.6);
                       padding: 5px 10px; border-radius: 4px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
      .leaflet-bar.tessera-buttons { display: flex; }
      .leaflet-bar.tessera-buttons a, .leaflet-touch .leaflet-bar.tessera-buttons a {
        width: 34px; height: 34px; font: 18px/34px system-ui, sans-serif; text-align: center; cursor: pointer;
        border-bottom: none; border-right: 1px solid #ccc; border-radius: 0; }
      .leaflet-bar.tessera-buttons a:first-child { border-radius: 2px 0 0 2px; }
      .leaflet-bar.tessera-buttons a:last-child { border-right: none; border-radius: 0 2px 2px 0; }
      .leaflet-bar.tessera-buttons a.leaflet-disabled svg { opacity: .35; }
      /* The bottom row: the photo's name when one is pointed at or tapped, else the help line. */
      .leaflet-bottom.leaflet-left { right: 0; }
      /* Neither line takes the pointer: a tap on a cell under a long name reaches the cell. */
      #tessera-status { max-width: calc(100% - 20px); box-sizing: border-box; pointer-events: none; }
      #tessera-label { font: 14px/1.4 system-ui, sans-serif; background: rgba(0,0,0,.72); color: #fff;
                       padding: 4px 8px; border-radius: 4px; overflow-wrap: anywhere;
                       display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 2; overflow: hidden; }
      #tessera-label:empty { display: none; }
      #tessera-help { font: 12px/1.4 system-ui, sans-serif; color: #bbb; background: rgba(0,0,0,.6); padding: 2px 6px; }
      #tessera-navigator { position: relative; background: #000; border: 1px solid #888; cursor: pointer; line-height: 0; }
      #tessera-navigator img { display: block; width: 100%; height: 100%; }
      #tessera-view { position: absolute; border: 2px solid #e33; box-sizing: border-box; pointer-events: none; }
      #tessera-message { position: fixed; left: 50%; top: 50%; transform: translate(-50%, -50%); z-index: 2000;
                         width: max-content; max-width: min(560px, calc(100vw - 32px)); max-height: calc(100vh - 32px); overflow: auto;
                         box-sizing: border-box; padding: 14px 18px; border-radius: 6px; background: #fff4d6; color: #222;
                         font: 15px/1.45 system-ui, sans-serif; overflow-wrap: anywhere; box-shadow: 0 4px 18px rgba(0,0,0,.5); }
      #tessera-message.tessera-notice { background: #e8eef8; }
      #tessera-message code { font: 14px ui-monospace, monospace; background: rgba(0,0,0,.08); padding: 1px 4px; border-radius: 3px; }
      #tessera-message[hidden] { display: none; }
      #tessera-preview { position: fixed; inset: 0; z-index: 1500; display: flex; flex-direction: column; align-items: center;
                         justify-content: center; gap: 8px; background: rgba(0,0,0,.82); cursor: zoom-out; }
      #tessera-preview img { display: block; object-fit: contain; box-shadow: 0 4px 18px rgba(0,0,0,.6); background: #222; }
      #tessera-preview-name { font: 14px/1.4 system-ui, sans-serif; color: #fff; max-width: calc(100vw - 24px); padding: 0 12px;
                              box-sizing: border-box; text-align: center; overflow-wrap: anywhere; }
    """

    static let main = #"""
      // ---- What the page has, and what it says when something is wrong ----
      var body = document.body, mapElement = document.getElementById("map"), messageBox = document.getElementById("tessera-message");
      var page = mapElement.getAttribute("data-page");
      var folder = mapElement.getAttribute("data-folder"), folderName = mapElement.getAttribute("data-folder-name");
      var archive = mapElement.getAttribute("data-archive"), archiveName = mapElement.getAttribute("data-archive-name");
      var mostFetchesAtOnce = 6;

      // The message box: text, with `code` pieces set as code.
      function showMessage(kind, parts, notice) {
        messageBox.textContent = "";
        (typeof parts === "string" ? [parts] : parts).forEach(function (part) {
          if (typeof part === "string") { messageBox.appendChild(document.createTextNode(part)); return; }
          var code = document.createElement("code");
          code.textContent = part.code;
          messageBox.appendChild(code);
        });
        messageBox.className = notice ? "tessera-notice" : "";
        messageBox.hidden = false;
        if (kind) body.setAttribute("data-error", kind);
      }
      function notice(text) {
        if (text) { showMessage(null, text, true); } else if (messageBox.className === "tessera-notice") { messageBox.hidden = true; }
      }
      function fail(kind, parts) {
        body.setAttribute("data-state", "error");
        showMessage(kind, parts, false);
      }
      var missingTiles = 0, firstMissing = "";
      function tileMissing(what) {
        missingTiles += 1;
        if (!firstMissing) firstMissing = what;
        body.setAttribute("data-missing-tiles", missingTiles);
        var advice = body.getAttribute("data-source") === "folder"
          ? " The folder " + folderName + " must stay beside " + page + " as it was written: copy or move them together."
          : "";
        showMessage("missing-tiles", (missingTiles === 1 ? "A tile of the picture is missing: " : missingTiles + " tiles of the picture are missing; the first: ")
          + firstMissing + "." + advice, false);
      }
      // Tile messages can be put away; the picture goes on without them.
      messageBox.addEventListener("click", function () { if (body.getAttribute("data-state") === "ready") messageBox.hidden = true; });

      // ---- The folder ----
      function folderSource() {
        function path(z, x, y) { return folder + "/" + z + "/" + x + "_" + y + "." + format; }
        var format = window.TESSERA.format || "jpg";
        return {
          kind: "folder",
          tile: function (z, x, y, img, ready) {
            img.onload = function () { ready(null); };
            img.onerror = function () { ready(folderName + "/" + z + "/" + x + "_" + y + "." + format + " could not be loaded"); };
            img.src = path(z, x, y);
          },
          release: function () {},
          image: function (z, img) { img.src = path(z, 0, 0); },
          preview: function (photo, img, failed) {
            img.onerror = function () { failed("not found in " + folderName + "/viewer/previews"); };
            img.src = folder + "/viewer/previews/" + photo + ".jpg";
          },
          releasePreview: function () {}
        };
      }

      // ---- The archive ----
      function archiveSource(reader, root, format) {
        var queue = [], active = 0, most = 0, live = 0;
        function pump() {
          while (active < mostFetchesAtOnce && queue.length > 0) {
            var job = queue.shift();
            if (job.cancelled) continue;
            active += 1;
            most = Math.max(most, active);
            body.setAttribute("data-most-at-once", most);
            job.run().then(finished, finished);
          }
        }
        function finished() { active -= 1; pump(); }
        function blobURL(bytes) {
          live += 1;
          body.setAttribute("data-blob-urls", live);
          return URL.createObjectURL(new Blob([bytes], { type: format === "png" ? "image/png" : "image/jpeg" }));
        }
        function name(z, x, y) { return root + z + "/" + x + "_" + y + "." + format; }
        return {
          kind: "archive",
          tile: function (z, x, y, img, ready) {
            var entryName = name(z, x, y), shown = entryName.slice(root.length);
            var job = { cancelled: false, controller: new AbortController(), url: null };
            img.tesseraJob = job;
            job.run = function () {
              var entry = reader.entry(entryName);
              if (!entry) { ready("tile " + shown + " is not in " + archiveName); return Promise.resolve(); }
              return reader.bytes(entry, entryName, job.controller.signal).then(function (bytes) {
                if (job.cancelled) return;
                job.url = blobURL(bytes);
                img.onload = function () { ready(null); };
                img.onerror = function () { ready("tile " + shown + " of " + archiveName + " is not a picture the browser can show (damaged)"); };
                img.src = job.url;
              }, function (problem) {
                if (!job.cancelled) ready(problem && problem.message ? problem.message.replace(/\.$/, "") : String(problem));
              });
            };
            queue.push(job);
            pump();
          },
          release: function (img) {
            var job = img.tesseraJob;
            if (!job) return;
            job.cancelled = true;
            job.controller.abort();
            if (job.url) {
              URL.revokeObjectURL(job.url);
              job.url = null;
              live -= 1;
              body.setAttribute("data-blob-urls", live);
            }
          },
          image: function (z, img) {
            var entry = reader.entry(name(z, 0, 0));
            if (entry) reader.bytes(entry, name(z, 0, 0)).then(function (bytes) { img.src = blobURL(bytes); }, function () {});
          },
          preview: function (photo, img, failed) {
            var entryName = root + "viewer/previews/" + photo + ".jpg", entry = reader.entry(entryName);
            if (!entry) { failed("not in " + archiveName); return; }
            reader.bytes(entry, entryName).then(function (bytes) {
              if (img.tesseraURL) { URL.revokeObjectURL(img.tesseraURL); live -= 1; }
              img.tesseraURL = blobURL(bytes);
              img.onerror = function () { failed("damaged in " + archiveName); };
              img.src = img.tesseraURL;
            }, function (problem) { failed(problem && problem.message ? problem.message : String(problem)); });
          },
          releasePreview: function (img) {
            if (!img || !img.tesseraURL) return;
            URL.revokeObjectURL(img.tesseraURL);
            img.tesseraURL = null;
            live -= 1;
            body.setAttribute("data-blob-urls", live);
          }
        };
      }

      // window.TESSERA from the archive's cells.js, run as a script from a Blob URL.
      function runCellsScript(bytes) {
        return new Promise(function (resolve, reject) {
          var url = URL.createObjectURL(new Blob([bytes], { type: "text/javascript" }));
          var script = document.createElement("script");
          script.onload = function () {
            URL.revokeObjectURL(url);
            if (window.TESSERA) { resolve(window.TESSERA); } else { reject(new ArchiveProblem("damaged", "The viewer's cells.js in " + archiveName + " is damaged.")); }
          };
          script.onerror = function () { URL.revokeObjectURL(url); reject(new ArchiveProblem("damaged", "The viewer's cells.js in " + archiveName + " could not be run.")); };
          script.src = url;
          document.head.appendChild(script);
        });
      }
      // An SZI without the viewer's cells.js (written by another program): its descriptor, no labels.
      function fromDescriptor(bytes) {
        var xml = new DOMParser().parseFromString(new TextDecoder("utf-8").decode(bytes), "application/xml");
        var image = xml.getElementsByTagName("Image")[0], size = xml.getElementsByTagName("Size")[0];
        if (!image || !size) throw new ArchiveProblem("damaged", "The descriptor in " + archiveName + " is damaged.");
        var width = +size.getAttribute("Width"), height = +size.getAttribute("Height");
        return { width: width, height: height, tileSize: +image.getAttribute("TileSize"), overlap: +image.getAttribute("Overlap"),
                 format: (image.getAttribute("Format") || "jpg").toLowerCase(), maxLevel: Math.ceil(Math.log2(Math.max(width, height))),
                 grid: null, names: [], cells: [] };
      }

      function openFromArchive() {
        if (location.protocol === "file:") {
          var why = folder
            ? "The folder " + folderName + " is not beside this page, and " + archiveName + ", which it would show instead, can be read only over HTTP: "
            : "This page shows " + archiveName + ", which can be read only over HTTP: ";
          fail("file-protocol", [why + "a browser does not let a page opened from a file read another file. Serve this folder and open "
              + "the page from there: for example, run ", { code: "python3 -m http.server" }, " in this folder and open ",
            { code: "http://localhost:8000/" + encodeURIComponent(page) }, folder ? ". Or open the Deep Zoom folder's page (" + page + " beside the folder "
              + folderName + "), which works from the disk." : "."]);
          return;
        }
        notice("Opening " + archiveName + "…");
        openArchive(archive, archiveName, notice).then(function (reader) {
          // The pyramid's folder inside: NAME/NAME_files/ beside NAME/NAME.dzi (named from the
          // archive, which may have been renamed since).
          var descriptor = null;
          for (var entry of reader.names()) {
            if (/^[^/]+\/[^/]+\.dzi$/.test(entry)) { descriptor = entry; break; }
          }
          if (!descriptor) throw new ArchiveProblem("damaged", archiveName + " holds no Deep Zoom descriptor (NAME/NAME.dzi): it is not an SZI.");
          var root = descriptor.slice(0, -4) + "_files/", cells = reader.entry(root + "viewer/cells.js");
          var shape = cells ? reader.bytes(cells, root + "viewer/cells.js").then(runCellsScript)
                            : reader.bytes(reader.entry(descriptor), descriptor).then(fromDescriptor);
          return shape.then(function (T) {
            notice("");
            show(T, archiveSource(reader, root, T.format || "jpg"));
          });
        }).catch(function (problem) {
          fail(problem && problem.kind || "damaged", problem && problem.message || String(problem));
        });
      }

      // ---- The map ----
      function show(T, source) {
        body.setAttribute("data-source", source.kind);
        var size = T.tileSize, overlap = T.overlap, maxLevel = T.maxLevel;
        // Plain pixels: at zoom maxLevel one map unit is one picture pixel.
        var map = L.map(mapElement, { crs: L.CRS.Simple, zoomSnap: 0, zoomDelta: 0.5, wheelPxPerZoomLevel: 90,
                                      minZoom: 0, maxZoom: maxLevel + 1, bounceAtZoomLimits: false,
                                      touchZoom: true, dragging: true, tap: false, keyboard: true,
                                      zoomControl: false, attributionControl: false, fadeAnimation: false });
        function point(x, y) { return map.unproject([x, y], maxLevel); }
        var bounds = L.latLngBounds(point(0, T.height), point(T.width, 0));
        function levelSize(z) {
          var shift = Math.pow(2, maxLevel - z);
          return { w: Math.ceil(T.width / shift), h: Math.ceil(T.height / shift) };
        }
        var drawn = 0;
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
            box.appendChild(img);
            source.tile(coords.z, coords.x, coords.y, img, function (problem) {
              if (problem) {
                box.className += " tessera-missing";
                tileMissing(problem);
                done(new Error(problem), box);
                return;
              }
              // Without an overlap there is nothing to reach over the seam with: the tile is
              // stretched by one pixel instead (a 1/size error at its far edge).
              if (overlap === 0) {
                img.style.width = (img.naturalWidth + 1) + "px";
                img.style.height = (img.naturalHeight + 1) + "px";
              }
              drawn += 1;
              body.setAttribute("data-tiles-drawn", drawn);
              done(null, box);
            });
            return box;
          }
        });
        var layer = new Pyramid({ tileSize: size, bounds: bounds, noWrap: true, minNativeZoom: 0, maxNativeZoom: maxLevel,
                                  keepBuffer: 1, updateWhenZooming: false }).addTo(map);
        layer.on("tileunload", function (e) {
          var img = e.tile.querySelector("img");
          if (img) source.release(img);
        });
        map.setMaxBounds(bounds.pad(0.5));

        // The buttons, in a row at the top left: zoom in and out, the whole picture (key 0),
        // full screen (key f).
        // (`fitted` while the view is the one home made: then a phone turned, or a window made
        // too small for the picture, gets the whole picture fitted again. A window that only
        // grows keeps its view, as Leaflet keeps it.)
        var fitted = false, fitting = false, landscape = window.innerWidth >= window.innerHeight;
        // Zooming out stops at half the whole picture's fitted size (it would shrink to a dot).
        function limitZoomOut() {
          var room = pictureRoom();
          var whole = map.getBoundsZoom(bounds, false, L.point(0, room.top + room.bottom));
          // (The option itself: setMinZoom would also zoom a view below it, an animated move
          // that lands after a turned phone's view is fitted again.)
          if (isFinite(whole)) map.options.minZoom = Math.max(0, Math.min(whole, maxLevel) - 1);
        }
        function home() {
          limitZoomOut();
          var room = pictureRoom();
          fitting = true;
          map.fitBounds(bounds, { paddingTopLeft: [0, room.top], paddingBottomRight: [0, room.bottom], animate: false });
          fitting = false;
          fitted = true;
        }
        map.on("movestart zoomstart", function () { if (!fitting) fitted = false; });
        map.on("resize", function () {
          limitZoomOut();
          var turned = (window.innerWidth >= window.innerHeight) !== landscape;
          landscape = window.innerWidth >= window.innerHeight;
          if (!fitted) return;
          var room = pictureRoom(), size = map.getSize();
          var nw = map.latLngToContainerPoint(bounds.getNorthWest()), se = map.latLngToContainerPoint(bounds.getSouthEast());
          if (turned || nw.x < -1 || se.x > size.x + 1 || nw.y < room.top - 1 || se.y > size.y - room.bottom + 1) home();
        });
        function toggleFullScreen() {
          if (document.fullscreenElement) { document.exitFullscreen(); }
          else if (document.documentElement.requestFullscreen) { document.documentElement.requestFullscreen(); }
        }
        var buttonBar;
        var buttons = L.control({ position: "topleft" });
        buttons.onAdd = function () {
          var bar = L.DomUtil.create("div", "leaflet-bar tessera-buttons");
          bar.id = "tessera-buttons";
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
            // (The keys go back to the map: a focused button would keep them.)
            L.DomEvent.on(a, "click", function (e) {
              L.DomEvent.preventDefault(e); L.DomEvent.stopPropagation(e); action(); mapElement.focus({ preventScroll: true });
            });
          }
          button("tessera-zoom-in", '<path d="M2 8 H14 M8 2 V14"/>', "Zoom in (+)", function () { map.zoomIn(1); });
          button("tessera-zoom-out", '<path d="M2 8 H14"/>', "Zoom out (-)", function () { map.zoomOut(1); });
          button("tessera-home", '<path d="M2 8 L8 2 L14 8 M4 7 V14 H12 V7"/>', "Whole picture (0)", home);
          if (document.fullscreenEnabled !== false) {
            button("tessera-fullscreen", '<path d="M1 5 V1 H5 M11 1 H15 V5 M15 11 V15 H11 M5 15 H1 V11"/>', "Full screen (f)", toggleFullScreen);
          }
          L.DomEvent.disableClickPropagation(bar);
          buttonBar = bar;
          return bar;
        };
        buttons.addTo(map);
        function markZoomLimits() {
          var zoom = map.getZoom();
          L.DomUtil[zoom >= map.getMaxZoom() ? "addClass" : "removeClass"](document.getElementById("tessera-zoom-in"), "leaflet-disabled");
          L.DomUtil[zoom <= map.getMinZoom() ? "addClass" : "removeClass"](document.getElementById("tessera-zoom-out"), "leaflet-disabled");
        }
        map.on("zoomend", markZoomLimits);
        document.addEventListener("keydown", function (e) {
          if (e.target !== document.body && e.target !== document.documentElement && e.target !== mapElement) return;
          if (e.key === "0" || e.key === "Home") home();
          if (e.key === "f") toggleFullScreen();
        });

        // The title, when the pyramid was given one (its title setting), beside the buttons.
        var title = mapElement.getAttribute("data-title");
        if (title) {
          var heading = L.control({ position: "topleft" });
          heading.onAdd = function () {
            var div = L.DomUtil.create("div");
            div.id = "tessera-title";
            div.textContent = title;
            div.title = title;
            return div;
          };
          heading.addTo(map);
        }

        // Along the bottom: the name of the photo pointed at or tapped (grids and mosaics), else
        // the help line.
        var status = L.control({ position: "bottomleft" });
        var label, help;
        status.onAdd = function () {
          var div = L.DomUtil.create("div");
          div.id = "tessera-status";
          label = L.DomUtil.create("div", "", div);
          label.id = "tessera-label";
          help = L.DomUtil.create("div", "", div);
          help.id = "tessera-help";
          var coarse = window.matchMedia && window.matchMedia("(pointer: coarse)").matches;
          help.textContent = T.width + " x " + T.height + " px"
            + (!T.grid ? "" : T.previews ? (coarse ? " — tap a photo to see it larger" : " — point at a photo to see its name, click to see it larger")
               : (coarse ? " — tap a photo to see its name" : " — point at a photo to see its name, click to keep it"));
          L.DomEvent.disableClickPropagation(div);
          return div;
        };
        status.addTo(map);
        function cellAt(latlng) {
          if (!T.grid) return null;
          var p = map.project(latlng, maxLevel);
          if (T.frames) return frameAt(p);
          var column = Math.floor(p.x / T.grid.cellWidth), row = Math.floor(p.y / T.grid.cellHeight);
          if (column < 0 || row < 0 || column >= T.grid.columns || row >= T.grid.rows) return null;
          var photo = T.cells[row * T.grid.columns + column];
          return { column: column, row: row, photo: photo, name: photo >= 0 ? T.names[photo] : "(empty cell)" };
        }
        // A layout of frames (a collage): the cells sorted by top edge, four numbers each; the
        // first that may hold p starts at most T.tallest above it.
        function frameAt(p) {
          var F = T.frames, count = F.length / 4, low = 0, high = count;
          while (low < high) { var mid = (low + high) >> 1; if (F[mid * 4 + 1] <= p.y - T.tallest) low = mid + 1; else high = mid; }
          for (var i = low; i < count && F[i * 4 + 1] <= p.y; i++) {
            var x = F[i * 4], y = F[i * 4 + 1];
            if (p.x >= x && p.x < x + F[i * 4 + 2] && p.y >= y && p.y < y + F[i * 4 + 3]) {
              var photo = T.cells[i];
              return { column: i, row: 0, photo: photo, name: photo >= 0 ? T.names[photo] : "(empty cell)" };
            }
          }
          return null;
        }
        function baseName(path) { var parts = path.split("/"); return parts[parts.length - 1] || path; }
        function showCell(cell) {
          if (!cell) { label.textContent = ""; label.removeAttribute("data-cell"); help.hidden = false; return; }
          label.textContent = baseName(cell.name);
          label.title = cell.name;
          label.setAttribute("data-cell", cell.column + "," + cell.row);
          label.setAttribute("data-path", cell.name);
          help.hidden = true;
        }
        map.on("mousemove", function (e) { showCell(cellAt(e.latlng)); });
        map.on("click", function (e) {
          var cell = cellAt(e.latlng);
          showCell(cell);
          if (cell && T.previews && cell.photo >= 0) {
            openPreview(cell);
          } else if (cell) {
            var content = document.createElement("div");
            content.id = "tessera-popup";
            content.textContent = cell.name + "  (column " + (cell.column + 1) + ", row " + (cell.row + 1) + ")";
            L.popup().setLatLng(e.latlng).setContent(content).openOn(map);
          }
        });

        // The photo's preview (cells.js previews): over the picture, the photo whole at up to its
        // preview size and within the window, its name under it; a click, a tap or Escape
        // closes it. Its box records data-photo and data-state (loading, shown, missing).
        var previewBox = null, previewImage = null;
        function closePreview() {
          if (!previewBox) return;
          source.releasePreview(previewImage);
          previewBox.remove();
          previewBox = previewImage = null;
        }
        function openPreview(cell) {
          closePreview();
          var box = document.createElement("div");
          box.id = "tessera-preview";
          box.setAttribute("role", "dialog");
          box.setAttribute("aria-label", cell.name);
          box.setAttribute("data-photo", cell.photo);
          box.setAttribute("data-state", "loading");
          var img = document.createElement("img");
          img.alt = baseName(cell.name);
          img.style.maxWidth = "min(" + T.previews + "px, calc(100vw - 24px))";
          img.style.maxHeight = "min(" + T.previews + "px, calc(100vh - 72px))";
          var caption = document.createElement("div");
          caption.id = "tessera-preview-name";
          caption.textContent = baseName(cell.name);
          caption.title = cell.name;
          box.appendChild(img);
          box.appendChild(caption);
          img.onload = function () { box.setAttribute("data-state", "shown"); };
          source.preview(cell.photo, img, function (why) {
            box.setAttribute("data-state", "missing");
            img.remove();
            caption.textContent = baseName(cell.name) + ": no larger picture (" + why + "; a photo that could not be read has none).";
          });
          box.addEventListener("click", closePreview);
          document.body.appendChild(box);
          previewBox = box;
          previewImage = img;
        }
        document.addEventListener("keydown", function (e) { if (e.key === "Escape") closePreview(); });

        // The navigator: the whole picture small (the largest level that is one tile), with
        // the view as a rectangle; a click there moves the view. Shown while zoomed in.
        var navLevel = 0;
        for (var z = 0; z <= maxLevel; z++) {
          var s = levelSize(z);
          if (s.w <= size && s.h <= size) navLevel = z;
        }
        var navLong = Math.min(180, Math.round(Math.min(window.innerWidth, window.innerHeight) * 0.4));
        var navWidth = T.width >= T.height ? navLong : Math.max(24, Math.round(navLong * T.width / T.height));
        var navHeight = Math.max(24, Math.round(navWidth * T.height / T.width));
        var navigator = L.control({ position: "bottomright" });
        var navBox, viewBox;
        navigator.onAdd = function () {
          var div = L.DomUtil.create("div");
          div.id = "tessera-navigator";
          div.style.width = navWidth + "px";
          div.style.height = navHeight + "px";
          var img = L.DomUtil.create("img", "", div);
          img.alt = "";
          source.image(navLevel, img);
          viewBox = L.DomUtil.create("div", "", div);
          viewBox.id = "tessera-view";
          L.DomEvent.disableClickPropagation(div);
          L.DomEvent.disableScrollPropagation(div);
          L.DomEvent.on(div, "click", function (e) {
            var r = div.getBoundingClientRect();
            map.panTo(point((e.clientX - r.left) / navWidth * T.width, (e.clientY - r.top) / navHeight * T.height), { animate: false });
          });
          navBox = div;
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
          // With the whole picture in view it would only cover part of it. (Within a pixel: a
          // picture fitted to the window's width fills it up to rounding.)
          var whole = nw.x <= 1 && nw.y <= 1 && se.x >= T.width - 1 && se.y >= T.height - 1;
          navBox.style.display = whole ? "none" : "";
          // The bottom row makes way for it.
          document.getElementById("tessera-status").style.maxWidth = whole ? "" : "calc(100% - " + (navWidth + 40) + "px)";
        }
        map.on("move zoom resize", drawNavigator);

        // The room the fitted picture has: below the top row of controls and above the bottom
        // one (the navigator is hidden while the whole picture shows).
        function visible(element) { return element && element.getClientRects().length > 0; }
        function pictureRoom() {
          var box = mapElement.getBoundingClientRect(), top = 0, bottom = 0;
          Array.prototype.forEach.call(mapElement.querySelectorAll(".leaflet-top .leaflet-control"), function (control) {
            if (visible(control)) top = Math.max(top, control.getBoundingClientRect().bottom - box.top);
          });
          Array.prototype.forEach.call(mapElement.querySelectorAll(".leaflet-bottom.leaflet-left .leaflet-control"), function (control) {
            if (visible(control)) bottom = Math.max(bottom, box.bottom - control.getBoundingClientRect().top);
          });
          return { top: top + 6, bottom: bottom + 6 };
        }

        // The view: from the address (#z=&x=&y=), else the whole picture.
        function readHash() {
          var values = {};
          location.hash.replace(/^#/, "").split("&").forEach(function (pair) {
            var kv = pair.split("=");
            if (kv.length !== 2) return;
            try { values[kv[0]] = decodeURIComponent(kv[1]); } catch (e) { /* not an address this page wrote */ }
          });
          return values;
        }
        function writeAddress() {
          var c = map.project(map.getCenter(), maxLevel);
          history.replaceState(null, "", "#z=" + map.getZoom().toFixed(2) + "&x=" + Math.round(c.x) + "&y=" + Math.round(c.y));
        }
        function viewFromAddress() {
          var view = readHash(), z = parseFloat(view.z), x = parseFloat(view.x), y = parseFloat(view.y);
          // (A cut or mistyped address is the whole picture, not a blank page.)
          if (isFinite(z) && isFinite(x) && isFinite(y)) {
            // (setView keeps the zoom within minZoom...maxZoom; the address then says the view shown.)
            limitZoomOut();
            map.setView(point(Math.min(Math.max(x, 0), T.width), Math.min(Math.max(y, 0), T.height)), z, { animate: false });
            writeAddress();
          } else {
            home();
          }
        }
        viewFromAddress();
        window.addEventListener("hashchange", viewFromAddress);
        // The view and the layout as the page holds them, for scripts.
        function rectangle(r) { return [r.left, r.top, r.width, r.height].map(function (v) { return Math.round(v); }).join(","); }
        function recordView() {
          var c = map.project(map.getCenter(), maxLevel);
          body.setAttribute("data-view", map.getZoom() + "," + c.x + "," + c.y);
          var nw = map.latLngToContainerPoint(bounds.getNorthWest()), se = map.latLngToContainerPoint(bounds.getSouthEast());
          var box = mapElement.getBoundingClientRect();
          body.setAttribute("data-picture", rectangle({ left: box.left + nw.x, top: box.top + nw.y, width: se.x - nw.x, height: se.y - nw.y }));
          body.setAttribute("data-window", window.innerWidth + "," + window.innerHeight);
          ["tessera-buttons", "tessera-title", "tessera-label", "tessera-help", "tessera-navigator"].forEach(function (id) {
            var element = document.getElementById(id);
            if (element) element.setAttribute("data-rect", visible(element) ? rectangle(element.getBoundingClientRect()) : "");
          });
        }
        recordView();
        drawNavigator();
        markZoomLimits();
        map.on("moveend resize", recordView);
        map.on("moveend", writeAddress);
        // The keys (+, -, 0, f, arrows) work from the start, without a click on the picture first.
        mapElement.focus({ preventScroll: true });
        body.setAttribute("data-state", "ready");
        document.dispatchEvent(new Event("tesseraready"));
      }

      // ---- Start: the folder when its cells.js loaded, else the archive ----
      if (folder && window.TESSERA) {
        show(window.TESSERA, folderSource());
      } else if (archive) {
        openFromArchive();
      } else {
        fail("missing-folder", "The picture's tiles are missing: " + folderName + "/viewer/cells.js could not be loaded. The folder "
          + folderName + ", which holds the tiles, must be beside " + page + " (it was moved, renamed, or not copied with the page).");
      }
    """#
}
