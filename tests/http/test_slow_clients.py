"""Slow clients cannot lock others out: connections that send half a request and wait are
bounded per address, by a deadline for the head and by a total cap at which the longest
waiting one is closed, on every listener (runbox's API and the E2B port), so an authorised
client is served within a second while thousands are held."""
import json
import re
import resource
import socket
import threading
import time

import pytest

HALF_REQUEST = b"GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
TOKEN = "slow-clients-token-0123456789"


@pytest.fixture(autouse=True)
def enough_open_files():
    """Thousands of sockets in this process: raise its own open-file limit for the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Attacker:
    """Holds up to `count` half-sent requests from the given source addresses, and opens a
    new one whenever the server closes one (reconnecting is what kept the server down)."""

    def __init__(self, port, sources, count):
        self.port, self.sources, self.count = port, sources, count
        self.sockets = []
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, source):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((source, 0))
        sock.settimeout(2)
        try:
            sock.connect(("127.0.0.1", self.port))
            sock.sendall(HALF_REQUEST)
        except OSError:
            sock.close()
            return None
        self.opened += 1
        return sock

    def fill(self):
        for i in range(self.count):
            sock = self._open(self.sources[i % len(self.sources)])
            if sock:
                self.sockets.append(sock)
        self.thread.start()
        return self

    def _closed_by_server(self, sock):
        sock.setblocking(False)
        try:
            return sock.recv(4096, socket.MSG_PEEK) is not None
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _run(self):
        while not self.stop.is_set():
            for i, sock in enumerate(self.sockets):
                if self.stop.is_set():
                    return
                if self._closed_by_server(sock):
                    sock.close()
                    fresh = self._open(self.sources[i % len(self.sources)])
                    self.sockets[i] = fresh or socket.socket()
            time.sleep(0.05)

    def close(self):
        self.stop.set()
        self.thread.join(10)
        for sock in self.sockets:
            sock.close()


def authorised_request(port, path, headers, timeout=5):
    """One request from 127.0.0.1 on a fresh connection: (status, seconds it took)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                  source_address=("127.0.0.1", 0)) as sock:
        sock.sendall(b"GET %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n" % (path, headers))
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    took = time.monotonic() - started
    match = re.match(rb"HTTP/1\.1 (\d+)", answer)
    assert match, f"no answer within {took:.2f} s: {answer[:200]!r}"
    return int(match.group(1)), took


def metrics(server):
    text = server.request("GET", "/metrics", timeout=10).body.decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def assert_served_quickly(port, path, headers, tries=5):
    for _ in range(tries):
        status, took = authorised_request(port, path, headers)
        assert status == 200, status
        assert took < 1.0, f"an authorised request took {took:.2f} s during the attack"


@pytest.mark.serial
def test_an_authorised_client_is_served_while_another_address_holds_2000_half_requests(
        start_server):
    server = start_server(env={"RUNBOX_TOKEN": TOKEN}, token=TOKEN)
    attacker = Attacker(server.port, ["127.0.0.2"], 2000).fill()
    try:
        assert_served_quickly(server.port, b"/v1/sessions",
                              b"Authorization: Bearer %s\r\n" % TOKEN.encode())
        held = metrics(server)
    finally:
        attacker.close()
    # One address holds at most its share; the rest were refused at once (429).
    assert held['runbox_connections{state="waiting"}'] <= 256, held
    assert attacker.opened >= 2000
    assert held['runbox_connections_closed_total{reason="per_address"}'] >= 2000 - 256, held
    assert held["runbox_connections_per_address_max"] == 256
    assert held["runbox_connections_max"] == 1024
    assert server.healthy()


