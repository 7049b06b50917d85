// ViewerArchiveReader.swift — the viewer page's JavaScript that reads an SZI (a ZIP of stored
// entries, StoredZipWriter.swift) over HTTP range requests, from any static host.
//
// Opening costs two requests: the archive's last 64 KiB (the end record, and the ZIP64 locator
// and record before it when there are any), then the whole central directory in one request
// (about 80 bytes a tile: 2 MB for 25,000 tiles). A tile is then one request covering its
// local header and its bytes: the header is 30 bytes, the name and an extra field, which is
// read, not assumed (the request asks for 64 bytes more than the central record's extra field;
// a longer one costs a second request).
//
// A server that answers a range request with the whole file (HTTP 200, as Python's
// http.server does) is used whole when the file is at most `wholeArchiveLimit` (256 MiB, held
// in the browser's memory), with a notice while it loads; a larger one is refused with a
// message that says why. The limit is the page's `data-whole-limit`.
//
// Defines `openArchive(url, label, notice)`, which resolves to a reader:
//     reader.entry(name)                 the central record of `name`, or undefined
//     reader.names()                     every entry's name (an iterator)
//     reader.bytes(entry, name, signal)  a promise of the entry's bytes (a Uint8Array)
// and `ArchiveProblem(kind, message)`, what its promises reject with: kind is "missing-archive"
// (HTTP 404), "no-range", "damaged", "http" or "network"; message is a sentence for the page.
// (Inside the page's one function: nothing here is global.)

enum ViewerArchiveReader {
    static let script = #"""
      // ---- Reading the SZI: a ZIP of stored entries, by HTTP range requests ----
      function ArchiveProblem(kind, message) { this.kind = kind; this.message = message; }
      function u16(b, o) { return b[o] | b[o + 1] << 8; }
      function u32(b, o) { return (b[o] | b[o + 1] << 8 | b[o + 2] << 16) + b[o + 3] * 16777216; }
      function u64(b, o) { return u32(b, o) + u32(b, o + 4) * 4294967296; }
      function megabytes(n) { return (n / 1048576).toFixed(n < 10485760 ? 1 : 0) + " MB"; }

