"""Sandbox: adversarial cases. Agent code does its worst; the host, runbox, other sessions and
their files must be untouched, and nothing of an execution may outlive it.

Each test is one case with one line of intent and an exact expected outcome. Cases that would
harm this machine if isolation failed (bombs, kill -9 -1, disk fill, syscall probes) first ask
the `proven` fixture, which checks in this very run that the isolation they rely on holds; if it
does not, they fail rather than run.
"""
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from conftest import (HIBERNATE_SOON, POOLED, ROOT, SLOWDOWN, Runbox, daemons, execution_cgroups,
                      existing, hibernation_here, live_helpers, planted_cgroups,
                      processes_matching, remove_cgroups_left_since, sandbox_processes,
                      stop_daemons, unique_marker, wait_gone, wait_hibernated)

IS_ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not IS_ROOT, reason="needs root (as designed: runbox check says so)")
TRY_SYSCALL = os.environ.get("RUNBOX_TRY_SYSCALL",
                             os.path.join(os.path.dirname(os.path.abspath(
                                 os.environ.get("RUNBOX_BIN", os.path.join(ROOT, "build", "runbox")))),
                                 "try-syscall"))


# --- the same cases against a session's kernel ----------------------------------------------
# A stateful session's kernel is a sandbox like any other: each case marked kernel_too runs
# twice, as fresh runs and as stateful calls into a session's live interpreter.

kernel_too = pytest.mark.kernel_too


