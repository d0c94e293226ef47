#!/usr/bin/python3
"""The hibernation spike (issue 34; docs/hibernation-notes.md): checkpoints a runbox Python
kernel's sandbox with criu, restores it in a fresh cgroup, and asks the restored kernel for x
through its own pipes. Not a test and not the feature: it records what a checkpoint of a kernel
needs today, with the workarounds the notes explain.

Needs root, a criu 4 (`make criu`), and a `runbox serve` built with docs/hibernation-spike.patch
and started with RBX_SPIKE_ROOT_OWNER=1 (see the notes for why). Usage:

  hibernation-spike.py --url http://127.0.0.1:18734 --serve-pid PID [--criu PATH] [--work DIR]
"""
import argparse
import ctypes
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

LIBC = ctypes.CDLL(None, use_errno=True)
SYS_PIDFD_GETFD = 438


def call(url, session, code, timeout=30):
    body = json.dumps({"language": "python", "code": code, "stateful": True,
                       "session_id": session, "timeout": timeout}).encode()
    request = urllib.request.Request(url + "/v1/execute", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout + 10) as answer:
        return json.loads(answer.read())


def children(pid):
    """Of every thread: a kernel's sandbox is cloned by a thread of its own."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(p) for p in f.read().split()]
    return found


def kernel_of(serve_pid, session):
    """The session's kernel: (init, program), found by the marker the cell left in its cwd."""
    for init in children(serve_pid):
        for program in children(init):
            try:
                if os.path.exists(f"/proc/{program}/root/home/user/.spike-{session}"):
                    return init, program
            except OSError:
                pass
    sys.exit(f"no kernel of session {session} under runbox serve {serve_pid}")


def fd_target(pid, fd):
    return os.readlink(f"/proc/{pid}/fd/{fd}")


def mount_of(pid, mountpoint):
    """(mount id, root within its file system, device) of a mount the process sees."""
    for line in open(f"/proc/{pid}/mountinfo"):
        fields = line.split()
        if fields[4] == mountpoint:
            return fields[0], fields[3], fields[2]
    sys.exit(f"{mountpoint} is not a mount of {pid}")


def host_path(sandbox_pid, mountpoint):
    """Where the host sees the file system a sandbox mount shows (a bind of a btrfs subvolume)."""
    _, root, device = mount_of(sandbox_pid, mountpoint)
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        if fields[2] == device and fields[3] == "/":
            return fields[4] + root
    sys.exit(f"the host does not see the file system of {mountpoint}")


def external_file(pid, fd):
    """criu's key of a file a process holds that lives outside its mounts: file[mnt_id:inode]."""
    mnt_id = int(open(f"/proc/{pid}/fdinfo/{fd}").read().split("mnt_id:")[1].split()[0])
    return f"file[{mnt_id:x}:{os.stat(f'/proc/{pid}/fd/{fd}').st_ino:x}]"


