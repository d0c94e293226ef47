"""The egress policy, end to end, against test hosts this module makes.

Traffic goes only to loopback and to network namespaces made here: runbox
runs inside a namespace of the test ("client", 10.213.0.1 and fd00:213::1),
joined by a veth pair to another ("testhost", 10.213.0.2, 10.213.0.3 and
fd00:213::2) that serves TCP on port 8080 and DNS (dnsmasq) for names of
its own. The test host also holds the metadata address (169.254.169.254)
and stand-ins for public addresses (198.51.100.1-9, 203.0.113.9), and a
hostile DNS server on 10.213.0.3 whose answers point allowed names at
them. Routes to the test hosts exist only in the client namespace: the
host's own network is never touched. Addresses the policy must refuse
(metadata, private ranges) are refused inside the sandbox, before a packet
leaves it; the rules for the ranges no test host has are read back from
the sandbox's namespace instead of being tried.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import RUNBOX, daemons, processes_matching, unique_marker

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("dnsmasq") or not shutil.which("nsenter")
    or not os.path.exists(os.path.join(os.path.dirname(RUNBOX), "runbox-net")),
    reason="egress tests make network namespaces: root, iproute2, dnsmasq and runbox-net")

HOST_A, HOST_B, CLIENT = "10.213.0.2", "10.213.0.3", "10.213.0.1"
PORT = 8080
METADATA = "169.254.169.254"
# Stand-ins for public addresses (documentation ranges, outside the default refusal), held by
# the test host and routed to it from the client namespace only.
PUBLIC = [f"198.51.100.{i}" for i in range(1, 10)] + ["203.0.113.9"]
# What dnsmasq answers for its names: public stand-ins too, since a name admits no private
# address (only the operator's CIDRs do).
NAMED_A, NAMED_B = "203.0.113.1", "203.0.113.2"
PUBLIC += [NAMED_A, NAMED_B]

# What the test host's TCP servers answer: their own address, so a test
# knows which one it reached.
SERVER = """
import socket, sys, threading
def serve(addr):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, %d)); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall(("hello from " + addr + "\\n").encode()); c.close()
for a in sys.argv[1:]:
    threading.Thread(target=serve, args=(a,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
""" % PORT

# The sandbox's side: connect, print what came back or the error's name.
PROBE = """
import socket, sys
def probe(host):
    try:
        with socket.create_connection((host, %d), timeout=5) as s:
            return s.recv(100).decode().strip()
    except OSError as e:
        return type(e).__name__
for host in %r:
    print(host, "=>", probe(host))
"""

# A DNS server that answers as an attacker who controls the names below good.test would: each
# (name, type) gets its replies in order, each reply a question (the asked one unless given),
# an ID offset, and records for the answer (an) and additional (ar) sections. Any other
# question gets an empty answer.
HOSTILE_DNS = r"""
import json, socket, struct, sys
TYPES = {"A": 1, "AAAA": 28, "CNAME": 5}
def wire(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.rstrip(".").split(".")) + b"\0"
def record(owner, kind, value):
    if kind == "A":
        data = socket.inet_pton(socket.AF_INET, value)
    elif kind == "AAAA":
        data = socket.inet_pton(socket.AF_INET6, value)
    else:
        data = wire(value)
    return wire(owner) + struct.pack("!HHIH", TYPES[kind], 1, 60, len(data)) + data
answers = {(name, TYPES[kind]): replies for name, kind, replies in json.loads(sys.argv[2])}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 53))
print("ready", flush=True)
while True:
    query, client = s.recvfrom(4096)
    end = 12
    while query[end]:
        end += 1 + query[end]
    qname, (qtype,) = query[12:end + 1], struct.unpack("!H", query[end + 1:end + 3])
    labels, at = [], 0
    while qname[at]:
        labels.append(qname[at + 1:at + 1 + qname[at]].decode().lower())
        at += 1 + qname[at]
    (qid,) = struct.unpack("!H", query[:2])
    for reply in answers.get((".".join(labels), qtype), [{}]):
        an, ar = reply.get("an", []), reply.get("ar", [])
        question = wire(reply["question"]) if "question" in reply else qname
        head = struct.pack("!HHHHHH", (qid + reply.get("id", 0)) & 0xFFFF, 0x8180, 1, len(an),
                           0, len(ar))
        s.sendto(head + question + struct.pack("!HH", qtype, 1)
                 + b"".join(record(*r) for r in an + ar), client)
