"""Telemetry end to end: a gateway subprocess (telemetry wired from outside, see
telemetry_harness.py) exporting over real OTLP/HTTP to a collector stand-in, and the console
exporters of a stdio gateway writing to stderr, never to the protocol's stdout."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import gateway_env
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids

from gateway.testing.otlp import OtlpCollector

pytestmark = pytest.mark.e2e

TESTS = Path(__file__).resolve().parent
LAUNCHER = TESTS / "telemetry_serve.py"
TRACE_ID, CLIENT_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
SECRET = "tok-e2e-5d4c3b2a19f8e7d6"


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    return gateway_env(
        PYTHONPATH=path,
        MCP_GATEWAY_TELEMETRY="1",
        OTEL_BSP_SCHEDULE_DELAY="50",
        OTEL_METRIC_EXPORT_INTERVAL="200",
        **extra,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[str, OtlpCollector, subprocess.Popen[bytes]]]:
    port = _free_port()
    with FakeOrchestrator() as api, OtlpCollector() as collector:
        env = _env(
            MCP_GATEWAY_PLUGINS="orchestrator",
            COCKPIT_API_URL=api.url,
            COCKPIT_API_TOKEN=SECRET,
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
            OTEL_SERVICE_NAME="gateway-under-test",
        )
        proc = subprocess.Popen(
            [sys.executable, str(LAUNCHER), "http", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(url + "/healthz", timeout=1)
                    break
                except httpx.TransportError:
                    assert proc.poll() is None and time.monotonic() < deadline, (
                        proc.stderr.read().decode() if proc.stderr else "did not start"
                    )
                    time.sleep(0.1)
            yield url, collector, proc
        finally:
            proc.terminate()
            proc.wait(timeout=15)


def _rpc(method: str, params: dict[str, object], id_: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def test_a_call_over_http_with_traceparent_is_one_trace_down_to_the_backend(stack):
    url, collector, proc = stack
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    meta = {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}
    params = {"name": "get_job", "arguments": {"job_id": ids.JOB_PROCESSING}, "_meta": meta}
    with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
        answer = client.post("/mcp", json=_rpc("tools/call", params, 7)).json()
        assert answer["result"]["structuredContent"]["id"] == ids.JOB_PROCESSING
        # A second call with secrets where a client controls the text: the request id, the
        # tool name, the trace context and the session header.
        bad = {"name": SECRET, "arguments": {}, "_meta": {"traceparent": SECRET}}
        client.post(
            "/mcp", json=_rpc("tools/call", bad, SECRET), headers={"mcp-session-id": SECRET}
        )

    call = collector.wait_for_span("tools/call get_job")
    assert (call.trace_id, call.parent_span_id, call.kind) == (TRACE_ID, CLIENT_SPAN, "SERVER")
    assert call.attributes["mcp_gateway.plugin"] == "orchestrator"
    assert call.attributes["mcp_gateway.tool.tier"] == "read"
    assert call.attributes["jsonrpc.request.id"] == "7"
    assert call.attributes["network.transport"] == "tcp"
    assert call.status == "UNSET" and "error.type" not in call.attributes
    assert call.resource["service.name"] == "gateway-under-test"
    request = collector.wait_for_span("GET /api/jobs/{job_id}")
    assert (request.trace_id, request.parent_span_id) == (TRACE_ID, call.span_id)
    assert request.attributes["http.response.status_code"] == 200
    assert request.kind == "CLIENT"

    unknown = collector.wait_for_span("tools/call")
    assert unknown.attributes["error.type"] == "NOT_FOUND"
    assert unknown.trace_id != TRACE_ID  # a malformed traceparent starts a trace of its own

    operations = collector.wait_for_points("mcp.server.operation.duration")
    assert any(p.attributes.get("gen_ai.tool.name") == "get_job" for p in operations)
    backend = collector.wait_for_points("http.client.request.duration")
    assert {
        (p.attributes["mcp_gateway.backend"], p.attributes["http.response.status_code"])
        for p in backend
    } == {("cockpit", 200)}
    collector.wait_for_points("mcp_gateway.calls.refused")

    proc.terminate()
    proc.wait(timeout=15)
    received = json.dumps([s.__dict__ for s in collector.spans], default=str)
    received += json.dumps([p.__dict__ for p in collector.points])
    assert SECRET not in received
    assert ids.JOB_PROCESSING not in received  # path values stay out; the template is kept


def test_console_exporters_of_a_stdio_gateway_write_to_stderr_only(tmp_path):
    env = _env(OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="console")
    lines = [
        _rpc(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
            1,
        ),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _rpc("tools/call", {"name": "gateway_status", "arguments": {"check_health": False}}, 2),
    ]
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as err:  # a file: a full stderr pipe would stall the server
        proc = subprocess.Popen(
            [sys.executable, str(LAUNCHER)],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    assert proc.stdin is not None and proc.stdout is not None
    for line in lines:
        proc.stdin.write(json.dumps(line).encode() + b"\n")
    proc.stdin.flush()
    # Wait for the call's answer, then close stdin: the server stops and flushes its spans.
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    proc.stdin.close()
    rest = proc.stdout.read()
    assert proc.wait(timeout=30) == 0, errors.read_text()[-2000:]
    assert [a["id"] for a in answers] == [1, 2] and rest == b""
    stderr = errors.read_text()
    assert '"name": "tools/call gateway_status"' in stderr
    assert "mcp.server.operation.duration" in stderr
