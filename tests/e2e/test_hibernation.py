"""Hibernation (issue 34) through the CLI: a kernel idle past --kernel-idle is checkpointed with
criu into its session's directory and its processes end; the session's next call of that
language restores it, with its variables, imports, working directory and open files, in a
sandbox confined as a new one. A kernel that cannot be checkpointed, or a checkpoint that was
changed, swapped or damaged, gives a fresh kernel and kernel_restarted: never a wrong state.

The CLI's calls go to a daemon, which leaves once it has no live kernel: each wake here is in
another runbox process than the checkpoint."""
import json
import os
import random
import re
import shutil
import subprocess
import time

import pytest

from conftest import (HIBERNATE_SOON, RUNBOX, daemons, hibernation_here, kernel_entry,
                      processes_matching, stop_daemons, unique_marker, wait_hibernated)

IDLE = HIBERNATE_SOON


@pytest.fixture(scope="module")
def criu_works(tmp_path_factory):
    works, why_not = hibernation_here(tmp_path_factory)
    if not works:
        pytest.skip(why_not)


@pytest.fixture
def hb(runbox, criu_works):
    return runbox


def stateful(runbox, language, code, session, *args, env=None):
    return runbox.run(language, code, "--stateful", "--session", session, *args,
                      env={**IDLE, **(env or {})}, timeout=180)


def checkpoint_dir(runbox, session, language):
    return os.path.join(runbox.state_dir, "sessions", session, f"hibernated-{language}")


def woke(result):
    assert result["kernel_restored"] is True, result
    assert result["kernel_restarted"] is False, result
    assert isinstance(result["restore_ms"], int) and result["restore_ms"] >= 0, result
    return result


@pytest.mark.parametrize("network", ["--no-network", "--network"])
def test_a_python_kernel_wakes_with_its_variables_files_and_directory(hb, network):
    marker = unique_marker()
    first = stateful(hb, "python", "import os, json\nx = 41\nos.makedirs('sub', exist_ok=True)\n"
                     "os.chdir('sub')\nf = open('/tmp/kept', 'w')\nf.write('in /tmp')\nf.flush()\n"
                     f"name = {marker!r}", "s", network)
    assert first["success"] and first["kernel_restored"] is False, first
    entry = wait_hibernated(hb, "s", "python")
    assert entry["checkpoint_bytes"] > 1 << 20 and entry["memory_bytes"] == 0, entry
    assert entry["checkpoint_ms"] > 0, entry  # how long it took, which the README tells
    assert processes_matching(marker) == []  # nothing of it runs while it sleeps
    deadline = time.time() + 30
    while daemons(hb.state_dir) and time.time() < deadline:  # its runbox left too
        time.sleep(0.2)
    assert daemons(hb.state_dir) == []
    back = woke(stateful(hb, "python", "x += 1\nprint(x, os.getcwd(), open('/tmp/kept').read(),"
                         " f.closed, name == " + repr(marker) + ")", "s", network))
    assert back["output"] == "42 /home/user/sub in /tmp False True\n", back
    assert back["execution_count"] == 2
    assert not os.path.exists(checkpoint_dir(hb, "s", "python"))  # it served, and went
    again = stateful(hb, "python", "print(x)", "s", network)
    assert again["output"] == "42\n" and again["kernel_restored"] is False, again


def test_javascript_and_bash_kernels_wake_with_their_state(hb):
    stateful(hb, "javascript", "var v = 40; globalThis.w = 2; const m = new Map([[1, 'one']]);",
             "s", "--no-network")
    stateful(hb, "bash", "export V=7; f() { echo \"fn $1\"; }; cd /tmp", "s", "--no-network")
    wait_hibernated(hb, "s", "javascript")
    wait_hibernated(hb, "s", "bash")
    js = woke(stateful(hb, "javascript", "console.log(v + w, m.get(1))", "s", "--no-network"))
    assert js["output"] == "42 one\n" and js["execution_count"] == 2, js
    sh = woke(stateful(hb, "bash", "echo $V; f x; pwd", "s", "--no-network"))
    assert sh["output"] == "7\nfn x\n/tmp\n" and sh["execution_count"] == 2, sh


def test_a_kernel_sleeps_and_wakes_again_and_again(hb):
    stateful(hb, "python", "n = 0", "s", "--no-network")
    for expected in (1, 2, 3):
        wait_hibernated(hb, "s", "python")
        back = woke(stateful(hb, "python", "n += 1\nprint(n)", "s", "--no-network"))
        assert back["output"] == f"{expected}\n", back


