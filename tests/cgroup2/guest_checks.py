"""Inside the cgroup v2 VM, before the e2e suite: the machine really is a pure cgroup v2 host,
runbox says so (`runbox check`), and an execution really runs in a cgroup v2 directory of its
own with runbox's limits in it. Prints one PASS/FAIL line per check; exits 1 if any failed.

    python3 tests/cgroup2/guest_checks.py RUNBOX_BIN
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

CGROUP = "/sys/fs/cgroup"
failures = 0


def check(ok, what, detail=""):
    global failures
    print(f"  {'PASS' if ok else 'FAIL'}: {what}" + (f" ({detail})" if detail and not ok else ""))
    failures += not ok


def runbox(*args, state):
    return subprocess.run([RUNBOX, *args], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": state})


def run_json(*args, state):
    proc = runbox("run", *args, "--json", "--no-network", state=state)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return {"unparsed": proc.stdout, "stderr": proc.stderr}


def read(path):
    with open(path) as f:
        return f.read().strip()


def the_host_is_pure_cgroup_v2():
    with open("/proc/self/mountinfo") as f:
        types = [line.split(" - ")[1].split()[0] for line in f]
    check(types.count("cgroup2") == 1 and "cgroup" not in types,
          "one cgroup2 hierarchy and no cgroup v1 one", f"mount types: {sorted(set(types))}")
    controllers = read(f"{CGROUP}/cgroup.controllers").split()
    check({"memory", "pids", "cpu"} <= set(controllers),
          "memory, pids and cpu controllers in the root's cgroup.controllers", controllers)
    print(f"  kernel {os.uname().release}; controllers: {' '.join(controllers)}")


def runbox_check_says_v2(state):
    proc = runbox("check", "--json", state=state)
    print(proc.stdout.strip())
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    detail = checks["cgroups"]["detail"]
    check(checks["cgroups"]["ok"], "runbox check: cgroups ok", detail)
    check(detail.startswith("cgroup v2: memory limit enforced, process limit enforced, "
                            "CPU share enforced"),
          "runbox check: cgroup v2 with memory, process and CPU limits", detail)
    check(f"{CGROUP}: memory pids cpu" in detail,
          f"runbox check: executions go below {CGROUP}", detail)
    check(all(c["ok"] for c in checks.values() if c["essential"]),
          "runbox check: every essential check holds",
          [c["name"] for c in checks.values() if c["essential"] and not c["ok"]])


def an_execution_is_accounted_by_cgroup_v2(state):
    code = "import time\nt = time.time() + 0.3\nwhile time.time() < t: pass\nb = bytearray(40 << 20)"
    r = run_json("python", "-c", code, state=state)
    check(r.get("success") and r.get("limits") == "cgroup-v2", "a run reports limits: cgroup-v2", r)
    check((r.get("peak_memory_kb") or 0) > 40 << 10, "its peak memory comes from memory.peak", r)
    check((r.get("cpu_ms") or 0) >= 200, "its CPU time comes from cpu.stat", r)
    r = run_json("python", "-c", "b = bytearray(300 << 20)\nb[::4096] = b'x' * len(b[::4096])",
                 "--memory", "64", state=state)
    check(r.get("error_type") == "MemoryError" and r.get("limits") == "cgroup-v2",
          "300 MiB under --memory 64 is a MemoryError, by cgroup v2", r)


def the_execution_cgroup_has_the_limits(state):
    before = set(glob.glob(f"{CGROUP}/runbox/exec-*"))
    # A CPU quota where this runbox has one (--cpus).
    quota = "--cpus" in runbox("run", "--help", state=state).stdout
    proc = subprocess.Popen([RUNBOX, "run", "bash", "-c", "sleep 3", "--memory", "100",
                             "--no-network"] + (["--cpus", "0.5"] if quota else []),
                            env={"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": state},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, found = time.time() + 10, []
    while not found and time.time() < deadline:
        found = [d for d in set(glob.glob(f"{CGROUP}/runbox/exec-*")) - before
                 if read(f"{d}/cgroup.procs")]
        time.sleep(0.05)
    check(len(found) == 1, f"the execution runs in {CGROUP}/runbox/exec-*", found)
    if found:
        d = found[0]
        limits = {name: read(f"{d}/{name}") for name in
                  ("memory.max", "memory.swap.max", "pids.max", "cpu.weight")}
        check(limits == {"memory.max": str(100 << 20), "memory.swap.max": "0",
                         "pids.max": "256", "cpu.weight": "100"},
              "its memory.max, memory.swap.max, pids.max and cpu.weight are runbox's", limits)
        if quota:
            cpu_max = read(f"{d}/cpu.max").split()
            check(len(cpu_max) == 2 and int(cpu_max[0]) * 2 == int(cpu_max[1]),
                  "its cpu.max is half a core, for --cpus 0.5", cpu_max)
        check(set(read(f"{CGROUP}/runbox/cgroup.subtree_control").split()) >=
              {"memory", "pids", "cpu"}, "runbox/ enables memory, pids and cpu below it")
    check(proc.wait(timeout=30) == 0, "the execution ends normally")
    check(not set(glob.glob(f"{CGROUP}/runbox/exec-*")) - before,
          "its cgroup is removed after it")


def runbox_check_says_when_a_checkpoint_would_fail(state):
    """criu's dump reads a kernel's sockets through unix_diag: without it the dump fails though
    `criu check` passes. Here, where modules are files the guest's init loaded, runbox check
    must name it when it is unloaded, and say checkpoints work again once it is back."""
    def line():
        checks = {c["name"]: c for c in json.loads(runbox("check", "--json", state=state).stdout)
                  ["checks"]}
        return checks["checkpoints"]
    before = line()
    if not before["ok"]:
        print(f"  (checkpoints do not work here: {before['detail']})")
        return
    module = glob.glob(os.path.join(os.environ.get("RBX_VM_MODULES", "/nonexistent"),
                                    "kernel/net/unix/unix_diag.ko"))
    unloaded = module and subprocess.run(["busybox", "rmmod", "unix_diag"],
                                         capture_output=True, text=True)
    if not unloaded or unloaded.returncode != 0:
        check(False, "unix_diag is unloaded for the check", unloaded.stderr if unloaded else
              f"no unix_diag.ko below RBX_VM_MODULES ({os.environ.get('RBX_VM_MODULES')})")
        return
    try:
        without = line()
        check(not without["ok"] and "unix_diag" in without["detail"],
              "runbox check: no checkpoints without unix_diag, and it names the module", without)
    finally:
        subprocess.run(["busybox", "insmod", module[0]], check=True)
    check(line()["ok"], "runbox check: checkpoints again with unix_diag")


if __name__ == "__main__":
    RUNBOX = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        state = os.path.join(tmp, "state")
        try:
            the_host_is_pure_cgroup_v2()
            runbox_check_says_v2(state)
            an_execution_is_accounted_by_cgroup_v2(state)
            the_execution_cgroup_has_the_limits(state)
            runbox_check_says_when_a_checkpoint_would_fail(state)
        finally:
            # The state directory's storage and prepared namespace are mounts: they go first.
            subprocess.run([RUNBOX, "--state-dir", state, "storage", "unmount"],
                           capture_output=True)
    print(f"{failures} failed" if failures else "all passed")
    sys.exit(1 if failures else 0)