"""

HOSTILE_ANSWERS = [
    ["meta.good.test", "A", [{"an": [["meta.good.test", "A", METADATA]]}]],
    ["private.good.test", "A", [{"an": [["private.good.test", "A", HOST_B]]}]],
    # The name's own address, and records about other names beside it.
    ["mixed.good.test", "A", [{"an": [["mixed.good.test", "A", "198.51.100.1"],
                                      ["unrelated.test", "A", "198.51.100.2"]],
                               "ar": [["extra.test", "A", "198.51.100.3"]]}]],
    # A CNAME chain to its end, and a second chain that starts at another name.
    ["chain.good.test", "A", [{"an": [["chain.good.test", "CNAME", "edge.cdn.test"],
                                      ["edge.cdn.test", "A", "198.51.100.4"],
                                      ["decoy.good.test", "CNAME", "far.cdn.test"],
                                      ["far.cdn.test", "A", "198.51.100.5"]]}]],
    # An answer to another question first, then one with another ID, then the answer.
    ["wrongq.good.test", "A", [{"question": "other.good.test",
                                "an": [["wrongq.good.test", "A", "198.51.100.8"]]},
                               {"id": 1, "an": [["wrongq.good.test", "A", "198.51.100.6"]]},
                               {"an": [["wrongq.good.test", "A", "198.51.100.7"]]}]],
    # Owner names in another case than the question's.
    ["case.good.test", "A", [{"an": [["CASE.Good.TEST", "A", "198.51.100.9"]]}]],
    ["v4.good.test", "A", [{"an": [["v4.good.test", "A", a] for a in (
        "127.0.0.1", "0.0.0.0", "10.1.2.3", "100.64.0.1", METADATA, "172.16.0.1", "192.0.0.170",
        "192.168.1.1", "198.18.0.1", "224.0.0.1", "255.255.255.255", CLIENT,
        "203.0.113.9")]}]],
    ["v6.good.test", "AAAA", [{"an": [["v6.good.test", "AAAA", a] for a in (
        "::", "::1", "fe80::1", "fc00::1", "fd00:ec2::254", "fec0::1", "ff02::1",
        "::ffff:169.254.169.254", "::ffff:10.1.2.3", "64:ff9b::a9fe:a9fe", "64:ff9b::a01:203",
        "64:ff9b:1::a9fe:a9fe", "fd00:213::1", "2001:db8::1", "64:ff9b::cb00:7109")]}]],
]

# The sandbox's side of a hostile answer: resolve each name (IPv4) through runbox's resolver,
# then connect to each address, named or not.
RESOLVE_AND_PROBE = """
import socket
def resolve(name):
    try:
        infos = socket.getaddrinfo(name, %d, socket.AF_INET, socket.SOCK_STREAM)
        return ",".join(sorted({i[4][0] for i in infos}))
    except OSError as e:
        return type(e).__name__
def probe(host):
    try:
        with socket.create_connection((host, %d), timeout=5) as s:
            return s.recv(100).decode().strip()
    except OSError as e:
        return type(e).__name__
for name in %r:
    print(name, "->", resolve(name))
for host in %r:
    print(host, "=>", probe(host))