@pytest.mark.serial
def test_many_addresses_cannot_fill_the_cap_the_longest_waiting_goes_first(start_server):
    """2,000 half-sent requests from 40 addresses (50 each, within the per-address cap) fill
    the total cap of 1,024: each new connection closes the one that has waited longest, so an
    authorised client still gets in and is served."""
    server = start_server(env={"RUNBOX_TOKEN": TOKEN}, token=TOKEN)
    sources = [f"127.0.1.{i}" for i in range(1, 41)]
    attacker = Attacker(server.port, sources, 2000).fill()
    try:
        assert_served_quickly(server.port, b"/v1/sessions",
                              b"Authorization: Bearer %s\r\n" % TOKEN.encode())
        held = metrics(server)
    finally:
        attacker.close()
    assert held['runbox_connections{state="waiting"}'] <= 1024, held
    assert attacker.opened >= 2000
    assert held['runbox_connections_closed_total{reason="evicted"}'] >= 2000 - 1024, held
    assert server.healthy()


def e2b_port(server):
    lines = server.wait_log(lambda lines: any(l.get("api") == "e2b" for l in lines))
    listen = next(l["listen"] for l in lines if l.get("api") == "e2b")
    return int(listen.rsplit(":", 1)[1])


@pytest.mark.serial
def test_the_e2b_port_shares_the_bounds(start_server):
    """Both listeners go through the same gate: half-sent requests to the E2B port and to the
    API count against one per-address cap, and an authorised E2B call is served at once."""
    server = start_server("--e2b-listen", "127.0.0.1:0", "--max-connections-per-address", "300",
                          env={"RUNBOX_TOKEN": TOKEN}, token=TOKEN)
    port = e2b_port(server)
    on_e2b = Attacker(port, ["127.0.0.3"], 1000).fill()
    on_api = Attacker(server.port, ["127.0.0.3"], 200).fill()
    try:
        assert_served_quickly(port, b"/contexts", b"X-Access-Token: %s\r\n" % TOKEN.encode())
        held = metrics(server)
    finally:
        on_e2b.close()
        on_api.close()
    assert held['runbox_connections{state="waiting"}'] <= 300, held
    assert held['runbox_connections_closed_total{reason="per_address"}'] >= 900, held


def test_a_head_not_sent_within_the_header_timeout_is_closed(start_server):
    """The head has its own deadline, shorter than the client timeout."""
    server = start_server("--header-timeout", "1")
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(HALF_REQUEST)
        started = time.monotonic()
        assert sock.recv(100) == b""
        assert time.monotonic() - started < 3
    assert metrics(server)['runbox_connections_closed_total{reason="header_timeout"}'] == 1
    assert metrics(server)["runbox_header_timeout_seconds"] == 1


def test_a_refused_connection_gets_a_json_error(start_server):
    server = start_server("--max-connections-per-address", "2")
    held = [socket.create_connection((server.host, server.port)) for _ in range(2)]
    try:
        for sock in held:
            sock.sendall(HALF_REQUEST)
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            answer = b""
            while True:
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:
                    break
                if not data:
                    break
                answer += data
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 429"), answer
        assert json.loads(body)["error"]["code"] == "too_many_connections"
    finally:
        for sock in held:
            sock.close()


def server_open_files(server):
    with open(f"/proc/{server.proc.pid}/limits") as f:
        line = next(l for l in f if l.startswith("Max open files"))
    return int(line.split()[3])


@pytest.mark.parametrize("hard, cap", [(8192, 1024), (1500, 750)])
def test_the_server_raises_its_open_file_limit_or_lowers_its_cap(start_server, hard, cap):
    """Each connection is a descriptor: serve raises its soft limit to what the cap needs
    (1024 connections and 1024 for the engine) within the hard limit, or lowers the cap to
    fit and says so in its log."""
    server = start_server(preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                (1024, hard)))
    assert server_open_files(server) == min(hard, 2048)
    assert metrics(server)["runbox_connections_max"] == cap
    lowered = [l for l in server.log_lines() if l.get("event") == "file_limit"]
    assert bool(lowered) == (cap < 1024), lowered
