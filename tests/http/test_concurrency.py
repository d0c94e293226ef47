"""Admission: many executions at once, none lost or mixed up; a full queue
is refused with 429."""
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from http_helpers import processes_matching, unique_marker, wait_gone


def test_fifty_concurrent_executions_across_ten_sessions(start_server):
    server = start_server("--max-queue", "100")
    sessions = [f"conc-{i}" for i in range(10)]

    def run(i):
        token = f"token-{i}-{unique_marker()}"
        session = sessions[i % 10]
        code = f"echo {token} > mine-{i}; sleep 0.2; cat mine-{i}; echo $RUNBOX_SESSION_ID"
        response = server.request("POST", "/v1/execute", json_body={
            "language": "bash", "code": code, "session_id": session, "timeout": 120})
        return i, token, session, response

    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(run, range(50)))
    for i, token, session, response in results:
        assert response.status == 200, response
        result = response.json()
        assert result["success"], result
        assert result["output"] == f"{token}\n{session}\n"
        assert result["session_id"] == session
    listed = {s["session_id"] for s in server.request("GET", "/v1/sessions").json()["sessions"]}
    assert set(sessions) <= listed


def test_a_full_queue_is_429_with_retry_after(start_server):
    server = start_server("--max-running", "1", "--max-queue", "1")
    first, second = unique_marker(), unique_marker()
    outcomes = {}

    def run(name, marker):
        outcomes[name] = server.request("POST", "/v1/execute", json_body={
            "language": "bash", "code": f"sleep {marker} & wait; echo {name}"}, timeout=60)

    threads = [threading.Thread(target=run, args=("first", first))]
    threads[0].start()
    deadline = time.time() + 20
    while not processes_matching(first) and time.time() < deadline:
        time.sleep(0.05)
    threads.append(threading.Thread(target=run, args=("second", second)))
    threads[1].start()
    while server.request("GET", "/healthz").json()["queued"] < 1 and time.time() < deadline:
        time.sleep(0.05)
    health = server.request("GET", "/healthz").json()
    assert (health["running"], health["queued"]) == (1, 1)

    refused = server.request("POST", "/v1/execute", json_body={"language": "bash",
                                                                "code": "echo third"})
    assert refused.status == 429, refused
    assert refused.header("Retry-After") == "1"
    assert refused.json()["error"]["code"] == "queue_full"
    metrics = server.request("GET", "/metrics").body.decode()
    assert "runbox_executions_running 1" in metrics
    assert "runbox_executions_queued 1" in metrics

    # sleep's argument is read as seconds: end both early by killing them
    for marker in (first, second):
        deadline = time.time() + 20
        while not processes_matching(marker) and time.time() < deadline:
            time.sleep(0.05)
        for pid in processes_matching(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for thread in threads:
        thread.join()
    assert outcomes["first"].status == 200 and outcomes["first"].json()["output"] == "first\n"
    assert outcomes["second"].status == 200 and outcomes["second"].json()["output"] == "second\n"
    assert wait_gone(first) == [] and wait_gone(second) == []
    assert server.healthy()


def test_executions_beyond_the_limit_wait_their_turn_in_order(start_server):
    server = start_server("--max-running", "1", "--max-queue", "10")
    order = []
    lock = threading.Lock()

    def run(i):
        response = server.request("POST", "/v1/execute", json_body={
            "language": "bash", "code": f"sleep 0.3; echo {i}"})
        with lock:
            order.append(response.json()["output"].strip())

    threads = []
    for i in range(4):
        threads.append(threading.Thread(target=run, args=(i,)))
        threads[-1].start()
        time.sleep(0.1)  # arrive in order
    for thread in threads:
        thread.join()
    assert order == ["0", "1", "2", "3"]
