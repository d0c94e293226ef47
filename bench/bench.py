#!/usr/bin/python3
"""runbox's benchmark: runbox against bare interpreters and bubblewrap, side by side.

Every latency figure comes from one run in which the variants are interleaved (A B C A B C ...),
so drift on a noisy machine hits all of them alike; results are reported as medians, p90 and p99
and as ratios to the bare interpreter and to bubblewrap.

    make bench                       # builds runbox optimized, runs everything, writes the results
    bench/bench.py --runbox build-bench/runbox --runs 40 --out bench
"""
import argparse
import datetime
import glob
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import cost
import e2b
import egress
import hibernation
import images
import pool
import sessions_scale
import stateful
from common import Server, percentile, program_env, summary, timed
from common import throughput as common_throughput

PROGRAMS = {
    "python": ("/usr/bin/python3", ["-c", "print('hi')"], "print('hi')"),
    "javascript": ("/usr/bin/node", ["-e", "console.log('hi')"], "console.log('hi')"),
    "bash": ("/bin/bash", ["-c", "echo hi"], "echo hi"),
}


def bwrap_command(work, interpreter, args):
    cmd = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--unshare-net", "--die-with-parent", "--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink("/" + link):
            cmd += ["--symlink", os.readlink("/" + link), "/" + link]
    cmd += ["--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--bind", work, "/home/user", "--chdir", "/home/user", "--setenv", "HOME",
            "/home/user", "--", interpreter, *args]
    return cmd


def latency(runbox, runs, server, work):
    """Interleaved single-execution latency, per runtime and variant."""
    results = {}
    env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": os.path.join(work, "state")}
    for language, (interpreter, args, code) in PROGRAMS.items():
        variants = {
            "bare": lambda: timed([interpreter, *args], cwd=work, env=program_env(work)),
            "bubblewrap": lambda: timed(bwrap_command(work, interpreter, args),
                                        env=program_env(work)),
            "runbox_network_off": lambda: timed([runbox, "run", language, "-c", code, "--json",
                                                 "--no-network"], env=env),
            "runbox_network_on": lambda: timed([runbox, "run", language, "-c", code, "--json",
                                                "--network"], env=env),
        }
        if server:
            conn = server.connection()

            def http_run(conn=conn, language=language, code=code, network=False):
                start = time.perf_counter()
                status, body = server.request("POST", "/v1/execute",
                                              {"language": language, "code": code,
                                               "network": network}, conn=conn)
                elapsed = (time.perf_counter() - start) * 1000
                if status != 200:
                    raise RuntimeError(f"HTTP {status}: {body[:200]}")
                return elapsed, body
            variants["runbox_http"] = http_run
            variants["runbox_http_network_on"] = lambda: http_run(network=True)
        samples = {name: [] for name in variants}
        for name, run in variants.items():  # warm-up, not counted
            run()
        for _ in range(runs):
            for name, run in variants.items():
                samples[name].append(run()[0])
        stats = {name: summary(values) for name, values in samples.items()}
        bare, bwrap = stats["bare"]["median_ms"], stats["bubblewrap"]["median_ms"]
        for name, s in stats.items():
            s["over_bare_ms"] = round(s["median_ms"] - bare, 2)
            s["ratio_to_bare"] = round(s["median_ms"] / bare, 2)
            s["ratio_to_bubblewrap"] = round(s["median_ms"] / bwrap, 2)
        results[language] = stats
    return results


def trace(runbox, work, runs=15):
    """Median of each phase of RUNBOX_TRACE=1, for echo hi with the network off."""
    env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": os.path.join(work, "state"),
           "RUNBOX_TRACE": "1"}
    phases = {}
    for _ in range(runs):
        out = timed([runbox, "run", "bash", "-c", "echo hi", "--json", "--no-network"], env=env)[1]
        for name, us in json.loads(out)["trace"].items():
            phases.setdefault(name, []).append(us)
    return {name: int(statistics.median(values)) for name, values in phases.items()}


