"""Replays: for every recorded exchange behind the inspection tools (audit history,
monitoring, database), the tool sends exactly the
recorded request (method, raw path, query, body) and shapes the recorded answer, or, for a
request the gateway refuses to make, refuses it before anything is sent.

Every recording of the endpoints these tools use is accounted for: replayed, refused, or listed
in ``NOT_SENT`` with the reason no tool call produces it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from gateway_orchestrator_testing import RECORDINGS_INDEX, recorded_backend
from orch_kit import orchestrator_gateway

pytestmark = pytest.mark.anyio

JOB = "b652cfcb-ecad-42bb-9197-ea9b234dce17"  # the job of the recorded audit requests
ENDPOINTS = {
    "/api/jobs/{job_id}/audit",
    "/api/jobs/{job_id}/audit/timerange",
    "/api/jobs/{job_id}/chat",
    "/api/graph/changes/{job_id}",
    "/api/requests/{doc_id}",
    "/api/stats/jobs",
    "/api/stats/agents",
    "/api/stats/stuck",
    "/api/stats/daily",
    "/api/agents",
    "/api/experts",
    "/api/experts/{expert_id}",
    "/api/datasources",
    "/api/tables",
    "/api/tables/{table_name}",
    "/api/tables/{table_name}/schema",
}


def _no_mongo(payload: dict[str, Any]) -> None:
    assert payload["error"]["message"].startswith("audit data unavailable: the orchestrator has")


def _pending_review(expected: int):
    def check(payload: dict[str, Any]) -> None:
        assert payload["pending_review"] == expected

    return check


def _rows(count: int, **fields: Any):
    def check(payload: dict[str, Any]) -> None:
        assert len(payload["rows"]) == count
        for key, value in fields.items():
            assert payload[key] == value, key

    return check


# recording -> (tool, arguments, expected code, extra check of the payload or None)
REPLAYED: dict[str, tuple[str, dict[str, Any], str, Any]] = {
    "GET_api_jobs_{job_id}_audit__no_mongo": (
        "get_audit_trail", {"job_id": JOB}, "BACKEND_UNAVAILABLE", _no_mongo
    ),
    "GET_api_jobs_{job_id}_audit__no_mongo_search_audit_page": (
        "search_audit", {"job_id": JOB, "query": "error"}, "BACKEND_UNAVAILABLE", _no_mongo
    ),
    "GET_api_jobs_{job_id}_chat__no_mongo": (
        "get_chat_history", {"job_id": JOB}, "BACKEND_UNAVAILABLE", _no_mongo
    ),
    "GET_api_graph_changes_{job_id}__503_no_mongo": (
        "get_graph_changes", {"job_id": JOB}, "BACKEND_UNAVAILABLE", _no_mongo
    ),
    "GET_api_requests_{doc_id}__503_no_mongo": (
        "get_llm_request", {"doc_id": "65f1c2a9e4b0a1b2c3d4e5f6"}, "BACKEND_UNAVAILABLE", _no_mongo
    ),
    "GET_api_stats_jobs": ("get_job_stats", {}, "OK", _pending_review(2)),
    "GET_api_stats_jobs__after_mutations": ("get_job_stats", {}, "OK", _pending_review(1)),
    "GET_api_stats_agents": ("get_agent_stats", {}, "OK", None),
    "GET_api_stats_agents__after_mutations": ("get_agent_stats", {}, "OK", None),
    "GET_api_stats_stuck": (
        "get_stuck_jobs", {}, "OK", lambda p: p["jobs"][1]["stuck_component"] == "validator"
    ),
    "GET_api_stats_stuck__threshold_180": (
        "get_stuck_jobs", {"threshold_minutes": 180}, "OK", lambda p: p["count"] == 0
    ),
    "GET_api_agents": ("list_agents", {}, "OK", lambda p: p["count"] == 7),
    "GET_api_agents__status_ready": ("list_agents", {"status": "ready"}, "OK", None),
    "GET_api_agents__status_offline": (
        "list_agents", {"status": "offline"}, "OK", lambda p: p["agents"][0]["metadata"] == {}
    ),
    "GET_api_experts": ("list_experts", {}, "OK", lambda p: len(p["experts"]) == 5),
    "GET_api_experts_{expert_id}": (
        "get_expert", {"expert_id": "researcher"}, "OK", lambda p: p["instructions"]
    ),
    "GET_api_experts_{expert_id}__defaults": ("get_expert", {"expert_id": "defaults"}, "OK", None),
    "GET_api_experts_{expert_id}__404_default": (
        "get_expert",
        {"expert_id": "default"},
        "NOT_FOUND",
        lambda p: "defaults, coder" in p["error"]["message"],
    ),
    "GET_api_datasources": (
        "list_datasources", {}, "OK", lambda p: "<PASSWORD>" not in json.dumps(p)
    ),
    "GET_api_datasources__type_postgresql": (
        "list_datasources", {"type": "postgresql"}, "OK", lambda p: p["count"] == 2
    ),
    "GET_api_tables": ("list_tables", {}, "OK", lambda p: len(p["tables"]) == 6),
    "GET_api_tables_{table_name}": (
        "query_table", {"table_name": "jobs", "limit": 3}, "OK", _rows(3, total=12, next_offset=3)
    ),
    "GET_api_tables_{table_name}__agents": (
        "query_table", {"table_name": "agents"}, "OK", _rows(7, has_more=False)
    ),
    "GET_api_tables_{table_name}__citations": (
        "query_table", {"table_name": "citations", "limit": 2}, "OK", _rows(2, total=7)
    ),
    "GET_api_tables_{table_name}__sources": (
        "query_table", {"table_name": "sources", "limit": 1}, "OK", _rows(1, total=4)
    ),
    "GET_api_tables_{table_name}__beyond_last_page": (
        "query_table",
        {"table_name": "requirements", "offset": 4900},
        "OK",
        _rows(0, total=15, has_more=False),
    ),
    "GET_api_tables_{table_name}_schema": (
        "get_table_schema", {"table_name": "requirements"}, "OK", None
    ),
    "GET_api_tables_{table_name}_schema__jobs": (
        "get_table_schema", {"table_name": "jobs"}, "OK", None
    ),
}  # fmt: skip

# Requests the API answered with an error that the gateway never sends: its own checks refuse
# the arguments first (VALIDATION_ERROR, nothing sent).
REFUSED: dict[str, tuple[str, dict[str, Any]]] = {
    "GET_api_jobs_{job_id}_audit__422_bad_filter": (
        "get_audit_trail", {"job_id": JOB, "filter": "warnings"}
    ),
    "GET_api_jobs_{job_id}_audit__422_page_size": (
        "get_audit_trail", {"job_id": JOB, "page_size": 201}
    ),
    "GET_api_stats_stuck__422_threshold_0": ("get_stuck_jobs", {"threshold_minutes": 0}),
    "GET_api_agents__status_unknown": ("list_agents", {"status": "sleeping"}),
    "GET_api_tables_{table_name}__404_injection": (
        "query_table", {"table_name": "jobs; DROP TABLE jobs"}
    ),
    "GET_api_tables_{table_name}__404_not_allowed": (
        "query_table", {"table_name": "builder_sessions"}
    ),
    "GET_api_tables_{table_name}__422_page_size": (
        "query_table", {"table_name": "jobs", "limit": 501}
    ),
    "GET_api_tables_{table_name}_schema__404": ("get_table_schema", {"table_name": "pg_user"}),
}  # fmt: skip

NOT_SENT = {
    "GET_api_jobs_{job_id}_audit_timerange__no_mongo": "the cockpit's time range; no tool reads it",
    "GET_api_stats_daily": "daily statistics are out of scope (requirements: cockpit charts)",
    "GET_api_datasources__job_id_global": "list_datasources filters by type only (requirements)",
    "GET_api_tables_{table_name}__last_page": (
        "page=-1 ('the last page'): query_table asks for rows by offset, never for a last page"
    ),
}


def test_every_recording_of_these_endpoints_is_accounted_for():
    index = json.loads(RECORDINGS_INDEX.read_text())
    ours = {
        row["file"].removesuffix(".json")
        for row in index
        if row["method"] == "GET" and row["path_template"] in ENDPOINTS
    }
    assert ours == set(REPLAYED) | set(REFUSED) | set(NOT_SENT)
    assert not set(REPLAYED) & set(REFUSED)


@pytest.mark.parametrize("name", sorted(REPLAYED))
async def test_the_recorded_request_is_sent_and_its_answer_shaped(name, tmp_path):
    tool, args, code, check = REPLAYED[name]
    extra = ("GET_api_experts",) if name.endswith("__404_default") else ()
    with recorded_backend(name, *extra) as api:
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            result = await gw.call(tool, args)
        assert api.unmatched == [], [r.target for r in api.unmatched]
        assert [served for _, served in api.served][:1] == [name]
    assert result.code == code, result.payload
    if check is not None:
        assert check(result.payload) is not False


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_a_request_the_api_would_refuse_is_not_sent(name, tmp_path):
    tool, args = REFUSED[name]
    with recorded_backend(name) as api:
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            result = await gw.call(tool, args)
        assert api.requests == []
    assert result.code == "VALIDATION_ERROR"
    assert list(args)[-1] in result.payload["error"]["message"]  # the field refused
