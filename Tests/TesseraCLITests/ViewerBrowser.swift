// ViewerBrowser.swift — what the viewer tests drive: a local HTTP server that honours Range
// requests, and headless Chromium driven over the DevTools protocol, which (unlike
// --window-size, whose window is at least 500 px wide) sets an exact viewport, a phone's with
// touch, and sends real mouse, wheel, key and touch input through the browser.
//
// Needs python3 and chromium (the README's set-up and .ci/run install both).
import Glibc
import Testing

/// An HTTP server for `root` on 127.0.0.1, on a free port the system picks. It answers a Range
/// request (bytes=A-B, A-, -N) with 206 and Content-Range, or 416; a path under /norange/ is the
/// same file answered whole with 200, as Python's own http.server does, and under /nolength/
/// answered whole without a Content-Length (the end of the body is the connection's). It logs each request
/// ("path range") and stops by itself after `seconds`; `stop()` ends it sooner.
final class RangeServer {
    let port: Int
    private let pid: pid_t
    private let log: String

    private static let script = #"""
    import http.server, os, re, sys, threading
    from urllib.parse import unquote
    root, port_file, seconds, log_path = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    log = open(log_path, "a", buffering=1)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args): pass
        def do_GET(self):
            path = self.path.split("?")[0].split("#")[0]
            ranges = not path.startswith("/norange/") and not path.startswith("/nolength/")
            length = not path.startswith("/nolength/")
            if not ranges: path = path[len("/norange"):] if length else path[len("/nolength"):]
            local = os.path.join(root, unquote(path).lstrip("/"))
            header = self.headers.get("Range")
            log.write("%s %s\n" % (path, header))
            if not os.path.isfile(local):
                self.send_error(404); return
            size = os.path.getsize(local)
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", header or "") if ranges else None
            if m and (m.group(1) or m.group(2)):
                if m.group(1):
                    start = int(m.group(1)); end = min(size - 1, int(m.group(2))) if m.group(2) else size - 1
                else:
                    start = max(0, size - int(m.group(2))); end = size - 1
                if start >= size or start > end:
                    self.send_response(416); self.send_header("Content-Range", "bytes */%d" % size)
                    self.send_header("Content-Length", "0"); self.end_headers(); return
                self.send_response(206)
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
            else:
                start, end = 0, size - 1
                self.send_response(200)
            self.send_header("Content-Type", "text/html" if local.endswith(".html") else "application/octet-stream")
            if length: self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            with open(local, "rb") as f:
                f.seek(start); left = end - start + 1
                try:
                    while left > 0:
                        chunk = f.read(min(left, 1 << 16))
                        self.wfile.write(chunk); left -= len(chunk)
                except (BrokenPipeError, ConnectionResetError): pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Timer(seconds, server.shutdown).start()
    with open(port_file + ".tmp", "w") as f: f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()
    """#

    /// Starts serving `root`; its files (script, port, log) go in `scratch`.
    init(root: String, scratch: String, seconds: Int = 180) throws {
        let script = scratch + "/range-server.py", portFile = scratch + "/range-server.port"
        log = scratch + "/range-server.log"
        writeFile(Array(Self.script.utf8), to: script)
        unlink(portFile)
        pid = spawnProcess(["python3", script, root, portFile, String(seconds), log])
        let deadline = monotonicNow() + 15
        while access(portFile, R_OK) != 0 && monotonicNow() < deadline && kill(pid, 0) == 0 { usleep(20_000) }
        port = Int(String(decoding: readFile(portFile), as: UTF8.self)) ?? 0
        try #require(port > 0, "the range server did not start")
    }

    deinit { stop() }

    /// Ends the server (the one this object started) and reaps it.
    func stop() {
        guard kill(pid, 0) == 0 else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    /// The address of `path` (already percent-encoded) on this server.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)/" + path }

    /// Every request so far: (path, Range header or "None").
    var requests: [(path: String, range: String)] {
        String(decoding: readFile(log), as: UTF8.self).split(separator: "\n").map { line in
            let parts = line.split(separator: " ", maxSplits: 1)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
    }
}

/// Starts `arguments` (stdout and stderr to /dev/null) and returns its pid without waiting. The
/// child starts with no signal blocked (the test runner's threads block some, and a child
/// inherits the mask).
private func spawnProcess(_ arguments: [String]) -> pid_t {
    var pid: pid_t = 0
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    defer { posix_spawn_file_actions_destroy(&actions) }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
    #expect(posix_spawnp(&pid, arguments[0], &actions, &attributes, &argv, environ) == 0)
    return pid
}

/// `value` as a JSON string.
private func jsonText(_ value: String) -> String {
    var out = "\""
    for scalar in value.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

/// One thing the browser does, in order.
enum BrowserStep {
    /// Until the expression is true (at most `seconds`; a timeout is reported as "timeout:N").
    case wait(String, seconds: Double = 20)
    /// The expression's value (as a string) under `name` in the results.
    case read(String, as: String)
    /// Runs the expression (a click on an element, a change of address).
    case run(String)
    case sleep(Double)
    /// A left click (press and release) at a point of the viewport.
    case click(x: Double, y: Double)
    /// A left click at the point an expression gives ([x, y]), e.g. an element's middle.
    case clickAt(String)
    /// A mouse wheel turn at a point (negative deltaY: towards the user, zoom in).
    case wheel(x: Double, y: Double, deltaY: Double)
    /// A key pressed and released: its key, code and Windows virtual key code (what Leaflet reads).
    case key(String, code: String, keyCode: Int)
    /// A touch event: touchStart, touchMove or touchEnd with the fingers down.
    case touch(String, [(x: Double, y: Double)])
    /// A PNG of the viewport.
    case screenshot(String)
    /// The viewport changes to width x height (a phone turned).
    case viewport(Int, Int)

    var json: String {
        let text = jsonText
        switch self {
        case .wait(let expression, let seconds): return "{\"wait\": \(text(expression)), \"timeout\": \(seconds)}"
        case .read(let expression, let name): return "{\"eval\": \(text(expression)), \"as\": \(text(name))}"
        case .run(let expression): return "{\"eval\": \(text(expression))}"
        case .sleep(let seconds): return "{\"sleep\": \(seconds)}"
        case .click(let x, let y): return "{\"click\": [\(x), \(y)]}"
        case .clickAt(let expression): return "{\"click_at\": \(text(expression))}"
        case .wheel(let x, let y, let deltaY): return "{\"wheel\": [\(x), \(y), \(deltaY)]}"
        case .key(let key, let code, let keyCode): return "{\"key\": [\(text(key)), \(text(code)), \(keyCode)]}"
        case .touch(let type, let points):
            return "{\"touch\": \(text(type)), \"points\": [" + points.map { "[\($0.x), \($0.y)]" }.joined(separator: ", ") + "]}"
        case .screenshot(let path): return "{\"screenshot\": \(text(path))}"
        case .viewport(let width, let height): return "{\"viewport\": [\(width), \(height)]}"
        }
    }
}

/// Headless Chromium over the DevTools protocol (--remote-debugging-pipe: fd 3 in, fd 4 out).
private let browserDriver = #"""
import base64, json, os, subprocess, sys, time
plan = json.load(open(sys.argv[1]))
to_chrome_r, to_chrome_w = os.pipe()
from_chrome_r, from_chrome_w = os.pipe()
def protocol_fds():
    r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)
    os.dup2(r, 3); os.dup2(w, 4)
