#!/bin/sh
# The runbox load balancer's first process (lb-deployment.yaml): nginx, and
# a reload whenever a runbox node's address changes.
#
# nginx resolves the nodes' names (runbox-nodes.conf) when it starts or
# reloads, never in between, and a runbox pod that is recreated (a rolling
# update, a machine drained) comes back under its name with a new address.
# So every RESOLVE_SECONDS this resolves the names again and reads the
# configuration (the ConfigMap's files change in place when it is updated),
# and when either changed it checks the configuration and reloads nginx
# (gracefully: requests in flight finish on the old workers). While a name does not
# resolve (its pod not created yet), nginx would refuse the configuration:
# at start this waits, later it keeps the addresses it has.
set -u

conf_dir=$(cd "$(dirname "$0")" && pwd)
prefix=${NGINX_PREFIX:-/tmp/nginx/}
interval=${RESOLVE_SECONDS:-10}
nginx="nginx -e stderr -p $prefix -c $conf_dir/nginx.conf"

# The nodes' addresses and the configuration's checksum.
state() {
    cat "$conf_dir/nginx.conf" "$conf_dir/runbox.conf" "$conf_dir/runbox-nodes.conf" | cksum
    for name in $(sed -n 's/^[[:space:]]*server[[:space:]][[:space:]]*\([^:;[:space:]]*\).*/\1/p' \
        "$conf_dir/runbox-nodes.conf"); do
        echo "$name $(getent hosts "$name" | awk '{print $1}' | sort | tr '\n' ' ')"
    done
}

mkdir -p "$prefix"
until $nginx -t -q; do
    echo "run-nginx: the configuration does not load yet (a node's name does not resolve?): retrying" >&2
    sleep 2
done
known=$(state)
$nginx -g 'daemon off;' &
pid=$!
# SIGTERM (the pod is deleted): QUIT is nginx's graceful stop, and no more
# reloads.
stopping=
trap 'stopping=1; kill -QUIT "$pid" 2>/dev/null' TERM INT
while kill -0 "$pid" 2>/dev/null; do
    sleep "$interval" &
    wait $! 2>/dev/null
    [ -z "$stopping" ] || break
    now=$(state)
    if [ "$now" != "$known" ] && $nginx -t -q; then
        echo "run-nginx: a node's address or the configuration changed: reloading" >&2
        kill -HUP "$pid"
        known=$now
    fi
done
wait "$pid"
