#!/bin/bash
# Runs the image built by build.sh the way a runtime runs a privileged
# container, without a container engine, and checks runbox serve in it.
#
#   smoke-test.sh [ARCHIVE [TAG]]      (default build-image/runbox-oci.tar, its one tag)
#
# The container: mount and PID namespaces of its own (the host's network
# namespace, so that executions with the network on reach the package
# registries; runbox listens on a loopback port instead of 0.0.0.0:8080),
# the image's root read-only with the state directory, /tmp and the token
# mounted as deploy/kubernetes/runbox-statefulset.yaml mounts them, the
# host's devices and cgroupfs as a privileged container has them, tini as
# PID 1 with the image's own entrypoint and command. Then, from inside
# (nsenter): /livez and /healthz, runbox check, an execution per language,
# pandas, a stateful session, Python and JavaScript requirements installed
# from their registries, the StatefulSet's preStop hook (drain, then /healthz
# 503), and SIGTERM, after which runbox must exit 0 within its grace.
#
# Needs root, umoci, nsenter, and Python with PyYAML on the host.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=smoke-lib.sh
. "$here/smoke-lib.sh"
repo=$(cd "$here/../.." && pwd)
archive=${1:-build-image/runbox-oci.tar}
tag=${2:-}
port=${RUNBOX_SMOKE_PORT:-18080}
[ "$(id -u)" = 0 ] || { echo "smoke-test.sh: run as root" >&2; exit 1; }
[ -f "$archive" ] || { echo "smoke-test.sh: no $archive (make image)" >&2; exit 1; }

work=$(mktemp -d /tmp/runbox-smoke.XXXXXX)
container=
cleanup() {
    [ -z "$container" ] || kill -KILL "$container" 2>/dev/null || true
    wait 2>/dev/null || true
    umount "$work/state/sessions" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

mkdir "$work/oci" "$work/state"
tar -C "$work/oci" -xf "$archive"
[ -n "$tag" ] || tag=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])' "$work/oci/index.json")
umoci unpack --image "$work/oci:$tag" "$work/bundle" >/dev/null
rootfs=$work/bundle/rootfs
# The image's entrypoint and command, as umoci's runtime configuration has them.
mapfile -t command < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["process"]["args"]))' "$work/bundle/config.json")
command=("${command[@]/0.0.0.0:8080/127.0.0.1:$port}")
echo "smoke-test: image $tag runs: ${command[*]}"

# What the runtime makes before the root turns read-only: the mount points.
touch "$rootfs/etc/resolv.conf" "$rootfs/etc/hosts"
mkdir -p "$rootfs/run/secrets/runbox"

# The container's side: namespaces, mounts, pivot_root, then exec PID 1.
cat >"$work/inside.sh" <<'EOF'
set -eu
rootfs=$1 state=$2; shift 2
mount --make-rprivate /
mount --bind "$rootfs" "$rootfs"
mount --rbind /dev "$rootfs/dev"          # privileged: the host's devices
mount --rbind /sys "$rootfs/sys"          # and a writable cgroupfs
mount --bind /etc/resolv.conf "$rootfs/etc/resolv.conf"
mount --bind /etc/hosts "$rootfs/etc/hosts"
if [ -n "${HOST_CA:-}" ]; then  # the host's trust store, for a TLS-inspecting proxy
    mount --bind "$HOST_CA" "$rootfs/etc/ssl/certs/ca-certificates.crt"
fi
mount --bind "$state" "$rootfs/var/lib/runbox"                       # the volume
mount -t tmpfs -o size=64m tmpfs "$rootfs/tmp"                       # emptyDir, Memory
mount -t tmpfs -o size=1m,mode=0755 tmpfs "$rootfs/run/secrets/runbox"  # the Secret
echo smoke-test-token-0123456789abcdef >"$rootfs/run/secrets/runbox/token"
chmod 0400 "$rootfs/run/secrets/runbox/token"
mount -t proc proc "$rootfs/proc"                                    # this PID namespace's
mount -o remount,bind,ro "$rootfs"                                   # readOnlyRootFilesystem
cd "$rootfs"
pivot_root . mnt
cd /
# The host's root goes (the image has no umount: Python's libc has umount2).
python3 -c 'import ctypes; assert ctypes.CDLL(None).umount2(b"/mnt", 2) == 0'
exec "$@"
EOF
# Behind a TLS-inspecting proxy (a CA of the host's own in
# /usr/local/share/ca-certificates), the container trusts what the host
# trusts, as an operator there would arrange, and npm is told where that is
# (runbox passes npm_config_* and PIP_* on to installs).
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    export HOST_CA=/etc/ssl/certs/ca-certificates.crt npm_config_cafile=/etc/ssl/certs/ca-certificates.crt
    echo "smoke-test: the container trusts the host's CAs ($HOST_CA)"
fi
unshare --mount --pid --fork /bin/bash "$work/inside.sh" "$rootfs" "$work/state" "${command[@]}" \
    >"$work/serve.log" 2>&1 &
container=$!

# inside PROGRAM...: runs in the container's namespaces and root.
pid1() { pgrep -P "$container" -x tini | head -n 1; }
inside() { nsenter --target "$(pid1)" --mount --pid --root --wd -- "$@"; }

for _ in $(seq 100); do
    [ -n "$(pid1)" ] && inside curl -fsS "http://127.0.0.1:$port/livez" >/dev/null 2>&1 && break
    kill -0 "$container" 2>/dev/null || { cat "$work/serve.log"; echo "smoke-test: the container exited" >&2; exit 1; }
    sleep 0.2
done

smoke_checks || exit 1

kill -TERM "$(pid1)"
status=0
wait "$container" || status=$?
container=
[ "$status" = 0 ] || { tail -n 5 "$work/serve.log"; echo "FAIL SIGTERM: exit status $status" >&2; exit 1; }
echo "ok   SIGTERM: runbox stopped, exit status 0"