"""


def resolve_and_probe(run, names, hosts, *args):
    result = run(RESOLVE_AND_PROBE % (PORT, PORT, names, hosts), *args)
    assert result["exit_code"] == 0, result
    lines = result["output"].splitlines()
    resolved = dict(line.split(" -> ") for line in lines if " -> " in line)
    seen = dict(line.split(" => ") for line in lines if " => " in line)
    return resolved, seen, result


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True)


class Network:
    """The two namespaces, the servers in them, and runbox run inside the client's."""

    def __init__(self, tag):
        self.client, self.testhost = f"rbxeg{tag}c", f"rbxeg{tag}h"
        self.procs = []
        ip("netns", "add", self.client)
        ip("netns", "add", self.testhost)
        veth_c, veth_h = self.veth_c, self.veth_h = f"rbxeg{tag}a", f"rbxeg{tag}b"
        ip("-n", self.client, "link", "add", "name", veth_c, "type", "veth", "peer", "name",
           veth_h, "netns", self.testhost)
        for ns, dev, addrs in ((self.client, veth_c, [CLIENT + "/24", "fd00:213::1/64"]),
                               (self.testhost, veth_h,
                                [HOST_A + "/24", HOST_B + "/24", "fd00:213::2/64",
                                 METADATA + "/32"] + [a + "/32" for a in PUBLIC])):
            for addr in addrs:
                ip("-n", ns, "addr", "add", addr, "dev", dev, "nodad")
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        for route in (METADATA + "/32", "198.51.100.0/24", "203.0.113.0/24"):
            ip("-n", self.client, "route", "add", route, "dev", veth_c)
        self.procs.append(self.spawn(self.testhost, ["/usr/bin/python3", "-c", SERVER,
                                                     HOST_A, HOST_B, METADATA, *PUBLIC],
                                     wait_for=b"ready"))
        self.procs.append(self.spawn(self.testhost, ["/usr/bin/python3", "-c", HOSTILE_DNS,
                                                     HOST_B, json.dumps(HOSTILE_ANSWERS)],
                                     wait_for=b"ready"))
        self.procs.append(self.spawn(self.testhost, [
            shutil.which("dnsmasq"), "--keep-in-foreground", "--no-resolv", "--no-hosts",
            "--bind-interfaces", f"--listen-address={HOST_A}", "--port=53", "--pid-file",
            "--user=root", "--address=/allowed.test/" + NAMED_A,
            "--address=/other.test/" + NAMED_B, "--address=/sub.wild.test/" + NAMED_B,
            "--address=/denied.test/" + NAMED_A]))
        self.wait_dns()

    def spawn(self, ns, argv, wait_for=None):
        proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", *argv],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if wait_for:
            line = proc.stdout.readline()
            assert wait_for in line, (line, proc.stderr.read1(4096) if proc.poll() else b"")
        return proc

    def wait_dns(self):
        """dnsmasq answers (asked from the client namespace, with a raw query)."""
        query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" \
                b"\x07allowed\x04test\x00\x00\x01\x00\x01"
        code = ("import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                "s.settimeout(0.5)\n"
                f"s.sendto({query!r},('{HOST_A}',53))\nprint(len(s.recv(512)))")
        deadline = time.time() + 10
        while time.time() < deadline:
            proc = subprocess.run(["nsenter", f"--net=/run/netns/{self.client}",
                                   "/usr/bin/python3", "-c", code], capture_output=True)
            if proc.returncode == 0:
                return
            time.sleep(0.2)
        raise AssertionError("the test's DNS server did not answer")

    def close(self):
        for proc in self.procs:
            proc.kill()
            proc.wait()
        ip("netns", "del", self.client, check=False)
        ip("netns", "del", self.testhost, check=False)


@pytest.fixture(scope="module")
def net():
    network = Network(os.getpid() % 10000)
    try:
        yield network
    finally:
        network.close()


def stop_daemons(state):
    """The `runbox daemon` a stateful call started for state (it holds the kernels)."""
    for pid in daemons(state):
        os.kill(pid, signal.SIGTERM)


@pytest.fixture
def rb(net, tmp_path):
    """runbox, run in the client namespace: rb(*global_args)(run args...) -> result."""
    state = str(tmp_path / "state")
    yield from _rb(net, state)
    stop_daemons(state)


def _rb(net, state):

    def with_options(*global_args, env_extra=None):
        def run(code, *args, language="python", timeout=60):
            env = {"PATH": "/usr/bin:/bin", **(env_extra or {})}
            for key in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
                if key in os.environ:
                    env[key] = os.environ[key]
            proc = subprocess.run(
                ["nsenter", f"--net=/run/netns/{net.client}", RUNBOX, "--state-dir", state,
                 "--storage", "plain", "--egress-resolver", HOST_A, *global_args,
                 "run", language, "--network", "--json", "-c", code, *args],
                capture_output=True, env=env, timeout=timeout)
            assert proc.returncode == 0, proc.stderr.decode(errors="replace")
            return json.loads(proc.stdout)
        return run
    yield with_options


def probe(run, hosts, *args):
    result = run(PROBE % (PORT, hosts), *args)
    assert result["exit_code"] == 0, result
    seen = dict(line.split(" => ") for line in result["output"].splitlines())
    return seen, result


def test_a_private_test_host_is_refused_by_default_and_reported(rb):
    seen, result = probe(rb(), [HOST_A])
    assert seen[HOST_A] == "ConnectionRefusedError", seen
    assert result["network"] is True
    assert result["egress_denied"] == 1, result
    assert result["egress_denied_to"] == [f"{HOST_A}:{PORT}"], result


def test_the_operator_can_allow_a_private_range(rb):
    seen, result = probe(rb("--egress-allow", "10.213.0.0/24"), [HOST_A, HOST_B])
    assert seen == {HOST_A: f"hello from {HOST_A}", HOST_B: f"hello from {HOST_B}"}, seen
    assert result["egress_denied"] == 0 and result["egress_denied_to"] == [], result


