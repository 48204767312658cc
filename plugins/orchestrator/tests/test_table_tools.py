"""The table browser against the fake orchestrator: exact offset/limit paging over the API's
page numbers (hypothesis: any offset and limit equals slicing the whole table), the allow-list,
decoded JSON, masked secrets."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from anyio.from_thread import start_blocking_portal
from gateway_orchestrator.bounded import LIST_CAP
from gateway_orchestrator.tables import MAX_PAGE_SIZE, page_plan
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from hypothesis import given, settings
from hypothesis import strategies as st
from orch_kit import orchestrator_gateway, size

from gateway.testing.backends import Reply

ROWS = 1215  # 15 seeded requirements and 1,200 more: offsets cross several API pages


@pytest.fixture(scope="module")
def big_table(tmp_path_factory):
    """A gateway over a fake whose requirements table has ``ROWS`` rows, and the whole table's
    ids in the API's order (read directly, page by page)."""
    with FakeOrchestrator() as api:
        start = api.state.now() - timedelta(days=1)
        for i in range(ROWS - 15):
            api.state.add_requirement(
                ids.JOB_CREATED, f"Requirement {i}", created_at=start + timedelta(seconds=i)
            )
        whole = []
        for page in (1, 2, 3):
            resp = httpx.get(
                f"{api.url}/api/tables/requirements", params={"page": page, "pageSize": 500}
            )
            whole += [row["id"] for row in resp.json()["rows"]]
        assert len(whole) == len(set(whole)) == ROWS
        with start_blocking_portal() as portal:
            cm = orchestrator_gateway(api.url, tmp_path_factory.mktemp("gw"))
            with portal.wrap_async_context_manager(cm) as gw:
                yield api, whole, lambda args: portal.call(gw.call, "query_table", args)


@settings(max_examples=50, deadline=None)
@given(offset=st.integers(0, ROWS + 100), limit=st.integers(1, MAX_PAGE_SIZE))
def test_query_table_pages_equal_slices_of_the_whole_table(big_table, offset, limit):
    """Rows [offset, offset + limit): all at once, or (when they do not fit in one result) the
    first of them, and next_offset continues exactly where the result stopped."""
    api, whole, query = big_table
    expected = whole[offset : offset + limit]
    got: list[str] = []
    at, left = offset, limit
    while True:
        before = len(api.requests)
        page = query({"table_name": "requirements", "offset": at, "limit": left}).payload
        sent = api.requests[before:]
        assert 1 <= len(sent) <= 2
        assert all(int(r.query["pageSize"]) <= MAX_PAGE_SIZE for r in sent)
        rows = [row["id"] for row in page["rows"]]
        assert (page["total"], page["offset"], page["limit"]) == (ROWS, at, left)
        more = at + len(rows) < ROWS
        assert page["has_more"] is (more and bool(rows))
        assert page["next_offset"] == (at + len(rows) if more and rows else None)
        got += rows
        if len(rows) == left or not rows:
            break
        assert size(page) <= LIST_CAP + 2_000  # stopped because the result was full
        at, left = at + len(rows), left - len(rows)
    assert got == expected


