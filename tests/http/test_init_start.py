"""How a sandbox's init is started (src/sandbox/starter.c): from a starter thread of runbox,
sharing runbox's memory until it executes runbox-init, instead of as a copy of runbox. What the
program is given must not change: the same credentials, namespaces, limits, descriptors and
seccomp as an init that was a copy (RUNBOX_INIT=copy, the way before starters); runbox keeps its
starter threads for the next start; and init's command line, which would be runbox's own until
init executes runbox-init, reads empty."""
import concurrent.futures
import json
import os

import pytest

from http_helpers import Server
from test_pool import PROBES

NAMESPACES = ("user", "pid", "mnt", "ipc", "uts", "net", "cgroup", "time")

# The namespaces the program is in, and what it can see of init (PID 1).
INIT_PROBE = r"""
for ns in %s; do echo "ns $ns $(readlink /proc/self/ns/$ns)"; done
echo "parent $PPID"
grep -E '^(SigBlk|SigIgn)' /proc/self/status
grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp)' /proc/1/status
echo "init cmdline bytes $(cat /proc/1/cmdline /proc/1/task/1/cmdline | wc -c)"
echo "init exe $(readlink -v /proc/1/exe 2>&1 | sed 's/.*: //')"
""" % " ".join(NAMESPACES)


def starter_threads(server):
    names = []
    for task in os.listdir(f"/proc/{server.proc.pid}/task"):
        try:
            with open(f"/proc/{server.proc.pid}/task/{task}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return names.count("runbox-starter")


@pytest.fixture
def copy_and_starter(tmp_path):
    """Two servers that start every execution cold: init as a copy of runbox, and from a
    starter."""
    (tmp_path / "copy").mkdir()
    (tmp_path / "starter").mkdir()
    copy = Server(tmp_path / "copy", global_args=("--pool", "0"), env={"RUNBOX_INIT": "copy"})
    starter = Server(tmp_path / "starter", global_args=("--pool", "0"))
    try:
        yield copy, starter
    finally:
        copy.stop()
        starter.stop()


@pytest.mark.parametrize("language", ["python", "javascript", "bash"])
def test_a_program_is_given_the_same_whether_init_was_a_copy_or_started(copy_and_starter,
                                                                        language):
    copy, starter = copy_and_starter
    request = dict(language=language, code=PROBES[language], network=False,
                   env={"RUNBOX_TEST_VALUE": "a b=c"}, memory_mb=300, session_id="init-start")
    for server in (copy, starter):  # the same files in both sessions
        server.execute(language="bash", code="echo kept > kept.txt", session_id="init-start",
                       network=False)
    views = [server.execute(**request) for server in (copy, starter)]
    assert all(view["success"] for view in views), views
    assert starter_threads(copy) == 0 and starter_threads(starter) >= 1  # two ways indeed
    copied, started = (view["output"] for view in views)
    if language != "bash":
        copied, started = json.loads(copied), json.loads(started)
        for key in copied:
            assert started[key] == copied[key], key
    assert started == copied


@pytest.mark.parametrize("network", [False, True])
def test_the_program_s_namespaces_and_its_init_are_the_same_either_way(copy_and_starter,
                                                                       network):
    copy, starter = copy_and_starter
    host = {ns: os.readlink(f"/proc/self/ns/{ns}") for ns in NAMESPACES}
    seen = []
    for server in (copy, starter):
        result = server.execute(language="bash", code=INIT_PROBE, network=network)
        assert result["success"], result
        lines = result["output"].splitlines()
        namespaces = dict(line.split()[1:] for line in lines if line.startswith("ns "))
        assert set(namespaces) == set(NAMESPACES), result["output"]
        # Every namespace of its own but time's, which sandboxes share with the host.
        assert {ns for ns in NAMESPACES if namespaces[ns] == host[ns]} == {"time"}, namespaces
        seen.append((namespaces, [line for line in lines if not line.startswith("ns ")]))
    # The two runs' namespaces are not compared with each other: the first run's are gone
    # when the second's are made, and the kernel gives a freed namespace's number to the next
    # one (the ASan stage saw the same numbers twice).
    (_, copy_rest), (_, starter_rest) = seen
    assert starter_rest == copy_rest
    assert "parent 1" in starter_rest
    assert "SigBlk:\t0000000000000000" in starter_rest  # no signal blocked in the program
    # init's command line is masked; its executable is not the program's to read.
    assert "init cmdline bytes 0" in starter_rest
    assert "init exe Permission denied" in starter_rest


def test_a_server_keeps_its_starter_threads_for_the_next_start(tmp_path):
    server = Server(tmp_path, global_args=("--pool", "0"))
    try:
        def one(_):
            result = server.execute(language="bash", code="echo ok", network=False)
            assert result["success"] and result["output"] == "ok\n", result
        for i in range(8):
            one(i)
        sequential = starter_threads(server)
        assert sequential == 1  # one start at a time: one thread, again and again
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(one, range(24)))
        concurrent_count = starter_threads(server)
        # One per start in flight at most; and no more after more of the same.
        assert 1 <= concurrent_count <= 4
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(one, range(24)))
        assert starter_threads(server) <= 4
    finally:
        server.stop()
