"""Time limit and cancellation: a run reports what it finished and never writes half a term."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import anyio.from_thread
import pytest
from gateway_scrape.sources import RecordedSource
from scrape_testutil import OFFLINE, postings, rows

DB = Path("data/capture/jobs.db")


@pytest.mark.anyio
async def test_a_term_still_running_near_the_time_limit_fails_and_the_rest_is_reported(
    scrape_gateway, tmp_path
):
    release = threading.Event()

    def slow(term: str) -> None:
        if term == "slow":
            release.wait(10)  # a board that hangs

    source = RecordedSource(
        {"fast": postings(0, 2), "slow": postings(10, 2), "later": postings(20, 2)}, on_fetch=slow
    )
    # A 2 s limit: terms get 1.5 s, the last 0.5 s is kept to report.
    gw = scrape_gateway(source, plugin_config={"scrape": {"timeout_seconds": 2}})
    try:
        async with gw:
            res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["fast", "slow", "later"]})
    finally:
        release.set()
    assert not res.is_error, res.payload
    fast, slow_term, later = res.payload["results"]
    assert fast["success"] and fast["inserted_count"] == 2
    assert not slow_term["success"] and "time limit" in slow_term["error"]
    assert not later["success"] and later["error"].startswith("not started")
    assert [t for (t,) in rows(tmp_path / DB, "title")] == ["Engineer 0", "Engineer 1"]


@pytest.mark.anyio
async def test_cancelling_a_call_mid_term_leaves_earlier_terms_and_nothing_of_that_term(
    scrape_gateway, tmp_path
):
    scope = anyio.CancelScope()

    def cancel_on_third(term: str) -> None:
        if term == "c":
            anyio.from_thread.run_sync(scope.cancel)  # the client goes away during term c

    source = RecordedSource(
        {"a": postings(0, 2), "b": postings(10, 3), "c": postings(20, 4)}, on_fetch=cancel_on_third
    )
    gw = scrape_gateway(source)
    async with gw:
        with scope:
            await gw.call("scrape_jobs", {**OFFLINE, "terms": ["a", "b", "c"]})
    assert scope.cancelled_caught
    assert len(rows(tmp_path / DB)) == 5  # a and b; none of c


def test_the_time_limit_setting_is_the_tools_timeout(gateway_factory):
    gw = gateway_factory(plugins=["scrape"], plugin_config={"scrape": {"timeout_seconds": 120}})
    tool = next(t for t in gw.registry.all() if t.name == "scrape_jobs")
    assert tool.spec.timeout == 120
    default = gateway_factory(plugins=["scrape"])
    assert next(t for t in default.registry.all() if t.name == "scrape_jobs").spec.timeout == 900


def test_an_invalid_setting_skips_the_plugin_with_the_reason(gateway_factory):
    gw = gateway_factory(plugins=["scrape"], plugin_config={"scrape": {"timeout_seconds": 0}})
    record = gw.plugin("scrape")
    assert record.state.value == "failed" and "timeout_seconds" in record.reason


def test_the_time_limit_can_come_from_the_environment(gateway_factory):
    gw = gateway_factory(plugins=["scrape"], env={"MCP_GATEWAY_SCRAPE_TIMEOUT": "45"})
    assert next(t for t in gw.registry.all() if t.name == "scrape_jobs").spec.timeout == 45


@pytest.mark.anyio
async def test_a_call_cancelled_during_an_insert_rolls_that_term_back_whole(
    scrape_gateway, tmp_path
):
    import sqlite3
    from contextlib import closing

    from gateway_queue import store

    db = tmp_path / DB
    await store.init_store(db)
    # Every inserted row now takes a noticeable time.
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TABLE slow (x)")
        conn.executemany("INSERT INTO slow VALUES (?)", [(i,) for i in range(220)])
        conn.execute(
            "CREATE TRIGGER slow_insert AFTER INSERT ON jobs BEGIN "
            "SELECT count(*) FROM slow a, slow b, slow c; END"
        )
    fetched_b = threading.Event()
    source = RecordedSource(
        {"a": postings(0, 2), "b": postings(10, 40)},
        on_fetch=lambda term: fetched_b.set() if term == "b" else None,
    )
    gw = scrape_gateway(source)
    async with gw, anyio.create_task_group() as tg:

        async def cancel_during_b_insert() -> None:
            while not fetched_b.is_set():
                await anyio.sleep(0.01)
            await anyio.sleep(0.4)  # b's 40 rows take seconds to insert
            tg.cancel_scope.cancel()

        tg.start_soon(cancel_during_b_insert)
        await gw.call("scrape_jobs", {**OFFLINE, "terms": ["a", "b"]})
    assert tg.cancel_scope.cancelled_caught
    assert [t for (t,) in rows(db, "title")] == ["Engineer 0", "Engineer 1"]  # a only, b none
