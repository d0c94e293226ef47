"""Who may make the E2B listener read a body: envd and the code interpreter check the sandbox
and its token on the request's head, before a byte of the body is read. A stranger who names
a made-up sandbox, shows a wrong token or forges a signed file URL is answered at once and
cannot make the server hold uploads of --max-body bytes; envd takes the sandbox's access
token only, never the traffic token of its public ports. Raw HTTP throughout: these are
requests no SDK sends."""
import base64
import hashlib
import json
import socket
import struct
import time
import urllib.parse

import pytest

ENVD = "49983"
CODE_INTERPRETER = "49999"
BIG = 10485700  # just under the default --max-body of 10 MiB


@pytest.fixture
def server(module_e2b):
    """The module's server (conftest.py): each case makes a sandbox of its own."""
    return module_e2b


def make_sandbox(server):
    """A sandbox made through the control plane: its id and both of its tokens."""
    status, made = server.e2b_request("POST", "/v2/sandboxes", b'{"templateID": "base"}',
                                      {"X-API-KEY": "k", "Content-Type": "application/json"})
    assert status == 201, made
    return json.loads(made)


def head(method, path, headers, length=BIG):
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {length}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer_before_the_body(server, method, path, headers, wait=5):
    """Sends the head of a request announcing a body of BIG bytes, and none of the body:
    returns what the server answered meanwhile (b"" if it waited for the body)."""
    with socket.create_connection(("127.0.0.1", server.e2b_port), timeout=wait) as sock:
        sock.sendall(head(method, path, headers))
        data = b""
        deadline = time.monotonic() + wait
        while b"\r\n\r\n" not in data and time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            data += chunk
        if b"\r\n\r\n" in data:  # the rest of a short answer
            sock.settimeout(1)
            try:
                while chunk := sock.recv(65536):
                    data += chunk
            except (socket.timeout, ConnectionResetError):
                pass
        return data


def status_and_body(answer):
    assert answer, "no answer while the body was unsent: the server waits for the body"
    top, _, body = answer.partition(b"\r\n\r\n")
    return int(top.split()[1]), top.decode(), body


def end_of_stream_error(body):
    """The error code in a Connect stream's end-of-stream envelope (chunked or not)."""
    if b"\r\n" in body[:8]:  # chunked: join the chunks
        joined, rest = b"", body
        while rest:
            size_text, _, rest = rest.partition(b"\r\n")
            size = int(size_text, 16)
            if size == 0:
                break
            joined, rest = joined + rest[:size], rest[size + 2:]
        body = joined
    flag, length = struct.unpack(">BI", body[:5])
    assert flag == 2, body
    return json.loads(body[5:5 + length])["error"]["code"]


def forged_signature(path="a", operation="write", user="", token="not-a-sandboxs-token",
                     expiration=None):
    text = f"{path}:{operation}:{user}:{token}" + (f":{expiration}" if expiration else "")
    digest = hashlib.sha256(text.encode()).digest()
    return urllib.parse.quote("v1_" + base64.b64encode(digest).decode().rstrip("="), safe="")


UPLOAD = "/files?path=a"
FORGED = f"/files?path=a&signature={forged_signature()}"
# name: (method, path, E2b-Sandbox-Port, E2b-Sandbox-Id ("own": the sandbox made for the case),
#        the token shown (a header, and a field of the sandbox or a value), status, code)
STRANGERS = {
    "envd upload, made-up sandbox": ("POST", UPLOAD, ENVD, "anything", None, 502, "unavailable"),
    "envd upload, no token": ("POST", UPLOAD, ENVD, "own", None, 401, "unauthenticated"),
    "envd upload, wrong token":
        ("POST", UPLOAD, ENVD, "own", ("X-Access-Token", "wrong"), 401, "unauthenticated"),
    "envd upload, the traffic token":
        ("POST", UPLOAD, ENVD, "own", ("E2B-Traffic-Access-Token", "trafficAccessToken"), 401,
         "unauthenticated"),
    "envd unary call, wrong token": ("POST", "/filesystem.Filesystem/Stat", ENVD, "own",
                                     ("X-Access-Token", "wrong"), 401, "unauthenticated"),
    "signed upload URL, forged": ("POST", FORGED, None, None, None, 401, "unauthenticated"),
    "signed upload URL, forged, envd's port":
        ("POST", FORGED, ENVD, None, None, 401, "unauthenticated"),
    "signed upload URL, not a signature":
        ("POST", "/files?path=a&signature=x", None, None, None, 401, "unauthenticated"),
    "code interpreter, made-up sandbox":
        ("POST", "/execute", CODE_INTERPRETER, "anything", None, 502, "not_found"),
    "code interpreter, wrong token": ("POST", "/execute", CODE_INTERPRETER, "own",
                                      ("E2B-Traffic-Access-Token", "wrong"), 401,
                                      "unauthenticated"),
}


@pytest.mark.parametrize("case", STRANGERS, ids=list(STRANGERS))
def test_a_stranger_is_answered_before_the_body_is_sent(server, case):
    method, path, port, sandbox_id, token, status, code = STRANGERS[case]
    sandbox = make_sandbox(server)
    headers = {"Content-Type": "application/octet-stream" if path.startswith("/files")
               else "application/json"}
    if port:
        headers["E2b-Sandbox-Port"] = port
    if sandbox_id:
        headers["E2b-Sandbox-Id"] = sandbox["sandboxID"] if sandbox_id == "own" else sandbox_id
    if token:
        headers[token[0]] = sandbox.get(token[1], token[1])
    answer = answer_before_the_body(server, method, path, headers)
    got, top, body = status_and_body(answer)
    assert got == status, top
    # In the API's own words: envd's Connect error ({"code": "<name>"}), the code
    # interpreter's {"error": {"code"}}.
    text = json.loads(body.decode())
    assert (text.get("code") or text["error"]["code"]) == code, text


