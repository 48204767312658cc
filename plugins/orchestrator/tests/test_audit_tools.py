"""Audit history against the stateful fake orchestrator (a real HTTP server): what the gateway
adds over the raw API for get_audit_trail, get_chat_history, get_graph_changes and
get_llm_request."""

from __future__ import annotations

import pytest
from gateway_orchestrator.bounded import LIST_CAP
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from orch_kit import orchestrator_gateway, size

from gateway.testing.backends import Reply

pytestmark = pytest.mark.anyio

JOB = ids.JOB_PROCESSING
LLM_ID = "65f1c2a9e4b0a1b2c3d4e5f6"
NO_MONGO = "audit data unavailable: the orchestrator has no MongoDB configured"
MONGO_CALLS = [
    ("get_audit_trail", {"job_id": JOB}),
    ("get_chat_history", {"job_id": JOB}),
    ("get_graph_changes", {"job_id": JOB}),
    ("get_llm_request", {"doc_id": LLM_ID}),
    ("search_audit", {"job_id": JOB, "query": "x"}),
]


@pytest.mark.parametrize(("tool", "args"), MONGO_CALLS, ids=[c[0] for c in MONGO_CALLS])
async def test_missing_mongodb_is_unavailable_never_an_empty_success(orch, tmp_path, tool, args):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        result = await gw.call(tool, args)
    assert result.code == "BACKEND_UNAVAILABLE"
    error = result.payload["error"]
    assert error["message"].startswith(NO_MONGO)
    assert error["retryable"] is False  # retrying changes nothing until MongoDB is configured
    assert len(orch.requests) == 1  # the API was asked, and answered


async def test_missing_mongodb_does_not_pause_the_other_orchestrator_tools(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path, breaker_failures=2) as gw:
        for _ in range(5):  # more than enough answers to open a breaker that counted them
            assert (await gw.call("get_audit_trail", {"job_id": JOB})).code == (
                "BACKEND_UNAVAILABLE"
            )
            assert (await gw.call("get_llm_request", {"doc_id": LLM_ID})).code == (
                "BACKEND_UNAVAILABLE"
            )
        stats = await gw.call("get_job_stats", {})
        assert not stats.is_error, stats.payload
        assert gw.health.breaker_states()["cockpit"]["state"] == "closed"


async def test_audit_entries_are_typed_with_utc_times_and_paging(orch_mongo, tmp_path):
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        first = await gw.call("get_audit_trail", {"job_id": JOB, "page_size": 3})
        last = await gw.call("get_audit_trail", {"job_id": JOB, "page_size": 3, "page": -1})
        errors = await gw.call("get_audit_trail", {"job_id": JOB, "filter": "errors"})
    page = first.payload
    assert (page["total"], page["page"], page["has_more"], page["next_page"]) == (4, 1, True, 2)
    entry = page["entries"][1]
    assert entry["id"] == "6740a1c2e4b0a1b2c3d4e502" and "_id" not in entry
    assert "job_id" not in entry  # said once, on the page
    assert entry["timestamp"] == "2026-11-22T09:14:05.480000Z"  # MongoDB's naive UTC, with Z
    assert entry["tool"] == {
        "name": "read_file",
        "arguments": {"path": "workspace.md"},
        "call_id": "call_1",
    }
    assert last.payload["page"] == 2 and [e["step_number"] for e in last.payload["entries"]] == [4]
    assert last.payload["next_page"] is None
    assert [e["step_type"] for e in errors.payload["entries"]] == ["error"]
    assert orch_mongo.requests[0].query == {"page": "1", "pageSize": "3", "filter": "all"}


async def test_page_zero_is_refused_before_any_request(orch_mongo, tmp_path):
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        result = await gw.call("get_audit_trail", {"job_id": JOB, "page": 0})
        bad_job = await gw.call("get_chat_history", {"job_id": "not-a-uuid"})
    assert result.code == "VALIDATION_ERROR" and "page" in result.payload["error"]["message"]
    assert bad_job.code == "VALIDATION_ERROR" and "job_id" in bad_job.payload["error"]["message"]
    assert orch_mongo.requests == []


async def test_a_huge_audit_entry_is_cut_with_a_marker_and_the_page_fits(orch_mongo, tmp_path):
    orch_mongo.state.add_audit_entry(JOB, "tool", result="x" * 150_000)
    orch_mongo.state.add_audit_entry(JOB, "llm", content="short and whole")
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        result = await gw.call("get_audit_trail", {"job_id": JOB, "page": -1, "page_size": 3})
    page = result.payload
    assert page["truncated_texts"] == 1
    big, small = page["entries"][1]["result"], page["entries"][2]["content"]
    assert small == "short and whole"
    assert big.startswith("xxxx") and "not shown; ask for fewer per page (page_size)" in big
    kept = big.index("\n[truncated]")
    assert f"{150_000 - kept:,} of 150,000 characters not shown" in big
    assert size(page) <= 41_000  # inline in Claude Code (50,000)


