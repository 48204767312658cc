"""A gateway telemetry that keeps its spans and metric points in memory, for tests.

Needs the ``otel`` extra (the OpenTelemetry SDK's in-memory exporter and reader).

    recorder = TelemetryRecorder()
    gw = make_gateway(plugins=["queue"], telemetry=recorder)
    async with gw:
        await gw.call("bulk_read_new_jobs", {})
    call = recorder.span("tools/call bulk_read_new_jobs")
    assert recorder.children(call)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..telemetry import Telemetry, TelemetrySettings, build_telemetry

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from ..errors import Sanitizer


class TelemetryRecorder:
    """Pass it as a gateway's ``telemetry`` factory: the gateway's telemetry, built around the
    gateway's own sanitizer, exports each span as it ends to memory, and its metrics are
    read on demand."""

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self._telemetry: Telemetry | None = None

    def __call__(self, sanitizer: Sanitizer) -> Telemetry:
        self._telemetry = build_telemetry(
            TelemetrySettings.load({"enabled": True}, {}),
            sanitizer,
            {},
            version=__version__,
            span_exporter=self.exporter,
            metric_reader=self.reader,
        )
        return self._telemetry

    @property
    def telemetry(self) -> Telemetry:
        assert self._telemetry is not None, "no gateway was built with this recorder yet"
        return self._telemetry

    def spans(self) -> list[ReadableSpan]:
        """The finished spans, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        """The one finished span of that name (an assertion error lists them all otherwise)."""
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """The finished spans whose parent is ``parent``."""
        assert parent.context is not None
        return [
            s
            for s in self.spans()
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]

    def points(self, metric: str) -> list[tuple[dict[str, Any], float]]:
        """``(attributes, value)`` per data point of ``metric``."""
        data = self.reader.get_metrics_data()
        out = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        for p in m.data.data_points:
                            # A histogram's count, else a counter's sum.
                            value = p.count if hasattr(p, "count") else p.value
                            out.append((dict(p.attributes or {}), float(value)))
        return out

    def everything(self) -> str:
        """Every span name, attribute, event and status text, and every metric point, as one
        text to search for what must never be recorded."""
        parts = []
        for s in self.spans():
            parts += [s.name, json.dumps(dict(s.attributes or {})), s.status.description or ""]
            parts += [e.name + json.dumps(dict(e.attributes or {})) for e in s.events]
        data = self.reader.get_metrics_data()
        parts.append(data.to_json() if data else "")
        return "\n".join(parts)
