#!/usr/bin/env bash
# Replaces the generated file list at the end of docs/how-it-works.md ("## Source map", from the
# first **`Sources/...`** heading to the end) with what scripts/source-map.py prints now.
set -euo pipefail
cd "$(dirname "$0")/.."
doc=docs/how-it-works.md
line=$(grep -n '^\*\*`Sources/' "$doc" | head -1 | cut -d: -f1)
tail -n +"$line" "$doc" | grep -q '^## ' && { echo "the source map is not the last section of $doc" >&2; exit 1; }
{ head -n $((line - 1)) "$doc"; python3 scripts/source-map.py; } > "$doc.new"
mv "$doc.new" "$doc"
