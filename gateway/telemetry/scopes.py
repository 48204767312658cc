"""What the pipeline, the REST client and plugins hold while a call, a backend request or a
SQL statement runs: the no-op classes a gateway without telemetry hands out, and the state
shared with the recording ones (:mod:`gateway.telemetry.recording`).

Nothing here imports OpenTelemetry: a gateway with telemetry off never loads it.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from ..errors import GatewayError

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from ..errors import Sanitizer

_MAX_NAME = 200
_MAX_INPUT = 4096  # cut client input before redacting: a JWT keeps its shape in 4 KB
_CACHE_SIZE = 2048


class Clean:
    """Attribute values through the sanitizer. Low-cardinality names are cached: the
    sanitizer's regexes cost 5-70 µs a string, a dictionary hit well under one."""

    def __init__(self, sanitizer: Sanitizer) -> None:
        self._sanitizer = sanitizer
        self._names: dict[str, str] = {}

    def name(self, value: str) -> str:
        """A tool, plugin, backend, route or method name: credentials removed, cached."""
        hit = self._names.get(value)
        if hit is None:
            if len(self._names) >= _CACHE_SIZE:
                self._names.clear()
            hit = self._names[value] = self.value(value)
        return hit

    def value(self, value: str) -> str:
        """An id or other value of high cardinality: credentials removed."""
        return self._sanitizer.redact_secrets(value[:_MAX_INPUT])[:_MAX_NAME]


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class Operation:
    """One MCP request being served: its span and what its metric point will say."""

    span: Span
    method: str
    started: float
    tool: str | None = None
    error_type: str | None = None
    metric: dict[str, str] = field(default_factory=dict)
    claimed: bool = False


#: The request the server middleware (or a standalone tool call) is serving now.
CURRENT_OPERATION: ContextVar[Operation | None] = ContextVar("mcp_gateway_operation", default=None)


class _Scope:
    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class CallTrace(_Scope):
    """One tool call as the pipeline reports it. This base class records nothing (off)."""

    __slots__ = ()

    def describe(
        self, tool: str, *, plugin: str, tier: str, timeout: float | None, backend: str | None
    ) -> None:
        """The call is of a registered tool: name the span after it, say whose it is."""

    def breaker(self, state: str) -> None:
        """The state of the tool's backend breaker when the call reached it."""

    def refused(self, reason: str) -> None:
        """The gateway refused the call (``unknown_tool``, ``denied``, ``read_only``, …)."""

    def finish(self, error_code: str | None, *, correlation_id: str | None = None) -> None:
        """The outcome: ``error_code`` is the gateway's code (``TIMEOUT``…), ``None`` for OK;
        it is also the span's status description (never the message)."""


class RequestTrace(_Scope):
    """One backend HTTP request; this base class records nothing (off)."""

    __slots__ = ()

    def status(self, code: int) -> None:
        """The answer's status (an answer of 400 or more is this request's error)."""

    def fail(self, error_type: str) -> None:
        """No usable answer: the gateway's code for it (``TIMEOUT``, ``BACKEND_UNAVAILABLE``)."""


class StatementTrace(_Scope):
    """One SQLite statement; this base class records nothing (off)."""

    __slots__ = ()

    def rows(self, count: int) -> None:
        """How many rows the statement returned."""


NO_CALL = CallTrace()
NO_REQUEST = RequestTrace()
NO_STATEMENT = StatementTrace()


def error_type_of(exc: BaseException) -> str:
    """A low-cardinality name for what ended a span: the gateway's code, else the class."""
    if isinstance(exc, GatewayError):
        return exc.code.value
    name = getattr(exc, "sqlite_errorname", None)
    if isinstance(name, str) and name:
        return name
    return type(exc).__qualname__
