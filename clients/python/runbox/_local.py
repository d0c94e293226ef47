"""The local transport: runs the `runbox` executable, streaming with --stream."""
import json
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Callable, Dict, List, Optional

from .errors import NotFound, RequestRejected, RunboxError, RunboxUnavailable

OutputCallback = Callable[[str, str], None]
EGRESS_ALLOW_MAX = 64  # RBX_EGRESS_ALLOW_MAX


class LocalTransport:
    def __init__(self, binary: Optional[str] = None, state_dir: Optional[str] = None):
        binary = binary or os.environ.get("RUNBOX_BIN") or shutil.which("runbox")
        if not binary or not os.access(binary, os.X_OK):
            raise RunboxUnavailable("no runbox executable: put runbox on PATH, set RUNBOX_BIN, "
                                    "or set RUNBOX_URL to use a server")
        self.binary = binary
        self.state_dir = state_dir

    def _command(self, *args: str) -> List[str]:
        command = [self.binary]
        if self.state_dir:
            command += ["--state-dir", self.state_dir]
        return command + list(args)

    def _run(self, *args: str, stdin: bytes = b"") -> bytes:
        proc = subprocess.run(self._command(*args), input=stdin, capture_output=True)
        if proc.returncode != 0:
            raise _error_for(proc.returncode, proc.stderr)
        return proc.stdout

    def execute(self, body: Dict[str, Any], on_output: Optional[OutputCallback]) -> Dict[str, Any]:
        args = ["run", body["language"], "-", "--stream"]
        if body.get("session_id"):
            args += ["--session", body["session_id"]]
        if body.get("timeout") is not None:
            args += ["--timeout", str(body["timeout"])]
        if body.get("memory_mb") is not None:
            args += ["--memory", str(body["memory_mb"])]
        if body.get("cpus") is not None:
            args += ["--cpus", str(body["cpus"])]
        if body.get("stateful"):
            args.append("--stateful")
        if body.get("image") is not None:
            args += ["--image", body["image"]]
        if body.get("network") is not None:
            args.append("--network" if body["network"] else "--no-network")
        for spec in body.get("requirements") or []:
            args += ["--require", spec]
        if body.get("egress_allow") is not None:
            args += ["--egress-allow", _egress_list(body["egress_allow"])]
        for name, value in (body.get("env") or {}).items():
            args += ["--env", f"{name}={value}"]
        with tempfile.NamedTemporaryFile(prefix="runbox-stdin-") as stdin_file:
            if body.get("stdin") is not None:
                stdin_file.write(body["stdin"].encode())
                stdin_file.flush()
                args += ["--input", stdin_file.name]
            return self._stream(args, body["code"], on_output)

    def _stream(self, args: List[str], code: str,
                on_output: Optional[OutputCallback]) -> Dict[str, Any]:
        proc = subprocess.Popen(self._command(*args), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin and proc.stdout and proc.stderr
        # The code goes in on stdin, not argv: no size limit, not visible in ps.
        proc.stdin.write(code.encode())
        proc.stdin.close()
        result = None
        try:
            for line in proc.stdout:
                event = json.loads(line)
                if event.get("type") == "result":
                    event.pop("type")
                    result = event
                elif on_output is not None:
                    on_output(event["type"], event.get("data", ""))
        finally:
            stderr = proc.stderr.read()
            proc.wait()
        if result is None:
            raise _error_for(proc.returncode, stderr)
        return result

    def list_sessions(self) -> List[Dict[str, Any]]:
        return json.loads(self._run("sessions", "list", "--json"))

    def new_session(self, session_id: str) -> str:
        return self._run("sessions", "new", session_id).decode().strip()

    def export_session(self, session_id: str) -> bytes:
        return self._run("sessions", "export", session_id)

    def import_session(self, session_id: str, archive: bytes) -> Dict[str, Any]:
        said = self._run("sessions", "import", session_id, stdin=archive).decode()
        found = re.search(r"imported (\d+) files? \((\d+) bytes\)", said)
        return {"session_id": session_id, "files": int(found.group(1)) if found else 0,
                "bytes": int(found.group(2)) if found else 0}

    def close_session(self, session_id: str) -> None:
        self._run("sessions", "rm", session_id, "--wait", "30")

    def restart_session(self, session_id: str, language: Optional[str]) -> None:
        self._run("sessions", "restart", session_id, *(["--language", language] if language else []))

    def upload(self, session_id: str, path: str, data: bytes) -> None:
        self._run("files", "put", session_id, path, stdin=data)

    def download(self, session_id: str, path: str) -> bytes:
        return self._run("files", "get", session_id, path)

    def list_files(self, session_id: str) -> List[Dict[str, Any]]:
        return json.loads(self._run("files", "list", session_id, "--json"))


def _egress_list(destinations: List[Any]) -> str:
    """egress_allow as `runbox run --egress-allow` takes it: one argument, the entries
    separated by commas. An entry the CLI would split, or could not carry, is refused here
    as the server refuses what it cannot take."""
    if len(destinations) > EGRESS_ALLOW_MAX:
        raise RequestRejected(f"'egress_allow' lists {len(destinations)} destinations: at most "
                              f"{EGRESS_ALLOW_MAX} are accepted", status=2)
    for i, entry in enumerate(destinations):
        if not isinstance(entry, str):
            raise RequestRejected(f"'egress_allow[{i}]' must be a string, not "
                                  f"{type(entry).__name__}", status=2)
        if not entry or any(c in entry for c in ", \t\n\0"):
            raise RequestRejected(f"egress_allow: {entry!r} is not one destination (a CIDR, an "
                                  "address or a domain name)", status=2)
    return ",".join(destinations)


def _error_for(returncode: int, stderr: bytes) -> RunboxError:
    message = stderr.decode(errors="replace").strip()
    if message.startswith("runbox: "):
        message = message[len("runbox: "):]
    if returncode == 2 and (message.startswith("no session") or message.startswith("no file")):
        return NotFound(message, status=returncode)
    if returncode == 2:
        return RequestRejected(message, status=returncode)
    return RunboxError(message or f"runbox exited with {returncode}", status=returncode)
