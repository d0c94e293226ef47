"""Importing images built elsewhere (issue 17, item 3): `runbox images import NAME SOURCE` takes a
root filesystem tar, an OCI image layout (a directory, or a tar of one) and runs sandboxes on it;
a hostile archive is refused with its reason, is not listed, and leaves nothing in the store's
staging directory nor outside it.

The root filesystem is made here from the host's own bash, env and cat with the libraries ldd
names, at their paths and through the host's links (bin -> usr/bin and the like), plus a marker
file: small, and without the host's Python, which must then be invisible. The marker is in
/usr/share: a sandbox shows an image's /usr whole, but of its /etc only what programs need."""
import json
import os
import shutil
import subprocess
import tarfile

import pytest

from conftest import RUNBOX, host_programs_tree

IS_ROOT = os.geteuid() == 0
HOST_PROGRAMS = ["/bin/bash", "/usr/bin/env", "/bin/cat"]
MARKER = "made by test_image_import\n"
MARKER_PATH = "usr/share/runbox-test/marker"
RUN_CODE = f"cat /{MARKER_PATH}; test -e /usr/bin/python3 || echo no-python"


def images_cli_available():
    """Whether this runbox has `runbox images` (another change brings it)."""
    import tempfile
    with tempfile.TemporaryDirectory() as state:
        env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": state}
        try:
            proc = subprocess.run([RUNBOX, "--state-dir", state, "images", "list", "--json"],
                                  capture_output=True, timeout=60, env=env)
            subprocess.run([RUNBOX, "--state-dir", state, "storage", "unmount"],
                           capture_output=True, timeout=60, env=env)
        except OSError:
            return False
        return proc.returncode == 0


pytestmark = pytest.mark.skipif(not images_cli_available(),
                                reason="this runbox has no `runbox images` yet "
                                       "(`runbox images list --json` fails)")


@pytest.fixture
def runbox(runbox):
    """Imports go to the store in the test's own state directory, never to the store the suite
    may run on (RUNBOX_TEST_ON_IMAGE: the system's, shared by every test)."""
    suite_env = runbox.env
    own_store = os.path.join(runbox.state_dir, "images")
    runbox.env = lambda extra=None: {**suite_env(), "RUNBOX_IMAGES": own_store, **(extra or {})}
    return runbox


# --- what the tests import ----------------------------------------------------------------

@pytest.fixture(scope="module")
def rootfs(tmp_path_factory):
    """A minimal root filesystem tree: bash, env, cat, their libraries, the marker."""
    tree = host_programs_tree(str(tmp_path_factory.mktemp("rootfs") / "tree"), HOST_PROGRAMS)
    os.makedirs(os.path.dirname(os.path.join(tree, MARKER_PATH)))
    with open(os.path.join(tree, MARKER_PATH), "w") as f:
        f.write(MARKER)
    assert not os.path.lexists(os.path.join(tree, "usr/bin/python3"))
    return tree


def pack_tree(tree, archive, extra=()):
    """tree as a tar archive (gzip by its name), then the TarInfo/data pairs of extra."""
    with tarfile.open(archive, "w:gz" if archive.endswith(".gz") else "w",
                      format=tarfile.PAX_FORMAT) as tar:
        tar.add(tree, arcname=".")
        for info, data in extra:
            add_member(tar, info, data)
    return archive


def add_member(tar, info, data=None):
    if data is not None:
        import io
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


def member(name, kind=tarfile.REGTYPE, mode=0o644, link="", size=0):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname, info.size = kind, mode, link, size
    info.devmajor, info.devminor = 8, 0
    return info


