"""Stateful sessions through the CLI: a live interpreter per session and language, reached
through the state directory's local socket (runbox daemon, started on demand), with rich
outputs, interrupts that keep state, and kernels that go when they must, leaving nothing."""
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time

import pytest

from conftest import (SLOWDOWN, daemons, execution_cgroups, processes_matching, sandbox_processes,
                      unique_marker)


def started(marker, seconds=5.0):
    """The processes whose command line holds marker, once one has appeared: a background job
    is forked before the call returns, but may not have exec'd yet."""
    deadline = time.time() + seconds
    while not processes_matching(marker) and time.time() < deadline:
        time.sleep(0.02)
    return processes_matching(marker)


def call(runbox, language, code, session="st", *args, env=None):
    return runbox.run(language, code, "--stateful", "--session", session, "--no-network", *args,
                      env=env)


def values(result):
    """The text of each rich output."""
    return [r["data"].get("text/plain") for r in result["results"]]


def png_size(b64):
    """Width and height of a PNG, from its IHDR chunk: proof the bytes are a real PNG."""
    data = base64.b64decode(b64)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def kernels(runbox):
    """The daemon holding kernels is stopped with the test (storage unmount asks it to)."""
    yield runbox


# --- state persists ------------------------------------------------------------------------

def test_python_keeps_globals_imports_definitions_and_the_working_directory(kernels):
    assert call(kernels, "python", "import os, math\nx = 40\ndef twice(v): return 2 * v")["success"]
    assert call(kernels, "python", "os.chdir('/tmp'); x += 2")["success"]
    result = call(kernels, "python", "print(os.getcwd(), math.pi > 3)\ntwice(x)")
    assert result["output"] == "/tmp True\n"
    assert values(result) == ["84"] and result["results"][0]["kind"] == "execute_result"
    assert result["stateful"] is True and result["execution_count"] == 3


def test_javascript_keeps_top_level_declarations_and_awaits(kernels):
    call(kernels, "javascript", "const base = 40; let count = 1; function add(a) { return base + a }")
    call(kernels, "javascript", "count += 1; const later = await Promise.resolve(count)")
    result = call(kernels, "javascript", "add(later)")
    assert values(result) == ["42"], result
    imported = call(kernels, "javascript", "import path from 'path'; import { sep } from 'node:path'\n"
                                          "path.join('a', 'b') + sep")
    assert values(imported) == ["'a/b/'"], imported


def test_bash_keeps_cwd_exports_functions_and_aliases(kernels):
    call(kernels, "bash", "cd /tmp && export GREETING=hello\nf() { echo \"f:$1\"; }\nalias ll='ls -d'")
    result = call(kernels, "bash", "pwd; echo $GREETING; f x; ll /")
    assert result["output"] == "/tmp\nhello\nf:x\n/\n", result


def test_files_persist_and_stateless_runs_work_beside_the_kernel(kernels):
    call(kernels, "python", "secret = 7\nopen('shared.txt', 'w').write('from the kernel')")
    plain = kernels.run("bash", "cat shared.txt", "--session", "st", "--no-network")
    assert plain["output"] == "from the kernel" and plain["stateful"] is False
    assert call(kernels, "python", "secret")["results"][0]["data"]["text/plain"] == "7"


def test_two_sessions_never_see_each_others_variables(kernels):
    call(kernels, "python", "mine = 'a'", "one")
    call(kernels, "python", "mine = 'b'", "two")
    assert values(call(kernels, "python", "mine", "one")) == ["'a'"]
    assert values(call(kernels, "python", "mine", "two")) == ["'b'"]
    pids = [call(kernels, "python", "import os; os.getpid(), open('/proc/self/cgroup').read()",
                 s)["results"][0]["data"]["text/plain"] for s in ("one", "two")]
    assert pids[0] == pids[1]  # each is PID 2 of a namespace of its own, as seen inside


# --- rich outputs --------------------------------------------------------------------------

def test_a_matplotlib_plot_is_a_png_without_show(kernels):
    result = call(kernels, "python", "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nNone")
    assert result["success"], result["error"]
    images = [r for r in result["results"] if "image/png" in r["data"]]
    assert len(images) == 1 and images[0]["kind"] == "display_data"
    width, height = png_size(images[0]["data"]["image/png"])
    assert width > 100 and height > 100
    assert "Fontconfig" not in result["error"]


