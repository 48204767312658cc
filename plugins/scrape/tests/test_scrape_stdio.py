"""What Claude Code sees: a real ``mcp-gateway serve`` process running the real python-jobspy.

The boards are made unreachable on purpose (an HTTPS proxy on a closed local port), so the
run is fast and deterministic with or without internet: python-jobspy really runs, really
fails, and the term reports it while the call succeeds.
"""

from __future__ import annotations

import os
import socket
import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters
from scrape_testutil import rows

from gateway.testing import tool_error

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _params(tmp_path) -> StdioServerParameters:
    proxy = f"http://127.0.0.1:{_closed_port()}"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MCP_GATEWAY_") and k.lower() not in {"no_proxy", "all_proxy"}
    }
    env.update(MCP_GATEWAY_PLUGINS="scrape", HTTPS_PROXY=proxy, HTTP_PROXY=proxy)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(tmp_path), env=env
    )


async def test_a_real_scrape_over_stdio_reports_unreachable_boards_per_term(tmp_path):
    with anyio.fail_after(90):
        async with Client(_params(tmp_path), mode="legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["scrape_jobs"].output_schema is not None

            res = await client.call_tool(
                "scrape_jobs",
                {
                    "terms": ["ai engineer", "backend engineer"],
                    "preflight_host": None,
                    "results_wanted": 1,
                    "save_capture_json": False,
                },
            )
            assert not res.is_error, res.structured_content
            out = res.structured_content
            assert [r["term"] for r in out["results"]] == ["ai engineer", "backend engineer"]
            for term in out["results"]:
                assert term["success"] is False
                assert term["error"].startswith("scrape failed: every board failed: linkedin:")
                assert str(tmp_path) not in term["error"]
            assert out["totals"]["failed_terms"] == 2 and out["totals"]["inserted_count"] == 0

            bad = await client.call_tool("scrape_jobs", {"terms": ["x"], "max_pages": 3})
            assert bad.is_error
            assert tool_error(bad)["code"] == "VALIDATION_ERROR"
            assert "max_pages" in tool_error(bad)["message"]
    # The database was bootstrapped before the first term and holds nothing.
    assert rows(tmp_path / "data/capture/jobs.db") == []
