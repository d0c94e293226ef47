"""Exceptions: runbox itself failing or refusing. The code's own failures are results."""
from typing import Optional


class RunboxError(Exception):
    """Base class: something went wrong talking to runbox (not in the code it ran)."""

    def __init__(self, message: str, status: Optional[int] = None, code: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.status = status  # HTTP status, or the local executable's exit code
        self.code = code      # the server's error code, e.g. "invalid_request"


class RunboxUnavailable(RunboxError):
    """runbox could not be reached: no server at the URL, or no runbox executable."""


class NodeUnavailable(RunboxUnavailable):
    """Behind a load balancer: the runbox node that holds this session is down (the balancer
    said so). The session's files and kernel are on that node: retrying elsewhere would find an
    empty session, so this is not retried; other sessions are unaffected. session_id names it
    when the balancer said which."""

    def __init__(self, message: str, session_id: Optional[str] = None, **kwargs):
        super().__init__(message, **kwargs)
        self.session_id = session_id


class AuthenticationError(RunboxError):
    """The server wants a bearer token, or refused the one given (HTTP 401)."""


class RequestRejected(RunboxError):
    """runbox refused the request (a bad language, session id, spec, ...): the message says why."""


class NotFound(RequestRejected):
    """The session or file does not exist."""


class QueueFull(RunboxError):
    """Too many executions at once (HTTP 429); retry_after is the server's hint in seconds."""

    def __init__(self, message: str, retry_after: float = 1.0, **kwargs):
        super().__init__(message, **kwargs)
        self.retry_after = retry_after
