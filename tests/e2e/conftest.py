"""Shared fixtures for end-to-end tests: they drive the real `runbox` binary."""
import base64
import contextlib
import glob
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNBOX = os.environ.get("RUNBOX_BIN", os.path.join(ROOT, "build", "runbox"))
# Images made by tests from the host's own programs (tests/lib/host_tree.py).
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from host_tree import host_programs_tree  # noqa: E402,F401
# Why a case CI ran again failed the first time, in the run's summary.
from rerun_why import pytest_runtest_logreport, pytest_terminal_summary  # noqa: E402,F401
# RUNBOX_TEST_POOLED=1 (make test-pooled): every `runbox run` goes to a daemon on the test's state
# directory, which serves it from a prepared sandbox (waiting for one to be made, where the
# product would start cold instead): the suite then attacks pooled sandboxes.
POOLED = os.environ.get("RUNBOX_TEST_POOLED") == "1"
POOLED_ENV = {"RUNBOX_USE_DAEMON": "always", "RUNBOX_POOL_WAIT": "15000",
              "RUNBOX_POOL_IDLE": "2"} if POOLED else {}
# RUNBOX_TEST_ON_IMAGE=DIR (make test-image): every runbox uses the image store DIR, so the
# suites run on its default image (Debian 13) instead of the host's /usr.
ON_IMAGE_ENV = {"RUNBOX_IMAGES": os.environ["RUNBOX_TEST_ON_IMAGE"]} \
    if os.environ.get("RUNBOX_TEST_ON_IMAGE") else {}


# Wall-time bounds of the cases are for real CPUs; in the cgroup v2 VM with its CPU emulated
# (tests/cgroup2, RBX_VM_ACCEL=tcg), beside the rest of make test, everything takes several
# times longer. A bound still proves what it is for (the program would otherwise run on for
# thousands of seconds) when multiplied by this.
SLOWDOWN = 4 if os.environ.get("RBX_VM_ACCEL") == "tcg" else 1


def default_image_tree():
    """The root a sandbox of this suite gets: the default image's tree in the store the suite
    runs on (RUNBOX_TEST_ON_IMAGE), or the host's /."""
    store = ON_IMAGE_ENV.get("RUNBOX_IMAGES")
    return os.path.realpath(os.path.join(store, "names", "default")) if store else "/"


