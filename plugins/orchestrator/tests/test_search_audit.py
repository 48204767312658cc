"""search_audit against the fake orchestrator: paging through the trail, limits, continuation,
progress, and the bounds in pages and time."""

from __future__ import annotations

import pytest
from gateway_orchestrator import search
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from orch_kit import orchestrator_gateway

pytestmark = pytest.mark.anyio

JOB = ids.JOB_COMPLETED  # no seeded audit entries: each test writes its own trail


def trail(api: FakeOrchestrator, count: int, every: int = 10) -> list[int]:
    """``count`` tool steps; every ``every``-th calls ``grep`` with the needle. Returns the positions
    that match "NEEDLE" (any case)."""
    hits = []
    for i in range(count):
        if i % every == 3:
            api.state.add_audit_entry(
                JOB, "tool", tool={"name": "grep", "arguments": {"q": f"Find the NeEdLe {i}"}}
            )
            hits.append(i)
        else:
            api.state.add_audit_entry(JOB, "llm", content=f"step {i}: thinking")
    return hits


async def test_search_pages_through_the_trail_and_reports_progress(tmp_path):
    with FakeOrchestrator(mongo=True) as api:
        hits = trail(api, 250)
        progress = []

        async def report(done, total, message):
            progress.append((done, total, message))

        async with orchestrator_gateway(api.url, tmp_path) as gw:
            result = await gw.pipeline.call(
                "search_audit", {"job_id": JOB, "query": "needle", "limit": 100}, progress=report
            )
    found = result.payload
    assert [m["position"] for m in found["matches"]] == hits
    assert found["complete"] is True and found["stopped"] is None and found["next_offset"] is None
    assert (found["total"], found["searched"]) == (250, 250)
    match = found["matches"][0]
    assert match["field"] == "tool.arguments.q" and match["snippet"] == "Find the NeEdLe 3"
    assert match["entry"]["tool"]["name"] == "grep"
    assert [r.query["page"] for r in api.requests] == ["1", "2", "3"]
    assert {r.query["pageSize"] for r in api.requests} == {"100"}
    assert [(d, t) for d, t, _ in progress] == [(1, 3), (2, 3), (3, 3)]
    assert progress[-1][2] == "searched page 3 (250 of 250): 25 matches"


async def test_limit_stops_early_and_next_offset_continues_without_repeats(tmp_path):
    with FakeOrchestrator(mongo=True) as api:
        hits = trail(api, 250)
        seen = []
        offset = 0
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            for _ in range(10):
                args = {"job_id": JOB, "query": "NEEDLE", "limit": 7, "offset": offset}
                found = (await gw.call("search_audit", args)).payload
                seen += [m["position"] for m in found["matches"]]
                if found["complete"]:
                    break
                assert found["stopped"] == "limit"
                assert found["next_offset"] == found["matches"][-1]["position"] + 1
                offset = found["next_offset"]
    assert seen == hits  # every match once, in order


async def test_the_envelope_of_a_step_is_not_searched(orch_mongo, tmp_path):
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        phase = await gw.call("search_audit", {"job_id": ids.JOB_PROCESSING, "query": "strategic"})
        error = await gw.call("search_audit", {"job_id": ids.JOB_PROCESSING, "query": "rate lim"})
    assert phase.payload["matches"] == [] and phase.payload["complete"] is True
    assert [m["field"] for m in error.payload["matches"]] == ["error.message"]


async def test_search_is_bounded_in_pages(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "MAX_PAGES", 2)
    with FakeOrchestrator(mongo=True) as api:
        trail(api, 450)
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            found = (await gw.call("search_audit", {"job_id": JOB, "query": "zzz"})).payload
    assert (found["complete"], found["stopped"], found["next_offset"]) == (False, "pages", 200)
    assert found["searched"] == 200 and len(api.requests) == 2


async def test_search_is_bounded_in_time_and_says_where_to_continue(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "SEARCH_SECONDS", 0.6)
    with FakeOrchestrator(mongo=True) as api:
        trail(api, 1000)
        api.latency = 0.25  # each page takes a quarter second
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            args = {"job_id": JOB, "query": "needle", "limit": 100}
            found = (await gw.call("search_audit", args)).payload
    assert found["stopped"] == "time" and found["complete"] is False
    assert 100 <= found["next_offset"] <= 300 and found["next_offset"] % 100 == 0
    assert found["searched"] == found["next_offset"]
    assert len(found["matches"]) == found["next_offset"] // 10


async def test_a_failure_after_the_first_page_keeps_what_was_found(tmp_path):
    with FakeOrchestrator(mongo=True) as api:
        trail(api, 300)

        async def break_api(done, total, message):
            api.mode = "error"  # the next page is a 500

        async with orchestrator_gateway(api.url, tmp_path) as gw:
            result = await gw.pipeline.call(
                "search_audit", {"job_id": JOB, "query": "needle"}, progress=break_api
            )
            api.mode = "normal"
            first = await gw.call("search_audit", {"job_id": JOB, "query": "needle", "limit": 1})
            api.mode = "error"
            failed = await gw.call("search_audit", {"job_id": JOB, "query": "needle"})
    found = result.payload
    assert found["stopped"] == "error" and found["next_offset"] == 100
    assert "HTTP 500" in found["error"] and len(found["matches"]) == 10
    assert first.payload["next_offset"] == 4
    assert failed.code == "BACKEND_ERROR"  # nothing found yet: the failure is the answer


async def test_an_offset_past_the_end_searches_nothing(orch_mongo, tmp_path):
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        found = (
            await gw.call(
                "search_audit", {"job_id": ids.JOB_PROCESSING, "query": "x", "offset": 500}
            )
        ).payload
    assert (found["matches"], found["searched"], found["complete"]) == ([], 0, True)
    assert orch_mongo.requests[0].query == {"page": "6", "pageSize": "100", "filter": "all"}


async def test_a_full_result_stops_the_search_where_the_next_call_continues(tmp_path):
    with FakeOrchestrator(mongo=True) as api:
        arguments = {f"flag_{k}": k for k in range(80)}
        for _ in range(150):
            api.state.add_audit_entry(JOB, "tool", tool={"name": "grep", "arguments": arguments})
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            first = (
                await gw.call("search_audit", {"job_id": JOB, "query": "GREP", "limit": 100})
            ).payload
            rest = (
                await gw.call(
                    "search_audit",
                    {"job_id": JOB, "query": "grep", "limit": 100, "offset": first["next_offset"]},
                )
            ).payload
    kept = len(first["matches"])
    assert first["stopped"] == "size" and first["complete"] is False
    assert first["next_offset"] == kept == first["searched"]
    positions = [m["position"] for m in first["matches"] + rest["matches"]]
    assert positions == list(range(len(positions)))  # continued, nothing repeated or skipped
    assert len(positions) > kept


async def test_progress_counts_the_pages_left_from_an_unaligned_offset(tmp_path):
    with FakeOrchestrator(mongo=True) as api:
        trail(api, 250)
        progress = []

        async def report(done, total, message):
            progress.append((done, total))

        async with orchestrator_gateway(api.url, tmp_path) as gw:
            args = {"job_id": JOB, "query": "needle", "limit": 100, "offset": 50}
            found = (await gw.pipeline.call("search_audit", args, progress=report)).payload
    assert progress == [(1, 3), (2, 3), (3, 3)]  # pages 1 (from entry 50), 2 and 3
    assert found["searched"] == 200 and found["complete"] is True
