"""The "image" field of POST /v1/execute (issue 17): the root image an execution runs on,
checked against the store and the operator's allow-list, with 400s that say what is
accepted. Runs on the default image `make deps` builds (skipped where there is none)."""
import json
import os
import subprocess

import pytest

from http_helpers import RUNBOX

STORE = os.environ.get("RUNBOX_TEST_IMAGES", "/var/lib/runbox/images")


@pytest.fixture
def store(tmp_path):
    proc = subprocess.run([RUNBOX, "--images", STORE, "--state-dir", str(tmp_path / "probe"),
                           "images", "list", "--json"], capture_output=True)
    subprocess.run([RUNBOX, "--state-dir", str(tmp_path / "probe"), "storage", "unmount"],
                   capture_output=True)
    if proc.returncode != 0 or not any(i["name"] == "default" for i in json.loads(proc.stdout)):
        pytest.skip(f"no default image in {STORE} (make deps builds it)")
    return STORE


def test_execute_chooses_the_image(start_server, store):
    server = start_server(global_args=("--images", store))
    on_default = server.execute(language="python",
                                code="import sys, pandas; print(sys.version_info[:2])")
    assert on_default["image"] == "default" and on_default["success"], on_default
    assert on_default["output"] != "(3, 11)\n"
    on_host = server.execute(language="python", code="import sys; print(sys.version_info[:2])",
                             image="host")
    assert on_host["image"] == "host" and on_host["success"], on_host
    assert on_host["output"] != on_default["output"]
    # The session-routed path takes it too.
    routed = server.request("POST", "/v1/sessions/img-s1/execute",
                            json_body={"language": "bash", "code": "echo hi", "image": "host"})
    assert routed.status == 200 and routed.json()["image"] == "host"


@pytest.mark.parametrize("image,status,message", [
    (5, 400, "'image' must be a string"),
    (["default"], 400, "'image' must be a string"),
    ("../../etc", 400, "is not an image name"),
    ("a\u0000b", 400, "image"),
    ("x" * 5000, 400, "is not an image name"),
    ("nope", 400, "no image named 'nope'"),
])
def test_a_hostile_image_field_is_refused(start_server, store, image, status, message):
    server = start_server(global_args=("--images", store))
    response = server.request("POST", "/v1/execute",
                              json_body={"language": "bash", "code": "echo ran",
                                         "image": image})
    assert response.status == status, response
    text = json.dumps(response.json())
    assert message in text, text
    assert "ran" not in text


def test_the_allow_list_binds_http_requests(start_server, store):
    server = start_server(global_args=("--images", store, "--allow-images", "default"))
    response = server.request("POST", "/v1/execute",
                              json_body={"language": "bash", "code": "echo ran",
                                         "image": "host"})
    assert response.status == 400, response
    assert "allowed: default" in json.dumps(response.json())
    assert server.execute(language="bash", code="echo ok")["image"] == "default"
