#!/usr/bin/env python3
"""Long functions: every Swift `func` and `init` in Sources/ longer than a limit.

A function's length is counted from the line of its declaration to the line of the brace that
closes its body (so the figures match those the review quotes, e.g. "MosaicMatcher.match 347
lines"). Bodies are found by brace matching over the source with comments and string literals
(plain, multi-line, raw, and the code inside their interpolations) skipped, so a brace in a
string or a comment does not count. A nested function is counted inside the one that holds it
and again on its own. Closures are not declarations: they count towards the function they are
written in.

    scripts/long-functions.py [--limit N] [ROOT]

Prints one line per function over the limit (default 120 lines), the longest first, and exits 1
when any of them is outside ALLOWED (functions that are templates of HTML or JavaScript text,
which read best as one piece: listed too, and marked); 0 otherwise.
"""
import argparse
import os
import re
import sys

# Functions whose body is a template of another language's text (HTML, JavaScript): a page
# reads best as one string, so its length is not a decision split across lines. Keyed by
# file (relative to the root) and qualified name.
ALLOWED = {
    ("Sources/Tessera/Outputs/DeepZoom/DeepZoomViewer.swift", "DeepZoomViewer.page"): "the viewer's HTML and JavaScript page",
}

TYPE_KEYWORDS = ("class", "struct", "enum", "extension", "actor", "protocol")
# A declaration that starts here ends a bodiless `func` (a protocol requirement) before any `{`.
DECLARATION_KEYWORDS = {"func", "var", "let", "init", "case", "subscript", "typealias", "associatedtype",
                        "class", "struct", "enum", "extension", "actor", "protocol", "deinit", "import"}


def blank_code(text):
    """The text with comments and string literals replaced by spaces (newlines kept), so that
    only code is left for brace matching. Interpolations (`\\(...)`) are blanked as well: the
    braces of a closure inside one belong to the string's expression, not to the function's
    structure, and are always balanced."""
    out = list(text)
    n = len(text)
    i = 0

    def blank(start, end):
        for j in range(start, min(end, n)):
            if out[j] != "\n":
                out[j] = " "

    def skip_string(i):
        """i at the first `#` or `"` of a literal; returns the index just past it."""
        hashes = 0
        while i < n and text[i] == "#":
            hashes += 1
            i += 1
        multi = text.startswith('"""', i)
        i += 3 if multi else 1
        close = ('"""' if multi else '"') + "#" * hashes
        escape = "\\" + "#" * hashes
        while i < n:
            if text.startswith(escape, i):
                j = i + len(escape)
                if j < n and text[j] == "(":
                    i = skip_interpolation(j + 1)
                else:
                    i = j + 1
                continue
            if text.startswith(close, i):
                return i + len(close)
            if not multi and text[i] == "\n":
                return i  # an unterminated literal: stop at the line's end
            i += 1
        return n

    def skip_interpolation(i):
        """i just past the `(` of `\\(`; returns the index just past its `)`."""
        depth = 1
        while i < n:
            c = text[i]
            if c in "#\"" and starts_string(i):
                i = skip_string(i)
                continue
            if text.startswith("//", i):
                i = text.find("\n", i)
                i = n if i < 0 else i
                continue
            if text.startswith("/*", i):
                i = skip_block_comment(i)
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return n

    def skip_block_comment(i):
        depth = 0
        while i < n:
            if text.startswith("/*", i):
                depth += 1
                i += 2
            elif text.startswith("*/", i):
                depth -= 1
                i += 2
                if depth == 0:
                    return i
            else:
                i += 1
        return n

    def starts_string(i):
        j = i
        while j < n and text[j] == "#":
            j += 1
        return j < n and text[j] == '"'

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = skip_block_comment(i)
            blank(i, end)
            i = end
        elif c in "#\"" and starts_string(i):
            end = skip_string(i)
            blank(i, end)
            i = end
        else:
            i += 1
    return "".join(out)


def matching_braces(code):
    """{offset of `{`: offset of its `}`}; unbalanced braces are left out."""
    pairs, stack = {}, []
    for i, c in enumerate(code):
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i
    return pairs


DECLARATION = re.compile(r"(?<![\w.])(?:func\s+(?P<name>[A-Za-z_`][\w`]*|[^\sA-Za-z_`(]+)|(?P<init>init)[?!]?)\s*[<(]")
TYPE = re.compile(r"(?<![\w.])(?:%s)\s+(?P<name>[A-Za-z_][\w.]*)" % "|".join(TYPE_KEYWORDS))
WORD = re.compile(r"[A-Za-z_]\w*")


def body_start(code, i):
    """The offset of the `{` that opens the body of the declaration whose parameters start
    near i, or None when it has none (a protocol requirement)."""
    n = len(code)
    depth = 0
    while i < n:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c == "{":
            return i
        elif depth == 0 and c == "}":
            return None
        elif depth == 0 and (c.isalpha() or c == "_") and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] in "_.")):
            word = WORD.match(code, i).group(0)
            if word in DECLARATION_KEYWORDS:
                return None
            i += len(word)
            continue
        i += 1
    return None


def functions(path, relative):
    text = open(path, encoding="utf-8").read()
    code = blank_code(text)
    pairs = matching_braces(code)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(offset):
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    scopes = []  # (open, close, name): types and functions, for qualified names
    found = []
    for m in TYPE.finditer(code):
        start = body_start(code, m.end())
        if start is not None and start in pairs and m.group("name") not in DECLARATION_KEYWORDS:
            scopes.append((start, pairs[start], m.group("name")))
    for m in DECLARATION.finditer(code):
        name = m.group("name") or "init"
        start = body_start(code, m.end() - 1)
        if start is None or start not in pairs:
            continue
        end = pairs[start]
        scopes.append((start, end, name))
        found.append((m.start(), start, end, name))
    result = []
    for declared, start, end, name in found:
        outer = sorted((s for s in scopes if s[0] < declared and s[1] > end), key=lambda s: s[0])
        qualified = ".".join([s[2] for s in outer] + [name])
        first, last = line_of(declared), line_of(end)
        result.append((relative, first, qualified, last - first + 1))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=120, help="the most lines a function may have (default 120)")
    parser.add_argument("root", nargs="?", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    sources = os.path.join(args.root, "Sources")
    everything = []
    for folder, _, names in os.walk(sources):
        for name in sorted(names):
            if name.endswith(".swift"):
                path = os.path.join(folder, name)
                everything += functions(path, os.path.relpath(path, args.root))
    long = sorted((f for f in everything if f[3] > args.limit), key=lambda f: (-f[3], f[0], f[1]))
    offending = 0
    for relative, line, qualified, lines in long:
        allowed = (relative, qualified) in ALLOWED
        offending += 0 if allowed else 1
        note = f"  (allowed: {ALLOWED[(relative, qualified)]})" if allowed else ""
        print(f"{relative}:{line}: {qualified} is {lines} lines{note}")
    if offending:
        print(f"{offending} function(s) over {args.limit} lines outside the allow-list", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
