"""Other users of the host: no file of a sandbox or a session (scratch space, homes, /tmp,
/dev/shm, environments, kernels' files, sessions being imported, images being unpacked) can be
read, listed, written or created by a host user other than root and, for unprivileged runbox,
runbox's own user. The attacker here knows every name under the state directory (the test gives
it all of them, as root sees them, and what /proc/PID/mountinfo of the sandboxes shows) and acts
as `nobody`.

What stays visible, on purpose: the state directory itself can be traversed (0711) but not
listed, so that ordinary users can run on its image store; images/ and the image trees in it are
system software, readable like /usr (images/tmp, where images are made, is not)."""
import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import (Runbox, processes_matching, sandbox_processes, unique_marker,
                      unmount_storage_below)

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
PLANT = "planted-by-another-user"

# Runs as the other user: tries every path it is given and every one the sandboxes' mount
# tables name, and says what it could do. Nothing is truncated or overwritten: a file that
# opens for writing is closed at once.
WALKER = r"""
import errno, json, os, socket, stat, sys
given = json.load(sys.stdin)
paths = list(given["paths"])
sessions = given["sessions"]
mountinfo_read = []
for pid in given["pids"]:
    for inside in ("root/tmp", "root/dev/shm", "root/home/user", "cwd", "root"):
        paths.append(f"/proc/{pid}/{inside}")
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        continue
    mountinfo_read.append(pid)
    for line in lines:
        fields = line.split()
        root = fields[3]
        if root != "/":  # a bound directory: its path below the storage, or the host's /
            for path in (os.path.join(sessions, root.lstrip("/")), root):
                paths += [path, os.path.dirname(path)]
done = {"read": [], "listed": [], "written": [], "created": [], "connected": [],
        "mountinfo_read": mountinfo_read}
for path in dict.fromkeys(paths):
    try:
        st = os.lstat(path)
    except OSError:
        continue
    if stat.S_ISDIR(st.st_mode):
        try:
            os.listdir(path)
            done["listed"].append(path)
        except OSError:
            pass
        try:
            os.close(os.open(os.path.join(path, given["plant"]),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
            done["created"].append(path)
        except OSError:
            pass
    elif stat.S_ISSOCK(st.st_mode):
        with socket.socket(socket.AF_UNIX) as s:
            try:
                if len(path.encode()) < 100:
                    s.connect(path)
                else:  # longer than an AF_UNIX address: through the directory's descriptor
                    d = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
                    try:
                        s.connect(f"/proc/self/fd/{d}/{os.path.basename(path)}")
                    finally:
                        os.close(d)
                done["connected"].append(path)
            except OSError:
                pass
    elif stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        for flags, what in ((os.O_RDONLY, "read"), (os.O_WRONLY, "written")):
            try:
                os.close(os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY))
                done[what].append(path)
            except OSError:
                pass
json.dump(done, sys.stdout)
"""


def every_path(state_dir):
    """Every entry below the state directory as its owner sees it (links not followed), except
    the image trees in the store (system software, readable on purpose: see the docstring)."""
    found = [state_dir]
    for top, dirs, files in os.walk(state_dir):
        if os.path.relpath(top, state_dir) == "images":
            dirs[:] = [d for d in dirs if d == "tmp"]
        found += [os.path.join(top, name) for name in dirs + files]
    return found


def public_on_purpose(path, state_dir):
    """The image store: its names and trees are readable by anyone (the README says so)."""
    rel = os.path.relpath(path, state_dir)
    return rel == "images" or (rel.startswith("images/") and not rel.startswith("images/tmp"))


