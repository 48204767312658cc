"""The telemetry the call pipeline, the REST client, the health monitor and plugins record
into.

:data:`OFF` is what a gateway without telemetry holds: every method returns a shared object
whose methods do nothing, so the pipeline calls the same code either way and pays a method
call. Only :func:`gateway.telemetry.sdk.build_telemetry` imports the OpenTelemetry SDK, and the
API is imported only by a telemetry that records: with telemetry off, a gateway that serves no
MCP (``mcp-gateway call``, ``health``) never loads OpenTelemetry at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import names as n
from .scopes import (
    NO_CALL,
    NO_REQUEST,
    NO_STATEMENT,
    CallTrace,
    Clean,
    Operation,
    RequestTrace,
    StatementTrace,
)

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter
    from opentelemetry.trace import Span, Tracer

    from ..errors import Sanitizer


log = logging.getLogger("gateway.telemetry")

#: The telemetry of the request being served, for code without a reference of its own.
ACTIVE: ContextVar[Telemetry | None] = ContextVar("mcp_gateway_telemetry", default=None)


def current() -> Telemetry:
    """The telemetry of the call running in this task, or :data:`OFF` outside calls. For code
    that has no reference of its own, such as a plugin's database layer."""
    return ACTIVE.get() or OFF


@dataclass(frozen=True)
class Recorders:
    """The scopes a recording telemetry hands out (:mod:`gateway.telemetry.recording`). Given by
    :func:`gateway.telemetry.sdk.build_telemetry`, not imported here: they import OpenTelemetry,
    and they build on this module."""

    tool_call: Callable[[Telemetry, str], CallTrace]
    backend_request: Callable[[Telemetry, str, str, str | None, str | None, int], RequestTrace]
    db_statement: Callable[[Telemetry, str, str], StatementTrace]


class Telemetry:
    """The gateway's tracer, meter and instruments; see :data:`OFF`.

    Built by :func:`gateway.telemetry.sdk.build_telemetry`; tests pass their own
    in-memory exporter and reader there.
    """

    def __init__(
        self,
        tracer: Tracer | None = None,
        meter: Meter | None = None,
        sanitizer: Sanitizer | None = None,
        *,
        recorders: Recorders | None = None,
        shutdown: Callable[[], None] | None = None,
        flush: Callable[[], None] | None = None,
    ) -> None:
        self.enabled = (tracer is not None or meter is not None) and sanitizer is not None
        self._shutdown = shutdown
        self._flush = flush
        if not self.enabled:
            return
        assert sanitizer is not None
        if recorders is None:
            raise TypeError("a recording Telemetry needs its recorders (see build_telemetry)")
        from opentelemetry import trace

        self._recorders = recorders
        self._current_span: Callable[[], Span] = trace.get_current_span
        self.tracer: Tracer = tracer or trace.NoOpTracer()
        self.clean = Clean(sanitizer)
        if meter is None:
            from opentelemetry.metrics import NoOpMeter

            meter = NoOpMeter("mcp-gateway")
        self.operation_duration = meter.create_histogram(
            n.OPERATION_DURATION,
            unit="s",
            description="MCP request duration as observed on the gateway, from receiving the "
            "request to sending the result",
            explicit_bucket_boundaries_advisory=n.OPERATION_BUCKETS,
        )
        self.backend_duration = meter.create_histogram(
            n.BACKEND_DURATION,
            unit="s",
            description="Duration of the gateway's HTTP requests to its backends",
            explicit_bucket_boundaries_advisory=n.HTTP_BUCKETS,
        )
        self.breaker_transitions = meter.create_counter(
            n.BREAKER_TRANSITIONS,
            unit="{transition}",
            description="Circuit breaker state changes, by backend and new state",
        )
        self.calls_refused = meter.create_counter(
            n.CALLS_REFUSED,
            unit="{call}",
            description="Tool calls the deployment policy refused, by reason",
        )

    # --- tool calls ------------------------------------------------------------------------

    def tool_call(self, name: str) -> CallTrace:
        """Around one pipeline call. Inside the server middleware's ``tools/call`` span it adds
        to that span; otherwise (``mcp-gateway call``, ``Gateway.call``) it opens its own."""
        if not self.enabled:
            return NO_CALL
        return self._recorders.tool_call(self, name)

    def record_operation(self, op: Operation, transport: str | None = None) -> None:
        attrs: dict[str, str] = {n.MCP_METHOD: op.method, **op.metric}
        if op.tool is not None:
            attrs[n.GEN_AI_TOOL] = op.tool
            attrs[n.GEN_AI_OPERATION] = "execute_tool"
        if op.error_type is not None:
            attrs[n.ERROR_TYPE] = op.error_type
        if transport is not None:
            attrs[n.NETWORK_TRANSPORT] = transport
        self.operation_duration.record(time.perf_counter() - op.started, attrs)

    # --- backends --------------------------------------------------------------------------

    def backend_request(
        self,
        backend: str,
        method: str,
        route: str | None,
        *,
        url: str | None = None,
        attempt: int = 0,
    ) -> RequestTrace:
        """Around one HTTP request to a backend. ``route`` is the path *template*
        (``/api/jobs/{job_id}``), or ``None`` when there is none: never the filled path, whose
        values (ids, names) would make every request a series of its own. ``url`` is the
        backend's base URL, of which only host and port are kept. Query values and bodies are
        never recorded."""
        if not self.enabled:
            return NO_REQUEST
        return self._recorders.backend_request(self, backend, method, route, url, attempt)

    def db_statement(self, sql: str, *, system: str = "sqlite") -> StatementTrace:
        """Around one SQL statement: its kind and table name are recorded, never its text."""
        if not self.enabled:
            return NO_STATEMENT
        return self._recorders.db_statement(self, sql, system)

    def breaker_changed(self, backend: str, previous: str, state: str) -> None:
        """A circuit breaker moved from ``previous`` to ``state``."""
        if not self.enabled:
            return
        name = self.clean.name(backend)
        self.breaker_transitions.add(
            1, {n.BACKEND: name, n.BREAKER_STATE: state, n.BREAKER_PREVIOUS: previous}
        )
        span = self._current_span()
        if span.is_recording():
            span.add_event(
                "mcp_gateway.breaker.transition",
                {n.BACKEND: name, n.BREAKER_STATE: state, n.BREAKER_PREVIOUS: previous},
            )

    # --- life cycle --------------------------------------------------------------------------

    def flush(self) -> None:
        if self._flush is not None:
            self._flush()

    def shutdown(self, timeout: float | None = None) -> None:
        """Export what is pending and stop the exporters (at gateway stop; idempotent).

        With ``timeout``, returns after that many seconds at most: an unreachable collector
        keeps the OTLP exporters retrying for 15 s, longer than a client waits for a server
        to exit. What is not sent by then is dropped (the exporting thread is a daemon)."""
        stop, self._shutdown = self._shutdown, None
        if stop is None:
            return
        if timeout is None:
            _logged(stop)
            return
        worker = threading.Thread(
            target=_logged, args=(stop,), name="mcp-gateway-telemetry-stop", daemon=True
        )
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            log.warning(
                "telemetry: the exporters did not finish within %g s; stopped anyway", timeout
            )


def _logged(stop: Callable[[], None]) -> None:
    try:
        stop()
    except Exception as exc:  # an exporter's failure must not stop the gateway's shut-down
        log.warning("telemetry: stopping the exporters failed: %s", type(exc).__name__)


#: A gateway without telemetry.
OFF = Telemetry()
