"""bulk_update_job_status through the gateway pipeline, on real SQLite files."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from contextlib import closing

import anyio
import pytest
from gwq_testutil import DB_REL, add_rows, all_rows, init_db, legacy_db, open_fds_to

from gateway.testing import gateway_client

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture
def db(tmp_path):
    path = legacy_db(tmp_path / DB_REL)  # the previous pipeline's layout, no page index
    add_rows(
        path,
        [
            {"status": "new", "title": f"job {i}", "captured_at": "2025-01-01", "run_id": "r1"}
            for i in range(10)
        ],
    )
    return path


def statuses(path):
    with closing(sqlite3.connect(path)) as conn, conn:
        return dict(conn.execute("SELECT id, status FROM jobs"))


async def update(gw, updates, **extra):
    return await gw.call("bulk_update_job_status", {"updates": updates, **extra})


@pytest.mark.anyio
async def test_updates_set_status_and_updated_at_and_touch_nothing_else(gateway_factory, db):
    before = {row[0]: row for row in all_rows(db)}
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await update(
            gw,
            [
                {"id": 3, "status": "shortlist"},
                {"id": 1, "status": "reject", "notes": "needs a clearance"},
                {"id": 2, "status": "reviewed"},
            ],
        )
    assert result.payload == {
        "updated_count": 3,
        "failed_count": 0,
        "results": [
            {"id": 3, "success": True, "error": None},
            {"id": 1, "success": True, "error": None},
            {"id": 2, "success": True, "error": None},
        ],
    }
    with closing(sqlite3.connect(db)) as conn, conn:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(jobs)")]
    after = {row[0]: row for row in all_rows(db)}
    changed = {1: "reject", 2: "reviewed", 3: "shortlist"}
    stamps = set()
    for job_id, row in after.items():
        old = dict(zip(cols, before[job_id], strict=True))
        new = dict(zip(cols, row, strict=True))
        if job_id in changed:
            assert new.pop("status") == changed[job_id]
            stamps.add(new.pop("updated_at"))
            old.pop("status"), old.pop("updated_at")
        assert new == old
    assert len(stamps) == 1 and ISO_UTC.match(stamps.pop())


@pytest.mark.anyio
async def test_same_status_again_succeeds_and_refreshes_updated_at(gateway_factory, db):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        first = await update(gw, [{"id": 4, "status": "applied"}])
        again = await update(gw, [{"id": 4, "status": "applied"}])
    assert first.payload["updated_count"] == again.payload["updated_count"] == 1
    assert statuses(db)[4] == "applied"


@pytest.mark.anyio
async def test_a_decision_is_reversible_by_another_update(gateway_factory, db):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        await update(gw, [{"id": 5, "status": "reject"}])
        await update(gw, [{"id": 5, "status": "new"}])
        page = (await gw.call("bulk_read_new_jobs", {"limit": 100})).payload
    assert 5 in {j["id"] for j in page["jobs"]}


@pytest.mark.anyio
async def test_a_missing_id_changes_nothing_and_the_error_names_it(gateway_factory, db):
    before = all_rows(db)
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await update(
            gw,
            [
                {"id": 1, "status": "reject"},
                {"id": 404, "status": "reject"},
                {"id": 2, "status": "shortlist"},
                {"id": 405, "status": "applied"},
            ],
        )
    assert all_rows(db) == before
    assert result.is_error and result.code == "NOT_FOUND"
    error = result.payload["error"]
    assert "nothing in this batch was applied" in error["message"]
    assert error["details"] == {"missing_ids": [404, 405]}  # each thing said once


@pytest.mark.parametrize(
    ("updates", "field"),
    [
        ([{"id": 1, "status": "new"}, {"id": 2, "status": "maybe"}], "updates.1.status"),
        ([{"id": 1, "status": " new"}], "updates.0.status"),
        ([{"id": 1, "status": "NEW"}], "updates.0.status"),
        ([{"id": 0, "status": "new"}], "updates.0.id"),
        ([{"id": "1", "status": "new"}], "updates.0.id"),
        ([{"id": 1.5, "status": "new"}], "updates.0.id"),
        ([{"status": "new"}], "updates.0.id"),
        ([{"id": 1, "status": "new"}, {"id": 2, "status": "new", "why": "x"}], "updates.1.why"),
        ([{"id": 1, "status": "new", "notes": "x" * 2001}], "updates.0.notes"),
        ([], "updates"),
        ([{"id": i, "status": "new"} for i in range(1, 102)], "updates"),
        ("not a list", "updates"),
    ],
)
@pytest.mark.anyio
async def test_invalid_items_are_validation_errors_naming_the_item_and_change_nothing(
    gateway_factory, db, updates, field
):
    before = all_rows(db)
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await update(gw, updates)
    assert result.code == "VALIDATION_ERROR", result.payload
    fields = [f["field"] for f in result.payload["error"]["details"]["fields"]]
    assert field in fields
    assert all_rows(db) == before


@pytest.mark.anyio
async def test_duplicate_ids_are_refused_naming_the_item_indexes(gateway_factory, db):
    before = all_rows(db)
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await update(
            gw,
            [
                {"id": 7, "status": "reject"},
                {"id": 8, "status": "reject"},
                {"id": 7, "status": "shortlist"},
                {"id": 8, "status": "reject"},
            ],
        )
    assert result.code == "VALIDATION_ERROR"
    message = result.payload["error"]["message"]
    assert "id 7 at items 0 and 2" in message and "id 8 at items 1 and 3" in message
    assert all_rows(db) == before


@pytest.mark.anyio
async def test_exactly_100_updates_are_accepted(gateway_factory, tmp_path):
    path = tmp_path / DB_REL
    init_db(path)
    ids = add_rows(path, [{"status": "new"} for _ in range(100)])
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await update(gw, [{"id": i, "status": "reviewed"} for i in ids])
    assert result.payload["updated_count"] == 100
    assert set(statuses(path).values()) == {"reviewed"}


@pytest.mark.anyio
async def test_unknown_top_level_argument_is_refused(gateway_factory, db):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await gw.call(
            "bulk_update_job_status", {"updates": [{"id": 1, "status": "new"}], "force": True}
        )
    assert result.code == "VALIDATION_ERROR"


@pytest.mark.anyio
async def test_status_text_is_data_not_sql(gateway_factory, db):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await update(gw, [{"id": 1, "status": "new'; DROP TABLE jobs; --"}])
    assert result.code == "VALIDATION_ERROR"
    assert len(statuses(db)) == 10


@pytest.mark.anyio
async def test_missing_database_is_db_not_found_and_is_not_created(gateway_factory, tmp_path):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await update(gw, [{"id": 1, "status": "new"}])
        other = await update(gw, [{"id": 1, "status": "new"}], db_path="x/y.db")
    assert result.code == other.code == "DB_NOT_FOUND"
    assert DB_REL in result.payload["error"]["message"]
    assert not (tmp_path / DB_REL).exists() and not (tmp_path / "x").exists()


@pytest.mark.anyio
async def test_db_path_outside_the_data_roots_is_refused(gateway_factory, db):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await update(gw, [{"id": 1, "status": "new"}], db_path="../jobs.db")
    assert result.code == "VALIDATION_ERROR" and "db_path" in result.payload["error"]["message"]


@pytest.mark.anyio
async def test_locked_database_is_retried_then_db_error_retryable_and_nothing_changes(
    gateway_factory, db
):
    before = all_rows(db)
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
    try:
        gw = gateway_factory(plugins=["queue"], plugin_config={"queue": {"busy_timeout": 0.3}})
        async with gw:
            result = await update(gw, [{"id": 1, "status": "reject"}])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert result.code == "DB_ERROR"
    assert result.payload["error"]["retryable"] is True
    assert "locked" in result.payload["error"]["message"]
    assert all_rows(db) == before
    assert open_fds_to(db) == 0
    async with gw:
        retried = await update(gw, [{"id": 1, "status": "reject"}])
    assert retried.payload["updated_count"] == 1


@pytest.mark.anyio
async def test_update_waits_for_a_short_lock_and_then_succeeds(gateway_factory, db):
    blocker = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    gw = gateway_factory(plugins=["queue"], plugin_config={"queue": {"busy_timeout": 10}})

    async def release_soon():
        await anyio.sleep(0.3)
        blocker.execute("ROLLBACK")

    async with gw, anyio.create_task_group() as tg:
        tg.start_soon(release_soon)
        result = await update(gw, [{"id": 2, "status": "shortlist"}])
    blocker.close()
    assert result.payload["updated_count"] == 1
    assert statuses(db)[2] == "shortlist"


@pytest.mark.anyio
async def test_read_only_file_is_db_error_not_retryable(gateway_factory, db):
    import os

    if os.geteuid() == 0:
        pytest.skip("root ignores file permissions")
    db.chmod(0o444)
    try:
        gw = gateway_factory(plugins=["queue"])
        async with gw:
            result = await update(gw, [{"id": 1, "status": "new"}])
    finally:
        db.chmod(0o644)
    assert result.code == "DB_ERROR" and result.payload["error"]["retryable"] is False


@pytest.mark.anyio
async def test_notes_go_to_the_gateway_log_not_the_database(gateway_factory, db, caplog):
    before_cols = all_rows(db)[0]
    gw = gateway_factory(plugins=["queue"])
    with caplog.at_level(logging.INFO):
        async with gw:
            await update(gw, [{"id": 1, "status": "reject", "notes": "salary below range"}])
    assert "salary below range" in caplog.text
    assert len(all_rows(db)[0]) == len(before_cols)


@pytest.mark.anyio
async def test_mutation_is_audited_and_announced_to_clients(gateway_factory, db, tmp_path):
    gw = gateway_factory(plugins=["queue"])
    async with gw, gateway_client(gw) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool(
            "bulk_update_job_status", {"updates": [{"id": 1, "status": "shortlist"}]}
        )
    tool = listed["bulk_update_job_status"]
    assert tool.annotations.read_only_hint is False
    assert tool.annotations.destructive_hint is False
    assert tool.annotations.idempotent_hint is True
    assert "MUTATION:" in tool.description
    assert result.structured_content["updated_count"] == 1
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [a["outcome"] for a in audit if a["tool"] == "bulk_update_job_status"] == [
        "STARTED",
        "OK",
    ]


@pytest.mark.anyio
async def test_an_update_that_times_out_is_interrupted_and_applies_nothing(gateway_factory, db):
    from gwq_testutil import busy_store_threads
    from test_queue_store import slow_updates

    slow_updates(db)  # every row's UPDATE now takes a noticeable time
    before = all_rows(db)
    gw = gateway_factory(plugins=["queue"], default_timeout=0.4)
    async with gw:
        result = await update(gw, [{"id": i, "status": "reject"} for i in range(1, 11)])
        assert busy_store_threads() == 0  # the statement stopped with the call, not after it
    assert result.code == "TIMEOUT", result.payload
    assert all_rows(db) == before
    assert open_fds_to(db) == 0


@pytest.mark.anyio
async def test_an_update_never_writes_into_a_file_the_reader_refuses(gateway_factory, tmp_path):
    from gwq_testutil import LEGACY_DDL

    # id is a plain column, not the INTEGER PRIMARY KEY: a job can have no id, and reading the
    # queue fails with DB_ERROR. Writing to it would keep filling a file no reader can page.
    path = tmp_path / "noid.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript(LEGACY_DDL.replace("id INTEGER PRIMARY KEY AUTOINCREMENT", "id INTEGER"))
        conn.execute("INSERT INTO jobs (url, payload_json, created_at) VALUES ('u', '{}', 'x')")
        conn.execute(
            "INSERT INTO jobs (id, url, payload_json, created_at) VALUES (7, 'u2', '{}', 'x')"
        )
    conn.close()
    before = path.read_bytes()
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        read = await gw.call("bulk_read_new_jobs", {"db_path": "noid.db"})
        result = await update(gw, [{"id": 7, "status": "reject"}], db_path="noid.db")
    assert read.code == "DB_ERROR"
    assert result.code == "DB_ERROR", result.payload
    assert "INTEGER PRIMARY KEY" in result.payload["error"]["message"]
    assert path.read_bytes() == before


@pytest.mark.anyio
async def test_an_update_never_writes_into_a_file_whose_next_read_is_corrupt(
    gateway_factory, tmp_path
):
    # One job per page (3 KB descriptions). The page holding the newest job, the first one a
    # read returns, is damaged; job 1, the one updated, sits on an intact page, so the update's
    # own statements would never notice.
    path = tmp_path / "corrupt.db"
    init_db(path)
    add_rows(
        path,
        [
            {
                "status": "new",
                "captured_at": f"2025-01-{day:02d}",
                "description": f"job{day:03d}-" + "x" * 3000,
            }
            for day in range(1, 29)
        ],
    )
    data = bytearray(path.read_bytes())
    page_size = 4096
    newest = data.index(b"job028-")
    start = newest - newest % page_size
    assert data.index(b"job001-") // page_size != start // page_size
    data[start : start + 8] = b"\xff" * 8  # the b-tree page header: not a valid page type
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        read = await gw.call("bulk_read_new_jobs", {"db_path": "corrupt.db"})
        result = await update(gw, [{"id": 1, "status": "reject"}], db_path="corrupt.db")
    assert read.code == "DB_ERROR" and "corrupt" in read.payload["error"]["message"]
    assert result.code == "DB_ERROR", result.payload
    assert "corrupt" in result.payload["error"]["message"]
    assert path.read_bytes() == before