def umoci(*args):
    proc = subprocess.run(["umoci", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"umoci {' '.join(args)}: {proc.stderr}"


@pytest.fixture(scope="module")
def oci_layout(rootfs, tmp_path_factory):
    """The tree as an OCI image layout made by umoci (one layer), tag "t"."""
    if not shutil.which("umoci"):
        pytest.skip("umoci is not installed (make deps installs it)")
    base = tmp_path_factory.mktemp("oci")
    layout, bundle = str(base / "layout"), str(base / "bundle")
    umoci("init", "--layout", layout)
    umoci("new", "--image", layout + ":t")
    rootless = [] if IS_ROOT else ["--rootless"]
    umoci("unpack", *rootless, "--image", layout + ":t", bundle)
    subprocess.run(["cp", "-a", rootfs + "/.", os.path.join(bundle, "rootfs")], check=True)
    umoci("repack", "--image", layout + ":t", bundle)
    return layout


def copy_layout(layout, to):
    shutil.copytree(layout, to, symlinks=True)
    return to


def layout_blobs(layout, index_path="index.json"):
    """The layout's manifest (its JSON) and the path of its first layer's blob."""
    with open(os.path.join(layout, index_path)) as f:
        index = json.load(f)
    digest = index["manifests"][0]["digest"]
    with open(os.path.join(layout, "blobs", "sha256", digest.split(":")[1])) as f:
        manifest = json.load(f)
    layer = manifest["layers"][0]["digest"].split(":")[1]
    return index, os.path.join(layout, "blobs", "sha256", layer)


# --- the CLI -------------------------------------------------------------------------------

def cli(runbox, *args, timeout=300):
    return runbox.cli("--state-dir", runbox.state_dir, *args, timeout=timeout)


def import_image(runbox, name, source, *flags):
    proc = cli(runbox, "images", "import", name, source, *flags, "--json")
    if proc.returncode != 0 and not IS_ROOT and b"needs root" in proc.stderr:
        pytest.skip("importing images needs root here: " + proc.stderr.decode(errors="replace"))
    return proc


def listed(runbox):
    proc = cli(runbox, "images", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def staging_left(runbox):
    tmp = os.path.join(runbox.state_dir, "images", "tmp")
    return os.listdir(tmp) if os.path.isdir(tmp) else []


def imported(runbox, name, source, *flags):
    proc = import_image(runbox, name, source, *flags)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    info = json.loads(proc.stdout)
    assert info["name"] == name and info["digest"].startswith("sha256:"), info
    assert info["size_bytes"] > 0
    assert name in [i["name"] for i in listed(runbox)]
    assert staging_left(runbox) == []
    return info


def run_on(runbox, name, code=RUN_CODE):
    proc = cli(runbox, "run", "bash", "-c", code, "--image", name, "--json")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return json.loads(proc.stdout.decode().splitlines()[-1])


def assert_refused(runbox, name, source, says, *flags):
    proc = import_image(runbox, name, source, *flags)
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode != 0, f"{source} was imported: {proc.stdout}"
    assert says in stderr, stderr
    assert name not in [i["name"] for i in listed(runbox)]
    assert staging_left(runbox) == [], "a refused import left its staging directory"


@pytest.fixture
def canary(tmp_path):
    """A directory outside the store that hostile links point into."""
    path = tmp_path / "canary"
    path.mkdir()
    (path / "keep.txt").write_text("canary\n")
    yield str(path)
    assert sorted(os.listdir(path)) == ["keep.txt"], "an import wrote beside the canary"
    assert (path / "keep.txt").read_text() == "canary\n"


# --- imports that work ---------------------------------------------------------------------

def test_a_root_filesystem_tar_is_imported_and_runs(runbox, rootfs, tmp_path):
    archive = pack_tree(rootfs, str(tmp_path / "rootfs.tar.gz"))
    info = imported(runbox, "plain", archive)
    result = run_on(runbox, "plain")
    assert result["success"], result
    assert result["output"] == MARKER + "no-python\n", result  # the host's python is not there
    again = imported(runbox, "plain-again", archive)
    assert again["digest"] == info["digest"]  # the same files, the same image


def test_an_image_whose_usr_went_missing_is_refused_with_a_clear_error(runbox, rootfs, tmp_path):
    """Which paths a sandbox shows is found at an image's first execution, not when runbox
    starts; that the image has a /usr is still checked first, and said."""
    info = imported(runbox, "broken", pack_tree(rootfs, str(tmp_path / "rootfs.tar")))
    tree = os.path.join(runbox.state_dir, "images", info["digest"].replace(":", "-"))
    os.rename(os.path.join(tree, "usr"), os.path.join(tree, "usr-gone"))
    proc = cli(runbox, "run", "bash", "-c", "echo ran", "--image", "broken", "--json")
    assert proc.returncode != 0 and b"ran" not in proc.stdout, proc.stdout
    assert b"image broken has no /usr directory" in proc.stderr, proc.stderr
    assert "broken" in [i["name"] for i in listed(runbox)]  # the store itself still reads


def test_an_oci_layout_made_by_umoci_is_imported_and_runs(runbox, oci_layout):
    imported(runbox, "from-oci", oci_layout)
    result = run_on(runbox, "from-oci")
    assert result["success"], result
    assert result["output"] == MARKER + "no-python\n", result


def test_an_oci_layout_in_a_tar_is_imported_and_runs(runbox, oci_layout, tmp_path):
    archive = str(tmp_path / "oci-archive.tar")
    with tarfile.open(archive, "w") as tar:
        tar.add(oci_layout, arcname=".")
    imported(runbox, "from-oci-archive", archive)
    result = run_on(runbox, "from-oci-archive")
    assert result["output"] == MARKER + "no-python\n", result


def test_set_uid_file_is_imported_with_the_bit_cleared_when_asked(runbox, rootfs, tmp_path):
    archive = pack_tree(rootfs, str(tmp_path / "setuid.tar"),
                        [(member("usr/bin/su", mode=0o4755), b"#!/bin/bash\n")])
    assert_refused(runbox, "setuid", archive,
                   'member "usr/bin/su" is set-uid (mode 4755): images may not hold set-id '
                   "programs; --drop-setid imports it with the bit cleared")
    imported(runbox, "setuid", archive, "--drop-setid")
    result = run_on(runbox, "setuid", "test -u /usr/bin/su && echo set-uid || echo plain")
    assert result["output"] == "plain\n", result


# --- hostile archives, each refused and leaving nothing -----------------------------------

HOSTILE = {
    "link-climbing-to-the-canary": (
        lambda canary: [member("link", tarfile.SYMTYPE, 0o777, "../" * 12 + canary.lstrip("/")),
                        (member("link/keep.txt"), b"overwritten\n")],
        "which climbs out of the image"),
    "member-through-a-link-to-the-canary": (
        lambda canary: [member("link", tarfile.SYMTYPE, 0o777, canary),
                        (member("link/keep.txt"), b"overwritten\n")],
        'goes through the link "link"'),
    "member-through-a-link-to-root": (
        lambda canary: [member("link", tarfile.SYMTYPE, 0o777, "/"),
                        (member("link" + canary + "/new.txt"), b"escaped\n")],
        'goes through the link "link" (-> /)'),
    "dot-dot": (
        lambda canary: [(member("../../../../../../../.." + canary + "/new.txt"), b"x\n")],
        'with a ".." component'),
    "link-climbing-out": (
        lambda canary: [member("a", tarfile.DIRTYPE, 0o755),
                        member("a/b", tarfile.SYMTYPE, 0o777, "../../../etc")],
        'is a link to "../../../etc", which climbs out of the image'),
    "hard-link-out": (
        lambda canary: [member("h", tarfile.LNKTYPE, 0o644, "../canary/keep.txt")],
        'has a hard link target with a ".." component'),
    "hard-link-to-the-hosts-file": (
        lambda canary: [member("h", tarfile.LNKTYPE, 0o644, canary + "/keep.txt")],
        "which is not a regular file unpacked before it"),
    "char-device": (
        lambda canary: [member("dev/null", tarfile.CHRTYPE, 0o666)],
        'member "dev/null" is a character device: images may hold directories, regular files '
        "and links only"),
    "block-device": (
        lambda canary: [member("dev/sda", tarfile.BLKTYPE, 0o660)],
        'member "dev/sda" is a block device: images may hold directories, regular files and '
        "links only"),
    "fifo": (
        lambda canary: [member("run/fifo", tarfile.FIFOTYPE, 0o600)],
        'member "run/fifo" is a FIFO'),
    "set-uid": (
        lambda canary: [(member("usr/bin/su", mode=0o4755), b"x")],
        "is set-uid"),
    "whiteout-outside-a-layer": (
        lambda canary: [(member("etc/.wh.passwd"), b"")],
        "whiteouts belong in image layers"),
    "member-declaring-10-gib": (
        # A header only: the archive ends where its 10 GiB would begin.
        lambda canary: [member("big", size=10 << 30)],
        '"big"'),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_root_filesystem_is_refused_and_leaves_nothing(runbox, canary, tmp_path,
                                                                  case):
    members, says = HOSTILE[case]
    archive = str(tmp_path / f"{case}.tar")
    with open(archive, "wb") as out:
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for item in members(canary):
                info, data = item if isinstance(item, tuple) else (item, None)
                if info.isreg() and info.size and data is None:
                    # A header only (tarfile would want the data): the archive ends there.
                    out.write(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
                    break
                add_member(tar, info, data)
    assert_refused(runbox, "hostile", archive, says)
    assert not os.path.exists("/new.txt")


def test_a_layout_whose_layer_does_not_match_its_digest_is_refused(runbox, oci_layout,
                                                                    tmp_path):
    layout = copy_layout(oci_layout, str(tmp_path / "altered"))
    _, layer = layout_blobs(layout)
    data = bytearray(open(layer, "rb").read())
    data[len(data) // 2] ^= 0xff
    with open(layer, "wb") as f:
        f.write(data)
    assert_refused(runbox, "altered", layout, "does not match its digest")


def test_a_layout_digest_naming_a_path_is_refused(runbox, oci_layout, tmp_path):
    layout = copy_layout(oci_layout, str(tmp_path / "escaping"))
    index, _ = layout_blobs(layout)
    index["manifests"][0]["digest"] = "sha256:../../../../etc/passwd"
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump(index, f)
    assert_refused(runbox, "escaping", layout,
                   'has no valid digest ("sha256:../../../../etc/passwd")')
