"""Core: running code in sessions through the `runbox` CLI, end to end."""
import json
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import SLOWDOWN, default_image_tree, processes_matching, wait_gone

RESULT_FIELDS = {"success", "output", "error", "exit_code", "duration_ms", "session_id",
                 "language", "image", "image_note", "error_type", "exception", "timed_out",
                 "cancelled",
                 "truncated", "signal", "cpu_ms", "peak_memory_kb", "limits", "cpus", "network", "pooled",
                 "egress_denied", "egress_denied_to", "install", "stateful", "results",
                 "execution_count", "kernel_restarted", "kernel_restored", "restore_ms", "restart_reason"}

HELLO = {
    "python": "print('Hello, World!')",
    "javascript": "console.log('Hello, World!')",
    "bash": "echo 'Hello, World!'",
}


# --- the result object -------------------------------------------------------------------

@pytest.mark.parametrize("language", sorted(HELLO))
def test_hello_world_gives_exactly_the_result_fields(runbox, language):
    result = runbox.run(language, HELLO[language])
    assert set(result) == RESULT_FIELDS
    assert result["success"] is True
    assert result["output"] == "Hello, World!\n"
    assert result["error"] == ""
    assert result["exit_code"] == 0
    assert result["error_type"] is None
    assert result["timed_out"] is False
    assert result["truncated"] == {"stdout": 0, "stderr": 0, "results": 0}
    assert result["install"] is None  # no requirements
    assert result["language"] == language
    assert isinstance(result["duration_ms"], int) and result["duration_ms"] >= 0
    assert result["session_id"]


@pytest.mark.parametrize("alias,language", [
    ("py", "python"), ("python3", "python"), ("PYTHON", "python"),
    ("js", "javascript"), ("node", "javascript"), ("nodejs", "javascript"),
    ("sh", "bash"), ("shell", "bash"),
])
def test_language_aliases_resolve_to_the_canonical_name(runbox, alias, language):
    result = runbox.run(alias, HELLO[language])
    assert result["language"] == language and result["output"] == "Hello, World!\n"


def test_exit_code_and_signal_are_reported(runbox):
    assert runbox.run("bash", "exit 3")["exit_code"] == 3
    killed = runbox.run("bash", "kill -SEGV $$")
    assert killed["exit_code"] == 128 + signal.SIGSEGV and killed["signal"] == signal.SIGSEGV
    assert killed["success"] is False


# --- syntax errors run nothing -----------------------------------------------------------

SYNTAX = {
    "python": ("open('ran.txt','w').write('x')\nprint('before')\nif (\n", "line 3"),
    "javascript": ("require('fs').writeFileSync('ran.txt','x');\nconsole.log('before');\n"
                   "let x = ;\n", "<code>:3"),
    "bash": ("echo x > ran.txt\necho before\nif then\n", "line 3"),
}


@pytest.mark.parametrize("language", sorted(SYNTAX))
def test_syntax_error_runs_no_part_of_the_code(runbox, language):
    code, where = SYNTAX[language]
    result = runbox.run(language, code, "--session", "syn")
    assert result["error_type"] == "SyntaxError"
    assert result["success"] is False
    assert result["output"] == ""
    assert where in result["error"], result["error"]
    assert not os.path.exists(os.path.join(runbox.session_dir("syn"), "work", "ran.txt"))


def test_javascript_module_syntax_error_runs_nothing(runbox):
    code = "import fs from 'fs';\nfs.writeFileSync('ran.txt', 'x');\nconsole.log('before');\nlet = ;"
    result = runbox.run("javascript", code, "--session", "esm")
    assert result["error_type"] == "SyntaxError", result
    assert result["output"] == ""
    assert not os.path.exists(os.path.join(runbox.session_dir("esm"), "work", "ran.txt"))


def test_javascript_modules_run(runbox):
    result = runbox.run("javascript", "import os from 'os';\nconsole.log(typeof os.cpus);")
    assert result["output"] == "function\n", result


