#!/usr/bin/env python3
"""Per-call overhead of a declarative REST tool over stdio vs the same request made with httpx.

    .venv/bin/python bench/rest_overhead.py [--calls 1000] [--block 50] [--write]

One local API server (its own process, a real HTTP server on 127.0.0.1) answers
``GET /api/jobs/{job_id}`` with the body of the recorded orchestrator exchange
(`GET_api_jobs_{job_id}.json`). Two clients ask for the same job, alternating in blocks
(A B B A …) so that neither pays more of the machine's noise or a cold cache:

* **direct**: ``httpx.Client`` (keep-alive) in this process: request, JSON decode;
* **gateway**: ``mcp-gateway serve`` over stdio with a generated plugin whose only tool is a
  ``RestTool`` for that route (input model with a UUID check, output model with a decoded
  ``JsonString`` field and a ``UtcTimestamp``), called by a raw JSON-RPC client (so the official
  client's own cost is not counted).

The added cost per call is the gateway median minus the direct median (target ≤ 1.5 ms); p95 of
both is printed too. ``--write`` stores the report in ``bench/results/rest.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core_common as c

JOB_ID = "b652cfcb-ecad-42bb-9197-ea9b234dce17"
JOB = {
    "id": JOB_ID,
    "status": "processing",
    "creator_status": "processing",
    "validator_status": "pending",
    "config_name": "researcher",
    "config_override": '{"model": "gpt-x", "temperature": 0.2}',
    "assigned_agent_id": "213e02ed-7c4b-47c1-8dd1-d5f5d78f378c",
    "created_at": "2026-11-22T09:13:45.491628Z",
    "updated_at": "2026-11-22T09:56:45.491628Z",
    "description": "Research current BMF guidance on electronic invoice archiving (E-Rechnung) "
    "and summarise obligations for AP",
    "context": '{"instructions": "cite every source"}',
    "audit_count": None,
}
PLUGIN_MODULE = "gw_bench_rest"
RESULTS = c.BENCH / "results" / "rest.md"
TARGET_MS = 1.5

PLUGIN_SOURCE = '''"""Benchmark plugin: one declarative REST tool, GET /api/jobs/{job_id} (generated)."""
from __future__ import annotations
import re
from typing import Any, ClassVar
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from typing import Annotated
from gateway import Tier, hookimpl
from gateway.rest import JsonString, RestBackend, RestSettings, RestTool, Route, UtcTimestamp

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

def _uuid(v: str) -> str:
    if not _UUID.fullmatch(v):
        raise ValueError("must be a UUID")
    return v

class Settings(RestSettings):
    env_prefix: ClassVar[str] = "BENCH_API"

API = RestBackend(name="bench_api", settings=Settings, settings_table="bench_rest",
                  title="the bench API", health_path="/api/health")

class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: Annotated[str, Field(max_length=36), AfterValidator(_uuid)]

class Job(BaseModel):
    id: str
    status: str
    creator_status: str | None = None
    validator_status: str | None = None
    config_name: str | None = None
    config_override: JsonString = None
    assigned_agent_id: str | None = None
    created_at: UtcTimestamp
    updated_at: UtcTimestamp | None = None
    description: str
    context: JsonString = None
    audit_count: int | None = None

@hookimpl
def register_tools(register: Any) -> None:
    register(RestTool(name="bench_get_job", description="Get a job.", input_model=Args,
                      output_model=Job, tier=Tier.READ, backend=API,
                      route=Route("GET", "/api/jobs/{job_id}", what="job {job_id}")))
'''

SERVER_SOURCE = """
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
BODY = json.dumps(json.loads(sys.argv[1]), separators=(",", ":")).encode()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one write per answer, no 40 ms delayed-ACK stall
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def write_plugin() -> Path:
    folder = c.WORK / "rest-plugin"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{PLUGIN_MODULE}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    info = folder / f"{PLUGIN_MODULE}-0.0.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gw-bench-rest\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(f"[mcp_gateway.plugins]\nbench_rest = {PLUGIN_MODULE}\n")
    for d in (c.RUN_DIR, c.LOG_DIR):
        d.mkdir(parents=True, exist_ok=True)
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="measured calls per client")
    ap.add_argument("--block", type=int, default=50, help="calls per alternating block")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--write", action="store_true", help="write bench/results/rest.md")
    args = ap.parse_args()

    import httpx

    machine = c.Machine()
    server = subprocess.Popen(
        [c.PY, "-c", SERVER_SOURCE, json.dumps(JOB)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        base = f"http://127.0.0.1:{port}"
        folder = write_plugin()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_GATEWAY_", "PYTHON"))}
        env.update(PYTHONPATH=str(folder), MCP_GATEWAY_PLUGINS="bench_rest", BENCH_API_URL=base)
        direct_ns: list[int] = []
        gateway_ns: list[int] = []
        with (
            httpx.Client(base_url=base) as http,
            c.StdioProc([c.PY, "-m", "gateway.cli", "serve"], env, "rest-gateway") as gw,
        ):
            gw.handshake()
            req_id = 0

            def direct_once() -> int:
                t0 = time.perf_counter_ns()
                resp = http.get(f"/api/jobs/{JOB_ID}")
                resp.raise_for_status()
                data = resp.json()
                took = time.perf_counter_ns() - t0
                assert data["id"] == JOB_ID
                return took

            def gateway_once() -> int:
                nonlocal req_id
                req_id += 1
                msg = {
                    "jsonrpc": "2.0",
                    "id": req_id,
                    "method": "tools/call",
                    "params": {"name": "bench_get_job", "arguments": {"job_id": JOB_ID}},
                }
                t0 = time.perf_counter_ns()
                resp, _ = gw.request(msg)
                took = time.perf_counter_ns() - t0
                result = resp.get("result") or {}
                if result.get("isError") or result["structuredContent"]["id"] != JOB_ID:
                    raise AssertionError(f"bad result: {json.dumps(resp)[:300]}")
                assert result["structuredContent"]["context"] == {
                    "instructions": "cite every source"
                }
                return took

            for _ in range(args.warmup):
                direct_once()
                gateway_once()
            blocks = max(1, args.calls // args.block)
            for i in range(blocks):
                order = (direct_once, gateway_once) if i % 2 == 0 else (gateway_once, direct_once)
                for fn in order:
                    sink = direct_ns if fn is direct_once else gateway_ns
                    sink.extend(fn() for _ in range(args.block))
    finally:
        server.terminate()
        server.wait(5)

    d_med, g_med = statistics.median(direct_ns), statistics.median(gateway_ns)
    d_p95, g_p95 = c.percentile(direct_ns, 95), c.percentile(gateway_ns, 95)
    added = (g_med - d_med) / 1e6
    ok = added <= TARGET_MS
    lines = [
        "# REST kit: per-call overhead of a declarative tool over stdio",
        "",
        "Written by `bench/rest_overhead.py`. Both clients ask one local API server (its own "
        "process) for the same job, alternating in blocks of "
        f"{args.block} calls (A B B A …), {len(direct_ns)} measured calls each after "
        f"{args.warmup} warm-up calls each.",
        "",
        c.facts_line(".venv/bin/python bench/rest_overhead.py --write", machine).rstrip("\n"),
        f"- httpx {c.package_version('httpx')}",
        "",
        "| path | median µs | p95 µs |",
        "|---|---|---|",
        f"| direct `httpx.Client` GET + JSON decode | {c.fmt_us(d_med)} | {c.fmt_us(d_p95)} |",
        f"| `RestTool` over stdio (raw JSON-RPC client → gateway → httpx) | {c.fmt_us(g_med)} | "
        f"{c.fmt_us(g_p95)} |",
        f"| **added by the gateway** | **{added * 1000:.0f} µs** ({added:.4f} ms) | "
        f"{(g_p95 - d_p95) / 1e3:.0f} µs |",
        "",
        f"Target: added median ≤ {TARGET_MS} ms → **{c.verdict(ok)}** (unrounded: {added:.6f} ms).",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.write:
        RESULTS.write_text(report, encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
