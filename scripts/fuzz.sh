#!/usr/bin/env bash
# Fuzzes every way a photo gets in (library scan, tile decoder, mosaic analysis, the render path on
# tiny canvases), and a shard's part file as `tessera join` parses and verifies it, for a bounded time, built with AddressSanitizer for both the Swift code and the
# C shim, under a memory limit. First it replays Fuzz/regressions/ (earlier findings) through every
# entry point. CI runs it for 60 s after the tests.
#   scripts/fuzz.sh [SECONDS] [SEED] [TARGET]      TARGET: scan, decode, analyse, render, heif, part or all
# (heif: box-aware mutations of the HEIC and AVIF seeds, Fuzz/HEIFBoxMutator.swift; Fuzz/seeds/ holds
# grid HEICs, which heif-enc 1.15 cannot write, so that the tile-by-tile path is reached)
# A crash leaves the input that caused it in the work folder (printed), as current.jpg; a hang
# as hang-N.jpg. Fix the bug, then commit the input to Fuzz/regressions/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
seed=${2:-$(date +%s)}
target=${3:-all}
export PATH="/opt/swift/usr/bin:$PATH"
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-fuzz-XXXXXX")
# Progressive and multi-scan seeds for the DC decoder (tessera_dc.c), made by jpegtran: several
# subsamplings, restart markers, optimised tables, the DC refinement last, separate sequential scans.
seeds=$work/seeds
mkdir -p "$seeds"
variants=Tests/TesseraTests/Fixtures/variants
printf '0: 0 0 0 1;\n1: 0 0 0 1;\n2: 0 0 0 1;\n0: 1 63 0 1;\n1: 1 63 0 0;\n2: 1 63 0 0;\n0: 1 63 1 0;\n0: 0 0 1 0;\n1: 0 0 1 0;\n2: 0 0 1 0;\n' > "$seeds/dc-last.txt"
printf '0: 0 63 0 0;\n1: 0 63 0 0;\n2: 0 63 0 0;\n' > "$seeds/separate.txt"
for name in base s422 s444 s440 gray; do
    jpegtran -progressive "$variants/$name.jpg" > "$seeds/$name-progressive.jpg"
    jpegtran -progressive -optimize -restart 2B "$variants/$name.jpg" > "$seeds/$name-restart.jpg"