def test_a_request_narrows_what_the_operator_allows_and_cannot_widen_it(rb):
    run = rb("--egress-allow", "10.213.0.0/24")
    seen, result = probe(run, [HOST_A, HOST_B], "--egress-allow", f"{HOST_A}/32")
    assert seen == {HOST_A: f"hello from {HOST_A}", HOST_B: "ConnectionRefusedError"}, seen
    assert result["egress_denied_to"] == [f"{HOST_B}:{PORT}"], result
    # A request naming what the operator does not allow gets nothing more.
    seen, _ = probe(rb(), [HOST_A], "--egress-allow", "10.213.0.0/24")
    assert seen == {HOST_A: "ConnectionRefusedError"}, seen
    # An empty list: nothing at all.
    seen, _ = probe(run, [HOST_A], "--egress-allow", "")
    assert seen == {HOST_A: "ConnectionRefusedError"}, seen


def test_the_operators_deny_wins_over_its_allow(rb):
    seen, _ = probe(rb("--egress-allow", "10.213.0.0/24", "--egress-deny", f"{HOST_B}"),
                    [HOST_A, HOST_B])
    assert seen == {HOST_A: f"hello from {HOST_A}", HOST_B: "ConnectionRefusedError"}, seen


def test_the_hosts_own_addresses_are_refused_even_when_their_range_is_allowed(rb, net):
    listener = net.spawn(net.client, ["/usr/bin/python3", "-c", SERVER, CLIENT],
                         wait_for=b"ready")
    try:
        seen, result = probe(rb("--egress-allow", "10.213.0.0/24"), [CLIENT, HOST_A])
    finally:
        listener.kill()
        listener.wait()
    assert seen == {CLIENT: "ConnectionRefusedError", HOST_A: f"hello from {HOST_A}"}, seen
    assert f"{CLIENT}:{PORT}" in result["egress_denied_to"], result


def test_an_address_the_host_gains_while_runbox_runs_is_refused_to_the_next_execution(rb, net,
                                                                                       tmp_path):
    """runbox keeps the host's addresses between executions (listing them walks every
    interface): one added while a daemon runs is refused to the very next execution, as the
    addresses it started with are."""
    gained = "10.213.0.77"
    run = rb("--egress-allow", "10.213.0.0/24", env_extra={"RUNBOX_USE_DAEMON": "always"})
    stateful = ("--stateful", "--session", "gains")
    seen, _ = probe(run, [HOST_A])  # the daemon starts and lists the host's addresses
    assert seen == {HOST_A: f"hello from {HOST_A}"}, seen
    seen, _ = probe(run, [HOST_A], *stateful)  # and a kernel that lives on
    assert seen == {HOST_A: f"hello from {HOST_A}"}, seen
    time.sleep(0.5)  # its pool prepares the next sandbox, rules and all, before the change
    ip("-n", net.client, "addr", "add", gained + "/24", "dev", net.veth_c, "nodad")
    try:
        listener = net.spawn(net.client, ["/usr/bin/python3", "-c", SERVER, gained],
                             wait_for=b"ready")
        try:
            seen, result = probe(run, [gained, HOST_A])
            seen_by_kernel, by_kernel = probe(run, [gained], *stateful)
        finally:
            listener.kill()
            listener.wait()
    finally:
        ip("-n", net.client, "addr", "del", gained + "/24", "dev", net.veth_c, check=False)
    assert seen == {gained: "ConnectionRefusedError", HOST_A: f"hello from {HOST_A}"}, seen
    assert f"{gained}:{PORT}" in result["egress_denied_to"], result
    assert result["pooled"] is True, result  # its rules were made before the address came
    assert seen_by_kernel == {gained: "ConnectionRefusedError"}, seen_by_kernel
    assert by_kernel["kernel_restarted"] is False, by_kernel
    # Both ran in one daemon, which kept what it listed for the first.
    assert len(daemons(str(tmp_path / "state"))) == 1


def test_a_domain_allow_list_admits_what_it_resolved_and_nothing_else(rb):
    run = rb("--egress-default", "none", "--egress-allow", "allowed.test,*.wild.test")
    code = PROBE % (PORT, ["allowed.test", "sub.wild.test", "other.test"])
    result = run(code)
    seen = dict(line.split(" => ") for line in result["output"].splitlines())
    # The name resolved (by runbox, through the test's DNS) and is reachable.
    assert seen["allowed.test"] == f"hello from {NAMED_A}", seen
    assert seen["sub.wild.test"] == f"hello from {NAMED_B}", seen
    # other.test is not on the list: the lookup is refused, and is reported.
    assert seen["other.test"] == "gaierror", seen
    assert "other.test" in result["egress_denied_to"], result


def test_a_direct_connection_to_an_address_no_allowed_name_resolved_to_is_refused(rb):
    run = rb("--egress-default", "none", "--egress-allow", "allowed.test")
    # allowed.test is NAMED_A; NAMED_B was never an answer.
    seen, result = probe(run, ["allowed.test", NAMED_B])
    assert seen == {"allowed.test": f"hello from {NAMED_A}",
                    NAMED_B: "ConnectionRefusedError"}, seen
    assert f"{NAMED_B}:{PORT}" in result["egress_denied_to"], result


