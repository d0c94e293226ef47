#!/bin/bash
# Stage 2 of the cgroup v2 VM (see run-vm.sh): PID 1 on the host's root,
# shared read-only over 9p, with this kernel's cgroup v2 as the only cgroup
# hierarchy. Prepares the writable places, runs each step, records
# "<step> <exit status>" in the results directory the host shares with us,
# and powers the VM off.
#
# Kernel command line: rbx_repo=DIR (the runbox work tree) rbx_build=DIR
# (its build, with runbox and try-syscall) rbx_guest_timeout=SECONDS.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LANG=C.UTF-8 HOME=/root PYTHONDONTWRITEBYTECODE=1

param() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" /proc/cmdline; }

poweroff_now() {
    sync
    echo o >/proc/sysrq-trigger
    sleep 30
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
# As systemd mounts it on a pure cgroup v2 host.
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/results /run/lock
RESULTS=/run/results
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results "$RESULTS"; then
    echo "rbx-vm: cannot mount the results directory"
    poweroff_now
fi
echo "$(uname -r)" >"$RESULTS/booted"

GUEST_TIMEOUT=$(param rbx_guest_timeout)
# The work tree and the build may lie below a directory that gets a tmpfs
# next (/tmp, /root): they are reached through binds made before.
mkdir -p /run/rbx/repo /run/rbx/build
mount --bind "$(param rbx_repo)" /run/rbx/repo && mount --bind "$(param rbx_build)" /run/rbx/build || {
    echo "rbx-vm: cannot reach the work tree or the build" | tee "$RESULTS/setup.log"
    poweroff_now
}
REPO=/run/rbx/repo
BUILD=/run/rbx/build
# This kernel's modules, for a check that unloads one and loads it again.
MODULES=
mkdir -p /run/rbx/modules
mount --bind "$(param rbx_modules)" /run/rbx/modules && MODULES=/run/rbx/modules

# /tmp (pytest's and runbox's state directories, so runbox's session images)
# on a real disk, as on a host; the rest of what is written goes to tmpfs.
mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=1 -O ^has_journal /dev/vda &&
    mount -o noatime /dev/vda /tmp && chmod 1777 /tmp ||
    echo "rbx-vm: no scratch disk: /tmp stays on the read-only root" | tee "$RESULTS/setup.log"
# The host's criu (make deps unpacks it into /var/lib/runbox/criu) stays in
# reach under the tmpfs that takes /var/lib/runbox: hibernation on cgroup v2.
criu_bind=
if [ -x /var/lib/runbox/criu/criu ]; then
    mkdir -p /run/rbx/criu && mount --bind /var/lib/runbox/criu /run/rbx/criu && criu_bind=1
fi
for dir in /var/tmp /var/lib/runbox /var/cache /root; do
    mount -t tmpfs -o mode=755 tmpfs "$dir"
done
if [ -n "$criu_bind" ]; then
    mkdir -p /var/lib/runbox/criu && mount --bind /run/rbx/criu /var/lib/runbox/criu
fi
chmod 1777 /var/tmp
hostname rbx-cgroup2-vm
# A host always holds some file lock; the e2e suite checks that the sandbox
# does not see /proc/locks, and needs one there to prove anything.
flock /run/lock/rbx-vm.lock sleep infinity &
ip link set lo up

# One step: its output on the console and in RESULTS/NAME.log, its status in
# RESULTS/steps.
step() {
    local name=$1
    shift
    echo "=== rbx-vm: $name: $*"
    "$@" 2>&1 | tee "$RESULTS/$name.log"
    local status=${PIPESTATUS[0]}
    echo "$name $status" >>"$RESULTS/steps"
    echo "=== rbx-vm: $name: exit status $status"
}

selftest() {
    "$BUILD/cgroup-selftest"
}

cd "$REPO" || poweroff_now
step environment env RBX_VM_MODULES="$MODULES" python3 tests/cgroup2/guest_checks.py "$BUILD/runbox"
step cgroup_selftest selftest
mapfile -t pytest_args <"$RESULTS/pytest-args"
# A failed case runs once more, as in make test's other stages (mk/ci.mk): under TCG the
# guest is slow and loaded, and a fault of runbox fails twice (-rR names each rerun).
step e2e env RUNBOX_BIN="$BUILD/runbox" PYTHONPATH="$REPO/tests/cgroup2" \
    RBX_VM_ACCEL="$(cat "$RESULTS/accel")" timeout -k 10 "$GUEST_TIMEOUT" \
    python3 -m pytest -q -rfEsR -p no:cacheprovider -p vm_skips --reruns 1 \
    --junitxml="$RESULTS/e2e.xml" "${pytest_args[@]}"
# What any failure above left behind, for the report.
for dir in /sys/fs/cgroup/runbox/exec-*; do
    [ -d "$dir" ] || continue
    echo "left: $dir (made $(stat -c %y "$dir"), procs: $(tr '\n' ' ' <"$dir/cgroup.procs"))"
    owner=${dir##*/exec-}
    echo "  its runbox: $(ps -o pid=,lstart=,args= -p "${owner%%-*}" || echo gone)"
    for pid in $(cat "$dir/cgroup.procs"); do ps -o pid=,stat=,lstart=,args= -p "$pid"; done
done 2>&1 | tee "$RESULTS/leftovers.log"
echo done >>"$RESULTS/steps"
poweroff_now