@given(offset=st.integers(0, 10_000_000), limit=st.integers(1, MAX_PAGE_SIZE))
def test_page_plan_covers_exactly_the_range(offset, limit):
    plan = page_plan(offset, limit)
    covered = set()
    for page, page_size in plan:
        assert page >= 1 and limit <= page_size <= MAX_PAGE_SIZE
        covered |= set(range((page - 1) * page_size, page * page_size))
    assert set(range(offset, offset + limit)) <= covered
    assert len(plan) == 1 or plan == [(offset // limit + 1, limit), (offset // limit + 2, limit)]
    if offset % limit == 0:  # the aligned case is the one request a naive client sends
        assert plan == [(offset // limit + 1, limit)]


def test_a_naive_mapping_would_return_the_wrong_rows(big_table):
    # What the orchestrator's own tool sends for offset=7, limit=5: page 2 of 5 = rows 5..9.
    api, whole, query = big_table
    naive = httpx.get(
        f"{api.url}/api/tables/requirements", params={"page": 7 // 5 + 1, "pageSize": 5}
    ).json()
    assert [r["id"] for r in naive["rows"]] == whole[5:10]
    before = len(api.requests)
    page = query({"table_name": "requirements", "offset": 7, "limit": 5}).payload
    assert [r["id"] for r in page["rows"]] == whole[7:12]
    # The smallest page holding rows 7..11 is page 2 of 6 (rows 6..11).
    assert [r.query for r in api.requests[before:]] == [{"page": "2", "pageSize": "6"}]


@pytest.mark.anyio
async def test_only_the_allowed_tables_and_nothing_sent_otherwise(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        tables = (await gw.call("list_tables", {})).payload
        refused = [
            await gw.call(tool, {"table_name": name})
            for tool in ("query_table", "get_table_schema")
            for name in ("builder_sessions", "jobs; DROP TABLE jobs", "pg_user", "")
        ]
        schema = (await gw.call("get_table_schema", {"table_name": "jobs"})).payload
    names = [t["name"] for t in tables["tables"]]
    assert names == ["agents", "citations", "datasources", "jobs", "requirements", "sources"]
    assert tables["tables"][3] == {"name": "jobs", "row_count": 12}
    for result in refused:
        assert result.code == "VALIDATION_ERROR"
        assert "table_name" in result.payload["error"]["message"]
    assert [r.path for r in orch.requests] == ["/api/tables", "/api/tables/jobs/schema"]
    assert schema["table"] == "jobs"
    assert {"name": "context", "type": "json", "nullable": True} in schema["columns"]


@pytest.mark.anyio
async def test_a_table_the_api_no_longer_serves_is_not_found(tmp_path):
    with FakeOrchestrator() as api:
        api.override(
            "/api/tables/sources", Reply.json({"detail": "Table 'sources' not found"}, 404)
        )
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            result = await gw.call("query_table", {"table_name": "sources"})
    assert result.code == "NOT_FOUND" and "list_tables" in result.payload["error"]["message"]


@pytest.mark.anyio
async def test_rows_have_json_decoded_utc_dates_and_no_secrets(orch, tmp_path):
    orch.state.jobs[ids.JOB_CREATED].context = {
        "git_remote_url": "http://gitea:tok3n-value@gitea.local/agents/job-1.git",
        "settings": {"access_token": "at-123", "max_tokens": 4096},
    }
    orch.state.add_datasource(
        "Graph",
        "neo4j",
        "neo4j://neo:pw-in-url@graph.local:7687",
        credentials={"password": "graph-pass", "username": "neo"},
    )
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        jobs = (await gw.call("query_table", {"table_name": "jobs", "limit": 500})).payload
        sources = (await gw.call("query_table", {"table_name": "datasources"})).payload
        agents = (await gw.call("query_table", {"table_name": "agents", "limit": 1})).payload
    job = next(r for r in jobs["rows"] if r["id"] == ids.JOB_CREATED)
    assert job["context"] == {
        "git_remote_url": "http://gitea.local/agents/job-1.git",
        "settings": {"access_token": "***", "max_tokens": 4096},
    }
    assert job["config_override"] == {"llm": {"temperature": 0.1}}  # JSON, not a string
    assert job["created_at"].endswith("Z") and job["document_content"] is None
    text = json.dumps(sources)
    for secret in (ids.PASSWORD, "pw-in-url", "graph-pass"):
        assert secret not in text
    graph = next(r for r in sources["rows"] if r["name"] == "Graph")
    assert graph["connection_url"] == "neo4j://graph.local:7687"
    assert graph["credentials"] == ["password", "username"]
    assert agents["rows"][0]["metadata"] == {"memory_mb": 402, "cpu_percent": 2.0}
    assert agents["columns"][:3] == ["id", "config_name", "hostname"]


@pytest.mark.anyio
async def test_long_cells_are_cut_and_fewer_rows_show_more(orch, tmp_path):
    for i in range(40):
        orch.state.add_source(f"Doc {i}", f"doc {i} " + "z" * 20_000)
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        many = (await gw.call("query_table", {"table_name": "sources", "limit": 40})).payload
        one = (await gw.call("query_table", {"table_name": "sources", "limit": 1})).payload
    assert many["truncated_texts"] == 40
    assert "not shown; ask for fewer rows (limit)" in many["rows"][0]["content"]
    assert len(json.dumps(many, ensure_ascii=False)) < 45_000
    assert one["truncated_texts"] == 0 and len(one["rows"][0]["content"]) > 20_000