def test_a_denied_domain_is_not_resolved_and_other_dns_servers_are_refused(rb):
    run = rb("--egress-allow", "10.213.0.0/24", "--egress-deny", "denied.test")
    code = (PROBE % (PORT, ["denied.test", "allowed.test"])) + """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"x" * 20, ("%s", 53)); print("dns-elsewhere => sent")
except OSError as e:
    print("dns-elsewhere =>", type(e).__name__)
""" % HOST_A
    result = run(code)
    seen = dict(line.split(" => ") for line in result["output"].splitlines())
    assert seen["denied.test"] == "gaierror", seen
    assert seen["allowed.test"] == f"hello from {NAMED_A}", seen
    # Asking the test's DNS server directly, not through runbox, is refused.
    assert seen["dns-elsewhere"] == "PermissionError", seen
    assert "denied.test" in result["egress_denied_to"], result
    assert f"{HOST_A}:53" in result["egress_denied_to"], result


# A resolver that never answers but counts what it is asked, and answers only names that
# start with "late": the stand-in for an operator's resolver that stopped answering.
SILENT_DNS = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
asked = 0
while True:
    query, client = s.recvfrom(4096)
    asked += 1
    name = query[13:13 + query[12]]
    print(asked, name.decode(), flush=True)  # the first label
    if name.startswith(b"late"):
        end = 12
        while query[end]:
            end += 1 + query[end]
        answer = query[12:end + 5] + b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) \
            + socket.inet_aton(sys.argv[3])
        s.sendto(query[:2] + struct.pack("!HHHHH", 0x8180, 1, 1, 0, 0) + answer, client)
"""

# The sandbox's side: more questions than runbox keeps in flight for one sandbox, none
# answered; then, once they are past their deadline, one more.
FLOOD_THEN_ASK = """
import socket, struct, time
def question(qid, name):
    labels = b"".join(bytes([len(l)]) + l.encode() for l in name.split("."))
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + labels + b"\\0\\0\\1\\0\\1"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(80):
    s.sendto(question(i, "q%d.flood.test" % i), ("127.0.0.53", 53))
    time.sleep(0.005)
time.sleep(7)
s.settimeout(4)
s.sendto(question(999, "late.flood.test"), ("127.0.0.53", 53))
try:
    reply = s.recv(512)
    print("late =>", socket.inet_ntoa(reply[-4:]))
except OSError as e:
    print("late =>", type(e).__name__)
