"""E2B's protocol on the wire, where the SDK cannot reach: hostile requests get clear 4xx
errors and never a crash or a hang; keepalive lines during silence; the token; contexts
surviving a restart; `runbox serve --e2b-listen`'s own checks."""
import json
import os
import subprocess
import time

import pytest
from e2b_code_interpreter import Sandbox
from e2b.connection_config import ConnectionConfig
from e2b.exceptions import SandboxException

from http_helpers import RUNBOX


def ndjson(body):
    return [json.loads(line) for line in body.decode().splitlines()]


def execute(server, payload, headers=None, timeout=60):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return server.e2b_request("POST", "/execute", data,
                              {"Content-Type": "application/json", **(headers or {})}, timeout)


def test_an_execution_is_ndjson_lines_ending_with_the_count_and_the_end(e2b_server):
    status, body = execute(e2b_server, {"code": "print('hi')\n6 * 7", "context_id": None,
                                        "language": None, "env_vars": None})
    assert status == 200
    lines = ndjson(body)
    types = [line["type"] for line in lines]
    assert types == ["stdout", "result", "number_of_executions", "end_of_execution"], lines
    assert lines[0]["text"] == "hi\n" and isinstance(lines[0]["timestamp"], int)
    assert lines[1]["text"] == "42" and lines[1]["is_main_result"] is True
    assert lines[2]["execution_count"] == 1


@pytest.mark.parametrize("payload, status, says", [
    (b"{not json", 400, "JSON"),
    (b"[]", 400, "object"),
    ({"context_id": None}, 400, "'code' is required"),
    ({"code": 5}, 400, "'code' is required"),
    ({"code": "1", "language": "python", "context_id": "e2b-python"}, 400, "not both"),
    ({"code": "1", "language": "r"}, 400, "accepted: python, javascript"),
    ({"code": "1", "language": 3}, 400, "must be strings"),
    ({"code": "1", "context_id": "../../etc"}, 404, "not found"),
    ({"code": "1", "context_id": "nope"}, 404, "context nope not found"),
    ({"code": "1", "env_vars": "A=1"}, 400, "env"),
    ({"code": "1", "env_vars": {"HOME": "/root"}}, 400, "HOME"),
    ({"code": "1", "env_vars": {"BAD NAME": "x"}}, 400, "BAD NAME"),
])
def test_hostile_executions_get_a_clear_error(e2b_server, payload, status, says):
    got, body = execute(e2b_server, payload)
    assert got == status, body[:300]
    assert says in body.decode(), body[:300]
    # Still serving.
    assert ndjson(execute(e2b_server, {"code": "1 + 1"})[1])[0]["text"] == "2"


@pytest.mark.parametrize("method, path, header", [
    ("GET", "/files?path=x", "E2b-Sandbox-Id"),
    ("GET", "/files?path=x", "E2b-Sandbox-Port"),
    ("GET", "/files?path=x", "X-Access-Token"),
    ("POST", "/execute", "E2B-Traffic-Access-Token"),
    ("GET", "/sandboxes", "X-API-KEY"),
])
def test_an_auth_or_routing_header_sent_twice_is_400(module_e2b, method, path, header):
    """runbox takes the first copy of a header; a proxy in front may route or authenticate by
    the last, or by both joined: which sandbox a request is for, and whose token it shows, must
    be unambiguous. Refused before routing, whatever the two copies say."""
    for copies in [(header, "a", header, "b"), (header, "a", header.lower(), "a")]:
        twice = b"%s: %s\r\n%s: %s\r\n" % tuple(c.encode() for c in copies)
        answer = module_e2b.raw(f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n".encode() +
                                twice + b"Content-Length: 0\r\nConnection: close\r\n\r\n",
                                port=module_e2b.e2b_port)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 "), answer[:300]
        assert header.lower() in body.decode().lower() and "2 times" in body.decode(), body
    assert module_e2b.e2b_request("GET", "/health")[0] in (200, 204)


