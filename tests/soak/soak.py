#!/usr/bin/python3
"""The soak: many executions through a long-lived runbox, each checked for its own output, then
nothing lost or mixed, and no growth in the server's descriptors, threads or memory, nor in the
host's mounts, loop devices, cgroups and processes.

    tests/soak/soak.py --runbox build/runbox --executions 10000     # make soak
    tests/soak/soak.py --executions 1000 --mcp-executions 300        # make soak-ci

HTTP: runbox serve at concurrency 8, mixed languages, one-off and session-bound executions
(--stateful mixes in stateful ones where the build has them). MCP: runbox mcp on stdio with
calls in flight at once. Prints a Markdown report and writes it as JSON (--out); exits 1 when an
execution was lost or mixed up, or a resource grew."""
import argparse
import concurrent.futures
import glob
import http.client
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

LANGUAGES = {
    "python": "import sys\nprint({token!r})\nsys.stdout.flush()",
    "javascript": "console.log({token!r})",
    "bash": "echo {token}",
}
# A session-bound execution also appends its token to the session's log, so that at the end
# each session's log holds exactly its executions' tokens: none lost, none from elsewhere.
SESSION_APPEND = {
    "python": "open('log.txt', 'a').write({token!r} + '\\n')",
    "javascript": "require('fs').appendFileSync('log.txt', {token!r} + '\\n')",
    "bash": "echo {token} >> log.txt",
}
SESSIONS = 16


# Starter threads (src/sandbox/starter.c) are kept for the next start, one per start that was
# ever in flight at once: their count follows the peak of concurrent starts, not the number of
# executions. They are counted apart, against that bound (the server's 8 concurrent requests
# plus the pool's and kernels' starts).
STARTERS_MAX = 16


def starter_threads(pid):
    count = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                count += f.read().strip() == "runbox-starter"
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return count


def process_figures(pid):
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    starters = starter_threads(pid)
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": int(status["Threads"]) - starters,
            "starters": starters,
            "rss_kb": int(status["VmRSS"].split()[0])}


