"""The fake orchestrator's data endpoints: workspaces, tables, the source library and search,
and the MongoDB-backed history."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from gateway_orchestrator_testing import RECORDINGS, FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from gateway_orchestrator_testing.fulltext import lexemes, query_words, rank
from hypothesis import given, settings
from hypothesis import strategies as st
from orch_http import send

WS = f"/api/jobs/{ids.JOB_PROCESSING}/workspace"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("archive/phase_1_retrospective.md", 200),
        (f"../job_{ids.JOB_PROCESSING}-old/notes.md", 200),  # the prefix sandbox lets it through
        (f"%2e%2e/job_{ids.JOB_PROCESSING}-old/notes.md", 200),
        (f"..%2Fjob_{ids.JOB_PROCESSING}-old%2Fnotes.md", 200),
        ("../../../../etc/passwd", 404),
        ("/etc/passwd", 404),
        ("archive", 404),  # a folder is not a file
        ("", 404),
    ],
)
def test_the_workspace_sandbox_is_the_apis_prefix_test(orch, path, status):
    assert send(orch, "GET", f"{WS}/{path}")[0] == status


def test_workspace_files_written_by_a_test_are_served_and_the_overview_clips(orch):
    orch.state.write_file(ids.JOB_POSTMORTEM, "workspace.md", "x" * 2500)
    status, body = send(orch, "GET", f"/api/jobs/{ids.JOB_POSTMORTEM}/workspace")
    assert status == 200 and body["has_workspace"] is True
    assert body["workspace_md"] == "x" * 2000 + "\n\n... (truncated)"
    assert body["files"][0]["size"] == 2500 and body["todos"] is None
    assert send(orch, "GET", f"/api/jobs/{ids.JOB_POSTMORTEM}/todos")[1]["current"] is None


def test_todos_are_served_parsed_and_rendered_as_the_agent_writes_them(orch):
    todos = [{"id": "t1", "content": "Check: the 'XML' part", "status": "pending", "notes": []}]
    orch.state.set_todos(ids.JOB_POSTMORTEM, todos)
    assert (
        send(orch, "GET", f"/api/jobs/{ids.JOB_POSTMORTEM}/todos")[1]["current"]["todos"] == todos
    )
    text = send(orch, "GET", f"/api/jobs/{ids.JOB_POSTMORTEM}/workspace/todos.yaml")[1]["content"]
    assert (
        text
        == "todos:\n  - id: t1\n    content: 'Check: the ''XML'' part'\n    status: pending\n    notes: []\n"
    )
    with pytest.raises(ValueError):
        orch.state.write_file(ids.JOB_POSTMORTEM, "todos.yaml", "todos: []")


def test_query_table_pages_newest_first_and_page_minus_one_is_the_last(orch):
    whole = send(orch, "GET", "/api/tables/jobs", {"page": 1, "pageSize": 500})[1]
    created = [r["created_at"] for r in whole["rows"]]
    assert created == sorted(created, reverse=True) and whole["total"] == 12
    last = send(orch, "GET", "/api/tables/jobs", {"page": -1, "pageSize": 5})[1]
    assert (last["page"], last["rows"]) == (3, whole["rows"][10:])
    assert send(orch, "GET", "/api/tables/jobs", {"page": 0})[0] == 500
    assert send(orch, "GET", "/api/tables/jobs", {"page": -2})[0] == 422


def test_table_rows_render_json_binary_and_secrets_as_the_api_does(orch):
    orch.state.jobs[ids.JOB_SCRATCH].document_content = b"%PDF-1.7"
    rows = send(orch, "GET", "/api/tables/jobs", {"pageSize": 1})[1]["rows"]
    assert rows[0]["document_content"] == "<binary: 8 bytes>"
    datasources = send(orch, "GET", "/api/tables/datasources", {"pageSize": 50})[1]["rows"]
    neo4j = next(r for r in datasources if r["id"] == ids.DS_NEO4J)
    assert neo4j["credentials"] == '{"password": "<PASSWORD>", "username": "neo4j"}'
    schema = send(orch, "GET", "/api/tables/datasources/schema")[1]
    assert {c["name"]: c["type"] for c in schema}["credentials"] == "json"


@pytest.fixture(scope="module")
def shared() -> Iterator[FakeOrchestrator]:
    with FakeOrchestrator() as api:
        yield api


@settings(max_examples=60, deadline=None)
@given(
    table=st.sampled_from(["jobs", "requirements", "citations", "agents"]),
    size=st.integers(1, 20),
    page=st.integers(1, 20),
)
def test_any_page_is_the_matching_slice_of_the_whole_table(shared, table, size, page):
    whole = send(shared, "GET", f"/api/tables/{table}", {"pageSize": 500})[1]["rows"]
    rows = send(shared, "GET", f"/api/tables/{table}", {"page": page, "pageSize": size})[1]["rows"]
    assert rows == whole[(page - 1) * size : page * size]


def test_sources_and_citations_follow_the_library(orch):
    src = orch.state.add_source(
        "Notes", "Archived invoices must stay readable.", jobs=(ids.JOB_POSTMORTEM,)
    )
    orch.state.add_citation(
        ids.JOB_POSTMORTEM, src.id, "Invoices stay readable.", verification_status="failed"
    )
    listed = send(orch, "GET", "/api/sources", {"job_id": ids.JOB_POSTMORTEM})[1]
    assert [s["id"] for s in listed["sources"]] == [src.id] and "job_ids" not in listed["sources"][
        0
    ]
    everywhere = send(orch, "GET", "/api/sources", {"limit": 1})[1]
    assert everywhere["total"] == 5 and everywhere["sources"][0]["job_ids"] == [ids.JOB_POSTMORTEM]
    failed = send(orch, "GET", f"/api/jobs/{ids.JOB_POSTMORTEM}/citations", {"status": "failed"})[1]
    assert failed["total"] == 1 and failed["citations"][0]["source_name"] == "Notes"
    stats = send(orch, "GET", f"/api/jobs/{ids.JOB_POSTMORTEM}/citations/stats")[1]
    assert (
        stats["citations_by_verification_status"] == {"failed": 1} and stats["total_sources"] == 1
    )


def test_source_detail_content_limit(orch):
    body = send(orch, "GET", "/api/sources/1", {"content_limit": 0})[1]
    assert (len(body["content"]), body["content_truncated"]) == (3189, False)
    assert send(orch, "GET", "/api/sources/1", {"content_limit": 100001})[0] == 422


def test_search_filters_by_type_and_all_tags_and_always_says_keyword(orch):
    path = f"/api/jobs/{ids.JOB_PROCESSING}/sources/search"
    body = send(
        orch, "GET", path, {"query": "archived", "tags": "gobd, e-invoicing", "mode": "hybrid"}
    )[1]
    assert [r["source_id"] for r in body["results"]] == [2] and body["mode"] == "keyword"
    assert "<b>archived</b>" in body["results"][0]["snippet"]
    assert (
        send(orch, "GET", path, {"query": "archived", "tags": "gobd,immutability"})[1]["total"] == 0
    )
    assert (
        send(orch, "GET", path, {"query": "retention", "source_type": "database"})[1]["total"] == 1
    )
    assert send(orch, "GET", path, {"query": "!!!"})[1]["total"] == 0
    top = send(orch, "GET", path, {"query": "retention", "top_k": 1})[1]
    assert top["total"] == 1 and top["results"][0]["source_id"] == 1


@pytest.mark.parametrize(
    "name",
    [
        "GET_api_jobs_{job_id}_sources_search",
        "GET_api_jobs_{job_id}_sources_search__semantic_mode_ignored",
        "GET_api_jobs_{job_id}_sources_search__source_type",
        "GET_api_jobs_{job_id}_sources_search__tags",
    ],
)
def test_ts_rank_is_reproduced_to_float4_precision(orch, name):
    recorded = json.loads((RECORDINGS / f"{name}.json").read_text())
    words = query_words(recorded["request"]["query"]["query"])
    for hit in recorded["response"]["json"]["results"]:
        content = orch.state.sources[hit["source_id"]].content
        assert rank(lexemes(content), words) == pytest.approx(hit["rank"], rel=1e-6)


def test_without_mongodb_the_history_is_degraded_as_recorded(orch):
    job = f"/api/jobs/{ids.JOB_PROCESSING}"
    audit = send(orch, "GET", f"{job}/audit", {"page": -1, "pageSize": 10})[1]
    assert (audit["error"], audit["page"], audit["entries"]) == ("MongoDB not available", -1, [])
    assert send(orch, "GET", f"/api/graph/changes/{ids.JOB_PROCESSING}")[0] == 503
    assert send(orch, "GET", f"{job}/audit/timerange") == (200, None)
    assert send(orch, "GET", job)[1]["audit_count"] is None


def test_with_mongodb_audit_pages_filter_and_count(orch_mongo):
    job = f"/api/jobs/{ids.JOB_PROCESSING}"
    first = send(orch_mongo, "GET", f"{job}/audit", {"page": 1, "pageSize": 3})[1]
    assert (first["total"], first["hasMore"], len(first["entries"])) == (4, True, 3)
    assert "error" not in first and [e["step_number"] for e in first["entries"]] == [1, 2, 3]
    last = send(orch_mongo, "GET", f"{job}/audit", {"page": -1, "pageSize": 3})[1]
    assert (last["page"], last["hasMore"], [e["step_number"] for e in last["entries"]]) == (
        2,
        False,
        [4],
    )
    errors = send(orch_mongo, "GET", f"{job}/audit", {"filter": "errors"})[1]
    assert [e["step_type"] for e in errors["entries"]] == ["error"]
    assert send(orch_mongo, "GET", job)[1]["audit_count"] == 4
    assert send(orch_mongo, "GET", f"/api/jobs/{ids.JOB_SCRATCH}")[1]["audit_count"] == 0
    assert send(orch_mongo, "GET", f"{job}/audit", {"page": 0})[0] == 500


def test_with_mongodb_chat_graph_and_llm_requests(orch_mongo):
    chat = send(orch_mongo, "GET", f"/api/jobs/{ids.JOB_PROCESSING}/chat")[1]
    assert chat["total"] == 2 and chat["entries"][0]["input_messages"][0]["role"] == "user"
    graph = send(orch_mongo, "GET", f"/api/graph/changes/{ids.JOB_PROCESSING}")[1]
    assert graph["summary"]["nodesCreated"] == 2
    empty = send(orch_mongo, "GET", f"/api/graph/changes/{ids.JOB_SCRATCH}")[1]
    assert (empty["timeRange"], empty["deltas"]) == (None, [])
    doc = send(orch_mongo, "GET", "/api/requests/65f1c2a9e4b0a1b2c3d4e5f6")[1]
    assert doc["metrics"]["token_usage"]["prompt_tokens"] == 5120
    assert send(orch_mongo, "GET", "/api/requests/not-an-object-id")[0] == 404
    orch_mongo.state.mongo = False
    assert send(orch_mongo, "GET", "/api/requests/65f1c2a9e4b0a1b2c3d4e5f6")[0] == 503


def test_large_audit_fields_can_be_seeded(orch_mongo):
    entry = orch_mongo.state.add_audit_entry(ids.JOB_SCRATCH, "tool", result="y" * 100_000)
    page = send(orch_mongo, "GET", f"/api/jobs/{ids.JOB_SCRATCH}/audit")[1]
    assert page["entries"] == [entry]
