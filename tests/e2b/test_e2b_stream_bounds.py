"""What envd's streams may cost the server, whatever their clients do: one sandbox's process and
watch streams hold a small bounded sum of memory even when nobody reads them (the process is
held, as a terminal nobody reads holds its program); the sandbox's end ends them, read or not;
and /metrics counts the processes that run beside executions."""
import json
import os
import socket
import struct
import threading
import time

import pytest

from test_e2b_commands import ENVD, Box, envelope, point_sdk_at, stream_error

# The bound README states for one sandbox's streams (E2B_SANDBOX_STREAM_BUDGET is 4 MiB, plus
# a read and a send buffer per stream); the server's RSS may grow by this much, not more.
SANDBOX_STREAMS_BOUND_KB = 16 * 1024
if os.environ.get("ASAN_OPTIONS"):
    # Under ASan: its quarantine of freed memory (16 MB in `make test-asan`), and its shadow
    # and per-thread memory for the streams' 48 threads; unbounded, growth is 300 MB and more.
    SANDBOX_STREAMS_BOUND_KB += 48 * 1024


def silent_stream(server, box_id, token, path, message):
    """A Connect server stream whose client never reads: its receive window is tiny, so what the
    server sends piles up on the server's side. Returns the socket (open)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.e2b_port))
    body = envelope(message)
    head = {"Host": "127.0.0.1", "Content-Type": "application/connect+json",
            "Content-Length": str(len(body)), "Connect-Protocol-Version": "1",
            "E2b-Sandbox-Id": box_id, "X-Access-Token": token, **ENVD}
    request = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items())
    sock.sendall(request.encode() + b"\r\n" + body)
    return sock


def metric(server, name):
    text = server.request("GET", "/metrics").body.decode()
    for line in text.splitlines():
        if line.startswith(name + " "):  # name with its labels, if any
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics:\n{text}")


@pytest.fixture
def own_server(start_e2b, monkeypatch):
    """A server of its own: its RSS is this case's alone."""
    return point_sdk_at(monkeypatch, start_e2b())


def test_unread_process_streams_hold_the_sandboxs_budget_and_not_more(own_server):
    box = Box(own_server)
    try:
        pids = [box.sandbox.commands.run("cat /dev/zero", background=True).pid for _ in range(3)]
        time.sleep(1)
        before = own_server.rss_kb()
        socks = [silent_stream(own_server, box.id, box.token, "/process.Process/Connect",
                               {"process": {"pid": pid}})
                 for pid in pids for _ in range(8)]
        # Unbounded, 24 streams of `cat /dev/zero` grow the server by 8 MiB or more each
        # within a second or two; bounded, the growth stops at the sandbox's budget.
        time.sleep(4)
        grown = own_server.rss_kb() - before
        assert grown < SANDBOX_STREAMS_BOUND_KB, f"the server grew by {grown} KiB"
        time.sleep(2)
        assert own_server.rss_kb() - before < SANDBOX_STREAMS_BOUND_KB
        # The sandbox still answers, and its processes run on (held, not dropped).
        listed = {p.pid for p in box.sandbox.commands.list()}
        assert set(pids) <= listed, listed
        # Clients that stopped reading lose their streams once a message has waited
        # E2B_STREAM_STALL_S (30 s) for room: the 24 connections close (the SDK's own 3 Start
        # streams stay: its transport reads them); the processes run on.
        served = 'runbox_connections{state="served"}'
        assert metric(own_server, served) >= 24
        deadline = time.monotonic() + 100  # a held stream stalls once its process resumes
        open_now = served_settled(own_server, served, 4, deadline, pause=1)
        assert open_now <= 4, f"a stream nobody reads stayed open ({open_now} connections)"
        assert set(pids) <= {p.pid for p in box.sandbox.commands.list()}
        for sock in socks:
            sock.close()
    finally:
        box.kill()


def test_a_reading_client_gets_every_byte_of_a_held_process(own_server):
    box = Box(own_server)
    try:
        # More than a stream's share and its sandbox's budget: the output is held and resumed,
        # not lost or cut.
        result = box.sandbox.commands.run("head -c 12000000 /dev/zero | tr '\\0' x",
                                          timeout=60)
        assert result.exit_code == 0
        assert len(result.stdout) == 12000000 and set(result.stdout) == {"x"}
    finally:
        box.kill()


def watch_started(sock):
    """Reads the stream's head and first envelope: True when it is the watch's start."""
    sock.settimeout(30)  # a loaded host (ASan, other suites) answers slowly
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    # Chunked: "<hex>\r\n<envelope>..."; the first envelope is small.
    while rest.count(b"\r\n") < 2:
        rest += sock.recv(4096)
    size, chunk = rest.split(b"\r\n", 1)
    flag, n = struct.unpack(">BI", chunk[:5])
    while len(chunk) < 5 + n:
        chunk += sock.recv(4096)
    return flag == 0 and "start" in json.loads(chunk[5:5 + n])


