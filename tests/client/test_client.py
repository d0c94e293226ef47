"""The Python client, against a real `runbox serve` and against the local executable: the same
calls give the same results through both transports."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
RUNBOX = os.environ.get("RUNBOX_BIN", os.path.join(ROOT, "build", "runbox"))

import runbox  # noqa: E402
from runbox import (Client, Session, execute_bash, execute_javascript,  # noqa: E402
                    execute_python, execute_typescript)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, state_dir, *args, env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = dict(os.environ, **(env or {}))
        self.proc = subprocess.Popen([RUNBOX, "--state-dir", state_dir, "serve", "--listen",
                                      f"127.0.0.1:{self.port}", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=full_env)
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("runbox serve did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)
        stderr = self.proc.stderr.read().decode(errors="replace")
        assert "ERROR: AddressSanitizer" not in stderr and "runtime error:" not in stderr, stderr


@pytest.fixture(autouse=True)
def no_storage_left_mounted(tmp_path):
    """As root each state directory's storage is an image mounted once: none is left."""
    yield
    with open("/proc/self/mountinfo") as f:
        targets = [line.split()[4] for line in f]
    for target in sorted(targets, reverse=True):
        if target.startswith(str(tmp_path) + "/") and (target.endswith("/sessions") or
                                                       "/templates" in target):
            subprocess.run(["umount", "-l", target], capture_output=True)


@pytest.fixture(params=["http", "local"])
def transport(request, tmp_path, monkeypatch):
    """Sets the environment the way a user would: RUNBOX_URL for a server, RUNBOX_BIN for the
    local executable. Yields a Client built from that environment."""
    state = str(tmp_path / "state")
    monkeypatch.delenv("RUNBOX_URL", raising=False)
    monkeypatch.delenv("RUNBOX_TOKEN", raising=False)
    server = None
    if request.param == "http":
        server = Server(state)
        monkeypatch.setenv("RUNBOX_URL", server.url)
    else:
        monkeypatch.setenv("RUNBOX_BIN", RUNBOX)
        monkeypatch.setenv("RUNBOX_STATE_DIR", state)
    yield request.param
    client = Client()
    for session in client.list_sessions():
        client.close_session(session["session_id"])
    if server:
        server.stop()
    # As root the state directory's storage is a mounted image: leave none behind.
    subprocess.run([RUNBOX, "--state-dir", state, "storage", "unmount"], capture_output=True)


# --- the four examples agents use --------------------------------------------------------

def test_the_four_examples(transport):
    session = "session_123"
    Client().upload(_ensure(session), "data.csv",
                    b"name,score\nada,3\nlin,4\n")
    result = execute_python(code="print('Hello, World!')", timeout=30, session_id=session)
    assert result["success"] and result["exit_code"] == 0
    assert result["output"] == "Hello, World!\n" and result["session_id"] == session
    result = execute_python(code="import pandas as pd; df = pd.read_csv('data.csv'); "
                                 "print(int(df.score.sum()))",
                            requirements=["pandas"], session_id=session)
    assert result["success"] and result["exit_code"] == 0, result["error"]
    assert result["output"] == "7\n"
    result = execute_javascript(code="console.log('Hello from Node.js')", timeout=30,
                                session_id=session)
    assert result["success"] and result["exit_code"] == 0
    assert result["output"] == "Hello from Node.js\n"
    result = execute_bash(command="ls -la /tmp", timeout=10, session_id=session)
    assert result["success"] and result["exit_code"] == 0
    assert "total" in result["output"]


@pytest.mark.skipif(not os.environ.get("RUNBOX_TEST_ON_IMAGE"),
                    reason="TypeScript needs the default image's Node.js (the host's is 20)")
def test_typescript_through_both_transports(transport, monkeypatch, tmp_path):
    # The image store the suite runs on, for a server and the local executable alike.
    monkeypatch.setenv("RUNBOX_IMAGES", os.environ["RUNBOX_TEST_ON_IMAGE"])
    server = Server(str(tmp_path / "on-image")) if transport == "http" else None
    fixture_url = os.environ.get("RUNBOX_URL")
    if server:
        monkeypatch.setenv("RUNBOX_URL", server.url)
    try:
        result = execute_typescript(code="const n: number = 41;\nconsole.log(n + 1)", timeout=30)
        assert result["success"], result["error"]
        assert result["output"] == "42\n" and result["language"] == "typescript"
        with Session(stateful=True) as session:
            session.typescript("const base: number = 40")
            assert session.typescript("base + 2")["results"][0]["data"]["text/plain"] == "42"
    finally:
        if server:
            monkeypatch.setenv("RUNBOX_URL", fixture_url)  # the fixture's, which it cleans
            server.stop()
            subprocess.run([RUNBOX, "--state-dir", str(tmp_path / "on-image"), "storage",
                            "unmount"], capture_output=True)