class KernelRunbox(Runbox):
    """runbox.run() as a stateful call, in the session the case names or in one of its own.
    Its own has a name no other case's has: the cases that look for a session's processes
    find them by that name across the machine, where other workers' cases run at once."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.session = f"adversary-{uuid.uuid4().hex[:12]}"

    def run(self, language, code, *args, env=None, timeout=120):
        if "--session" not in args:
            args = (*args, "--session", self.session)
        return super().run(language, code, "--stateful", *args, env=env, timeout=timeout)

    def popen(self, *args, env=None):
        if args and args[0] == "run":
            args = (*args, "--stateful")
        return super().popen(*args, env=env)


class RestoredKernelRunbox(KernelRunbox):
    """runbox.run() as a stateful call into a kernel that was checkpointed and woke again
    (hibernation, issue 34): the same call's options first start the kernel, it idles out and
    hibernates, and the case's code runs in the restored one. A restore puts the tree in a
    fresh sandbox with the confinement of a new one: every case must hold there too."""

    WARM = {"python": "pass", "javascript": "0", "bash": "true"}

    def _asleep(self, language, options, env):
        """Starts the kernel the options ask for and waits until it hibernated; returns the
        options (with the session) and the environment the call must use."""
        options = list(options)
        if "--session" not in options:
            options += ["--session", self.session]
        env = {**HIBERNATE_SOON, **(env or {})}
        warm = Runbox.run(self, language, self.WARM[language], "--stateful", *options, env=env)
        assert warm["success"], warm
        wait_hibernated(self, options[options.index("--session") + 1], language)
        return options, env

    def run(self, language, code, *args, env=None, timeout=120):
        options, env = self._asleep(language, args, env)
        result = super().run(language, code, *options, env=env, timeout=timeout)
        assert result["kernel_restored"] is True, result
        return result

    def popen(self, *args, env=None):
        if args and args[0] == "run":  # run LANGUAGE -c CODE OPTION...
            json_out = ("--json",) if "--json" in args[4:] else ()
            options, env = self._asleep(args[1], [a for a in args[4:] if a != "--json"], env)
            args = (*args[:4], *json_out, *options)
        return super().popen(*args, env=env)


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("kernel_too")
    if marker and "runbox" in metafunc.fixturenames:
        # The pooled pass changes only one-off runs: kernels there are the default pass's.
        kinds = ["fresh", "kernel"] + ([] if POOLED else ["restored"])
        metafunc.parametrize("runbox", kinds, indirect=True)


@pytest.fixture
def runbox(request, tmp_path, tmp_path_factory):
    param = getattr(request, "param", "fresh")
    works, why_not = hibernation_here(tmp_path_factory) if param == "restored" else (True, "")
    if not works:
        pytest.skip(why_not)
    kind = {"kernel": KernelRunbox, "restored": RestoredKernelRunbox}.get(param, Runbox)
    box = kind(str(tmp_path / "state"))
    yield box
    box.remove_all_sessions()


# --- proof of isolation, established once per run before anything destructive ------------

class Proof:
    def __init__(self):
        self.failures = []

    def require(self):
        if self.failures:
            pytest.fail("isolation not proven in this run, refusing to run a destructive case: "
                        + "; ".join(self.failures))


@pytest.fixture(scope="session")
def proven(tmp_path_factory):
    from conftest import Runbox
    box = Runbox(str(tmp_path_factory.mktemp("proof") / "state"))
    proof = Proof()
    # PID namespace: the program sees only the sandbox's own processes, and is not PID 1.
    r = box.run("bash", "echo $$; ls /proc | grep -c '^[0-9]*$'", "--no-network")
    lines = r["output"].split()
    if not (r["success"] and len(lines) == 2 and 1 < int(lines[0]) < 10 and int(lines[1]) < 10):
        proof.failures.append(f"no private PID namespace ({r['output']!r})")
    # Unprivileged: uid 1000 inside, mapped to a host uid other than 0.
    r = box.run("bash", "id -u; cat /proc/self/uid_map", "--no-network")
    out = r["output"].split()
    maps = {int(out[i]): int(out[i + 1]) for i in range(1, len(out) - 2, 3)}
    if not (r["success"] and out[0] == "1000" and maps.get(1000, 0) != 0):
        proof.failures.append(f"sandbox user is not unprivileged ({r['output']!r})")
    # Limits: the process limit holds (a bounded loop of 400 forks, not a bomb) and the
    # memory limit holds.
    r = box.run("python", "import os, time\nn = 0\nfor i in range(400):\n    try:\n"
                          "        if os.fork() == 0:\n            time.sleep(30)\n"
                          "            os._exit(0)\n        n += 1\n    except OSError:\n"
                          "        pass\nprint('started', n)", "--no-network", "--timeout", "20")
    started = int(r["output"].split()[-1]) if r["output"].startswith("started") else 9999
    if started >= 400:
        proof.failures.append(f"process limit not enforced ({r['output']!r})")
    r = box.run("python", "b = bytearray(300 * 1024 * 1024)\nb[::4096] = b'x' * len(b[::4096])",
                "--memory", "64", "--no-network")
    if r["error_type"] != "MemoryError":
        proof.failures.append(f"memory limit not enforced ({r['error_type']})")
    box.remove_all_sessions()
    return proof


# --- exhaust -----------------------------------------------------------------------------

@pytest.mark.parametrize("language,code", [
    ("bash", ":(){ :|:& };:; sleep 10"),
    ("python", "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"),
    ("javascript", "const cp=require('child_process'); for(;;){ try { cp.spawn('sleep',['100']) } catch(e) {} }"),
])
def test_fork_bomb_is_contained_and_leaves_nothing(runbox, proven, language, code):
    proven.require()
    start = time.time()
    result = runbox.run(language, code, "--timeout", "3", "--no-network", timeout=60)
    assert time.time() - start < 30  # the result came back
    assert result["error_type"] == "TimeoutError", result["error"][-300:]
    assert subprocess.run(["/bin/true"], timeout=5).returncode == 0  # the host still forks
    assert wait_gone("sleep100") == []
    assert sandbox_processes(result["session_id"]) == []


@pytest.mark.parametrize("language,code", [
    ("bash", ":(){ :|:& };:; sleep 10"),
    ("python", "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"),
    ("javascript", "const cp=require('child_process'); for(;;){ try { cp.spawn('sleep',['100']) } catch(e) {} }"),
])
def test_fork_bomb_in_a_kernel_is_contained_and_goes_with_its_session(proven, tmp_path, language,
                                                                       code):
    """In a kernel what the code starts may outlive the call (within the kernel's limits), so
    the bomb may tick on in the background: it is bounded, and removing the session ends it."""
    proven.require()
    box = KernelRunbox(str(tmp_path / "state"))
    try:
        start = time.time()
        result = box.run(language, code, "--timeout", "3", "--no-network", timeout=60)
        assert time.time() - start < 30, result  # the result came back
        assert result["error_type"] == "TimeoutError", result["error"][-300:]
        assert subprocess.run(["/bin/true"], timeout=5).returncode == 0  # the host still forks
        assert len(sandbox_processes(result["session_id"])) <= 256  # the kernel's pids limit
        removed = box.cli("sessions", "rm", result["session_id"], "--wait", "30")
        assert removed.returncode == 0, removed.stderr
        assert wait_gone("sleep100", 10) == []
        # Hundreds of processes killed at once finish exiting over moments, longer on a
        # loaded machine: none may be left once they have.
        deadline = time.time() + 10
        while sandbox_processes(result["session_id"]) and time.time() < deadline:
            time.sleep(0.05)
        assert sandbox_processes(result["session_id"]) == []
    finally:
        box.remove_all_sessions()


@kernel_too
@pytest.mark.parametrize("language,code", [
    ("python", "a = []\nwhile True: a.append(bytearray(10**7))"),
    ("javascript", "const a = []; for (;;) a.push(Buffer.alloc(1e7, 1));"),
    ("bash", "x=a; while true; do x=$x$x; done"),
])
def test_memory_bomb_is_a_memory_error(runbox, proven, language, code):
    proven.require()
    result = runbox.run(language, code, "--memory", "128", "--timeout", "30", "--no-network")
    assert result["error_type"] == "MemoryError", result["error"][-300:]
    assert result["success"] is False
    # A process killed by the OOM killer is still listed while the kernel frees its memory,
    # longer on a loaded machine: it runs no code meanwhile, and must then be gone.
    deadline = time.time() + 5
    while sandbox_processes(result["session_id"]) and time.time() < deadline:
        time.sleep(0.05)
    assert sandbox_processes(result["session_id"]) == []


@kernel_too
@pytest.mark.parametrize("language,code", [
    ("python", "while True: pass"),
    ("javascript", "for(;;){}"),
    ("bash", "while :; do :; done"),
])
def test_infinite_loop_times_out(runbox, language, code):
    result = runbox.run(language, code, "--timeout", "1", "--no-network")
    assert result["error_type"] == "TimeoutError" and result["exit_code"] == 124


def test_daemon_that_double_forks_setsids_and_ignores_sigterm_is_gone_after_the_result(runbox):
    marker = "5151.5151"
    code = f"""import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        os.execvp('sleep', ['sleep', '{marker}'])
    os._exit(0)
time.sleep(0.3)
print('daemon started')
"""
    result = runbox.run("python", code, "--no-network")
    assert result["output"] == "daemon started\n"
    assert wait_gone(marker) == []


@pytest.mark.serial
@pytest.mark.parametrize("network", ["--no-network", "--network"])
def test_a_runbox_killed_outright_takes_its_sandbox_with_it(runbox, network):
    """SIGKILL gives runbox no chance to clean up: the kernel must end the
    sandbox (its init has a parent-death signal that survives init's change
    of uid), the program's background children included."""
    if network == "--network" and os.geteuid() != 0:
        pytest.skip("network-on needs runbox-net and the tun device, set up here only as root")
    marker = "5353.%06d" % (uuid.uuid4().int % 10**6)  # a sleep no other run has
    cgroups_before = execution_cgroups()
    proc = runbox.popen("run", "bash", "-c", f"sleep {marker} & echo started; wait", network)
    try:
        line = proc.stdout.readline()
    finally:
        proc.kill()
        proc.wait()
    assert line == b"started\n", proc.stderr.read()
    assert wait_gone(marker) == []
    remove_cgroups_left_since(cgroups_before)


def test_sigstop_of_the_own_process_group_is_still_killed_on_time(runbox):
    marker = "5252.5252"
    start = time.time()
    result = runbox.run("bash", f"sleep {marker} & kill -STOP 0", "--timeout", "2", "--no-network")
    assert result["timed_out"] is True
    assert time.time() - start < 10 * SLOWDOWN
    assert wait_gone(marker) == []


def test_10_gib_output_flood_is_drained_with_bounded_memory(runbox, proven):
    proven.require()
    probe = ("import resource,subprocess,sys\n"
             "p=subprocess.run(sys.argv[1:],capture_output=True)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
             "sys.stdout.write(p.stdout.decode())")
    proc = subprocess.run(["/usr/bin/python3", "-c", probe, runbox.bin, "run", "bash", "-c",
                           "head -c 10737418240 /dev/zero | tr '\\0' x", "--json", "--timeout", "280",
                           "--no-network"], capture_output=True, env=runbox.env(), timeout=300)
    peak_line, result_line = proc.stdout.decode().split("\n", 1)
    result = json.loads(result_line)
    assert result["success"], result["error"][-300:]
    assert result["truncated"]["stdout"] + 1024 * 1024 == 10737418240
    assert int(peak_line) < 64 * 1024  # KiB: runbox and its children stayed small


def disk_full(text):
    """What a program prints when its write hits its disk's end or its quota (or, unprivileged,
    where there are no quotas, the file-size limit that stands in for them)."""
    return ("No space left on device" in text or "Disk quota exceeded" in text or
            (not IS_ROOT and "File too large" in text))


@pytest.mark.serial  # compares the host disk's free space before and after
@root_only
def test_filling_the_session_disk_gives_enospc_and_the_host_disk_is_fine(runbox, proven):
    proven.require()
    host_dir = os.path.dirname(runbox.state_dir)
    free_before = shutil.disk_usage(host_dir).free
    result = runbox.run("bash", "head -c 3G /dev/zero > fill; echo rc=$?; stat -c %s fill",
                        "--session", "fill", "--no-network", "--timeout", "120")
    assert disk_full(result["error"]), result["error"]
    size = int(result["output"].split()[-1])
    assert size <= 1024 * 1024 * 1024
    assert shutil.disk_usage(host_dir).free > free_before - 1.2 * 1024 ** 3
    # The quota is the session's own: another session still writes.
    other = runbox.run("bash", "head -c 10M /dev/zero > f && stat -c %s f", "--session", "other",
                       "--no-network")
    assert other["success"] and other["output"].strip() == str(10 << 20), other
    # Removing the files gives the space back to the host's disk.
    freed = runbox.run("bash", "rm fill; sync", "--session", "fill", "--no-network")
    assert freed["success"], freed
    deadline = time.time() + 30
    while shutil.disk_usage(host_dir).free < free_before - 200 * 1024 ** 2 and time.time() < deadline:
        time.sleep(0.5)
    assert shutil.disk_usage(host_dir).free > free_before - 200 * 1024 ** 2


@pytest.mark.parametrize("where", ["/tmp/fill", "fill"])
def test_filling_tmp_or_a_one_off_home_is_a_full_disk_not_a_memory_error(runbox, proven, where):
    """Disk and memory are not confused for the agent: under the default memory limit (512
    MiB), writing 2 GiB to /tmp or to a one-off run's home ends with a full disk."""
    proven.require()
    result = runbox.run("bash", f"head -c 2G /dev/zero > {where}; echo rc=$?", "--no-network",
                        "--timeout", "60")
    assert disk_full(result["error"]) and "rc=1" in result["output"], result
    assert result["error_type"] != "MemoryError", result


# --- escape ------------------------------------------------------------------------------

@kernel_too
@pytest.mark.parametrize("path", ["/etc/passwd", "/etc/runbox-x", "/usr/bin/runbox-x", "/root/x",
                                  "/x", "/proc/sys/kernel/hostname"])
@pytest.mark.parametrize("language", ["python", "javascript", "bash"])
def test_writes_outside_the_session_and_tmp_are_refused(runbox, language, path):
    code = {
        "python": f"open({path!r}, 'w').write('x')",
        "javascript": f"require('fs').writeFileSync({path!r}, 'x')",
        "bash": f"echo x > {path}",
    }[language]
    host_file = path if os.path.exists(path) else None
    before = open(host_file, "rb").read() if host_file else None
    result = runbox.run(language, code, "--no-network")
    assert result["success"] is False
    assert result["error_type"] in ("PermissionError", "RuntimeError"), result
    if host_file:
        assert open(host_file, "rb").read() == before  # the host's file is untouched
    else:
        assert not os.path.exists(path)


@kernel_too
@pytest.mark.parametrize("language,code", [
    ("python", "print(open('/etc/shadow').read())"),
    ("javascript", "console.log(require('fs').readFileSync('/etc/shadow','utf8'))"),
    ("bash", "cat /etc/shadow"),
])
def test_etc_shadow_cannot_be_read(runbox, language, code):
    result = runbox.run(language, code, "--no-network")
    assert result["success"] is False
    assert "root:" not in result["output"]


@kernel_too
def test_host_directories_are_not_visible(runbox):
    top = set(runbox.run("bash", "ls /", "--no-network")["output"].split())
    # /opt/runbox/env and /node_modules: where dependency environments appear, empty without.
    assert top <= {"bin", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "proc", "sbin",
                   "tmp", "usr", "opt", "node_modules"}, top
    homes = runbox.run("bash", "ls -A /home", "--no-network")["output"].split()
    assert homes == ["user"]
    etc = set(runbox.run("bash", "ls /etc", "--no-network")["output"].split())
    assert "shadow" not in etc and "passwd" in etc and "sudoers" not in etc


@kernel_too
def test_another_sessions_files_and_the_state_dir_are_unreachable(runbox):
    secret = uuid.uuid4().hex
    runbox.run("bash", f"echo {secret} > secret.txt", "--session", "victim")
    state = runbox.state_dir
    code = (f"ls -la {state} {state}/sessions {state}/sessions/victim 2>&1; "
            f"cat {state}/sessions/victim/work/secret.txt 2>&1; "
            "grep -r --no-messages " + secret + " / --exclude-dir=proc 2>/dev/null | head -3; "
            "cat /proc/*/root/home/user/secret.txt 2>&1; ls /proc/*/root/ 2>/dev/null | head")
    result = runbox.run("bash", code, "--session", "attacker", "--no-network", "--timeout", "120")
    assert secret not in result["output"]
    assert "No such file or directory" in result["output"]
    # The victim still has it.
    assert runbox.run("bash", "cat secret.txt", "--session", "victim")["output"] == secret + "\n"


@kernel_too
def test_proc_shows_only_the_executions_own_processes(runbox):
    marker = "5353.5353"
    host = subprocess.Popen(["sleep", marker])
    try:
        result = runbox.run("bash", "ps -eo pid,comm --no-headers; cat /proc/*/cmdline | tr '\\0' ' '",
                            "--no-network")
        assert marker not in result["output"]
        pids = [int(line.split()[0]) for line in result["output"].splitlines()
                if line.strip() and line.split()[0].isdigit()]
        # A restored kernel's namespace counts on from where criu left it: a few, not the host's.
        assert pids and len(pids) < 10 and max(pids) < 100, result["output"]
    finally:
        host.kill()
        host.wait()


@kernel_too
def test_host_environment_cannot_be_read_through_proc(runbox):
    secret = "hunter" + uuid.uuid4().hex
    result = runbox.run("bash", "cat /proc/1/environ /proc/1/cmdline /proc/*/environ 2>/dev/null "
                                "| tr '\\0' '\\n'; env", "--no-network", env={"HOST_SECRET": secret})
    assert secret not in result["output"]
    assert "RUNBOX_STATE_DIR" not in result["output"]


# --- per-user kernel counts: a sandbox's are never root's ------------------------------------

NS_GET_OWNER_UID = 0xb704  # ioctl on a user namespace file: its owner, as the caller sees it


def namespace_owner(pid):
    import array
    import fcntl
    with open(f"/proc/{pid}/ns/user") as ns:
        owner = array.array("I", [0])
        fcntl.ioctl(ns.fileno(), NS_GET_OWNER_UID, owner)
        return owner[0]


def hold_in_sandbox(runbox, code, marker, *args):
    """Starts `code` (which prints 'held N' and then sleeps with `marker` on its command line)
    in the background; returns the runbox process and the count it reported."""
    proc = runbox.popen("run", "python", "-c", code, "--json", "--no-network", "--timeout", "20",
                        *args)
    deadline = time.time() + 15
    while time.time() < deadline and not processes_matching(marker):
        time.sleep(0.05)
    return proc


@root_only
def test_each_sandbox_has_a_user_namespace_owner_of_its_own(runbox):
    """As root, the kernel charges per-user counts inside a namespace to its owner on the host:
    that owner must be neither root nor shared between concurrent sandboxes."""
    markers = [unique_marker() for _ in range(2)]
    procs = [runbox.popen("run", "bash", "-c", f"exec sleep {m}", "--no-network", "--timeout", "20")
             for m in markers]
    try:
        owners = []
        for marker in markers:
            deadline = time.time() + 15
            while time.time() < deadline and not processes_matching(marker):
                time.sleep(0.05)
            pids = processes_matching(marker)
            assert pids, "the sandbox did not start"
            owners.append(namespace_owner(pids[0]))
        assert 0 not in owners and owners[0] != owners[1], owners
        assert all(owner >= 3100000 for owner in owners), owners
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()


def host_root_can(what):
    """Runs a small Python program as the host's root, outside any sandbox: True when `what`
    (inotify, sigqueue, mqueue) still works for root."""
    programs = {
        "inotify": "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                   "print('ok' if libc.inotify_init1(0) >= 0 else ctypes.get_errno())",
        "sigqueue": "import ctypes, os, signal\nsig = signal.SIGRTMIN + 1\n"
                    "signal.pthread_sigmask(signal.SIG_BLOCK, [sig])\n"
                    "libc = ctypes.CDLL(None, use_errno=True)\n"
                    "rc = libc.sigqueue(os.getpid(), sig, ctypes.c_void_p(0))\n"
                    "print('ok' if rc == 0 else ctypes.get_errno())",
        "mqueue": "import ctypes, os\nrt = ctypes.CDLL('librt.so.1', use_errno=True)\n"
                  "rt.mq_open.restype = ctypes.c_int\n"
                  "name = b'/runbox-test-%d' % os.getpid()\n"
                  "fd = rt.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, None)\n"
                  "print('ok' if fd >= 0 else ctypes.get_errno())\nrt.mq_unlink(name)",
    }
    out = subprocess.run(["/usr/bin/python3", "-c", programs[what]], capture_output=True,
                         text=True, timeout=30)
    return out.stdout.strip() == "ok", out.stdout + out.stderr


@root_only
@pytest.mark.parametrize("what,code", [
    ("inotify", "import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\nn = 0\n"
                "while n < 100000 and libc.inotify_init1(0) >= 0:\n    n += 1\n"
                "print('held', n, flush=True)\nimport os; os.execvp('sleep', ['sleep', '{m}'])"),
    ("sigqueue", "import os, signal\nsig = signal.SIGRTMIN\n"
                 "signal.pthread_sigmask(signal.SIG_BLOCK, [sig])\n"
                 "for n in range(200000):\n    os.kill(os.getpid(), sig)\n"
                 "print('held', n, flush=True)\nimport time\n"
                 "import subprocess; subprocess.run(['sleep', '{m}'])\ntime.sleep(0)"),
    ("mqueue", "import ctypes, os\nrt = ctypes.CDLL('librt.so.1', use_errno=True)\n"
               "class Attr(ctypes.Structure):\n"
               "    _fields_ = [('flags', ctypes.c_long), ('maxmsg', ctypes.c_long),\n"
               "                ('msgsize', ctypes.c_long), ('curmsgs', ctypes.c_long)]\n"
               "n = 0\nwhile rt.mq_open(b'/q%d' % n, os.O_CREAT | os.O_RDWR, 0o600,\n"
               "                     ctypes.byref(Attr(0, 10, 8192, 0))) >= 0:\n    n += 1\n"
               "print('held', n, flush=True)\nos.execvp('sleep', ['sleep', '{m}'])"),
])
def test_a_sandbox_cannot_use_up_roots_per_user_kernel_limits(runbox, proven, what, code):
    """While a sandbox holds all the inotify instances, queued signals or message queue bytes it
    can get, root on the host can still get its own."""
    proven.require()
    ok, detail = host_root_can(what)
    assert ok, f"root cannot {what} even before the test: {detail}"
    marker = unique_marker()
    proc = hold_in_sandbox(runbox, code.replace("{m}", marker), marker)
    try:
        assert processes_matching(marker), proc.stderr.read() if proc.poll() is not None else ""
        ok, detail = host_root_can(what)
        assert ok, f"a sandbox used up root's {what} budget: {detail}"
    finally:
        proc.terminate()
        proc.wait()
        wait_gone(marker)


# --- what the sandbox can learn about the host ----------------------------------------------

@kernel_too
def test_the_host_name_is_the_sandboxs_own(runbox):
    result = runbox.run("python", "import os, socket\nprint(socket.gethostname(), os.uname().nodename,"
                                  " open('/etc/hostname').read().strip(),"
                                  " open('/proc/sys/kernel/hostname').read().strip())",
                        "--no-network")
    assert result["output"].split() == ["runbox"] * 4, result
    assert os.uname().nodename not in ("runbox",)  # the host's own name differs, so this tests it


@kernel_too
@pytest.mark.parametrize("path", ["/proc/cmdline", "/proc/config.gz", "/proc/partitions",
                                  "/proc/diskstats", "/proc/modules", "/proc/kallsyms",
                                  "/proc/interrupts", "/proc/swaps", "/proc/locks",
                                  "/proc/devices", "/proc/key-users", "/proc/iomem"])
def test_host_describing_proc_files_read_empty(runbox, path):
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist on this kernel")
    import fcntl
    held = open(os.path.join(runbox.state_dir + "-lockfile"), "w")  # so /proc/locks has a line
    fcntl.flock(held, fcntl.LOCK_EX)
    with open(path, "rb") as f:
        assert f.read(1), f"{path} is empty on the host too: the case would prove nothing"
    result = runbox.run("bash", f"wc -c < {path}", "--no-network")
    assert result["output"].strip() == "0", (path, result)


@kernel_too
@pytest.mark.parametrize("path", ["/proc/bus", "/proc/fs", "/proc/driver", "/proc/irq",
                                  "/proc/tty", "/proc/pressure", "/proc/acpi"])
def test_host_describing_proc_directories_are_empty(runbox, path):
    if not os.path.isdir(path) or not os.listdir(path):
        pytest.skip(f"{path} is missing or empty on this host")
    result = runbox.run("bash", f"ls -A {path} | wc -l", "--no-network")
    assert result["output"].strip() == "0", (path, result)


@kernel_too
@root_only
def test_the_mount_table_does_not_name_the_hosts_block_devices(runbox):
    """As root the sandbox's root comes from the prepared namespace: /usr is an overlay, /etc's
    files are copies, so its mountinfo names no host block device (nor the host's paths)."""
    host_devices = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            source = fields[fields.index("-") + 2]
            if source.startswith("/dev/") and not source.startswith("/dev/loop"):
                host_devices |= {source, fields[2]}
    assert host_devices, "the host has no block-device mount: the case would prove nothing"
    result = runbox.run("bash", "cat /proc/self/mountinfo", "--no-network")
    for line in result["output"].splitlines():
        fields = line.split()
        assert fields[2] not in host_devices and fields[fields.index("-") + 2] not in host_devices, line


# --- what a sandbox learns of its host from /proc -------------------------------------------

BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Reads the boot id, tries to unmount and to overwrite it, reads it again from another process.
READ_BOOT_ID = f"""
import ctypes, os, subprocess
first = open({BOOT_ID!r}).read().strip()
libc = ctypes.CDLL(None, use_errno=True)
umount = os.strerror(ctypes.get_errno()) if libc.umount2({BOOT_ID.encode()!r}, 2) else "unmounted"
try:
    with open({BOOT_ID!r}, "w") as f:
        f.write("x")
    write = "written"
except OSError as e:
    write = e.strerror
try:  # a kernel's sandbox keeps the file's name (hibernation): neither removed nor replaced
    os.rename("/dev/shm/.boot_id", "/dev/shm/moved")
    os.unlink("/dev/shm/moved")
    removed = "removed"
except OSError as e:
    removed = e.strerror
later = subprocess.run(["cat", {BOOT_ID!r}], capture_output=True, text=True).stdout.strip()
print(first, later, umount, write, removed, sep="|")
"""
UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def boot_id_seen(runbox, *args):
    result = runbox.run("python", READ_BOOT_ID, "--no-network", *args)
    first, later, umount, write, removed = result["output"].strip().split("|")
    assert UUID4.fullmatch(first) and later == first, result
    assert umount == "Operation not permitted", result
    assert removed in ("No such file or directory", "Operation not permitted"), result
    assert write in ("Read-only file system", "Permission denied"), result
    return first


@kernel_too
def test_each_sandbox_has_a_boot_id_of_its_own_which_it_cannot_undo(runbox):
    """The host's boot id is the same in every sandbox until the host reboots: programs could
    tell that they share a host, and that it stayed up. Each sandbox reads one of its own, the
    same for the whole execution (a kernel's for its whole life), and can neither unmount nor
    overwrite it."""
    with open(BOOT_ID) as f:
        host = f.read().strip()
    kernel = isinstance(runbox, KernelRunbox)
    first = boot_id_seen(runbox)
    second = boot_id_seen(runbox, *(("--session", "other") if kernel else ()))
    assert host not in (first, second) and first != second, (host, first, second)
    if kernel:  # the same kernel, a later call: the same sandbox
        assert boot_id_seen(runbox) == first


def mount_table_and_server_pids(runbox, code):
    """The output of code (bash) in a sandbox, and the pids of the runbox processes that
    served it (the CLI and any daemon of the state directory)."""
    args = ("--session", runbox.session) if isinstance(runbox, KernelRunbox) else ()
    proc = runbox.popen("run", "bash", "-c", code, "--json", "--no-network", *args)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["success"], result
    return result["output"], {proc.pid, *daemons(runbox.state_dir)}


def mount_table(output):
    """(line, the paths it names: its root in its file system, its source, the options that
    hold a path, and its options) per line of a mountinfo."""
    for line in output.splitlines():
        fields = line.split()
        dash = fields.index("-")
        options = fields[dash + 3].split(",") if len(fields) > dash + 3 else []
        yield line, [fields[3], fields[dash + 2]] + [o for o in options if "/" in o], options


@kernel_too
def test_the_mount_table_names_no_pid_or_path_of_runbox(runbox):
    """What /proc/self/mountinfo still shows is what the kernel forces (README: Security
    model): mount ids, file system types, the mapped uid, and a bind's path within its file
    system. That path names no pid of the runbox process serving the sandbox (scratch space
    was <pid>-<random>), and, as root, nothing names a host path of runbox's (state
    directory, image store, this checkout) or a descriptor of it."""
    output, pids = mount_table_and_server_pids(runbox, "cat /proc/self/mountinfo")
    for line, paths, _ in mount_table(output):
        for pid in pids:
            assert not [p for p in paths if re.search(rf"(?<![0-9]){pid}(?![0-9])", p)], (pid, line)
        assert "/proc/self/fd" not in line and ROOT not in line, line
        if IS_ROOT:
            for host_path in (runbox.state_dir, os.path.realpath(runbox.state_dir),
                              "/var/lib/runbox", os.environ.get("RUNBOX_TEST_ON_IMAGE") or "/nowhere"):
                assert host_path not in line, (host_path, line)


@kernel_too
@root_only
def test_the_usr_overlay_is_made_of_paths_of_the_sandbox(runbox):
    """The kernel shows an overlay's layers as they were named when it was made: /usr's
    named a descriptor of runbox's (an image) and where the root was built (/tmp/usr). Each
    layer it names now is a directory of the sandbox's own root."""
    code = ("cat /proc/self/mountinfo; echo ===; "
            "for p in $(grep -o 'lowerdir=[^, ]*' /proc/self/mountinfo | cut -d= -f2 | tr : ' '); "
            "do test -d \"$p\" && echo \"$p\"; done; true")
    output, _ = mount_table_and_server_pids(runbox, code)
    table, existing_layers = output.split("===\n")
    layers = {p for _, _, options in mount_table(table) for o in options
              if o.startswith("lowerdir=") for p in o[len("lowerdir="):].split(":")}
    assert layers and set(existing_layers.split()) == layers, (layers, existing_layers)


@kernel_too
def test_proc_sys_is_read_only_and_what_runtimes_read_remains(runbox):
    result = runbox.run("bash", "echo x > /proc/sys/kernel/hostname; echo rc=$?; "
                                "head -c 9 /proc/cpuinfo /proc/meminfo /proc/stat >/dev/null && "
                                "echo readable; nproc; node -e 'console.log(require(\"os\").cpus().length)'",
                        "--no-network")
    lines = result["output"].split()
    assert lines[0] == "rc=1" and "Read-only file system" in result["error"], result
    assert lines[1] == "readable" and int(lines[2]) >= 1 and int(lines[3]) >= 1, result


@kernel_too
def test_kill_minus_9_minus_1_kills_only_the_sandboxs_own_processes(runbox, proven):
    proven.require()
    marker = "5454.5454"
    host = subprocess.Popen(["sleep", marker])  # a host process that must survive
    try:
        result = runbox.run("bash", f"sleep {marker}.1 & sleep 0.2; kill -9 -1; echo after",
                            "--no-network", "--timeout", "10")
        assert result["timed_out"] is False
        assert host.poll() is None  # the host's process is alive
        assert wait_gone(f"{marker}.1") == []
    finally:
        host.kill()
        host.wait()


@pytest.fixture
def try_syscall_in(runbox):
    """Puts the try-syscall probe into a session and returns a function that runs it there."""
    assert os.path.exists(TRY_SYSCALL), f"build the probe first: {TRY_SYSCALL}"
    with open(TRY_SYSCALL, "rb") as f:
        data = f.read()
    runbox.run("python", "import sys,base64\nopen('try-syscall','wb').write(base64.b64decode("
               "sys.stdin.read()))\nimport os; os.chmod('try-syscall', 0o755)", "--session", "probe",
               "--input", write_temp(runbox, data))

    def run(*names):
        result = runbox.run("bash", "./try-syscall " + " ".join(names), "--session", "probe",
                            "--no-network")
        return dict(line.split(" ", 1) for line in result["output"].splitlines())
    return run


def write_temp(runbox, data):
    import base64
    path = os.path.join(os.path.dirname(runbox.state_dir), "probe.b64")
    with open(path, "wb") as f:
        f.write(base64.b64encode(data))
    return path


def test_privileged_syscalls_are_refused(proven, try_syscall_in):
    proven.require()
    verdicts = try_syscall_in("mount", "umount2", "unshare", "setns", "ptrace", "bpf", "keyctl",
                              "add_key", "perf_event_open", "userfaultfd", "fanotify_init",
                              "fanotify_mark", "open_by_handle_at",
                              "io_uring_setup", "kexec_load", "init_module", "pivot_root",
                              "swapon", "clock_settime", "acct", "clone_newuser", "clone_newns",
                              "clone_newnet")
    assert verdicts and all(v == "EPERM" for v in verdicts.values()), verdicts


@root_only
def test_no_subvolume_or_snapshot_can_escape_the_sessions_quota(runbox, proven, try_syscall_in):
    """btrfs lets anyone make subvolumes where they may write; one made in a session's directory
    would hold files its quota group does not count."""
    proven.require()
    verdicts = try_syscall_in("btrfs_subvol_create", "btrfs_snap_create")
    assert verdicts == {"btrfs_subvol_create": "EPERM", "btrfs_snap_create": "EPERM"}, verdicts
    if shutil.which("btrfs"):
        made = runbox.run("bash", "btrfs subvolume create escape; ls -A", "--session", "probe",
                          "--no-network")
        assert "escape" not in made["output"].split(), made


def test_tiocsti_is_refused_even_with_high_bits(proven, try_syscall_in):
    proven.require()
    verdicts = try_syscall_in("tiocsti", "tiocsti_highbits")
    assert verdicts == {"tiocsti": "EPERM", "tiocsti_highbits": "EPERM"}


@kernel_too
def test_there_is_no_controlling_terminal(runbox):
    result = runbox.run("python", "import os\ntry:\n    os.open('/dev/tty', os.O_RDWR)\n    print('opened')\n"
                                  "except OSError as e:\n    print(e.errno)", "--no-network")
    assert result["output"].strip() in ("6", "2")  # ENXIO: no controlling tty (or no device)


@kernel_too
def test_no_capabilities_and_no_new_privs(runbox):
    result = runbox.run("bash", "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' "
                                "/proc/self/status", "--no-network")
    status = dict(line.split(":\t") for line in result["output"].splitlines())
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[cap], 16) == 0, (cap, status[cap])
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"


