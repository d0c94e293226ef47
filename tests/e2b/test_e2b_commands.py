"""E2B's commands and terminals (envd's process.Process) on runbox, through the released `e2b`
SDK, unmodified, without E2B_DEBUG: only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY are set.
Then raw Connect requests with hostile input, which must get the protocol's error, never a crash
or a hang.

The `sbx` fixture makes its sandbox with Sandbox.create() when the server serves E2B's control
plane (POST /v2/sandboxes); until it does, it builds the SDK's Sandbox for a fresh id (the
placeholder registry maps a sandbox id to the runbox session of that id) through the SDK's own
constructor, and removes it through runbox's API (DELETE /v1/sessions/{id})."""
import base64
import json
import os
import secrets
import struct
import threading
import time

import pytest
from e2b import Sandbox
from e2b.exceptions import InvalidArgumentException, SandboxException
from e2b.sandbox.commands.command_handle import CommandExitException

ENVD = {"E2b-Sandbox-Port": "49983"}


def sdk_sandbox(cls, sandbox_id):
    """The SDK's own object for a sandbox made elsewhere: Sandbox.connect(id), as a second
    client would."""
    return cls.connect(sandbox_id)


class Box:
    """An SDK sandbox made through runbox's control plane, and how it goes away."""

    def __init__(self, server):
        self.server = server
        self.sandbox = Sandbox.create()
        self.id = self.sandbox.sandbox_id
        self.token = self.sandbox._envd_access_token

    def kill(self):
        assert self.sandbox.kill()

    def rpc(self, method, body, stream=False, headers=None, raw=None):
        """A raw Connect call to this sandbox's envd, with its access token as the SDK sends
        it; (status, body bytes)."""
        h = dict(ENVD, **{"E2b-Sandbox-Id": self.id, "Connect-Protocol-Version": "1",
                          "X-Access-Token": self.token})
        if stream:
            h["Content-Type"] = "application/connect+json"
            payload = raw if raw is not None else envelope(body)
        else:
            h["Content-Type"] = "application/json"
            payload = raw if raw is not None else json.dumps(body).encode()
        h.update(headers or {})
        return self.server.e2b_request("POST", f"/process.Process/{method}", body=payload,
                                       headers=h, timeout=30)


def envelope(message, flag=0):
    data = json.dumps(message).encode()
    return struct.pack(">BI", flag, len(data)) + data


def frames(body):
    """A stream response's envelopes: [(flag, json)]."""
    out, pos = [], 0
    while pos < len(body):
        flag, n = struct.unpack(">BI", body[pos:pos + 5])
        out.append((flag, json.loads(body[pos + 5:pos + 5 + n])))
        pos += 5 + n
    return out


def stream_error(body):
    """The end-of-stream frame's error code, or None on success."""
    got = frames(body)
    assert got and got[-1][0] == 2, got
    return got[-1][1].get("error", {}).get("code")


def point_sdk_at(monkeypatch, server):
    monkeypatch.delenv("E2B_DEBUG", raising=False)
    monkeypatch.setenv("E2B_API_URL", server.e2b_url)
    monkeypatch.setenv("E2B_SANDBOX_URL", server.e2b_url)
    monkeypatch.setenv("E2B_API_KEY", "runbox-test")
    return server


@pytest.fixture
def sdk_env(monkeypatch, module_e2b):
    """The module's server (conftest.py): each case's sandboxes are its own, and killed after
    it (their processes with them), so what one case leaves running never meets another."""
    return point_sdk_at(monkeypatch, module_e2b)


@pytest.fixture
def box(sdk_env):
    made = Box(sdk_env)
    yield made
    made.sandbox.kill()  # False when the case killed it itself


@pytest.fixture
def sbx(box):
    return box.sandbox


