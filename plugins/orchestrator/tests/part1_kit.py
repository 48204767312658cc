"""What the part 1 tests share: a gateway pointed at a test backend, and result checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.pipeline import CallResult
from gateway.testing import make_gateway

PART1_TOOLS = (
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


@asynccontextmanager
async def gateway_at(url: str, cwd: Path, **settings: Any) -> AsyncIterator[Gateway]:
    """A started gateway with the orchestrator plugin only, ``COCKPIT_API_URL=url``."""
    gw = make_gateway(plugins=["orchestrator"], env={"COCKPIT_API_URL": url}, cwd=cwd, **settings)
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
