"""The verdict of the cgroup v2 VM (run-vm.sh), from what the guest left in its results
directory: exits 0 only if the guest booted, ran every step to the end and each passed.

    python3 report.py RESULTS_DIR QEMU_STATUS ELAPSED_SECONDS
"""
import os
import sys
import xml.etree.ElementTree as ET


def e2e_counts(path):
    """(passed, failed, skipped, lines naming the failed and skipped cases) from junit xml."""
    if not os.path.exists(path):
        return None
    passed = failed = skipped = 0
    lines = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        if outcome is None:
            passed += 1
        elif outcome.tag == "skipped":
            skipped += 1
            lines.append(f"  skipped {name}: {outcome.get('message')}")
        else:
            failed += 1
            lines.append(f"  FAILED {name}: {(outcome.get('message') or '')[:300]}")
    return passed, failed, skipped, lines


def main():
    results, qemu_status, elapsed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    problems = []
    if qemu_status == 124:
        problems.append("timed out (the VM was killed)")
    elif qemu_status != 0:
        problems.append(f"qemu exited with status {qemu_status}")
    booted = os.path.join(results, "booted")
    if not os.path.exists(booted):
        problems.append("the guest did not boot (nothing reached its results directory)")
    steps = {}
    if os.path.exists(os.path.join(results, "steps")):
        with open(os.path.join(results, "steps")) as f:
            steps = dict((line.split() + [""])[:2] for line in f if line.strip())
    for name in ("environment", "cgroup_selftest", "e2e"):
        if name not in steps:
            if os.path.exists(booted):
                problems.append(f"step {name} did not finish")
        elif steps[name] != "0":
            problems.append(f"step {name} failed (exit status {steps[name]}, see "
                            f"{os.path.join(results, name + '.log')})")
    if os.path.exists(booted) and "done" not in steps and not problems:
        problems.append("the guest stopped before the end")

    print(f"\ncgroup v2 VM ({elapsed} s):")
    if os.path.exists(booted):
        with open(booted) as f:
            print(f"  kernel {f.read().strip()}")
    for name, status in steps.items():
        if name != "done":
            print(f"  {name}: {'passed' if status == '0' else 'FAILED'}")
    counts = e2e_counts(os.path.join(results, "e2e.xml"))
    for line in counts[3] if counts else []:
        print(line)
    for problem in problems:
        print(f"  FAILED: {problem}")
    if counts:
        print(f"cgroup2-e2e: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
