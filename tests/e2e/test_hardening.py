"""Hardening through the CLI: what an outside test broke, each case a regression test."""
import json
import os
import subprocess
import time

import pytest

from conftest import processes_matching, unique_marker


def test_files_get_of_a_fifo_or_socket_fails_at_once(runbox):
    made = runbox.run("python", "import os, socket\nos.mkfifo('fifo')\n"
                                "socket.socket(socket.AF_UNIX).bind('sock')\nprint('made')",
                      "--session", "special")
    assert made["output"] == "made\n", made
    for name in ("fifo", "sock"):
        started = time.monotonic()
        proc = runbox.cli("files", "get", "special", name, timeout=20)
        assert time.monotonic() - started < 10
        assert proc.returncode == 2, proc
        assert b"not a regular file" in proc.stderr, proc.stderr
        assert proc.stdout == b""


# --- global options work before or after the command, everywhere --------------------------

@pytest.fixture
def two_dirs(runbox, tmp_path):
    """The state directory runbox's environment names, and one given on the command line."""
    chosen = str(tmp_path / "chosen")
    yield runbox.state_dir, chosen
    runbox.cli("sessions", "rm", "placed", "--wait", "30", "--state-dir", chosen)


@pytest.mark.parametrize("where", ["before", "after"])
def test_state_dir_is_taken_before_or_after_every_command(runbox, two_dirs, where):
    default, chosen = two_dirs

    def cli(*args, **kwargs):
        flag = ("--state-dir", chosen)
        full = (*flag, *args) if where == "before" else (*args, *flag)
        proc = runbox.cli(*full, **kwargs)
        assert proc.returncode == 0, (full, proc.stderr)
        return proc

    cli("run", "bash", "-c", "echo hi > f.txt", "--session", "placed")
    assert json.loads(cli("sessions", "list", "--json").stdout)[0]["session_id"] == "placed"
    assert cli("files", "get", "placed", "f.txt").stdout == b"hi\n"
    assert [f["path"] for f in json.loads(cli("files", "list", "placed", "--json").stdout)] == \
        ["f.txt"]
    assert json.loads(cli("envs", "list", "--json").stdout) == []
    checks = json.loads(cli("check", "--json").stdout)
    assert checks["state_dir"] == chosen, checks
    assert os.path.isdir(os.path.join(chosen, "sessions", "placed"))
    assert not os.path.exists(os.path.join(default, "sessions", "placed"))


def test_mcp_takes_the_state_dir_after_the_command(runbox, two_dirs):
    _, chosen = two_dirs
    call = runbox.mcp_call("execute_bash", {"command": "echo mcp", "session_id": "placed"},
                           "--state-dir", chosen)
    assert call["result"]["structuredContent"]["output"] == "mcp\n", call
    assert os.path.isdir(os.path.join(chosen, "sessions", "placed"))


