#!/bin/bash
# schemathesis against a live runbox-serve: the server of BUILD on a free
# loopback port (--listen 127.0.0.1:0; the port is read from its first log
# line), with a private state directory, checked against docs/openapi.json.
# Its log, schemathesis' output and JUnit reports go to WORK. Exits 1 when
# schemathesis found a failure, the server died or it reported a sanitizer
# error.
#
#   tests/fuzz/api.sh BUILD SCHEMATHESIS EXAMPLES WORK
set -u -o pipefail
examples=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$4"
# Absolute: schemathesis runs from WORK.
build=$(cd "$1" && pwd) work=$(cd "$4" && pwd)
schemathesis=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
state=$(mktemp -d /tmp/runbox-fuzz-api.XXXXXX)
log=$work/serve.log

"$build/runbox-serve" --state-dir "$state" serve --listen 127.0.0.1:0 --max-running 2 \
    </dev/null >/dev/null 2>"$log" &
server=$!

# Sessions are mounted disk images when runbox runs as root: remove them
# with runbox itself before the directory goes.
server_exit=0
stop() {
    kill -TERM "$server" 2>/dev/null && { wait "$server"; server_exit=$?; }
    for id in $("$build/runbox" --state-dir "$state" sessions list --json 2>/dev/null |
        /usr/bin/python3 -c 'import json, sys; print(*(s["session_id"] for s in json.load(sys.stdin)))'); do
        "$build/runbox" --state-dir "$state" sessions rm "$id" --wait 30 >/dev/null 2>&1
    done
    # runbox keeps the sessions' filesystem image mounted (as root) and its
    # template namespace pinned; it undoes both itself.
    "$build/runbox" --state-dir "$state" storage unmount >/dev/null 2>&1
    rm -rf "$state"
}
trap stop EXIT

port=
for _ in $(seq 100); do
    port=$(sed -n 's/.*"event":"listening".*"listen":"[^"]*:\([0-9]*\)".*/\1/p' "$log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "runbox-serve did not start: $(cat "$log")" >&2
    exit 1
fi
echo "runbox-serve on 127.0.0.1:$port (state $state, log $log)"

# Checks: no 5xx; status codes, content types and bodies as documented;
# streams event by event (api_hooks.py). Each request gets 30 s (an
# execution is at most 5 s, see api_hooks.py); a pass at most 20 minutes,
# in case something hangs. Three passes: every operation as schemathesis
# chooses, then executions asked to stream as NDJSON and as Server-Sent
# Events (a "stream" field alone is rarely generated true).
pass_() {
    name=$1
    shift
    echo "== schemathesis: $name"
    # From WORK, where it keeps its cache (.schemathesis/), not the tree.
    (cd "$work" && SCHEMATHESIS_HOOKS=$root/tests/fuzz/api_hooks.py timeout 1200 "$schemathesis" run \
        "$root/docs/openapi.json" --url "http://127.0.0.1:$port" \
        --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,stream_events \
        --max-examples "$examples" --request-timeout 30 --workers 1 --seed 1 \
        --report junit --report-dir "$work/report-$name" "$@" 2>&1 | tee "$work/schemathesis-$name.log")
}
status=0
# Draining is fuzzed last, on its own: once a node drains it takes no new
# work, which would turn every later request into a 503.
pass_ all --exclude-operation-id drain || status=1
pass_ ndjson --include-path /v1/execute -H "Accept: application/x-ndjson" || status=1
pass_ sse --include-path /v1/execute -H "Accept: text/event-stream" || status=1
pass_ drain --include-operation-id drain || status=1

if ! kill -0 "$server" 2>/dev/null; then
    echo "runbox-serve died during the run: $(tail -n 20 "$log")" >&2
    status=1
fi
# Stopped before its log is read: LeakSanitizer reports when it exits.
trap - EXIT
stop
if [ "$server_exit" -ne 0 ]; then
    echo "runbox-serve exited $server_exit when stopped: see $log" >&2
    status=1
fi
if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$log"; then
    echo "runbox-serve reported a sanitizer error: see $log" >&2
    status=1
fi
exit $status
