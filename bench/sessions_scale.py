"""Session storage at scale (issue 13): what one one-off `echo hi` costs while 0, 1,000 and
10,000 idle sessions exist (each ran once), and after they are gone; what the host's mount
table, loop devices and disk hold meanwhile; the prepared template namespace against building
each sandbox's root from the host's table (RUNBOX_TEMPLATE=0), with and without 300 extra host
mounts (a Kubernetes node has hundreds); the one-off beside a server holding 100 live
kernels; and what a session's disk usage costs to ask for as its files grow."""
import concurrent.futures
import json
import os
import shutil
import subprocess
import tempfile
import time

from common import Server, execute, summary, timed

STAGES = (0, 1000, 10000)
LIVE_KERNELS = 100
USAGE_FILES = (0, 1000, 10000, 20000)


def _host_figures(state_dir):
    with open("/proc/self/mountinfo") as f:
        mounts = sum(1 for _ in f)
    loops = sum(1 for name in os.listdir("/sys/block") if name.startswith("loop") and
                os.path.exists(f"/sys/block/{name}/loop/backing_file"))
    image = os.path.join(state_dir, "sessions.img")
    disk = os.stat(image).st_blocks * 512 if os.path.exists(image) else 0
    return {"host_mounts": mounts, "loop_devices": loops, "image_disk_bytes": disk}


def _env(state_dir, **extra):
    return {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": state_dir, **extra}


def _interleaved(runbox, variants, runs):
    """Medians of a one-off CLI `echo hi` for each variant (name -> environment), taken in
    turn, so that whatever else the machine does in those seconds weighs on all of them."""
    cmd = [runbox, "run", "bash", "-c", "echo hi", "--json", "--no-network"]
    samples = {name: [] for name in variants}
    for env in variants.values():
        timed(cmd, env=env)
    for _ in range(runs):
        for name, env in variants.items():
            samples[name].append(timed(cmd, env=env)[0])
    return {name: summary(values) for name, values in samples.items()}


# Making (or removing) thousands of sessions leaves the kernel writing them out, and btrfs
# cleaning removed subvolumes, for a while afterwards: on two cores that slows whatever runs
# meanwhile. The stages measure the cost of sessions that exist, so they wait for the host to
# finish that work first; the run right after growing is reported too.
SETTLE_S = 5


def _settle(state_dir):
    subprocess.run(["sync"], check=False)
    sessions = os.path.join(state_dir, "sessions")
    if shutil.which("btrfs") and os.path.ismount(sessions):
        subprocess.run(["btrfs", "subvolume", "sync", sessions], capture_output=True, check=False)
    time.sleep(SETTLE_S)


def _grow(runbox, state_dir, start, stop):
    """Sessions scale-START .. scale-STOP-1, each made by one execution through a server."""
    server = Server(runbox, state_dir)
    try:
        def one(n):
            conn = server.connection()
            status, body = server.request("POST", "/v1/execute", {
                "language": "bash", "code": "echo $RANDOM > f", "network": False,
                "session_id": f"scale-{n}"}, conn=conn)
            conn.close()
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {body[:200]}")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(one, range(start, stop)))
    finally:
        server.stop()


def _remove_all(runbox, state_dir, count):
    server = Server(runbox, state_dir)
    try:
        def one(n):
            status, body = server.request("DELETE", f"/v1/sessions/scale-{n}")
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {body[:200]}")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(one, range(count)))
    finally:
        server.stop()


def _extra_host_mounts(where, count):
    made = []
    for i in range(count):
        path = os.path.join(where, f"m{i}")
        os.mkdir(path)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "bench", path], check=True)
        made.append(path)
    return made


def _live_kernels(runbox, work, runs, count):
    """A server holding count live kernels (stateful bash sessions) on one state directory and
    a server holding none on a twin, the cold one-off (no daemon) on each, interleaved. A
    runbox sweeps what gone runboxes left (scratch spaces, cgroups) when it starts, and the
    kernels' scratch spaces and cgroups are listed by that sweep: judged by their owner, a
    look each, its cost grew with them. The cgroups are the host's, so the twin lists them
    too: this ratio shows the state directory's part."""
    dirs = {"live": os.path.join(work, "live-state"), "none": os.path.join(work, "none-state")}
    servers = {name: Server(runbox, path, global_args=("--max-kernels", str(count + 10)))
               for name, path in dirs.items()}
    try:
        conn = servers["live"].connection()
        for n in range(count):
            execute(servers["live"], conn, {"language": "bash", "code": "x=1", "network": False,
                                            "session_id": f"live-{n}", "stateful": True})
        both = _interleaved(runbox, {name: _env(path, RUNBOX_USE_DAEMON="never")
                                     for name, path in dirs.items()}, runs)
        return {"kernels": count, "live": both["live"], "none": both["none"],
                "ratio": round(both["live"]["median_ms"] / both["none"]["median_ms"], 3)}
    finally:
        for server in servers.values():
            server.stop()


