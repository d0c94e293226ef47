#!/bin/bash
# Downloads Debian's current kernel (the one linux-image-amd64 depends on)
# with apt and extracts it into CACHE/<package>/, once: later runs reuse it,
# and older versions are removed. Prints that directory.
#
#   fetch-kernel.sh CACHE
set -euo pipefail
cache=$1
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# The kernel package linux-image-amd64 depends on now, or "".
current_package() {
    apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n 1
}

# Downloads and extracts package into CACHE/package; fails leaving nothing.
fetch() {
    local package=$1 kernel=$cache/$1
    rm -rf "$kernel.tmp"
    mkdir -p "$kernel.tmp"
    # apt's sandbox user cannot write into a directory of root's: download as root.
    if (cd "$kernel.tmp" && apt-get download -q -o APT::Sandbox::User=root "$package" >&2) &&
        dpkg-deb -x "$kernel.tmp"/*.deb "$kernel.tmp/root"; then
        mv "$kernel.tmp/root" "$kernel"
    fi
    rm -rf "$kernel.tmp"
    [ -d "$kernel" ]
}

# (|| true: with pipefail, an empty cache or no package would end the script here.)
cached=$(ls -d "$cache"/linux-image-*-amd64 2>/dev/null | tail -n 1 || true)
package=$(current_package || true)
if [ -n "$package" ] && [ ! -d "$cache/$package" ]; then
    echo "fetch-kernel: downloading $package" >&2
    # Package lists older than the archive name a version it no longer has.
    if ! fetch "$package"; then
        apt-get update -qq >&2 || true
        package=$(current_package || true)
        [ -n "$package" ] && fetch "$package" || package=
    fi
    if [ -n "$package" ]; then
        for old in "$cache"/linux-image-*-amd64; do
            [ "$old" = "$cache/$package" ] || rm -rf "$old"
        done
    fi
fi
kernel=${package:+$cache/$package}
kernel=${kernel:-$cached}
if [ -z "$kernel" ] || ! ls "$kernel"/boot/vmlinuz-* >/dev/null 2>&1; then
    echo "fetch-kernel: no kernel: apt cannot download linux-image-amd64's (run apt-get update)" >&2
    exit 1
fi
echo "$kernel"
