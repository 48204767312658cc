"""Offer only what can work: the tools of a backend that is not configured are not listed, and
prompts and instructions leave them out too; the gateway says why and which variable to set,
and a call by name answers the same. ``offer_unconfigured_tools`` lists them anyway. A setting
that still reads ``${NAME}`` (Claude Code leaves a reference to an unset variable as it is)
counts as unset, is reported naming ``NAME``, and is never sent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import gateway_env
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids

from gateway.testing import gateway_client, make_gateway, tool_error
from gateway.testing.backends import closed_port_url

PLUGINS = ["orchestrator", "citations", "gitea"]
GITEA_TOOLS = {
    "list_job_commits",
    "get_job_diff",
    "get_job_file",
    "list_job_files",
    "list_job_tags",
}
COCKPIT = {"COCKPIT_API_URL": "http://127.0.0.1:9"}  # never contacted: listing does no I/O
SET_GITEA = "set GITEA_URL (or url in [plugins.gitea]) to enable these tools"
DIFF_ARGS = {"job_id": ids.JOB_PENDING_REVIEW, "base": "job-frozen"}


@pytest.fixture
def cli(cli_main):
    """``mcp-gateway`` (its entry point, in this process) without the backends' variables of
    the environment the tests run in."""

    def run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        environment = {
            k: v for k, v in gateway_env().items() if not k.startswith(("COCKPIT_", "GITEA_"))
        }
        return cli_main(cwd, *args, env=environment | env)

    return run


@pytest.mark.anyio
async def test_an_unconfigured_backend_offers_no_tools_and_says_which_variable_to_set(tmp_path):
    gw = make_gateway(plugins=PLUGINS, env=dict(COCKPIT), cwd=tmp_path)
    async with gw, gateway_client(gw) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        called = await client.call_tool("get_job_diff", DIFF_ARGS)
        status_call = await client.call_tool("gateway_status", {"check_health": False})
        status = json.loads(status_call.content[0].text)
    assert not listed & GITEA_TOOLS
    assert {"get_workspace_file", "get_citation_stats", "gateway_status"} <= listed
    # Called by name anyway: the reason and the variable, not "unknown tool".
    error = tool_error(called)
    assert error["code"] == "BACKEND_UNAVAILABLE" and error["retryable"] is False
    assert error["message"].startswith(f"Gitea is not configured: {SET_GITEA}")
    gitea = next(p for p in status["plugins"] if p["name"] == "gitea")
    assert gitea["state"] == "loaded" and gitea["visible_tool_count"] == 0
    [group] = gitea["not_offered"]
    assert set(group["tools"]) == GITEA_TOOLS and SET_GITEA in group["reason"]
    problems = [p for p in status["problems"] if "Gitea" in p]
    assert problems == [
        f"plugin gitea: 5 tool(s) not offered: Gitea is not configured: {SET_GITEA}"
    ]
    assert status["gateway"]["tool_count"] == len(listed)


def test_mcp_gateway_plugins_and_tools_say_the_same(tmp_path, cli):
    plugins = cli(tmp_path, "plugins", MCP_GATEWAY_PLUGINS="orchestrator,gitea", **COCKPIT)
    assert plugins.returncode == 0, plugins.stderr
    [row] = [line for line in plugins.stdout.splitlines() if line.startswith("gitea ")]
    assert f"5 tool(s) not offered: Gitea is not configured: {SET_GITEA}" in row
    listed = cli(tmp_path, "tools", "--json", MCP_GATEWAY_PLUGINS="orchestrator,gitea", **COCKPIT)
    names = {t["name"] for t in json.loads(listed.stdout)}
    assert "get_frozen_job" in names and not names & GITEA_TOOLS


@pytest.mark.anyio
async def test_offer_unconfigured_tools_lists_them_anyway(tmp_path, cli):
    (tmp_path / "gw.toml").write_text("[gateway]\noffer_unconfigured_tools = true\n")
    down = {"COCKPIT_API_URL": closed_port_url()}  # its health check is run: refused at once
    from_env = make_gateway(
        plugins=PLUGINS, env={**down, "MCP_GATEWAY_OFFER_UNCONFIGURED_TOOLS": "1"}, cwd=tmp_path
    )
    for gw in (from_env, make_gateway(plugins=PLUGINS, env=down, cwd=tmp_path)):
        async with gw, gateway_client(gw) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            error = tool_error(await client.call_tool("get_job_diff", DIFF_ARGS))
            status = json.loads((await client.call_tool("gateway_status", {})).content[0].text)
        offered = gw is from_env
        assert (listed >= GITEA_TOOLS) is offered and (not listed & GITEA_TOOLS) is not offered
        assert error["code"] == "BACKEND_UNAVAILABLE" and SET_GITEA in error["message"]
        gitea = next(p for p in status["plugins"] if p["name"] == "gitea")
        assert ("not_offered" in gitea) is not offered
        # Said once either way: by the plugin when not offered, by its health check when it is.
        assert len([p for p in status["problems"] if SET_GITEA in p]) == 1
    config = cli(tmp_path, "--config", "gw.toml", "tools", "--json", **COCKPIT)
    assert {t["name"] for t in json.loads(config.stdout)} >= GITEA_TOOLS
    warned = cli(tmp_path, "claude-config", "--json", MCP_GATEWAY_OFFER_UNCONFIGURED_TOOLS="1")
    assert all(
        "would answer BACKEND_UNAVAILABLE" in w for w in json.loads(warned.stdout)["warnings"]
    )


def test_instructions_and_prompts_follow_what_is_offered(tmp_path):
    gw = make_gateway(plugins=[*PLUGINS, "queue"], env=dict(COCKPIT), cwd=tmp_path)
    text = gw.instructions()
    assert f"- gitea, not offered: Gitea is not configured: {SET_GITEA}" in text
    assert "- gitea: " not in text and "- orchestrator: " in text
    bare = make_gateway(plugins=[*PLUGINS, "queue"], env={}, cwd=tmp_path)
    assert [p.name for p in bare.offered_prompts()] == ["triage_new_jobs"]
    assert "verify_citations" not in bare.instructions()
    assert "review_frozen_job(" not in bare.instructions()
    everything = make_gateway(
        plugins=[*PLUGINS, "queue"], env=dict(COCKPIT), cwd=tmp_path, offer_unconfigured_tools=True
    )
    assert "not offered" not in everything.instructions()


@pytest.mark.anyio
async def test_a_gitea_that_is_down_names_get_workspace_file_only_where_it_is_offered(tmp_path):
    down = {**COCKPIT, "GITEA_URL": closed_port_url()}
    with_orchestrator = make_gateway(plugins=PLUGINS, env=down, cwd=tmp_path, breaker_failures=2)
    alone = make_gateway(plugins=["gitea"], env=down, cwd=tmp_path)
    hidden = make_gateway(
        plugins=PLUGINS, env=down, cwd=tmp_path, deny_tools=["get_workspace_file"]
    )
    meanwhile = "meanwhile get_workspace_file (orchestrator) reads a job's files as they are now"
    async with with_orchestrator as gw:
        refused = await gw.call("get_job_diff", DIFF_ARGS)
        await gw.call("get_job_diff", DIFF_ARGS)  # the second failure in a row opens the breaker
        paused = await gw.call("list_job_tags", {"job_id": ids.JOB_PENDING_REVIEW})
    for result in (refused, paused):
        assert result.code == "BACKEND_UNAVAILABLE" and meanwhile in result.text(), result.text()
    assert "calls are paused" in paused.text()  # the breaker opened: that error names it too
    for gw in (alone, hidden):
        async with gw:
            result = await gw.call("get_job_diff", DIFF_ARGS)
        assert result.code == "BACKEND_UNAVAILABLE" and "get_workspace_file" not in result.text()


@pytest.mark.anyio
async def test_an_unexpanded_reference_counts_as_unset_and_is_never_sent(tmp_path):
    with FakeOrchestrator() as api:
        env = {
            "COCKPIT_API_URL": api.url,
            "COCKPIT_API_TOKEN": "${COCKPIT_API_TOKEN}",
            "MCP_GATEWAY_READ_ONLY": "${READ_ONLY}",  # not a config error: unset
            "UNRELATED": "${NOT_READ_BY_THE_GATEWAY}",
        }
        gw = make_gateway(plugins=PLUGINS, env=env, cwd=tmp_path)
        async with gw:
            stats = await gw.call("get_job_stats", {})
            status = (await gw.call("gateway_status", {"check_health": False})).payload
    assert not stats.is_error and not gw.config.read_only
    assert api.requests and all("authorization" not in r.headers for r in api.requests)
    unexpanded = [p for p in status["problems"] if "holds ${" in p]
    assert len(unexpanded) == 2 and not any("UNRELATED" in p for p in unexpanded)
    [token] = [p for p in unexpanded if p.startswith("COCKPIT_API_TOKEN")]
    assert "COCKPIT_API_TOKEN holds ${COCKPIT_API_TOKEN}" in token
    assert "counts as unset: export COCKPIT_API_TOKEN" in token


@pytest.mark.anyio
async def test_an_unexpanded_url_leaves_the_plugin_loaded_and_names_the_variable(tmp_path):
    gw = make_gateway(
        plugins=PLUGINS,
        env={"COCKPIT_API_URL": "${COCKPIT_API_URL}", "GITEA_URL": "${GITEA}"},
        cwd=tmp_path,
    )
    assert all(gw.plugin(name).state.value == "loaded" for name in PLUGINS)
    assert {t.name for t in gw.visible_tools()} == {"gateway_status"}
    async with gw:
        result = await gw.call("get_job_stats", {})
        status = (await gw.call("gateway_status", {"check_health": False})).payload
    message = result.payload["error"]["message"]
    assert message.startswith("the orchestrator API is not configured: COCKPIT_API_URL holds ")
    assert "export COCKPIT_API_URL before starting the client" in message
    # Each variable named once: in the reason its plugin's tools are not offered.
    assert len([p for p in status["problems"] if "GITEA_URL holds ${GITEA}" in p]) == 1
    assert len([p for p in status["problems"] if "COCKPIT_API_URL holds" in p]) == 2  # 2 plugins