def front_end_overhead(runbox, server, work, runs=30):
    """What each front end adds over the engine's own time: the latency a client sees minus the
    trace's total (rbx_execute from entry to return), per execution, interleaved."""
    env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": os.path.join(work, "state"),
           "RUNBOX_TRACE": "1"}
    conn = server.connection()

    def cli():
        elapsed, out = timed([runbox, "run", "bash", "-c", "echo hi", "--json", "--no-network"],
                             env=env)
        return elapsed, json.loads(out)

    def http():
        start = time.perf_counter()
        status, body = server.request("POST", "/v1/execute",
                                      {"language": "bash", "code": "echo hi", "network": False,
                                       "trace": True}, conn=conn)
        elapsed = (time.perf_counter() - start) * 1000
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {body[:200]}")
        return elapsed, json.loads(body)
    samples = {"cli": [], "http": []}
    engine = {"cli": [], "http": []}
    for _ in range(runs):
        for name, run in (("cli", cli), ("http", http)):
            elapsed, result = run()
            engine[name].append(result["trace"]["total_us"] / 1000)
            samples[name].append(elapsed - result["trace"]["total_us"] / 1000)
    return {name: {"engine_median_ms": round(statistics.median(engine[name]), 2),
                   "over_engine_median_ms": round(statistics.median(values), 2),
                   "over_engine_p90_ms": round(percentile(values, 90), 2)}
            for name, values in samples.items()}


def process_start(runbox, runs=200):
    """What starting the runbox program costs before it does anything: `runbox --version`
    against /bin/true, interleaved (median ms, fork and wait from here included)."""
    samples = {"true": [], "runbox_version": []}
    for _ in range(runs):
        samples["true"].append(timed(["/bin/true"])[0])
        samples["runbox_version"].append(timed([runbox, "--version"])[0])
    return {name: round(statistics.median(values), 2) for name, values in samples.items()}


def cpu_per_execution(runbox, work, runs=100):
    """CPU time (user and system, ms) that one `echo hi` costs the machine, the sandbox's
    processes included: what bounds throughput once the cores are busy. Measured from
    RUSAGE_CHILDREN around runs of each variant (each waits for its own children). The kernel
    splits user and system time by sampling; their sum is the figure to compare."""
    env = program_env(work)
    variants = {
        "bare": ["/bin/bash", "-c", "echo hi"],
        "bubblewrap": bwrap_command(work, "/bin/bash", ["-c", "echo hi"]),
        "runbox_network_off": [runbox, "run", "bash", "-c", "echo hi", "--json", "--no-network"],
    }
    runbox_env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": os.path.join(work, "state")}
    results = {}
    for name, cmd in variants.items():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(runs):
            timed(cmd, env=runbox_env if name.startswith("runbox") else env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        results[name] = {"user_ms": round((after.ru_utime - before.ru_utime) * 1000 / runs, 2),
                         "system_ms": round((after.ru_stime - before.ru_stime) * 1000 / runs, 2)}
    return results


def throughput(server, seconds=4.0):
    """Executions per second through runbox serve, and bare spawns, at each concurrency."""
    def http_call():
        conn = server.connection()

        def call():
            status, _ = server.request("POST", "/v1/execute", {"language": "bash", "code": "echo hi",
                                                               "network": False}, conn=conn)
            assert status == 200
        return call

    def bare_call():
        return lambda: subprocess.run(["/bin/bash", "-c", "echo hi"], stdout=subprocess.DEVNULL,
                                      env=program_env("/tmp"))
    results = {}
    for concurrency in (1, 2, 4, 8):
        row = results.setdefault(str(concurrency), {})
        for kind, make_call in (("runbox_http", http_call), ("bare", bare_call)):
            row[kind] = common_throughput(make_call, concurrency, seconds)
        row["ratio"] = round(row["runbox_http"] / row["bare"], 3)
    return results


# Prints exactly SIZE bytes of text lines in 1 MiB writes, so that the producer is not what
# limits the rate (`yes | head -c` tops out near 1 GiB/s in a pipeline of its own).
PRODUCER = """import sys
size = {size}
chunk = b"a line of output\\n" * 61681
write = sys.stdout.buffer.write
done = 0
while done < size:
    n = min(len(chunk), size - done)
    write(chunk[:n])
    done += n
"""


def drain(cmd, env=None, keep=False):
    """Runs cmd, reading its stdout in 1 MiB reads; returns (seconds, bytes, peak RSS in KiB of
    the process itself, sampled from /proc while it runs, and with keep the output)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    peak = [0]

    def sample():  # the process's high-water mark, read until it exits
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak[0] = max(peak[0], int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.005)
    sampler = threading.Thread(target=sample)
    sampler.start()
    chunks = []
    total = 0
    while True:
        data = os.read(proc.stdout.fileno(), 1 << 20)
        if not data:
            break
        total += len(data)
        if keep:
            chunks.append(data)
    proc.wait()
    sampler.join()
    return time.perf_counter() - start, total, peak[0], b"".join(chunks)


def output_drain(runbox, work, gib=1):
    """A program that prints 1 GiB: the rate through runbox (which keeps head and tail within
    its cap and counts the rest) and runbox's peak RSS."""
    env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": os.path.join(work, "state")}
    size = gib << 30
    code = PRODUCER.format(size=size)
    seconds, _, peak, out = drain([runbox, "run", "python", "-c", code, "--json",
                                   "--no-network", "--timeout", "300"], env=env, keep=True)
    result = json.loads(out)
    assert result["truncated"]["stdout"] + (1 << 20) == size, result["truncated"]
    return {"bytes": size, "seconds": round(seconds, 2),
            "gib_per_s": round(size / seconds / (1 << 30), 2),
            "runbox_peak_rss_kb": peak, "output_cap_bytes": 1 << 20}


def dependencies(runbox, work, runs=30):
    env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": os.path.join(work, "state"),
           "PIP_NO_INDEX": "1"}
    base = [runbox, "run", "python", "-c", "print('hi')", "--json", "--no-network"]
    timed(base + ["--require", "numpy"], env=env)  # install once
    samples = {"no_requirements": [], "cached_environment": []}
    for _ in range(runs):
        samples["no_requirements"].append(timed(base, env=env)[0])
        samples["cached_environment"].append(timed(base + ["--require", "numpy"], env=env)[0])
    stats = {name: summary(values) for name, values in samples.items()}
    stats["cached_over_none_ms"] = round(stats["cached_environment"]["median_ms"] -
                                         stats["no_requirements"]["median_ms"], 2)
    return stats