def host_processes_with(marker):
    """Host pids whose command line holds marker."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read().replace(b"\0", b" "):
                    found.append(int(pid))
        except OSError:
            pass
    return found


# --- commands.run --------------------------------------------------------------------------------

def test_a_foreground_command_streams_stdout_and_stderr_and_gives_its_exit_code(sbx):
    out, err = [], []
    result = sbx.commands.run("echo one; echo two >&2; sleep 0.3; echo three",
                              on_stdout=out.append, on_stderr=err.append)
    assert result.exit_code == 0
    assert result.stdout == "one\nthree\n"
    assert result.stderr == "two\n"
    assert "".join(out) == "one\nthree\n" and "".join(err) == "two\n"


def test_a_failing_command_raises_with_its_output_and_code(sbx):
    with pytest.raises(CommandExitException) as raised:
        sbx.commands.run("echo partial; echo bad >&2; exit 3")
    assert raised.value.exit_code == 3
    assert raised.value.stdout == "partial\n"
    assert raised.value.stderr == "bad\n"


def test_a_command_runs_in_the_sandboxs_home_with_its_env_and_cwd(sbx):
    result = sbx.commands.run("pwd; echo $GREETING; id -un; touch made-by-command",
                              envs={"GREETING": "hello"})
    lines = result.stdout.splitlines()
    assert lines[0] == "/home/user" and lines[1] == "hello"
    sbx.commands.run("mkdir -p sub")
    assert sbx.commands.run("pwd", cwd="/home/user/sub").stdout == "/home/user/sub\n"
    # The same files as the next command sees: the sandbox's.
    assert sbx.commands.run("ls made-by-command").stdout == "made-by-command\n"


def test_a_command_without_stdin_reads_end_of_file(sbx):
    assert sbx.commands.run("cat; echo eof-at-once", timeout=20).stdout == "eof-at-once\n"


# --- background commands -------------------------------------------------------------------------

def test_a_background_command_can_be_waited_for(sbx):
    handle = sbx.commands.run("sleep 0.5; echo later", background=True)
    assert handle.pid > 0
    result = handle.wait()
    assert result.stdout == "later\n" and result.exit_code == 0


def test_a_background_command_is_listed_and_killed(sbx):
    handle = sbx.commands.run("sleep 300", background=True)
    listed = {p.pid: p for p in sbx.commands.list()}
    assert handle.pid in listed
    assert listed[handle.pid].cmd == "/bin/bash"
    assert listed[handle.pid].args[-1] == "sleep 300"
    assert sbx.commands.kill(handle.pid) is True
    with pytest.raises(CommandExitException) as raised:
        handle.wait()
    assert raised.value.exit_code != 0
    assert handle.pid not in {p.pid for p in sbx.commands.list()}
    # Killing it again: it is not there any more.
    assert sbx.commands.kill(handle.pid) is False


def test_stdin_is_sent_to_a_background_command_and_closed(sbx):
    handle = sbx.commands.run("cat; echo closed", background=True, stdin=True)
    sbx.commands.send_stdin(handle.pid, "first line\n")
    sbx.commands.send_stdin(handle.pid, b"second line\n")
    sbx.commands.close_stdin(handle.pid)
    result = handle.wait()
    assert result.stdout == "first line\nsecond line\nclosed\n"


def test_a_second_client_connects_to_a_running_command(box, sdk_env):
    handle = box.sandbox.commands.run(
        "for i in $(seq 1 40); do echo tick $i; sleep 0.1; done; exit 4", background=True)
    time.sleep(0.5)
    other = sdk_sandbox(Sandbox, box.id)  # a second client of the same sandbox
    seen = []
    joined = other.commands.connect(handle.pid)
    with pytest.raises(CommandExitException) as raised:
        joined.wait(on_stdout=seen.append)
    assert raised.value.exit_code == 4
    text = "".join(seen)
    # From now on: the later ticks, not the first ones.
    assert "tick 40\n" in text and "tick 1\n" not in text
    with pytest.raises(CommandExitException):
        handle.wait()


def test_a_disconnected_command_keeps_running(sbx):
    handle = sbx.commands.run("sleep 1; echo done > after-disconnect", background=True)
    handle.disconnect()
    deadline = time.monotonic() + 15  # it writes the file a second after it began
    while not sbx.files.exists("after-disconnect") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sbx.commands.run("cat after-disconnect").stdout == "done\n"


def test_a_command_runs_beside_another_and_beside_its_files(sbx):
    handle = sbx.commands.run("echo started > side.txt; sleep 300", background=True)
    started = time.monotonic()
    deadline = started + 20
    while time.monotonic() < deadline:
        try:
            if sbx.commands.run("cat side.txt").stdout == "started\n":
                break
        except CommandExitException:
            time.sleep(0.1)
    # The second command did not wait for the first.
    assert time.monotonic() - started < 20
    sbx.commands.kill(handle.pid)


def test_run_code_is_not_blocked_by_a_background_command(box):
    from e2b_code_interpreter import Sandbox as CodeSandbox
    handle = box.sandbox.commands.run("sleep 300", background=True)
    code = sdk_sandbox(CodeSandbox, box.id)
    started = time.monotonic()
    execution = code.run_code("print(6 * 7)", timeout=30)
    assert execution.logs.stdout == ["42\n"]
    assert time.monotonic() - started < 20
    box.sandbox.commands.kill(handle.pid)


@pytest.mark.serial
def test_a_sandboxs_processes_die_with_it(box):
    # Durations no other program on the host sleeps for: each names one of its processes.
    first, second, third = (31000 + secrets.randbelow(9000) * 3 + i for i in range(3))
    handle = box.sandbox.commands.run(f"sleep {first} & sleep {second}", background=True)
    terminal = box.sandbox.pty.create(size=_size(80, 24))
    box.sandbox.pty.send_stdin(terminal.pid, f"sleep {third}\n".encode())
    marks = [f"sleep {n}" for n in (first, second, third)]
    deadline = time.monotonic() + 15
    while not all(host_processes_with(m) for m in marks) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(host_processes_with(m) for m in marks)
    box.kill()
    with pytest.raises(CommandExitException):
        handle.wait()
    with pytest.raises(CommandExitException):
        terminal.wait()
    deadline = time.monotonic() + 10
    while any(host_processes_with(m) for m in marks) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [m for m in marks if host_processes_with(m)] == []


# --- terminals -----------------------------------------------------------------------------------

def _size(cols, rows):
    from e2b.sandbox.commands.command_handle import PtySize
    return PtySize(cols=cols, rows=rows)


def _read_until(chunks, text, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in b"".join(chunks).decode(errors="replace"):
            return True
        time.sleep(0.05)
    return False


def test_a_terminal_runs_a_shell_that_takes_input_and_resizes(sbx):
    chunks = []
    terminal = sbx.pty.create(size=_size(100, 30), timeout=60)
    ended = []
    reader = threading.Thread(target=lambda: ended.append(_wait_quietly(terminal, chunks.append)),
                              daemon=True)
    reader.start()
    sbx.pty.send_stdin(terminal.pid, b"stty size; echo mark-$((6*7))\n")
    assert _read_until(chunks, "30 100"), b"".join(chunks)
    assert _read_until(chunks, "mark-42"), b"".join(chunks)
    sbx.pty.resize(terminal.pid, _size(120, 40))
    sbx.pty.send_stdin(terminal.pid, b"stty size; tty -s && echo is-a-tty\n")
    assert _read_until(chunks, "40 120"), b"".join(chunks)
    assert _read_until(chunks, "is-a-tty"), b"".join(chunks)
    sbx.pty.send_stdin(terminal.pid, b"exit 5\n")
    reader.join(20)
    assert ended == [5]


def _wait_quietly(handle, on_pty=None):
    """The handle's exit code, however it ended."""
    try:
        return handle.wait(on_pty=on_pty).exit_code
    except CommandExitException as e:
        return e.exit_code


