"""runbox as a cluster: three (then four) `runbox serve` nodes on loopback addresses behind a
real nginx and a real HAProxy from Debian, each run with the configuration shipped in deploy/,
driven by the Python client as an agent would. Sessions spread over the nodes and every request
of a session reaches its node (files and live variables persist through the balancer); output
streams through it; a node that stops fails only its own sessions, with the balancer's JSON error
and the client's NodeUnavailable; a fourth node moves about a quarter of the sessions; and a
drained node's session moves to another through export and an import via the balancer."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
RUNBOX = os.environ.get("RUNBOX_BIN", os.path.join(ROOT, "build", "runbox"))

import runbox  # noqa: E402
from runbox import Client, NodeUnavailable, NotFound  # noqa: E402

SESSIONS = 300
STATEFUL = 30  # sessions that also keep a live interpreter (each holds a Python process)


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for(url, seconds=30, expect=200):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == expect:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} never answered {expect}")


class Node:
    """One `runbox serve` on its own loopback address and state directory."""

    def __init__(self, index, work):
        self.name = f"node-{index}"
        self.host = f"127.0.0.{index + 2}"
        self.port = free_port(self.host)
        self.state = os.path.join(work, self.name)
        self.log = os.path.join(work, f"{self.name}.log")
        self.proc = None
        self.start()

    @property
    def address(self):
        return f"{self.host}:{self.port}"

    @property
    def url(self):
        return f"http://{self.address}"

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [RUNBOX, "--state-dir", self.state, "--pool", "0", "serve", "--listen",
                 self.address, "--grace", "5"], stdout=subprocess.DEVNULL, stderr=log,
                stdin=subprocess.DEVNULL)
        wait_for(self.url + "/healthz")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)
        log = open(self.log, errors="replace").read()
        assert "AddressSanitizer" not in log and "runtime error:" not in log, log[-3000:]

    def sessions(self):
        with urllib.request.urlopen(self.url + "/v1/sessions", timeout=10) as r:
            return {s["session_id"] for s in json.load(r)["sessions"]}


class Balancer:
    """nginx or HAProxy, run in the foreground with the shipped configuration; only the node
    list and the listening address are the test's."""

    def __init__(self, kind, work):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix=f"{kind}-", dir=work)
        self.port = free_port("127.0.0.1")
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def configure(self, nodes):
        if self.kind == "nginx":
            conf = open(os.path.join(ROOT, "deploy", "nginx", "runbox.conf")).read()
            conf, n = re.subn(r"listen 8080;", f"listen 127.0.0.1:{self.port};", conf)
            assert n == 1
            open(os.path.join(self.dir, "runbox.conf"), "w").write(conf)
            open(os.path.join(self.dir, "runbox-nodes.conf"), "w").write(
                "".join(f"server {n.address} max_fails=0;\n" for n in nodes))
            open(os.path.join(self.dir, "nginx.conf"), "w").write(
                f"worker_processes 2;\npid {self.dir}/nginx.pid;\nerror_log {self.dir}/error.log;\n"
                "events { worker_connections 4096; }\n"
                "http { access_log off; include runbox.conf; }\n")
            return [shutil.which("nginx") or "/usr/sbin/nginx", "-p", self.dir, "-c",
                    os.path.join(self.dir, "nginx.conf"), "-g", "daemon off;"]
        shipped = os.path.join(ROOT, "deploy", "haproxy")
        conf = open(os.path.join(shipped, "haproxy.cfg")).read()
        conf, n = re.subn(r"bind :8080", f"bind 127.0.0.1:{self.port}", conf)
        assert n == 1
        servers = "".join(f"    server {n.name} {n.address}\n" for n in nodes)
        # The shipped node lines of each backend give way to this cluster's.
        conf, n = re.subn(r"(?:    server .*\n)+", lambda m: servers, conf)
        assert n == 2
        shutil.copytree(os.path.join(shipped, "errors"), os.path.join(self.dir, "errors"),
                        dirs_exist_ok=True)
        open(os.path.join(self.dir, "haproxy.cfg"), "w").write(conf)
        return [shutil.which("haproxy") or "/usr/sbin/haproxy", "-db", "-f",
                os.path.join(self.dir, "haproxy.cfg")]

    def start(self, nodes):
        self.stop()
        command = self.configure(nodes)
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.dir, "stderr"), "ab"))
        wait_for(self.url + "/livez")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


