"""Stateful sessions over HTTP: the `stateful` field, rich outputs streamed as `display` events,
the restart route, kernels in the session's JSON, and one kernel shared with the CLI through
the state directory's local socket."""
import base64
import json
import os
import subprocess
import threading
import time

from http_helpers import RUNBOX, processes_matching, unique_marker, wait_gone

PLOT = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "print('before', flush=True)\nplt.plot([1, 2, 3])\n")


def stateful(server, code, session="web", language="python", expect=200, **fields):
    return server.execute(expect=expect, language=language, code=code, session_id=session,
                          stateful=True, **fields)


def started(marker, seconds=5.0):
    deadline = time.time() + seconds
    while not processes_matching(marker) and time.time() < deadline:
        time.sleep(0.02)
    return processes_matching(marker)


def stream(server, body, accept):
    conn = server.connection()
    conn.request("POST", "/v1/execute", body=json.dumps(body).encode(),
                 headers=server.headers({"Accept": accept}, json_body=True))
    response = conn.getresponse()
    assert response.status == 200
    return conn, response


def test_state_persists_across_requests_and_the_result_says_so(server):
    first = stateful(server, "import math\nx = 40")
    assert first["stateful"] is True and first["execution_count"] == 1 and first["results"] == []
    second = stateful(server, "x + 2")
    assert second["execution_count"] == 2 and second["kernel_restarted"] is False
    assert second["results"] == [{"kind": "execute_result", "data": {"text/plain": "42"}}]
    plain = server.execute(language="python", code="print('x' in dir())", session_id="web")
    assert plain["stateful"] is False and plain["output"] == "False\n"  # a fresh interpreter


