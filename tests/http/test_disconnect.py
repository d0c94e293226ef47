"""A client that goes away takes its execution with it, at once."""
import json
import socket
import time

import pytest

from http_helpers import processes_matching, unique_marker, wait_gone


def start_and_vanish(server, body, wait_for_output=False):
    """Sends an execution on a raw socket, waits for its process, hangs up."""
    marker = body["marker"]
    payload = json.dumps({k: v for k, v in body.items() if k != "marker"}).encode()
    sock = socket.create_connection((server.host, server.port))
    sock.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
    deadline = time.time() + 20
    while not processes_matching(marker) and time.time() < deadline:
        time.sleep(0.05)
    assert processes_matching(marker), "the execution never started"
    if wait_for_output:
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    sock.close()
    return time.time()


@pytest.mark.parametrize("stream", [False, True])
def test_disconnect_kills_the_execution(server, stream):
    marker = unique_marker()
    hung_up = start_and_vanish(server, {
        "language": "bash", "code": f"echo started; sleep {marker}", "timeout": 120,
        "stream": stream, "marker": marker}, wait_for_output=stream)
    assert wait_gone(marker, seconds=5) == []
    assert time.time() - hung_up < 5
    assert server.healthy()
    def aborted(lines):
        return any(line.get("aborted") for line in lines if line.get("path") == "/v1/execute")
    assert aborted(server.wait_log(aborted))


def test_disconnect_of_a_silent_stream_kills_it_too(server):
    """No output to fail writing: the server notices the hang-up itself."""
    marker = unique_marker()
    start_and_vanish(server, {"language": "bash", "code": f"sleep {marker}", "timeout": 120,
                              "stream": True, "marker": marker})
    assert wait_gone(marker, seconds=5) == []


def test_disconnect_of_a_queued_execution_frees_its_place(start_server):
    server = start_server("--max-running", "1", "--max-queue", "1")
    running, queued = unique_marker(), unique_marker()
    start_and_vanish(server, {"language": "bash", "code": f"sleep {running}", "timeout": 120,
                              "marker": running})
    payload = json.dumps({"language": "bash", "code": f"sleep {queued}"}).encode()
    sock = socket.create_connection((server.host, server.port))
    sock.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
    time.sleep(0.5)
    sock.close()
    assert wait_gone(running) == []
    deadline = time.time() + 5
    while time.time() < deadline:
        health = server.request("GET", "/healthz").json()
        if health["running"] == 0 and health["queued"] == 0:
            break
        time.sleep(0.1)
    assert (health["running"], health["queued"]) == (0, 0)
    assert processes_matching(queued) == []  # it never ran
    assert server.healthy()