def test_an_oversized_body_is_refused_before_it_is_read(e2b_server):
    import socket
    with socket.create_connection(("127.0.0.1", e2b_server.e2b_port), timeout=30) as sock:
        sock.sendall(b"POST /execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % (64 << 20))
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"larger than the limit" in answer


@pytest.mark.parametrize("method, path, body, status, says", [
    ("POST", "/contexts", b'{"language": "cobol"}', 400, "accepted"),
    ("POST", "/contexts", b'{"cwd": "relative/dir"}', 400, "absolute path"),
    ("POST", "/contexts", b'{"cwd": 7}', 400, "must be strings"),
    ("POST", "/contexts", json.dumps({"cwd": "/" + "a" * 5000}).encode(), 400, "at most"),
    ("POST", "/contexts/nope/restart", b"", 404, "not found"),
    ("DELETE", "/contexts/nope", b"", 404, "not found"),
    ("DELETE", "/contexts/..%2f..%2fetc", b"", 404, "not_found"),
    ("POST", "/contexts/..%2f/restart", b"", 404, "not_found"),
    ("GET", "/v1/sessions", b"", 404, "no such route"),  # runbox's API is not on this port
    ("PUT", "/execute", b"", 405, "allowed"),
])
def test_hostile_context_requests_get_a_clear_error(e2b_server, method, path, body, status, says):
    headers = {"Content-Type": "application/json"} if body else {}
    got, text = e2b_server.e2b_request(method, path, body or None, headers)
    assert got == status, text[:300]
    assert says in text.decode(), text[:300]


def test_a_failed_shell_command_is_an_error_with_its_exit_code(e2b_server):
    lines = ndjson(execute(e2b_server, {"code": "echo hi; (exit 3)", "language": "bash"})[1])
    errors = [line for line in lines if line["type"] == "error"]
    assert errors and errors[0]["value"] == "exit code 3", lines
    assert lines[0] == {"type": "stdout", "text": "hi\n", "timestamp": lines[0]["timestamp"]}


def test_a_context_with_a_missing_cwd_says_so_and_still_runs(e2b_server):
    status, body = e2b_server.e2b_request("POST", "/contexts", b'{"cwd": "/home/user/absent"}',
                                          {"Content-Type": "application/json"})
    context = json.loads(body)
    lines = ndjson(execute(e2b_server, {"code": "import os; os.getcwd()",
                                        "context_id": context["id"]})[1])
    stderr = "".join(line["text"] for line in lines if line["type"] == "stderr")
    assert "cannot start in /home/user/absent" in stderr, lines
    assert [line["text"] for line in lines if line["type"] == "result"] == ["/home/user"]


def test_silence_is_broken_by_keepalive_lines(e2b_server):
    status, body = execute(e2b_server, {"code": "import time; time.sleep(6.5); print('late')"})
    types = [line["type"] for line in ndjson(body)]
    assert "keepalive" in types and types.index("keepalive") < types.index("stdout"), types
    assert types[-1] == "end_of_execution"


def test_the_token_is_required_and_taken_from_e2bs_headers(start_e2b, monkeypatch, tmp_path):
    server = start_e2b(env={"RUNBOX_TOKEN": "s3cret-e2b"})
    monkeypatch.setenv("E2B_DEBUG", "true")
    monkeypatch.setenv("E2B_SANDBOX_URL", server.e2b_url)
    # The SDK in debug mode sends no token: refused, with the reason.
    with pytest.raises(SandboxException, match="401"):
        Sandbox.create().run_code("1")
    status, body = execute(server, {"code": "1"}, {"X-Access-Token": "wrong"})
    assert status == 401 and b"X-Access-Token" in body
    assert server.e2b_request("GET", "/health")[0] == 200  # open, like /healthz
    # A Sandbox that has the token sends it: X-Access-Token on executions, the traffic
    # token on contexts. (Its id is debug mode's: an id the control plane never made is
    # a sandbox that was not found, test_e2b_sandboxes.py.)
    sandbox = Sandbox(sandbox_id="debug_sandbox_id", sandbox_domain=None, envd_version="0.2.0",
                      envd_access_token="s3cret-e2b", traffic_access_token="s3cret-e2b",
                      connection_config=ConnectionConfig(debug=True))
    assert sandbox.run_code("6 * 7").text == "42"
    context = sandbox.create_code_context(language="bash")
    assert context.id in {c.id for c in sandbox.list_code_contexts()}


def test_contexts_survive_a_restart_of_the_server(start_e2b, tmp_path):
    first = start_e2b()
    status, body = first.e2b_request("POST", "/contexts", b'{"language": "javascript", '
                                     b'"cwd": "/tmp"}', {"Content-Type": "application/json"})
    context = json.loads(body)
    assert first.stop() == 0
    second = start_e2b()
    status, body = second.e2b_request("GET", "/contexts")
    assert context in json.loads(body)
    lines = ndjson(execute(second, {"code": "process.cwd()", "context_id": context["id"]})[1])
    assert [line.get("text") for line in lines if line["type"] == "result"] == ["/tmp"]


def test_the_client_leaving_interrupts_the_code(e2b_server):
    import socket
    execute(e2b_server, {"code": "import signal, time\nstate = 'kept'"})
    request = json.dumps({"code": "import time\nwhile True: time.sleep(0.05)"}).encode()
    with socket.create_connection(("127.0.0.1", e2b_server.e2b_port)) as sock:
        sock.sendall(b"POST /execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(request) + request)
        assert sock.recv(100).startswith(b"HTTP/1.1 200")
    # The next execution is served at once, in the same kernel, with its state.
    started = time.monotonic()
    lines = ndjson(execute(e2b_server, {"code": "state"}, timeout=20)[1])
    assert [line.get("text") for line in lines if line["type"] == "result"] == ["kept"], lines
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("args, says", [
    (["--e2b-listen", "0.0.0.0:0"], "without a token"),
    (["--e2b-listen", "nowhere"], "--e2b-listen needs ADDR:PORT"),
    (["--e2b-listen"], "--e2b-listen needs ADDR:PORT"),
    (["--e2b-listen", "127.0.0.1:99999"], "--e2b-listen needs ADDR:PORT"),
])
def test_serve_refuses_bad_e2b_listeners(args, says, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([RUNBOX, "serve", "--listen", "127.0.0.1:0", *args], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done
    assert says in done.stderr, done.stderr


def test_a_draining_node_runs_the_contexts_it_holds_and_takes_no_new_one(e2b_server):
    """POST /v1/admin/drain on runbox's API holds for the E2B port too: the context that ran
    here keeps running, a new context or one that never ran is refused with 503 and says why."""
    held = json.loads(e2b_server.e2b_request("POST", "/contexts", b'{"language": "python"}',
                                             {"Content-Type": "application/json"})[1])
    assert ndjson(execute(e2b_server, {"code": "x = 41", "context_id": held["id"]})[1])
    fresh = json.loads(e2b_server.e2b_request("POST", "/contexts", b'{"language": "python"}',
                                              {"Content-Type": "application/json"})[1])
    drained = e2b_server.request("POST", "/v1/admin/drain")
    assert drained.status == 200 and drained.json()["draining"] is True
    lines = ndjson(execute(e2b_server, {"code": "x + 1", "context_id": held["id"]})[1])
    assert lines[0]["text"] == "42", lines
    status, body = e2b_server.e2b_request("POST", "/contexts", b'{"language": "python"}',
                                          {"Content-Type": "application/json"})
    assert status == 503 and b"draining" in body, body
    status, body = execute(e2b_server, {"code": "1", "context_id": fresh["id"]})
    assert status == 503 and b"draining" in body and fresh["id"].encode() in body, body
    status, body = execute(e2b_server, {"code": "1", "language": "bash"})  # a default context
    assert status == 503 and b"draining" in body, body
