"""The jobs store API shared with the scrape plugin, on real SQLite files."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from gateway_queue import store
from gateway_queue.connection import BUSY_SLICE_S
from gateway_queue.store import (
    InsertCounts,
    NewJob,
    StoreError,
    connect_reader,
    connect_writer,
    insert_jobs,
)
from gwq_testutil import (
    LEGACY_DDL,
    add_rows,
    all_rows,
    busy_store_threads,
    generate_rows,
    init_db,
    legacy_db,
    open_fds_to,
)

pytestmark = pytest.mark.anyio


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
    with closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute("PRAGMA table_info(jobs)").fetchall()


async def test_writer_creates_folders_and_the_exact_legacy_schema(tmp_path):
    db = tmp_path / "data" / "capture" / "jobs.db"
    async with connect_writer(db):
        pass
    legacy = tmp_path / "legacy.db"
    with closing(sqlite3.connect(legacy)) as conn, conn:
        conn.executescript(LEGACY_DDL)
    assert table_columns(db) == table_columns(legacy)
    with closing(sqlite3.connect(db)) as conn, conn:
        indexes = {r[1] for r in conn.execute("PRAGMA index_list(jobs)")}
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert {"idx_jobs_status", store.PAGE_INDEX_NAME} <= indexes
    assert journal == "delete"  # never switched to WAL


async def test_writer_opens_a_legacy_database_without_touching_its_rows(tmp_path):
    db = tmp_path / "jobs.db"
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.executescript(LEGACY_DDL)
        conn.execute(
            "INSERT INTO jobs (url, status, payload_json, created_at, last_error, attempt_count)"
            " VALUES ('u1', 'applied', '{}', '2020-01-01', 'boom', 3)"
        )
    before = sqlite3.connect(db).execute("SELECT * FROM jobs").fetchall()
    for _ in range(2):  # idempotent
        async with connect_writer(db) as conn:
            counts = await insert_jobs(conn, [job("u1"), job("u2")])
    assert counts == InsertCounts(inserted=0, duplicates=2)
    with closing(sqlite3.connect(db)) as check, check:
        assert check.execute("SELECT * FROM jobs WHERE url = 'u1'").fetchall() == before
        assert check.execute("SELECT count(*) FROM jobs").fetchone()[0] == 2


async def test_insert_counts_duplicates_in_the_db_and_within_the_batch(tmp_path):
    async with connect_writer(tmp_path / "jobs.db") as conn:
        first = await insert_jobs(conn, [job("a"), job("b")], now="2025-01-01T00:00:00Z")
        counts = await insert_jobs(conn, [job("b", title="changed"), job("c"), job("c")])
        rows = await conn.fetchall(
            "SELECT url, title, status, created_at, attempt_count, payload_json FROM jobs "
            "ORDER BY id"
        )
    assert first == InsertCounts(2, 0)
    assert counts == InsertCounts(inserted=1, duplicates=2)
    assert rows[0] == ("a", "Engineer", "new", "2025-01-01T00:00:00Z", 0, '{"raw": true}')
    assert rows[1][1] == "Engineer"  # an existing row is never modified
    assert [r[0] for r in rows] == ["a", "b", "c"]
    assert rows[2][3].endswith("Z")


async def test_insert_with_another_status(tmp_path):
    async with connect_writer(tmp_path / "jobs.db") as conn:
        await insert_jobs(conn, [job("a")], status="shortlist")
        assert await conn.fetchall("SELECT status FROM jobs") == [("shortlist",)]
        with pytest.raises(ValueError):
            await insert_jobs(conn, [job("b")], status="bogus")


async def test_insert_is_all_or_nothing(tmp_path):
    async with connect_writer(tmp_path / "jobs.db") as conn:
        bad = job("x", payload_json=None)  # violates NOT NULL
        with pytest.raises(StoreError) as err:
            await insert_jobs(conn, [job("a"), job("b"), bad])
        assert "constraint" in err.value.reason
        assert not err.value.retryable
        assert await conn.fetchall("SELECT count(*) FROM jobs") == [(0,)]
        assert not conn.in_transaction


async def test_insert_waits_then_fails_retryable_when_another_writer_holds_the_lock(tmp_path):
    db = init_db(tmp_path / "jobs.db")
    blocker = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    async with connect_writer(db, busy_timeout_s=0.3) as conn:
        started = time.monotonic()
        try:
            with pytest.raises(StoreError) as err:
                await insert_jobs(conn, [job("a")])
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert 0.25 < time.monotonic() - started < 3
        assert err.value.retryable
        assert "locked" in err.value.reason
        assert await insert_jobs(conn, [job("a")]) == InsertCounts(1, 0)


async def test_a_write_waits_for_a_short_lock_and_then_succeeds(tmp_path):
    db = init_db(tmp_path / "jobs.db")
    blocker = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    threading.Timer(0.4, lambda: blocker.execute("ROLLBACK")).start()
    async with connect_writer(db, busy_timeout_s=10) as conn:
        assert await insert_jobs(conn, [job("a")]) == InsertCounts(1, 0)
    blocker.close()


async def test_every_public_function_takes_str_and_path_alike(tmp_path):
    for kind in (str, Path):
        db = kind(tmp_path / f"{kind.__name__}" / "jobs.db")
        report = await store.init_store(db)
        assert report.created_file
        async with connect_writer(db) as conn:
            await insert_jobs(conn, [job("a", captured_at=None)])
        async with store.connect_existing_writer(db) as conn:
            await store.update_statuses(conn, [store.StatusUpdate(1, "new")])
        async with connect_reader(db) as conn:
            assert await store.has_page_index(conn)
            rows, more = await store.read_new_jobs_page(conn, 10)
        assert [r[0] for r in rows] == [1] and not more
        assert (await store.read_new_jobs(db, 10))[0] == rows
        assert await store.create_page_index(db) is False
        await store.ensure_indexes(db)


async def test_reader_is_read_only_and_reports_missing_files(tmp_path):
    db = tmp_path / "jobs.db"
    with pytest.raises(FileNotFoundError):
        await connect_reader(db)
    assert not db.exists()
    async with connect_writer(db) as w:
        await insert_jobs(w, [job("a")])
    async with connect_reader(db) as r:
        with pytest.raises(StoreError) as err:
            await r.execute("DELETE FROM jobs")
        assert "read-only" in err.value.reason
    assert len(all_rows(db)) == 1


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"this is not sqlite at all" * 100, "not a SQLite database"),
        (None, "no jobs table"),
    ],
)
async def test_reader_rejects_files_that_are_not_jobs_databases(tmp_path, content, reason):
    db = tmp_path / "jobs.db"
    if content is None:
        with closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("CREATE TABLE other (x)")
    else:
        db.write_bytes(content)
    with pytest.raises(StoreError) as err:
        await connect_reader(db)
    assert reason in err.value.reason
    assert str(tmp_path) not in err.value.reason
    assert busy_store_threads() == 0


async def test_writer_rejects_a_jobs_table_with_other_columns(tmp_path):
    db = tmp_path / "jobs.db"
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, url TEXT)")
    with pytest.raises(StoreError) as err:
        await connect_writer(db)
    assert "expected columns" in err.value.reason
    assert "SELECT" not in err.value.reason


async def test_reader_refuses_a_folder(tmp_path):
    (tmp_path / "jobs.db").mkdir()
    with pytest.raises(StoreError) as err:
        await connect_reader(tmp_path / "jobs.db")
    assert "folder" in err.value.reason


@pytest.mark.parametrize(
    ("id_type", "what"), [("INTEGER", "no id (NULL)"), ("TEXT", "not an integer")]
)
async def test_a_new_job_without_an_integer_id_is_a_store_error_naming_the_problem(
    tmp_path, id_type, what
):
    db = tmp_path / "jobs.db"
    ddl = LEGACY_DDL.replace("id INTEGER PRIMARY KEY AUTOINCREMENT", f"id {id_type}")
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.executescript(ddl)
        conn.execute(
            "INSERT INTO jobs (id, url, payload_json, created_at) VALUES (?, 'u', '{}', 'x')",
            (None if id_type == "INTEGER" else "abc",),
        )
    with pytest.raises(StoreError) as err:
        await store.read_new_jobs(db, 10)
    assert what in err.value.reason and "INTEGER PRIMARY KEY" in err.value.reason


def _plans(db: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {
            name: [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
            for name, sql, params in (
                ("first", store.PAGE_QUERY_FIRST, (10,)),
                ("after", store.PAGE_QUERY_AFTER_VALUE, ("2025-01-01", 5, 10)),
                ("nulls", store.PAGE_QUERY_NULLS, (5, 10)),
            )
        }
    finally:
        conn.close()


@pytest.mark.parametrize("analyzed", [False, True])
async def test_every_page_query_the_null_part_included_is_an_index_range_without_a_sort(
    tmp_path, analyzed
):
    db = init_db(tmp_path / "jobs.db")
    if analyzed:  # statistics from a queue where most rows are new and many lack captured_at
        add_rows(db, [{"status": "new", "captured_at": None} for _ in range(300)])
        add_rows(db, [{"status": "new", "captured_at": f"2025-01-{d:02d}"} for d in range(1, 29)])
        add_rows(db, [{"status": "reject"} for _ in range(50)])
        with closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("ANALYZE")
    for name, plan in _plans(db).items():
        assert len(plan) == 1, (name, plan)
        assert plan[0].startswith(f"SEARCH jobs USING INDEX {store.PAGE_INDEX_NAME} (status=?"), (
            name,
            plan,
        )
        assert not any("TEMP B-TREE" in step for step in plan), (name, plan)


async def test_ensure_indexes_adds_the_page_index_to_a_legacy_database_without_touching_rows(
    tmp_path,
):
    db = legacy_db(tmp_path / "jobs.db")
    add_rows(db, [{"status": "new", "captured_at": "2025-01-01"}, {"status": "reject"}])
    before = all_rows(db)
    async with connect_reader(db) as conn:
        assert not await store.has_page_index(conn)
    await store.ensure_indexes(db)
    await store.ensure_indexes(db)  # idempotent
    async with connect_reader(db) as conn:
        assert await store.has_page_index(conn)
    assert all_rows(db) == before
    with pytest.raises(FileNotFoundError):
        await store.ensure_indexes(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()


async def test_update_statuses_is_all_or_nothing_and_sets_updated_at(tmp_path):
    db = init_db(tmp_path / "jobs.db")
    a, b = add_rows(db, [{"status": "new"}, {"status": "new"}])
    before = all_rows(db)
    async with store.connect_existing_writer(db) as conn:
        with pytest.raises(store.MissingJobsError) as err:
            await store.update_statuses(
                conn, [store.StatusUpdate(a, "reject"), store.StatusUpdate(999, "reject")]
            )
        assert err.value.missing_ids == (999,)
        assert all_rows(db) == before
        stamp = await store.update_statuses(
            conn, [store.StatusUpdate(a, "reject"), store.StatusUpdate(b, "shortlist")]
        )
    with closing(sqlite3.connect(db)) as check, check:
        got = check.execute("SELECT id, status, updated_at FROM jobs ORDER BY id").fetchall()
    assert got == [(a, "reject", stamp), (b, "shortlist", stamp)]
    assert stamp.endswith("Z")


async def test_existing_writer_never_creates_a_database(tmp_path):
    with pytest.raises(FileNotFoundError):
        await store.connect_existing_writer(tmp_path / "jobs.db")
    assert list(tmp_path.iterdir()) == []


# --- cancellation: no statement outlives its call ------------------------------------------------


async def test_a_long_query_cancelled_midway_stops_and_its_thread_and_connection_go(tmp_path):
    db = init_db(tmp_path / "jobs.db")
    add_rows(db, [{"status": "new", "description": "x" * 100} for _ in range(2000)])
    async with connect_reader(db) as conn:
        assert busy_store_threads(wait=0) == 1
        started = time.monotonic()
        with anyio.move_on_after(0.3) as scope:
            # 8e9 row combinations: minutes of work unless it is interrupted.
            await conn.fetchall("SELECT count(*) FROM jobs a, jobs b, jobs c")
        stopped = time.monotonic() - started
        assert scope.cancelled_caught
        assert conn.closed
    assert stopped < 2, stopped
    assert busy_store_threads() == 0
    assert open_fds_to(db) == 0


async def test_a_lock_wait_cancelled_at_any_moment_closes_its_connection(tmp_path):
    # A lock wait is slices of SQLite's busy handler with a pause between them: a cancellation
    # landing in a pause closes the connection as one inside a slice does. The delays cover a
    # whole slice and pause, so some land in a pause (which used to leave it open).
    db = init_db(tmp_path / "jobs.db")
    blocker = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    period = BUSY_SLICE_S + 0.02  # a slice and the pause after it
    try:
        for step in range(13):
            async with store.connect_existing_writer(db, busy_timeout_s=30) as conn:
                with anyio.move_on_after(BUSY_SLICE_S + step * period / 12):
                    await store.update_statuses(conn, [store.StatusUpdate(1, "new")])
                assert conn.closed, f"left open when cancelled after step {step}"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert busy_store_threads() == 0
    assert open_fds_to(db) == 0


async def test_a_lock_wait_is_cancelled_promptly_and_leaves_nothing_open(tmp_path):
    db = init_db(tmp_path / "jobs.db")
    blocker = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        async with store.connect_existing_writer(db, busy_timeout_s=30) as conn:
            started = time.monotonic()
            with anyio.move_on_after(0.3):
                await store.update_statuses(conn, [store.StatusUpdate(1, "new")])
            assert time.monotonic() - started < 1.5
            assert conn.closed
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert busy_store_threads() == 0
    assert open_fds_to(db) == 0


def slow_updates(db: Path) -> None:
    """Make every UPDATE of a job take ~0.1-0.5 s (a trigger over a cross join)."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TABLE slow (x)")
        conn.executemany("INSERT INTO slow VALUES (?)", [(i,) for i in range(220)])
        conn.execute(
            "CREATE TRIGGER slow_update AFTER UPDATE ON jobs BEGIN "
            "SELECT count(*) FROM slow a, slow b, slow c; END"
        )


