"""Monitoring tools against the fake orchestrator: the numbers the API gets wrong or leaves
out, real statuses, experts, and datasources without their secrets."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from gateway_orchestrator_testing import seed as ids
from orch_kit import orchestrator_gateway

pytestmark = pytest.mark.anyio


async def test_job_stats_include_pending_review(orch, tmp_path):
    orch.state.freeze_job(ids.JOB_PROCESSING)  # a third pending_review job
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        stats = (await gw.call("get_job_stats", {})).payload
    statuses = [j.status for j in orch.state.jobs.values()]
    assert stats == {
        "total_jobs": len(statuses),
        **{s: statuses.count(s) for s in ("created", "processing", "completed", "failed")},
        "cancelled": statuses.count("cancelled"),
        "pending_review": statuses.count("pending_review"),
    }
    assert stats["pending_review"] == 3
    assert sum(v for k, v in stats.items() if k != "total_jobs") == stats["total_jobs"]


async def test_agent_stats(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        stats = (await gw.call("get_agent_stats", {})).payload
    assert stats == {
        "total": 7,
        "booting": 1,
        "ready": 2,
        "working": 1,
        "completed": 1,
        "failed": 1,
        "offline": 1,
    }


async def test_stuck_jobs_threshold_default_and_bounds(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        default = (await gw.call("get_stuck_jobs", {})).payload
        wide = (await gw.call("get_stuck_jobs", {"threshold_minutes": 1440})).payload
        refused = [await gw.call("get_stuck_jobs", {"threshold_minutes": m}) for m in (0, 1441, -5)]
    assert default["threshold_minutes"] == 30 and default["count"] == 2
    stuck = default["jobs"][0]
    assert stuck["id"] == ids.JOB_STUCK_CREATOR and stuck["stuck_component"] == "creator"
    assert stuck["updated_at"].endswith("Z")
    assert wide["count"] == 0
    assert all(r.code == "VALIDATION_ERROR" for r in refused)
    assert [r.query for r in orch.requests] == [
        {"threshold_minutes": "30"},
        {"threshold_minutes": "1440"},
    ]


async def test_list_agents_filters_by_the_real_statuses_and_decodes_metadata(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        ready = (await gw.call("list_agents", {"status": "ready"})).payload
        every = (await gw.call("list_agents", {})).payload
        sleeping = await gw.call("list_agents", {"status": "sleeping"})
    assert [a["id"] for a in ready["agents"]] == [ids.AGENT_READY, ids.AGENT_UNREACHABLE]
    assert ready["agents"][0]["metadata"] == {"memory_mb": 402, "cpu_percent": 2.0}
    assert every["count"] == 7 and every["has_more"] is False
    working = next(a for a in every["agents"] if a["status"] == "working")
    assert working["current_job_id"] == ids.JOB_PROCESSING
    assert sleeping.code == "VALIDATION_ERROR"  # the API would answer [] for any unknown word
    assert "booting" in sleeping.payload["error"]["message"]
    assert [r.query for r in orch.requests] == [
        {"limit": "100", "status": "ready"},
        {"limit": "100"},
    ]


async def test_a_full_page_of_agents_says_there_may_be_more(orch, tmp_path):
    for i in range(100):
        orch.state.add_agent(
            "coder", last_heartbeat=orch.state.now() - timedelta(minutes=i), status="offline"
        )
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        page = (await gw.call("list_agents", {})).payload
    assert page["count"] == 100 and page["has_more"] is True


async def test_experts_and_an_unknown_expert_lists_the_ids(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        experts = (await gw.call("list_experts", {})).payload
        defaults = (await gw.call("get_expert", {"expert_id": "defaults"})).payload
        missing = await gw.call("get_expert", {"expert_id": "default"})
        refused = await gw.call("get_expert", {"expert_id": "../defaults"})
    ids_ = [e["id"] for e in experts["experts"]]
    assert ids_ == ["defaults", "coder", "debugger", "researcher", "writer"]
    assert set(experts["experts"][0]) == {"id", "display_name", "description", "tags"}
    assert defaults["config"]["llm"]["model"] == "openai/gpt-oss-120b"
    assert defaults["instructions"].startswith("# Remote Worker Instructions")
    assert defaults["truncated_texts"] == 0
    assert missing.code == "NOT_FOUND"
    assert missing.payload["error"]["message"] == (
        "no expert 'default'; the experts are: defaults, coder, debugger, researcher, writer"
    )
    assert refused.code == "VALIDATION_ERROR"
    assert [r.path for r in orch.requests] == [
        "/api/experts",
        "/api/experts/defaults",
        "/api/experts/default",
        "/api/experts",
    ]


async def test_expert_instructions_are_bounded(orch, tmp_path):
    expert = next(e for e in orch.state.experts if e["id"] == "writer")
    expert["instructions"] = "# Writer\n" + "Write well. " * 10_000  # 120,009 characters
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        short = (await gw.call("get_expert", {"expert_id": "writer"})).payload
        long = (await gw.call("get_expert", {"expert_id": "writer", "max_chars": 80_000})).payload
    assert short["truncated_texts"] == 1 and "not shown; raise max_chars" in short["instructions"]
    assert short["config"]["llm"]["model"]  # the rest is whole
    assert len(short["instructions"]) < 20_000 < len(long["instructions"]) < 80_000
    assert "of 120,009 characters not shown" in long["instructions"]


async def test_datasources_never_show_passwords(orch, tmp_path):
    orch.state.add_datasource(
        "Reporting",
        "postgresql",
        "postgresql://report:pa/ss@word@db.internal:5432/rep?sslmode=require&sslpassword=k3y",
        credentials={"password": "hunter2-secret", "username": "report", "api_key": "ak-999"},
        description="password=inline-secret in a description",
    )
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        every = (await gw.call("list_datasources", {})).payload
        neo4j = (await gw.call("list_datasources", {"type": "neo4j"})).payload
        wrong = await gw.call("list_datasources", {"type": "mysql"})
    text = json.dumps(every)
    for secret in (ids.PASSWORD, "pa/ss", "word@", "k3y", "hunter2", "ak-999", "inline-secret"):
        assert secret not in text
    reporting = next(d for d in every["datasources"] if d["name"] == "Reporting")
    assert reporting["connection_url"] == (
        "postgresql://db.internal:5432/rep?sslmode=require&sslpassword=***"
    )
    assert reporting["credentials"] == ["api_key", "password", "username"]
    assert reporting["description"] == "password=*** in a description"
    [graph] = neo4j["datasources"]
    assert graph["id"] == ids.DS_NEO4J and graph["credentials"] == ["password", "username"]
    assert graph["connection_url"] == "bolt://127.0.0.1:7687"
    job_scoped = next(d for d in every["datasources"] if d["id"] == ids.DS_JOB_POSTGRES)
    assert job_scoped["connection_url"] == "postgresql://127.0.0.1:5432/graphrag"
    assert job_scoped["job_id"] == ids.JOB_CREATED and job_scoped["credentials"] == []
    assert wrong.code == "VALIDATION_ERROR"
    assert [r.query for r in orch.requests] == [{}, {"type": "neo4j"}]