def _ensure(session_id):
    """Creates a named session by running nothing in it."""
    execute_bash(command="true", session_id=session_id)
    return session_id


def test_results_have_the_contract_fields(transport):
    result = execute_python(code="1/0")
    for field in ("success", "output", "error", "exit_code", "duration_ms", "session_id",
                  "error_type"):
        assert field in result
    assert result["success"] is False and result["error_type"] == "RuntimeError"
    assert result["exception"] == "ZeroDivisionError"


def test_timeout_is_a_timeout_error_result(transport):
    result = execute_python(code="import time\nprint('started', flush=True)\ntime.sleep(30)",
                            timeout=1)
    assert result["error_type"] == "TimeoutError" and result["timed_out"] is True
    assert result["output"] == "started\n"


def test_options_memory_network_env_stdin(transport):
    result = execute_python(code="import os,sys\nprint(os.environ['GREETING'], sys.stdin.read())",
                            env={"GREETING": "hi"}, stdin="from stdin", network=False,
                            memory_mb=128)
    assert result["output"] == "hi from stdin\n" and result["network"] is False
    bomb = execute_python(code="b = bytearray(400 * 1024 * 1024)\nb[::4096] = b'x' * len(b[::4096])",
                          memory_mb=64)
    assert bomb["error_type"] == "MemoryError"


def test_cpus_is_passed_and_reported(transport):
    result = execute_bash(command="true", cpus=0.5)
    assert result["success"], result
    assert result["cpus"] == (None if result["limits"] == "rlimits" else 0.5), result


def test_egress_allow_is_sent_and_the_result_reports_what_was_denied(transport):
    """A valid list runs (the network off needs no policy); the fields are in every result."""
    for call in (lambda **kw: execute_python(code="print('ran')", **kw),
                 lambda **kw: execute_javascript(code="console.log('ran')", **kw),
                 lambda **kw: execute_bash(command="echo ran", **kw),
                 lambda **kw: Client().execute_python("print('ran')", **kw)):
        result = call(network=False, egress_allow=["10.0.0.0/8", "pypi.org", "*.example.com"])
        assert result["output"] == "ran\n", result
        assert result["egress_denied"] == 0 and result["egress_denied_to"] == []
    assert execute_bash(command="echo ran", network=False, egress_allow=[])["output"] == "ran\n"


@pytest.mark.parametrize("egress_allow", [["pypi.org", "10.0.0.0/33"], ["*"], ["http://x"],
                                          ["exa mple.com"], ["a,b.com"], [""], ["pypi.org", 7],
                                          [f"10.0.{i}.0/24" for i in range(65)]])
def test_a_bad_egress_allow_raises_request_rejected_naming_it(transport, egress_allow):
    """The server's refusal (HTTP 400) and the executable's (exit 2) are the same error,
    before any code runs; an entry that the command line would split is refused as well."""
    with pytest.raises(runbox.RequestRejected) as refused:
        execute_bash(command="echo ran > ran.txt", session_id="egress-bad", network=False,
                     egress_allow=egress_allow)
    assert "egress_allow" in refused.value.message, refused.value.message
    assert "egress-bad" not in [s["session_id"] for s in runbox.list_sessions()]


def test_a_lone_string_is_not_taken_letter_by_letter(transport):
    with pytest.raises(TypeError) as wrong:
        execute_python(code="print(1)", egress_allow="pypi.org")
    assert "egress_allow must be a list" in str(wrong.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="network-on needs runbox-net and the tun device, set up here only "
                                              "as root")
def test_an_empty_egress_allow_reaches_nothing(transport):
    """[] is sent as a list of none, not left out: a connection anywhere is refused."""
    import socket
    try:
        address = socket.getaddrinfo("pypi.org", 443, socket.AF_INET)[0][4][0]
    except OSError:
        pytest.skip("pypi.org does not resolve here")
    # The package index: allowed by the default policy, refused only by the narrowing.
    code = ("import socket\ns = socket.socket(); s.settimeout(5)\n"
            f"print(s.connect_ex(('{address}', 443)) != 0)")
    result = execute_python(code=code, network=True, egress_allow=[], timeout=20)
    assert result["output"] == "True\n", result
    assert result["egress_denied"] >= 1 and f"{address}:443" in result["egress_denied_to"], result