def server_memory(server):
    idle = server.rss_kb()
    created = []
    for _ in range(100):
        status, body = server.request("POST", "/v1/sessions", {})
        created.append(json.loads(body)["session_id"])
    with_sessions = server.rss_kb()
    for sid in created:
        server.request("DELETE", f"/v1/sessions/{sid}")
    return {"idle_rss_kb": idle, "with_100_sessions_rss_kb": with_sessions}


def machine():
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "kernel": platform.release(), "cpus": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
            "root": os.geteuid() == 0,
            "load_before": os.getloadavg()[0]}


def targets(results):
    """Issue 8's first performance targets against this run: (target, measured, met)."""
    rows = []
    bash = results.get("latency", {}).get("bash")
    if bash:
        off, on = bash["runbox_network_off"], bash["runbox_network_on"]
        rows.append(("bash `echo hi`, network off: runbox - bare <= 3 ms",
                     f"{off['over_bare_ms']} ms", off["over_bare_ms"] <= 3))
        rows.append(("... and runbox <= 0.6 x bubblewrap", f"{off['ratio_to_bubblewrap']} x",
                     off["ratio_to_bubblewrap"] <= 0.6))
        rows.append(("network on: runbox - bare <= 5 ms", f"{on['over_bare_ms']} ms",
                     on["over_bare_ms"] <= 5))
    if "overhead" in results:
        http = results["overhead"]["http"]["over_engine_median_ms"]
        rows.append(("the HTTP path adds <= 1 ms over the engine's own time", f"{http} ms",
                     http <= 1))
    if "throughput" in results:
        ratio = results["throughput"]["2"]["ratio"]
        rows.append(("throughput at concurrency 2 >= 0.9 x bare spawns", f"{ratio} x", ratio >= 0.9))
    if "output" in results:
        o = results["output"]
        cap_kb = 2 * o["output_cap_bytes"] // 1024 + 16 * 1024
        rows.append(("output drained >= 1 GiB/s", f"{o['gib_per_s']} GiB/s", o["gib_per_s"] >= 1))
        rows.append(("... with runbox's RSS < 2 x the cap + 16 MiB", f"{o['runbox_peak_rss_kb']} KiB",
                     o["runbox_peak_rss_kb"] < cap_kb))
    if "dependencies" in results:
        extra = results["dependencies"]["cached_over_none_ms"]
        rows.append(("a cached environment adds <= 2 ms", f"{extra} ms", extra <= 2))
    if "server_memory" in results:
        idle = results["server_memory"]["idle_rss_kb"]
        rows.append(("server RSS idle <= 10 MiB", f"{idle} KiB", idle <= 10 * 1024))
    return rows + stateful.targets(results) + sessions_scale.targets(results) + \
        egress.targets(results) + pool.targets(results) + cost.targets(results) + \
        hibernation.targets(results)