@pytest.mark.parametrize("args,message", [
    (("sessions", "list", "--state-dir"), b"--state-dir needs a directory"),
    (("files", "list", "s1", "--install-network", "sideways"), b"must be 'outside' or 'host'"),
    (("check", "--policy="), b"--policy needs a file"),
    (("mcp", "--bogus"), b"unexpected argument '--bogus'"),
])
def test_a_bad_global_option_after_the_command_is_a_usage_error(runbox, args, message):
    proc = runbox.cli(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_a_value_that_looks_like_a_global_option_stays_a_value(runbox):
    result = runbox.run("bash", "echo \"$X\"", "--env", "X=--state-dir")
    assert result["output"] == "--state-dir\n"
    proc = runbox.cli("run", "bash", "-c", "--state-dir", "--json")
    assert proc.returncode == 0  # the code is "--state-dir": bash's own error, not a usage error


# --- a CPU quota per execution ------------------------------------------------------------

TWO_SPINNERS = ("import threading, time\n"
                "def spin():\n"
                "    end = time.monotonic() + 1.5\n"
                "    while time.monotonic() < end: pass\n"
                "threads = [threading.Thread(target=spin) for _ in range(2)]\n"
                "[t.start() for t in threads]; [t.join() for t in threads]")


def cores_used(result):
    return result["cpu_ms"] / max(result["duration_ms"], 1)


def test_an_execution_gets_at_most_one_core_by_default(runbox):
    capped = runbox.run("python", TWO_SPINNERS, "--no-network")
    if capped["limits"] == "rlimits":
        pytest.skip("no cgroup here: no CPU quota can be set (the result says cpus: null)")
    # Two busy threads get one core's worth of time: a ceiling, which load only lowers.
    assert capped["cpus"] == 1 and cores_used(capped) < 1.25, capped
    half = runbox.run("python", TWO_SPINNERS, "--no-network", "--cpus", "0.5")
    assert half["cpus"] == 0.5 and cores_used(half) < 0.7, half


def quota_of(pid):
    """The CPU quota of pid's cgroup, in cores, read on the host (v1 or v2)."""
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in lines:
        if "cpu" in controllers.split(","):
            base = next(m for m in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct")
                        if os.path.isdir(m))
            with open(f"{base}/runbox{path.split('/runbox', 1)[1]}/cpu.cfs_quota_us") as q, \
                    open(f"{base}/runbox{path.split('/runbox', 1)[1]}/cpu.cfs_period_us") as p:
                return int(q.read()) / int(p.read())
    path = next(p for h, c, p in lines if h == "0")
    with open(f"/sys/fs/cgroup{path}/cpu.max") as f:
        quota, period = f.read().split()
        return int(quota) / int(period)


@pytest.mark.skipif(os.geteuid() != 0, reason="the cgroup is read on the host, as root")
def test_an_execution_that_asks_for_two_cores_gets_a_quota_of_two(runbox):
    marker = unique_marker()
    proc = runbox.popen("run", "bash", "-c", f"exec sleep {marker}", "--no-network",
                        "--cpus", "2", "--timeout", "20")
    try:
        deadline = time.time() + 15
        while time.time() < deadline and not processes_matching(marker):
            time.sleep(0.05)
        pids = processes_matching(marker)
        assert pids, "the sandbox did not start"
        assert quota_of(pids[0]) == 2
    finally:
        proc.terminate()  # runbox cancels and cleans up; SIGKILL would leave cgroups
        proc.wait()


def test_without_a_cgroup_the_result_says_no_quota_holds(runbox):
    result = runbox.run("bash", "true", "--no-network")
    assert (result["cpus"] is None) == (result["limits"] == "rlimits"), result


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf", "1e400", ""])
def test_a_bad_cpus_value_is_a_usage_error(runbox, value):
    proc = runbox.cli("run", "bash", "-c", "true", "--cpus", value)
    assert proc.returncode == 2 and b"--cpus needs a number of cores" in proc.stderr, proc.stderr


def test_more_cpus_than_the_operator_allows_is_refused(runbox):
    proc = runbox.cli("--max-cpus", "1.5", "run", "bash", "-c", "true", "--cpus", "2")
    assert proc.returncode == 2, proc
    assert b"cpus 2 is out of bounds (accepted: 0.01 to 1.5 cores" in proc.stderr, proc.stderr
    proc = runbox.cli("run", "bash", "-c", "true", "--cpus", "1.5", "--json", "--max-cpus", "1.5")
    assert proc.returncode == 0 and json.loads(proc.stdout)["cpus"] in (1.5, None), proc


# --- what fuzzing found -------------------------------------------------------------------

@pytest.mark.parametrize("spec,says", [
    ("django rest framework", b"has more than a package name before its version"),
    ("requests 2", b"has more than a package name before its version"),
    ("numpy >=1 extra", b"has a space inside a version"),
])
def test_words_of_a_spec_are_refused_not_joined_into_another_name(runbox, spec, says):
    proc = runbox.cli("run", "python", "-c", "pass", "--require", spec)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_spaces_around_operators_and_commas_stay_accepted(runbox):
    proc = runbox.cli("run", "python", "-c", "import numpy", "--require", "numpy >= 1.0 , < 99",
                      "--json", env={"PIP_NO_INDEX": "1"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["install"] is not None


def test_a_policy_line_longer_than_4096_bytes_is_refused_not_split_into_rules(runbox, tmp_path):
    policy = tmp_path / "policy.conf"
    policy.write_text("# " + "x" * 5000 + " bash rm_rf rm\n")
    proc = runbox.cli("--policy", str(policy), "run", "bash", "-c", "rm -f nothing")
    assert proc.returncode == 2 and b"a line longer than 4096 bytes" in proc.stderr, proc.stderr


@pytest.mark.parametrize("pattern", ["a" + "+" * 32, "((a+)+)+", "x{1000}", "(" * 20 + "a" + ")" * 20])
def test_a_policy_pattern_that_costs_too_much_to_compile_is_refused_at_once(runbox, tmp_path,
                                                                            pattern):
    policy = tmp_path / "policy.conf"
    policy.write_text(f"* costly {pattern}\n")
    started = time.monotonic()
    proc = runbox.cli("--policy", str(policy), "run", "bash", "-c", "true", timeout=30)
    assert time.monotonic() - started < 10
    assert proc.returncode == 2 and b"costs too much to compile" in proc.stderr, proc.stderr


def test_the_shipped_policy_still_loads_and_refuses_what_it_names(runbox):
    policy = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "policy.conf")
    result = runbox.run("bash", "rm -rf /", "--policy", policy)
    assert result["error_type"] == "PermissionError" and "rm-rf-root" in result["error"], result
