"""End to end as Claude Code runs it: ``mcp-gateway serve`` as a real stdio subprocess, the
official MCP client, the fake orchestrator as the API. The two workflows of the requirements
that use the inspection tools (system health check, job creation; both end with job tools) and
their own behaviour over the protocol (progress, errors that a strict client accepts)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from mcp import Client, StdioServerParameters
from orch_kit import INSPECTION_TOOLS

from gateway.testing import tool_error

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def _client(api: FakeOrchestrator, tmp_path: Path) -> Client:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_GATEWAY_", "COCKPIT_"))}
    env.update(MCP_GATEWAY_PLUGINS="orchestrator", COCKPIT_API_URL=api.url)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(tmp_path), env=env
    )
    return Client(params, mode="legacy")


async def _ok(client: Client, tool: str, args: dict | None = None) -> dict:
    result = await client.call_tool(tool, args or {})
    assert not result.is_error, (tool, result.content)
    return result.structured_content


async def test_system_health_check_workflow(tmp_path):
    with FakeOrchestrator() as api, anyio.fail_after(60):
        async with _client(api, tmp_path) as client:
            stats = await _ok(client, "get_job_stats")
            assert stats["created"] == 3 and stats["pending_review"] == 2
            stuck = await _ok(client, "get_stuck_jobs")
            assert {j["id"] for j in stuck["jobs"]} == {
                ids.JOB_STUCK_CREATOR,
                ids.JOB_STUCK_VALIDATOR,
            }
            idle = await _ok(client, "list_agents", {"status": "ready"})
            agent = idle["agents"][0]["id"]
            assert agent == ids.AGENT_READY
            waiting = (await _ok(client, "list_jobs", {"status": "created"}))["jobs"]
            assert ids.JOB_CREATED in {j["id"] for j in waiting}
            await _ok(client, "assign_job", {"job_id": ids.JOB_CREATED, "agent_id": agent})
            after = await _ok(client, "get_job_stats")
            assert (after["created"], after["processing"]) == (2, stats["processing"] + 1)
            assert (await _ok(client, "get_agent_stats"))["ready"] == 1
    assert api.state.jobs[ids.JOB_CREATED].status == "processing"


async def test_job_creation_workflow(tmp_path):
    with FakeOrchestrator() as api, anyio.fail_after(60):
        async with _client(api, tmp_path) as client:
            experts = await _ok(client, "list_experts")
            assert "researcher" in [e["id"] for e in experts["experts"]]
            expert = await _ok(client, "get_expert", {"expert_id": "researcher"})
            assert "web_search" in expert["config"]["tools"]["research"]
            graphs = await _ok(client, "list_datasources", {"type": "neo4j"})
            [graph] = graphs["datasources"]
            assert graph["credentials"] == ["password", "username"]
            created = await _ok(
                client,
                "create_job",
                {
                    "description": "Map the payroll interface onto the metamodel",
                    "config_name": "researcher",
                    "datasource_ids": [graph["id"]],
                },
            )
            job = created["id"]
            agents = await _ok(client, "list_agents", {"status": "ready"})
            await _ok(client, "assign_job", {"job_id": job, "agent_id": agents["agents"][0]["id"]})
            rows = await _ok(client, "query_table", {"table_name": "jobs", "limit": 1})
            assert rows["rows"][0]["id"] == job and rows["rows"][0]["status"] == "processing"
    assert api.state.jobs[job].config_name == "researcher"


async def test_inspection_tools_over_stdio_progress_errors_and_listing(tmp_path):
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append((p, total, message))

    with FakeOrchestrator(mongo=True) as api, anyio.fail_after(60):
        for i in range(150):
            api.state.add_audit_entry(ids.JOB_COMPLETED, "llm", content=f"turn {i}")
        async with _client(api, tmp_path) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(INSPECTION_TOOLS) <= set(tools)
            assert all(tools[n].annotations.read_only_hint for n in INSPECTION_TOOLS)
            assert tools["get_audit_trail"].meta == {"anthropic/maxResultSizeChars": 100_000}

            found = await client.call_tool(
                "search_audit",
                {"job_id": ids.JOB_COMPLETED, "query": "TURN 14", "limit": 50},
                progress_callback=on_progress,
            )
            assert [m["position"] for m in found.structured_content["matches"]] == [
                14,
                *range(140, 150),
            ]
            page = await _ok(client, "get_audit_trail", {"job_id": ids.JOB_COMPLETED, "page": -1})
            assert page["page"] == 8 and page["entries"][-1]["content"] == "turn 149"

            api.state.mongo = False
            missing = await client.call_tool("get_chat_history", {"job_id": ids.JOB_PROCESSING})
            # accepted by the strict client despite the outputSchema
            assert tool_error(missing)["code"] == "BACKEND_UNAVAILABLE"
            stats = await _ok(client, "get_job_stats")
            assert stats["total_jobs"] == 12
            refused = await client.call_tool("query_table", {"table_name": "pg_user"})
            assert tool_error(refused)["code"] == "VALIDATION_ERROR"
    assert [(p, t) for p, t, _ in progress] == [(1, 2), (2, 2)]
    assert progress[-1][2] == "searched page 2 (150 of 150): 11 matches"
