#!/bin/bash
# Runs the image built by build.sh under podman, a real container engine, as
# a Kubernetes node's runtime runs the StatefulSet's pod, and makes the same
# checks as smoke-test.sh: `podman load` of the archive, `podman run
# --privileged` with the StatefulSet's mounts (the state volume at
# /var/lib/runbox, the token Secret read-only at /run/secrets/runbox, /tmp a
# 64 MiB tmpfs, the root read-only), the image's own entrypoint (tini, then
# runbox-entrypoint) with its command's listener moved to a loopback port.
# Then, through `podman exec`: smoke_checks.py, the StatefulSet's preStop hook
# (drain, then /healthz 503), and the stop signal, after which runbox must
# exit 0 within its grace.
#
#   podman-smoke-test.sh [ARCHIVE]      (default build-image/runbox-oci.tar)
#
# The container shares the host's network namespace (executions with the
# network on reach the package registries, as a pod's would reach them
# through its node), like smoke-test.sh. Needs root, podman and runc.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=smoke-lib.sh
. "$here/smoke-lib.sh"
repo=$(cd "$here/../.." && pwd)
archive=${1:-build-image/runbox-oci.tar}
port=${RUNBOX_SMOKE_PORT:-18081}
[ "$(id -u)" = 0 ] || { echo "podman-smoke-test.sh: run as root" >&2; exit 1; }
[ -f "$archive" ] || { echo "podman-smoke-test.sh: no $archive (make image)" >&2; exit 1; }
for tool in podman runc; do
    command -v $tool >/dev/null || { echo "podman-smoke-test.sh: no $tool (make deps installs it)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/runbox-podman-smoke.XXXXXX)
name=runbox-smoke-$$
image=
cleanup() {
    podman rm --force --time 0 "$name" >/dev/null 2>&1 || true
    [ -z "$image" ] || podman rmi --force "$image" >/dev/null 2>&1 || true
    umount "$work/state/sessions" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# podman load names what it loaded: the archive's one tag.
image=$(podman load --quiet --input "$archive" | sed -n 's/^Loaded image[^:]*: //p' | head -n 1)
[ -n "$image" ] || { echo "podman-smoke-test.sh: podman load named no image" >&2; exit 1; }
echo "podman-smoke-test: loaded $image"

# The Secret, as the kubelet projects it (mode 0400), and the volume.
mkdir -p "$work/state" "$work/token"
echo smoke-test-token-0123456789abcdef >"$work/token/token"
chmod 0400 "$work/token/token"
extra=()
# Behind a TLS-inspecting proxy the container trusts what the host trusts (smoke-test.sh).
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    extra+=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro
            --env npm_config_cafile=/etc/ssl/certs/ca-certificates.crt)
fi
# runc, as a Kubernetes node runs containers (containerd's default): Debian's
# podman defaults to crun, which refuses a hybrid cgroup layout whose v2
# hierarchy has a controller (this kind of host). Limits as a node's runtime
# gives them: podman's own defaults (1048576 open files) exceed what a root
# without CAP_SYS_RESOURCE may set, so the container gets the open files of this
# shell and 16384 processes (more than that, podman cannot set here).
podman --runtime runc run --detach --name "$name" --privileged --network host --read-only \
    --volume "$work/state:/var/lib/runbox" \
    --volume "$work/token:/run/secrets/runbox:ro" \
    --tmpfs /tmp:rw,size=64m \
    --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=16384:16384 \
    "${extra[@]}" \
    "$image" serve --listen "127.0.0.1:$port" --token-file /run/secrets/runbox/token >/dev/null

inside() { podman exec --interactive "$name" "$@"; }

for _ in $(seq 150); do
    inside curl -fsS "http://127.0.0.1:$port/livez" >/dev/null 2>&1 && break
    [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] || {
        podman logs "$name"; echo "podman-smoke-test: the container exited" >&2; exit 1; }
    sleep 0.2
done

smoke_checks || { podman logs "$name" | tail -n 20; exit 1; }

# What the kubelet does at the end: the image's stop signal, then a grace period.
podman stop --time 60 "$name" >/dev/null
status=$(podman inspect --format '{{.State.ExitCode}}' "$name")
[ "$status" = 0 ] || { podman logs "$name" | tail -n 5; echo "FAIL SIGTERM: exit status $status" >&2; exit 1; }
echo "ok   SIGTERM: runbox stopped, exit status 0"