async def test_a_cancelled_update_batch_applies_nothing(tmp_path):
    db = init_db(tmp_path / "jobs.db")
    ids = add_rows(db, [{"status": "new"} for _ in range(20)])
    slow_updates(db)
    before = all_rows(db)
    async with store.connect_existing_writer(db) as conn:
        with anyio.move_on_after(0.5) as scope:
            await store.update_statuses(conn, [store.StatusUpdate(i, "reject") for i in ids])
    assert scope.cancelled_caught
    assert all_rows(db) == before
    assert not (tmp_path / "jobs.db-journal").exists()
    assert busy_store_threads() == 0
    # The interrupted transaction left no lock behind: the next writer goes straight in.
    with closing(sqlite3.connect(db, timeout=0)) as conn, conn:
        conn.execute("UPDATE jobs SET status = 'new' WHERE id = ?", (ids[0],))


async def test_a_cancelled_insert_applies_nothing(tmp_path):
    db = init_db(tmp_path / "jobs.db")
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TABLE slow (x)")
        conn.executemany("INSERT INTO slow VALUES (?)", [(i,) for i in range(220)])
        conn.execute(
            "CREATE TRIGGER slow_insert AFTER INSERT ON jobs BEGIN "
            "SELECT count(*) FROM slow a, slow b, slow c; END"
        )
    async with connect_writer(db) as conn:
        with anyio.move_on_after(0.5) as scope:
            await insert_jobs(conn, [job(f"u{i}") for i in range(20)])
    assert scope.cancelled_caught
    assert all_rows(db) == []
    assert busy_store_threads() == 0


