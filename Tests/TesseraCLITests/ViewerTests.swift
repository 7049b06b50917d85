// ViewerTests.swift — issue 30's viewer through the binary, in headless Chromium (ViewerBrowser.swift):
// the SZI page beside `--szi` reads the archive over HTTP range requests from a local server and
// draws what the JPEG of the same render shows; a click names the photo the manifest puts there;
// zoom stops at twice full size by the address, the wheel, the buttons, the keys and a pinch; a
// phone's screen shows the whole picture with nothing over it and nothing cut off, and pans and
// pinches; and what is wrong is said on the page: opened from the disk, the folder moved away, a
// tile gone, the archive missing, damaged, or on a server without range requests. A folder and
// an SZI of one name share one page, which reads either; a ZIP64 archive written by another
// program (Python's zipfile, with extra fields) opens too.
import Glibc
import Testing
import TesseraTestSupport

@Suite(.serialized) struct ViewerTests {
    private func folder(_ name: String) -> String {
        let path = testRoot + "/viewer-\(name)-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o755)
        mkdir(path + "/site", 0o755)
        return path
    }

    /// Renders the fixtures as a grid with `outputs` (paths in `directory`); the run's output on failure.
    private func render(_ directory: String, grid: String = "12x8", _ outputs: [String]) throws {
        let run = runTessera(["grid", fixtures, "--grid", grid, "--tile-size", "120", "--no-progress", "--temp-dir", directory] + outputs)
        try #require(run.status == 0, "\(run.output)")
    }

    /// Runs a Python script with arguments; its status and output.
    private func python(_ script: String, _ arguments: [String], in directory: String) -> (status: Int32, output: String) {
        let path = directory + "/script-\(UInt32.random(in: 0...UInt32.max)).py"
        writeFile(Array(script.utf8), to: path)
        let log = path + ".log"
        let status = system("python3 '\(path)' " + arguments.map { "'\($0)'" }.joined(separator: " ") + " >'\(log)' 2>&1")
        return ((status >> 8) & 0xFF, String(decoding: readFile(log), as: UTF8.self))
    }

    /// The zoom of a data-view ("zoom,x,y"), and its centre.
    private func view(_ text: String?) -> (zoom: Double, x: Double, y: Double)? {
        let values = (text ?? "").split(separator: ",").compactMap { Double($0) }
        return values.count == 3 ? (values[0], values[1], values[2]) : nil
    }

    /// Until the page is up (or says what is wrong) and every tile it shows has arrived.
    private static let settled: [BrowserStep] = [
        .wait("document.body.getAttribute('data-state') !== 'loading'"),
        .wait("document.body.getAttribute('data-state') === 'error' || (document.querySelectorAll('.tessera-tile img').length > 0 && "
              + "Array.from(document.querySelectorAll('.tessera-tile img')).every(function (i) { return i.naturalWidth > 0 || i.parentNode.classList.contains('tessera-missing'); }))",
              seconds: 10),
        .sleep(0.3),
    ]

    private static let message = "document.getElementById('tessera-message').hidden ? 'hidden' : document.getElementById('tessera-message').textContent"

    /// `--szi` writes NAME.html beside the archive; served by a server that honours Range, the
    /// page reads the archive (every request a range), draws the picture the JPEG of the same
    /// render shows, names the photo the manifest puts in the clicked cell, fetches at most 6
    /// tiles at once, and revokes the Blob URL of every tile it drops.
    @Test func theSZIPageDrawsThePictureOverRangeRequests() throws {
        let directory = folder("szi")
        defer { _ = system("rm -rf '\(directory)'") }
        try render(directory, ["-o", directory + "/w.jpg", "--szi", directory + "/site/w.szi", "--manifest", directory + "/m.csv",
                               "--quality", "95"])
        #expect(listNames(directory + "/site") == ["w.html", "w.szi"])
        let page = String(decoding: readFile(directory + "/site/w.html"), as: UTF8.self)
        #expect(!page.contains(directory) && !page.contains("file://") && !page.contains("src=\"/") && !page.contains("href=\"/"),
                "the page names an absolute path")
        #expect(!page.contains("<script src=") && !page.contains("<link"), "the page needs nothing but the archive")
        let server = try RangeServer(root: directory + "/site", scratch: directory)
        defer { server.stop() }
        let cell = (column: 5, row: 3)
        let shot = directory + "/szi.png"
        let results = browse(server.url("w.html"), steps: Self.settled + [
            .read(bodyAttribute("data-source"), as: "source"),
            .read(bodyAttribute("data-error"), as: "problem"),
            .read(bodyAttribute("data-tiles-drawn"), as: "drawn"),
            .read(bodyAttribute("data-most-at-once"), as: "most"),
            .read(bodyAttribute("data-picture"), as: "picture"),
            .screenshot(shot),
            // The middle of a cell, from the picture's rectangle on the screen.
            .clickAt("(function () { var r = document.body.getAttribute('data-picture').split(',').map(Number); "
                     + "return [r[0] + r[2] * \(Double(cell.column) + 0.5) / 12, r[1] + r[3] * \(Double(cell.row) + 0.5) / 8]; })()"),
            .sleep(0.3),
            .read("document.getElementById('tessera-label').textContent", as: "label"),
            .read("document.getElementById('tessera-label').getAttribute('data-cell')", as: "cell"),
            .read("String(document.getElementById('tessera-popup') && document.getElementById('tessera-popup').textContent)", as: "popup"),
            // Deep in, far from where the picture was: the tiles of the whole view are dropped.
            .run("window.wholeViewTiles = Array.from(document.querySelectorAll('.tessera-tile img')).map(function (i) { return i.src; })"),
            .run("location.hash = '#z=12&x=1300&y=900'"),
            .sleep(0.5),
        ] + Self.settled + [
            .read(bodyAttribute("data-view"), as: "deep"),
            .read(bodyAttribute("data-tiles-drawn"), as: "drawnAfter"),
            .read(bodyAttribute("data-blob-urls"), as: "live"),
            .read("String(Array.from(document.querySelectorAll('img')).filter(function (i) { return i.src.indexOf('blob:') === 0; }).length)",
                  as: "blobImages"),
            // The dropped tiles' Blob URLs no longer fetch: they were revoked.
            .read("(function () { var shown = Array.from(document.querySelectorAll('img')).map(function (i) { return i.src; }); "
                  + "var dropped = window.wholeViewTiles.filter(function (u) { return u.indexOf('blob:') === 0 && shown.indexOf(u) < 0; }); "
                  + "return Promise.all(dropped.map(function (u) { return fetch(u).then(function () { return 1; }, function () { return 0; }); }))"
                  + ".then(function (alive) { return dropped.length + ',' + alive.reduce(function (a, b) { return a + b; }, 0); }); })()",
                  as: "dropped"),
        ], in: directory)
        #expect(results["failure"] == nil && results.keys.allSatisfy { !$0.hasPrefix("timeout") }, "\(results)")
        #expect(results["source"] == "archive" && results["problem"] == "null", "\(results)")
        let drawn = try #require(Int(results["drawn"] ?? ""), "\(results)")
        #expect(drawn >= 2, "\(results)")
        let most = try #require(Int(results["most"] ?? ""))
        #expect(most >= 1 && most <= 6, "at most 6 tile requests at once, saw \(most)")
        // Every request for the archive was a range: nothing fetched it whole.
        let archiveRequests = server.requests.filter { $0.path == "/w.szi" }
        #expect(archiveRequests.count >= drawn + 2 && archiveRequests.allSatisfy { $0.range.hasPrefix("bytes=") }, "\(archiveRequests)")