def _settle_window_s():
    """How long after a change the storage's usage still commits first: as runbox reckons it
    (src/sessions/storage.c, settle_seconds), from the host's writeback settings."""
    def centisecs(name):
        with open(f"/proc/sys/vm/{name}") as f:
            return int(f.read())
    return 2 * ((centisecs("dirty_expire_centisecs") +
                 centisecs("dirty_writeback_centisecs")) // 100 + 1 + 30)


def _usage_with_files(runbox, work, runs):
    """GET /v1/sessions/{id} (its disk usage) for sessions of 0 to 20,000 files (100 to a
    directory), interleaved: right after the files were written, when the storage is committed
    first so that the figure counts them, and once they have settled, when runbox only walks
    the session's tree to see that nothing changed recently (a walk of at most 10,000 entries:
    a larger tree commits as a recent change does)."""
    server = Server(runbox, os.path.join(work, "usage-state"))
    make = ("import os\nn = {n}\nfor d in range(0, n, 100):\n"
            "    os.makedirs(f'd{{d}}', exist_ok=True)\n"
            "    for i in range(d, min(n, d + 100)):\n"
            "        open(f'd{{d}}/f{{i}}', 'w').close()\nprint('made')")
    try:
        conn = server.connection()
        for n in USAGE_FILES:
            execute(server, conn, {"language": "python", "code": make.format(n=n),
                                   "network": False, "session_id": f"usage-{n}"})

        def asked(n):
            start = time.perf_counter()
            status, body = server.request("GET", f"/v1/sessions/usage-{n}", conn=conn)
            took = (time.perf_counter() - start) * 1000
            if status != 200 or "disk_bytes" not in json.loads(body):
                raise RuntimeError(f"HTTP {status}: {body[:300]}")
            return took

        def interleaved(count):
            samples = {n: [] for n in USAGE_FILES}
            for _ in range(count):
                for n in USAGE_FILES:
                    samples[n].append(asked(n))
            return {str(n): summary(values) for n, values in samples.items()}

        # Right after the files: a few rounds only, since each commits.
        fresh = interleaved(min(runs, 10))
        window = _settle_window_s()
        time.sleep(window + 5)
        return {"files": list(USAGE_FILES), "changed_recently": fresh,
                "settled": interleaved(runs), "settle_window_s": window}
    finally:
        server.stop()


def run(runbox, work, runs):
    """The sessions grow in one state directory; every stage is measured interleaved with a
    twin state directory that never has a session (a machine's speed drifts by tens of percent
    over minutes here, more than what is measured). The host's mount table and loop devices
    are counted too: they are what a cost shared by both directories would grow with."""
    if os.geteuid() != 0:
        return None  # sessions are plain directories without root: nothing to scale
    state_dir = os.path.join(work, "scale-state")
    baseline_dir = os.path.join(work, "scale-baseline-state")
    results = {"stages": []}
    _grow(runbox, baseline_dir, 0, 0)  # its storage made, as the other's is

    def stage_row(name):
        _settle(state_dir)
        both = _interleaved(runbox, {"sessions": _env(state_dir),
                                     "baseline": _env(baseline_dir)}, runs)
        row = {"sessions": name, **both["sessions"],
               "baseline_median_ms": both["baseline"]["median_ms"],
               "ratio_to_baseline": round(both["sessions"]["median_ms"] /
                                          both["baseline"]["median_ms"], 3)}
        # After the runs: the first run of a state directory pins its template namespace
        # (one mount line, once), which is not growth with the sessions.
        row.update(_host_figures(state_dir))
        results["stages"].append(row)

    made = 0
    for stage in STAGES:
        _grow(runbox, state_dir, made, stage)
        made = stage
        stage_row(stage)
    _remove_all(runbox, state_dir, made)
    stage_row("after removal")
    stages = results["stages"]
    results["ratio_10000_to_0"] = stages[2]["ratio_to_baseline"]
    results["sequential_ratio_10000_to_0"] = round(stages[2]["median_ms"] /
                                                   stages[0]["median_ms"], 3)
    # The template against the host's table, with the host's own mounts and with 300 more.
    def template_pair():
        return _interleaved(runbox, {"template": _env(state_dir),
                                     "no_template": _env(state_dir, RUNBOX_TEMPLATE="0")}, runs)
    results["template"] = {"host": template_pair()}
    mounts_dir = tempfile.mkdtemp(prefix="runbox-bench-mounts-")
    extra = []
    try:
        extra = _extra_host_mounts(mounts_dir, 300)
        results["template"]["host_plus_300_mounts"] = template_pair()
    finally:
        for path in reversed(extra):
            subprocess.run(["umount", path])
            os.rmdir(path)
        os.rmdir(mounts_dir)
    results["live_kernels"] = _live_kernels(runbox, work, runs, LIVE_KERNELS)
    results["usage"] = _usage_with_files(runbox, work, runs)
    return results


def targets(results):
    s = results.get("sessions_scale")
    if not s:
        return []
    ratio = s["ratio_10000_to_0"]
    stages = s["stages"]
    grew = stages[2]["host_mounts"] - stages[0]["host_mounts"]
    loops = stages[2]["loop_devices"] - stages[0]["loop_devices"]
    return [("one-off `echo hi` with 10,000 idle sessions within 10% of none (interleaved "
             "with a twin state directory)", f"{ratio} x", ratio <= 1.1),
            ("... and the host's mount table and loop devices did not grow with them",
             f"{grew} lines, {loops} loop devices", grew <= 0 and loops <= 0)] + (
        [(f"one-off `echo hi` beside {live['kernels']} live kernels within 10% of beside none "
          "(interleaved with a twin state directory)", f"{live['ratio']} x",
          live["ratio"] <= 1.1)] if (live := s.get("live_kernels")) else [])


def markdown(results):
    s = results.get("sessions_scale")
    if not s:
        return []
    lines = ["", "## Execution cost against idle sessions (issue 13; one-off `runbox run bash -c "
             "'echo hi' --no-network`, ms)", "",
             "Each session ran once (`echo $RANDOM > f`) through `runbox serve`, which is stopped "
             "while the CLI is measured. Each stage is measured interleaved with a twin state "
             "directory that has no session (this machine's speed drifts by tens of percent over "
             "minutes, more than what is measured); the host's mount table and loop devices are "
             "what a cost shared by both would grow with. Stages start after `sync` and "
             f"`btrfs subvolume sync` and {SETTLE_S} s.", "",
             "| idle sessions | median | p90 | p99 | twin with none, median | ratio | "
             "host mount table lines | loop devices | storage image on disk |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in s["stages"]:
        lines.append(f"| {row['sessions']} | {row['median_ms']} | {row['p90_ms']} | "
                     f"{row['p99_ms']} | {row['baseline_median_ms']} | "
                     f"{row['ratio_to_baseline']} | {row['host_mounts']} | "
                     f"{row['loop_devices']} | {round(row['image_disk_bytes'] / 2**20, 1)} MiB |")
    lines += ["", f"10,000 sessions against none, interleaved: {s['ratio_10000_to_0']} x "
              f"(one stage after the other: {s['sequential_ratio_10000_to_0']} x).", "",
              "The prepared template namespace against building each sandbox's root from the "
              "host's mount table (`RUNBOX_TEMPLATE=0`), interleaved:", "",
              "| host mounts | template, median | no template, median | ratio |", "|---|---|---|---|"]
    for name, label in (("host", "the host's own"), ("host_plus_300_mounts", "300 more")):
        row = s["template"].get(name)
        if row:
            lines.append(f"| {label} | {row['template']['median_ms']} | "
                         f"{row['no_template']['median_ms']} | "
                         f"{round(row['template']['median_ms'] / row['no_template']['median_ms'], 3)} |")
    live = s.get("live_kernels")
    if live:
        lines += ["", f"Beside a server holding {live['kernels']} live kernels (stateful bash "
                  "sessions) on the same state directory, against a twin whose server holds "
                  "none, interleaved, the CLI cold (no daemon): "
                  f"{live['live']['median_ms']} ms against {live['none']['median_ms']} ms, "
                  f"{live['ratio']} x."]
    usage = s.get("usage")
    if usage:
        lines += ["", "A session's disk usage asked for (`GET /v1/sessions/{id}`, ms, medians, "
                  "interleaved) as its files grow: right after they were written, when the "
                  "storage is committed first, and once they settled "
                  f"({usage['settle_window_s']} s later), when runbox walks the session's files "
                  "to see that nothing changed recently (up to 10,000 entries; past that it "
                  "commits as for a change).", "",
                  "| files | changed recently | settled |", "|---|---|---|"]
        for n in usage["files"]:
            lines.append(f"| {n} | {usage['changed_recently'][str(n)]['median_ms']} | "
                         f"{usage['settled'][str(n)]['median_ms']} |")
    return lines
