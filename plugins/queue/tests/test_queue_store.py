"""The jobs store API shared with the scrape plugin, on real SQLite files."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from gateway_queue import store
from gateway_queue.store import (
    InsertCounts,
    NewJob,
    StoreError,
    connect_reader,
    connect_writer,
    insert_jobs,
)
from gwq_testutil import LEGACY_DDL


def job(url: str, **kw: object) -> NewJob:
    fields: dict[str, object] = {
        "url": url,
        "title": "Engineer",
        "company": "Acme",
        "description": "Builds things",
        "location": "Remote",
        "source": "linkedin",
        "job_id": "J-" + url,
        "captured_at": "2025-01-02T03:04:05Z",
        "payload_json": '{"raw": true}',
    }
    fields.update(kw)
    return NewJob(**fields)  # type: ignore[arg-type]


def table_columns(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA table_info(jobs)").fetchall()


def test_writer_creates_folders_and_the_exact_legacy_schema(tmp_path):
    db = tmp_path / "data" / "capture" / "jobs.db"
    connect_writer(db).close()
    legacy = tmp_path / "legacy.db"
    with sqlite3.connect(legacy) as conn:
        conn.executescript(LEGACY_DDL)
    assert table_columns(db) == table_columns(legacy)
    with sqlite3.connect(db) as conn:
        indexes = {r[1] for r in conn.execute("PRAGMA index_list(jobs)")}
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert {"idx_jobs_status", store.PAGE_INDEX_NAME} <= indexes
    assert journal == "delete"  # never switched to WAL


def test_writer_opens_a_legacy_database_without_touching_its_rows(tmp_path):
    db = tmp_path / "jobs.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(LEGACY_DDL)
        conn.execute(
            "INSERT INTO jobs (url, status, payload_json, created_at, last_error, attempt_count)"
            " VALUES ('u1', 'applied', '{}', '2020-01-01', 'boom', 3)"
        )
    before = sqlite3.connect(db).execute("SELECT * FROM jobs").fetchall()
    for _ in range(2):  # idempotent
        conn = connect_writer(db)
        counts = insert_jobs(conn, [job("u1"), job("u2")])
        conn.close()
    assert counts == InsertCounts(inserted=0, duplicates=2)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM jobs WHERE url = 'u1'").fetchall() == before
        assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 2


def test_insert_counts_duplicates_in_the_db_and_within_the_batch(tmp_path):
    conn = connect_writer(tmp_path / "jobs.db")
    assert insert_jobs(conn, [job("a"), job("b")], now="2025-01-01T00:00:00Z") == InsertCounts(2, 0)
    counts = insert_jobs(conn, [job("b", title="changed"), job("c"), job("c")])
    assert counts == InsertCounts(inserted=1, duplicates=2)
    rows = conn.execute(
        "SELECT url, title, status, created_at, attempt_count, payload_json FROM jobs ORDER BY id"
    ).fetchall()
    conn.close()
    assert rows[0] == ("a", "Engineer", "new", "2025-01-01T00:00:00Z", 0, '{"raw": true}')
    assert rows[1][1] == "Engineer"  # an existing row is never modified
    assert [r[0] for r in rows] == ["a", "b", "c"]
    assert rows[2][3].endswith("Z")


def test_insert_with_another_status(tmp_path):
    conn = connect_writer(tmp_path / "jobs.db")
    insert_jobs(conn, [job("a")], status="shortlist")
    assert conn.execute("SELECT status FROM jobs").fetchone() == ("shortlist",)
    with pytest.raises(ValueError):
        insert_jobs(conn, [job("b")], status="bogus")
    conn.close()


def test_insert_is_all_or_nothing(tmp_path):
    conn = connect_writer(tmp_path / "jobs.db")
    bad = job("x", payload_json=None)  # violates NOT NULL
    with pytest.raises(StoreError) as err:
        insert_jobs(conn, [job("a"), job("b"), bad])
    assert "constraint" in err.value.reason
    assert not err.value.retryable
    assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0
    assert not conn.in_transaction
    conn.close()


def test_insert_waits_then_fails_retryable_when_another_writer_holds_the_lock(tmp_path):
    db = tmp_path / "jobs.db"
    connect_writer(db).close()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    conn = connect_writer(db, busy_timeout_s=0.2)
    try:
        with pytest.raises(StoreError) as err:
            insert_jobs(conn, [job("a")])
        assert err.value.retryable
        assert "locked" in err.value.reason
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert insert_jobs(conn, [job("a")]) == InsertCounts(1, 0)
    conn.close()


def test_writer_connection_is_usable_from_another_thread(tmp_path):
    conn = connect_writer(tmp_path / "jobs.db")
    result: list[InsertCounts] = []
    t = threading.Thread(target=lambda: result.append(insert_jobs(conn, [job("a")])))
    t.start()
    t.join()
    conn.close()
    assert result == [InsertCounts(1, 0)]


def test_reader_is_read_only_and_reports_missing_files(tmp_path):
    db = tmp_path / "jobs.db"
    with pytest.raises(FileNotFoundError):
        connect_reader(db)
    assert not db.exists()
    w = connect_writer(db)
    insert_jobs(w, [job("a")])
    w.close()
    r = connect_reader(db)
    with pytest.raises(sqlite3.OperationalError):
        r.execute("DELETE FROM jobs")
    r.close()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"this is not sqlite at all" * 100, "not a SQLite database"),
        (None, "no jobs table"),
    ],
)
def test_reader_rejects_files_that_are_not_jobs_databases(tmp_path, content, reason):
    db = tmp_path / "jobs.db"
    if content is None:
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE other (x)")
    else:
        db.write_bytes(content)
    with pytest.raises(StoreError) as err:
        connect_reader(db)
    assert reason in err.value.reason
    assert str(tmp_path) not in err.value.reason


def test_writer_rejects_a_jobs_table_with_other_columns(tmp_path):
    db = tmp_path / "jobs.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, url TEXT)")
    with pytest.raises(StoreError) as err:
        connect_writer(db)
    assert "expected columns" in err.value.reason
    assert "SELECT" not in err.value.reason


def test_reader_refuses_a_folder(tmp_path):
    (tmp_path / "jobs.db").mkdir()
    with pytest.raises(StoreError) as err:
        connect_reader(tmp_path / "jobs.db")
    assert "folder" in err.value.reason


@pytest.mark.parametrize(
    "query", [store.PAGE_QUERY_FIRST, store.PAGE_QUERY_AFTER_VALUE, store.PAGE_QUERY_NULLS]
)
def test_page_queries_are_index_range_scans_without_a_sort(tmp_path, query):
    db = tmp_path / "jobs.db"
    connect_writer(db).close()
    conn = connect_reader(db)
    params = (10,) if query is store.PAGE_QUERY_FIRST else ("2025-01-01", 5, 10)
    if query is store.PAGE_QUERY_NULLS:
        params = (5, 10)
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + query, params)]
    conn.close()
    assert len(plan) == 1, plan
    assert plan[0].startswith(f"SEARCH jobs USING INDEX {store.PAGE_INDEX_NAME} (status=?"), plan
    assert not any("TEMP B-TREE" in step for step in plan)


def test_ensure_indexes_adds_the_page_index_to_a_legacy_database_without_touching_rows(tmp_path):
    from gwq_testutil import add_rows, all_rows, legacy_db

    db = legacy_db(tmp_path / "jobs.db")
    add_rows(db, [{"status": "new", "captured_at": "2025-01-01"}, {"status": "reject"}])
    before = all_rows(db)
    conn = connect_reader(db)
    assert not store.has_page_index(conn)
    conn.close()
    store.ensure_indexes(db)
    store.ensure_indexes(db)  # idempotent
    conn = connect_reader(db)
    assert store.has_page_index(conn)
    conn.close()
    assert all_rows(db) == before
    with pytest.raises(FileNotFoundError):
        store.ensure_indexes(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()


def test_update_statuses_is_all_or_nothing_and_sets_updated_at(tmp_path):
    from gwq_testutil import add_rows, all_rows

    db = tmp_path / "jobs.db"
    connect_writer(db).close()
    a, b = add_rows(db, [{"status": "new"}, {"status": "new"}])
    before = all_rows(db)
    conn = store.connect_existing_writer(db)
    with pytest.raises(store.MissingJobsError) as err:
        store.update_statuses(
            conn, [store.StatusUpdate(a, "reject"), store.StatusUpdate(999, "reject")]
        )
    assert err.value.missing_ids == (999,)
    assert all_rows(db) == before
    stamp = store.update_statuses(
        conn, [store.StatusUpdate(a, "reject"), store.StatusUpdate(b, "shortlist")]
    )
    conn.close()
    with sqlite3.connect(db) as check:
        got = check.execute("SELECT id, status, updated_at FROM jobs ORDER BY id").fetchall()
    assert got == [(a, "reject", stamp), (b, "shortlist", stamp)]
    assert stamp.endswith("Z")


def test_existing_writer_never_creates_a_database(tmp_path):
    with pytest.raises(FileNotFoundError):
        store.connect_existing_writer(tmp_path / "jobs.db")
    assert list(tmp_path.iterdir()) == []
