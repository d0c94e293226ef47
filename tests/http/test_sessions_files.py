"""Sessions and their files, end to end, including links planted by code."""
import re
import threading
import time

from http_helpers import processes_matching, unique_marker, wait_gone


def new_session(server):
    response = server.request("POST", "/v1/sessions")
    assert response.status == 201, response
    session_id = response.json()["session_id"]
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", session_id)
    assert response.header("Location") == f"/v1/sessions/{session_id}"
    return session_id


def test_a_session_from_creation_to_removal(server):
    session = new_session(server)
    info = server.request("GET", f"/v1/sessions/{session}").json()
    assert info["session_id"] == session and info["running"] is False
    assert info["created"] > 0 and info["last_used"] > 0 and info["disk_bytes"] >= 0
    listed = server.request("GET", "/v1/sessions").json()["sessions"]
    assert session in [s["session_id"] for s in listed]

    upload = server.request("PUT", f"/v1/sessions/{session}/files/data/input.txt",
                            body=b"line one\nline two\n")
    assert upload.status == 200 and upload.json()["size"] == 18
    code = ("lines = open('data/input.txt').read().splitlines()\n"
            "open('out.bin', 'wb').write(bytes([0, 255]) + str(len(lines)).encode())\n"
            "print('read', len(lines))")
    result = server.execute(language="python", code=code, session_id=session)
    assert result["output"] == "read 2\n", result

    download = server.request("GET", f"/v1/sessions/{session}/files/out.bin")
    assert download.status == 200
    assert download.header("Content-Type") == "application/octet-stream"
    assert download.body == b"\x00\xff2"

    files = server.request("GET", f"/v1/sessions/{session}/files").json()["files"]
    by_path = {f["path"]: f for f in files}
    assert by_path["data"]["type"] == "directory"
    assert by_path["data/input.txt"]["type"] == "file" and by_path["data/input.txt"]["size"] == 18
    assert by_path["out.bin"]["size"] == 3

    assert server.request("DELETE", f"/v1/sessions/{session}/files/out.bin").status == 200
    gone = server.request("GET", f"/v1/sessions/{session}/files/out.bin")
    assert gone.status == 404 and gone.json()["error"]["code"] == "not_found"

    removed = server.request("DELETE", f"/v1/sessions/{session}")
    assert removed.status == 200 and removed.json()["removed"] is True
    assert server.request("GET", f"/v1/sessions/{session}").status == 404
    assert server.request("DELETE", f"/v1/sessions/{session}").status == 404


def test_percent_encoded_names_are_decoded_once(server):
    session = new_session(server)
    put = server.request("PUT", f"/v1/sessions/{session}/files/dir%2Fa%20b%25.txt", body=b"x")
    assert put.status == 200 and put.json()["path"] == "dir/a b%.txt"
    result = server.execute(language="bash", code="cat 'dir/a b%.txt'", session_id=session)
    assert result["output"] == "x"


def test_a_named_session_can_be_created(server):
    response = server.request("POST", "/v1/sessions", json_body={"session_id": "named-1"})
    assert response.status == 201 and response.json()["session_id"] == "named-1"
    bad = server.request("POST", "/v1/sessions", json_body={"session_id": "../x"})
    assert bad.status == 400
    unknown = server.request("POST", "/v1/sessions", json_body={"name": "x"})
    assert unknown.status == 400


def test_files_of_a_missing_session_are_404(server):
    assert server.request("PUT", "/v1/sessions/nosuch/files/a", body=b"x").status == 404
    assert server.request("GET", "/v1/sessions/nosuch/files/a").status == 404
    assert server.request("GET", "/v1/sessions/nosuch/files").status == 404


def test_links_planted_by_code_never_lead_out(server, tmp_path):
    canary_dir = tmp_path / "canary"
    canary_dir.mkdir()
    canary = canary_dir / "secret.txt"
    canary.write_text("host secret\n")
    session = new_session(server)
    result = server.execute(language="bash", session_id=session, code=(
        f"ln -s {canary} file-link; ln -s {canary_dir} dir-link; echo planted"))
    assert result["output"] == "planted\n", result

    for path in ("file-link", "dir-link/secret.txt"):
        response = server.request("GET", f"/v1/sessions/{session}/files/{path}")
        assert response.status == 400, (path, response)
        assert b"host secret" not in response.body
    refused = server.request("PUT", f"/v1/sessions/{session}/files/dir-link/new.txt",
                             body=b"planted by the client")
    assert refused.status == 400
    # A put over a link replaces the link; what it pointed to is untouched.
    assert server.request("PUT", f"/v1/sessions/{session}/files/file-link",
                          body=b"replaced").status == 200
    listed = {f["path"]: f["type"] for f in
              server.request("GET", f"/v1/sessions/{session}/files").json()["files"]}
    assert listed["dir-link"] == "link" and listed["file-link"] == "file"
    assert server.request("DELETE", f"/v1/sessions/{session}/files/dir-link").status == 200
    assert canary.read_text() == "host secret\n"
    assert sorted(p.name for p in canary_dir.iterdir()) == ["secret.txt"]


def test_deleting_a_running_session_kills_what_runs_in_it(server):
    session = new_session(server)
    marker = unique_marker()
    outcome = {}

    def run():
        outcome["result"] = server.execute(language="bash", session_id=session,
                                           code=f"sleep {marker}", timeout=120)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.time() + 20
    while not processes_matching(marker) and time.time() < deadline:
        time.sleep(0.05)
    assert server.request("GET", f"/v1/sessions/{session}").json()["running"] is True
    started = time.time()
    removed = server.request("DELETE", f"/v1/sessions/{session}")
    assert removed.status == 200, removed
    assert time.time() - started < 10
    thread.join()
    assert outcome["result"]["cancelled"] is True
    assert wait_gone(marker) == []
    assert server.request("GET", f"/v1/sessions/{session}").status == 404


def test_upload_and_download_caps(start_server):
    server = start_server("--max-body", "1000", "--max-download", "1500")
    session = new_session(server)
    too_big = server.request("PUT", f"/v1/sessions/{session}/files/big", body=b"x" * 1001)
    assert too_big.status == 413 and too_big.json()["error"]["code"] == "body_too_large"
    server.execute(language="bash", session_id=session, code="head -c 2000 /dev/zero > large")
    download = server.request("GET", f"/v1/sessions/{session}/files/large")
    assert download.status == 400 and "limit" in download.json()["error"]["message"]
    directory = server.request("GET", f"/v1/sessions/{session}/files/.")
    assert directory.status == 400
    assert server.request("PUT", f"/v1/sessions/{session}/files/ok", body=b"y" * 1000).status == 200
