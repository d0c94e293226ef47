"""runbox: run Python, JavaScript and Bash code in sandboxes, as AI agents call it.

    from runbox import execute_python, execute_javascript, execute_typescript, execute_bash

    result = execute_python(code="print('Hello, World!')", timeout=30, session_id="session_123")
    assert result["success"] and result["exit_code"] == 0

With $RUNBOX_URL set (or url=...), calls go to `runbox serve`; otherwise to the local `runbox`
executable. The code's own failures are results; runbox failing or refusing raises RunboxError.
"""
from typing import Any, Dict, List, Optional, Sequence

from .client import Client, OutputCallback, Result, Session
from .errors import (AuthenticationError, NodeUnavailable, NotFound, QueueFull, RequestRejected,
                     RunboxError, RunboxUnavailable)

__all__ = ["execute_python", "execute_javascript", "execute_typescript", "execute_bash",
           "list_sessions", "close_session", "Client", "Session", "RunboxError", "RunboxUnavailable",
           "NodeUnavailable", "AuthenticationError", "RequestRejected", "NotFound", "QueueFull"]
__version__ = "0.1.0"


def _client(url: Optional[str], token: Optional[str], retries: int) -> Client:
    return Client(url, token, retries=retries)


def execute_python(code: str, timeout: Optional[float] = None, session_id: Optional[str] = None,
                   requirements: Optional[Sequence[str]] = None, *, url: Optional[str] = None,
                   token: Optional[str] = None, retries: int = 0, **options: Any) -> Result:
    """Runs Python code. options: memory_mb, cpus, network, egress_allow, env, stdin, on_output."""
    return _client(url, token, retries).execute_python(code, timeout, session_id, requirements,
                                                       **options)


def execute_javascript(code: str, timeout: Optional[float] = None,
                       session_id: Optional[str] = None,
                       requirements: Optional[Sequence[str]] = None, *, url: Optional[str] = None,
                       token: Optional[str] = None, retries: int = 0, **options: Any) -> Result:
    """Runs JavaScript (Node.js) code. options: memory_mb, cpus, network, egress_allow, env, stdin, on_output."""
    return _client(url, token, retries).execute_javascript(code, timeout, session_id,
                                                           requirements, **options)


def execute_typescript(code: str, timeout: Optional[float] = None,
                       session_id: Optional[str] = None,
                       requirements: Optional[Sequence[str]] = None, *, url: Optional[str] = None,
                       token: Optional[str] = None, retries: int = 0, **options: Any) -> Result:
    """Runs TypeScript (types stripped, not checked; then as JavaScript). options: as above."""
    return _client(url, token, retries).execute_typescript(code, timeout, session_id,
                                                           requirements, **options)


def execute_bash(command: str, timeout: Optional[float] = None, session_id: Optional[str] = None,
                 *, url: Optional[str] = None, token: Optional[str] = None, retries: int = 0,
                 **options: Any) -> Result:
    """Runs a Bash command. options: memory_mb, cpus, network, egress_allow, env, stdin, on_output."""
    return _client(url, token, retries).execute_bash(command, timeout, session_id, **options)


def list_sessions(*, url: Optional[str] = None, token: Optional[str] = None) -> List[Dict[str, Any]]:
    return _client(url, token, 0).list_sessions()


def close_session(session_id: str, *, url: Optional[str] = None,
                  token: Optional[str] = None) -> None:
    _client(url, token, 0).close_session(session_id)
