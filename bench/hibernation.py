"""Hibernation (issue 34): what a checkpoint of an idle Python kernel costs (time, and disk
against the kernel's resident memory), what its restore and first call cost, and many sessions
through few live kernels: every session answers its own variable, in random order, while the
server holds at most --max-kernels kernels. The kernel has numpy and pandas imported and a
10 MB DataFrame, as the issue asks; the server runs on the default image (make deps)."""
import json
import os
import random
import threading
import time

import statistics
import sys

from common import Server, execute, summary

SETUP = ("import numpy as np, pandas as pd\n"
         "frame = pd.DataFrame(np.arange(1_310_720, dtype='float64').reshape(-1, 8))\n"
         "print(frame.memory_usage(deep=True).sum())")


KERNEL_IDLE_S = 1


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


def _wait_hibernated(server, session, seconds=60, quiet_s=0):
    """The session's kernel entry once it is hibernated. Asks first after quiet_s: each look
    (GET /v1/sessions/ID) commits the storage to count the session's files, which writes back
    (and compresses) a checkpoint's images in the middle of its making."""
    time.sleep(quiet_s)
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
    server = Server(runbox, state, global_args=("--kernel-idle", str(KERNEL_IDLE_S), "--pool",
                                                "0"))
    try:
        conn = server.connection()
        _call(server, conn, "h", SETUP)
        resident = _kernel_rss_bytes(server, "h")
        checkpoint_ms, restore_ms, first_call_ms, sizes = [], [], [], []
        for _ in range(runs):
            k = _wait_hibernated(server, "h", quiet_s=KERNEL_IDLE_S + 1)
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


def _meminfo_bytes(field):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _available_bytes():
    return _meminfo_bytes("MemAvailable")


def _stored_bytes(path):
    """What the filesystem under path has in use (the sessions' own storage: runbox's btrfs)."""
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _helpers_rss_kb(server_pid):
    """The resident memory of the server's own helpers (criu, during a checkpoint or a
    restore): its descendants that are not in a sandbox's memory cgroup."""
    parent, total = {}, 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    for pid in parent:
        p, seen = parent.get(pid), 0
        while p and p != server_pid and seen < 64:
            p, seen = parent.get(p), seen + 1
        if p != server_pid:
            continue
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                if "/runbox/" in f.read():
                    continue
            with open(f"/proc/{pid}/status") as f:
                total += next((int(line.split()[1]) for line in f
                               if line.startswith("VmRSS:")), 0)
        except OSError:
            pass
    return total


def _in_turn(server, work_items, concurrency, call):
    """call(conn, item) for every item, from concurrency clients of their own (each a
    keep-alive connection), items taken in the given order; the first failure is raised."""
    items, lock, failures = list(work_items), threading.Lock(), []

    def client():
        conn = server.connection()
        while not failures:
            with lock:
                if not items:
                    return
                item = items.pop(0)
            try:
                call(conn, item)
            except Exception as e:  # noqa: BLE001 -- reported below, whatever it was
                failures.append(e)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]


