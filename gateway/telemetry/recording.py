"""The recording side of :mod:`gateway.telemetry.scopes`: spans and metric points for a tool
call, a backend request and a SQL statement. Imported only when telemetry is on.

Every attribute value passes the gateway's sanitizer: names (tools, plugins, backends, routes,
ids) lose any credential, free text (error messages) gets the full treatment. Tool names the
registry does not know never name a span or a metric series (they are client input).
"""

from __future__ import annotations

import re
import time
from contextvars import Token
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from . import names as n
from .core import ACTIVE, Recorders, Telemetry
from .scopes import (
    CURRENT_OPERATION,
    CallTrace,
    Operation,
    RequestTrace,
    StatementTrace,
    error_type_of,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span

_SQL_KIND = re.compile(r"\s*(\w+)")
_SQL_TABLE = re.compile(r"(?is)\b(?:FROM|INTO|UPDATE|TABLE)\s+[\"'`\[]?(\w{1,64})")
_SQL_KINDS = frozenset(
    {
        *("SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH", "PRAGMA"),
        *("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"),
        *("CREATE", "DROP", "ALTER", "VACUUM", "ANALYZE", "REINDEX", "ATTACH", "DETACH"),
    }
)


class ToolCall(CallTrace):
    __slots__ = ("_op", "_own", "_span_cm", "_t", "_tokens")

    def __init__(self, telemetry: Telemetry, name: str) -> None:
        self._t = telemetry
        op = CURRENT_OPERATION.get()
        self._own = op is None or op.method != "tools/call" or op.claimed
        if not self._own:
            assert op is not None
            op.claimed = True
            self._op = op
            return
        attrs = {
            n.MCP_METHOD: "tools/call",
            n.GEN_AI_OPERATION: "execute_tool",
            n.GEN_AI_TOOL: telemetry.clean.value(str(name)),
        }
        self._span_cm = telemetry.tracer.start_as_current_span(
            "tools/call",
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._op = Operation(trace.INVALID_SPAN, "tools/call", time.perf_counter())

    def __enter__(self) -> Self:
        if self._own:
            self._op.span = self._span_cm.__enter__()
            self._tokens: tuple[Token[Any], ...] = (
                CURRENT_OPERATION.set(self._op),
                ACTIVE.set(self._t),
            )
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._own:
            return
        op = self._op
        if exc[0] is not None and op.error_type is None:
            op.error_type = error_type_of(exc[1])
            op.span.set_attribute(n.ERROR_TYPE, op.error_type)
            op.span.set_status(StatusCode.ERROR)
        CURRENT_OPERATION.reset(self._tokens[0])
        ACTIVE.reset(self._tokens[1])
        self._span_cm.__exit__(*exc)
        self._t.record_operation(op)

    def describe(
        self, tool: str, *, plugin: str, tier: str, timeout: float | None, backend: str | None
    ) -> None:
        clean = self._t.clean
        op = self._op
        op.tool = clean.name(tool)
        op.metric[n.PLUGIN] = clean.name(plugin)
        op.metric[n.TIER] = clean.name(tier)
        span = op.span
        if not span.is_recording():
            return
        span.update_name(f"tools/call {op.tool}")
        span.set_attribute(n.GEN_AI_TOOL, op.tool)
        span.set_attribute(n.PLUGIN, op.metric[n.PLUGIN])
        span.set_attribute(n.TIER, op.metric[n.TIER])
        if timeout is not None:
            span.set_attribute(n.TIMEOUT, float(timeout))
        if backend:
            span.set_attribute(n.BACKEND, clean.name(backend))

    def breaker(self, state: str) -> None:
        self._op.span.set_attribute(n.BREAKER_STATE, self._t.clean.name(state))

    def refused(self, reason: str) -> None:
        op = self._op
        why = self._t.clean.name(reason)
        attrs = {n.REFUSAL: why, **({n.GEN_AI_TOOL: op.tool} if op.tool else {})}
        self._t.calls_refused.add(1, attrs)
        op.span.set_attribute(n.REFUSAL, why)

    def finish(self, error_code: str | None, *, correlation_id: str | None = None) -> None:
        op = self._op
        span = op.span
        if correlation_id and span.is_recording():
            span.set_attribute(n.CORRELATION_ID, self._t.clean.value(correlation_id))
        if error_code is None:
            return
        op.error_type = self._t.clean.name(error_code)
        span.set_attribute(n.ERROR_TYPE, op.error_type)
        if span.is_recording():
            # The code, not the message: a backend's words (hosts, names, ids) have no place
            # in a trace store that keeps them longer, and more people read, than the client.
            span.set_status(StatusCode.ERROR, op.error_type)


class BackendRequest(RequestTrace):
    __slots__ = ("_attrs", "_code", "_error", "_span", "_span_cm", "_started", "_t")

    def __init__(
        self,
        telemetry: Telemetry,
        backend: str,
        method: str,
        route: str | None,
        url: str | None,
        attempt: int,
    ) -> None:
        clean = telemetry.clean
        verb = method.upper() if method.upper() in n.HTTP_METHODS else n.OTHER
        attrs: dict[str, Any] = {n.HTTP_METHOD: verb, n.BACKEND: clean.name(backend)}
        if route is not None:
            attrs[n.URL_TEMPLATE] = clean.name(route)
        if url:
            parts = urlsplit(url)  # host and port only: no userinfo, path or query
            if parts.hostname:
                attrs[n.SERVER_ADDRESS] = clean.name(parts.hostname)
                port = parts.port or (443 if parts.scheme == "https" else 80)
                attrs[n.SERVER_PORT] = port
        self._t = telemetry
        self._attrs = attrs
        span_attrs = {**attrs, n.HTTP_RESEND: attempt} if attempt else attrs
        self._span_cm = telemetry.tracer.start_as_current_span(
            f"{verb} {attrs[n.URL_TEMPLATE]}" if route is not None else verb,
            kind=SpanKind.CLIENT,
            attributes=span_attrs,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._code: int | None = None
        self._error: str | None = None

    def __enter__(self) -> Self:
        self._span: Span = self._span_cm.__enter__()
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        elapsed = time.perf_counter() - self._started
        if exc[0] is not None and self._error is None and self._code is None:
            self._error = error_type_of(exc[1])
        attrs = dict(self._attrs)
        span = self._span
        if self._code is not None:
            attrs[n.HTTP_STATUS] = self._code
            span.set_attribute(n.HTTP_STATUS, self._code)
            if self._code >= 400 and self._error is None:
                self._error = str(self._code)
        if self._error is not None:
            attrs[n.ERROR_TYPE] = self._error
            span.set_attribute(n.ERROR_TYPE, self._error)
            span.set_status(StatusCode.ERROR)
        self._span_cm.__exit__(*exc)
        self._t.backend_duration.record(elapsed, attrs)

    def status(self, code: int) -> None:
        self._code = int(code)

    def fail(self, error_type: str) -> None:
        self._error = self._t.clean.name(error_type)


class Statement(StatementTrace):
    __slots__ = ("_span", "_span_cm")

    def __init__(self, telemetry: Telemetry, sql: str, system: str) -> None:
        match = _SQL_KIND.match(sql)
        kind = match.group(1).upper() if match else ""
        kind = kind if kind in _SQL_KINDS else n.OTHER
        attrs: dict[str, Any] = {n.DB_SYSTEM: system, n.DB_OPERATION: kind}
        table = _SQL_TABLE.search(sql[:2000]) if kind not in ("BEGIN", "COMMIT") else None
        if table:
            attrs[n.DB_COLLECTION] = telemetry.clean.name(table.group(1))
        name = f"{kind} {attrs[n.DB_COLLECTION]}" if table else kind
        self._span_cm = telemetry.tracer.start_as_current_span(
            name,
            kind=SpanKind.CLIENT,
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        )

    def __enter__(self) -> Self:
        self._span: Span = self._span_cm.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None:
            self._span.set_attribute(n.ERROR_TYPE, error_type_of(exc[1]))
            self._span.set_status(StatusCode.ERROR)
        self._span_cm.__exit__(*exc)

    def rows(self, count: int) -> None:
        self._span.set_attribute(n.DB_ROWS, int(count))


#: What :func:`gateway.telemetry.sdk.build_telemetry` gives the telemetry it builds.
RECORDERS = Recorders(tool_call=ToolCall, backend_request=BackendRequest, db_statement=Statement)
