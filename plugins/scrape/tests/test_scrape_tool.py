"""scrape_jobs through the real gateway pipeline, a real SQLite file and a recorded source."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from gateway_queue.store import ALLOWED_STATUSES
from gateway_scrape import run
from gateway_scrape.models import DEFAULT_TERMS
from gateway_scrape.sources import RecordedSource
from scrape_testutil import OFFLINE, posting, postings, rows, use_source

from gateway.testing import assert_plugin_conforms, gateway_client

DB = Path("data/capture/jobs.db")
COUNTERS = (
    "fetched_count",
    "cleaned_count",
    "inserted_count",
    "duplicate_count",
    "skipped_no_url",
    "skipped_no_description",
)


@pytest.mark.anyio
async def test_scrape_plugin_conforms(tmp_path):
    await assert_plugin_conforms("scrape", cwd=tmp_path)


@pytest.mark.anyio
async def test_defaults_scrape_the_three_default_terms_into_status_new(
    scrape_gateway, recorded, tmp_path
):
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call("scrape_jobs", dict(OFFLINE))
    assert not res.is_error, res.payload
    out = res.payload
    assert [r["term"] for r in out["results"]] == list(DEFAULT_TERMS)
    # Defaults reached the source: location, sites, results_wanted, hours_old.
    assert recorded.calls[0] == {
        "term": "ai engineer",
        "location": "Ontario, Canada",
        "sites": ["linkedin"],
        "results_wanted": 20,
        "hours_old": 2,
    }
    assert out["totals"] == {
        "term_count": 3,
        "successful_terms": 3,
        "failed_terms": 0,
        "fetched_count": 12,
        "cleaned_count": 12,
        "inserted_count": 12,
        "duplicate_count": 0,
        "skipped_no_url": 0,
        "skipped_no_description": 0,
    }
    assert out["dry_run"] is False
    assert out["started_at"] <= out["finished_at"] and out["duration_ms"] >= 0
    stored = rows(tmp_path / DB, "status", "job_id", "source", "created_at", "attempt_count")
    assert len(stored) == 12
    assert {r[0] for r in stored} == {"new"}
    assert stored[0][1:3] == ("4000000000", "linkedin")
    assert all(r[3].endswith("Z") and r[4] == 0 for r in stored)
    # The schema was created with the status index the queue's readers rely on.
    assert ("idx_jobs_status",) in rows_of_master(tmp_path / DB)


def rows_of_master(db: Path) -> list[tuple[str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
    finally:
        conn.close()


@pytest.mark.anyio
async def test_values_that_look_like_sql_are_stored_verbatim(scrape_gateway, tmp_path):
    nasty = "x'); DROP TABLE jobs; --"
    record = posting(1, job_url=f"https://jobs.example.com/{nasty}", title=nasty, company='"; --')
    gw = scrape_gateway(RecordedSource({"t": [record]}))
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["t"]})
    assert res.payload["results"][0]["inserted_count"] == 1
    assert rows(tmp_path / DB, "url", "title", "company") == [
        (f"https://jobs.example.com/{nasty}", nasty, '"; --')
    ]


def test_the_plugin_registers_scrape_jobs_only(gateway_factory):
    gw = gateway_factory(plugins=["scrape"])
    assert gw.plugin("scrape").tools == ["scrape_jobs"]


@pytest.mark.anyio
@pytest.mark.parametrize("isolate", ["none", ["scrape"]])
async def test_its_own_variables_in_the_gateways_namespace_reach_it_wherever_it_runs(
    gateway_factory, isolate
):
    # MCP_GATEWAY_SCRAPE_* are the plugin's settings, not the core's: a worker is handed them.
    env = {"MCP_GATEWAY_SCRAPE_TIMEOUT": "123", "MCP_GATEWAY_TOKEN": "not-for-plugins-1234"}
    gw = gateway_factory(plugins=["queue", "scrape"], isolate=isolate, env=env)
    assert gw.plugin("scrape").runs == ("process" if isolate == "none" else "worker")
    async with gw:
        tool = gw.registry.get("scrape_jobs")
    assert tool is not None and tool.spec.timeout == 123.0


@pytest.mark.anyio
async def test_one_failing_term_among_three_is_reported_and_the_others_are_inserted(
    scrape_gateway, tmp_path
):
    source = RecordedSource(
        {"a": postings(0, 2), "c": postings(10, 3)},
        fail={"b": "response status code 429 (blocked: use a proxy)"},
    )
    gw = scrape_gateway(source)
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["a", "b", "c"]})
    assert not res.is_error
    a, b, c = res.payload["results"]
    assert [a["term"], b["term"], c["term"]] == ["a", "b", "c"]
    assert a["success"] and c["success"]
    assert not b["success"]
    assert b["error"] == "scrape failed: response status code 429 (blocked: use a proxy)"
    assert all(b[k] == 0 for k in COUNTERS)
    assert (a["inserted_count"], c["inserted_count"]) == (2, 3)
    assert res.payload["totals"]["failed_terms"] == 1
    assert res.payload["totals"]["successful_terms"] == 2
    assert len(rows(tmp_path / DB)) == 5


@pytest.mark.anyio
async def test_an_unexpected_source_exception_fails_only_its_term_with_a_sanitized_reason(
    scrape_gateway, tmp_path
):
    class Exploding(RecordedSource):
        def fetch(self, term, location, sites, results_wanted, hours_old):
            if term == "boom":
                raise RuntimeError(f"cannot read {tmp_path}/secret/cookies.txt")
            return super().fetch(term, location, sites, results_wanted, hours_old)

    gw = scrape_gateway(Exploding({"ok": postings(0, 1)}))
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["boom", "ok"]})
    boom, ok = res.payload["results"]
    assert not boom["success"] and ok["success"]
    assert boom["error"].startswith("scrape failed: RuntimeError: cannot read")
    assert str(tmp_path) not in json.dumps(res.payload)


@pytest.mark.anyio
async def test_a_failed_preflight_marks_the_term_failed_and_the_run_goes_on(
    scrape_gateway, recorded, tmp_path
):
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call(
            "scrape_jobs",
            {
                "terms": ["ai engineer", "backend engineer"],
                "preflight_host": "nonexistent.invalid",
                "retry_count": 2,
                "retry_sleep_seconds": 0,
            },
        )
    assert not res.is_error
    for r in res.payload["results"]:
        assert not r["success"]
        assert "could not resolve 'nonexistent.invalid' after 2 attempt(s)" in r["error"]
    assert res.payload["totals"]["failed_terms"] == 2
    assert recorded.calls == []  # nothing scraped after a failed preflight
    # The schema was bootstrapped; no rows were written.
    assert rows(tmp_path / DB) == []


@pytest.mark.anyio
async def test_a_resolvable_preflight_host_lets_the_scrape_run(scrape_gateway, recorded):
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call(
            "scrape_jobs", {"terms": ["ai engineer"], "preflight_host": "localhost"}
        )
    assert res.payload["results"][0]["success"], res.payload


@pytest.mark.anyio
async def test_a_rerun_inserts_nothing_and_counts_duplicates(scrape_gateway, recorded, tmp_path):
    gw = scrape_gateway(recorded)
    async with gw:
        first = await gw.call("scrape_jobs", dict(OFFLINE))
        before = rows(tmp_path / DB, "*")
        second = await gw.call("scrape_jobs", dict(OFFLINE))
    assert first.payload["totals"]["inserted_count"] == 12
    assert second.payload["totals"]["inserted_count"] == 0
    assert second.payload["totals"]["duplicate_count"] == 12
    assert rows(tmp_path / DB, "*") == before
    # Same request + same source data -> same counts, term by term.
    strip = lambda r: {k: r[k] for k in ("term", "success", "fetched_count", "cleaned_count")}  # noqa: E731
    assert [strip(r) for r in first.payload["results"]] == [
        strip(r) for r in second.payload["results"]
    ]


@pytest.mark.anyio
async def test_same_request_and_same_source_data_give_the_same_counts_in_fresh_databases(
    scrape_gateway, recorded, tmp_path
):
    gw = scrape_gateway(recorded)
    results = []
    async with gw:
        for n in range(2):
            res = await gw.call("scrape_jobs", {**OFFLINE, "db_path": f"data/run{n}/jobs.db"})
            results.append([{k: r[k] for k in ("term", *COUNTERS)} for r in res.payload["results"]])
    assert results[0] == results[1]
    assert rows(tmp_path / "data/run0/jobs.db", "url", "job_id", "payload_json") == rows(
        tmp_path / "data/run1/jobs.db", "url", "job_id", "payload_json"
    )


@pytest.mark.anyio
async def test_an_existing_row_is_never_modified_by_a_duplicate(scrape_gateway, tmp_path):
    first = RecordedSource({"t": [posting(1, title="Original", description="first text")]})
    gw = scrape_gateway(first)
    async with gw:
        await gw.call("scrape_jobs", {**OFFLINE, "terms": ["t"]})
        conn = sqlite3.connect(tmp_path / DB)
        conn.execute("UPDATE jobs SET status = 'shortlist', updated_at = 'x'")
        conn.commit()
        conn.close()
        before = rows(tmp_path / DB, "*")
        use_source(gw, RecordedSource({"t": [posting(1, title="Changed", description="new text")]}))
        res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["t"], "status": "new"})
    assert res.payload["results"][0]["duplicate_count"] == 1
    assert rows(tmp_path / DB, "*") == before


@pytest.mark.anyio
async def test_duplicates_within_one_term_count_as_duplicates(scrape_gateway, tmp_path):
    gw = scrape_gateway(RecordedSource({"t": [posting(1), posting(1, title="again"), posting(2)]}))
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["t"]})
    r = res.payload["results"][0]
    assert (r["fetched_count"], r["cleaned_count"], r["inserted_count"], r["duplicate_count"]) == (
        3,
        3,
        2,
        1,
    )


@pytest.mark.anyio
async def test_filters_skip_records_without_url_or_description(scrape_gateway, tmp_path):
    records = [
        posting(1),
        posting(2, job_url=None, job_url_direct=None),
        posting(3, job_url="  ", job_url_direct=""),
        posting(4, job_url=None),  # falls back to job_url_direct
        posting(5, description=None),
        posting(6, description="   "),
    ]
    gw = scrape_gateway(RecordedSource({"t": records}))
    async with gw:
        strict = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["t"], "db_path": "data/a.db"})
        lenient = await gw.call(
            "scrape_jobs",
            {**OFFLINE, "terms": ["t"], "db_path": "data/b.db", "require_description": False},
        )
    s = strict.payload["results"][0]
    assert (
        s["fetched_count"],
        s["skipped_no_url"],
        s["skipped_no_description"],
        s["cleaned_count"],
    ) == (6, 2, 2, 2)
    assert s["inserted_count"] == 2
    assert [r[0] for r in rows(tmp_path / "data/a.db")] == [
        "https://www.linkedin.com/jobs/view/4000000001",
        "https://careers.example.com/jobs/4",
    ]
    lax = lenient.payload["results"][0]
    assert (lax["skipped_no_url"], lax["skipped_no_description"], lax["cleaned_count"]) == (2, 0, 4)
    assert strict.payload["totals"]["skipped_no_url"] == 2
    assert strict.payload["totals"]["skipped_no_description"] == 2


@pytest.mark.anyio
@pytest.mark.parametrize("status", ALLOWED_STATUSES)
async def test_a_status_override_is_used_for_new_rows(scrape_gateway, tmp_path, status):
    gw = scrape_gateway(RecordedSource({"t": postings(0, 2)}))
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["t"], "status": status})
    assert not res.is_error
    assert {r[0] for r in rows(tmp_path / DB, "status")} == {status}


@pytest.mark.anyio
async def test_dry_run_leaves_an_existing_database_byte_identical(
    scrape_gateway, recorded, tmp_path
):
    gw = scrape_gateway(recorded)
    async with gw:
        await gw.call("scrape_jobs", {**OFFLINE, "terms": ["ai engineer"]})
        before = (tmp_path / DB).read_bytes()
        listing = sorted(p.name for p in (tmp_path / DB).parent.iterdir() if p.suffix != ".json")
        res = await gw.call("scrape_jobs", {**OFFLINE, "dry_run": True})
    assert res.payload["dry_run"] is True
    t = res.payload["totals"]
    assert (t["fetched_count"], t["cleaned_count"], t["inserted_count"], t["duplicate_count"]) == (
        12,
        12,
        0,
        0,
    )
    assert (tmp_path / DB).read_bytes() == before
    assert (
        sorted(p.name for p in (tmp_path / DB).parent.iterdir() if p.suffix != ".json") == listing
    )


@pytest.mark.anyio
async def test_dry_run_does_not_create_a_missing_database(scrape_gateway, recorded, tmp_path):
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call(
            "scrape_jobs",
            {**OFFLINE, "dry_run": True, "db_path": "data/new/jobs.db", "save_capture_json": False},
        )
    assert not res.is_error and res.payload["totals"]["cleaned_count"] == 12
    assert not (tmp_path / "data/new").exists()
    assert not (tmp_path / "data").exists()


@pytest.mark.anyio
async def test_dry_run_still_writes_capture_files(scrape_gateway, recorded, tmp_path):
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "dry_run": True, "terms": ["ai engineer"]})
    path = res.payload["results"][0]["capture_path"]
    assert path and (tmp_path / path).is_file()
    assert not (tmp_path / DB).exists()


@pytest.mark.anyio
async def test_capture_files_hold_the_raw_records_per_term_at_relative_paths(
    scrape_gateway, tmp_path
):
    raw = [posting(1, min_amount=float("nan")), posting(2)]
    gw = scrape_gateway(RecordedSource({"first term": raw, "second": postings(5, 1)}))
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["first term", "second"]})
    first, second = res.payload["results"]
    assert first["capture_path"].startswith("data/capture/")
    assert first["capture_path"].endswith("_01_first-term.json")
    assert second["capture_path"].endswith("_02_second.json")
    assert res.payload["run_id"] in first["capture_path"]
    doc = json.loads((tmp_path / first["capture_path"]).read_text(encoding="utf-8"))
    assert doc["term"] == "first term" and doc["run_id"] == res.payload["run_id"]
    assert doc["record_count"] == 2
    assert doc["records"][0]["min_amount"] is None  # NaN became null
    assert doc["records"][1] == posting(2)
    # No temporary files left behind.
    assert (
        sorted(p.name for p in (tmp_path / "data/capture").iterdir() if p.name.startswith("."))
        == []
    )


@pytest.mark.anyio
async def test_no_capture_files_when_save_capture_json_is_false(scrape_gateway, recorded, tmp_path):
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "save_capture_json": False})
    assert all(r["capture_path"] is None for r in res.payload["results"])
    assert [p.name for p in (tmp_path / "data/capture").iterdir()] == ["jobs.db"]


@pytest.mark.anyio
async def test_a_capture_failure_does_not_affect_the_database_results(
    scrape_gateway, recorded, tmp_path
):
    (tmp_path / "data").mkdir()
    (tmp_path / "data/blocked").write_text("a file where the capture folder should be")
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "capture_dir": "data/blocked"})
    for r in res.payload["results"]:
        assert r["success"] and r["capture_path"] is None
        assert r["capture_error"].startswith("capture file not written:")
        assert str(tmp_path) not in r["capture_error"]
    assert res.payload["totals"]["inserted_count"] == 12
    assert len(rows(tmp_path / DB)) == 12


@pytest.mark.anyio
async def test_a_database_that_cannot_be_created_is_db_error_before_any_scrape(
    scrape_gateway, recorded, tmp_path
):
    (tmp_path / "data").mkdir()
    (tmp_path / "data/not-a-folder").write_text("x")
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "db_path": "data/not-a-folder/jobs.db"})
    assert res.is_error and res.code == "DB_ERROR", res.payload
    assert str(tmp_path) not in res.text() and "CREATE" not in res.text()
    assert recorded.calls == []


@pytest.mark.anyio
async def test_a_file_that_is_not_a_database_is_db_error(scrape_gateway, recorded, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data/jobs.db").write_bytes(b"this is not sqlite" * 100)
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "db_path": "data/jobs.db"})
    assert res.code == "DB_ERROR"
    assert "not a SQLite database" in res.payload["error"]["message"]
    assert recorded.calls == []


@pytest.mark.anyio
async def test_a_jobs_table_without_the_expected_columns_is_db_error_and_left_alone(
    scrape_gateway, recorded, tmp_path
):
    (tmp_path / "data").mkdir()
    conn = sqlite3.connect(tmp_path / "data/jobs.db")
    conn.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, url TEXT)")
    conn.commit()
    conn.close()
    before = (tmp_path / "data/jobs.db").read_bytes()
    gw = scrape_gateway(recorded)
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "db_path": "data/jobs.db"})
    assert res.code == "DB_ERROR"
    assert "expected columns" in res.payload["error"]["message"]
    assert (tmp_path / "data/jobs.db").read_bytes() == before
    assert recorded.calls == []


@pytest.mark.anyio
async def test_a_locked_database_during_an_insert_is_a_retryable_db_error_and_writes_nothing(
    scrape_gateway, recorded, tmp_path, monkeypatch
):
    monkeypatch.setattr(run, "WRITE_BUSY_TIMEOUT_S", 0.5)  # the same path as 5 s, sooner
    gw = scrape_gateway(recorded)
    async with gw:
        await gw.call("scrape_jobs", {**OFFLINE, "terms": ["ai engineer"]})  # bootstrap + 5 rows
        locker = sqlite3.connect(tmp_path / DB, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            # The writer waits its busy timeout for the lock, then gives up.
            res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["backend engineer"]})
        finally:
            locker.execute("ROLLBACK")
            locker.close()
    assert res.code == "DB_ERROR"
    assert res.payload["error"]["retryable"] is True
    assert len(rows(tmp_path / DB)) == 5


@pytest.mark.anyio
async def test_progress_is_reported_once_per_term_to_the_mcp_client(scrape_gateway, recorded):
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        seen.append((p, total, message))

    gw = scrape_gateway(recorded)
    async with gw, gateway_client(gw) as client:
        res = await client.call_tool("scrape_jobs", dict(OFFLINE), progress_callback=on_progress)
    assert not res.is_error
    assert res.structured_content["totals"]["inserted_count"] == 12
    assert [(p, t) for p, t, _ in seen] == [(1, 3), (2, 3), (3, 3)]
    assert seen[0][2] == "term 1/3 'ai engineer': 5 inserted, 0 duplicates"


@pytest.mark.anyio
async def test_the_tool_is_published_as_an_idempotent_open_world_mutation(scrape_gateway, recorded):
    gw = scrape_gateway(recorded)
    async with gw, gateway_client(gw) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    tool = tools["scrape_jobs"]
    ann = tool.annotations
    assert ann.read_only_hint is False and ann.destructive_hint is False
    assert ann.idempotent_hint is True and ann.open_world_hint is True
    assert "MUTATION:" in tool.description and "NOT reversible" in tool.description
    props = tool.input_schema["properties"]
    assert props["terms"]["default"] == list(DEFAULT_TERMS)
    assert props["sites"]["default"] == ["linkedin"]
    assert props["status"]["enum"] == list(ALLOWED_STATUSES)
    assert props["results_wanted"]["maximum"] == 200 and props["hours_old"]["maximum"] == 168
    assert tool.output_schema is not None
