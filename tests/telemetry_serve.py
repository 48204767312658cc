"""Serve a gateway with telemetry wired from outside (tests/telemetry_harness.py), over stdio
(no argument) or HTTP (``http PORT``), configured like ``mcp-gateway serve`` by the
environment. Telemetry is flushed and stopped when serving ends."""

from __future__ import annotations

import contextlib
import sys

import anyio
from telemetry_harness import trace_pipeline, traced_rest_client, traced_servers

from gateway.app import build_gateway
from gateway.config import load_config
from gateway.logs import configure_logging
from gateway.stdio import protected_stdio, stdout_to_stderr
from gateway.telemetry import TelemetrySettings, build_telemetry


def main(argv: list[str]) -> int:
    config = load_config()
    http = argv[:1] == ["http"]
    with protected_stdio() if not http else stdout_to_stderr() as wire:
        gw = build_gateway(config)
        configure_logging(gw.sanitizer, level=config.log_level)
        settings = TelemetrySettings.load({}, config.env)
        telemetry = build_telemetry(settings, gw.sanitizer, config.env, install_global=True)
        trace_pipeline(gw, telemetry)
        try:
            with traced_rest_client(), traced_servers(telemetry):
                if http:
                    from gateway.http import serve_http

                    serve_http(gw, host="127.0.0.1", port=int(argv[1]))
                else:
                    from gateway.server import serve_stdio

                    with contextlib.suppress(KeyboardInterrupt):
                        anyio.run(serve_stdio, gw, wire)
        finally:
            telemetry.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
