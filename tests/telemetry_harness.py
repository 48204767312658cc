"""Telemetry wired into a real gateway from outside, as the wiring plan wires it inside.

Until the pipeline, the REST client and the server make the telemetry calls themselves, these wrappers
call them the way those will: the pipeline opens ``tool_call`` around each call, describes
the tool, the breaker and any refusal, and finishes with its error code; the REST client opens
``backend_request`` around each request with the path template; ``build_server`` puts the
gateway's middleware in place of the SDK's.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

import gateway.http
import gateway.server
from gateway.app import Gateway
from gateway.errors import GatewayError
from gateway.pipeline import CallResult
from gateway.rest.client import RestClient
from gateway.telemetry import RequestTrace, Telemetry, current, instrument_server

_REQUEST: contextvars.ContextVar[RequestTrace | None] = contextvars.ContextVar(
    "harness_request", default=None
)


def trace_pipeline(gw: Gateway, telemetry: Telemetry) -> None:
    pipeline = gw.pipeline
    call = pipeline.call
    gw.health.on_breaker_change = telemetry.breaker_changed

    async def traced(
        name: str, arguments: dict[str, Any] | None, *, progress: Any = None
    ) -> CallResult:
        with telemetry.tool_call(name) as span:
            tool = pipeline.registry.get(name) if isinstance(name, str) else None
            if tool is None:
                span.refused("unknown_tool")
            else:
                backend = tool.spec.backend_name
                span.describe(
                    tool.name,
                    plugin=tool.plugin.name,
                    tier=tool.tier.value,
                    timeout=tool.spec.timeout or pipeline.default_timeout,
                    backend=backend,
                )
                if pipeline.policy.hidden_reason(tool):
                    denied = tool.name in pipeline.policy.deny_tools
                    span.refused("denied" if denied else "read_only")
                elif backend:
                    state = pipeline.health.breaker_states().get(backend, {}).get("state")
                    span.breaker(state or "closed")
            result = await call(name, arguments, progress=progress)
            error = result.payload["error"] if result.is_error else {}
            span.finish(
                result.code if result.is_error else None,
                message=error.get("message"),
                correlation_id=error.get("correlation_id"),
            )
        return result

    pipeline.call = traced  # type: ignore[method-assign]


@contextmanager
def traced_rest_client() -> Iterator[None]:
    """``RestClient.answer`` (which sees the path template) inside ``backend_request``; the
    status comes from an httpx response hook of the same task."""
    answer = RestClient.answer
    init = RestClient.__init__

    async def traced(self: RestClient, method: str, path: str, **kwargs: Any) -> Any:
        route = self.backend.api_prefix + path
        with current().backend_request(
            self.backend.name, method, route, url=self.settings.url
        ) as request:
            token = _REQUEST.set(request)
            try:
                return await answer(self, method, path, **kwargs)
            except GatewayError as err:
                request.fail(err.code.value)
                raise
            finally:
                _REQUEST.reset(token)

    async def status(response: httpx.Response) -> None:
        request = _REQUEST.get()
        if request is not None:
            request.status(response.status_code)

    def hooked(self: RestClient, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.http.event_hooks["response"].append(status)

    RestClient.answer = traced  # type: ignore[method-assign]
    RestClient.__init__ = hooked  # type: ignore[method-assign]
    try:
        yield
    finally:
        RestClient.answer = answer  # type: ignore[method-assign]
        RestClient.__init__ = init  # type: ignore[method-assign]


@contextmanager
def traced_servers(telemetry: Telemetry) -> Iterator[None]:
    """``build_server`` as the stdio and HTTP transports call it, with the middleware."""
    build = gateway.server.build_server

    def instrumented(gw: Gateway) -> Any:
        server = build(gw)
        instrument_server(
            server,
            telemetry,
            lambda name: gw.registry.get(name) is not None,
            lambda name: gw.prompts.get(name) is not None,
        )
        return server

    gateway.server.build_server = instrumented  # type: ignore[assignment]
    gateway.http.build_server = instrumented  # type: ignore[assignment]
    try:
        yield
    finally:
        gateway.server.build_server = build  # type: ignore[assignment]
        gateway.http.build_server = build  # type: ignore[assignment]