def test_a_one_off_plot_comes_back_and_streams_as_a_stateful_calls(server):
    """Not stateful: the figure left open at the end is a display event and in "results",
    whether a prepared sandbox served the run or a cold one did."""
    plain = server.execute(language="python", code=PLOT)
    if "No module named 'matplotlib'" in plain["error"]:
        return  # a host root without matplotlib: nothing to show
    assert plain["stateful"] is False and plain["success"], plain
    (figure,) = plain["results"]
    assert figure["kind"] == "display_data", figure
    assert base64.b64decode(figure["data"]["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    conn, response = stream(server, {"language": "python", "code": PLOT}, "application/x-ndjson")
    events = [json.loads(line) for line in response]
    conn.close()
    kinds = [e["type"] for e in events]
    assert kinds[-2:] == ["display", "result"] and set(kinds[:-2]) == {"stdout"}, kinds
    assert events[-2]["data"] == events[-1]["results"][0]["data"], events[-2]


def test_ndjson_streams_a_plot_after_the_text_before_it_and_before_the_result(server):
    conn, response = stream(server, {"language": "python", "code": PLOT, "session_id": "web",
                                     "stateful": True}, "application/x-ndjson")
    events = [json.loads(line) for line in response]
    conn.close()
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "result" and "display" in kinds, kinds
    assert kinds.index("stdout") < kinds.index("display"), kinds  # in the order it happened
    assert events[kinds.index("display")]["kind"] == "execute_result"  # plot()'s value, then the figure
    display = next(e for e in events if e["type"] == "display" and "image/png" in e["data"])
    png = base64.b64decode(display["data"]["image/png"])
    assert display["kind"] == "display_data" and png.startswith(b"\x89PNG\r\n\x1a\n")
    assert events[-1]["results"][1]["data"]["image/png"] == display["data"]["image/png"]


def test_sse_names_the_display_event(server):
    conn, response = stream(server, {"language": "javascript", "session_id": "web",
                                     "stateful": True,
                                     "code": "display({'text/html': '<b>hi</b>'}, {raw: true})"},
                            "text/event-stream")
    body = response.read().decode()
    conn.close()
    frames = [f for f in body.split("\n\n") if f.strip()]
    names = [line.split(": ", 1)[1] for f in frames for line in f.splitlines()
             if line.startswith("event: ")]
    assert names[-1] == "result" and "display" in names, body
    data = [json.loads(line[len("data: "):]) for f in frames for line in f.splitlines()
            if line.startswith("data: ")]
    assert {"type": "display", "kind": "display_data", "data": {"text/html": "<b>hi</b>"}} in data


def test_the_session_lists_its_kernel_and_restart_stops_it(server):
    stateful(server, "kept = 1")
    stateful(server, "X=1", language="bash")
    session = server.request("GET", "/v1/sessions/web").json()
    kernels = {k["language"]: k for k in session["kernels"]}
    assert set(kernels) == {"python", "bash"} and kernels["python"]["state"] == "idle", session
    assert kernels["python"]["owner_pid"] == server.proc.pid and kernels["python"]["memory_bytes"] > 0
    one = server.request("POST", "/v1/sessions/web/restart?language=bash")
    assert one.status == 200 and one.json() == {"session_id": "web", "stopped": 1}, one
    rest = server.request("POST", "/v1/sessions/web/restart")
    assert rest.json()["stopped"] == 1
    assert server.request("GET", "/v1/sessions/web").json()["kernels"] == []
    after = stateful(server, "'kept' in dir()")
    assert after["results"][0]["data"]["text/plain"] == "False"
    assert after["kernel_restarted"] is False  # asked for: not a loss to report


def test_restart_refuses_what_it_cannot_do(server):
    assert server.request("POST", "/v1/sessions/nope/restart").status == 404
    stateful(server, "pass")
    bad = server.request("POST", "/v1/sessions/web/restart?language=cobol")
    assert bad.status == 400 and b"python" in bad.body, bad
    hostile = server.request("POST", "/v1/sessions/..%2Fetc/restart")
    assert hostile.status in (400, 404), hostile


def test_hostile_stateful_fields_get_clear_errors(server):
    for value in ("yes", 1, 0.5, [], {}):  # null is leaving it out
        bad = server.request("POST", "/v1/execute", json_body={"language": "python", "code": "1",
                                                               "stateful": value})
        assert bad.status == 400 and b"stateful" in bad.body and b"boolean" in bad.body, bad
    both = server.request("POST", "/v1/execute", json_body={"language": "python", "code": "1",
                                                            "stateful": True, "stdin": "x"})
    assert both.status == 400 and b"stdin" in both.body, both


def test_deleting_the_session_stops_its_kernel(server):
    marker = unique_marker()
    stateful(server, f"sleep {marker} &", language="bash")
    assert started(marker)
    assert server.request("DELETE", "/v1/sessions/web").status == 200
    assert wait_gone(marker, 10) == []


def test_a_timeout_interrupts_and_the_state_stays(server):
    stateful(server, "total = 5")
    slow = stateful(server, "import time\nwhile True: time.sleep(0.05)", timeout=1)
    assert slow["error_type"] == "TimeoutError" and slow["kernel_restarted"] is False, slow
    assert "KeyboardInterrupt" in slow["error"] and "keeps its state" in slow["error"]
    assert stateful(server, "total")["results"][0]["data"]["text/plain"] == "5"


def test_calls_on_one_session_wait_their_turn(server):
    """One kernel runs one call at a time: two at once do not interleave in it."""
    stateful(server, "import time\nlog = []")
    results = []

    def worker(tag):
        results.append(stateful(server, f"log.append('{tag}+')\ntime.sleep(0.5)\n"
                                        f"log.append('{tag}-')"))

    threads = [threading.Thread(target=worker, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r["success"] for r in results), results
    log = stateful(server, "log")["results"][0]["data"]["text/plain"]
    assert log in ("['a+', 'a-', 'b+', 'b-']", "['b+', 'b-', 'a+', 'a-']"), log


def test_the_cli_reaches_the_servers_kernel_through_the_local_socket(server):
    stateful(server, "shared = 'from http'")
    socket_path = os.path.join(server.state_dir, "runbox.sock")
    assert os.stat(socket_path).st_mode & 0o777 == 0o600
    proc = subprocess.run([RUNBOX, "--state-dir", server.state_dir, "run", "python", "-c",
                           "print(shared)", "--stateful", "--session", "web", "--json"],
                          capture_output=True, env=server.cli.env(None), timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["output"] == "from http\n" and result["execution_count"] == 2, result


def test_a_kernel_lost_with_its_server_is_reported_by_the_next_server(start_server):
    # Without hibernation (a host without criu): with it, the kernel would sleep instead
    # (tests/e2e/test_hibernation.py).
    first = start_server(global_args=("--hibernate", "off"))
    stateful(first, "kept = 1")
    assert first.stop() == 0
    second = start_server(global_args=("--hibernate", "off"))
    after = stateful(second, "'kept' in dir()")
    assert after["results"][0]["data"]["text/plain"] == "False"
    assert after["kernel_restarted"] is True  # the state went without the session asking
    assert stateful(second, "1")["kernel_restarted"] is False  # said once


def test_when_every_kernel_is_busy_a_new_one_gets_a_clear_error(start_server):
    server = start_server(global_args=("--max-kernels", "1"))
    holder = threading.Thread(target=stateful, args=(server, "import time\ntime.sleep(3)", "a"))
    holder.start()
    deadline = time.time() + 10
    while not server.request("GET", "/v1/sessions/a").json().get("kernels") and \
            time.time() < deadline:
        time.sleep(0.05)
    refused = server.request("POST", "/v1/execute", json_body={
        "language": "python", "code": "1", "session_id": "b", "stateful": True})
    holder.join()
    assert refused.status == 409, refused
    assert b"each of the 1 kernels this runbox may keep is running a call" in refused.body and b"--max-kernels" in refused.body
    assert stateful(server, "2", "b")["results"][0]["data"]["text/plain"] == "2"  # then it fits


def test_a_glance_at_the_kernels_lock_file_does_not_pass_for_its_owner(server):
    """Listing sessions looks at each kernel's lock file by holding a shared lock for an
    instant, in any runbox process; a kernel starting meanwhile must wait for it, not report
    the session's kernel as held by another process (the full soak once met that)."""
    import fcntl
    stateful(server, "x = 1", session="glance")
    server.request("POST", "/v1/sessions/glance/restart")
    lock_path = os.path.join(server.state_dir, "sessions", "glance", "kernel-python.lock")
    with open(lock_path) as glance:
        fcntl.flock(glance, fcntl.LOCK_SH | fcntl.LOCK_NB)
        release = threading.Timer(0.1, fcntl.flock, (glance, fcntl.LOCK_UN))
        release.start()
        result = stateful(server, "y = 2; y", session="glance")
        release.join()
    assert result["results"][0]["data"]["text/plain"] == "2", result


def test_a_lock_held_for_long_is_another_owner_with_a_clear_error(server):
    import fcntl
    stateful(server, "x = 1", session="owned")
    server.request("POST", "/v1/sessions/owned/restart")
    lock_path = os.path.join(server.state_dir, "sessions", "owned", "kernel-python.lock")
    with open(lock_path) as held:
        fcntl.flock(held, fcntl.LOCK_SH | fcntl.LOCK_NB)
        refused = server.execute(expect=409, language="python", code="1", session_id="owned",
                                 stateful=True)
    assert "held by another runbox process" in refused["error"]["message"], refused
    assert "pid 0" not in refused["error"]["message"]
    assert stateful(server, "2 + 2", session="owned")["results"][0]["data"]["text/plain"] == "4"
