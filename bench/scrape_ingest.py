"""Scrape plugin benchmark: ingest into the jobs store, and the cost of importing jobspy.

    .venv/bin/python bench/scrape_ingest.py            # 100,000 records, 5 rounds, 5 import runs
    .venv/bin/python bench/scrape_ingest.py --records 20000 --rounds 1 --import-runs 3

Ingest: N records shaped like the legacy ones (python-jobspy rows with ~3 KB descriptions, see
``bench/jobs_data.py``) are made JSON-safe and normalized once (``payload_json`` repeats the
record). The same normalized rows are then inserted into an empty database, then again (all
duplicates), by four methods, each on a fresh file whose schema was created beforehand,
untimed:

- this plugin: ``insert_term`` (the aiosqlite store: ``connect_writer`` + ``insert_jobs``, one
  transaction, one ``executemany``), awaited in the event loop;
- the previous store (sqlite3 in a worker thread, as at ``bench_method.SQLITE3_STORE_REV``,
  loaded from git): its ``connect_writer`` + ``insert_jobs`` (a per-row loop);
- JobWorkFlow as shipped (``db/jobs_ingest_writer.py``, written anew from its source): one
  ``INSERT OR IGNORE`` per row in one transaction, into its own schema (``idx_jobs_status``
  only);
- raw ``sqlite3.executemany`` of the same ``INSERT … ON CONFLICT(url) DO NOTHING`` and rows in
  one transaction, into the same schema as the plugin (both indexes).

One warm-up round of every method is discarded; then every round runs all four, the order
rotated each round. Dirty pages are flushed (``sync``) before each timed insert, so that no
method pays for the write-back of the previous one's 800 MB. Targets: the plugin >= 0.9 x raw ``executemany`` (issue 16) and within 10 %
of the previous store (issue 14), on new records; medians.

Import: ``python -c "import jobspy"`` vs ``python -c pass`` (and the plugin module itself), in
fresh processes, several runs each, medians: what the first scrape pays and the gateway does
not (it imports jobspy on first use only).

Writes ``bench/results/scrape.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from bench_method import SQLITE3_STORE_REV, load_before, machine, ratio_text, rotations, verdict
from gateway_scrape.normalize import clean, jsonable_record
from gateway_scrape.run import bootstrap_db, insert_term
from jobs_data import SEED, description, raw_record, store

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "scrape.md"
NOW = "2026-01-01T00:00:00Z"
RAW_TARGET = 0.9  # plugin rows/s / raw executemany rows/s
BEFORE_TARGET = 0.9  # plugin rows/s / previous store rows/s
METHODS = ("plugin", "previous store", "JobWorkFlow", "raw executemany")


def records(n: int) -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    pool = [description(rng) for _ in range(2000)]
    return [raw_record(i, rng, pool[i % len(pool)]) for i in range(n)]


def row_values(jobs: list[store.NewJob]) -> list[tuple[Any, ...]]:
    return [
        (
            j.job_id,
            j.title,
            j.company,
            j.description,
            j.url,
            j.location,
            j.source,
            "new",
            j.captured_at,
            j.payload_json,
            NOW,
        )
        for j in jobs
    ]


# --- the four inserters: (prepare the empty file, untimed) and (insert, timed) -------------------


def prepare_store(path: Path) -> None:
    anyio.run(bootstrap_db, path)


def insert_plugin(path: Path, jobs: list[store.NewJob]) -> int:
    counts = anyio.run(insert_term, path, jobs, "new")
    return counts.inserted


def old_store() -> Any:
    load_before(SQLITE3_STORE_REV, "plugins/queue/gateway_queue", "gwq_sqlite3")
    return importlib.import_module("gwq_sqlite3.store")


def prepare_old(path: Path) -> None:
    old = old_store()
    old.connect_writer(path).close()


def insert_old(path: Path, jobs: list[store.NewJob]) -> int:
    old = old_store()
    olds = [old.NewJob(**vars(j)) for j in jobs]

    def work() -> int:
        conn = old.connect_writer(path)  # what the previous insert_term did, in a worker thread
        try:
            return int(old.insert_jobs(conn, olds, status="new").inserted)
        finally:
            conn.close()

    async def run() -> int:
        return await anyio.to_thread.run_sync(work)

    return anyio.run(run)


def prepare_jobworkflow(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute(store._CREATE_JOBS)
    conn.execute(store._CREATE_STATUS_INDEX)
    conn.commit()
    conn.close()


_JWF_INSERT = (
    "INSERT OR IGNORE INTO jobs (url, title, description, source, job_id, location, company, "
    "captured_at, payload_json, created_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def insert_jobworkflow(path: Path, jobs: list[store.NewJob]) -> int:
    conn = sqlite3.connect(str(path))
    conn.row_factory = sqlite3.Row
    conn.execute("BEGIN")
    inserted = 0
    for j in jobs:
        cursor = conn.execute(
            _JWF_INSERT,
            (
                j.url,
                j.title or "",
                j.description or "",
                j.source or "",
                j.job_id or "",
                j.location or "",
                j.company or "",
                j.captured_at or "",
                j.payload_json,
                NOW,
                "new",
            ),
        )
        inserted += 1 if cursor.rowcount > 0 else 0
    conn.commit()
    conn.close()
    return inserted


def prepare_raw(path: Path) -> None:
    anyio.run(store.init_store, path)  # the plugin's schema, both indexes


def insert_raw(path: Path, jobs: list[store.NewJob]) -> int:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        cur = conn.executemany(store._INSERT, row_values(jobs))
        conn.execute("COMMIT")
        return cur.rowcount
    finally:
        conn.close()


INSERTERS: dict[str, tuple[Callable[[Path], None], Callable[[Path, list[store.NewJob]], int]]] = {
    "plugin": (prepare_store, insert_plugin),
    "previous store": (prepare_old, insert_old),
    "JobWorkFlow": (prepare_jobworkflow, insert_jobworkflow),
    "raw executemany": (prepare_raw, insert_raw),
}


def one_round(method: str, jobs: list[store.NewJob]) -> tuple[float, float, float]:
    """(seconds for new records, seconds for the same again, database MB) on a fresh file."""
    prepare, insert = INSERTERS[method]
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".work") as tmp:
        db = Path(tmp) / "capture" / "jobs.db"
        db.parent.mkdir(parents=True)
        prepare(db)
        os.sync()  # no write-back of an earlier round's 800 MB during this one
        t0 = time.perf_counter()
        first = insert(db, jobs)
        t1 = time.perf_counter()
        os.sync()
        t2 = time.perf_counter()
        again = insert(db, jobs)
        t3 = time.perf_counter()
        assert (first, again) == (len(jobs), 0), (method, first, again)
        size = db.stat().st_size / 1e6
    return t1 - t0, t3 - t2, size


def bench_ingest(n: int, rounds: int) -> dict[str, Any]:
    raw = records(n)
    t = time.perf_counter()
    safe = [jsonable_record(r) for r in raw]
    t_json = time.perf_counter() - t
    t = time.perf_counter()
    jobs = clean(safe, require_description=True, now=NOW).jobs
    t_clean = time.perf_counter() - t
    assert len(jobs) == n
    avg_desc = sum(len(j.description or "") for j in jobs) / n
    avg_payload = sum(len(j.payload_json) for j in jobs) / n
    for method in METHODS:  # warm-up round: files, caches and code paths, discarded
        one_round(method, jobs)
    runs: dict[str, list[tuple[float, float, float]]] = {m: [] for m in METHODS}
    for order in rotations(list(METHODS), rounds):
        for method in order:
            runs[method].append(one_round(method, jobs))
    return {
        "n": n,
        "rounds": rounds,
        "jsonable_s": t_json,
        "clean_s": t_clean,
        "avg_desc": avg_desc,
        "avg_payload": avg_payload,
        "runs": runs,
        "first": {m: statistics.median(r[0] for r in v) for m, v in runs.items()},
        "again": {m: statistics.median(r[1] for r in v) for m, v in runs.items()},
        "mb": {m: v[-1][2] for m, v in runs.items()},
    }


def _spawn_ms(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return (time.perf_counter() - start) * 1000


def bench_imports(runs: int) -> dict[str, list[float]]:
    cases = {
        "python -c pass": "pass",
        "import gateway_scrape.plugin": "import gateway_scrape.plugin",
        "import jobspy": "import jobspy",
    }
    for code in cases.values():  # warm the OS file cache once
        _spawn_ms(code)
    out: dict[str, list[float]] = {k: [] for k in cases}
    for order in rotations(list(cases), runs):  # rotated, so load changes hit every case alike
        for name in order:
            out[name].append(_spawn_ms(cases[name]))
    return out


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def report(
    ingest: dict[str, Any], imports: dict[str, list[float]], argv: list[str], machine_facts: str
) -> str:
    n = ingest["n"]
    first, again = ingest["first"], ingest["again"]
    vs_raw = first["raw executemany"] / first["plugin"]  # plugin rows/s over raw rows/s
    vs_old = first["previous store"] / first["plugin"]
    vs_raw_again = again["raw executemany"] / again["plugin"]
    vs_jwf = first["JobWorkFlow"] / first["plugin"]
    try:
        import importlib.metadata as md

        versions = f"python-jobspy {md.version('python-jobspy')}, pandas {md.version('pandas')}"
    except Exception:  # pragma: no cover - metadata missing
        versions = "python-jobspy ?"
    med = {k: statistics.median(v) for k, v in imports.items()}
    cmd = ".venv/bin/python bench/scrape_ingest.py" + ("" if not argv else " " + " ".join(argv))
    end_to_end = _rate(n, ingest["jsonable_s"] + ingest["clean_s"] + first["plugin"])
    lines = [
        "# Scrape plugin benchmarks: ingest into the jobs store, importing python-jobspy",
        "",
        f"Written by `bench/scrape_ingest.py` (method in its docstring). Rerun: `{cmd}`",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {machine_facts}; {versions}",
        f"- Records: {n:,}, descriptions {ingest['avg_desc']:,.0f} characters and "
        f"`payload_json` {ingest['avg_payload']:,.0f} characters on average (measured on the "
        "normalized rows); verdicts on unrounded ratios.",
        "",
        "## Summary",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| ingest {n:,} new records >= 0.9 x raw `executemany` of the same rows (issue 16) | "
        f"{_rate(n, first['plugin']):,.0f} vs {_rate(n, first['raw executemany']):,.0f} rows/s "
        f"= {ratio_text(vs_raw, RAW_TARGET, digits=3)} x | {verdict(vs_raw >= RAW_TARGET)} |",
        f"| ingest {n:,} new records within 10 % of the previous sqlite3 store (issue 14) | "
        f"{_rate(n, first['plugin']):,.0f} vs {_rate(n, first['previous store']):,.0f} rows/s "
        f"= {ratio_text(vs_old, BEFORE_TARGET, digits=3)} x | "
        f"{verdict(vs_old >= BEFORE_TARGET)} |",
        f"| (the same {n:,} again, all duplicates) | {_rate(n, again['plugin']):,.0f} rows/s = "
        f"{ratio_text(vs_raw_again, RAW_TARGET, digits=3)} x raw | reported |",
        f"| (JobWorkFlow as shipped, new records) | {_rate(n, first['JobWorkFlow']):,.0f} "
        f"rows/s; the plugin is {vs_jwf:.2f} x its speed | reported |",
        f"| (end to end: JSON-safe + normalize + insert, new records) | {end_to_end:,.0f} rows/s "
        "| reported |",
        f"| import python-jobspy on first use | "
        f"{med['import jobspy'] - med['python -c pass']:,.0f} ms over a bare interpreter | "
        "reported |",
        "",
        "## Ingest",
        "",
        f"Medians of {ingest['rounds']} rounds after a discarded warm-up round; every round runs "
        "the four methods in rotated order, each on a fresh file.",
        "",
        "| method | new: s | new: rows/s | again: s | again: rows/s | rows/s vs raw (new) | "
        "database MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in METHODS:
        lines.append(
            f"| {m} | {first[m]:.3f} | {_rate(n, first[m]):,.0f} | {again[m]:.3f} | "
            f"{_rate(n, again[m]):,.0f} | {first['raw executemany'] / first[m]:.3f} | "
            f"{ingest['mb'][m]:.0f} |"
        )
    lines += [
        "",
        "Per-round seconds (new / again), in run order: "
        + "; ".join(
            f"{m}: " + " ".join(f"{a:.3f}/{b:.3f}" for a, b, _ in ingest["runs"][m])
            for m in METHODS
        )
        + ".",
        "",
        f"Normalization, once: JSON-safe records {ingest['jsonable_s']:.3f} s "
        f"({_rate(n, ingest['jsonable_s']):,.0f} rows/s), `clean` {ingest['clean_s']:.3f} s "
        f"({_rate(n, ingest['clean_s']):,.0f} rows/s). JobWorkFlow's file is smaller: it has no "
        "page index.",
        "",
        "## Importing python-jobspy",
        "",
        f"Method: fresh `{Path(sys.executable).name}` processes, wall time of spawn to exit, "
        f"{len(next(iter(imports.values())))} rotated runs each after one warm-up run. The "
        "gateway does not pay this at start (a test checks `jobspy` and `pandas` are not in "
        "`sys.modules` after `tools/list`); the first `scrape_jobs` call does, once per process.",
        "",
        "| command | median ms | over bare interpreter | runs (ms, in order) |",
        "|---|---|---|---|",
    ]
    for name, values in imports.items():
        extra = med[name] - med["python -c pass"]
        runs = " ".join(f"{v:.0f}" for v in values)
        lines.append(f"| `{name}` | {med[name]:,.0f} | {extra:+,.0f} ms | {runs} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds (median)")
    parser.add_argument("--import-runs", type=int, default=5)
    opts = parser.parse_args()
    argv = sys.argv[1:]
    (ROOT / "bench" / ".work").mkdir(parents=True, exist_ok=True)
    machine_facts = machine()  # the load average before the run
    ingest = bench_ingest(opts.records, opts.rounds)
    imports = bench_imports(opts.import_runs)
    text = report(ingest, imports, argv, machine_facts)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