class Runbox:
    """Runs `runbox` with a private state directory."""

    def __init__(self, state_dir):
        self.state_dir = state_dir
        self.bin = RUNBOX

    def env(self, extra=None):
        # The image store: the suite's (RUNBOX_TEST_ON_IMAGE), else one of the test's own, so
        # that no case runs on or writes into the host's store by chance.
        env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": self.state_dir, **POOLED_ENV,
               "RUNBOX_IMAGES": os.path.join(self.state_dir, "images"), **ON_IMAGE_ENV}
        # Keep sanitizer settings so ASan runs report into the test output.
        for key in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if key in os.environ:
                env[key] = os.environ[key]
        env.update(extra or {})
        return env

    def cli(self, *args, input=None, env=None, timeout=120):
        """Runs runbox with args; returns the CompletedProcess (text mode)."""
        return subprocess.run([self.bin, *args], input=input, capture_output=True,
                              env=self.env(env), timeout=timeout)

    def run(self, language, code, *args, env=None, timeout=120):
        """`runbox run LANGUAGE -c CODE --json ARGS`: returns the result object."""
        proc = self.cli("run", language, "-c", code, "--json", *args, env=env, timeout=timeout)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        lines = proc.stdout.decode().splitlines()
        assert len(lines) == 1, proc.stdout
        result = json.loads(lines[0])
        if "--stateful" not in args:  # a kernel's call never meets a prepared sandbox
            RUNS["total"] += 1
            RUNS["pooled"] += result.get("pooled") is True
        return result

    def start(self, language, code, *args, until, env=None):
        """`runbox run LANGUAGE -c CODE --stream ARGS` in the background, returned once the
        program has printed `until` (a stdout event): a test waits on the program's own word,
        not a fixed sleep. The caller waits for the process."""
        proc = self.popen("run", language, "-c", code, "--stream", *args, env=env)
        seen = ""
        for line in proc.stdout:
            event = json.loads(line)
            assert event["type"] != "result", f"ended before it printed {until!r}: {event}"
            seen += event.get("data", "") if event["type"] == "stdout" else ""
            if until in seen:
                return proc
        raise AssertionError(f"runbox ended before the program printed {until!r}")

    def popen(self, *args, env=None, stdin=None):
        return subprocess.Popen([self.bin, *args], stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.env(env))

    def remove_all_sessions(self):
        """Removes every session, then unmounts the state directory's storage (an image,
        mounted once, as root): a test leaves nothing mounted behind."""
        proc = self.cli("sessions", "list", "--json")
        if proc.returncode != 0:
            return
        for session in json.loads(proc.stdout or b"[]"):
            self.cli("sessions", "rm", session["session_id"], "--wait", "30")
        for trash in ("sessions/.trash", "trash"):
            path = os.path.join(self.state_dir, trash)
            if os.path.isdir(path):
                assert os.listdir(path) == [], f"a removed session left files behind in {trash}"
        # A daemon on its way out lets go of the storage within moments, later on a loaded
        # machine than runbox's own few seconds of patience: a teardown waits longer.
        deadline = time.time() + 30
        proc = self.cli("storage", "unmount")
        while proc.returncode != 0 and b"busy" in proc.stderr and time.time() < deadline:
            time.sleep(0.5)
            proc = self.cli("storage", "unmount")
        assert proc.returncode == 0, proc.stderr

    def mcp_call(self, tool, arguments, *args):
        """One tools/call through `runbox mcp ARGS` (after the handshake): the JSON-RPC reply,
        once the code has run."""
        messages = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": tool, "arguments": arguments}},
        ]
        proc = subprocess.Popen([self.bin, "mcp", *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env())
        try:
            proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
            proc.stdin.flush()
            while True:
                line = proc.stdout.readline()
                assert line, proc.stderr.read()
                reply = json.loads(line)
                if reply.get("id") == 2:
                    return reply
        finally:
            proc.stdin.close()
            assert proc.wait(timeout=60) == 0

    def session_dir(self, session_id):
        return os.path.join(self.state_dir, "sessions", session_id)


def unmount_storage_below(path):
    """Unmounts the storage images and pinned prepared namespaces (each mounted once per state
    directory, as root) of every state directory a test made below path: tests that make state
    directories of their own leave no mount behind. Returns what was still mounted."""
    left = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            target = fields[4].replace("\\040", " ")
            if target.startswith(str(path) + "/") and (target.endswith("/sessions") or
                                                         "/templates" in target):
                left.append(target)
    for target in sorted(left, reverse=True):  # a pinned namespace before its directory
        subprocess.run(["umount", "-l", target], capture_output=True)
    return left


@pytest.fixture(autouse=True)
def no_storage_left_mounted(tmp_path):
    yield
    unmount_storage_below(tmp_path)


@pytest.fixture
def runbox(tmp_path):
    state = tmp_path / "state"
    box = Runbox(str(state))
    yield box
    if POOLED:
        stop_daemons(str(state))
    box.remove_all_sessions()


def stop_daemons(state_dir, seconds=30):
    for pid in daemons(state_dir):
        with contextlib.suppress(OSError):
            os.kill(pid, 15)
    deadline = time.monotonic() + seconds
    while daemons(state_dir) and time.monotonic() < deadline:
        time.sleep(0.05)


def daemons(state_dir):
    """The `runbox daemon` processes serving state_dir. A sandbox's init, and any child the
    daemon forked that has not exec'd yet, shows its parent's command line: only a process
    whose parent is not itself such a process counts."""
    argvs = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if argv[1:4] == [b"daemon", b"--state-dir", state_dir.encode()]:
            argvs[int(pid)] = parent
    return sorted(pid for pid, parent in argvs.items() if parent not in argvs)


def public_address():
    """An address the default egress policy allows: PyPI's, which users reach anyway (pip
    installs do). Tests that narrow or refuse egress connect to it: were the policy broken,
    the connection would only reach the package index. Skips where it does not resolve."""
    import socket
    try:
        return socket.getaddrinfo("pypi.org", 443, socket.AF_INET)[0][4][0]
    except OSError:
        pytest.skip("pypi.org does not resolve here")


def unique_marker():
    """A number no other process has in its command line: `sleep MARKER` sleeps long."""
    import random
    return f"{random.randint(1000, 9999)}.{random.randint(100000, 999999)}"


def processes_matching(marker):
    """Host pids of sandboxed processes whose command line contains marker."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            # runbox's own command line carries the code, and so does the nsenter that some
            # tests run it with until it becomes runbox; only the code's processes count.
            launcher = os.path.basename(cmdline.split(b"\0")[0])
            if marker.encode() in cmdline and launcher not in (b"runbox", b"nsenter"):
                found.append(int(pid))
        except OSError:
            pass
    return found


def wait_gone(marker, seconds=5.0):
    """Processes die asynchronously after a namespace is torn down."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        left = processes_matching(marker)
        if not left:
            return []
        time.sleep(0.05)
    return processes_matching(marker)


def execution_cgroups():
    """The exec-* cgroups of runbox in every hierarchy (resolved, so that a hierarchy mounted
    under two names counts once)."""
    found = set()
    for parent in glob.glob("/sys/fs/cgroup/*/runbox") + ["/sys/fs/cgroup/runbox"]:
        if os.path.isdir(parent):
            found |= {os.path.realpath(os.path.join(parent, d)) for d in os.listdir(parent)
                      if d.startswith("exec-")}
    return found


def remove_cgroups_left_since(before, seconds=5.0):
    """A runbox killed outright leaves its execution's cgroups for a later runbox to sweep
    (after a minute): checks they hold no process once its processes are gone, and removes
    them, so that the last case of a suite finds none."""
    for path in execution_cgroups() - before:
        deadline = time.time() + seconds  # the sandbox's init exits just after its program
        try:
            # A daemon's prepared sandbox, not yet anyone's, is left alone: also one still
            # being made when the check began (its interpreter comes to wait meanwhile).
            prepared = False
            while cgroup_procs(path) and time.time() < deadline and not prepared:
                prepared = POOLED and any(waiting_in_pool(int(p))
                                          for p in cgroup_procs(path).split())
                time.sleep(0.05)
            if prepared:
                continue
            assert cgroup_procs(path) == "", f"{path} still holds processes"
            os.rmdir(path)
        except FileNotFoundError:
            pass  # another runbox started meanwhile and swept it, as it should


def cgroup_procs(path):
    with open(os.path.join(path, "cgroup.procs")) as f:
        return f.read()


def runbox_cgroup_parents():
    """Every hierarchy's runbox/ directory (freezer's is a leftover of older versions)."""
    return sorted({os.path.realpath(p) for p in glob.glob("/sys/fs/cgroup/*/runbox") +
                   glob.glob("/sys/fs/cgroup/runbox")
                   if os.path.isdir(p) and "freezer" not in p})


@contextlib.contextmanager
def planted_cgroups(ages):
    """Plants exec-* directories in every hierarchy, as a runbox killed outright leaves them:
    ages maps a directory name to how old it should look, in seconds. Yields {name: [paths]};
    removes whatever is left afterwards."""
    parents = runbox_cgroup_parents()
    assert parents, "no runbox cgroup directory: cgroups are not in use"
    planted = {name: [os.path.join(parent, name) for parent in parents] for name in ages}
    try:
        for name, paths in planted.items():
            for path in paths:
                os.mkdir(path)
                then = time.time() - ages[name]
                os.utime(path, (then, then))
        yield planted
    finally:
        for paths in planted.values():
            for path in paths:
                if os.path.isdir(path):
                    os.rmdir(path)


def existing(paths):
    return [path for path in paths if os.path.isdir(path)]


def sandbox_processes(session_id=None):
    """Host processes running as the sandbox's host uids (as root), other than zombies; with
    session_id, only those of that session's executions (runbox puts RUNBOX_SESSION_ID in
    their environment), so that other runbox users on the machine do not count."""
    if os.geteuid() != 0:
        return []
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        uid = int(status["Uid"].split()[0])
        if not (3000000 <= uid < 3002000) or status["State"].strip().startswith("Z"):
            continue
        if session_id:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    environ = f.read().split(b"\0")
            except OSError:
                continue
            # A prepared sandbox's program started before its session was known: its
            # environ names none (the bootstrap sets the variable later, in the process).
            pooled = POOLED and b"RUNBOX_SESSION_ID=" in environ and not waiting_in_pool(pid)
            if f"RUNBOX_SESSION_ID={session_id}".encode() not in environ and not pooled:
                continue
        found.append(int(pid))
    return found


def waiting_in_pool(pid):
    """A prepared sandbox's interpreter still waiting for its code: its fd 3 (the code's
    socket) and 4 (the report) are open; a bootstrap closes both before any code runs."""
    try:
        return os.readlink(f"/proc/{pid}/fd/3").startswith("socket:") and \
            os.readlink(f"/proc/{pid}/fd/4").startswith("pipe:")
    except OSError:
        return False


def live_helpers():
    """The runbox-net processes that have not exited, by their program's name: a command
    line may only mention it (the shell of CI's unprivileged stage copies the file)."""
    helpers = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "runbox-net":
                    continue
            if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                helpers.append(int(pid))
        except OSError:
            pass
    return helpers


# Runs through Runbox.run, and how many a prepared sandbox served.
RUNS = {"total": 0, "pooled": 0}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """With pytest-xdist each worker counts its own runs: the controller adds them up."""
    runs = getattr(node, "workeroutput", {}).get("runbox_runs", {})
    for key in RUNS:
        RUNS[key] += runs.get(key, 0)


def pytest_sessionfinish(session, exitstatus):
    """In the pooled pass many runs must have met a prepared sandbox (some cannot: stdin,
    requirements, a narrowed egress policy, a configuration of their own): else the pass
    proved nothing about pooled sandboxes."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its controller judges
        workeroutput["runbox_runs"] = dict(RUNS)
        return
    if POOLED and RUNS["total"]:
        share = RUNS["pooled"] / RUNS["total"]
        print(f"\npooled pass: {RUNS['pooled']} of {RUNS['total']} runs served by prepared "
              f"sandboxes ({share:.0%})")
        if share < 0.3 and session.exitstatus == 0:
            session.exitstatus = 1


SERIAL_MARKER = ("serial: the case looks at the whole host (every runbox cgroup, every sandbox "
                 "process, cgroups planted for any runbox to sweep), so it runs alone, after the "
                 "parallel part of the suite (make test: -m 'not serial' with xdist, then -m serial)")


def pytest_collection_modifyitems(config, items):
    """In the pooled pass a prepared sandbox's program names no session in its environment
    until its code runs (sandbox_processes counts it for any session then), so a case that
    counts a session's processes would count another worker's: such cases run alone there."""
    if not POOLED:
        return
    import inspect
    for item in items:
        function = getattr(item, "function", None)
        if function and "sandbox_processes(" in inspect.getsource(function):
            item.add_marker(pytest.mark.serial)


def pytest_configure(config):
    config.addinivalue_line("markers", "kernel_too: the case runs against a session's kernel too "
                                       "(stateful calls), not only fresh runs")
    config.addinivalue_line("markers", SERIAL_MARKER)


# --- a package index of our own on loopback (PyPI is not reachable here) -----------------

def build_wheel(directory, name, version, body):
    """Writes a minimal pure-Python wheel by hand (a zip with dist-info)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": body,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: runbox-tests\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    filename = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, filename), "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
    return filename


@contextlib.contextmanager
def serve_package_index(root, name, version, body):
    """A PEP 503 simple index on 127.0.0.1 under root, serving one wheel built here:
    {"url", "requests" (paths asked for), "dir"}."""
    (root / "simple" / name).mkdir(parents=True)
    wheel = build_wheel(str(root / "simple" / name), name, version, body)
    (root / "simple" / name / "index.html").write_text(
        f'<html><body><a href="{wheel}">{wheel}</a></body></html>')
    (root / "simple" / "index.html").write_text(f'<a href="{name}/">{name}</a>')
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(root), **k)

        def log_message(self, *a):
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield {"url": f"http://127.0.0.1:{server.server_address[1]}/simple",
               "requests": requests, "dir": root}
    finally:
        server.shutdown()


