#!/bin/bash
# Proves runbox's cgroup v2 code on a real, pure cgroup v2 host: boots Debian's
# kernel in QEMU (KVM, or TCG with a longer timeout where /dev/kvm is missing
# or cannot boot it) with cgroup v1 disabled, on this machine's own root shared
# read-only over 9p, so that the guest runs this very build with this
# machine's Python, Node.js and pytest. In the guest (guest.sh): runbox check
# and a look at the cgroups of an execution (guest_checks.py), the probe
# tests/probe/cgroup_selftest.c, and the e2e suite as root. Fails when any of
# them fails, when the guest does not boot, or on timeout.
#
#   run-vm.sh BUILD_DIR WORK_DIR
#
# WORK_DIR keeps Debian's kernel package (fetch-kernel.sh downloads it the
# first time) and receives the initramfs, the scratch disk (removed
# afterwards), the console log and the guest's results. The guest has no
# network device. RBX_VM_ACCEL=kvm|tcg, RBX_VM_TIMEOUT (seconds),
# RBX_VM_PYTEST (pytest's arguments) and RBX_VM_CPUS (the guest's CPUs, 2)
# override the defaults below.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2"
work=$(cd "$2" && pwd)
kernel_dir=$("$here/fetch-kernel.sh" "$work")

for path in "$repo" "$build"; do
    case $path in
    *[[:space:]]*) echo "run-vm: $path: a path with spaces cannot go on the kernel command line" >&2; exit 1 ;;
    esac
done
for program in runbox try-syscall; do
    [ -x "$build/$program" ] || { echo "run-vm: no $build/$program (make build)" >&2; exit 1; }
done

# KVM where it can boot Debian's kernel. A /dev/kvm served by PVM alone
# (kvm_pvm, nested virtualization without hardware support) boots only
# kernels built as PVM guests, and Debian's is not one.
accel=${RBX_VM_ACCEL:-}
if [ -z "$accel" ]; then
    accel=tcg
    if ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
        echo "run-vm: no usable /dev/kvm: emulating the CPU (TCG), much slower" >&2
    elif [ -d /sys/module/kvm_pvm ] && ! [ -d /sys/module/kvm_intel ] && ! [ -d /sys/module/kvm_amd ]; then
        echo "run-vm: /dev/kvm is PVM's, which cannot boot Debian's kernel: emulating the CPU (TCG)" >&2
    else
        accel=kvm
    fi
fi
# What pytest runs in the guest (RBX_VM_PYTEST, shell words): the whole e2e
# suite under KVM. Emulated, about ten times slower, all but the installer
# cases (test_deps.py: 9 minutes of pip there, in executions the rest of the
# suite covers; RBX_VM_PYTEST=tests/e2e runs them too).
if [ "$accel" = kvm ]; then
    accel_args=(-accel kvm -cpu host)
    guest_timeout=${RBX_VM_TIMEOUT:-900}
    boot_timeout=120
    default_pytest="tests/e2e"
else
    accel_args=(-accel tcg,thread=multi -cpu max)
    guest_timeout=${RBX_VM_TIMEOUT:-2400}
    boot_timeout=600
    default_pytest="tests/e2e --ignore=tests/e2e/test_deps.py"
fi
eval "pytest_args=(${RBX_VM_PYTEST:-$default_pytest})"
# The guest's own limit on the e2e suite leaves it time to report and power off.
vm_timeout=$((guest_timeout + 300))

"$here/build-initramfs.sh" "$kernel_dir" "$work/initramfs.cpio"
results=$work/results
rm -rf "$results" "$work/scratch.img"
mkdir -p "$results"
# What the guest is to do, through the directory it shares with us.
printf '%s\n' "${pytest_args[@]}" >"$results/pytest-args"
echo "$accel" >"$results/accel"
truncate -s 16G "$work/scratch.img" # sparse: holds /tmp of the guest
trap 'rm -f "$work/scratch.img"' EXIT

append="console=ttyS0 loglevel=3 panic=-1 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1"
append+=" rbx_guest=$here/guest.sh rbx_repo=$repo rbx_build=$build rbx_guest_timeout=$guest_timeout"
# The guest's kernel modules, on the shared root: a check unloads one and loads it again.
append+=" rbx_modules=$(ls -d "$kernel_dir"/lib/modules/* | head -n 1)"

echo "run-vm: booting $(basename "$kernel_dir") ($accel, timeout ${vm_timeout}s): pytest ${pytest_args[*]}"
start=$(date +%s)
: >"$work/console.log"
timeout -k 10 "$vm_timeout" qemu-system-x86_64 \
    -nodefaults -no-user-config -no-reboot -display none "${accel_args[@]}" \
    -machine q35 -smp "${RBX_VM_CPUS:-2}" -m 4G -nic none \
    -kernel "$(ls "$kernel_dir"/boot/vmlinuz-* | head -n 1)" -initrd "$work/initramfs.cpio" \
    -append "$append" \
    -serial file:"$work/console.log" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$results",mount_tag=results,security_model=none,multidevs=remap \
    -drive file="$work/scratch.img",format=raw,if=virtio,cache=unsafe \
    -device virtio-rng-pci \
    </dev/null &
vm=$!
tail -n +1 -f --pid="$vm" "$work/console.log" &
# A guest that has not reached its second stage by then will not: stop it
# rather than wait for the whole timeout.
while kill -0 "$vm" 2>/dev/null; do
    if ! [ -e "$results/booted" ] && [ $(($(date +%s) - start)) -gt "$boot_timeout" ]; then
        echo "run-vm: the guest did not boot within ${boot_timeout}s" >&2
        kill "$vm"
        break
    fi
    sleep 1
done
qemu_status=0
wait "$vm" || qemu_status=$?
wait
elapsed=$(($(date +%s) - start))

python3 "$here/report.py" "$results" "$qemu_status" "$elapsed"
