"""Telemetry as the gateway records it itself: the pipeline, the REST client, the health
monitor and the server, against a real gateway and the fake orchestrator (a real HTTP
server), recorded in memory (``gateway.testing.telemetry.TelemetryRecorder``)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from mcp import Client
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from gateway.app import Gateway
from gateway.errors import Sanitizer
from gateway.health import Breaker
from gateway.server import build_server
from gateway.telemetry import OFF, Telemetry, current
from gateway.testing import make_gateway
from gateway.testing.backends import Reply
from gateway.testing.telemetry import TelemetryRecorder

pytestmark = pytest.mark.anyio

SECRET = "tok-9f8e7d6c5b4a39281706"  # the orchestrator token: the sanitizer knows it


@pytest.fixture
def orch() -> Iterator[FakeOrchestrator]:
    with FakeOrchestrator() as api:
        yield api


def _gateway(
    tmp_path: Any, api: FakeOrchestrator, telemetry: Any = None, **settings: Any
) -> Gateway:
    env = {
        "COCKPIT_API_URL": api.url,
        "COCKPIT_API_TOKEN": SECRET,
        "COCKPIT_API_REQUEST_TIMEOUT": "0.5",
    }
    return make_gateway(
        plugins=["orchestrator"], env=env, cwd=tmp_path, telemetry=telemetry, **settings
    )


@pytest.fixture
async def traced(
    tmp_path: Any, orch: FakeOrchestrator
) -> AsyncIterator[tuple[Gateway, TelemetryRecorder]]:
    rec = TelemetryRecorder()
    gw = _gateway(tmp_path, orch, rec)
    async with gw:
        yield gw, rec


def _child_of(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.parent is not None and parent.context is not None
    return child.parent.span_id == parent.context.span_id


def _port(gw: Gateway) -> int:
    return int(gw.config.env["COCKPIT_API_URL"].rsplit(":", 1)[1])


async def test_read_call_is_one_span_with_the_backend_request_below(traced):
    gw, rec = traced
    result = await gw.call("get_job", {"job_id": ids.JOB_PROCESSING})
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
    assert attrs["mcp_gateway.correlation_id"] == result.correlation_id
    assert "error.type" not in attrs and call.status.status_code is StatusCode.UNSET
    assert call.parent is None  # no server span around a call made in process

    request = rec.span("GET /api/jobs/{job_id}")
    assert request.kind is SpanKind.CLIENT and _child_of(request, call)
    assert dict(request.attributes or {}) == {
        "http.request.method": "GET",
        "url.template": "/api/jobs/{job_id}",
        "mcp_gateway.backend": "cockpit",
        "server.address": "127.0.0.1",
        "server.port": _port(gw),
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


async def test_validation_error_is_the_calls_error_type_and_reaches_no_backend(traced):
    gw, rec = traced
    result = await gw.call("get_job", {"job_id": "not-a-uuid", "extra": 1})
    assert result.code == "VALIDATION_ERROR"
    [call] = rec.spans()  # no request left the gateway
    assert call.name == "tools/call get_job"
    assert call.attributes["error.type"] == "VALIDATION_ERROR"
    assert call.status.status_code is StatusCode.ERROR
    assert call.status.description == "VALIDATION_ERROR"  # the code, never the message
    assert "mcp_gateway.breaker.state" not in call.attributes  # stopped before the breaker
    [(op, _)] = rec.points("mcp.server.operation.duration")
    assert op["error.type"] == "VALIDATION_ERROR" and op["gen_ai.tool.name"] == "get_job"
    assert rec.points("http.client.request.duration") == []


async def test_backend_timeout_marks_both_spans_and_opens_the_breaker(traced, orch):
    gw, rec = traced
    orch.mode = "hang"
    for _ in range(3):
        assert (await gw.call("get_job", {"job_id": ids.JOB_PROCESSING})).code == "TIMEOUT"
    calls = [s for s in rec.spans() if s.name == "tools/call get_job"]
    requests = [s for s in rec.spans() if s.name == "GET /api/jobs/{job_id}"]
    assert len(calls) == 3 and len(requests) == 3
    for call, request in zip(calls, requests, strict=True):
        assert _child_of(request, call)
        assert call.attributes["error.type"] == "TIMEOUT"
        assert call.status.description == "TIMEOUT"
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
    refused = await gw.call("get_job", {"job_id": ids.JOB_PROCESSING})
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
    result = await gw.call("cancel_job", {"job_id": ids.JOB_PROCESSING})
    assert not result.is_error, result.payload
    call = rec.span("tools/call cancel_job")
    assert call.attributes["mcp_gateway.tool.tier"] == "mutation"
    # The audit line and the span name the same call.
    assert call.attributes["mcp_gateway.correlation_id"] == result.correlation_id
    audit = gw.config.audit_log.read_text()
    assert audit.count(f'"correlation_id":"{result.correlation_id}"') == 2, audit
    request = rec.span("PUT /api/jobs/{job_id}/cancel")
    assert _child_of(request, call)
    assert request.attributes["http.request.method"] == "PUT"
    assert request.attributes["http.response.status_code"] == 200
    [(op, _)] = rec.points("mcp.server.operation.duration")
    assert op["mcp_gateway.tool.tier"] == "mutation" and "error.type" not in op


async def test_refused_calls_are_counted_by_reason(tmp_path, orch):
    rec = TelemetryRecorder()
    gw = _gateway(tmp_path, orch, rec, deny_tools=["cancel_job"])
    async with gw:
        denied = await gw.call("cancel_job", {"job_id": ids.JOB_PROCESSING})
        unknown = await gw.call(f"steal_{SECRET}", {})
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


async def test_read_only_and_a_broken_audit_log_are_refusals_too(tmp_path, orch):
    rec = TelemetryRecorder()
    gw = _gateway(tmp_path, orch, rec, read_only=True)
    async with gw:
        assert (await gw.call("cancel_job", {"job_id": ids.JOB_PROCESSING})).is_error
    rec2 = TelemetryRecorder()
    gw = _gateway(tmp_path, orch, rec2, audit_log=str(tmp_path / "audit"))
    (tmp_path / "audit").mkdir()  # after the start: a folder where the log file should be
    async with gw:
        result = await gw.call("cancel_job", {"job_id": ids.JOB_PROCESSING})
    assert result.code == "INTERNAL_ERROR"
    reasons = [
        p["mcp_gateway.refusal.reason"]
        for r in (rec, rec2)
        for p, _ in r.points("mcp_gateway.calls.refused")
    ]
    assert reasons == ["read_only", "audit_unavailable"]
    call = rec2.span("tools/call cancel_job")
    assert call.attributes["mcp_gateway.correlation_id"] == result.correlation_id
    assert not [r for r in orch.requests if r.method == "PUT"]  # refused before any request


async def test_no_planted_secret_reaches_any_attribute(traced, orch):
    gw, rec = traced
    # In an argument, in a tool name, echoed by the backend in an error.
    await gw.call("get_job", {"job_id": SECRET})
    await gw.call(SECRET, {"token": SECRET})
    orch.override(f"/api/jobs/{ids.JOB_PROCESSING}", Reply.json({"detail": SECRET}, 500))
    echoed = await gw.call("get_job", {"job_id": ids.JOB_PROCESSING})
    assert echoed.is_error
    recorded = rec.everything()
    assert len(rec.spans()) >= 4
    assert SECRET not in recorded and "[REDACTED]" in recorded


async def test_a_failed_calls_span_status_says_its_code_never_the_message(traced, orch):
    gw, rec = traced
    # What a backend writes may name people and hosts; the client gets it sanitized, the
    # trace store (kept longer, read by more people) only the code.
    detail = "quota of jane.roe@corp.example exceeded on orch-7.cockpit.svc"
    orch.override(f"/api/jobs/{ids.JOB_PROCESSING}", Reply.json({"detail": detail}, 500))
    result = await gw.call("get_job", {"job_id": ids.JOB_PROCESSING})
    assert result.code == "BACKEND_ERROR"
    assert (
        "quota of [REDACTED] exceeded on orch-7.cockpit.svc" in result.payload["error"]["message"]
    )
    [call] = [s for s in rec.spans() if s.name == "tools/call get_job"]
    assert call.status.status_code is StatusCode.ERROR
    assert call.status.description == "BACKEND_ERROR"
    assert "quota" not in rec.everything() and "jane.roe" not in rec.everything()


async def test_a_client_traceparent_is_continued_by_the_server_span(traced):
    gw, rec = traced
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    meta = {"traceparent": f"00-{trace_id}-{parent_id}-01"}
    async with Client(build_server(gw), mode="legacy") as client:
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


async def test_background_checks_of_an_open_breaker_belong_to_no_call(traced, orch):
    gw, rec = traced
    gw.health.probe_seconds = 0.1
    orch.mode = "hang"
    for _ in range(3):  # the third timeout opens the breaker, inside that call's span
        assert (await gw.call("get_job", {"job_id": ids.JOB_PROCESSING})).code == "TIMEOUT"
    orch.mode = "normal"  # back: the next probe's request is answered, and ends
    with anyio.fail_after(30):
        while gw.health.breaker_states()["cockpit"]["state"] != "closed":
            await anyio.sleep(0.05)
    assert [r for r in orch.requests if r.path == "/api/health"]
    calls = [s for s in rec.spans() if s.name == "tools/call get_job"]
    assert len(calls) == 3
    # Only the calls and their own requests: the probe started in the third call's context,
    # but its request is neither that call's child nor a trace of its own.
    assert (
        sorted(s.name for s in rec.spans())
        == ["GET /api/jobs/{job_id}"] * 3 + ["tools/call get_job"] * 3
    )


async def test_the_gateways_span_replaces_the_sdks_and_off_removes_it(tmp_path, orch):
    rec = TelemetryRecorder()
    on = build_server(_gateway(tmp_path, orch, rec))
    # The gateway's span outermost, then the check of request state (gateway.asking).
    middleware, boundary = on.middleware
    assert type(middleware).__name__ != "OpenTelemetryMiddleware"
    assert type(boundary).__name__ == "RequestStateBoundary"
    off = _gateway(tmp_path, orch)
    assert off.telemetry is OFF
    assert [type(m).__name__ for m in build_server(off).middleware] == ["RequestStateBoundary"]


async def test_health_checks_outside_a_call_are_not_traced_inside_one_they_are(traced):
    gw, rec = traced
    status = await gw.call("gateway_status", {"check_health": True})
    assert not status.is_error
    call = rec.span("tools/call gateway_status")
    [probe] = rec.children(call)
    assert probe.name.startswith("GET /") and probe.attributes["http.response.status_code"] == 200
    # /readyz, `mcp-gateway health`: a probe every few seconds would bury the traces.
    rec.exporter.clear()
    [result] = await gw.health.run(use_cache=False)
    assert result.ok, result
    assert rec.spans() == []
    [(_, count)] = rec.points("http.client.request.duration")
    assert count == 1  # the probe of the call alone


async def test_off_records_nothing_and_costs_a_shared_object():
    assert not OFF.enabled and current() is OFF
    first, second = OFF.tool_call("get_job"), OFF.tool_call("other")
    assert first is second
    with first as call:
        call.describe("get_job", plugin="p", tier="read", timeout=1.0, backend="b")
        call.breaker("open")
        call.refused("denied")
        call.finish("TIMEOUT", correlation_id="c")
    with OFF.backend_request("b", "GET", "/x") as request:
        request.status(200)
    with OFF.db_statement("SELECT 1") as statement:
        statement.rows(1)
    OFF.breaker_changed("b", "closed", "open")
    OFF.shutdown()


async def test_sqlite_statements_are_recorded_by_kind_and_table_never_by_text(tmp_path):
    db = sqlite3.connect(tmp_path / "jobs.db")
    db.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, title TEXT)")
    rec = TelemetryRecorder()
    telemetry: Telemetry = rec(Sanitizer([SECRET]))
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
    rec = TelemetryRecorder()
    telemetry = rec(Sanitizer())
    breaker = Breaker("cockpit", 2, 30.0, clock=lambda: now[0])
    breaker.on_change = telemetry.breaker_changed
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
    rec = TelemetryRecorder()
    telemetry = rec(Sanitizer())
    with telemetry.backend_request("gitea", "get", None, url="https://git.example") as req:
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
