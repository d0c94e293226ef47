"""A bare Jupyter kernel (ipykernel, driven by jupyter_client over ZeroMQ), for the benchmark's
comparison with runbox's stateful sessions (issue 31). Run by bench/cost.py under the venv that
has ipykernel and jupyter_client (make bench-jupyter): it starts one kernel, then for every line
`go` on stdin executes `print('hi')` and answers with the milliseconds from sending the request
to having the output, the reply and the kernel's return to idle, the way a Jupyter client
waits for a cell. `stop` (or end of input) shuts the kernel down."""
import json
import sys
import time

from jupyter_client.manager import start_new_kernel


def execute(client):
    start = time.perf_counter()
    msg_id = client.execute("print('hi')")
    output, idle, replied = "", False, False
    while not (idle and replied):
        if not idle:
            msg = client.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                output += msg["content"]["text"]
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
        else:
            reply = client.get_shell_msg(timeout=30)
            replied = reply["parent_header"].get("msg_id") == msg_id
    elapsed = (time.perf_counter() - start) * 1000
    if output != "hi\n":
        raise RuntimeError(f"the kernel printed {output!r}")
    return elapsed


def main():
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        execute(client)  # the first cell pays for imports: not counted
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            if line.strip() != "go":
                break
            print(json.dumps({"ms": execute(client)}), flush=True)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
