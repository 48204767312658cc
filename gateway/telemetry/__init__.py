"""OpenTelemetry traces and metrics of the gateway, by the MCP semantic conventions.

Optional: the SDK and the OTLP exporter come with ``pip install 'mcp-plugin-gateway[otel]'``
and are imported only when telemetry is switched on (``[telemetry] enabled`` or
``MCP_GATEWAY_TELEMETRY=1``). Off, :data:`OFF` stands in and every call into it is a no-op;
nothing of OpenTelemetry is imported.

- :class:`TelemetrySettings`: the ``[telemetry]`` table with the ``OTEL_*`` variables on top
  (``GatewayConfig.telemetry``).
- :func:`build_telemetry`: the :class:`Telemetry` those settings ask for; the gateway builds
  its own (``Gateway.telemetry``).
- :func:`gateway.telemetry.middleware.instrument_server`: one server span per MCP request,
  continuing the client's ``traceparent`` (``build_server`` installs it).
- :meth:`Telemetry.tool_call`, :meth:`~Telemetry.backend_request`,
  :meth:`~Telemetry.db_statement`, :meth:`~Telemetry.breaker_changed`: what the pipeline,
  the REST client, the health monitor and plugins record; :func:`current` finds the
  telemetry of the running call for code without a reference of its own.
"""

from __future__ import annotations

from .core import OFF, Telemetry, current
from .scopes import CallTrace, RequestTrace, StatementTrace
from .sdk import build_telemetry
from .settings import TelemetryError, TelemetrySettings, header_secrets

__all__ = [
    "OFF",
    "CallTrace",
    "RequestTrace",
    "StatementTrace",
    "Telemetry",
    "TelemetryError",
    "TelemetrySettings",
    "build_telemetry",
    "current",
    "header_secrets",
]
