"""The plugin as a whole: conformance, configuration, health, the MCP surface, cold start."""

from __future__ import annotations

import subprocess
import sys

import pytest
from gateway_gitea_testing import TOKEN, Site

from gateway.testing import (
    assert_backend_tools_degrade,
    assert_plugin_conforms,
    gateway_client,
    tool_error,
)

TOOLS = {"list_job_commits", "get_job_diff", "get_job_file", "list_job_files", "list_job_tags"}
NOT_CONFIGURED = (
    "Gitea is not configured: set GITEA_URL (or url in [plugins.gitea]) to enable these tools"
)


@pytest.mark.anyio
async def test_gitea_plugin_conforms_when_configured(tmp_path, site: Site):
    await assert_plugin_conforms("gitea", plugin_config=site.config(), env={}, cwd=tmp_path)


@pytest.mark.anyio
async def test_gitea_plugin_conforms_when_unconfigured(tmp_path):
    await assert_plugin_conforms("gitea", env={}, cwd=tmp_path)


def test_importing_the_plugin_does_not_import_httpx():
    code = (
        "import sys, gateway_gitea.plugin; "
        "print('httpx' in sys.modules, 'gateway_gitea.client' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.anyio
async def test_unconfigured_every_tool_is_backend_unavailable_with_the_setting_to_set(
    gateway_factory,
):
    gw = gateway_factory(plugins=["gitea"], env={})
    job = "3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e"
    calls = {
        "list_job_commits": {"job_id": job},
        "get_job_diff": {"job_id": job, "base": "job-frozen"},
        "get_job_file": {"job_id": job, "file_path": "workspace.md"},
        "list_job_files": {"job_id": job},
        "list_job_tags": {"job_id": job},
    }
    async with gw:
        for name, args in calls.items():
            result = await gw.call(name, args)
            assert result.code == "BACKEND_UNAVAILABLE", name
            assert result.payload["error"]["message"] == NOT_CONFIGURED
        health = await gw.health.run(plugin="gitea", use_cache=False)
    assert [(h.status, h.detail) for h in health] == [("unconfigured", NOT_CONFIGURED)]


@pytest.mark.anyio
async def test_env_variables_configure_the_plugin(gateway_factory, site: Site):
    gw = gateway_factory(
        plugins=["gitea"], env={"GITEA_URL": site.gitea.url + "/api/v1/", "GITEA_TOKEN": TOKEN}
    )
    async with gw:
        result = await gw.call("list_job_tags", {"job_id": site.job})
        health = await gw.health.run(plugin="gitea", use_cache=False)
    assert not result.is_error, result.payload
    assert health[0].status == "ok"
    assert health[0].detail == "Gitea 1.25.4, credentials accepted"


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"url": "ftp://gitea.example"}, "url"),
        ({"url": "http://x", "repo_template": "job"}, "repo_template"),
        ({"url": "http://x", "repo_template": "job/{job_id}"}, "repo_template"),
        ({"url": "http://x", "owner": "../etc"}, "owner"),
        ({"url": "http://x", "max_concurrency": 0}, "max_concurrency"),
        ({"url": "http://x", "diff_engine": "svn"}, "diff_engine"),
    ],
)
def test_invalid_settings_skip_the_plugin_naming_the_setting(gateway_factory, table, field):
    gw = gateway_factory(plugins=["gitea"], plugin_config={"gitea": table}, env={})
    record = gw.plugin("gitea")
    assert record is not None and record.state.value == "failed"
    assert field in (record.reason or "")


@pytest.mark.anyio
async def test_mcp_client_sees_five_read_only_open_world_tools_and_structured_results(
    gitea_gateway, site: Site
):
    gw = gitea_gateway()
    async with gw, gateway_client(gw) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) >= TOOLS
        for name in TOOLS:
            ann = listed[name].annotations
            assert ann.read_only_hint is True and ann.open_world_hint is True, name
            assert listed[name].output_schema is not None
        ok = await client.call_tool("list_job_tags", {"job_id": site.job})
        assert not ok.is_error
        assert [t["name"] for t in ok.structured_content["tags"]][:1] == ["phase_1_start"]
        # Error results pass the strict client's output-schema check too.
        bad = await client.call_tool("get_job_file", {"job_id": site.job, "file_path": "nope.md"})
        assert bad.is_error
        assert tool_error(bad)["code"] == "NOT_FOUND"
        invalid = await client.call_tool("get_job_diff", {"job_id": "x", "base": "main"})
        assert invalid.is_error
        assert tool_error(invalid)["code"] == "VALIDATION_ERROR"
    assert listed["get_job_diff"].meta == {"anthropic/maxResultSizeChars": 500000}


@pytest.mark.anyio
async def test_every_gitea_tool_degrades_cleanly_whatever_gitea_does(tmp_path):
    seen = await assert_backend_tools_degrade("gitea", cwd=tmp_path)
    assert {tool for tool, _, _ in seen} == TOOLS
    assert {case for _, case, _ in seen} == {
        "unconfigured",
        "refuse",
        "hang",
        "error",
        "garbage",
        "null",
    }


def test_credentials_in_the_url_and_a_token_are_refused_together(tmp_path):
    from gateway.testing import make_gateway

    gw = make_gateway(
        plugins=["gitea"],
        plugin_config={"gitea": {"url": "http://bot:pw-123456@127.0.0.1:3000"}},
        env={"GITEA_TOKEN": "tok-abcdef-123"},
        cwd=tmp_path,
    )
    record = gw.plugin("gitea")
    assert record.state.value == "failed"
    assert "GITEA_TOKEN is set too" in record.reason
    assert "pw-123456" not in record.reason and "tok-abcdef-123" not in record.reason


def test_the_five_tools_cost_the_model_fewer_bytes_than_the_orchestrators_own(tmp_path):
    """name + description + inputSchema as compact JSON: 3,361 bytes on the orchestrator's
    own MCP server for the same five tools. Every parameter keeps a description, and its
    default and bounds (an argument that defaults to none is simply left out)."""
    from gateway.registry import context_bytes
    from gateway.testing import make_gateway

    gw = make_gateway(plugins=["gitea"], env={}, cwd=tmp_path)
    tools = [t for t in gw.registry.all() if t.plugin.name == "gitea"]
    sizes = {t.name: context_bytes(t) for t in tools}
    assert sum(sizes.values()) <= 3361, sizes
    for t in tools:
        for name, prop in t.input_schema["properties"].items():
            assert prop.get("description"), (t.name, name)
            field = t.spec.input_model.model_fields[name]
            if name not in t.input_schema.get("required", []) and field.default is not None:
                assert prop["default"] == field.default, (t.name, name)