def test_matplotlib_imports_in_a_stateless_run_too(kernels):
    result = kernels.run("python", "import matplotlib\nimport matplotlib.pyplot as plt\n"
                                   "plt.plot([1, 2]); plt.savefig('p.png'); print('ok')",
                         "--no-network")
    assert result["output"] == "ok\n", result["error"]


def test_a_dataframe_gives_html_and_text(kernels):
    result = call(kernels, "python", "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})")
    data = result["results"][0]["data"]
    assert result["results"][0]["kind"] == "execute_result"
    assert "<table" in data["text/html"] and "a" in data["text/plain"]


def test_repr_methods_mimebundle_and_display(kernels):
    code = ("class Rich:\n"
            "    def _repr_html_(self): return '<b>rich</b>'\n"
            "    def _repr_markdown_(self): return '**rich**'\n"
            "    def _repr_png_(self): return b'\\x89PNG fake'\n"
            "class Bundle:\n"
            "    def _repr_mimebundle_(self, **kw): return {'application/json': {'k': 1}, 'text/plain': 'B'}\n"
            "display(Rich())\n"
            "display(Bundle())\n"
            "Rich()")
    result = call(kernels, "python", code)
    first, second, last = result["results"]
    assert first["kind"] == "display_data" and first["data"]["text/html"] == "<b>rich</b>"
    assert first["data"]["text/markdown"] == "**rich**"
    assert base64.b64decode(first["data"]["image/png"]) == b"\x89PNG fake"
    assert second["data"] == {"application/json": {"k": 1}, "text/plain": "B"}
    assert last["kind"] == "execute_result"


def test_results_are_bounded_and_the_cut_is_reported(kernels):
    result = call(kernels, "python", "for i in range(12):\n    display({'text/plain': 'x' * 1000000}, raw=True)")
    kept = sum(len(r["data"]["text/plain"]) for r in result["results"])
    assert kept <= 8 * 1024 * 1024 and result["truncated"]["results"] > 0, result["truncated"]


# --- failures keep state -------------------------------------------------------------------

def test_an_exception_keeps_the_kernel_and_its_state(kernels):
    call(kernels, "python", "kept = 'still here'")
    failed = call(kernels, "python", "1 / 0")
    assert failed["exception"] == "ZeroDivisionError" and failed["error_type"] == "RuntimeError"
    assert "ZeroDivisionError: division by zero" in failed["error"]
    assert "<string>" not in failed["error"]  # no frame of the kernel's own
    after = call(kernels, "python", "kept")
    assert values(after) == ["'still here'"] and after["kernel_restarted"] is False


def test_code_that_is_not_utf8_is_a_syntax_error_and_keeps_state(kernels):
    call(kernels, "python", "kept = 3")
    proc = kernels.cli("run", "python", "-c", b"print('ok')\nx = '\xff'", "--stateful",
                       "--session", "st", "--json", "--no-network")
    result = json.loads(proc.stdout)
    assert result["error_type"] == "SyntaxError" and "not UTF-8" in result["error"], result
    assert "offset 17 (line 2)" in result["error"] and result["output"] == ""  # nothing ran
    assert values(call(kernels, "python", "kept")) == ["3"]
    shell = kernels.cli("run", "bash", "-c", b"printf '%s' '\xff' | od -An -tx1", "--stateful",
                        "--session", "st", "--json", "--no-network")
    assert json.loads(shell.stdout)["output"].split() == ["ff"]  # bash takes any byte


def test_a_syntax_error_runs_nothing_and_keeps_state(kernels):
    call(kernels, "python", "n = 1")
    bad = call(kernels, "python", "n = 2\nif True print('x')")
    assert bad["error_type"] == "SyntaxError"
    assert values(call(kernels, "python", "n")) == ["1"]


@pytest.mark.parametrize("language,loop,check", [
    ("python", "x = 'kept'\nwhile True: pass", "x"),
    ("javascript", "var x = 'kept'; for (;;) {}", "x"),
    ("bash", "x=kept; while :; do :; done", "echo $x"),
])
def test_a_timeout_interrupts_and_state_survives(kernels, language, loop, check):
    result = call(kernels, language, loop, "st", "--timeout", "2")
    assert result["error_type"] == "TimeoutError" and result["timed_out"] is True, result
    assert result["kernel_restarted"] is False and "keeps its state" in result["error"]
    after = call(kernels, language, check)
    assert "kept" in (after["output"] + "".join(v or "" for v in values(after))), after


