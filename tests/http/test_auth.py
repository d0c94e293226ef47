"""The bearer token: required off loopback, checked on every route but
/healthz when set."""
import subprocess

from http_helpers import RUNBOX

TOKEN = "s3cret-token-0123456789abcdef"


def test_loopback_without_a_token_needs_none(server):
    assert server.request("GET", "/v1/sessions").status == 200
    assert server.execute(language="bash", code="echo open")["output"] == "open\n"


def token_file(tmp_path, text=TOKEN + "\n"):
    path = tmp_path / "token"
    path.write_text(text)
    return str(path)


def test_with_a_token_file_requests_need_the_token(start_server, tmp_path):
    server = start_server("--token-file", token_file(tmp_path))
    for method, path, body in (("GET", "/v1/sessions", None), ("GET", "/metrics", None),
                               ("GET", "/openapi.json", None),
                               ("POST", "/v1/execute", {"language": "bash", "code": "echo x"})):
        missing = server.request(method, path, json_body=body)
        assert missing.status == 401, (path, missing)
        assert missing.header("WWW-Authenticate") == "Bearer"
        assert missing.json()["error"]["code"] == "unauthorized"
        for wrong in ("Bearer nope", "Bearer " + TOKEN[:-1], "Bearer " + TOKEN + "x",
                      "Basic " + TOKEN, TOKEN):
            response = server.request(method, path, json_body=body,
                                      headers={"Authorization": wrong})
            assert response.status == 401, (wrong, response)
    assert server.request("GET", "/healthz").status == 200  # stays open
    server.token = TOKEN
    assert server.request("GET", "/v1/sessions").status == 200
    assert server.execute(language="bash", code="echo authorized")["output"] == "authorized\n"
    assert TOKEN not in server.log_text()  # never logged


def test_runbox_token_env_works_too(start_server):
    server = start_server(env={"RUNBOX_TOKEN": TOKEN})
    assert server.request("GET", "/v1/sessions").status == 401
    server.token = TOKEN
    assert server.request("GET", "/v1/sessions").status == 200


def test_not_loopback_without_a_token_refuses_to_start(tmp_path):
    proc = subprocess.run([RUNBOX, "serve", "--listen", "0.0.0.0:0"], capture_output=True,
                          env={"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": str(tmp_path)},
                          timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and "without a token" in lines[0], proc.stderr


def test_not_loopback_with_a_token_starts(start_server, tmp_path):
    server = start_server("--token-file", token_file(tmp_path), listen="0.0.0.0:0")
    server.token = TOKEN
    assert server.request("GET", "/v1/sessions").status == 200


def test_usage_errors_are_one_line_and_exit_2(tmp_path):
    for args in (["--max-running", "0"], ["--bogus"], ["--listen", "nocolon"],
                 ["--listen", "127.0.0.1:99999"], ["--listen", "999.1.1.1:80"],
                 ["--token-file", str(tmp_path / "missing")], ["--grace", "-1"],
                 ["--max-body", "ten"]):
        proc = subprocess.run([RUNBOX, "serve", *args], capture_output=True, timeout=30,
                              env={"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": str(tmp_path)})
        assert proc.returncode == 2, (args, proc)
        assert len(proc.stderr.decode().splitlines()) == 1, (args, proc.stderr)
    help_text = subprocess.run([RUNBOX, "serve", "--help"], capture_output=True, timeout=30)
    assert help_text.returncode == 0 and b"--max-running" in help_text.stdout


def test_an_empty_token_file_is_refused(tmp_path):
    proc = subprocess.run([RUNBOX, "serve", "--token-file", token_file(tmp_path, "\n")],
                          capture_output=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 2 and b"printable" in proc.stderr