@kernel_too
def test_mounts_are_nosuid_and_nodev_and_the_root_is_read_only(runbox):
    result = runbox.run("bash", "cat /proc/self/mountinfo", "--no-network")
    for line in result["output"].splitlines():
        fields = line.split()
        mount_point, options = fields[4], fields[5]
        if (mount_point.startswith("/dev/") and mount_point != "/dev/shm") or \
                fields[-3] == "devtmpfs" or fields[3] == "/null":
            assert "nosuid" in options  # a device node: /dev/null, also over masked /proc files
            continue
        if mount_point == "/dev":  # its own nodes (as root): read-only, nothing executes
            assert options.startswith("ro") and "nosuid" in options and "noexec" in options
            continue
        if mount_point == "/proc":
            assert "nosuid" in options and "nodev" in options
            continue
        assert "nosuid" in options and "nodev" in options, line
        if mount_point not in ("/home/user", "/tmp", "/dev/shm"):
            assert options.startswith("ro"), line


@kernel_too
def test_dev_holds_only_harmless_devices_and_no_device_can_be_made(runbox):
    result = runbox.run("python", "import os, stat\n"
                                  "for name in sorted(os.listdir('/dev')):\n"
                                  "    st = os.lstat('/dev/' + name)\n"
                                  "    kind = 'c' if stat.S_ISCHR(st.st_mode) else 'l' if stat.S_ISLNK("
                                  "st.st_mode) else 'd' if stat.S_ISDIR(st.st_mode) else '?'\n"
                                  "    print(name, kind, os.major(st.st_rdev), os.minor(st.st_rdev))\n"
                                  "for path in ('/tmp/sda', 'mem'):\n"
                                  "    try:\n"
                                  "        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 1))\n"
                                  "        print('made', path)\n"
                                  "    except OSError as e:\n"
                                  "        print('refused', e.errno)", "--no-network")
    lines = result["output"].splitlines()
    nodes = {line.split()[0]: tuple(line.split()[1:]) for line in lines if len(line.split()) == 4}
    chars = {name: (int(v[1]), int(v[2])) for name, v in nodes.items() if v[0] == "c"}
    assert chars == {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8),
                     "urandom": (1, 9), "tty": (5, 0)}, result["output"]
    assert set(nodes) - set(chars) == {"fd", "stdin", "stdout", "stderr", "shm"}, nodes
    assert [line for line in lines if line.startswith(("made", "refused"))] == ["refused 1"] * 2


