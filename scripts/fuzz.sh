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
# Progressive and multi-scan seeds for the DC decoder (tessera_dc.c), made by jpegtran: several
# subsamplings, restart markers, optimised tables, the DC refinement last, separate sequential scans.
seeds=/tmp/tessera-fuzz-seeds
mkdir -p "$seeds"
variants=Tests/TesseraTests/Fixtures/variants
printf '0: 0 0 0 1;\n1: 0 0 0 1;\n2: 0 0 0 1;\n0: 1 63 0 1;\n1: 1 63 0 0;\n2: 1 63 0 0;\n0: 1 63 1 0;\n0: 0 0 1 0;\n1: 0 0 1 0;\n2: 0 0 1 0;\n' > "$seeds/dc-last.txt"
printf '0: 0 63 0 0;\n1: 0 63 0 0;\n2: 0 63 0 0;\n' > "$seeds/separate.txt"
for name in base s422 s444 s440 gray; do
    jpegtran -progressive "$variants/$name.jpg" > "$seeds/$name-progressive.jpg"
    jpegtran -progressive -optimize -restart 2B "$variants/$name.jpg" > "$seeds/$name-restart.jpg"
done
jpegtran -scans "$seeds/dc-last.txt" "$variants/base.jpg" > "$seeds/dc-last.jpg"
jpegtran -scans "$seeds/separate.txt" "$variants/base.jpg" > "$seeds/separate.jpg"
swift build --build-path .build/asan --product tessera-fuzz -Xswiftc -sanitize=address -Xcc -fsanitize=address
.build/asan/debug/tessera-fuzz --seconds "$seconds" --seed "$seed" --work /tmp/tessera-fuzz \
    Tests/TesseraTests/Fixtures/variants/*.jpg Tests/TesseraTests/Fixtures/orientation/Landscape_6.jpg "$seeds"/*.jpg
