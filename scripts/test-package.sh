#!/usr/bin/env bash
# The Debian package on a Debian without Swift: builds tessera_VERSION_amd64.deb
# (scripts/package-deb.sh), makes a minimal bookworm root with debootstrap, installs the package
# there with apt-get (its dependencies resolved from Debian), and inside that root, as an
# unprivileged user in a 64 MiB memory cgroup, renders a grid and a mosaic of the shipped photos
# and checks them with djpeg; then `man tessera`, the bash completion and `tessera --version`
# (the commit it was built from). Needs root (debootstrap, chroot, mounts, cgroups). CI runs it.
#   scripts/test-package.sh [ROOT_DIR]      ROOT_DIR is kept, and reused by a later run
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "test-package: FAILED: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot, memory cgroups)"
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-package-test-XXXXXX")
root=${1:-/var/tmp/tessera-bookworm-root}
mounted=()
cleanup() {
    for point in "${mounted[@]}"; do umount -l "$point" 2>/dev/null || true; done
    rmdir /sys/fs/cgroup/memory/tessera-package-test 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
deb=$(scripts/package-deb.sh "$work")
size=$(stat -c %s "$deb")
echo "package: $(basename "$deb"), $((size / 1024)) KiB"
[ "$size" -le $((15 * 1024 * 1024)) ] || fail "the package is over 15 MB ($size bytes)"
# A root with nothing but Debian's minimal base: no Swift, no build tools, no -dev packages.
if [ ! -x "$root/usr/bin/apt-get" ]; then
    rm -rf "$root"
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap"; }
fi
[ ! -e "$root/opt/swift" ] && ! ls "$root"/usr/lib/*/libswiftCore.so >/dev/null 2>&1 || fail "the root has a Swift runtime"
cp /etc/resolv.conf "$root/etc/resolv.conf"
for point in proc dev sys; do
    mkdir -p "$root/$point"
    case $point in proc) mount -t proc proc "$root/proc" ;; *) mount --rbind "/$point" "$root/$point" ;; esac
    mounted=("$root/$point" "${mounted[@]}")
done
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
cp "$deb" "$root/tmp/tessera.deb"
in_root apt-get update -qq
# man-db and bash-completion to try the page and the completion; libjpeg-turbo-progs for djpeg.
# The package itself brings only the image libraries dpkg-shlibdeps named.
DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -qq --reinstall /tmp/tessera.deb man-db bash-completion libjpeg-turbo-progs >/dev/null \
    || fail "apt-get install ./tessera.deb"
in_root sh -c 'ldd /usr/bin/tessera' | grep -q -e "not found" -e swift && fail "the installed binary misses a library or links Swift"
in_root id tessera-test >/dev/null 2>&1 || in_root useradd --create-home tessera-test
rm -rf "$root/home/tessera-test/photos"
cp -r Tests/TesseraTests/Fixtures/orientation "$root/home/tessera-test/photos"
cp Tests/TesseraTests/Fixtures/orientation/Landscape_1.jpg "$root/home/tessera-test/target.jpg"
in_root chown -R tessera-test /home/tessera-test
# Both renders in one 64 MiB cgroup, as in a memory-limited container.
group=/sys/fs/cgroup/memory/tessera-package-test
mkdir -p "$group"
echo $((64 * 1024 * 1024)) > "$group/memory.limit_in_bytes"
as_user() {
    sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$group" \
        chroot --userspec=tessera-test "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/home/tessera-test LANG=C.UTF-8 \
        sh -c "cd /home/tessera-test && $1"
}
as_user "tessera grid photos -o grid.jpg --columns 6 --tile-size 200 --max-memory 48M" || fail "tessera grid in the root"
as_user "tessera mosaic --target target.jpg photos -o mosaic.jpg --grid 24x16 --tile-size 40 --max-memory 48M --cache-dir cache --min-distance 0" \
    || fail "tessera mosaic in the root"
peak=$(( $(cat "$group/memory.max_usage_in_bytes") / 1048576 ))
echo "renders in the root: peak $peak MiB in the 64 MiB cgroup, $(cat "$group/memory.failcnt") limit hits"
in_root djpeg -outfile /dev/null /home/tessera-test/grid.jpg || fail "djpeg refuses grid.jpg"
in_root djpeg -outfile /dev/null /home/tessera-test/mosaic.jpg || fail "djpeg refuses mosaic.jpg"
in_root sh -c 'djpeg -pnm /home/tessera-test/grid.jpg | head -2 | tail -1' | grep -qx "1200 600" || fail "grid.jpg is not 1200 x 600"
in_root sh -c 'djpeg -pnm /home/tessera-test/mosaic.jpg | head -2 | tail -1' | grep -qx "960 640" || fail "mosaic.jpg is not 960 x 640"
# The manual and the completion, as a user of the root meets them.
in_root sh -c 'MANPAGER=cat MANWIDTH=80 man tessera' > "$work/man.txt" 2>&1 || fail "man tessera"
grep -q -- "--tile-size" "$work/man.txt" && grep -q "EXIT STATUS" "$work/man.txt" || fail "man tessera lacks the options or the exit codes"
in_root bash -c 'source /usr/share/bash-completion/bash_completion; _completion_loader tessera; COMP_WORDS=(tessera grid --til); COMP_CWORD=2; _tessera; echo "${COMPREPLY[*]}"' \
    | grep -qx -- "--tile-size" || fail "the bash completion does not complete --til"
in_root tessera --version > "$work/version.txt"
grep -q "commit $(git rev-parse --short=12 HEAD)" "$work/version.txt" || fail "tessera --version does not name commit $(git rev-parse --short=12 HEAD): $(head -1 "$work/version.txt")"
head -1 "$work/version.txt"
echo "test-package: every check held"
