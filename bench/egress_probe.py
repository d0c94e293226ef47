"""One `runbox serve` in the network namespace this runs in, for the egress section's scale
axis (bench/egress.py): it starts the server, then for every line `go` on stdin runs one
network-on `echo hi` over HTTP keep-alive (a prepared sandbox waiting, as for a steady client)
and answers with a JSON line: the milliseconds it took, and the CPU the server and its
sandboxes spent on it. `churn` adds and removes 100 addresses on the namespace's loopback (a
node's containers coming and going) and answers with the server's CPU over that time.
`stop` (or end of input) stops the server.

    egress_probe.py RUNBOX STATE_DIR"""
import json
import subprocess
import sys
import time

from common import Server, execute_over_http, server_cpu_ms, wait_refilled


def churn(server, count=100):
    commands = []
    for i in range(count):
        address = f"10.250.{i // 250}.{i % 250 + 1}/32"
        commands += [f"addr add {address} dev lo", f"addr del {address} dev lo"]
    time.sleep(1)
    cpu = server_cpu_ms(server)
    subprocess.run(["ip", "-batch", "-"], input="\n".join(commands) + "\n", text=True,
                   check=True, capture_output=True)
    time.sleep(2.5)  # what the server does about them, removals listed again within a second
    return server_cpu_ms(server) - cpu


def main():
    runbox, state = sys.argv[1], sys.argv[2]
    server = Server(runbox, state)
    try:
        conn = server.connection()
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            if line.strip() == "churn":
                print(json.dumps({"cpu_ms": churn(server)}), flush=True)
                continue
            if line.strip() != "go":
                break
            wait_refilled(server)
            cpu = server_cpu_ms(server)
            start = time.perf_counter()
            execute_over_http(server, conn, "bash", "echo hi", True)
            elapsed = (time.perf_counter() - start) * 1000
            wait_refilled(server)  # the next sandbox's making is this execution's CPU too
            time.sleep(0.05)       # and its teardown, in the kernel's workers
            print(json.dumps({"ms": elapsed, "cpu_ms": server_cpu_ms(server) - cpu}),
                  flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
