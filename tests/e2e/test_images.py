"""Runtime images (issue 17): sandboxes on a root image of their own, built from Debian 13
with mmdebstrap, chosen per request, with the host's /usr as the fallback.

The default image is the one `make deps` builds into the system's store
(/var/lib/runbox/images, or RUNBOX_TEST_IMAGES); a machine without it builds it here
once (about a minute, root only). Images made by the tests go to stores of their own."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import RUNBOX, ROOT, Runbox

SYSTEM_STORE = os.environ.get("RUNBOX_TEST_IMAGES", "/var/lib/runbox/images")
IS_ROOT = os.geteuid() == 0


def has_default(store, state_dir):
    proc = subprocess.run([RUNBOX, "--images", store, "--state-dir", state_dir, "images",
                           "list", "--json"], capture_output=True, env={"PATH": "/usr/bin:/bin"})
    Runbox(state_dir).cli("storage", "unmount")
    return proc.returncode == 0 and any(i["name"] == "default" for i in json.loads(proc.stdout))


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    """An image store that holds the default image."""
    if os.path.isdir(SYSTEM_STORE) and os.access(SYSTEM_STORE, os.R_OK) and \
            has_default(SYSTEM_STORE, str(tmp_path_factory.mktemp("probe"))):
        return SYSTEM_STORE
    if not IS_ROOT or not shutil.which("mmdebstrap"):
        pytest.skip("no default image in %s, and building one needs root and mmdebstrap "
                    "(make deps builds it)" % SYSTEM_STORE)
    built = str(tmp_path_factory.mktemp("images"))
    state = str(tmp_path_factory.mktemp("state"))
    proc = subprocess.run([RUNBOX, "--images", built, "--state-dir", state, "images", "build",
                           "default"], capture_output=True, timeout=900)
    Runbox(state).cli("storage", "unmount")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return built


@pytest.fixture
def on_image(tmp_path, store):
    """runbox on a state directory of its own with the default image's store."""
    box = Runbox(str(tmp_path / "state"))
    box.images = store
    real_env = box.env
    box.env = lambda extra=None: {**real_env(extra), "RUNBOX_IMAGES": store}
    yield box
    box.remove_all_sessions()


def version_tuple(text):
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


# --- what code sees on the default image ---------------------------------------------------

def test_default_image_has_python_313_node_20_and_the_data_stack(on_image):
    r = on_image.run("python", "import sys, numpy, pandas, matplotlib, scipy, requests, bs4, "
                     "lxml, PIL, openpyxl\nprint(sys.version.split()[0])")
    assert r["success"], r["error"]
    assert r["image"] == "default"
    assert version_tuple(r["output"]) >= (3, 12), r["output"]
    js = on_image.run("javascript", "console.log(process.version)")
    assert js["success"] and js["image"] == "default", js
    assert version_tuple(js["output"]) >= (20, 0), js["output"]
    sh = on_image.run("bash", "echo $BASH_VERSION; cat /etc/debian_version")
    assert sh["success"], sh
    assert sh["output"].splitlines()[1].startswith("13"), sh["output"]  # trixie


def test_the_images_utf8_locale_comes_from_its_archive_and_works(on_image):
    """LANG=C.UTF-8 is read from one locale archive (images.c: LOCALE_ARCHIVE_HOOK), and is
    the locale every language gets: a character of two bytes is one character."""
    r = on_image.run("bash", "test -f /usr/lib/locale/locale-archive && echo archive; "
                     "x=$'\\u00e9'; echo ${#x}; locale -a | grep -ix c.utf8")
    assert r["success"] and r["image"] == "default", r
    assert r["output"].split() == ["archive", "1", "C.utf8"], r["output"]
    # The claim itself: bash's locale is mapped from the archive, none of C.utf8's own files.
    maps = on_image.run("bash", "grep -o '/usr/lib/locale/[^ ]*' /proc/$$/maps | sort -u")
    assert maps["output"] == "/usr/lib/locale/locale-archive\n", maps["output"]
    py = on_image.run("python", "import locale; print(locale.setlocale(locale.LC_ALL, ''), "
                      "len(b'\\xc3\\xa9'.decode(locale.getpreferredencoding())))")
    assert py["success"] and py["output"] == "C.UTF-8 1\n", py


