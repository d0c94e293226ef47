#!/bin/bash
# Builds the cgroup v2 VM's initramfs (an uncompressed cpio): busybox-static,
# tests/cgroup2/init, and the kernel modules the guest needs with everything
# they depend on, in loading order. The modules come from the extracted
# Debian kernel package; none is loaded later (the host's root, which the
# guest runs on, has no modules for this kernel).
#
#   build-initramfs.sh KERNEL_ROOT OUTPUT
set -euo pipefail

# virtio-pci and virtio-blk: the devices; 9p: the host's root and the results
# directory; ext4 (+ crc32c for its checksums) and loop: runbox's session
# disks and the scratch disk; tun: slirp4netns; veth: the e2e suite's
# stand-in for an outside host; virtio-rng: entropy for getrandom at boot;
# btrfs: the sessions' storage; overlay: /usr in the prepared namespace;
# nf_tables, nft_reject_inet and nft_objref: the egress policy's rules in
# each sandbox. unix_diag, tcp_diag, udp_diag (and netlink_diag, af_packet_diag,
# which criu asks for too): the socket diagnostics criu reads a tree's
# sockets with when hibernation checkpoints a kernel.
MODULES="virtio_pci virtio_blk virtio_rng 9pnet_virtio 9p crc32c_generic ext4 loop tun veth btrfs overlay
         nf_tables nft_reject_inet nft_objref unix_diag tcp_diag udp_diag netlink_diag af_packet_diag nf_conntrack_netlink"

kernel_root=$1
output=$2
here=$(cd "$(dirname "$0")" && pwd)
modules_dir=$(echo "$kernel_root"/lib/modules/*)
[ -f "$modules_dir/modules.builtin" ] || { echo "no kernel modules in $kernel_root" >&2; exit 1; }

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/bin" "$staging/modules"
cp /bin/busybox "$staging/bin/busybox"
case $(ldd /bin/busybox 2>&1) in
*"not a dynamic"*) ;;
*) echo "/bin/busybox is not static: install busybox-static" >&2; exit 1 ;;
esac
ln -s busybox "$staging/bin/sh"
cp "$here/init" "$staging/init"
chmod 755 "$staging/init"

# Module name (dashes as underscores) -> file, for .ko and compressed .ko.xz.
declare -A file_of
while IFS= read -r path; do
    name=${path##*/}
    name=${name%.xz}
    name=${name%.ko}
    file_of[${name//-/_}]=$path
done < <(find "$modules_dir/kernel" -name '*.ko' -o -name '*.ko.xz')

declare -A added
order=()
add_module() {
    local name=${1//-/_}
    [ -n "${added[$name]:-}" ] && return
    added[$name]=1
    local path=${file_of[$name]:-}
    if [ -z "$path" ]; then
        grep -q "/${name}.ko" "$modules_dir/modules.builtin" ||
            grep -q "/${name//_/-}.ko" "$modules_dir/modules.builtin" ||
            { echo "module $name: neither a module nor built into this kernel" >&2; exit 1; }
        return
    fi
    case $path in
    *.xz) xz -dc "$path" >"$staging/modules/$name.ko" ;;
    *) cp "$path" "$staging/modules/$name.ko" ;;
    esac
    # .modinfo holds NUL-separated "key=value" strings; depends= lists the
    # modules this one needs loaded first.
    local dep
    for dep in $(tr '\0' '\n' <"$staging/modules/$name.ko" | sed -n 's/^depends=//p' | tr ',' ' '); do
        add_module "$dep"
    done
    order+=("$name")
}
for module in $MODULES; do
    add_module "$module"
done
printf '%s\n' "${order[@]}" >"$staging/modules.order"

(cd "$staging" && find . -print0 | LC_ALL=C sort -z | cpio --quiet -o -0 -H newc -R 0:0) >"$output.tmp"
mv "$output.tmp" "$output"
echo "initramfs: $output ($(du -k "$output" | cut -f1) KiB; modules: ${order[*]})"