# What a sandbox's program can see and do of its confinement: the same in a restored kernel
# as in a fresh one, down to the cgroups it sees (its own as the root of each).
PROBE = r"""
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def attempt(f):
    try:
        r = f()
        return 'ok' if r in (None, 0) or r is True else r
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)
def call(name, *args):
    r = getattr(libc, name)(*args)
    return 'ok' if r == 0 else errno.errorcode.get(ctypes.get_errno(), r)
status = {l.split(':')[0]: l.split(':', 1)[1].strip() for l in open('/proc/self/status')
          if l.split(':')[0] in ('Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd',
                                 'CapAmb', 'NoNewPrivs', 'Seccomp', 'Seccomp_filters')}
seen = {
    'status': status,
    'uid_map': open('/proc/self/uid_map').read().split(),
    'hostname': socket.gethostname(),
    'unshare_user': call('unshare', 0x10000000),
    'mount_tmpfs': call('mount', b'none', b'/mnt', b'tmpfs', 0, None),
    'mount_cgroup': call('mount', b'none', b'/mnt', b'cgroup2', 0, None),
    'write_usr': attempt(lambda: open('/usr/runbox-probe', 'w')),
    'init_environ': attempt(lambda: open('/proc/1/environ').read()),
    'kill_init': attempt(lambda: os.kill(1, 9)),
    'ping_socket': attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM,
                                                 socket.IPPROTO_ICMP)),
    'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:2],
    'mounts': sorted(l.split()[4] for l in open('/proc/self/mountinfo')),
    'limits': open('/proc/self/limits').read(),
    'cgroup': open('/proc/self/cgroup').read(),
    'fds': sorted(os.listdir('/proc/self/fd')),
}
print(json.dumps(seen, sort_keys=True))
"""


@pytest.mark.parametrize("network", ["--no-network", "--network"])
def test_a_restored_kernel_is_confined_as_a_fresh_one(hb, network):
    stateful(hb, "python", "import json", "fresh", network, env={"RUNBOX_KERNEL_IDLE": "600"})
    fresh = json.loads(stateful(hb, "python", PROBE, "fresh", network,
                                env={"RUNBOX_KERNEL_IDLE": "600"})["output"])
    stateful(hb, "python", "import json", "woken", network)
    wait_hibernated(hb, "woken", "python")
    restored = json.loads(woke(stateful(hb, "python", PROBE, "woken", network))["output"])
    assert restored == fresh
    assert {line.split(":", 2)[2] for line in restored["cgroup"].split()} == {"/"}, restored
    assert fresh["status"]["CapEff"] == "0000000000000000" and fresh["status"]["NoNewPrivs"] == "1"
    assert fresh["unshare_user"] == "EPERM" and fresh["kill_init"] == "EPERM"
    assert fresh["mount_cgroup"] == "EPERM", fresh
    hb.cli("sessions", "rm", "fresh", "--wait", "30", env={"RUNBOX_KERNEL_IDLE": "600"})


def test_a_restored_kernel_is_held_to_the_egress_policy(hb, tmp_path):
    """The policy's rules and resolver are made anew for the restored sandbox: an address the
    policy refuses is refused after the wake as before the sleep, and counted."""
    # The socket closed after: a kernel holding an internet socket is not checkpointed (criu
    # 4.1 asks the kernel for an option only unix sockets have now).
    code = ("import socket\ns = socket.socket()\ns.settimeout(3)\n"
            "try:\n    s.connect(('169.254.169.254', 80))\n    print('connected')\n"
            "except OSError as e:\n    print('refused')\nfinally:\n    s.close()\n")
    before = stateful(hb, "python", code, "e", "--network")
    assert before["output"] == "refused\n" and before["egress_denied"] >= 1, before
    wait_hibernated(hb, "e", "python")
    after = woke(stateful(hb, "python", code, "e", "--network"))
    assert after["output"] == "refused\n" and after["egress_denied"] >= 1, after


def test_a_kernel_holding_a_connection_is_stopped_not_hibernated(hb):
    """criu refuses a tree with an established TCP connection: that kernel is stopped as
    before hibernation existed, and its next call says its state is gone."""
    stateful(hb, "python", "import socket\nserver = socket.create_server(('127.0.0.1', 0))\n"
             "client = socket.create_connection(server.getsockname())\n"
             "peer, _ = server.accept()\nx = 1", "c", "--no-network")
    deadline = time.time() + 40
    while kernel_entry(hb, "c", "python") is not None and time.time() < deadline:
        assert (kernel_entry(hb, "c", "python") or {}).get("state") != "hibernated"
        time.sleep(0.25)
    assert kernel_entry(hb, "c", "python") is None
    after = stateful(hb, "python", "print('x' in dir())", "c", "--no-network")
    assert after["output"] == "False\n" and after["kernel_restarted"] is True, after
    assert after["kernel_restored"] is False