# --- streaming -----------------------------------------------------------------------------

def test_on_output_receives_output_before_the_call_returns(transport):
    seen = []
    code = "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')"
    result = execute_python(code=code, on_output=lambda stream, text: seen.append(
        (time.time(), stream, text)))
    returned = time.time()
    assert result["output"] == "first\nsecond\n"
    first = next(t for t, s, text in seen if "first" in text)
    assert returned - first > 1.5  # it arrived about 2 s before the call returned
    assert "".join(text for _, s, text in seen if s == "stdout") == "first\nsecond\n"


def test_on_output_gets_stderr_as_stderr(transport):
    seen = []
    execute_bash(command="echo out; echo err >&2", on_output=lambda s, t: seen.append((s, t)))
    assert ("stdout", "out\n") in seen and ("stderr", "err\n") in seen


# --- sessions ------------------------------------------------------------------------------

def test_session_object_runs_uploads_downloads_and_cleans_up(transport):
    with Session() as s:
        s.upload("in/data.txt", b"42")
        assert s.python("print(int(open('in/data.txt').read()) + 1)")["output"] == "43\n"
        assert s.bash("echo -n done > out.txt")["success"]
        assert s.download("out.txt") == b"done"
        assert s.javascript("console.log(require('fs').existsSync('out.txt'))")["output"] == \
            "true\n"
        paths = {f["path"] for f in s.files()}
        assert {"in/data.txt", "out.txt"} <= paths
        sid = s.id
        assert sid in [x["session_id"] for x in runbox.list_sessions()]
    assert sid not in [x["session_id"] for x in runbox.list_sessions()]


def test_stateful_session_keeps_the_interpreter_and_restart_clears_it(transport):
    seen = []
    with Session(stateful=True) as s:
        assert s.python("import math\nradius = 2")["stateful"] is True
        area = s.python("print('computing')\nround(math.pi * radius ** 2, 2)",
                        on_output=lambda stream, text: seen.append((stream, text)))
        assert area["output"] == "computing\n" and area["execution_count"] == 2, area
        assert area["results"] == [{"kind": "execute_result", "data": {"text/plain": "12.57"}}]
        assert "".join(text for stream, text in seen if stream == "stdout") == "computing\n"
        assert ("display", {"text/plain": "12.57"}) in seen, seen  # rich outputs as they come
        assert s.bash("cd /tmp; N=3")["success"]
        assert s.bash("echo $PWD $N")["output"] == "/tmp 3\n"
        assert s.python("print('radius' in dir())", stateful=False)["output"] == "False\n"
        s.restart("python")
        assert s.python("'radius' in dir()")["results"][0]["data"]["text/plain"] == "False"
        assert s.bash("echo $N")["output"] == "3\n"  # only Python's was restarted
        with pytest.raises(runbox.RequestRejected) as refused:
            s.restart("cobol")
        assert "python, javascript" in str(refused.value)  # what is accepted


def test_close_session(transport):
    sid = _ensure("closing-1")
    runbox.close_session(sid)
    assert sid not in [x["session_id"] for x in runbox.list_sessions()]
    with pytest.raises(runbox.NotFound):
        runbox.close_session(sid)


# --- errors --------------------------------------------------------------------------------

def test_refused_requests_raise_with_the_message(transport):
    with pytest.raises(runbox.RequestRejected) as refused:
        execute_python(code="1", session_id="../escape")
    assert "session id" in refused.value.message
    with pytest.raises(runbox.RequestRejected) as refused:
        execute_python(code="1", requirements=["--index-url=http://evil"])
    assert "requirement" in refused.value.message
    with pytest.raises(runbox.RequestRejected):
        Client().execute("cobol", "1")


def test_download_outside_the_session_is_refused(transport):
    with Session() as s:
        s.bash("ln -s /etc/passwd link")
        with pytest.raises(runbox.RequestRejected):
            s.download("link")
        with pytest.raises(runbox.RequestRejected):
            s.download("../lock")


