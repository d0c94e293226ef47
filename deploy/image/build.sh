#!/bin/bash
# Builds runbox's container image as an OCI archive, without a registry or a
# container engine: mmdebstrap makes a Debian tree that builds runbox from
# this work tree, then the image's root filesystem with runbox's runtime
# dependencies and those binaries; umoci makes that one layer of an OCI image
# with its configuration, and tar packs the image layout. Load the archive
# with `skopeo copy oci-archive:FILE docker://REGISTRY/runbox:TAG`,
# `podman load -i FILE` or `kind load image-archive FILE`; for a containerd
# node's `ctr images import`, through skopeo's docker-archive (deploy/README.md).
#
#   build.sh [-o ARCHIVE] [-t TAG] [-s SUITE] [-m MIRROR] [-b BUILD_DIR] [-w WORK_DIR]
#
#   -o  the archive to write (default build-image/runbox-oci.tar)
#   -t  the image's tag (default runbox's version, e.g. 0.1.0)
#   -s  Debian suite (default trixie: Debian 13, whose Node.js 20 runs runbox's
#       JavaScript; Debian 12's Node.js 18 lacks vm.constants it uses)
#   -m  Debian mirror (default http://deb.debian.org/debian)
#   -b  take runbox and runbox-serve from BUILD_DIR instead of building them
#       (they must have been built on SUITE: they need its libraries)
#   -w  scratch directory (default a new one beside the archive, removed after)
#
# Environment: RUNBOX_IMAGE_EXTRA, packages added to the image (default the
# Python libraries that runbox's examples use without installing anything:
# python3-numpy python3-pandas python3-matplotlib; empty for a smaller image).
# SOURCE_DATE_EPOCH (default the last commit's time) dates the files and the
# image, so the same tree and the same archive snapshot give the same image.
#
# Needs root (mmdebstrap's root mode, with the host's apt), the Debian
# packages mmdebstrap and umoci, and git (the tree's files).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
archive=build-image/runbox-oci.tar
tag=
suite=trixie
mirror=http://deb.debian.org/debian
prebuilt=
work=
while getopts o:t:s:m:b:w: option; do
    case $option in
    o) archive=$OPTARG ;;
    t) tag=$OPTARG ;;
    s) suite=$OPTARG ;;
    m) mirror=$OPTARG ;;
    b) prebuilt=$OPTARG ;;
    w) work=$OPTARG ;;
    *) sed -n '2,/^set -e/p' "$0" | sed '$d' >&2; exit 2 ;;
    esac
done

fail() { echo "build.sh: $*" >&2; exit 1; }

for tool in mmdebstrap umoci git tar; do
    command -v "$tool" >/dev/null || fail "$tool is missing (apt-get install mmdebstrap umoci git)"
done
[ "$(id -u)" = 0 ] || fail "run as root: mmdebstrap installs the packages as root into the new trees"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

mkdir -p "$(dirname "$archive")"
archive=$(cd "$(dirname "$archive")" && pwd)/$(basename "$archive")
own_work=
if [ -z "$work" ]; then
    work=$(mktemp -d "$(dirname "$archive")/image-work.XXXXXX")
    own_work=1
fi
mkdir -p "$work"
cleanup() { [ -z "$own_work" ] || rm -rf "$work"; }
trap cleanup EXIT
started=$(date +%s)

