"""A user's own jobs database: the gateway after its background index against JobWorkFlow.

    .venv/bin/python bench/queue_vs_jobworkflow.py            # 1,000,000 legacy-shaped jobs
    .venv/bin/python bench/queue_vs_jobworkflow.py --rows 100000

The "Done when" of issue 16. A fresh copy of the legacy-shaped file (``bench/jobs_data.py``:
no page index, as JobWorkFlow's users have it) is served by an in-process gateway whose
deployment may write; the gateway starts, creates the page index in the background, and is
measured once that is done. JobWorkFlow's ``bulk_read_new_jobs`` as shipped reads the pristine
legacy file (the index would speed it up too, and its users do not have it). Both read a
50-job page, first and deep (from a cursor), A B B A. The gateway's own reads of the same file
before its index (read-only deployment) are measured alongside.

JobWorkFlow's page, from its source (``mcp-server-python/db/jobs_reader.py``,
``tools/bulk_read_new_jobs.py``, ``utils/pagination.py``, ``models/job.py``), written anew here:
per call it opens ``file:<path>?mode=ro`` with ``sqlite3.Row`` rows, selects the ten job columns
``WHERE status = ? [AND (captured_at < ? OR (captured_at = ? AND id < ?))] ORDER BY captured_at
DESC, id DESC LIMIT limit+1``, copies each row into a dict (empty strings become None), closes,
and builds ``{jobs, count, has_more, next_cursor}`` with a base64 JSON cursor. With only
``idx_jobs_status`` that query visits every ``new`` row and sorts them.

Writes ``bench/results/queue-vs-jobworkflow.md`` (the fresh copy is deleted afterwards).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from bench_method import WORK, abba, drop_file_cache, machine, ratio_text, verdict
from jobs_data import describe, describe_text, legacy_file, store

ROOT = Path(__file__).resolve().parent.parent
QUEUE = WORK / "queue"
RESULTS = ROOT / "bench" / "results" / "queue-vs-jobworkflow.md"
LIMIT = 50
TARGET = 100.0  # JobWorkFlow / gateway, per 50-job page

_FIELDS = ("id", "job_id", "title", "company", "description", "url", "location", "source")
_FIELDS += ("status", "captured_at")
_SELECT = f"SELECT {', '.join(_FIELDS)} FROM jobs WHERE status = ?"
_ORDER = " ORDER BY captured_at DESC, id DESC LIMIT ?"


def jobworkflow_page(path: Path, limit: int, cursor: str | None) -> dict[str, Any]:
    """JobWorkFlow's bulk_read_new_jobs page, as its source does it (see the module doc)."""
    if not 1 <= limit <= 1000:
        raise ValueError("invalid batch size")
    state = None
    if cursor is not None:
        decoded = json.loads(base64.b64decode(cursor.encode("ascii")).decode("utf-8"))
        state = (decoded["captured_at"], decoded["id"])
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        if state is None:
            rows = conn.execute(_SELECT + _ORDER, ("new", limit + 1)).fetchall()
        else:
            rows = conn.execute(
                _SELECT + " AND (captured_at < ? OR (captured_at = ? AND id < ?))" + _ORDER,
                ("new", state[0], state[0], state[1], limit + 1),
            ).fetchall()
        results = [{name: row[name] for name in _FIELDS} for row in rows]
    finally:
        conn.close()
    page = results[:limit]
    has_more = len(results) > limit
    next_cursor = None
    if has_more and page:
        key = {"captured_at": page[-1]["captured_at"], "id": page[-1]["id"]}
        next_cursor = base64.b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()
    jobs = [{k: (None if v == "" else v) for k, v in job.items()} for job in page]
    return {"jobs": jobs, "count": len(jobs), "has_more": has_more, "next_cursor": next_cursor}


