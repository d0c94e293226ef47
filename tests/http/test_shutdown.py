"""SIGTERM and SIGINT: stop accepting, let running work finish within the
grace period, cancel the rest, leave nothing behind, exit 0."""
import http.client
import json
import os
import signal
import socket
import threading
import time
import uuid

import pytest

from http_helpers import (execution_cgroups, existing, planted_cgroups, processes_matching,
                          remove_cgroups_left_since, unique_marker, wait_gone)


def in_background(server, body, outcome):
    def run():
        try:
            outcome["response"] = server.request("POST", "/v1/execute", json_body=body,
                                                 timeout=120)
        except (OSError, http.client.HTTPException) as e:
            outcome["error"] = e
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def wait_started(marker):
    deadline = time.time() + 20
    while not processes_matching(marker) and time.time() < deadline:
        time.sleep(0.05)
    assert processes_matching(marker), "the execution never started"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_work_in_flight_finishes_then_the_server_exits_0(start_server, sig):
    server = start_server()
    marker = unique_marker()
    outcome = {}
    thread = in_background(server, {"language": "bash", "session_id": "inflight",
                                    "code": f"(exec -a {marker} sleep 2); echo finished"},
                           outcome)
    wait_started(marker)
    server.proc.send_signal(sig)
    thread.join()
    assert server.proc.wait(timeout=30) == 0
    response = outcome["response"]
    assert response.status == 200, response
    result = response.json()
    assert result["success"] is True and result["output"] == "finished\n"
    assert wait_gone(marker) == []
    assert server.stop() == 0  # no sanitizer report either
    assert server.log_lines()[-1]["event"] == "stopped"


def test_past_the_grace_period_executions_are_cancelled(start_server):
    server = start_server("--grace", "1")
    marker = unique_marker()
    outcome = {}
    thread = in_background(server, {"language": "bash", "code": f"sleep {marker}",
                                    "timeout": 120}, outcome)
    wait_started(marker)
    stopped_at = time.time()
    server.proc.send_signal(signal.SIGTERM)
    thread.join()
    assert server.proc.wait(timeout=30) == 0
    assert time.time() - stopped_at < 10
    result = outcome["response"].json()
    assert result["cancelled"] is True and result["success"] is False
    assert wait_gone(marker) == []
    assert "grace_over_cancelling" in [line.get("event") for line in server.log_lines()]


def test_the_queue_is_given_up_and_new_connections_refused(start_server):
    server = start_server("--max-running", "1", "--grace", "5")
    running = unique_marker()
    first, second = {}, {}
    t1 = in_background(server, {"language": "bash", "code": f"(exec -a {running} sleep 1.5); echo ran"},
                       first)
    wait_started(running)
    t2 = in_background(server, {"language": "bash", "code": "echo queued"}, second)
    while server.request("GET", "/healthz").json()["queued"] < 1:
        time.sleep(0.05)
    server.proc.send_signal(signal.SIGTERM)
    t2.join()
    assert second["response"].status == 503
    assert second["response"].json()["error"]["code"] == "shutting_down"
    time.sleep(0.2)
    with pytest.raises(OSError):
        socket.create_connection((server.host, server.port), timeout=2).close()
    t1.join()
    assert first["response"].json()["output"] == "ran\n"
    assert server.proc.wait(timeout=30) == 0


def test_a_stream_in_flight_gets_its_result(start_server):
    server = start_server()
    conn = server.connection()
    conn.request("POST", "/v1/execute", headers=server.headers(json_body=True), body=json.dumps(
        {"language": "bash", "code": "echo a; sleep 1.5; echo b", "stream": True}).encode())
    response = conn.getresponse()
    assert json.loads(response.readline()) == {"type": "stdout", "data": "a\n"}
    server.proc.send_signal(signal.SIGTERM)
    rest = [json.loads(line) for line in response.read().splitlines() if line]
    conn.close()
    assert rest[0] == {"type": "stdout", "data": "b\n"}
    assert rest[-1]["type"] == "result" and rest[-1]["success"] is True
    assert server.proc.wait(timeout=30) == 0


@pytest.mark.serial
def test_a_server_killed_outright_takes_its_executions_with_it(start_server):
    """The kernel ends each sandbox when the server's process dies, however
    it died (the sandbox's init has a parent-death signal)."""
    server = start_server()
    marker = unique_marker()
    outcome = {}
    cgroups_before = execution_cgroups()
    thread = in_background(server, {"language": "bash", "code": f"sleep {marker}",
                                    "timeout": 120}, outcome)
    wait_started(marker)
    server.expected_exit = -signal.SIGKILL
    server.proc.kill()
    thread.join()
    assert "error" in outcome  # nobody was left to answer
    assert wait_gone(marker) == []
    remove_cgroups_left_since(cgroups_before)


@pytest.mark.serial
@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are root's here")
def test_a_running_server_sweeps_what_a_killed_one_left(server):
    """Leftovers that appear while a server runs (a killed CLI's, a cgroup
    of no known owner an hour old) are swept by its next execution a second
    or more after its last sweep (at most one a second, so that a busy
    server does not list the host's sandboxes for every execution)."""
    server.execute(language="bash", code="true", network=False)  # the start's sweep is done
    name = f"exec-stale{uuid.uuid4().hex[:12]}"
    with planted_cgroups({name: 7200}) as planted:
        time.sleep(1.1)
        server.execute(language="bash", code="true", network=False)
        assert existing(planted[name]) == []