def recorded(out_dir):
    """The figures of `make soak` and `make fuzz` (issue 12), which take too long to run with
    every benchmark: their latest tables, as those targets left them in bench/out."""
    lines = []
    for name, title in (("soak.md", "Soak"), ("fuzz.md", "Fuzzing (libFuzzer, ASan and UBSan)")):
        path = os.path.join(out_dir, "out", name)
        if os.path.exists(path):
            with open(path) as f:
                lines += ["", f"## {title}", "", f.read().rstrip()]
    return lines


def write_markdown(results, path, command):
    m = results["machine"]
    lines = ["# runbox benchmark results", "",
             f"Measured {m['date']} on {m['cpus']} cores, {m['memory_gib']} GiB, Linux "
             f"{m['kernel']}, as {'root' if m['root'] else 'an unprivileged user'}; load average "
             f"{m['load_before']:.2f} before the run.", "", f"Command: `{command}`", "",
             ]
    rows = targets(results)
    if rows:
        lines += ["## Targets (medians, this run)", "", "| target | measured | |", "|---|---|---|"]
        lines += [f"| {name} | {value} | {'met' if met else 'missed'} |" for name, value, met in rows]
        lines += [""]
    if "latency" in results:
        lines += ["## Latency of one execution (ms, interleaved in one run)", "",
                  "| runtime | variant | median | p90 | p99 | over bare | x bare | x bubblewrap |",
                  "|---|---|---|---|---|---|---|---|"]
    for language, stats in results.get("latency", {}).items():
        for name, s in stats.items():
            lines.append(f"| {language} | {name} | {s['median_ms']} | {s['p90_ms']} | "
                         f"{s['p99_ms']} | {s['over_bare_ms']} | {s['ratio_to_bare']} | "
                         f"{s['ratio_to_bubblewrap']} |")
    if "trace" in results:
        lines += ["", "## Phase trace (`RUNBOX_TRACE=1`, bash `echo hi`, network off, medians in "
                  "µs)", "", "| " + " | ".join(results["trace"]) + " |",
                  "|" + "---|" * len(results["trace"]),
                  "| " + " | ".join(str(v) for v in results["trace"].values()) + " |"]
    if "overhead" in results:
        lines += ["", "## What a front end adds over the engine (bash `echo hi`, network off, ms)",
                  "", "The latency a client sees minus the engine's own time (the trace's "
                  "`total_us`, rbx_execute from entry to return), per execution.", "",
                  "| front end | engine median | added, median | added, p90 |", "|---|---|---|---|"]
        for name, row in results["overhead"].items():
            label = {"cli": "`runbox run --json`", "http": "`runbox serve`, keep-alive"}[name]
            lines.append(f"| {label} | {row['engine_median_ms']} | "
                         f"{row['over_engine_median_ms']} | {row['over_engine_p90_ms']} |")
    if "startup" in results:
        st = results["startup"]
        lines += ["", "## Starting the program", "",
                  f"`runbox --version`: {st['runbox_version']} ms; `/bin/true`: {st['true']} ms "
                  "(medians, interleaved, fork and wait included)."]
    if "cpu" in results:
        lines += ["", "## CPU per execution (bash `echo hi`, ms, sandbox processes included)", "",
                  "| variant | user | system |", "|---|---|---|"]
        for name, row in results["cpu"].items():
            lines.append(f"| {name} | {row['user_ms']} | {row['system_ms']} |")
    if "throughput" in results:
        lines += ["", "## Throughput through `runbox serve` (executions/s, bash `echo hi`)", "",
                  "| concurrency | runbox serve | bare spawns | ratio |", "|---|---|---|---|"]
        for c, row in results["throughput"].items():
            lines.append(f"| {c} | {row['runbox_http']} | {row['bare']} | {row['ratio']} |")
    o = results.get("output")
    lines += [] if not o else ["", "## Output", "",
              f"A Python program printing {o['bytes'] >> 30} GiB of text lines in 1 MiB writes: "
              f"drained through `runbox run --json` at {o['gib_per_s']} GiB/s ({o['seconds']} s, "
              f"Python's start included); runbox's peak RSS {o['runbox_peak_rss_kb']} KiB with a "
              f"{o['output_cap_bytes'] >> 20} MiB cap per stream."]
    d = results.get("dependencies")
    lines += [] if not d else ["", "## Dependencies (python `print('hi')`)", "",
              f"No requirements: {d['no_requirements']['median_ms']} ms; with a cached "
              f"environment (`--require numpy`): {d['cached_environment']['median_ms']} ms; "
              f"difference {d['cached_over_none_ms']} ms."]
    if "server_memory" in results:
        s = results["server_memory"]
        lines += ["", "## Server memory", "",
                  f"Idle: {s['idle_rss_kb']} KiB RSS; with 100 idle sessions: "
                  f"{s['with_100_sessions_rss_kb']} KiB."]
    lines += stateful.markdown(results)
    lines += sessions_scale.markdown(results)
    lines += e2b.markdown(results)
    lines += egress.markdown(results)
    lines += pool.markdown(results)
    lines += images.markdown(results)
    lines += cost.markdown(results)
    lines += recorded(os.path.dirname(path))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