def host_figures():
    with open("/proc/self/mountinfo") as f:
        mounts = sum(1 for _ in f)
    loops = sum(1 for d in glob.glob("/sys/block/loop*")
                if open(f"{d}/size").read().strip() != "0")
    cgroups = set()
    for parent in glob.glob("/sys/fs/cgroup/*/runbox") + ["/sys/fs/cgroup/runbox"]:
        if os.path.isdir(parent):
            cgroups |= {os.path.realpath(os.path.join(parent, d)) for d in os.listdir(parent)
                        if d.startswith("exec-")}
    sandboxed = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/status") as f:
                    uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
                sandboxed += 3000000 <= uid < 3002000
            except (OSError, StopIteration):
                pass
    return {"mounts": mounts, "loop_devices": loops, "cgroups": len(cgroups),
            "sandbox_processes": sandboxed}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    def __init__(self, runbox, state_dir, log):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [runbox, "--pool-idle", "1", "serve", "--listen", f"127.0.0.1:{self.port}",
             "--max-running", "8", "--max-queue", "256", "--state-dir", state_dir],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("runbox serve did not start")

    def settle_pool(self, seconds=60):
        """Waits until the pool of prepared sandboxes is back at rest (every shelf shrunk to
        its floor, nothing being made or served): its sandboxes' threads and descriptors are
        then the same number before and after the soak, and any other growth is a leak."""
        deadline, last, stable_since = time.time() + seconds, None, time.time()
        while time.time() < deadline:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
            conn.close()
            f = dict(re.findall(r"^(runbox_pool_\S+) (\S+)$", text, re.M))
            state = (f.get("runbox_pool_target"), f.get('runbox_pool_sandboxes{state="ready"}'),
                     f.get('runbox_pool_sandboxes{state="preparing"}'),
                     f.get('runbox_pool_sandboxes{state="serving"}'))
            at_rest = state[0] == state[1] and state[2] == state[3] == "0"
            if state != last or not at_rest:
                last, stable_since = state, time.time()
            elif time.time() - stable_since > 2.5:
                return
            time.sleep(0.2)
        raise RuntimeError(f"the pool did not come to rest: {last}")

    def execute(self, conn, body):
        conn.request("POST", "/v1/execute", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()


def plan(count, stateful):
    """The executions: (index, language, session or None, stateful, code, token)."""
    rng = random.Random(1234)
    items = []
    for i in range(count):
        language = rng.choice(sorted(LANGUAGES))
        session = f"soak-{rng.randrange(SESSIONS)}" if rng.random() < 0.5 else None
        is_stateful = bool(stateful and session and rng.random() < 0.5)
        token = f"tok{i}x{rng.randrange(1 << 30)}"
        code = LANGUAGES[language].format(token=token)
        if session:
            code = SESSION_APPEND[language].format(token=token) + "\n" + code
        items.append((i, language, session, is_stateful, code, token))
    return items


def run_http(args, state_dir, report):
    log = open(os.path.join(os.path.dirname(state_dir), "serve.log"), "wb")
    server = HttpServer(args.runbox, state_dir, log)
    items = plan(args.executions, args.stateful)
    local = threading.local()
    failures, latencies = [], []

    def one(item):
        index, language, session, stateful, code, token = item
        if not hasattr(local, "conn"):
            local.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        body = {"language": language, "code": code, "network": False, "timeout": 60}
        if session:
            body["session_id"] = session
        if stateful:
            body["stateful"] = True
        started = time.perf_counter()
        try:
            status, raw = server.execute(local.conn, body)
        except (OSError, http.client.HTTPException) as exc:
            local.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
            return index, f"{type(exc).__name__}: {exc}", None, session, token
        took = (time.perf_counter() - started) * 1000
        if status != 200:
            return index, f"HTTP {status}: {raw[:200]!r}", took, session, token
        result = json.loads(raw)
        if result["output"] != token + "\n" or not result["success"]:
            return index, f"output {result['output']!r} error {result['error'][-200:]!r}", took, \
                session, token
        return index, None, took, session, token

    warmup = min(200, len(items) // 10)
    appended = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for index, failure, took, session, token in pool.map(one, items[:warmup]):
            if session and failure is None:
                appended.setdefault(session, []).append(token)
            if failure:
                failures.append((index, failure))
        server.settle_pool()
        before = process_figures(server.proc.pid)
        host_before = host_figures()
        started = time.monotonic()
        for index, failure, took, session, token in pool.map(one, items[warmup:]):
            if session and failure is None:
                appended.setdefault(session, []).append(token)
            if failure:
                failures.append((index, failure))
            else:
                latencies.append(took)
        elapsed = time.monotonic() - started
    server.settle_pool()
    after = process_figures(server.proc.pid)
    # Every session's log holds its executions' tokens, each once, and nothing else.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    for session, tokens in appended.items():
        conn.request("GET", f"/v1/sessions/{session}/files/log.txt")
        response = conn.getresponse()
        logged = response.read().decode().split()
        if sorted(logged) != sorted(tokens):
            failures.append((session, f"log has {len(logged)} tokens, expected {len(tokens)}"))
        conn.request("DELETE", f"/v1/sessions/{session}")
        conn.getresponse().read()
    server.proc.terminate()
    code = server.proc.wait(120)
    time.sleep(0.5)
    host_after = host_figures()
    log.close()
    report["http"] = {
        "executions": len(items), "measured": len(items) - warmup,
        "failures": failures[:20], "failure_count": len(failures),
        "executions_per_s": round((len(items) - warmup) / elapsed, 1),
        "latency_ms": {"p50": round(statistics.median(latencies), 2),
                       "p95": round(quantile(latencies, 0.95), 2),
                       "p99": round(quantile(latencies, 0.99), 2)} if latencies else None,
        "server": {"before": before, "after": after},
        "host": {"before": host_before, "after": host_after},
        "exit_code": code,
    }


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_mcp(args, state_dir, report):
    env = dict(os.environ, RUNBOX_STATE_DIR=state_dir)
    # Without a pool: its figures are read mid-stream, when the pool's size is its demand's.
    proc = subprocess.Popen([args.runbox, "--pool", "0", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    replies = {}
    ready = threading.Condition()

    def reader():
        for line in proc.stdout:
            message = json.loads(line)
            if "id" in message:
                with ready:
                    replies[message["id"]] = message
                    ready.notify_all()

    threading.Thread(target=reader, daemon=True).start()

    def send(message):
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    def wait(ident):
        with ready:
            ready.wait_for(lambda: ident in replies, timeout=120)
            return replies.pop(ident, None)

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "soak", "version": "1"}}})
    wait(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = {"python": ("execute_python", "code"), "javascript": ("execute_javascript", "code"),
             "bash": ("execute_bash", "command")}
    items = plan(args.mcp_executions, False)
    failures = []
    warmup = min(50, len(items) // 10)
    before = None
    started = time.monotonic()
    for start in range(0, len(items), 8):  # eight calls in flight at a time
        if start >= warmup and before is None:
            before = process_figures(proc.pid)
            started = time.monotonic()
        batch = items[start:start + 8]
        for index, language, session, _, code, token in batch:
            name, argument = tools[language]
            arguments = {argument: code}
            if session:
                arguments["session_id"] = "mcp-" + session
            send({"jsonrpc": "2.0", "id": index + 1, "method": "tools/call",
                  "params": {"name": name, "arguments": arguments}})
        for index, _, _, _, _, token in batch:
            reply = wait(index + 1)
            output = reply and reply.get("result", {}).get("structuredContent", {}).get("output")
            if output != token + "\n":
                failures.append((index, repr(reply)[:200]))
    elapsed = time.monotonic() - started
    after = process_figures(proc.pid)
    proc.stdin.close()
    code = proc.wait(60)
    report["mcp"] = {"executions": len(items), "failures": failures[:20],
                     "failure_count": len(failures),
                     "executions_per_s": round((len(items) - warmup) / elapsed, 1),
                     "server": {"before": before, "after": after}, "exit_code": code}


# What may grow: the allocator keeps some memory, nothing else may grow at all.
RSS_SLACK_KB = 8192


def verdicts(report):
    problems = []
    for front in ("http", "mcp"):
        part = report.get(front)
        if not part:
            continue
        if part["failure_count"]:
            problems.append(f"{front}: {part['failure_count']} executions lost or mixed up: "
                            f"{part['failures'][:3]}")
        if part["exit_code"] != 0:
            problems.append(f"{front}: the server exited {part['exit_code']}")
        before, after = part["server"]["before"], part["server"]["after"]
        for key in ("fds", "threads"):
            if after[key] > before[key]:
                problems.append(f"{front}: {key} grew from {before[key]} to {after[key]}")
        if after["starters"] > STARTERS_MAX:
            problems.append(f"{front}: {after['starters']} starter threads, more than "
                            f"{STARTERS_MAX} starts can be in flight at once")
        if after["rss_kb"] > before["rss_kb"] + RSS_SLACK_KB:
            problems.append(f"{front}: RSS grew from {before['rss_kb']} to {after['rss_kb']} KiB")
    host = report.get("http", {}).get("host")
    if host:
        for key, value in host["after"].items():
            if value > host["before"][key]:
                problems.append(f"host: {key} grew from {host['before'][key]} to {value}")
    return problems


def markdown(report, problems):
    lines = ["| front end | executions | per second | p50 ms | p99 ms | fds | threads | starters "
             "| RSS KiB |",
             "|---|---:|---:|---:|---:|---|---|---|---|"]
    for front in ("http", "mcp"):
        part = report.get(front)
        if not part:
            continue
        b, a = part["server"]["before"], part["server"]["after"]
        latency = part.get("latency_ms") or {}
        lines.append(f"| {front} | {part['executions']} | {part['executions_per_s']} | "
                     f"{latency.get('p50', '')} | {latency.get('p99', '')} | "
                     f"{b['fds']} -> {a['fds']} | {b['threads']} -> {a['threads']} | "
                     f"{b['starters']} -> {a['starters']} | {b['rss_kb']} -> {a['rss_kb']} |")
    host = report.get("http", {}).get("host")
    if host:
        lines.append("")
        lines.append("| host | before | after |")
        lines.append("|---|---:|---:|")
        for key in host["before"]:
            lines.append(f"| {key} | {host['before'][key]} | {host['after'][key]} |")
    lines.append("")
    lines.append("verdict: " + ("; ".join(problems) if problems else "nothing lost or mixed, "
                                "nothing grew"))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--runbox", default=os.path.join(here, "..", "..", "build", "runbox"))
    parser.add_argument("--executions", type=int, default=10000)
    parser.add_argument("--mcp-executions", type=int, default=1000)
    parser.add_argument("--stateful", action="store_true",
                        help="mix stateful executions in (where the build has them)")
    parser.add_argument("--out", help="write the report as JSON here")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="runbox-soak-")
    report = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "executions": args.executions, "mcp_executions": args.mcp_executions}
    try:
        if args.executions:
            run_http(args, os.path.join(work, "http-state"), report)
        if args.mcp_executions:
            run_mcp(args, os.path.join(work, "mcp-state"), report)
    finally:
        for state in ("http-state", "mcp-state"):
            path = os.path.join(work, state)
            if os.path.isdir(path):
                subprocess.run([args.runbox, "--state-dir", path, "storage", "unmount"],
                               capture_output=True)
        subprocess.run(["rm", "-rf", work])
    problems = verdicts(report)
    report["problems"] = problems
    print(markdown(report, problems))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        # The same table beside it, for make bench to put into bench/RESULTS.md.
        with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
            f.write(f"`make soak`, {report['started']}: {args.executions} executions through "
                    f"`runbox serve` at concurrency 8 ({'stateless and stateful' if args.stateful else 'stateless'}, "
                    f"mixed languages, half in sessions), {args.mcp_executions} through `runbox mcp`; "
                    "each checked for its own output.\n\n" + markdown(report, problems) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