"""


def test_questions_the_resolver_never_answers_expire_and_free_their_places(rb, net):
    """runbox keeps at most 64 of a sandbox's questions in flight to the operator's resolver;
    one that gets no answer is dropped at its deadline (5 s), so a resolver that stopped
    answering for a while does not leave the sandbox without DNS for the rest of its life."""
    port = 5300
    silent = net.spawn(net.testhost, ["/usr/bin/python3", "-c", SILENT_DNS, HOST_B, str(port),
                                      NAMED_A], wait_for=b"ready")
    try:
        result = rb("--egress-resolver", f"{HOST_B}:{port}")(FLOOD_THEN_ASK, "--timeout", "30")
    finally:
        silent.kill()
        heard = silent.stdout.read().decode().splitlines()
        silent.wait()
    flood = [line for line in heard if line.split()[1].startswith("q")]
    assert result["exit_code"] == 0, result
    # The first 64 went out, the rest were dropped while those were in flight...
    assert len(flood) == 64, heard
    # ...and once those had expired, the next question went out and its answer came back.
    assert result["output"].splitlines() == [f"late => {NAMED_A}"], (result, heard)


def test_a_request_narrowed_to_a_name_reaches_that_name_only(rb):
    run = rb("--egress-allow", "10.213.0.0/24")
    seen, _ = probe(run, ["allowed.test", "other.test"], "--egress-allow", "allowed.test")
    assert seen == {"allowed.test": f"hello from {NAMED_A}",
                    "other.test": "ConnectionRefusedError"}, seen


# What an allowed name may admit: the hostile DNS server on HOST_B answers for *.good.test.

def test_an_allowed_name_pointed_at_the_metadata_or_a_private_address_admits_neither(rb):
    for default in ("public", "none"):
        run = rb("--egress-resolver", HOST_B, "--egress-default", default,
                 "--egress-allow", "*.good.test")
        resolved, seen, result = resolve_and_probe(
            run, ["meta.good.test", "private.good.test"], [METADATA, HOST_B])
        # The program gets the answer as DNS gave it, and learns from the result why its
        # connection failed; the name did not open what the policy refuses.
        assert resolved == {"meta.good.test": METADATA, "private.good.test": HOST_B}, resolved
        assert seen == {METADATA: "ConnectionRefusedError",
                        HOST_B: "ConnectionRefusedError"}, (default, seen)
        assert f"{METADATA}:{PORT}" in result["egress_denied_to"], result
        assert f"{HOST_B}:{PORT}" in result["egress_denied_to"], result


def test_only_the_addresses_that_answer_the_asked_name_are_admitted(rb):
    """Its own records and those at the end of its CNAME chain; not other names' records in
    the same message, not the additional section, not a chain that starts elsewhere, not a
    reply to another question or with another ID. Owner names match in any case."""
    run = rb("--egress-resolver", HOST_B, "--egress-default", "none",
             "--egress-allow", "*.good.test")
    names = ["mixed.good.test", "chain.good.test", "wrongq.good.test", "Case.Good.Test."]
    resolved, seen, result = resolve_and_probe(run, names, PUBLIC[:9])
    admitted = {"198.51.100.1", "198.51.100.4", "198.51.100.7", "198.51.100.9"}
    expected = {a: f"hello from {a}" if a in admitted else "ConnectionRefusedError"
                for a in PUBLIC[:9]}
    assert seen == expected, (seen, resolved)
    # The reply to another question and the one with another ID were not taken for the answer.
    assert resolved["wrongq.good.test"] == "198.51.100.7", resolved
    for refused in set(PUBLIC[:9]) - admitted:
        assert f"{refused}:{PORT}" in result["egress_denied_to"], result


def test_a_name_admits_no_address_of_the_refused_ranges_ipv4_or_ipv6(rb):
    """Read back from the sandbox's own sets: of an answer full of loopback, unspecified,
    private, shared, link-local, multicast, broadcast, unique-local, site-local, IPv4-mapped,
    NAT64 forms of those, and the host's own addresses, only the public ones are admitted."""
    run = rb("--egress-resolver", HOST_B, "--egress-allow", "*.good.test")
    code = ("import socket\n"
            "for name, family in (('v4.good.test', socket.AF_INET), "
            "('v6.good.test', socket.AF_INET6)):\n"
            "    print(name, len(socket.getaddrinfo(name, 80, family, socket.SOCK_STREAM)))\n")
    sets, result = admitted_sets(run, code)
    assert result["output"].split() == ["v4.good.test", "13", "v6.good.test", "15"], result
    assert sets == {"named4": ["203.0.113.9"], "named6": ["2001:db8::1", "64:ff9b::cb00:7109"]}, \
        sets


def test_an_allowed_cidr_still_admits_its_addresses_by_name(rb):
    run = rb("--egress-resolver", HOST_B, "--egress-default", "none",
             "--egress-allow", f"*.good.test,{HOST_B}/32")
    resolved, seen, _ = resolve_and_probe(run, ["private.good.test", "meta.good.test"],
                                          [HOST_B, METADATA])
    assert seen == {HOST_B: f"hello from {HOST_B}", METADATA: "ConnectionRefusedError"}, seen
    sets, _ = admitted_sets(run, "import socket; socket.getaddrinfo('private.good.test', 80, "
                                 "socket.AF_INET)")
    assert sets["named4"] == [HOST_B], sets


def admitted_sets(run, code):
    """Runs code, then holds its sandbox (a sleep) while the sets of addresses admitted by name
    are read with nft from the sandbox's network namespace: {set: [addresses]}."""
    import threading
    marker = unique_marker()
    box = {}
    full = code + f"\nimport subprocess; subprocess.run(['sleep', '{marker}'])\n"
    thread = threading.Thread(target=lambda: box.update(result=run(full, timeout=120)))
    thread.start()
    sets = {}
    try:
        deadline = time.time() + 60
        pids = []
        while not pids and time.time() < deadline:
            pids = processes_matching(marker)
            time.sleep(0.05)
        assert pids, "the sandbox's sleep did not start"
        for name in ("named4", "named6"):
            listing = subprocess.run(["nsenter", f"--net=/proc/{pids[0]}/ns/net", "nft", "-j",
                                      "list", "set", "inet", "runbox", name],
                                     capture_output=True, text=True, check=True).stdout
            found = [item["set"] for item in json.loads(listing)["nftables"] if "set" in item]
            sets[name] = sorted(found[0].get("elem", []))
    finally:
        for pid in processes_matching(marker):
            os.kill(pid, signal.SIGKILL)
        thread.join(60)
    return sets, box.get("result")