def test_a_terminal_is_killed(sbx):
    terminal = sbx.pty.create(size=_size(80, 24))
    assert sbx.pty.kill(terminal.pid) is True
    with pytest.raises(CommandExitException):
        terminal.wait()


# --- hostile input, raw --------------------------------------------------------------------------

def test_a_bad_start_body_is_an_error_at_the_end_of_the_stream(box):
    for body in ({}, {"process": {}}, {"process": {"cmd": ""}}, {"process": "x"},
                 {"process": {"cmd": "/bin/true", "args": "x"}},
                 {"process": {"cmd": "/bin/true", "args": [1]}},
                 {"process": {"cmd": "/bin/true", "envs": {"A": 1}}},
                 {"process": {"cmd": "/bin/true", "envs": {"1A": "x"}}},
                 {"process": {"cmd": "/bin/true", "cwd": "/no/such/dir"}},
                 {"process": {"cmd": "/no/such/program"}},
                 {"process": {"cmd": "/bin/true"}, "stdin": "yes"}):
        status, data = box.rpc("Start", body, stream=True)
        assert status == 200, body
        assert stream_error(data) == "invalid_argument", (body, data)


def test_absurd_terminal_sizes_are_refused(box):
    for size in ({"cols": 0, "rows": 24}, {"cols": 65535, "rows": 24}, {"cols": -1, "rows": 5},
                 {"cols": 80, "rows": 4294967296}, {"cols": "x", "rows": 5}, {}):
        status, data = box.rpc("Start", {"process": {"cmd": "/bin/bash"}, "pty": {"size": size}},
                               stream=True)
        assert status == 200 and stream_error(data) == "invalid_argument", (size, data)
    terminal = box.sandbox.pty.create(size=_size(80, 24))
    for size in ({"cols": 0, "rows": 24}, {"cols": 65535, "rows": 65535}, {"cols": -5, "rows": 1}):
        status, data = box.rpc("Update", {"process": {"pid": terminal.pid},
                                          "pty": {"size": size}})
        assert status == 400 and json.loads(data)["code"] == "invalid_argument", (size, data)
    with pytest.raises(InvalidArgumentException):
        box.sandbox.pty.resize(terminal.pid, _size(0, 0))
    box.sandbox.pty.kill(terminal.pid)


