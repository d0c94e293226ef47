"""Prepared sandboxes: `runbox serve` keeps a pool of sandboxes made ahead, with the interpreter
started and waiting, and serves one-off executions from it. Each serves one execution and is
destroyed; what a program sees is what a cold start shows it; a burst larger than the pool falls
back to cold starts; killing the server leaves nothing of the pool behind."""
import concurrent.futures
import contextlib
import json
import os
import re
import signal
import subprocess
import tarfile
import threading
import time

import pytest

from http_helpers import RUNBOX, Server, e2e, execution_cgroups

sandbox_processes = e2e.sandbox_processes


def pool_figures(server):
    """The pool's lines of /metrics, as {name-with-labels: value}."""
    text = server.request("GET", "/metrics").body.decode()
    return {name: float(value) for name, value in
            re.findall(r"^(runbox_pool_\S+) (\S+)$", text, re.M)}


def wait_ready(server, count=1, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pool_figures(server).get('runbox_pool_sandboxes{state="ready"}', 0) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"the pool never had {count} ready: {pool_figures(server)}")


def pooled_run(server, attempts=40, **fields):
    """Runs until a prepared sandbox served the execution (the first of a kind may start cold
    while its shelf fills); returns that result."""
    for _ in range(attempts):
        result = server.execute(**fields)
        if result["pooled"]:
            return result
        time.sleep(0.2)
    raise AssertionError(f"no prepared sandbox served {fields}: {pool_figures(server)}")


PROBES = {
    "python": r"""
import json, os, sys
def fds():
    out = {}
    for fd in sorted(os.listdir('/proc/self/fd'), key=int):
        try:
            out[fd] = re.sub(r'\[\d+\]', '', os.readlink(f'/proc/self/fd/{fd}'))
        except OSError:
            pass
    return out
import re
status = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
print(json.dumps({
    'argv': sys.argv, 'cwd': os.getcwd(), 'umask': os.umask(0o22), 'env': dict(os.environ),
    'limits': open('/proc/self/limits').read(), 'fds': fds(),
    'ids': [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()],
    'status': {k: status[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb',
                                              'NoNewPrivs', 'Seccomp', 'Seccomp_filters')},
    'pids': [os.getpid(), os.getppid(), os.getsid(0), os.getpgid(0)],
    'path': sys.path, 'modules': sorted(k for k in sys.modules if not k.startswith('_')),
    'main': sorted(globals()), 'flags': str(sys.flags), 'encoding': sys.stdout.encoding,
    'hostname': os.uname().nodename, 'cgroup': open('/proc/self/cgroup').read(),
    'mounts': sorted(l.split()[4] for l in open('/proc/self/mountinfo')),
    'home': sorted(os.listdir('.')),
}, sort_keys=True))
""",
    "javascript": r"""
const fs = require('fs');
const fds = {};
for (const fd of fs.readdirSync('/proc/self/fd')) {
  try { fds[fd] = fs.readlinkSync('/proc/self/fd/' + fd).replace(/\[\d+\]/, ''); } catch {}
}
const status = {};
for (const l of fs.readFileSync('/proc/self/status', 'utf8').split('\n')) {
  const [k, v] = l.split(':');
  if (/^(Cap|NoNewPrivs|Seccomp)/.test(k)) status[k] = v.trim();
}
console.log(JSON.stringify({
  argv: process.argv, execArgv: process.execArgv, cwd: process.cwd(), umask: process.umask(),
  env: process.env, limits: fs.readFileSync('/proc/self/limits', 'utf8'), status,
  ids: [process.getuid(), process.geteuid(), process.getgid(), process.getgroups()],
  pids: [process.pid, process.ppid], paths: module.paths,
  globalPaths: require('module').globalPaths, main: require.main === module,
  mounts: fs.readFileSync('/proc/self/mountinfo', 'utf8').trim().split('\n')
    .map(l => l.split(' ')[4]).sort(),
  home: fs.readdirSync('.').sort(),
}));
""",
    "bash": r"""
echo "cwd=$(pwd) umask=$(umask) pid=$$ ppid=$PPID opts=$- lineno=$LINENO"
ulimit -a
shopt
set -o
trap -p
declare -p | grep -v -e '^declare -[-a-zA-Z]* BASH_EXECUTION_STRING=' -e ' _=' -e ' BASHPID=' \
  -e ' RANDOM=' -e ' SRANDOM=' -e ' EPOCH' -e ' SECONDS=' -e ' RUNBOX_SESSION_ID='
for fd in /proc/self/fd/*; do echo "$fd $(readlink "$fd" | sed 's/\[[0-9]*\]//')"; done
grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status
awk '{print $5}' /proc/self/mountinfo | sort
ls -A
""",
}