        // What the screen shows is the JPEG, at the picture's place and size.
        let picture = try #require(ScreenRect(results["picture"]), "\(results)")
        let compared = python("""
        import sys
        from PIL import Image, ImageStat
        shot = Image.open(sys.argv[1]).convert("RGB")
        x, y, w, h = [int(v) for v in sys.argv[3:7]]
        shown = shot.crop((x, y, x + w, y + h))
        jpeg = Image.open(sys.argv[2]).convert("RGB").resize((w, h), Image.BOX)
        diff = sum(abs(a - b) for a, b in zip(shown.tobytes(), jpeg.tobytes())) / (3.0 * w * h)
        print("difference %.2f spread %.1f" % (diff, sum(ImageStat.Stat(shown).stddev) / 3))
        """, [shot, directory + "/w.jpg"] + [picture.x, picture.y, picture.width, picture.height].map { String(Int($0)) }, in: directory)
        let words = compared.output.split(separator: " ")
        #expect(compared.status == 0 && words.count == 4, "\(compared.output)")
        if words.count == 4, let difference = Double(words[1]), let spread = Double(words[3].filter { !$0.isWhitespace }) {
            // (6.4 measured: level 10 scaled up against the JPEG scaled down; a picture one cell
            // out of place differs by 40 and more.)
            #expect(difference < 10, "the page shows something else than the JPEG: \(compared.output)")
            #expect(spread > 20, "the page shows a flat picture: \(compared.output)")
        }
        #expect(picture.width > 800, "\(results)")

        // The click named the photo the manifest puts in that cell.
        let manifest = String(decoding: readFile(directory + "/m.csv"), as: UTF8.self).split(separator: "\n")
        let row = try #require(manifest.first { $0.hasPrefix("\(cell.column),\(cell.row),") })
        let name = String(row.split(separator: "/").last!)
        #expect(results["label"] == name && results["cell"] == "\(cell.column),\(cell.row)", "\(results)")
        #expect(results["popup"]?.hasPrefix(name) == true, "\(results)")

