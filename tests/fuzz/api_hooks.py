"""schemathesis hooks for `make fuzz-api` (SCHEMATHESIS_HOOKS points here).

docs/openapi.json gives most of the execute request's limits in prose only
("at most 300", "python (py, python3)..."), so data generated from its
schema alone is almost always refused with 400 and no code ever runs. The
schema is narrowed here, for this test only, to the limits the prose and the
README state, so that most requests do run:
- language: the names and aliases; session_id: RBX_SESSION_ID_PATTERN;
  memory_mb: 16 and up; env: variable names as the README allows them;
- timeout: at most 5 s and cpus at most 1, so that generated code that loops
  ends soon (every execution really runs in a sandbox);
- requirements: never sent. Random package names would make the server ask
  PyPI and npm about names nobody meant (before_call drops them from any
  request that has them, whatever phase made it).
Streaming answers (NDJSON and Server-Sent Events) are checked event by event
against the StreamEvent schema by the check stream_events. (schemathesis
reads an event stream as {"event", "data"} objects and holds each against
the media type's schema, which OpenAPI 3.1 can only give as "a string" for
the whole body: for this test it says what schemathesis sees instead.)
"""
import json
import os

import jsonschema_rs
import schemathesis

MAX_TIMEOUT_S = 5
LANGUAGES = ["python", "py", "python3", "javascript", "js", "node", "nodejs", "bash", "sh",
             "shell"]
SESSION_ID = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ENV_NAME = "^[A-Za-z_][A-Za-z0-9_]{0,127}$"
RESERVED_ENV = ["HOME", "PWD", "OLDPWD", "USER", "LOGNAME"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "docs", "openapi.json")) as f:
    _components = json.load(f)["components"]
STREAM_EVENT = jsonschema_rs.validator_for(
    {"$ref": "#/components/schemas/StreamEvent", "components": _components})


@schemathesis.hook
def before_load_schema(context, raw_schema):
    props = raw_schema["components"]["schemas"]["ExecuteRequest"]["properties"]
    props["language"]["enum"] = LANGUAGES
    props["session_id"]["pattern"] = SESSION_ID
    props["timeout"]["maximum"] = MAX_TIMEOUT_S
    props["memory_mb"].update(minimum=16, maximum=1024)
    if "cpus" in props:
        props["cpus"]["maximum"] = 1
    props["env"]["propertyNames"] = {"pattern": ENV_NAME, "not": {"enum": RESERVED_ENV}}
    props["env"]["additionalProperties"] = {"type": "string", "pattern": "^[^\\u0000]*$"}
    props["env"]["maxProperties"] = 16
    props.pop("requirements", None)
    responses = raw_schema["paths"]["/v1/execute"]["post"]["responses"]
    responses["200"]["content"]["text/event-stream"]["schema"] = {
        "type": "object", "required": ["event", "data"],
        "properties": {"event": {"type": "string"}, "data": {"type": "string"}}}


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.operation.path != "/v1/execute" or not isinstance(case.body, dict):
        return
    case.body.pop("requirements", None)
    timeout = case.body.get("timeout")
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if timeout is None or (number and timeout > MAX_TIMEOUT_S):
        case.body["timeout"] = MAX_TIMEOUT_S


def _events(response):
    """The events of a streaming answer, or None for any other answer."""
    kind = response.headers.get("content-type", [""])
    kind = (kind[0] if isinstance(kind, list) else kind).split(";")[0].strip()
    text = response.content.decode("utf-8")
    if kind == "application/x-ndjson":
        assert text.endswith("\n"), "the stream does not end with a whole line"
        return [json.loads(line) for line in text.split("\n")[:-1]]
    if kind == "text/event-stream":
        assert text.endswith("\n\n"), "the stream does not end with a whole event"
        events = []
        for block in text.split("\n\n")[:-1]:
            lines = block.split("\n")
            assert len(lines) == 2 and lines[0].startswith("event: ") \
                and lines[1].startswith("data: "), f"not one event: {block!r}"
            event = json.loads(lines[1][len("data: "):])
            assert event.get("type") == lines[0][len("event: "):], f"event names: {block!r}"
            events.append(event)
        return events
    return None


@schemathesis.check
def stream_events(ctx, response, case):
    """Each event of a stream is a StreamEvent, and the last one (only) ends it."""
    if response.status_code != 200:
        return None
    events = _events(response)
    if events is None:
        return None
    assert events, "an empty stream"
    for event in events:
        STREAM_EVENT.validate(event)
    ends = [i for i, event in enumerate(events) if event["type"] in ("result", "error")]
    assert ends == [len(events) - 1], f"the stream ends at events {ends} of {len(events)}"
    return True
