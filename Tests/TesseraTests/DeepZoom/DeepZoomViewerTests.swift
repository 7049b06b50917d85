// DeepZoomViewerTests.swift — the viewer in a real browser: headless Chromium opens NAME.html
// from file://, and what it shows is checked against the pyramid's own levels.
//
// Needs `chromium` and ImageMagick's `convert` (to read the PNG screenshot); the README's set-up
// and .ci/run install both.
import Glibc
import Testing
import TesseraTestSupport
@testable import Tessera

/// Six photos, each four flat quadrants of its own colours, so that every point away from a
/// quadrant's edge has one known colour at any zoom.
private let palettes: [[RGB]] = [
    [RGB(red: 220, green: 40, blue: 40), RGB(red: 40, green: 200, blue: 60), RGB(red: 30, green: 60, blue: 220), RGB(red: 240, green: 230, blue: 40)],
    [RGB(red: 250, green: 250, blue: 250), RGB(red: 20, green: 20, blue: 20), RGB(red: 130, green: 60, blue: 180), RGB(red: 40, green: 200, blue: 200)],
    [RGB(red: 250, green: 140, blue: 20), RGB(red: 90, green: 90, blue: 90), RGB(red: 200, green: 80, blue: 150), RGB(red: 100, green: 150, blue: 40)],
    [RGB(red: 20, green: 100, blue: 100), RGB(red: 240, green: 200, blue: 170), RGB(red: 120, green: 20, blue: 20), RGB(red: 160, green: 160, blue: 240)],
    [RGB(red: 60, green: 30, blue: 120), RGB(red: 200, green: 240, blue: 120), RGB(red: 10, green: 140, blue: 230), RGB(red: 180, green: 120, blue: 60)],
    [RGB(red: 255, green: 90, blue: 90), RGB(red: 90, green: 255, blue: 90), RGB(red: 90, green: 90, blue: 255), RGB(red: 170, green: 170, blue: 170)],
]

private func writeQuadrantPhoto(_ path: String, side: Int, colours: [RGB]) throws {
    var image = RGBImage(width: side, height: side)
    for y in 0..<side {
        for x in 0..<side {
            let colour = colours[(y < side / 2 ? 0 : 2) + (x < side / 2 ? 0 : 1)]
            let i = (y * side + x) * 3
            image.pixels[i] = colour.red
            image.pixels[i + 1] = colour.green
            image.pixels[i + 2] = colour.blue
        }
    }
    try JPEGFile.write(image, to: path, quality: 95, subsampling: .s444)
}

/// Runs `command` through /bin/sh; its exit status.
private func shell(_ command: String) -> Int32 {
    let status = system(command)
    return status == -1 ? -1 : (status >> 8) & 0xFF
}

private let windowWidth = 800, windowHeight = 600

/// Opens `url` in headless Chromium and returns the screenshot's RGB pixels.
private func screenshot(_ url: String, scratch: ScratchDirectory, name: String) throws -> RGBImage {
    let png = scratch.file(name + ".png"), raw = scratch.file(name + ".rgb")
    let command = "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 "
        + "--user-data-dir='\(scratch.file("profile"))' --window-size=\(windowWidth),\(windowHeight) "
        + "--virtual-time-budget=10000 --screenshot='\(png)' '\(url)' >'\(scratch.file(name + ".log"))' 2>&1"
    #expect(shell(command) == 0, "chromium failed: \(String(decoding: readBytes(scratch.file(name + ".log")), as: UTF8.self))")
    #expect(shell("convert '\(png)' -depth 8 'rgb:\(raw)'") == 0, "ImageMagick could not read the screenshot")
    let bytes = readBytes(raw)
    try #require(bytes.count == windowWidth * windowHeight * 3, "screenshot is \(bytes.count) bytes")
    return RGBImage(width: windowWidth, height: windowHeight, pixels: bytes)
}

