#!/usr/bin/env bash
# Mutation testing (slow; CI does not run it): applies each mutant in scripts/mutants.py to a
# scratch copy of the tree, runs the tests it names, and prints killed/survived and the score.
#   scripts/mutants.sh [--list] [--only ID,ID] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
exec python3 scripts/mutants.py "$@"
