"""Helpers of the HTTP suite: a real `runbox serve` on a free loopback port,
with a private state directory, driven with http.client and raw sockets.

RUNBOX_BIN overrides the binary (`make test-asan` points it at the ASan
build); every server's stderr is checked for sanitizer reports when it stops.
(A module of its own, not conftest: run with tests/e2e, only one module
named conftest can be imported.)"""
import http.client
import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUNBOX = os.environ.get("RUNBOX_BIN", os.path.join(ROOT, "build", "runbox"))


def _load_e2e():
    """tests/e2e/conftest.py: its Runbox CLI driver and process probes."""
    spec = importlib.util.spec_from_file_location(
        "e2e_conftest", os.path.join(ROOT, "tests", "e2e", "conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


e2e = _load_e2e()
processes_matching = e2e.processes_matching
wait_gone = e2e.wait_gone
execution_cgroups = e2e.execution_cgroups
planted_cgroups = e2e.planted_cgroups
existing = e2e.existing
remove_cgroups_left_since = e2e.remove_cgroups_left_since

SANITIZER_REPORTS = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer", b"runtime error:",
                     b"WARNING: ThreadSanitizer")


def unique_marker():
    """A number no other process has in its command line: `sleep MARKER`."""
    return f"{random.randint(1000, 9999)}.{random.randint(100000, 999999)}"


def stop_all(servers):
    """Stops servers (all of them first: a live one keeps the storage busy), then removes
    their sessions; fails when one did not exit as expected or reported a sanitizer error."""
    failures = []
    try:
        for server in servers:
            code = server.stop()
            if code != server.expected_exit:
                failures.append(f"runbox serve exited {code}: {server.log_text()[-3000:]}")
    finally:
        for server in servers:
            server.cleanup()
    assert not failures, failures


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def __repr__(self):
        return f"<Response {self.status} {self.body[:300]!r}>"


class Server:
    """One `runbox serve` process."""

    def __init__(self, tmp_path, args=(), env=None, listen="127.0.0.1:0", global_args=(),
                 preexec_fn=None):
        self.state_dir = str(tmp_path / "state")
        self.log_path = str(tmp_path / f"serve-{random.randint(0, 1 << 30)}.log")
        self.token = None
        self.expected_exit = 0
        self.cli = e2e.Runbox(self.state_dir)
        full_env = self.cli.env(env)
        self.args = [RUNBOX, *global_args, "serve", "--listen", listen, *args]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=log, env=full_env,
                                         preexec_fn=preexec_fn)
        self.port = self._wait_listening()
        self.host = "127.0.0.1"

    def _wait_listening(self, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            for line in self.log_lines():
                if line.get("event") == "listening":
                    return int(line["listen"].rsplit(":", 1)[1])
            if self.proc.poll() is not None:
                raise AssertionError(f"runbox serve exited {self.proc.returncode}: "
                                     f"{self.log_text()}")
            time.sleep(0.02)
        raise AssertionError("runbox serve did not start listening: " + self.log_text())

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def log_lines(self):
        lines = []
        for raw in self.log_text().splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                pass
        return lines

    def wait_log(self, predicate, seconds=10):
        """The log's lines once predicate(lines) holds: a request's line is
        written when the server is done with it, just after the client has
        its response."""
        deadline = time.monotonic() + seconds
        while True:
            lines = self.log_lines()
            if predicate(lines) or time.monotonic() > deadline:
                return lines
            time.sleep(0.02)

    def connection(self, timeout=120):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def headers(self, extra=None, json_body=False):
        headers = {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if json_body:
            headers["Content-Type"] = "application/json"
        headers.update(extra or {})
        return headers

    def request(self, method, path, body=None, headers=None, json_body=None, timeout=120):
        """One request on a fresh connection; returns a Response."""
        if json_body is not None:
            body = json.dumps(json_body).encode()
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body,
                         headers=self.headers(headers, json_body is not None))
            response = conn.getresponse()
            return Response(response.status, response.getheaders(), response.read())
        finally:
            conn.close()

    def execute(self, expect=200, **fields):
        response = self.request("POST", "/v1/execute", json_body=fields)
        assert response.status == expect, response
        return response.json()

    def raw(self, data, read=True, timeout=30, port=None):
        """Sends raw bytes on a fresh socket (to port, or the API's); returns what came back."""
        with socket.create_connection((self.host, port or self.port), timeout=timeout) as sock:
            try:
                sock.sendall(data)
            except OSError:
                pass  # the server may answer and close before it has read it all
            if not read:
                return b""
            chunks = []
            while True:
                try:
                    chunk = sock.recv(65536)
                except (ConnectionResetError, socket.timeout):
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks)

    def healthy(self):
        """A normal request still gets a normal answer."""
        response = self.request("GET", "/healthz", timeout=10)
        assert response.status == 200, response
        result = self.execute(language="bash", code="echo still-serving")
        assert result["output"] == "still-serving\n", result
        return True

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self, sig=signal.SIGTERM, timeout=90):
        """Stops the server; returns its exit code and checks its stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("runbox serve did not stop: " + self.log_text()[-3000:])
        self.assert_no_sanitizer_reports()
        return self.proc.returncode

    def assert_no_sanitizer_reports(self):
        with open(self.log_path, "rb") as f:
            text = f.read()
        for report in SANITIZER_REPORTS:
            assert report not in text, text.decode(errors="replace")[-6000:]

    def cleanup(self):
        """Sessions are mounted disk images as root: leave none behind."""
        self.cli.remove_all_sessions()
