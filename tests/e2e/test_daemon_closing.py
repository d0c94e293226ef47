"""A daemon's or a server's end loses no call, and a call that is lost is never silent.

A `runbox daemon` exits once it has had no kernel and no connection for a while. A CLI that
connected in its last moment used to get the connection closed without a word: `runbox run`
exited 1 with nothing on stdout or stderr (CI saw it on a woken kernel's call, which came just
as the daemon that had put the kernel to sleep was going). Now a process that closes answers
every connection it did not take with {"type": "closing"}, having read nothing of it, and the
CLI goes again to the process that takes its place; a process that ends the connection in the
middle of a call is named in a clear error.

These cases put a stand-in at the daemon's socket, which closes on cue (the real daemon's last
moment is milliseconds wide): the CLI's side is what they test. The daemon's side, that it
never closes while it holds a connection and answers those waiting with "closing", is the unit
test test_local_server. A `runbox serve` that is stopped lets the CLI's calls it runs finish
within its grace period, as it does HTTP's, and takes no new one."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import RUNBOX, Runbox, daemons

ENV = {"RUNBOX_POOL": "0"}


def stateful(runbox, code, session="closing"):
    return runbox.cli("run", "python", "-c", code, "--json", "--stateful", "--session", session,
                      "--no-network", env=ENV, timeout=120)


def ok(proc):
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return json.loads(proc.stdout)


def stop_daemons(state_dir):
    for pid in daemons(state_dir):
        os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 30
    while daemons(state_dir) and time.time() < deadline:
        time.sleep(0.05)
    assert daemons(state_dir) == []


@pytest.fixture
def daemon_socket(runbox):
    """The path of this configuration's daemon socket, with no daemon serving it: a daemon
    is started once to learn its name, then stopped."""
    ok(stateful(runbox, "pass", session="learn"))
    names = [n for n in os.listdir(runbox.state_dir)
             if n.startswith("daemon-") and n.endswith(".sock")]
    assert len(names) == 1, names
    stop_daemons(runbox.state_dir)
    path = os.path.join(runbox.state_dir, names[0])
    assert not os.path.exists(path)  # the daemon took it with it
    yield path
    stop_daemons(runbox.state_dir)


class ShortAddress:
    """A socket's path as an address short enough for AF_UNIX (107 bytes; a test's state
    directory can be longer, as runbox's own sockets are reached): through a descriptor of its
    directory, open while the object lives."""

    def __init__(self, path):
        self.dir_fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
        self.address = f"/proc/self/fd/{self.dir_fd}/{os.path.basename(path)}"

    def close(self):
        os.close(self.dir_fd)


class StandIn:
    """A process at the daemon's socket: answer(conn) serves each connection until it
    returns False; then the socket is unlinked, as a closing daemon's is."""

    def __init__(self, path, answer):
        self.path, self.answer, self.seen = path, answer, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        short = ShortAddress(path)
        try:
            self.sock.bind(short.address)
        finally:
            short.close()
        self.sock.listen(64)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        self.sock.settimeout(30)
        try:
            while True:
                conn, _ = self.sock.accept()
                with conn:
                    going_on = self.answer(conn, self.seen)
                if not going_on:
                    break
        finally:
            os.unlink(self.path)
            self.sock.close()

    def join(self):
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()


def test_a_call_that_meets_a_closing_daemon_runs_once_in_the_next_one(runbox, daemon_socket):
    start = time.monotonic()

    def closing_for_a_while(conn, seen):
        conn.sendall(b'{"type": "closing"}\n')  # before reading, as a closing daemon does
        seen.append(time.monotonic())
        return time.monotonic() - start < 0.3

    stand_in = StandIn(daemon_socket, closing_for_a_while)
    result = ok(stateful(runbox, "open('runs', 'a').write('x'); print(len(open('runs').read()))"))
    stand_in.join()
    assert result["success"] and result["output"] == "1\n", result  # it ran, and once
    assert len(stand_in.seen) >= 1
    assert len(daemons(runbox.state_dir)) == 1  # the daemon that took the stand-in's place


