"""The [telemetry] table and the OTEL_* variables; what telemetry costs when it is off."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from gateway.errors import Sanitizer
from gateway.telemetry import (
    OFF,
    TelemetryError,
    TelemetrySettings,
    build_telemetry,
    header_secrets,
)


def test_off_unless_switched_on_even_with_otel_variables_set():
    # A client may pass its own OTEL_* variables to the servers it starts.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_METRICS_EXPORTER": "otlp"}
    assert not TelemetrySettings.load(None, env).active
    assert TelemetrySettings.load(None, {**env, "MCP_GATEWAY_TELEMETRY": "1"}).active
    assert TelemetrySettings.load({"enabled": True}, {}).active
    assert not TelemetrySettings.load({"enabled": True}, {"MCP_GATEWAY_TELEMETRY": "off"}).active


def test_otel_sdk_disabled_wins():
    settings = TelemetrySettings.load({"enabled": True}, {"OTEL_SDK_DISABLED": "true"})
    assert not settings.active
    assert build_telemetry(settings, Sanitizer(), {}, version="0") is OFF


def test_exporters_come_from_the_variables_before_the_table():
    table = {"enabled": True, "traces_exporter": ["console"], "metrics_exporter": "otlp"}
    settings = TelemetrySettings.load(table, {})
    assert settings.exporters("traces") == ("console",)
    assert settings.exporters("metrics") == ("otlp",)
    env = {"OTEL_TRACES_EXPORTER": "otlp, console", "OTEL_METRICS_EXPORTER": "none"}
    settings = TelemetrySettings.load(table, env)
    assert settings.exporters("traces") == ("otlp", "console")
    assert settings.exporters("metrics") == ()


def test_endpoints_follow_the_otlp_variable_rules():
    table = {"enabled": True, "endpoint": "http://collector.local:4318/"}
    settings = TelemetrySettings.load(table, {})
    assert settings.otlp_endpoint("traces", {}) == "http://collector.local:4318/v1/traces"
    assert settings.otlp_endpoint("metrics", {}) == "http://collector.local:4318/v1/metrics"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example:443"}
    settings = TelemetrySettings.load(table, env)
    assert settings.otlp_endpoint("traces", env) == "https://otel.example:443/v1/traces"
    own = {**env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces.example/custom"}
    assert settings.otlp_endpoint("traces", own) == "http://traces.example/custom"
    assert settings.otlp_endpoint("metrics", own) == "https://otel.example:443/v1/metrics"
    default = TelemetrySettings.load(None, {})
    assert default.otlp_endpoint("traces", {}) == "http://localhost:4318/v1/traces"
    on = {"MCP_GATEWAY_TELEMETRY": "1"}
    grpc = TelemetrySettings.load(None, {**on, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert grpc.otlp_endpoint("traces", {}) == "http://localhost:4317"


ON = {"MCP_GATEWAY_TELEMETRY": "1"}


@pytest.mark.parametrize(
    ("table", "env", "line"),
    [
        (
            None,
            {**ON, "OTEL_TRACES_EXPORTER": "jaeger"},
            "OTEL_TRACES_EXPORTER: must be one of otlp, console, none, not 'jaeger'",
        ),
        (
            None,
            {**ON, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:pw@"},
            # The value is not shown: an endpoint may carry credentials.
            "OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:// or https:// URL such as "
            "http://127.0.0.1:4318",
        ),
        (
            None,
            {**ON, "OTEL_EXPORTER_OTLP_PROTOCOL": "grcp"},
            "OTEL_EXPORTER_OTLP_PROTOCOL: must be one of http/protobuf, grpc, not 'grcp'; "
            "did you mean grpc?",
        ),
        (None, {"MCP_GATEWAY_TELEMETRY": "maybe"}, "MCP_GATEWAY_TELEMETRY: must be true or false"),
        (
            None,
            {**ON, "OTEL_METRIC_EXPORT_INTERVAL": "0"},
            "OTEL_METRIC_EXPORT_INTERVAL: must be a whole number greater than 0, not '0'",
        ),
        (
            {"sample_everything": True},
            {},
            "[telemetry] sample_everything: unknown setting",
        ),
        (
            {"enabled": True, "metrics_exporter": ["otlp", "prometheus"]},
            {},
            "[telemetry] metrics_exporter: must be one of otlp, console, none, not 'prometheus'",
        ),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_setting_and_its_source(table, env, line):
    with pytest.raises(TelemetryError) as caught:
        TelemetrySettings.load(table, env)
    assert str(caught.value).startswith(line), str(caught.value)
    assert "user:pw" not in str(caught.value)


def test_otel_variables_are_read_only_once_telemetry_is_on():
    # Values meant for another program that the client started the gateway next to.
    env = {"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_OTLP_ENDPOINT": "nope"}
    assert not TelemetrySettings.load(None, env).active
    with pytest.raises(TelemetryError, match=r"^OTEL_"):
        TelemetrySettings.load({"enabled": True}, env)
    # The kill switch makes the others irrelevant too.
    off = TelemetrySettings.load({"enabled": True}, {**env, "OTEL_SDK_DISABLED": "true"})
    assert not off.active


def test_exporter_header_values_are_secrets_for_the_sanitizer():
    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=abc123secretvalue,x-team=core%20team",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Basic%20dXNlcjpwYXNz",
    }
    secrets = header_secrets(env)
    assert secrets == ["abc123secretvalue", "core team", "Basic dXNlcjpwYXNz"]
    sanitizer = Sanitizer(secrets)
    assert "abc123secretvalue" not in sanitizer("export failed: key abc123secretvalue refused")


def test_console_exporters_write_to_stderr(capsys):
    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console"}
    settings = TelemetrySettings.load({"enabled": True}, env)
    telemetry = build_telemetry(settings, Sanitizer(), env, version="0")
    with telemetry.tool_call("gateway_status") as call:
        call.describe("gateway_status", plugin="gateway", tier="read", timeout=30, backend=None)
        call.finish(None)
    telemetry.shutdown()
    out, err = capsys.readouterr()
    assert out == ""
    assert '"name": "tools/call gateway_status"' in err
    assert "mcp.server.operation.duration" in err


def test_missing_sdk_or_exporter_is_a_clear_error(monkeypatch):
    on = TelemetrySettings.load({"enabled": True}, {})
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc", None)
    grpc = TelemetrySettings.load({"enabled": True, "protocol": "grpc"}, {})
    with pytest.raises(TelemetryError, match="opentelemetry-exporter-otlp-proto-grpc is missing"):
        build_telemetry(grpc, Sanitizer(), {}, version="0")
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(TelemetryError, match=r"pip install 'mcp-plugin-gateway\[otel\]'"):
        build_telemetry(on, Sanitizer(), {}, version="0")


def _loaded_after(code: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with ``prefixes`` that running ``code`` in a fresh interpreter
    imported."""
    code += f"\nprint([m for m in __import__('sys').modules if m.startswith({prefixes!r})])\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return list(ast.literal_eval(out.stdout.strip().splitlines()[-1]))


def test_a_gateway_without_telemetry_never_imports_opentelemetry():
    # What `mcp-gateway call` and `health` do: build, start, call, stop; no MCP server.
    code = (
        "import anyio\n"
        "from gateway.testing import make_gateway\n"
        "gw = make_gateway(plugins=['queue'], env={'OTEL_TRACES_EXPORTER': 'otlp'})\n"
        "async def main():\n"
        "    async with gw:\n"
        "        return await gw.call('bulk_read_new_jobs', {})\n"
        "anyio.run(main)"
    )
    assert _loaded_after(code, ("opentelemetry",)) == []


def test_off_never_imports_the_sdk():
    code = (
        "import gateway.server, gateway.telemetry as t\n"
        "from gateway.errors import Sanitizer\n"
        "s = t.TelemetrySettings.load({}, {'OTEL_TRACES_EXPORTER': 'otlp'})\n"
        "telemetry = t.build_telemetry(s, Sanitizer(), {}, version='0')\n"
        "assert telemetry is t.OFF\n"
        "with telemetry.tool_call('x') as call: call.finish('TIMEOUT')"
    )
    sdk = ("opentelemetry.sdk", "opentelemetry.exporter", "google.protobuf", "requests")
    assert _loaded_after(code, sdk) == []
