#!/usr/bin/env bash
# Quick start: installs the system packages Tessera and its tests need, builds it, and renders
# demo.jpg and a Deep Zoom pyramid with its viewer (demo-zoom/demo.html) from the photos the
# repository ships (one photo stored in all eight EXIF orientations: every cell of the grid
# should come out upright). The tests also use Chromium, to open the viewer headless, and
# slurm-wlm and GNU parallel, to run sharded renders under a real scheduler; zsh and fish, to
# check the completion scripts; lintian and debootstrap, to check the Debian package.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libjpeg62-turbo-dev libturbojpeg0-dev libexif-dev \
    libspng-dev libwebp-dev libheif-dev liblcms2-dev libgif-dev libtiff-dev \
    libjpeg-turbo-progs libvips-tools imagemagick chromium libxml2 libheif-examples webp icc-profiles-free colord-data slurm-wlm parallel \
    zsh fish lintian debootstrap >/dev/null
swift build -c release
mkdir -p demo-zoom
.build/release/tessera grid Tests/TesseraTests/Fixtures/orientation -o demo.jpg --dzi demo-zoom/demo.dzi \
    --columns 6 --tile-size 300
echo "open demo.jpg: 18 photos in a 6 x 3 grid, all upright"
echo "open demo-zoom/demo.html in a browser to zoom into it; pointing at a photo names it"