def new_cgroup(init, name):
    """A cgroup beside the kernel's own (v1: memory, pids, cpu), its limits copied: the restored
    tree is born in it because criu itself is moved there first."""
    made = []
    for line in open(f"/proc/{init}/cgroup"):
        _, controllers, path = line.strip().split(":", 2)
        limit = {"memory": "memory.limit_in_bytes", "pids": "pids.max",
                 "cpu": "cpu.cfs_quota_us"}.get(controllers)
        if not limit or path == "/":
            continue
        old = f"/sys/fs/cgroup/{controllers}{path}"
        new = os.path.join(os.path.dirname(old), name)
        os.makedirs(new, exist_ok=True)
        with open(os.path.join(new, limit), "w") as f:
            f.write(open(os.path.join(old, limit)).read())
        made.append(new)
    return made


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--serve-pid", type=int, required=True)
    parser.add_argument("--criu", default="/var/lib/runbox/criu/criu")
    parser.add_argument("--work", default="/tmp/runbox-hibernation-spike")
    parser.add_argument("--image-usr", required=True, help="the kernel's image's usr directory")
    parser.add_argument("--restore-option", action="append", default=[],
                        help="one more option for criu restore (to try others)")
    args = parser.parse_args()
    session = f"spike{os.getpid()}"
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    images = os.path.join(work, "images")
    os.makedirs(images)
    os.chmod(work, 0o755)

    # 1. A kernel with state, and (the channel workaround) its driver moved to a socketpair made
    #    inside the sandbox's network namespace: criu cannot dump runbox's own socketpair (it
    #    belongs to the host's network namespace). The old socket stays referenced by the
    #    driver's blocked read, so runbox sees no end of it.
    print(call(args.url, session, f"x = 41\nopen('.spike-{session}', 'w').close()")["success"])
    swap = ("import socket as _s, os as _o, threading as _t, time as _tm\n"
            "_a, _b = _s.socketpair()\n"
            "def _swap():\n    _tm.sleep(0.5); _o.dup2(_b.fileno(), 3)\n"
            "_t.Thread(target=_swap, daemon=True).start()\nprint(_a.fileno())")
    answer = call(args.url, session, swap)
    outside_end = int(answer["output"])
    time.sleep(1)
    init, program = kernel_of(args.serve_pid, session)
    print(f"kernel: init {init}, program {program}, rss "
          f"{open(f'/proc/{program}/status').read().split('VmRSS:')[1].split()[0]} kB")

    # 2. The network helper owns the tap device criu cannot dump: stop it (runbox would start a
    #    new one for the restored namespace).
    for pid in children(args.serve_pid):
        if f" {init} tap0" in open(f"/proc/{pid}/cmdline").read().replace("\0", " "):
            os.kill(pid, 9)
    time.sleep(0.3)

    # 3. What the restore needs: the kernel's pipes, its external /dev/null, its mounts' sources,
    #    and a root like the one it had (runbox would build a fresh one).
    pipes = {fd: fd_target(program, fd) for fd in (1, 2)}
    status_pipe = [fd_target(init, fd) for fd in os.listdir(f"/proc/{init}/fd")
                   if fd not in ("0", "1", "2") and fd_target(init, fd).startswith("pipe:")]
    null_key = external_file(program, 0)
    sources = {"home": host_path(program, "/home/user"), "tmp": host_path(program, "/tmp"),
               "usr": args.image_usr}
    newroot = os.path.join(work, "root")
    os.makedirs(newroot)
    subprocess.run(f"tar --one-file-system -C /proc/{program}/root -cf - . | tar -C {newroot} -xf -",
                   shell=True, check=True)
    ext = os.path.join(work, "ext")
    for name, source in sources.items():
        os.makedirs(os.path.join(ext, name))
        subprocess.run(["mount", "--bind", source, os.path.join(ext, name)], check=True)
    dev = os.path.join(ext, "dev")
    os.makedirs(dev)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=755", "runbox-dev", dev], check=True)
    for name, major, minor in (("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8),
                               ("urandom", 1, 9), ("tty", 5, 0)):
        os.mknod(os.path.join(dev, name), 0o20666, os.makedev(major, minor))
        os.chmod(os.path.join(dev, name), 0o666)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, os.path.join(dev, name))
    os.mkdir(os.path.join(dev, "shm"))
    cgroups = new_cgroup(init, f"spike-restore-{os.getpid()}")

    new_init, ok = None, False
    try:
        rules_before = subprocess.run(["nsenter", "-t", str(init), "-n", "nft", "list", "ruleset"],
                                      capture_output=True, text=True).stdout

        # 4. The checkpoint: the tree is killed once it is on disk.
        dump = [args.criu, "dump", "-t", str(init), "-D", images, "-o", "dump.log",
                "--external", "mnt[/home/user]:home", "--external", "mnt[/tmp]:tmp",
                "--external", "mnt[/usr]:usr", "--external", "mnt[/dev]:dev",
                "--external", null_key, "--ext-unix-sk"]
        print("dump:", " ".join(dump))
        started = time.monotonic()
        done = subprocess.run(dump)
        took = time.monotonic() - started
        size = sum(os.path.getsize(os.path.join(images, f)) for f in os.listdir(images)
                   if f.endswith(".img"))
        print(f"dump: exit {done.returncode} in {took * 1000:.0f} ms, images {size / 1e6:.2f} MB")
        if done.returncode:
            sys.exit(f"see {images}/dump.log")

        # 5. The network namespace's ping_group_range is "1 0" (disabled), and gid 1 is not mapped in
        #    the sandbox's user namespace: written back inside it, the kernel refuses it (EINVAL).
        #    "0 0" is as short and writable (it lets the sandbox's root group ping).
        netns = [f for f in os.listdir(images) if f.startswith("netns-")][0]
        data = open(os.path.join(images, netns), "rb").read()
        assert data.count(b"\x1a\x041\t0\n") == 1
        open(os.path.join(images, netns), "wb").write(data.replace(b"\x1a\x041\t0\n", b"\x1a\x040\t0\n"))

        # 6. The restore, as a sibling of criu (the restored init's parent-death signal then follows
        #    this process, not criu), in a new cgroup, the kernel's pipes given back as new ones.
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        st_r, st_w = os.pipe()
        null = os.open("/dev/null", os.O_RDWR)
        inherit = {out_w: pipes[1], err_w: pipes[2], null: null_key}
        if status_pipe:
            inherit[st_w] = status_pipe[0]
        restore = [args.criu, "restore", "-D", images, "-d", "-S", "-o", "restore.log",
                   "--pidfile", os.path.join(images, "restored.pid"), "--root", newroot,
                   "--manage-cgroups=ignore"] + args.restore_option
        for name in ("home", "tmp", "usr", "dev"):
            restore += ["--external", f"mnt[{name}]:{os.path.join(ext, name)}"]
        for fd, key in inherit.items():
            restore += ["--inherit-fd", f"fd[{fd}]:{key}"]

        def into_cgroups():
            for path in cgroups:
                with open(os.path.join(path, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))

        print("restore:", " ".join(restore))
        started = time.monotonic()
        done = subprocess.run(restore, pass_fds=list(inherit), preexec_fn=into_cgroups)
        took = time.monotonic() - started
        print(f"restore: exit {done.returncode} in {took * 1000:.0f} ms")
        if done.returncode:
            sys.exit(f"see {images}/restore.log")
        for fd in inherit:
            os.close(fd)
        new_init = int(open(os.path.join(images, "restored.pid")).read())
        new_program = children(new_init)[0]

        # 7. x through the restored kernel's own channel and stdout.
        pidfd = os.pidfd_open(new_program)
        channel_fd = LIBC.syscall(SYS_PIDFD_GETFD, pidfd, outside_end, 0)
        if channel_fd < 0:
            sys.exit(f"pidfd_getfd: {os.strerror(ctypes.get_errno())}")
        channel = socket.socket(fileno=channel_fd)
        started = time.monotonic()
        channel.sendall(b'{"id": 7, "code": "print(x)"}\n')
        events = b""
        while b'"done"' not in events:
            events += channel.recv(65536)
        out = b""
        while b"\n" not in out.split(b"\x1e")[-1] and select.select([out_r], [], [], 2)[0]:
            out += os.read(out_r, 65536)
        print(f"first call after restore: {(time.monotonic() - started) * 1000:.1f} ms")
        print("events:", events.decode().strip().replace("\n", " "))
        print("stdout:", repr(out))
        status = open(f"/proc/{new_program}/status").read()
        print("program:", "; ".join(line.replace("\t", " ") for line in status.splitlines()
                                    if line.split(":")[0] in ("Uid", "NSpid", "CapEff", "NoNewPrivs",
                                                              "Seccomp", "Seccomp_filters")))
        print("uid_map:", " ".join(open(f"/proc/{new_program}/uid_map").read().split()))
        print("cgroups of the restored init:",
              " ".join(open(f"/proc/{new_init}/cgroup").read().split()))
        rules_after = subprocess.run(["nsenter", "-t", str(new_init), "-n", "nft", "list", "ruleset"],
                                     capture_output=True, text=True).stdout
        print(f"egress rules (nft list ruleset in the network namespace): {len(rules_before.splitlines())}"
              f" lines before, {len(rules_after.splitlines())} after, "
              f"{'the same' if rules_before == rules_after else 'DIFFERENT'}")
        inside = subprocess.run(["nsenter", "-t", str(new_program), "-C", "cat",
                                 f"/proc/{new_program}/cgroup"], capture_output=True, text=True).stdout
        print("cgroups as the restored program sees them:", " ".join(inside.split()))
        for path in cgroups:
            print(f"in {path}:", " ".join(open(os.path.join(path, "cgroup.procs")).read().split()))
        print("mounts the restored program sees:", len(open(f"/proc/{new_program}/mountinfo").readlines()))
        ok = out.endswith(b"41\n")

    # 8. Clean up, whatever happened: the restored tree, the cgroups, the bind mounts.
    finally:
        if new_init:
            os.kill(new_init, 9)
            time.sleep(0.5)
        for path in cgroups:
            for below, _, _ in sorted(os.walk(path), reverse=True):  # criu may make some
                os.rmdir(below)
        for name in ("home", "tmp", "usr", "dev"):
            subprocess.run(["umount", os.path.join(ext, name)])
    print("x is still 41" if ok else "x is NOT 41")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
