"""Reads of a WAL-mode jobs database write nothing: no -wal/-shm created, an existing -shm not
rewritten, the main file and the job rows byte-identical, and the reader still sees every
committed row, the ones waiting in the log included."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest
from gateway_queue import store
from gateway_queue.connection import reader_target
from gwq_testutil import DB_REL, add_rows, all_rows, init_db, new_jobs_in_order

pytestmark = pytest.mark.anyio


def wal_db(path: Path, rows: int = 30) -> Path:
    init_db(path)
    with closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    add_rows(
        path, [{"status": "new", "captured_at": f"2025-01-{i % 9 + 1:02d}"} for i in range(rows)]
    )
    # A clean close checkpoints the log and deletes -wal and -shm.
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    return path


def files(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file of the folder: content digest and modification time."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
    }


# A writer in another process that commits rows into the log and keeps the database open (no
# checkpoint), so -wal holds data and -shm is live, as while a scrape or an update is running.
WRITER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("BEGIN")
    for i in range(5):
        conn.execute(
            "INSERT INTO jobs (url, status, captured_at, title, payload_json, created_at)"
            " VALUES (?, 'new', '2030-01-01', 'in the log', '{}', 'x')", (f"wal-{i}",))
    conn.execute("COMMIT")
    print("ready", flush=True)
    sys.stdin.readline()
    """
)


async def read_all(gw, db_path: str) -> list[dict]:
    result = await gw.call("bulk_read_new_jobs", {"limit": 1000, "db_path": db_path})
    assert not result.is_error, result.payload
    return result.payload["jobs"]


async def test_a_clean_wal_database_is_read_without_creating_any_file(gateway_factory, tmp_path):
    db = wal_db(tmp_path / DB_REL)
    before = files(db.parent)
    gw = gateway_factory(plugins=["queue"], read_only=True)
    async with gw:
        jobs = await read_all(gw, DB_REL)
        (health,) = [r for r in await gw.health.run(use_cache=False) if r.name == "jobs_db"]
    assert [j["id"] for j in jobs] == [r[0] for r in new_jobs_in_order(db)]
    assert health.status == "ok"
    assert files(db.parent) == before


async def test_a_live_wal_database_is_read_with_its_log_and_nothing_is_rewritten(
    gateway_factory, tmp_path
):
    db = wal_db(tmp_path / DB_REL)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        assert {p.name for p in db.parent.iterdir()} == {"jobs.db", "jobs.db-wal", "jobs.db-shm"}
        before = files(db.parent)
        gw = gateway_factory(plugins=["queue"], read_only=True)
        async with gw:
            jobs = await read_all(gw, DB_REL)
        after = files(db.parent)
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
    assert after == before  # -shm included: no read marks were written into it
    assert [j["title"] for j in jobs[:5]] == ["in the log"] * 5  # the log's rows are seen
    assert len(jobs) == 35


async def test_a_log_without_its_shared_memory_file_is_refused_without_creating_one(
    gateway_factory, tmp_path
):
    db = wal_db(tmp_path / DB_REL)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout.readline().strip() == "ready"
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("jobs.db", "jobs.db-wal"):  # as a crashed writer leaves them
        (copy / name).write_bytes((db.parent / name).read_bytes())
    writer.stdin.close()
    writer.wait(timeout=30)
    before = files(copy)
    gw = gateway_factory(plugins=["queue"], read_only=True)
    async with gw:
        result = await gw.call("bulk_read_new_jobs", {"db_path": "copy/jobs.db"})
    assert result.code == "DB_ERROR"
    assert "shared-memory file (-shm) is missing" in result.payload["error"]["message"]
    assert files(copy) == before


async def test_a_checkpoint_during_a_lock_free_read_is_noticed_and_the_read_done_again(tmp_path):
    db = wal_db(tmp_path / DB_REL)
    async with store.connect_reader(db) as conn:  # opened immutable: the log was empty
        other = sqlite3.connect(db)
        other.execute("UPDATE jobs SET title = 'changed' WHERE id = 1")
        other.commit()
        other.close()  # checkpoints into the main file
        with pytest.raises(store.SnapshotChanged):
            await store.read_new_jobs_page(conn, 5)
    rows, _ = await store.read_new_jobs(db, 1000)
    assert {r[0]: r[2] for r in rows}[1] == "changed"
    assert len(all_rows(db)) == 30


def test_a_rollback_journal_database_is_read_through_a_shared_lock_only(tmp_path):
    # The legacy default: mode=ro, no file other than the database is ever opened for writing.
    db = init_db(tmp_path / "jobs.db")
    add_rows(db, [{"status": "new"}])
    target, snapshot = reader_target(db)
    assert target.endswith("?mode=ro") and snapshot is None
    assert os.listdir(tmp_path) == ["jobs.db"]


# A writer killed mid-transaction leaves a hot journal; only a writer may roll it back.
KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA cache_size = 1")  # spill to the file, so the journal is needed
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO jobs (url, payload_json, created_at) VALUES (?, '{}', 'x')",
        [(f"killed-{i}",) for i in range(2000)],
    )
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


async def test_a_hot_journal_is_refused_with_the_way_out_and_left_alone(gateway_factory, tmp_path):
    db = init_db(tmp_path / DB_REL)
    add_rows(db, [{"status": "new"}])
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(db)], check=False)
    assert (db.parent / "jobs.db-journal").is_file()
    before = files(db.parent)
    gw = gateway_factory(plugins=["queue"], read_only=True)
    async with gw:
        result = await gw.call("bulk_read_new_jobs", {})
    assert result.code == "DB_ERROR"
    assert "must be rolled back by a writer first" in result.payload["error"]["message"]
    assert files(db.parent) == before