        // Deep in: new tiles came, and only the Blob URLs of the images on the page are alive.
        #expect(view(results["deep"])?.zoom == 12, "\(results)")
        let after = try #require(Int(results["drawnAfter"] ?? ""))
        #expect(after > drawn, "\(results)")
        #expect(results["live"] == results["blobImages"] && Int(results["live"] ?? "") ?? 99 < after, "\(results)")
        let dropped = (results["dropped"] ?? "").split(separator: ",").compactMap { Int($0) }
        #expect(dropped.count == 2 && dropped[0] >= 2 && dropped[1] == 0, "dropped tiles, and of them still fetchable: \(results)")
    }

    /// Zoom stops at twice full size (Leaflet zoom maxLevel + 1 = 12 for 1440 x 960 px) however
    /// asked: an address beyond it, the wheel, the zoom-in button (then greyed out) and the + key.
    @Test func zoomStopsAtTwiceFullSize() throws {
        let directory = folder("zoom")
        defer { _ = system("rm -rf '\(directory)'") }
        try render(directory, ["--szi", directory + "/site/w.szi"])
        let server = try RangeServer(root: directory + "/site", scratch: directory)
        defer { server.stop() }
        let home = BrowserStep.run("document.getElementById('tessera-home').click()")
        let zoomIn = BrowserStep.clickAt("(function () { var r = document.getElementById('tessera-zoom-in').getBoundingClientRect(); "
                                         + "return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        let results = browse(server.url("w.html#z=30&x=700&y=500"), steps: Self.settled + [
            .read(bodyAttribute("data-view"), as: "address"),
            .sleep(0.3),
            .read("location.hash", as: "hash"),
            home,
            .read(bodyAttribute("data-view"), as: "home"),
        ] + Array(repeating: [BrowserStep.wheel(x: 500, y: 350, deltaY: -400), .sleep(0.15)], count: 10).flatMap { $0 } + [
            .sleep(0.8),
            .read(bodyAttribute("data-view"), as: "wheel"),
            home,
        ] + Array(repeating: [zoomIn, .sleep(0.4)], count: 8).flatMap { $0 } + [
            .read(bodyAttribute("data-view"), as: "buttons"),
            .read("document.getElementById('tessera-zoom-in').className", as: "zoomInClass"),
            home,
            .read("document.getElementById('tessera-zoom-in').className", as: "zoomInClassHome"),
            .run("document.getElementById('map').focus()"),
        ] + Array(repeating: [BrowserStep.key("+", code: "Equal", keyCode: 187), .sleep(0.4)], count: 8).flatMap { $0 } + [
            .read(bodyAttribute("data-view"), as: "keys"),
        ], in: directory)
        #expect(results["failure"] == nil && results.keys.allSatisfy { !$0.hasPrefix("timeout") }, "\(results)")
        let fitted = try #require(view(results["home"]), "\(results)")
        #expect(fitted.zoom < 11, "\(results)")
        #expect(view(results["address"])?.zoom == 12, "the address asked for zoom 30: \(results)")
        #expect(results["hash"]?.hasPrefix("#z=12.00&") == true, "\(results)")
        for way in ["wheel", "buttons", "keys"] {
            #expect(view(results[way])?.zoom == 12, "\(way): \(results[way] ?? "nothing")")
        }
        #expect(results["zoomInClass"]?.contains("leaflet-disabled") == true && results["zoomInClassHome"]?.contains("leaflet-disabled") == false,
                "\(results)")
    }

    /// On a phone's screen (390 x 844 CSS px, touch), the fitted picture is clear of every
    /// control, and every control and the picture are inside the screen (a long title is cut
    /// short, not wrapped over the picture); one finger pans, two pinch, and a pinch stops at
    /// twice full size. A landscape picture from the SZI page over HTTP, a portrait one from
    /// the Deep Zoom page on the disk.
    @Test(arguments: [(grid: "12x8", archive: true), (grid: "3x8", archive: false)])
    func aPhoneShowsTheWholePictureUncovered(grid: String, archive: Bool) throws {
        let directory = folder("phone")
        defer { _ = system("rm -rf '\(directory)'") }
        let title = "Every photo of the year, on one wall, for the family"
        try render(directory, grid: grid, [archive ? "--szi" : "--dzi", directory + (archive ? "/site/w.szi" : "/site/w.dzi"), "--title", title])
        let server = archive ? try RangeServer(root: directory + "/site", scratch: directory) : nil
        defer { server?.stop() }
        let controls = ["tessera-buttons", "tessera-title", "tessera-label", "tessera-help", "tessera-navigator"]
        let results = browse(server?.url("w.html") ?? "file://" + directory + "/site/w.html", viewport: (390, 844, 3), mobile: true,
                             steps: Self.settled + [
            .read(bodyAttribute("data-source"), as: "source"),
            .read(bodyAttribute("data-window"), as: "window"),
            .read(bodyAttribute("data-picture"), as: "picture"),
            .read(bodyAttribute("data-view"), as: "fitted"),
            .read("String(matchMedia('(pointer: coarse)').matches)", as: "coarse"),
            .read("String(document.getElementById('tessera-title').scrollWidth > document.getElementById('tessera-title').clientWidth)",
                  as: "titleCut"),
        ] + controls.map { .read("String(document.getElementById('\($0)').getAttribute('data-rect'))", as: $0) } + [
            // Turned on its side: the whole picture is fitted again, still clear of the controls.
            .viewport(844, 390),
            .sleep(0.6),
            .read(bodyAttribute("data-window"), as: "turnedWindow"),
            .read(bodyAttribute("data-picture"), as: "turnedPicture"),
        ] + controls.map { .read("String(document.getElementById('\($0)').getAttribute('data-rect'))", as: "turned-" + $0) } + [
            .viewport(390, 844),
            .sleep(0.6),
            .read(bodyAttribute("data-picture"), as: "backPicture"),
            // Two fingers apart: a pinch far past twice full size.
            .touch("touchStart", [(175, 420), (215, 420)]),
            .touch("touchMove", [(150, 420), (240, 420)]),
            .touch("touchMove", [(90, 420), (300, 420)]),
            .touch("touchMove", [(10, 420), (380, 420)]),
            .touch("touchEnd", []),
            .sleep(0.8),
            .read(bodyAttribute("data-view"), as: "pinched"),
            // One finger up and to the left: the view moves down and to the right.
            .touch("touchStart", [(250, 500)]),
            .touch("touchMove", [(220, 480)]),
            .touch("touchMove", [(170, 450)]),
            .touch("touchMove", [(150, 440)]),
            .touch("touchEnd", []),
            .sleep(1.2),
            .read(bodyAttribute("data-view"), as: "panned"),
        ], in: directory)
        #expect(results["failure"] == nil && results.keys.allSatisfy { !$0.hasPrefix("timeout") }, "\(results)")
        #expect(results["source"] == (archive ? "archive" : "folder") && results["window"] == "390,844" && results["coarse"] == "true",
                "\(results)")
        let picture = try #require(ScreenRect(results["picture"]), "\(results)")
        #expect(picture.isInside(width: 390, height: 844), "the picture is cut off: \(picture)")
        if archive {
            #expect(picture.width >= 389, "a landscape picture fills the width: \(picture)")
        } else {
            #expect(picture.height >= 844 - 120, "a portrait picture fills the height between the controls: \(picture)")
        }
        for control in controls {
            guard let rect = ScreenRect(results[control]) else {
                // Hidden: the navigator with the whole picture shown, the label with no photo named.
                #expect(["tessera-label", "tessera-navigator"].contains(control) && results[control] == "", "\(control): \(results)")
                continue
            }
            #expect(rect.isInside(width: 390, height: 844), "\(control) is cut off: \(rect)")
            #expect(!rect.intersects(picture), "\(control) covers the picture: \(rect) over \(picture)")
        }
        #expect(results["titleCut"] == "true", "the long title is cut short on one line: \(results)")
        // Turned: the picture fitted to the new shape (as tall as the room between the rows of
        // controls), and back: as it was.
        #expect(results["turnedWindow"] == "844,390", "\(results)")
        let turned = try #require(ScreenRect(results["turnedPicture"]), "\(results)")
        #expect(turned.isInside(width: 844, height: 390) && turned.height >= 390 - 120, "\(turned)")
        for control in controls {
            guard let rect = ScreenRect(results["turned-" + control]) else { continue }
            #expect(rect.isInside(width: 844, height: 390) && !rect.intersects(turned), "turned: \(control) at \(rect) over \(turned)")
        }
        #expect(results["backPicture"] == results["picture"], "\(results)")
        let fitted = try #require(view(results["fitted"])), pinched = try #require(view(results["pinched"]))
        let panned = try #require(view(results["panned"]))
        let maxLevel = archive ? 11.0 : 10.0  // 1440 x 960 and 360 x 960 px
        #expect(pinched.zoom > fitted.zoom + 1 && pinched.zoom <= maxLevel + 1 + 1e-9, "\(results)")
        #expect(abs(pinched.zoom - (maxLevel + 1)) < 1e-9, "the pinch stops at twice full size: \(results)")
        #expect(panned.x > pinched.x + 10 && panned.y > pinched.y + 5 && panned.zoom == pinched.zoom, "\(results)")
    }

    /// The SZI page opened from the disk cannot read the archive, and says to serve the folder
    /// over HTTP (with a command) or to open the Deep Zoom page.
    @Test func fromTheDiskTheSZIPageSaysToServeIt() throws {
        let directory = folder("disk")
        defer { _ = system("rm -rf '\(directory)'") }
        try render(directory, grid: "4x3", ["--szi", directory + "/site/my wall.szi"])
        let results = browse("file://" + directory + "/site/my%20wall.html", steps: [
            .wait("document.body.getAttribute('data-state') !== 'loading'"),
            .read(bodyAttribute("data-state"), as: "state"),
            .read(bodyAttribute("data-error"), as: "problem"),
            .read(Self.message, as: "message"),
            .read("(function () { var r = document.getElementById('tessera-message').getBoundingClientRect(); "
                  + "return [r.left, r.top, r.width, r.height].join(','); })()", as: "box"),
        ], in: directory)
        #expect(results["state"] == "error" && results["problem"] == "file-protocol", "\(results)")
        let message = results["message"] ?? ""
        #expect(message.contains("my wall.szi") && message.contains("only over HTTP") && message.contains("python3 -m http.server")
                && message.contains("http://localhost:8000/my%20wall.html") && !message.contains("folder's page"), "\(message)")
        let box = try #require(ScreenRect(results["box"]))
        #expect(box.isInside(width: 1000, height: 700) && box.width > 200 && box.height > 40, "\(box)")
    }

    /// The Deep Zoom page from the disk: it draws the pyramid; with NAME_files moved away it
    /// says the folder is missing; with tiles gone it names the first one missing and draws
    /// the others.
    @Test func aDZIPageWithoutItsTilesSaysWhatIsMissing() throws {
        let directory = folder("missing")
        defer { _ = system("rm -rf '\(directory)'") }
        try render(directory, grid: "6x4", ["--dzi", directory + "/site/w.dzi"])
        let page = "file://" + directory + "/site/w.html"
        let steps = Self.settled + [
            .read(bodyAttribute("data-state"), as: "state"),
            .read(bodyAttribute("data-error"), as: "problem"),
            .read(bodyAttribute("data-source"), as: "source"),
            .read(bodyAttribute("data-tiles-drawn"), as: "drawn"),
            .read(bodyAttribute("data-missing-tiles"), as: "missing"),
            .read(Self.message, as: "message"),
        ]
        let whole = browse(page, steps: steps, in: directory)
        #expect(whole["state"] == "ready" && whole["source"] == "folder" && whole["problem"] == "null" && whole["message"] == "hidden", "\(whole)")
        let drawn = try #require(Int(whole["drawn"] ?? ""), "\(whole)")
        #expect(drawn >= 2)

        #expect(rename(directory + "/site/w_files", directory + "/w_files") == 0)
        let moved = browse(page, steps: steps, in: directory)
        #expect(moved["state"] == "error" && moved["problem"] == "missing-folder", "\(moved)")
        #expect(moved["message"]?.contains("w_files") == true && moved["message"]?.contains("beside w.html") == true, "\(moved)")

        #expect(rename(directory + "/w_files", directory + "/site/w_files") == 0)
        var removed = 0
        for level in listNames(directory + "/site/w_files") where Int(level) != nil {
            if unlink(directory + "/site/w_files/\(level)/0_0.jpg") == 0 { removed += 1 }
        }
        #expect(removed >= 10)
        let holes = browse(page, steps: steps, in: directory)
        #expect(holes["state"] == "ready" && holes["problem"] == "missing-tiles" && (Int(holes["missing"] ?? "") ?? 0) >= 1, "\(holes)")
        #expect(holes["message"]?.contains(#/w_files/\d+/0_0\.jpg could not be loaded/#) == true, "\(holes)")
        #expect(Int(holes["drawn"] ?? "") == drawn - 1, "the other tiles are drawn: \(holes)")
    }

    /// Served, the SZI page says what is wrong with the archive: not there (404), cut short,
    /// its tiles' headers damaged, or on a server without range requests when it is larger than
    /// the page loads whole; a small one on such a server (Python's http.server) is loaded whole.
    @Test func serverProblemsAreNamed() throws {
        let directory = folder("server")
        defer { _ = system("rm -rf '\(directory)'") }
        try render(directory, grid: "6x4", ["--szi", directory + "/site/w.szi"])
        let site = directory + "/site", page = readFile(site + "/w.html"), archive = readFile(site + "/w.szi")
        for broken in ["gone", "cut", "bad"] {
            mkdir(directory + "/" + broken, 0o755)
            writeFile(page, to: directory + "/\(broken)/w.html")
        }
        writeFile(Array(archive.dropLast(1000)), to: directory + "/cut/w.szi")
        writeFile(archive, to: directory + "/bad/w.szi")
        let damaged = python("""
        import sys, zipfile
        path = sys.argv[1]
        offsets = [i.header_offset for i in zipfile.ZipFile(path).infolist() if i.filename.endswith(".jpg")]
        with open(path, "r+b") as f:
            for offset in offsets:
                f.seek(offset); f.write(b"\\0\\0\\0\\0")
        print(len(offsets))
        """, [directory + "/bad/w.szi"], in: directory)
        #expect(damaged.status == 0 && (Int(damaged.output.filter(\.isNumber)) ?? 0) > 10, "\(damaged.output)")
        writeFile(Array(String(decoding: page, as: UTF8.self).replacing("data-archive=", with: "data-whole-limit=\"1000\" data-archive=").utf8),
                  to: site + "/limited.html")
        let server = try RangeServer(root: directory, scratch: directory)
        defer { server.stop() }
        let steps = Self.settled + [
            .read(bodyAttribute("data-state"), as: "state"),
            .read(bodyAttribute("data-error"), as: "problem"),
            .read(bodyAttribute("data-range"), as: "range"),
            .read(bodyAttribute("data-tiles-drawn"), as: "drawn"),
            .read(Self.message, as: "message"),
        ]
        let gone = browse(server.url("gone/w.html"), steps: steps, in: directory)
        #expect(gone["problem"] == "missing-archive" && gone["message"]?.contains("w.szi was not found on the server (HTTP 404)") == true, "\(gone)")
        let cut = browse(server.url("cut/w.html"), steps: steps, in: directory)
        #expect(cut["problem"] == "damaged" && cut["message"]?.contains("no end-of-archive record") == true, "\(cut)")
        let bad = browse(server.url("bad/w.html"), steps: steps, in: directory)
        #expect(bad["state"] == "ready" && bad["problem"] == "missing-tiles" && bad["message"]?.contains("no entry header at byte") == true, "\(bad)")
        let whole = browse(server.url("norange/site/w.html"), steps: steps, in: directory)
        #expect(whole["state"] == "ready" && whole["problem"] == "null" && whole["range"] == "whole" && (Int(whole["drawn"] ?? "") ?? 0) >= 2,
                "\(whole)")
        #expect(server.requests.contains { $0.path == "/site/w.szi" && $0.range.hasPrefix("bytes=-") }, "the page asked for a range first")
        // Nor its length: read whole up to the limit all the same.
        let unsized = browse(server.url("nolength/site/w.html"), steps: steps, in: directory)
        #expect(unsized["state"] == "ready" && unsized["problem"] == "null" && unsized["range"] == "whole" && (Int(unsized["drawn"] ?? "") ?? 0) >= 2,
                "\(unsized)")
        let limited = browse(server.url("norange/site/limited.html"), steps: steps, in: directory)
        #expect(limited["state"] == "error" && limited["problem"] == "no-range", "\(limited)")
        #expect(limited["message"]?.contains("does not answer range requests") == true && limited["message"]?.contains("too large") == true, "\(limited)")
        let unsizedLimited = browse(server.url("nolength/site/limited.html"), steps: steps, in: directory)
        #expect(unsizedLimited["state"] == "error" && unsizedLimited["problem"] == "no-range"
                && unsizedLimited["message"]?.contains("more than") == true, "\(unsizedLimited)")
    }

    /// --dzi and --szi of one NAME in one folder write one page, and the archive holds the
    /// folder's cells.js: from the disk the page reads the folder; served, the folder too, and
    /// the archive once the folder is gone; from the disk without the folder it says what it
    /// would need. Different names give two pages, each with its own source.
    @Test func oneNameOnePageReadsTheFolderOrTheArchive() throws {
        let directory = folder("both")
        defer { _ = system("rm -rf '\(directory)'") }
        try render(directory, grid: "6x4", ["--dzi", directory + "/site/w.dzi", "--szi", directory + "/site/w.szi"])
        #expect(listNames(directory + "/site") == ["w.dzi", "w.html", "w.szi", "w_files"])
        let page = String(decoding: readFile(directory + "/site/w.html"), as: UTF8.self)
        #expect(page.contains("data-folder=\"w_files\"") && page.contains("data-archive=\"w.szi\""))
        let cells = python("""
        import sys, zipfile
        print(zipfile.ZipFile(sys.argv[1]).read("w/w_files/viewer/cells.js") == open(sys.argv[2], "rb").read())
        """, [directory + "/site/w.szi", directory + "/site/w_files/viewer/cells.js"], in: directory)
        #expect(cells.output == "True\n", "\(cells.output)")
        let server = try RangeServer(root: directory + "/site", scratch: directory)
        defer { server.stop() }
        let steps = Self.settled + [
            .read(bodyAttribute("data-source"), as: "source"),
            .read(bodyAttribute("data-error"), as: "problem"),
            .read(bodyAttribute("data-tiles-drawn"), as: "drawn"),
            .read(Self.message, as: "message"),
        ]
        let disk = browse("file://" + directory + "/site/w.html", steps: steps, in: directory)
        #expect(disk["source"] == "folder" && disk["problem"] == "null" && (Int(disk["drawn"] ?? "") ?? 0) >= 2, "\(disk)")
        let served = browse(server.url("w.html"), steps: steps, in: directory)
        #expect(served["source"] == "folder" && served["problem"] == "null", "\(served)")
        #expect(rename(directory + "/site/w_files", directory + "/w_files") == 0)
        let fallback = browse(server.url("w.html"), steps: steps, in: directory)
        #expect(fallback["source"] == "archive" && fallback["problem"] == "null" && (Int(fallback["drawn"] ?? "") ?? 0) >= 2, "\(fallback)")
        let stranded = browse("file://" + directory + "/site/w.html", steps: steps, in: directory)
        #expect(stranded["problem"] == "file-protocol" && stranded["message"]?.contains("The folder w_files is not beside this page") == true
                && stranded["message"]?.contains("folder's page (w.html beside the folder w_files)") == true,
                "\(stranded)")

        // Two names: two pages, neither reading the other's pyramid.
        let other = folder("two")
        defer { _ = system("rm -rf '\(other)'") }
        try render(other, grid: "2x2", ["--dzi", other + "/site/a.dzi", "--szi", other + "/site/b.szi"])
        #expect(listNames(other + "/site") == ["a.dzi", "a.html", "a_files", "b.html", "b.szi"])
        let a = String(decoding: readFile(other + "/site/a.html"), as: UTF8.self), b = String(decoding: readFile(other + "/site/b.html"), as: UTF8.self)
        #expect(a.contains("data-folder=\"a_files\"") && !a.contains("data-archive="))
        #expect(b.contains("data-archive=\"b.szi\"") && !b.contains("data-folder="))
    }

    /// `--previews 240`: every distinct photo drawn is written whole, 240 px on its long side and
    /// upright (a photo stored sideways with EXIF orientation 6 comes out portrait), into
    /// NAME_files/viewer/previews (the folder) or the archive; a click on a cell shows that
    /// photo's preview over the picture, inside the window, and Escape puts it away. A photo
    /// that cannot be read (drawn as a placeholder) has none, and its click says so. From the
    /// disk for the folder, over range requests for the SZI.
    @Test(arguments: [false, true])
    func aClickedCellShowsItsPhotoLarger(archive: Bool) throws {
        let directory = folder("previews")
        defer { _ = system("rm -rf '\(directory)'") }
        let photos = directory + "/photos"
        mkdir(photos, 0o755)
        for name in ["Landscape_1", "Portrait_6", "Landscape_8"] {
            #expect(system("cp '\(fixtures)/\(name).jpg' '\(photos)/'") == 0)
        }
        // A JPEG whose header reads and whose data does not (drawn as a placeholder).
        writeFile(JPEGFile.failingInItsScan(readFile(fixtures + "/Landscape_2.jpg")), to: photos + "/zz-broken.jpg")
        let output = archive ? ["--szi", directory + "/site/w.szi"] : ["--dzi", directory + "/site/w.dzi"]
        let run = runTessera(["grid", photos, "--grid", "4x2", "--tile-size", "150", "--no-progress", "--temp-dir", directory,
                              "--manifest", directory + "/m.csv", "--previews", "240"] + output)
        try #require(run.status == 0, "\(run.output)")
        #expect(run.output.contains("3 photo previews for the viewer"), "\(run.output)")

        // The preview files: one a readable photo, named by the photo's number in cells.js.
        let listing = python("""
        import sys, os, io, zipfile
        from PIL import Image, ImageOps
        site, archive, photos = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
        if archive:
            z = zipfile.ZipFile(os.path.join(site, "w.szi"))
            files = {n.split("/")[-1]: z.read(n) for n in z.namelist() if "/viewer/previews/" in n}
        else:
            folder = os.path.join(site, "w_files/viewer/previews")
            files = {n: open(os.path.join(folder, n), "rb").read() for n in os.listdir(folder)}
        names = ["Landscape_1.jpg", "Landscape_8.jpg", "Portrait_6.jpg"]
        for n in sorted(files):
            preview = Image.open(io.BytesIO(files[n])).convert("RGB")
            photo = ImageOps.exif_transpose(Image.open(os.path.join(photos, names[int(n[:-4])]))).convert("RGB")
            expected = photo.resize(preview.size, Image.BOX)
            diff = sum(abs(a - b) for a, b in zip(preview.tobytes(), expected.tobytes())) / (3.0 * preview.size[0] * preview.size[1])
            print("%s %dx%d %.1f" % (n, preview.size[0], preview.size[1], diff))
        """, [directory + "/site", archive ? "1" : "0", photos], in: directory)
        let lines = listing.output.split(separator: "\n").map(String.init)
        #expect(listing.status == 0 && lines.count == 3, "\(listing.output)")
        for line in lines {
            let words = line.split(separator: " ")
            guard words.count == 3 else { continue }
            // Photos 0 and 1 are landscape, 2 (Portrait_6) is stored sideways: upright, portrait.
            #expect(words[1] == (words[0] == "2.jpg" ? "160x240" : "240x160"), "\(line)")
            #expect((Double(words[2]) ?? 99) < 4, "the preview is not its photo: \(line)")
        }

        // The cells of the portrait and of the broken photo, from the manifest.
        let manifest = String(decoding: readFile(directory + "/m.csv"), as: UTF8.self).split(separator: "\n")
        func cell(of name: String) throws -> (column: Int, row: Int) {
            let row = try #require(manifest.first { $0.hasSuffix("/" + name) }, "\(manifest)")
            let fields = row.split(separator: ",")
            return (Int(fields[0])!, Int(fields[1])!)
        }
        let portrait = try cell(of: "Portrait_6.jpg"), broken = try cell(of: "zz-broken.jpg")
        func click(_ cell: (column: Int, row: Int)) -> BrowserStep {
            .clickAt("(function () { var r = document.body.getAttribute('data-picture').split(',').map(Number); "
                     + "return [r[0] + r[2] * \(Double(cell.column) + 0.5) / 4, r[1] + r[3] * \(Double(cell.row) + 0.5) / 2]; })()")
        }
        let preview = "document.getElementById('tessera-preview')"
        let shown = "(function () { var b = \(preview); return b ? b.getAttribute('data-state') : 'none'; })()"
        var page = "file://" + directory + "/site/w.html"
        var server: RangeServer?
        if archive {
            server = try RangeServer(root: directory + "/site", scratch: directory)
            page = server!.url("w.html")
        }
        defer { server?.stop() }
        let results = browse(page, steps: Self.settled + [
            .read(bodyAttribute("data-source"), as: "source"),
            .read("document.getElementById('tessera-help').textContent", as: "help"),
            click(portrait),
            .wait("\(shown) !== 'loading' && \(shown) !== 'none'", seconds: 10),
            .read(shown, as: "state"),
            .read("\(preview).getAttribute('data-photo')", as: "photo"),
            .read("(function () { var i = \(preview).querySelector('img'); return i.naturalWidth + 'x' + i.naturalHeight; })()", as: "size"),
            .read("(function () { var r = \(preview).querySelector('img').getBoundingClientRect(); "
                  + "return [r.left, r.top, r.width, r.height].join(','); })()", as: "box"),
            .read("document.getElementById('tessera-preview-name').textContent", as: "caption"),
            .key("Escape", code: "Escape", keyCode: 27),
            .sleep(0.2),
            .read(shown, as: "afterEscape"),
            click(broken),
            .wait("\(shown) !== 'loading' && \(shown) !== 'none'", seconds: 10),
            .read(shown, as: "brokenState"),
            .read("document.getElementById('tessera-preview-name').textContent", as: "brokenCaption"),
            .run("\(preview).click()"),
            .sleep(0.2),
            .read(shown, as: "afterClick"),
        ], in: directory)
        #expect(results["failure"] == nil && results.keys.allSatisfy { !$0.hasPrefix("timeout") }, "\(results)")
        #expect(results["source"] == (archive ? "archive" : "folder"), "\(results)")
        #expect(results["help"]?.contains("click to see it larger") == true, "\(results)")
        #expect(results["state"] == "shown" && results["photo"] == "2" && results["size"] == "160x240", "\(results)")
        #expect(results["caption"] == "Portrait_6.jpg", "\(results)")
        let box = try #require(ScreenRect(results["box"]), "\(results)")
        #expect(box.isInside(width: 1000, height: 700) && box.width >= 150 && box.height >= 230, "\(box)")
        #expect(results["afterEscape"] == "none", "\(results)")
        #expect(results["brokenState"] == "missing" && results["brokenCaption"]?.contains("zz-broken.jpg: no larger picture") == true,
                "\(results)")
        #expect(results["afterClick"] == "none", "\(results)")
    }

    /// --previews is refused where there is no viewer to show them, and out of its range; the dry run counts them in the pyramid's disk estimate.
    @Test func previewsNeedAViewer() throws {
        let directory = folder("previews-refused")
        defer { _ = system("rm -rf '\(directory)'") }
        let base = ["grid", fixtures, "--grid", "4x3", "--tile-size", "64", "--no-progress", "--temp-dir", directory]
        let refusals: [(arguments: [String], words: String)] = [
            (["-o", directory + "/w.jpg", "--previews", "256"], "--previews are shown by the Deep Zoom viewer: add --dzi"),
            (["--iiif", directory + "/iiif", "--iiif-id", "https://example.org/w", "--previews", "256"], "which --iiif does not have"),
            (["--dzi", directory + "/w.dzi", "--no-viewer", "--previews", "256"], "--previews is for the viewer, and --no-viewer leaves it out"),
            (["--dzi", directory + "/w.dzi", "--viewer-labels", "none", "--previews", "256"], "--viewer-labels none leaves out which photo"),
            (["--dzi", directory + "/w.dzi", "--previews", "32"], "--previews"),
            (["--dzi", directory + "/w.dzi", "--previews", "5000"], "--previews"),
        ]
        for refusal in refusals {
            let run = runTessera(base + refusal.arguments)
            #expect(run.status == 2 && run.output.contains(refusal.words), "\(refusal.arguments): \(run.status) \(run.output)")
        }
        #expect(listNames(directory) == ["site"], "a refused run wrote \(listNames(directory))")
        func pyramidDisk(_ extra: [String]) -> (line: String, kib: Double)? {
            let run = runTessera(base + ["--dzi", directory + "/w.dzi", "--dry-run"] + extra)
            guard let line = run.output.split(separator: "\n").first(where: { $0.hasPrefix("deep zoom") }),
                  let match = line.firstMatch(of: #/at most ([0-9.]+) (KiB|MiB)/#) else { return nil }
            return (String(line), (Double(match.1) ?? 0) * (match.2 == "MiB" ? 1024 : 1))
        }
        let without = try #require(pyramidDisk([]), "no pyramid in the dry run").kib
        let (line, with) = try #require(pyramidDisk(["--previews", "1024"]))
        #expect(line.contains("up to 12 photo previews of 1024 px"), "\(line)")
        // The 12 photos drawn at up to 1024 x 1024 x 0.6 bytes each: about 7.2 MiB more.
        #expect(with - without > 7 * 1024 && with - without < 7.5 * 1024, "\(without) KiB without previews, \(with) KiB with")
    }

    /// An address cut short or mistyped (a zoom of "abc", a broken percent escape) shows the
    /// whole picture, not a blank page; one far out is held to the limits.
    @Test func aBrokenAddressShowsTheWholePicture() throws {
        let directory = folder("address")
        defer { _ = system("rm -rf '\(directory)'") }
        try render(directory, ["--dzi", directory + "/site/w.dzi"])
        let page = "file://" + directory + "/site/w.html"
        let steps = Self.settled + [
            .read(bodyAttribute("data-state"), as: "state"),
            .read(bodyAttribute("data-view"), as: "view"),
            .read("String(document.getElementById('tessera-message').hidden)", as: "quiet"),
            .run("document.getElementById('tessera-home').click()"),
            .read(bodyAttribute("data-view"), as: "home"),
        ]
        for address in ["#z=abc&x=1&y=1", "#z=%E0&x=1&y=1", "#z=5&x=NaN&y=3", "#z=-40&x=-9000&y=99999"] {
            let results = browse(page + address, steps: steps, in: directory)
            #expect(results["failure"] == nil && results.keys.allSatisfy { !$0.hasPrefix("timeout") }, "\(address): \(results)")
            #expect(results["state"] == "ready" && results["quiet"] == "true", "\(address): \(results)")
            let shown = try #require(view(results["view"]), "\(address): \(results)"), home = try #require(view(results["home"]))
            if address.hasPrefix("#z=-40") {
                #expect(shown.zoom >= home.zoom - 1 - 1e-9 && shown.x >= 0 && shown.y <= 960, "held to the limits: \(results)")
            } else {
                #expect(shown == home, "\(address): the whole picture: \(results)")
            }
        }
    }

    /// The keys work as soon as the page is up and after a button is clicked (no click on the
    /// picture first), and zooming out stops at half the whole picture's fitted size.
    @Test func theKeysWorkAtOnceAndZoomingOutStops() throws {
        let directory = folder("keys")
        defer { _ = system("rm -rf '\(directory)'") }
        try render(directory, ["--dzi", directory + "/site/w.dzi"])
        let zoomIn = BrowserStep.clickAt("(function () { var r = document.getElementById('tessera-zoom-in').getBoundingClientRect(); "
                                         + "return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        let results = browse("file://" + directory + "/site/w.html", steps: Self.settled + [
            .read(bodyAttribute("data-view"), as: "fitted"),
            .key("+", code: "Equal", keyCode: 187),
            .sleep(0.5),
            .read(bodyAttribute("data-view"), as: "keyed"),
            zoomIn,
            .sleep(0.5),
            .read(bodyAttribute("data-view"), as: "button"),
            .key("0", code: "Digit0", keyCode: 48),
            .sleep(0.5),
            .read(bodyAttribute("data-view"), as: "home"),
        ] + Array(repeating: [BrowserStep.wheel(x: 500, y: 350, deltaY: 400), .sleep(0.15)], count: 12).flatMap { $0 } + [
            .sleep(0.8),
            .read(bodyAttribute("data-view"), as: "out"),
            .read("document.getElementById('tessera-zoom-out').className", as: "zoomOutClass"),
            .key("-", code: "Minus", keyCode: 189),
            .sleep(0.5),
            .read(bodyAttribute("data-view"), as: "outKey"),
        ], in: directory)
        #expect(results["failure"] == nil && results.keys.allSatisfy { !$0.hasPrefix("timeout") }, "\(results)")
        let fitted = try #require(view(results["fitted"]), "\(results)")
        let keyed = try #require(view(results["keyed"])), button = try #require(view(results["button"]))
        // (+ and - step half a level, a button a level. The whole picture fits a little
        // differently with the navigator shown before: the help line beside it takes two lines.)
        #expect(keyed.zoom > fitted.zoom + 0.49, "+ right after the page is up: \(results)")
        #expect(button.zoom > keyed.zoom + 0.99, "\(results)")
        let home = try #require(view(results["home"]))
        #expect(abs(home.zoom - fitted.zoom) < 0.05, "0 after a button: \(results)")
        let out = try #require(view(results["out"]))
        #expect(abs(out.zoom - (home.zoom - 1)) < 0.05, "zooming out stops at half the fitted size: \(results)")
        #expect(results["zoomOutClass"]?.contains("leaflet-disabled") == true, "\(results)")
        #expect(view(results["outKey"])?.zoom == out.zoom, "\(results)")
    }

    /// On a phone, a photo's long name (two lines at most) does not take the tap meant for the
    /// cell under it: tapping the bottom cell, where the name of the cell shows, opens that
    /// cell's photo.
    @Test func aLongNameDoesNotTakeTheTapOnTheCellUnderIt() throws {
        let directory = folder("long-names")
        defer { _ = system("rm -rf '\(directory)'") }
        let photos = directory + "/photos"
        mkdir(photos, 0o755)
        let long = String(repeating: "a long holiday name with many words ", count: 5)
        let names = ["a", "b", "c"].map { $0 + " " + long + ".jpg" }
        for (name, fixture) in zip(names, ["Landscape_1", "Portrait_6", "Landscape_8"]) {
            #expect(system("cp '\(fixtures)/\(fixture).jpg' '\(photos)/\(name)'") == 0)
        }
        let run = runTessera(["grid", photos, "--grid", "1x3", "--tile-size", "120", "--no-progress", "--temp-dir", directory,
                              "--previews", "200", "--dzi", directory + "/site/w.dzi"])
        try #require(run.status == 0, "\(run.output)")
        let preview = "document.getElementById('tessera-preview')"
        let shown = "(function () { var b = \(preview); return b ? b.getAttribute('data-state') : 'none'; })()"
        // 2 px above the picture's bottom edge: inside the bottom cell, under its name.
        let bottom = "(function () { var r = document.body.getAttribute('data-picture').split(',').map(Number); return [r[0] + r[2] / 2, r[1] + r[3] - 2]; })()"
        let moveThere = "(function () { var p = \(bottom); var e = document.elementFromPoint(p[0], p[1]); "
            + "e.dispatchEvent(new MouseEvent('mousemove', { clientX: p[0], clientY: p[1], bubbles: true })); })()"
        let underLabel = "(function () { var p = \(bottom), r = document.getElementById('tessera-label').getBoundingClientRect(); "
            + "return String(p[1] >= r.top && p[1] <= r.bottom); })()"
        let page = "file://" + directory + "/site/w.html"
        let steps: [BrowserStep] = Self.settled + [
            .run(moveThere),
            .sleep(0.2),
            .read("document.getElementById('tessera-label').textContent", as: "label"),
            .read("document.getElementById('tessera-label').getBoundingClientRect().height", as: "labelHeight"),
            .read(underLabel, as: "underLabel"),
            .clickAt(bottom),
            .wait("\(shown) !== 'loading' && \(shown) !== 'none'", seconds: 10),
            .read(shown, as: "state"),
            .read("document.getElementById('tessera-preview-name').textContent", as: "caption"),
        ]
        let results = browse(page, viewport: (390, 844, 3), mobile: true, steps: steps, in: directory)
        #expect(results["failure"] == nil && results.keys.allSatisfy { !$0.hasPrefix("timeout") }, "\(results)")
        #expect(results["label"] == names[2], "\(results)")
        let twoLines: Double = 2 * 14 * 1.4 + 8 + 1
        #expect((Double(results["labelHeight"] ?? "") ?? 99) <= twoLines, "two lines at most: \(results)")
        #expect(results["underLabel"] == "true", "the tap is under the name: \(results)")
        #expect(results["state"] == "shown" && results["caption"] == names[2], "\(results)")
    }

    /// A photo whose cell is drawn but whose preview needs more memory than the budget gives
    /// (a 4000 x 4000 interlaced PNG, whose passes are binned into the 2048 px preview, inside
    /// 100 MiB) is named in a warning with the budget that makes it, and that budget does. (A
    /// PNG that is not interlaced streams its rows, and its preview is made in 30 MiB.)
    @Test func aPreviewTheBudgetCannotMakeIsNamed() throws {
        let directory = folder("preview-budget")
        defer { _ = system("rm -rf '\(directory)'") }
        mkdir(directory + "/photos", 0o755)
        let made = python("""
        import sys
        from PIL import Image
        Image.linear_gradient("L").resize((4000, 4000)).convert("RGB").save(sys.argv[1])
        """, [directory + "/photos/big.png"], in: directory)
        try #require(made.status == 0, "\(made.output)")
        try #require(system("convert '\(directory)/photos/big.png' -interlace PNG '\(directory)/photos/big.png'") == 0)
        let base = ["grid", directory + "/photos", "--grid", "1x1", "--tile-size", "200", "--no-progress", "--temp-dir", directory,
                    "--dzi", directory + "/site/w.dzi", "--previews", "2048"]
        let tight = runTessera(base + ["--max-memory", "100M"])
        #expect(tight.status == 0, "\(tight.output)")
        #expect(tight.output.contains("1 photo has no 2048 px preview in the viewer, though its cell is drawn")
                && tight.output.contains("/photos/big.png"), "\(tight.output)")
        #expect(access(directory + "/site/w_files/viewer/previews/0.jpg", F_OK) != 0)
        let words = tight.output.split(whereSeparator: { $0 == " " || $0 == "\n" })
        let advice = try #require(words.firstIndex(of: "--max-memory").map { String(words[$0 + 1]) }, "\(tight.output)")
        let roomy = runTessera(base + ["--max-memory", advice])
        #expect(roomy.status == 0 && !roomy.output.contains("no 2048 px preview"), "\(advice): \(roomy.output)")
        #expect(access(directory + "/site/w_files/viewer/previews/0.jpg", F_OK) == 0, "\(roomy.output)")
    }

    /// An SZI rewritten by Python's zipfile with an extended-timestamp extra field on every
    /// entry (in its local header as in the directory) and 65,536 empty entries more, so its end
    /// records are ZIP64, and without the viewer's cells.js (as another program writes it): the
    /// page finds the directory through the ZIP64 records, the picture's shape in the
    /// descriptor, and reads the tiles past the extra fields.
    @Test func aZip64ArchiveFromAnotherWriterOpens() throws {
        let directory = folder("zip64")
        defer { _ = system("rm -rf '\(directory)'") }
        try render(directory, grid: "6x4", ["--szi", directory + "/original.szi", "--no-viewer"])
        try render(directory, grid: "2x2", ["--szi", directory + "/site/w.szi"])
        let rewritten = python("""
        import struct, sys, zipfile
        source, target = zipfile.ZipFile(sys.argv[1]), sys.argv[2]
        with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
            for info in source.infolist():
                copy = zipfile.ZipInfo("w/" + info.filename.split("/", 1)[1].replace("original_files", "w_files").replace("original.dzi", "w.dzi"),
                                       info.date_time)
                copy.extra = struct.pack("<HHBI", 0x5455, 5, 1, 1700000000)
                out.writestr(copy, source.read(info))
            for n in range(65536):
                out.writestr("w/padding/%d" % n, b"")
        print("viewer-entries", sum(1 for n in source.namelist() if "/viewer/" in n))
        tail = open(target, "rb").read()[-22:]
        print("entries-field", struct.unpack("<H", tail[10:12])[0])
        """, [directory + "/original.szi", directory + "/site/w.szi"], in: directory)
        #expect(rewritten.status == 0 && rewritten.output.contains("entries-field 65535"), "\(rewritten.output)")
        #expect(rewritten.output.contains("viewer-entries 0") && access(directory + "/original.html", F_OK) != 0,
                "--no-viewer: no page, no cells.js in the archive")
        let server = try RangeServer(root: directory + "/site", scratch: directory)
        defer { server.stop() }
        let results = browse(server.url("w.html"), steps: Self.settled + [
            .read(bodyAttribute("data-source"), as: "source"),
            .read(bodyAttribute("data-error"), as: "problem"),
            .read(bodyAttribute("data-tiles-drawn"), as: "drawn"),
            .read("document.getElementById('tessera-help').textContent", as: "help"),
        ], in: directory)
        #expect(results["source"] == "archive" && results["problem"] == "null" && (Int(results["drawn"] ?? "") ?? 0) >= 2, "\(results)")
        // The 6 x 4 grid's picture (from the rewritten archive's cells.js), not the 2 x 2 one's.
        #expect(results["help"]?.hasPrefix("720 x 480 px") == true, "\(results)")
    }
}
