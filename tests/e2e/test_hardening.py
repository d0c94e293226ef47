"""Hardening through the CLI: what an outside test broke, each case a regression test."""
import json
import os
import subprocess
import time

import pytest


def test_files_get_of_a_fifo_or_socket_fails_at_once(runbox):
    made = runbox.run("python", "import os, socket\nos.mkfifo('fifo')\n"
                                "socket.socket(socket.AF_UNIX).bind('sock')\nprint('made')",
                      "--session", "special")
    assert made["output"] == "made\n", made
    for name in ("fifo", "sock"):
        started = time.monotonic()
        proc = runbox.cli("files", "get", "special", name, timeout=20)
        assert time.monotonic() - started < 10
        assert proc.returncode == 2, proc
        assert b"not a regular file" in proc.stderr, proc.stderr
        assert proc.stdout == b""


# --- global options work before or after the command, everywhere --------------------------

@pytest.fixture
def two_dirs(runbox, tmp_path):
    """The state directory runbox's environment names, and one given on the command line."""
    chosen = str(tmp_path / "chosen")
    yield runbox.state_dir, chosen
    runbox.cli("sessions", "rm", "placed", "--wait", "30", "--state-dir", chosen)


@pytest.mark.parametrize("where", ["before", "after"])
def test_state_dir_is_taken_before_or_after_every_command(runbox, two_dirs, where):
    default, chosen = two_dirs

    def cli(*args, **kwargs):
        flag = ("--state-dir", chosen)
        full = (*flag, *args) if where == "before" else (*args, *flag)
        proc = runbox.cli(*full, **kwargs)
        assert proc.returncode == 0, (full, proc.stderr)
        return proc

    cli("run", "bash", "-c", "echo hi > f.txt", "--session", "placed")
    assert json.loads(cli("sessions", "list", "--json").stdout)[0]["session_id"] == "placed"
    assert cli("files", "get", "placed", "f.txt").stdout == b"hi\n"
    assert [f["path"] for f in json.loads(cli("files", "list", "placed", "--json").stdout)] == \
        ["f.txt"]
    assert json.loads(cli("envs", "list", "--json").stdout) == []
    checks = json.loads(cli("check", "--json").stdout)
    assert checks["state_dir"] == chosen, checks
    assert os.path.isdir(os.path.join(chosen, "sessions", "placed"))
    assert not os.path.exists(os.path.join(default, "sessions", "placed"))


def test_mcp_takes_the_state_dir_after_the_command(runbox, two_dirs):
    _, chosen = two_dirs
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "execute_bash",
                    "arguments": {"command": "echo mcp", "session_id": "placed"}}},
    ]
    proc = subprocess.Popen([runbox.bin, "mcp", "--state-dir", chosen], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=runbox.env())
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        proc.stdin.flush()
        call = None
        while call is None:  # the reply to the call, once the code has run
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            reply = json.loads(line)
            call = reply if reply.get("id") == 2 else None
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    assert call["result"]["structuredContent"]["output"] == "mcp\n", call
    assert os.path.isdir(os.path.join(chosen, "sessions", "placed"))


@pytest.mark.parametrize("args,message", [
    (("sessions", "list", "--state-dir"), b"--state-dir needs a directory"),
    (("files", "list", "s1", "--install-network", "sideways"), b"must be 'outside' or 'host'"),
    (("check", "--policy="), b"--policy needs a file"),
    (("mcp", "--bogus"), b"unexpected argument '--bogus'"),
])
def test_a_bad_global_option_after_the_command_is_a_usage_error(runbox, args, message):
    proc = runbox.cli(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_a_value_that_looks_like_a_global_option_stays_a_value(runbox):
    result = runbox.run("bash", "echo \"$X\"", "--env", "X=--state-dir")
    assert result["output"] == "--state-dir\n"
    proc = runbox.cli("run", "bash", "-c", "--state-dir", "--json")
    assert proc.returncode == 0  # the code is "--state-dir": bash's own error, not a usage error