/// Opens `url` in headless Chromium and returns the page's DOM after its scripts ran.
private func dumpDOM(_ url: String, scratch: ScratchDirectory) -> String {
    let out = scratch.file("dom.html")
    let command = "chromium --headless --no-sandbox --disable-gpu --user-data-dir='\(scratch.file("profile"))' "
        + "--window-size=\(windowWidth),\(windowHeight) --virtual-time-budget=5000 --dump-dom '\(url)' >'\(out)' 2>/dev/null"
    #expect(shell(command) == 0)
    return String(decoding: readBytes(out), as: UTF8.self)
}

private func channelDistance(_ a: RGB, _ b: RGB) -> Int {
    max(abs(Int(a.red) - Int(b.red)), abs(Int(a.green) - Int(b.green)), abs(Int(a.blue) - Int(b.blue)))
}

@Suite(.serialized) struct DeepZoomViewerTests {
    @Test func browserShowsThePyramidAndNamesThePhotoUnderTheMouse() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        mkdir(scratch.file("photos"), 0o755)
        for (index, colours) in palettes.enumerated() {
            try writeQuadrantPhoto(scratch.file("photos/photo-\(index).jpg"), side: 240, colours: colours)
        }
        // 12 x 8 cells of 120 px: 1440 x 960, so level 11 is the full picture in 6 x 4 tiles.
        let columns = 12, rows = 8, cell = 120
        let library = try PhotoLibrary.scan([scratch.file("photos")])
        let layout = GridLayout.make(photoCount: library.photos.count, columns: columns, rows: rows, cellWidth: cell,
                                     cellHeight: cell, order: .shuffle(seed: 3))
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        var zoom = DeepZoomSettings()
        zoom.quality = 95
        settings.subsampling = .s444
        mkdir(scratch.file("out"), 0o755)
        let renderer = try StripeRenderer(request: RenderRequest(photos: library.photos, layout: layout, settings: settings,
                                                                 outputs: [.deepZoom(path: scratch.file("out/my wall.dzi"), settings: zoom)]))
        try renderer.render()
        let geometry = renderer.plan.deepZoom!
        #expect(geometry.maxLevel == 11)
        let page = "file://" + scratch.file("out/my%20wall.html")
        #expect(access(scratch.file("out/my wall.html"), R_OK) == 0)
        // Leaflet and its licence are in the page; the folder holds the tiles and cells.js.
        #expect(try listDirectory(scratch.file("out/my wall_files/viewer")) == ["cells.js"])
        let leafletPage = String(decoding: readBytes(scratch.file("out/my wall.html")), as: UTF8.self)
        #expect(leafletPage.contains(LeafletAssets.license) && leafletPage.contains(LeafletAssets.javascript))

