"""Moving a session its own code filled (issue 28, items 7 and 8): what export writes, import
accepts, byte for byte, through HTTP and the CLI; links are data that no host-side walk follows;
what import would refuse, export refuses first with the same reason; and an archive past a
limit is refused at the first member past it, within a second.

Links in these tests point at canary directories made in the test's tmp, never at / or /etc."""
import gzip
import hashlib
import io
import os
import resource
import stat
import tarfile
import time

import pytest

from http_helpers import Server, e2e, stop_all

SESSION = "filled"

# The session's own code: every kind of name and link a program can make. The tree below
# deep/ is deeper than PATH_MAX (4096 bytes) can name from the top, and deeper than the 64
# levels the earlier export kept and the 32 its import took.
FILL = r"""
import os, sys
canary = sys.argv[1]
os.symlink(canary, "root")                       # an absolute link out of the session
os.symlink("..", "up")                           # a relative one out of it
os.symlink(b"t\nx\xff", b"odd-target")           # a target that is not a name at all
for name in [b"new\nline", b"raw\xff\x01", b"n" * 255, b"...", b" lead", b"tab\there"]:
    with open(name, "wb") as f:
        f.write(name + b"\n")
os.makedirs("ro/in")
open("ro/in/f", "w").write("inside a read-only directory\n")
os.chmod("ro", 0o500)
open("zero", "w").close(); os.chmod("zero", 0)
os.mkdir("sticky"); os.chmod("sticky", 0o1777)
os.mkdir("empty")
with open("sparse", "wb") as f:                  # 64 MiB that hold 8 KiB
    f.seek(1 << 20); f.write(b"middle"); f.seek((64 << 20) - 3); f.write(b"end")
with open("big", "wb") as f:                     # 1 MiB under 21 names: 1 MiB to carry
    f.write(os.urandom(1 << 20))
os.mkdir("names")
for n in range(20):
    os.link("big", f"names/{n}")
os.mkdir("deep"); os.chdir("deep")
for level in range(300):                         # 300 levels of short names...
    os.mkdir("d"); os.chdir("d")
for level in range(20):                          # ...then 20 of 255 bytes: 5,700 bytes deep
    os.mkdir("L" * 255); os.chdir("L" * 255)
open(b"bottom\n", "w").write("the bottom\n")
os.symlink("../" * 320, "top")
print("filled")
"""


