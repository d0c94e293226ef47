"""Fixtures of the E2B suite: a real `runbox serve --e2b-listen` and E2B's released
e2b-code-interpreter SDK (from PyPI, in the venv `make e2b-sdk` makes), unmodified, pointed at
it the two ways its users would: E2B_DEBUG=true (http://localhost:49999) or E2B_SANDBOX_URL."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "http"))
import http_helpers  # noqa: E402
from http_helpers import Server  # noqa: E402

DEBUG_PORT = 49999  # where the SDK's debug mode goes


class E2BServer(Server):
    """runbox serve with E2B's protocol on a second listener."""

    def __init__(self, tmp_path, e2b_listen="127.0.0.1:0", args=(), env=None):
        super().__init__(tmp_path, ("--e2b-listen", e2b_listen, *args), env=env)
        lines = self.wait_log(lambda ls: any(l.get("api") == "e2b" for l in ls))
        listening = [l for l in lines if l.get("event") == "listening" and l.get("api") == "e2b"]
        assert listening, self.log_text()
        self.e2b_port = int(listening[0]["listen"].rsplit(":", 1)[1])
        self.e2b_url = f"http://127.0.0.1:{self.e2b_port}"

    def e2b_request(self, method, path, body=None, headers=None, timeout=60):
        """A raw request to the E2B listener; returns (status, body bytes)."""
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.e2b_port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


@pytest.fixture(autouse=True)
def no_storage_left_mounted(tmp_path):
    yield
    http_helpers.e2e.unmount_storage_below(tmp_path)


@pytest.fixture
def start_e2b(tmp_path):
    """Starts servers; each is stopped (exit 0, no sanitizer report) and its sessions removed."""
    servers = []

    def start(**kwargs):
        server = E2BServer(tmp_path, **kwargs)
        servers.append(server)
        return server

    yield start
    http_helpers.stop_all(servers)


@pytest.fixture(scope="module")
def module_e2b(tmp_path_factory):
    """One server for a module's cases that each make sandboxes of their own: sandboxes share
    nothing (files, contexts, kernels), so a server a case costs nothing more than one a
    module. Stopped (exit 0, no sanitizer report) after the module's last case."""
    tmp = tmp_path_factory.mktemp("e2b")
    server = E2BServer(tmp)
    yield server
    try:
        http_helpers.stop_all([server])
    finally:
        http_helpers.e2e.unmount_storage_below(tmp)


@pytest.fixture
def sandbox(request, start_e2b, module_e2b, monkeypatch):
    """An E2B Sandbox of the unmodified SDK on a runbox server, reached through
    E2B_SANDBOX_URL (the module's server), or, for cases parametrized indirectly with
    "debug", through debug mode's fixed http://localhost:49999 on a server of its own (debug
    mode makes no sandbox: its executions share the server's default contexts)."""
    from e2b_code_interpreter import Sandbox
    monkeypatch.setenv("E2B_DEBUG", "true")  # no call to E2B's cloud API either way
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    if getattr(request, "param", "sandbox_url") == "debug":
        server = start_e2b(e2b_listen=f"127.0.0.1:{DEBUG_PORT}")
        monkeypatch.delenv("E2B_SANDBOX_URL", raising=False)
    else:
        server = module_e2b
        monkeypatch.setenv("E2B_SANDBOX_URL", server.e2b_url)
    sbx = Sandbox.create()
    sbx.runbox = server
    return sbx


@pytest.fixture
def e2b_server(start_e2b):
    return start_e2b()


def pytest_configure(config):
    config.addinivalue_line("markers", "serial: the case looks at the whole host (its processes)")
