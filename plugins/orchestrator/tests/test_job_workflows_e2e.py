"""The job workflows as Claude Code runs them: a real ``mcp-gateway serve`` subprocess over
stdio, the official MCP client, the fake orchestrator (and for the review, the gitea plugin's
fake Gitea serving a real job repository) as real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from gateway_gitea_testing import OWNER, TOKEN, FakeGitea, build_job_repo
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from mcp import Client, StdioServerParameters

from gateway.testing import tool_error

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def _params(cwd: Path, **env: str) -> StdioServerParameters:
    # This process's environment, minus anything that would point the gateway elsewhere.
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MCP_GATEWAY_", "COCKPIT_API_", "GITEA_"))
    }
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "serve"],
        cwd=str(cwd),
        env={**base, **env},
    )


async def call(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool}: {result.structured_content}"
    assert json.loads(result.content[0].text) == result.structured_content
    return dict(result.structured_content)


async def fails(client: Any, tool: str, code: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, f"{tool} succeeded: {result.structured_content}"
    error = tool_error(result)
    assert error["code"] == code, error
    return str(error["message"])


async def test_create_assign_cancel_resume_approve_delete(tmp_path):
    with FakeOrchestrator() as api:
        params = _params(
            tmp_path,
            MCP_GATEWAY_PLUGINS="orchestrator",
            COCKPIT_API_URL=api.url,
            XDG_STATE_HOME=str(tmp_path / "state"),
        )
        with anyio.fail_after(60):
            async with Client(params, mode="legacy") as client:
                created = await call(
                    client,
                    "create_job",
                    description="Summarise GoBD retention rules for AP",
                    config_name="researcher",
                )
                job = created["id"]
                assert (created["status"], created["warnings"]) == ("created", [])

                assigned = await call(client, "assign_job", job_id=job, agent_id=ids.AGENT_READY)
                assert assigned["status"] == "assigned"
                assert (await call(client, "get_job", job_id=job))["status"] == "processing"

                cancelled = await call(client, "cancel_job", job_id=job)
                assert (cancelled["status"], cancelled["previous_status"]) == (
                    "cancelled",
                    "processing",
                )
                again = await fails(client, "cancel_job", "CONFLICT", job_id=job)
                assert "already cancelled" in again

                api.state.agents[ids.AGENT_READY].status = "ready"  # the agent has stopped
                resumed = await call(
                    client,
                    "resume_job_with_feedback",
                    job_id=job,
                    feedback="Only cover structured invoices.",
                )
                assert resumed["agent_id"] == ids.AGENT_READY

                early = await fails(client, "approve_job", "CONFLICT", job_id=job)
                assert "status: processing" in early
                api.state.freeze_job(job, summary="Retention rules summarised.")  # agent done
                frozen = await call(client, "get_frozen_job", job_id=job)
                assert frozen["summary"] == "Retention rules summarised."

                approved = await call(client, "approve_job", job_id=job)
                assert approved["status"] == "approved"
                assert (await call(client, "get_job", job_id=job))["status"] == "completed"

                deleted = await call(client, "delete_job", job_id=job)
                assert (deleted["previous_status"], deleted["warning"]) == ("completed", None)
                await fails(client, "get_job", "NOT_FOUND", job_id=job)
        assert not api.errors
        calls = [(c.action, c.agent_id) for c in api.state.agent_calls]
        assert calls == [
            ("start", ids.AGENT_READY),
            ("cancel", ids.AGENT_READY),
            ("resume", ids.AGENT_READY),
        ]
        assert api.state.agent_calls[2].payload["feedback"] == "Only cover structured invoices."
    audit = [
        json.loads(line)
        for line in (tmp_path / "state/mcp-gateway/audit.jsonl").read_text().splitlines()
    ]
    outcomes = [(a["tool"], a["outcome"]) for a in audit if a["outcome"] != "STARTED"]
    assert outcomes == [
        ("create_job", "OK"),
        ("assign_job", "OK"),
        ("cancel_job", "OK"),
        ("cancel_job", "CONFLICT"),
        ("resume_job_with_feedback", "OK"),
        ("approve_job", "CONFLICT"),
        ("approve_job", "OK"),
        ("delete_job", "OK"),
    ]


@pytest.mark.parametrize("decision", ["approve", "send back"])
async def test_frozen_job_review_with_the_job_history_from_gitea(tmp_path, decision):
    job = ids.JOB_PENDING_REVIEW
    repo = build_job_repo(tmp_path / "repo")
    todos = [
        {"id": "t1", "content": "Collect sources", "status": "completed", "priority": "high"},
        {"id": "t2", "content": "Cite the GoBD", "status": "pending", "priority": "medium"},
    ]
    gitea = FakeGitea(repos={f"{OWNER}/job-{job}": repo.path}, token=TOKEN)
    with FakeOrchestrator() as api, gitea:
        api.state.set_todos(job, todos)
        params = _params(
            tmp_path,
            MCP_GATEWAY_PLUGINS="orchestrator,gitea",
            COCKPIT_API_URL=api.url,
            GITEA_URL=gitea.url,
            GITEA_TOKEN=TOKEN,
        )
        with anyio.fail_after(90):
            async with Client(params, mode="legacy") as client:
                frozen = await call(client, "get_frozen_job", job_id=job)
                assert frozen["deliverables"] == [
                    "output/audit_trail_requirements.md",
                    "workspace.md",
                ]
                assert frozen["confidence"] == 0.85

                tags = await call(client, "list_job_tags", job_id=job)
                names = [t["name"] for t in tags["tags"]]
                assert "job-frozen" in names and "phase_3_start" in names

                diff = await call(client, "get_job_diff", job_id=job, base="phase_3_start")
                assert diff["summary"]["files_changed"] == 1
                assert "plan line 7 (done):" in diff["diff"]

                memory = await call(client, "get_job_file", job_id=job, file_path="workspace.md")
                plan = await call(client, "get_job_file", job_id=job, file_path="plan.md")
                assert "memory line 42: after review" in memory["content"]
                assert "plan line 7 (done):" in plan["content"]

                progress = await call(client, "get_todos", job_id=job)
                assert progress["current"]["counts"] == {"completed": 1, "pending": 1}

                if decision == "approve":
                    approved = await call(client, "approve_job", job_id=job)
                    assert approved["summary"] == frozen["summary"]
                    await fails(client, "get_frozen_job", "NOT_FOUND", job_id=job)
                else:
                    resumed = await call(
                        client,
                        "resume_job_with_feedback",
                        job_id=job,
                        feedback="Cite the GoBD before freezing again.",
                    )
                    # Its agent finished ("completed"), which the API accepts for a resume.
                    assert resumed["agent_id"] == ids.AGENT_COMPLETED
        assert not api.errors
        status = api.state.jobs[job].status
    assert status == ("completed" if decision == "approve" else "processing")