def without_session_id(result, language, session_id):
    """The probe's output with the one-off session's id (random each run) taken out."""
    text = result["output"]
    return text.replace(result["session_id"], "<session>") if session_id is None else text


@contextlib.contextmanager
def cold_and_prepared(tmp_path):
    """Two servers: one that starts every execution cold (--pool 0), one with its pool."""
    cold_dir, warm_dir = tmp_path / "cold", tmp_path / "warm"
    cold_dir.mkdir()
    warm_dir.mkdir()
    cold = Server(cold_dir, global_args=("--pool", "0"))
    warm = Server(warm_dir)
    try:
        yield cold, warm
    finally:
        for server in (cold, warm):
            server.stop()
            server.cleanup()


@pytest.mark.parametrize("language", ["python", "javascript", "bash"])
@pytest.mark.parametrize("session_id", [None, "pool-named"])
def test_a_prepared_sandbox_shows_the_program_exactly_what_a_cold_start_does(
        tmp_path, language, session_id):
    """Field by field: argv, environment (the request's own variable and the session's id
    included), cwd, umask, limits, descriptors, credentials, capabilities, seccomp, PIDs,
    interpreter state, mounts, the home's files."""
    with cold_and_prepared(tmp_path) as (cold, warm):
        request = dict(language=language, code=PROBES[language], network=False,
                       env={"RUNBOX_TEST_VALUE": "a b=c"}, memory_mb=300)
        if session_id:
            request["session_id"] = session_id
            for server in (cold, warm):  # the same files in both sessions
                server.execute(language="bash", code="echo kept > kept.txt; mkdir -p sub",
                               session_id=session_id, network=False)
        cold_result = cold.execute(**request)
        warm_result = pooled_run(warm, **request)
        assert cold_result["pooled"] is False
        assert cold_result["success"] and warm_result["success"], (cold_result, warm_result)
        cold_view = without_session_id(cold_result, language, session_id)
        warm_view = without_session_id(warm_result, language, session_id)
        if language != "bash":
            cold_view, warm_view = json.loads(cold_view), json.loads(warm_view)
            assert cold_view["env"]["RUNBOX_TEST_VALUE"] == "a b=c"
            for key in cold_view:
                assert warm_view[key] == cold_view[key], key
        assert warm_view == cold_view
        assert warm_result["error"] == cold_result["error"] == ""


# Values a shell would act on, names the bootstrap uses itself (__rbx_code is the code's, which
# the environment must not replace, and is gone before the code runs), and code that is long (a
# prepared sandbox's bash reads it from a socket, in blocks: bash_bootstrap in runtime.c) and not
# ASCII (counted in bytes whatever the locale).
HOSTILE_ENV = {
    "QUOTED": "it's 'quoted' \\'\"",
    "SUBSTITUTED": "$(echo ran) `echo ran` ${HOME}",
    "LINES": "one\ntwo\n\nexport INJECTED=1\n'",
    "__rbx_code": "echo replaced",
    "__rbx_env": "0",
}
LONG_CODE = ("# " + "é€" * 30000 + "\n") + """
for name in QUOTED SUBSTITUTED LINES __rbx_code __rbx_env INJECTED; do
  printf '%s=[%s]\\n' "$name" "${!name-unset}"
done
echo "args=$# pwd=$PWD"
echo "é€"
"""


def test_hostile_environment_values_and_long_code_reach_bash_as_given_cold_and_prepared(
        tmp_path):
    seen = {**HOSTILE_ENV, "__rbx_code": "unset"}
    expected = "".join(f"{name}=[{value}]\n" for name, value in seen.items()) + \
        "INJECTED=[unset]\nargs=0 pwd=/home/user\né€\n"
    with cold_and_prepared(tmp_path) as (cold, warm):
        request = dict(language="bash", code=LONG_CODE, network=False, env=HOSTILE_ENV)
        cold_result = cold.execute(**request)
        warm_result = pooled_run(warm, **request)
        assert cold_result["pooled"] is False
        for result in (cold_result, warm_result):
            assert result["success"], result
            assert result["output"] == expected
            assert result["error"] == ""