chrome = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--remote-debugging-pipe", "--user-data-dir=" + plan["profile"], "about:blank"],
                          close_fds=False, preexec_fn=protocol_fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.close(to_chrome_r); os.close(from_chrome_w)
writer = os.fdopen(to_chrome_w, "wb")
deadline = time.monotonic() + plan["seconds"]
state = {"id": 0, "pending": b""}
def call(method, params=None, session=None):
    state["id"] += 1
    message = {"id": state["id"], "method": method, "params": params or {}}
    if session: message["sessionId"] = session
    writer.write(json.dumps(message).encode() + b"\0"); writer.flush()
    while True:
        if time.monotonic() > deadline: raise RuntimeError("timed out in " + method)
        while b"\0" not in state["pending"]:
            chunk = os.read(from_chrome_r, 1 << 16)
            if not chunk: raise RuntimeError("chromium closed the pipe in " + method)
            state["pending"] += chunk
        line, state["pending"] = state["pending"].split(b"\0", 1)
        reply = json.loads(line)
        if reply.get("id") == state["id"]:
            if "error" in reply: raise RuntimeError(method + ": " + json.dumps(reply["error"]))
            return reply.get("result", {})
results = {}
try:
    target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    width, height, scale = plan["viewport"]
    call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": plan["mobile"]}, session)
    if plan["mobile"]: call("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5}, session)
    call("Emulation.setFocusEmulationEnabled", {"enabled": True}, session)
    def evaluate(expression):
        reply = call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session)
        if "exceptionDetails" in reply: return "exception: " + json.dumps(reply["exceptionDetails"])[:300]
        return reply.get("result", {}).get("value")
    def mouse(kind, x, y, **extra):
        call("Input.dispatchMouseEvent", dict({"type": kind, "x": x, "y": y}, **extra), session)
    call("Page.navigate", {"url": plan["url"]}, session)
    for step in plan["steps"]:
        if "wait" in step:
            until = time.monotonic() + step["timeout"]
            while evaluate(step["wait"]) is not True:
                if time.monotonic() > until:
                    results["timeout:%d" % len(results)] = step["wait"]; break
                time.sleep(0.05)
        elif "eval" in step:
            value = evaluate(step["eval"])
            if "as" in step: results[step["as"]] = value
        elif "sleep" in step: time.sleep(step["sleep"])
        elif "click" in step or "click_at" in step:
            x, y = step["click"] if "click" in step else evaluate(step["click_at"])
            mouse("mouseMoved", x, y)
            mouse("mousePressed", x, y, button="left", clickCount=1)
            mouse("mouseReleased", x, y, button="left", clickCount=1)
        elif "wheel" in step:
            x, y, dy = step["wheel"]
            mouse("mouseWheel", x, y, deltaX=0, deltaY=dy)
        elif "key" in step:
            key, code, number = step["key"]
            for kind in ("rawKeyDown", "keyUp"):
                call("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": number,
                                                "nativeVirtualKeyCode": number}, session)
        elif "touch" in step:
            call("Input.dispatchTouchEvent", {"type": step["touch"],
                 "touchPoints": [{"x": x, "y": y, "id": i} for i, (x, y) in enumerate(step["points"])]}, session)
        elif "viewport" in step:
            call("Emulation.setDeviceMetricsOverride", {"width": step["viewport"][0], "height": step["viewport"][1],
                                                        "deviceScaleFactor": scale, "mobile": plan["mobile"]}, session)
        elif "screenshot" in step:
            open(step["screenshot"], "wb").write(base64.b64decode(call("Page.captureScreenshot", {"format": "png"}, session)["data"]))
