#!/usr/bin/env bash
# Fuzzes the photo path (header, EXIF, orientation, scaled decode) for a bounded time, built with
# AddressSanitizer for both the Swift code and the C shim. CI does not run it.
#   scripts/fuzz.sh [SECONDS] [SEED]
# A crash leaves the input that caused it in /tmp/tessera-fuzz/current.jpg.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
seed=${2:-$(date +%s)}
export PATH="/opt/swift/usr/bin:$PATH"
swift build --build-path .build/asan --product tessera-fuzz -Xswiftc -sanitize=address -Xcc -fsanitize=address
.build/asan/debug/tessera-fuzz --seconds "$seconds" --seed "$seed" --work /tmp/tessera-fuzz \
    Tests/TesseraTests/Fixtures/variants/*.jpg Tests/TesseraTests/Fixtures/orientation/Landscape_6.jpg
