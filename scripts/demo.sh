#!/usr/bin/env bash
# Quick start: installs the system packages Tessera needs, builds it, and renders demo.jpg from
# the photos the repository ships (one photo stored in all eight EXIF orientations: every cell
# of the grid should come out upright).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libjpeg62-turbo-dev libturbojpeg0-dev libexif-dev \
    libjpeg-turbo-progs libvips-tools imagemagick >/dev/null
swift build -c release
.build/release/tessera grid Tests/TesseraTests/Fixtures/orientation -o demo.jpg --columns 6 --tile-size 300
echo "open demo.jpg: 18 photos in a 6 x 3 grid, all upright"