        // The whole picture, fitted to the window and centred, drawn from level round(zoom).
        // Headless Chromium lays the page out in a shorter viewport than it captures (the window
        // loses its frame), and Leaflet keeps the centre when the window grows, so the scale is
        // measured on the screenshot: the picture is the one region not in the page's colour
        // along the middle row and down a column.
        let whole = try screenshot(page, scratch: scratch, name: "whole")
        let background = RGB(red: 0x11, green: 0x11, blue: 0x11)
        let across = (0..<windowWidth).filter { channelDistance(whole.pixel(x: $0, y: windowHeight / 2), background) > 4 }
        // (A column right of the middle: the help line at the bottom left reaches the middle.)
        let down = (0..<windowHeight).filter { channelDistance(whole.pixel(x: windowWidth * 3 / 4, y: $0), background) > 4 }
        try #require(!across.isEmpty && !down.isEmpty, "no picture on the screen")
        let shownWidth = Double(across.last! - across.first! + 1), shownHeight = Double(down.last! - down.first! + 1)
        let scale = shownWidth / 1440
        #expect(abs(shownHeight - 960 * scale) <= 2, "the picture's shape is wrong: \(shownWidth) x \(shownHeight)")
        #expect(shownWidth >= Double(windowWidth) * 0.6, "the whole picture is shown too small: \(shownWidth) px wide")
        #expect(abs(Double(across.first!) - (Double(windowWidth) - shownWidth) / 2) <= 2, "the picture is not centred")
        let left = Double(across.first!), top = Double(down.first!)
        let shownLevel = geometry.levels[Int((Double(geometry.maxLevel) + log2(scale)).rounded())]
        let shownPixels = try readPyramidLevel(files: scratch.file("out/my wall_files"), level: shownLevel.index, width: shownLevel.width,
                                               height: shownLevel.height, tileSize: geometry.tileSize, overlap: geometry.overlap)
        let levelScale = Double(shownLevel.width) / 1440
        var checked = 0
        for row in 0..<rows {
            for column in 0..<columns {
                for quadrant in 0..<4 {
                    // The middle of the quadrant, in full-size pixels.
                    let x = Double(column * cell + 30 + 60 * (quadrant % 2)), y = Double(row * cell + 30 + 60 * (quadrant / 2))
                    let sx = Int(left + x * scale), sy = Int(top + y * scale)
                    let expected = shownPixels.pixel(x: Int(x * levelScale), y: Int(y * levelScale))
                    let distance = channelDistance(whole.pixel(x: sx, y: sy), expected)
                    #expect(distance <= 16, "whole view: cell \(column),\(row) quadrant \(quadrant) at screen \(sx),\(sy)")
                    checked += 1
                }
            }
        }
        #expect(checked == 384)

        // Deep zoom: twice full size around (700, 500), across the tile edges at x 508 and 762
        // and y 508; every sampled point more than half a pixel from a quadrant's edge must
        // show level 11's colour there. (With the tiles' overlap not cropped, so that tiles sit
        // one pixel out of place, 79 points fail.)
        let full = try readPyramidLevel(files: scratch.file("out/my wall_files"), level: 11, width: 1440, height: 960,
                                        tileSize: geometry.tileSize, overlap: geometry.overlap)
        // Headless Chromium sometimes takes its picture before every tile has arrived (about one
        // run in eight on a loaded machine: a tile-sized patch of the page colour). Such a shot
        // is taken again, up to twice; a shot showing wrong colours is never retaken.
        var deep = try screenshot(page + "#z=12&x=700&y=500", scratch: scratch, name: "deep")
        for attempt in 1...2 {
            let background = RGB(red: 0x11, green: 0x11, blue: 0x11)
            let unloaded = stride(from: 52, to: windowHeight - 40, by: 7).contains { sy in
                stride(from: 60, to: windowWidth - 220, by: 7).contains { sx in channelDistance(deep.pixel(x: sx, y: sy), background) <= 1 }
            }
            guard unloaded else { break }
            deep = try screenshot(page + "#z=12&x=700&y=500", scratch: scratch, name: "deep-\(attempt)")
        }
        checked = 0
        // (From row 52: the buttons are a row along the top, 10 to 48.)
        for sy in stride(from: 52, to: windowHeight - 40, by: 7) {
            for sx in stride(from: 60, to: windowWidth - 10, by: 7) {
                // (The navigator, 180 x 120 px plus its margin, covers the bottom right.)
                if sx >= windowWidth - 200 && sy >= windowHeight - 150 { continue }
                let x = 700 + (Double(sx) + 0.5 - Double(windowWidth) / 2) / 2, y = 500 + (Double(sy) + 0.5 - Double(windowHeight) / 2) / 2
                let edgeX = x.truncatingRemainder(dividingBy: 60), edgeY = y.truncatingRemainder(dividingBy: 60)
                guard min(edgeX, 60 - edgeX) >= 0.5 && min(edgeY, 60 - edgeY) >= 0.5 else { continue }
                let distance = channelDistance(deep.pixel(x: sx, y: sy), full.pixel(x: Int(x), y: Int(y)))
                #expect(distance <= 16, "deep zoom: screen \(sx),\(sy) = picture \(x),\(y)")
                checked += 1
            }
        }
        #expect(checked > 3000)

