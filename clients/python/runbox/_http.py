"""The HTTP transport: talks to `runbox serve` with the standard library only."""
import http.client
import json
import socket
import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .errors import (AuthenticationError, NodeUnavailable, NotFound, QueueFull, RequestRejected,
                     RunboxError, RunboxUnavailable)

# Where a load balancer finds the session without reading the body (deploy/): sent with every
# request that belongs to a session.
SESSION_HEADER = "X-Runbox-Session"

OutputCallback = Callable[[str, str], None]


class HttpTransport:
    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 600.0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise RunboxError(f"not an http(s) URL: {url!r}")
        self.scheme = parsed.scheme
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.prefix = parsed.path.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def _send(self, method: str, path: str, body: Optional[bytes] = None,
              headers: Optional[Dict[str, str]] = None,
              session: Optional[str] = None) -> Tuple[http.client.HTTPConnection,
                                                      http.client.HTTPResponse]:
        conn = self._connection()
        all_headers = dict(headers or {})
        if session is not None:
            all_headers[SESSION_HEADER] = session
        if self.token:
            all_headers["Authorization"] = f"Bearer {self.token}"
        try:
            conn.request(method, self.prefix + path, body=body, headers=all_headers)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise RunboxUnavailable(f"cannot reach runbox at {self.scheme}://{self.host}:"
                                    f"{self.port}: {e}") from e
        if response.status >= 400:
            data = response.read()
            conn.close()
            raise _error_for(response, data)
        return conn, response

    def request(self, method: str, path: str, payload: Any = None, raw: Optional[bytes] = None,
                session: Optional[str] = None) -> bytes:
        headers = {}
        body = raw
        if payload is not None:
            body = json.dumps(payload).encode()
            headers["Content-Type"] = "application/json"
        elif raw is not None:
            headers["Content-Type"] = "application/octet-stream"
        conn, response = self._send(method, path, body, headers, session)
        try:
            return response.read()
        finally:
            conn.close()

    def execute(self, body: Dict[str, Any], on_output: Optional[OutputCallback]) -> Dict[str, Any]:
        session = body.get("session_id")
        if on_output is None:
            return json.loads(self.request("POST", "/v1/execute", body, session=session))
        body = dict(body, stream=True)
        headers = {"Content-Type": "application/json", "Accept": "application/x-ndjson"}
        conn, response = self._send("POST", "/v1/execute", json.dumps(body).encode(), headers,
                                    session)
        try:
            for event in _events(response):
                if event.get("type") == "result":
                    event.pop("type")
                    return event
                on_output(event["type"], event.get("data", ""))
        finally:
            conn.close()
        raise RunboxError("the stream ended without a result")

    def list_sessions(self) -> List[Dict[str, Any]]:
        return json.loads(self.request("GET", "/v1/sessions"))["sessions"]

    def new_session(self, session_id: str) -> str:
        return json.loads(self.request("POST", "/v1/sessions", {"session_id": session_id},
                                       session=session_id))["session_id"]

    def close_session(self, session_id: str) -> None:
        self.request("DELETE", f"/v1/sessions/{_quote(session_id)}", session=session_id)

    def restart_session(self, session_id: str, language: Optional[str]) -> None:
        query = f"?language={_quote(language)}" if language else ""
        self.request("POST", f"/v1/sessions/{_quote(session_id)}/restart{query}",
                     session=session_id)

    def upload(self, session_id: str, path: str, data: bytes) -> None:
        self.request("PUT", f"/v1/sessions/{_quote(session_id)}/files/{_quote_path(path)}",
                     raw=data, session=session_id)

    def download(self, session_id: str, path: str) -> bytes:
        return self.request("GET", f"/v1/sessions/{_quote(session_id)}/files/{_quote_path(path)}",
                            session=session_id)

    def list_files(self, session_id: str) -> List[Dict[str, Any]]:
        return json.loads(self.request("GET", f"/v1/sessions/{_quote(session_id)}/files",
                                       session=session_id))["files"]

    def export_session(self, session_id: str) -> bytes:
        return self.request("GET", f"/v1/sessions/{_quote(session_id)}/export", session=session_id)

    def import_session(self, session_id: str, archive: bytes) -> Dict[str, Any]:
        return json.loads(self.request("POST", f"/v1/sessions/{_quote(session_id)}/import",
                                       raw=archive, session=session_id))


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _quote_path(path: str) -> str:
    return "/".join(_quote(p) for p in path.split("/"))


def _events(response: http.client.HTTPResponse) -> Iterator[Dict[str, Any]]:
    """Newline-delimited JSON events, each as soon as its line arrives."""
    while True:
        line = response.readline()
        if not line:
            return
        line = line.strip()
        if line:
            yield json.loads(line)


def _error_for(response: http.client.HTTPResponse, data: bytes) -> RunboxError:
    try:
        error = json.loads(data)["error"]
        message, code = error.get("message", ""), error.get("code")
    except (ValueError, KeyError, TypeError):
        message, code = data.decode(errors="replace")[:500], None
    status = response.status
    # A load balancer in front (deploy/) answers for a node that is down: with its JSON error
    # (node_unavailable), or with its own page where it was not configured to.
    if code == "node_unavailable" or (status in (502, 504) and code is None):
        session = error.get("session_id") if code == "node_unavailable" else None
        return NodeUnavailable(message or f"the runbox node is unavailable (HTTP {status})",
                               session_id=session, status=status, code=code or "node_unavailable")
    if status == 401:
        return AuthenticationError(message or "authentication required", status=status, code=code)
    if status == 429:
        retry = response.getheader("Retry-After") or "1"
        try:
            seconds = float(retry)
        except ValueError:
            seconds = 1.0
        return QueueFull(message or "runbox is busy", retry_after=seconds, status=status, code=code)
    if status == 404:
        return NotFound(message, status=status, code=code)
    if status < 500:
        return RequestRejected(message, status=status, code=code)
    return RunboxError(message or f"runbox failed with HTTP {status}", status=status, code=code)
