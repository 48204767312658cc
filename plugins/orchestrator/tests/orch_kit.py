"""What the orchestrator plugin's tests share: a gateway pointed at a test API, result checks,
and the plugin's tools in two groups (each with a byte budget of its own)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.pipeline import CallResult
from gateway.testing import make_gateway

#: Jobs, their actions and the workspace inside a job (jobs.py, workspace.py).
JOB_TOOLS = (
    "list_jobs",
    "get_job",
    "get_todos",
    "approve_job",
    "resume_job_with_feedback",
    "cancel_job",
    "create_job",
    "delete_job",
    "assign_job",
    "test_datasource",
    "get_frozen_job",
    "get_workspace_file",
    "get_workspace_overview",
    "get_job_progress",
    "get_job_requirements",
)
MUTATIONS = (
    "approve_job",
    "resume_job_with_feedback",
    "cancel_job",
    "create_job",
    "delete_job",
    "assign_job",
)
#: Audit history, monitoring and the database browser (audit.py, search.py, monitoring.py,
#: tables.py): read tools only.
INSPECTION_TOOLS = (
    "get_audit_trail",
    "get_chat_history",
    "get_graph_changes",
    "get_llm_request",
    "search_audit",
    "get_job_stats",
    "get_agent_stats",
    "get_stuck_jobs",
    "list_agents",
    "list_experts",
    "get_expert",
    "list_datasources",
    "list_tables",
    "query_table",
    "get_table_schema",
)


@asynccontextmanager
async def orchestrator_gateway(
    url: str, cwd: Path, **gateway_settings: Any
) -> AsyncIterator[Gateway]:
    """A running gateway with only the orchestrator plugin, its API at ``url``."""
    gw = make_gateway(
        plugins=["orchestrator"], env={"COCKPIT_API_URL": url}, cwd=cwd, **gateway_settings
    )
    async with gw:
        yield gw


def ok(result: CallResult) -> dict[str, Any]:
    assert not result.is_error, result.text()
    return result.payload


def error(result: CallResult, code: str) -> str:
    """The error message, after checking the code (and that it is never an internal error)."""
    assert result.is_error, result.text()
    assert result.code == code, result.text()
    return str(result.payload["error"]["message"])


def size(payload: Any) -> int:
    """Characters of a result as Claude Code hands it to the model (compact JSON)."""
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))
