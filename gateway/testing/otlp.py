"""A stand-in for an OpenTelemetry collector: a real OTLP/HTTP receiver on 127.0.0.1.

It accepts what the OTLP exporters send (``POST /v1/traces`` and ``/v1/metrics``, protobuf,
optionally gzip) and keeps it decoded, so a test or a benchmark can look at exactly what an
operator's collector would receive. Needs the ``otel`` extra (``opentelemetry-proto``).

    with OtlpCollector() as collector:
        env = {"MCP_GATEWAY_TELEMETRY": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
        ...
        span = collector.wait_for_span("tools/call get_job")
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str  # SERVER, CLIENT, INTERNAL …
    attributes: dict[str, Any]
    status: str  # UNSET, OK, ERROR
    status_message: str
    events: tuple[tuple[str, dict[str, Any]], ...] = ()
    resource: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReceivedPoint:
    metric: str
    attributes: dict[str, Any]
    value: float  # a sum's value, a histogram's count


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


class OtlpCollector:
    """Receives OTLP over HTTP; ``spans`` and ``points`` hold what arrived, ``requests``
    counts the export requests."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.points: list[ReceivedPoint] = []
        self.requests = 0
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                status = collector._receive(self.path, body)
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _receive(self, path: str, body: bytes) -> int:
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        with self._lock:
            self.requests += 1
        if path == "/v1/traces":
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
            spans = [
                self._span(span, _attrs(rs.resource.attributes))
                for rs in request.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            ]
            with self._lock:
                self.spans.extend(spans)
            return 200
        if path == "/v1/metrics":
            request = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
            points = [
                point
                for rm in request.resource_metrics
                for sm in rm.scope_metrics
                for metric in sm.metrics
                for point in self._points(metric)
            ]
            with self._lock:
                self.points.extend(points)
            return 200
        return 404

    @staticmethod
    def _span(span: Any, resource: dict[str, Any]) -> ReceivedSpan:
        from opentelemetry.proto.trace.v1 import trace_pb2

        return ReceivedSpan(
            name=span.name,
            trace_id=span.trace_id.hex(),
            span_id=span.span_id.hex(),
            parent_span_id=span.parent_span_id.hex(),
            kind=trace_pb2.Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
            attributes=_attrs(span.attributes),
            status=trace_pb2.Status.StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
            status_message=span.status.message,
            events=tuple((e.name, _attrs(e.attributes)) for e in span.events),
            resource=resource,
        )

    @staticmethod
    def _points(metric: Any) -> list[ReceivedPoint]:
        kind = metric.WhichOneof("data")
        out = []
        for p in getattr(metric, kind).data_points if kind else []:
            value = p.count if kind == "histogram" else (p.as_double or p.as_int)
            out.append(ReceivedPoint(metric.name, _attrs(p.attributes), float(value)))
        return out

    def wait_for_span(self, name: str, timeout: float = 10.0) -> ReceivedSpan:
        """The first span called ``name``, waiting up to ``timeout`` seconds for it."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [s for s in self.spans if s.name == name]
            if found:
                return found[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"no span {name!r}; got {[s.name for s in self.spans]}")
            time.sleep(0.05)

    def wait_for_points(self, metric: str, timeout: float = 10.0) -> list[ReceivedPoint]:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [p for p in self.points if p.metric == metric]
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"no {metric!r} points; got {[p.metric for p in self.points]}")
            time.sleep(0.05)

    def __enter__(self) -> Self:
        # A short poll: shutdown() waits for the serve loop to notice (0.5 s by default).
        serve = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        serve.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
