"""Queue plugin benchmarks on a large legacy-shaped jobs database.

    .venv/bin/python bench/queue_bench.py                    # 1,000,000 jobs (~8 GB, built once)
    .venv/bin/python bench/queue_bench.py --rows 100000      # a smaller run

Data (``bench/jobs_data.py``): records shaped like users' files (~3 KB descriptions,
``payload_json`` repeating the record, day and microsecond ``captured_at``, a few NULLs, 30 %
``new``), built once under ``bench/.work/queue/`` (git-ignored) as ``legacy_<rows>.db`` (no page
index, as users have it) and copied to ``indexed_<rows>.db``, where the store creates the page
index. Both are reused while they exist; every run measures and prints what the files hold.

1. Page latency, ``limit=1000``, first / middle / last page, through the in-process gateway
   pipeline: this store (aiosqlite) against the previous store (sqlite3 in worker threads, the
   plugin as it was at ``bench_method.SQLITE3_STORE_REV``), A B B A at every position. Targets:
   this store within 10 % of the previous one; last page <= 1.5 x first.
2. Draining every new job with ``limit=1000``: raw ``sqlite3`` keyset queries in-process, the
   tool in-process, a real ``mcp-gateway serve`` over stdio with a minimal JSON-RPC client and
   with the official client. One discarded warm-up drain of each, then rotated order per round.
3. ``bulk_update_job_status`` with 100 items: raw sqlite3, in-process pipeline and stdio, the
   order rotated for every batch.

Writes ``bench/results/queue.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from bench_method import (
    SQLITE3_STORE_REV,
    WORK,
    abba,
    load_before,
    machine,
    ratio_text,
    rotations,
    verdict,
)
from gateway_queue.cursor import encode_cursor
from jobs_data import describe, describe_text, legacy_file, store

ROOT = Path(__file__).resolve().parent.parent
QUEUE = WORK / "queue"
RESULTS = ROOT / "bench" / "results" / "queue.md"
LIMIT = 1000
PAGE_TARGET = 1.10  # this store / the sqlite3 store, per page position (issue 14)


def indexed_file(legacy: Path, rows: int) -> tuple[Path, str]:
    path = QUEUE / f"indexed_{rows}.db"
    if path.exists() and PAGE_INDEX in describe_indexes(path):
        return path, "reused from an earlier run"
    print(f"copying to {path.name} and creating the page index ...", file=sys.stderr)
    tmp = path.with_suffix(".copying")
    shutil.copyfile(legacy, tmp)
    started = time.perf_counter()
    anyio.run(store.create_page_index, tmp)
    took = time.perf_counter() - started
    tmp.rename(path)
    return path, f"copied and indexed in this run (index in {took:.0f} s)"


PAGE_INDEX = store.PAGE_INDEX_NAME


def describe_indexes(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")]
    finally:
        conn.close()


# --- raw baseline ------------------------------------------------------------------------------


def raw_drain(path: Path) -> tuple[float, list[tuple[Any, int]]]:
    """Every new job by the same keyset queries in raw sqlite3; returns (seconds, keysets)."""
    started = time.perf_counter()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    keys: list[tuple[Any, int]] = []
    after: tuple[Any, int] | None = None
    while True:
        if after is None:
            rows = conn.execute(store.PAGE_QUERY_FIRST, (LIMIT + 1,)).fetchall()
        elif after[0] is None:
            rows = conn.execute(store.PAGE_QUERY_NULLS, (after[1], LIMIT + 1)).fetchall()
        else:
            rows = conn.execute(store.PAGE_QUERY_AFTER_VALUE, (*after, LIMIT + 1)).fetchall()
            if len(rows) <= LIMIT:
                rows += conn.execute(
                    store.PAGE_QUERY_NULLS, (2**63 - 1, LIMIT + 1 - len(rows))
                ).fetchall()
        page = rows[:LIMIT]
        keys += [(r[-1], r[0]) for r in page]
        if len(rows) <= LIMIT:
            break
        after = (page[-1][-1], page[-1][0])
    conn.close()
    return time.perf_counter() - started, keys


def query_plans(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = []
    for name, sql, params in (
        ("first page", store.PAGE_QUERY_FIRST, (LIMIT + 1,)),
        ("after a cursor", store.PAGE_QUERY_AFTER_VALUE, ("2025-11-01T00:00:00Z", 5, LIMIT + 1)),
        ("NULL captured_at part", store.PAGE_QUERY_NULLS, (5, LIMIT + 1)),
    ):
        plan = " / ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
        out.append((name, plan))
    conn.close()
    return out


# --- through the gateway -----------------------------------------------------------------------


def gateway(db_name: str, *, before: bool = False, read_only: bool = True) -> Any:
    from gateway.testing import make_gateway

    env = {"JOBS_DB_PATH": db_name, "JOBS_DB_AUTO_INDEX": "0"}
    if before:
        load_before(SQLITE3_STORE_REV, "plugins/queue/gateway_queue", "gwq_sqlite3")
        old = importlib.import_module("gwq_sqlite3.plugin")
        return make_gateway(
            objects={"queue": old}, entry_points=False, cwd=QUEUE, env=env, read_only=read_only
        )
    return make_gateway(plugins=["queue"], cwd=QUEUE, env=env, read_only=read_only)


async def page_latencies(
    db_name: str, cursors: dict[str, str | None], repeats: int
) -> dict[str, dict[str, list[float]]]:
    """{position: {"after": [...], "before": [...]}}, A B B A at every position."""
    gws = {"after": gateway(db_name), "before": gateway(db_name, before=True)}
    out: dict[str, dict[str, list[float]]] = {k: {"after": [], "before": []} for k in cursors}
    async with gws["after"], gws["before"]:
        for cursor in cursors.values():  # one warm-up call each, not counted
            args: dict[str, Any] = {"limit": LIMIT} | ({"cursor": cursor} if cursor else {})
            for gw in gws.values():
                await gw.call("bulk_read_new_jobs", args)
        for order in abba(repeats * 2):
            for name, cursor in cursors.items():
                args = {"limit": LIMIT} | ({"cursor": cursor} if cursor else {})
                for which in order:
                    key = "after" if which == "A" else "before"
                    t0 = time.perf_counter()
                    result = await gws[key].call("bulk_read_new_jobs", args)
                    out[name][key].append(time.perf_counter() - t0)
                    assert not result.is_error and result.payload["count"] == LIMIT, result.payload
    return out


async def pipeline_drain(db_name: str) -> tuple[float, int]:
    gw = gateway(db_name)
    n = 0
    async with gw:
        t0 = time.perf_counter()
        cursor = None
        while True:
            args: dict[str, Any] = {"limit": LIMIT} | ({"cursor": cursor} if cursor else {})
            page = (await gw.call("bulk_read_new_jobs", args)).payload
            n += page["count"]
            if not page["has_more"]:
                break
            cursor = page["next_cursor"]
        return time.perf_counter() - t0, n


def stdio_params(db_name: str, **extra: str) -> Any:
    from mcp import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")}
    env.update(MCP_GATEWAY_PLUGINS="queue", JOBS_DB_PATH=db_name, JOBS_DB_AUTO_INDEX="0", **extra)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(QUEUE), env=env
    )


async def stdio_drain(db_name: str) -> tuple[float, int]:
    from mcp import Client

    n = 0
    async with Client(stdio_params(db_name), mode="legacy", read_timeout_seconds=300) as client:
        await client.list_tools()
        t0 = time.perf_counter()
        cursor = None
        while True:
            args: dict[str, Any] = {"limit": LIMIT} | ({"cursor": cursor} if cursor else {})
            page = await client.call_tool("bulk_read_new_jobs", args)
            assert not page.is_error, page.structured_content
            n += page.structured_content["count"]
            if not page.structured_content["has_more"]:
                break
            cursor = page.structured_content["next_cursor"]
        return time.perf_counter() - t0, n


MESSAGE_BYTES: list[float] = []  # mean bytes of one tools/call response line, per drain


def minimal_stdio_drain(db_name: str) -> tuple[float, int]:
    """The same drain over the same stdio server with a minimal JSON-RPC client (readline +
    json.loads, no schema validation): the server and pipe cost without the SDK client's."""
    params = stdio_params(db_name)
    proc = subprocess.Popen(
        [params.command, *params.args],
        cwd=params.cwd,
        env=params.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(msg: dict[str, Any]) -> None:
        stdin.write(json.dumps(msg).encode() + b"\n")
        stdin.flush()

    received = [0]

    def answer(req_id: int) -> dict[str, Any]:
        while True:
            line = stdout.readline()
            received[0] += len(line)
            msg = json.loads(line)
            if msg.get("id") == req_id:
                return msg  # type: ignore[no-any-return]

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "queue-bench", "version": "0"},
                },
            }
        )
        answer(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        n, req, cursor = 0, 1, None
        received[0] = 0
        t0 = time.perf_counter()
        while True:
            args: dict[str, Any] = {"limit": LIMIT} | ({"cursor": cursor} if cursor else {})
            send(
                {
                    "jsonrpc": "2.0",
                    "id": req,
                    "method": "tools/call",
                    "params": {"name": "bulk_read_new_jobs", "arguments": args},
                }
            )
            page = answer(req)["result"]["structuredContent"]
            req += 1
            n += page["count"]
            if not page["has_more"]:
                break
            cursor = page["next_cursor"]
        elapsed = time.perf_counter() - t0
        MESSAGE_BYTES.append(received[0] / (req - 1))
        return elapsed, n
    finally:
        stdin.close()
        proc.wait(timeout=30)


def update_batches(path: Path, runs: int) -> list[list[dict[str, Any]]]:
    """Distinct batches of 100 non-new jobs, re-set to their own status (reads stay the same)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = conn.execute(
        "SELECT id, status FROM jobs WHERE status = 'reviewed' LIMIT ?", (100 * runs,)
    ).fetchall()
    conn.close()
    return [[{"id": i, "status": s} for i, s in rows[k * 100 : (k + 1) * 100]] for k in range(runs)]


def raw_update(path: Path, batch: list[dict[str, Any]]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    ids = [u["id"] for u in batch]
    conn.execute(f"SELECT id FROM jobs WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall()
    conn.executemany(
        "UPDATE jobs SET status = ?, updated_at = ? WHERE id = ?",
        [(u["status"], store.utc_now(), u["id"]) for u in batch],
    )
    conn.execute("COMMIT")
    conn.close()


async def update_latencies(db_name: str, path: Path, runs: int) -> dict[str, list[float]]:
    from mcp import Client

    batches = update_batches(path, runs + 1)
    out: dict[str, list[float]] = {"raw sqlite3": [], "pipeline": [], "stdio": []}
    gw = gateway(db_name, read_only=False)
    async with (
        gw,
        Client(stdio_params(db_name), mode="legacy", read_timeout_seconds=60) as client,
    ):
        await client.list_tools()

        async def run(method: str, batch: list[dict[str, Any]]) -> None:
            if method == "raw sqlite3":
                raw_update(path, batch)
            elif method == "pipeline":
                r = await gw.call("bulk_update_job_status", {"updates": batch})
                assert r.payload.get("updated_count") == 100, r.payload
            else:
                res = await client.call_tool("bulk_update_job_status", {"updates": batch})
                assert res.structured_content["updated_count"] == 100, res.structured_content

        for method in out:  # warm-up, not counted
            await run(method, batches[0])
        for batch, order in zip(batches[1:], rotations(list(out), runs), strict=True):
            for method in order:
                t0 = time.perf_counter()
                await run(method, batch)
                out[method].append(time.perf_counter() - t0)
    return out


# --- report ------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="jobs in the database")
    p.add_argument("--repeats", type=int, default=15, help="A B B A pairs per page position")
    p.add_argument("--update-runs", type=int, default=30, help="100-item update calls")
    p.add_argument("--drains", type=int, default=3, help="full drains per method")
    args = p.parse_args()

    QUEUE.mkdir(parents=True, exist_ok=True)
    machine_facts = machine()
    legacy, legacy_origin = legacy_file(QUEUE, args.rows)
    indexed, indexed_origin = indexed_file(legacy, args.rows)
    facts = describe(indexed)
    db_name = indexed.name
    print("warm-up drain and keysets ...", file=sys.stderr)
    raw_drain(indexed)
    _, keys = raw_drain(indexed)
    n_new = len(keys)

    def cursor_before(k: int) -> str | None:
        if k == 0:
            return None
        cap, ident = keys[k - 1]
        return encode_cursor(store.Keyset(captured_at=cap, id=ident))

    positions = {"first": 0, "middle": (n_new // 2 // LIMIT) * LIMIT, "last": n_new - LIMIT}
    cursors = {name: cursor_before(k) for name, k in positions.items()}
    print("page latencies ...", file=sys.stderr)
    lat = anyio.run(page_latencies, db_name, cursors, args.repeats)
    med = {k: {m: statistics.median(v) for m, v in d.items()} for k, d in lat.items()}
    plans = query_plans(indexed)

    print("drains ...", file=sys.stderr)
    methods = ["raw", "pipeline", "minimal stdio", "stdio"]
    drains: dict[str, list[float]] = {m: [] for m in methods}

    def drain(method: str) -> float:
        if method == "raw":
            return raw_drain(indexed)[0]
        if method == "pipeline":
            t, n = anyio.run(pipeline_drain, db_name)
        elif method == "minimal stdio":
            t, n = minimal_stdio_drain(db_name)
        else:
            t, n = anyio.run(stdio_drain, db_name)
        assert n == n_new, (method, n, n_new)
        return t

    for method in methods:  # warm-up round, discarded
        drain(method)
    MESSAGE_BYTES.clear()
    for order in rotations(methods, args.drains):
        for method in order:
            drains[method].append(drain(method))
    dmed = {m: statistics.median(v) for m, v in drains.items()}

    print("updates ...", file=sys.stderr)
    upd = anyio.run(update_latencies, db_name, indexed, args.update_runs)
    upd_med = {k: statistics.median(v) for k, v in upd.items()}

    ratios = {k: med[k]["after"] / med[k]["before"] for k in med}
    worst = max(ratios.values())
    last_first = med["last"]["after"] / med["first"]["after"]
    drain_ratio = dmed["stdio"] / dmed["raw"]
    pages = -(-n_new // LIMIT)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    cmd = f".venv/bin/python bench/queue_bench.py --rows {args.rows} --repeats {args.repeats} "
    cmd += f"--update-runs {args.update_runs} --drains {args.drains}"
    lines = [
        "# Queue plugin benchmarks: paging, draining and status updates on a large jobs database",
        "",
        "Written by `bench/queue_bench.py`. Every ratio compares figures from the same run, "
        "measured alternately; verdicts are computed on the unrounded ratios. The machine is "
        "shared (2 cores), so expect run-to-run variation of about ±25%.",
        "",
        f"- Date: {now}; {machine_facts}",
        f"- Rerun: `{cmd}`",
        f"- Database (`{db_name}`, measured now): {describe_text(facts)}.",
        f"- Origin: the legacy-shaped file `{legacy.name}` (no page index, as users have it) "
        f"was {legacy_origin}; `{db_name}` is a copy where the store created the page index, "
        f"{indexed_origin}. One discarded raw drain warmed the page cache before anything was "
        "timed.",
        "",
        "## Summary",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| page latency at `limit=1000`: this store (aiosqlite) within 10 % of the previous "
        f"sqlite3 store, every position (issue 14) | worst position "
        f"{ratio_text(worst, PAGE_TARGET, digits=3)} x (first "
        f"{ratio_text(ratios['first'], PAGE_TARGET, digits=3)} x, middle "
        f"{ratio_text(ratios['middle'], PAGE_TARGET, digits=3)} x, last "
        f"{ratio_text(ratios['last'], PAGE_TARGET, digits=3)} x) | "
        f"{verdict(worst <= PAGE_TARGET)} |",
        f"| page latency at `limit=1000`: last <= 1.5 x first | {ms(med['last']['after'])} / "
        f"{ms(med['first']['after'])} ms = {ratio_text(last_first, 1.5)} x | "
        f"{verdict(last_first <= 1.5)} |",
        f"| drain all new jobs: MCP stdio <= 2 x raw sqlite3 keyset | {dmed['stdio']:.2f} / "
        f"{dmed['raw']:.2f} s = {ratio_text(drain_ratio, 2.0, digits=1)} x (official client); "
        f"{ratio_text(dmed['minimal stdio'] / dmed['raw'], 2.0, digits=1)} x (minimal client); "
        f"tool in-process {dmed['pipeline'] / dmed['raw']:.2f} x | "
        f"{verdict(drain_ratio <= 2, miss='MISSED')} (see section 2) |",
        f"| `bulk_update_job_status`, 100 items: median latency | {ms(upd_med['stdio'])} ms "
        f"over stdio ({ms(upd_med['raw sqlite3'])} ms raw) | reported |",
        "",
        "## 1. Page latency (`limit=1000`, in-process pipeline): aiosqlite store against the "
        "sqlite3 store",
        "",
        f"Each call is validation + handler (open read-only, keyset query, close) + shaping of "
        f'1000 jobs. "before" is the plugin as it was at `{SQLITE3_STORE_REV[:12]}` (sqlite3 '
        'in a worker thread), loaded from git into the same process; "after" is this tree. '
        f"{args.repeats * 2} calls of each per position, in A B B A order, after one warm-up "
        "call each. The middle and last pages start from a cursor; all are full pages.",
        "",
        "| page | starts at row | store | min ms | median ms | max ms | after / before |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("first", "middle", "last"):
        for which in ("before", "after"):
            v = lat[name][which]
            ratio = (
                ratio_text(ratios[name], PAGE_TARGET, digits=3) + " x" if which == "after" else ""
            )
            lines.append(
                f"| {name} | {positions[name]:,} | {which} | {ms(min(v))} | "
                f"{ms(med[name][which])} | {ms(max(v))} | {ratio} |"
            )
    lines += [
        "",
        "Query plans (`EXPLAIN QUERY PLAN`): every page is one range of the page index in its "
        "own order, the `NULL` `captured_at` part included, so no `USE TEMP B-TREE FOR ORDER BY` "
        "and no work proportional to the depth of the page.",
        "",
        "| query | plan |",
        "|---|---|",
    ]
    lines += [f"| {name} | `{plan}` |" for name, plan in plans]
    lines += [
        "",
        f"## 2. Draining all {n_new:,} new jobs (`limit=1000`, {pages} pages)",
        "",
        f"{args.drains} full drains per method after one discarded warm-up drain of each, the "
        "order rotated every round.",
        "",
        "| method | runs (s, in order) | best s | median s | x raw (median) |",
        "|---|---|---|---|---|",
    ]
    labels = {
        "raw": "raw sqlite3 keyset queries in-process (fetch rows only)",
        "pipeline": "gateway pipeline in-process (`gw.call`, JSON payload built)",
        "minimal stdio": "`mcp-gateway serve` over stdio, minimal JSON-RPC client",
        "stdio": "`mcp-gateway serve` over stdio, official client",
    }
    for method in methods:
        v = drains[method]
        lines.append(
            f"| {labels[method]} | {' '.join(f'{x:.2f}' for x in v)} | {min(v):.2f} | "
            f"{dmed[method]:.2f} | {dmed[method] / dmed['raw']:.2f} |"
        )
    lines += [
        "",
        f"Per page (medians): raw query {dmed['raw'] / pages * 1000:.1f} ms; the tool in-process "
        f"{dmed['pipeline'] / pages * 1000:.1f} ms; over stdio to a minimal client "
        f"{dmed['minimal stdio'] / pages * 1000:.1f} ms; to the official Python client "
        f"{dmed['stdio'] / pages * 1000:.1f} ms. One response line is "
        f"{statistics.mean(MESSAGE_BYTES) / 1e6:.1f} MB: 1000 jobs of ~3 KB, twice (the core "
        "sends `structuredContent` and the same JSON as text content). The rest of the cost is "
        "encoding and decoding that line on both sides of the pipe and, in the official Python "
        "client, checking each result against the output schema; those are outside this plugin.",
        "",
        "## 3. `bulk_update_job_status` with 100 items",
        "",
        f"{args.update_runs} distinct batches of 100 existing jobs (re-set to their own status, so "
        "every row is written), each batch through all three methods in rotated order, after "
        "one warm-up batch. Each call is one transaction with a commit (rollback journal, as the "
        "legacy files use).",
        "",
        "| method | min ms | median ms | max ms |",
        "|---|---|---|---|",
    ]
    for name, v in upd.items():
        lines.append(f"| {name} | {ms(min(v))} | {ms(upd_med[name])} | {ms(max(v))} |")
    lines.append("")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
