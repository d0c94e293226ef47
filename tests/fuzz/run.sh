#!/bin/sh
# Runs every libFuzzer harness built in BUILD/fuzz for SECONDS each, from
# the checked-in seeds, and prints one Markdown row per harness: executions,
# exec/s, coverage (cov: edges, ft: features, from libFuzzer's last stats
# line) and the crashes, leaks, timeouts and out-of-memory inputs it saved
# this run (libFuzzer stops at the first).
# New corpus entries and those inputs go to WORK (never into the repo).
# The inputs in tests/fuzz/regressions/<harness>/ are replayed first.
# Exits 1 when any harness failed, so CI can stop on it.
#
#   tests/fuzz/run.sh BUILD SECONDS WORK
set -u
build=$1 seconds=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)

# Bytes an input may have: a JSON body of 64 KiB is plenty to reach every
# branch (the server's cap, 10 MiB, would only slow the search); text
# parsers get what their own limits allow, with room past them; an image
# archive holds headers and a few small files (the unpacker's limit in the
# harness is 4 MiB, which would only slow the search too).
max_len() {
    case $1 in
    image_unpack) echo 262144 ;;
    http_execute | mcp_jsonrpc | mcp_arguments | capture | json_text | kernel_wire) echo 65536 ;;
    policy_file | classify) echo 16384 ;;
    http_route | session_path | cli_values) echo 4096 ;;
    e2b_envd_path) echo 8192 ;; # past E2B_PATH_MAX, which it refuses
    deps_spec) echo 512 ;;
    *) echo 4096 ;;
    esac
}

dict() {
    case $1 in
    http_execute | mcp_jsonrpc | mcp_arguments | kernel_wire) echo "$here/dict/json.dict" ;;
    *) [ -f "$here/dict/$1.dict" ] && echo "$here/dict/$1.dict" ;;
    esac
}

# LeakSanitizer on, and UBSan's reports with their stacks.
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"

failed=0
printf '| harness | executions | exec/s | cov | ft | corpus | crashes |\n'
printf '|---|---:|---:|---:|---:|---:|---:|\n'
for bin in "$build"/fuzz/*; do
    name=$(basename "$bin")
    corpus=$work/corpus/$name artifacts=$work/artifacts/$name log=$work/logs/$name.log
    mkdir -p "$corpus" "$artifacts" "$work/logs"
    for input in "$here/regressions/$name"/*; do
        [ -f "$input" ] || continue
        if ! "$bin" "$input" >"$log.regression" 2>&1; then
            echo "regression $input fails again: see $log.regression" >&2
            failed=1
        fi
    done
    set -- -max_total_time="$seconds" -timeout=10 -max_len="$(max_len "$name")" \
        -print_final_stats=1 -detect_leaks=1 -artifact_prefix="$artifacts/"
    d=$(dict "$name")
    [ -n "$d" ] && set -- "$@" -dict="$d"
    # The scratch corpus first: libFuzzer writes what it finds there.
    saved=$(ls "$artifacts" | grep -cE '^(crash|leak|timeout|oom)-')
    "$bin" "$@" "$corpus" "$here/corpus/$name" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    units=$(ls "$corpus" | wc -l)
    crashes=$(($(ls "$artifacts" | grep -cE '^(crash|leak|timeout|oom)-') - saved))
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        failed=1
        echo "$name: exit $rc, $crashes new in $artifacts (log: $log)" >&2
    fi
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "${execs:-?}" "${rate:-?}" \
        "${cov:-?}" "${ft:-?}" "$units" "$crashes"
done
exit $failed
