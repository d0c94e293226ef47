"""Hostile input gets the right status, and the server keeps serving others."""
import json
import os
import socket
import threading
import time

import pytest

BAD_JSON = [
    b'{"language": "python", "code": "pri',
    b'{language: "python"}',
    b"not json at all",
    b"",
    b'{"language": "python", "code": "1"} trailing',
    b'{"language": "python", "language": "bash", "code": "1"}',
    b"[1, 2]",
    b'"just a string"',
]


@pytest.mark.parametrize("body", BAD_JSON)
def test_malformed_json_is_400(server, body):
    response = server.request("POST", "/v1/execute", body=body,
                              headers={"Content-Type": "application/json"})
    assert response.status == 400, response
    assert response.json()["error"]["code"] == "invalid_json"
    assert server.healthy()


@pytest.mark.parametrize("body", [
    b'{"language": "python", "code": "print(1)\xff"}',
    b'{"language": "python", "code": "\xed\xa0\x80"}',   # a surrogate
    b'{"language": "python", "code": "\xc0\xaf"}',       # an overlong "/"
    b'{"langu\xe9ge": "python", "code": "1"}',           # Latin-1 in a key
])
def test_invalid_utf8_is_400(server, body):
    response = server.request("POST", "/v1/execute", body=body,
                              headers={"Content-Type": "application/json"})
    assert response.status == 400, response
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    error["message"].encode("utf-8")  # the message itself is valid UTF-8
    assert server.healthy()


def test_ten_thousand_deep_json_is_400(server):
    body = b"[" * 10000 + b"]" * 10000
    response = server.request("POST", "/v1/execute", body=body,
                              headers={"Content-Type": "application/json"})
    assert response.status == 400
    assert "nested deeper than 64" in response.json()["error"]["message"]
    deep_object = b'{"a":' * 10000 + b"1" + b"}" * 10000
    response = server.request("POST", "/v1/execute", body=deep_object,
                              headers={"Content-Type": "application/json"})
    assert response.status == 400
    assert server.healthy()


def test_depth_is_counted_outside_strings_only(server):
    code = "x = " + "[" * 100 + "]" * 100 + "\nprint('brackets')"
    assert server.execute(language="python", code=code)["output"] == "brackets\n"
    shallow = '{"x":' * 63 + "1" + "}" * 63
    response = server.request("POST", "/v1/execute", body=(
        '{"language": "python", "code": "1", "extra": %s}' % shallow).encode(),
        headers={"Content-Type": "application/json"})
    assert "unknown field 'extra'" in response.json()["error"]["message"]  # parsed, 64 deep


