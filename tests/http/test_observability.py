"""/healthz, /metrics and the access log."""
import re


def metric(text, name, labels=""):
    pattern = re.escape(name + labels) + r" ([0-9.e+]+)$"
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else None


def test_healthz(server):
    response = server.request("GET", "/healthz")
    assert response.status == 200
    health = response.json()
    assert health["status"] == "ok"
    assert health["running"] == 0 and health["queued"] == 0
    assert health["max_running"] >= 1 and health["max_queue"] == 64


def test_metrics_count_executions_by_language_and_outcome(server):
    server.execute(language="python", code="print(1)")
    server.execute(language="python", code="print(2)")
    server.execute(language="python", code="1/0")
    server.execute(language="bash", code="sleep 5", timeout=0.5)
    server.request("POST", "/v1/execute", json_body={"language": "bash", "code": "x",
                                                     "requirements": ["y"]})
    response = server.request("GET", "/metrics")
    assert response.status == 200
    assert response.header("Content-Type").startswith("text/plain; version=0.0.4")
    text = response.body.decode()
    assert metric(text, "runbox_executions_total", '{language="python",outcome="ok"}') == 2
    assert metric(text, "runbox_executions_total",
                  '{language="python",outcome="RuntimeError"}') == 1
    assert metric(text, "runbox_executions_total",
                  '{language="bash",outcome="TimeoutError"}') == 1
    assert metric(text, "runbox_execution_duration_seconds_count") == 4
    assert metric(text, "runbox_execution_duration_seconds_bucket", '{le="+Inf"}') == 4
    assert metric(text, "runbox_execution_duration_seconds_bucket", '{le="0.05"}') <= 4
    assert metric(text, "runbox_execution_duration_seconds_sum") > 0.4
    assert metric(text, "runbox_executions_running") == 0
    assert metric(text, "runbox_executions_queued") == 0
    assert metric(text, "runbox_installs_total") == 1
    assert metric(text, "runbox_http_responses_total", '{code="400"}') == 1
    for line in text.splitlines():  # the exposition format, line by line
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or \
            re.fullmatch(r'[a-z_]+(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? [0-9.e+-]+', line), line


def test_the_access_log_has_one_json_line_per_request(server):
    secret_code = "print('do-not-log-this-body')"
    def requests_of(lines):
        return [line for line in lines if line.get("event") == "request"]
    # A request's line is written once its connection is done with it, which can come after
    # the client has its answer (under ASan, after the next request's): each is awaited.
    server.execute(language="python", code=secret_code)
    server.wait_log(lambda lines: len(requests_of(lines)) >= 1)
    server.request("GET", "/v1/nothing")
    server.wait_log(lambda lines: len(requests_of(lines)) >= 2)
    server.request("GET", "/healthz")
    requests = requests_of(server.wait_log(lambda lines: len(requests_of(lines)) >= 3))
    assert [(r["method"], r["path"], r["status"]) for r in requests] == [
        ("POST", "/v1/execute", 200), ("GET", "/v1/nothing", 404), ("GET", "/healthz", 200)]
    for line in requests:
        assert set(line) >= {"time", "method", "path", "status", "duration_ms", "bytes"}
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])
        assert line["bytes"] > 0
    assert requests[0]["duration_ms"] >= 0
    assert "do-not-log-this-body" not in server.log_text()
    for raw in server.log_text().splitlines():  # every line is JSON
        if "Sanitizer" not in raw:
            assert raw.startswith("{"), raw