def test_host_only_programs_are_invisible_on_the_image(on_image):
    """What the host has and the image does not (the compiler, cmake, this repository's
    tools) cannot be seen, whatever the path."""
    host_only = [p for p in ("/usr/bin/gcc", "/usr/bin/cmake", "/usr/bin/ninja",
                             "/usr/bin/mmdebstrap") if os.path.exists(p)]
    assert host_only, "the host has none of the programs this test looks for"
    code = "for p in %s; do [ -e $p ] && echo SEEN $p; done; command -v gcc cmake || true; " \
           "python3 -c 'import sys; print(sys.version_info[:2])'" % " ".join(host_only)
    r = on_image.run("bash", code)
    assert r["success"], r
    assert "SEEN" not in r["output"], r["output"]
    assert "(3, 11)" not in r["output"]  # the host's Python is not the one that runs


def test_image_host_falls_back_to_the_hosts_usr(on_image):
    r = on_image.run("python", "import sys; print(sys.version_info[:2])", "--image", "host")
    assert r["success"] and r["image"] == "host", r
    host = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2])"],
                          capture_output=True, text=True).stdout
    assert r["output"] == host


def test_the_image_is_read_only_and_the_sandbox_still_isolated(on_image):
    r = on_image.run("bash", "id -u; touch /usr/x 2>/dev/null || echo ro-usr; touch /etc/x "
                     "2>/dev/null || echo ro-etc; ls /dev | tr '\\n' ' '; echo; "
                     "find /usr /etc -perm /6000 -type f 2>/dev/null | head -3; echo done")
    assert r["success"], r
    lines = r["output"].splitlines()
    assert lines[0] == "1000"
    assert "ro-usr" in r["output"] and "ro-etc" in r["output"]
    # The sandbox's own /dev, never the image's device nodes (mmdebstrap makes some).
    assert "sda" not in lines[3] and "console" not in lines[3], lines[3]
    assert lines[4] == "done", "set-id files in the image: " + r["output"]


def test_requirements_install_for_the_images_interpreter(on_image, tmp_path):
    """An environment is keyed by image: the same requirement on the image and on the
    host are two installs, each for its own Python."""
    from conftest import serve_package_index
    with serve_package_index(tmp_path / "index", "rbximgpkg", "1.0",
                             "WHERE = __file__\n") as index:
        env = {"PIP_INDEX_URL": index["url"], "RUNBOX_INSTALL_NETWORK": "host"}
        results = {}
        for image in ("default", "host"):
            results[image] = on_image.run(
                "python", "import rbximgpkg, sys; print(sys.version_info[:2], rbximgpkg.WHERE)",
                "--require", "rbximgpkg==1.0", "--image", image, env=env,
                timeout=300)
    for image, r in results.items():
        assert r["success"], (image, r["error"])
        assert r["install"]["reused"] is False
    assert results["default"]["install"]["environment"] != \
        results["host"]["install"]["environment"]
    assert "(3, 11)" not in results["default"]["output"]
    listed = json.loads(on_image.cli("envs", "list", "--json").stdout)
    assert len([e for e in listed if "rbximgpkg==1.0" in e["requirements"]]) == 2


def test_a_stateful_kernel_starts_again_on_another_image(on_image):
    first = on_image.run("python", "import sys; v = sys.version_info[:2]; print(v)",
                         "--session", "imgk", "--stateful")
    assert first["success"] and first["image"] == "default", first
    same = on_image.run("python", "print(v)", "--session", "imgk", "--stateful")
    assert same["output"] == first["output"]
    other = on_image.run("python", "print('v' in globals())", "--session", "imgk",
                         "--stateful", "--image", "host")
    assert other["success"] and other["image"] == "host", other
    assert other["output"] == "False\n"


def test_runbox_check_names_the_images(on_image):
    proc = on_image.cli("check", "--json", timeout=300)
    items = {i["name"]: i for i in json.loads(proc.stdout)["checks"]}
    assert items["images"]["ok"]
    assert "executions run on image default" in items["images"]["detail"]
    assert "default (sha256:" in items["images"]["detail"]
    assert re.search(r"/usr/bin/python3 3\.1[2-9]", items["python"]["detail"]), items["python"]


# --- one image store per host, whatever the state directory -------------------------------

def without_store(box, extra=None):
    """box's environment without RUNBOX_IMAGES: the store is runbox's own default."""
    env = box.env(extra)
    env.pop("RUNBOX_IMAGES", None)
    return env


