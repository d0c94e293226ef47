"""Session storage: one filesystem for all sessions with a quota each, mounted once; nothing of
a session in the host's mount table; bounded in total; crash-safe; state directories of the
earlier layout migrated on first use."""
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import Runbox, unmount_storage_below

IS_ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not IS_ROOT, reason="capped storage needs root (runbox check says so)")


def mount_lines():
    with open("/proc/self/mountinfo") as f:
        return f.read().splitlines()


def loop_devices():
    return sorted(d for d in os.listdir("/sys/block") if d.startswith("loop") and
                  open(f"/sys/block/{d}/size").read().strip() != "0")


def storage(runbox):
    proc = runbox.cli("storage", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_runbox_check_and_storage_say_which_layout_is_in_use(runbox):
    info = storage(runbox)
    checks = {c["name"]: c for c in json.loads(runbox.cli("check", "--json").stdout)["checks"]}
    if IS_ROOT:
        assert info["layout"] == "btrfs" and info["capped"] is True, info
        assert info["total_bytes"] >= 512 << 20
        assert checks["disk"]["ok"] and "btrfs image" in checks["disk"]["detail"]
    else:
        assert info["layout"] == "plain" and info["capped"] is False, info
        assert not checks["disk"]["ok"] and "not size-capped" in checks["disk"]["detail"]


@root_only
@pytest.mark.serial
def test_sessions_add_nothing_to_the_hosts_mount_table_nor_loop_devices(runbox):
    runbox.run("bash", "true", "--session", "first", "--no-network")  # the image is mounted now
    mounts, loops = len(mount_lines()), loop_devices()
    for i in range(60):
        result = runbox.run("bash", f"echo {i} > n.txt", "--session", f"s{i}", "--no-network")
        assert result["success"], result
    assert len(mount_lines()) == mounts
    assert loop_devices() == loops
    assert not [line for line in mount_lines() if "/sessions/s" in line]
    # Inside, the session's directory is a mount of the sandbox's own.
    inside = runbox.run("bash", "grep ' /home/user ' /proc/self/mountinfo", "--session", "s1",
                        "--no-network")
    assert "/s1/work /home/user" in inside["output"], inside


@root_only
def test_runs_share_one_pinned_prepared_namespace_and_unmount_takes_it(runbox):
    """A CLI run is one execution: it uses the prepared namespace the first run pinned in the
    state directory instead of building its own (the same namespace, run after run)."""
    pinned = lambda: [line for line in mount_lines() if f"{runbox.state_dir}/templates/" in line]
    runbox.run("bash", "true", "--no-network")
    first = pinned()
    assert len(first) == 1 and " nsfs " in first[0] and "mnt:[" in first[0], first
    for _ in range(3):
        assert runbox.run("bash", "echo hi", "--no-network")["output"] == "hi\n"
    assert pinned() == first
    assert runbox.cli("storage", "unmount").returncode == 0
    assert [line for line in mount_lines() if f"{runbox.state_dir}/templates" in line] == []
    assert runbox.run("bash", "echo again", "--no-network")["output"] == "again\n"  # pinned anew


@root_only
def test_another_build_replaces_a_roots_pin_and_plan_instead_of_adding_its_own(runbox, tmp_path):
    """Two builds of runbox on one state directory (an upgrade that leaves the host's system
    paths as they were), here two copies of the same one, whose runbox-init files differ: the
    second's prepared namespace and plan replace the first's for that root, so the host's mount
    table holds one pin per root and state directory however many upgrades there were. Another
    root (the host's /usr beside the image) keeps its own."""
    templates = os.path.join(runbox.state_dir, "templates")
    pins = lambda: [line for line in mount_lines() if f"{templates}/" in line]
    plans = lambda: sorted(n for n in os.listdir(templates) if n.startswith("plan-"))
    builds = []
    for name in ("first", "second"):
        place = tmp_path / name
        place.mkdir()
        for program in ("runbox", "runbox-init", "runbox-net"):
            shutil.copy2(os.path.join(os.path.dirname(runbox.bin), program), place / program)
        build = Runbox(runbox.state_dir)
        build.bin = str(place / "runbox")
        builds.append(build)
    for build in builds + builds[:1]:
        result = build.run("bash", "echo hi", "--no-network")
        assert result["output"] == "hi\n", result
        assert len(pins()) == 1, pins()
        assert len(plans()) == 1, plans()
    if result["image"] != "host":  # an image's root, then the host's beside it
        assert builds[1].run("bash", "echo host", "--no-network", "--image", "host")["success"]
        assert len(pins()) == 2 and len(plans()) == 2, (pins(), plans())


@root_only
def test_runs_take_the_plan_the_first_kept_and_refuse_a_planted_one(runbox):
    """A CLI run takes its root's plan from the state directory (plan_cache.h) instead of
    finding every system path again: the entry the first run kept is read, not rewritten, by
    the next; one that is not a plan this build wrote (planted, cut short) is refused and
    made anew, and the run goes on as before."""
    templates = os.path.join(runbox.state_dir, "templates")
    plans = lambda: sorted(n for n in os.listdir(templates) if n.startswith("plan-"))
    assert runbox.run("bash", "echo one", "--no-network")["output"] == "one\n"
    [name] = plans()
    path = os.path.join(templates, name)
    kept = os.stat(path)
    assert kept.st_mode & 0o777 == 0o600 and kept.st_size > 50_000
    assert runbox.run("bash", "echo two", "--no-network")["output"] == "two\n"
    assert plans() == [name] and os.stat(path).st_ino == kept.st_ino
    good = open(path, "rb").read()
    for planted in (b"\0" * len(good), good[:-1], good[:64] + b"\xff" * (len(good) - 64)):
        os.unlink(path)
        with open(path, "wb") as f:
            f.write(planted)
        os.chmod(path, 0o600)
        planted_ino = os.stat(path).st_ino
        result = runbox.run("bash", "echo three; ls /usr/bin/bash", "--no-network")
        assert result["output"] == "three\n/usr/bin/bash\n", result
        assert os.stat(path).st_ino != planted_ino and open(path, "rb").read() == good


@root_only
def test_an_idle_session_costs_the_host_at_most_64_kib(runbox):
    image = os.path.join(runbox.state_dir, "sessions.img")
    runbox.run("bash", "true", "--session", "warm", "--no-network")
    subprocess.run(["sync"], check=True)
    before = os.stat(image).st_blocks * 512
    count = 50
    for i in range(count):
        runbox.run("bash", "printf hi > f", "--session", f"idle{i}", "--no-network")
    subprocess.run(["sync"], check=True)
    per_session = (os.stat(image).st_blocks * 512 - before) / count
    assert per_session <= 64 * 1024, f"{per_session / 1024:.1f} KiB per idle session"


@root_only
def test_the_storage_as_a_whole_is_bounded_and_says_so_when_full(runbox):
    box = Runbox(runbox.state_dir + "-small")
    env = {"RUNBOX_STORAGE_SIZE": "600M"}
    fill = box.run("bash", "head -c 900M /dev/zero > big; echo rc=$?", "--session", "a",
                   "--no-network", "--timeout", "120", env=env)
    assert "rc=1" in fill["output"] and ("No space left" in fill["error"] or
                                         "Disk quota" in fill["error"]), fill
    refused = box.cli("sessions", "new", env=env)
    assert refused.returncode == 1, refused
    assert b"the sessions' storage is full" in refused.stderr, refused.stderr
    ran = box.cli("run", "bash", "-c", "true", "--json", env=env)
    assert ran.returncode == 1 and b"storage is full" in ran.stderr, ran.stderr
    # Freeing space makes room again, and nothing stored was lost.
    assert box.cli("files", "rm", "a", "big", env=env).returncode == 0
    again = box.run("bash", "echo ok", "--session", "b", "--no-network", env=env)
    assert again["output"] == "ok\n"
    box.remove_all_sessions()


@pytest.fixture
def small_host_disk(tmp_path):
    """A host filesystem of 1.5 GiB (a tmpfs) for a state directory."""
    path = tmp_path / "smallhost"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1536m", "runbox-test", str(path)],
                   check=True)
    yield path
    unmount_storage_below(path)
    subprocess.run(["umount", "-l", str(path)], check=False)