MARK = "rbx-pool-marker"
LEAVE_MARKERS = f"""
for place in /home/user /tmp /dev/shm; do
  for old in "$place"/{MARK}-*; do [ -e "$old" ] && echo "SEEN $old"; done
  echo "$1" > "$place/{MARK}-$1"
done
for p in /proc/[0-9]*; do
  grep -qa {MARK} "$p/cmdline" 2>/dev/null && echo "SEEN process $(tr '\\0' ' ' < "$p/cmdline")"
done
( exec -a "{MARK}-$1" sleep 600 ) &
export RBX_POOL_MARKER="$1"
echo done
"""


def test_a_prepared_sandbox_is_never_reused(server):
    """Each execution leaves a marker in every writable place, a process still running and an
    exported variable; no later execution sees any of them."""
    wait_ready(server)
    # Until 6 prepared sandboxes have served, each after others left their
    # marks: the shelf for network off fills on demand, at the machine's
    # pace, and a fixed count of runs could fall short under load.
    pooled = 0
    for i in range(60):
        code = '[ -n "${RBX_POOL_MARKER:-}" ] && echo "SEEN variable"\n' + \
            LEAVE_MARKERS.replace("$1", str(i))
        result = server.execute(language="bash", code=code, network=False, timeout=20)
        assert result["output"].endswith("done\n"), result
        assert "SEEN" not in result["output"], result
        pooled += result["pooled"]
        if pooled >= 6 and i >= 11:
            break
        time.sleep(0.15)
    assert pooled >= 6, pool_figures(server)
    # ...and the processes they left died with their sandboxes.
    deadline = time.monotonic() + 10
    while e2e.processes_matching(MARK) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not e2e.processes_matching(MARK)


def test_a_pooled_answer_finds_none_of_the_execution_s_processes_alive(server):
    """A prepared sandbox's execution is answered once its last process has ended, without
    waiting for init's exit to tear its namespaces down (rbx_exit_report.last). The answer must
    still find none of its processes alive: neither those the program waited for nor those it
    left running, which only init's exit kills. Looked for at once, with no wait. (Init's claim
    itself, which an answer a few hundred microseconds early would not show here, is
    tests/unit/test_reaper.c's.)"""
    marker = "5151.5151"
    cases = [f"(exec -a rbx-waited-{marker} sleep 0.05) & wait; echo done",
             f"(exec -a rbx-left-{marker} sleep 600) & echo done",
             f"(setsid bash -c 'exec -a rbx-away-{marker} sleep 600' &); echo done",
             f"trap '' TERM; (trap '' TERM; exec -a rbx-deaf-{marker} sleep 600) & echo done"]
    for code in cases:
        for _ in range(3):
            result = pooled_run(server, language="bash", network=False, code=code)
            assert result["output"] == "done\n", result
            assert e2e.processes_matching(marker) == [], code


def test_a_burst_larger_than_the_pool_falls_back_to_cold_starts_and_loses_nothing(
        start_server):
    server = start_server("--max-running", "8", global_args=("--pool", "2"))
    # Sandboxes wait before the burst with the network executions get by
    # default, as the burst's do: at least one serves it however slow the
    # machine (the pool may still be moving one of the two between shelves;
    # sandboxes made during the burst may serve more of it, or none). With
    # network off, the burst found empty shelves: under ASan in CI the
    # sandboxes made for it came too late to serve any.
    wait_ready(server, 2)

    def one(i):
        language = ("python", "bash", "javascript")[i % 3]
        code = {"python": f"print('burst', {i})", "bash": f"echo burst {i}",
                "javascript": f"console.log('burst', {i})"}[language]
        return i, server.execute(language=language, code=code, timeout=60)

    with concurrent.futures.ThreadPoolExecutor(max_workers=24) as workers:
        results = list(workers.map(one, range(48)))
    for i, result in results:
        assert result["success"] and result["output"] == f"burst {i}\n", result
    served = sum(r["pooled"] for _, r in results)
    figures = pool_figures(server)
    assert figures['runbox_pool_takes_total{served="false"}'] >= 1, figures
    assert figures['runbox_pool_takes_total{served="true"}'] == served, figures
    assert served >= 1 and served < len(results), served
    # The operator's cap holds: never more than two prepared sandboxes at once.
    assert figures['runbox_pool_max'] == 2
    assert figures['runbox_pool_sandboxes{state="ready"}'] + \
        figures['runbox_pool_sandboxes{state="preparing"}'] <= 2, figures


