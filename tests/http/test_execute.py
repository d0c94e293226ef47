"""POST /v1/execute: the request fields, the result object, and how
engine refusals map to statuses."""
import shutil
import subprocess
import threading
import time

import pytest

from http_helpers import RUNBOX, unique_marker, wait_gone


def test_result_is_exactly_the_cli_json_object(server):
    result = server.execute(language="python", code="print('Hello, World!')")
    assert result["success"] is True
    assert result["output"] == "Hello, World!\n"
    assert result["language"] == "python"
    cli = server.cli.run("python", "print('Hello, World!')")
    assert list(result) == list(cli)  # the same fields, in the same order


def test_the_code_failing_is_still_200_with_a_result(server):
    result = server.execute(language="python", code="1/0")
    assert result["success"] is False
    assert result["error_type"] == "RuntimeError"
    assert result["exception"] == "ZeroDivisionError"
    syntax = server.execute(language="python", code="def (")
    assert syntax["error_type"] == "SyntaxError"


def test_every_request_field_reaches_the_engine(server):
    result = server.execute(
        language="bash",
        code='echo "$GREETING"; cat; echo "$RUNBOX_SESSION_ID"',
        env={"GREETING": "hello"},
        stdin="from stdin\n",
        timeout=20,
        memory_mb=256,
        network=False,
        session_id="fields-1",
    )
    assert result["output"] == "hello\nfrom stdin\nfields-1\n"
    assert result["network"] is False
    assert result["session_id"] == "fields-1"


def test_timeout_is_honoured(server):
    result = server.execute(language="bash", code="echo started; sleep 30", timeout=1)
    assert result["timed_out"] is True and result["error_type"] == "TimeoutError"
    assert result["output"] == "started\n"


def test_null_fields_are_the_same_as_absent_ones(server):
    result = server.execute(language="bash", code="echo ok", timeout=None, session_id=None,
                            env=None, stdin=None, stream=None)
    assert result["output"] == "ok\n"


def test_code_and_stdin_keep_nul_bytes(server):
    result = server.execute(language="python",
                            code="import sys; print(repr(sys.stdin.buffer.read()))",
                            stdin="a\u0000b")
    assert result["output"] == "b'a\\x00b'\n"
    refused = server.execute(language="python", code="print(1)\u0000")
    assert refused["error_type"] == "SyntaxError"  # the engine's own judgement


def test_trace_reports_each_phase_and_is_off_by_default(server):
    traced = server.execute(language="bash", code="echo hi", network=False, trace=True)
    phases = traced["trace"]
    for phase in ("validate_us", "clone_us", "mounts_us", "exec_us", "exit_us", "total_us"):
        assert isinstance(phases[phase], int) and phases[phase] >= 0, phases
    # The phases add up to the total; egress_us and network_us are shares of phases (trace.h),
    # listed when they took a microsecond or more, and not added again.
    shares = ("total_us", "egress_us", "network_us")
    assert phases["total_us"] == sum(us for name, us in phases.items() if name not in shares)
    assert "trace" not in server.execute(language="bash", code="echo hi", network=False)


@pytest.mark.parametrize("field,value,expected", [
    ("language", 3, "'language' must be a string, not a number"),
    ("code", ["print(1)"], "'code' must be a string, not an array"),
    ("timeout", "10", "'timeout' must be a number of seconds, not a string"),
    ("session_id", {}, "'session_id' must be a string, not an object"),
    ("requirements", "numpy", "'requirements' must be an array of strings, not a string"),
    ("memory_mb", 25.5, "'memory_mb' must be a whole number of MiB, not a number"),
    ("network", "yes", "'network' must be a boolean, not a string"),
    ("env", ["A=1"], "'env' must be an object of strings, not an array"),
    ("stdin", 5, "'stdin' must be a string, not a number"),
    ("stream", 1, "'stream' must be a boolean, not a number"),
    ("trace", "on", "'trace' must be a boolean, not a string"),
])
def test_wrong_types_name_the_field_and_the_expected_type(server, field, value, expected):
    body = {"language": "python", "code": "print(1)", field: value}
    response = server.request("POST", "/v1/execute", json_body=body)
    assert response.status == 400, response
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert expected in error["message"]