@pytest.mark.parametrize("code", [
    "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nx = 1\nwhile True: pass",
    "import itertools\nx = 1\nmax(itertools.repeat(1))",  # a loop in C that never checks for signals
])
def test_code_that_ignores_the_interrupt_is_killed_and_the_kernel_restarts(kernels, code):
    call(kernels, "python", "pass", "st")  # the kernel started: its start is not timed below
    started = time.monotonic()
    result = call(kernels, "python", code, "st", "--timeout", "1")
    assert time.monotonic() - started < 10 * SLOWDOWN
    assert result["error_type"] == "TimeoutError" and result["kernel_restarted"] is True, result
    assert "state is lost" in result["error"]
    fresh = call(kernels, "python", "'x' in dir()")
    assert values(fresh) == ["False"] and fresh["execution_count"] == 1


def test_a_memory_bomb_is_a_memory_error_and_the_kernel_comes_back_fresh(kernels):
    call(kernels, "python", "y = 1", "st", "--memory", "128")
    bomb = call(kernels, "python", "a = []\nwhile True: a.append(bytearray(10**7))", "st",
                "--memory", "128", "--timeout", "30")
    after = call(kernels, "python", "'y' in dir()", "st", "--memory", "128")
    if bomb["limits"] == "rlimits":
        # Unprivileged, an address-space limit stands in for the cgroup's: Python raises
        # MemoryError itself, the driver catches it like any exception, and the kernel lives.
        assert bomb["error_type"] == "MemoryError" and bomb["kernel_restarted"] is False, bomb
        assert values(after) == ["True"]
        return
    assert bomb["error_type"] == "MemoryError" and bomb["kernel_restarted"] is True, bomb
    assert values(after) == ["False"]  # the cgroup's kill took the kernel: a fresh one


def test_a_kernel_that_exits_is_reported_and_replaced(kernels):
    call(kernels, "python", "z = 1")
    gone = call(kernels, "python", "import os; os._exit(3)")
    assert gone["kernel_restarted"] is True and gone["exit_code"] == 3, gone
    assert values(call(kernels, "python", "'z' in dir()")) == ["False"]


# --- what a kernel says of its calls ------------------------------------------------------
# User code shares its kernel's process and can write to the driver's channel (fd 3): it can
# lie about its own call, but what it leaves running must never land in another call.

FORGE_PYTHON = """import json, os, sys, time
frame = sys._getframe()
while frame and "request" not in frame.f_locals:  # the driver's frame: this call's own id
    frame = frame.f_back
forged = {"type": "done", "id": frame.f_locals["request"]["id"], "status": "ok"}
os.write(3, (json.dumps(forged) + "\\n").encode())
time.sleep(%s)
print("LATE-FROM-CALL-1")
display({"text/plain": "LATE-DISPLAY"}, raw=True)
"""


@pytest.mark.parametrize("language,forge", [
    ("python", FORGE_PYTHON % (1.5 * SLOWDOWN)),
    ("bash", "printf 'D %%s 0\\n' \"$__rbx_id\" >&3; sleep %s; echo LATE-FROM-CALL-1; "
             "echo LATE-FROM-CALL-1 >&2" % (1.5 * SLOWDOWN)),
    # JavaScript's driver keeps the call's id where a cell cannot reach it: the forgery
    # guesses the first call's number.
    ("javascript", "require('fs').writeSync(3, JSON.stringify({type: 'done', id: 1, status: 'ok'}) + '\\n');\n"
                   "await new Promise((r) => setTimeout(r, %d));\n"
                   "console.log('LATE-FROM-CALL-1'); display('LATE-DISPLAY');" % (1500 * SLOWDOWN)),
])
def test_output_after_a_forged_done_lands_in_no_other_call(kernels, language, forge):
    call(kernels, language, forge)
    second = call(kernels, language, "echo call-2" if language == "bash" else
                  "print('call-2')" if language == "python" else "console.log('call-2')")
    assert second["output"] == "call-2\n" and "LATE" not in second["error"], second
    assert "LATE" not in json.dumps(second["results"]), second
    assert second["success"] is True and second["kernel_restarted"] is False, second