# --- runbox, built on SUITE ---------------------------------------------------
# A tree of SUITE with the compiler and the -dev packages CMakeLists.txt asks
# pkg-config for (named as this host names them: `make deps` installed them),
# Node.js (the build bundles the playground with web/build.mjs), and this
# work tree's files (tracked and untracked, not ignored) in /src, with the
# playground's bundler and editor that `npm ci --prefix web` put in
# web/node_modules (pinned by web/package-lock.json; esbuild's binary is
# linux-x64's, as the builder is).
builder=$work/builder
if [ -z "$prebuilt" ]; then
    modules=$(sed -n 's/.*pkg_check_modules([A-Z_]* REQUIRED IMPORTED_TARGET \([^ )]*\)).*/\1/p' "$repo/CMakeLists.txt")
    dev_packages=$(for module in $modules; do
        pc=$(pkg-config --variable=pcfiledir "$module" 2>/dev/null)/$module.pc
        dpkg-query -S "$pc" 2>/dev/null | cut -d: -f1 || fail "no package here has $module.pc (make deps)"
    done | sort -u | paste -sd, -)
    [ -d "$repo/web/node_modules" ] || fail "no web/node_modules: npm ci --prefix web (make deps)"
    echo "build.sh: building runbox on Debian $suite with $dev_packages"
    mmdebstrap --variant=essential --include="build-essential,cmake,ninja-build,pkg-config,nodejs,$dev_packages" \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        "$suite" "$builder" "$mirror"
    mkdir "$builder/src"
    git -C "$repo" ls-files -z --cached --others --exclude-standard |
        tar -C "$repo" --null -T - -cf - | tar -C "$builder/src" -xf -
    tar -C "$repo" -cf - web/node_modules | tar -C "$builder/src" -xf -
    chroot "$builder" sh -c 'cmake -S /src -B /src/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        cmake --build /src/build --target runbox runbox-serve runbox-net runbox-init'
    prebuilt=$builder/src/build
fi
for program in runbox runbox-serve runbox-net runbox-init; do
    [ -x "$prebuilt/$program" ] || fail "no $prebuilt/$program"
done
binaries=$(cd "$prebuilt" && pwd)