def many_sessions(runbox, work, sessions, live, concurrency=1):
    """sessions sessions, each defines its own variable; then each is asked for it, in random
    order, with at most live kernels at a time: every answer must be its own. The node's memory
    (what the host has no longer available, from before the server started) must stay under
    live kernels' worth plus the server. A live kernel's worth is measured two ways: its cgroup's
    memory, and what the node had no longer available once the first `live` kernels were up,
    over their number (the second also counts what the host's kernel holds for a sandbox outside
    its cgroup: its namespaces, page tables, its sockets)."""
    state = os.path.join(work, "hibernation-many-state")
    before = _available_bytes()
    # The host kernel's own memory that nothing can reclaim (slab): what each session's
    # storage holds there while it sleeps (its subvolumes' roots, quota groups), which no
    # number of live kernels bounds.
    unreclaimable_before = _meminfo_bytes("SUnreclaim")
    # The server's log beside its state: what stopped a kernel, where one did.
    log = open(os.path.join(work, "hibernation-many-server.log"), "wb")
    server = Server(runbox, state, global_args=("--max-kernels", str(live), "--pool", "0"),
                    log=log)
    try:
        lock = threading.Lock()
        seen = {"kernel_bytes": 0, "node_peak": 0, "node_per_kernel": 0, "wrong": 0,
                "restored": 0, "peak_rss": server.rss_kb(), "calls": 0, "peak_tree": 0,
                "why": {}}

        def sample():
            with lock:
                seen["calls"] += 1
                if seen["calls"] % 1000 == 0:  # a long run says where it is
                    print(f"hibernation: {seen['calls']} calls of {2 * sessions}",
                          file=sys.stderr, flush=True)
                if seen["calls"] % 10 == 0:
                    seen["node_peak"] = max(seen["node_peak"], before - _available_bytes())
                    rss = server.rss_kb()
                    seen["peak_rss"] = max(seen["peak_rss"], rss)
                    seen["peak_tree"] = max(seen["peak_tree"], rss + _helpers_rss_kb(
                        server.proc.pid))

        def define(conn, i):
            _call(server, conn, f"m{i}", f"mine = {i}")
            if i == 0:
                seen["kernel_bytes"] = _kernel_rss_bytes(server, "m0")
            sample()

        sessions_dir = os.path.join(state, "sessions")
        stored_before = _stored_bytes(sessions_dir)
        start = time.perf_counter()
        # The first `live` kernels one by one: no hibernation yet, so what the node lost is
        # theirs and the server's.
        _in_turn(server, range(min(live, sessions)), 1, define)
        seen["node_per_kernel"] = max(0, before - _available_bytes() - server.rss_kb() * 1024) \
            / max(1, min(live, sessions))
        _in_turn(server, range(min(live, sessions), sessions), concurrency, define)
        define_s = time.perf_counter() - start
        os.sync()  # what the storage holds once written back (compressed there) and committed
        stored = _stored_bytes(sessions_dir) - stored_before
        order = list(range(sessions))
        random.Random(34).shuffle(order)

        def answer(conn, i):
            # Not _call: an answer that is not its own is counted, with why, and the run goes on.
            _, result = execute(server, conn, {"language": "python", "code": "print(mine)",
                                               "session_id": f"m{i}", "stateful": True,
                                               "network": False})
            with lock:
                if result["output"] != f"{i}\n":
                    seen["wrong"] += 1
                    why = result.get("restart_reason") or result.get("error", "")[-200:]
                    seen["why"][why] = seen["why"].get(why, 0) + 1
                seen["restored"] += bool(result.get("kernel_restored"))
            sample()

        start = time.perf_counter()
        _in_turn(server, order, concurrency, answer)
        answer_s = time.perf_counter() - start
        unreclaimable = _meminfo_bytes("SUnreclaim") - unreclaimable_before
        peak_rss = seen["peak_rss"]
        bound = live * seen["kernel_bytes"] + peak_rss * 1024
        node_bound = live * seen["node_per_kernel"] + peak_rss * 1024
        tree_bound = live * seen["kernel_bytes"] + seen["peak_tree"] * 1024
        return {"sessions": sessions, "live_kernels_max": live, "concurrency": concurrency,
                "wrong_answers": seen["wrong"], "wrong_why": seen["why"],
                "restored": seen["restored"],
                "define_s": round(define_s, 1), "answer_s": round(answer_s, 1),
                "per_answer_ms": round(answer_s * 1000 / sessions, 1),
                "server_peak_rss_kb": peak_rss,
                "kernel_mb": round(seen["kernel_bytes"] / 2**20, 2),
                "kernel_node_mb": round(seen["node_per_kernel"] / 2**20, 2),
                "node_memory_peak_mb": round(seen["node_peak"] / 2**20, 1),
                "node_memory_bound_mb": round(bound / 2**20, 1),
                "node_memory_node_bound_mb": round(node_bound / 2**20, 1),
                "server_and_helpers_peak_kb": seen["peak_tree"],
                "stored_per_session_kb": round(stored / max(1, sessions) / 1024, 1),
                "node_memory_tree_bound_mb": round(tree_bound / 2**20, 1),
                "host_unreclaimable_growth_mb": round(unreclaimable / 2**20, 1),
                "host_unreclaimable_per_session_kb": round(
                    unreclaimable / max(1, sessions) / 1024, 1)}
    finally:
        server.stop()
        log.close()


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
            "RBX_BENCH_HIBERNATION_LIVE", "10")), concurrency=int(os.environ.get(
                "RBX_BENCH_HIBERNATION_CONCURRENCY", "1")))
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