# --- the page index: created safely on a live database ------------------------------------------


def legacy_rows(db: Path, count: int) -> None:
    generate_rows(
        db,
        count,
        {
            "url": "'u' || i",
            "status": "CASE i % 3 WHEN 0 THEN 'new' WHEN 1 THEN 'reject' ELSE 'reviewed' END",
            "captured_at": "printf('2025-%02d-%02dT%02d:00:00Z', i % 12 + 1, i % 28 + 1, i % 24)",
            "description": ":description",
            "payload_json": "'{}'",
            "created_at": "'x'",
        },
        description="d" * 300,
    )


async def test_the_progress_estimate_of_the_page_index_ends_close_to_complete(tmp_path):
    db = legacy_db(tmp_path / "jobs.db")
    legacy_rows(db, 50_000)
    progress = store.IndexProgress()
    assert progress.fraction() is None
    assert await store.create_page_index(db, progress=progress) is True
    assert progress.rows == 50_000
    # What SQLite really ran, against what the estimate assumes: within a fifth.
    ratio = progress.steps / (progress.rows * store.PAGE_INDEX_STEPS_PER_ROW)
    assert 0.8 < ratio < 1.2, ratio
    assert 0.8 < progress.fraction() <= 0.99


async def test_readers_keep_reading_while_the_page_index_is_created(tmp_path):
    db = legacy_db(tmp_path / "jobs.db")
    legacy_rows(db, 150_000)  # an index bigger than SQLite's default page cache
    progress = store.IndexProgress()
    outcomes: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0)
        while not stop.is_set():
            building = 0 < progress.steps < 0.8 * max(progress.rows, 1) * 11
            try:
                conn.execute("SELECT count(*) FROM jobs WHERE status = 'new'").fetchone()
                outcome = "ok"
            except sqlite3.OperationalError:
                outcome = "busy"
            if building:
                outcomes.append(outcome)
            time.sleep(0.005)
        conn.close()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        await store.create_page_index(db, progress=progress)
    finally:
        stop.set()
        thread.join()
    assert outcomes, "the reader never ran during the build"
    assert set(outcomes) == {"ok"}, outcomes.count("busy")