DISK_CAP = 1 << 30  # each session's (the engine's default)


def allocate(runbox, session, nbytes, keep=False):
    """Whether the session's files can take nbytes more (a one-off in it allocates them)."""
    code = (f"import os\nfd = os.open('big', os.O_CREAT | os.O_WRONLY)\ntry:\n"
            f"    os.posix_fallocate(fd, 0, {nbytes})\n    print('fits')\n"
            f"except OSError as e:\n    print(os.strerror(e.errno))\n"
            # unlinked and committed: a quota group counts freed blocks until its commit
            + ("" if keep else "os.unlink('big')\nos.sync()\n"))
    ran = runbox.run("python", code, "--session", session, "--no-network", env=IDLE)
    assert ran["exit_code"] == 0, ran
    return ran["output"] == "fits\n"


def test_a_checkpoint_takes_its_room_in_the_sessions_disk_cap(hb):
    """The images count against the session's disk cap: while the kernel sleeps, the session's
    files can take the cap less its checkpoint, and the whole cap again once it woke."""
    stateful(hb, "python", "x = 42", "capped", "--no-network")
    taken = wait_hibernated(hb, "capped", "python")["checkpoint_bytes"]
    assert taken > 1 << 20
    slack = taken // 3  # below the checkpoint's size: each side of the line is a third off it
    assert not allocate(hb, "capped", DISK_CAP - taken + slack)
    assert allocate(hb, "capped", DISK_CAP - taken - slack)
    assert woke(stateful(hb, "python", "print(x)", "capped", "--no-network",
                         env={"RUNBOX_KERNEL_IDLE": "600"}))["output"] == "42\n"
    assert allocate(hb, "capped", DISK_CAP - taken + slack)


def storage_kind(runbox):
    """The filesystem the runbox's sessions are on (btrfs for its own capped storage)."""
    return subprocess.run(["stat", "-f", "-c", "%T", os.path.join(runbox.state_dir, "sessions")],
                          capture_output=True, text=True).stdout.strip()


def test_a_checkpoint_is_compressed_by_the_storage(hb):
    """On btrfs storage a kernel's images are written compressed (zstd): what decides how many
    sessions can sleep on a node's disk. Nine tenths of the memory image's blocks at least must
    be in encoded extents (bench/hibernation.py measures what they take): btrfs keeps a chunk
    that compression would not shrink as it is, and a process's memory holds some (its random
    seeds, hashes), so an image of all encoded extents is usual but not certain (the CI run at
    542f89c had one extent that was not, the first time)."""
    stateful(hb, "python", "x = 42", "squeezed", "--no-network")
    kind = storage_kind(hb)
    if kind != "btrfs":
        pytest.skip(f"the sessions' storage is {kind}, not btrfs: nothing compresses there")
    wait_hibernated(hb, "squeezed", "python")
    images = images_of(hb, "squeezed")
    assert os.getxattr(images, "btrfs.compression") == b"zstd"
    os.sync()
    pages = max((n for n in os.listdir(images) if n.startswith("pages-")),
                key=lambda n: os.path.getsize(os.path.join(images, n)))
    path = os.path.join(images, pages)
    extents = subprocess.run(["filefrag", "-v", path], capture_output=True, text=True,
                             check=True).stdout
    rows = [line.split(":") for line in extents.splitlines() if re.match(r"\s*\d+:", line)]
    blocks = sum(int(row[3]) for row in rows)
    encoded = sum(int(row[3]) for row in rows if "encoded" in row[-1])
    assert rows and encoded >= 0.9 * blocks, extents


def test_a_session_with_no_room_for_a_checkpoint_gets_its_kernel_stopped(hb):
    """A session whose files fill its disk cap has no room for its kernel's images: the
    kernel is stopped as before hibernation, and its next call says its state is gone."""
    assert allocate(hb, "full", DISK_CAP - (2 << 20), keep=True)
    stateful(hb, "python", "x = 1", "full", "--no-network")
    deadline = time.time() + 40
    while kernel_entry(hb, "full", "python") is not None and time.time() < deadline:
        assert (kernel_entry(hb, "full", "python") or {}).get("state") != "hibernated"
        time.sleep(0.25)
    assert kernel_entry(hb, "full", "python") is None
    assert not os.path.exists(checkpoint_dir(hb, "full", "python"))
    after = stateful(hb, "python", "print('x' in dir())", "full", "--no-network")
    assert after["output"] == "False\n" and after["kernel_restarted"] is True, after