def test_an_unknown_pid_is_not_found_everywhere(box):
    for method, body in (("SendInput", {"process": {"pid": 999999}, "input": {"stdin": "eA=="}}),
                         ("SendSignal", {"process": {"pid": 999999}, "signal": "SIGNAL_SIGKILL"}),
                         ("CloseStdin", {"process": {"pid": 999999}}),
                         ("Update", {"process": {"pid": 999999},
                                     "pty": {"size": {"cols": 80, "rows": 24}}})):
        status, data = box.rpc(method, body)
        assert status == 404 and json.loads(data)["code"] == "not_found", (method, data)
    status, data = box.rpc("Connect", {"process": {"pid": 999999}}, stream=True)
    assert status == 200 and stream_error(data) == "not_found"
    status, data = box.rpc("StreamInput", None, stream=True,
                           raw=envelope({"start": {"process": {"pid": 999999}}}))
    assert status == 200 and stream_error(data) == "not_found"


def test_bad_signals_and_selectors_are_invalid_arguments(box):
    handle = box.sandbox.commands.run("sleep 300", background=True)
    for body in ({"process": {"pid": handle.pid}, "signal": "SIGNAL_SIGSTOP"},
                 {"process": {"pid": handle.pid}, "signal": 19},
                 {"process": {"pid": handle.pid}, "signal": "SIGNAL_UNSPECIFIED"},
                 {"process": {"pid": handle.pid}},
                 {"process": {"tag": "x"}, "signal": "SIGNAL_SIGKILL"},
                 {"process": {"pid": -1}, "signal": "SIGNAL_SIGKILL"},
                 {"process": {"pid": "abc"}, "signal": "SIGNAL_SIGKILL"},
                 {"process": 5, "signal": "SIGNAL_SIGKILL"}):
        status, data = box.rpc("SendSignal", body)
        assert status == 400 and json.loads(data)["code"] == "invalid_argument", (body, data)
    # Still running after all of that; SIGTERM ends it.
    assert handle.pid in {p.pid for p in box.sandbox.commands.list()}
    status, _ = box.rpc("SendSignal", {"process": {"pid": handle.pid}, "signal": "SIGNAL_SIGTERM"})
    assert status == 200
    with pytest.raises(CommandExitException):
        handle.wait()


