#!/usr/bin/env python3
"""What telemetry costs: per call with tracing off and on, and at start-up.

    .venv/bin/python bench/telemetry_bench.py [--calls 1000] [--rounds 3] [--write]

**Per call.** A gateway in this process served through the official SDK server and client in
memory (``Client(server, mode="legacy")``: JSON-RPC framing, no pipes, so the difference is
not drowned by stdio). Three configurations, alternated round by round:

* **baseline**: telemetry off with the SDK's own span middleware put back, as the gateway
  served before telemetry was wired (no provider: the SDK's span is a no-op);
* **off**: the gateway as it serves with telemetry off (``OFF``: the SDK's span removed,
  no-op telemetry calls in the pipeline, the REST client and the jobs store);
* **on**: telemetry on, exporting spans (batch) and metrics (every second) over OTLP/HTTP to a
  collector stand-in on 127.0.0.1 (``gateway.testing.otlp.OtlpCollector``).

Two tools: ``echo`` (trivial, in-process) and the orchestrator plugin's ``get_job`` against
its fake on 127.0.0.1 (one backend request, so one child span and one more metric point).

**Start-up.** ``python -c`` importing the server and building a gateway (no plugins), 10
runs each: telemetry off, off with the SDK made unimportable (a gateway installed without the
``otel`` extra), and on (SDK, exporters, providers).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from mcp import Client
from mcp.server._otel import OpenTelemetryMiddleware
from pydantic import BaseModel, ConfigDict

from gateway import PluginContext, Tier, ToolContext, ToolSpec, __version__, hookimpl
from gateway.errors import Sanitizer
from gateway.server import build_server
from gateway.telemetry import OFF, Telemetry, TelemetrySettings, build_telemetry
from gateway.testing import make_gateway

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

RESULTS = BENCH / "results" / "telemetry.md"
COLLECTOR = """
import sys
from gateway.testing.otlp import OtlpCollector
with OtlpCollector() as c:
    print(c.url, flush=True)
    sys.stdin.read()
    print(len(c.spans), len(c.points), c.requests, flush=True)
