#!/usr/bin/env bash
# Quick start: installs the system packages Tessera and its tests need, builds it, and renders
# demo.jpg and a Deep Zoom pyramid with its viewer (demo-zoom/demo.html) from the photos the
# repository ships (one photo stored in all eight EXIF orientations: every cell of the grid
# should come out upright); then the product itself: demo-mosaic.jpg, a mosaic of
# Samples/target/chelsea.jpg made from the 46 freely licensed photos in Samples/library (their
# sources and licences: Samples/README.md), with its own Deep Zoom viewer (demo-zoom/mosaic.html).
# The mosaic's size flags are given, so the demo works whether or not a default size exists;
# --tint 25 shifts each cell a quarter of the way toward the target, since 46 photos alone make a
# faint cat. The tests also use Chromium, to open the viewer headless, and
# slurm-wlm and GNU parallel, to run sharded renders under a real scheduler; zsh and fish, to
# check the completion scripts; lintian and debootstrap, to check the Debian package; unzip,
# OpenSlide's tools, libmagic and the PyPI packages below, to read the one-file pyramids back.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libjpeg62-turbo-dev libturbojpeg0-dev \
    libspng-dev libwebp-dev libheif-dev libdav1d-dev liblcms2-dev libgif-dev libtiff-dev zlib1g-dev \
    libjpeg-turbo-progs libvips-tools openslide-tools imagemagick chromium libxml2 libheif-examples webp icc-profiles-free colord-data slurm-wlm parallel \
    zsh fish lintian debootstrap unzip libmagic1 strace bindfs >/dev/null
# The tests' independent readers from PyPI: the IIIF validator, and tifffile for the TIFF
# (into the user's site on Debian's own python3, which refuses system-wide pip installs).
scripts/install-python-readers.sh
swift build -c release
mkdir -p demo-zoom
.build/release/tessera grid Tests/TesseraTests/Fixtures/orientation -o demo.jpg --dzi demo-zoom/demo.dzi \
    --columns 6 --tile-size 300 --previews 800
.build/release/tessera mosaic --target Samples/target/chelsea.jpg Samples/library -o demo-mosaic.jpg \
    --dzi demo-zoom/mosaic.dzi --grid 60x40 --tile-size 64 --tint 25
echo "open demo.jpg: 18 photos in a 6 x 3 grid, all upright"
echo "open demo-zoom/demo.html in a browser to zoom into it; pointing at a photo names it, clicking shows it larger"
echo "open demo-mosaic.jpg: Samples/target/chelsea.jpg (a cat) as a 60 x 40 mosaic of the 46 photos in Samples/library, each cell tinted 25% toward the cat"
echo "open demo-zoom/mosaic.html in a browser to zoom into the mosaic until every cell is a photo"
echo "the tool is .build/release/tessera (put it on your PATH: export PATH=\"$PWD/.build/release:\$PATH\"; or install the Debian package: README.md, Install)"
