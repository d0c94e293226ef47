"""The cost of an execution (issue 31), every figure of its table from one run: the CLI's start
against /bin/true; a cold `runbox run` with nothing running and through a running daemon, network
off and on, against the bare program and bubblewrap; pooled one-offs through `runbox serve` with a
plain keep-alive http.client, network off and on; the wait of a network-on program's first frame
(runbox-net starts on it); CPU per execution against the namespaces' floor (bench/floor.c: one
spawn in the same fresh namespaces, nothing else); throughput at concurrency 8 against bare spawns
and against floor spawns (the ceiling the floor allows), the pooled figures and the floor's taken
in turn, ROUNDS times, each ratio the median of the rounds'; a stateful `print('hi')` against a bare
Jupyter kernel (ipykernel driven by jupyter_client; bench/jupyter_probe.py); and, as root, a cold
`runbox run` in a mount namespace with 2,000 more mounts against one with the host's own (a busy
container host has thousands: what grows with them is paid by every cold run). Latency variants
are interleaved, each sample after the machine settled (see common.SETTLE_S)."""
import json
import os
import resource
import statistics
import subprocess
import time

from common import (SETTLE_S, Server, execute_over_http, program_env, server_cpu_ms, summary,
                    throughput, timed, wait_refilled)

HERE = os.path.dirname(os.path.abspath(__file__))
JUPYTER_PYTHON = os.path.join(HERE, "..", "build", "jupyter-venv", "bin", "python")
ECHO = ["/bin/bash", "-c", "echo hi"]


# How many times the pooled CPU and throughput figures and the floor's are taken in turn.
ROUNDS = 3


def _floor_binary(work):
    path = os.path.join(work, "floor")
    subprocess.run(["cc", "-O2", "-o", path, os.path.join(HERE, "floor.c")], check=True)
    return path


def _children_cpu_ms(run, count):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(count):
        run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(((after.ru_utime - before.ru_utime) +
                  (after.ru_stime - before.ru_stime)) * 1000 / count, 2)