@root_only
def test_a_host_disk_that_fills_gives_clear_errors_and_loses_nothing_stored(small_host_disk):
    box = Runbox(str(small_host_disk / "state"))
    env = {"RUNBOX_STORAGE_SIZE": "8G"}  # more than the host has: the image is sparse
    stored = box.run("bash", "head -c 1M /dev/urandom > kept.bin; sha256sum kept.bin",
                     "--session", "keep", "--no-network", env=env)
    assert stored["success"], stored
    digest = stored["output"].split()[0]
    # Something else fills the host's disk.
    with open(small_host_disk / "filler", "wb") as f:
        f.truncate(0)
        os.posix_fallocate(f.fileno(), 0, 1200 << 20)
    ran = box.cli("run", "bash", "-c", "echo hi", "--session", "keep", env=env)
    assert ran.returncode == 1, ran
    assert b"the host's disk under" in ran.stderr and b"free some space" in ran.stderr, ran.stderr
    created = box.cli("sessions", "new", env=env)
    assert created.returncode == 1 and b"the host's disk under" in created.stderr
    got = box.cli("files", "get", "keep", "kept.bin", env=env)
    assert got.returncode == 0
    import hashlib
    assert hashlib.sha256(got.stdout).hexdigest() == digest
    os.unlink(small_host_disk / "filler")
    again = box.run("bash", "sha256sum kept.bin", "--session", "keep", "--no-network", env=env)
    assert again["output"].split()[0] == digest
    box.remove_all_sessions()


