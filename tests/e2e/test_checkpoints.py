"""Checkpoints (issue 34): `runbox check` says whether this host can checkpoint a sandbox's
process tree with CRIU, and why not where it cannot. RUNBOX_CRIU names the criu to use; the
fakes here stand for the ways a host's criu can fail."""
import json
import os
import shutil
import subprocess
import time

import pytest

IS_ROOT = os.geteuid() == 0

# What a criu that works on this host would answer (`make deps` installs one: mk/criu.mk).
INSTALLED = "/var/lib/runbox/criu/criu"


def checkpoints_line(runbox, criu=None):
    # No pool: its part of the check waits for prepared sandboxes, which is not what these are about.
    env = {"RUNBOX_POOL": "0", **({"RUNBOX_CRIU": str(criu)} if criu else {})}
    proc = runbox.cli("check", "--json", env=env, timeout=120)
    lines = [c for c in json.loads(proc.stdout)["checks"] if c["name"] == "checkpoints"]
    assert len(lines) == 1, proc.stdout
    return lines[0]


def fake_criu(tmp_path, version_answer, check_answer):
    """A criu that answers --version and check as told (shell lines)."""
    script = tmp_path / "criu"
    script.write_text("#!/bin/sh\n"
                      f"case \"$1\" in\n  --version) {version_answer} ;;\n"
                      f"  check) {check_answer} ;;\nesac\nexit 0\n")
    script.chmod(0o755)
    return script


def a_criu_4_here():
    """The criu 4 runbox would use on this host by default, or None."""
    if os.access(INSTALLED, os.X_OK):
        return INSTALLED
    found = shutil.which("criu", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if found:
        version = subprocess.run([found, "--version"], capture_output=True, text=True).stdout
        if version.startswith("Version: ") and int(version.split()[1].split(".")[0]) >= 4:
            return found
    return None


def test_no_criu_at_the_named_path_is_said_with_the_path(runbox, tmp_path):
    absent = tmp_path / "no-such-criu"
    line = checkpoints_line(runbox, absent)
    assert line["ok"] is False and line["essential"] is False
    assert line["detail"].startswith(f"no criu at {absent} (RUNBOX_CRIU)"), line


def test_a_criu_older_than_4_is_too_old(runbox, tmp_path):
    criu = fake_criu(tmp_path, 'echo "Version: 3.17.1"', "echo 'Looks good.'")
    line = checkpoints_line(runbox, criu)
    assert line["ok"] is False
    assert f"criu 3.17.1 at {criu} is too old" in line["detail"], line
    assert "CRIU 4 or later" in line["detail"], line


@pytest.mark.skipif(not IS_ROOT, reason="criu check runs as root only (as designed)")
def test_a_failing_criu_check_is_reported_with_its_first_error_line(runbox, tmp_path):
    # Debian 12's criu on this kernel says exactly this first.
    first = "Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds"
    criu = fake_criu(tmp_path, 'echo "Version: 4.1.1"',
                     "echo 'Warn (criu/kerndat.c:1285): no kdat cache' >&2; "
                     f"echo '{first}' >&2; echo 'Error (criu/crtools.c:260): later' >&2; exit 1")
    line = checkpoints_line(runbox, criu)
    assert line["ok"] is False
    assert line["detail"] == f"`{criu} check` (criu 4.1.1) fails: {first}", line


def test_a_program_that_is_not_criu_is_said_so(runbox, tmp_path):
    criu = fake_criu(tmp_path, "echo 'hello'", "exit 0")
    line = checkpoints_line(runbox, criu)
    assert line["ok"] is False
    assert line["detail"] == f"{criu} does not say its version: hello", line


@pytest.mark.skipif(not IS_ROOT, reason="criu check runs as root only (as designed)")
def test_a_criu_check_that_hangs_is_given_up_and_killed(runbox, tmp_path):
    seconds = f"{600 + os.getpid() % 1000}.25"  # this test's own, to find it afterwards
    criu = fake_criu(tmp_path, 'echo "Version: 4.1.1"', f"exec sleep {seconds}")
    started = time.monotonic()
    line = checkpoints_line(runbox, criu)
    assert time.monotonic() - started < 60
    assert line["ok"] is False
    assert line["detail"] == f"`{criu} check` (criu 4.1.1) fails: `{criu} check` did not answer " \
                             "within 5 s", line
    left = subprocess.run(["pgrep", "-f", f"sleep {seconds}"], capture_output=True, text=True)
    assert left.stdout == "", "the hung criu was left running"


@pytest.mark.skipif(not IS_ROOT, reason="criu check runs as root only (as designed)")
def test_the_criu_of_make_deps_passes_its_check_here(runbox):
    criu = a_criu_4_here()
    if not criu:
        pytest.skip("no CRIU 4 on this host: `make deps` installs it (mk/criu.mk)")
    line = checkpoints_line(runbox)
    version = subprocess.run([criu, "--version"], capture_output=True,
                             text=True).stdout.split()[1]
    assert line["ok"] is True, line
    assert line["detail"] == (f"criu {version} at {criu} passes `criu check`: this host can "
                              "checkpoint process trees"), line
