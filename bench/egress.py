"""The egress policy (issue 16): what it costs a network-on execution. Two servers, one with
the default policy and one with `--egress-default open` (no rules at all), take network-on
`echo hi` executions in turn over HTTP keep-alive; the difference of their medians is the
policy's cost on the request's path. The trace's egress_us (rules installed, resolver
started, what was refused read back) is the work it adds, much of which overlaps the network
helper's own start."""
import os
import statistics

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
            "target_ms": TARGET_MS}


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
    return lines


def targets(results):
    r = results.get("egress")
    if not r:
        return []
    return [("egress policy's cost on a network-on execution <= 0.3 ms",
             f"{r['policy_cost_ms']} ms", r["policy_cost_ms"] <= TARGET_MS)]
