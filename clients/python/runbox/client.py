"""The client: one object per runbox, over HTTP (`runbox serve`) or the local executable."""
import os
import secrets
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from ._http import HttpTransport
from ._local import LocalTransport
from .errors import QueueFull

OutputCallback = Callable[[str, str], None]
Result = Dict[str, Any]


class Client:
    """Talks to `runbox serve` at url (or $RUNBOX_URL); without one, runs the local `runbox`
    executable (found through $RUNBOX_BIN or PATH). Both give the same results.

    retries: how many times a full queue (HTTP 429) is retried, waiting as the server says
    (Retry-After) and backing off; 0 raises QueueFull at once.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 runbox_bin: Optional[str] = None, state_dir: Optional[str] = None,
                 retries: int = 0, timeout: float = 600.0):
        url = url or os.environ.get("RUNBOX_URL")
        token = token or os.environ.get("RUNBOX_TOKEN")
        if url:
            self._transport: Any = HttpTransport(url, token, timeout=timeout)
        else:
            self._transport = LocalTransport(runbox_bin, state_dir)
        self.retries = retries

    def execute(self, language: str, code: str, *, timeout: Optional[float] = None,
                session_id: Optional[str] = None, requirements: Optional[Sequence[str]] = None,
                memory_mb: Optional[int] = None, cpus: Optional[float] = None,
                network: Optional[bool] = None, stateful: Optional[bool] = None,
                env: Optional[Dict[str, str]] = None, stdin: Optional[str] = None,
                egress_allow: Optional[Sequence[str]] = None,
                image: Optional[str] = None,
                on_output: Optional[OutputCallback] = None) -> Result:
        """Runs code; returns the result object (a failing program is a result, not an
        exception). on_output(stream, text) receives output as it is produced ("stdout" and
        "stderr" with text; "display" with a rich output's MIME bundle, a dict). stateful=True
        runs it in the session's live interpreter, which keeps variables, imports and the
        working directory between calls; its rich outputs (the last expression's value,
        display(), plots) are in result["results"]. egress_allow narrows where the code may
        connect: only these CIDRs, addresses and domain names ("pypi.org", "*.example.com"),
        and only where the operator's policy allows them; [] reaches nothing, None keeps the
        operator's policy. What was refused is in result["egress_denied"] and
        result["egress_denied_to"]. image names the root image to run on (`runbox images list`;
        "host" is the host's own /usr); None: the operator's default. result["image"] says which
        one it ran on."""
        body: Dict[str, Any] = {"language": language, "code": code}
        optional = {"timeout": timeout, "session_id": session_id,
                    "requirements": list(requirements) if requirements is not None else None,
                    "memory_mb": memory_mb, "cpus": cpus, "network": network, "env": env,
                    "stdin": stdin, "stateful": stateful,
                    "egress_allow": _destinations(egress_allow), "image": image}
        body.update({k: v for k, v in optional.items() if v is not None})
        delay = 0.5
        for attempt in range(self.retries + 1):
            try:
                return self._transport.execute(body, on_output)
            except QueueFull as full:
                if attempt == self.retries:
                    raise
                time.sleep(max(full.retry_after, delay))
                delay = min(delay * 2, 30)
        raise AssertionError("unreachable")

    def execute_python(self, code: str, timeout: Optional[float] = None,
                       session_id: Optional[str] = None,
                       requirements: Optional[Sequence[str]] = None,
                       egress_allow: Optional[Sequence[str]] = None, **options: Any) -> Result:
        return self.execute("python", code, timeout=timeout, session_id=session_id,
                            requirements=requirements, egress_allow=egress_allow, **options)

    def execute_javascript(self, code: str, timeout: Optional[float] = None,
                           session_id: Optional[str] = None,
                           requirements: Optional[Sequence[str]] = None,
                           egress_allow: Optional[Sequence[str]] = None,
                           **options: Any) -> Result:
        return self.execute("javascript", code, timeout=timeout, session_id=session_id,
                            requirements=requirements, egress_allow=egress_allow, **options)

    def execute_typescript(self, code: str, timeout: Optional[float] = None,
                           session_id: Optional[str] = None,
                           requirements: Optional[Sequence[str]] = None,
                           egress_allow: Optional[Sequence[str]] = None,
                           **options: Any) -> Result:
        """TypeScript: its types stripped (not checked), then run as JavaScript is."""
        return self.execute("typescript", code, timeout=timeout, session_id=session_id,
                            requirements=requirements, egress_allow=egress_allow, **options)

    def execute_bash(self, command: str, timeout: Optional[float] = None,
                     session_id: Optional[str] = None,
                     egress_allow: Optional[Sequence[str]] = None, **options: Any) -> Result:
        return self.execute("bash", command, timeout=timeout, session_id=session_id,
                            egress_allow=egress_allow, **options)

    def list_sessions(self) -> List[Dict[str, Any]]:
        return self._transport.list_sessions()

    def new_session(self, session_id: Optional[str] = None) -> str:
        """Creates a session and returns its id. The id is made here when not given, so that a
        load balancer routes the creation to the node every later call of it reaches."""
        return self._transport.new_session(session_id or _new_session_id())

    def export_session(self, session_id: str) -> bytes:
        """The session's files as a tar archive, to move it to another node."""
        return self._transport.export_session(session_id)

    def import_session(self, session_id: str, archive: bytes) -> Dict[str, Any]:
        """Makes session_id (which must not exist) from an archive made by export_session;
        behind a balancer it lands on the node that owns session_id. Returns {"session_id",
        "files", "bytes"}."""
        return self._transport.import_session(session_id, bytes(archive))

    def close_session(self, session_id: str) -> None:
        """Stops what runs in the session and removes it with its files."""
        self._transport.close_session(session_id)

    def upload(self, session_id: str, path: str, data: bytes) -> None:
        self._transport.upload(session_id, path, bytes(data))

    def download(self, session_id: str, path: str) -> bytes:
        return self._transport.download(session_id, path)

    def list_files(self, session_id: str) -> List[Dict[str, Any]]:
        return self._transport.list_files(session_id)

    def restart_session(self, session_id: str, language: Optional[str] = None) -> None:
        """Stops the session's live interpreters (of one language): its next stateful call
        starts afresh. Its files stay."""
        self._transport.restart_session(session_id, language)

    def session(self, session_id: Optional[str] = None, stateful: bool = False) -> "Session":
        return Session(client=self, session_id=session_id, stateful=stateful)


def _new_session_id() -> str:
    return "session-" + secrets.token_hex(12)


def _destinations(egress_allow: Optional[Sequence[str]]) -> Optional[List[str]]:
    """A list, kept apart from None: [] means nothing is reachable. A lone string would be
    taken letter by letter: it is refused instead."""
    if egress_allow is None:
        return None
    if isinstance(egress_allow, (str, bytes)):
        raise TypeError("egress_allow must be a list of destinations, e.g. ['pypi.org'], "
                        f"not {type(egress_allow).__name__}")
    return list(egress_allow)


class Session:
    """A session that removes itself on exit:

        with runbox.Session() as s:
            s.upload("data.csv", b"a,b\\n1,2\\n")
            s.python("import pandas as pd; print(pd.read_csv('data.csv'))")

    With stateful=True its calls share a live interpreter per language:

        with runbox.Session(stateful=True) as s:
            s.python("import pandas as pd; df = pd.read_csv('data.csv')")
            s.python("df.describe()")["results"]    # the table, as text/plain and text/html
    """

    def __init__(self, session_id: Optional[str] = None, *, client: Optional[Client] = None,
                 stateful: bool = False, **client_options: Any):
        self.client = client or Client(**client_options)
        self.id = session_id or self.client.new_session()
        self.stateful = stateful

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.client.close_session(self.id)

    def python(self, code: str, **options: Any) -> Result:
        options.setdefault("stateful", self.stateful)
        return self.client.execute("python", code, session_id=self.id, **options)

    def javascript(self, code: str, **options: Any) -> Result:
        options.setdefault("stateful", self.stateful)
        return self.client.execute("javascript", code, session_id=self.id, **options)

    def typescript(self, code: str, **options: Any) -> Result:
        options.setdefault("stateful", self.stateful)
        return self.client.execute("typescript", code, session_id=self.id, **options)

    def bash(self, command: str, **options: Any) -> Result:
        options.setdefault("stateful", self.stateful)
        return self.client.execute("bash", command, session_id=self.id, **options)

    def restart(self, language: Optional[str] = None) -> None:
        self.client.restart_session(self.id, language)

    def upload(self, path: str, data: bytes) -> None:
        self.client.upload(self.id, path, data)

    def download(self, path: str) -> bytes:
        return self.client.download(self.id, path)

    def files(self) -> List[Dict[str, Any]]:
        return self.client.list_files(self.id)