async def test_init_creates_an_empty_store_then_only_what_is_missing(tmp_path):
    db = tmp_path / "data" / "capture" / "jobs.db"
    report = await store.init_store(db)
    assert report.created_file
    assert report.created == (
        "table jobs",
        "index idx_jobs_status",
        f"index {store.PAGE_INDEX_NAME}",
    )
    assert table_columns(db) == table_columns(legacy_db(tmp_path / "legacy.db"))
    again = await store.init_store(db)
    assert (again.created_file, again.created) == (False, ())
    old = legacy_db(tmp_path / "old.db")
    add_rows(old, [{"status": "new"}])
    before = all_rows(old)
    upgrade = await store.init_store(old)
    assert upgrade.created == (f"index {store.PAGE_INDEX_NAME}",)
    assert all_rows(old) == before


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway_queue", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )


def test_the_init_command_creates_a_store_and_says_what_it_did(tmp_path):
    first = _cli(tmp_path, "init")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("data/capture/jobs.db: created an empty jobs store (")
    assert store.PAGE_INDEX_NAME in first.stdout
    assert (tmp_path / "data/capture/jobs.db").is_file()
    again = _cli(tmp_path, "init")
    assert again.returncode == 0 and "nothing to do" in again.stdout
    other = _cli(tmp_path, "init", "--db", "other/jobs.db")
    assert other.returncode == 0 and (tmp_path / "other/jobs.db").is_file()
    (tmp_path / "bad.db").write_bytes(b"not a database" * 100)
    bad = _cli(tmp_path, "init", "--db", "bad.db")
    assert bad.returncode == 1 and "not a SQLite database" in bad.stderr
    missing = _cli(tmp_path, "ensure-indexes", "--db", "none.db")
    assert missing.returncode == 2 and "python -m gateway_queue init" in missing.stderr
    assert not (tmp_path / "none.db").exists()


async def test_connections_reuse_a_few_threads_instead_of_one_new_thread_each(tmp_path):
    # A fresh thread per connection made every large page slower (cold malloc arena).
    db = init_db(tmp_path / "jobs.db")
    before = {t.ident for t in threading.enumerate()}
    for _ in range(20):
        async with connect_reader(db) as conn:
            await store.read_new_jobs_page(conn, 5)
    new_threads = [t for t in threading.enumerate() if t.ident not in before]
    assert len(new_threads) <= 2, [t.name for t in new_threads]
    assert all(t.name.startswith("jobs-store") for t in new_threads)
    assert busy_store_threads() == 0
