"""E2B's JavaScript SDK (e2b, pinned in tests/e2b/js), unmodified, through envd on runbox:
files, a watch, commands, a terminal, timeout, pause and connect, kill (tests/e2b/js/envd.mjs
says what each step proves). Only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY are set."""
import json
import os
import subprocess

JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")


def test_the_javascript_sdk_uses_files_commands_and_terminals(e2b_server):
    assert os.path.isdir(os.path.join(JS, "node_modules", "e2b")), "run make e2b-sdk"
    env = {k: v for k, v in os.environ.items() if not k.startswith("E2B_")}
    env.update(E2B_API_URL=e2b_server.e2b_url, E2B_SANDBOX_URL=e2b_server.e2b_url,
               E2B_API_KEY="js")
    out = subprocess.run(["node", os.path.join(JS, "envd.mjs")], capture_output=True, text=True,
                         env=env, cwd=JS, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "text": "first", "bytes": [0, 1, 255], "stream": "second",
        "listed": ["one.txt:file", "two.txt:file"], "madeDir": [True, False],
        "renamed": "/home/user/made/one.txt", "exists": [True, False],
        "info": {"type": True, "size": 5}, "removed": False, "watched": True,
        "foreground": {"exitCode": 0, "stdout": "created mine\n", "stderr": "oops\n",
                       "seen": "created mine\noops\n"},
        "nonZero": {"exitCode": 3, "stdout": "before\n"}, "waited": "waited\n",
        "stdin": "got hello\n", "listedSleeper": True, "connected": True,
        "killed": [True, False], "pty": {"size": True, "exitCode": 5}, "running": True,
        "pausedRunning": False, "keptAfterPause": "second", "killed2": [True, False]}
