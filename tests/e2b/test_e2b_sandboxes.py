"""E2B's control plane on runbox: the released SDKs (Python e2b and e2b-code-interpreter from
PyPI, JavaScript e2b and @e2b/code-interpreter from npm), unmodified, create, list, connect to,
pause, time out and kill sandboxes on `runbox serve --e2b-listen`, with only E2B_API_URL,
E2B_SANDBOX_URL and E2B_API_KEY set (no E2B_DEBUG): what a user of any E2B program sets.
Raw requests then hold every control route to its error on hostile input."""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest
from e2b import SandboxQuery, SandboxState
from e2b.exceptions import (AuthenticationException, NotFoundException, SandboxException,
                            TimeoutException)
from e2b_code_interpreter import Context, Sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
JS = os.path.join(HERE, "js")


@pytest.fixture
def e2b_env(monkeypatch):
    """Points the SDK at a server: the three variables, nothing else."""
    def point(server, api_key="any-key"):
        monkeypatch.delenv("E2B_DEBUG", raising=False)
        monkeypatch.delenv("E2B_DOMAIN", raising=False)
        monkeypatch.setenv("E2B_API_URL", server.e2b_url)
        monkeypatch.setenv("E2B_SANDBOX_URL", server.e2b_url)
        monkeypatch.setenv("E2B_API_KEY", api_key)
        return server
    return point


@pytest.fixture
def server(start_e2b, e2b_env):
    return e2b_env(start_e2b())


