"""Shared by the part-2 tests: a gateway with the orchestrator plugin pointed at a test API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.testing import make_gateway

#: The tools of part 2 (issue 12), in the order the issue lists them.
PART2_TOOLS = (
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


def size(payload: Any) -> int:
    """Characters of a result as Claude Code hands it to the model (compact JSON)."""
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))
