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
    for path, item in doc["paths"].items():
        concrete = path.replace("{id}", session).replace("{path}", "doc.txt")
        method = "get" if "get" in item else [m for m in item if m in METHODS][0]
        response = server.request(method.upper(), concrete, json_body=bodies.get(method))
        assert response.status != 404, (method, path, response)
        assert response.status < 400, (method, path, response)
