#!/usr/bin/env bash
# Mutation testing: applies each mutant in scripts/mutants.py to a scratch copy of the tree, runs
# the tests it names, and prints killed/survived and the score (slow: CI does not run it). CI runs
# --check, which needs no build: every mutant's text must occur exactly once in its file.
#   scripts/mutants.sh [--list] [--only ID,ID] [--keep] [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
exec python3 scripts/mutants.py "$@"
