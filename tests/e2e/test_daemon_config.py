"""A stateful call from the CLI is served as that CLI is configured (issue 28, item 1).

Kernels live in a `runbox daemon` that the CLI starts on demand. A daemon is started with every
option the CLI got (policy, egress, images, limits, network, storage) and serves only calls of
that configuration: a call with other options goes to a daemon of its own, never to one started
with other settings. A session whose kernel lives in a daemon of other options is refused, with a
message naming the options that differ and how to go on. (The egress case is in test_egress.py:
it needs the test hosts that module makes.)"""
import json
import os
import subprocess
import time

import pytest

from conftest import RUNBOX, ON_IMAGE_ENV, POOLED, Runbox, daemons

SYSTEM_STORE = os.environ.get("RUNBOX_TEST_IMAGES", "/var/lib/runbox/images")


def stateful(runbox, code, *options, args=(), session="cfg", language="python", env=None):
    """`runbox OPTIONS run LANGUAGE -c CODE --stateful --session SESSION --json ARGS`."""
    return runbox.cli(*options, "run", language, "-c", code, "--json", "--stateful",
                      "--session", session, "--no-network", *args, env=env)


def ok(proc):
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return json.loads(proc.stdout)


def values(result):
    return [r["data"].get("text/plain") for r in result["results"]]