class Jupyter:
    """A bare Jupyter kernel behind bench/jupyter_probe.py, one `print('hi')` per call."""

    def __init__(self):
        self.proc = subprocess.Popen([JUPYTER_PYTHON, os.path.join(HERE, "jupyter_probe.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        if not json.loads(self.proc.stdout.readline() or "{}").get("ready"):
            raise RuntimeError("the Jupyter kernel did not start")

    def __call__(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["ms"]

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


# Two connections from one network-on program to the gateway (10.0.2.2: runbox-net itself, the
# egress policy opened to it), which answers "unreachable" at once since the host's loopback is off:
# the first waits for runbox-net to start on its frame, the second does not. No packet leaves the
# machine.
FIRST_FRAME = """import socket, time
def attempt():
    s = socket.socket(); s.settimeout(3)
    start = time.perf_counter(); s.connect_ex(('10.0.2.2', 9)); took = time.perf_counter() - start
    s.close(); return took * 1000
first, second = attempt(), attempt()
print(round(first - second, 3))
"""


def _first_frame_wait(runbox, env, runs):
    waits = []
    for _ in range(runs):
        time.sleep(SETTLE_S)
        out = subprocess.run([runbox, "run", "python", "--network", "-c", FIRST_FRAME],
                             env={**env, "RUNBOX_EGRESS_ALLOW": "10.0.2.0/24"},
                             capture_output=True, text=True, check=True).stdout
        waits.append(float(out))
    return summary(waits)


HOST_MOUNTS = 2000
# A mount namespace of its own, with count more tmpfs mounts (none: the host's own), held open
# by a sleeping shell; runs enter it with nsenter, so both variants pay the same nsenter.
HOLD_MOUNTS = ("mount --make-rprivate / && d=$(mktemp -d) && i=0 && "
               "while [ $i -lt $1 ]; do mkdir $d/m$i && mount -t tmpfs -o size=4k rbx $d/m$i "
               "&& i=$((i+1)); done && echo ready && exec sleep 3600")


def _host_mounts(runbox, env, runs):
    holders = {}
    try:
        for name, count in (("host_mounts", 0), ("host_plus_2000_mounts", HOST_MOUNTS)):
            proc = subprocess.Popen(["unshare", "-m", "sh", "-c", HOLD_MOUNTS, "sh", str(count)],
                                    stdout=subprocess.PIPE, text=True)
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"could not make {count} mounts in a mount namespace")
            holders[name] = proc
        cli = [runbox, "run", "bash", "-c", "echo hi", "--json", "--no-network"]
        variants = {name: (lambda pid=proc.pid: timed(["nsenter", "-m", "-t", str(pid), *cli],
                                                      env=env)[0])
                    for name, proc in holders.items()}
        lines = {name: len(open(f"/proc/{proc.pid}/mountinfo").readlines())
                 for name, proc in holders.items()}
        result = _interleaved(variants, runs)
        for name in result:
            result[name]["mount_table_lines"] = lines[name]
        return result
    finally:
        for proc in holders.values():
            proc.kill()
            proc.wait()


def _interleaved(variants, runs):
    for run in variants.values():  # warm-up, not counted
        run()
    samples = {name: [] for name in variants}
    for _ in range(runs):
        for name, run in variants.items():
            time.sleep(SETTLE_S)
            samples[name].append(run())
    return {name: summary(values) for name, values in samples.items()}


def run(runbox, work, runs, bwrap_command):
    floor = _floor_binary(work)
    env_bare = program_env(work)
    cold_env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": os.path.join(work, "cost-cold-state"),
                "RUNBOX_USE_DAEMON": "never"}
    daemon_env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": os.path.join(work, "cost-daemon-state"),
                  "RUNBOX_USE_DAEMON": "always"}
    cli = [runbox, "run", "bash", "-c", "echo hi", "--json"]
    server = Server(runbox, os.path.join(work, "cost-server-state"))
    conn = server.connection()
    jupyter = Jupyter() if os.path.exists(JUPYTER_PYTHON) else None
    results = {"jupyter": "ran" if jupyter else
               "skipped: no build/jupyter-venv (make bench-jupyter makes it)"}
    try:
        def pooled(network=False):
            elapsed, was_pooled = execute_over_http(server, conn, "bash", "echo hi", network)
            wait_refilled(server)
            return elapsed

        def stateful():
            start = time.perf_counter()
            status, body = server.request("POST", "/v1/execute", {
                "language": "python", "code": "print('hi')", "network": False,
                "session_id": "cost-stateful", "stateful": True}, conn=conn)
            if status != 200 or b'"output":"hi\\n"' not in body:
                raise RuntimeError(f"HTTP {status}: {body[:300]}")
            return (time.perf_counter() - start) * 1000

        variants = {
            "true": lambda: timed(["/bin/true"])[0],
            "runbox_version": lambda: timed([runbox, "--version"])[0],
            "bare": lambda: timed(ECHO, cwd=work, env=env_bare)[0],
            "bubblewrap": lambda: timed(bwrap_command(work, "/bin/bash", ["-c", "echo hi"]),
                                        env=env_bare)[0],
            "floor": lambda: timed([floor, *ECHO], env=env_bare)[0],
            "cold_network_off": lambda: timed(cli + ["--no-network"], env=cold_env)[0],
            "cold_network_on": lambda: timed(cli + ["--network"], env=cold_env)[0],
            "daemon_network_off": lambda: timed(cli + ["--no-network"], env=daemon_env)[0],
            "pooled_http": pooled,
            "pooled_http_network_on": lambda: pooled(True),
            "stateful_http": stateful,
        }
        if jupyter:
            variants["jupyter_kernel"] = jupyter
        latency = _interleaved(variants, runs)
        latency["first_frame_wait"] = _first_frame_wait(runbox, cold_env, runs)
        if os.geteuid() == 0:
            results["host_mounts"] = _host_mounts(runbox, cold_env, runs)
        cpu = {
            "bare": _children_cpu_ms(lambda: timed(ECHO, env=env_bare), 100),
            "cold_cli": _children_cpu_ms(lambda: timed(cli + ["--no-network"], env=cold_env),
                                         100),
        }

        def pooled_cpu(count=100):
            before = server_cpu_ms(server)
            for _ in range(count):
                execute_over_http(server, conn, "bash", "echo hi", False)
            wait_refilled(server)  # the refills are the executions' cost too
            return round((server_cpu_ms(server) - before) / count, 2)

        def http_worker():
            c = server.connection()
            return lambda: execute_over_http(server, c, "bash", "echo hi", False)

        def spawner(cmd):
            return lambda: lambda: subprocess.run(cmd, stdout=subprocess.DEVNULL, env=env_bare)
        # The pooled figures and the floor's taken in turn, ROUNDS times: the machine's speed
        # moves between minutes by more than a change does, and each round's ratio has both
        # sides at the same speed. The ratios are the rounds' medians.
        rounds = {"cpu_pooled": [], "cpu_floor": [], "rate_pooled": [], "rate_floor": [],
                  "rate_bare": []}
        for _ in range(ROUNDS):
            rounds["cpu_floor"].append(
                _children_cpu_ms(lambda: timed([floor, *ECHO], env=env_bare), 100))
            rounds["cpu_pooled"].append(pooled_cpu())
            rounds["rate_pooled"].append(throughput(http_worker))
            rounds["rate_floor"].append(throughput(spawner([floor, *ECHO])))
            rounds["rate_bare"].append(throughput(spawner(ECHO)))
        cpu["floor"] = statistics.median(rounds["cpu_floor"])
        cpu["pooled_http"] = statistics.median(rounds["cpu_pooled"])
        cpu["pooled_over_floor"] = round(statistics.median(
            p / f for p, f in zip(rounds["cpu_pooled"], rounds["cpu_floor"])), 3)
        rates = {
            "pooled_http": statistics.median(rounds["rate_pooled"]),
            "bare": statistics.median(rounds["rate_bare"]),
            "floor": statistics.median(rounds["rate_floor"]),
            "pooled_over_floor": round(statistics.median(
                p / f for p, f in zip(rounds["rate_pooled"], rounds["rate_floor"])), 3),
            "rounds": rounds,
        }
    finally:
        if jupyter:
            jupyter.stop()
        server.stop()
        # its daemon, asked to stop (the caller unmounts every *-state directory)
        subprocess.run([runbox, "--state-dir", daemon_env["RUNBOX_STATE_DIR"], "storage",
                        "unmount"], capture_output=True)
    results.update({"latency": latency, "cpu_ms": cpu, "throughput_c8": rates})
    return results


def rows(results):
    """Issue 31's table: (figure, measured, target, met)."""
    r = results.get("cost")
    if not r:
        return []
    lat, cpu, tp = r["latency"], r["cpu_ms"], r["throughput_c8"]
    med = {name: s["median_ms"] for name, s in lat.items()}
    # Runs before the rounds (results.json of earlier days) have the ratio of the medians.
    cpu_ratio = cpu.get("pooled_over_floor", cpu["pooled_http"] / cpu["floor"])
    tp_ratio = tp.get("pooled_over_floor", tp["pooled_http"] / tp["floor"])
    out = [
        ("`runbox --version` over `/bin/true`",
         f"+{round(med['runbox_version'] - med['true'], 2)} ms", "<= +0.3 ms",
         med["runbox_version"] - med["true"] <= 0.3),
        ("cold `runbox run bash --no-network` / bubblewrap, nothing running",
         f"{round(med['cold_network_off'] / med['bubblewrap'], 2)} x", "<= 0.8 x",
         med["cold_network_off"] / med["bubblewrap"] <= 0.8),
        ("the same through a running daemon / bubblewrap",
         f"{round(med['daemon_network_off'] / med['bubblewrap'], 2)} x", "<= 0.5 x",
         med["daemon_network_off"] / med["bubblewrap"] <= 0.5),
        ("pooled bash over HTTP, over bare bash (plain http.client)",
         f"+{round(med['pooled_http'] - med['bare'], 2)} ms", "<= +1 ms",
         med["pooled_http"] - med["bare"] <= 1),
        ("CPU per execution (pooled, server and sandboxes) / namespaces' floor",
         f"{round(cpu_ratio, 2)} x", "<= 1.5 x", cpu_ratio <= 1.5),
        ("throughput at 8 / the floor's ceiling (floor spawns at 8)",
         f"{round(tp_ratio, 2)}", ">= 0.67", tp_ratio >= 0.67),
        ("network on minus off, cold", f"{round(med['cold_network_on'] - med['cold_network_off'], 2)} ms",
         "<= 1 ms", med["cold_network_on"] - med["cold_network_off"] <= 1),
    ]
    if "pooled_http_network_on" in med:
        on_minus_off = med["pooled_http_network_on"] - med["pooled_http"]
        out.append(("network on minus off, pooled over HTTP", f"{round(on_minus_off, 2)} ms",
                    "<= 1 ms", on_minus_off <= 1))
    if "jupyter_kernel" in med:
        out.append(("stateful `print('hi')` p50 over HTTP / bare Jupyter kernel over ZeroMQ",
                    f"{round(med['stateful_http'] / med['jupyter_kernel'], 2)} x", "<= 1.0 x",
                    med["stateful_http"] / med["jupyter_kernel"] <= 1.0))
    return out


def targets(results):
    return [(f"{name} {target}", measured, met) for name, measured, target, met in rows(results)]


def markdown(results):
    r = results.get("cost")
    if not r:
        return []
    lines = ["", "## The cost of an execution (issue 31)", "",
             "Every figure from this one run; latency variants interleaved, each sample after the "
             "machine settled. `floor` is bench/floor.c: bash spawned in fresh namespaces of the "
             "sandbox's kinds (user, PID, mount, IPC, UTS, cgroup, network), nothing else. "
             f"Jupyter: {r['jupyter']}.", "",
             "| figure | measured | target | |", "|---|---|---|---|"]
    lines += [f"| {name} | {measured} | {target} | {'met' if met else 'missed'} |"
              for name, measured, target, met in rows(results)]
    lines += ["", "| variant | median ms | p90 | p99 |", "|---|---|---|---|"]
    lines += [f"| {name} | {s['median_ms']} | {s['p90_ms']} | {s['p99_ms']} |"
              for name, s in r["latency"].items()]
    cpu, tp = r["cpu_ms"], r["throughput_c8"]
    lines += ["", "CPU per `echo hi` (ms, user + system, its processes included): " +
              ", ".join(f"{k} {v}" for k, v in cpu.items()) + ". Throughput at concurrency 8 "
              "(executions/s): " + ", ".join(f"{k} {v}" for k, v in tp.items() if k != "rounds")
              + "."]
    if "rounds" in tp:
        lines += ["", f"Pooled and floor figures taken in turn, {len(tp['rounds']['rate_pooled'])} "
                  "rounds (the ratios are the medians of the rounds'): " +
                  "; ".join(f"{k} {v}" for k, v in tp["rounds"].items()) + "."]
    hm = r.get("host_mounts")
    if hm:
        few, many = hm["host_mounts"], hm["host_plus_2000_mounts"]
        lines += ["", f"A cold `runbox run` (through nsenter) in a mount namespace of "
                  f"{many['mount_table_lines']} mounts: {many['median_ms']} ms, against "
                  f"{few['median_ms']} ms in one of the host's {few['mount_table_lines']}: "
                  f"{round(many['median_ms'] / few['median_ms'], 3)} x."]
    return lines