def test_a_kernel_held_by_an_earlier_calls_code_is_stopped_at_the_next_calls_timeout(kernels):
    call(kernels, "python", "kept = 1")
    call(kernels, "python", FORGE_PYTHON % 3600)
    started = time.monotonic()
    held = call(kernels, "python", "print('call-3')", "st", "--timeout", "2")
    assert time.monotonic() - started < 10 * SLOWDOWN
    assert held["error_type"] == "TimeoutError" and held["kernel_restarted"] is True, held
    assert "before the kernel took the call" in held["error"] and "call-3" not in held["output"]
    fresh = call(kernels, "python", "print('kept' in dir())")
    assert fresh["output"] == "False\n" and fresh["success"] is True, fresh


def test_a_channel_line_longer_than_any_kept_result_is_dropped_not_held(kernels):
    # 20 MiB on fd 3 in one line: more than the 8 MiB of results a call keeps. The server
    # skips it as it comes, counts it, and the call and its kernel go on.
    result = call(kernels, "python", "import os\nos.write(3, b'x' * (20 << 20) + b'\\n')\n"
                  "kept = 2\nprint('after')")
    assert result["success"] is True and result["output"] == "after\n", result
    assert result["truncated"]["results"] >= 20 << 20, result["truncated"]
    again = call(kernels, "python", "print(kept)")
    assert again["output"] == "2\n" and again["kernel_restarted"] is False, again


# --- lifecycle -----------------------------------------------------------------------------

def test_sessions_list_shows_the_kernel_and_restart_stops_it(kernels):
    call(kernels, "python", "a = 1")
    listed = json.loads(kernels.cli("sessions", "list", "--json").stdout)
    kernel = listed[0]["kernels"][0]
    assert kernel["language"] == "python" and kernel["state"] == "idle"
    assert kernel["memory_bytes"] > 1 << 20 and kernel["idle_s"] >= 0 and kernel["owner_pid"] > 0
    text = kernels.cli("sessions", "list").stdout.decode()
    assert re.search(r"^st .* idle +python-kernel\(\d+\.\d MiB, idle \d+s, pid \d+\)$", text,
                     re.M), text
    restarted = kernels.cli("sessions", "restart", "st")
    assert restarted.returncode == 0 and b"stopped 1 kernel" in restarted.stdout, restarted
    assert json.loads(kernels.cli("sessions", "list", "--json").stdout)[0]["kernels"] == []
    after = call(kernels, "python", "'a' in dir()")
    assert values(after) == ["False"] and after["kernel_restarted"] is False


def test_removing_the_session_stops_its_kernel_and_keeps_nothing(kernels):
    marker = unique_marker()
    call(kernels, "bash", f"sleep {marker} &")
    assert started(marker)
    # --wait: once seen under load (CI, 4 workers), the session still read busy just after
    # the call's result had arrived; what removal does to the kernel is the point here.
    removed = kernels.cli("sessions", "rm", "st", "--wait", "10")
    assert removed.returncode == 0, removed.stderr
    deadline = time.time() + 10
    while processes_matching(marker) and time.time() < deadline:
        time.sleep(0.05)
    assert processes_matching(marker) == []  # the kernel's background job went with it


@pytest.mark.serial
def test_an_idle_kernel_is_reaped_and_nothing_of_it_is_left(runbox):
    before = execution_cgroups()
    marker = unique_marker()
    # The kernel's cgroup alone; stopped, not hibernated (tests/e2e/test_hibernation.py).
    env = {"RUNBOX_KERNEL_IDLE": "1", "RUNBOX_POOL": "0", "RUNBOX_HIBERNATE": "off"}
    call(runbox, "bash", f"export KEEP=1; sleep {marker} &", env=env)
    assert len(daemons(runbox.state_dir)) == 1  # started on demand
    names = {os.path.basename(p) for p in execution_cgroups() - before}
    assert started(marker)
    if os.geteuid() == 0:
        assert len(names) == 1, names  # one cgroup, in each hierarchy
    deadline = time.time() + 20
    while (processes_matching(marker) or execution_cgroups() - before) and time.time() < deadline:
        time.sleep(0.2)
    assert processes_matching(marker) == [] and execution_cgroups() - before == set()
    listed = json.loads(runbox.cli("sessions", "list", "--json").stdout)
    assert listed[0]["kernels"] == []  # its files stay, the kernel is gone
    # The daemon the CLI started goes too, once it has no kernel left (like gpg-agent).
    deadline = time.time() + 20
    while daemons(runbox.state_dir) and time.time() < deadline:
        time.sleep(0.2)
    assert daemons(runbox.state_dir) == []
    after = call(runbox, "bash", "echo ${KEEP:-gone}", env=env)
    assert after["output"] == "gone\n" and after["kernel_restarted"] is True


