"""One bad plugin never takes the gateway down: each failure is isolated and reported."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest
from conftest import gateway_env
from fixture_plugins import BROKEN, EXPECTED_REASON, install_all
from mcp import Client, StdioServerParameters

from gateway.plugins import PluginState
from gateway.testing import gateway_client, make_gateway

PLUGINS = ["good", *BROKEN]


def _gateway(tmp_path):
    env = dict(os.environ, INVALID_CONFIG_PORT="not-a-port")
    return make_gateway(plugins=PLUGINS, env=env, cwd=tmp_path, resource_timeout=2)


@pytest.mark.anyio
async def test_every_broken_plugin_is_skipped_with_its_reason_and_the_good_one_serves(
    plugin_site, tmp_path
):
    install_all(plugin_site)
    gw = _gateway(tmp_path)
    async with gw, gateway_client(gw) as client:
        records = {p.name: p for p in gw.plugins}
        for name, fragment in EXPECTED_REASON.items():
            assert records[name].state is PluginState.FAILED, name
            assert fragment in (records[name].reason or ""), (name, records[name].reason)
            assert records[name].version == "1.2.3"
        assert records["good"].state is PluginState.LOADED
        assert records["hanging_check"].state is PluginState.LOADED

        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"gateway_status", "good_echo", "hanging_check_echo"}
        # A half-registered plugin leaves nothing behind.
        assert "raises_tools_echo" not in names

        ok = await client.call_tool("good_echo", {"text": "hi"})
        assert not ok.is_error and ok.structured_content == {"echo": "hi"}

        with anyio.fail_after(5):
            status = await client.call_tool("gateway_status", {})
        report = status.structured_content
        by_name = {p["name"]: p for p in report["plugins"]}
        assert by_name["raises_open"]["state"] == "failed"
        hang = by_name["hanging_check"]["health"]
        assert hang and hang[0]["status"] == "timeout"
        assert any("fails_import" in p for p in report["problems"])


@pytest.mark.anyio
async def test_a_failing_open_resources_withdraws_the_plugins_tools(plugin_site, tmp_path):
    install_all(plugin_site)
    gw = _gateway(tmp_path)
    assert gw.registry.get("raises_open_echo") is not None  # registered before start
    async with gw:
        result = await gw.call("raises_open_echo", {"text": "x"})
    assert result.code == "NOT_FOUND"


def test_duplicate_plugin_names_are_reported_not_dropped(plugin_site, tmp_path):
    from fixture_plugins import GOOD

    plugin_site("gwfx-first", {"twin": "gwfx_twin_a"}, {"gwfx_twin_a": GOOD})
    plugin_site(
        "gwfx-second",
        {"twin": "gwfx_twin_b"},
        {"gwfx_twin_b": GOOD.replace("good_echo", "twin_b_echo")},
    )
    gw = make_gateway(plugins=["twin"], cwd=tmp_path)
    twins = [p for p in gw.plugins if p.name == "twin"]
    assert len(twins) == 2
    # Neither silently wins: both are reported, the operator picks one with providers.
    assert [p.state for p in twins] == [PluginState.FAILED, PluginState.FAILED]
    assert all("provided by several distributions" in (p.reason or "") for p in twins)
    assert all("providers.twin" in (p.reason or "") for p in twins)


def test_allow_and_block_lists_select_plugins_without_importing_the_rest(plugin_site, tmp_path):
    install_all(plugin_site)
    gw = make_gateway(
        plugins=["good", "fails_import"], disable_plugins=["fails_import"], cwd=tmp_path
    )
    states = {p.name: p.state for p in gw.plugins}
    assert states["good"] is PluginState.LOADED
    assert states["fails_import"] is PluginState.DISABLED
    assert states["raises_tools"] is PluginState.DISABLED
    assert "gwfx_raises_tools" not in sys.modules


@pytest.mark.e2e
@pytest.mark.anyio
async def test_stdio_gateway_serves_the_good_plugin_next_to_every_broken_one(plugin_site, tmp_path):
    install_all(plugin_site)
    # Not the one with invalid settings: those stop the start, as every configuration
    # mistake does (test_config_errors).
    broken = [p for p in EXPECTED_REASON if p != "invalid_config"]
    env = gateway_env(
        PYTHONPATH=os.environ["PYTHONPATH"],
        MCP_GATEWAY_PLUGINS=",".join(p for p in PLUGINS if p != "invalid_config"),
        MCP_GATEWAY_RESOURCE_TIMEOUT="2",
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(tmp_path), env=env
    )
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"gateway_status", "good_echo", "hanging_check_echo"}
            res = await client.call_tool("good_echo", {"text": "still here"})
            assert res.structured_content == {"echo": "still here"}
            status = await client.call_tool("gateway_status", {})
            text = json.dumps(status.structured_content)
            for name in broken:
                assert name in text


def test_descriptions_over_claude_codes_limit_are_refused_at_registration(plugin_site, tmp_path):
    from fixture_plugins import LIMITS

    plugin_site(
        "gwfx-limits", {k: f"gwfx_{k}" for k in LIMITS}, {f"gwfx_{k}": v for k, v in LIMITS.items()}
    )
    gw = make_gateway(plugins=list(LIMITS), cwd=tmp_path)
    records = {p.name: p for p in gw.plugins}
    assert records["longest_name"].state is PluginState.LOADED  # exactly 2,048 is fine
    long = records["long_description"]
    assert long.state is PluginState.FAILED
    assert "description is 2049 characters; Claude Code cuts it after 2048" in (long.reason or "")
    with_paragraph = records["long_with_paragraph"]
    assert with_paragraph.state is PluginState.FAILED
    assert "with its MUTATION paragraph" in (with_paragraph.reason or "")


@pytest.mark.anyio
async def test_the_conformance_kit_checks_the_full_name_against_the_server_name(
    plugin_site, tmp_path
):
    from fixture_plugins import LIMITS

    from gateway.testing import assert_plugin_conforms

    plugin_site(
        "gwfx-longest",
        {"longest_name": "gwfx_longest_name"},
        {"gwfx_longest_name": LIMITS["longest_name"]},
    )
    await assert_plugin_conforms("longest_name", cwd=tmp_path)  # mcp__gateway__ + 64 = 78
    with pytest.raises(AssertionError, match="Claude Code drops tools whose full name is over 128"):
        await assert_plugin_conforms("longest_name", cwd=tmp_path, server_name="s" * 58)