# The shared libraries the binaries load, as the packages that ship them on
# SUITE (asked of the builder, or of this host for -b): whatever
# CMakeLists.txt links today, without a list here to keep in step with it.
in_builder() { if [ -d "$builder/usr" ]; then chroot "$builder" "$@"; else "$@"; fi; }
copy=$binaries
[ ! -d "$builder/usr" ] || copy=/src/build
libraries=$(in_builder ldd "$copy/runbox" "$copy/runbox-serve" "$copy/runbox-net" |
    awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
# And the libraries runbox loads on first use (dlopen), which ldd does not
# see: their sonames are in src/base/*_lib.h (archive, nettle, nft).
loaded_later=$(grep -ho '"lib[a-z0-9_+-]*\.so\.[0-9]*"' "$repo"/src/base/*_lib.h | tr -d '"' | sort -u)
[ -n "$loaded_later" ] || fail "cannot find the sonames that runbox loads on first use in src/base"
for soname in $loaded_later; do
    path=$(in_builder /sbin/ldconfig -p | awk -v s="$soname" '$1 == s {print $NF; exit}')
    [ -n "$path" ] || fail "the builder has no $soname, which runbox loads on first use"
    libraries="$libraries $path"
done
library_packages=$(for library in $libraries; do
    in_builder dpkg-query -S "$(in_builder readlink -f "$library")" 2>/dev/null ||
        in_builder dpkg-query -S "$library"
done | cut -d: -f1 | sort -u | tr '\n' ' ')
[ -n "$library_packages" ] || fail "cannot tell which packages hold the libraries of runbox-serve"
version=$(in_builder "$copy/runbox" --version | awk '{print $2}')
[ -n "$tag" ] || tag=$version

# What runbox runs, beside the libraries. The sandboxes see this image's
# /usr (read-only), so this list is also what sandboxed code finds:
#   python3, nodejs, bash        the three languages
#   python3-venv, python3-pip    Python requirements (a venv per dependency set, pip into it)
#   npm                          JavaScript requirements
#   ca-certificates              TLS for the package indexes and for code with the network on
#   btrfs-progs                  mkfs.btrfs for the sessions' image (a quota per session)
#   curl                         the Kubernetes preStop hook (POST /v1/admin/drain)
#   tini                         PID 1: reaps what is orphaned, passes SIGTERM on to runbox
# Not needed: uidmap (runbox as root writes the id maps itself), nftables
# (runbox speaks netlink to the sandboxes' own tables through libnftnl),
# iproute2 (runbox configures the interface; runbox-net, beside it, relays
# through libslirp, found by ldd above), e2fsprogs (no ext4 any
# more), mount (runbox mounts with the system calls).
tools="python3 python3-venv python3-pip nodejs npm bash ca-certificates btrfs-progs curl tini"
extra=${RUNBOX_IMAGE_EXTRA-python3-numpy python3-pandas python3-matplotlib}
packages=$(echo "$library_packages $tools $extra" | tr ' ' '\n' | sed '/^$/d' | sort -u | paste -sd, -)

# --- the image's root -----------------------------------------------------------
echo "build.sh: runbox $version, Debian $suite, packages: $packages"
# The essential variant: Debian's Essential:yes set plus the packages above
# and what they depend on; no apt, no init system. Documentation and
# translations are left out (copyright files stay).
mmdebstrap --variant=essential --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook="copy-in $binaries/runbox $binaries/runbox-serve $binaries/runbox-net $binaries/runbox-init /usr/local/bin" \
    --customize-hook='chmod 0755 "$1/usr/local/bin/runbox" "$1/usr/local/bin/runbox-serve" "$1/usr/local/bin/runbox-net" "$1/usr/local/bin/runbox-init"' \
    --customize-hook="upload $here/entrypoint.sh /usr/local/sbin/runbox-entrypoint" \
    --customize-hook='chmod 0755 "$1/usr/local/sbin/runbox-entrypoint"' \
    --customize-hook='mkdir -p "$1/etc/runbox" "$1/var/lib/runbox" && chmod 0700 "$1/var/lib/runbox"' \
    --customize-hook="upload $repo/deploy/policy.conf /etc/runbox/policy.conf" \
    --customize-hook='chmod 0644 "$1/etc/runbox/policy.conf"' \
    --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"' \
    "$suite" - "$mirror" |
    tar --delete --wildcards './dev/?*' >"$work/rootfs.tar"

# --- the image --------------------------------------------------------------------
# One layer, the whole tree, and the configuration. Entrypoint and command
# are split so that a pod's args (or `podman run IMAGE check`) replace the
# command and keep tini, the cgroup set-up and the state directory.
umoci init --layout "$work/oci"
umoci new --image "$work/oci:$tag"
umoci raw add-layer --image "$work/oci:$tag" --history.created="$created" \
    --history.created_by="deploy/image/build.sh: Debian $suite, runbox $version" "$work/rootfs.tar"
umoci config --image "$work/oci:$tag" --created="$created" --author="runbox" \
    --os=linux --architecture="$(dpkg --print-architecture)" \
    --config.user=0:0 --config.workingdir=/ \
    --config.env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.entrypoint=/usr/bin/tini --config.entrypoint=-- \
    --config.entrypoint=/usr/local/sbin/runbox-entrypoint \
    --config.entrypoint=--state-dir --config.entrypoint=/var/lib/runbox \
    --config.cmd=serve --config.cmd=--listen --config.cmd=0.0.0.0:8080 \
    --config.cmd=--token-file --config.cmd=/run/secrets/runbox/token \
    --config.exposedports=8080/tcp --config.volume=/var/lib/runbox \
    --config.stopsignal=SIGTERM \
    --config.label=org.opencontainers.image.title=runbox \
    --config.label=org.opencontainers.image.version="$version" \
    --config.label=org.opencontainers.image.created="$created" \
    --config.label=org.opencontainers.image.base.name="debian:$suite" \
    --history.created="$created" --history.created_by="deploy/image/build.sh: image configuration"
umoci gc --layout "$work/oci"

# The OCI image layout as one tar archive (skopeo's and podman's
# oci-archive), its members in a fixed order and dated SOURCE_DATE_EPOCH.
tar -C "$work/oci" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -cf "$archive.new" .
mv "$archive.new" "$archive"
echo "build.sh: wrote $archive ($(du -h "$archive" | cut -f1)), image runbox:$tag, in $(($(date +%s) - started)) s"
