#!/bin/sh
# runbox as a container's main process (the image's entrypoint, after tini).
#
# On a cgroup v2 node the container sees its own cgroup as /sys/fs/cgroup
# (a cgroup namespace), and runbox as root puts each execution in
# /sys/fs/cgroup/runbox/exec-*, under the pod's limits. cgroup v2 enables
# controllers (memory, pids, cpu) for child cgroups only in a cgroup that
# holds no processes, and this one holds the container's: so they move to a
# leaf first, /sys/fs/cgroup/supervisor, and runbox finds its base empty.
# Without this runbox still runs, but `runbox check` reports no cgroups:
# no memory, process or CPU limit per execution.
#
# Nothing is done where it does not apply: cgroup v1, a read-only cgroupfs
# (then runbox check says why), or a host's real root cgroup (no cgroup.type).
set -eu

cgroup=/sys/fs/cgroup
if [ "$(stat -fc %T "$cgroup" 2>/dev/null)" = cgroup2fs ] && [ -f "$cgroup/cgroup.type" ] &&
    [ -w "$cgroup/cgroup.procs" ] && mkdir -p "$cgroup/supervisor" 2>/dev/null; then
    # Every process here: this shell and tini, and anything a probe or
    # hook started meanwhile. One that exits first is no matter.
    for pid in $(cat "$cgroup/cgroup.procs"); do
        echo "$pid" >"$cgroup/supervisor/cgroup.procs" 2>/dev/null || true
    done
fi

exec /usr/local/bin/runbox "$@"