async def test_chat_history_turns(orch_mongo, tmp_path):
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        result = await gw.call("get_chat_history", {"job_id": JOB})
    turns = result.payload["entries"]
    assert [t["turn_number"] for t in turns] == [1, 2]
    assert turns[0]["input_messages"][0]["role"] == "user"
    assert turns[1]["response"]["tool_calls"][0]["name"] == "web_search"
    assert turns[0]["timestamp"].endswith("Z")


async def test_graph_changes_in_snake_case_with_graph_data_untouched(orch_mongo, tmp_path):
    orch_mongo.state.graph_changes[JOB]["snapshots"][0]["nodes"] = {"n1": {"camelProp": 1}}
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        result = await gw.call("get_graph_changes", {"job_id": JOB})
        empty = await gw.call("get_graph_changes", {"job_id": ids.JOB_COMPLETED})
    changes = result.payload
    assert changes["summary"]["nodes_created"] == 2
    assert changes["time_range"] == {"start": "2026-11-22T09:20:00Z", "end": "2026-11-22T09:40:00Z"}
    delta = changes["deltas"][0]
    assert delta["cypher_query"].startswith("CREATE (r:Requirement")
    assert delta["changes"]["matched_variables"] == ["r"]
    assert changes["snapshots"][0]["nodes"] == {"n1": {"camelProp": 1}}
    assert empty.payload["deltas"] == [] and empty.payload["time_range"] is None


async def test_llm_request_is_typed_and_its_id_checked_first(orch_mongo, tmp_path):
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        ok = await gw.call("get_llm_request", {"doc_id": LLM_ID.upper()})
        bad = await gw.call("get_llm_request", {"doc_id": "65f1c2a9e4b0a1b2c3d4e5fz"})
        short = await gw.call("get_llm_request", {"doc_id": "65f1"})
        unknown = await gw.call("get_llm_request", {"doc_id": "0" * 24})
    doc = ok.payload
    assert doc["id"] == LLM_ID and doc["timestamp"] == "2026-11-22T09:14:02.120000Z"
    assert doc["token_usage"] == {
        "prompt_tokens": 5120,
        "completion_tokens": 220,
        "reasoning_tokens": 96,
    }
    assert "metrics" not in doc
    assert doc["request"]["messages"][0]["role"] == "system"
    for refused in (bad, short):
        assert refused.code == "VALIDATION_ERROR"
        assert "doc_id" in refused.payload["error"]["message"]
    assert unknown.code == "NOT_FOUND" and "get_audit_trail" in unknown.payload["error"]["message"]
    assert [r.path for r in orch_mongo.requests] == [
        f"/api/requests/{LLM_ID}",
        f"/api/requests/{'0' * 24}",
    ]


async def test_a_large_llm_request_fits_max_chars(orch_mongo, tmp_path):
    messages = [{"role": "user", "content": f"message {i} " + "y" * 30_000} for i in range(6)]
    orch_mongo.state.add_llm_request(JOB, _id="a" * 24, request={"messages": messages})
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        small = await gw.call("get_llm_request", {"doc_id": "a" * 24})
        large = await gw.call("get_llm_request", {"doc_id": "a" * 24, "max_chars": 80_000})
    assert small.payload["truncated_texts"] == 6
    assert size(small.payload) <= 21_000
    assert "raise max_chars" in small.payload["request"]["messages"][0]["content"]
    assert 60_000 < size(large.payload) <= 81_000
    assert [m["content"][:10] for m in large.payload["request"]["messages"]] == [
        f"message {i} " for i in range(6)
    ]


async def test_other_audit_errors_are_backend_errors(tmp_path):
    broken = {"entries": [], "total": 0, "page": 1, "pageSize": 20, "hasMore": False}
    with FakeOrchestrator(mongo=True) as api:
        api.override(f"/api/jobs/{JOB}/audit", Reply.json({**broken, "error": "cursor killed"}))
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            result = await gw.call("get_audit_trail", {"job_id": JOB})
    assert result.code == "BACKEND_ERROR" and "cursor killed" in result.payload["error"]["message"]