# --- crash safety -------------------------------------------------------------------------

def trash_and_scratch(runbox):
    found = []
    for name in (".trash", ".scratch"):
        path = os.path.join(runbox.state_dir, "sessions", name)
        if os.path.isdir(path):
            found += os.listdir(path)
    return found


@pytest.mark.parametrize("point", ["session-create", "quota"])
def test_a_runbox_killed_while_creating_a_session_leaves_a_usable_state(runbox, point):
    runbox.run("bash", "true", "--no-network")  # the storage exists
    killed = runbox.cli("run", "bash", "-c", "echo hi", "--session", "crash",
                        env={"RUNBOX_CRASH_AT": point})
    assert killed.returncode == -9, killed
    assert "crash" not in [s["session_id"] for s in
                           json.loads(runbox.cli("sessions", "list", "--json").stdout)]
    assert trash_and_scratch(runbox) == []  # the next runbox swept the half-made session
    result = runbox.run("bash", "echo hi > f; cat f", "--session", "crash", "--no-network")
    assert result["output"] == "hi\n"


def test_a_runbox_killed_while_removing_a_session_leaves_a_usable_state(runbox):
    runbox.run("bash", "mkdir -p a/b; echo data > a/b/f", "--session", "crash", "--no-network")
    killed = runbox.cli("sessions", "rm", "crash", env={"RUNBOX_CRASH_AT": "session-remove"})
    assert killed.returncode == -9, killed
    listed = runbox.cli("sessions", "list", "--json")
    assert "crash" not in [s["session_id"] for s in json.loads(listed.stdout)]
    assert trash_and_scratch(runbox) == []
    fresh = runbox.run("bash", "ls -A | wc -l", "--session", "crash", "--no-network")
    assert fresh["output"].strip() == "0"