def tree_of(top):
    """{path: (kind, mode, what)} of the tree at top, walked by directory fds with O_NOFOLLOW:
    no link is followed, and paths longer than PATH_MAX are no trouble. Files are compared
    by size and SHA-256, links by target, everything by its mode bits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tree = {}
    top_fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    stack = [(top_fd, b"", sorted(map(os.fsencode, os.listdir(top_fd))))]
    try:
        while stack:
            fd, prefix, names = stack[-1]
            if not names:
                os.close(fd)
                stack.pop()
                continue
            name = names.pop()
            path = prefix + name
            st = os.lstat(name, dir_fd=fd)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                tree[path] = ("link", os.readlink(name, dir_fd=fd))
            elif stat.S_ISREG(st.st_mode):
                f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
                digest = hashlib.sha256()
                while chunk := os.read(f, 1 << 20):
                    digest.update(chunk)
                os.close(f)
                tree[path] = ("file", oct(mode), st.st_size, st.st_nlink, digest.hexdigest())
            elif stat.S_ISDIR(st.st_mode):
                tree[path] = ("dir", oct(mode))
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                stack.append((sub, path + b"/", sorted(map(os.fsencode, os.listdir(sub)))))
            else:
                tree[path] = ("other", oct(mode))
    finally:
        for fd, _, _ in stack:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return tree


def work_of(state_dir, session):
    return os.path.join(state_dir, "sessions", session, "work")


def make_canary(tmp_path):
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep").write_text("untouched\n")
    return canary


def assert_canary_untouched(canary):
    assert sorted(os.listdir(canary)) == ["keep"]
    assert (canary / "keep").read_text() == "untouched\n"


def assert_same_tree(before, after):
    differing = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not differing, [(k[:120], before.get(k), after.get(k)) for k in differing[:10]]


@pytest.fixture
def two_nodes(tmp_path):
    servers = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        servers.append(Server(tmp_path / name))
    yield servers
    stop_all(servers)


def fill(execute, canary):
    out = execute(FILL.replace("sys.argv[1]", repr(str(canary))))
    assert out["output"] == "filled\n", out


def check_moved(state_a, state_b, canary):
    before, after = tree_of(work_of(state_a, SESSION)), tree_of(work_of(state_b, SESSION))
    assert len(before) > 350 and before[b"root"] == ("link", os.fsencode(canary))
    assert before[b"up"] == ("link", b"..") and before[b"new\nline"][0] == "file"
    assert before[b"names/7"][3] == 21
    assert_same_tree(before, after)
    sparse = os.stat(os.path.join(work_of(state_b, SESSION), "sparse"))
    assert sparse.st_size == 64 << 20 and sparse.st_blocks * 512 < 1 << 20, sparse  # holes stay
    assert_canary_untouched(canary)


def test_a_session_its_own_code_filled_moves_whole_over_http(two_nodes, tmp_path):
    a, b = two_nodes
    canary = make_canary(tmp_path)
    fill(lambda code: a.execute(language="python", session_id=SESSION, code=code), canary)
    exported = a.request("GET", f"/v1/sessions/{SESSION}/export")
    assert exported.status == 200, exported
    assert len(exported.body) < 4 << 20  # holes and a file's other names carry no data
    imported = b.request("POST", f"/v1/sessions/{SESSION}/import", body=exported.body)
    assert imported.status == 201, imported
    check_moved(a.state_dir, b.state_dir, canary)
    # The moved session works, and removing it follows none of its links.
    out = b.execute(language="bash", session_id=SESSION,
                    code="cat 'new\nline' ro/in/f; readlink up")
    assert out["output"] == "new\nline\ninside a read-only directory\n..\n", out
    assert b.request("DELETE", f"/v1/sessions/{SESSION}").status == 200
    assert_canary_untouched(canary)


def test_a_session_its_own_code_filled_moves_whole_through_the_cli(tmp_path):
    a, b = e2e.Runbox(str(tmp_path / "a")), e2e.Runbox(str(tmp_path / "b"))
    canary = make_canary(tmp_path)
    fill(lambda code: a.run("python", code, "--session", SESSION), canary)
    archive = tmp_path / "filled.tar"
    proc = a.cli("sessions", "export", SESSION, "--output", str(archive))
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    # From a pipe: the archive is read twice, the second time from a copy.
    with open(archive, "rb") as piped:
        proc = b.cli("sessions", "import", SESSION, input=piped.read())
    assert proc.returncode == 0 and b"imported" in proc.stdout, proc.stderr.decode(errors="replace")
    check_moved(a.state_dir, b.state_dir, canary)
    assert b.cli("sessions", "rm", SESSION).returncode == 0
    assert_canary_untouched(canary)


# --- links are data, but never a way in -------------------------------------------------------

def tar_of(*members):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, kind, link, data in members:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mode = kind, link, 0o644
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def through_links(canary):
    """Archives that would write into the canary if import followed a link it made."""
    c = str(canary)
    return {
        "file below an absolute link": [("in", tarfile.SYMTYPE, c, None),
                                        ("in/planted", tarfile.REGTYPE, "", b"x")],
        "directory below a link": [("in", tarfile.SYMTYPE, c, None),
                                   ("in/planted", tarfile.DIRTYPE, "", None)],
        "link below a relative link": [("d", tarfile.DIRTYPE, "", None),
                                       ("d/up", tarfile.SYMTYPE, "../..", None),
                                       ("d/up/planted", tarfile.SYMTYPE, c, None)],
        "a link, then a file of its name": [("in", tarfile.SYMTYPE, c + "/keep", None),
                                            ("in", tarfile.REGTYPE, "", b"x")],
        "a file, then a directory below it": [("f", tarfile.REGTYPE, "", b"x"),
                                              ("f/g", tarfile.REGTYPE, "", b"y")],
        "hard link out": [("hard", tarfile.LNKTYPE, c + "/keep", None)],
        "hard link up": [("hard", tarfile.LNKTYPE, "../../keep", None)],
        "hard link through a link": [("in", tarfile.SYMTYPE, c, None),
                                     ("hard", tarfile.LNKTYPE, "in/keep", None)],
        "hard link to a link": [("in", tarfile.SYMTYPE, c + "/keep", None),
                                ("hard", tarfile.LNKTYPE, "in", None)],
        "hard link to a directory": [("d", tarfile.DIRTYPE, "", None),
                                     ("hard", tarfile.LNKTYPE, "d", None)],
        "hard link to a later file": [("hard", tarfile.LNKTYPE, "f", None),
                                      ("f", tarfile.REGTYPE, "", b"x")],
    }


@pytest.mark.parametrize("case", sorted(through_links("/canary")))
def test_members_through_a_link_are_refused_and_leave_nothing(server, tmp_path, case):
    canary = make_canary(tmp_path)
    response = server.request("POST", "/v1/sessions/victim/import",
                              body=tar_of(*through_links(canary)[case]))
    assert response.status == 400, (case, response)
    assert response.json()["error"]["message"], response
    assert not os.path.exists(os.path.join(server.state_dir, "sessions", "victim"))
    assert_canary_untouched(canary)


# --- a hibernated kernel's part: only the shape export writes, never a way out ------------------

PART = {"SCHILY.xattr.runbox.part": "checkpoint"}
TMP = ".runbox/hibernated-python/tmp/"


def part_tar(*members, marked=PART):
    """An archive whose members carry the mark export writes on a checkpoint's members."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        archive.addfile(tarfile.TarInfo("file.txt"), io.BytesIO(b""))  # an ordinary file
        for name, kind, link, data in members:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mode = kind, link, 0o644
            info.pax_headers = dict(marked)
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