def test_nul_byte_in_code_is_a_syntax_error(runbox):
    proc = runbox.cli("run", "bash", "-", "--json", input=b"echo ran\n\x00echo more\n")
    result = json.loads(proc.stdout)
    assert result["error_type"] == "SyntaxError" and result["output"] == ""
    assert "NUL byte" in result["error"]


# --- classification ----------------------------------------------------------------------

@pytest.mark.parametrize("language,code,error_type,exception", [
    ("python", "import no_such_module_xyz", "ImportError", "ModuleNotFoundError"),
    ("python", "import os\nopen('locked','w').close()\nos.chmod('locked',0)\nopen('locked').read()",
     "PermissionError", "PermissionError"),
    ("python", "open('/usr/x','w')", "PermissionError", "OSError"),
    ("python", "raise MemoryError()", "MemoryError", "MemoryError"),
    ("python", "1/0", "RuntimeError", "ZeroDivisionError"),
    ("javascript", "require('no_such_module_xyz')", "ImportError", "Error"),
    ("javascript", "import('no_such_module_xyz').catch(e => { throw e })", "ImportError", "Error"),
    ("javascript", "import x from 'no_such_module_xyz';", "ImportError", "Error"),
    ("javascript", "const fs=require('fs'); fs.writeFileSync('locked',''); fs.chmodSync('locked',0);"
                   "fs.readFileSync('locked')", "PermissionError", "Error"),
    ("javascript", "require('fs').writeFileSync('/etc/x', '')", "PermissionError", "Error"),
    ("javascript", "null.x", "RuntimeError", "TypeError"),
    ("bash", "no_such_command_xyz", "ImportError", None),
    ("bash", "touch locked; chmod 000 locked; cat locked", "PermissionError", None),
    ("bash", "echo x > /usr/x", "PermissionError", None),
    ("bash", "false", "RuntimeError", None),
])
def test_failures_are_classified(runbox, language, code, error_type, exception):
    result = runbox.run(language, code)
    assert result["success"] is False
    assert result["error_type"] == error_type, result
    assert result["exception"] == exception, result


def test_javascript_heap_exhaustion_is_a_memory_error(runbox):
    code = "const a = []; for (;;) a.push(new Array(100000).fill(1));"
    result = runbox.run("javascript", code, "--env", "NODE_OPTIONS=--max-old-space-size=32")
    assert result["error_type"] == "MemoryError", result["error"][-500:]


@pytest.mark.parametrize("language,code", [
    ("python", "import sys\nprint('ImportError: x')\nprint('Traceback (most recent call last):\\n"
               "ModuleNotFoundError: y', file=sys.stderr)"),
    ("javascript", "console.error(\"code: 'MODULE_NOT_FOUND'\"); console.log('ImportError')"),
    ("bash", "echo 'ImportError' >&2; echo 'command not found' >&2; echo 'Permission denied' >&2"),
])
def test_classifier_is_not_fooled_by_a_program_that_exits_0(runbox, language, code):
    result = runbox.run(language, code)
    assert result["success"] is True and result["error_type"] is None, result


# --- timeouts leave nothing behind -------------------------------------------------------

def test_timeout_kills_background_jobs_daemons_and_stopped_children(runbox):
    marker = "4242.4242"
    code = f"""
sleep {marker} &
(setsid bash -c 'trap "" TERM HUP; sleep {marker}' &)
bash -c 'sleep {marker} & kill -STOP $$' &
python3 -c "import os,time
if os.fork()==0:
    os.setsid()
    if os.fork()==0:
        time.sleep({marker})
" &
echo started
sleep {marker}
"""
    start = time.time()
    result = runbox.run("bash", code, "--timeout", "1.5")
    assert time.time() - start < 10 * SLOWDOWN
    assert result["timed_out"] is True
    assert result["error_type"] == "TimeoutError"
    assert result["exit_code"] == 124
    assert result["output"] == "started\n"  # output printed before the deadline is kept
    assert "timed out" in result["error"]
    assert wait_gone(marker) == []


def test_program_that_stops_itself_is_still_killed_on_time(runbox):
    marker = "4343.4343"
    result = runbox.run("bash", f"sleep {marker} & kill -STOP 0", "--timeout", "1")
    assert result["timed_out"] is True
    assert wait_gone(marker) == []


