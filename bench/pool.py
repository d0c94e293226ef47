"""Prepared sandboxes (issue 15): one-off executions through `runbox serve` (HTTP keep-alive)
served by its pool, against the bare interpreter, bubblewrap and the same server with the pool
off (`--pool 0`, every execution a cold start), interleaved in one run. After each pooled call
the benchmark waits until the pool has made its replacement, so that making it does not land on
the next variant's timing; the throughput and burst figures count the refill instead (nothing
waits there). CPU per execution is the server's own and its sandboxes' (reaped by it), beside
the floor of creating and tearing down the same namespaces with nothing in them."""
import os
import resource
import statistics
import subprocess
import threading
import time

from common import (SETTLE_S, Server, execute_over_http, percentile, pool_figures, program_env,
                    run_concurrently, server_cpu_ms, summary, timed, wait_refilled)

BURST = 200


def _latency(pooled, cold, programs, bwrap_command, work, runs):
    results = {}
    conns = {"pooled": pooled.connection(), "cold": cold.connection()}
    for language, (interpreter, args, code) in programs.items():
        def pooled_run(network):
            elapsed, _ = execute_over_http(pooled, conns["pooled"], language, code, network, True)
            wait_refilled(pooled)
            return elapsed
        variants = {
            "bare": lambda: timed([interpreter, *args], cwd=work, env=program_env(work))[0],
            "bubblewrap": lambda: timed(bwrap_command(work, interpreter, args),
                                        env=program_env(work))[0],
            "cold_http": lambda: execute_over_http(cold, conns["cold"], language, code, False, False)[0],
            "pooled_http": lambda: pooled_run(False),
            "pooled_http_network_on": lambda: pooled_run(True),
        }
        # Warm-up: the shelves of this language grow to what sequential calls need.
        for network in (False, True):
            for _ in range(6):
                execute_over_http(pooled, conns["pooled"], language, code, network)
                wait_refilled(pooled)
        samples = {name: [] for name in variants}
        for _ in range(runs):
            for name, run in variants.items():
                time.sleep(SETTLE_S)
                samples[name].append(run())
        stats = {name: summary(values) for name, values in samples.items()}
        bare, bwrap = stats["bare"]["median_ms"], stats["bubblewrap"]["median_ms"]
        for s in stats.values():
            s["over_bare_ms"] = round(s["median_ms"] - bare, 2)
            s["ratio_to_bare"] = round(s["median_ms"] / bare, 2)
            s["ratio_to_bubblewrap"] = round(s["median_ms"] / bwrap, 2)
        results[language] = stats
    return results


def _throughput(server, seconds=5.0, concurrency=8):
    """echo hi at this concurrency: executions/s through the server (the pool's refill counted),
    and bare spawns of the same; CPU per execution of the server and its sandboxes."""
    def http_call():
        conn = server.connection()
        return lambda: execute_over_http(server, conn, "bash", "echo hi", False)

    def bare_call():
        return lambda: subprocess.run(["/bin/bash", "-c", "echo hi"], stdout=subprocess.DEVNULL,
                                      env=program_env("/tmp"))
    out = {}
    for kind, make_call in (("pooled_http", http_call), ("bare", bare_call)):
        cpu_before = server_cpu_ms(server)
        rusage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        calls, elapsed = run_concurrently(make_call, concurrency, seconds)
        if kind == "pooled_http":
            wait_refilled(server)  # the last refills are the throughput's too
            cpu = server_cpu_ms(server) - cpu_before
        else:
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = ((after.ru_utime - rusage_before.ru_utime) +
                   (after.ru_stime - rusage_before.ru_stime)) * 1000
        out[kind] = {"per_s": round(calls / elapsed, 1),
                     "cpu_ms_per_execution": round(cpu / calls, 2)}
    out["ratio"] = round(out["pooled_http"]["per_s"] / out["bare"]["per_s"], 3)
    return out


def _namespace_floor(runs=100):
    """CPU (ms) of creating and tearing down the namespaces a sandbox has (user, PID, mount,
    IPC, UTS, network, cgroup) around /bin/true, against /bin/true alone: util-linux's unshare,
    nothing mounted, no cgroup, no network helper."""
    cmds = {"true": ["/bin/true"],
            "namespaces": ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount",
                           "--ipc", "--uts", "--net", "--cgroup", "/bin/true"]}
    out = {}
    for name, cmd in cmds.items():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(runs):
            timed(cmd)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out[name] = round(((after.ru_utime - before.ru_utime) +
                           (after.ru_stime - before.ru_stime)) * 1000 / runs, 2)
    out["floor_ms"] = round(out["namespaces"] - out["true"], 2)
    return out