def test_a_100_mb_body_is_refused_before_it_is_read(server):
    before = server.rss_kb()
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 104857600\r\n\r\n" + b"{" + b" " * 65536)
        answer = sock.recv(65536)
        try:
            for _ in range(100):  # the rest is never read: sending fails or is dropped
                sock.sendall(b" " * 1048576)
        except OSError:
            pass
    assert answer.startswith(b"HTTP/1.1 413"), answer
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "body_too_large"
    assert server.rss_kb() - before < 20 * 1024
    assert server.healthy()


def test_expect_100_continue_gets_413_without_the_body(server):
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(b"PUT /v1/sessions/x/files/big HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Length: 104857600\r\nExpect: 100-continue\r\n\r\n")
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert server.healthy()


def test_a_chunked_body_over_the_cap_is_413_and_no_more_is_read(start_server):
    """A chunked body's length is not known from its headers: reading stops at the limit, the
    client gets the JSON 413 while it is still sending, and the connection closes (the server
    used to read all of it, 64 MiB here, before it answered)."""
    server = start_server("--max-body", "1048576")
    before = server.rss_kb()
    answer = []
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")

        def read():
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                answer.append(data)

        reader = threading.Thread(target=read)
        reader.start()
        chunk = b"%x\r\n" % 65536 + b" " * 65536 + b"\r\n"
        sent = 0
        try:
            for _ in range(1024):  # 64 MiB
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the server closed the connection: nothing more is read
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # reset by the server
        reader.join(10)
    assert sent < 16 * 1048576, f"the server read {sent} bytes of a body over its 1 MiB limit"
    status, body = json_error(b"".join(answer))
    assert status == 413 and body["error"]["code"] == "body_too_large", body
    assert server.rss_kb() - before < 8 * 1024
    assert server.healthy()


def test_wrong_content_type_is_415(server):
    response = server.request("POST", "/v1/execute", body=b'{"language":"bash","code":"1"}',
                              headers={"Content-Type": "text/plain"})
    assert response.status == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"
    response = server.request("POST", "/v1/execute", body=b'{"language":"bash","code":"1"}')
    assert response.status == 415
    charset = server.request("POST", "/v1/execute", body=b'{"language":"bash","code":"echo 1"}',
                             headers={"Content-Type": "application/json; charset=utf-8"})
    assert charset.status == 200
    assert server.healthy()


def test_unknown_routes_and_methods(server):
    missing = server.request("GET", "/v2/nothing")
    assert missing.status == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = server.request("DELETE", "/v1/execute")
    assert wrong.status == 405
    assert wrong.header("Allow") == "POST"
    assert wrong.json()["error"]["code"] == "method_not_allowed"
    files = server.request("POST", "/v1/sessions/abc/files/x")
    assert files.status == 405 and files.header("Allow") == "GET, HEAD, PUT, DELETE"
    head = server.request("HEAD", "/healthz")
    assert head.status == 200 and head.body == b""
    assert server.healthy()


def make_session(server, name):
    response = server.request("POST", "/v1/sessions", json_body={"session_id": name})
    assert response.status == 201
    return name


TRAVERSALS = [
    "../escape",
    "..%2fescape",
    "%2e%2e%2fescape",
    "%2E%2E/%2E%2E/escape",
    "a/../../escape",
    "a/%2e%2e/%2e%2e/escape",
    "%2fetc%2fpasswd",
    "/etc/passwd",
    "./x",
    "a//b",
    "x%00/../../escape",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_path_traversal_in_file_routes_is_refused(server, path):
    make_session(server, "trav")
    outside = os.path.join(server.state_dir, "sessions", "escape")
    for method, body in (("PUT", b"owned"), ("GET", None), ("DELETE", None)):
        response = server.request(method, f"/v1/sessions/trav/files/{path}", body=body)
        assert response.status == 400, (method, path, response)
        assert response.json()["error"]["code"] in ("invalid_request", "invalid_path")
    assert not os.path.exists(outside)
    assert not os.path.exists(os.path.join(server.state_dir, "escape"))
    assert server.healthy()


def test_traversal_in_the_session_id_is_refused(server):
    for path in ("/v1/sessions/..%2f..%2fx/files", "/v1/sessions/%2e%2e/files/a",
                 "/v1/sessions/..", "/v1/sessions/.hidden"):
        response = server.request("GET", path)
        assert response.status in (400, 404), (path, response)
        assert response.status != 404 or "no such route" in response.json()["error"]["message"]
    assert server.healthy()


def test_a_header_flood_is_431_in_json(server):
    """Heads too large for the server are refused in the API's JSON (libmicrohttpd's own
    answer was an HTML page)."""
    headers = b"".join(b"X-Flood-%d: %s\r\n" % (i, b"v" * 100) for i in range(2000))
    answer = server.raw(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + headers + b"\r\n")
    status, body = json_error(answer)
    assert status == 431 and body["error"]["code"] == "headers_too_large", body
    one_huge = server.raw(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 200000 +
                          b"\r\n\r\n")
    status, body = json_error(one_huge)
    assert status == 431 and body["error"]["code"] == "headers_too_large", body
    long_url = server.raw(b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
    status, body = json_error(long_url)
    assert status == 414 and body["error"]["code"] == "uri_too_long", body
    assert server.healthy()


@pytest.mark.parametrize("head, status, code", [
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Many: 1\r\n" * 100 + b"\r\n",
     431, "headers_too_large"),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 40000 + b"\r\n\r\n",
     431, "headers_too_large"),
    (b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"),
    (b"GET /healthz HTTP/0.9\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"),
    (b"GET /healthz HTTX/1.1\r\nHost: x\r\n\r\n", 400, "malformed_request"),
    (b"GET\r\nHost: x\r\n\r\n", 400, "malformed_request"),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400, "malformed_request"),
    (b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Length: 12a\r\n\r\n",
     400, "invalid_content_length"),
    (b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
     413, "body_too_large"),
], ids=["100-headers", "40-KiB-header", "HTTP/2.0", "HTTP/0.9", "not-HTTP", "no-target",
        "no-colon", "bad-content-length", "huge-content-length"])
def test_every_refused_head_is_answered_in_json(server, head, status, code):
    """Each head libmicrohttpd would refuse with an HTML page gets the API's JSON error."""
    got, body = json_error(server.raw(head))
    assert (got, body["error"]["code"]) == (status, code), body
    assert body["error"]["message"]


def test_a_head_just_within_the_limits_is_served(server):
    """32 KiB of head and 99 headers are taken (the limits are 32 KiB and 100 headers)."""
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(98))
    answer = server.raw(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + many + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    start = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: "
    big = start + b"c" * (32 * 1024 - len(start) - 4) + b"\r\n\r\n"
    assert len(big) == 32 * 1024
    answer = server.raw(big)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert b"connection: close" in answer.lower()  # one request per connection


def test_a_slowloris_client_does_not_block_others_and_is_dropped(start_server):
    server = start_server("--client-timeout", "3")
    sock = socket.create_connection((server.host, server.port))
    request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"s" * 100
    closed_at = []

    def trickle():
        started = time.time()
        try:
            for byte in request:
                sock.sendall(bytes([byte]))
                time.sleep(1)
                if time.time() - started > 15:
                    return
        except OSError:
            closed_at.append(time.time() - started)

    thread = threading.Thread(target=trickle)
    thread.start()
    for _ in range(3):  # others are served while it trickles
        assert server.healthy()
        time.sleep(0.5)
    thread.join()
    sock.close()
    assert closed_at and closed_at[0] < 8, "the trickling client was never dropped"
    assert server.healthy()


def test_a_silent_client_is_dropped(start_server):
    server = start_server("--client-timeout", "2")
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        started = time.time()
        assert sock.recv(100) == b""
        assert time.time() - started < 6
    assert server.healthy()


def json_error(answer):
    """The JSON error of a raw HTTP/1.1 answer: (status, the body's error object)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"application/json" in head.lower(), answer[:300]
    return status, json.loads(body)


@pytest.mark.parametrize("framing", [
    b"Content-Length: 11\r\nTransfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: chunked\r\nContent-Length: 11\r\n",
])
def test_content_length_with_transfer_encoding_is_400(server, framing):
    """Request smuggling: a proxy that reads the body by one and runbox by the other would
    disagree on where the next request starts. Both are refused, before the body."""
    answer = server.raw(b"POST /v1/execute HTTP/1.1\r\nHost: localhost\r\n"
                        b"Content-Type: application/json\r\n" + framing +
                        b"Connection: close\r\n\r\nb\r\n{\"code\":1}\r\n0\r\n\r\n")
    status, body = json_error(answer)
    assert status == 400 and body["error"]["code"] == "ambiguous_framing", body
    assert "Content-Length and Transfer-Encoding" in body["error"]["message"]
    assert server.healthy()


@pytest.mark.parametrize("header", [b"X-Runbox-Session: a\r\nX-Runbox-Session: b\r\n",
                                    b"X-Runbox-Session: a\r\nx-runbox-session: a\r\n",
                                    b"Content-Type: application/json\r\n"])
def test_a_routing_or_framing_header_sent_twice_is_400(server, header):
    """A balancer may join two X-Runbox-Session headers into one (a, b) and route by it while
    runbox took the first: the session a request is routed by must be unambiguous."""
    body = b'{"language": "bash", "code": "echo hi"}'
    answer = server.raw(b"POST /v1/execute HTTP/1.1\r\nHost: localhost\r\n"
                        b"Content-Type: application/json\r\n" + header +
                        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    status, error = json_error(answer)
    assert status == 400 and error["error"]["code"] == "duplicate_header", error
    name = header.split(b":")[0].decode()
    assert name.lower() in error["error"]["message"].lower() and "2 times" in \
        error["error"]["message"], error
    assert server.healthy()