def deep_keyset(path: Path) -> tuple[str, int]:
    """A cursor position half-way through the new jobs (a non-NULL captured_at, which both
    cursor formats can express)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (n,) = conn.execute(
            "SELECT count(*) FROM jobs WHERE status = 'new' AND captured_at IS NOT NULL"
        ).fetchone()
        row = conn.execute(
            "SELECT captured_at, id FROM jobs WHERE status = 'new' AND captured_at IS NOT NULL "
            "ORDER BY captured_at DESC, id DESC LIMIT 1 OFFSET ?",
            (n // 2,),
        ).fetchone()
    finally:
        conn.close()
    return row[0], int(row[1])


def gateway_cursor(key: tuple[str, int]) -> str:
    from gateway_queue.cursor import encode_cursor

    return encode_cursor(store.Keyset(captured_at=key[0], id=key[1]))


def jobworkflow_cursor(key: tuple[str, int]) -> str:
    doc = {"captured_at": key[0], "id": key[1]}
    return base64.b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode()


async def run(legacy: Path, fresh: Path, repeats: int, progress_every: float) -> dict[str, Any]:
    from gateway.testing import make_gateway

    out: dict[str, Any] = {"samples": []}
    served = make_gateway(plugins=["queue"], cwd=QUEUE, env={"JOBS_DB_PATH": fresh.name})
    unindexed = make_gateway(
        plugins=["queue"], cwd=QUEUE, env={"JOBS_DB_PATH": legacy.name}, read_only=True
    )
    key = deep_keyset(legacy)
    positions = {
        "first": (None, None),
        "deep": (gateway_cursor(key), jobworkflow_cursor(key)),
    }
    t0 = time.perf_counter()
    async with served, unindexed:
        out["start_ms"] = (time.perf_counter() - t0) * 1000
        builder = served.plugin("queue").context.resources["page_index"]
        out["state_after_start"] = builder.state.value
        started_wait = time.perf_counter()
        while builder.state.value in ("waiting", "building"):
            await anyio.sleep(progress_every)
            (health,) = [r for r in await served.health.run(use_cache=False) if r.name == "jobs_db"]
            out["samples"].append((time.perf_counter() - started_wait, health.detail))
        out["build_state"] = builder.state.value
        out["build_s"] = builder.took
        out["waited_s"] = time.perf_counter() - started_wait
        assert builder.state.value == "done", builder.state

        async def gateway_page(gw: Any, cursor: str | None) -> float:
            args: dict[str, Any] = {"limit": LIMIT} | ({"cursor": cursor} if cursor else {})
            t = time.perf_counter()
            result = await gw.call("bulk_read_new_jobs", args)
            took = time.perf_counter() - t
            assert not result.is_error and result.payload["count"] == LIMIT, result.payload
            return took

        async def jwf_page(cursor: str | None) -> float:
            t = time.perf_counter()
            page = await anyio.to_thread.run_sync(jobworkflow_page, legacy, LIMIT, cursor)
            took = time.perf_counter() - t
            assert page["count"] == LIMIT
            return took

        times: dict[str, dict[str, list[float]]] = {
            p: {"gateway": [], "jobworkflow": [], "gateway, no index": []} for p in positions
        }
        for gw_cursor, jwf_cursor in positions.values():  # warm-up, not counted
            await gateway_page(served, gw_cursor)
            await gateway_page(unindexed, gw_cursor)
            await jwf_page(jwf_cursor)
        for order in abba(repeats * 2):
            for name, (gw_cursor, jwf_cursor) in positions.items():
                for which in order:
                    if which == "A":
                        times[name]["gateway"].append(await gateway_page(served, gw_cursor))
                    else:
                        times[name]["jobworkflow"].append(await jwf_page(jwf_cursor))
                # the unindexed gateway is the slow one: once per pair, alternating sides
                times[name]["gateway, no index"].append(await gateway_page(unindexed, gw_cursor))
        # Same jobs on both sides: the first page of each, compared by id.
        first = (await served.call("bulk_read_new_jobs", {"limit": LIMIT})).payload["jobs"]
        out["same_jobs"] = [j["id"] for j in first] == [
            j["id"] for j in jobworkflow_page(legacy, LIMIT, None)["jobs"]
        ]
    out["times"] = times
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=5, help="A B B A pairs per page position")
    p.add_argument("--keep", action="store_true", help="keep the fresh copy afterwards")
    p.add_argument(
        "--warm", action="store_true", help="leave the copy in the page cache (default: evict it)"
    )
    args = p.parse_args()
    QUEUE.mkdir(parents=True, exist_ok=True)
    facts_machine = machine()
    legacy, origin = legacy_file(QUEUE, args.rows)
    facts = describe(legacy)
    fresh = QUEUE / f"fresh_{args.rows}.db"
    print(f"copying {legacy.name} to {fresh.name} ...", file=sys.stderr)
    t = time.perf_counter()
    shutil.copyfile(legacy, fresh)
    copy_s = time.perf_counter() - t
    if not args.warm:  # a user's file is not in the page cache when the gateway starts
        drop_file_cache(fresh)
    try:
        print("serving, waiting for the background index, measuring ...", file=sys.stderr)
        out = anyio.run(run, legacy, fresh, args.repeats, 1.0 if args.rows >= 500_000 else 0.2)
    finally:
        if not args.keep:
            fresh.unlink(missing_ok=True)
    med = {
        pos: {who: statistics.median(v) for who, v in d.items()} for pos, d in out["times"].items()
    }
    ratios = {pos: m["jobworkflow"] / m["gateway"] for pos, m in med.items()}
    worst = min(ratios.values())
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    cmd = f".venv/bin/python bench/queue_vs_jobworkflow.py --rows {args.rows} --repeats {args.repeats}"
    cmd += " --warm" if args.warm else ""
    lines = [
        "# A user's jobs database: the gateway after its background index vs JobWorkFlow",
        "",
        "Written by `bench/queue_vs_jobworkflow.py` (method in its docstring). All figures from "
        "one run; verdicts on unrounded ratios.",
        "",
        f"- Date: {now}; {facts_machine}",
        f"- Rerun: `{cmd}`",
        f"- Legacy file `{legacy.name}` ({origin}), measured now: {describe_text(facts)}.",
        f"- The gateway served a fresh copy of it (copied in {copy_s:.0f} s, then "
        f"{'left in' if args.warm else 'evicted from'} the page cache): `async with` "
        f"(start-up, `open_resources` included) took {out['start_ms']:.1f} ms and left the "
        f"index `{out['state_after_start']}`; the background creation finished "
        f"{out['build_state']} after {out['build_s']:.1f} s of building "
        f"({out['waited_s']:.1f} s after start-up, the start delay included).",
        f"- Same jobs: the gateway's first page and JobWorkFlow's have the same ids in the same "
        f"order: {'yes' if out['same_jobs'] else 'NO'}.",
        "",
        "## Summary",
        "",
        "| target (issue 16, Done when) | measured | verdict |",
        "|---|---|---|",
        f"| 50-job page on the user's file after the background index >= {TARGET:.0f} x faster "
        f"than JobWorkFlow as shipped | first page {ratio_text(ratios['first'], TARGET, digits=0)}"
        f" x, deep page {ratio_text(ratios['deep'], TARGET, digits=0)} x | "
        f"{verdict(worst >= TARGET)} |",
        "",
        f"## 50-job pages ({args.repeats * 2} of each, A B B A, after one warm-up call each)",
        "",
        "| page | reader | min ms | median ms | max ms | JobWorkFlow / this |",
        "|---|---|---|---|---|---|",
    ]
    for pos, d in out["times"].items():
        for who, v in d.items():
            rel = med[pos]["jobworkflow"] / med[pos][who]
            lines.append(
                f"| {pos} | {who} | {min(v) * 1000:.1f} | {med[pos][who] * 1000:.1f} | "
                f"{max(v) * 1000:.1f} | {ratio_text(rel, TARGET if who == 'gateway' else None)} |"
            )
    lines += [
        "",
        '"gateway, no index" is the gateway reading the legacy file in a read-only deployment '
        "(so it creates nothing): what users got before this change.",
        "",
        "## What `gateway_status` showed while the index was being created",
        "",
        "| seconds after start-up | `jobs_db` health detail |",
        "|---|---|",
    ]
    # Each change of the detail, and about ten steps of the build's progress.
    samples = out["samples"]
    kinds = [d.split(": about")[0] for _, d in samples]
    building = [i for i, k in enumerate(kinds) if "being created" in k]
    every = max(len(building) // 10, 1)
    keep = [i for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]
    keep += [*building[::every], len(samples) - 1]
    lines += [f"| {samples[i][0]:.1f} | {samples[i][1]} |" for i in sorted(set(keep))]
    lines.append("")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
