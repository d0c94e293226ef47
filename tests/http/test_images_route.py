"""GET /v1/images: the images a request may name in "image", with what each can run. Only what
the operator allows is listed; "host" is listed when it is allowed; "default" is what a request
naming none gets; what the list says an image can run is what it runs, and what it says it
cannot is refused before anything runs."""
import json
import os
import subprocess
import tarfile

import pytest

from http_helpers import RUNBOX, e2e
from test_openapi import schema_validator

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="importing an image needs root")


def import_image(tmp_path, store, name, programs):
    """An image of the host's programs (with their libraries) imported into store as name;
    returns the archive it was imported from."""
    tree = e2e.host_programs_tree(str(tmp_path / f"{name}-tree"), programs)
    archive = str(tmp_path / f"{name}.tar")
    with tarfile.open(archive, "w") as tar:
        tar.add(tree, arcname=".")
    state = str(tmp_path / "import-state")
    imported = subprocess.run([RUNBOX, "--state-dir", state, "--images", store, "images",
                               "import", name, archive], capture_output=True, timeout=120)
    subprocess.run([RUNBOX, "--state-dir", state, "storage", "unmount"], capture_output=True,
                   timeout=60)
    assert imported.returncode == 0, imported.stderr
    return archive


@pytest.fixture
def store(tmp_path):
    """A store with "mini" (bash only) and "bare" (no interpreter of runbox's)."""
    path = str(tmp_path / "store")
    archives = {"mini": import_image(tmp_path, path, "mini", ("/bin/bash", "/usr/bin/cat")),
                "bare": import_image(tmp_path, path, "bare", ("/usr/bin/cat",))}
    return path, archives


def by_name(answer):
    return {image["name"]: image for image in answer["images"]}


def test_only_allowed_images_are_listed_with_what_each_can_run(start_server, store):
    path, archives = store
    server = start_server(global_args=("--images", path, "--allow-images", "mini,host"))
    response = server.request("GET", "/v1/images")
    assert response.status == 200 and response.header("Content-Type") == "application/json"
    answer = response.json()
    # The store has no image named default: executions that name none run on the host's /usr.
    assert answer["default"] == "host"
    assert [image["name"] for image in answer["images"]] == ["mini", "host"], answer
    images = by_name(answer)
    mini = images["mini"]
    assert mini["languages"] == ["bash"], mini
    assert mini["digest"].startswith("sha256:") and len(mini["digest"]) == 7 + 64, mini
    assert mini["size_bytes"] > 100_000 and mini["created"] > 1_700_000_000, mini
    assert archives["mini"] in mini["source"], mini
    assert mini["default"] is False and mini["allowed"] is True and mini["packages"] == ""
    host = images["host"]
    assert host["default"] is True and host["digest"] is None and host["size_bytes"] is None
    # TypeScript's interpreter is Node.js's: listed where node is (a Node.js too old to strip
    # types says so when a TypeScript run comes: tests/e2e/test_typescript.py).
    assert set(host["languages"]) == {"python", "javascript", "bash", "typescript"}, host
    validator = schema_validator("Image")
    for image in answer["images"]:
        validator.validate(image)
    assert not validator.is_valid(dict(mini, languages=["cobol"]))
    # The CLI lists the same store with the same fields (the ones not allowed too).
    listed = subprocess.run([RUNBOX, "--images", path, "images", "list", "--json"],
                            capture_output=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    cli = {image["name"]: image for image in json.loads(listed.stdout)}
    assert sorted(cli) == ["bare", "mini"], cli
    assert {k: v for k, v in cli["mini"].items() if k not in ("default", "allowed")} == \
        {k: v for k, v in mini.items() if k not in ("default", "allowed")}
    # What the list says, the executions do: bash runs on mini, python is refused before it runs,
    # and the image left out is refused by name.
    ran = server.execute(language="bash", code="echo on mini", image="mini")
    assert ran["success"] and ran["output"] == "on mini\n" and ran["image"] == "mini", ran
    refused = server.execute(expect=400, language="python", code="print(1)", image="mini")
    assert "has no /usr/bin/python3" in refused["error"]["message"], refused
    refused = server.execute(expect=400, language="bash", code="echo 1", image="bare")
    assert "allowed: mini,host" in refused["error"]["message"], refused


def test_the_operators_default_is_marked_and_everything_listed_without_an_allow_list(
        start_server, store):
    path, _ = store
    server = start_server(global_args=("--images", path, "--default-image", "mini"))
    answer = server.request("GET", "/v1/images").json()
    assert answer["default"] == "mini"
    assert [image["name"] for image in answer["images"]] == ["bare", "mini", "host"], answer
    images = by_name(answer)
    assert images["mini"]["default"] and not images["host"]["default"], answer
    assert images["bare"]["languages"] == [], answer
    # A request naming no image runs on the one marked default.
    ran = server.execute(language="bash", code="echo hi")
    assert ran["image"] == "mini" and ran["output"] == "hi\n", ran


def test_host_is_left_out_when_not_allowed_and_the_route_takes_only_get(start_server, store,
                                                                       tmp_path):
    path, _ = store
    token = tmp_path / "token"
    token.write_text("images-token-0123456789abcdef\n")
    token.chmod(0o600)
    server = start_server("--token-file", str(token),
                          global_args=("--images", path, "--allow-images", "bare"))
    unauthorized = server.request("GET", "/v1/images")
    assert unauthorized.status == 401 and b"bare" not in unauthorized.body, unauthorized
    server.token = "images-token-0123456789abcdef"
    answer = server.request("GET", "/v1/images").json()
    assert [image["name"] for image in answer["images"]] == ["bare"], answer
    head = server.request("HEAD", "/v1/images")
    assert head.status == 200 and head.body == b""
    for method in ("POST", "PUT", "DELETE"):
        response = server.request(method, "/v1/images", json_body={"name": "x"})
        assert response.status == 405, response
        assert "GET" in response.header("Allow"), response
    # Nothing is below the route (no path is walked up out of it), and a query changes nothing.
    for hostile in ("/v1/images/", "/v1/images/../sessions", "/v1/images/%2e%2e"):
        response = server.request("GET", hostile)
        assert response.status == 404 and b"bare" not in response.body, (hostile, response)
    assert server.request("GET", "/v1/images?name=../../etc").json() == answer


def test_an_empty_store_lists_host_alone(start_server, tmp_path):
    server = start_server(global_args=("--images", str(tmp_path / "no-store")))
    answer = server.request("GET", "/v1/images").json()
    assert answer["default"] == "host"
    assert [image["name"] for image in answer["images"]] == ["host"], answer