def test_a_stateful_kernel_enforces_and_reports_per_call(rb):
    run = rb("--egress-allow", "10.213.0.0/24")
    stateful = ("--stateful", "--session", "egress")
    seen, first = probe(run, [HOST_A, CLIENT], *stateful)
    assert seen == {HOST_A: f"hello from {HOST_A}", CLIENT: "ConnectionRefusedError"}, seen
    assert first["egress_denied_to"] == [f"{CLIENT}:{PORT}"], first
    # What was refused is reported with the call that tried, not again with the next.
    second = run("x = 1", *stateful)
    assert second["egress_denied"] == 0 and second["egress_denied_to"] == [], second
    assert second["kernel_restarted"] is False, second
    # A call that narrows gets a kernel started with that narrowing.
    seen, third = probe(run, [HOST_A, HOST_B], *stateful, "--egress-allow", f"{HOST_B}/32")
    assert third["kernel_restarted"] is True, third
    assert seen == {HOST_A: "ConnectionRefusedError", HOST_B: f"hello from {HOST_B}"}, seen


# TEST-NET-2: a public address to runbox's default policy, here a test host's (routed to it in
# the client namespace only, so nothing leaves the test's namespaces).
PUBLIC_HOST = "198.51.100.77"  # not one of the module's PUBLIC stand-ins


def test_a_stateful_call_gets_its_egress_default_after_a_daemon_of_another_started(rb, net):
    """Issue 28: a daemon started by a stateful call with the default policy (public) served a
    later `--egress-default none` call with its own settings. Each configuration has its own."""
    ip("-n", net.testhost, "addr", "add", PUBLIC_HOST + "/32", "dev", net.veth_h)
    ip("-n", net.client, "route", "add", PUBLIC_HOST + "/32", "dev", net.veth_c)
    server = net.spawn(net.testhost, ["/usr/bin/python3", "-c", SERVER, PUBLIC_HOST],
                       wait_for=b"ready")
    try:
        seen, _ = probe(rb(), [PUBLIC_HOST], "--stateful", "--session", "public")
        assert seen == {PUBLIC_HOST: f"hello from {PUBLIC_HOST}"}, seen  # reachable by default
        seen, result = probe(rb("--egress-default", "none"), [PUBLIC_HOST], "--stateful",
                             "--session", "none")
        assert seen == {PUBLIC_HOST: "ConnectionRefusedError"}, seen
        assert result["egress_denied_to"] == [f"{PUBLIC_HOST}:{PORT}"], result
        # The first configuration's daemon still serves its own calls as before.
        seen, _ = probe(rb(), [PUBLIC_HOST], "--stateful", "--session", "public")
        assert seen == {PUBLIC_HOST: f"hello from {PUBLIC_HOST}"}, seen
    finally:
        server.kill()
        server.wait()
        ip("-n", net.client, "route", "del", PUBLIC_HOST + "/32", check=False)
        ip("-n", net.testhost, "addr", "del", PUBLIC_HOST + "/32", "dev", net.veth_h,
           check=False)


def test_installs_follow_the_operators_policy(rb):
    """pip asks a package index on the private test host: refused by default
    (the installer's output says so), reached when the operator allows it
    (the test host speaks no HTTP, so pip fails there for another reason)."""
    index = {"PIP_INDEX_URL": f"http://{HOST_A}:{PORT}/simple/", "PIP_TRUSTED_HOST": HOST_A,
             "PIP_RETRIES": "0",
             "PIP_TIMEOUT": "5"}
    result = rb(env_extra=index)("print('ran')", "--require", "rbx-egress-probe==1.0",
                                 timeout=120)
    assert result["error_type"] == "ImportError" and result["output"] == "", result
    assert "egress policy refused" in result["error"], result["error"]
    assert f"{HOST_A}:{PORT}" in result["error"], result["error"]
    allowed = rb("--egress-allow", "10.213.0.0/24", env_extra=index)(
        "print('ran')", "--require", "rbx-egress-probe==1.1", timeout=120)
    assert allowed["error_type"] == "ImportError", allowed
    assert "egress policy refused" not in allowed["error"], allowed["error"]