def test_the_kernel_cap_evicts_the_least_recently_used(runbox):
    env = {"RUNBOX_MAX_KERNELS": "1", "RUNBOX_HIBERNATE": "off"}
    call(runbox, "python", "v = 1", "first", env=env)
    call(runbox, "python", "v = 2", "second", env=env)  # the first one's kernel makes room
    back = call(runbox, "python", "'v' in dir()", "first", env=env)
    assert values(back) == ["False"] and back["kernel_restarted"] is True


def test_stateful_refuses_stdin_clearly(runbox, tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("x")
    proc = runbox.cli("run", "python", "-c", "pass", "--stateful", "--session", "s",
                      "--input", str(data))
    assert proc.returncode == 2 and b"stdin is not taken by a stateful call" in proc.stderr


def test_a_stateful_call_without_a_session_starts_one_it_keeps(runbox):
    first = runbox.run("python", "k = 'new'", "--stateful", "--no-network")
    session = first["session_id"]
    assert values(call(runbox, "python", "k", session)) == ["'new'"]


def daemon_socket(state_dir):
    """The socket of the one `runbox daemon` serving state_dir (named by its configuration)."""
    (name,) = [n for n in os.listdir(state_dir) if re.fullmatch(r"daemon-[0-9a-f]{16}\.sock", n)]
    return os.path.join(state_dir, name)


def connect_unix(sock, path):
    """Connects to the socket at path, through /proc/self/fd when the path is longer than an
    AF_UNIX address holds (an ordinary user's pytest directories are)."""
    if len(path.encode()) < 100:
        sock.connect(path)
        return
    directory = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
    try:
        sock.connect(f"/proc/self/fd/{directory}/{os.path.basename(path)}")
    finally:
        os.close(directory)


def test_the_local_socket_is_the_owners_alone(runbox):
    call(runbox, "python", "pass")
    path = daemon_socket(runbox.state_dir)
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert os.stat(runbox.state_dir).st_mode & 0o066 == 0  # no one else lists or writes it


def test_the_local_socket_answers_hostile_messages_with_clear_errors(kernels):
    call(kernels, "python", "kept = 1")  # the daemon serves the socket now
    path = daemon_socket(kernels.state_dir)

    def ask(data, timeout=30):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout)
            connect_unix(s, path)
            try:
                s.sendall(data)
            except OSError:
                pass  # it may answer and hang up before it has read it all
            reply = b""
            try:
                while chunk := s.recv(65536):
                    reply += chunk
            except ConnectionResetError:
                pass  # it hung up with what we sent still unread
            return reply

    assert b"expected a line of JSON with 'op'" in ask(b"not json\n")
    assert b"expected a line of JSON with 'op'" in ask(b'{"op": 7}\n')
    assert b"unknown op (accepted: execute" in ask(b'{"op": "format-disk"}\n')
    assert b"'session_id' must be a string" in ask(b'{"op": "restart", "session_id": []}\n')
    assert b"invalid session id" in ask(b'{"op": "remove", "session_id": "../../etc"}\n')
    assert b"'request' must be an object" in ask(b'{"op": "execute", "code": "1"}\n')
    assert b"unknown field 'bogus'" in ask(
        b'{"op": "execute", "request": {"language": "python", "code": "1", "bogus": 1}}\n')
    assert b"'code_bytes' must be a string of code points U+0000 to U+00FF" in ask(
        b'{"op": "execute", "request": {"language": "bash", "code_bytes": "\\u0100"}}\n')
    huge = ask(b"{" + b" " * (9 << 20))  # past the 8 MiB line cap: an error, or a hang-up
    assert huge == b"" or b"expected a line of JSON" in huge, huge[:200]
    started = time.monotonic()
    assert b"expected a line of JSON" in ask(b'{"op": "ping"', timeout=60)  # never finishes
    assert time.monotonic() - started < 30  # the server let go of the silent client
    assert values(call(kernels, "python", "kept")) == ["1"]  # and still serves, state intact