done
# The other formats Tessera reads (recognised by content, so the fuzzer's current.jpg name does not
# matter): PNG (RGB, palette, Adam7, alpha, an ICC profile), WebP (lossy, lossless, lossy with a lossless alpha stream), HEIC (with a
# thumbnail), AVIF, and a JPEG with an ICC profile, through libspng, libwebp, libheif and Little CMS.
convert "$variants/base.jpg" PNG24:"$seeds/rgb.png"
convert "$variants/base.jpg" -dither None -colors 64 PNG8:"$seeds/palette.png"
convert "$variants/base.jpg" -interlace PNG PNG24:"$seeds/adam7.png"
convert "$variants/base.jpg" -alpha set -channel A -evaluate set 60% +channel PNG32:"$seeds/alpha.png"
convert "$variants/base.jpg" -profile /usr/share/color/icc/sRGB.icc -profile /usr/share/color/icc/colord/AdobeRGB1998.icc PNG24:"$seeds/adobe.png"
convert "$variants/base.jpg" -profile /usr/share/color/icc/sRGB.icc -profile /usr/share/color/icc/colord/AdobeRGB1998.icc "$seeds/adobe.jpg"
cwebp -quiet -q 70 "$seeds/rgb.png" -o "$seeds/lossy.webp"
cwebp -quiet -lossless "$seeds/alpha.png" -o "$seeds/lossless.webp"
# A lossy picture whose alpha stream is lossless with a predictor (-m 6, filtered), and a
# lossless one of many prefix-code groups and a colour cache (-z 9): tessera_vp8l.c reads both.
convert "$variants/base.jpg" -alpha set -channel A -fx "0.5+0.5*sin(i/9)" +channel PNG32:"$seeds/wave.png"
cwebp -quiet -q 70 -m 6 -alpha_filter best "$seeds/wave.png" -o "$seeds/alpha-predicted.webp"
cwebp -quiet -lossless -z 9 "$seeds/wave.png" -o "$seeds/lossless-z9.webp"
heif-enc -q 50 -t 32 "$seeds/rgb.png" -o "$seeds/small.heic" >/dev/null
heif-enc -A -q 50 "$seeds/rgb.png" -o "$seeds/small.avif" >/dev/null
# GIF (plain, interlaced, a transparent index) through giflib; TIFF (LZW strips, tiles, 16-bit,
# palette, CMYK, planar with alpha, an Orientation tag) through libtiff; camera RAWs (a DNG with
# a thumbnail, a JPEG preview and a lossless raw IFD; a RAF) through Tessera's IFD walk, from
# Fuzz/seeds (written byte by byte: no Debian tool writes them).
convert "$variants/base.jpg" -dither None -colors 64 "$seeds/plain.gif"
convert "$variants/base.jpg" -dither None -colors 64 -interlace GIF "$seeds/interlaced.gif"
convert "$seeds/alpha.png" -dither None -colors 63 "$seeds/transparent.gif"
convert "$variants/base.jpg" -compress lzw -define tiff:rows-per-strip=8 "$seeds/lzw.tif"
convert "$variants/base.jpg" -define tiff:tile-geometry=32x32 -compress zip "$seeds/tiled.tif"
convert "$variants/base.jpg" -depth 16 -orient RightTop "$seeds/rgb16.tif"
convert "$variants/base.jpg" -dither None -colors 64 -type Palette "$seeds/palette.tif"
convert "$variants/base.jpg" -colorspace CMYK -depth 8 "$seeds/cmyk.tif"
convert "$seeds/alpha.png" -interlace plane "$seeds/planar-alpha.tif"
cp Fuzz/seeds/*.dng Fuzz/seeds/*.raf "$seeds/"
jpegtran -scans "$seeds/dc-last.txt" "$variants/base.jpg" > "$seeds/dc-last.jpg"
jpegtran -scans "$seeds/separate.txt" "$variants/base.jpg" > "$seeds/separate.jpg"
swift build --build-path .build/asan --product tessera-fuzz -Xswiftc -sanitize=address -Xcc -fsanitize=address 2>&1 | tail -1
# Part seeds for the part target: real parts made by the tool, of a JPEG and pyramid split in 3
# (with the viewer's cells in part 1) and of a JPEG alone split in 2. The plain debug build: the
# seeds are not what is fuzzed, and an ASan finding while making them would stop the run.
swift build --product tessera 2>&1 | tail -1
mkdir -p "$seeds/out" "$seeds/parts-a" "$seeds/parts-b"
for k in 1 2 3; do
    .build/debug/tessera grid "$variants" -o "$seeds/out/a.jpg" --dzi "$seeds/out/a.dzi" \
        --grid 6x4 --tile-size 40x30 --dzi-tile-size 62 --shard $k/3 --shard-dir "$seeds/parts-a" -q
done
for k in 1 2; do
    .build/debug/tessera grid "$variants" -o "$seeds/out/b.jpg" --grid 3x5 --tile-size 24 \
        --subsampling 444 --shard $k/2 --shard-dir "$seeds/parts-b" -q
done
for folder in parts-a parts-b; do
    for part in "$seeds/$folder"/*.tessera-part; do cp "$part" "$seeds/$folder-$(basename "$part")"; done
done
# The memory limit: AddressSanitizer's own (its shadow memory rules out ulimit -v); a process whose
# resident set passes it is stopped and reported as a finding.
export ASAN_OPTIONS="hard_rss_limit_mb=1024:quarantine_size_mb=64:detect_leaks=0:abort_on_error=1"
status=0
# The first seed is a photo that always decodes (drawn beside the fuzzed one in renders).
.build/asan/debug/tessera-fuzz --seconds "$seconds" --seed "$seed" --target "$target" --work "$work" \
    --regressions Fuzz/regressions \
    Tests/TesseraTests/Fixtures/orientation/Landscape_6.jpg "$variants"/*.jpg "$seeds"/*.jpg "$seeds"/*.png "$seeds"/*.webp \
    "$seeds"/*.heic Fuzz/seeds/*.heic "$seeds"/*.avif "$seeds"/*.gif "$seeds"/*.tif "$seeds"/*.dng "$seeds"/*.raf \
    "$seeds"/*.tessera-part || status=$?
if [ "$status" != 0 ]; then
    echo "fuzz: FINDING (exit $status, seed $seed); the input is kept in $work (current.jpg or hang-N.jpg)" >&2
    exit "$status"
fi
rm -rf "$work"