def test_any_state_directory_runs_on_the_hosts_image_store(tmp_path, store):
    """The default image `make deps` built serves every state directory: root's store is the
    system's, an ordinary user's is in their data directory (XDG_DATA_HOME here, a link to the
    store the suite has). Nothing is written into the store."""
    extra = {}
    if not IS_ROOT:
        data = tmp_path / "data"
        (data / "runbox").mkdir(parents=True)
        os.symlink(store, data / "runbox" / "images")
        extra = {"XDG_DATA_HOME": str(data), "HOME": str(tmp_path / "home")}
    elif store != SYSTEM_STORE:
        pytest.skip("the default image is not in the system's store (%s)" % SYSTEM_STORE)
    before = os.listdir(os.path.join(store, "names"))
    for name in ("one", "other"):
        box = Runbox(str(tmp_path / name))
        proc = subprocess.run([RUNBOX, "--state-dir", box.state_dir, "run", "python", "--json",
                               "-c", "import sys; print(sys.version)"], capture_output=True,
                              env=without_store(box, extra), timeout=120)
        box.cli("storage", "unmount")
        r = json.loads(proc.stdout)
        assert r["image"] == "default" and r["image_note"] is None, r
        assert r["output"].startswith("3.13"), r["output"]
    assert os.listdir(os.path.join(store, "names")) == before


def test_a_run_that_falls_back_to_the_host_says_so(tmp_path):
    """No default image in the store: the result and runbox check say that executions run on
    the host's /usr, and how to mend it; asking for the host, or an operator's default, is no
    fall-back and says nothing."""
    box = Runbox(str(tmp_path / "state"))
    empty = str(tmp_path / "empty store")
    env = {"RUNBOX_IMAGES": empty}
    try:
        r = box.run("python", "print(1)", env=env)
        assert r["image"] == "host" and r["success"], r
        assert empty in r["image_note"] and "runbox images build default" in r["image_note"], r
        assert box.run("python", "print(1)", "--image", "host", env=env)["image_note"] is None
        chosen = box.cli("--default-image", "host", "run", "python", "-c", "1", "--json",
                         env=env)
        assert json.loads(chosen.stdout)["image_note"] is None, chosen
        checks = {c["name"]: c for c in
                  json.loads(box.cli("check", "--json", env=env, timeout=300).stdout)["checks"]}
        assert not checks["images"]["ok"] and empty in checks["images"]["detail"], checks
        assert "host's /usr" in checks["images"]["detail"], checks["images"]
    finally:
        box.cli("storage", "unmount")


@pytest.mark.parametrize("store,code,message", [
    ("", 2, "--images needs a directory"),
    ("/" + "x" * 5000, 1, "File name too long"),
])
def test_hostile_image_store_paths_are_refused(tmp_path, store, code, message):
    box = Runbox(str(tmp_path / "state"))
    proc = box.cli("--images", store, "run", "python", "-c", "print(1)")
    assert proc.returncode == code, proc
    assert message in proc.stderr.decode(errors="replace"), proc.stderr


def test_an_image_store_that_is_a_file_or_a_link_out_runs_on_the_host(tmp_path):
    """A store path that names a file, or a store whose default name links out of it, is no
    image: the run says it fell back, and nothing outside is used as a root."""
    box = Runbox(str(tmp_path / "state"))
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    forged = tmp_path / "forged"
    (forged / "names").mkdir(parents=True)
    os.symlink("/", forged / "names" / "default")
    try:
        for store in (str(not_a_dir), str(forged)):
            r = box.run("python", "print(1)", env={"RUNBOX_IMAGES": store})
            assert r["image"] == "host" and store in r["image_note"], r
    finally:
        box.cli("storage", "unmount")


# --- choosing an image: hostile names, the allow-list, other front ends ---------------------

@pytest.mark.parametrize("name,message", [
    ("../default", "is not an image name"),
    ("Default", "is not an image name"),
    ("a b", "is not an image name"),
    ("x" * 64, "is not an image name"),
    ("sha256-abc", "is not an image name"),
    ("-rf", "is not an image name"),
    ("nope", "no image named 'nope'"),
])
def test_a_bad_image_name_is_refused_clearly(on_image, name, message):
    proc = on_image.cli("run", "python", "-c", "print(1)", "--image", name)
    assert proc.returncode != 0
    assert message in proc.stderr.decode(), proc.stderr
    assert b"Traceback" not in proc.stderr and proc.stdout == b""