def test_a_runbox_killed_during_an_execution_leaves_a_usable_state(runbox):
    runbox.run("bash", "echo before > kept", "--session", "crash", "--no-network")
    proc = runbox.popen("run", "bash", "-c", "echo x > /tmp/t; echo y > during; sleep 30",
                        "--session", "crash", "--no-network")
    deadline = time.time() + 10
    while time.time() < deadline and not os.listdir(
            os.path.join(runbox.state_dir, "sessions", ".scratch")):
        time.sleep(0.02)
    time.sleep(0.3)
    proc.kill()
    proc.wait()
    result = runbox.run("bash", "cat kept during; ls /tmp | wc -l", "--session", "crash",
                        "--no-network", "--timeout", "20")
    assert result["output"].split() == ["before", "y", "0"], result
    assert trash_and_scratch(runbox) == []


# --- the earlier layout -------------------------------------------------------------------

def make_v1_state(state_dir, canary, mounted):
    """A state directory as runbox made it before one image held all sessions: per session a
    lock, work/ and, as root, disk.img (ext4) holding work/'s files."""
    sessions = os.path.join(state_dir, "sessions")
    os.makedirs(sessions)
    contents = {"alpha": {"a.txt": b"alpha\n", "dir/b.bin": bytes(range(256)) * 40},
                "beta": {"notes.md": b"# beta\n"},
                "gamma": {}}
    for name, files in contents.items():
        top = os.path.join(sessions, name)
        work = os.path.join(top, "work")
        os.makedirs(work)
        with open(os.path.join(top, "lock"), "w") as f:
            f.write("1700000000\n")
        image = os.path.join(top, "disk.img")
        if IS_ROOT:
            with open(image, "wb") as f:
                f.truncate(64 << 20)
            subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "root_owner=3001000:3001000", image],
                           check=True)
            subprocess.run(["mount", "-o", "loop", image, work], check=True)
        for path, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(work, path)), exist_ok=True)
            with open(os.path.join(work, path), "wb") as f:
                f.write(data)
        os.symlink(canary, os.path.join(work, "to_canary"))
        os.mkfifo(os.path.join(work, "pipe"))
        if IS_ROOT and name not in mounted:
            subprocess.run(["umount", work], check=True)
    return contents


def test_a_state_directory_of_the_earlier_layout_is_migrated_on_first_use(runbox, tmp_path):
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep.txt").write_text("keep")
    contents = make_v1_state(runbox.state_dir, str(canary), mounted={"beta"})
    listed = runbox.cli("sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(s["session_id"] for s in json.loads(listed.stdout)) == sorted(contents)
    for name, files in contents.items():
        for path, data in files.items():
            got = runbox.cli("files", "get", name, path)
            assert got.returncode == 0 and got.stdout == data, (name, path, got.stderr)
        kinds = {f["path"]: f["type"] for f in
                 json.loads(runbox.cli("files", "list", name, "--json").stdout)}
        assert kinds["to_canary"] == "link" and kinds["pipe"] == "other", kinds
    assert (canary / "keep.txt").read_text() == "keep"
    assert not os.path.exists(os.path.join(runbox.state_dir, "sessions.v1"))
    assert not [line for line in mount_lines() if "/sessions.v1/" in line]
    ran = runbox.run("bash", "cat a.txt", "--session", "alpha", "--no-network")
    assert ran["output"] == "alpha\n"
    if IS_ROOT:
        assert storage(runbox)["layout"] == "btrfs"


@root_only
def test_a_migration_cut_short_resumes_and_loses_or_doubles_nothing(runbox, tmp_path):
    canary = tmp_path / "canary"
    canary.mkdir()
    contents = make_v1_state(runbox.state_dir, str(canary), mounted=set())
    killed = runbox.cli("sessions", "list", env={"RUNBOX_CRASH_AT": "migrate"})
    assert killed.returncode == -9, killed
    listed = runbox.cli("sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(s["session_id"] for s in json.loads(listed.stdout)) == sorted(contents)
    for name, files in contents.items():
        for path, data in files.items():
            assert runbox.cli("files", "get", name, path).stdout == data
    assert trash_and_scratch(runbox) == []
