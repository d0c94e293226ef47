"""Hardening: what an outside test of the server broke, each case a regression test.

A program controls everything in its session directory; nothing it makes there may hold a
server thread, and nothing may take the server down for other clients."""
import concurrent.futures
import time

from test_sessions_files import new_session

MAKE_SPECIAL_FILES = ("import os, socket\n"
                      "os.mkfifo('fifo')\n"
                      "s = socket.socket(socket.AF_UNIX)\n"
                      "s.bind('sock')\n"
                      "os.mkdir('dir')\n"
                      "print('made')")


def special_session(server):
    session = new_session(server)
    result = server.execute(language="python", code=MAKE_SPECIAL_FILES, session_id=session)
    assert result["output"] == "made\n", result
    return session


def test_a_fifo_socket_or_directory_download_is_refused_at_once(server):
    session = special_session(server)
    for name, what in (("fifo", "FIFO"), ("sock", "socket"), ("dir", "directory")):
        started = time.monotonic()
        response = server.request("GET", f"/v1/sessions/{session}/files/{name}", timeout=10)
        assert time.monotonic() - started < 5, name
        assert response.status == 400, response
        message = response.json()["error"]["message"]
        assert "not a regular file" in message and what in message, message
    listed = {f["path"]: f["type"] for f in
              server.request("GET", f"/v1/sessions/{session}/files").json()["files"]}
    assert listed["fifo"] == "other" and listed["sock"] == "other", listed


def test_an_upload_replaces_a_fifo_without_opening_it(server):
    session = special_session(server)
    put = server.request("PUT", f"/v1/sessions/{session}/files/fifo", body=b"now a file", timeout=10)
    assert put.status == 200, put
    assert server.request("GET", f"/v1/sessions/{session}/files/fifo").body == b"now a file"


def test_hundreds_of_fifo_downloads_leave_the_api_serving(server):
    """About 330 such requests used to exhaust the connection limit for good."""
    session = special_session(server)

    def download(_):
        try:
            return server.request("GET", f"/v1/sessions/{session}/files/fifo", timeout=20).status
        except OSError as exc:  # a refused connection is a fair answer under load, a hang is not
            return type(exc).__name__

    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        statuses = list(pool.map(download, range(400)))
    assert statuses.count(400) >= 390, sorted(set(map(str, statuses)))
    assert server.healthy()
    # The fixture then stops the server with SIGTERM, which must complete.


def test_cpus_is_taken_reported_and_checked(server):
    result = server.execute(language="bash", code="true", cpus=0.5)
    assert result["cpus"] == (None if result["limits"] == "rlimits" else 0.5), result
    for bad, says in ((0, "more than 0 cores"), (-1, "more than 0 cores"),
                      ("2", "'cpus' must be a number of cores"), (1e9, "out of bounds")):
        response = server.request("POST", "/v1/execute",
                                  json_body={"language": "bash", "code": "true", "cpus": bad})
        assert response.status == 400, response
        assert says in response.json()["error"]["message"], response
