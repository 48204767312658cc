"""Telemetry end to end through the real CLI: ``mcp-gateway serve`` over HTTP and stdio and
``mcp-gateway call``, exporting over real OTLP/HTTP to a collector stand-in
(``gateway.testing.otlp``), and the console exporters of a stdio gateway writing to stderr,
never to the protocol's stdout."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from conftest import gateway_env
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from gateway_queue import store
from mcp import Client, StdioServerParameters
from test_config_errors import _cli, _refused

from gateway.testing.otlp import OtlpCollector, ReceivedSpan

pytestmark = pytest.mark.e2e

TRACE_ID, CLIENT_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
SECRET = "tok-e2e-5d4c3b2a19f8e7d6"
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}
MCP_METHODS = ("initialize", "notifications/", "tools/", "prompts/", "ping")


def _env(collector: OtlpCollector, api: FakeOrchestrator, **extra: str) -> dict[str, str]:
    env = {
        "MCP_GATEWAY_TELEMETRY": "1",
        "MCP_GATEWAY_PLUGINS": "orchestrator",
        "COCKPIT_API_URL": api.url,
        "COCKPIT_API_TOKEN": SECRET,
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_SERVICE_NAME": "gateway-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
    }
    return gateway_env(**{**env, **extra})


def _rpc(method: str, params: dict[str, object], id_: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def _children(collector: OtlpCollector, parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in collector.spans if s.parent_span_id == parent.span_id]


def _received(collector: OtlpCollector) -> str:
    text = json.dumps([s.__dict__ for s in collector.spans], default=str)
    return text + json.dumps([p.__dict__ for p in collector.points])


@pytest.fixture
def backends() -> Iterator[tuple[OtlpCollector, FakeOrchestrator]]:
    with FakeOrchestrator() as api, OtlpCollector() as collector:
        yield collector, api


@pytest.fixture
def http_gateway(tmp_path: Path, backends) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    collector, api = backends
    log = tmp_path / "stderr.txt"
    with log.open("wb") as err:  # a file: a full stderr pipe would stall the server
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--transport", "http", "--port", "0"],
            cwd=tmp_path,
            env=_env(collector, api),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 30
        while "serving MCP at " not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        url = log.read_text().split("serving MCP at ", 1)[1].split("/mcp", 1)[0]
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_call_over_http_with_traceparent_is_one_trace_down_to_the_backend(http_gateway, backends):
    url, proc = http_gateway
    collector, _ = backends
    params = {
        "name": "get_job",
        "arguments": {"job_id": ids.JOB_PROCESSING},
        "_meta": {"traceparent": TRACEPARENT},
    }
    with httpx.Client(base_url=url, headers=MCP_HEADERS, timeout=10) as client:
        # Probes: they run the health checks, and must leave no trace of their own.
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
        answer = client.post("/mcp", json=_rpc("tools/call", params, 7)).json()
        assert answer["result"]["structuredContent"]["id"] == ids.JOB_PROCESSING
        # Secrets where a client controls the text: the request id, the tool name, the trace
        # context and the session header; and in an argument.
        bad = {"name": SECRET, "arguments": {}, "_meta": {"traceparent": SECRET}}
        client.post(
            "/mcp", json=_rpc("tools/call", bad, SECRET), headers={"mcp-session-id": SECRET}
        )
        invalid = {"name": "get_job", "arguments": {"job_id": SECRET}}
        assert client.post("/mcp", json=_rpc("tools/call", invalid, 8)).json()["result"]["isError"]
        # A client that puts its context in the HTTP headers only.
        header_only = {"name": "list_jobs", "arguments": {}}
        other_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        client.post(
            "/mcp",
            json=_rpc("tools/call", header_only, 9),
            headers={"traceparent": f"00-{other_trace}-00f067aa0ba902b7-01"},
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
    listed = collector.wait_for_span("tools/call list_jobs")
    assert (listed.trace_id, listed.parent_span_id) == (other_trace, "00f067aa0ba902b7")

    # Exports come every 200 ms: the first may predate the invalid call's point.
    deadline = time.monotonic() + 10
    operations = collector.wait_for_points("mcp.server.operation.duration")
    while time.monotonic() < deadline and not any(
        p.attributes.get("error.type") == "VALIDATION_ERROR" for p in operations
    ):
        time.sleep(0.05)
        operations = collector.wait_for_points("mcp.server.operation.duration")
    assert any(p.attributes.get("gen_ai.tool.name") == "get_job" for p in operations)
    assert any(p.attributes.get("error.type") == "VALIDATION_ERROR" for p in operations)
    backend = collector.wait_for_points("http.client.request.duration")
    assert {
        (p.attributes["mcp_gateway.backend"], p.attributes["http.response.status_code"])
        for p in backend
    } == {("cockpit", 200)}
    collector.wait_for_points("mcp_gateway.calls.refused")

    proc.terminate()  # a stop signal: the gateway stops, and sends what is pending first
    assert proc.wait(timeout=30) == 0
    # Every span belongs to an MCP request: the probes' requests and health checks made none.
    roots = [s for s in collector.spans if s.parent_span_id in ("", CLIENT_SPAN)]
    roots += [s for s in collector.spans if s.trace_id == other_trace and s.kind == "SERVER"]
    assert roots and all(s.name.startswith(MCP_METHODS) for s in roots), [s.name for s in roots]
    spans = {s.span_id for s in collector.spans}
    assert all(s.parent_span_id in spans for s in collector.spans if s not in roots)
    received = _received(collector)
    assert SECRET not in received
    assert ids.JOB_PROCESSING not in received  # path values stay out; the template is kept


@pytest.mark.anyio
async def test_a_stdio_gateway_exports_a_call_with_its_backend_request_and_sql(tmp_path, backends):
    collector, api = backends
    db = tmp_path / "data" / "capture" / "jobs.db"
    await store.init_store(db)
    env = _env(
        collector, api, MCP_GATEWAY_PLUGINS="orchestrator,queue", COCKPIT_API_REQUEST_TIMEOUT="0.5"
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(tmp_path), env=env
    )
    with anyio.fail_after(90):
        async with Client(params, mode="legacy") as client:
            meta = {"traceparent": TRACEPARENT}
            job = await client.call_tool("get_job", {"job_id": ids.JOB_PROCESSING}, meta=meta)
            assert not job.is_error
            page = await client.call_tool("bulk_read_new_jobs", {})
            assert not page.is_error, page
            api.mode = "hang"
            slow = await client.call_tool("get_job", {"job_id": ids.JOB_PROCESSING})
            assert slow.is_error
    # The client closed stdin: the gateway stopped and sent everything before it exited.
    call = next(
        s for s in collector.spans if s.name == "tools/call get_job" and not s.status_message
    )
    assert (call.trace_id, call.parent_span_id, call.kind) == (TRACE_ID, CLIENT_SPAN, "SERVER")
    assert call.attributes["network.transport"] == "pipe"
    [request] = _children(collector, call)
    assert request.name == "GET /api/jobs/{job_id}"
    assert request.attributes["http.response.status_code"] == 200
    read = collector.wait_for_span("tools/call bulk_read_new_jobs")
    assert read.attributes["mcp_gateway.plugin"] == "queue"
    statements = {s.name for s in _children(collector, read)}
    assert "SELECT jobs" in statements, statements
    assert all(s.attributes["db.system.name"] == "sqlite" for s in _children(collector, read))
    timed_out = [s for s in collector.spans if s.attributes.get("error.type") == "TIMEOUT"]
    assert {s.kind for s in timed_out} == {"SERVER", "CLIENT"}, timed_out
    assert SECRET not in _received(collector)


def test_console_exporters_of_a_stdio_gateway_write_to_stderr_only(tmp_path):
    env = gateway_env(
        MCP_GATEWAY_TELEMETRY="1",
        MCP_GATEWAY_PLUGINS="gateway",
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="console",
    )
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
            [sys.executable, "-m", "gateway.cli", "serve"],
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


def test_a_call_from_the_command_line_is_exported_before_it_exits(tmp_path, backends):
    collector, api = backends
    args = json.dumps({"job_id": ids.JOB_PROCESSING})
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "call", "get_job", "--args", args],
        cwd=tmp_path,
        env=_env(collector, api, OTEL_BSP_SCHEDULE_DELAY="60000"),  # only the stop sends
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["id"] == ids.JOB_PROCESSING
    call = collector.wait_for_span("tools/call get_job", timeout=0)
    assert call.kind == "INTERNAL" and call.parent_span_id == ""
    assert [s.name for s in _children(collector, call)] == ["GET /api/jobs/{job_id}"]


def test_an_unreachable_collector_does_not_hold_the_gateway_at_exit(tmp_path, backends):
    _, api = backends
    # A port nothing listens on; the exporters would retry for 60 s at each of their stops.
    env = gateway_env(
        MCP_GATEWAY_TELEMETRY="1",
        MCP_GATEWAY_PLUGINS="orchestrator",
        COCKPIT_API_URL=api.url,
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
        OTEL_EXPORTER_OTLP_TIMEOUT="60",
    )
    args = json.dumps({"job_id": ids.JOB_PROCESSING})
    # The real command with a 0.5 s wait for the exporters at its stop instead of 5 s.
    cli = (
        "import sys, gateway.app, gateway.cli; gateway.app.TELEMETRY_STOP_SECONDS = 0.5; "
        "sys.exit(gateway.cli.main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", cli, "call", "get_job", "--args", args],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=40,  # the exporters would retry for a minute; the stop does not wait for that
    )
    assert done.returncode == 0, done.stderr
    assert "exporters did not finish within 0.5 s" in done.stderr


MISTAKES = {
    "misspelt telemetry setting": (
        '[telemetry]\nenabled = true\nendpont = "http://127.0.0.1:4318"\n',
        {},
        "gw.toml:3: [telemetry] endpont: unknown setting; did you mean endpoint?",
    ),
    "unknown exporter in the table": (
        '[telemetry]\nenabled = true\ntraces_exporter = ["otlp", "jaeger"]\n',
        {},
        "gw.toml:3: [telemetry] traces_exporter: must be one of otlp, console, none, not 'jaeger'",
    ),
    "endpoint that is not a URL": (
        '[telemetry]\nendpoint = "collector:4318"\n',
        {},
        "gw.toml:2: [telemetry] endpoint: must be an http:// or https:// URL such as "
        "http://127.0.0.1:4318",
    ),
    "telemetry that is not a table": (
        "telemetry = true\n",
        {},
        "gw.toml:1: telemetry must be a table ([telemetry])",
    ),
    "unset $env in [telemetry]": (
        '[telemetry]\nservice_name = { "$env" = "GW_UNSET_SERVICE" }\n',
        {},
        "gw.toml:2: [telemetry] service_name: $env variable GW_UNSET_SERVICE is not set",
    ),
    "bad switch variable": (
        None,
        {"MCP_GATEWAY_TELEMETRY": "maybe"},
        "MCP_GATEWAY_TELEMETRY: must be true or false, not 'maybe'",
    ),
    "bad OTEL variable once telemetry is on": (
        None,
        {"MCP_GATEWAY_TELEMETRY": "1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
        "OTEL_EXPORTER_OTLP_PROTOCOL: must be one of http/protobuf, grpc, not 'http/json'",
    ),
}


@pytest.mark.parametrize("case", list(MISTAKES))
def test_each_telemetry_mistake_refuses_to_start_naming_it(tmp_path, case, cli_main):
    # The settings are read with the rest of the configuration, before serve or any other
    # command does anything: the test process runs the entry point (a refusal's exit code and
    # streams are checked in real processes in test_config_errors).
    toml, env, line = MISTAKES[case]
    for command in (["serve"], ["tools"]):
        refused = _refused(_cli(tmp_path, *command, toml=toml, run=cli_main, **env), tmp_path)
        assert refused == f"mcp-gateway: {line}"


def test_otel_variables_meant_for_another_program_do_not_stop_a_gateway_without_telemetry(
    tmp_path, cli_main
):
    # Claude Code hands its environment to the servers it starts.
    env = {"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}
    args = ("call", "gateway_status", "--args", '{"check_health": false}')
    done = _cli(tmp_path, *args, run=cli_main, **env)
    assert done.returncode == 0, done.stderr


def test_telemetry_on_without_the_sdk_refuses_to_start_with_one_line(
    tmp_path, monkeypatch, cli_main
):
    # An install without the otel extra: opentelemetry.sdk cannot be imported. A package of
    # that name that fails to import stands in for it in the servers' processes; in this one,
    # the import system's marker for a module that is not there.
    shadow = tmp_path / "shadow" / "opentelemetry" / "sdk"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named opentelemetry.sdk')\n")
    path = f"{tmp_path / 'shadow'}:{__import__('os').environ.get('PYTHONPATH', '')}"
    env = {"MCP_GATEWAY_TELEMETRY": "1", "PYTHONPATH": path}
    for name in [m for m in sys.modules if m.startswith("opentelemetry.sdk.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    for command, run in (
        (["serve"], None),
        (["serve", "--transport", "http", "--port", "0"], None),
        (["call", "x"], cli_main),
    ):
        line = _refused(_cli(tmp_path, *command, run=run, **env), tmp_path)
        assert line == (
            "mcp-gateway: telemetry is on but the OpenTelemetry SDK is missing: install it "
            "with: pip install 'mcp-plugin-gateway[otel]'"
        )
    # Commands that run no call export nothing, so they need no SDK.
    listed = _cli(tmp_path, "tools", "--json", run=cli_main, **env)
    assert listed.returncode == 0, listed.stderr