def test_rules_for_metadata_and_link_local_ranges_are_in_the_sandboxs_namespace(rb, net):
    """Read back with nft from inside a running sandbox's network namespace:
    nothing is sent to those ranges."""
    marker = unique_marker()
    run = rb("--egress-allow", f"{CLIENT}/32")
    import threading
    box = {}
    thread = threading.Thread(target=lambda: box.update(result=run(
        f"import subprocess; subprocess.run(['sleep', '{marker}'])", timeout=120)))
    thread.start()
    try:
        deadline = time.time() + 30
        pids = []
        while not pids and time.time() < deadline:
            pids = processes_matching(marker)
            time.sleep(0.05)
        assert pids, "the sandbox's sleep did not start"
        rules = subprocess.run(["nsenter", f"--net=/proc/{pids[0]}/ns/net", "nft", "list",
                                "ruleset"], capture_output=True, text=True, check=True).stdout
    finally:
        for pid in processes_matching(marker):
            os.kill(pid, signal.SIGKILL)
        thread.join(60)
    refused = set_ranges(rules, "default4") + set_ranges(rules, "default6")
    for address in ("169.254.169.254", "169.254.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1",
                    "100.64.0.1", "127.0.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255",
                    "fe80::1", "fd00:ec2::254", "fc00::1", "::1", "ff02::1",
                    "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "64:ff9b::a00:1",
                    "64:ff9b:1::1"):
        assert covered(refused, address), (address, rules)
    for address in ("203.0.113.80", "8.8.8.8", "2001:db8::1", "2606:4700::1111",
                    "64:ff9b::808:808"):
        assert not covered(refused, address), (address, rules)
    # The host's (here: the client namespace's) own address, refused although the operator
    # allowed it: in sets of their own, which take the addresses the host gains while the
    # sandbox lives. Only the host's addresses the policy would otherwise admit are there:
    # its loopback and its address's NAT64 form are refused by the default ranges already.
    host4 = set_ranges(rules, "host4")
    assert covered(host4, CLIENT), rules
    assert not covered(host4, "127.0.0.1"), rules
    assert covered(refused, "64:ff9b::" + CLIENT), rules
    assert "@host4" in rules and "@host6" in rules, rules
    # The host's sets have no size: with one the kernel made each a hash of fixed buckets,
    # 1 MiB allocated and zeroed per family at every network-on start.
    for name in ("host4", "host6"):
        declared = re.search(r"set %s \{(.*?)(?:elements|\})" % name, rules, re.S)
        assert declared and "size" not in declared.group(1), (name, rules)
    assert 'counter name "refused"' in rules and "reject" in rules, rules


def set_ranges(rules, name):
    """The elements of an nft set in `nft list ruleset` text, as ip_network ranges."""
    import ipaddress
    import re
    match = re.search(r"set %s \{.*?elements = \{(.*?)\}" % name, rules, re.S)
    assert match, (name, rules)
    ranges = []
    for item in match.group(1).replace("\n", " ").split(","):
        item = item.strip()
        if "-" in item:
            low, high = (ipaddress.ip_address(x.strip()) for x in item.split("-"))
            ranges.append((low, high))
        else:
            net = ipaddress.ip_network(item, strict=False)
            ranges.append((net[0], net[-1]))
    return ranges


def covered(ranges, address):
    import ipaddress
    a = ipaddress.ip_address(address)
    return any(low.version == a.version and low <= a <= high for low, high in ranges)


def test_the_program_cannot_change_the_rules(rb):
    """The sandbox shows the host's /usr, nft included: flushing the rules
    fails (no CAP_NET_ADMIN for the program), and the policy still holds."""
    code = ("import subprocess\n"
            "p = subprocess.run(['/usr/sbin/nft', 'flush', 'ruleset'], capture_output=True, "
            "text=True)\n"
            "print('nft =>', p.returncode, ' '.join(p.stderr.split())[:200].replace('=>', '->'))\n"
            + PROBE % (PORT, [HOST_A]))
    result = rb()(code, "--image", "host")  # the host's /usr, where nft is
    seen = dict(line.split(" => ", 1) for line in result["output"].splitlines())
    assert not seen["nft"].startswith("0 "), seen
    assert seen[HOST_A] == "ConnectionRefusedError", seen


def test_a_network_on_execution_leaves_the_hosts_shared_mounts_alone(tmp_path, runbox):
    """The network helper pivots out of its own mount namespace and detaches
    the old root: in a copy of the host's, that unmounted the host's shared
    mounts (an `ip netns` mount, here a canary tmpfs made shared)."""
    canary = tmp_path / "canary"
    canary.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "runbox-canary", str(canary)],
                   check=True)
    try:
        subprocess.run(["mount", "--make-shared", str(canary)], check=True)
        (canary / "alive").write_text("yes")
        result = runbox.run("bash", "echo hi", "--network")
        assert result["output"] == "hi\n" and result["network"] is True, result
        with open("/proc/self/mountinfo") as f:
            assert f" {canary} " in f.read(), "the host lost a shared mount"
        assert (canary / "alive").read_text() == "yes"
    finally:
        subprocess.run(["umount", "-l", str(canary)], check=False)