MISSHAPEN = {
    "a part outside .runbox": ([("etc/passwd", tarfile.REGTYPE, "", b"x")], PART,
                               "is not one a checkpoint holds"),
    "an unknown language": ([(".runbox/hibernated-cobol/checkpoint.json", tarfile.REGTYPE, "",
                              b"{}")], PART, "a language runbox does not know"),
    "a language's alias": ([(".runbox/hibernated-py/checkpoint.json", tarfile.REGTYPE, "",
                             b"{}")], PART, "a language runbox does not know"),
    "an image below a directory": ([(".runbox/hibernated-python/images/sub/x", tarfile.REGTYPE,
                                     "", b"x")], PART, "is not one a checkpoint holds"),
    "an image that is a link": ([(".runbox/hibernated-python/images/x", tarfile.SYMTYPE,
                                  "/etc/shadow", None)], PART, "is not one a checkpoint holds"),
    "a record that is a link": ([(".runbox/hibernated-python/checkpoint.json", tarfile.SYMTYPE,
                                  "/etc/shadow", None)], PART, "is not one a checkpoint holds"),
    "a record too large": ([(".runbox/hibernated-python/checkpoint.json", tarfile.REGTYPE, "",
                             b" " * (300 << 10))], PART, "is not one a checkpoint holds"),
    "a hard link in /tmp": ([(TMP + "f", tarfile.REGTYPE, "", b"x"),
                             (TMP + "g", tarfile.LNKTYPE, TMP + "f", None)], PART,
                            "is not one a checkpoint holds"),
    "another part": ([(TMP + "f", tarfile.REGTYPE, "", b"x")],
                     {"SCHILY.xattr.runbox.part": "kernel-memory"},
                     "marked as a part runbox does not carry"),
    "a part named up": ([(".runbox/hibernated-python/../../x", tarfile.REGTYPE, "", b"x")],
                        PART, "'.' or '..' component"),
}


@pytest.mark.parametrize("case", sorted(MISSHAPEN))
def test_a_checkpoint_part_of_another_shape_is_refused_and_leaves_nothing(server, case):
    members, marked, message = MISSHAPEN[case]
    response = server.request("POST", "/v1/sessions/victim/import",
                              body=part_tar(*members, marked=marked))
    assert response.status == 400, (case, response)
    assert message in response.json()["error"]["message"], response.json()
    assert not os.path.exists(os.path.join(server.state_dir, "sessions", "victim"))


@pytest.mark.parametrize("case", sorted(through_links("/canary")))
def test_a_checkpoints_tmp_through_a_link_is_refused_and_leaves_nothing(server, tmp_path, case):
    """A kernel's /tmp is placed as the session's files are: a link it holds is data."""
    canary = make_canary(tmp_path)
    members = [(TMP + name, kind, TMP + link if kind == tarfile.LNKTYPE else link, data)
               for name, kind, link, data in through_links(canary)[case]]
    response = server.request("POST", "/v1/sessions/victim/import", body=part_tar(*members))
    assert response.status == 400, (case, response)
    assert not os.path.exists(os.path.join(server.state_dir, "sessions", "victim"))
    assert_canary_untouched(canary)


