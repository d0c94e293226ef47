"""runbox serve for the Python SDK's tests of /mcp: a free loopback port, a private state
directory, a token; the sessions it made are removed after (tests/lib/nodetest.mjs does the
same for the Node.js suites)."""
import json
import os
import re
import secrets
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUNBOX = os.environ.get("RUNBOX_BIN", os.path.join(ROOT, "build", "runbox"))
SANITIZER_REPORT = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:")


class Serve:
    def __init__(self, token):
        self.token = token
        self.state_dir = tempfile.mkdtemp(prefix="rbx-mcp-py-")
        self.log_path = os.path.join(self.state_dir, "serve.log")
        env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
               "RUNBOX_STATE_DIR": os.path.join(self.state_dir, "state"), "RUNBOX_TOKEN": token}
        for name in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "RUNBOX_IMAGES"):
            if name in os.environ:
                env[name] = os.environ[name]
        self.log = open(self.log_path, "w+")
        self.process = subprocess.Popen([RUNBOX, "serve", "--listen", "127.0.0.1:0", "--grace", "2"],
                                        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=self.log)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            match = re.search(r'"event":"listening","listen":"([^"]+)"', self.text())
            if match:
                self.base = f"http://{match.group(1)}"
                self.url = f"{self.base}/mcp"
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"runbox serve did not start:\n{self.text()}")

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        self.process.terminate()
        code = self.process.wait(timeout=20)
        env = dict(os.environ, RUNBOX_STATE_DIR=os.path.join(self.state_dir, "state"))
        for session in json.loads(subprocess.run([RUNBOX, "sessions", "list", "--json"], env=env,
                                                 capture_output=True, text=True).stdout or "[]"):
            subprocess.run([RUNBOX, "sessions", "rm", session["session_id"], "--wait", "10"], env=env)
        subprocess.run([RUNBOX, "storage", "unmount"], env=env, capture_output=True)
        return code


@pytest.fixture(scope="module")
def serve():
    server = Serve(f"tok-{secrets.token_hex(8)}")
    yield server
    code = server.stop()
    text = server.text()
    assert not SANITIZER_REPORT.search(text), text[-4000:]
    assert code == 0, text[-4000:]
