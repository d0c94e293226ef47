"""What one node of a cluster answers (deploy/): the session id where a balancer can hash it
(the path form of execute, the X-Runbox-Session header), draining, liveness, and moving a session
as a tar archive (export, import), with hostile archives refused whole."""
import io
import os
import tarfile

import pytest

from http_helpers import Server, e2e, stop_all


def tar_of(*members):
    """A tar archive of (TarInfo, bytes-or-None) members."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def member(name, kind=tarfile.REGTYPE, data=b"x", mode=0o644, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    return info, (data if kind == tarfile.REGTYPE else None)


def sessions_on(server):
    return {s["session_id"] for s in server.request("GET", "/v1/sessions").json()["sessions"]}


# --- the session id where a balancer sees it ----------------------------------------------

def test_execute_in_a_session_by_path_and_by_header(server):
    by_path = server.request("POST", "/v1/sessions/routed/execute",
                             json_body={"language": "bash", "code": "echo one > f; echo $RUNBOX_SESSION_ID"})
    assert by_path.status == 200 and by_path.json()["output"] == "routed\n", by_path
    by_header = server.request("POST", "/v1/execute", headers={"X-Runbox-Session": "routed"},
                               json_body={"language": "bash", "code": "cat f"})
    assert by_header.json()["output"] == "one\n" and by_header.json()["session_id"] == "routed"
    agreeing = server.request("POST", "/v1/sessions/routed/execute",
                              headers={"X-Runbox-Session": "routed"},
                              json_body={"language": "bash", "code": "cat f", "session_id": "routed"})
    assert agreeing.json()["output"] == "one\n"
    created = server.request("POST", "/v1/sessions", headers={"X-Runbox-Session": "named-by-header"})
    assert created.status == 201 and created.json()["session_id"] == "named-by-header"


@pytest.mark.parametrize("path,headers,body,message", [
    ("/v1/sessions/a/execute", {}, {"session_id": "b"}, "the body's session_id is b but the path names a"),
    ("/v1/execute", {"X-Runbox-Session": "a"}, {"session_id": "b"},
     "the body's session_id is b but the X-Runbox-Session header names a"),
    ("/v1/sessions/a/execute", {"X-Runbox-Session": "b"}, {},
     "the X-Runbox-Session header names session b but the path names a"),
    ("/v1/execute", {"X-Runbox-Session": "../etc"}, {}, "header is not a session id"),
    ("/v1/execute", {"X-Runbox-Session": "x" * 200}, {}, "header is not a session id"),
    ("/v1/execute", {"X-Runbox-Session": ""}, {}, "header is not a session id"),
    ("/v1/sessions/.hidden/execute", {}, {}, "invalid session id"),
    ("/v1/sessions/..%2f/execute", {}, {}, "no such route"),
])
def test_disagreeing_or_hostile_session_ids_are_refused(server, path, headers, body, message):
    response = server.request("POST", path, headers=headers,
                              json_body={"language": "bash", "code": "echo ran", **body})
    assert response.status in (400, 404) and message in response.body.decode(), response
    assert "ran" not in response.body.decode()


def test_a_mismatched_header_is_refused_on_every_session_route(server):
    server.request("POST", "/v1/sessions", json_body={"session_id": "mine"})
    for method, path in [("GET", "/v1/sessions/mine"), ("GET", "/v1/sessions/mine/files"),
                         ("GET", "/v1/sessions/mine/export"), ("DELETE", "/v1/sessions/mine")]:
        response = server.request(method, path, headers={"X-Runbox-Session": "other"})
        assert response.status == 400 and response.json()["error"]["code"] == "session_mismatch"
    assert "mine" in sessions_on(server)


# --- draining and liveness ------------------------------------------------------------------

def test_a_draining_node_serves_its_sessions_and_refuses_new_work(server):
    server.execute(language="bash", code="echo kept > f", session_id="held")
    assert server.request("GET", "/healthz").status == 200
    drained = server.request("POST", "/v1/admin/drain")
    assert drained.status == 200 and drained.json()["draining"] is True
    health = server.request("GET", "/healthz")
    assert health.status == 503 and health.json()["status"] == "draining"
    assert server.request("GET", "/livez").json() == {"status": "live"}
    assert server.execute(language="bash", code="cat f", session_id="held")["output"] == "kept\n"
    for path, body in [("/v1/execute", {"language": "bash", "code": "echo x"}),
                       ("/v1/execute", {"language": "bash", "code": "echo x", "session_id": "new"}),
                       ("/v1/sessions", {"session_id": "new"}),
                       ("/v1/sessions/new/execute", {"language": "bash", "code": "echo x"})]:
        response = server.request("POST", path, json_body=body)
        assert response.status == 503 and response.json()["error"]["code"] == "draining", response
    refused = server.request("POST", "/v1/sessions/new/import", body=tar_of(member("a")))
    assert refused.status == 503
    assert "new" not in sessions_on(server)
    assert server.request("POST", "/v1/admin/drain", json_body={"drain": False}).json()["draining"] is False
    assert server.request("GET", "/healthz").status == 200
    assert server.execute(language="bash", code="echo back")["output"] == "back\n"


@pytest.mark.parametrize("body", [b'{"drain": "yes"}', b'{"drain": true, "x": 1}', b"[]", b"nope"])
def test_bad_drain_bodies_are_refused(server, body):
    response = server.request("POST", "/v1/admin/drain", body=body,
                              headers={"Content-Type": "application/json"})
    assert response.status in (400, 415), response
    assert server.request("GET", "/healthz").status == 200


def test_draining_needs_the_token(start_server):
    server = start_server(env={"RUNBOX_TOKEN": "s3cret"})
    server.token = "s3cret"
    response = server.request("POST", "/v1/admin/drain", headers={"Authorization": "Bearer wrong"})
    assert response.status == 401
    assert server.request("GET", "/healthz").status == 200


# --- export and import ----------------------------------------------------------------------

@pytest.fixture
def two_nodes(tmp_path):
    """Two servers with state directories of their own."""
    servers = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        servers.append(Server(tmp_path / name))
    yield servers
    stop_all(servers)


def test_a_session_moves_between_nodes_with_its_files(two_nodes):
    a, b = two_nodes
    a.execute(language="bash", session_id="moving",
              code="mkdir -p d/e && printf 'one\\n' > d/e/f.txt && ln -s d/e/f.txt link && "
                   "head -c 300000 /dev/urandom > blob && mkfifo pipe && chmod 600 blob")
    exported = a.request("GET", "/v1/sessions/moving/export")
    assert exported.status == 200 and exported.header("Content-Type") == "application/x-tar"
    names = tarfile.open(fileobj=io.BytesIO(exported.body)).getnames()
    assert set(names) == {"d", "d/e", "d/e/f.txt", "link", "blob"}, names  # the FIFO is left out
    imported = b.request("POST", "/v1/sessions/moving/import", body=exported.body)
    assert imported.status == 201, imported
    assert imported.json() == {"session_id": "moving", "files": 2, "bytes": 300004}
    out = b.execute(language="bash", session_id="moving",
                    code="cat link; stat -c '%a %U %s' blob; readlink link; md5sum < blob")
    before = a.execute(language="bash", session_id="moving", code="md5sum < blob")["output"]
    assert out["output"].splitlines()[:3] == ["one", "600 user 300000", "d/e/f.txt"], out
    assert out["output"].splitlines()[3] == before.strip()
    again = b.request("POST", "/v1/sessions/moving/import", body=exported.body)
    assert again.status == 409 and "already exists" in again.json()["error"]["message"]
    assert b.request("GET", "/v1/sessions/nosuch/export").status == 404


def test_names_that_are_not_ascii_survive_the_move(two_nodes):
    """Names are bytes: UTF-8 ones and ones that are not UTF-8 at all come back as they were,
    and an archive made by tar itself ("./" first, UTF-8 names in pax headers) is accepted."""
    a, b = two_nodes
    a.execute(language="bash", session_id="names",
              code="echo a > données.csv; printf x > \"$(printf 'raw\\377')\"")
    exported = a.request("GET", "/v1/sessions/names/export")
    assert exported.status == 200, exported
    assert b.request("POST", "/v1/sessions/names/import", body=exported.body).status == 201
    listed = b.execute(language="python", session_id="names",
                       code="import os; print(sorted(os.listdir(b'.')))")["output"]
    assert listed == "[b'donn\\xc3\\xa9es.csv', b'raw\\xff']\n", listed
    made_by_tar = io.BytesIO()
    with tarfile.open(fileobj=made_by_tar, mode="w", format=tarfile.PAX_FORMAT) as archive:
        archive.addfile(member(".", tarfile.DIRTYPE)[0])
        info, data = member("./été.txt", data=b"summer")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    assert b.request("POST", "/v1/sessions/tarred/import", body=made_by_tar.getvalue()).status == 201
    tarred = b.execute(language="bash", session_id="tarred", code="cat été.txt")
    assert tarred["output"] == "summer", tarred


HOSTILE = {
    "dot-dot path": tar_of(member("../escaped")),
    "absolute path": tar_of(member("/etc/escaped")),
    "nested dot-dot": tar_of(member("a/../../escaped")),
    # Links are data, whatever they point to (test_session_move.py): members through them are not.
    "member through a link": tar_of(member("d/link", tarfile.SYMTYPE, link=".."),
                                    member("d/link/escaped")),
    "hard link out": tar_of(member("ok"), member("hard", tarfile.LNKTYPE, link="../ok")),
    "hard link to nothing": tar_of(member("ok"), member("hard", tarfile.LNKTYPE, link="gone")),
    "device node": tar_of(member("ok"), member("dev", tarfile.CHRTYPE)),
    "FIFO": tar_of(member("fifo", tarfile.FIFOTYPE)),
    "not a tar": b"this is not an archive" * 100,
    "truncated": tar_of(member("big", data=b"y" * 100000))[:20000],
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_archives_are_refused_and_leave_nothing(server, name):
    response = server.request("POST", "/v1/sessions/victim/import", body=HOSTILE[name])
    assert response.status == 400, (name, response)
    assert response.json()["error"]["message"], response
    assert "victim" not in sessions_on(server)
    assert not os.path.exists(os.path.join(server.state_dir, "escaped"))


def test_set_id_bits_are_dropped_on_import(server):
    """A directory's sticky bit, no privilege, stays (export keeps it too)."""
    archive = tar_of(member("tool", mode=0o6755), member("dir", tarfile.DIRTYPE, mode=0o3777))
    assert server.request("POST", "/v1/sessions/bits/import", body=archive).status == 201
    out = server.execute(language="bash", session_id="bits", code="stat -c '%n %a' tool dir")
    assert out["output"] == "tool 755\ndir 1777\n", out