def test_a_checkpoint_without_its_signature_is_imported_as_files_and_its_kernel_starts_afresh(
        server, tmp_path):
    canary = make_canary(tmp_path)
    body = part_tar((TMP + "link", tarfile.SYMTYPE, str(canary), None),
                    (TMP + "kept", tarfile.REGTYPE, "", b"in /tmp"),
                    (".runbox/hibernated-python/checkpoint.json", tarfile.REGTYPE, "", b"{}"))
    response = server.request("POST", "/v1/sessions/unsigned/import", body=body)
    assert response.status == 201, response
    session = os.path.join(server.state_dir, "sessions", "unsigned")
    assert os.listdir(os.path.join(session, "work")) == ["file.txt"]  # the part is not a file
    assert not os.path.exists(os.path.join(session, "hibernated-python"))  # and was dropped
    out = server.execute(language="python", session_id="unsigned", stateful=True,
                         code="import os; print(sorted(os.listdir('/tmp')))")
    assert out["output"] == "[]\n", out  # a fresh kernel, with a fresh /tmp
    assert out["kernel_restarted"] is True, out
    assert "without its record or signature" in out["restart_reason"], out
    again = server.execute(language="python", session_id="unsigned", stateful=True, code="1")
    assert again["kernel_restarted"] is False and again["restart_reason"] is None, again
    assert_canary_untouched(canary)


# --- limits: the first member past one refuses the archive, before anything is made -----------

def empty_members(count):
    """A gzipped tar of `count` empty files, written by hand (tarfile takes seconds)."""
    template = bytearray(tarfile.TarInfo("x").tobuf(tarfile.USTAR_FORMAT))
    template[0:100] = bytes(100)
    template[148:156] = b" " * 8
    base = sum(template)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as gz:
        headers = []
        for i in range(count):
            name = b"f%d" % i
            header = bytearray(template)
            header[0:len(name)] = name
            header[148:156] = b"%06o\0 " % (base + sum(name))
            headers.append(bytes(header))
        gz.write(b"".join(headers) + bytes(1024))
    return out.getvalue()


@pytest.fixture(scope="module")
def many_members():
    archive = empty_members(300_000)
    assert len(archive) < 3 << 20  # a 2 MB archive
    return archive


@pytest.mark.serial  # timed
def test_300000_empty_members_are_refused_within_a_second_over_http(server, many_members):
    started = time.monotonic()
    response = server.request("POST", "/v1/sessions/many/import", body=many_members)
    took = time.monotonic() - started
    assert response.status == 400 and "more than 100000" in response.json()["error"]["message"]
    assert took < 1.0, f"refused after {took:.2f} s"
    assert not os.path.exists(os.path.join(server.state_dir, "sessions", "many"))


@pytest.mark.serial  # timed
@pytest.mark.parametrize("how", ["file", "stdin"])
def test_300000_empty_members_are_refused_within_a_second_by_the_cli(tmp_path, many_members, how):
    runbox = e2e.Runbox(str(tmp_path / "state"))
    archive = tmp_path / "many.tar.gz"
    archive.write_bytes(many_members)
    args = ("sessions", "import", "many") + ((str(archive),) if how == "file" else ())
    runbox.cli("sessions", "list")  # the state directory made outside the timing
    started = time.monotonic()
    proc = runbox.cli(*args, input=many_members if how == "stdin" else None)
    took = time.monotonic() - started
    assert proc.returncode == 2 and b"more than 100000" in proc.stderr, proc.stderr
    assert took < 1.0, f"refused after {took:.2f} s"
    assert b"many" not in runbox.cli("sessions", "list", "--json").stdout


def test_export_refuses_what_import_would_with_the_same_reason(two_nodes):
    """A session of more members than a move carries: export says so, in import's words,
    before writing the rest, and import refuses such an archive alike."""
    a, b = two_nodes
    out = a.execute(language="python", session_id="crowded", timeout=120,
                    code="import os\nfor i in range(100001):\n"
                         "    os.close(os.open(str(i), os.O_CREAT))\n"
                         "print(len(os.listdir('.')))")
    assert out["output"] == "100001\n", out
    exported = a.request("GET", "/v1/sessions/crowded/export")
    assert exported.status == 400, exported
    said = exported.json()["error"]["message"]
    assert said.startswith("the session holds more than 100000 files, directories and links")
    imported = b.request("POST", "/v1/sessions/crowded/import", body=empty_members(100001))
    assert imported.status == 400, imported
    assert imported.json()["error"]["message"] == said.replace("the session", "the archive", 1)
    assert b.request("POST", "/v1/sessions/fits/import", body=empty_members(100000)).status == 201
