"""GET /openapi.json: docs/openapi.json, embedded, valid, and complete."""
import json
import os
import re

from http_helpers import ROOT

DOC_PATH = os.path.join(ROOT, "docs", "openapi.json")
ROUTES_C = os.path.join(ROOT, "src", "http", "routes.c")
METHODS = ("get", "put", "post", "delete", "head", "patch", "options", "trace")


def load_doc():
    with open(DOC_PATH, "rb") as f:
        return f.read()


def test_the_server_serves_docs_openapi_json_byte_for_byte(server):
    response = server.request("GET", "/openapi.json")
    assert response.status == 200
    assert response.header("Content-Type") == "application/json"
    assert response.body == load_doc()


def test_it_is_an_openapi_3_1_document():
    doc = json.loads(load_doc())
    assert doc["openapi"].startswith("3.1.")
    assert doc["info"]["title"] and doc["info"]["version"]
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer",
                                 "description": schemes["bearer"]["description"]}
    for path, item in doc["paths"].items():
        assert path.startswith("/")
        template_params = set(re.findall(r"\{(\w+)\}", path))
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        assert template_params == declared, path
        operations = [m for m in item if m in METHODS]
        assert operations, path
        for method in operations:
            operation = item[method]
            assert operation["operationId"] and operation["responses"], (path, method)
    text = load_doc().decode()
    for target in set(re.findall(r'"\$ref": "#/([^"]+)"', text)):
        node = doc
        for part in target.split("/"):
            node = node[part]  # every reference resolves


def route_table():
    """(METHOD, pattern) pairs of the server's route table in src/http/routes.c."""
    with open(ROUTES_C) as f:
        source = f.read()
    return re.findall(r'\{"(GET|POST|PUT|DELETE)", "(/[^"]*)"', source)


def test_every_route_the_server_answers_is_documented():
    doc = json.loads(load_doc())
    routes = route_table()
    assert len(routes) >= 12
    for method, pattern in routes:
        assert pattern in doc["paths"], pattern
        assert method.lower() in doc["paths"][pattern], (method, pattern)
    documented = {(m.upper(), p) for p, item in doc["paths"].items() for m in item if m in METHODS}
    assert documented == set(routes)


def test_every_documented_path_is_answered(server):
    doc = json.loads(load_doc())
    session = server.request("POST", "/v1/sessions").json()["session_id"]
    assert server.request("PUT", f"/v1/sessions/{session}/files/doc.txt", body=b"x").status == 200
    bodies = {"post": {"language": "bash", "code": "echo doc"}}
    archive = server.request("GET", f"/v1/sessions/{session}/export").body
    # Draining last: after it the node takes no new work.
    paths = sorted(doc["paths"].items(), key=lambda p: p[0] == "/v1/admin/drain")
    for path, item in paths:
        target = "imported" if path.endswith("/import") else session
        concrete = path.replace("{id}", target).replace("{path}", "doc.txt")
        method = "get" if "get" in item else [m for m in item if m in METHODS][0]
        if path.endswith("/import"):
            response = server.request("POST", concrete, body=archive)
        elif path == "/v1/admin/drain":
            response = server.request("POST", concrete, json_body={"drain": True})
        else:
            response = server.request(method.upper(), concrete, json_body=bodies.get(method))
        assert response.status != 404, (method, path, response)
        assert response.status < 400, (method, path, response)


def schema_validator(name):
    """A validator of what the server answers against the document's schema `name`."""
    import jsonschema
    doc = json.loads(load_doc())
    resolver = jsonschema.RefResolver.from_schema(doc)
    return jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{name}"},
                                           resolver=resolver)


def test_live_answers_match_their_schemas(server):
    """What the server sends (plain, stateful with rich outputs, streamed, a session with its
    kernel) is what the document says; each schema is also shown to reject a wrong object."""
    result, event, session = (schema_validator(n) for n in ("Result", "StreamEvent", "Session"))
    plain = server.execute(language="bash", code="echo hi", session_id="doc")
    rich = server.execute(language="python", session_id="doc", stateful=True,
                          code="display({'text/html': '<b>x</b>'}, raw=True)\n6 * 7")
    for answer in (plain, rich):
        result.validate(answer)
    assert len(rich["results"]) == 2
    conn = server.connection()
    conn.request("POST", "/v1/execute", body=json.dumps(
        {"language": "python", "session_id": "doc", "stateful": True, "stream": True,
         "code": "print(1)\n'value'"}).encode(), headers=server.headers(json_body=True))
    events = [json.loads(line) for line in conn.getresponse()]
    conn.close()
    assert {e["type"] for e in events} == {"stdout", "display", "result"}
    for e in events:
        event.validate(e)
    described = server.request("GET", "/v1/sessions/doc").json()
    session.validate(described)
    assert described["kernels"][0]["language"] == "python"
    restarted = server.request("POST", "/v1/sessions/doc/restart").json()
    assert restarted == {"session_id": "doc", "stopped": 1}
    assert not result.is_valid(dict(plain, results=[{"kind": "nonsense", "data": {}}]))
    assert not session.is_valid({k: v for k, v in described.items() if k != "kernels"})
    assert not event.is_valid({"type": "display", "data": {}})
