"""The citation verification workflow of the requirements, as Claude Code runs it: a real
`mcp-gateway serve` subprocess, the official MCP client over stdio, the fake orchestrator as a
real HTTP server.

    get_citation_stats → list_job_citations(verification_status="failed") → get_citation_detail
    → get_source_detail → search_job_sources → get_source_annotations
    → resume_job_with_feedback (orchestrator plugin)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from mcp import Client, StdioServerParameters

from gateway.testing import make_gateway, tool_error
from gateway.testing.backends import FaultMode

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

JOB = ids.JOB_PENDING_REVIEW  # frozen for review: approve, or resume with feedback
TOOLS = {
    "list_job_sources",
    "get_source_detail",
    "list_job_citations",
    "get_citation_detail",
    "search_job_sources",
    "get_source_annotations",
    "get_source_tags",
    "get_citation_stats",
}


def _orchestrator_registers(tool: str) -> bool:
    """Whether the installed orchestrator plugin provides ``tool`` (its job tools bring
    resume_job_with_feedback): the last step turns itself on when it does."""
    with tempfile.TemporaryDirectory() as tmp:
        gw = make_gateway(plugins=["orchestrator"], env={}, cwd=Path(tmp))
        return gw.registry.get(tool) is not None


RESUME = "resume_job_with_feedback"


def _server(cwd: Path, plugins: str, api: FakeOrchestrator) -> StdioServerParameters:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("MCP_GATEWAY_", "COCKPIT_API_"))
    }
    env.update(MCP_GATEWAY_PLUGINS=plugins, COCKPIT_API_URL=api.url)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(cwd), env=env
    )


def _review_scenario(api: FakeOrchestrator) -> int:
    """The frozen job cited the FAQ for a ten-year rule the FAQ does not state."""
    failed = api.state.add_citation(
        JOB,
        2,
        "Structured e-invoices must be archived for ten years.",
        verbatim_quote="XRechnung files must be archived for ten years.",
        relevance_reasoning="Sets the retention period for the archive requirement.",
        confidence="medium",
        extraction_method="direct_quote",
        locator={"url": "https://example.org/faq/e-invoicing-archiving", "paragraph": 3},
        verification_status="failed",
        verification_notes="Quote not found in the source; closest passage states eight years.",
        similarity_score=0.38,
        matched_location={"char_start": 152, "char_end": 197},
    )
    api.state.add_annotation(
        JOB, 2, "question", "Eight or ten years for invoices? The FAQ says eight."
    )
    return failed.id


async def _call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.structured_content
    assert result.structured_content is not None
    return result.structured_content


async def _verify_citations(client: Client, failed_id: int) -> str:
    """Steps 1-6; returns the feedback a reviewer would send."""
    stats = await _call(client, "get_citation_stats", {"job_id": JOB})
    assert stats["total_citations"] == 2
    assert stats["citations_by_verification_status"] == {
        "pending": 0,
        "verified": 1,
        "failed": 1,
        "unverified": 0,
    }

    failed = await _call(
        client, "list_job_citations", {"job_id": JOB, "verification_status": "failed"}
    )
    assert [c["id"] for c in failed["citations"]] == [failed_id]

    citation = await _call(client, "get_citation_detail", {"citation_id": failed_id})
    assert citation["source_id"] == 2
    assert citation["locator"] == {
        "url": "https://example.org/faq/e-invoicing-archiving",
        "paragraph": 3,
    }
    assert citation["matched_location"] == {"char_start": 152, "char_end": 197}
    assert "eight years" in citation["verification_notes"]

    source = await _call(client, "get_source_detail", {"source_id": 2, "content_limit": 0})
    assert "Retention period for invoices is eight years." in source["content"]
    assert "ten years" not in source["content"] and source["content_truncated"] is False

    search = await _call(
        client, "search_job_sources", {"job_id": JOB, "query": "archived ten years"}
    )
    assert search["results"] == [] and search["mode"] == "keyword"
    assert search["note"] == "hybrid search is not available: the orchestrator ran keyword search"
    search = await _call(client, "search_job_sources", {"job_id": JOB, "query": "eight years"})
    hits = {h["source_id"]: h for h in search["results"]}
    hit = hits[2]  # the FAQ says eight years (so does the GoBD, source 1)
    assert hit["evidence_label"] in ("HIGH", "MEDIUM", "LOW")
    assert "**eight**" in hit["snippet"] and "matched: eight, years" in hit["evidence_reason"]

    notes = await _call(client, "get_source_annotations", {"job_id": JOB, "source_id": 2})
    assert [n["annotation_type"] for n in notes["annotations"]] == ["question"]

    return (
        f"Citation [{failed_id}] quotes a ten-year rule that is not in the FAQ (it says eight "
        "years). Please re-verify against the actual document text."
    )


async def test_the_workflow_with_the_citations_plugin_alone_and_a_dying_backend(tmp_path):
    with FakeOrchestrator() as api:
        failed_id = _review_scenario(api)
        with anyio.fail_after(60):
            async with Client(_server(tmp_path, "citations", api), mode="legacy") as client:
                listed = {t.name: t for t in (await client.list_tools()).tools}
                assert set(listed) == TOOLS | {"gateway_status"}
                assert all(listed[name].annotations.read_only_hint for name in TOOLS)
                assert RESUME not in listed

                await _verify_citations(client, failed_id)

                api.mode = FaultMode.REFUSE
                down = await client.call_tool("get_citation_stats", {"job_id": JOB})
                api.mode = FaultMode.NORMAL
                bad = await client.call_tool("get_citation_stats", {"job_id": "not-a-uuid"})
    assert down.is_error
    error = tool_error(down)
    assert error["code"] == "BACKEND_UNAVAILABLE" and error["retryable"] is True
    assert "the orchestrator API is unreachable" in error["message"]
    assert tool_error(bad)["code"] == "VALIDATION_ERROR"


async def test_alongside_the_orchestrator_plugin_the_tools_and_backend_coexist(tmp_path):
    with FakeOrchestrator() as api:
        failed_id = _review_scenario(api)
        with anyio.fail_after(60):
            async with Client(
                _server(tmp_path, "citations,orchestrator", api), mode="legacy"
            ) as client:
                listed = {t.name for t in (await client.list_tools()).tools}
                assert listed >= TOOLS
                await _verify_citations(client, failed_id)
                status = await _call(client, "gateway_status", {})
    plugins = {p["name"]: p for p in status["plugins"]}
    assert plugins["citations"]["state"] == "loaded"
    assert plugins["orchestrator"]["state"] == "loaded"


@pytest.mark.skipif(
    not _orchestrator_registers(RESUME),
    reason=f"the orchestrator plugin does not register {RESUME} yet (its job tools)",
)
async def test_the_workflow_ends_with_resume_job_with_feedback(tmp_path):
    with FakeOrchestrator() as api:
        failed_id = _review_scenario(api)
        with anyio.fail_after(60):
            async with Client(
                _server(tmp_path, "citations,orchestrator", api), mode="legacy"
            ) as client:
                feedback = await _verify_citations(client, failed_id)
                result = await client.call_tool(RESUME, {"job_id": JOB, "feedback": feedback})
        assert not result.is_error, result.structured_content
        assert api.state.jobs[JOB].status == "processing"
        resumed = [c for c in api.state.agent_calls if c.action == "resume" and c.job_id == JOB]
        assert [c.payload.get("feedback") for c in resumed] == [feedback]
