"""Crash recovery: `runbox serve` killed with SIGKILL at random moments under load, then started
again on the same state directory. Nothing stored is lost, nothing of the killed server is left
on the host once the new one listens, and the killed server's clients got an error, not a
hang."""
import concurrent.futures
import http.client
import os
import random
import time

import pytest

from http_helpers import Server, e2e, execution_cgroups

live_helpers, sandbox_processes = e2e.live_helpers, e2e.sandbox_processes

SESSIONS = [f"crash-{i}" for i in range(4)]
LOAD = [
    ("python", "import time\nopen('during.txt','w').write('x' * 100000)\ntime.sleep(0.3)\n"
               "print('done')"),
    ("bash", "for i in $(seq 50); do echo $i >> log.txt; done; sleep 0.2; echo done"),
    ("javascript", "require('fs').writeFileSync('js.txt', 'y'.repeat(50000)); "
                   "setTimeout(() => console.log('done'), 200)"),
]


def stored(server):
    """What the test stored before any crash: the same after every one."""
    return {s: server.request("GET", f"/v1/sessions/{s}/files/kept.bin").body for s in SESSIONS}


def one_request(server, index):
    language, code = LOAD[index % len(LOAD)]
    body = {"language": language, "code": code, "timeout": 20, "network": index % 2 == 0}
    if index % 3:
        body["session_id"] = SESSIONS[index % len(SESSIONS)]
    started = time.monotonic()
    try:
        response = server.request("POST", "/v1/execute", json_body=body, timeout=30)
        outcome = "ok" if response.status == 200 else f"status {response.status}"
    except (OSError, http.client.HTTPException) as exc:
        outcome = type(exc).__name__
    return outcome, time.monotonic() - started


def load_until_killed(server, kill_after):
    """Eight clients send executions until the server is killed; returns their outcomes."""
    outcomes = []
    deadline = time.monotonic() + kill_after

    def client(worker):
        index = worker
        while True:
            outcome, took = one_request(server, index)
            outcomes.append((outcome, took))
            if outcome != "ok" and not outcome.startswith("status"):
                return  # the server is gone: this client got its error
            index += 8

    with concurrent.futures.ThreadPoolExecutor(max_workers=9) as pool:
        clients = [pool.submit(client, w) for w in range(8)]
        time.sleep(max(0.0, deadline - time.monotonic()))
        server.proc.kill()
        server.proc.wait()
        done, pending = concurrent.futures.wait(clients, timeout=60)
        assert not pending, "a client of the killed server hangs"
    return outcomes


@pytest.mark.serial
@pytest.mark.skipif(os.geteuid() != 0, reason="the host-side sweep is checked as root")
def test_a_server_killed_under_load_restarts_clean_and_loses_nothing(tmp_path):
    server = Server(tmp_path)
    try:
        for session in SESSIONS:
            assert server.request("POST", "/v1/sessions",
                                  json_body={"session_id": session}).status == 201
            payload = os.urandom(4096) + session.encode()
            assert server.request("PUT", f"/v1/sessions/{session}/files/kept.bin",
                                  body=payload).status == 200
        before = stored(server)
        cgroups_before = execution_cgroups()
        rounds = []
        for _ in range(3):
            outcomes = load_until_killed(server, random.uniform(0.3, 1.5))
            rounds.append(outcomes)
            errors = [o for o, _ in outcomes if o != "ok"]
            assert errors, "no client of the killed server saw it go"
            assert all(took < 35 for _, took in outcomes)
            # The same state directory; it listens once swept (without a pool of its own,
            # whose cgroups would be new ones).
            server = Server(tmp_path, global_args=("--pool", "0"))
            assert execution_cgroups() - cgroups_before == set(), "cgroups of the killed server"
            deadline = time.time() + 10  # a sandbox's init dies with its runbox, asynchronously
            while (sandbox_processes() or live_helpers()) and time.time() < deadline:
                time.sleep(0.05)
            assert sandbox_processes() == [] and live_helpers() == []
            assert stored(server) == before
            listed = {s["session_id"] for s in server.request("GET", "/v1/sessions").json()["sessions"]}
            assert set(SESSIONS) <= listed
            assert server.healthy()
        assert sum(o == "ok" for r in rounds for o, _ in r) > 0, "no execution ever finished"
    finally:
        code = server.stop()
        server.cleanup()
    assert code == 0
