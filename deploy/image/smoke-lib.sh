# What smoke-test.sh and podman-smoke-test.sh check alike, once the container
# serves on $port: sourced by both, each with its own `inside PROGRAM...`
# (a command in the container's namespaces and root) and $here, $repo.

# smoke_checks.py inside, then the StatefulSet's preStop hook as the kubelet
# would run it: runbox drains, and /healthz says 503.
smoke_checks() {
    inside python3 - "$port" <"$here/smoke_checks.py" || return 1
    local hook health
    hook=$(python3 -c 'import sys, yaml
sts = yaml.safe_load(open(sys.argv[1]))
[c] = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "runbox"]
print(c["lifecycle"]["preStop"]["exec"]["command"][2])' "$repo/deploy/kubernetes/runbox-statefulset.yaml")
    inside /bin/sh -c "${hook//:8080/:$port}" >/dev/null
    health=$(inside curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")
    [ "$health" = 503 ] || { echo "FAIL the preStop hook drains: /healthz says $health"; return 1; }
    echo "ok   the preStop hook drains: /healthz says 503"
}