@pytest.mark.parametrize("language,code", [
    ("python", "print('tick', flush=True)\nwhile True: pass"),
    ("javascript", "console.log('tick'); for (;;) {}"),
])
def test_infinite_loops_time_out_with_output_kept(runbox, language, code):
    # 3 s: the interpreter must have started and printed before the timeout, which took more
    # than 1 s for Node.js on a machine loaded with the rest of the suite.
    result = runbox.run(language, code, "--timeout", "3")
    assert result["timed_out"] and result["error_type"] == "TimeoutError"
    assert result["output"] == "tick\n"


def test_no_process_survives_a_normal_exit(runbox):
    marker = "4444.4444"
    result = runbox.run("bash", f"sleep {marker} & (setsid sleep {marker} &); echo done")
    assert result["success"] and result["output"] == "done\n"
    assert wait_gone(marker) == []


def test_timeout_bounds_are_enforced(runbox):
    for bad in ("0", "-1", "nan", "inf", "abc", "301"):
        proc = runbox.cli("run", "bash", "-c", "true", "--timeout", bad)
        assert proc.returncode == 2, bad
        assert len(proc.stderr.decode().strip().splitlines()) == 1


# --- output ------------------------------------------------------------------------------

def test_100_mib_of_output_keeps_head_and_tail_with_bounded_memory(runbox):
    code = ("import sys\nw=sys.stdout.write\nline='x'*99+'\\n'\n"
            "w('FIRST\\n')\nfor i in range(1048576): w(line)\nw('LAST\\n')")
    # A fresh process measures the peak RSS of runbox and what it waits for.
    probe = ("import resource,subprocess,sys\n"
             "p=subprocess.run(sys.argv[1:],capture_output=True)\n"
             "sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)+'\\n')\n"
             "sys.stdout.write(p.stdout.decode())")
    proc = subprocess.run(["/usr/bin/python3", "-c", probe, runbox.bin, "run", "python", "-c", code,
                           "--json", "--timeout", "120"], capture_output=True, env=runbox.env(),
                          timeout=300)
    peak_line, json_line = proc.stdout.decode().split("\n", 1)
    peak_kb = int(peak_line)
    result = json.loads(json_line)
    assert result["success"], result["error"]
    total = 6 + 1048576 * 100 + 5
    assert result["output"].startswith("FIRST\nxxx")
    assert result["output"].endswith("xxx\nLAST\n")
    assert result["truncated"]["stdout"] > 100 * 1024 * 1024 - 2 * 1024 * 1024
    kept = len(result["output"].encode()) - len(
        f"\n[runbox: {result['truncated']['stdout']} bytes of stdout left out here]\n")
    assert kept + result["truncated"]["stdout"] == total
    assert result["output"].count("left out here]") == 1
    # runbox itself (the largest child so far) stayed far below what was printed.
    assert peak_kb < 64 * 1024, peak_kb


def test_invalid_utf8_and_nul_bytes_never_break_the_json(runbox):
    result = runbox.run("python", "import sys\nsys.stdout.buffer.write(b'a\\xff\\xfeb\\x00c\\xe2\\x82')\n"
                                  "sys.stderr.buffer.write(b'\\xc3\\x28')")
    assert result["output"] == "a\ufffd\ufffdb\x00c\ufffd"
    assert result["error"] == "\ufffd("


def test_stream_mode_emits_events_as_they_happen_then_the_result(runbox):
    code = "echo first; echo err >&2; sleep 2; echo second"
    proc = runbox.popen("run", "bash", "-c", code, "--stream")
    arrivals = []
    for line in proc.stdout:
        arrivals.append((time.time(), json.loads(line)))
    proc.wait(30)
    assert proc.returncode == 0
    events = [e for _, e in arrivals]
    assert events[-1]["type"] == "result" and events[-1]["success"] is True
    assert events[-1]["output"] == "first\nsecond\n"
    out = [(t, e) for t, e in arrivals if e["type"] == "stdout"]
    assert "".join(e["data"] for _, e in out) == "first\nsecond\n"
    assert any(e["type"] == "stderr" and e["data"] == "err\n" for e in events)
    first_time = next(t for t, e in out if "first" in e["data"])
    second_time = next(t for t, e in out if "second" in e["data"])
    assert second_time - first_time > 1.0  # the first line was not held back until the end


