"""The web playground's files as the server serves them (GET /, its script
and style: embedded, served without the token, under a strict content
policy), and what keeps browsers from being used against the API: requests
from another site's page, and DNS rebinding of a server without a token.
The page itself is exercised in a browser by tests/web."""
import pytest

TOKEN = "page-token-0123456789abcdef"


@pytest.fixture
def token_server(start_server):
    return start_server(env={"RUNBOX_TOKEN": TOKEN})


@pytest.mark.parametrize("path,kind,marker", [
    ("/", "text/html", b"/playground/app.js"),
    ("/playground/app.js", "text/javascript", b""),
    ("/playground/app.css", "text/css", b""),
])
def test_the_page_is_served_without_the_token_under_a_strict_policy(token_server, path, kind, marker):
    response = token_server.request("GET", path)
    assert response.status == 200, response
    assert response.header("Content-Type").startswith(kind)
    assert len(response.body) > 100 and marker in response.body
    policy = response.header("Content-Security-Policy")
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy and "unsafe-eval" not in policy
    assert response.header("X-Content-Type-Options") == "nosniff"
    head = token_server.request("HEAD", path)
    assert head.status == 200 and head.body == b""


def test_the_page_links_its_own_files_and_nothing_else(token_server):
    html = token_server.request("GET", "/").body.decode()
    assert 'src="/playground/app.js"' in html and 'href="/playground/app.css"' in html
    # Scripts come from the server only: no inline script, no CDN.
    assert "http://" not in html and "https://" not in html
    assert "<script>" not in html.replace(" ", "")


def test_the_api_still_needs_the_token(token_server):
    assert token_server.request("GET", "/v1/sessions").status == 401
    token_server.token = TOKEN
    assert token_server.request("GET", "/v1/sessions").status == 200


@pytest.mark.parametrize("path", ["/index.html", "/playground/", "/playground/app.js/",
                                  "/playground/../v1/sessions", "/playground/app.mjs", "//"])
def test_other_paths_near_the_page_are_not_pages(server, path):
    response = server.request("GET", path)
    assert response.status in (404, 400), response
    assert response.json()["error"]["code"] in ("not_found", "invalid_path")


def test_writing_to_the_page_is_refused(server):
    response = server.request("POST", "/", body=b"x", headers={"Content-Type": "text/plain"})
    assert response.status == 405


# --- browsers used against the API ----------------------------------------------------------

def marker_absent(server, session):
    listed = server.request("GET", f"/v1/sessions/{session}/files")
    return listed.status == 404 or not listed.json()["files"]


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1",
                                    "https://127.0.0.1", "file://", "garbage"])
def test_a_request_from_another_sites_page_is_refused_with_nothing_run(server, origin):
    response = server.request("POST", "/v1/execute", headers={"Origin": origin}, json_body={
        "language": "bash", "code": "touch ran", "session_id": "csrf"})
    assert response.status == 403, response
    error = response.json()["error"]
    assert error["code"] == "cross_origin" and "another site" in error["message"]
    assert marker_absent(server, "csrf")


def test_a_form_post_from_another_site_cannot_drain(server):
    # A form is the request a page can send without asking CORS first.
    response = server.request("POST", "/v1/admin/drain", body=b"a=b", headers={
        "Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded"})
    assert response.status == 403
    assert server.request("GET", "/healthz").status == 200


def test_the_servers_own_page_may_call_it(server):
    own = f"http://127.0.0.1:{server.port}"
    response = server.request("POST", "/v1/execute", headers={"Origin": own}, json_body={
        "language": "bash", "code": "echo same-origin"})
    assert response.status == 200 and response.json()["output"] == "same-origin\n"


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "localhost.evil.example",
                                  "evillocalhost", "10.0.0.1", "[::2]", "[::1", "", ":80"])
def test_without_a_token_only_loopback_names_are_answered(server, host):
    response = server.request("GET", "/v1/sessions", headers={"Host": host})
    assert response.status in (403, 400), response
    if response.status == 403:
        assert response.json()["error"]["code"] == "host_not_loopback"
        assert "token" in response.json()["error"]["message"]


@pytest.mark.parametrize("host", ["localhost", "localhost.", "LOCALHOST:8080", "49999-x.localhost:1",
                                  "127.0.0.1", "127.1.2.3:9", "[::1]:8080"])
def test_loopback_names_are_answered_without_a_token(server, host):
    assert server.request("GET", "/v1/sessions", headers={"Host": host}).status == 200


def test_with_a_token_any_name_is_answered(token_server):
    token_server.token = TOKEN
    response = token_server.request("GET", "/v1/sessions", headers={"Host": "runbox.example:443"})
    assert response.status == 200


def test_the_script_carries_the_licences_of_what_it_bundles(token_server):
    script = token_server.request("GET", "/playground/app.js").body.decode()
    notice = script[script.rindex("/*! The playground bundles these packages"):]
    for package in ("@codemirror/view", "@lezer/python", "@lezer/javascript", "codemirror"):
        assert f"\n{package} " in notice, package
    assert notice.count("Permission is hereby granted") >= 10