def as_nobody(paths, pids, state_dir):
    """What `nobody` could do to paths, and to the paths the sandboxes' mount tables name."""
    given = {"paths": paths, "pids": pids, "plant": PLANT,
             "sessions": os.path.join(state_dir, "sessions")}
    proc = subprocess.run([*NOBODY, "/usr/bin/python3", "-c", WALKER], input=json.dumps(given),
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def by_modes(paths, state_dir):
    """Without root no other user can be tried: what the mode bits let a user who is neither
    the owner nor in the group do (every directory above searchable by others)."""
    done = {"read": [], "listed": [], "written": [], "created": [], "connected": []}
    for path in paths:
        ancestors, parent = [], os.path.dirname(path)
        while True:
            ancestors.append(parent)
            if parent == "/":
                break
            parent = os.path.dirname(parent)
        if not all(os.stat(a).st_mode & stat.S_IXOTH for a in ancestors):
            continue
        mode = os.lstat(path).st_mode
        if stat.S_ISDIR(mode):
            if mode & stat.S_IROTH:
                done["listed"].append(path)
            if mode & stat.S_IWOTH and mode & stat.S_IXOTH:
                done["created"].append(path)
        elif stat.S_ISSOCK(mode):
            if mode & stat.S_IWOTH:
                done["connected"].append(path)
        elif stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
            if mode & stat.S_IROTH:
                done["read"].append(path)
            if mode & stat.S_IWOTH:
                done["written"].append(path)
    return done


def reached(done, state_dir):
    """What the other user did that it must not have been able to, by kind: in the state
    directory, or in a sandbox through /proc."""
    def ours(path):
        return path.startswith("/proc/") or (
            (path + "/").startswith(state_dir + "/") and not public_on_purpose(path, state_dir))
    return {what: [p for p in done[what] if ours(p)]
            for what in ("read", "listed", "written", "created", "connected")}


def processes_of(uid):
    """The pids of uid's processes: an unprivileged runbox's sandboxes run as its own user."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}").st_uid == uid:
                found.append(int(pid))
    return found


class AsUser(Runbox):
    """runbox run as another, ordinary user (an unprivileged runbox)."""

    def __init__(self, state_dir, uid):
        super().__init__(state_dir)
        self.prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]

    def cli(self, *args, input=None, env=None, timeout=120):
        return subprocess.run([*self.prefix, self.bin, *args], input=input, capture_output=True,
                              env=self.env(env), timeout=timeout, cwd="/")

    def popen(self, *args, env=None, stdin=None):
        return subprocess.Popen([*self.prefix, self.bin, *args], stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.env(env), cwd="/")


@contextlib.contextmanager
def open_base(owner=None):
    """A directory anyone may traverse (like /var/lib), so that only runbox's own modes stand
    between the other user and the state directory in it."""
    base = tempfile.mkdtemp(prefix="runbox-host-users-", dir="/tmp")
    os.chmod(base, 0o755)
    if owner is not None:
        os.chown(base, owner, owner)
    try:
        yield base
    finally:
        unmount_storage_below(base)  # were a case to fail before its own unmount
        shutil.rmtree(base, ignore_errors=True)


SECRETS = ("import os\n"
           "open('/tmp/secret.txt', 'w').write('kernel tmp')\n"
           "open('/dev/shm/secret', 'w').write('kernel shm')\n"
           "open('secret-home.txt', 'w').write('kernel home')\n"
           "os.makedirs('careless', exist_ok=True); os.chmod('careless', 0o777)\n"
           "open('careless/loose.txt', 'w').write('x'); os.chmod('careless/loose.txt', 0o666)\n"
           "os.mkfifo('/tmp/fifo'); os.chmod('/tmp/fifo', 0o666)\n"
           "open('big.bin', 'wb').write(os.urandom(2 << 20))\n"
           "print('planted')")

LOOK_FOR_PLANTS = ("import os\n"
                   "print(sorted(os.path.join(d, n) for d in ('/tmp', '/dev/shm', '.', 'careless')"
                   f" for n in os.listdir(d) if n.startswith({PLANT!r})))")


def kernel_call(box, code):
    result = box.run("python", code, "--stateful", "--session", "kept", "--no-network")
    assert result["success"], result
    return result


@contextlib.contextmanager
def busy_state(box):
    """A state directory in use: a stateful kernel with files in its /tmp, /dev/shm and home,
    a one-off run that is still running with files in its /tmp and home, a dependency
    environment, and a session imported through a pipe that is held open (whether runbox places
    its files as they come or once the archive is whole, they are walked where it puts them).
    Yields the marker of the one-off run's processes."""
    assert kernel_call(box, SECRETS)["output"] == "planted\n"
    built = box.run("python", "import numpy", "--require", "numpy", "--no-network",
                    env={"PIP_NO_INDEX": "1"}, timeout=400)
    assert built["success"], built
    archive = box.cli("sessions", "export", "kept").stdout
    assert len(archive) > 2 << 20
    importing = box.popen("sessions", "import", "moving", stdin=subprocess.PIPE)
    marker = unique_marker()
    one_off = box.popen("run", "bash", "-c",
                        "echo one-off > /tmp/one-off-secret; echo one-off > one-off-home; "
                        f"echo ready; sleep {marker}", "--stream", "--no-network")
    try:
        importing.stdin.write(archive)
        importing.stdin.flush()
        for line in one_off.stdout:
            if "ready" in json.loads(line).get("data", ""):
                break
        work = os.path.join(box.state_dir, "sessions", "moving", "work")
        deadline = time.monotonic() + 30
        while not (os.path.isdir(work) and os.listdir(work)):
            assert time.monotonic() < deadline, "the import placed nothing"
            time.sleep(0.05)
        yield marker
    finally:
        for proc in (importing, one_off):
            proc.kill()
            proc.wait()
        for pid in processes_matching(marker):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def assert_nothing_reached(box, done):
    found = {what: sorted(os.path.relpath(p, box.state_dir) for p in paths)
             for what, paths in reached(done, box.state_dir).items() if paths}
    assert not found, "another user could do this in the state directory:\n" + "\n".join(
        f"  {what} ({len(paths)}): {', '.join(paths[:12])}" for what, paths in found.items())
    # What a kernel reads from its /tmp, /dev/shm and home, nobody put there.
    assert kernel_call(box, LOOK_FOR_PLANTS)["output"] == "[]\n"


def test_no_other_host_user_reaches_a_sandbox_or_session_file():
    with open_base() as base:
        box = Runbox(os.path.join(base, "state"))
        try:
            with busy_state(box) as marker:
                paths = every_path(box.state_dir)
                assert any("/moving/work/" in p for p in paths)  # the imported session
                if os.geteuid() == 0:
                    assert any(p.endswith("/tmp/secret.txt") for p in paths)  # scratch space
                    pids = sandbox_processes("kept") + processes_matching(marker)
                    assert pids
                    done = as_nobody(paths, pids, box.state_dir)
                    assert done["mountinfo_read"]  # the attacker did see the mount tables
                else:
                    done = by_modes(paths, box.state_dir)
            assert_nothing_reached(box, done)
        finally:
            box.remove_all_sessions()


@pytest.mark.skipif(os.geteuid() != 0, reason="running runbox as another user needs root")
def test_no_other_host_user_reaches_the_files_of_an_unprivileged_runbox():
    uid = 64000 + os.getpid() % 1000  # a user of its own, unknown to the others
    with open_base(owner=uid) as base:
        box = AsUser(os.path.join(base, "state"), uid)
        if box.cli("--version").returncode != 0:
            pytest.skip(f"{box.bin} cannot be run by uid {uid}")
        try:
            with busy_state(box) as marker:
                paths = every_path(box.state_dir)
                assert any("/moving/work/" in p for p in paths)
                assert any("/envs/" in p for p in paths)
                done = as_nobody(paths, processes_of(uid), box.state_dir)
            assert_nothing_reached(box, done)
            # runbox's own user still reaches everything of its own.
            result = kernel_call(box, "print(open('/tmp/secret.txt').read(), "
                                      "open('secret-home.txt').read())")
            assert result["output"] == "kernel tmp kernel home\n"
        finally:
            box.cli("sessions", "rm", "kept", "--wait", "30")
            box.cli("storage", "unmount")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user owns needs root")
def test_a_state_directory_that_another_user_owns_is_refused():
    """Its owner could open it up again at any time (chmod), or take out what runbox put in."""
    with open_base() as base:
        state = os.path.join(base, "state")
        os.mkdir(state, 0o700)
        os.chown(state, 65534, 65534)
        box = Runbox(state)
        proc = box.cli("run", "bash", "-c", "echo ran", "--no-network")
        assert proc.returncode == 1 and b"ran" not in proc.stdout, proc
        assert b"belongs to uid 65534" in proc.stderr, proc.stderr
        assert os.listdir(state) == []  # nothing was made in it


def test_a_state_directory_left_open_is_closed_when_runbox_starts():
    """An earlier runbox made sessions/, .trash, .scratch and envs/ 0711, an operator may have
    opened more: the next runbox closes each to its own user (the state directory to 0711)."""
    with open_base() as base:
        box = Runbox(os.path.join(base, "state"))
        try:
            built = box.run("python", "import numpy", "--require", "numpy", "--no-network",
                            env={"PIP_NO_INDEX": "1"}, timeout=400)
            assert built["success"], built
            inner = ["sessions", "sessions/.trash", "sessions/.scratch", "envs", "trash"]
            os.chmod(box.state_dir, 0o777)
            for name in inner:
                os.chmod(os.path.join(box.state_dir, name), 0o755)
            assert box.run("bash", "echo again", "--no-network")["output"] == "again\n"
            modes = {name: oct(stat.S_IMODE(os.stat(os.path.join(box.state_dir, name)).st_mode))
                     for name in ["", *inner]}
            assert modes == {"": "0o711", **{name: "0o700" for name in inner}}
            # Closed more (systemd's StateDirectoryMode=0700) stays so.
            os.chmod(box.state_dir, 0o700)
            assert box.run("bash", "echo closed", "--no-network")["output"] == "closed\n"
            assert stat.S_IMODE(os.stat(box.state_dir).st_mode) == 0o700
        finally:
            box.remove_all_sessions()
