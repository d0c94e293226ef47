"""What the benchmark's sections share: timing, summaries, and a runbox serve to drive."""
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import threading
import time


def percentile(values, p):
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(samples):
    return {"median_ms": round(statistics.median(samples), 2),
            "p90_ms": round(percentile(samples, 90), 2),
            "p99_ms": round(percentile(samples, 99), 2), "n": len(samples)}


def timed(cmd, env=None, cwd=None):
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    elapsed = (time.perf_counter() - start) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed: {proc.stderr.decode()[-300:]}")
    return elapsed, proc.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """runbox serve on a free loopback port, with one keep-alive client."""

    def __init__(self, runbox, state_dir, e2b=False, global_args=(), serve_args=(), log=None):
        self.port = free_port()
        extra = []
        if e2b:  # E2B's protocol on a second port
            self.e2b_port = free_port()
            extra = ["--e2b-listen", f"127.0.0.1:{self.e2b_port}"]
        self.proc = subprocess.Popen([runbox, "--state-dir", state_dir, *global_args, "serve",
                                      "--listen",
                                      f"127.0.0.1:{self.port}", "--max-running", "16",
                                      "--max-queue", "256", *extra, *serve_args],
                                     stdout=log or subprocess.DEVNULL,
                                     stderr=log or subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("runbox serve did not start")

    def connection(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def request(self, method, path, body=None, conn=None):
        own = conn is None
        conn = conn or self.connection()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=headers)
        response = conn.getresponse()
        data = response.read()
        if own:
            conn.close()
        return response.status, data

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def program_env(home):
    """The environment runbox gives a program, for the bare and bubblewrap variants too: what
    the bench itself runs with (NODE_EXTRA_CA_CERTS here, which costs node ~40 ms) must not
    count for one side only."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
            "TERM": "dumb", "TMPDIR": "/tmp", "USER": "runbox", "LOGNAME": "runbox",
            "SHELL": "/bin/bash", "PYTHONUNBUFFERED": "1"}


def execute(server, conn, body):
    """POST /v1/execute: (milliseconds, result); raises on anything but 200, so that a
    benchmark never times a failure."""
    start = time.perf_counter()
    status, raw = server.request("POST", "/v1/execute", body, conn=conn)
    elapsed = (time.perf_counter() - start) * 1000
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {raw[:200]}")
    return elapsed, json.loads(raw)


def execute_hi(server, conn, body):
    """execute() of a program that prints hi; raises on any other output."""
    elapsed, result = execute(server, conn, body)
    if result["output"] != "hi\n":
        raise RuntimeError(f"unexpected result: {json.dumps(result)[:300]}")
    return elapsed, result


# Every latency sample starts on a machine at rest. Whatever ran before it
# leaves the kernel work behind for a few tens of milliseconds (a network
# namespace and a cgroup are freed in the kernel's workers, with RCU grace
# periods that interrupt every CPU): measured back to back, each variant
# paid for the one before it (a pooled call after another pooled call took
# 8-9 ms instead of 5.5, whichever its network), which made the variant
# that happened to come second look slower. The throughput and burst
# figures keep that work in: there, nothing waits.
SETTLE_S = 0.05


def execute_over_http(server, conn, language, code, network, pooled_expected=None):
    start = time.perf_counter()
    status, body = server.request("POST", "/v1/execute", {"language": language, "code": code,
                                                          "network": network}, conn=conn)
    elapsed = (time.perf_counter() - start) * 1000
    if status != 200 or b'"output":"hi\\n"' not in body:
        raise RuntimeError(f"HTTP {status}: {body[:300]}")
    pooled = b'"pooled":true' in body
    if pooled_expected is not None and pooled != pooled_expected:
        raise RuntimeError(f"expected pooled={pooled_expected}: {body[:300]}")
    return elapsed, pooled


def pool_figures(server):
    text = server.request("GET", "/metrics")[1].decode()
    return {k: float(v) for k, v in re.findall(r"^(runbox_pool_\S+) (\S+)$", text, re.M)}


def wait_refilled(server, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        f = pool_figures(server)
        if f.get('runbox_pool_sandboxes{state="preparing"}', 0) == 0 and \
                f.get('runbox_pool_sandboxes{state="serving"}', 0) == 0:
            return
        time.sleep(0.002)


def server_cpu_ms(server):
    """utime + stime of the server and of the children it reaped (its sandboxes' inits, whose
    own counts include their programs), in ms."""
    fields = open(f"/proc/{server.proc.pid}/stat").read().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def run_concurrently(make_call, concurrency=8, seconds=4.0):
    """CONCURRENCY threads call for SECONDS what make_call() gave each (made in its thread: a
    connection of its own, say): (calls made, seconds taken)."""
    done = [0]
    lock = threading.Lock()
    stop = time.time() + seconds

    def worker():
        call = make_call()
        while time.time() < stop:
            call()
            with lock:
                done[0] += 1
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0], time.time() - start


def throughput(make_call, concurrency=8, seconds=4.0):
    """Calls per second (see run_concurrently)."""
    calls, elapsed = run_concurrently(make_call, concurrency, seconds)
    return round(calls / elapsed, 1)
