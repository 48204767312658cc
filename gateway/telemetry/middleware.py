"""The server span of every MCP request, in place of the SDK's own ``OpenTelemetryMiddleware``.

The ``mcp`` SDK opens a server span per request by default. The gateway replaces it rather
than nesting under it, because that span (a) is named after, and records, whatever tool or
prompt name the client sent, unchecked and unredacted: unbounded span names, and a secret
pasted into a name lands in the trace; (b) sets ``error.type = tool_error`` on every error
result, overwriting the gateway's code (``TIMEOUT``, ``BACKEND_UNAVAILABLE`` …); (c) records
the exception text and traceback of unexpected errors (absolute paths); (d) goes to the global
tracer provider, and records no metrics. With telemetry off the SDK's span is removed too, so
an OpenTelemetry set up by someone else (``opentelemetry-instrument``) cannot record those.

Like the SDK's, this span continues the ``traceparent`` a client puts in ``params._meta``;
over HTTP, a ``traceparent`` header is continued when ``_meta`` carries none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import ValidationError

from . import names as n
from .core import ACTIVE, Telemetry
from .scopes import CURRENT_OPERATION, Clean, Operation

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

_INVALID_PARAMS = "-32602"


def parent_context(meta: Mapping[str, Any] | None) -> Context | None:
    """The client's trace context from ``params._meta`` (``traceparent``, ``tracestate``,
    ``baggage``), or ``None`` when it sent none or a malformed one."""
    if not meta:
        return None
    try:
        ctx = propagate.extract(meta)
    except (TypeError, ValueError):
        return None
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def _is_error_result(result: Any) -> bool:
    if isinstance(result, dict):
        return result.get("isError") is True
    return getattr(result, "is_error", None) is True


def server_middleware(
    telemetry: Telemetry,
    known_tool: Callable[[str], bool],
    known_prompt: Callable[[str], bool] | None = None,
) -> ServerMiddleware[Any]:
    """A ``Server.middleware`` entry opening one SERVER span per request and recording
    ``mcp.server.operation.duration``. ``known_tool`` / ``known_prompt`` say whether a name
    the client sent is one the gateway offers: only those name spans and metric series."""
    from mcp import MCPError

    clean = telemetry.clean
    tracer = telemetry.tracer

    async def observe(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method if ctx.method in n.KNOWN_METHODS else n.OTHER
        attrs, target = _attributes(ctx, method, clean, known_tool, known_prompt)
        transport = attrs[n.NETWORK_TRANSPORT]
        with tracer.start_as_current_span(
            f"{method} {target}" if target else method,
            context=_parent(ctx),
            kind=SpanKind.SERVER,
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            op = Operation(span, method, time.perf_counter())
            if method == "tools/call":
                op.tool = target
            elif target is not None:
                op.metric[n.GEN_AI_PROMPT] = target
            op_token = CURRENT_OPERATION.set(op)
            active_token = ACTIVE.set(telemetry)
            try:
                result = await call_next(ctx)
                # The pipeline states its own code; a call it did not describe still counts.
                if method == "tools/call" and not op.claimed and _is_error_result(result):
                    _fail(op, "tool_error")
                return result
            except MCPError as exc:
                code = str(exc.error.code)
                _fail(op, code)
                span.set_attribute(n.RPC_STATUS_CODE, code)
                raise
            except ValidationError:
                _fail(op, _INVALID_PARAMS)
                span.set_attribute(n.RPC_STATUS_CODE, _INVALID_PARAMS)
                raise
            except BaseException as exc:
                _fail(op, type(exc).__qualname__)
                raise
            finally:
                CURRENT_OPERATION.reset(op_token)
                ACTIVE.reset(active_token)
                telemetry.record_operation(op, transport)

    return observe


def _parent(ctx: ServerRequestContext[Any, Any]) -> Context | None:
    """The client's trace context from params._meta; over HTTP, else from the request's
    headers (what an HTTP client instrumented with OpenTelemetry sends by itself)."""
    parent = parent_context(ctx.meta)
    headers = getattr(ctx.request, "headers", None)
    if parent is None and headers is not None:
        parent = parent_context(headers)
    return parent


def _attributes(
    ctx: ServerRequestContext[Any, Any],
    method: str,
    clean: Clean,
    known_tool: Callable[[str], bool],
    known_prompt: Callable[[str], bool] | None,
) -> tuple[dict[str, Any], str | None]:
    """The SERVER span's attributes for a request, and the tool or prompt it may be named
    after (only one the gateway offers: a client's made-up names make no new series)."""
    attrs: dict[str, Any] = {
        n.MCP_METHOD: method if method != n.OTHER else clean.value(str(ctx.method)),
        n.MCP_PROTOCOL_VERSION: clean.name(str(ctx.protocol_version)),
    }
    if ctx.request_id is not None:
        attrs[n.JSONRPC_REQUEST_ID] = clean.value(str(ctx.request_id))
    http = ctx.request
    headers = getattr(http, "headers", None)
    transport = "tcp" if headers is not None else "pipe"
    attrs[n.NETWORK_TRANSPORT] = transport
    if headers is not None:
        attrs[n.NETWORK_PROTOCOL] = "http"
        session = headers.get("mcp-session-id")
        if session:
            attrs[n.MCP_SESSION_ID] = clean.value(session)
    target: str | None = None
    name = ctx.params.get("name") if ctx.params else None
    if method == "tools/call":
        attrs[n.GEN_AI_OPERATION] = "execute_tool"
        if isinstance(name, str):
            attrs[n.GEN_AI_TOOL] = clean.value(name)
            target = clean.name(name) if known_tool(name) else None
    elif method == "prompts/get" and isinstance(name, str):
        attrs[n.GEN_AI_PROMPT] = clean.value(name)
        target = clean.name(name) if known_prompt and known_prompt(name) else None
    return attrs, target


def _fail(op: Operation, error_type: str) -> None:
    # The status says the code, never the message (what a client or backend wrote).
    if op.error_type is None:
        op.error_type = error_type
        op.span.set_attribute(n.ERROR_TYPE, error_type)
        op.span.set_status(StatusCode.ERROR, error_type)


def instrument_server(
    server: Server[Any],
    telemetry: Telemetry,
    known_tool: Callable[[str], bool],
    known_prompt: Callable[[str], bool] | None = None,
) -> None:
    """Put the gateway's span in place of the SDK's on ``server`` (only remove it when off)."""
    from mcp.server._otel import OpenTelemetryMiddleware

    kept = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    if telemetry.enabled:
        kept.insert(0, server_middleware(telemetry, known_tool, known_prompt))
    server.middleware[:] = kept
