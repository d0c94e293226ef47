"""Fixtures of the HTTP suite (the helpers are in http_helpers.py)."""
import pytest

import http_helpers
from http_helpers import Server
from rerun_why import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401 (e2e's)


# Run in one session with tests/e2e, whose modules `from conftest import`
# their helpers: Python keeps one module named conftest (the last loaded),
# so this one offers e2e's helpers too.
for _name, _value in vars(http_helpers.e2e).items():
    if not _name.startswith("_") and _name not in globals() and \
            not hasattr(_value, "_pytestfixturefunction"):
        globals()[_name] = _value


def pytest_configure(config):
    config.addinivalue_line("markers", http_helpers.e2e.SERIAL_MARKER)


@pytest.fixture(autouse=True)
def no_storage_left_mounted(tmp_path):
    """As root each state directory's storage is an image mounted once: none is left."""
    yield
    http_helpers.e2e.unmount_storage_below(tmp_path)


@pytest.fixture
def start_server(tmp_path):
    """Starts servers with options; each is stopped (exit 0, no sanitizer
    report) and its sessions removed at teardown."""
    servers = []

    def start(*args, env=None, listen="127.0.0.1:0", token=None, global_args=(), preexec_fn=None):
        server = Server(tmp_path, args, env=env, listen=listen, global_args=global_args,
                        preexec_fn=preexec_fn)
        server.token = token
        servers.append(server)
        return server

    yield start
    http_helpers.stop_all(servers)


@pytest.fixture
def server(start_server):
    return start_server()