def test_the_local_socket_sends_output_events_unless_the_result_alone_is_asked(kernels):
    """`runbox run --json` asks for the result alone: a flood of output is not sent twice."""
    call(kernels, "python", "kept = 1")  # the daemon serves the socket now
    path = daemon_socket(kernels.state_dir)

    def lines(message):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(60)
            connect_unix(s, path)
            s.sendall(json.dumps(message).encode() + b"\n")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
            return [json.loads(line) for line in reply.splitlines()]

    request = {"language": "bash", "code": "for i in 1 2 3; do echo line$i; sleep 0.05; done"}
    with_events = lines({"op": "execute", "request": request})
    assert [e["type"] for e in with_events][-1] == "result"
    assert "".join(e["data"] for e in with_events if e["type"] == "stdout") == \
        "line1\nline2\nline3\n"
    alone = lines({"op": "execute", "request": request, "events": False})
    assert [e["type"] for e in alone] == ["result"], alone
    assert alone[0]["output"] == "line1\nline2\nline3\n"  # the result keeps the output


@pytest.mark.skipif(os.geteuid() != 0, reason="trying it as another user needs root")
def test_the_local_socket_refuses_another_user_even_when_opened_up():
    """Past the modes (opened up here on purpose), the server checks each peer's uid."""
    from conftest import Runbox
    state = tempfile.mkdtemp(prefix="runbox-socket-")
    box = Runbox(os.path.join(state, "state"))
    try:
        call(box, "python", "pass")
        path = daemon_socket(box.state_dir)
        os.chmod(state, 0o755)
        os.chmod(box.state_dir, 0o755)
        os.chmod(path, 0o666)
        code = ("import socket\ns = socket.socket(socket.AF_UNIX)\nprint('trying', flush=True)\n"
                f"s.connect({path!r})\ns.sendall(b'{{\"op\": \"ping\"}}\\n')\n"
                "print('answer', s.recv(4096))")
        probe = subprocess.run(["su", "nobody", "-s", "/usr/bin/python3", "-c", code],
                               capture_output=True, text=True, timeout=30)
        assert "trying" in probe.stdout, probe.stderr  # it ran as nobody and got that far
        assert "pong" not in probe.stdout, probe.stdout
        mine = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                              timeout=30)
        assert "pong" in mine.stdout, (mine.stdout, mine.stderr)  # the owner is answered
    finally:
        os.chmod(box.state_dir, 0o700)
        box.remove_all_sessions()
        shutil.rmtree(state, ignore_errors=True)


# --- isolation of kernels ------------------------------------------------------------------

def test_a_kernel_is_a_sandbox_like_any_other(kernels):
    result = call(kernels, "bash", "id -u; hostname; cat /proc/self/status | grep -E '^(CapEff|NoNewPrivs|Seccomp):'; "
                                   "ls /proc | grep -c '^[0-9]'")
    lines = result["output"].split("\n")
    assert lines[0] == "1000" and lines[1] == "runbox"
    status = dict(line.split(":\t") for line in lines[2:5])
    assert int(status["CapEff"], 16) == 0 and status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
    assert int(lines[5]) < 10  # its own PID namespace


def test_kill_minus_9_minus_1_in_a_kernel_harms_nothing_outside_it(kernels):
    call(kernels, "python", "w = 1")
    result = call(kernels, "bash", "kill -9 -1; echo after")
    assert subprocess.run(["true"]).returncode == 0
    assert values(call(kernels, "python", "w")) == ["1"]  # another kernel of the session lives on
    assert result["kernel_restarted"] or result["output"] == "after\n"


def test_python_shell_lines_run_as_in_ipython(kernels):
    # `!command` and `name = !command`, as IPython (and E2B's run_code) take them; only in a
    # cell that is not Python already, so no Python changes meaning.
    shown = call(kernels, "python", "!echo from bash $((6 * 7))\nfound = !printf 'x\\ny\\n'\nfound",
                 session="shell")
    assert shown["success"], shown["error"]
    assert shown["output"] == "from bash 42\n"
    assert values(shown) == ["['x', 'y']"]
    assert call(kernels, "python", "z = 3 != 4\nz", session="shell")["results"][0]["data"][
        "text/plain"] == "True"
    refused = call(kernels, "python", "w = 1 if z else !2", session="shell")
    assert refused["error_type"] == "SyntaxError"