def test_live_mode_passes_output_through_and_exits_with_the_programs_code(runbox):
    proc = runbox.cli("run", "bash", "-c", "echo out; echo err >&2; exit 7")
    assert proc.returncode == 7
    assert proc.stdout == b"out\n" and proc.stderr == b"err\n"


def test_live_mode_reports_a_syntax_error_on_stderr(runbox):
    proc = runbox.cli("run", "python", "-c", "if (")
    assert proc.returncode != 0 and b"SyntaxError" in proc.stderr and proc.stdout == b""


# --- sessions ----------------------------------------------------------------------------

@pytest.mark.parametrize("language,write,read", [
    ("python", "open('notes.txt','w').write('kept')", "print(open('notes.txt').read())"),
    ("javascript", "require('fs').writeFileSync('notes.txt','kept')",
     "console.log(require('fs').readFileSync('notes.txt','utf8'))"),
    ("bash", "printf kept > notes.txt", "cat notes.txt; echo"),
])
def test_files_written_in_one_call_are_read_in_the_next(runbox, language, write, read):
    first = runbox.run(language, write, "--session", "s1")
    assert first["success"] and first["session_id"] == "s1"
    second = runbox.run(language, read, "--session", "s1")
    assert second["output"] == "kept\n"


def test_cwd_and_home_are_the_session_directory(runbox):
    result = runbox.run("bash", 'echo "$PWD|$HOME"', "--session", "home")
    pwd, home = result["output"].strip().split("|")
    assert pwd == home


def test_one_off_run_directory_is_gone_afterwards(runbox):
    result = runbox.run("bash", "echo hi > file.txt; pwd")
    assert result["session_id"]
    assert not os.path.exists(runbox.session_dir(result["session_id"]))
    listed = json.loads(runbox.cli("sessions", "list", "--json").stdout)
    assert result["session_id"] not in [s["session_id"] for s in listed]


@pytest.mark.parametrize("bad", ["..", "../etc", "a/b", "/abs", ".hidden", "-rf", "_x", "a b",
                                 "x" * 65, "a\nb", "é", "a;b", "$(id)", "a\\b", "*"])
def test_hostile_session_ids_are_rejected(runbox, bad):
    proc = runbox.cli("run", "bash", "-c", "echo ran", "--session", bad)
    assert proc.returncode == 2
    assert proc.stdout == b""
    message = proc.stderr.decode()
    assert "session id" in message and len(message.strip().splitlines()) == 1
    assert not os.path.exists(os.path.join(runbox.state_dir, "etc"))


def test_longest_valid_session_id_is_accepted(runbox):
    sid = "a" + "b._-" * 15 + "xyz"
    assert len(sid) == 64
    assert runbox.run("bash", "true", "--session", sid)["session_id"] == sid


def test_sessions_list_new_rm_gc(runbox):
    sid = runbox.cli("sessions", "new").stdout.decode().strip()
    assert len(sid) > 8
    runbox.run("bash", "head -c 10000 /dev/zero > f", "--session", sid)
    listed = json.loads(runbox.cli("sessions", "list", "--json").stdout)
    entry = next(s for s in listed if s["session_id"] == sid)
    assert entry["disk_bytes"] >= 10000 and entry["running"] is False
    assert entry["created"] <= entry["last_used"] <= time.time() + 1
    table = runbox.cli("sessions", "list").stdout.decode()
    assert sid in table
    assert runbox.cli("sessions", "rm", sid).returncode == 0
    assert not os.path.exists(runbox.session_dir(sid))
    assert runbox.cli("sessions", "rm", sid).returncode == 2  # gone: a clear error
    runbox.run("bash", "true", "--session", "old")
    time.sleep(2.2)  # last use is kept in whole seconds
    runbox.run("bash", "true", "--session", "fresh")
    proc = runbox.cli("sessions", "gc", "--idle", "1")
    assert proc.returncode == 0 and "removed 1" in proc.stdout.decode()
    assert not os.path.exists(runbox.session_dir("old"))
    assert os.path.exists(runbox.session_dir("fresh"))


