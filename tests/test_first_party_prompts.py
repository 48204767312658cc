"""The first-party workflows: every tool a rendered prompt names is offered by the same
deployment, for every combination of installed plugins, read_only and configured backends;
served over stdio."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from conftest import gateway_env
from mcp import Client, MCPError, StdioServerParameters

from gateway.instructions import MAX_INSTRUCTIONS_CHARS
from gateway.prompts import mentioned_tools
from gateway.testing import make_gateway

PLUGINS = ("orchestrator", "gitea", "citations", "queue", "scrape")
JOB = "d2cf2e9a-cc1f-4422-b782-c51acec41000"
SAMPLE_ARGS = {
    "review_frozen_job": {"job_id": JOB},
    "verify_citations": {"job_id": JOB},
    "system_health_check": {},
    "create_job_guided": {"description": "Summarise the new invoice archiving rules"},
    "triage_new_jobs": {"batch_size": "20"},
}
#: Configured backends (never contacted: listing and rendering do no I/O).
COCKPIT = {"COCKPIT_API_URL": "http://127.0.0.1:9"}
GITEA = {"GITEA_URL": "http://127.0.0.1:9"}
BOTH = COCKPIT | GITEA
MUTATIONS = {
    "approve_job",
    "resume_job_with_feedback",
    "assign_job",
    "create_job",
    "bulk_update_job_status",
    "scrape_jobs",
}


def _every_tool(tmp_path) -> set[str]:
    gw = make_gateway(plugins=list(PLUGINS), env={}, cwd=tmp_path)
    return {t.name for t in gw.registry.all()}


def _deployments() -> Iterator[tuple[tuple[str, ...], dict[str, str], dict[str, Any]]]:
    """Every combination of plugins, read-only or not, with both backends configured; every
    plugin with fewer backends configured; and with a tool some workflow names denied."""
    for size in range(1, len(PLUGINS) + 1):
        for combo in itertools.combinations(PLUGINS, size):
            for read_only in (False, True):
                yield combo, BOTH, {"read_only": read_only}
    for env in (COCKPIT, GITEA, {}):
        for read_only in (False, True):
            yield PLUGINS, env, {"read_only": read_only}
    for tool in ("search_job_sources", "get_todos", "list_datasources", "get_workspace_file"):
        yield PLUGINS, COCKPIT, {"deny_tools": [tool]}


def test_every_prompt_names_only_tools_its_deployment_offers(tmp_path):
    known = _every_tool(tmp_path)
    rendered = 0
    for combo, env, settings in _deployments():
        gw = make_gateway(plugins=list(combo), env=env, cwd=tmp_path, **settings)
        offered = {t.name for t in gw.visible_tools()}
        assert len(gw.instructions()) <= MAX_INSTRUCTIONS_CHARS
        for prompt in gw.offered_prompts():
            text = anyio.run(gw.get_prompt, prompt.name, SAMPLE_ARGS[prompt.name])
            named = mentioned_tools(text, known)
            where = f"{prompt.name} with {combo}, {sorted(env)}, {settings}"
            assert named, where
            assert named <= offered, f"{where} names {sorted(named - offered)}"
            if settings.get("read_only"):
                assert not named & MUTATIONS, where
            rendered += 1
    assert rendered > 50


def test_the_review_reads_workspace_files_when_there_is_no_git_history(tmp_path):
    with_gitea = make_gateway(plugins=["orchestrator", "gitea"], env=BOTH, cwd=tmp_path)
    without = make_gateway(plugins=["orchestrator"], env=COCKPIT, cwd=tmp_path)
    read_only = make_gateway(plugins=["orchestrator"], env=COCKPIT, cwd=tmp_path, read_only=True)
    # Installed but not configured is no git history either: its tools are not offered.
    unset = make_gateway(plugins=["orchestrator", "gitea"], env=COCKPIT, cwd=tmp_path)
    args = SAMPLE_ARGS["review_frozen_job"]
    a = anyio.run(with_gitea.get_prompt, "review_frozen_job", args)
    b = anyio.run(without.get_prompt, "review_frozen_job", args)
    c = anyio.run(read_only.get_prompt, "review_frozen_job", args)
    assert "get_job_diff" in a and "get_workspace_file" not in a
    assert "get_workspace_file" in b and "get_job_diff" not in b
    assert anyio.run(unset.get_prompt, "review_frozen_job", args) == b
    assert "approve_job" in a and "resume_job_with_feedback" in a
    assert "approve_job" not in c and "do not act" in c


def test_verify_citations_ends_with_the_orchestrator_decision_only_when_installed(tmp_path):
    args = SAMPLE_ARGS["verify_citations"]
    alone = make_gateway(plugins=["citations"], env=COCKPIT, cwd=tmp_path)
    both = make_gateway(plugins=["citations", "orchestrator"], env=COCKPIT, cwd=tmp_path)
    assert "resume_job_with_feedback" not in anyio.run(alone.get_prompt, "verify_citations", args)
    assert "resume_job_with_feedback" in anyio.run(both.get_prompt, "verify_citations", args)


@pytest.mark.parametrize("client", [None, "claude-code"])
def test_the_job_creation_workflow_points_at_the_task_where_it_stands(tmp_path, client):
    gw = make_gateway(plugins=["orchestrator"], env=COCKPIT, cwd=tmp_path)
    text = anyio.run(
        lambda: gw.get_prompt("create_job_guided", SAMPLE_ARGS["create_job_guided"], client=client)
    )
    # The task (or, for Claude Code, the pointer to the command's words) comes first, then the
    # steps: a step that looks for it further down finds nothing.
    task, steps = text.split("\n\n1. ", 1)
    assert task.startswith("Create an orchestrator job for this task:")
    assert "below" not in steps
    assert "fits the task above" in steps


def test_instructions_with_every_first_party_plugin_say_how_ids_relate(tmp_path):
    text = make_gateway(plugins=list(PLUGINS), env=BOTH, cwd=tmp_path).instructions()
    assert len(text) <= MAX_INSTRUCTIONS_CHARS
    for name in PLUGINS:
        assert f"- {name}: " in text
    assert "job_id is the orchestrator's job UUID" in text  # gitea, citations
    assert "job-board id" in text  # the queue's job_id is another kind of id
    for prompt in SAMPLE_ARGS:
        assert f"{prompt}(" in text


@pytest.mark.e2e
@pytest.mark.anyio
async def test_prompts_list_and_get_over_stdio_with_the_official_client(tmp_path):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "serve"],
        cwd=str(tmp_path),
        env=gateway_env(MCP_GATEWAY_PLUGINS="orchestrator,gitea,citations,queue", **BOTH),
    )
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            listed = {p.name: p for p in (await client.list_prompts()).prompts}
            got = await client.get_prompt("review_frozen_job", {"job_id": JOB})
            with pytest.raises(MCPError) as bad:
                await client.get_prompt("review_frozen_job", {"job_id": "42"})
            instructions = client.instructions
    assert {"review_frozen_job", "verify_citations", "triage_new_jobs"} <= set(listed)
    assert [a.name for a in listed["review_frozen_job"].arguments] == ["job_id"]
    assert "get_job_diff" in got.messages[0].content.text
    assert "job_id" in str(bad.value)
    assert instructions and "review_frozen_job(job_id)" in instructions
