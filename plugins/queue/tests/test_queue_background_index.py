"""The page index of a user's existing database, created in the background when the deployment
may write: after start-up, never inside a call, with reads working meanwhile, shown by health."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import tempfile
import threading
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from gateway_queue import indexing, store
from gateway_queue.indexing import BackgroundIndex, IndexState
from gwq_testutil import (
    DB_REL,
    all_rows,
    as_jobs,
    busy_store_threads,
    generate_rows,
    legacy_db,
    new_jobs_in_order,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_start_delay(monkeypatch):
    # The real delay keeps short commands from writing; here the build may start at once.
    monkeypatch.setattr(indexing, "START_DELAY_S", 0.0)


#: Where each size of legacy database is built once per test process, then copied: 400,000
#: rows take seconds to insert, a copy a few milliseconds.
_TEMPLATES = tempfile.TemporaryDirectory(prefix="legacy-queue-")


def legacy_queue(path: Path, count: int) -> Path:
    """A database as the previous pipeline left it: no page index, ``count`` jobs."""
    template = Path(_TEMPLATES.name) / f"{count}.db"
    if not template.exists():
        _fill_legacy(template.with_suffix(".part"), count).rename(template)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, path)
    return path


def _fill_legacy(path: Path, count: int) -> Path:
    path.unlink(missing_ok=True)  # left by a build that failed earlier in this process
    legacy_db(path)
    generate_rows(
        path,
        count,
        {
            "url": "'https://jobs.example/' || i",
            "status": "CASE i % 4 WHEN 1 THEN 'reject' WHEN 3 THEN 'reviewed' ELSE 'new' END",
            "captured_at": "CASE WHEN i % 50 = 0 THEN NULL"
            " ELSE printf('2025-%02d-%02d', i % 12 + 1, i % 28 + 1) END",
            "title": "'job ' || i",
            "payload_json": "'{}'",
            "created_at": "'x'",
        },
    )
    return path


def indexes(path: Path) -> set[str]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn, conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}


def builder_of(gw) -> BackgroundIndex:
    return gw.plugin("queue").context.resources["page_index"]


async def jobs_db_health(gw) -> tuple[str, str]:
    (result,) = [r for r in await gw.health.run(use_cache=False) if r.name == "jobs_db"]
    return result.status, result.detail or ""


async def test_a_writable_deployment_creates_the_missing_index_after_start_and_says_so(
    gateway_factory, tmp_path, caplog
):
    db = legacy_queue(tmp_path / DB_REL, 2000)
    before = all_rows(db)
    gw = gateway_factory(plugins=["queue"])
    with caplog.at_level(logging.INFO):
        async with gw:
            assert await builder_of(gw).wait() is IndexState.DONE
            status, detail = await jobs_db_health(gw)
    assert store.PAGE_INDEX_NAME in indexes(db)
    assert all_rows(db) == before
    assert (status, detail) == ("ok", "data/capture/jobs.db ok")
    assert "creating the page index" in caplog.text and "created in" in caplog.text


async def test_start_up_returns_before_the_build_and_reads_work_while_it_runs(
    gateway_factory, tmp_path
):
    db = legacy_queue(tmp_path / DB_REL, 400_000)
    expected = as_jobs(new_jobs_in_order(db, limit=20))
    gw = gateway_factory(plugins=["queue"])
    during: list[bool] = []
    details: list[str] = []
    with anyio.fail_after(120):
        async with gw:
            builder = builder_of(gw)
            assert builder.state is IndexState.WAITING  # start-up did not wait for anything
            # BUILDING comes before the build has counted the rows its estimate needs: on a
            # loaded machine the health check could look in between.
            while builder.state is not IndexState.BUILDING or builder.progress.rows == 0:
                await anyio.sleep(0.005)
            details.append((await jobs_db_health(gw))[1])
            while builder.building:
                page = await gw.call("bulk_read_new_jobs", {"limit": 20})
                assert not page.is_error, page.payload
                assert page.payload["jobs"] == expected
                during.append(builder.building)
            assert await builder.wait() is IndexState.DONE
    assert any(during), "no read finished while the index was being created"
    assert "page index being created in the background: about" in details[0]
    assert store.PAGE_INDEX_NAME in indexes(db)


async def test_stopping_the_gateway_mid_build_interrupts_it_and_leaves_the_file_as_it_was(
    gateway_factory, tmp_path
):
    db = legacy_queue(tmp_path / DB_REL, 400_000)
    before = db.read_bytes()
    gw = gateway_factory(plugins=["queue"])
    with anyio.fail_after(60):
        async with gw:
            builder = builder_of(gw)
            while builder.progress.steps == 0:
                await anyio.sleep(0.005)
    assert builder.state is IndexState.STOPPED
    assert db.read_bytes() == before
    assert not (tmp_path / (DB_REL + "-journal")).exists()
    assert busy_store_threads() == 0


class HeldBuild(store.IndexProgress):
    """Progress whose first tick, which SQLite makes while the build holds the write lock,
    holds the build there until released: an update is then made during the build, however
    fast the build or slow the machine."""

    def __init__(self) -> None:
        self.locked = threading.Event()
        self.release = threading.Event()
        super().__init__()

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name == "steps" and value and not self.locked.is_set():
            self.locked.set()
            self.release.wait(60)  # on the build's SQLite thread; the event loop runs on


async def test_an_update_during_the_build_fails_retryable_and_says_why(
    gateway_factory, tmp_path, monkeypatch
):
    monkeypatch.setattr(indexing, "IndexProgress", HeldBuild)  # what the builder makes
    legacy_queue(tmp_path / DB_REL, 400_000)
    gw = gateway_factory(plugins=["queue"], plugin_config={"queue": {"busy_timeout": 0.05}})
    with anyio.fail_after(60):
        async with gw:
            builder = builder_of(gw)
            held = builder.progress
            try:
                while not held.locked.is_set():
                    await anyio.sleep(0.005)
                result = await gw.call(
                    "bulk_update_job_status", {"updates": [{"id": 1, "status": "new"}]}
                )
            finally:
                held.release.set()
            await builder.wait()
            after = await gw.call(
                "bulk_update_job_status", {"updates": [{"id": 1, "status": "new"}]}
            )
    assert result.code == "DB_ERROR" and result.payload["error"]["retryable"] is True
    assert (
        "creating the page index of this database in the background"
        in (result.payload["error"]["message"])
    )
    assert after.payload["updated_count"] == 1


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"read_only": True}, "the deployment is read-only"),
        ({"plugin_config": {"queue": {"auto_index": False}}}, "automatic creation is off"),
    ],
)
async def test_without_permission_to_write_nothing_is_written_and_health_keeps_warning(
    gateway_factory, tmp_path, settings, why
):
    db = legacy_queue(tmp_path / DB_REL, 500)
    before = (db.read_bytes(), sorted(p.name for p in db.parent.iterdir()))
    gw = gateway_factory(plugins=["queue"], **settings)
    async with gw:
        assert "page_index" not in gw.plugin("queue").context.resources
        await anyio.sleep(0.2)
        page = await gw.call("bulk_read_new_jobs", {"limit": 5})
        status, detail = await jobs_db_health(gw)
    assert not page.is_error
    assert (db.read_bytes(), sorted(p.name for p in db.parent.iterdir())) == before
    assert status == "ok"
    assert why in detail
    assert "run: python -m gateway_queue ensure-indexes --db data/capture/jobs.db" in detail


async def test_nothing_happens_without_a_database_and_health_says_it_is_not_initialized(
    gateway_factory, tmp_path
):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        assert await builder_of(gw).wait() is IndexState.NO_DATABASE
        status, detail = await jobs_db_health(gw)
    assert not (tmp_path / "data").exists()
    assert status == "uninitialized"
    assert detail == (
        "data/capture/jobs.db does not exist yet: the first scrape_jobs run creates it, "
        "or run: python -m gateway_queue init"
    )


async def test_an_indexed_database_is_left_alone(gateway_factory, tmp_path):
    db = legacy_queue(tmp_path / DB_REL, 100)
    await store.ensure_indexes(db)
    before = db.read_bytes()
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        assert await builder_of(gw).wait() is IndexState.PRESENT
    assert db.read_bytes() == before


async def test_the_health_check_explains_a_pending_build_before_it_starts(
    gateway_factory, tmp_path, monkeypatch
):
    monkeypatch.setattr(indexing, "START_DELAY_S", 30.0)
    legacy_queue(tmp_path / DB_REL, 100)
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        status, detail = await jobs_db_health(gw)
    assert status == "ok"
    assert "the gateway creates it in the background a few seconds after it starts" in detail