def test_two_runs_in_one_session_are_serialized(runbox):
    code = "echo start >> log; sleep 1; echo end >> log"
    procs = [runbox.popen("run", "bash", "-c", code, "--session", "ser", "--json")
             for _ in range(2)]
    for p in procs:
        p.wait(30)
        assert p.returncode == 0
    log = runbox.run("bash", "cat log", "--session", "ser")["output"]
    assert log == "start\nend\nstart\nend\n"


def test_session_rm_during_a_run_refuses_and_gc_skips_it(runbox):
    proc = runbox.popen("run", "bash", "-c", "sleep 2", "--session", "busy", "--json")
    time.sleep(0.7)
    rm = runbox.cli("sessions", "rm", "busy")
    assert rm.returncode == 2 and b"busy" in rm.stderr
    gc = runbox.cli("sessions", "gc", "--idle", "0.001")
    assert gc.returncode == 0
    assert os.path.exists(runbox.session_dir("busy"))
    proc.wait(30)
    assert runbox.cli("sessions", "rm", "busy", "--wait", "5").returncode == 0


def test_session_removal_never_follows_planted_links(runbox, tmp_path):
    canary = tmp_path / "canary"
    (canary / "inner").mkdir(parents=True)
    (canary / "precious.txt").write_text("keep me")
    (canary / "inner" / "deep.txt").write_text("keep me too")
    code = f"""
ln -s {canary} dirlink
ln -s {canary}/precious.txt filelink
mkdir -p sub/deeper && ln -s {canary} sub/deeper/link
ln -s {canary}/inner sub/innerlink
mkdir locked && ln -s {canary} locked/link && chmod 000 locked
"""
    assert runbox.run("bash", code, "--session", "links")["success"]
    assert runbox.cli("sessions", "rm", "links").returncode == 0
    assert not os.path.exists(runbox.session_dir("links"))
    assert (canary / "precious.txt").read_text() == "keep me"
    assert (canary / "inner" / "deep.txt").read_text() == "keep me too"
    # The same through a one-off run's automatic removal.
    assert runbox.run("bash", code)["success"]
    assert (canary / "precious.txt").read_text() == "keep me"
    assert (canary / "inner" / "deep.txt").read_text() == "keep me too"


# --- environment, stdin, descriptors -----------------------------------------------------