"""


class EchoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int


class EchoPlugin:
    __version__ = "1.0"

    @hookimpl
    def register_tools(self, register: Any, plugin: PluginContext[Any]) -> None:
        async def echo(args: EchoArgs, ctx: ToolContext[Any]) -> dict[str, int]:
            return {"y": args.x + 1}

        register(
            ToolSpec(
                name="echo",
                title="Echo",
                description="y = x + 1",
                input_model=EchoArgs,
                handler=echo,
                tier=Tier.READ,
            )
        )


async def per_call(
    mode: str, api_url: str, collector_url: str, calls: int, cwd: Path
) -> dict[str, float]:
    env = {"COCKPIT_API_URL": api_url}
    otel_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector_url, "OTEL_METRIC_EXPORT_INTERVAL": "1000"}

    def telemetry(sanitizer: Sanitizer) -> Telemetry:
        if mode != "on":
            return OFF
        settings = TelemetrySettings.load({"enabled": True}, otel_env)
        return build_telemetry(settings, sanitizer, otel_env, version=__version__)

    gw = make_gateway(
        plugins=["orchestrator", "bench"],
        objects={"bench": EchoPlugin()},
        env=env,
        cwd=cwd,
        telemetry=telemetry,
    )
    server = build_server(gw)
    if mode == "baseline":
        server.middleware[:] = [OpenTelemetryMiddleware()]
    out: dict[str, tuple[float, float]] = {}
    async with Client(server, mode="legacy") as client:
        for tool, args, n in (
            ("echo", {"x": 1}, calls),
            ("get_job", {"job_id": ids.JOB_PROCESSING}, max(1, calls // 4)),
        ):
            for _ in range(20):  # warm-up
                await client.call_tool(tool, args)
            times = []
            cpu = time.process_time()  # every thread of this process: exporters included
            for _ in range(n):
                t0 = time.perf_counter()
                result = await client.call_tool(tool, args)
                times.append(time.perf_counter() - t0)
                assert not result.is_error, result
            cpu = time.process_time() - cpu
            out[tool] = (statistics.median(times) * 1e6, cpu / n * 1e6)
    gw.telemetry.shutdown()
    return out


_BUILD = (
    "import gateway.server\n"
    "from gateway.app import build_gateway\n"
    "from gateway.config import load_config\n"
    "gw = build_gateway(load_config(env={ENV}), entry_points=False)\n"
    "assert gw.telemetry.enabled is {ON}\n"
)
_BLOCK_SDK = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.startswith(('opentelemetry.sdk', 'opentelemetry.exporter')):\n"
    "            raise ImportError(name)\n"
    "sys.meta_path.insert(0, Block())\n"
)
STARTUP = {
    "off": _BUILD.format(ENV="{}", ON=False),
    "off, SDK not installed": _BLOCK_SDK + _BUILD.format(ENV="{}", ON=False),
    "on (SDK + OTLP exporter)": _BUILD.format(ENV="{'MCP_GATEWAY_TELEMETRY': '1'}", ON=True),
}


def startup(runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in STARTUP}
    for _ in range(runs):
        for label, code in STARTUP.items():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
            times[label].append((time.perf_counter() - t0) * 1000)
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--startup-runs", type=int, default=10)
    p.add_argument("--write", action="store_true", help=f"store the report in {RESULTS.name}")
    args = p.parse_args()
    lines = [
        "# Telemetry overhead",
        "",
        f"Written by `bench/telemetry_bench.py` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}. "
        f"Rerun: `.venv/bin/python bench/telemetry_bench.py --calls {args.calls} "
        f"--rounds {args.rounds} --write`. The machine is shared: expect ±25 %.",
        "",
    ]
    modes = ("baseline", "off", "on")
    tools = ("echo", "get_job")
    wall: dict[tuple[str, str], list[float]] = {(m, t): [] for m in modes for t in tools}
    cpu: dict[tuple[str, str], list[float]] = {(m, t): [] for m in modes for t in tools}
    # The collector runs in a process of its own, as a real one would: in this one it would
    # compete with the measured calls for the interpreter lock.
    collector = subprocess.Popen(
        [sys.executable, "-c", COLLECTOR], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert collector.stdin is not None and collector.stdout is not None
    collector_url = collector.stdout.readline().strip()
    with FakeOrchestrator() as api, tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for mode in modes if r % 2 == 0 else tuple(reversed(modes)):
                got = asyncio.run(per_call(mode, api.url, collector_url, args.calls, Path(tmp)))
                for tool, (w, c) in got.items():
                    wall[mode, tool].append(w)
                    cpu[mode, tool].append(c)
                shown = "  ".join(f"{t} {w:6.0f} µs (cpu {c:6.0f})" for t, (w, c) in got.items())
                print(f"round {r + 1} {mode:8} {shown}", flush=True)
    collector.stdin.close()
    spans, points, requests = (int(x) for x in collector.stdout.readline().split())
    collector.wait(timeout=30)
    lines += [
        "## Per call (in-memory MCP client → gateway server → pipeline)",
        "",
        f"{args.calls} `echo` and {max(1, args.calls // 4)} `get_job` calls per round and "
        f"configuration, {args.rounds} rounds in alternating order; figures are the median over "
        "rounds of each round's median wall time, and of each round's process CPU time per call "
        "(all threads: the batch exporter's too; the fake backend's threads are in every "
        f"configuration alike). The collector received {spans} spans and {points} metric "
        f"points in {requests} export requests.",
        "",
        "| tool | | baseline µs | off µs | on µs | off - baseline | on - baseline | on / baseline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for tool in tools:
        for label, table in (("wall", wall), ("CPU", cpu)):
            b, off, on = (statistics.median(table[m, tool]) for m in modes)
            lines.append(
                f"| `{tool}` | {label} | {b:.0f} | {off:.0f} | {on:.0f} | {off - b:+.0f} µs "
                f"| {on - b:+.0f} µs | {on / b:.3f} x |"
            )
    times = startup(args.startup_runs)
    base = statistics.median(times["off"])
    lines += [
        "",
        f"## Start-up (`python -c …`, {args.startup_runs} runs each, alternated)",
        "",
        "| configuration | median ms | min ms | vs off |",
        "|---|---|---|---|",
    ]
    for label, values in times.items():
        med = statistics.median(values)
        lines.append(f"| {label} | {med:.0f} | {min(values):.0f} | {med - base:+.0f} ms |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.write:
        RESULTS.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