except Exception as error:
    results["failure"] = str(error)
finally:
    for key, value in results.items():
        print(key + "\t" + str(value).replace("\n", " "))
    try: call("Browser.close")
    except Exception: pass
    try: chrome.wait(10)
    except subprocess.TimeoutExpired: chrome.kill(); chrome.wait()
"""#

/// Opens `url` in headless Chromium at `viewport` (width, height, device pixel ratio; `mobile`:
/// a phone's, with touch) and runs `steps`; the values read, by name ("failure" if the browser
/// failed, "timeout:N" for a wait that ran out).
func browse(_ url: String, viewport: (Int, Int, Double) = (1000, 700, 1), mobile: Bool = false, steps: [BrowserStep],
            in directory: String) -> [String: String] {
    let id = UInt32.random(in: 0...UInt32.max)
    let driver = directory + "/browser-driver.py", plan = directory + "/browser-plan-\(id).json", out = directory + "/browser-\(id).txt"
    writeFile(Array(browserDriver.utf8), to: driver)
    let planText = "{\"url\": \(jsonText(url)), \"profile\": \(jsonText(directory + "/browser-profile-\(id)")), "
        + "\"viewport\": [\(viewport.0), \(viewport.1), \(viewport.2)], \"mobile\": \(mobile), \"seconds\": 90, "
        + "\"steps\": [" + steps.map(\.json).joined(separator: ",\n") + "]}"
    writeFile(Array(planText.utf8), to: plan)
    let status = system("timeout -s KILL 120 python3 '\(driver)' '\(plan)' >'\(out)' 2>&1")
    _ = system("rm -rf '\(directory)/browser-profile-\(id)'")
    var results: [String: String] = [:]
    let text = String(decoding: readFile(out), as: UTF8.self)
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
        results[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
    }
    if status != 0 { results["failure", default: ""] += " (driver exit \(status): \(text))" }
    return results
}

/// The page's body attribute `name`, as an expression.
func bodyAttribute(_ name: String) -> String { "String(document.body.getAttribute('\(name)'))" }

/// "x,y,w,h" as a rectangle.
struct ScreenRect {
    let x: Double, y: Double, width: Double, height: Double

    init?(_ text: String?) {
        let values = (text ?? "").split(separator: ",").compactMap { Double($0) }
        guard values.count == 4 else { return nil }
        (x, y, width, height) = (values[0], values[1], values[2], values[3])
    }

    func intersects(_ other: ScreenRect) -> Bool {
        x < other.x + other.width && other.x < x + width && y < other.y + other.height && other.y < y + height
    }

    func isInside(width outerWidth: Double, height outerHeight: Double) -> Bool {
        x >= 0 && y >= 0 && x + width <= outerWidth && y + height <= outerHeight
    }
}