def test_environment_is_scrubbed_and_env_values_are_added(runbox):
    result = runbox.run("bash", "env", "--env", "GREETING=hello world",
                        env={"HOST_SECRET": "leaked"})
    names = dict(line.split("=", 1) for line in result["output"].splitlines() if "=" in line)
    assert names["GREETING"] == "hello world"
    assert "HOST_SECRET" not in names and "RUNBOX_STATE_DIR" not in names
    assert names["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    # Set, so that bash need not look its user up to set it (given.c); a request's replaces it.
    assert names["SHELL"] == "/bin/bash"
    assert runbox.run("bash", "echo $SHELL", "--env", "SHELL=/bin/sh")["output"] == "/bin/sh\n"


def test_the_benchmark_gives_bare_programs_the_environment_runbox_gives(runbox):
    """bench/common.py's program_env is the environment of the benchmark's bare, floor and
    bubblewrap programs, and must be runbox's (execution/given.c): a variable on one side only
    (SHELL spares bash a user lookup) would make every ratio compare unlike starts."""
    import importlib.util
    from conftest import ROOT
    spec = importlib.util.spec_from_file_location("bench_common",
                                                  os.path.join(ROOT, "bench", "common.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    given = json.loads(runbox.run("python", "import os, json\nprint(json.dumps(dict(os.environ)))")
                       ["output"])
    assert given.pop("RUNBOX_SESSION_ID")
    assert given == bench.program_env(given["HOME"])


@pytest.mark.parametrize("bad", ["NOEQUALS", "1A=x", "A-B=x", "=x", "HOME=/", "PWD=/"])
def test_bad_env_entries_are_refused(runbox, bad):
    proc = runbox.cli("run", "bash", "-c", "true", "--env", bad)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_stdin_is_dev_null_unless_input_is_given(runbox, tmp_path):
    assert runbox.run("bash", "cat; echo end")["output"] == "end\n"
    data = tmp_path / "in.txt"
    data.write_text("line one\nline two\n")
    result = runbox.run("python", "import sys\nprint(sys.stdin.read().upper(), end='')",
                        "--input", str(data))
    assert result["output"] == "LINE ONE\nLINE TWO\n"


def test_no_file_descriptors_leak_into_the_program(runbox):
    code = "import os\nprint(sorted(int(f) for f in os.listdir('/proc/self/fd')))"
    fds = json.loads(runbox.run("python", code)["output"])
    # 3 is listdir's own; 4 is Python's channel of rich outputs (test_one_off_plots.py).
    assert fds == [0, 1, 2, 3, 4], fds
    # No pipeline: bash holds a pipe's ends for a moment while it starts one.
    bash = runbox.run("bash", "ls /proc/$$/fd")
    assert bash["output"].split() == ["0", "1", "2"]


# --- CLI contract ------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["run"], ["run", "python"], ["run", "cobol", "-c", "x"], ["run", "python", "-c"],
    ["run", "python", "-c", "1", "--bogus"], ["run", "python", "-c", "1", "extra"],
    ["bogus"], ["--bogus"], ["sessions", "bogus"], ["sessions", "rm"],
    ["run", "python", "/no/such/file.py"], ["sessions", "gc", "--idle", "x"],
])
def test_usage_errors_print_one_line_and_exit_2(runbox, args):
    proc = runbox.cli(*args)
    assert proc.returncode == 2, (args, proc.stderr)
    assert len(proc.stderr.decode().strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(b"runbox: ")


def test_code_over_the_size_limit_is_refused(runbox):
    proc = runbox.cli("run", "python", "-", "--json", input=b"#" * (1024 * 1024 + 1))
    assert proc.returncode == 2 and b"limit" in proc.stderr


def test_code_from_a_file_and_from_stdin(runbox, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print(6*7)")
    assert json.loads(runbox.cli("run", "python", str(script), "--json").stdout)["output"] == "42\n"
    proc = runbox.cli("run", "python", "-", "--json", input=b"print(6*7)")
    assert json.loads(proc.stdout)["output"] == "42\n"


def test_help_and_version(runbox):
    for args in (["--help"], ["run", "--help"], ["sessions", "--help"]):
        proc = runbox.cli(*args)
        assert proc.returncode == 0 and b"usage:" in proc.stdout
    assert runbox.cli("--version").stdout.startswith(b"runbox ")


def test_state_dir_option_and_variable(runbox, tmp_path):
    other = tmp_path / "other-state"
    proc = runbox.cli("--state-dir", str(other), "run", "bash", "-c", "true", "--session", "x")
    assert proc.returncode == 0
    assert (other / "sessions" / "x").is_dir()
    assert runbox.cli("--state-dir", str(other), "sessions", "rm", "x").returncode == 0


def test_sigterm_to_runbox_kills_the_execution_and_cleans_up(runbox):
    marker = "4545.4545"
    proc = runbox.popen("run", "bash", "-c", f"sleep {marker}", "--json")
    deadline = time.time() + 10
    while not processes_matching(marker) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    result = json.loads(out)
    assert result["cancelled"] is True and result["success"] is False
    assert wait_gone(marker) == []
    assert not os.path.exists(runbox.session_dir(result["session_id"]))


def test_runbox_check_runs_each_language_in_the_sandbox_and_says_its_version(runbox):
    # The versions are those of the interpreters of the root the sandbox gets (the host's, or
    # the default image's tree when the suite runs on an image), asked outside the sandbox: the
    # check really ran each one (through its bootstrap) rather than looking for the file.
    root = default_image_tree()
    outside = ["chroot", root] if root != "/" else []

    def ask(*argv):
        return subprocess.run([*outside, *argv], capture_output=True, text=True).stdout.strip()

    versions = {
        "python": ask("/usr/bin/python3", "-c", "import platform; print(platform.python_version())"),
        "javascript": ask("/usr/bin/node", "--version"),
        "bash": ask("/bin/bash", "-c", "echo $BASH_VERSION"),
    }
    checks = {c["name"]: c for c in json.loads(runbox.cli("check", "--json").stdout)["checks"]}
    for language, version in versions.items():
        assert version and checks[language]["ok"], checks[language]
        assert f" {version} runs in the sandbox" in checks[language]["detail"], checks[language]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting cgroup hierarchies takes root")
def test_cgroups_away_from_their_usual_places_are_found_through_the_mount_table(runbox):
    """runbox finds the host's cgroups where the usual layouts put them (/sys/fs/cgroup) without
    reading the mount table, whose length grows with the host's mounts; where they are not, it
    reads the table. Here, in a mount namespace of the test's own, every cgroup hierarchy of the
    host is mounted again below a directory of the test's and /sys/fs/cgroup is left an empty
    tmpfs: runbox check finds them there, with the limits it proves enforced as before."""
    # short: the check's detail, which lists every hierarchy's path, has a bounded length
    tmp_path = pathlib.Path(tempfile.mkdtemp(prefix="cg", dir="/tmp"))
    def check(prefix=()):
        proc = subprocess.run([*prefix, runbox.bin, "check", "--json"], capture_output=True,
                              text=True, env=runbox.env(), timeout=120)
        assert proc.stdout, proc.stderr
        return {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["cgroups"]

    usual = check()
    moves = []
    for line in open("/proc/self/mountinfo"):
        kind, _, options = line.partition(" - ")[2].split()[:3]
        wanted = [o for o in options.split(",") if o not in ("rw", "ro")]
        if kind not in ("cgroup", "cgroup2") or any(o.startswith("name=") for o in wanted):
            continue
        place = tmp_path / f"h{len(moves)}"
        place.mkdir()
        moves.append(f"mount -t {kind} -o {','.join(wanted) or 'defaults'} {kind} {place}")
    assert moves, "this host has no cgroup mounts"
    remove_places = lambda: shutil.rmtree(tmp_path, ignore_errors=True)  # empty mount points
    script = ("set -e; mount --make-rprivate /; " + "; ".join(moves) +
              "; umount -R -l /sys/fs/cgroup; mount -t tmpfs none /sys/fs/cgroup; exec \"$@\"")
    try:
        moved = check(("/usr/bin/unshare", "-m", "/bin/sh", "-c", script, "sh"))
    finally:
        remove_places()
    assert moved["ok"] == usual["ok"], (usual, moved)
    if usual["ok"]:
        assert str(tmp_path / "h") in moved["detail"] and "/sys/fs/cgroup/" not in moved["detail"]
        # the same controllers, the same limits proven
        assert moved["detail"].split(" (")[0] == usual["detail"].split(" (")[0], (usual, moved)
        for controller in ("memory", "pids", "cpu", "cpuacct", "freezer"):
            has = lambda d: f" {controller};" in d or f" {controller} " in d
            assert has(moved["detail"]) == has(usual["detail"]), (controller, usual, moved)


def test_runbox_check_says_whether_a_paused_sandboxs_processes_can_be_frozen(runbox):
    """Where runbox makes cgroups and the host has a freezer (cgroup v2, or a v1 freezer
    hierarchy) a paused E2B sandbox's commands are frozen; elsewhere (an ordinary user on cgroup
    v1 makes none) the check says that a pause stops them."""
    checks = {c["name"]: c for c in json.loads(runbox.cli("check", "--json").stdout)["checks"]}
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    v1_freezer = os.path.exists("/sys/fs/cgroup/freezer/tasks")
    if checks["cgroups"]["ok"] and (v2 or v1_freezer):
        assert checks["freezer"]["ok"], checks["freezer"]
        assert "are frozen, and go on when it resumes" in checks["freezer"]["detail"]
    else:
        assert not checks["freezer"]["ok"], checks["freezer"]
        assert "are stopped" in checks["freezer"]["detail"], checks["freezer"]
