"""The telemetry calls made the way the pipeline, the REST client, the health monitor and the
server drive them, against a real gateway and the fake orchestrator (a real HTTP server),
recorded by the SDK's in-memory exporter and reader."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from mcp import Client
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from telemetry_harness import trace_pipeline, traced_rest_client

from gateway.app import Gateway
from gateway.errors import Sanitizer
from gateway.health import Breaker
from gateway.server import build_server
from gateway.telemetry import (
    OFF,
    Telemetry,
    TelemetrySettings,
    build_telemetry,
    current,
    instrument_server,
)
from gateway.testing import make_gateway
from gateway.testing.backends import Reply

pytestmark = pytest.mark.anyio

SECRET = "tok-9f8e7d6c5b4a39281706"  # the orchestrator token: the sanitizer knows it


class Recorder:
    """A :class:`Telemetry` whose spans and metrics stay in memory."""

    def __init__(self, sanitizer: Sanitizer) -> None:
        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.telemetry = build_telemetry(
            TelemetrySettings(enabled=True),
            sanitizer,
            {},
            span_exporter=self.exporter,
            metric_reader=self.reader,
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def points(self, metric: str) -> list[tuple[dict[str, Any], float]]:
        data = self.reader.get_metrics_data()
        out = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        for p in m.data.data_points:
                            value = getattr(p, "count", None) or getattr(p, "value", 0)
                            out.append((dict(p.attributes or {}), float(value)))
        return out

    def everything(self) -> str:
        """Every name, attribute, event and status text recorded, and every metric point."""
        parts = []
        for s in self.spans():
            parts += [s.name, json.dumps(dict(s.attributes or {}))]
            parts += [s.status.description or ""]
            parts += [e.name + json.dumps(dict(e.attributes or {})) for e in s.events]
        data = self.reader.get_metrics_data()
        parts.append(data.to_json() if data else "")
        return "\n".join(parts)


@pytest.fixture
def orch() -> Iterator[FakeOrchestrator]:
    with FakeOrchestrator() as api:
        yield api


def _gateway(tmp_path: Any, api: FakeOrchestrator, **settings: Any) -> Gateway:
    env = {
        "COCKPIT_API_URL": api.url,
        "COCKPIT_API_TOKEN": SECRET,
        "COCKPIT_API_REQUEST_TIMEOUT": "0.5",
    }
    return make_gateway(plugins=["orchestrator"], env=env, cwd=tmp_path, **settings)


@pytest.fixture
async def traced(tmp_path: Any, orch: FakeOrchestrator) -> AsyncIterator[tuple[Gateway, Recorder]]:
    gw = _gateway(tmp_path, orch)
    rec = Recorder(gw.sanitizer)
    trace_pipeline(gw, rec.telemetry)
    with traced_rest_client():
        async with gw:
            yield gw, rec


def _child_of(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.parent is not None and parent.context is not None
    return child.parent.span_id == parent.context.span_id


async def test_read_call_is_one_span_with_the_backend_request_below(traced):
    gw, rec = traced
    result = await gw.pipeline.call("get_job", {"job_id": ids.JOB_PROCESSING})
    assert not result.is_error
    call = rec.span("tools/call get_job")
    attrs = dict(call.attributes or {})
    assert attrs["mcp.method.name"] == "tools/call"
    assert attrs["gen_ai.tool.name"] == "get_job"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["mcp_gateway.plugin"] == "orchestrator"
    assert attrs["mcp_gateway.tool.tier"] == "read"
    assert attrs["mcp_gateway.tool.timeout"] == 30.0
    assert attrs["mcp_gateway.backend"] == "cockpit"
    assert attrs["mcp_gateway.breaker.state"] == "closed"
    assert "error.type" not in attrs and call.status.status_code is StatusCode.UNSET

    request = rec.span("GET /api/jobs/{job_id}")
    assert request.kind is SpanKind.CLIENT and _child_of(request, call)
    assert dict(request.attributes or {}) == {
        "http.request.method": "GET",
        "url.template": "/api/jobs/{job_id}",
        "mcp_gateway.backend": "cockpit",
        "server.address": "127.0.0.1",
        "server.port": orch_port(gw),
        "http.response.status_code": 200,
    }
    # The job id (a path value) is in no attribute.
    assert ids.JOB_PROCESSING not in rec.everything()

    [(op, count)] = rec.points("mcp.server.operation.duration")
    assert count == 1
    assert op == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "get_job",
        "gen_ai.operation.name": "execute_tool",
        "mcp_gateway.plugin": "orchestrator",
        "mcp_gateway.tool.tier": "read",
    }
    [(http, _)] = rec.points("http.client.request.duration")
    assert http["mcp_gateway.backend"] == "cockpit" and http["http.response.status_code"] == 200
    assert "error.type" not in http


def orch_port(gw: Gateway) -> int:
    url = gw.config.env["COCKPIT_API_URL"]
    return int(url.rsplit(":", 1)[1])


async def test_validation_error_is_the_calls_error_type_and_reaches_no_backend(traced):
    gw, rec = traced
    result = await gw.pipeline.call("get_job", {"job_id": "not-a-uuid", "extra": 1})
    assert result.code == "VALIDATION_ERROR"
    [call] = rec.spans()  # no request left the gateway
    assert call.name == "tools/call get_job"
    assert call.attributes["error.type"] == "VALIDATION_ERROR"
    assert call.status.status_code is StatusCode.ERROR
    assert call.status.description.startswith("Invalid arguments: job_id")
    [(op, _)] = rec.points("mcp.server.operation.duration")
    assert op["error.type"] == "VALIDATION_ERROR" and op["gen_ai.tool.name"] == "get_job"
    assert rec.points("http.client.request.duration") == []


async def test_backend_timeout_marks_both_spans_and_opens_the_breaker(traced, orch):
    gw, rec = traced
    orch.mode = "hang"
    for _ in range(3):
        assert (await gw.pipeline.call("get_job", {"job_id": ids.JOB_PROCESSING})).code == (
            "TIMEOUT"
        )
    calls = [s for s in rec.spans() if s.name == "tools/call get_job"]
    requests = [s for s in rec.spans() if s.name == "GET /api/jobs/{job_id}"]
    assert len(calls) == 3 and len(requests) == 3
    for call, request in zip(calls, requests, strict=True):
        assert _child_of(request, call)
        assert call.attributes["error.type"] == "TIMEOUT"
        assert "did not answer within 0.5 s" in call.status.description
        assert request.attributes["error.type"] == "TIMEOUT"
        assert "http.response.status_code" not in request.attributes
        assert request.status.status_code is StatusCode.ERROR
    # The third timeout opened the breaker: counted, and visible on the call that did it.
    assert rec.points("mcp_gateway.breaker.transitions") == [
        (
            {
                "mcp_gateway.backend": "cockpit",
                "mcp_gateway.breaker.state": "open",
                "mcp_gateway.breaker.previous_state": "closed",
            },
            1.0,
        )
    ]
    assert [e.name for e in calls[2].events] == ["mcp_gateway.breaker.transition"]
    # The next call fails fast: the breaker state says why, no request is made.
    rec.exporter.clear()
    refused = await gw.pipeline.call("get_job", {"job_id": ids.JOB_PROCESSING})
    assert refused.code == "BACKEND_UNAVAILABLE"
    [call] = rec.spans()
    assert call.attributes["mcp_gateway.breaker.state"] == "open"
    assert call.attributes["error.type"] == "BACKEND_UNAVAILABLE"
    timeouts = [
        p for p, _ in rec.points("http.client.request.duration") if p.get("error.type") == "TIMEOUT"
    ]
    assert len(timeouts) == 1  # one series; its count is 3


async def test_mutation_call_says_its_tier_and_the_request_it_made(traced):
    gw, rec = traced
    result = await gw.pipeline.call("cancel_job", {"job_id": ids.JOB_PROCESSING})
    assert not result.is_error, result.payload
    call = rec.span("tools/call cancel_job")
    assert call.attributes["mcp_gateway.tool.tier"] == "mutation"
    request = rec.span("PUT /api/jobs/{job_id}/cancel")
    assert _child_of(request, call)
    assert request.attributes["http.request.method"] == "PUT"
    assert request.attributes["http.response.status_code"] == 200
    [(op, _)] = rec.points("mcp.server.operation.duration")
    assert op["mcp_gateway.tool.tier"] == "mutation" and "error.type" not in op


async def test_refused_calls_are_counted_by_reason(tmp_path, orch):
    gw = _gateway(tmp_path, orch, deny_tools=["cancel_job"])
    rec = Recorder(gw.sanitizer)
    trace_pipeline(gw, rec.telemetry)
    async with gw:
        denied = await gw.pipeline.call("cancel_job", {"job_id": ids.JOB_PROCESSING})
        unknown = await gw.pipeline.call(f"steal_{SECRET}", {})
    assert (denied.code, unknown.code) == ("PERMISSION_DENIED", "NOT_FOUND")
    refused = sorted(rec.points("mcp_gateway.calls.refused"), key=lambda p: str(p[0]))
    assert refused == [
        ({"mcp_gateway.refusal.reason": "denied", "gen_ai.tool.name": "cancel_job"}, 1.0),
        ({"mcp_gateway.refusal.reason": "unknown_tool"}, 1.0),
    ]
    # A name the gateway does not offer names no span and no metric series.
    names = sorted(s.name for s in rec.spans())
    assert names == ["tools/call", "tools/call cancel_job"]
    assert SECRET not in rec.everything()


async def test_no_planted_secret_reaches_any_attribute(traced, orch):
    gw, rec = traced
    # In an argument, in a tool name, echoed by the backend in an error, in a database error.
    await gw.pipeline.call("get_job", {"job_id": SECRET})
    await gw.pipeline.call(SECRET, {"token": SECRET})
    orch.override(f"/api/jobs/{ids.JOB_PROCESSING}", Reply.json({"detail": SECRET}, 500))
    echoed = await gw.pipeline.call("get_job", {"job_id": ids.JOB_PROCESSING})
    assert echoed.is_error
    with rec.telemetry.tool_call("get_job") as call:
        call.finish("BACKEND_ERROR", message=f"backend said Bearer {SECRET}")
    recorded = rec.everything()
    assert len(rec.spans()) >= 4
    assert SECRET not in recorded and "[REDACTED]" in recorded


async def test_a_client_traceparent_is_continued_by_the_server_span(tmp_path, orch):
    gw = _gateway(tmp_path, orch)
    rec = Recorder(gw.sanitizer)
    trace_pipeline(gw, rec.telemetry)
    server = build_server(gw)
    instrument_server(server, rec.telemetry, lambda name: gw.registry.get(name) is not None)
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    meta = {"traceparent": f"00-{trace_id}-{parent_id}-01"}
    with traced_rest_client():
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool("get_job", {"job_id": ids.JOB_PROCESSING}, meta=meta)
    assert not result.is_error
    call = rec.span("tools/call get_job")
    assert call.kind is SpanKind.SERVER  # the middleware's span, which the pipeline added to
    assert format(call.context.trace_id, "032x") == trace_id
    assert call.parent is not None and format(call.parent.span_id, "016x") == parent_id
    assert call.parent.is_remote
    assert call.attributes["mcp_gateway.plugin"] == "orchestrator"
    assert call.attributes["jsonrpc.request.id"] == "2"
    assert call.attributes["network.transport"] == "pipe"
    request = rec.span("GET /api/jobs/{job_id}")
    assert _child_of(request, call) and request.context.trace_id == call.context.trace_id
    # One operation point per request; the tool call's says which tool.
    points = rec.points("mcp.server.operation.duration")
    methods = sorted(p["mcp.method.name"] for p, _ in points)
    assert methods == ["initialize", "notifications/initialized", "tools/call", "tools/list"]


async def test_gateway_span_replaces_the_sdks_and_off_removes_it(tmp_path, orch):
    gw = _gateway(tmp_path, orch)
    rec = Recorder(gw.sanitizer)
    server = build_server(gw)
    assert [type(m).__name__ for m in server.middleware] == ["OpenTelemetryMiddleware"]
    instrument_server(server, rec.telemetry, lambda name: True)
    assert len(server.middleware) == 1
    assert type(server.middleware[0]).__name__ != "OpenTelemetryMiddleware"
    bare = build_server(gw)
    instrument_server(bare, OFF, lambda name: True)
    assert bare.middleware == []


async def test_off_records_nothing_and_costs_a_shared_object():
    assert not OFF.enabled and current() is OFF
    first, second = OFF.tool_call("get_job"), OFF.tool_call("other")
    assert first is second
    with first as call:
        call.describe("get_job", plugin="p", tier="read", timeout=1.0, backend="b")
        call.breaker("open")
        call.refused("denied")
        call.finish("TIMEOUT", message="m", correlation_id="c")
    with OFF.backend_request("b", "GET", "/x") as request:
        request.status(200)
    with OFF.db_statement("SELECT 1") as statement:
        statement.rows(1)
    OFF.breaker_changed("b", "closed", "open")
    OFF.shutdown()


async def test_sqlite_statements_are_recorded_by_kind_and_table_never_by_text(tmp_path):
    db = sqlite3.connect(tmp_path / "jobs.db")
    db.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, title TEXT)")
    rec = Recorder(Sanitizer([SECRET]))
    telemetry: Telemetry = rec.telemetry
    with telemetry.tool_call("list_jobs") as call:
        call.describe("list_jobs", plugin="queue", tier="read", timeout=5.0, backend=None)
        # Plugin code finds the running call's telemetry without a reference of its own.
        assert current() is telemetry
        sql = "INSERT INTO jobs (id, title) VALUES (?, ?)"
        with current().db_statement(sql):
            db.execute(sql, ("j1", SECRET))
        sql = "SELECT id, title FROM jobs WHERE title = ?"
        with current().db_statement(sql) as statement:
            rows = db.execute(sql, (SECRET,)).fetchall()
            statement.rows(len(rows))
        with pytest.raises(sqlite3.OperationalError), current().db_statement("DELETE FROM gone"):
            db.execute("DELETE FROM gone")
        call.finish(None)
    assert current() is OFF
    call_span = rec.span("tools/call list_jobs")
    insert, select, delete = (rec.span(n) for n in ("INSERT jobs", "SELECT jobs", "DELETE gone"))
    assert all(_child_of(s, call_span) for s in (insert, select, delete))
    assert dict(select.attributes or {}) == {
        "db.system.name": "sqlite",
        "db.operation.name": "SELECT",
        "db.collection.name": "jobs",
        "db.response.returned_rows": 1,
    }
    assert delete.attributes["error.type"] == "SQLITE_ERROR"  # the library's name for it
    assert delete.status.status_code is StatusCode.ERROR
    recorded = rec.everything()
    assert "WHERE" not in recorded and SECRET not in recorded


async def test_every_breaker_state_change_is_reported_once(tmp_path):
    now = [0.0]
    rec = Recorder(Sanitizer())
    breaker = Breaker("cockpit", 2, 30.0, clock=lambda: now[0])
    breaker.on_change = rec.telemetry.breaker_changed
    breaker.record_failure()
    breaker.record_failure()  # opens
    breaker.record_failure()  # stays open: no change to report
    now[0] = 31.0
    assert breaker.acquire()  # half-open: the probe goes through
    breaker.record_success()  # closes
    breaker.record_success()
    changes = sorted(
        (p["mcp_gateway.breaker.previous_state"], p["mcp_gateway.breaker.state"], count)
        for p, count in rec.points("mcp_gateway.breaker.transitions")
    )
    assert changes == [
        ("closed", "open", 1.0),
        ("half_open", "closed", 1.0),
        ("open", "half_open", 1.0),
    ]


async def test_a_request_without_a_route_template_is_named_by_its_method_alone():
    rec = Recorder(Sanitizer())
    with rec.telemetry.backend_request("gitea", "get", None, url="https://git.example") as req:
        req.status(404)
    span = rec.span("GET")
    assert dict(span.attributes or {}) == {
        "http.request.method": "GET",
        "mcp_gateway.backend": "gitea",
        "server.address": "git.example",
        "server.port": 443,
        "http.response.status_code": 404,
        "error.type": "404",
    }
