#!/usr/bin/env bash
# Builds tessera_VERSION_amd64.deb: the statically linked binary (scripts/build-release.sh),
# the manual page tessera(1) and the bash, zsh and fish completions, each written by that binary
# from its option tables (`tessera man`, `tessera completions SHELL`), so none can drift from
# the parser. Depends is computed by dpkg-shlibdeps from the libraries the binary links.
#   scripts/package-deb.sh [OUT_DIR]     prints the package's path; runs lintian when installed
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${1:-$root}
binary=$(scripts/build-release.sh)
version=$("$binary" --version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
[ -n "$version" ] || { echo "package-deb: no version from $binary --version --json" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-deb-XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/tessera_${version}_amd64
install -D -m 0755 "$binary" "$stage/usr/bin/tessera"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/tessera"
mkdir -p "$stage/usr/share/man/man1" "$stage/usr/share/doc/tessera"
"$binary" man | gzip -9n > "$stage/usr/share/man/man1/tessera.1.gz"
install -D -m 0644 <("$binary" completions bash) "$stage/usr/share/bash-completion/completions/tessera"
install -D -m 0644 <("$binary" completions zsh) "$stage/usr/share/zsh/vendor-completions/_tessera"
install -D -m 0644 <("$binary" completions fish) "$stage/usr/share/fish/vendor_completions.d/tessera.fish"
gzip -9n < README.md > "$stage/usr/share/doc/tessera/README.md.gz"
# A native package's changelog, in Debian's format, from CHANGELOG.md's newest entry.
{
    echo "tessera ($version) bookworm; urgency=medium"
    echo
    # Each bullet of the entry (continuation lines joined), wrapped to 78 columns.
    awk -v v="## $version" '
        function emit(text,   n, words, i, line) {
            n = split(text, words, " "); line = "  *"
            for (i = 1; i <= n; i++) {
                if (length(line) + 1 + length(words[i]) > 78) { print line; line = "   " }
                line = line " " words[i]
            }
            print line
        }
        /^## / { if (found) exit; found = index($0, v) == 1; next }
        !found { next }
        /^- / { if (item != "") emit(item); item = substr($0, 3); next }
        /^  / { sub(/^ +/, ""); item = item " " $0; next }
        END { if (item != "") emit(item) }' CHANGELOG.md
    echo
    echo " -- Tessera developers <tessera@users.noreply.github.com>  $(date -R -u -d "$(sed -n 's/^public let tesseraReleaseDate = "\(.*\)"/\1/p' Sources/TesseraCLI/TopLevel.swift) 12:00")"
} | gzip -9n > "$stage/usr/share/doc/tessera/changelog.gz"
{
    cat <<'COPYRIGHT'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: tessera
Comment: The Deep Zoom viewer that tessera writes beside a pyramid embeds Leaflet 1.7.1.

Files: *
Copyright: 2026 Tessera developers
License: other
 All rights reserved by the Tessera developers until a licence is chosen.

Files: Sources/Tessera/Outputs/DeepZoom/LeafletAssets.swift
COPYRIGHT
    echo "Copyright: 2010-2019, Vladimir Agafonkin"
    echo "           2010-2011, CloudMade"
    echo "License: BSD-2-clause"
    sed -e '1,/^All rights reserved\./d' -e 's/^ *$/./' -e 's/^ */ /' ThirdParty/leaflet/LICENSE
} > "$stage/usr/share/doc/tessera/copyright"
chmod 0644 "$stage/usr/share/doc/tessera/"*
# dpkg-shlibdeps reads debian/control in its working folder.
mkdir -p "$work/src/debian"
printf 'Source: tessera\n\nPackage: tessera\nArchitecture: amd64\n' > "$work/src/debian/control"
depends=$(cd "$work/src" && dpkg-shlibdeps -O -e"$stage/usr/bin/tessera" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
mkdir -p "$stage/DEBIAN"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: tessera
Version: $version
Architecture: amd64
Maintainer: Tessera developers <tessera@users.noreply.github.com>
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $depends
Section: graphics
Priority: optional
Description: giant photo grids and mosaics in flat memory
 tessera renders photo grids and photo mosaics of a billion pixels and more
 into one baseline JPEG and/or a Deep Zoom pyramid with a viewer, on all
 cores, in a few dozen megabytes of memory whatever the output size. Photos
 may be JPEG, PNG, WebP, HEIF/HEIC, AVIF, GIF, TIFF or camera RAW files
 (their JPEG preview); each is decoded at the size it is drawn, turned
 upright and converted to sRGB.
CONTROL
mkdir -p "$out"
deb=$out/tessera_${version}_amd64.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
if command -v lintian >/dev/null; then
    # Errors fail the build; warnings and notes are printed.
    lintian --fail-on error --no-tag-display-limit "$deb" >&2
fi
echo "$deb"