def daemon_options(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().decode(errors="replace").split("\0")[:-1]
    return argv


@pytest.fixture
def policy(tmp_path):
    path = tmp_path / "policy.conf"
    path.write_text("python forbidden_word forbidden_word\n")
    return str(path)


def test_a_policy_given_after_a_daemon_started_applies_to_stateful_calls(runbox, policy):
    ok(stateful(runbox, "kept = 1", session="first"))  # a daemon without a policy
    refused = ok(stateful(runbox, "forbidden_word = 1", "--policy", policy, session="second"))
    assert refused["error_type"] == "PermissionError", refused
    assert "forbidden_word" in refused["error"], refused
    # The first daemon serves its own configuration as before.
    assert values(ok(stateful(runbox, "kept", session="first"))) == ["1"]


def test_a_limit_given_after_a_daemon_started_applies_to_stateful_calls(runbox):
    ok(stateful(runbox, "1", session="first"))  # a daemon with the host's cores and kernels
    proc = stateful(runbox, "1", "--max-cpus", "0.5", args=("--cpus", "1"), session="second")
    assert proc.returncode == 2, proc
    assert b"cpus 1 is out of bounds (accepted: 0.01 to 0.5 cores" in proc.stderr, proc.stderr
    # --max-kernels 1: a second session's kernel makes the first one's go (stopped, without
    # hibernation: tests/e2e/test_hibernation.py has it hibernate).
    cap = ("--max-kernels", "1", "--hibernate", "off")
    ok(stateful(runbox, "v = 1", *cap, session="a"))
    ok(stateful(runbox, "v = 2", *cap, session="b"))
    back = ok(stateful(runbox, "'v' in dir()", *cap, session="a"))
    assert values(back) == ["False"] and back["kernel_restarted"] is True, back


def system_store():
    """An image store with the default image (make deps builds it), or a skip."""
    names = os.path.join(SYSTEM_STORE, "names", "default")
    if not os.path.exists(names) or not os.access(SYSTEM_STORE, os.R_OK):
        pytest.skip(f"no default image in {SYSTEM_STORE} (make deps builds it)")
    return SYSTEM_STORE


@pytest.mark.skipif(bool(ON_IMAGE_ENV), reason="the first daemon must run on the host's /usr")
def test_images_given_after_a_daemon_started_apply_to_stateful_calls(runbox):
    store = system_store()
    first = ok(stateful(runbox, "1", session="first"))  # the state directory's empty store
    assert first["image"] == "host", first
    images = ("--images", store, "--allow-images", "default")
    second = ok(stateful(runbox, "import sys; sys.version_info[:2]", *images, session="second"))
    assert second["image"] == "default" and second["success"], second
    proc = stateful(runbox, "1", *images, args=("--image", "host"), session="third")
    assert proc.returncode == 2, proc
    assert b"'host' is not one this runbox lets requests name (allowed: default)" in proc.stderr
    host = ok(stateful(runbox, "1", "--images", store, "--default-image", "host",
                       session="fourth"))
    assert host["image"] == "host", host


def test_the_daemon_is_given_every_option_the_cli_got(runbox, policy, tmp_path):
    images = str(tmp_path / "images")
    options = ("--policy", policy, "--images", images, "--allow-images", "host,default",
               "--default-image", "host", "--max-cpus", "1.5", "--kernel-idle", "600",
               "--max-kernels", "7", "--storage", "plain", "--install-network", "outside",
               "--egress-default", "none", "--egress-allow", "10.9.8.0/24",
               "--egress-deny", "10.9.8.7", "--hibernate", "off")
    # The environment says otherwise: the command line wins, in the daemon too.
    env = {"RUNBOX_INSTALL_NETWORK": "host", "RUNBOX_ALLOW_IMAGES": "default",
           "RUNBOX_DEFAULT_IMAGE": "default"}
    ok(stateful(runbox, "1", *options, env=env))
    (pid,) = daemons(runbox.state_dir)
    argv = daemon_options(pid)
    given = dict(zip(argv[4::2], argv[5::2]))
    expected = dict(zip(options[::2], options[1::2]))
    for option, value in expected.items():
        assert given.get(option) == value, (option, argv)


def test_the_same_configuration_reuses_its_daemon_and_another_gets_its_own(runbox, policy):
    ok(stateful(runbox, "a = 1", session="plain"))
    ok(stateful(runbox, "b = 2", "--policy", policy, session="strict"))
    assert len(daemons(runbox.state_dir)) == 2
    # Each configuration's calls reach the kernels its daemon holds.
    assert values(ok(stateful(runbox, "a", session="plain"))) == ["1"]
    assert values(ok(stateful(runbox, "b", "--policy", policy, session="strict"))) == ["2"]
    # The same option from the environment is the same configuration.
    again = ok(stateful(runbox, "b", session="strict", env={"RUNBOX_POLICY": policy}))
    assert values(again) == ["2"] and again["kernel_restarted"] is False, again
    assert len(daemons(runbox.state_dir)) == 2
    # sessions restart and rm reach the kernel whichever daemon holds it.
    restarted = runbox.cli("sessions", "restart", "strict")
    assert restarted.returncode == 0 and restarted.stdout == b"stopped 1 kernel\n", restarted
    fresh = ok(stateful(runbox, "'b' in dir()", "--policy", policy, session="strict"))
    assert values(fresh) == ["False"], fresh
    removed = runbox.cli("sessions", "rm", "strict")
    assert removed.returncode == 0, removed.stderr
    assert not os.path.exists(runbox.session_dir("strict"))
    # storage unmount asks every daemon to stop.
    unmounted = runbox.cli("storage", "unmount")
    assert unmounted.returncode == 0, unmounted.stderr
    assert daemons(runbox.state_dir) == []


def test_a_kernel_held_by_a_daemon_of_other_options_is_refused_naming_them(runbox, policy):
    ok(stateful(runbox, "secret = 1", session="s"))
    proc = stateful(runbox, "secret", "--policy", policy, "--max-kernels", "9", session="s")
    assert proc.returncode == 2, proc  # not served with the daemon's old settings
    stderr = proc.stderr.decode()
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "the python kernel of session s lives in a runbox daemon" in stderr, stderr
    assert f"--policy ({policy} here, not given there)" in stderr, stderr
    assert "--max-kernels (9 here, not given there)" in stderr, stderr
    assert "runbox sessions restart s --language python" in stderr, stderr
    # Going on as it says: the kernel stops, and the call gets one of its own options.
    assert runbox.cli("sessions", "restart", "s", "--language", "python").returncode == 0
    after = ok(stateful(runbox, "forbidden_word", "--policy", policy, "--max-kernels", "9",
                        session="s"))
    assert after["error_type"] == "PermissionError", after


@pytest.mark.skipif(POOLED, reason="the pooled pass keeps daemons alive with its prepared sandboxes")
def test_daemons_of_every_configuration_go_once_idle(runbox, policy):
    env = {"RUNBOX_KERNEL_IDLE": "1", "RUNBOX_POOL": "0"}
    ok(stateful(runbox, "a = 1", session="one", env=env))
    ok(stateful(runbox, "b = 1", "--policy", policy, session="two", env=env))
    assert len(daemons(runbox.state_dir)) == 2
    deadline = time.time() + 30
    while daemons(runbox.state_dir) and time.time() < deadline:
        time.sleep(0.2)
    assert daemons(runbox.state_dir) == []
    sockets = [n for n in os.listdir(runbox.state_dir) if n.endswith(".sock")]
    assert sockets == [], sockets  # each took its socket with it


def test_runbox_serve_serves_the_cli_only_when_configured_alike(tmp_path, policy):
    """serve holds <state>/runbox.sock: a stateful call of another configuration is served by
    a daemon of its own, never by the server's engine."""
    state = str(tmp_path / "state")
    box = Runbox(state)
    server = subprocess.Popen([RUNBOX, "serve", "--listen", "127.0.0.1:0", "--state-dir", state],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=box.env())
    try:
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(state, "runbox.sock")) and time.time() < deadline:
            time.sleep(0.05)
        assert os.path.exists(os.path.join(state, "runbox.sock")), server.stderr.read1(4096)
        ok(stateful(box, "x = 1", session="served"))
        assert daemons(state) == []  # configured alike: the server holds the kernel
        refused = ok(stateful(box, "forbidden_word", "--policy", policy, session="other"))
        assert refused["error_type"] == "PermissionError", refused
        assert len(daemons(state)) == 1
        assert values(ok(stateful(box, "x", session="served"))) == ["1"]
        # Its kernel is not reached by a call of other options, nor taken over.
        proc = stateful(box, "x", "--policy", policy, session="served")
        assert proc.returncode == 2, proc
        assert b"the python kernel of session served lives in runbox serve (pid " \
               b"%d) configured otherwise" % server.pid in proc.stderr, proc.stderr
    finally:
        server.terminate()
        code = server.wait(timeout=30)
        box.remove_all_sessions()
    assert code == 0, server.stderr.read().decode(errors="replace")[-2000:]


