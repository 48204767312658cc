"""The inspection tools (audit history, monitoring, database) as Claude Code sees them: read
tier, output schemas, documented parameters, and the bytes they cost the model on every turn
(issue 12's budget)."""

from __future__ import annotations

import pytest
from gateway_orchestrator.backend import COCKPIT
from orch_kit import INSPECTION_TOOLS

from gateway.registry import context_bytes
from gateway.testing import gateway_client, make_gateway

#: What the orchestrator's own MCP server spends on the same 15 tools (issue 12).
BUDGET = 5_947


@pytest.fixture
async def listed(tmp_path):
    # Configured, so its tools are offered (the URL is never contacted: listing does no I/O).
    env = {"COCKPIT_API_URL": "http://127.0.0.1:9"}
    gw = make_gateway(plugins=["orchestrator"], env=env, cwd=tmp_path)
    async with gw, gateway_client(gw) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    return {name: tools[name] for name in INSPECTION_TOOLS}


@pytest.mark.anyio
async def test_the_fifteen_tools_fit_the_byte_budget(listed):
    sizes = {name: context_bytes(tool) for name, tool in listed.items()}
    total = sum(sizes.values())
    print(f"inspection tools: {total} bytes (budget {BUDGET}): {sizes}")
    assert total <= BUDGET


@pytest.mark.anyio
async def test_every_parameter_says_its_default_bounds_and_meaning(listed, tmp_path):
    models = {
        t.name: t.spec.input_model
        for t in make_gateway(plugins=["orchestrator"], env={}, cwd=tmp_path).registry.all()
    }
    for name, tool in listed.items():
        schema = tool.input_schema
        required = set(schema.get("required", []))
        for param, prop in schema["properties"].items():
            where = f"{name}.{param}"
            assert prop.get("description"), f"{where}: no description"
            assert "\n" not in prop["description"], f"{where}: more than one line"
            if param not in required and "default" not in prop:
                # The core publishes an argument that defaults to null as its type alone.
                assert models[name].model_fields[param].default is None, f"{where}: no default"
            if prop.get("type") == "integer":
                assert "minimum" in prop and "maximum" in prop, f"{where}: unbounded"
            if prop.get("type") == "string":
                assert "maxLength" in prop or "enum" in prop, f"{where}: unbounded"


@pytest.mark.anyio
async def test_all_are_read_tools_with_output_schemas(listed):
    for name, tool in listed.items():
        assert tool.annotations.read_only_hint is True, name
        assert tool.annotations.open_world_hint is True, name
        assert "MUTATION" not in tool.description, name
        assert tool.output_schema and tool.output_schema["type"] == "object", name


def test_every_tool_is_bound_to_the_cockpit_backend(tmp_path):
    # So the plugin-wide checks in test_orchestrator_plugin.py (assert_plugin_conforms, and
    # assert_backend_tools_degrade over every REST-bound tool) cover these fifteen too, and the
    # backend's breaker and health check gate them.
    gw = make_gateway(plugins=["orchestrator"], env={}, cwd=tmp_path)
    tools = {t.name: t for t in gw.registry.all()}
    for name in INSPECTION_TOOLS:
        assert tools[name].spec.backend is COCKPIT, name
