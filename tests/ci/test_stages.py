"""The stages of make test: the README's variant table is the plan's, every stage is a make
target, the closing lines of each runner are counted, and a failing stage stops the run."""
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import stages  # noqa: E402


def readme_table():
    with open(os.path.join(ROOT, "README.md")) as f:
        lines = f.read().splitlines()
    start = lines.index("<!-- stages: tests/ci/stages.py --table -->")
    end = lines.index("<!-- end of stages -->")
    return "\n".join(lines[start + 1:end]).strip()


def test_the_readme_table_is_the_plan_of_make_test():
    assert readme_table() == stages.markdown(stages.ci_plan()), \
        "README's variant table differs from tests/ci/stages.py: paste `stages.py --table`"


def make_database():
    """make's rules, read without running any recipe (`make -n` would still run the recipe
    lines that call $(MAKE)): asked for a target no rule makes, make -p prints its database."""
    proc = subprocess.run(["make", "-pRrq", "--no-print-directory", "rbx-no-such-target"],
                          cwd=ROOT, capture_output=True, text=True)
    rules, current = {}, None
    for line in proc.stdout.splitlines():
        if line and not line[0].isspace() and ":" in line and not line.startswith("#") \
                and "=" not in line.split(":", 1)[0]:
            current = line.split(":", 1)[0]
            rules.setdefault(current, [])
        elif line.startswith("\t") and current:
            rules[current].append(line[1:])
        elif not line:
            current = None
    return rules


@pytest.mark.parametrize("plan", sorted(stages.PLANS))
def test_every_stage_is_a_make_target(plan):
    rules = make_database()
    for stage in stages.flatten(stages.PLANS[plan]()):
        assert stage.target in rules, f"stage {stage.name}: no make target {stage.target}"


def test_make_test_and_test_all_run_the_plans():
    rules = make_database()
    for target, plan in (("test", "ci"), ("test-all", "all")):
        assert any(f"tests/ci/stages.py --plan {plan}" in line for line in rules[target]), \
            rules[target]


def test_the_plans_name_each_stage_once_and_all_holds_ci():
    ci = [s.name for s in stages.flatten(stages.ci_plan())]
    full = [s.name for s in stages.flatten(stages.all_plan())]
    assert len(set(ci)) == len(ci) and len(set(full)) == len(full)
    assert full[:len(ci)] == ci


@pytest.mark.parametrize("lines,counts", [
    (["787 passed, 6 skipped in 142.95s (0:02:22)", "9 passed, 784 deselected in 12.38s"],
     {"passed": 796, "failed": 0, "skipped": 6}),
    (["===== 3 failed, 775 passed, 6 skipped, 1 error in 142.95s ====="],
     {"passed": 775, "failed": 4, "skipped": 6}),
    (["# tests 44", "# pass 43", "# fail 1", "# skipped 2"],
     {"passed": 43, "failed": 1, "skipped": 2}),
    (["100% tests passed, 0 tests failed out of 9"], {"passed": 9, "failed": 0, "skipped": 0}),
    (["89% tests passed, 1 tests failed out of 9"], {"passed": 8, "failed": 1, "skipped": 0}),
    (["e2e: 390 passed, 0 failed, 27 skipped"], {"passed": 390, "failed": 0, "skipped": 27}),
    (["print('12 passed in 3s')", "a line with 5 passed in it"],
     {"passed": 0, "failed": 0, "skipped": 0}),
])
def test_the_runners_closing_lines_are_counted(lines, counts):
    stage = stages.Stage("s", "t", "", "")
    for line in lines:
        stages.count(stage, line)
    assert stage.counts == counts


def test_a_failing_stage_stops_the_run_and_the_table_says_so(tmp_path, capsys):
    failing = stages.Stage("broken", "no-such-target-rbx", "", "")
    beside = stages.Stage("beside", "no-such-target-rbx-2", "", "")
    runner = stages.Runner([])
    stages.LOGS = str(tmp_path)
    runner.step(([failing], [beside]))
    assert runner.stopping
    assert failing.status.startswith("FAILED") or beside.status.startswith("FAILED")
    text = stages.table([failing, beside], 1.0)
    assert "FAILED" in text and text.splitlines()[-1] == "total: 0 passed, 0 failed, 0 skipped"
    later = stages.Stage("later", "ci-build", "", "")
    runner.run(later)  # a stopped run starts nothing more
    assert later.status == "not run"


def test_stopping_reaches_processes_in_groups_of_their_own(tmp_path):
    """A stage's program that makes a process group of its own (timeout does, for the VM's
    qemu) is stopped too when another stage fails."""
    pid_file = tmp_path / "pid"
    stage = subprocess.Popen(["sh", "-c", f"setsid sh -c 'echo $$ > {pid_file}; exec sleep 301' "
                                          "& wait"], start_new_session=True)
    deadline = time.time() + 10
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.time() < deadline:
        time.sleep(0.05)
    lone = int(pid_file.read_text())
    assert os.getpgid(lone) != os.getpgid(stage.pid)  # out of reach of a killpg
    runner = stages.Runner([])
    runner.running["x"] = stage
    runner.stop_all()
    stage.wait(timeout=10)
    deadline = time.time() + 10
    while os.path.exists(f"/proc/{lone}") and time.time() < deadline:
        time.sleep(0.05)
    state = open(f"/proc/{lone}/stat").read().rsplit(")", 1)[1].split()[0] \
        if os.path.exists(f"/proc/{lone}") else "gone"
    assert state in ("gone", "Z"), f"process {lone} of the stage survived the stop ({state})"


def test_make_deps_of_a_ci_run_is_a_row_and_part_of_the_total():
    deps = stages.deps_stage("1000", 600.0, 1000 + 750.0)
    assert deps.name == "deps" and deps.seconds == 150.0 and deps.status == "passed"
    assert stages.deps_stage("", 600.0, 1750.0) is None  # make test alone: no such row
    assert stages.deps_stage("not-a-time", 600.0, 1750.0) is None
    text = stages.table([deps], 750.0)
    assert text.splitlines()[1].split()[:3] == ["deps", "150", "passed"]
    assert "total 750 s (12.5 min)" in text
