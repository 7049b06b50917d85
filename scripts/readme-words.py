#!/usr/bin/env python3
"""Counts the words of README.md's prose: everything outside ``` fences, tables and headings
included. A word is a whitespace-separated token with at least one letter or digit in it, so
table rules ("| --- |") and lone punctuation are not words. Prints the count.

    scripts/readme-words.py [FILE]      FILE defaults to the repository's README.md

DocumentationTests counts the same way and holds the README to 1,500 words.
"""
import os
import sys


def prose_words(text: str) -> int:
    words, fenced = 0, False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        words += sum(1 for token in line.split() if any(c.isalnum() for c in token))
    return words


def main() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "README.md")
    with open(path, encoding="utf-8") as f:
        print(prose_words(f.read()))


if __name__ == "__main__":
    main()
