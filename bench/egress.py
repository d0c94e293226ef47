"""The egress policy (issue 16): what it costs a network-on execution. Two servers, one with
the default policy and one with `--egress-default open` (no rules at all), take network-on
`echo hi` executions in turn over HTTP keep-alive; the difference of their medians is the
policy's cost on the request's path. The trace's egress_us (rules installed, resolver
started, what was refused read back) is the work it adds, much of which overlaps the network
helper's own start.

Its scale axis: how that cost grows with the host's network interfaces, which the policy
refuses to every sandbox (the host's own addresses). Two servers, each in a network namespace
made here, one with 3 interfaces and one with 601 (300 veth pairs, an address on each end),
take the same network-on executions in turn (bench/egress_probe.py in each)."""
import json
import os
import statistics
import subprocess
import sys
import time

from common import Server, execute_hi, summary

TARGET_MS = 0.3


def _call(server, conn, trace=False):
    body = {"language": "bash", "code": "echo hi", "network": True, "trace": trace}
    elapsed, result = execute_hi(server, conn, body)
    if not result["network"]:
        raise RuntimeError("the network was off: nothing of the policy was measured")
    return elapsed, result


def run(runbox, work, runs):
    policy = Server(runbox, os.path.join(work, "egress-policy-state"))
    open_ = Server(runbox, os.path.join(work, "egress-open-state"),
                   global_args=("--egress-default", "open"))
    try:
        conns = {"policy": policy.connection(), "open": open_.connection()}
        servers = {"policy": policy, "open": open_}
        for name in servers:  # warm-up, not counted
            _call(servers[name], conns[name])
        samples = {name: [] for name in servers}
        for i in range(runs):
            order = ("policy", "open") if i % 2 == 0 else ("open", "policy")
            for name in order:
                samples[name].append(_call(servers[name], conns[name])[0])
        egress_us = [_call(policy, conns["policy"], trace=True)[1]["trace"].get("egress_us", 0)
                     for _ in range(max(10, runs // 2))]
    finally:
        policy.stop()
        open_.stop()
    stats = {name: summary(values) for name, values in samples.items()}
    cost = round(stats["policy"]["median_ms"] - stats["open"]["median_ms"], 2)
    return {"network_on_http": stats,
            "policy_cost_ms": cost,
            "ratio": round(stats["policy"]["median_ms"] / stats["open"]["median_ms"], 3),
            "egress_work_us_median": int(statistics.median(egress_us)),
            "target_ms": TARGET_MS,
            "scale": scale(runbox, work, runs)}


HERE = os.path.dirname(os.path.abspath(__file__))
SCALE_PAIRS = {"few": 1, "many": 300}


def _namespace(name, pairs):
    """A network namespace with loopback up and `pairs` veth pairs, an address on each end."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    lines = ["link set lo up"]
    for i in range(pairs):
        a, b = f"rbxsa{i}", f"rbxsb{i}"
        lines += [f"link add {a} type veth peer name {b}",
                  f"addr add 10.{200 + i // 250}.{i % 250}.1/32 dev {a}",
                  f"addr add 10.{200 + i // 250}.{i % 250}.2/32 dev {b}",
                  f"link set {a} up", f"link set {b} up"]
    subprocess.run(["ip", "-n", name, "-batch", "-"], input="\n".join(lines) + "\n",
                   text=True, check=True, capture_output=True)
    # Each end's IPv6 link-local address is tentative for a second or two (duplicate address
    # detection), and its end is one of 1,200 address messages: the host's addresses are
    # listed again on each batch of them. A node's interfaces are measured settled.
    deadline = time.time() + 30
    while time.time() < deadline and subprocess.run(
            ["ip", "-n", name, "-6", "addr", "show", "tentative"],
            capture_output=True, text=True).stdout.strip():
        time.sleep(0.2)
    time.sleep(1)


def _interfaces(name):
    out = subprocess.run(["ip", "-n", name, "-o", "link"], capture_output=True, text=True)
    return len(out.stdout.splitlines())


def scale(runbox, work, runs):
    """The scale axis: {few, many: interfaces, latency summary, CPU per execution}."""
    if os.geteuid() != 0:
        return {"skipped": "network namespaces need root"}
    tag = os.getpid() % 100000
    names = {kind: f"rbxscale{kind}{tag}" for kind in SCALE_PAIRS}
    probes = {}
    try:
        for kind, pairs in SCALE_PAIRS.items():
            _namespace(names[kind], pairs)
            state = os.path.join(work, f"egress-{kind}-state")
            probes[kind] = subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{names[kind]}", sys.executable,
                 os.path.join(HERE, "egress_probe.py"), runbox, state],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE,
                env={**os.environ, "PYTHONPATH": HERE})
            if not json.loads(probes[kind].stdout.readline()).get("ready"):
                raise RuntimeError(f"the {kind} probe did not start")

        def one(kind):
            probes[kind].stdin.write("go\n")
            probes[kind].stdin.flush()
            line = probes[kind].stdout.readline()
            if not line:
                raise RuntimeError(f"the {kind} probe ended")
            return json.loads(line)
        for kind in probes:  # warm-up: the resolver, the pool's shelves
            for _ in range(5):
                one(kind)
        samples = {kind: [] for kind in probes}
        for i in range(runs):
            for kind in (("few", "many") if i % 2 == 0 else ("many", "few")):
                samples[kind].append(one(kind))
        result = {}
        for kind, values in samples.items():
            result[kind] = {"interfaces": _interfaces(names[kind]),
                            **summary([v["ms"] for v in values]),
                            # the CPU clock ticks in 10 ms: a mean over all samples, not a median
                            "cpu_ms_per_execution": round(
                                sum(v["cpu_ms"] for v in values) / len(values), 2)}
        for kind in probes:  # the host's addresses changing: 200 changes
            probes[kind].stdin.write("churn\n")
            probes[kind].stdin.flush()
            result[kind]["churn_cpu_ms_per_change"] = round(
                json.loads(probes[kind].stdout.readline())["cpu_ms"] / 200, 3)
        result["latency_ratio"] = round(result["many"]["median_ms"] / result["few"]["median_ms"],
                                        2)
        result["cpu_ratio"] = round(result["many"]["cpu_ms_per_execution"]
                                    / max(result["few"]["cpu_ms_per_execution"], 0.01), 2)
        return result
    finally:
        for probe in probes.values():
            try:
                probe.communicate("stop\n", timeout=60)
            except subprocess.TimeoutExpired:
                probe.kill()
        for name in names.values():
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def markdown(results):
    r = results.get("egress")
    if not r:
        return []
    lines = ["", "## Egress policy (issue 16)", "",
             "Network-on `echo hi` over HTTP keep-alive, interleaved between a server with the "
             "default policy and one with `--egress-default open` (no rules).", "",
             "| server | median ms | p90 ms |", "|---|---|---|"]
    for name, s in r["network_on_http"].items():
        lines.append(f"| {name} | {s['median_ms']} | {s['p90_ms']} |")
    lines += ["", f"Policy cost on the request's path: {r['policy_cost_ms']} ms "
              f"(ratio {r['ratio']}; target <= {r['target_ms']} ms). The work it adds "
              f"(trace egress_us: rules installed, resolver started, refusals read back): "
              f"{r['egress_work_us_median']} us median, mostly while the network helper "
              f"starts."]
    sc = r.get("scale")
    if sc and "skipped" in sc:
        lines += ["", f"As the host's interfaces grow: not measured ({sc['skipped']})."]
    elif sc:
        lines += ["", "As the host's interfaces grow (each the server's network namespace, made "
                  "by the bench; the policy refuses every address of the host to every sandbox): "
                  "network-on `echo hi` over HTTP keep-alive, each served by a prepared sandbox, "
                  "interleaved; CPU is the server's and its sandboxes', making the next prepared "
                  "sandbox included, a mean over all samples.", "",
                  "| interfaces | median ms | p90 ms | CPU ms per execution | CPU ms per address "
                  "change |", "|---|---|---|---|---|"]
        for kind in ("few", "many"):
            s = sc[kind]
            lines.append(f"| {s['interfaces']} | {s['median_ms']} | {s['p90_ms']} | "
                         f"{s['cpu_ms_per_execution']} | {s.get('churn_cpu_ms_per_change', '')} |")
        lines += ["", "An address change is one of 100 addresses added to the namespace's "
                  "loopback and removed again while a prepared sandbox waits (a node's "
                  "containers coming and going): the server's CPU over that time, per change."]
        lines += ["", f"{sc['many']['interfaces']} interfaces over {sc['few']['interfaces']}: "
                  f"latency {sc['latency_ratio']} x, CPU {sc['cpu_ratio']} x."]
    return lines


def targets(results):
    r = results.get("egress")
    if not r:
        return []
    return [("egress policy's cost on a network-on execution <= 0.3 ms",
             f"{r['policy_cost_ms']} ms", r["policy_cost_ms"] <= TARGET_MS)]
