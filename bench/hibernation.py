"""Hibernation (issue 34): what a checkpoint of an idle Python kernel costs (time, and disk
against the kernel's resident memory), what its restore and first call cost, and many sessions
through few live kernels: every session answers its own variable, in random order, while the
server holds at most --max-kernels kernels. The kernel has numpy and pandas imported and a
10 MB DataFrame, as the issue asks; the server runs on the default image (make deps)."""
import json
import os
import random
import time

import statistics

from common import Server, execute, summary

SETUP = ("import numpy as np, pandas as pd\n"
         "frame = pd.DataFrame(np.arange(1_310_720, dtype='float64').reshape(-1, 8))\n"
         "print(frame.memory_usage(deep=True).sum())")


def _call(server, conn, session, code):
    elapsed, result = execute(server, conn, {"language": "python", "code": code,
                                             "session_id": session, "stateful": True,
                                             "network": False})
    if not result["success"]:
        raise RuntimeError(f"the call failed: {json.dumps(result)[:400]}")
    return elapsed, result


def _kernel(server, session):
    status, raw = server.request("GET", f"/v1/sessions/{session}")
    kernels = json.loads(raw).get("kernels", []) if status == 200 else []
    return kernels[0] if kernels else None


def _wait_hibernated(server, session, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        k = _kernel(server, session)
        if k and k["state"] == "hibernated":
            return k
        time.sleep(0.05)
    raise RuntimeError(f"session {session} did not hibernate: {_kernel(server, session)}")


def _kernel_rss_bytes(server, session):
    """The live kernel's memory as the server counts it (its cgroup's)."""
    k = _kernel(server, session)
    return k["memory_bytes"] if k else 0


def checkpoint_and_restore(runbox, work, runs):
    state = os.path.join(work, "hibernation-state")
    server = Server(runbox, state, global_args=("--kernel-idle", "1", "--pool", "0"))
    try:
        conn = server.connection()
        _call(server, conn, "h", SETUP)
        resident = _kernel_rss_bytes(server, "h")
        checkpoint_ms, restore_ms, first_call_ms, sizes = [], [], [], []
        for _ in range(runs):
            k = _wait_hibernated(server, "h")
            checkpoint_ms.append(k["checkpoint_ms"])
            sizes.append(k["checkpoint_bytes"])
            elapsed, result = _call(server, conn, "h", "print(len(frame))")
            if not result["kernel_restored"] or result["output"] != "163840\n":
                raise RuntimeError(f"not restored: {result}")
            restore_ms.append(result["restore_ms"])
            first_call_ms.append(elapsed)
        size = statistics.median(sizes)
        return {"kernel_resident_bytes": resident, "checkpoint_ms": summary(checkpoint_ms),
                "checkpoint_bytes": int(size),
                "disk_over_resident": round(size / resident, 2) if resident else None,
                "restore_ms": summary(restore_ms),
                "restore_and_first_call_ms": summary(first_call_ms)}
    finally:
        server.stop()


def _available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def many_sessions(runbox, work, sessions, live):
    """sessions sessions, each defines its own variable; then each is asked for it, in random
    order, with at most live kernels at a time: every answer must be its own. The node's memory
    (what the host has no longer available, from before the server started) must stay under
    live kernels' worth plus the server."""
    state = os.path.join(work, "hibernation-many-state")
    before = _available_bytes()
    server = Server(runbox, state, global_args=("--max-kernels", str(live), "--pool", "0"))
    try:
        conn = server.connection()
        start = time.perf_counter()
        kernel_bytes, node_peak = 0, 0
        for i in range(sessions):
            _call(server, conn, f"m{i}", f"mine = {i}")
            if i == 0:
                kernel_bytes = _kernel_rss_bytes(server, "m0")
            if i % 10 == 0:
                node_peak = max(node_peak, before - _available_bytes())
        define_s = time.perf_counter() - start
        order = list(range(sessions))
        random.Random(34).shuffle(order)
        wrong, restored, peak_rss = 0, 0, server.rss_kb()
        start = time.perf_counter()
        for n, i in enumerate(order):
            _, result = _call(server, conn, f"m{i}", "print(mine)")
            wrong += result["output"] != f"{i}\n"
            restored += result["kernel_restored"]
            peak_rss = max(peak_rss, server.rss_kb())
            if n % 10 == 0:
                node_peak = max(node_peak, before - _available_bytes())
        answer_s = time.perf_counter() - start
        bound = live * kernel_bytes + peak_rss * 1024
        return {"sessions": sessions, "live_kernels_max": live, "wrong_answers": wrong,
                "restored": restored, "define_s": round(define_s, 1),
                "answer_s": round(answer_s, 1),
                "per_answer_ms": round(answer_s * 1000 / sessions, 1),
                "server_peak_rss_kb": peak_rss, "kernel_mb": round(kernel_bytes / 2**20, 1),
                "node_memory_peak_mb": round(node_peak / 2**20, 1),
                "node_memory_bound_mb": round(bound / 2**20, 1)}
    finally:
        server.stop()


def _move(server_from, server_to, session, into):
    """GET .../export from one node, POST .../import into the other: (seconds, archive bytes)."""
    start = time.perf_counter()
    conn = server_from.connection()
    conn.request("GET", f"/v1/sessions/{session}/export")
    answer = conn.getresponse()
    archive = answer.read()
    conn.close()
    if answer.status != 200:
        raise RuntimeError(f"export: {answer.status} {archive[:300]!r}")
    conn = server_to.connection()
    conn.request("POST", f"/v1/sessions/{into}/import", body=archive,
                 headers={"Content-Type": "application/x-tar"})
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    if answer.status != 201:
        raise RuntimeError(f"import: {answer.status} {body[:300]!r}")
    return time.perf_counter() - start, len(archive)


def moved_to_another_node(runbox, work, runs):
    """A hibernated kernel (numpy, pandas, the 10 MB DataFrame) moved to another node by export
    and import and called there (it wakes with its variables), side by side with what an agent
    pays without it: a fresh session on that node running its setup again."""
    a_state = os.path.join(work, "move-a-state")
    b_state = os.path.join(work, "move-b-state")
    a = Server(runbox, a_state, global_args=("--kernel-idle", "1", "--pool", "0"))
    b = None
    try:
        conn = a.connection()
        _call(a, conn, "mv", SETUP)
        _wait_hibernated(a, "mv")
        # The nodes share a checkpoint key, as an operator gives every node of a cluster
        # (the first export makes the node's).
        status, _ = a.request("GET", "/v1/sessions/mv/export")
        if status != 200:
            raise RuntimeError(f"export: {status}")
        os.makedirs(b_state, mode=0o700, exist_ok=True)
        with open(os.path.join(a_state, "checkpoint.key"), "rb") as key:
            secret = key.read()
        fd = os.open(os.path.join(b_state, "checkpoint.key"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, secret)
        os.close(fd)
        # An import takes the whole archive as one body: the kernel's memory and more.
        b = Server(runbox, b_state, global_args=("--kernel-idle", "600", "--pool", "0"),
                   serve_args=("--max-body", str(1 << 30)))
        b_conn = b.connection()
        move_ms, call_ms, total_ms, rebuild_ms, sizes = [], [], [], [], []
        for i in range(runs):
            moved_s, size = _move(a, b, "mv", f"mv{i}")
            elapsed, result = _call(b, b_conn, f"mv{i}", "print(len(frame))")
            if not result["kernel_restored"] or result["output"] != "163840\n":
                raise RuntimeError(f"not woken on the other node: {result}")
            rebuild, again = _call(b, b_conn, f"fresh{i}", SETUP + "\nprint(len(frame))")
            if not again["output"].endswith("163840\n"):
                raise RuntimeError(f"the rebuild failed: {again}")
            move_ms.append(moved_s * 1000)
            call_ms.append(elapsed)
            total_ms.append(moved_s * 1000 + elapsed)
            rebuild_ms.append(rebuild)
            sizes.append(size)
        moved, rebuilt = summary(total_ms), summary(rebuild_ms)
        return {"archive_bytes": int(statistics.median(sizes)),
                "export_and_import_ms": summary(move_ms),
                "wake_and_first_call_ms": summary(call_ms),
                "moved_and_called_ms": moved, "rebuilt_ms": rebuilt,
                "moved_over_rebuilt": round(moved["median_ms"] / rebuilt["median_ms"], 2)}
    finally:
        a.stop()
        if b:
            b.stop()


def run(runbox, work, runs):
    results = {"checkpoint": checkpoint_and_restore(runbox, work, min(runs, 20))}
    results["moved"] = moved_to_another_node(runbox, work, min(runs, 10))
    results["many"] = many_sessions(runbox, work, sessions=int(os.environ.get(
        "RBX_BENCH_HIBERNATION_SESSIONS", "300")), live=int(os.environ.get(
            "RBX_BENCH_HIBERNATION_LIVE", "10")))
    return results


def targets(results):
    """Issue 34's targets against this run."""
    h = results.get("hibernation")
    if not h:
        return []
    c, m = h["checkpoint"], h["many"]
    return [
        ("checkpoint of an idle Python kernel (numpy, pandas, a 10 MB DataFrame) < 300 ms",
         f"{c['checkpoint_ms']['median_ms']} ms (median)", c["checkpoint_ms"]["median_ms"] < 300),
        ("... on disk < 1.5 x its resident memory", f"{c['disk_over_resident']} x",
         c["disk_over_resident"] is not None and c["disk_over_resident"] < 1.5),
        ("restore plus the first call < 200 ms",
         f"{c['restore_and_first_call_ms']['median_ms']} ms (median)",
         c["restore_and_first_call_ms"]["median_ms"] < 200),
        (f"{m['sessions']} sessions through {m['live_kernels_max']} live kernels: every one "
         "answers its own variable", f"{m['wrong_answers']} wrong, {m['restored']} restored",
         m["wrong_answers"] == 0 and m["restored"] >= m["sessions"] - m["live_kernels_max"]),
        ("... the node's memory under the live kernels' and the server's",
         f"{m['node_memory_peak_mb']} MB (bound {m['node_memory_bound_mb']} MB)",
         m["node_memory_peak_mb"] <= m["node_memory_bound_mb"]),
    ]
