#!/usr/bin/env bash
# The tests' independent readers from PyPI: the IIIF Image API validator, and tifffile (with
# imagecodecs' libjpeg-turbo for its JPEG tiles, and numpy) for the pyramidal TIFF.
#
# Debian's own python3 has no pip until python3-pip is installed, and refuses pip installs into
# the system's site (PEP 668: "externally-managed-environment"). There they go to the user's
# site (~/.local), which `python3` reads and which touches no Debian package. A Python of its
# own (pyenv, a venv) takes them as usual.
set -euo pipefail
packages=(iiif-validator tifffile imagecodecs numpy)
if ! python3 -m pip --version >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pip >/dev/null
fi
if ! python3 -m pip install -q "${packages[@]}" 2>/tmp/tessera-pip.$$; then
    if grep -q "externally-managed-environment" /tmp/tessera-pip.$$; then
        python3 -m pip install -q --user --break-system-packages "${packages[@]}"
    else
        cat /tmp/tessera-pip.$$ >&2
        rm -f /tmp/tessera-pip.$$
        exit 1
    fi
fi
rm -f /tmp/tessera-pip.$$
