"""POST /v1/execute's egress_allow and the result's egress_denied fields: hostile lists are
400 with a message naming egress_allow, before anything runs; a valid list runs; [] is a
list of none (nothing reachable), null is the operator's policy."""
import json
import os
import subprocess

import pytest

from http_helpers import RUNBOX, e2e

public_address = e2e.public_address
from test_openapi import schema_validator

VALID = ["10.0.0.0/8", "pypi.org", "*.example.com"]
MOST = [f"10.0.{i}.0/24" for i in range(64)]


def refusal(server, egress_allow):
    response = server.request("POST", "/v1/execute", json_body={
        "language": "bash", "code": "echo ran > ran.txt; echo ran", "session_id": "egress-bad",
        "network": False, "egress_allow": egress_allow})
    assert response.status == 400, (egress_allow, response)
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "egress_allow" in error["message"], error
    return error["message"]


@pytest.mark.parametrize("egress_allow,expected", [
    ("pypi.org", "'egress_allow' must be an array of destinations"),
    (10, "'egress_allow' must be an array of destinations"),
    ({"pypi.org": True}, "'egress_allow' must be an array of destinations"),
    (True, "'egress_allow' must be an array of destinations"),
    (["pypi.org", 10], "'egress_allow[1]' must be a string, not a number"),
    (["pypi.org", None], "'egress_allow[1]' must be a string, not null"),
    ([["10.0.0.0/8"]], "'egress_allow[0]' must be a string, not an array"),
    (["pypi.org\u0000.evil.example"], "'egress_allow[0]' must not contain a NUL character"),
    (MOST + ["10.1.0.0/16"], "'egress_allow' lists 65 destinations: at most 64 are accepted"),
])
def test_a_list_of_the_wrong_shape_is_400_naming_the_field(server, egress_allow, expected):
    assert expected in refusal(server, egress_allow)
    assert server.request("GET", "/v1/sessions/egress-bad").status == 404  # nothing ran
    assert server.healthy()


@pytest.mark.parametrize("entry", [
    "10.0.0.0/33", "::/129", "10.0.0.0/-1", "300.1.2.3", "*", "*.", "exa mple.com",
    "http://x", "pypi.org:443", "", " ", "-rf", "a" * 300, "exa\u00e9mple.com", "10.0.0.0/8\n",
])
def test_an_entry_that_is_no_destination_is_400(server, entry):
    """The engine judges each entry: a CIDR, an address or a domain name, nothing else."""
    refusal(server, [VALID[0], entry])
    assert server.request("GET", "/v1/sessions/egress-bad").status == 404


def test_a_valid_list_with_the_network_off_runs_and_reports_nothing_denied(server):
    result = server.execute(language="bash", code="echo ran", network=False, egress_allow=VALID)
    assert result["output"] == "ran\n" and result["success"] is True
    assert result["network"] is False
    assert result["egress_denied"] == 0 and result["egress_denied_to"] == []
    schema_validator("Result").validate(result)


def test_64_destinations_are_accepted_and_an_empty_list_and_null_too(server):
    for egress_allow in (MOST, [], None):
        result = server.execute(language="bash", code="echo ran", network=False,
                                egress_allow=egress_allow)
        assert result["output"] == "ran\n", (egress_allow, result)
        assert result["egress_denied"] == 0 and result["egress_denied_to"] == []


def test_the_result_fields_sit_beside_network_in_every_form(server):
    """Plain and streamed results carry the two fields, after "network"; the schema
    requires them."""
    result = server.execute(language="bash", code="echo hi", network=False)
    keys = list(result)
    assert keys[keys.index("network") + 1:keys.index("network") + 3] == \
        ["egress_denied", "egress_denied_to"]
    conn = server.connection()
    conn.request("POST", "/v1/execute", body=json.dumps(
        {"language": "bash", "code": "echo hi", "network": False, "stream": True,
         "egress_allow": VALID}).encode(), headers=server.headers(json_body=True))
    events = [json.loads(line) for line in conn.getresponse()]
    conn.close()
    assert events[-1]["type"] == "result"
    assert events[-1]["egress_denied"] == 0 and events[-1]["egress_denied_to"] == []
    validator = schema_validator("Result")
    assert not validator.is_valid({k: v for k, v in result.items() if k != "egress_denied"})
    assert not validator.is_valid(dict(result, egress_denied_to="10.0.0.1:80"))


def test_the_unknown_field_message_lists_egress_allow(server):
    response = server.request("POST", "/v1/execute", json_body={
        "language": "bash", "code": "1", "egress_allowed": ["pypi.org"]})
    assert response.status == 400
    message = response.json()["error"]["message"]
    assert "unknown field 'egress_allowed'" in message and "egress_allow," in message


def test_the_document_describes_egress_allow():
    from test_openapi import load_doc
    schemas = json.loads(load_doc())["components"]["schemas"]
    field = schemas["ExecuteRequest"]["properties"]["egress_allow"]
    assert field["type"] == ["array", "null"] and field["maxItems"] == 64
    assert {"egress_denied", "egress_denied_to"} <= set(schemas["Result"]["required"])


@pytest.mark.skipif(os.geteuid() != 0, reason="network-on needs runbox-net and the tun device, set up here only "
                                              "as root")
def test_an_empty_list_reaches_nothing_and_the_result_says_where_it_tried(server):
    """[] is not null: with the network on, a connection anywhere is refused and reported,
    even to the package index, which the default policy allows."""
    address = public_address()
    code = (f'timeout 5 bash -c "exec 3<>/dev/tcp/{address}/443" && echo connected '
            '|| echo refused')
    result = server.execute(language="bash", code=code, network=True, egress_allow=[],
                            timeout=20)
    assert result["network"] is True
    assert result["output"] == "refused\n", result
    assert result["egress_denied"] >= 1, result
    assert f"{address}:443" in result["egress_denied_to"], result
    schema_validator("Result").validate(result)


# --- the operator's options reach runbox-serve ---------------------------------------------

@pytest.mark.parametrize("args,option", [
    (["--egress-default", "maybe"], "--egress-default"),
    (["--egress-default"], "--egress-default"),
    (["--egress-deny", "10.0.0.0/33"], "--egress-deny"),
    (["--egress-allow", "http://x"], "--egress-allow"),
    (["--egress-resolver", ""], "--egress-resolver"),
    (["--egress-file", "/no/such/egress"], "/no/such/egress"),
])
def test_serve_refuses_a_bad_egress_option_before_it_listens(tmp_path, args, option):
    for where in ("before", "after"):
        command = [RUNBOX, "--state-dir", str(tmp_path / "state")]
        command += (args + ["serve", "--listen", "127.0.0.1:0"] if where == "before"
                    else ["serve", "--listen", "127.0.0.1:0"] + args)
        proc = subprocess.run(command, capture_output=True, timeout=30)
        assert proc.returncode == 2, (where, proc)
        assert option.encode() in proc.stderr, (where, proc.stderr)
        assert b'"listening"' not in proc.stderr


def test_serve_applies_an_egress_file_and_keeps_serving(start_server, tmp_path):
    """A valid policy file, named by option, is taken; executions run under it."""
    policy = tmp_path / "egress"
    policy.write_text("# a mirror inside, nothing else private\nallow 10.1.2.0/24\n"
                      "deny 203.0.113.0/24\ndefault public\n")
    server = start_server(global_args=("--egress-file", str(policy)))
    result = server.execute(language="bash", code="echo ran", network=False,
                            egress_allow=["10.1.2.3"])
    assert result["output"] == "ran\n" and result["egress_denied"] == 0