# --- hibernation (issue 34) ------------------------------------------------------------------

# A kernel idles out (and hibernates, where criu works) a second after its call.
HIBERNATE_SOON = {"RUNBOX_KERNEL_IDLE": "1", "RUNBOX_POOL": "0"}
_hibernation = {}


def hibernation_here(tmp_path_factory):
    """(whether kernels hibernate here, why not): root and a criu that works, asked once per
    run through `runbox check`."""
    if "answer" not in _hibernation:
        if os.geteuid() != 0:
            _hibernation["answer"] = (False, "hibernation needs root (criu)")
        else:
            from test_checkpoints import checkpoints_line
            box = Runbox(str(tmp_path_factory.mktemp("criu-check") / "state"))
            line = checkpoints_line(box)
            box.remove_all_sessions()
            _hibernation["answer"] = (line["ok"], f"no working criu here: {line['detail']}")
    return _hibernation["answer"]


def kernel_entry(runbox, session, language):
    listed = json.loads(runbox.cli("sessions", "list", "--json").stdout)
    for s in listed:
        if s["session_id"] == session:
            return next((k for k in s["kernels"] if k["language"] == language), None)
    return None


def wait_hibernated(runbox, session, language, seconds=40 * SLOWDOWN):
    deadline = time.time() + seconds
    while time.time() < deadline:
        entry = kernel_entry(runbox, session, language)
        if entry and entry["state"] == "hibernated":
            return entry
        time.sleep(0.25)
    raise AssertionError(f"the {language} kernel of {session} did not hibernate: "
                         f"{kernel_entry(runbox, session, language)}")