def test_the_operators_allow_list_and_default(on_image):
    proc = on_image.cli("run", "python", "-c", "print(1)", "--image", "host",
                        env={"RUNBOX_ALLOW_IMAGES": "default"})
    assert proc.returncode != 0
    assert b"'host' is not one this runbox lets requests name (allowed: default)" in proc.stderr
    r = on_image.run("python", "print(1)", env={"RUNBOX_DEFAULT_IMAGE": "host"})
    assert r["image"] == "host"
    proc = on_image.cli("run", "python", "-c", "1", env={"RUNBOX_DEFAULT_IMAGE": "gone"})
    assert proc.returncode != 0 and b"the default image: no image named 'gone'" in proc.stderr


def test_mcp_takes_an_image(on_image):
    version = "import sys; print(sys.version_info[:2])"
    reply = on_image.mcp_call("execute_python", {"code": version, "image": "host"})
    result = reply["result"]["structuredContent"]
    assert result["image"] == "host" and result["success"], reply
    reply = on_image.mcp_call("execute_python", {"code": version})
    assert reply["result"]["structuredContent"]["image"] == "default"
    reply = on_image.mcp_call("execute_python", {"code": "1", "image": "../../etc"})
    text = json.dumps(reply)
    assert "is not an image name" in text or "does not match" in text, reply


def test_the_python_client_takes_an_image(on_image):
    sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
    try:
        from runbox.client import Client
        client = Client(runbox_bin=on_image.bin, state_dir=on_image.state_dir)
        old = dict(os.environ)
        os.environ["RUNBOX_IMAGES"] = on_image.images
        try:
            r = client.execute_python("import sys; print(sys.version_info[:2])", image="host")
            d = client.execute_python("import numpy; print('ok')")
        finally:
            os.environ.clear()
            os.environ.update(old)
    finally:
        sys.path.pop(0)
    assert r["image"] == "host" and r["success"], r
    assert d["image"] == "default" and d["output"] == "ok\n", d


# --- making images ------------------------------------------------------------------------

@pytest.fixture
def own_store(tmp_path):
    box = Runbox(str(tmp_path / "state"))
    box.images = str(tmp_path / "images")
    real_env = box.env
    box.env = lambda extra=None: {**real_env(extra), "RUNBOX_IMAGES": box.images}
    yield box
    box.remove_all_sessions()


def leftovers(store):
    tmp = os.path.join(store, "tmp")
    return os.listdir(tmp) if os.path.isdir(tmp) else []


@pytest.mark.skipif(not IS_ROOT, reason="mmdebstrap builds as root")
def test_build_from_a_base_lists_remove(own_store):
    box = own_store
    proc = box.cli("images", "build", "mini", "--packages", "python3-minimal", "--json",
                   timeout=900)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    mini = json.loads(proc.stdout)
    assert mini["name"] == "mini" and re.fullmatch(r"sha256:[0-9a-f]{64}", mini["digest"])
    assert mini["packages"] == "python3-minimal" and mini["source"] == "mmdebstrap trixie"
    proc = box.cli("images", "build", "mini2", "--from", "mini", "--packages", "jq", "--json",
                   timeout=900)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    mini2 = json.loads(proc.stdout)
    assert mini2["packages"] == "python3-minimal,jq"
    assert mini2["digest"] != mini["digest"]
    r = box.run("bash", "jq --version; python3 -c 'print(1)'; "
                "test -f /usr/lib/locale/locale-archive && echo archive", "--image", "mini2")
    assert r["success"] and r["output"].startswith("jq-"), r
    assert r["output"].endswith("archive\n"), r  # every image built here has one
    r = box.run("bash", "command -v jq || echo none", "--image", "mini")
    assert r["output"] == "none\n"
    # The default of a store without "default" is the host's /usr.
    assert box.run("bash", "true")["image"] == "host"
    # A language the image lacks is a clear refusal, before anything runs.
    proc = box.cli("run", "javascript", "-c", "1", "--image", "mini")
    assert proc.returncode != 0
    assert b"image 'mini' has no /usr/bin/node" in proc.stderr
    listed = json.loads(box.cli("images", "list", "--json").stdout)
    assert [i["name"] for i in listed] == ["mini", "mini2"]
    # The same name twice is refused; removal takes the tree when no name uses it.
    proc = box.cli("images", "build", "mini", "--packages", "jq")
    assert proc.returncode != 0 and b"an image named 'mini' exists" in proc.stderr
    assert box.cli("images", "rm", "mini").returncode == 0
    assert not os.path.exists(os.path.join(box.images, mini["digest"].replace(":", "-")))
    assert os.path.isdir(os.path.join(box.images, mini2["digest"].replace(":", "-")))
    proc = box.cli("run", "bash", "-c", "true", "--image", "mini")
    assert proc.returncode != 0 and b"no image named 'mini'" in proc.stderr
    assert leftovers(box.images) == []


