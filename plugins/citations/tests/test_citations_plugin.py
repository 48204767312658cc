"""The plugin as a whole: conformance, a dead backend, the backend shared with the orchestrator
plugin, start-up imports, and the bytes its tools cost the model."""

from __future__ import annotations

import subprocess
import sys

import pytest
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids

from gateway.registry import context_bytes
from gateway.testing import (
    assert_backend_tools_degrade,
    assert_plugin_conforms,
    gateway_client,
    make_gateway,
)

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
#: What the orchestrator's own MCP server spends on the same eight tools (issue 13).
BYTE_BUDGET = 4576
NOT_CONFIGURED = (
    "the orchestrator API is not configured: set COCKPIT_API_URL (or url in "
    "[plugins.orchestrator]) to enable these tools"
)


@pytest.mark.anyio
async def test_conforms_configured_and_unconfigured(tmp_path):
    with FakeOrchestrator() as api:
        await assert_plugin_conforms("citations", env={"COCKPIT_API_URL": api.url}, cwd=tmp_path)
    await assert_plugin_conforms("citations", env={}, cwd=tmp_path)


@pytest.mark.anyio
async def test_every_tool_degrades_cleanly_with_a_dead_backend(tmp_path):
    seen = await assert_backend_tools_degrade("citations", cwd=tmp_path)
    assert {tool for tool, _, _ in seen} == TOOLS
    # a dead backend is never mistaken for an unknown job
    assert all(code != "NOT_FOUND" for _, case, code in seen if case != "null")


@pytest.mark.anyio
async def test_alone_it_loads_serves_and_names_the_setting_when_unconfigured(gateway_factory):
    gw = gateway_factory(plugins=["citations"], env={})
    assert {t.name for t in gw.registry.all() if t.plugin.name == "citations"} == TOOLS
    async with gw:
        result = await gw.call("get_citation_stats", {"job_id": ids.JOB_PROCESSING})
        health = await gw.health.run(plugin="citations", use_cache=False)
    assert result.code == "BACKEND_UNAVAILABLE"
    assert result.payload["error"]["message"] == NOT_CONFIGURED
    assert [(h.name, h.status) for h in health] == [("cockpit_api", "unconfigured")]


@pytest.mark.anyio
async def test_the_table_of_the_orchestrator_plugin_configures_it(gateway_factory):
    with FakeOrchestrator() as api:
        gw = gateway_factory(
            plugins=["citations"], env={}, plugin_config={"orchestrator": {"url": api.url}}
        )
        async with gw:
            result = await gw.call(
                "get_source_tags", {"job_id": ids.JOB_PROCESSING, "source_id": 1}
            )
            health = await gw.health.run(plugin="citations", use_cache=False)
    assert result.payload["tags"] == ["gobd", "immutability", "retention"]
    assert health[0].status == "ok"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("isolate", "by"), [(["citations"], "variable"), (["citations"], "table"), ("all", "table")]
)
async def test_in_a_worker_it_is_handed_the_backend_it_shares_with_the_orchestrator_plugin(
    gateway_factory, isolate, by
):
    # The orchestrator's API is one backend both plugins declare: its variables and its table
    # are citations' as much as the orchestrator's, in a worker as in process.
    with FakeOrchestrator() as api:
        gw = gateway_factory(
            plugins=["citations", "orchestrator"],
            isolate=isolate,
            env={"COCKPIT_API_URL": api.url} if by == "variable" else {},
            plugin_config={"orchestrator": {"url": api.url}} if by == "table" else {},
        )
        assert gw.plugin("citations").runs == "worker"
        async with gw:
            result = await gw.call(
                "get_source_tags", {"job_id": ids.JOB_PROCESSING, "source_id": 1}
            )
    assert result.payload["tags"] == ["gobd", "immutability", "retention"], result.payload


def test_the_backend_is_the_orchestrator_plugins_own_declaration():
    from gateway_citations.backend import COCKPIT
    from gateway_orchestrator.backend import COCKPIT as ORCHESTRATOR_COCKPIT

    assert COCKPIT.same_identity(ORCHESTRATOR_COCKPIT)
    assert (COCKPIT.title, COCKPIT.health_path) == (
        ORCHESTRATOR_COCKPIT.title,
        ORCHESTRATOR_COCKPIT.health_path,
    )


@pytest.mark.anyio
async def test_installed_together_they_share_one_backend_and_one_health_check(gateway_factory):
    with FakeOrchestrator() as api:
        gw = gateway_factory(
            plugins=["citations", "orchestrator"], env={"COCKPIT_API_URL": api.url}
        )
        for name in ("citations", "orchestrator"):
            assert gw.plugin(name).state.value == "loaded", gw.plugin(name).reason
        # Part of the orchestrator plugin may not register tools yet; each one that does uses
        # the same backend, so the users are exactly the plugins with cockpit tools.
        expected = sorted(
            {t.plugin.name for t in gw.registry.all() if t.spec.backend_name == "cockpit"}
        )
        assert "citations" in expected
        assert sorted(gw.backends.users("cockpit")) == expected
        async with gw:
            health = await gw.health.run(use_cache=False)
            result = await gw.call("get_citation_stats", {"job_id": ids.JOB_PROCESSING})
    cockpit = [h for h in health if h.name == "cockpit_api"]
    assert len(cockpit) == 1 and cockpit[0].status == "ok"
    assert not result.is_error
    assert [r.path for r in api.requests].count("/api/health") == 1


def test_importing_the_plugin_imports_neither_httpx_nor_the_orchestrator_plugin():
    code = (
        "import sys, gateway_citations.plugin; "
        "print('httpx' in sys.modules, any(m.startswith('gateway_orchestrator') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_runtime_dependencies_are_the_core_and_pydantic_only():
    from importlib.metadata import requires

    runtime = [r for r in requires("mcp-plugin-gateway-citations") or [] if "extra ==" not in r]
    assert sorted(r.split(">")[0].split("<")[0].strip() for r in runtime) == [
        "mcp-plugin-gateway",
        "pydantic",
    ]


@pytest.mark.anyio
async def test_the_eight_tools_cost_the_model_at_most_the_budget(tmp_path, capsys):
    env = {"COCKPIT_API_URL": "http://127.0.0.1:9"}  # configured: its tools are offered
    gw = make_gateway(plugins=["citations"], env=env, cwd=tmp_path)
    async with gw, gateway_client(gw) as client:
        listed = [t for t in (await client.list_tools()).tools if t.name in TOOLS]
    sizes = {t.name: context_bytes(t) for t in listed}
    assert set(sizes) == TOOLS
    with capsys.disabled():
        print(f"\ncitations tools: {sum(sizes.values())} bytes (budget {BYTE_BUDGET}): {sizes}")
    assert sum(sizes.values()) <= BYTE_BUDGET
    # every parameter keeps a one-line description
    for tool in listed:
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name}"