      function openArchive(url, label, notice) {
        var size = 0, whole = null, wholeLoading = null;
        var wholeLimit = +(document.getElementById("map").getAttribute("data-whole-limit") || 268435456);
        function damaged(what) {
          return new ArchiveProblem("damaged", label + " is damaged or is not a whole ZIP archive: " + what + ".");
        }
        function discard(response) {
          if (response.body) response.body.cancel().catch(function () {});
        }
        // The server sent the whole file: kept, if it is small enough to hold. A server that
        // does not say its length (no Content-Length) is read up to the limit and no further.
        function noRange(length) {
          return new ArchiveProblem("no-range", "The server sent " + label + " whole (HTTP 200) when the page asked for a part of it: "
            + "it does not answer range requests, which this page needs to read the archive's tiles one by one"
            + (length > 0 ? ", and at " + (isFinite(length) ? megabytes(length) : "more than " + megabytes(wholeLimit))
               + " the file is too large to load at once (at most " + megabytes(wholeLimit) + ")" : "")
            + ". Serve it from a server that answers range requests (nginx, Apache, Caddy, and most static hosts and object stores do; "
            + "Python's http.server does not), or open the Deep Zoom folder's page instead.");
        }
        function readAtMost(response, limit) {
          if (!response.body || !response.body.getReader) {
            return response.arrayBuffer().then(function (buffer) { return buffer.byteLength <= limit ? new Uint8Array(buffer) : null; });
          }
          var reader = response.body.getReader(), parts = [], total = 0;
          function pump() {
            return reader.read().then(function (step) {
              if (step.done) {
                var out = new Uint8Array(total), at = 0;
                parts.forEach(function (part) { out.set(part, at); at += part.length; });
                return out;
              }
              total += step.value.length;
              if (total > limit) { reader.cancel().catch(function () {}); return null; }
              parts.push(step.value);
              return pump();
            });
          }
          return pump();
        }
        function takeWhole(response) {
          var given = response.headers.get("Content-Length"), length = given === null ? NaN : parseInt(given, 10);
          if (length > wholeLimit) {
            discard(response);
            throw noRange(length);
          }
          document.body.setAttribute("data-range", "whole");
          notice("This server does not answer range requests: loading " + label + " whole"
            + (isFinite(length) ? " (" + megabytes(length) + ")" : "") + " before the first tile…");
          return readAtMost(response, wholeLimit).then(function (bytes) {
            if (!bytes) throw noRange(Infinity);
            whole = bytes;
            size = whole.length;
            notice("");
          });
        }
        // Bytes [start, end) of the archive; a negative start: the last -start bytes.
        function read(start, end, signal) {
          if (whole) {
            return Promise.resolve(start < 0 ? whole.subarray(Math.max(0, whole.length + start)) : whole.subarray(start, Math.min(end, whole.length)));
          }
          if (wholeLoading) return wholeLoading.then(function () { return read(start, end, signal); });
          var range = start < 0 ? "bytes=" + start : "bytes=" + start + "-" + (end - 1);
          return fetch(url, { headers: { Range: range }, signal: signal }).then(function (response) {
            if (response.status === 206) {
              var total = /\/(\d+)\s*$/.exec(response.headers.get("Content-Range") || "");
              if (total) size = +total[1];
              return response.arrayBuffer().then(function (buffer) { return new Uint8Array(buffer); });
            }
            if (response.status === 200) {
              if (!wholeLoading) wholeLoading = takeWhole(response); else discard(response);
              return wholeLoading.then(function () { return read(start, end, signal); });
            }
            discard(response);
            if (response.status === 404) {
              throw new ArchiveProblem("missing-archive", label + " was not found on the server (HTTP 404): it must be beside this page, under that name.");
            }
            if (response.status === 416) throw damaged("it is shorter than its own records say (HTTP 416 for " + range + ")");
            throw new ArchiveProblem("http", label + " could not be read: the server answered HTTP " + response.status + " " + response.statusText + ".");
          }, function (error) {
            if (error && error.name === "AbortError") throw error;
            throw new ArchiveProblem("network", label + " could not be fetched (" + (error && error.message || error) + ").");
          });
        }
        // The central directory: name -> { offset, size, method, nameLength, extraLength }.
        function parseDirectory(d, count) {
          var entries = new Map(), decoder = new TextDecoder("utf-8"), p = 0;
          for (var n = 0; n < count; n++) {
            if (p + 46 > d.length || u32(d, p) !== 0x02014b50) throw damaged("its directory breaks off at entry " + (n + 1) + " of " + count);
            var method = u16(d, p + 10), stored = u32(d, p + 20), nameLength = u16(d, p + 28), extraLength = u16(d, p + 30);
            var unpacked = u32(d, p + 24), offset = u32(d, p + 42);
            var name = decoder.decode(d.subarray(p + 46, p + 46 + nameLength));
            // ZIP64 (extra field 1): the fields that did not fit, in this order.
            for (var e = p + 46 + nameLength, end = e + extraLength; e + 4 <= end; e += 4 + u16(d, e + 2)) {
              if (u16(d, e) !== 1) continue;
              var f = e + 4;
              if (unpacked === 0xFFFFFFFF) { unpacked = u64(d, f); f += 8; }
              if (stored === 0xFFFFFFFF) { stored = u64(d, f); f += 8; }
              if (offset === 0xFFFFFFFF) { offset = u64(d, f); f += 8; }
            }
            entries.set(name, { offset: offset, size: stored, method: method, nameLength: nameLength, extraLength: extraLength });
            p += 46 + nameLength + extraLength + u16(d, p + 32);
          }
          return entries;
        }
        // The end record (with the longest comment a ZIP may have), and the ZIP64 locator and record.
        var tailLength = 22 + 65535 + 20 + 56;
        return read(-tailLength).then(function (tail) {
          if (!size) size = tail.length;
          var tailStart = size - tail.length, at = -1;
          for (var i = tail.length - 22; i >= 0; i--) { if (u32(tail, i) === 0x06054b50) { at = i; break; } }
          if (at < 0) throw damaged("there is no end-of-archive record in its last " + tail.length + " bytes");
          var count = u16(tail, at + 10), directoryBytes = u32(tail, at + 12), directoryOffset = u32(tail, at + 16);
          var located = Promise.resolve();
          if (count === 0xFFFF || directoryBytes === 0xFFFFFFFF || directoryOffset === 0xFFFFFFFF) {
            if (at < 20 || u32(tail, at - 20) !== 0x07064b50) throw damaged("its ZIP64 locator is missing");
            var recordOffset = u64(tail, at - 20 + 8);
            var record = recordOffset >= tailStart ? Promise.resolve(tail.subarray(recordOffset - tailStart, recordOffset - tailStart + 56))
                                                   : read(recordOffset, recordOffset + 56);
            located = record.then(function (r) {
              if (r.length < 56 || u32(r, 0) !== 0x06064b50) throw damaged("its ZIP64 end record is not where its locator says");
              count = u64(r, 32);
              directoryBytes = u64(r, 40);
              directoryOffset = u64(r, 48);
            });
          }
          return located.then(function () {
            if (directoryOffset + directoryBytes > size) {
              throw damaged("its directory (" + directoryBytes + " bytes at byte " + directoryOffset + ") runs past its end at byte " + size);
            }
            return directoryOffset >= tailStart
              ? tail.subarray(directoryOffset - tailStart, directoryOffset - tailStart + directoryBytes)
              : read(directoryOffset, directoryOffset + directoryBytes);
          }).then(function (directory) { return parseDirectory(directory, count); });
        }).then(function (entries) {
          return {
            entry: function (name) { return entries.get(name); },
            names: function () { return entries.keys(); },
            bytes: function (entry, name, signal) {
              if (entry.method !== 0) {
                return Promise.reject(new ArchiveProblem("damaged", name + " is compressed in " + label + " (method " + entry.method
                  + "): the page reads stored entries, as an SZI's are."));
              }
              var guess = 30 + entry.nameLength + entry.extraLength + 64;
              return read(entry.offset, Math.min(size, entry.offset + guess + entry.size), signal).then(function (b) {
                if (b.length < 30 || u32(b, 0) !== 0x04034b50) throw damaged("no entry header at byte " + entry.offset + ", where " + name + " should start");
                var start = 30 + u16(b, 26) + u16(b, 28);
                if (start + entry.size <= b.length) return b.subarray(start, start + entry.size);
                return read(entry.offset + start, entry.offset + start + entry.size, signal).then(function (rest) {
                  if (rest.length !== entry.size) throw damaged(name + " breaks off at the end of the file");
                  return rest;
                });
              });
            }
          };
        });
      }

    """#
}