def test_nested_wrong_types_name_the_element(server):
    response = server.request("POST", "/v1/execute", json_body={
        "language": "python", "code": "1", "requirements": ["ok", 2]})
    assert response.status == 400
    assert "'requirements[1]' must be a string" in response.json()["error"]["message"]
    response = server.request("POST", "/v1/execute", json_body={
        "language": "bash", "code": "1", "env": {"A": 1}})
    assert response.status == 400
    assert "'env.A' must be a string" in response.json()["error"]["message"]


def test_unknown_fields_are_refused(server):
    response = server.request("POST", "/v1/execute",
                              json_body={"language": "python", "code": "1", "langauge": "x"})
    assert response.status == 400
    assert "unknown field 'langauge'" in response.json()["error"]["message"]


@pytest.mark.parametrize("body,needle", [
    ({"language": "cobol", "code": "x"}, "unknown language"),
    ({"code": "x"}, "no language"),
    ({"language": "python"}, "no code"),
    ({"language": "python", "code": "1", "timeout": 100000}, "out of bounds"),
    ({"language": "python", "code": "1", "timeout": 0}, "more than 0"),
    ({"language": "python", "code": "1", "session_id": "../x"}, "invalid session id"),
    ({"language": "bash", "code": "1", "env": {"HOME": "/x"}}, "cannot be overridden"),
    ({"language": "bash", "code": "1", "env": {"1BAD": "x"}}, "invalid environment entry"),
    ({"language": "bash", "code": "1", "env": {"A=B": "x"}}, "cannot contain '='"),
    ({"language": "python", "code": "1", "memory_mb": 1}, "out of bounds"),
    ({"language": "bash", "code": "1", "requirements": ["left-pad"]}, "takes no requirements"),
])
def test_requests_the_engine_refuses_are_400(server, body, needle):
    response = server.request("POST", "/v1/execute", json_body=body)
    assert response.status == 400, response
    assert response.json()["error"]["code"] == "invalid_request"
    assert needle in response.json()["error"]["message"]


def test_a_session_that_stays_busy_is_409(server):
    marker = unique_marker()
    holder = threading.Thread(target=server.execute, kwargs=dict(
        language="bash", code=f"sleep {marker} & sleep 3; kill %1", session_id="busy-1"))
    holder.start()
    try:
        time.sleep(1)
        response = server.request("POST", "/v1/execute", json_body={
            "language": "bash", "code": "echo late", "session_id": "busy-1", "timeout": 0.5})
        assert response.status == 409, response
        assert response.json()["error"]["code"] == "busy"
    finally:
        holder.join()
    assert wait_gone(marker) == []


def test_a_one_off_run_leaves_no_session(server):
    result = server.execute(language="bash", code="echo x > f; echo done")
    assert result["output"] == "done\n"
    sessions = server.request("GET", "/v1/sessions").json()["sessions"]
    assert result["session_id"] not in [s["session_id"] for s in sessions]


def test_global_options_reach_every_execution(start_server, tmp_path):
    """The state directory and the policy given before `serve` reach
    runbox-serve, and apply to the executions as they do to the CLI."""
    policy = tmp_path / "policy.conf"
    policy.write_text("bash no-curl (^|[[:space:]])curl[[:space:]]\n")
    state = tmp_path / "elsewhere"
    server = start_server(global_args=("--state-dir", str(state), "--policy", str(policy)))
    server.cli.state_dir = str(state)  # sessions to clean up live there
    refused = server.execute(language="bash", code="curl http://example.com")
    assert refused["error_type"] == "PermissionError" and "no-curl" in refused["error"]
    server.execute(language="bash", code="echo kept > f", session_id="placed")
    assert (state / "sessions" / "placed").is_dir()


def test_serve_without_the_server_program_beside_runbox_says_what_is_missing(tmp_path):
    """`runbox serve` starts runbox-serve from runbox's own directory."""
    alone = tmp_path / "runbox"
    shutil.copy(RUNBOX, alone)
    proc = subprocess.run([str(alone), "--state-dir", str(tmp_path / "state"), "serve"],
                          capture_output=True, timeout=30)
    assert proc.returncode == 1
    assert f"cannot start the HTTP server {tmp_path}/runbox-serve".encode() in proc.stderr
    assert b"No such file or directory" in proc.stderr
