"""Exceptions of HTTP client libraries as structured errors, without importing them.

For plugins that call ``httpx`` themselves (the REST kit maps its own answers): used by the
call pipeline and the health checks.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from .errors import ErrorCode, GatewayError
from .rest.status import Failure, status_error


@dataclass
class CallState:
    """What the pipeline learns about one running call from the code it runs."""

    cancelled_waiting_on: str | None = None


CURRENT_CALL: ContextVar[CallState | None] = ContextVar("gateway_current_call", default=None)


def note_cancelled_waiting(backend: str) -> None:
    """The running call was cancelled while waiting for ``backend`` to answer: if that was the
    tool's timeout, the backend did not answer in time (it counts for its breaker)."""
    state = CURRENT_CALL.get()
    if state is not None:
        state.cancelled_waiting_on = backend


def classify_exception(exc: BaseException) -> GatewayError | None:
    """Map well-known transport exceptions to structured errors without importing httpx.

    For plugins that call ``httpx`` themselves (the REST kit maps its own): refused, dropped or
    timed-out connections mean the backend is down; an ``HTTPStatusError`` is mapped by status,
    like the kit's answers (a 404 is not worth retrying, a 503 is).
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    module = type(exc).__module__.split(".")[0]
    if module in {"httpx", "httpcore", "httpx2"}:
        if names & {"ConnectTimeout", "PoolTimeout"}:
            return GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                "the backend did not accept a connection in time",
                backend_down=True,
            )
        if names & {"TimeoutException"}:
            return GatewayError(
                ErrorCode.TIMEOUT, "the backend did not answer in time", backend_down=True
            )
        if names & {"ConnectError", "NetworkError"}:
            return GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                "the backend refused or dropped the connection",
                backend_down=True,
            )
        if "HTTPStatusError" in names:
            response = getattr(exc, "response", None)
            status = getattr(response, "status_code", 0)
            if isinstance(status, int) and status >= 300:
                err = status_error(Failure(status, "", "this request", "the backend"))
                if isinstance(err, GatewayError):
                    return err
            return GatewayError(ErrorCode.BACKEND_ERROR, "the backend answered an error status")
        if names & {"RemoteProtocolError", "DecodingError", "TransportError"}:
            return GatewayError(ErrorCode.BACKEND_ERROR, "the backend sent a malformed response")
    if isinstance(exc, ConnectionError):
        return GatewayError(
            ErrorCode.BACKEND_UNAVAILABLE,
            "the backend refused or dropped the connection",
            backend_down=True,
        )
    return None