        // The label: a mousemove at the middle of the map names the photo in cell (5, 4), which
        // holds picture point (700, 500).
        // (The shipped page has no hook for this: the test writes a copy of it beside it with one
        // more script, which moves a synthetic mouse to the middle of the map once the page's own
        // script has set the view.)
        let pageText = String(decoding: readBytes(scratch.file("out/my wall.html")), as: UTF8.self)
        let mouse = """
            <script>
            (function () {
              var map = document.getElementById("map"), box = map.getBoundingClientRect();
              map.dispatchEvent(new MouseEvent("mousemove", { clientX: box.left + box.width / 2,
                                                              clientY: box.top + box.height / 2, bubbles: true }));
            })();
            </script>
            </body>
            """
        #expect(pageText.contains("</body>") && !pageText.contains("probe"))
        writeBytes(Array(pageText.replacing("</body>", with: mouse).utf8), to: scratch.file("out/mouse-probe.html"))
        let dom = dumpDOM("file://" + scratch.file("out/mouse-probe.html") + "#z=12&x=700&y=500", scratch: scratch)
        let photo = library.photos[layout.photo(column: 5, row: 4)].path
        let name = String(photo.split(separator: "/").last!)
        #expect(dom.contains("data-cell=\"5,4\""), "no label for cell 5,4 in the page")
        #expect(dom.contains(">\(name)</div>"), "the label does not name \(name)")
        // The label names the file, never its folders (a pyramid is made to be shared).
        #expect(dom.contains("data-path=\"\(name)\""))
        let folder = String(photo[..<photo.lastIndex(of: "/")!])
        #expect(!pageText.contains(folder))
        #expect(!String(decoding: readBytes(scratch.file("out/my wall_files/viewer/cells.js")), as: UTF8.self).contains(folder))
        // Nor does any other file of the pyramid (tiles, descriptor, Leaflet).
        #expect(shell("grep -rlF '\(folder)' '\(scratch.file("out"))' >/dev/null") == 1, "the photos' folder is in the pyramid")
    }

    /// One flat grey photo everywhere: at fractional zooms, where tiles are scaled and their
    /// edges blended, no pixel of the picture may be darker than the photo (the page colour
    /// showed through as a seam along every tile edge: darkest 131-157 of 200 before the tiles were
    /// let reach over their neighbours). Then the title, home, full screen and navigator.
    @Test func noSeamsAtAnyZoomAndTheControlsWork() throws {
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        mkdir(scratch.file("photos"), 0o755)
        var image = RGBImage(width: 64, height: 64)
        for i in 0..<image.pixels.count { image.pixels[i] = 200 }
        try JPEGFile.write(image, to: scratch.file("photos/grey.jpg"), quality: 100, subsampling: .s444)
        let library = try PhotoLibrary.scan([scratch.file("photos")])
        let layout = GridLayout.make(photoCount: 1, columns: 20, rows: 15, cellWidth: 100, cellHeight: 100, order: .name)
        var settings = RenderSettings()
        settings.temporaryDirectory = scratch.path
        settings.subsampling = .s444
        var zoom = DeepZoomSettings()
        zoom.quality = 100
        zoom.title = "Our <b>wall</b> & more"
        mkdir(scratch.file("out"), 0o755)
        try StripeRenderer(request: RenderRequest(photos: library.photos, layout: layout, settings: settings,
                                                  outputs: [.deepZoom(path: scratch.file("out/w.dzi"), settings: zoom)])).render()
        let page = "file://" + scratch.file("out/w.html")
        // 2000 x 1500: maxLevel 11. Zooms between levels, and one above full size.
        for (number, z) in [9.3, 10.4, 10.7, 11.5].enumerated() {
            var shot = try screenshot(page + "#z=\(z)&x=1000&y=750", scratch: scratch, name: "seam-\(number)")
            // A tile not yet arrived (a 10 x 10 block of exactly the page colour, never a seam's
            // one-pixel line) means the shot came too early: taken again, up to twice.
            func unloadedPatch(_ image: RGBImage) -> Bool {
                stride(from: 200, to: 390, by: 10).contains { y0 in
                    stride(from: 250, to: 540, by: 10).contains { x0 in
                        (y0..<(y0 + 10)).allSatisfy { y in (x0..<(x0 + 10)).allSatisfy { x in image.pixel(x: x, y: y).green <= 18 } }
                    }
                }
            }
            for attempt in 1...2 where unloadedPatch(shot) {
                shot = try screenshot(page + "#z=\(z)&x=1000&y=750", scratch: scratch, name: "seam-\(number)-\(attempt)")
            }
            var darkest = 255
            // The middle of the window: picture at every one of these zooms, no control over it.
            for y in 200..<400 {
                for x in 250..<550 { darkest = min(darkest, Int(shot.pixel(x: x, y: y).green)) }
            }
            #expect(darkest >= 192, "zoom \(z): a pixel of \(darkest) in a picture of 200 (a seam)")
        }

        // The controls, through a probe page that records what they do.
        let pageText = String(decoding: readBytes(scratch.file("out/w.html")), as: UTF8.self)
        #expect(pageText.contains("<title>Our &lt;b&gt;wall&lt;/b&gt; &amp; more — Tessera Deep Zoom</title>"))
        let probe = """
            <script>
            (function () {
              var body = document.body, view = document.getElementById("tessera-view");
              body.setAttribute("data-zoomed", body.getAttribute("data-view"));
              body.setAttribute("data-zoomed-box", view.style.width + "," + view.style.height);
              document.getElementById("tessera-home").dispatchEvent(new MouseEvent("click", { bubbles: true }));
              body.setAttribute("data-home", body.getAttribute("data-view"));
              body.setAttribute("data-home-navigator", document.getElementById("tessera-navigator").style.display || "shown");
            })();
            </script>
            </body>
            """
        writeBytes(Array(pageText.replacing("</body>", with: probe).utf8), to: scratch.file("out/probe.html"))
        let dom = dumpDOM("file://" + scratch.file("out/probe.html") + "#z=12&x=500&y=400", scratch: scratch)
        let plain = dumpDOM(page, scratch: scratch)
        func attribute(_ name: String, in text: String) -> String? {
            guard let start = text.range(of: name + "=\"") else { return nil }
            return String(text[start.upperBound...].prefix { $0 != "\"" })
        }
        let fitted = try #require(attribute("data-view", in: plain))
        #expect(attribute("data-zoomed", in: dom)?.hasPrefix("12,500,400") == true, "\(attribute("data-zoomed", in: dom) ?? "none")")
        #expect(attribute("data-home", in: dom) == fitted, "home gave \(attribute("data-home", in: dom) ?? "none"), fitted \(fitted)")
        // The navigator (180 px wide for this landscape picture): zoomed in, a rectangle of the
        // part in view (800 of 2000 px at half... here 400 of 2000 px at twice full size: 36 px);
        // at home it is hidden, having nothing to add.
        let zoomedBox = try #require(attribute("data-zoomed-box", in: dom)).split(separator: ",").map { Double($0.dropLast(2)) ?? -1 }
        #expect(abs(zoomedBox[0] - 36) <= 4, "navigator rectangle \(zoomedBox)")
        #expect(attribute("data-home-navigator", in: dom) == "none")
        #expect(dom.contains("id=\"tessera-fullscreen\""))
        #expect(dom.contains(">Our &lt;b&gt;wall&lt;/b&gt; &amp; more</div>"), "no title shown")
        let navigatorTile = try #require(attribute("src", in: String(dom[dom.range(of: "id=\"tessera-navigator\"")!.upperBound...])))
        #expect(access(scratch.file("out/" + navigatorTile), R_OK) == 0, "navigator image \(navigatorTile)")
    }
}