def test_bad_input_is_refused_and_huge_input_is_taken_or_refused_in_time(box):
    handle = box.sandbox.commands.run("wc -c", background=True, stdin=True)
    for body in ({"process": {"pid": handle.pid}, "input": {"stdin": "!!!not base64"}},
                 {"process": {"pid": handle.pid}, "input": {"stdin": 5}},
                 {"process": {"pid": handle.pid}, "input": "x"}):
        status, data = box.rpc("SendInput", body)
        assert status == 400 and json.loads(data)["code"] == "invalid_argument", (body, data)
    big = base64.b64encode(b"x" * (6 << 20)).decode()
    status, data = box.rpc("SendInput", {"process": {"pid": handle.pid}, "input": {"stdin": big}})
    assert status == 200, data
    box.sandbox.commands.close_stdin(handle.pid)
    assert handle.wait().stdout.strip() == str(6 << 20)
    # A program that never reads: the input is refused after a while, not held forever.
    sleeper = box.sandbox.commands.run("sleep 300", background=True, stdin=True)
    started = time.monotonic()
    status, data = box.rpc("SendInput", {"process": {"pid": sleeper.pid},
                                         "input": {"stdin": big}})
    assert status == 429 and json.loads(data)["code"] == "resource_exhausted", data
    assert time.monotonic() - started < 20
    # Without stdin there is nothing to write to.
    quiet = box.sandbox.commands.run("sleep 300", background=True)
    status, data = box.rpc("SendInput", {"process": {"pid": quiet.pid},
                                         "input": {"stdin": "eA=="}})
    assert status == 400
    box.sandbox.commands.kill(sleeper.pid)
    box.sandbox.commands.kill(quiet.pid)


def test_a_sandbox_runs_at_most_its_cap_of_processes(box):
    handles = []
    for _ in range(16):
        handles.append(box.sandbox.commands.run("sleep 300", background=True))
    status, data = box.rpc("Start", {"process": {"cmd": "/bin/true"}}, stream=True)
    assert status == 200 and stream_error(data) == "resource_exhausted", data
    with pytest.raises(SandboxException):
        box.sandbox.commands.run("true")
    assert len(box.sandbox.commands.list()) == 16
    for handle in handles:
        box.sandbox.commands.kill(handle.pid)
    assert box.sandbox.commands.run("echo room again").stdout == "room again\n"


def test_envelope_garbage_is_the_protocols_error(box):
    bodies = [
        b"",                                        # no envelope at all
        b"\x00\x00\x00",                            # a head cut short
        b"\x00\x00\x00\x10\x00{}",                  # a length past the body
        b"\x01\x00\x00\x00\x02{}",                  # compressed
        envelope({}) + envelope({}),                # two messages for a server stream
        b"\x00\x00\x00\x00\x05nope!",               # not JSON
        b"\x00\xff\xff\xff\xff",                    # 4 GiB announced
    ]
    for body in bodies:
        for method in ("Start", "Connect"):
            status, data = box.rpc(method, None, stream=True, raw=body)
            assert status == 200 and stream_error(data) == "invalid_argument", (method, body, data)
    status, data = box.rpc("StreamInput", None, stream=True, raw=b"\x00\x00\x00\x10\x00{}")
    assert status == 200 and stream_error(data) == "invalid_argument"
    status, data = box.rpc("StreamInput", None, stream=True, raw=envelope({"data": {}}))
    assert status == 200 and stream_error(data) == "invalid_argument"
    for method in ("List", "SendInput", "SendSignal"):
        status, data = box.rpc(method, None, raw=b"{not json")
        assert status == 400 and json.loads(data)["code"] == "invalid_argument"
    # The server is still there.
    assert box.sandbox.commands.run("echo alive").stdout == "alive\n"


def test_stream_input_feeds_a_command(sbx):
    handle = sbx.commands.run("cat", background=True, stdin=True)
    sbx.commands.stream_input(handle.pid, iter([b"a", b"bc", "de\n"]))  # noqa
    sbx.commands.close_stdin(handle.pid)
    assert handle.wait().stdout == "abcde\n"


