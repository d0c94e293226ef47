"""Stateful sessions (issue 14): a call into a session's live kernel against a one-off run and
the bare interpreter, over HTTP keep-alive; throughput across 8 sessions; what an idle kernel
costs the host (PSS)."""
import json
import os
import threading
import time

from common import execute_hi, program_env, summary, timed

PROGRAMS = {
    "python": (["/usr/bin/python3", "-c", "print('hi')"], "print('hi')"),
    "javascript": (["/usr/bin/node", "-e", "console.log('hi')"], "console.log('hi')"),
    "bash": (["/bin/bash", "-c", "echo hi"], "echo hi"),
}


def _call(server, conn, body):
    return execute_hi(server, conn, body)


def latency(server, work, runs):
    """Per language, interleaved: the bare interpreter, a one-off run through the server, and
    a stateful call into the session's kernel (the same keep-alive connection)."""
    results = {}
    conn = server.connection()
    for language, (argv, code) in PROGRAMS.items():
        session = f"bench-{language}"
        variants = {
            "bare": lambda: timed(argv, cwd=work, env=program_env(work)),
            "runbox_http_one_off": lambda: _call(server, conn, {
                "language": language, "code": code, "network": False}),
            "runbox_http_stateful": lambda: _call(server, conn, {
                "language": language, "code": code, "network": False,
                "session_id": session, "stateful": True}),
        }
        samples = {name: [] for name in variants}
        for run in variants.values():  # warm-up (starts the kernel), not counted
            run()
        for _ in range(runs):
            for name, run in variants.items():
                samples[name].append(run()[0])
        stats = {name: summary(values) for name, values in samples.items()}
        bare = stats["bare"]["median_ms"]
        one_off = stats["runbox_http_one_off"]["median_ms"]
        for s in stats.values():
            s["ratio_to_bare"] = round(s["median_ms"] / bare, 3)
            s["ratio_to_one_off"] = round(s["median_ms"] / one_off, 3)
        results[language] = stats
    return results


def throughput(server, seconds=5.0, sessions=8):
    """Stateful print('hi') per second through the server, one keep-alive connection and one
    session per client thread; one-off runs the same way, for the ratio."""
    results = {}
    for kind in ("stateful", "one_off"):
        done = [0]
        lock = threading.Lock()
        errors = []

        def worker(n):
            conn = server.connection()
            body = {"language": "python", "code": "print('hi')", "network": False}
            if kind == "stateful":
                body.update(session_id=f"bench-tp-{n}", stateful=True)
                _call(server, conn, body)  # its kernel starts before the clock does
            barrier.wait()
            while time.time() < stop[0]:
                try:
                    _call(server, conn, body)
                except Exception as exc:  # reported, not hidden
                    errors.append(str(exc))
                    return
                with lock:
                    done[0] += 1
        barrier = threading.Barrier(sessions + 1)
        stop = [0.0]
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(sessions)]
        for t in threads:
            t.start()
        stop[0] = time.time() + 3600
        barrier.wait()
        start = time.time()
        stop[0] = start + seconds
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError(f"throughput ({kind}): {errors[:3]}")
        results[kind] = round(done[0] / (time.time() - start), 1)
    results["ratio"] = round(results["stateful"] / results["one_off"], 2)
    results["sessions"] = sessions
    return results


def _pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cgroup_pids(memory_file):
    """The processes of the cgroup whose memory file the kernel's lock file names."""
    directory = os.path.dirname(memory_file)
    pids = []
    for name in ("cgroup.procs", "tasks"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            with open(path) as f:
                pids = sorted({int(line) for line in f if line.strip()})
            break
    return pids


def idle_kernel_memory(server, state_dir, settle_s=2.0):
    """Host memory of each language's idle kernel: PSS summed over its sandbox's processes
    (the interpreter, and the sandbox's own init), and what its cgroup is charged."""
    results = {}
    conn = server.connection()
    for language, (_, code) in PROGRAMS.items():
        session = f"bench-idle-{language}"
        _call(server, conn, {"language": language, "code": code, "network": False,
                             "session_id": session, "stateful": True})
        time.sleep(settle_s)
        with open(os.path.join(state_dir, "sessions", session, f"kernel-{language}.lock")) as f:
            meta = json.load(f)
        pids = _cgroup_pids(meta["memory"])
        with open(meta["memory"]) as f:
            charged = int(f.read())
        results[language] = {"pss_kb": sum(_pss_kb(p) for p in pids), "processes": len(pids),
                             "cgroup_charged_kb": charged // 1024}
        server.request("DELETE", f"/v1/sessions/{session}", conn=conn)
    return results


def run(server, state_dir, work, runs):
    return {"latency": latency(server, work, runs), "throughput": throughput(server),
            "idle_memory": idle_kernel_memory(server, state_dir)}


def targets(results):
    """Issue 14's targets: (target, measured, met)."""
    s = results.get("stateful")
    if not s:
        return []
    lat = s["latency"]
    rows = []
    for language, limit in (("python", 2), ("javascript", 3), ("bash", 2)):
        median = lat[language]["runbox_http_stateful"]["median_ms"]
        rows.append((f"stateful {language} call over HTTP keep-alive, p50 <= {limit} ms",
                     f"{median} ms", median <= limit))
    tp = s["throughput"]["stateful"]
    rows.append(("stateful `print('hi')` across 8 sessions >= 500/s", f"{tp}/s", tp >= 500))
    pss = s["idle_memory"]["python"]["pss_kb"]
    rows.append(("idle Python kernel PSS <= 15 MiB", f"{round(pss / 1024, 1)} MiB",
                 pss <= 15 * 1024))
    return rows


def markdown(results):
    s = results.get("stateful")
    if not s:
        return []
    lines = ["", "## Stateful sessions (issue 14; HTTP keep-alive, interleaved, ms)", "",
             "A call into the session's live kernel (`\"stateful\": true`) against a one-off run "
             "through the same server and the bare interpreter started by the benchmark.", "",
             "| runtime | variant | median | p90 | p99 | x bare | x one-off |",
             "|---|---|---|---|---|---|---|"]
    for language, stats in s["latency"].items():
        for name, row in stats.items():
            lines.append(f"| {language} | {name} | {row['median_ms']} | {row['p90_ms']} | "
                         f"{row['p99_ms']} | {row['ratio_to_bare']} | {row['ratio_to_one_off']} |")
    tp = s["throughput"]
    lines += ["", f"Throughput, python `print('hi')`, {tp['sessions']} client threads each with "
              f"its own session and keep-alive connection: stateful {tp['stateful']}/s, one-off "
              f"{tp['one_off']}/s ({tp['ratio']} x).", "",
              "Idle kernel, host memory (PSS summed over the sandbox's processes; what its "
              "cgroup is charged):", "", "| runtime | PSS | processes | cgroup charged |",
              "|---|---|---|---|"]
    for language, row in s["idle_memory"].items():
        lines.append(f"| {language} | {round(row['pss_kb'] / 1024, 1)} MiB | {row['processes']} | "
                     f"{round(row['cgroup_charged_kb'] / 1024, 1)} MiB |")
    return lines