def test_a_process_that_ends_the_connection_mid_call_is_named_in_an_error(runbox,
                                                                         daemon_socket):
    def read_the_call_and_hang_up(conn, seen):
        seen.append(conn.makefile("rb").readline())
        return False

    stand_in = StandIn(daemon_socket, read_the_call_and_hang_up)
    proc = stateful(runbox, "print('never answered')")
    stand_in.join()
    assert b'"op":"execute"' in stand_in.seen[0]
    assert proc.returncode == 1, proc
    assert proc.stdout == b""
    message = proc.stderr.decode()
    assert "the runbox daemon (pid " in message, message
    assert "ended the connection before the call's result" in message, message
    assert f"see {runbox.state_dir}/daemon.log" in message, message


def test_a_daemon_that_only_ever_says_closing_gets_a_clear_error_not_a_hang(runbox,
                                                                           daemon_socket):
    def always_closing(conn, seen):
        conn.sendall(b'{"type": "closing"}\n')
        seen.append(1)
        return len(seen) < 10000

    stand_in = StandIn(daemon_socket, always_closing)
    proc = stateful(runbox, "print(1)")
    assert proc.returncode == 1, proc
    assert b"said it is closing" in proc.stderr, proc.stderr
    # The stand-in goes: one more connection ends its loop.
    stand_in.answer = lambda conn, seen: False
    short = ShortAddress(daemon_socket)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as last:
        last.connect(short.address)
    short.close()
    stand_in.join()


def test_a_cli_call_running_in_runbox_serve_finishes_when_the_server_is_stopped(tmp_path):
    """SIGTERM gives HTTP's executions the grace period to finish: the CLI's calls on the
    state directory's socket get it too (they were cut at once, the CLI exiting 1), and a call
    that comes after the signal is not taken there (the CLI's one-off run runs itself)."""
    state = str(tmp_path / "state")
    box = Runbox(state)
    server = subprocess.Popen([RUNBOX, "serve", "--listen", "127.0.0.1:0", "--state-dir", state],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=box.env(ENV))
    try:
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(state, "runbox.sock")) and time.time() < deadline:
            time.sleep(0.05)
        assert os.path.exists(os.path.join(state, "runbox.sock")), server.stderr.read1(4096)
        call = box.popen("run", "bash", "-c", "echo started; sleep 2; echo finished",
                         "--stateful", "--session", "in-flight", "--no-network", env=ENV)
        assert call.stdout.readline() == b"started\n"  # running in the server
        server.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        while os.path.exists(os.path.join(state, "runbox.sock")) and time.time() < deadline:
            time.sleep(0.02)
        after = box.cli("run", "bash", "-c", "echo elsewhere", "--no-network", env=ENV)
        assert after.returncode == 0 and after.stdout == b"elsewhere\n", after
        out, err = call.communicate(timeout=60)
        assert call.returncode == 0, err
        assert out == b"finished\n", (out, err)
        assert server.wait(timeout=60) == 0
        events = [json.loads(line).get("event") for line in server.stderr.read().splitlines()
                  if line.startswith(b"{")]
        assert events[-1] == "stopped" and "local_grace_over_cancelling" not in events, events
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        stop_daemons(state)
        box.remove_all_sessions()


GOING_DAEMON = """
import os, socket, sys, time
directory, name = sys.argv[1], sys.argv[2]
fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(f"/proc/self/fd/{fd}/{name}")
sock.listen(8)
print("ready", flush=True)
conn, _ = sock.accept()
conn.sendall(b'{"type": "closing"}\\n')
conn.close()
time.sleep(1.5)  # its last kernel's teardown
os.unlink(os.path.join(directory, name))
"""


def test_storage_unmount_waits_for_a_daemon_that_was_closing_already(runbox, daemon_socket):
    """`storage unmount` asks every daemon to stop and waits until each has gone, since each
    holds the storage until its end: one that answers that it is closing already (it was
    going, idle, when asked) is going too, and is waited for as one that said it stops."""
    going = subprocess.Popen([sys.executable, "-c", GOING_DAEMON, runbox.state_dir,
                              os.path.basename(daemon_socket)], stdout=subprocess.PIPE)
    try:
        assert going.stdout.readline() == b"ready\n"
        proc = runbox.cli("storage", "unmount")
        assert proc.returncode == 0, proc.stderr
        assert going.poll() == 0, "storage unmount returned while the daemon was still there"
    finally:
        if going.poll() is None:
            going.kill()
        going.wait()