def test_a_start_streams_start_then_base64_data_then_end_and_keepalives_when_asked(box):
    status, data = box.rpc("Start", {"process": {"cmd": "/bin/bash",
                                                 "args": ["-c", "printf 'a\\0b'; sleep 2.5; exit 2"]},
                                     "stdin": False},
                           stream=True, headers={"Keepalive-Ping-Interval": "1"})
    assert status == 200
    got = frames(data)
    events = [message.get("event", {}) for flag, message in got[:-1]]
    assert list(events[0]) == ["start"] and events[0]["start"]["pid"] > 0
    out = b"".join(base64.b64decode(e["data"]["stdout"]) for e in events if "data" in e)
    assert out == b"a\0b"
    assert any("keepalive" in e for e in events[1:-1]), events
    assert events[-1] == {"end": {"exitCode": 2, "exited": True, "status": "exit status 2"}}
    assert got[-1] == (2, {})
    # A killed one ends too, with Go's words for it.
    handle = box.sandbox.commands.run("sleep 300", background=True)
    result = {}
    reader = threading.Thread(target=lambda: result.update(
        frames=frames(box.rpc("Connect", {"process": {"pid": handle.pid}}, stream=True)[1])))
    reader.start()
    time.sleep(0.5)
    assert box.sandbox.commands.kill(handle.pid)
    reader.join(20)
    connected = [message.get("event", {}) for flag, message in result["frames"][:-1]]
    assert connected[0] == {"start": {"pid": handle.pid}}
    end = connected[-1]["end"]
    assert end["exited"] is False and end["exitCode"] == -1 and end["status"] == "signal: killed"


@pytest.mark.serial
def test_stopping_the_server_ends_its_processes(start_e2b, monkeypatch):
    box = Box(point_sdk_at(monkeypatch, start_e2b()))  # a server of its own, which it stops
    duration = 41000 + secrets.randbelow(9000)
    handle = box.sandbox.commands.run(f"sleep {duration}", background=True)
    assert handle.pid
    deadline = time.monotonic() + 10
    while not host_processes_with(f"sleep {duration}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_processes_with(f"sleep {duration}")
    started = time.monotonic()
    box.server.stop()  # SIGTERM; asserts no sanitizer report
    # Not the grace period of executions (30 s): a background command is not work that ends.
    assert time.monotonic() - started < 15
    assert box.server.proc.returncode == 0
    assert host_processes_with(f"sleep {duration}") == []


def test_one_sandbox_never_reaches_anothers_processes(box, sdk_env):
    other = Box(sdk_env)
    handle = box.sandbox.commands.run("sleep 300", background=True)
    assert handle.pid not in {p.pid for p in other.sandbox.commands.list()}
    assert other.sandbox.commands.kill(handle.pid) is False
    for method, body in (("SendInput", {"process": {"pid": handle.pid}, "input": {"stdin": "eA=="}}),
                         ("SendSignal", {"process": {"pid": handle.pid}, "signal": "SIGNAL_SIGKILL"}),
                         ("CloseStdin", {"process": {"pid": handle.pid}})):
        status, data = other.rpc(method, body)
        assert status == 404 and json.loads(data)["code"] == "not_found", (method, data)
    status, data = other.rpc("Connect", {"process": {"pid": handle.pid}}, stream=True)
    assert status == 200 and stream_error(data) == "not_found"
    # Still running in its own sandbox, and the other's files are not its files.
    assert handle.pid in {p.pid for p in box.sandbox.commands.list()}
    box.sandbox.commands.run("echo mine > only-here")
    with pytest.raises(CommandExitException):
        other.sandbox.commands.run("cat only-here")
    box.sandbox.commands.kill(handle.pid)


def test_a_request_for_no_sandbox_is_the_sdks_not_found(box):
    for sandbox_id in (None, "", "../etc", "x" * 200, "a b"):
        headers = {"E2b-Sandbox-Id": sandbox_id} if sandbox_id is not None else {}
        h = dict(ENVD, **{"Content-Type": "application/json"}, **headers)
        if sandbox_id is None:
            h.pop("E2b-Sandbox-Id", None)
        status, data = box.server.e2b_request("POST", "/process.Process/List", body=b"{}",
                                              headers=h)
        assert status in (401, 502) and json.loads(data)["code"] in ("unavailable",
                                                                      "unauthenticated"), data
        h["Content-Type"] = "application/connect+json"
        status, data = box.server.e2b_request(
            "POST", "/process.Process/Start", headers=h,
            body=envelope({"process": {"cmd": "/bin/true"}}))
        assert status == 200 and stream_error(data) in ("unavailable", "unauthenticated"), data


def test_the_user_root_runs_as_the_sandboxs_user_and_others_are_refused(sbx):
    default = sbx.commands.run("id -u").stdout
    assert sbx.commands.run("id -u", user="root").stdout == default
    assert default.strip() != "0"
    with pytest.raises(InvalidArgumentException):
        sbx.commands.run("id -u", user="nobody-here")
