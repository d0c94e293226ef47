"""E2B's protocol on runbox (issue 18): a call through `runbox serve --e2b-listen` (POST
/execute, NDJSON, the default Python context) against the same stateful call through runbox's
own API, interleaved over keep-alive connections; and, where `make e2b-sdk` installed it, E2B's
released SDK calling `run_code` (it opens a new connection per call).

E2B's sandboxes (issue 32), through the released SDK with only E2B_API_URL, E2B_SANDBOX_URL
and E2B_API_KEY set: `Sandbox.create()` to the first `run_code` result (E2B's own sandbox start
alone is about 150 ms), and a `commands.run("echo hi")` round trip; against runbox's own API in
the same run: a new session's first stateful call, and a one-off bash in a session."""
import http.client
import json
import os
import subprocess
import time

from common import Server, summary

SDK_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "build", "e2b-venv", "bin", "python")

SDK_SCRIPT = """
import json, os, sys, time
from e2b_code_interpreter import Sandbox
sbx = Sandbox.create()
assert sbx.run_code("print('hi')").logs.stdout == ["hi\\n"]
samples = []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    execution = sbx.run_code("print('hi')")
    samples.append((time.perf_counter() - start) * 1000)
    assert execution.logs.stdout == ["hi\\n"], execution
print(json.dumps(samples))
"""


SANDBOX_SCRIPT = """
import json, sys, time
from e2b_code_interpreter import Sandbox
creates, runs = int(sys.argv[1]), int(sys.argv[2])
samples = {"sdk_create_to_first_run_code": [], "sdk_commands_run_echo": []}
for _ in range(creates):
    start = time.perf_counter()
    sbx = Sandbox.create()
    execution = sbx.run_code("print('hi')")
    samples["sdk_create_to_first_run_code"].append((time.perf_counter() - start) * 1000)
    assert execution.logs.stdout == ["hi\\n"], execution
    sbx.kill()
sbx = Sandbox.create()
assert sbx.commands.run("echo hi").stdout == "hi\\n"
for _ in range(runs):
    start = time.perf_counter()
    result = sbx.commands.run("echo hi")
    samples["sdk_commands_run_echo"].append((time.perf_counter() - start) * 1000)
    assert result.stdout == "hi\\n", result
sbx.kill()
# Pause and connect of a sandbox running no command, and of one running four (to disk by the
# pause where runbox hibernates, else frozen; restored or thawed by the connect), in turn.
for name in ("no_commands", "4_commands"):
    samples[f"sdk_pause_{name}"], samples[f"sdk_connect_{name}"] = [], []
boxes = {"no_commands": Sandbox.create(), "4_commands": Sandbox.create()}
for _ in range(4):
    boxes["4_commands"].commands.run("sleep 600", background=True)
for _ in range(max(5, creates)):
    for name, box in boxes.items():
        start = time.perf_counter()
        assert box.pause() is True
        samples[f"sdk_pause_{name}"].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        box = boxes[name] = Sandbox.connect(box.sandbox_id)
        samples[f"sdk_connect_{name}"].append((time.perf_counter() - start) * 1000)
assert len(boxes["4_commands"].commands.list()) == 4
for box in boxes.values():
    box.kill()
print(json.dumps(samples))
"""


PAUSE_SCRIPT = """
import json, sys, time
from e2b_code_interpreter import Sandbox
samples = {"sdk_pause_4_commands_frozen": [], "sdk_connect_4_commands_frozen": []}
box = Sandbox.create()
for _ in range(4):
    box.commands.run("sleep 600", background=True)
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    assert box.pause() is True
    samples["sdk_pause_4_commands_frozen"].append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    box = Sandbox.connect(box.sandbox_id)
    samples["sdk_connect_4_commands_frozen"].append((time.perf_counter() - start) * 1000)
assert len(box.commands.list()) == 4
box.kill()
print(json.dumps(samples))
"""


def _sdk_env(server):
    env = {k: v for k, v in os.environ.items() if not k.startswith("E2B_")}
    url = f"http://127.0.0.1:{server.e2b_port}"
    env.update(E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY="bench")
    return env


