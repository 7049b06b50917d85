#!/usr/bin/env bash
# Builds the tessera binary as it is installed: release mode, the Swift standard library and
# runtime linked statically (--static-swift-stdlib), so that it depends only on Debian's shared
# libraries (libjpeg62-turbo, libspng, libwebp, libheif, liblcms2 and the C/C++
# runtimes) and runs on a machine without the Swift toolchain. The commit it is built from is
# compiled in for `tessera --version` ("-dirty" when the work tree has changes).
#   scripts/build-release.sh            prints the binary's path (.build-release/release/tessera)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || true)
if [ -n "$commit" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit-dirty"; fi
# Its own scratch folder: the flags differ from `swift build -c release`, and sharing .build
# would rebuild one for the other each time.
swift build -c release --product tessera --static-swift-stdlib --scratch-path .build-release \
    -Xcc "-DTESSERA_COMMIT=\"$commit\"" >&2
binary=.build-release/release/tessera
# Nothing under the toolchain may be linked: a binary that needs /opt/swift is not installable.
if ldd "$binary" | grep -q -e /opt/swift -e libswift -e libFoundation -e libdispatch; then
    echo "build-release: $binary still links the Swift toolchain's libraries:" >&2
    ldd "$binary" >&2
    exit 1
fi
echo "$binary"