@pytest.fixture(scope="module", params=["nginx", "haproxy"])
def cluster(request, tmp_path_factory):
    if not shutil.which(request.param) and not os.path.exists(f"/usr/sbin/{request.param}"):
        pytest.fail(f"{request.param} is not installed (make deps installs it)")
    work = str(tmp_path_factory.mktemp(f"cluster-{request.param}"))
    nodes = []
    balancer = Balancer(request.param, work)
    state = {"nodes": nodes, "balancer": balancer, "work": work,
             "client": Client(balancer.url, retries=3)}
    try:
        for i in range(3):
            nodes.append(Node(i, work))
        balancer.start(nodes)
        yield state
    finally:
        balancer.stop()
        for node in state["nodes"]:
            node.stop()
    for node in state["nodes"]:  # each node's storage image and prepared namespace
        unmounted = subprocess.run([RUNBOX, "--state-dir", node.state, "storage", "unmount"],
                                   capture_output=True, text=True)
        assert unmounted.returncode == 0, unmounted.stderr


def session_ids():
    return [f"agent-{i:03d}" for i in range(SESSIONS)]


def owners(nodes):
    """{session id: the node that has it}, asking each node directly."""
    found = {}
    for node in nodes:
        for session in node.sessions():
            assert session not in found, f"{session} is on {found[session]} and {node.name}"
            found[session] = node.name
    return found


