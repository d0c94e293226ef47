#!/usr/bin/python3
"""Runs the stages of `make test` (or of `make test-all`) and says, at the end, what each took.

    tests/ci/stages.py [--plan ci|all] [--only NAME,...] [--list] [--table]

A stage is a make target (mk/ci.mk names them all). The plan is a list of steps; a step is one
stage, or lanes of stages that run side by side because they wait on different things (a VM's
emulated CPU, sleeping sandboxes, a browser) and share no state: each test makes its own state
directory, port and network namespace. Each stage's output goes to build/ci-logs/NAME.log and
is printed whole when the stage ends, so that side-by-side stages never interleave.

The run stops at the first stage that fails (the stages beside it are stopped), prints the
table, and exits 1. The table has one line per stage: its name, seconds, and the tests its
runners counted (pytest, node --test, ctest), then the total.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOGS = os.path.join(ROOT, "build", "ci-logs")


class Stage:
    def __init__(self, name, target, differs, tests):
        self.name, self.target = name, target
        self.differs = differs  # what the stage's variant changes in the code
        self.tests = tests      # which tests run in it, and why those
        self.seconds = None
        self.status = "not run"
        self.counts = {"passed": 0, "failed": 0, "skipped": 0}


def stage(name, target, differs, tests):
    return Stage(name, target, differs, tests)


# The stages of `make test`. A step of the plan is one stage, or a tuple of lanes that run
# side by side, each lane a list of stages run one after another. Lane one holds the suites
# that mostly wait on sandboxes; lane two the stages that keep a CPU busy (the VM's emulated
# CPU, the fuzzers, the image build), so that each lane fills the other's waits. The README's
# variant table is made from this plan (--table) and checked against it (tests/ci).
def ci_plan():
    return [
        stage("build", "ci-build",
              "-", "builds runbox (normal, ASan+UBSan, libFuzzer), the tests' SDKs and venvs, "
              "the default image if missing; `make layers` checks that the engine's "
              "dependencies point down"),
        ([stage("default", "test-default",
                "nothing: what users get (root, cgroup v1 here, the default image, the pool on "
                "in serve, mcp and the daemon)",
                "everything once: unit (ctest), e2e, http, client (xdist, then the `serial` "
                "cases alone), MCP SDK and wire, E2B SDK, the playground in Chromium, and "
                "tests/ci"),
          stage("asan", "test-asan",
                "the binary: ASan+UBSan report memory errors, leaks and undefined behaviour in "
                "any C path that runs",
                "unit (ctest); e2e test_core, test_storage, test_stateful, test_deps, "
                "test_images, test_image_import, test_egress_cli, test_one_off_plots; http; "
                "client; MCP; E2B "
                "(moved out: test_sandbox, test_hardening, test_egress and the playground, "
                "which run the same C as test_core and http; the egress parser keeps its fuzz "
                "harness under ASan; all of them in `make test-asan-full`)"),
          stage("unprivileged", "test-unprivileged",
                "no root: user namespaces, rlimits instead of cgroups, plain storage, no "
                "network on (it needs root), the root built per sandbox",
                "all of e2e as an ordinary user (xdist, then `serial`)"),
          stage("pooled", "test-pooled",
                "pool.c: every `runbox run` is served by a prepared sandbox of the daemon",
                "e2e test_sandbox, test_hardening (escape, exhaust, hide, outlive), on the "
                "default image"),
          stage("host-root", "test-host-root",
                "roots.c's host plan: the sandbox's /usr and /etc from the host, not an "
                "image; environments built with the host's Python and Node.js",
                "e2e test_sandbox, test_hardening, test_deps, test_core (moved: the image was "
                "the variant, `make test-image`; the host root is now)"),
          stage("cluster", "test-cluster",
                "nodes behind nginx and HAProxy (deploy/): routing, draining, moves",
                "tests/cluster"),
          stage("deploy", "test-deploy",
                "the deployment artifacts", "tests/deploy (manifests, nginx -t, systemd)"),
          stage("soak", "soak-ci",
                "many executions in one server: leaks of descriptors, threads, memory, mounts",
                "2,000 executions through HTTP, 300 through MCP"),
          # In this lane, not beside it: its server makes runbox cgroups on the host, which the
          # `serial` cases count (two of asan's failed, once, with its cgroups in their count).
          stage("fuzz-api", "fuzz-api",
                "nothing: the API as documented (docs/openapi.json) against a live runbox-serve",
                "schemathesis: every operation, then executions streamed as NDJSON and as "
                "Server-Sent Events")],
         [stage("cgroup2", "test-cgroup2",
                "cgroup.c's v2 half (limits, OOM events, cgroup.kill, delegation) on a pure v2 "
                "host: Debian's kernel in qemu (TCG here)",
                "the 31 e2e cases whose outcome rests on the cgroup code (hibernation among them) "
                "(tests/cgroup2/cases.txt; moved: the rest of e2e ran there too, and runs the "
                "same code as here; all of it in `make test-cgroup2-full`)"),
          stage("fuzz", "fuzz-ci",
                "libFuzzer (ASan+UBSan) on every parser of untrusted bytes",
                "15 harnesses 20 s each")]),
    ]


# Minutes each stage took in the `.ci/run` on a fresh clone that the README's Tests section
# quotes (stages side by side share the two cores, so each is longer than alone); the table
# shows them beside each stage. Filled in by hand from that run's closing table.
# At 836d11a (.ci/run on a fresh clone, 25.2 min until host-root failed in a teardown);
# host-root, cluster, deploy and soak from `stages.py --only` right after, with its fix;
# fuzz-api, a part of fuzz until 955d2ea, from its server's log in that commit's run.
MEASURED_MINUTES = {
    "build": 0.8, "default": 11.0, "asan": 6.3, "unprivileged": 2.0, "pooled": 3.5,
    "host-root": 1.3, "cluster": 0.3, "deploy": 0.1, "soak": 1.0, "cgroup2": 9.5, "fuzz": 5.2,
    "fuzz-api": 0.5,
}


# `make test-all`: the plan above, then every suite in every variant, as before this plan.
def all_plan():
    return ci_plan() + [
        stage("asan-full", "test-asan-full",
              "the binary, for every suite", "e2e, http, client, MCP, E2B, the playground"),
        stage("cgroup2-full", "test-cgroup2-full",
              "cgroup v2, for every suite", "all of e2e in the VM"),
        stage("image-smoke", "image-smoke-all",
              "the container image (make image), run by podman as a node's runtime would",
              "deploy/image/smoke-test.sh, directly and under podman"),
    ]


PLANS = {"ci": ci_plan, "all": all_plan}

# Closing lines of the runners whose counts the table adds up.
PYTEST = re.compile(r"^=*\s*(\d+ (passed|failed|skipped|errors?|deselected|xfailed|xpassed)"
                    r"(, \d+ \w+)*) in [\d.]+s")
NODE = re.compile(r"^# (pass|fail|skipped|cancelled) (\d+)$")
CTEST = re.compile(r"^\d+% tests passed, (\d+) tests failed out of (\d+)$")
PLAIN = re.compile(r"^(?:\w+: )?(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$")


def count(stage, line):
    line = line.rstrip()
    if m := PYTEST.match(line):
        for number, word in re.findall(r"(\d+) (\w+)", m.group(1)):
            key = {"error": "failed", "errors": "failed", "xpassed": "passed",
                   "xfailed": "skipped"}.get(word, word)
            if key in stage.counts:
                stage.counts[key] += int(number)
    elif m := NODE.match(line):
        key = {"pass": "passed", "fail": "failed", "cancelled": "failed"}.get(m.group(1),
                                                                              m.group(1))
        stage.counts[key] += int(m.group(2))
    elif m := CTEST.match(line):
        stage.counts["failed"] += int(m.group(1))
        stage.counts["passed"] += int(m.group(2)) - int(m.group(1))
    elif m := PLAIN.match(line):
        stage.counts["passed"] += int(m.group(1))
        stage.counts["failed"] += int(m.group(2))
        stage.counts["skipped"] += int(m.group(3) or 0)


class Runner:
    def __init__(self, make_args):
        self.make_args = make_args
        self.lock = threading.Lock()
        self.running = {}
        self.stopping = False

    def run(self, stage):
        log_path = os.path.join(LOGS, f"{stage.name}.log")
        start = time.monotonic()
        with self.lock:
            if self.stopping:
                return
            print(f"--- stage {stage.name} (make {stage.target}) started", flush=True)
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(["make", "--no-print-directory", *self.make_args,
                                         stage.target], cwd=ROOT, stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            self.running[stage.name] = proc
        code = proc.wait()
        stage.seconds = time.monotonic() - start
        with self.lock:
            del self.running[stage.name]
            stopped = self.stopping
            with open(log_path, "rb") as log:
                text = log.read().decode(errors="replace")
            for line in text.splitlines():
                count(stage, line)
            if stopped and code != 0:
                stage.status = "stopped"
            else:
                stage.status = "passed" if code == 0 else f"FAILED (exit {code})"
            print(f"--- stage {stage.name}: output of make {stage.target}", flush=True)
            sys.stdout.write(text)
            print(f"--- stage {stage.name}: {stage.status} in {stage.seconds:.0f} s", flush=True)
            if code != 0 and not self.stopping:
                self.stop_all()

    def stop_all(self):
        """The first failure stops the stages beside it: every process of their trees gets
        SIGTERM, then SIGKILL after 20 s (a test suite's teardown removes what it made). The
        whole tree, not the process group: some programs make groups of their own (timeout,
        which runs the cgroup v2 VM's qemu, does)."""
        self.stopping = True
        roots = [proc.pid for proc in self.running.values()]
        for pid in (p for root in roots for p in process_tree(root)):
            signal_quietly(pid, signal.SIGTERM)

        def kill_later():
            time.sleep(20)
            for pid in (p for root in roots for p in process_tree(root)):
                signal_quietly(pid, signal.SIGKILL)
        threading.Thread(target=kill_later, daemon=True).start()

    def lane(self, stages):
        for stage in stages:
            if self.stopping:
                return
            self.run(stage)

    def step(self, step):
        lanes = [lane if isinstance(lane, list) else [lane] for lane in
                 (step if isinstance(step, tuple) else (step,))]
        threads = [threading.Thread(target=self.lane, args=(lane,)) for lane in lanes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def process_tree(root):
    """root and every process below it."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def signal_quietly(pid, number):
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def lanes_of(step):
    return [lane if isinstance(lane, list) else [lane] for lane in
            (step if isinstance(step, tuple) else (step,))]


def flatten(plan):
    for step in plan:
        for lane in lanes_of(step):
            yield from lane


def table(stages, total_seconds):
    rows = [("stage", "seconds", "result", "passed", "failed", "skipped")]
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    for s in stages:
        seconds = "-" if s.seconds is None else f"{s.seconds:.0f}"
        rows.append((s.name, seconds, s.status, *(str(s.counts[k]) for k in totals)))
        for key in totals:
            totals[key] += s.counts[key]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
    lines.append(f"total {total_seconds:.0f} s ({total_seconds / 60:.1f} min)")
    lines.append(f"total: {totals['passed']} passed, {totals['failed']} failed, "
                 f"{totals['skipped']} skipped")
    return "\n".join(lines)


def markdown(plan):
    """The README's variant table."""
    out = ["| stage | runs beside | what differs in the code | which tests run in it | minutes |",
           "|---|---|---|---|---|"]
    for step in plan:
        lanes = lanes_of(step)
        for lane in lanes:
            beside = ", ".join(o.name for other in lanes if other is not lane for o in other)
            for s in lane:
                minutes = MEASURED_MINUTES.get(s.name, "-")
                out.append(f"| `{s.name}` (`make {s.target}`) | {beside or '-'} | {s.differs} "
                           f"| {s.tests} | {minutes} |")
    return "\n".join(out)


def deps_stage(ci_started, stages_seconds, now):
    """.ci/run says when it started, before make deps (RBX_CI_STARTED, seconds since the
    epoch): what went before the stages is make deps, a row of the table too."""
    if not ci_started.isdigit():
        return None
    deps = Stage("deps", "deps", "", "")
    deps.seconds = max(0.0, now - stages_seconds - int(ci_started))
    deps.status = "passed"
    return deps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", choices=sorted(PLANS), default="ci")
    parser.add_argument("--only", help="run only these stages (comma-separated), in plan order")
    parser.add_argument("--list", action="store_true", help="print the stages' targets")
    parser.add_argument("--table", action="store_true", help="print the README's variant table")
    parser.add_argument("make_args", nargs="*", help="passed to every make (VAR=value)")
    args = parser.parse_args()
    plan = PLANS[args.plan]()
    if args.list:
        print("\n".join(f"{s.name} {s.target}" for s in flatten(plan)))
        return 0
    if args.table:
        print(markdown(plan))
        return 0
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {s.name for s in flatten(plan)}
        if unknown:
            parser.error(f"no stage named {', '.join(sorted(unknown))} in plan {args.plan} "
                         f"(stages: {', '.join(s.name for s in flatten(plan))})")
        plan = [tuple(kept for kept in ([s for s in lane if s.name in names]
                                        for lane in lanes_of(step)) if kept)
                for step in plan]
        plan = [step for step in plan if step]
    os.makedirs(LOGS, exist_ok=True)
    runner = Runner(args.make_args)
    start = time.monotonic()
    for step in plan:
        runner.step(step)
        if runner.stopping:
            break
    stages = list(flatten(plan))
    total = time.monotonic() - start
    deps = deps_stage(os.environ.get("RBX_CI_STARTED", ""), total, time.time())
    if deps:
        stages.insert(0, deps)
        total += deps.seconds
    print("\n=== stages of the run (" + args.plan + ")")
    print(table(stages, total))
    return 1 if runner.stopping else 0


if __name__ == "__main__":
    sys.exit(main())