def test_a_sparse_member_larger_than_the_disk_cap_is_refused_before_writing(server, tmp_path):
    """A 10 GiB member that compresses to nothing: its declared size alone refuses it."""
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(10 << 30)
    out = io.BytesIO()
    import gzip
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as gz:
        with tarfile.open(fileobj=gz, mode="w|", format=tarfile.GNU_FORMAT) as archive:
            info = archive.gettarinfo(str(sparse), arcname="huge")
            info.size = 10 << 30
            archive.addfile(info)  # the header alone: the data would follow
    response = server.request("POST", "/v1/sessions/sparse/import", body=out.getvalue())
    assert response.status == 507 and "disk cap" in response.json()["error"]["message"], response
    assert "sparse" not in sessions_on(server)


def test_an_import_larger_than_the_body_limit_is_refused(start_server):
    server = start_server("--max-body", "1000")
    response = server.request("POST", "/v1/sessions/big/import",
                              body=tar_of(member("f", data=b"z" * 5000)))
    assert response.status == 413
    assert "big" not in sessions_on(server)


# --- the CLI ---------------------------------------------------------------------------------

def test_the_cli_exports_and_imports(tmp_path):
    a, b = e2e.Runbox(str(tmp_path / "a")), e2e.Runbox(str(tmp_path / "b"))

    def cli(runbox, *args):
        proc = runbox.cli(*args)
        return proc.returncode, proc.stdout, proc.stderr.decode(errors="replace")
    a.run("bash", "mkdir -p sub && echo cli > sub/file", "--session", "carried")
    archive = tmp_path / "s.tar"
    rc, _, err = cli(a, "sessions", "export", "carried", "--output", str(archive))
    assert rc == 0, err
    rc, piped, _ = cli(a, "sessions", "export", "carried")
    assert rc == 0 and tarfile.open(fileobj=io.BytesIO(piped)).getnames() == ["sub", "sub/file"]
    rc, out, err = cli(b, "sessions", "import", "carried", str(archive))
    assert rc == 0 and b"imported 1 file" in out, err
    assert b.run("bash", "cat sub/file", "--session", "carried")["output"] == "cli\n"
    rc, _, err = cli(b, "sessions", "import", "carried", str(archive))
    assert rc == 2 and "already exists" in err
    hostile = tmp_path / "hostile.tar"
    hostile.write_bytes(HOSTILE["dot-dot path"])
    rc, _, err = cli(b, "sessions", "import", "evil", str(hostile))
    assert rc == 2 and "'..' component" in err
    assert b"evil" not in b.cli("sessions", "list", "--json").stdout
    for args, message in [(("export",), "needs a session id"),
                          (("export", "../x"), "invalid session id"),
                          (("import", "x", str(tmp_path / "missing.tar")), "cannot read"),
                          (("export", "nosuch", "--output", str(tmp_path / "n.tar")), "no session"),
                          (("export", "carried", "--output"), "--output needs a file name")]:
        rc, _, err = cli(a, "sessions", *args)
        assert rc == 2 and message in err, (args, err)
    assert not (tmp_path / "n.tar").exists()