def open_watches(server, box, count, path="w"):
    socks = []
    for _ in range(count):
        sock = silent_stream(server, box.id, box.token, "/filesystem.Filesystem/WatchDir",
                             {"path": path})
        socks.append(sock)
    return socks


def test_killing_a_sandbox_ends_its_unread_streams_and_frees_their_places(start_e2b, monkeypatch):
    # 64 watches at once: more than the default inotify budget (a quarter of the host's
    # max_user_instances, 32 of 128 here) would allow, so the budget is raised for this case.
    own_server = point_sdk_at(monkeypatch, start_e2b(env={"RUNBOX_INOTIFY_BUDGET": "80,65536"}))
    box = Box(own_server)
    box.sandbox.files.make_dir("w")
    watches = open_watches(own_server, box, 8)
    busy = box.sandbox.commands.run("cat /dev/zero", background=True)
    process_stream = silent_stream(own_server, box.id, box.token, "/process.Process/Connect",
                                   {"process": {"pid": busy.pid}})
    # Far more events than the watches' clients take: their producers wait on them.
    box.sandbox.commands.run("for i in $(seq 1 30000); do : > /home/user/w/f$i; done",
                             timeout=120)
    time.sleep(1)
    box.kill()
    # Nobody reads the 9 streams, yet they end: their connections close within seconds.
    served = 'runbox_connections{state="served"}'
    deadline = time.monotonic() + 20  # a second's grace, then cut; slack for a loaded host
    open_now = served_settled(own_server, served, 1, deadline, pause=0.2)
    assert open_now <= 1, f"a stream of a killed sandbox stayed open ({open_now} connections)"
    # Every place is free again: 8 sandboxes open their full share of the server's 64.
    boxes, socks = [], []
    try:
        for _ in range(8):
            other = Box(own_server)
            other.sandbox.files.make_dir("w")
            boxes.append(other)
            opened = open_watches(own_server, other, 8)
            socks += opened
            assert all(watch_started(s) for s in opened)
    finally:
        for sock in socks + watches + [process_stream]:
            sock.close()
        for other in boxes:
            other.kill()

def served_settled(server, served, at_most, deadline, pause):
    """The connections served, read until at most at_most or the deadline: the last reading.
    Each reading is a connection of its own, and the one before it may still be counted for a
    moment after its answer came (its end is the server's to see): so the value that ended the
    wait is the one that counts, never a reading after it."""
    value = metric(server, served)
    while value > at_most and time.monotonic() < deadline:
        time.sleep(pause)
        value = metric(server, served)
    return value


def wait_for_metric(server, name, value, seconds=15):
    """The metric once it reads value, or what it reads after seconds."""
    deadline = time.time() + seconds
    while metric(server, name) != value and time.time() < deadline:
        time.sleep(0.05)
    return metric(server, name)


def test_metrics_count_the_processes_beside_executions(own_server):
    box = Box(own_server)
    try:
        assert metric(own_server, "runbox_processes_running") == 0
        handles = [box.sandbox.commands.run("sleep 300", background=True) for _ in range(3)]
        assert metric(own_server, "runbox_processes_running") == 3
        assert metric(own_server, "runbox_executions_running") == 0
        box.sandbox.commands.kill(handles[0].pid)
        # A kill sends the signal (as envd's SendSignal does); the process's end is counted
        # once its sandbox is reaped, moments later on a loaded machine.
        assert wait_for_metric(own_server, "runbox_processes_running", 2) == 2
    finally:
        box.kill()
    assert wait_for_metric(own_server, "runbox_processes_running", 0) == 0


def test_a_paused_sandbox_runs_no_process_and_starts_none(own_server):
    """Pause and Start race: a Start either registers before pause freezes what is there, or is
    refused. Pause returns in time (it waited forever for a process registered behind its kill)
    and nothing runs after it: what it froze is frozen, and goes with the sandbox."""
    box = Box(own_server)
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            try:
                handle = box.sandbox.commands.run("sleep 300", background=True)
                box.sandbox.commands.kill(handle.pid)
            except Exception:  # noqa: BLE001 - refused: the sandbox is paused
                time.sleep(0.05)

    threads = [threading.Thread(target=churn, daemon=True) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        started = time.monotonic()
        status, _ = own_server.e2b_request("POST", f"/sandboxes/{box.id}/pause",
                                           headers={"X-API-KEY": "k"}, timeout=60)
        assert status == 204
        assert time.monotonic() - started < 20
        time.sleep(1)
        stop.set()
        for thread in threads:
            thread.join(30)
        assert metric(own_server, "runbox_processes_running") == 0
        frozen = metric(own_server, "runbox_processes_frozen")
        status, data = box.rpc("Start", {"process": {"cmd": "/bin/true"}}, stream=True)
        assert status == 200 and stream_error(data) == "unavailable", data  # "was not found"
        assert metric(own_server, "runbox_processes_frozen") == frozen
    finally:
        stop.set()
        box.kill()
    assert wait_for_metric(own_server, "runbox_processes_frozen", 0) == 0
    assert metric(own_server, "runbox_processes_running") == 0