def test_a_stream_of_a_stranger_ends_at_once_with_connects_error(server):
    sandbox = make_sandbox(server)
    for sandbox_id, token, code in [("anything", "", "unavailable"),
                                    (sandbox["sandboxID"], "wrong", "unauthenticated"),
                                    (sandbox["sandboxID"], None, "unauthenticated")]:
        headers = {"E2b-Sandbox-Port": ENVD, "E2b-Sandbox-Id": sandbox_id,
                   "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
        if token is None:
            headers["E2B-Traffic-Access-Token"] = sandbox["trafficAccessToken"]
        else:
            headers["X-Access-Token"] = token
        answer = answer_before_the_body(server, "POST", "/process.Process/Start", headers)
        status, top, body = status_and_body(answer)
        # A stream's error is 200 and its end-of-stream envelope, as the SDKs read it.
        assert status == 200 and "application/connect+json" in top, top
        assert end_of_stream_error(body) == code, body


def test_forty_strangers_holding_uploads_do_not_grow_the_server(e2b_server):
    make_sandbox(e2b_server)
    before = e2b_server.rss_kb()
    hostile = [
        ("POST", "/files?path=a", {"E2b-Sandbox-Port": ENVD, "E2b-Sandbox-Id": "anything"}),
        ("POST", f"/files?path=a&signature={forged_signature()}", {}),
        ("POST", "/execute", {"E2b-Sandbox-Port": CODE_INTERPRETER,
                              "E2b-Sandbox-Id": "anything"}),
    ]
    held = []
    try:
        for i in range(40):
            method, path, headers = hostile[i % len(hostile)]
            sock = socket.create_connection(("127.0.0.1", e2b_server.e2b_port), timeout=5)
            held.append(sock)
            sock.sendall(head(method, path, headers))
            try:  # all of the body but its last byte, as far as the server takes it
                sock.sendall(b"x" * (BIG - 1))
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                pass
        time.sleep(0.5)
        grown_mb = (e2b_server.rss_kb() - before) / 1024
        assert grown_mb < 40, f"the server grew by {grown_mb:.0f} MB"
    finally:
        for sock in held:
            sock.close()
    status, _ = e2b_server.e2b_request("GET", "/health")
    assert status == 200


def envd_request(server, sandbox, method, path, body=None, headers=None):
    return server.e2b_request(method, path, body, {
        "E2b-Sandbox-Port": ENVD, "E2b-Sandbox-Id": sandbox["sandboxID"], **(headers or {})})


def test_envd_takes_the_access_token_and_not_the_traffic_token(server):
    sandbox = make_sandbox(server)
    traffic = {"E2B-Traffic-Access-Token": sandbox["trafficAccessToken"]}
    access = {"X-Access-Token": sandbox["envdAccessToken"]}
    unary = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
    start = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "id"]}}).encode()
    calls = [
        ("POST", "/files?path=f.txt", b"mine", {"Content-Type": "application/octet-stream"}),
        ("GET", "/files?path=f.txt", None, {}),
        ("POST", "/process.Process/List", b"{}", unary),
        ("POST", "/filesystem.Filesystem/ListDir", b'{"path": "/home/user"}', unary),
        ("POST", "/process.Process/Start", struct.pack(">BI", 0, len(start)) + start,
         {"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}),
    ]
    for method, path, body, headers in calls:
        status, data = envd_request(server, sandbox, method, path, body,
                                    {**headers, **traffic})
        if path.startswith("/process.Process/Start"):
            assert status == 200 and end_of_stream_error(data) == "unauthenticated", data
        else:
            assert status == 401 and json.loads(data)["code"] == "unauthenticated", (path, data)
    for method, path, body, headers in calls[:4]:
        status, data = envd_request(server, sandbox, method, path, body,
                                    {**headers, **access})
        assert status == 200, (path, data)
        if method == "GET":
            assert data == b"mine"
    # The code interpreter, a public port of the sandbox, still takes the traffic token.
    status, data = server.e2b_request("GET", "/contexts", None, {
        "E2b-Sandbox-Port": CODE_INTERPRETER, "E2b-Sandbox-Id": sandbox["sandboxID"],
        **traffic})
    assert status == 200, data


def signed_upload(server, sandbox, expiration):
    signature = forged_signature(path="f.txt", token=sandbox["envdAccessToken"],
                                 expiration=expiration)
    return server.e2b_request(
        "POST", f"/files?path=f.txt&signature={signature}&signature_expiration={expiration}",
        b"signed", {"Content-Type": "application/octet-stream"})


@pytest.mark.parametrize("expiration", ["100000000000000000",  # x 1000 overflows int64
                                        "9223372036854775807", "99999999999999999999999",
                                        "253402300801"])
def test_an_absurd_expiration_of_a_signed_url_is_refused(server, expiration):
    sandbox = make_sandbox(server)
    status, data = signed_upload(server, sandbox, expiration)
    assert status == 401, data
    assert "past the year 9999" in json.loads(data)["message"], data
    # One that the SDK would write (an hour from now) is taken.
    status, data = signed_upload(server, sandbox, str(int(time.time()) + 3600))
    assert status == 200, data