def _burst(server):
    """BURST requests released at once, each on its own connection: latency median and p99."""
    barrier = threading.Barrier(BURST)
    latencies, pooled = [], []
    lock = threading.Lock()

    def one():
        conn = server.connection()
        conn.connect()
        barrier.wait()
        elapsed, was_pooled = execute_over_http(server, conn, "bash", "echo hi", False)
        with lock:
            latencies.append(elapsed)
            pooled.append(was_pooled)
        conn.close()
    threads = [threading.Thread(target=one) for _ in range(BURST)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    median = statistics.median(latencies)
    return {"n": len(latencies), "median_ms": round(median, 2),
            "p99_ms": round(percentile(latencies, 99), 2),
            "p99_over_median": round(percentile(latencies, 99) / median, 2),
            "pooled": sum(pooled)}


def run(runbox, work, runs, programs, bwrap_command):
    pooled = Server(runbox, os.path.join(work, "pool-state"))
    cold = Server(runbox, os.path.join(work, "pool-cold-state"), global_args=("--pool", "0"))
    try:
        latency = _latency(pooled, cold, programs, bwrap_command, work, runs)
        throughput = _throughput(pooled)
        burst = _burst(pooled)
        figures = pool_figures(pooled)
    finally:
        pooled.stop()
        cold.stop()
    floor = _namespace_floor()
    # The best ratio any sandbox making fresh namespaces per execution could
    # reach here, were the server, HTTP and runbox's own work free: the
    # cores a bare spawn uses, against those plus the namespaces' floor.
    bare_cpu = throughput["bare"]["cpu_ms_per_execution"]
    throughput["ceiling_ratio"] = round(bare_cpu / (bare_cpu + floor["floor_ms"]), 3)
    return {"latency": latency, "throughput_c8": throughput, "burst": burst,
            "namespace_floor": floor,
            "idle_memory_bytes": figures.get("runbox_pool_idle_memory_bytes", 0)}


def markdown(results):
    r = results.get("pool")
    if not r:
        return []
    lines = ["", "## Prepared sandboxes (issue 15)", "",
             "One-off executions through `runbox serve` (HTTP keep-alive, network off unless "
             "said), interleaved in one run: the bare interpreter, bubblewrap, the server with "
             "its pool off (`cold_http`), and served by its pool (`pooled_http`).", "",
             "| runtime | variant | median ms | p90 | p99 | over bare | x bare | x bubblewrap |",
             "|---|---|---|---|---|---|---|---|"]
    for language, stats in r["latency"].items():
        for name, s in stats.items():
            lines.append(f"| {language} | {name} | {s['median_ms']} | {s['p90_ms']} | "
                         f"{s['p99_ms']} | {s['over_bare_ms']} | {s['ratio_to_bare']} | "
                         f"{s['ratio_to_bubblewrap']} |")
    t, b, f = r["throughput_c8"], r["burst"], r["namespace_floor"]
    lines += ["", f"Throughput of `echo hi` at concurrency 8: {t['pooled_http']['per_s']}/s through "
              f"the server (the pool's refill counted) against {t['bare']['per_s']}/s bare spawns, "
              f"ratio {t['ratio']}. CPU per execution: {t['pooled_http']['cpu_ms_per_execution']} ms "
              f"(the server and its sandboxes) against {t['bare']['cpu_ms_per_execution']} ms bare; "
              f"the floor of creating and tearing down the same namespaces with nothing in them "
              f"(`unshare` around /bin/true, minus /bin/true): {f['floor_ms']} ms. With CPU "
              f"the limit, no sandbox that makes fresh namespaces per execution can exceed "
              f"{t.get('ceiling_ratio')} x here (bare CPU / (bare CPU + that floor)), even with "
              f"the server, HTTP and runbox's own work free.",
              "", f"A burst of {b['n']} requests released at once: median {b['median_ms']} ms, "
              f"p99 {b['p99_ms']} ms ({b['p99_over_median']} x the median); {b['pooled']} were "
              f"served by prepared sandboxes, the rest started cold.",
              "", f"Idle pool memory after the run: {r['idle_memory_bytes'] / 1048576:.1f} MiB."]
    return lines


def targets(results):
    r = results.get("pool")
    if not r:
        return []
    lat = r["latency"]
    py, js, sh = lat["python"], lat["javascript"], lat["bash"]
    net = max(lat[l]["pooled_http_network_on"]["median_ms"] - lat[l]["pooled_http"]["median_ms"]
              for l in lat)
    return [
        ("pooled python `print('hi')` over HTTP <= 0.5 x bare python3",
         f"{py['pooled_http']['ratio_to_bare']} x", py["pooled_http"]["ratio_to_bare"] <= 0.5),
        ("pooled javascript `console.log('hi')` over HTTP <= 0.5 x bare node",
         f"{js['pooled_http']['ratio_to_bare']} x", js["pooled_http"]["ratio_to_bare"] <= 0.5),
        ("pooled, network on: within 1 ms of network off (worst language)",
         f"{round(net, 2)} ms", net <= 1.0),
        ("pooled bash `echo hi` over HTTP: <= 1 ms over bare",
         f"{sh['pooled_http']['over_bare_ms']} ms", sh["pooled_http"]["over_bare_ms"] <= 1.0),
        ("... and <= 0.5 x bubblewrap", f"{sh['pooled_http']['ratio_to_bubblewrap']} x",
         sh["pooled_http"]["ratio_to_bubblewrap"] <= 0.5),
        ("throughput at concurrency 8 >= 0.5 x bare spawns (refill counted)",
         f"{r['throughput_c8']['ratio']} x", r["throughput_c8"]["ratio"] >= 0.5),
        (f"p99 <= 3 x median under a burst of {BURST}",
         f"{r['burst']['p99_over_median']} x", r["burst"]["p99_over_median"] <= 3),
    ]