ODD_ANSWERS = [
    ("get_audit_trail", {"job_id": JOB}, f"/api/jobs/{JOB}/audit", {"entries": "none", "total": 1}),
    ("get_audit_trail", {"job_id": JOB}, f"/api/jobs/{JOB}/audit", {"entries": [{"step": 1}]}),
    ("search_audit", {"job_id": JOB, "query": "a"}, f"/api/jobs/{JOB}/audit", {"total": "many"}),
    ("get_chat_history", {"job_id": JOB}, f"/api/jobs/{JOB}/chat", [1, 2]),
    ("get_llm_request", {"doc_id": LLM_ID}, f"/api/requests/{LLM_ID}", ["not", "a", "doc"]),
    ("get_graph_changes", {"job_id": JOB}, f"/api/graph/changes/{JOB}", {"summary": [1]}),
    ("get_expert", {"expert_id": "coder"}, "/api/experts/coder", "coder"),
    ("list_experts", {}, "/api/experts", {"experts": []}),
    ("list_agents", {}, "/api/agents", [{"id": 1}]),
    ("query_table", {"table_name": "jobs"}, "/api/tables/jobs", {"rows": [], "total": 0}),
]


@pytest.mark.parametrize(
    ("tool", "args", "path", "body"),
    ODD_ANSWERS,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(ODD_ANSWERS)],
)
async def test_an_answer_of_another_shape_is_a_backend_error_naming_it(
    tool, args, path, body, tmp_path
):
    with FakeOrchestrator(mongo=True) as api:
        api.override(path, Reply.json(body))
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            result = await gw.call(tool, args)
    assert result.code == "BACKEND_ERROR", result.payload
    assert "unexpected shape" in result.payload["error"]["message"]


async def test_a_page_too_large_for_any_cut_keeps_its_leading_entries(orch_mongo, tmp_path):
    arguments = {f"option_{k}": k for k in range(60)}  # no text to cut: keys and numbers
    for _ in range(200):
        orch_mongo.state.add_audit_entry(ids.JOB_COMPLETED, "tool", tool={"arguments": arguments})
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        result = await gw.call("get_audit_trail", {"job_id": ids.JOB_COMPLETED, "page_size": 200})
    page = result.payload
    kept = len(page["entries"])
    assert 0 < kept < 200 and page["omitted_entries"] == 200 - kept
    assert [e["step_number"] for e in page["entries"]] == list(range(1, kept + 1))
    assert size(page) <= LIST_CAP * 1.1  # the entries fit; typed fields they lack add nulls


async def test_a_huge_graph_history_keeps_the_first_deltas_and_the_latest_snapshots(
    orch_mongo, tmp_path
):
    nodes = {f"n{k}": {"label": "Requirement", "rank": k} for k in range(40)}
    orch_mongo.state.graph_changes[JOB] = {
        "jobId": JOB,
        "timeRange": None,
        "summary": {"totalToolCalls": 300, "graphToolCalls": 300},
        "snapshots": [
            {
                "timestamp": "2026-11-22T09:20:00Z",
                "toolCallIndex": i,
                "nodes": nodes,
                "relationships": {},
            }
            for i in range(300)
        ],
        "deltas": [
            {
                "timestamp": "2026-11-22T09:25:00.000Z",
                "toolCallIndex": i,
                "cypherQuery": f"CREATE (n{i})",
                "toolCallId": f"call_{i}",
                "stepNumber": i,
                "changes": {"nodesCreated": 1},
            }
            for i in range(300)
        ],
    }
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        result = await gw.call("get_graph_changes", {"job_id": JOB})
    changes = result.payload
    assert size(changes) <= 20_000 * 1.2
    assert changes["omitted_snapshots"] > 0 and changes["omitted_deltas"] > 0
    snapshots = [s["tool_call_index"] for s in changes["snapshots"]]
    assert snapshots == list(range(300 - len(snapshots), 300))  # the latest, in order
    deltas = [d["tool_call_index"] for d in changes["deltas"]]
    assert deltas == list(range(len(deltas)))  # the first, in order
    assert len(deltas) + changes["omitted_deltas"] == 300


async def test_a_long_conversation_keeps_its_latest_messages(orch_mongo, tmp_path):
    messages = [{"role": "user", "content": f"message {i}: " + "w" * 300} for i in range(400)]
    orch_mongo.state.add_llm_request(
        JOB, _id="b" * 24, request={"messages": messages, "tools": []}, response={"content": "ok"}
    )
    async with orchestrator_gateway(orch_mongo.url, tmp_path) as gw:
        doc = (await gw.call("get_llm_request", {"doc_id": "b" * 24})).payload
    kept = [m["content"].split(":")[0] for m in doc["request"]["messages"]]
    assert doc["omitted_messages"] == 400 - len(kept) > 0
    assert kept == [f"message {i}" for i in range(400 - len(kept), 400)]
    assert doc["response"] == {"content": "ok"} and size(doc) <= 20_000 * 1.1