def test_a_policy_file_edited_since_its_daemon_started_applies(runbox, tmp_path):
    """The same --policy FILE with other rules in it is another configuration."""
    path = tmp_path / "edited.conf"
    path.write_text("python other_rule never_matches_this\n")
    ok(stateful(runbox, "forbidden_word = 1", "--policy", str(path), session="before"))
    path.write_text("python forbidden_word forbidden_word\n")
    refused = ok(stateful(runbox, "forbidden_word = 1", "--policy", str(path), session="after"))
    assert refused["error_type"] == "PermissionError", refused


@pytest.mark.skipif(bool(ON_IMAGE_ENV), reason="the first daemon must run on the host's /usr")
def test_a_default_image_imported_since_its_daemon_started_applies(runbox, tmp_path):
    """A daemon resolved "the default image" when it started (the host's /usr, the store being
    empty): once the store has a default, a call naming no image runs on it."""
    from host_tree import host_programs_tree
    tree = host_programs_tree(str(tmp_path / "tree"), ["/bin/bash", "/bin/cat"])
    os.makedirs(os.path.join(tree, "usr/share/runbox-test"))
    with open(os.path.join(tree, "usr/share/runbox-test/marker"), "w") as f:
        f.write("on the imported default\n")
    archive = str(tmp_path / "default.tar")
    subprocess.run(["tar", "-C", tree, "-cf", archive, "."], check=True)
    store = os.path.join(runbox.state_dir, "images")
    env = {"RUNBOX_IMAGES": store}
    before = ok(stateful(runbox, "echo started", language="bash", session="before", env=env))
    assert before["image"] == "host", before
    proc = runbox.cli("images", "import", "default", archive, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    after = ok(stateful(runbox, "cat /usr/share/runbox-test/marker", language="bash",
                        session="after", env=env))
    assert after["image"] == "default", after
    assert after["output"] == "on the imported default\n", after


def test_a_state_directory_too_long_for_a_socket_address_still_gets_its_daemon(tmp_path):
    """A Unix socket's address holds 107 bytes: the daemon's socket is reached through the
    state directory's descriptor instead."""
    state = str(tmp_path / ("long-" + "x" * 60) / ("state-" + "y" * 40))
    assert len(state) + len("/daemon-0123456789abcdef.sock") > 107
    box = Runbox(state)
    try:
        ok(stateful(box, "kept = 41", session="long"))
        assert values(ok(stateful(box, "kept + 1", session="long"))) == ["42"]
        assert len(daemons(state)) == 1
        restarted = box.cli("sessions", "restart", "long")
        assert restarted.stdout == b"stopped 1 kernel\n", restarted
    finally:
        box.remove_all_sessions()
    # storage unmount asked it to stop; it exits on its own thread, moments later (CI once
    # saw it still there right after). Its idle timeout is minutes: a daemon not asked stays.
    deadline = time.monotonic() + 10
    while daemons(state) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert daemons(state) == []


def test_the_image_store_is_part_of_a_daemons_configuration(runbox, tmp_path):
    """The CLI gives its daemon the store it resolved (whatever the daemon's own environment
    would resolve): the default store and the same path named with --images are one
    configuration; another store is another daemon."""
    real_env = runbox.env
    runbox.env = lambda extra=None: {k: v for k, v in real_env(extra).items()
                                     if k != "RUNBOX_IMAGES"}
    default = SYSTEM_STORE if os.geteuid() == 0 else os.path.join(runbox.state_dir, "images")
    if os.geteuid() == 0 and SYSTEM_STORE != "/var/lib/runbox/images":
        pytest.skip("root's default store is /var/lib/runbox/images")
    ok(stateful(runbox, "a = 1", session="one"))
    (pid,) = daemons(runbox.state_dir)
    argv = daemon_options(pid)
    assert argv[argv.index("--images") + 1] == default, argv
    again = ok(stateful(runbox, "a", "--images", default, session="one"))
    assert values(again) == ["1"] and again["kernel_restarted"] is False, again
    assert daemons(runbox.state_dir) == [pid]
    ok(stateful(runbox, "b = 2", "--images", str(tmp_path / "another store"), session="two"))
    assert len(daemons(runbox.state_dir)) == 2
