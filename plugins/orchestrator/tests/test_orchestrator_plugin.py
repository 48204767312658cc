"""The orchestrator plugin as a whole: the test kit's conformance and degradation checks, and
the bytes the model sees for the job tools on every turn."""

from __future__ import annotations

import pytest
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from orch_kit import JOB_TOOLS

from gateway.registry import context_bytes
from gateway.testing import assert_backend_tools_degrade, assert_plugin_conforms, make_gateway

# What the orchestrator's own MCP server spends on the same 15 tools (issue 11).
BUDGET = 8_212


def test_the_15_tools_cost_less_than_the_orchestrators_own(tmp_path):
    gw = make_gateway(plugins=["orchestrator"], env={}, cwd=tmp_path)
    tools = {t.name: t for t in gw.registry.all() if t.name in JOB_TOOLS}
    assert set(tools) == set(JOB_TOOLS)
    sizes = {name: context_bytes(t) for name, t in tools.items()}
    total = sum(sizes.values())
    print(f"job tools: {total:,} bytes (budget {BUDGET:,})", sizes)
    assert total <= BUDGET
    for tool in tools.values():
        # Every parameter keeps a one-line description; bounded ones their bounds.
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name}"
            assert "\n" not in prop["description"]
            if prop.get("type") == "integer":
                assert "minimum" in prop and "default" in prop, f"{tool.name}.{name}"


@pytest.mark.anyio
async def test_the_plugin_conforms(tmp_path):
    with FakeOrchestrator() as api:
        await assert_plugin_conforms(
            "orchestrator", plugin_config={"orchestrator": {"url": api.url}}, env={}, cwd=tmp_path
        )
    await assert_plugin_conforms("orchestrator", env={}, cwd=tmp_path)  # unconfigured


@pytest.mark.anyio
async def test_every_tool_degrades_cleanly_whatever_the_backend_does(tmp_path):
    seen = await assert_backend_tools_degrade(
        "orchestrator",
        cwd=tmp_path,
        examples={
            "create_job": {"description": "d"},
            "get_workspace_file": {"job_id": ids.JOB_PROCESSING, "path": "plan.md"},
        },
    )
    assert {tool for tool, _, _ in seen} >= set(JOB_TOOLS)