def test_the_pool_grows_with_demand_and_shrinks_when_idle(start_server):
    server = start_server(global_args=("--pool", "6", "--pool-idle", "1"))
    wait_ready(server, 3)
    start = pool_figures(server)["runbox_pool_target"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as workers:
        list(workers.map(lambda i: server.execute(language="bash", code="sleep 0.3",
                                                  network=False), range(12)))
    grown = pool_figures(server)["runbox_pool_target"]
    assert grown > start, (start, grown)
    deadline = time.monotonic() + 30
    while pool_figures(server)["runbox_pool_target"] > start and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pool_figures(server)["runbox_pool_target"] == start


def test_idle_pool_memory_is_reported_and_capped(start_server):
    server = start_server(global_args=("--pool-memory", "1M"))
    time.sleep(1.5)
    figures = pool_figures(server)
    assert figures["runbox_pool_memory_cap_bytes"] == 1 << 20
    # One sandbox may be made before the cap is known to be reached; no more.
    assert figures['runbox_pool_sandboxes{state="ready"}'] <= 1, figures
    roomy = start_server(global_args=("--pool-memory", "1G"))
    wait_ready(roomy, 3)
    time.sleep(0.5)
    figures = pool_figures(roomy)
    assert figures["runbox_pool_idle_memory_bytes"] > 1 << 20, figures


def test_the_request_s_limits_timeout_and_classification_hold_in_a_prepared_sandbox(server):
    memory = pooled_run(server, language="python", network=False, memory_mb=64,
                        code="x = bytearray(200 * 1024 * 1024); print('not reached')")
    assert memory["error_type"] == "MemoryError" and "not reached" not in memory["output"], memory
    timeout = pooled_run(server, language="python", network=False, timeout=1,
                         code="print('started', flush=True)\nwhile True: pass")
    assert timeout["error_type"] == "TimeoutError" and timeout["timed_out"], timeout
    assert timeout["output"] == "started\n"
    syntax = pooled_run(server, language="python", network=False,
                        code="print('ran')\nif True print(2)")
    assert syntax["error_type"] == "SyntaxError" and syntax["output"] == "", syntax
    cpu = pooled_run(server, language="bash", network=False, code="echo hi")
    assert cpu["cpu_ms"] < 50, cpu  # the interpreter's start is not the execution's
    js = pooled_run(server, language="javascript", network=False,
                    code="throw new TypeError('boom')")
    assert js["exception"] == "TypeError" and js["exit_code"] == 1, js


def test_what_a_prepared_sandbox_cannot_give_exactly_starts_cold(server):
    wait_ready(server)
    cases = [dict(stdin="from stdin\n", code="import sys; print(sys.stdin.read(), end='')"),
             dict(env={"PYTHONHASHSEED": "0"},
                  code="import os; print(os.environ['PYTHONHASHSEED'])"),
             dict(egress_allow=[], code="print('narrowed')")]
    for extra in cases:
        result = server.execute(language="python", network=False, **extra)
        assert result["success"] and not result["pooled"], result
    assert server.execute(language="python", network=False, stdin="x",
                          code="import sys; print(sys.stdin.read())")["output"] == "x\n"


def test_requirements_are_served_by_sandboxes_prepared_with_their_environment(
        start_server, tmp_path):
    """The first request of an environment starts cold (and installs it); the pool then keeps
    sandboxes with that environment bound in, which serve the next ones exactly as a cold
    start would; a request without requirements never gets one of them, and the shelf goes
    (releasing the environment) once it is idle."""
    with e2e.serve_package_index(tmp_path / "index", "rbxpool", "1.0",
                                 "WHERE = 'from the pooled environment'\n") as index:
        env = {"PIP_INDEX_URL": index["url"], "PIP_NO_CACHE_DIR": "1"}
        server = start_server(env=env, global_args=("--install-network", "host",
                                                    "--pool-idle", "1"))
        probe = ("import sys, rbxpool; print(rbxpool.WHERE); print(sys.executable); "
                 "print(sys.prefix)")
        fields = dict(language="python", network=False, code=probe,
                      requirements=["rbxpool==1.0"])
        first = server.execute(**fields)
        assert first["success"] and not first["pooled"], first
        assert first["install"]["reused"] is False
        pooled = pooled_run(server, **fields)
        assert pooled["output"] == first["output"], (first, pooled)
        assert pooled["install"]["reused"] is True
        assert pooled["install"]["environment"] == first["install"]["environment"]
        assert pool_figures(server)["runbox_pool_env_shelves"] == 1
        # No sandbox of that environment serves a request without it.
        plain = pooled_run(server, language="python", network=False,
                           code="import importlib.util as u; print(u.find_spec('rbxpool'))")
        assert plain["output"] == "None\n", plain
        # In use while its sandboxes wait: `envs rm` leaves it; idle, the shelf goes.
        listed = json.loads(server.cli.cli("envs", "list", "--json").stdout)
        assert [e["in_use"] for e in listed] == [True], listed
        deadline = time.monotonic() + 30
        while pool_figures(server)["runbox_pool_env_shelves"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pool_figures(server)["runbox_pool_env_shelves"] == 0
        listed = json.loads(server.cli.cli("envs", "list", "--json").stdout)
        assert [e["in_use"] for e in listed] == [False], listed


def test_a_session_s_files_reach_a_prepared_sandbox_and_stay(server):
    wait_ready(server)
    first = pooled_run(server, language="python", network=False, session_id="pool-files",
                       code="open('data.txt', 'w').write('one\\n'); print('wrote')")
    assert first["output"] == "wrote\n"
    second = pooled_run(server, language="bash", network=False, session_id="pool-files",
                        code="cat data.txt; pwd; ls -A")
    assert second["output"] == "one\n/home/user\ndata.txt\n", second
    listed = server.request("GET", "/v1/sessions/pool-files/files").json()
    assert [f["path"] for f in listed["files"]] == ["data.txt"], listed


def test_the_network_and_the_egress_policy_hold_in_a_prepared_sandbox(server):
    address = e2e.public_address()
    result = pooled_run(server, language="bash", network=True,
                        code="exec 3<>/dev/tcp/127.0.0.1/9 || echo refused-loopback")
    assert result["network"] is True
    assert "refused-loopback" in result["output"], result
    host = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    if host:
        result = pooled_run(server, language="bash", network=True,
                            code=f"exec 3<>/dev/tcp/{host[0]}/9 || echo refused")
        assert "refused" in result["output"] and result["egress_denied"] >= 1, result
    assert address


@pytest.mark.serial
def test_killing_the_server_leaves_no_prepared_sandbox_behind(tmp_path):
    server = Server(tmp_path, global_args=("--pool", "6"))
    wait_ready(server, 3)
    pooled_run(server, language="bash", network=False, code="echo warm")
    wait_ready(server, 3)
    before_cgroups = execution_cgroups()
    scratch = os.path.join(server.state_dir, "sessions", ".scratch")
    before_scratch = set(os.listdir(scratch)) if os.path.isdir(scratch) else set()
    assert sandbox_processes(), "the pool's interpreters should be running"
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    deadline = time.monotonic() + 10
    while (sandbox_processes() or e2e.live_helpers()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not sandbox_processes() and not e2e.live_helpers()
    # The next runbox on the state directory sweeps what the killed one could not remove.
    again = Server(tmp_path, global_args=("--pool", "0"))
    try:
        assert again.healthy()
        deadline = time.monotonic() + 10
        while before_cgroups & execution_cgroups() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not before_cgroups & execution_cgroups()
        left = set(os.listdir(scratch)) if os.path.isdir(scratch) else set()
        assert not before_scratch & left, before_scratch & left
    finally:
        again.stop()
        again.cleanup()


@pytest.mark.parametrize("args,message", [
    (("--pool", "-1"), "--pool needs how many prepared sandboxes"),
    (("--pool", "many"), "--pool needs"),
    (("--pool", "1001"), "0 (off) to 1000"),
    (("--pool",), "--pool needs"),
    (("--pool-memory", "0"), "--pool-memory needs a size of at least 1M"),
    (("--pool-memory", "lots"), "--pool-memory needs"),
    (("--pool-idle", "0"), "--pool-idle needs"),
    (("--pool-idle", "soon"), "--pool-idle needs"),
])
def test_bad_pool_options_are_refused_before_listening(tmp_path, args, message):
    run = subprocess.run([RUNBOX, "--state-dir", str(tmp_path / "s"), *args, "serve",
                          "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 2, run
    assert message in run.stderr, run.stderr


# --- a sandbox is offered only once its interpreter waits ----------------------------------

SLOW_START_S = 4


def _slow_bash_image(tmp_path):
    """An image whose bash takes SLOW_START_S seconds to start: /bin/bash is a script that
    sleeps, then runs the real bash (the host's, with its libraries)."""
    tree = e2e.host_programs_tree(str(tmp_path / "tree"), ("/usr/bin/bash", "/usr/bin/sleep"))
    if not os.path.lexists(tree + "/bin"):
        os.symlink("usr/bin", tree + "/bin")
    os.rename(tree + "/usr/bin/bash", tree + "/usr/bin/bash-real")
    with open(tree + "/usr/bin/bash", "w") as f:
        f.write(f"#!/usr/bin/bash-real\n/usr/bin/sleep {SLOW_START_S}\n"
                "exec /usr/bin/bash-real \"$@\"\n")
    os.chmod(tree + "/usr/bin/bash", 0o755)
    archive = str(tmp_path / "slow.tar")
    with tarfile.open(archive, "w") as tar:
        tar.add(tree, arcname=".")
    return archive


def test_a_sandbox_is_offered_only_once_its_interpreter_waits(start_server, tmp_path):
    """The pool counts a sandbox as ready when its interpreter has started and waits for code
    (the bootstrap says so), not when its process is made: an image's interpreter may take long
    to start (Debian 13's Node.js takes 100 ms and more), and an execution handed a sandbox
    still starting would pay for it. Here bash takes seconds to start: the sandbox is preparing
    all that time, and the execution it then serves pays none of it."""
    if os.geteuid() != 0:
        pytest.skip("importing an image needs root")
    store = str(tmp_path / "store")
    archive = _slow_bash_image(tmp_path)
    imported = subprocess.run([RUNBOX, "--state-dir", str(tmp_path / "import-state"), "--images",
                               store, "images", "import", "slow", archive],
                              capture_output=True, timeout=120)
    subprocess.run([RUNBOX, "--state-dir", str(tmp_path / "import-state"), "storage", "unmount"],
                   capture_output=True, timeout=60)
    assert imported.returncode == 0, imported.stderr
    started = time.monotonic()
    server = start_server(global_args=("--images", store, "--default-image", "slow"))
    wait_ready(server, seconds=60)
    waited = time.monotonic() - started
    assert waited >= SLOW_START_S - 0.5, \
        f"a sandbox was offered {waited:.1f} s after start, before its bash could have started"
    result = server.execute(language="bash", code="echo hi")
    assert result["success"] and result["output"] == "hi\n", result
    assert result["pooled"] and result["image"] == "slow", result
    # Its bash had started: the execution did not wait for the seconds of its start.
    assert result["duration_ms"] < SLOW_START_S * 1000 / 2, result


def relays_of(pid):
    """The live runbox-net processes whose parent is pid."""
    found = []
    for helper in e2e.live_helpers():
        try:
            with open(f"/proc/{helper}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(helper)
        except (OSError, ValueError):
            pass
    return found


# The first frame wakes runbox-net (it starts on a sandbox's first frame, about 3 ms); the
# program has ended by then, so its sandbox is stopped while its relay is being started. The
# frame goes to the gateway, the host's loopback, which runbox-net never reaches: nothing
# leaves the machine (the egress policy is opened to that network for it).
FRAME_THEN_EXIT = "echo x > /dev/udp/10.0.2.2/9 && echo sent"


@pytest.mark.skipif(os.geteuid() != 0, reason="the network needs root")
def test_sandboxes_that_end_while_their_relay_starts_leave_no_relay_behind(start_server):
    """Each of these executions ends while the relay its first frame woke is being started: a
    stop that did not wait for that start would free what the start then writes to (the
    ASan stage reports it; a mutant without the wait failed there in every run) and leave the
    relay unstopped, in a server that lives on."""
    server = start_server(global_args=("--egress-allow", "10.0.2.0/24"))

    def one(_):
        return server.execute(language="bash", code=FRAME_THEN_EXIT, network=True)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(24)))
    assert all(r["success"] and r["output"] == "sent\n" for r in results), results
    assert any(r["network"] for r in results), results
    deadline = time.monotonic() + 10
    while relays_of(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert relays_of(server.proc.pid) == []
    assert server.healthy()


V1_RUNBOX_DIRS = [f"/sys/fs/cgroup/{c}/runbox" for c in ("cpu", "cpuacct", "memory", "pids")]


@pytest.mark.serial
@pytest.mark.skipif(os.geteuid() != 0 or not all(
    os.path.exists(os.path.join(os.path.dirname(d), "tasks")) for d in V1_RUNBOX_DIRS),
    reason="cgroup v1 hierarchies of cpu, cpuacct, memory and pids, as root")
def test_a_server_makes_its_cgroup_parents_again_when_they_were_removed(start_server):
    """A server makes (or finds) each hierarchy's runbox directory once, not once an
    execution; one an operator removed while it runs is made again by the next execution,
    which is limited as before."""
    server = start_server(global_args=("--pool", "0"))
    assert server.execute(language="bash", code="echo one")["output"] == "one\n"
    removed = []
    for d in V1_RUNBOX_DIRS:
        try:
            os.rmdir(d)
            removed.append(d)
        except OSError:  # busy: another runbox's execution has its cgroup there
            pass
    if not removed:
        pytest.skip("every runbox cgroup directory is in use by another runbox")
    result = server.execute(language="bash", code="echo two")
    assert result["success"] and result["output"].endswith("two\n"), result
    assert all(os.path.isdir(d) for d in removed), removed



def cgroup_counts(server):
    text = server.request("GET", "/metrics").body.decode()
    return {event: int(value) for event, value in
            re.findall(r'^runbox_cgroups_total\{event="(\w+)"\} (\d+)$', text, re.M)}


def memory_cgroups_of(pid):
    """The memory-controller directories of a server's executions' cgroups, with what each
    holds now (bytes)."""
    found = {}
    for d in execution_cgroups():
        for name in ("memory.usage_in_bytes", "memory.current"):
            if f"/exec-{pid}-" in d and os.path.exists(os.path.join(d, name)):
                try:
                    with open(os.path.join(d, name)) as f:
                        found[d] = int(f.read())
                except OSError:
                    pass  # removed meanwhile
    return found


def in_background(call):
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", call()))
    thread.start()
    return thread, box


def wait_for(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.02)
    return None


HEAVY = ("x = bytearray(150 << 20)\nimport time\nt = time.process_time()\n"
         "while time.process_time() - t < 0.4:\n    pass\ntime.sleep(0.5)\nprint('heavy')")


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups, as root")
def test_a_cgroup_given_to_a_later_execution_reports_that_executions_figures_alone(start_server):
    """A server keeps the cgroups of executions that ended cleanly and gives them to later
    ones (runbox_cgroups_total). Found from the host: a cgroup in which an execution held
    150 MiB and spent 400 ms of CPU is one a later execution runs in, and that execution's
    figures are its own. An execution killed at its memory limit does not make the next one
    a MemoryError; a stopped server leaves no cgroup."""
    server = start_server()
    pid = server.proc.pid
    first = pooled_run(server, language="python", code="print(1)")
    if first["limits"] != "cgroup-v1":
        pytest.skip("cgroups are reused on cgroup v1 (v2 keeps none)")

    def cgroup_of(marker):
        """The cgroup of the server's whose process made the file marker in its /tmp."""
        for d in memory_cgroups_of(pid):
            try:
                if any(os.path.exists(f"/proc/{p}/root{marker}")
                       for p in e2e.cgroup_procs(d).split()):
                    return d
            except FileNotFoundError:
                pass
        return None

    heavy_ones, reused = set(), []
    for _ in range(6):
        heavy_thread, heavy = in_background(lambda: server.execute(language="python", code=HEAVY))
        used = wait_for(lambda: [d for d, held in memory_cgroups_of(pid).items()
                                 if held >= 100 << 20])
        heavy_thread.join()
        assert used, "the heavy execution's cgroup was not found"
        assert heavy["result"]["cpu_ms"] >= 300, heavy["result"]
        assert heavy["result"]["peak_memory_kb"] >= 150 << 10, heavy["result"]
        heavy_ones |= set(used)
        for _ in range(3):
            marker = f"/tmp/light-{os.getpid()}-{time.monotonic_ns()}"
            light_thread, light = in_background(lambda marker=marker: server.execute(
                language="python", code=f"open('{marker}', 'w').close()\nimport time\n"
                                        "time.sleep(0.3)\nprint('light')"))
            where = wait_for(lambda marker=marker: cgroup_of(marker) or
                             (None if light_thread.is_alive() else "ended"))
            light_thread.join()
            result = light["result"]
            assert result["output"] == "light\n", result
            assert result["cpu_ms"] < 200 and result["peak_memory_kb"] < 64 << 10, result
            if where in heavy_ones:
                reused.append(where)
        if reused:
            break
    assert reused, "no later execution ran in a heavy one's cgroup"
    assert cgroup_counts(server)["reused"] >= 1

    oom = server.execute(language="python", code="x = bytearray(400 << 20)", memory_mb=128)
    assert oom["error_type"] == "MemoryError", oom
    for _ in range(3):
        after = server.execute(language="python", code="print('after')")
        assert after["output"] == "after\n" and after["error_type"] is None, after

    server.stop()
    assert memory_cgroups_of(pid) == {}


SCRATCH_PROBE = r"""
import fcntl, json, os, struct, subprocess
def seen(path):
    st = os.stat(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = struct.unpack('l', fcntl.ioctl(fd, 0x80086601, bytes(8)))[0]  # FS_IOC_GETFLAGS
    finally:
        os.close(fd)
    born = subprocess.run(['stat', '-c', '%w', path], capture_output=True, text=True).stdout
    return {'id': f'{st.st_dev}:{st.st_ino}:{born.strip()}', 'mode': oct(st.st_mode & 0o7777),
            'entries': sorted(os.listdir(path)), 'xattrs': os.listxattr(path), 'flags': flags}
print(json.dumps({'home': seen('/home/user'), 'tmp': seen('/tmp')}), flush=True)
"""

# What an execution leaves in its scratch space, each of which a later one could see.
SCRATCH_LEFT = {
    "a file in home": "open('/home/user/left', 'w').write('secret')",
    "a file in tmp": "open('/tmp/left', 'w').write('secret')",
    "a hidden directory": "os.mkdir('/home/user/.cache')",
    "an attribute": "os.setxattr('/home/user', 'user.left', b'secret')",
    "a mode": "os.chmod('/home/user', 0o755)",
    "an inode flag": "fd = os.open('/home/user', os.O_RDONLY)\n"
                     "fcntl.ioctl(fd, 0x40086602, struct.pack('l', 0x40))  # FS_IOC_SETFLAGS nodump",
    # Committed, then removed: counted against the quota until the next commit.
    "a removed file's blocks": "open('/home/user/big', 'wb').write(bytes(8 << 20))\n"
                               "os.sync(); os.remove('/home/user/big')",
}
SCRATCH_CLEAN = "open('/home/user/gone', 'w').close(); os.remove('/home/user/gone')"


@pytest.mark.skipif(os.geteuid() != 0, reason="btrfs scratch spaces, as root")
def test_a_scratch_space_is_given_again_only_as_it_was_made(start_server):
    """A server keeps the scratch spaces (home, /tmp) that executions left as they were made,
    and gives them to later executions (runbox_scratch_spaces_total). One where an execution
    left a file, a directory, an attribute, a mode or an inode flag is never given again:
    every execution finds its home and /tmp empty, 0700 and 1777, without attributes or
    flags; the ones that were clean come back (the same directory, born at the same time)."""
    server = start_server()
    first = pooled_run(server, language="python", code=SCRATCH_PROBE)
    if "Operation not supported" in first["error"]:
        pytest.skip("no inode flags on this filesystem")
    left_by, clean_ids, seen_ids = {}, set(), []
    for _ in range(3):
        for what, action in [*SCRATCH_LEFT.items(), ("nothing", SCRATCH_CLEAN)] * 2:
            result = server.execute(language="python", code=SCRATCH_PROBE + action)
            assert result["success"], (what, result)
            found = json.loads(result["output"].splitlines()[0])
            assert found["home"]["entries"] == [] and found["tmp"]["entries"] == [], found
            assert found["home"]["mode"] == "0o700" and found["tmp"]["mode"] == "0o1777", found
            for place in ("home", "tmp"):
                assert found[place]["xattrs"] == [] and found[place]["flags"] == 0, found
            home = found["home"]["id"]
            assert home not in left_by, f"given again after {left_by.get(home)}: {found}"
            seen_ids.append(home)
            if what == "nothing":
                clean_ids.add(home)
            else:
                left_by[home] = what
    again = [i for i in set(seen_ids) if seen_ids.count(i) > 1]
    assert again and set(again) <= clean_ids, (again, clean_ids)
    counts = {event: int(value) for event, value in re.findall(
        r'^runbox_scratch_spaces_total\{event="(\w+)"\} (\d+)$',
        server.request("GET", "/metrics").body.decode(), re.M)}
    assert counts["reused"] >= len(again), counts