def test_planted_symlinks_do_not_lead_removal_outside(runbox, tmp_path):
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep.txt").write_text("keep")
    code = f"ln -s {canary} c; ln -s {canary}/keep.txt k; mkdir -p d/e; ln -s {canary} d/e/c"
    assert runbox.run("bash", code, "--session", "planted", "--no-network")["success"]
    assert runbox.cli("sessions", "rm", "planted").returncode == 0
    assert (canary / "keep.txt").read_text() == "keep"
    assert runbox.run("bash", code, "--session", "planted2", "--no-network")["success"]
    time.sleep(2.1)
    assert runbox.cli("sessions", "gc", "--idle", "0.5").returncode == 0
    assert not os.path.exists(runbox.session_dir("planted2"))
    assert (canary / "keep.txt").read_text() == "keep"


# --- network -----------------------------------------------------------------------------

class LoopbackServer:
    """A TCP server on the host's loopback that counts connections."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.sendall(b"host-loopback\n")
            conn.close()

    def close(self):
        self.sock.close()


@pytest.fixture
def loopback_server():
    server = LoopbackServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def outside_host():
    """A test host in a network namespace of our own, reached through a veth pair: stands in
    for an outside host (this machine has no internet, and no traffic may leave it)."""
    if not IS_ROOT or not shutil.which("ip"):
        pytest.skip("creating a test host needs root and iproute2")
    name = f"rbxt{os.getpid() % 100000}"
    host_if, ns_if = f"{name}h", f"{name}n"
    # A /24 that no route of the host's uses: concurrent workers' pids differ, and a test host
    # left by a run that was killed before its teardown must not take this one's traffic.
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    pid = os.getpid()
    for tries in range(250):
        subnet = f"10.{100 + pid % 100}.{(pid // 100 + tries) % 250}"
        if f"{subnet}.0/24" not in routes:
            break
    subnet_host, subnet_ns = f"{subnet}.1", f"{subnet}.2"
    cmds = [["ip", "netns", "add", name],
            ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
            ["ip", "link", "set", ns_if, "netns", name],
            ["ip", "addr", "add", f"{subnet_host}/24", "dev", host_if],
            ["ip", "link", "set", host_if, "up"],
            ["ip", "-n", name, "addr", "add", f"{subnet_ns}/24", "dev", ns_if],
            ["ip", "-n", name, "link", "set", ns_if, "up"],
            ["ip", "-n", name, "link", "set", "lo", "up"]]
    for cmd in cmds:
        subprocess.run(cmd, check=True, capture_output=True)
    server = subprocess.Popen(["ip", "netns", "exec", name, "/usr/bin/python3", "-c",
                               "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,"
                               "socket.SO_REUSEADDR,1)\ns.bind(('0.0.0.0',8099))\ns.listen(8)\n"
                               "while True:\n c,_=s.accept(); c.sendall(b'outside\\n'); c.close()"])
    time.sleep(0.5)
    yield subnet_ns
    server.kill()
    server.wait()
    subprocess.run(["ip", "link", "del", host_if], capture_output=True)
    subprocess.run(["ip", "netns", "del", name], capture_output=True)


CONNECT = """import socket, sys
for host, port in [(h, int(p)) for h, p in (a.split(':') for a in sys.argv[1:])]:
    try:
        s = socket.create_connection((host, port), timeout=3)
        print(host, 'connected', s.recv(64).decode().strip())
    except OSError as e:
        print(host, 'refused', type(e).__name__)