def sessions(server):
    """The ids of the sessions in the server's state directory."""
    proc = server.cli.cli("sessions", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout) if proc.stdout.strip().startswith(b"[") else [
        json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return {entry["session_id"] for entry in listed}


def api(server, method, path, body=None, headers=None, raw=None):
    """A raw control-plane request; (status, parsed body or None, headers)."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", server.e2b_port, timeout=60)
    try:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        sent = {"X-API-KEY": "k"}
        if data is not None:
            sent["Content-Type"] = "application/json"
        sent.update(headers or {})
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        text = response.read()
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return response.status, parsed, dict(response.getheaders())
    finally:
        conn.close()


# --- isolation -------------------------------------------------------------------------------

def test_two_sandboxes_see_neither_each_others_variables_nor_files(server):
    a, b = Sandbox.create(), Sandbox.create()
    assert a.sandbox_id != b.sandbox_id
    a.run_code("secret = 'of a'\nopen('mine.txt', 'w').write('a wrote this')")
    seen = b.run_code("import os\n('secret' in globals(), os.path.exists('mine.txt'), "
                      "sorted(os.listdir('.')))")
    assert seen.text == "(False, False, [])", seen
    # Nor through JavaScript or Bash, nor by naming the other's context.
    assert b.run_code("ls -a", language="bash").logs.stdout in ([], [".\n..\n"], [".\n", "..\n"])
    assert a.run_code("open('mine.txt').read()").text == "a wrote this"
    a_contexts = {c.id for c in a.list_code_contexts()}
    b_contexts = {c.id for c in b.list_code_contexts()}
    assert a_contexts and b_contexts and not a_contexts & b_contexts
    other = next(iter(a_contexts))
    with pytest.raises(NotFoundException):
        b.run_code("1", context=Context(other, "python", "/home/user"))
    a.kill()
    b.kill()


def test_run_code_in_each_language_sees_the_sandboxs_env_vars(server):
    sbx = Sandbox.create(envs={"GREETING": "hello from envVars", "LEVEL": "3"})
    assert sbx.run_code("import os; os.environ['GREETING']").text == "hello from envVars"
    js = sbx.run_code("console.log(process.env.GREETING, Number(process.env.LEVEL) + 1)",
                      language="javascript")
    assert js.logs.stdout == ["hello from envVars 4\n"], js
    sh = sbx.run_code('echo "$GREETING" > /home/user/from-bash.txt; cat from-bash.txt',
                      language="bash")
    assert sh.logs.stdout == ["hello from envVars\n"], sh
    # The call's own env vars win over the sandbox's, for that call only.
    assert sbx.run_code("import os; os.environ['LEVEL']", envs={"LEVEL": "9"}).text == "9"
    assert sbx.run_code("import os; os.environ['LEVEL']").text == "3"
    # One sandbox, one directory: Python sees the file Bash wrote.
    assert sbx.run_code("open('from-bash.txt').read().strip()").text == "hello from envVars"
    sbx.kill()


def test_a_sandboxs_own_contexts_keep_their_variables_and_go_with_it(server):
    sbx, other = Sandbox.create(), Sandbox.create()
    context = sbx.create_code_context(language="python", cwd="/tmp")
    sbx.run_code("only_here = 'ctx'", context=context)
    sbx.run_code("only_here = 'default'")
    assert sbx.run_code("only_here", context=context).text == "ctx"
    assert sbx.run_code("only_here").text == "default"
    assert context.id in {c.id for c in sbx.list_code_contexts()}
    assert context.id not in {c.id for c in other.list_code_contexts()}
    with pytest.raises(NotFoundException):
        other.run_code("1", context=context)
    # Runbox's choice, unlike E2B: a context of its own is a session of its own (files too).
    own = [s for s in sessions(server) if s.startswith("e2b-ctx-")]
    assert len(own) == 1
    sbx.kill()
    assert not [s for s in sessions(server) if s.startswith("e2b-ctx-")]
    other.kill()


def test_one_sandbox_filling_its_contexts_leaves_the_others_running(server):
    """A sandbox makes at most 64 contexts of its own; past them it is told so (429, naming the
    cap and how to free one), and another sandbox still runs code in its default contexts and
    lists them (before, one sandbox could take the server's 1024 and stop every other's)."""
    a, b = Sandbox.create(), Sandbox.create()
    headers = {"E2b-Sandbox-Id": a.sandbox_id, "E2b-Sandbox-Port": "49999",
               "E2B-Traffic-Access-Token": a.traffic_access_token}
    made, refusal = [], None
    for _ in range(1100):  # more than the server's 1024: the attack, had there been no share
        status, body, answered = api(server, "POST", "/contexts", {"language": "python"}, headers)
        if status != 200:
            refusal = (status, body, answered)
            break
        made.append(body["id"])
    assert len(made) == 64, (len(made), refusal)
    status, body, answered = refusal
    assert status == 429 and "Retry-After" not in answered, refusal
    assert body["error"]["code"] == "too_many_contexts", body
    assert "64" in body["error"]["message"] and "DELETE /contexts/{id}" in body["error"]["message"]
    # The other sandbox runs code in each default context and lists them.
    assert b.run_code("6 * 7").text == "42"
    assert b.run_code("console.log(6 * 7)", language="javascript").logs.stdout == ["42\n"]
    assert {c.language for c in b.list_code_contexts()} >= {"python", "javascript"}
    assert b.create_code_context().id  # and has its own share
    # The SDK shows the refusal with its reason; the full sandbox keeps its defaults.
    with pytest.raises(SandboxException, match="429.*remove one"):
        a.create_code_context()
    assert a.run_code("1 + 1").text == "2"
    # Removing one makes room for one.
    status, _, _ = api(server, "DELETE", f"/contexts/{made[0]}", headers=headers)
    assert status == 200
    assert a.create_code_context().id
    with pytest.raises(SandboxException, match="429"):
        a.create_code_context()
    a.kill()
    b.kill()


def test_a_sandbox_without_internet_access_has_only_loopback(server):
    closed = Sandbox.create(allow_internet_access=False)
    names = closed.run_code("import socket; sorted(n for _, n in socket.if_nameindex())")
    assert names.text == "['lo']", names
    assert closed.get_info().allow_internet_access is False
    closed.kill()


def test_egress_narrowed_to_an_allow_list_is_kept_and_applied(server):
    status, made, _ = api(server, "POST", "/v2/sandboxes", {
        "templateID": "base", "network": {"denyOut": ["0.0.0.0/0"], "allowOut": ["pypi.org"]}})
    assert status == 201, made
    status, detail, _ = api(server, "GET", f"/sandboxes/{made['sandboxID']}")
    assert detail["network"] == {"denyOut": ["0.0.0.0/0"], "allowOut": ["pypi.org"]}
    # Its executions carry the list: the engine checks it (a bad entry is refused there too).
    sbx = Sandbox.connect(made["sandboxID"])
    assert sbx.run_code("6 * 7").text == "42"
    # What can never be a destination is refused at create; what only looks like one
    # (a CIDR with a bad prefix) by the engine at each execution, with its reason.
    status, bad, _ = api(server, "POST", "/v2/sandboxes", {
        "templateID": "base", "network": {"denyOut": ["0.0.0.0/0"], "allowOut": ["not a host!"]}})
    assert_error(status, bad, 400)
    status, odd, _ = api(server, "POST", "/v2/sandboxes", {
        "templateID": "base", "network": {"denyOut": ["0.0.0.0/0"], "allowOut": ["10.0.0.0/99"]}})
    assert status == 201
    with pytest.raises(SandboxException, match="400.*egress_allow"):
        Sandbox.connect(odd["sandboxID"]).run_code("1")
    sbx.kill()
    Sandbox.kill(odd["sandboxID"])


# --- the control plane through the SDK ---------------------------------------------------------

def test_list_filters_by_metadata_and_pages_with_a_small_limit(server):
    team = {"team": "a b&c=d/é"}  # what the double percent-encoding must carry through
    ours = [Sandbox.create(metadata={**team, "n": str(i)}) for i in range(3)]
    other = Sandbox.create(metadata={"team": "other"})
    listed = Sandbox.list(query=SandboxQuery(metadata=team)).next_items()
    assert sorted(s.sandbox_id for s in listed) == sorted(s.sandbox_id for s in ours)
    assert all(s.metadata["team"] == team["team"] and s.state == SandboxState.RUNNING
               for s in listed)
    one = Sandbox.list(query=SandboxQuery(metadata={"n": "1", **team})).next_items()
    assert [s.sandbox_id for s in one] == [ours[1].sandbox_id]
    # Two at a time: two pages, every sandbox once, then no more.
    paginator = Sandbox.list(query=SandboxQuery(metadata=team), limit=2)
    pages = [paginator.next_items()]
    assert paginator.has_next
    pages.append(paginator.next_items())
    assert not paginator.has_next
    assert [len(p) for p in pages] == [2, 1]
    assert sorted(s.sandbox_id for p in pages for s in p) == sorted(s.sandbox_id for s in ours)
    # State: a paused one is listed as paused, and only when asked for.
    ours[0].pause()
    paused = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()
    assert [s.sandbox_id for s in paused] == [ours[0].sandbox_id]
    running = Sandbox.list(query=SandboxQuery(metadata=team, state=[SandboxState.RUNNING]))
    assert ours[0].sandbox_id not in {s.sandbox_id for s in running.next_items()}
    for sbx in [*ours, other]:
        sbx.kill()
    assert Sandbox.list().next_items() == []


def test_connect_by_id_from_a_second_client_reaches_the_same_sandbox(server):
    first = Sandbox.create()
    first.run_code("shared = 41")
    # Another process, knowing only the id: the SDK's Sandbox.connect.
    code = ("import sys\nfrom e2b_code_interpreter import Sandbox\n"
            "s = Sandbox.connect(sys.argv[1])\nprint(s.run_code('shared + 1').text)")
    out = subprocess.run([sys.executable, "-c", code, first.sandbox_id], capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "42", out.stderr
    second = Sandbox.connect(first.sandbox_id)
    assert second.run_code("shared").text == "41"
    first.kill()
    with pytest.raises(NotFoundException):
        Sandbox.connect(first.sandbox_id)


def test_get_info_tells_template_metadata_times_and_state(server):
    before = time.time()
    sbx = Sandbox.create(template="code-interpreter-v1", metadata={"owner": "tests"}, timeout=120)
    info = sbx.get_info()
    assert info.sandbox_id == sbx.sandbox_id and info.template_id == "code-interpreter-v1"
    assert info.metadata == {"owner": "tests"} and info.state == SandboxState.RUNNING
    assert before - 2 <= info.started_at.timestamp() <= time.time() + 2
    assert abs((info.end_at - info.started_at).total_seconds() - 120) < 2
    metrics = sbx.get_metrics()
    assert len(metrics) == 1 and metrics[0].mem_total > 0 and metrics[0].disk_total > 0
    sbx.kill()
    with pytest.raises(NotFoundException):
        Sandbox.get_info(sbx.sandbox_id)


def test_set_timeout_extends_a_sandbox_and_expiry_kills_it(server):
    started = time.monotonic()
    sbx = Sandbox.create(timeout=2)
    session = f"e2b-{sbx.sandbox_id}"
    sbx.set_timeout(60)
    time.sleep(max(0.0, started + 2.5 - time.monotonic()))  # past its first end
    # Still there past its first end: the timeout was extended.
    assert sbx.run_code("open('kept.txt', 'w').write('x'); y = 1").error is None
    assert sbx.run_code("y").text == "1"
    assert session in sessions(server)
    sbx.set_timeout(1)
    deadline = time.monotonic() + 10
    while session in sessions(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    # Gone: its session and files removed, its kernel stopped, the API says not found.
    assert session not in sessions(server)
    assert sbx.kill() is False
    with pytest.raises(NotFoundException):
        sbx.get_info()
    with pytest.raises(SandboxException):
        sbx.run_code("y")
    assert any(line.get("event") == "e2b_sandbox_expired" for line in server.log_lines())


def test_kill_removes_the_sandbox_its_session_and_its_kernels(server):
    sbx = Sandbox.create()
    sbx.run_code("import os; pid = os.getpid(); open('f', 'w').write('x')")
    session = f"e2b-{sbx.sandbox_id}"
    assert session in sessions(server)
    assert sbx.kill() is True
    assert session not in sessions(server)
    assert sbx.kill() is False
    assert sbx.sandbox_id not in {s.sandbox_id for s in Sandbox.list().next_items()}
    # Its code interpreter answers as E2B's does for a sandbox that is gone.
    with pytest.raises(TimeoutException, match="not found|502"):
        sbx.run_code("1")
    # An execution that found the sandbox just before the kill makes its session anew
    # (as `sessions new` does here): the reaper removes it again.
    assert server.cli.cli("sessions", "new", session).returncode == 0
    deadline = time.monotonic() + 10
    while session in sessions(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session not in sessions(server)


def test_kill_and_expiry_stop_code_that_is_running(server):
    import threading
    from http_helpers import processes_matching, unique_marker
    for end in ("kill", "expiry"):
        sbx = Sandbox.create()
        marker = unique_marker()  # `sleep MARKER`: the running code, seen from the host
        outcome = {}

        def run():
            started = time.monotonic()
            try:
                outcome["execution"] = sbx.run_code(
                    f"import subprocess\nsubprocess.run(['sleep', '{marker}'])", timeout=120)
            except Exception as e:  # noqa: BLE001 - whichever way the SDK ends it
                outcome["error"] = e
            outcome["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 20
        while not processes_matching(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_matching(marker), f"{end}: the code never started"
        if end == "kill":
            assert sbx.kill() is True
        else:
            sbx.set_timeout(1)  # its time is up while the code runs
        thread.join(30)
        assert not thread.is_alive() and outcome["seconds"] < 25, outcome
        deadline = time.monotonic() + 10
        while processes_matching(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not processes_matching(marker), f"{end}: the code still runs"
        # The session goes with the kill; an execution that was ending as it came may make it
        # anew, and the reaper (every second) removes it again.
        deadline = time.monotonic() + 10
        while f"e2b-{sbx.sandbox_id}" in sessions(server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert f"e2b-{sbx.sandbox_id}" not in sessions(server)
        assert sbx.kill() is False


def test_pause_then_connect_keeps_files_and_variables(server):
    """pause() hibernates the sandbox's kernels (issue 34): connect() and the next run_code
    find its variables where E2B's microVMs keep memory."""
    sbx = Sandbox.create()
    sbx.run_code("state = 'in memory'\nopen('on-disk.txt', 'w').write('on disk')")
    assert sbx.pause() is True
    assert sbx.get_info().state == SandboxState.PAUSED
    with pytest.raises(SandboxException):
        sbx.run_code("1")  # paused: its code interpreter is not there
    assert sbx.pause() is False  # already paused
    resumed = Sandbox.connect(sbx.sandbox_id)
    assert resumed.get_info().state == SandboxState.RUNNING
    execution = resumed.run_code("print(open('on-disk.txt').read())\nstate")
    assert execution.logs.stdout == ["on disk\n"] and execution.text == "in memory", execution
    assert execution.logs.stderr == [] and execution.execution_count == 2, execution
    resumed.kill()


def metric(server, name):
    text = server.request("GET", "/metrics").body.decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics:\n{text}")


def counted(server, sbx):
    """The counter the case's command writes, read on the host: a paused sandbox serves no
    files. None while the command rewrites it."""
    path = os.path.join(server.state_dir, "sessions", f"e2b-{sbx.sandbox_id}", "work", "count")
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def count_reaching(server, sbx, at_least, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = counted(server, sbx)
        if value is not None and value >= at_least:
            return value
        time.sleep(0.05)
    return counted(server, sbx)


COUNTER = "i=0; while true; do echo $i > count.new; mv count.new count; i=$((i+1)); sleep 0.05; done"


def test_pause_freezes_commands_and_terminals_and_connect_thaws_them(start_e2b, e2b_env):
    """Where runbox does not hibernate (here --hibernate off; elsewhere no root or no criu),
    pause() freezes the sandbox's commands and terminals in memory, where E2B's microVMs keep
    them: while it is paused they run nothing (a counter stands still), and after connect()
    the same processes go on from where they were (the counter goes on from its value, a shell
    still has the variable set before the pause)."""
    server = e2b_env(start_e2b(env={"RUNBOX_HIBERNATE": "off"}))
    pause_and_resume(server, "frozen")


@pytest.mark.skipif(os.geteuid() != 0, reason="hibernation needs root (and criu: make deps)")
def test_pause_puts_commands_and_terminals_on_disk_and_connect_restores_them(server):
    """Where runbox hibernates (root, criu), pause() checkpoints the sandbox's commands and
    terminals to disk, as its kernels: nothing of them is left running or in memory, and
    connect() restores the same processes, which go on from where they were."""
    pause_and_resume(server, "on disk")


def counting_with_a_shell(server):
    """A new sandbox counting in a command, with a terminal's shell that set `kept`, paused."""
    from e2b.sandbox.commands.command_handle import PtySize
    sbx = Sandbox.create()
    ticker = sbx.commands.run(COUNTER, background=True)
    terminal = sbx.pty.create(size=PtySize(cols=80, rows=24))
    sbx.pty.send_stdin(terminal.pid, b"kept=shell-$((6*7))\n")
    assert count_reaching(server, sbx, 20) >= 20
    assert sbx.pause() is True
    return sbx, ticker, terminal


def pause_and_resume(server, how):
    sbx, ticker, terminal = counting_with_a_shell(server)
    # Its stream ended, saying why, as a paused microVM's connections drop: paused, not
    # stopped (a process that could be neither checkpointed nor frozen ends, saying why).
    with pytest.raises(Exception) as ended:
        ticker.wait()
    assert "the sandbox was paused: process" in str(ended.value), ended.value
    assert f"is {how} until it resumes" in str(ended.value), ended.value
    paused, other = ("runbox_processes_frozen", "runbox_processes_hibernated")
    if how == "on disk":
        paused, other = other, paused
        session = os.path.join(server.state_dir, "sessions", f"e2b-{sbx.sandbox_id}")
        for pid in (ticker.pid, terminal.pid):
            assert os.path.isdir(os.path.join(session, f"hibernated-process-{pid}", "images"))
    assert metric(server, paused) == 2
    assert metric(server, other) == 0
    assert metric(server, "runbox_processes_running") == 0
    frozen = counted(server, sbx)
    time.sleep(1.5)  # 30 more counts, had it run
    assert counted(server, sbx) == frozen
    resumed = Sandbox.connect(sbx.sandbox_id)
    assert metric(server, paused) == 0
    assert metric(server, "runbox_processes_running") == 2
    assert {p.pid for p in resumed.commands.list()} == {ticker.pid, terminal.pid}
    # The same process: on from its value, not from 0 (a new one would be below it for a second).
    went_on = count_reaching(server, sbx, frozen + 1, seconds=5)
    assert went_on is not None and frozen < went_on < frozen + 60, (frozen, went_on)
    reader = shell_kept_its_variable(resumed, terminal.pid)
    assert resumed.commands.kill(ticker.pid) is True
    assert resumed.pty.kill(terminal.pid) is True
    reader.join(15)
    assert metric(server, "runbox_processes_running") == 0
    resumed.kill()


def shell_kept_its_variable(resumed, pid):
    """The terminal's shell, attached to again, still has `kept` of before the pause; its reader
    (to join once the terminal is killed)."""
    chunks = []
    shell = resumed.pty.connect(pid)
    reader = threading.Thread(target=lambda: _quietly(shell, chunks.append), daemon=True)
    reader.start()
    resumed.pty.send_stdin(pid, b"echo got-$kept\n")
    deadline = time.monotonic() + 15
    while b"got-shell-42" not in b"".join(chunks) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b"got-shell-42" in b"".join(chunks), b"".join(chunks)
    return reader


def _quietly(handle, on_pty):
    try:
        handle.wait(on_pty=on_pty)
    except Exception:  # noqa: BLE001 - its end (killed) is the case's, not the reader's
        pass


def host_pids_with(marker):
    """Host pids whose command line is marker (the shell that started them holds it too)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if pid.isdigit() and f.read().replace(b"\0", b" ").strip() == marker.encode():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def sandbox_sleeping_twice():
    """A new sandbox whose command started two sleeps of a length no other program on the host
    sleeps for, both seen on the host; and their command line."""
    marker = f"sleep {31000 + int.from_bytes(os.urandom(2), 'big') % 9000}"
    sbx = Sandbox.create()
    sbx.commands.run(f"{marker} & {marker}", background=True)
    deadline = time.monotonic() + 15
    while len(host_pids_with(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(host_pids_with(marker)) == 2
    return sbx, marker


@pytest.mark.serial
def test_a_paused_sandboxs_frozen_processes_die_with_it(start_e2b, e2b_env):
    """Killing a paused sandbox ends its frozen processes (a frozen process holds a kill until
    it is thawed on cgroup v1): nothing of it is left on the host."""
    server = e2b_env(start_e2b(env={"RUNBOX_HIBERNATE": "off"}))
    sbx, marker = sandbox_sleeping_twice()
    assert sbx.pause() is True
    assert metric(server, "runbox_processes_frozen") == 1
    assert len(host_pids_with(marker)) == 2  # frozen, not ended
    assert Sandbox.kill(sbx.sandbox_id) is True
    deadline = time.monotonic() + 10
    while host_pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_with(marker) == []
    assert metric(server, "runbox_processes_frozen") == 0


@pytest.mark.serial
def test_a_killed_servers_frozen_processes_go_with_the_next_runbox(start_e2b, e2b_env):
    """A server killed outright while a sandbox is paused leaves its processes frozen: on cgroup
    v1 a frozen process holds even the kill that comes with its runbox's death. The next runbox
    on the host sweeps them: killed, then thawed so that they can die."""
    first = e2b_env(start_e2b(env={"RUNBOX_HIBERNATE": "off"}))
    sbx, marker = sandbox_sleeping_twice()
    assert sbx.pause() is True
    assert len(host_pids_with(marker)) == 2  # frozen, not ended
    first.proc.kill()
    first.proc.wait()
    first.expected_exit = -9
    start_e2b()  # sweeps what gone runboxes left as it starts
    deadline = time.monotonic() + 10
    while host_pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_with(marker) == []


@pytest.mark.serial
@pytest.mark.skipif(os.geteuid() != 0, reason="hibernation needs root (and criu: make deps)")
def test_a_paused_sandboxs_processes_on_disk_go_with_it(server):
    """A paused sandbox's processes on disk run nothing on the host; killing the sandbox
    forgets their checkpoints."""
    sbx, marker = sandbox_sleeping_twice()
    assert sbx.pause() is True
    assert metric(server, "runbox_processes_hibernated") == 1
    assert host_pids_with(marker) == []  # on disk: nothing of them runs
    session = os.path.join(server.state_dir, "sessions", f"e2b-{sbx.sandbox_id}")
    assert any(name.startswith("hibernated-process-") for name in os.listdir(session))
    assert Sandbox.kill(sbx.sandbox_id) is True
    assert metric(server, "runbox_processes_hibernated") == 0
    assert not os.path.exists(session)


@pytest.mark.serial
@pytest.mark.skipif(os.geteuid() != 0, reason="hibernation needs root (and criu: make deps)")
def test_restored_processes_die_with_a_server_killed_outright(start_e2b, e2b_env):
    """A process restored from disk is tied to its runbox as a started one is: a server killed
    outright (SIGKILL, no chance to clean up) takes it along at once."""
    first = e2b_env(start_e2b())
    sbx, marker = sandbox_sleeping_twice()
    assert sbx.pause() is True
    assert host_pids_with(marker) == []
    Sandbox.connect(sbx.sandbox_id)
    assert len(host_pids_with(marker)) == 2  # restored
    first.proc.kill()
    first.proc.wait()
    first.expected_exit = -9
    deadline = time.monotonic() + 10
    while host_pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_with(marker) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="hibernation needs root (and criu: make deps)")
def test_a_command_criu_refuses_is_frozen_instead_with_its_network(server):
    """criu refuses a process that holds an internet socket: the pause freezes that command in
    memory instead (the server's log says why), and the network the failed checkpoint took
    down (its tap device) is back for it to use after the resume."""
    port = 32000 + int.from_bytes(os.urandom(2), "big") % 8000
    code = (f"import socket, time; s = socket.socket(); s.bind((\"127.0.0.1\", {port})); "
            "s.listen(); time.sleep(600)")
    marker = f"python3 -c {code}"
    sbx = Sandbox.create()
    listener = sbx.commands.run(f"python3 -c '{code}'", background=True)
    deadline = time.monotonic() + 15
    while not host_pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    (pid,) = host_pids_with(marker)

    def devices():
        with open(f"/proc/{pid}/net/dev") as f:
            return f.read()

    assert "tap0:" in devices()  # the sandbox's network, before the pause
    assert sbx.pause() is True
    with pytest.raises(Exception) as ended:
        listener.wait()
    assert "is frozen until it resumes" in str(ended.value), ended.value
    assert metric(server, "runbox_processes_frozen") == 1
    assert metric(server, "runbox_processes_hibernated") == 0
    assert f"process {listener.pid} of session e2b-{sbx.sandbox_id} stays in memory" in \
        server.log_text()
    resumed = Sandbox.connect(sbx.sandbox_id)
    assert host_pids_with(marker) == [pid]  # the same process, thawed
    assert "tap0:" in devices()
    resumed.kill()


def test_pause_without_hibernation_tells_that_variables_are_gone(start_e2b, e2b_env):
    """Where kernels cannot hibernate (no criu, or --hibernate off), a pause stops them: the
    next run_code of each language is told, once, that its variables are gone."""
    e2b_env(start_e2b(env={"RUNBOX_HIBERNATE": "off"}))
    sbx = Sandbox.create()
    sbx.run_code("state = 'in memory'\nopen('on-disk.txt', 'w').write('on disk')")
    assert sbx.pause() is True
    resumed = Sandbox.connect(sbx.sandbox_id)
    execution = resumed.run_code("print(open('on-disk.txt').read())\n'state' in globals()")
    assert execution.logs.stdout == ["on disk\n"] and execution.text == "False"
    assert any("had to start afresh" in line for line in execution.logs.stderr), execution
    assert execution.execution_count == 1
    again = resumed.run_code("1 + 1")
    assert again.logs.stderr == [] and again.text == "2"  # told once
    resumed.kill()


def test_sandboxes_outlive_a_restart_of_the_server(start_e2b, e2b_env):
    first = e2b_env(start_e2b())
    sbx = Sandbox.create(metadata={"kept": "yes"}, envs={"WHO": "restarted"})
    sbx.run_code("open('before.txt', 'w').write('before')\nvariable = 'kept'")
    assert first.stop() == 0  # its kernel hibernates (issue 34)
    second = e2b_env(start_e2b())
    again = Sandbox.connect(sbx.sandbox_id)
    assert again.get_info().metadata == {"kept": "yes"}
    execution = again.run_code("import os; open('before.txt').read() + ' ' + os.environ['WHO']"
                               " + ' ' + variable")
    assert execution.text == "before restarted kept", execution
    assert execution.logs.stderr == [], execution
    assert oct(os.stat(os.path.join(second.state_dir, "e2b-sandboxes.json")).st_mode & 0o777) \
        == "0o600"
    again.kill()


@pytest.mark.skipif(os.geteuid() != 0, reason="hibernation needs root (and criu: make deps)")
def test_paused_commands_and_terminals_outlive_a_restart_of_the_server(start_e2b, e2b_env):
    """A paused sandbox's commands and terminals are on disk: a server that stops leaves them
    there, and the next one on the state directory restores them when the sandbox is
    connected to: the same pids, the counter on from its value, the shell's variable kept; a
    command started after them in the sandbox takes a pid of its own."""
    first = e2b_env(start_e2b())
    sbx, ticker, terminal = counting_with_a_shell(first)
    frozen = counted(first, sbx)
    assert first.stop() == 0
    session = os.path.join(first.state_dir, "sessions", f"e2b-{sbx.sandbox_id}")
    for pid in (ticker.pid, terminal.pid):
        assert os.path.isfile(os.path.join(session, f"hibernated-process-{pid}",
                                           "checkpoint.json"))
    second = e2b_env(start_e2b())
    resumed = Sandbox.connect(sbx.sandbox_id)
    assert {p.pid for p in resumed.commands.list()} == {ticker.pid, terminal.pid}
    newcomer = resumed.commands.run("sleep 60", background=True)
    assert newcomer.pid not in {ticker.pid, terminal.pid}
    went_on = count_reaching(second, sbx, frozen + 1, seconds=10)
    assert went_on is not None and frozen < went_on < frozen + 200, (frozen, went_on)
    reader = shell_kept_its_variable(resumed, terminal.pid)
    for pid in (ticker.pid, terminal.pid):  # restored: their checkpoints are gone
        assert not os.path.exists(os.path.join(session, f"hibernated-process-{pid}"))
    assert resumed.commands.kill(ticker.pid) is True
    assert resumed.pty.kill(terminal.pid) is True
    reader.join(15)
    resumed.kill()


def test_templates_name_the_default_image_or_an_allowed_one(server):
    for template in ("code-interpreter-v1", "code-interpreter", "base"):
        sbx = Sandbox.create(template=template)
        assert sbx.run_code("6 * 7").text == "42"
        sbx.kill()
    with pytest.raises(SandboxException, match="400.*not served here"):
        Sandbox.create(template="no-such-template")
    # Another name is a runbox image: "host" (the host's /usr) is one requests may name here.
    host = Sandbox.create(template="host")
    assert host.get_info().template_id == "host"
    assert host.run_code("6 * 7").text == "42"
    host.kill()


def test_a_template_naming_an_image_the_operator_does_not_allow_is_refused(start_e2b, e2b_env):
    e2b_env(start_e2b(args=("--allow-images", "default")))
    with pytest.raises(SandboxException, match="400.*'host' is not served here"):
        Sandbox.create(template="host")
    sbx = Sandbox.create(template="code-interpreter-v1")
    assert sbx.run_code("1").text == "1"
    sbx.kill()


def test_the_api_key_is_the_servers_token_and_a_sandboxs_token_is_its_own(start_e2b, e2b_env):
    server = e2b_env(start_e2b(env={"RUNBOX_TOKEN": "t0ken-of-the-server"}), "wrong")
    with pytest.raises(AuthenticationException):
        Sandbox.create()
    e2b_env(server, "t0ken-of-the-server")
    a, b = Sandbox.create(), Sandbox.create()
    assert a.run_code("1 + 1").text == "2"
    # The code interpreter wants the sandbox's own tokens: not the server's, not another's.
    body = json.dumps({"code": "1"}).encode()
    for headers in ({}, {"X-Access-Token": "t0ken-of-the-server"},
                    {"X-Access-Token": b._envd_access_token},
                    {"E2B-Traffic-Access-Token": b.traffic_access_token or "x"}):
        status, _ = server.e2b_request("POST", "/execute", body, {
            "Content-Type": "application/json", "E2b-Sandbox-Id": a.sandbox_id, **headers})
        assert status == 401, headers
    status, _ = server.e2b_request("POST", "/execute", body, {
        "Content-Type": "application/json", "E2b-Sandbox-Id": a.sandbox_id,
        "X-Access-Token": a._envd_access_token})
    assert status == 200
    a.kill()
    b.kill()


# --- the JavaScript SDKs -----------------------------------------------------------------------

def test_the_javascript_sdks_create_list_connect_run_code_and_kill(server):
    assert os.path.isdir(os.path.join(JS, "node_modules", "e2b")), "run make e2b-sdk"
    env = {k: v for k, v in os.environ.items() if not k.startswith("E2B_")}
    env.update(E2B_API_URL=server.e2b_url, E2B_SANDBOX_URL=server.e2b_url, E2B_API_KEY="js")
    out = subprocess.run(["node", os.path.join(JS, "sandboxes.mjs")], capture_output=True,
                         text=True, env=env, cwd=JS, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {
        "distinct": True, "isolated": "false false", "listed": True, "connected": "42",
        "languages": ["py 2", "js 3", "sh 4"], "env": "from-js", "killed": [True, False],
        "gone": True}, report
    assert Sandbox.list().next_items() == []


# --- hostile input at every control route --------------------------------------------------------

def assert_error(status, body, expected):
    assert status == expected, (status, body)
    assert isinstance(body, dict) and body.get("code") == expected, body
    assert isinstance(body.get("message"), str) and body["message"], body


def test_hostile_create_bodies_get_400_with_the_reason(server):
    cases = [
        (None, b"{not json"),
        (None, b"[]"),
        (None, b'"a string"'),
        ({}, None),
        ({"templateID": 7}, None),
        ({"templateID": ""}, None),
        ({"templateID": "x" * 500}, None),
        ({"templateID": "no-such-template"}, None),
        ({"templateID": "../../etc"}, None),
        ({"templateID": "base", "timeout": "60"}, None),
        ({"templateID": "base", "timeout": -1}, None),
        ({"templateID": "base", "timeout": 10 ** 9}, None),
        ({"templateID": "base", "timeout": 1.5}, None),
        ({"templateID": "base", "metadata": ["a"]}, None),
        ({"templateID": "base", "metadata": {"a": 1}}, None),
        ({"templateID": "base", "metadata": {str(i): "v" for i in range(65)}}, None),
        ({"templateID": "base", "metadata": {"k": "v" * 5000}}, None),
        ({"templateID": "base", "envVars": {"A": 1}}, None),
        ({"templateID": "base", "envVars": {"1BAD": "x"}}, None),
        ({"templateID": "base", "envVars": {"HOME": "/root"}}, None),
        ({"templateID": "base", "envVars": {"A=B": "x"}}, None),
        ({"templateID": "base", "envVars": {f"V{i}": "x" for i in range(200)}}, None),
        ({"templateID": "base", "allow_internet_access": "no"}, None),
        ({"templateID": "base", "network": "open"}, None),
        ({"templateID": "base", "network": {"allowOut": "pypi.org"}}, None),
        ({"templateID": "base", "network": {"denyOut": ["10.0.0.0/8"]}}, None),
        ({"templateID": "base", "network": {"allowOut": ["x"] * 65,
                                            "denyOut": ["0.0.0.0/0"]}}, None),
        ({"templateID": "base", "network": {"egressProxy": {"url": "http://p"}}}, None),
        ({"templateID": "base", "mcp": {"server": {}}}, None),
        ({"templateID": "base", "volumeMounts": [{"name": "v", "path": "/data"}]}, None),
        ({"templateID": "base", "autoPause": "yes"}, None),
    ]
    for body, raw in cases:
        for path in ("/v2/sandboxes", "/sandboxes"):
            status, reply, _ = api(server, "POST", path, body, raw=raw)
            assert_error(status, reply, 400)
    # Wrong content type, and a body past the server's limit.
    status, reply, _ = api(server, "POST", "/v2/sandboxes", raw=b"templateID=base",
                           headers={"Content-Type": "text/plain"})
    assert status == 415 and reply["code"] == 415
    assert api(server, "GET", "/v2/sandboxes")[1] == []  # nothing was made
    status, reply, _ = api(server, "POST", "/v2/sandboxes", {"templateID": "base"})
    assert status == 201 and len(reply["sandboxID"]) == 20 and reply["sandboxID"].isalnum()
    assert reply["envdVersion"] == "0.6.4" and len(reply["envdAccessToken"]) == 64
    assert reply["domain"] is None and reply["clientID"]
    api(server, "DELETE", f"/sandboxes/{reply['sandboxID']}")


def test_hostile_ids_and_bodies_at_every_sandbox_route(server):
    status, made, _ = api(server, "POST", "/v2/sandboxes", {"templateID": "base"})
    good = made["sandboxID"]
    bad_ids = ["nosuchsandbox0000000", "x" * 300, "..", "%2e%2e", "a%00b", "e2b-python",
               urllib.parse.quote("<script>", safe=""), good.upper()]
    routes = [("GET", "/sandboxes/{}", None), ("DELETE", "/sandboxes/{}", None),
              ("POST", "/sandboxes/{}/timeout", {"timeout": 10}),
              ("POST", "/sandboxes/{}/pause", {}), ("POST", "/v2/sandboxes/{}/connect", {}),
              ("POST", "/sandboxes/{}/connect", {"timeout": 10}),
              ("POST", "/sandboxes/{}/resume", {}), ("GET", "/sandboxes/{}/metrics", None),
              ("POST", "/sandboxes/{}/refreshes", {"duration": 5})]
    for method, pattern, body in routes:
        for bad in bad_ids:
            status, reply, _ = api(server, method, pattern.format(bad), body)
            assert status in (400, 404), (method, bad, status, reply)
            assert_error(status, reply, status)
    # Bodies of the wrong shape on a sandbox that exists: 400, and it is untouched.
    for method, pattern, body in [
            ("POST", "/sandboxes/{}/timeout", {}), ("POST", "/sandboxes/{}/timeout",
                                                     {"timeout": "1"}),
            ("POST", "/sandboxes/{}/timeout", {"timeout": -5}),
            ("POST", "/sandboxes/{}/timeout", {"timeout": 10 ** 12}),
            ("POST", "/v2/sandboxes/{}/connect", {"timeout": [1]}),
            ("POST", "/sandboxes/{}/refreshes", {"duration": 99999})]:
        assert_error(*api(server, method, pattern.format(good), body)[:2], 400)
    for method, pattern in [("POST", "/sandboxes/{}/timeout"), ("POST", "/sandboxes/{}/pause")]:
        assert_error(*api(server, method, pattern.format(good), raw=b"{oops")[:2], 400)
    status, detail, _ = api(server, "GET", f"/sandboxes/{good}")
    assert status == 200 and detail["state"] == "running"
    # The routes' own statuses.
    assert api(server, "POST", f"/sandboxes/{good}/resume", {})[0] == 409  # it runs
    assert api(server, "POST", f"/sandboxes/{good}/pause", {})[0] == 204
    assert_error(*api(server, "POST", f"/sandboxes/{good}/pause", {})[:2], 409)
    assert api(server, "POST", f"/v2/sandboxes/{good}/connect", {})[0] == 201
    assert api(server, "POST", f"/v2/sandboxes/{good}/connect", {})[0] == 200
    assert api(server, "POST", f"/sandboxes/{good}/timeout", {"timeout": 30})[0] == 204
    # The older SDKs' routes (E2B's 2.45): the same answers.
    status, old, _ = api(server, "POST", "/sandboxes", {"templateID": "base", "secure": True})
    assert status == 201 and old["envdVersion"] == "0.6.4"
    status, again, _ = api(server, "POST", f"/sandboxes/{old['sandboxID']}/connect",
                           {"timeout": 10})
    assert status == 200 and again["sandboxID"] == old["sandboxID"]
    assert api(server, "DELETE", f"/sandboxes/{old['sandboxID']}")[0] == 204
    status, metrics, _ = api(server, "GET", f"/sandboxes/{good}/metrics")
    assert status == 200 and isinstance(metrics, list) and metrics[0]["memTotal"] > 0
    assert api(server, "DELETE", f"/sandboxes/{good}")[0] == 204
    assert_error(*api(server, "DELETE", f"/sandboxes/{good}")[:2], 404)
    # Unknown routes and methods answer in the control plane's words.
    assert_error(*api(server, "GET", "/sandboxes/x/logs")[:2], 404)
    assert_error(*api(server, "PUT", "/v2/sandboxes")[:2], 405)
    assert_error(*api(server, "PATCH", f"/sandboxes/{good}")[:2], 405)


def test_hostile_list_queries_get_400(server):
    for query in ["limit=0", "limit=-1", "limit=abc", "limit=100000", "state=dead",
                  "state=running,", "nextToken=garbage", "nextToken=1.",
                  "metadata=novalue", "metadata=" + urllib.parse.quote("a=%zz"),
                  "metadata=" + urllib.parse.quote("%2500=x"), "metadata=" + "a%3Db%26" * 3000,
                  "order=sideways", "startedAfter=yesterday"]:
        assert_error(*api(server, "GET", f"/v2/sandboxes?{query}")[:2], 400)
    # A token from an earlier page stays good after its sandbox is killed.
    made = [api(server, "POST", "/v2/sandboxes", {"templateID": "base"})[1]["sandboxID"]
            for _ in range(3)]
    status, page, headers = api(server, "GET", "/v2/sandboxes?limit=1")
    token = headers.get("X-Next-Token")
    assert status == 200 and len(page) == 1 and token
    api(server, "DELETE", f"/sandboxes/{page[0]['sandboxID']}")
    status, rest, headers = api(server, "GET",
                                f"/v2/sandboxes?limit=5&nextToken={urllib.parse.quote(token)}")
    assert status == 200 and sorted(s["sandboxID"] for s in rest) == sorted(made[1:])
    assert "X-Next-Token" not in headers
    status, newest, _ = api(server, "GET", "/v2/sandboxes?order=desc&limit=1")
    assert newest[0]["sandboxID"] == made[2]
    # The state list as JS sends it (a bare comma) and as Python does (%2C).
    api(server, "POST", f"/sandboxes/{made[1]}/pause", {})
    for states in ("running,paused", "running%2Cpaused"):
        status, both, _ = api(server, "GET", f"/v2/sandboxes?state={states}")
        assert sorted(s["state"] for s in both) == ["paused", "running"], both
    status, paused, _ = api(server, "GET", "/v2/sandboxes?state=paused")
    assert [s["sandboxID"] for s in paused] == [made[1]]
    for sandbox_id in made[1:]:
        api(server, "DELETE", f"/sandboxes/{sandbox_id}")


def test_the_api_key_is_checked_when_the_server_has_a_token(start_e2b):
    server = start_e2b(env={"RUNBOX_TOKEN": "the-right-key"})
    for headers in ({"X-API-KEY": "wrong"}, {"X-API-KEY": ""}):
        for method, path in [("POST", "/v2/sandboxes"), ("GET", "/v2/sandboxes"),
                             ("GET", "/sandboxes/abc"), ("DELETE", "/sandboxes/abc")]:
            status, reply, _ = api(server, method, path, {"templateID": "base"}, headers=headers)
            assert_error(status, reply, 401)
    status, reply, _ = api(server, "POST", "/v2/sandboxes", {"templateID": "base"},
                           headers={"X-API-KEY": "the-right-key"})
    assert status == 201
    # envd and the code interpreter of a sandbox that is not there: E2B's 502.
    status, body = server.e2b_request("POST", "/execute", b'{"code": "1"}', {
        "Content-Type": "application/json", "E2b-Sandbox-Id": "nosuchsandbox",
        "X-Access-Token": reply["envdAccessToken"]})
    assert status == 502 and b"was not found" in body


def test_the_code_interpreter_refuses_sandbox_ids_it_does_not_serve(server):
    status, made, _ = api(server, "POST", "/v2/sandboxes", {"templateID": "base"})
    token = made["envdAccessToken"]
    body = b'{"code": "1"}'
    for sandbox_id in ["nosuchsandbox", "x" * 500, "..", "../" + made["sandboxID"],
                       made["sandboxID"].upper(), "e2b-python"]:
        for method, path, data in [("POST", "/execute", body), ("GET", "/contexts", None),
                                   ("POST", "/contexts", b"{}"),
                                   ("DELETE", "/contexts/e2b-python", None)]:
            status, reply = server.e2b_request(method, path, data, {
                "Content-Type": "application/json", "E2b-Sandbox-Id": sandbox_id,
                "X-Access-Token": token, "E2B-Traffic-Access-Token": made["trafficAccessToken"]})
            assert status == 502 and b"was not found" in reply, (sandbox_id, path, reply)
    # Its own id with a wrong or missing token: 401 on every route; with its token, served.
    for headers in ({}, {"X-Access-Token": token[:-1]}, {"X-Access-Token": token + "0"},
                    {"E2B-Traffic-Access-Token": token}):
        for method, path, data in [("POST", "/execute", body), ("GET", "/contexts", None)]:
            status, _ = server.e2b_request(method, path, data, {
                "Content-Type": "application/json", "E2b-Sandbox-Id": made["sandboxID"],
                **headers})
            assert status == 401, (headers, path)
    status, reply = server.e2b_request("GET", "/contexts", None, {
        "E2b-Sandbox-Id": made["sandboxID"],
        "E2B-Traffic-Access-Token": made["trafficAccessToken"]})
    assert status == 200 and {c["language"] for c in json.loads(reply)} == {"python", "javascript"}
    # The contexts of the debug sandbox (and of no sandbox) are not a created sandbox's.
    status, reply = server.e2b_request("GET", "/contexts")
    assert made["sandboxID"] not in reply.decode()
    api(server, "DELETE", f"/sandboxes/{made['sandboxID']}")