def test_sessions_spread_over_the_nodes_and_stay_on_theirs(cluster):
    client = cluster["client"]
    for sid in session_ids():
        client.new_session(sid)
        client.upload(sid, "who.txt", sid.encode())
    for sid in session_ids()[:STATEFUL]:
        assert client.execute("python", f"secret = {sid!r} * 2", session_id=sid,
                              stateful=True)["success"]
    where = owners(cluster["nodes"])
    assert set(where) == set(session_ids())
    counts = {node.name: list(where.values()).count(node.name) for node in cluster["nodes"]}
    assert all(count >= SESSIONS // 6 for count in counts.values()), counts  # every node its share
    # Every later request of a session reaches the node that has it: the file and the live
    # variable are found through the balancer, whichever form the request takes.
    for sid in session_ids():
        result = client.execute("bash", "cat who.txt; echo; echo $RUNBOX_SESSION_ID", session_id=sid)
        assert result["output"] == f"{sid}\n{sid}\n", result
    for sid in session_ids()[:STATEFUL]:
        assert client.execute("python", "secret", session_id=sid,
                              stateful=True)["results"][0]["data"]["text/plain"] == repr(sid * 2)
    by_path = urllib.request.Request(
        cluster["balancer"].url + f"/v1/sessions/{session_ids()[7]}/execute", method="POST",
        data=json.dumps({"language": "bash", "code": "cat who.txt"}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(by_path, timeout=60) as r:
        assert json.load(r)["output"] == session_ids()[7]
    with urllib.request.urlopen(cluster["balancer"].url +
                                f"/v1/sessions/{session_ids()[8]}/files/who.txt") as r:
        assert r.read() == session_ids()[8].encode()
    assert owners(cluster["nodes"]) == where  # nothing was created anywhere else


def test_output_streams_through_the_balancer_before_the_execution_ends(cluster):
    seen = []
    code = "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')"
    result = cluster["client"].execute("python", code, session_id=session_ids()[0],
                                       on_output=lambda s, t: seen.append((time.time(), t)))
    returned = time.time()
    assert result["output"] == "first\nsecond\n"
    first = next(at for at, text in seen if "first" in text)
    assert returned - first > 1.5, (returned - first, seen)


def test_the_playground_calls_its_nodes_through_the_balancer(cluster):
    # The page's requests carry its Origin (the balancer's address, port included); the node
    # compares it with the Host the balancer passed on, and another site's Origin is refused.
    base = cluster["balancer"].url
    with urllib.request.urlopen(base + "/", timeout=30) as r:
        assert b"/playground/app.js" in r.read()

    def call(origin):
        request = urllib.request.Request(
            base + f"/v1/sessions/{session_ids()[3]}/execute", method="POST",
            data=json.dumps({"language": "bash", "code": "cat who.txt"}).encode(),
            headers={"Content-Type": "application/json", "Origin": origin})
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    status, result = call(base)
    assert status == 200 and result["output"] == session_ids()[3], result
    status, refused = call("http://evil.example")
    assert status == 403 and refused["error"]["code"] == "cross_origin", refused


def test_a_stopped_node_fails_only_its_own_sessions_clearly(cluster):
    client, nodes = cluster["client"], cluster["nodes"]
    where = owners(nodes)
    victim = nodes[1]
    victim.stop()
    lost = {sid for sid, name in where.items() if name == victim.name}
    assert lost
    for sid in session_ids():
        if sid in lost:
            with pytest.raises(NodeUnavailable) as raised:
                client.execute("bash", "cat who.txt", session_id=sid)
            assert raised.value.status == 503 and raised.value.code == "node_unavailable"
            if cluster["balancer"].kind == "nginx":  # HAProxy's error page is static
                assert raised.value.session_id == sid
            with pytest.raises(NodeUnavailable):
                client.download(sid, "who.txt")
        else:
            assert client.download(sid, "who.txt") == sid.encode()
    # Work without a session still gets done, by the nodes that are up.
    for _ in range(6):
        assert client.execute("bash", "echo anywhere")["output"] == "anywhere\n"
    # The raw answer a non-Python client sees is JSON too.
    request = urllib.request.Request(cluster["balancer"].url + "/v1/execute", method="POST",
                                     data=b'{"language":"bash","code":"true"}',
                                     headers={"X-Runbox-Session": sorted(lost)[0],
                                              "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as raw:
        urllib.request.urlopen(request, timeout=30)
    assert raw.value.code == 503
    assert json.loads(raw.value.read())["error"]["code"] == "node_unavailable"
    victim.start()  # back with its sessions, files on its disk
    assert client.download(sorted(lost)[0], "who.txt") == sorted(lost)[0].encode()


def test_a_fourth_node_moves_about_a_quarter_of_the_sessions(cluster):
    client, nodes, balancer = cluster["client"], cluster["nodes"], cluster["balancer"]
    fourth = Node(3, cluster["work"])
    nodes.append(fourth)
    balancer.start(nodes)
    moved = 0
    for sid in session_ids():
        try:
            assert client.download(sid, "who.txt") == sid.encode()
        except NotFound:
            moved += 1  # routed to the new node, which does not have it
    assert 0 < moved <= SESSIONS / 3, moved
    assert fourth.sessions() == set()  # reads do not create sessions
    cluster["moved"] = moved


def test_a_drained_node_s_session_moves_through_export_and_import(cluster):
    client, nodes, balancer = cluster["client"], cluster["nodes"], cluster["balancer"]
    where = owners(nodes)
    leaving = nodes[0]
    sid = sorted(s for s, name in where.items() if name == leaving.name)[0]
    direct = Client(leaving.url)
    drain = urllib.request.Request(leaving.url + "/v1/admin/drain", method="POST")
    with urllib.request.urlopen(drain) as r:
        assert json.load(r)["draining"] is True
    with pytest.raises(urllib.error.HTTPError) as health:
        urllib.request.urlopen(leaving.url + "/healthz")
    assert health.value.code == 503
    # Still serving what it holds while it drains; refusing anything new.
    assert direct.download(sid, "who.txt") == sid.encode()
    with pytest.raises(runbox.RunboxError) as refused:
        direct.new_session("brand-new")
    assert refused.value.code == "draining"
    archive = direct.export_session(sid)
    balancer.start([n for n in nodes if n is not leaving])
    imported = client.import_session(sid, archive)
    assert imported["files"] >= 1
    assert client.download(sid, "who.txt") == sid.encode()
    assert client.execute("bash", "cat who.txt", session_id=sid)["output"] == sid
    landed = owners([n for n in nodes if n is not leaving])
    assert sid in landed  # on the node that owns it now, which the balancer reaches