def _frozen_pauses(runbox, work, runs):
    """The same four commands' pause and connect on a server that does not hibernate
    (`--hibernate off`): frozen in memory and thawed, for comparison."""
    state = os.path.join(work, "e2b-frozen-state")
    server = Server(runbox, state, e2b=True, global_args=("--hibernate", "off"))
    try:
        done = subprocess.run([SDK_PYTHON, "-c", PAUSE_SCRIPT, str(max(5, runs // 4))],
                              env=_sdk_env(server), capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            return {"e2b_frozen_error": done.stderr[-500:]}
        return {name: summary(values) for name, values in json.loads(done.stdout).items()}
    finally:
        server.stop()
        subprocess.run([runbox, "--state-dir", state, "storage", "unmount"], capture_output=True)


def _new_session(server, conn):
    return json.loads(server.request("POST", "/v1/sessions", {}, conn=conn)[1])["session_id"]


def _runbox_sandbox_variants(server, runs):
    """runbox's own API for what the SDK script does: a new session's first stateful call
    (its kernel starts), and a one-off bash `echo hi` in a session."""
    conn = server.connection()
    samples = {"runbox_new_session_first_stateful": [], "runbox_bash_in_session": []}
    for i in range(max(5, runs // 4)):
        start = time.perf_counter()
        session = _new_session(server, conn)
        _timed_post(conn, f"/v1/sessions/{session}/execute",
                    {"language": "python", "code": "print('hi')", "stateful": True},
                    lambda data: json.loads(data)["output"] == "hi\n")
        samples["runbox_new_session_first_stateful"].append((time.perf_counter() - start) * 1000)
        server.request("DELETE", f"/v1/sessions/{session}", conn=conn)
    session = _new_session(server, conn)
    for _ in range(runs):
        samples["runbox_bash_in_session"].append(_timed_post(
            conn, f"/v1/sessions/{session}/execute", {"language": "bash", "code": "echo hi"},
            lambda data: json.loads(data)["output"] == "hi\n"))
    server.request("DELETE", f"/v1/sessions/{session}", conn=conn)
    return {name: summary(values) for name, values in samples.items()}


def _sdk_sandboxes(server, runs):
    done = subprocess.run([SDK_PYTHON, "-c", SANDBOX_SCRIPT, str(max(5, runs // 4)), str(runs)],
                          env=_sdk_env(server), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return {"e2b_sandbox_error": done.stderr[-500:]}
    return {name: summary(values) for name, values in json.loads(done.stdout).items()}


def _timed_post(conn, path, body, check):
    start = time.perf_counter()
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    elapsed = (time.perf_counter() - start) * 1000
    if response.status != 200 or not check(data):
        raise RuntimeError(f"HTTP {response.status}: {data[:300]}")
    return elapsed


def run(runbox, work, runs):
    server = Server(runbox, os.path.join(work, "e2b-state"), e2b=True)
    try:
        runbox_conn = server.connection()
        e2b_conn = http.client.HTTPConnection("127.0.0.1", server.e2b_port, timeout=60)
        variants = {
            "runbox_http_stateful": lambda: _timed_post(
                runbox_conn, "/v1/execute",
                {"language": "python", "code": "print('hi')", "session_id": "bench-e2b",
                 "stateful": True},
                lambda data: json.loads(data)["output"] == "hi\n"),
            "e2b_execute": lambda: _timed_post(
                e2b_conn, "/execute", {"code": "print('hi')", "context_id": None,
                                       "language": None, "env_vars": None},
                lambda data: b'"text":"hi\\n"' in data and data.endswith(
                    b'{"type":"end_of_execution"}\n')),
        }
        samples = {name: [] for name in variants}
        for call in variants.values():  # starts each kernel, not counted
            call()
        for _ in range(runs):
            for name, call in variants.items():
                samples[name].append(call())
        results = {name: summary(values) for name, values in samples.items()}
        if os.path.exists(SDK_PYTHON):
            env = dict(os.environ, E2B_DEBUG="true",
                       E2B_SANDBOX_URL=f"http://127.0.0.1:{server.e2b_port}")
            done = subprocess.run([SDK_PYTHON, "-c", SDK_SCRIPT, str(runs)], env=env,
                                  capture_output=True, text=True, timeout=600)
            if done.returncode == 0:
                results["e2b_sdk_run_code"] = summary(json.loads(done.stdout))
            else:
                results["e2b_sdk_error"] = done.stderr[-500:]
        if os.path.exists(SDK_PYTHON):
            sandboxes = _sdk_sandboxes(server, runs)
            sandboxes.update(_runbox_sandbox_variants(server, runs))
            sandboxes.update(_frozen_pauses(runbox, work, runs))
            for sdk, own in (("sdk_create_to_first_run_code", "runbox_new_session_first_stateful"),
                             ("sdk_commands_run_echo", "runbox_bash_in_session")):
                if sdk in sandboxes and own in sandboxes:
                    sandboxes[sdk]["ratio_to_runbox_api"] = round(
                        sandboxes[sdk]["median_ms"] / sandboxes[own]["median_ms"], 3)
            results["sandboxes"] = sandboxes
        base = results["runbox_http_stateful"]["median_ms"]
        for name, s in results.items():
            if isinstance(s, dict) and "median_ms" in s:
                s["ratio_to_runbox_stateful"] = round(s["median_ms"] / base, 3)
        return results
    finally:
        server.stop()
        subprocess.run([runbox, "--state-dir", os.path.join(work, "e2b-state"), "storage",
                        "unmount"], capture_output=True)


def markdown(results):
    e = results.get("e2b")
    if not e:
        return []
    lines = ["", "## E2B's protocol (issue 18; python `print('hi')` in a live kernel, ms)", "",
             "The same stateful call through runbox's API and through `runbox serve "
             "--e2b-listen` (NDJSON lines as E2B's SDK reads them), interleaved over keep-alive "
             "connections; then E2B's released SDK (`Sandbox.run_code`, which opens a "
             "connection per call) against the same server.", "",
             "| variant | median | p90 | p99 | x runbox stateful |", "|---|---|---|---|---|"]
    for name in ("runbox_http_stateful", "e2b_execute", "e2b_sdk_run_code"):
        s = e.get(name)
        if s:
            lines.append(f"| {name} | {s['median_ms']} | {s['p90_ms']} | {s['p99_ms']} | "
                         f"{s['ratio_to_runbox_stateful']} |")
    if e.get("e2b_sdk_error"):
        lines += ["", f"The SDK run failed: `{e['e2b_sdk_error']}`"]
    sandboxes = e.get("sandboxes")
    if sandboxes:
        lines += ["", "### E2B's sandboxes (issue 32; ms)", "",
                  "E2B's released SDK with only `E2B_API_URL`, `E2B_SANDBOX_URL` and `E2B_API_KEY` "
                  "set: `Sandbox.create()` to the first `run_code` result, and a "
                  "`commands.run(\"echo hi\")` round trip; runbox's own API for the same in the "
                  "same run (a new session's first stateful call; a one-off bash in a session). "
                  "E2B's own sandbox start alone is about 150 ms.", "",
                  "| variant | median | p90 | p99 | x runbox's API |", "|---|---|---|---|---|"]
        for name in ("sdk_create_to_first_run_code", "runbox_new_session_first_stateful",
                     "sdk_commands_run_echo", "runbox_bash_in_session"):
            s = sandboxes.get(name)
            if s:
                lines.append(f"| {name} | {s['median_ms']} | {s['p90_ms']} | {s['p99_ms']} | "
                             f"{s.get('ratio_to_runbox_api', '')} |")
        pauses = [n for n in ("sdk_pause_no_commands", "sdk_connect_no_commands",
                              "sdk_pause_4_commands", "sdk_connect_4_commands",
                              "sdk_pause_4_commands_frozen", "sdk_connect_4_commands_frozen")
                  if n in sandboxes]
        if pauses:
            lines += ["", "`pause()` and `Sandbox.connect()` of a sandbox that runs no command and "
                      "of one that runs four (`sleep 600` in the background: to disk by the pause "
                      "where runbox hibernates, restored by the connect), in turn; `_frozen`: the "
                      "four on a server with `--hibernate off`, frozen in memory and thawed:", "",
                      "| variant | median | p90 | p99 |", "|---|---|---|---|"]
            for name in pauses:
                s = sandboxes[name]
                lines.append(f"| {name} | {s['median_ms']} | {s['p90_ms']} | {s['p99_ms']} |")
        if sandboxes.get("e2b_sandbox_error"):
            lines += ["", f"The SDK run failed: `{sandboxes['e2b_sandbox_error']}`"]
    return lines
