"""Build the gateway's :class:`Telemetry` with the OpenTelemetry SDK (the ``otel`` extra).

The only module that imports the SDK, and only when telemetry is on: a gateway without the
extra, or with telemetry off, never loads it. Exporters never write to stdout, which is the
stdio transport: the console exporters write to stderr, the OTLP ones to the network.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .core import OFF, Telemetry
from .settings import TelemetryError, TelemetrySettings

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace.export import SpanExporter

    from ..errors import Sanitizer

log = logging.getLogger("gateway.telemetry")

_INSTALL = "install it with: pip install 'mcp-plugin-gateway[otel]'"


def build_telemetry(
    settings: TelemetrySettings,
    sanitizer: Sanitizer,
    env: Mapping[str, str],
    *,
    version: str,
    span_exporter: SpanExporter | None = None,
    metric_reader: MetricReader | None = None,
    install_global: bool = False,
) -> Telemetry:
    """:data:`OFF` unless ``settings.active``; else a tracer and meter exporting as the
    settings say. ``span_exporter`` / ``metric_reader`` replace the configured exporters
    (tests: in-memory, spans exported as each ends). ``install_global`` makes them the
    process's providers too, so that a plugin's own ``opentelemetry.trace.get_tracer()``
    spans join the gateway's traces (one gateway per process: ``mcp-gateway serve``).
    ``version``: the gateway's, for the resource and the instrumentation scope (passed in, so
    that telemetry, which the core's configuration imports, imports nothing of the package face).

    Raises :class:`TelemetryError` when telemetry is on but the SDK or a chosen exporter is
    not installed: it was asked for explicitly, so it fails loudly instead of silently.
    """
    if not settings.active:
        return OFF
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        raise TelemetryError(
            f"telemetry is on but the OpenTelemetry SDK is missing: {_INSTALL}"
        ) from None

    resource = Resource.create({"service.name": settings.service_name, "service.version": version})
    # The gateway stops its providers itself (Gateway.stop): no exit handler of the SDK's, so
    # a command that never served (a configuration error after start-up) exports nothing.
    tracer_provider = None
    if span_exporter is not None:
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    elif settings.exporters("traces"):
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        for exporter in _span_exporters(settings, env):
            tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    readers = [metric_reader] if metric_reader is not None else _metric_readers(settings, env)
    meter_provider = (
        MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
        if readers
        else None
    )
    return _telemetry(tracer_provider, meter_provider, sanitizer, version, install_global)


def _telemetry(
    tracer_provider: Any, meter_provider: Any, sanitizer: Sanitizer, version: str, install: bool
) -> Telemetry:
    """The :class:`Telemetry` over the providers built (:data:`OFF` when neither is), made the
    process's own providers too when ``install``."""
    from .recording import RECORDERS

    if tracer_provider is None and meter_provider is None:
        log.warning("telemetry is on, but OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER are none")
        return OFF
    if install:
        from opentelemetry import metrics, trace

        if tracer_provider is not None:
            trace.set_tracer_provider(tracer_provider)
        if meter_provider is not None:
            metrics.set_meter_provider(meter_provider)

    def flush() -> None:
        for provider in (tracer_provider, meter_provider):
            if provider is not None:
                provider.force_flush()

    def shutdown() -> None:
        for provider in (tracer_provider, meter_provider):
            if provider is not None:
                provider.shutdown()

    return Telemetry(
        tracer_provider.get_tracer("mcp-gateway", version) if tracer_provider else None,
        meter_provider.get_meter("mcp-gateway", version) if meter_provider else None,
        sanitizer,
        recorders=RECORDERS,
        flush=flush,
        shutdown=shutdown,
    )


def _span_exporters(settings: TelemetrySettings, env: Mapping[str, str]) -> list[Any]:
    out: list[Any] = []
    for name in settings.exporters("traces"):
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            out.append(ConsoleSpanExporter(out=sys.stderr))
        else:
            cls = _otlp(settings.protocol, "trace_exporter", "OTLPSpanExporter")
            out.append(cls(endpoint=settings.otlp_endpoint("traces", env)))
    return out


def _metric_readers(settings: TelemetrySettings, env: Mapping[str, str]) -> list[Any]:
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        PeriodicExportingMetricReader,
    )

    out: list[Any] = []
    for name in settings.exporters("metrics"):
        if name == "console":
            exporter: Any = ConsoleMetricExporter(out=sys.stderr)
        else:
            cls = _otlp(settings.protocol, "metric_exporter", "OTLPMetricExporter")
            exporter = cls(endpoint=settings.otlp_endpoint("metrics", env))
        out.append(
            PeriodicExportingMetricReader(
                exporter, export_interval_millis=settings.metric_export_interval_ms
            )
        )
    return out


def _otlp(protocol: str, module: str, name: str) -> Any:
    package = "grpc" if protocol == "grpc" else "http"
    try:
        mod = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{package}.{module}")
    except ImportError:
        dist = f"opentelemetry-exporter-otlp-proto-{package}"
        hint = _INSTALL if package == "http" else f"install {dist}, or use http/protobuf"
        raise TelemetryError(
            f"telemetry exports OTLP over {protocol}, but {dist} is missing: {hint}"
        ) from None
    return getattr(mod, name)