SECTIONS = ("latency", "trace", "overhead", "startup", "cpu", "throughput", "memory", "output",
            "dependencies", "stateful", "sessions", "e2b", "egress", "pool", "images", "cost",
            "hibernation")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runbox", default="build-bench/runbox")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--out", default="bench")
    parser.add_argument("--only", help="comma-separated sections: " + ",".join(SECTIONS))
    args = parser.parse_args()
    runbox = os.path.abspath(args.runbox)
    if not shutil.which("bwrap"):
        sys.exit("bench: bubblewrap is missing (apt-get install bubblewrap)")
    results = {"machine": machine()}
    wanted = set(args.only.split(",")) if args.only else set(SECTIONS)
    with tempfile.TemporaryDirectory(prefix="runbox-bench-") as work:
        os.chmod(work, 0o755)
        server = None
        help_text = subprocess.run([runbox, "serve", "--help"], capture_output=True).stdout
        if b"usage" in help_text:
            server_state = os.path.join(work, "server-state")
            server = Server(runbox, server_state)
        try:
            if "latency" in wanted:
                results["latency"] = latency(runbox, args.runs, server, work)
            if "trace" in wanted:
                results["trace"] = trace(runbox, work)
            if server and "overhead" in wanted:
                results["overhead"] = front_end_overhead(runbox, server, work)
            if "startup" in wanted:
                results["startup"] = process_start(runbox)
            if "cpu" in wanted:
                results["cpu"] = cpu_per_execution(runbox, work)
            if server and "throughput" in wanted:
                results["throughput"] = throughput(server)
            if server and "memory" in wanted:
                results["server_memory"] = server_memory(server)
            if "output" in wanted:
                results["output"] = output_drain(runbox, work)
            if "dependencies" in wanted:
                results["dependencies"] = dependencies(runbox, work)
            if server and "stateful" in wanted:
                results["stateful"] = stateful.run(server, server_state, work, args.runs)
            if "e2b" in wanted:
                results["e2b"] = e2b.run(runbox, work, args.runs)
            if "egress" in wanted:
                results["egress"] = egress.run(runbox, work, args.runs)
            if "pool" in wanted:
                results["pool"] = pool.run(runbox, work, args.runs, PROGRAMS, bwrap_command)
            if "images" in wanted:
                results["images"] = images.run(runbox, work, args.runs)
            if "cost" in wanted:
                results["cost"] = cost.run(runbox, work, args.runs, bwrap_command)
            if "hibernation" in wanted:
                results["hibernation"] = hibernation.run(runbox, work, args.runs)
            if "sessions" in wanted:
                scale = sessions_scale.run(runbox, work, args.runs)
                if scale:
                    results["sessions_scale"] = scale
        finally:
            if server:
                server.stop()
            # As root each state directory's storage is a mounted image: unmount before the
            # temporary directory goes.
            for state in glob.glob(os.path.join(work, "*state")):
                subprocess.run([runbox, "--state-dir", state, "storage", "unmount"],
                               capture_output=True)
    results["targets"] = [{"target": name, "measured": value, "met": met}
                          for name, value, met in targets(results)]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    command = "make bench" if args.out == "bench" else " ".join(sys.argv)
    write_markdown(results, os.path.join(args.out, "RESULTS.md"), command)
    print(open(os.path.join(args.out, "RESULTS.md")).read())


if __name__ == "__main__":
    main()