def test_unreachable_server_raises_runbox_unavailable(monkeypatch):
    monkeypatch.setenv("RUNBOX_URL", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(runbox.RunboxUnavailable):
        execute_python(code="1")


def test_missing_executable_raises_runbox_unavailable(monkeypatch):
    monkeypatch.delenv("RUNBOX_URL", raising=False)
    monkeypatch.setenv("RUNBOX_BIN", "/nonexistent/runbox")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(runbox.RunboxUnavailable):
        execute_python(code="1")


def test_bad_token_raises_authentication_error(tmp_path, monkeypatch):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    server = Server(str(tmp_path / "state"), "--token-file", str(token_file))
    try:
        with pytest.raises(runbox.AuthenticationError):
            execute_python(code="1", url=server.url, token="wrong")
        with pytest.raises(runbox.AuthenticationError):
            execute_python(code="1", url=server.url)
        assert execute_python(code="print(1)", url=server.url, token="s3cret-token")["output"] \
            == "1\n"
    finally:
        server.stop()


def test_full_queue_raises_queue_full_or_is_retried(tmp_path):
    server = Server(str(tmp_path / "state"), "--max-running", "1", "--max-queue", "0")
    try:
        blocker = threading.Thread(target=lambda: execute_bash(command="sleep 3", url=server.url))
        blocker.start()
        time.sleep(1)
        with pytest.raises(runbox.QueueFull) as full:
            execute_bash(command="echo hi", url=server.url)
        assert full.value.retry_after > 0
        retried = execute_bash(command="echo hi", url=server.url, retries=10)
        assert retried["output"] == "hi\n"
        blocker.join()
    finally:
        server.stop()


# --- a cluster: moving sessions, the session header, a node that is down -----------------

def test_a_session_exported_and_imported_keeps_its_files(transport):
    client = Client()
    with Session() as s:
        s.upload("dir/data.txt", b"moved")
        archive = client.export_session(s.id)
        target = s.id + "-copy"
        answer = client.import_session(target, archive)
        assert answer["session_id"] == target and answer["files"] == 1 and answer["bytes"] == 5
        try:
            assert client.download(target, "dir/data.txt") == b"moved"
        finally:
            client.close_session(target)


class Recorder:
    """A one-shot HTTP server on loopback that records each request's headers and answers
    with a fixed status and body (a balancer's error page, say)."""

    def __init__(self, status, body, content_type="application/json"):
        import http.server
        self.seen = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                outer.seen.append((self.command, self.path, dict(self.headers)))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *a):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()


def test_every_session_bound_request_carries_the_session_header():
    recorder = Recorder(200, json.dumps({"session_id": "s1", "files": [], "output": ""}))
    try:
        client = Client(recorder.url)
        client.execute("bash", "echo", session_id="s1")
        client.new_session("s1")
        client.upload("s1", "f", b"x")
        client.download("s1", "f")
        client.list_files("s1")
        client.export_session("s1")
        client.restart_session("s1")
        client.close_session("s1")
        client.execute("bash", "echo")  # a one-off: no session, no header
    finally:
        recorder.close()
    headers = [h.get("X-Runbox-Session") for _, _, h in recorder.seen]
    assert headers == ["s1"] * 8 + [None], recorder.seen
    # new_session() without an id names the session itself, so a balancer can route it.
    recorder2 = Recorder(200, json.dumps({"session_id": "whatever"}))
    try:
        Client(recorder2.url).new_session()
    finally:
        recorder2.close()
    _, _, sent = recorder2.seen[0]
    assert sent["X-Runbox-Session"].startswith("session-")


@pytest.mark.parametrize("status,body,content_type,session", [
    (503, '{"error":{"code":"node_unavailable","session_id":"s9","message":"the runbox node '
          'that holds session s9 is unavailable"}}', "application/json", "s9"),
    (502, "<html>502 Bad Gateway</html>", "text/html", None),
    (504, "<html>504 Gateway Time-out</html>", "text/html", None),
])
def test_a_node_that_is_down_raises_node_unavailable(status, body, content_type, session):
    recorder = Recorder(status, body, content_type)
    try:
        with pytest.raises(runbox.NodeUnavailable) as raised:
            Client(recorder.url).execute("bash", "echo", session_id="s9")
    finally:
        recorder.close()
    assert isinstance(raised.value, runbox.RunboxUnavailable)
    assert raised.value.status == status and raised.value.session_id == session
    assert raised.value.code == "node_unavailable"


def test_a_draining_or_failing_node_is_not_node_unavailable():
    recorder = Recorder(503, '{"error":{"code":"draining","message":"this node is draining"}}')
    try:
        with pytest.raises(runbox.RunboxError) as raised:
            Client(recorder.url).execute("bash", "echo", session_id="s9")
    finally:
        recorder.close()
    assert not isinstance(raised.value, runbox.NodeUnavailable)
    assert raised.value.code == "draining"
