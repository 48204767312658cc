"""Helpers for the queue plugin's tests: real SQLite files in the legacy layout."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

from gateway_queue import store
from gateway_queue.connection import running_connections

DB_REL = "data/capture/jobs.db"

LEGACY_DDL = """
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT, title TEXT, company TEXT, description TEXT,
    url TEXT NOT NULL UNIQUE, location TEXT, source TEXT, status TEXT NOT NULL DEFAULT 'new',
    captured_at TEXT, payload_json TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT,
    resume_pdf_path TEXT, resume_written_at TEXT, run_id TEXT, attempt_count INTEGER DEFAULT 0,
    last_error TEXT);
CREATE INDEX idx_jobs_status ON jobs(status);
"""


T = TypeVar("T")


def run_async(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run a store coroutine to the end from sync or async test code (own thread, own loop)."""

    async def main() -> T:
        return await fn(*args)

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def busy_store_threads(wait: float = 2.0) -> int:
    """How many store connections still have a thread serving them, after up to ``wait`` s
    for them to finish (a closed connection's thread goes back to the pool, idle)."""
    deadline = time.monotonic() + wait
    while running_connections() and time.monotonic() < deadline:
        time.sleep(0.01)
    return running_connections()


def init_db(path: Path) -> Path:
    """A database created by the store itself (``init_store``: schema and both indexes)."""
    run_async(store.init_store, path)
    return path


def setup_connection(path: Path) -> sqlite3.Connection:
    """A connection that writes a test's data without waiting for the disk (no fsync): what the
    test reads back comes from the OS cache either way, and the file is the same. Each commit
    otherwise waits tens of milliseconds, thousands of times per run."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous = OFF")
    return conn


def legacy_db(path: Path) -> Path:
    """A database exactly as the previous pipeline created it (no page index)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(setup_connection(path)) as conn, conn:
        conn.executescript(LEGACY_DDL)
    return path


def generate_rows(path: Path, count: int, values: dict[str, str], **params: Any) -> None:
    """Insert ``count`` jobs whose columns are the SQL expressions in ``values``, of the row
    number ``i`` (0, 1, ...; ids follow it) and the named ``params``. SQLite makes the rows
    itself: hundreds of thousands take a fraction of a second, against seconds when Python
    builds them for ``executemany``."""
    columns, expressions = ", ".join(values), ", ".join(values.values())
    with closing(setup_connection(path)) as conn, conn:
        conn.execute(
            f"INSERT INTO jobs ({columns}) WITH RECURSIVE n(i) AS"
            " (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < :count)"
            f" SELECT {expressions} FROM n WHERE i < :count ORDER BY i",
            {"count": count, **params},
        )


def add_rows(path: Path, rows: Iterable[dict[str, Any]]) -> list[int]:
    """Insert rows with any column values (status, NULLs, explicit ids); returns their ids."""
    conn = setup_connection(path)
    ids = []
    try:
        for n, row in enumerate(rows):
            values = {
                "url": f"https://jobs.example/{os.urandom(6).hex()}-{n}",
                "payload_json": "{}",
                "created_at": "2025-01-01T00:00:00Z",
                **row,
            }
            cols = ", ".join(values)
            marks = ", ".join("?" for _ in values)
            cur = conn.execute(f"INSERT INTO jobs ({cols}) VALUES ({marks})", list(values.values()))
            ids.append(int(cur.lastrowid or 0))
        conn.commit()
    finally:
        conn.close()
    return ids


def new_jobs_in_order(path: Path, limit: int = -1) -> list[tuple[Any, ...]]:
    """The reference answer: every new job (the first ``limit``), in the documented order, by a
    direct query."""
    conn = sqlite3.connect(path)
    try:
        cols = ", ".join(store.JOB_FIELDS)
        return conn.execute(
            f"SELECT {cols} FROM jobs WHERE status = 'new' ORDER BY captured_at DESC, id DESC"
            " LIMIT ?",
            (limit,),
        ).fetchall()
    finally:
        conn.close()


def all_rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()
    finally:
        conn.close()


def snapshot(path: Path) -> tuple[bytes, int, Sequence[str]]:
    """File bytes, mtime and the folder listing (no journal or WAL files appeared)."""
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(os.listdir(path.parent))


def open_fds_to(path: Path) -> int:
    """How many of this process's file descriptors point at ``path`` (Linux /proc)."""
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():  # not Linux: the other read-only checks still run
        return 0
    count = 0
    target = str(path.resolve())
    for fd in fd_dir.iterdir():
        try:
            if os.readlink(fd) == target:
                count += 1
        except OSError:
            continue
    return count


def as_jobs(rows: Iterable[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [dict(zip(store.JOB_FIELDS, r, strict=True)) for r in rows]
