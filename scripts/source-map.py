#!/usr/bin/env python3
"""Prints the source map of docs/how-it-works.md: every .swift, .c and .h file under Sources/,
folder by folder, with the purpose its own first comment gives ("// Name.swift — purpose").

    python3 scripts/source-map.py > /tmp/map.md   # then paste under "## Source map"

The documentation test (theSourceMapNamesEverySourceFile) checks that the map lists every file
and nothing else; this script is how the map is kept that way.
"""
import os
import textwrap

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Sources")


def purpose(path):
    """The file's first comment paragraph after its name, up to the end of its first sentence."""
    words = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            line = line.strip()
            if not line.startswith("//"):
                break
            text = line.lstrip("/").strip()
            if number == 0:
                if "—" not in text:
                    break
                text = text.split("—", 1)[1].strip()
            if not text:
                break
            words.append(text)
            if text.endswith("."):
                break
    sentence = " ".join(words).rstrip(".:")
    return sentence[0].upper() + sentence[1:] + "." if sentence else "(no header comment)"


def main():
    for folder, subfolders, files in sorted(os.walk(ROOT)):
        subfolders.sort()
        sources = sorted(f for f in files if f.endswith((".swift", ".c", ".h")))
        if not sources:
            continue
        relative = os.path.relpath(folder, os.path.join(ROOT, ".."))
        print(f"**`{relative}`**\n")
        for name in sources:
            entry = f"- `{name}`: {purpose(os.path.join(folder, name))}"
            print(textwrap.fill(entry, width=100, subsequent_indent="  ", break_on_hyphens=False))
        print()


main()