"""


def connect_from_sandbox(runbox, network_flag, *targets, env=None):
    code = CONNECT.replace("sys.argv[1:]", repr(list(targets)))
    result = runbox.run("python", code, network_flag, "--timeout", "30", env=env)
    return {line.split()[0]: line.split()[1] for line in result["output"].splitlines()}


@kernel_too
def test_network_off_reaches_neither_host_loopback_nor_outside(runbox, loopback_server, outside_host):
    seen = connect_from_sandbox(runbox, "--no-network", f"127.0.0.1:{loopback_server.port}",
                                f"10.0.2.2:{loopback_server.port}", f"{outside_host}:8099")
    assert seen == {"127.0.0.1": "refused", "10.0.2.2": "refused", outside_host: "refused"}
    assert loopback_server.accepted == 0


@kernel_too
@root_only
def test_network_on_reaches_outside_but_not_host_loopback(runbox, loopback_server, outside_host):
    # The test host has a private address, which the egress policy refuses unless the
    # operator allows it (tests/e2e/test_egress.py tries the policy itself).
    allow = {"RUNBOX_EGRESS_ALLOW": outside_host.rsplit(".", 1)[0] + ".0/24"}
    seen = connect_from_sandbox(runbox, "--network", f"{outside_host}:8099",
                                f"127.0.0.1:{loopback_server.port}", f"10.0.2.2:{loopback_server.port}",
                                env=allow)
    assert seen == {outside_host: "connected", "127.0.0.1": "refused", "10.0.2.2": "refused"}
    assert loopback_server.accepted == 0


def parent_of(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


@root_only
def test_the_network_helper_confines_itself_before_it_reads_a_packet(runbox, loopback_server):
    """runbox-net parses the sandbox's frames, started by root: it runs as nobody, with no
    capability, no new privileges, a seccomp filter, an empty root of its own and only its two
    descriptors, in the host's network; through it the sandbox does not reach the host's
    loopback (10.0.2.2), even with the egress policy opened to that network."""
    before = set(live_helpers())
    code = ("import socket,time\n"
            "s=socket.socket(); s.settimeout(3)\n"
            f"r=s.connect_ex(('10.0.2.2',{loopback_server.port}))\n"
            "print('host loopback', 'refused' if r else 'connected', flush=True)\n"
            "print('waiting', flush=True); time.sleep(4)\n")
    proc = runbox.start("python", code, "--network", "--timeout", "30",
                        env={"RUNBOX_EGRESS_ALLOW": "10.0.2.0/24"}, until="waiting")
    try:
        new = [p for p in live_helpers() if p not in before]
        ours = [p for p in new if parent_of(p) == proc.pid] or new
        assert ours, "no runbox-net runs for a network-on execution"
        pid = ours[0]
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
        assert status["Uid"].split() == ["65534"] * 4, status["Uid"]
        assert status["Gid"].split() == ["65534"] * 4, status["Gid"]
        assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0, status
        assert status["NoNewPrivs"].strip() == "1"
        assert status["Seccomp"].strip() == "2"
        assert os.listdir(f"/proc/{pid}/root") == []
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd")) == [0, 1, 2, 3, 4]
        assert os.readlink(f"/proc/{pid}/fd/3") == "/dev/net/tun"
        assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        assert os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")
    finally:
        out, _ = proc.communicate(timeout=60)
    result = [json.loads(line) for line in out.splitlines() if line.strip()][-1]
    assert result["type"] == "result" and "host loopback refused" in result["output"], result
    assert loopback_server.accepted == 0


def network_namespaces_alive():
    """Network namespaces the kernel holds (its slab's active objects), or None. The slab is
    shrunk first: each CPU keeps whole slabs of its own (7 namespaces each here) that count
    as active while they hold no namespace, a slab's worth or two of noise otherwise."""
    with contextlib.suppress(OSError):
        with open("/sys/kernel/slab/net_namespace/shrink", "w") as f:
            f.write("1")
    try:
        for line in open("/proc/slabinfo"):
            if line.startswith("net_namespace "):
                return int(line.split()[1])
    except OSError:
        pass
    return None


@pytest.mark.serial
@root_only
def test_network_on_executions_leave_no_network_namespace_behind(runbox):
    """The sandbox's tap is persistent (so that closing it is cheap) and must still go with
    its namespace: 30 network-on executions, one that woke runbox-net among them, leave the
    kernel's count of network namespaces where it was."""
    before = network_namespaces_alive()
    if before is None:
        pytest.skip("no /proc/slabinfo here")
    runbox.run("python", "import socket\nsocket.create_connection(('pypi.org',443),timeout=10)",
               "--network", "--timeout", "30")
    for _ in range(30):
        runbox.run("bash", "true", "--network")
    # The pooled pass's daemon keeps prepared sandboxes, each a namespace of its own, as many
    # as the runs' pace made it keep: what is counted is what the executions left.
    stop_daemons(runbox.state_dir)
    deadline = time.time() + 20
    while network_namespaces_alive() > before + 5 and time.time() < deadline:
        time.sleep(0.2)
    assert network_namespaces_alive() <= before + 5, (before, network_namespaces_alive())
    with open("/proc/net/dev") as f:
        assert "tap0" not in f.read()  # none was moved into the host's namespace


@root_only
def test_a_program_that_sends_nothing_runs_without_a_network_relay(runbox):
    """runbox-net starts on a sandbox's first frame: a network-on program that resolves a name
    (runbox's resolver, on the sandbox's own loopback) and connects nowhere has none; one that
    connects gets one, and its connection works."""
    before = set(live_helpers())
    quiet = runbox.start("bash", "echo started; sleep 3", "--network", until="started")
    try:
        time.sleep(1)
        ours = {quiet.pid, *daemons(runbox.state_dir)}  # the pooled pass runs it in a daemon
        new = [p for p in live_helpers()
               if p not in before and parent_of(p) in ours]
        assert new == [], "a relay started for a sandbox that sent no frame"
    finally:
        quiet.communicate(timeout=60)
    result = runbox.run("python", "import socket\nprint(socket.gethostbyname('pypi.org') != '')\n"
                        "s=socket.create_connection(('pypi.org',443),timeout=10)\nprint('connected')",
                        "--network", "--timeout", "30")
    assert result["output"] == "True\nconnected\n", result


def test_the_sandboxs_init_is_runbox_init_and_holds_nothing_of_runbox(runbox):
    """Once the program runs, init is runbox-init (src/sandbox/reaper.c), the root's own copy
    of it (/.runbox/runbox-init: a checkpoint finds it in the sandbox's files): no copy of runbox's
    memory (no mapping of runbox's program or libraries), no descriptor but its stdio and the
    status pipe; and the program's exit code still comes back through it."""
    marker = unique_marker()
    proc = runbox.start("bash", f"echo started; (exec -a {marker} sleep 5); exit 7", "--no-network",
                        until="started")
    try:
        deadline = time.time() + 20
        while not processes_matching(marker) and time.time() < deadline:
            time.sleep(0.05)
        sleeping = processes_matching(marker)
        assert sleeping, "the program's child is not running"
        init = parent_of(parent_of(sleeping[0]))  # sleep's parent is the program, bash
        status = dict(line.split(":", 1) for line in open(f"/proc/{init}/status").read().splitlines())
        assert status["Name"].strip() == "runbox-init"
        assert int(status["VmRSS"].split()[0]) < 4096, status["VmRSS"]  # KiB; runbox's copy was far more
        # Its exe, maps and descriptors: ptrace-gated (another uid's), so as root only.
        if IS_ROOT:
            assert os.readlink(f"/proc/{init}/exe") == "/.runbox/runbox-init"
            maps = open(f"/proc/{init}/maps").read()
            files = {line.split()[-1] for line in maps.splitlines() if len(line.split()) >= 6}
            assert {f for f in files if f.startswith("/")} == {"/.runbox/runbox-init"}, files
            fds = sorted(int(fd) for fd in os.listdir(f"/proc/{init}/fd"))
            assert fds[:3] == [0, 1, 2] and len(fds) == 4, fds
    finally:
        out, _ = proc.communicate(timeout=60)
    result = [json.loads(line) for line in out.splitlines() if line.strip()][-1]
    assert result["type"] == "result" and result["exit_code"] == 7, result


@kernel_too
def test_abstract_unix_sockets_do_not_cross_sessions(runbox):
    name = "rbx-" + uuid.uuid4().hex[:8]
    listen = (f"import socket,time\ns=socket.socket(socket.AF_UNIX)\ns.bind('\\0{name}')\n"
              "s.listen(1)\nprint('listening', flush=True)\ntime.sleep(4)")
    network = "--network" if IS_ROOT else "--no-network"  # rootless networking may be absent
    proc = runbox.start("python", listen, "--session", "a1", network, until="listening")
    connect = (f"import socket\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect('\\0{name}')\n"
               " print('connected')\nexcept OSError as e: print('refused')")
    result = runbox.run("python", connect, "--session", "b1", network)
    proc.wait(30)
    assert result["output"] == "refused\n"


# --- nothing left behind -----------------------------------------------------------------

@pytest.mark.serial
@root_only
def test_cgroups_left_by_a_killed_runbox_are_swept_and_live_ones_kept(runbox):
    runbox.run("bash", "true", "--no-network")  # makes sure runbox/ exists in each hierarchy
    gone = subprocess.Popen(["true"])
    gone.wait()
    tag = uuid.uuid4().hex[:12]
    with open("/proc/self/stat") as f:  # this process's start, in clock ticks since boot
        start = int(f.read().rsplit(")", 1)[1].split()[19])
    me = f"{os.getpid()}-s{start}"
    ages = {f"exec-stale{tag}": 7200,  # no owner in the name, two hours old
            f"exec-{gone.pid}-dead{tag}": 7200,  # named after a runbox that is gone
            f"exec-{gone.pid}-justdead{tag}": 0,  # the same, seconds old: swept at once too
            f"exec-fresh{tag}": 0,  # no owner in the name, fresh: may belong to a starting one
            f"exec-{os.getpid()}-owned{tag}": 0,  # its runbox still runs
            # Marked with its maker's start (base/owner.h): kept while that very process runs,
            # though its time says it was made before the host booted (as a wall clock that
            # ran fast against the boot clock, or was stepped, makes a long-running server's
            # first cgroups look); swept when the pid is another process's or nobody's.
            f"exec-{me}-marked{tag}": 10 ** 7,
            f"exec-{os.getpid()}-s{start + 1}-reused{tag}": 0,
            f"exec-{gone.pid}-s{start}-markedgone{tag}": 0}
    with planted_cgroups(ages) as planted:
        # A new runbox process that runs the code itself sweeps at start.
        runbox.run("bash", "true", "--no-network", "--use-daemon", "never")
        assert existing(planted[f"exec-stale{tag}"]) == []
        assert existing(planted[f"exec-{gone.pid}-dead{tag}"]) == []
        assert existing(planted[f"exec-{gone.pid}-justdead{tag}"]) == []
        assert existing(planted[f"exec-fresh{tag}"]) == planted[f"exec-fresh{tag}"]
        owned = planted[f"exec-{os.getpid()}-owned{tag}"]
        assert existing(owned) == owned
        marked = planted[f"exec-{me}-marked{tag}"]
        assert existing(marked) == marked
        assert existing(planted[f"exec-{os.getpid()}-s{start + 1}-reused{tag}"]) == []
        assert existing(planted[f"exec-{gone.pid}-s{start}-markedgone{tag}"]) == []


@kernel_too
def test_the_cgroup_namespace_shows_the_execution_its_own_cgroup_as_root(runbox):
    """Nothing of the host's cgroup tree, runbox's name for the execution included, shows."""
    result = runbox.run("bash", "cat /proc/self/cgroup", "--no-network")
    paths = [line.split(":", 2)[2] for line in result["output"].splitlines()]
    assert paths and set(paths) == {"/"}, result["output"]


@pytest.mark.serial
def test_zz_nothing_is_left_on_the_host():
    """Runs last in this module: no process, mount, cgroup or helper of any case is left."""
    deadline = time.time() + 10
    while sandbox_processes() and time.time() < deadline:
        time.sleep(0.1)
    assert sandbox_processes() == []
    with open("/proc/self/mountinfo") as f:
        leftovers = [line for line in f if "/pytest-" in line and "/sessions/" in line]
    assert leftovers == []
    for hierarchy in ("/sys/fs/cgroup/memory/runbox", "/sys/fs/cgroup/pids/runbox",
                      "/sys/fs/cgroup/runbox"):
        if os.path.isdir(hierarchy):
            assert [d for d in os.listdir(hierarchy) if d.startswith("exec-")] == []
    # A killed helper finishes exiting just after its runbox returned (~25 ms).
    deadline = time.time() + 10
    while live_helpers() and time.time() < deadline:
        time.sleep(0.1)
    assert live_helpers() == []