def images_of(runbox, session):
    return os.path.join(checkpoint_dir(runbox, session, "python"), "images")


def damage_truncate(runbox, session):
    pages = [n for n in os.listdir(images_of(runbox, session)) if n.startswith("pages-")]
    biggest = max(pages, key=lambda n: os.path.getsize(os.path.join(images_of(runbox, session), n)))
    with open(os.path.join(images_of(runbox, session), biggest), "r+b") as f:
        f.truncate(os.path.getsize(f.name) // 2)


def damage_flip(runbox, session):
    path = os.path.join(images_of(runbox, session), "core-1.img")
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xff
    open(path, "wb").write(bytes(data))


def damage_record(runbox, session):
    path = os.path.join(checkpoint_dir(runbox, session, "python"), "checkpoint.json")
    record = json.load(open(path))
    record["started_with"]["image"] = "another"
    json.dump(record, open(path, "w"))


def damage_plant_link(runbox, session):
    """An image replaced by a link to a canary file: never followed."""
    canary = os.path.join(runbox.state_dir, "canary")
    shutil.copy(os.path.join(images_of(runbox, session), "core-1.img"), canary)
    os.unlink(os.path.join(images_of(runbox, session), "core-1.img"))
    os.symlink(canary, os.path.join(images_of(runbox, session), "core-1.img"))


@pytest.mark.parametrize("damage", [damage_truncate, damage_flip, damage_record,
                                    damage_plant_link])
def test_a_changed_checkpoint_gives_a_fresh_kernel_never_a_wrong_one(hb, damage):
    stateful(hb, "python", "x = 1", "d", "--no-network")
    wait_hibernated(hb, "d", "python")
    damage(hb, "d")
    started = time.time()
    after = stateful(hb, "python", "print('x' in dir())", "d", "--no-network")
    assert time.time() - started < 60
    assert after["output"] == "False\n", after
    assert after["kernel_restarted"] is True and after["kernel_restored"] is False, after
    assert not os.path.exists(checkpoint_dir(hb, "d", "python"))


def test_a_checkpoint_swapped_between_sessions_is_refused(hb):
    stateful(hb, "python", "secret = 'of a'", "a", "--no-network")
    stateful(hb, "python", "secret = 'of b'", "b", "--no-network")
    wait_hibernated(hb, "a", "python")
    wait_hibernated(hb, "b", "python")
    shutil.rmtree(checkpoint_dir(hb, "b", "python"))
    shutil.copytree(checkpoint_dir(hb, "a", "python"), checkpoint_dir(hb, "b", "python"),
                    symlinks=True)
    b = stateful(hb, "python", "print(globals().get('secret'))", "b", "--no-network")
    assert b["output"] == "None\n" and b["kernel_restarted"] is True, b
    a = woke(stateful(hb, "python", "print(secret)", "a", "--no-network"))
    assert a["output"] == "of a\n"


def test_a_call_asking_otherwise_gets_a_fresh_kernel(hb):
    """A checkpoint is of a kernel started with an image, requirements and network: a
    call that asks for others gets a new kernel, as a live kernel's would."""
    stateful(hb, "python", "x = 1", "o", "--no-network")
    wait_hibernated(hb, "o", "python")
    other = stateful(hb, "python", "print('x' in dir())", "o", "--network")
    assert other["output"] == "False\n" and other["kernel_restarted"] is True, other


def test_calls_that_meet_a_checkpoint_wait_and_lose_nothing(hb):
    """Calls at random moments around the idle time: some land while their kernel is being
    checkpointed or restored. Each waits for the session and finds the count it left."""
    stateful(hb, "python", "n = 0", "r", "--no-network")
    rng = random.Random(34)
    woken = 0
    for expected in range(1, 13):
        time.sleep(rng.uniform(0.6, 2.2))
        result = stateful(hb, "python", "n += 1\nprint(n)", "r", "--no-network")
        assert result["output"] == f"{expected}\n" and result["kernel_restarted"] is False, result
        woken += result["kernel_restored"]
    assert woken >= 1  # the calls did meet hibernated kernels


def test_removing_or_restarting_a_session_forgets_its_checkpoint(hb):
    stateful(hb, "python", "x = 1", "gone", "--no-network")
    stateful(hb, "python", "x = 1", "reset", "--no-network")
    wait_hibernated(hb, "gone", "python")
    wait_hibernated(hb, "reset", "python")
    assert hb.cli("sessions", "restart", "reset", env=IDLE).returncode == 0
    assert not os.path.exists(checkpoint_dir(hb, "reset", "python"))
    fresh = stateful(hb, "python", "print('x' in dir())", "reset", "--no-network")
    assert fresh["output"] == "False\n" and fresh["kernel_restored"] is False, fresh
    assert fresh["kernel_restarted"] is False  # it was asked for
    assert hb.cli("sessions", "rm", "gone", "--wait", "30", env=IDLE).returncode == 0
    assert not os.path.exists(os.path.join(hb.state_dir, "sessions", "gone"))


def test_hibernation_can_be_turned_off(hb):
    env = {"RUNBOX_HIBERNATE": "off"}
    stateful(hb, "python", "x = 1", "off", "--no-network", env=env)
    deadline = time.time() + 40
    while kernel_entry(hb, "off", "python") is not None and time.time() < deadline:
        time.sleep(0.25)
    assert kernel_entry(hb, "off", "python") is None
    after = stateful(hb, "python", "print('x' in dir())", "off", "--no-network", env=env)
    assert after["output"] == "False\n" and after["kernel_restarted"] is True, after


def test_a_server_that_stops_hibernates_its_kernels_and_the_next_wakes_them(hb, tmp_path):
    env = hb.env({"RUNBOX_POOL": "0"})

    def serve():
        proc = subprocess.Popen([RUNBOX, "serve", "--listen", "127.0.0.1:0"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = json.loads(proc.stderr.readline())
        return proc, first["listen"]

    def post(where, body):
        import urllib.request
        request = urllib.request.Request(f"http://{where}/v1/execute", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())

    proc, where = serve()
    try:
        for language, code in (("python", "x = 41"), ("javascript", "var v = 41")):
            assert post(where, {"language": language, "code": code, "stateful": True,
                                "session_id": "srv"})["success"]
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0
    assert kernel_entry(hb, "srv", "python")["state"] == "hibernated"
    assert kernel_entry(hb, "srv", "javascript")["state"] == "hibernated"
    proc, where = serve()
    try:
        py = woke(post(where, {"language": "python", "code": "print(x + 1)", "stateful": True,
                               "session_id": "srv"}))
        js = woke(post(where, {"language": "javascript", "code": "console.log(v + 1)",
                               "stateful": True, "session_id": "srv"}))
        assert py["output"] == "42\n" and js["output"] == "42\n"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_the_kernel_cap_hibernates_the_least_recently_used(hb):
    env = {"RUNBOX_MAX_KERNELS": "1", "RUNBOX_KERNEL_IDLE": "600"}
    stateful(hb, "python", "v = 1", "first", "--no-network", env=env)
    stateful(hb, "python", "v = 2", "second", "--no-network", env=env)  # the first makes room
    assert kernel_entry(hb, "first", "python")["state"] == "hibernated"
    back = woke(stateful(hb, "python", "print(v)", "first", "--no-network", env=env))
    assert back["output"] == "1\n"
    assert kernel_entry(hb, "second", "python")["state"] == "hibernated"  # its turn


def test_the_kernel_cap_passes_over_a_kernel_whose_session_is_in_use(hb):
    """The least recently used kernel's session is busy (a one-off in it holds the session, as
    a call on its way to that kernel does): making room must take the next kernel, not stop the
    first with its state; with two clients a node's answers were lost so (bench, 10,000
    sessions)."""
    env = {"RUNBOX_MAX_KERNELS": "2", "RUNBOX_KERNEL_IDLE": "600"}
    stateful(hb, "python", "v = 'a'", "a", "--no-network", env=env)
    stateful(hb, "python", "v = 'c'", "c", "--no-network", env=env)  # "a" is the oldest now
    started = os.path.join(hb.state_dir, "sessions", "a", "work", "started")
    busy = hb.popen("run", "bash", "-c", "touch started; sleep 4", "--session", "a",
                    "--no-network", env={**IDLE, **env})
    try:
        deadline = time.time() + 60
        while not os.path.exists(started) and time.time() < deadline:
            time.sleep(0.05)
        assert os.path.exists(started), busy.stderr.read() if busy.poll() is not None else ""
        stateful(hb, "python", "v = 'b'", "b", "--no-network", env=env)  # needs room
        assert kernel_entry(hb, "c", "python")["state"] == "hibernated"
    finally:
        busy.wait(60)
    assert busy.returncode == 0, busy.stderr.read()
    kept = stateful(hb, "python", "print(v)", "a", "--no-network", env=env)
    assert kept["output"] == "a\n" and kept["kernel_restarted"] is False, kept
    assert kept["kernel_restored"] is False, kept  # it never slept


def test_memory_pressure_hibernates_idle_kernels_least_recently_used_first(hb):
    """--hibernate-below: while the host's available memory is below the floor (here always:
    64 TiB), idle kernels hibernate one a second, the least recently used first, though their
    idle time (600 s) is far off; each wakes with its state."""
    env = {"RUNBOX_KERNEL_IDLE": "600", "RUNBOX_HIBERNATE_BELOW": "64T"}
    stateful(hb, "python", "v = 'older'", "older", "--no-network", env=env)
    stateful(hb, "python", "v = 'newer'", "newer", "--no-network", env=env)
    slept = {}
    deadline = time.time() + 40
    while len(slept) < 2 and time.time() < deadline:
        for session in ("older", "newer"):
            entry = kernel_entry(hb, session, "python")
            if session not in slept and entry and entry["state"] == "hibernated":
                slept[session] = time.monotonic()
        time.sleep(0.05)
    assert set(slept) == {"older", "newer"}, slept
    assert slept["older"] < slept["newer"], slept
    back = woke(stateful(hb, "python", "print(v)", "older", "--no-network", env=env))
    assert back["output"] == "older\n"


def test_without_memory_pressure_an_idle_kernel_stays_live(hb):
    """The same kernels with the floor at 0 (never) stay live until their idle time."""
    env = {"RUNBOX_KERNEL_IDLE": "600", "RUNBOX_HIBERNATE_BELOW": "0"}
    stateful(hb, "python", "v = 1", "calm", "--no-network", env=env)
    time.sleep(7)  # more than a reaper's tick (5 s) and the pressure's second
    assert kernel_entry(hb, "calm", "python")["state"] == "idle"
    hb.cli("sessions", "rm", "calm", "--wait", "30", env=env)


@pytest.mark.parametrize("value", ["lots", "-1", "1X", "", "2GG", "99999999999999999999T"])
def test_a_bad_memory_floor_is_a_usage_error(hb, value):
    proc = hb.cli("--hibernate-below", value, "run", "python", "-c", "1")
    assert proc.returncode == 2, proc
    assert b"--hibernate-below needs the host's available memory" in proc.stderr, proc.stderr


@pytest.fixture
def host_canary(tmp_path):
    """A host directory outside every sandbox, with a file of a size a session can match."""
    canary = tmp_path / f"canary-{unique_marker()}"
    canary.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(canary, 0o755)
    (canary / "secret").write_text("HOST CANARY\n")  # 12 bytes
    os.chmod(canary / "secret", 0o644)
    return canary


def test_a_file_a_kernel_holds_swapped_for_a_link_to_the_host_is_not_reopened(hb, host_canary):
    """While the kernel sleeps, another execution of its session replaces the file the kernel
    holds open with a link to a host file of the same size and mode: the restore must never
    open the host's file for it (its state is refused, or the link leads inside the sandbox)."""
    stateful(hb, "python", "import os\nopen('kept.txt', 'w').write('session    \\n')\n"
             "os.chmod('kept.txt', 0o644)\nf = open('kept.txt')", "swap", "--no-network")
    wait_hibernated(hb, "swap", "python")
    target = str(host_canary / "secret")
    planted = hb.run("bash", f"ln -sfn {target} kept.txt && ls -l kept.txt", "--session", "swap",
                     "--no-network", env=IDLE)
    assert planted["exit_code"] == 0, planted
    after = stateful(hb, "python", "try:\n    f.seek(0)\n    print(repr(f.read()))\n"
                     "except NameError:\n    print('fresh')", "swap", "--no-network")
    assert "HOST CANARY" not in after["output"], after
    assert after["output"] in ("fresh\n", "'session    \\n'\n") or after["kernel_restarted"], after


def test_a_working_directory_swapped_for_a_link_to_the_host_is_not_entered(hb, host_canary):
    """The same with the kernel's working directory: replaced by a link to a host directory,
    the restored kernel must not find itself in it."""
    stateful(hb, "python", "import os\nos.makedirs('place', exist_ok=True)\nos.chdir('place')",
             "cwd", "--no-network")
    wait_hibernated(hb, "cwd", "python")
    planted = hb.run("bash", f"mv place place.old && ln -sfn {host_canary} place",
                     "--session", "cwd", "--no-network", env=IDLE)
    assert planted["exit_code"] == 0, planted
    after = stateful(hb, "python", "import os\ntry:\n    print(sorted(os.listdir('.')))\n"
                     "except OSError as e:\n    print('error', e)", "cwd", "--no-network")
    assert "secret" not in after["output"], after


# --- moved to another node: `sessions export` carries a hibernated kernel's checkpoint --------

def other_node(tmp_path, name, key_from=None):
    """Another runbox on this machine (its own state directory); with key_from, given the
    checkpoint key of that node, as an operator gives every node of a cluster the same."""
    from conftest import Runbox
    state = tmp_path / name / "state"
    state.mkdir(parents=True, mode=0o700)
    if key_from is not None:
        shutil.copy(os.path.join(key_from.state_dir, "checkpoint.key"), state / "checkpoint.key")
        os.chmod(state / "checkpoint.key", 0o600)
    return Runbox(str(state))


def moved(runbox, session, archive):
    proc = runbox.cli("sessions", "export", session, "--output", str(archive), env=IDLE)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return archive


def imported(node, session, archive):
    proc = node.cli("sessions", "import", session, str(archive), env=IDLE)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc


def part_members(archive):
    import tarfile
    with tarfile.open(archive) as tar:
        return {m.name: m.pax_headers.get("SCHILY.xattr.runbox.part") for m in tar.getmembers()}


SLEEPER = ("import os\nx = 41\nopen('notes.txt', 'w').write('a file')\n"
           "os.makedirs('sub', exist_ok=True)\nos.chdir('sub')\n"
           "f = open('/tmp/kept', 'w')\nf.write('in /tmp')\nf.flush()")


def test_an_exported_hibernated_kernel_wakes_on_the_node_it_is_imported_to(hb, tmp_path):
    stateful(hb, "python", SLEEPER, "m", "--no-network")
    wait_hibernated(hb, "m", "python")
    archive = moved(hb, "m", tmp_path / "m.tar")
    members = part_members(archive)
    assert members["notes.txt"] is None  # the files are files
    prefix = ".runbox/hibernated-python/"
    carried = {name for name, part in members.items() if part == "checkpoint"}
    assert {prefix + "checkpoint.json", prefix + "signature", prefix + "tmp/kept"} <= carried
    assert any(n.startswith(prefix + "images/pages-") for n in carried), sorted(carried)
    assert not any(n.endswith(".log") for n in members)  # criu's logs name the host's paths
    b = other_node(tmp_path, "b", key_from=hb)
    try:
        imported(b, "moved", archive)
        assert kernel_entry(b, "moved", "python")["state"] == "hibernated"
        if storage_kind(b) == "btrfs":  # compressed there as a checkpoint made there would be
            assert os.getxattr(images_of(b, "moved"), "btrfs.compression") == b"zstd"
        back = woke(stateful(b, "python", "x += 1\nprint(x, os.getcwd(), "
                             "open('/tmp/kept').read(), open('../notes.txt').read())", "moved",
                             "--no-network"))
        assert back["output"] == "42 /home/user/sub in /tmp a file\n", back
        assert back["execution_count"] == 2, back
        # The node it came from keeps its own, untouched.
        home = woke(stateful(hb, "python", "print(x)", "m", "--no-network"))
        assert home["output"] == "41\n", home
    finally:
        b.remove_all_sessions()


def test_an_export_carries_hibernated_kernels_and_leaves_live_ones_out(hb, tmp_path):
    """Only a checkpoint is carried: a live kernel's state is in its processes, which an export
    does not stop. Its language starts afresh on the other node, and the node it came from keeps
    it running."""
    stateful(hb, "python", "x = 41", "mix", "--no-network")
    wait_hibernated(hb, "mix", "python")
    live = hb.run("bash", "y=7", "--stateful", "--session", "mix", "--no-network")
    assert live["success"], live
    assert kernel_entry(hb, "mix", "bash")["state"] != "hibernated"
    members = part_members(moved(hb, "mix", tmp_path / "mix.tar"))
    carried = {name for name, part in members.items() if part == "checkpoint"}
    assert any(n.startswith(".runbox/hibernated-python/") for n in carried), sorted(carried)
    assert not any("bash" in n for n in members), sorted(members)
    b = other_node(tmp_path, "b", key_from=hb)
    try:
        imported(b, "mix", tmp_path / "mix.tar")
        assert kernel_entry(b, "mix", "python")["state"] == "hibernated"
        assert kernel_entry(b, "mix", "bash") is None
        fresh = b.run("bash", "echo ${y:-unset}", "--stateful", "--session", "mix",
                      "--no-network")
        assert fresh["output"] == "unset\n" and fresh["kernel_restored"] is False, fresh
        assert woke(stateful(b, "python", "print(x)", "mix", "--no-network"))["output"] == "41\n"
        home = hb.run("bash", "echo $y", "--stateful", "--session", "mix", "--no-network")
        assert home["output"] == "7\n" and home["kernel_restored"] is False, home
    finally:
        b.remove_all_sessions()
        stop_daemons(hb.state_dir)


def edit_record(archive, out):
    """The archive with its checkpoint's record changed (another host kernel)."""
    import io
    import tarfile
    with tarfile.open(archive) as tar, tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as new:
        for member in tar.getmembers():
            data = tar.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("/checkpoint.json"):
                record = json.loads(data)
                record["started_with"]["host_kernel"] = "9.9.9-forged"
                data = json.dumps(record).encode()
                member.size = len(data)
            new.addfile(member, io.BytesIO(data) if data is not None else None)
    return out


def flip_image(archive, out):
    """The archive with a byte of the kernel's memory changed."""
    import io
    import tarfile
    with tarfile.open(archive) as tar, tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as new:
        for member in tar.getmembers():
            data = tar.extractfile(member).read() if member.isfile() else None
            if "/images/pages-" in member.name and len(data) > 4096:
                data = bytearray(data)
                data[len(data) // 2] ^= 0xff
                data = bytes(data)
            new.addfile(member, io.BytesIO(data) if data is not None else None)
    return out


@pytest.mark.parametrize("how", ["another key", "record edited", "image edited"])
def test_a_carried_checkpoint_not_signed_here_or_changed_gives_a_fresh_kernel_and_why(
        hb, tmp_path, how):
    stateful(hb, "python", SLEEPER, "m", "--no-network")
    wait_hibernated(hb, "m", "python")
    archive = moved(hb, "m", tmp_path / "m.tar")
    expected = {"another key": "not signed with this node's key",
                "record edited": "not signed with this node's key",
                "image edited": "does not match its record"}[how]
    if how == "record edited":
        archive = edit_record(archive, tmp_path / "edited.tar")
    elif how == "image edited":
        archive = flip_image(archive, tmp_path / "flipped.tar")
    b = other_node(tmp_path, "b", key_from=None if how == "another key" else hb)
    try:
        imported(b, "moved", archive)
        with open(os.path.join(b.session_dir("moved"), "work", "notes.txt")) as notes:
            assert notes.read() == "a file"  # its files come whatever its kernel's fate
        after = stateful(b, "python", "print('x' in dir())", "moved", "--no-network")
        assert after["output"] == "False\n", after
        assert after["kernel_restarted"] is True and after["kernel_restored"] is False, after
        assert expected in after["restart_reason"], after
        assert not os.path.exists(checkpoint_dir(b, "moved", "python"))
    finally:
        b.remove_all_sessions()


def test_a_woken_kernels_tmp_is_not_swept_by_the_next_runbox(hb):
    """A kernel woken by another runbox process than the one it slept in: its /tmp is this
    process's now, and the sweep any runbox makes of what gone processes left keeps it."""
    stateful(hb, "python", "f = open('/tmp/kept', 'w')\nf.write('in /tmp')\nf.flush()", "t",
             "--no-network", env={"RUNBOX_KERNEL_IDLE": "600"})
    stop_daemons(hb.state_dir)  # SIGTERM: the daemon hibernates its kernels as it goes
    assert kernel_entry(hb, "t", "python")["state"] == "hibernated"
    woke(stateful(hb, "python", "print(open('/tmp/kept').read())", "t", "--no-network",
                  env={"RUNBOX_KERNEL_IDLE": "600"}))
    assert hb.cli("sessions", "list").returncode == 0  # a new runbox process: it sweeps
    stop_daemons(hb.state_dir)  # and sleeps again: its /tmp must still be there to keep
    later = woke(stateful(hb, "python", "import os\nprint(os.listdir('/tmp'))", "t",
                          "--no-network", env={"RUNBOX_KERNEL_IDLE": "600"}))
    assert later["output"] == "['kept']\n", later