@pytest.mark.parametrize("args,message", [
    (("build", "bad", "--packages", "python3;rm -rf /"), "is not a Debian package name"),
    (("build", "bad", "--packages", "--option=x"), "is not a Debian package name"),
    (("build", "bad", "--packages", "../x"), "is not a Debian package name"),
    (("build", "bad", "--packages", ""), "--packages needs a value"),
    (("build", "bad", "--packages", "jq", "--suite", "../../etc"), "is not a Debian suite"),
    (("build", "bad", "--packages", "jq", "--mirror", "ftp://x"), "--mirror takes"),
    (("build", "host", "--packages", "jq"), "is not an image name"),
    (("build", "../x", "--packages", "jq"), "is not an image name"),
    (("build", "bad", "--from", "nope"), "no image named 'nope'"),
    (("build",), "build needs the image's name"),
    (("import", "x"), "import needs the archive"),
    (("import", "x", "/nonexistent/archive.tar"), "/nonexistent/archive.tar"),
    (("rm", "nope"), "no image named 'nope'"),
    (("frobnicate",), "unknown command 'frobnicate'"),
    (("list", "--bogus"), "unexpected argument '--bogus'"),
])
def test_hostile_images_arguments_are_refused(own_store, args, message):
    if args[0] == "build" and not IS_ROOT and len(args) > 2 and "needs a value" not in message:
        message = "needs root"  # refused before the arguments' content is looked at
    proc = own_store.cli("images", *args)
    assert proc.returncode != 0
    assert message in proc.stderr.decode(errors="replace"), proc.stderr
    assert leftovers(own_store.images) == []


def test_what_a_killed_build_left_is_swept(own_store, tmp_path):
    """A runbox killed while it built or unpacked an image leaves its staging tree in tmp/;
    the next build or import removes it once that process is gone, and never a live one's."""
    tmp = os.path.join(own_store.images, "tmp")
    dead = next(pid for pid in range(4194303, 4000000, -1)
                if not os.path.exists(f"/proc/{pid}"))
    os.makedirs(os.path.join(tmp, f"image-{dead}-dead", "usr"))
    live = os.path.join(tmp, f"image-{os.getpid()}-live")
    os.makedirs(live)
    empty = tmp_path / "empty.tar"
    empty.write_bytes(b"")
    proc = own_store.cli("images", "import", "x", str(empty))
    assert proc.returncode != 0  # an empty archive is refused, after the sweep
    assert sorted(os.listdir(tmp)) == [os.path.basename(live)]


def test_the_same_content_is_one_tree_whatever_its_times(own_store, tmp_path):
    """Images are addressed by their content: the same files imported twice, their times
    changed in between, give one digest and one tree, which stays until its last name goes."""
    import tarfile
    root = tmp_path / "rootfs"
    (root / "usr" / "share").mkdir(parents=True)
    (root / "usr" / "share" / "data").write_text("the same bytes\n")
    archives = []
    for n, when in enumerate((1_000_000, 2_000_000)):
        for path in (root / "usr" / "share" / "data", root / "usr" / "share", root / "usr"):
            os.utime(path, (when, when))
        archive = tmp_path / f"rootfs{n}.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root / "usr", arcname="usr")
        archives.append(archive)
    digests = []
    for name, archive in zip(("first", "second"), archives):
        proc = own_store.cli("images", "import", name, str(archive), "--json")
        assert proc.returncode == 0, proc.stderr
        digests.append(json.loads(proc.stdout)["digest"])
    assert digests[0] == digests[1]
    tree = os.path.join(own_store.images, digests[0].replace(":", "-"))
    trees = [e for e in os.listdir(own_store.images) if e.startswith("sha256-") and
             not e.endswith(".json")]
    assert trees == [os.path.basename(tree)]
    assert own_store.cli("images", "rm", "first").returncode == 0
    assert os.path.isdir(tree)  # "second" still names it
    assert own_store.cli("images", "rm", "second").returncode == 0
    assert not os.path.exists(tree)
    # Different bytes, a different digest.
    (root / "usr" / "share" / "data").write_text("other bytes\n")
    with tarfile.open(tmp_path / "other.tar", "w") as tar:
        tar.add(root / "usr", arcname="usr")
    proc = own_store.cli("images", "import", "third", str(tmp_path / "other.tar"), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["digest"] != digests[0]
