#!/usr/bin/env python3
"""What the orchestrator plugin's table and search tools add on top of the HTTP they send.

    .venv/bin/python bench/orchestrator_shaping.py [--calls 200] [--block 20] [--write]

``query_table`` and ``search_audit`` do real work after the request: rows are decoded (JSON
columns), masked (credentials, URL passwords) and cut to a text budget; the search pages through
the trail and tests every text of every entry. A fake orchestrator (its own process, a real HTTP
server on 127.0.0.1; 1,215 requirements, 2,000 audit entries) answers both clients, alternating
in blocks (A B B A …):

* **direct**: ``httpx.AsyncClient`` (keep-alive) GETs the same page(s) and decodes the JSON; for
  the search, it pages through the whole trail and tests ``needle in json.dumps(entry).lower()``;
* **gateway**: the tool called through the gateway's call pipeline in this process (validation,
  breaker, handler, output model, JSON text of the result), so stdio is not counted (the REST
  kit's per-call cost over stdio is ``bench/rest_overhead.py``).

``--write`` stores the report in ``bench/results/orchestrator.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core_common as c

RESULTS = c.BENCH / "results" / "orchestrator.md"
JOB = "2e6d7c34-307a-4a63-b346-d2c6e1d84333"  # the seeded completed job: its trail is ours
ENTRIES = 2_000

SERVER = f"""
import sys, time
from datetime import timedelta
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
api = FakeOrchestrator(mongo=True).start()
start = api.state.now() - timedelta(days=1)
for i in range(1200):
    api.state.add_requirement(ids.JOB_CREATED, f"Requirement {{i}}: " + "shall " * 40,
                              created_at=start + timedelta(seconds=i),
                              source_location={{"page": i, "section": "1.2"}})
for i in range({ENTRIES}):
    if i % 2:
        api.state.add_audit_entry("{JOB}", "tool", tool={{"name": "read_file",
                                  "arguments": {{"path": f"notes/{{i}}.md"}}}}, result="ok " * 50)
    else:
        api.state.add_audit_entry("{JOB}", "llm", content=f"step {{i}}: " + "thinking " * 60)
print(api.url, flush=True)
sys.stdin.read()
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200, help="measured calls per client and case")
    ap.add_argument("--block", type=int, default=20, help="calls per alternating block")
    ap.add_argument("--write", action="store_true", help="write bench/results/orchestrator.md")
    args = ap.parse_args()
    machine = c.Machine()
    server = subprocess.Popen(
        [c.PY, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        rows = anyio.run(measure, url, args)
    finally:
        server.terminate()
        server.wait(5)
    lines = [
        "# Orchestrator: the work `query_table` and `search_audit` add",
        "",
        "Written by `bench/orchestrator_shaping.py`. A fake orchestrator in its own process answers "
        "both clients; the tool runs through the gateway's call pipeline in-process (stdio is "
        "`rest.md`'s), the baseline is `httpx` plus `json` on the same page(s), alternating in "
        f"blocks of {args.block} calls.",
        "",
        c.facts_line(".venv/bin/python bench/orchestrator_shaping.py --write", machine).rstrip(
            "\n"
        ),
        "",
        "| case | calls | direct median | tool median | added | ratio |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.write:
        RESULTS.write_text(report, encoding="utf-8")
    return 0


async def measure(url: str, args: argparse.Namespace) -> list[str]:
    import httpx

    from gateway.testing import make_gateway

    gw = make_gateway(
        plugins=["orchestrator"], env={"COCKPIT_API_URL": url}, cwd=Path(tempfile.mkdtemp())
    )
    rows: list[str] = []
    async with gw, httpx.AsyncClient(base_url=url) as http:

        def tool(name: str, arguments: dict[str, object]) -> Callable[[], Awaitable[None]]:
            async def once() -> None:
                result = await gw.call(name, arguments)
                assert not result.is_error, result.payload
                result.text()  # the JSON text a transport sends

            return once

        def table(page: int, size: int) -> Callable[[], Awaitable[None]]:
            async def once() -> None:
                resp = await http.get(
                    "/api/tables/requirements", params={"page": page, "pageSize": size}
                )
                assert resp.json()["rows"]

            return once

        async def scan() -> None:
            page, found = 1, 0
            while True:
                resp = await http.get(
                    f"/api/jobs/{JOB}/audit",
                    params={"page": page, "pageSize": 100, "filter": "all"},
                )
                data = resp.json()
                found += sum("no such text" in json.dumps(e).lower() for e in data["entries"])
                if not data["hasMore"]:
                    break
                page += 1
            assert found == 0

        cases = [
            (
                "`query_table` 50 rows (offset 0: one page of 50)",
                table(1, 50),
                tool("query_table", {"table_name": "requirements", "limit": 50}),
                args.calls,
            ),
            (
                "`query_table` 50 rows at offset 7 (one page of 57, sliced)",
                table(1, 57),
                tool("query_table", {"table_name": "requirements", "limit": 50, "offset": 7}),
                args.calls,
            ),
            (
                "`query_table` limit 500 (texts cut; the leading rows that fit 60,000 characters)",
                table(1, 500),
                tool("query_table", {"table_name": "requirements", "limit": 500}),
                max(10, args.calls // 5),
            ),
            (
                f"`search_audit` through {ENTRIES:,} entries (20 pages), no match",
                scan,
                tool("search_audit", {"job_id": JOB, "query": "no such text"}),
                max(10, args.calls // 10),
            ),
        ]
        for label, direct, gateway, calls in cases:
            for _ in range(3):  # warm-up
                await direct()
                await gateway()
            times: dict[str, list[int]] = {"direct": [], "gateway": []}
            blocks = max(1, calls // args.block)
            for i in range(blocks):
                order = [("direct", direct), ("gateway", gateway)]
                for kind, fn in order if i % 2 == 0 else order[::-1]:
                    for _ in range(min(args.block, calls)):
                        t0 = time.perf_counter_ns()
                        await fn()
                        times[kind].append(time.perf_counter_ns() - t0)
            d, g = statistics.median(times["direct"]), statistics.median(times["gateway"])
            rows.append(
                f"| {label} | {len(times['gateway'])} | {d / 1e6:.1f} ms | {g / 1e6:.1f} ms | "
                f"{(g - d) / 1e6:+.1f} ms | {c.ratio(g, d):.2f} \u00d7 |"
            )
            print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
