"""Claude Code out of the box: what ``claude-config`` prints, pasted as is, in the real client.

The unit tests check what ``claude-config`` prints. The end-to-end tests install the real
Claude Code with npm (``claude_code.client``), paste ``claude-config --mcp-json`` and
``--settings`` into a throw-away project, and run ``claude -p`` there against a stand-in
Messages API that plays the model (``claude_code.model``) and the fake orchestrator, a real
HTTP server. Only the orchestrator URL is exported when ``claude-config`` runs, and Claude
Code itself runs without it: the pasted entry has to carry the deployment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_code.client import Project, Result, installed
from claude_code.model import Call, Say, StandInModel
from conftest import gateway_env

from gateway.prompts import PromptSpec, build_prompt
from gateway.testing import make_gateway

APPROVER = Path(__file__).resolve().parent / "claude_code" / "approver.py"
GATEWAY = "mcp__gateway__"
TASK = "Summarize the GoBD retention rules"


def deployment_env(**extra: str) -> dict[str, str]:
    """This environment without any backend setting or extra plugin site, plus ``extra``."""
    env = {
        k: v
        for k, v in gateway_env().items()
        if not k.startswith(("COCKPIT_", "GITEA_")) and k != "PYTHONPATH"
    }
    return env | extra


def claude_config(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "claude-config", *args],
        cwd=cwd,
        env=deployment_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


# What claude-config prints.


def test_claude_config_copies_the_set_plugin_settings_and_references_secrets(tmp_path):
    env = {
        "COCKPIT_API_URL": "http://127.0.0.1:8085",
        "COCKPIT_API_TOKEN": "tok-never-printed-1",
        "GITEA_URL": "http://bot:pw-never-printed-2@127.0.0.1:3000",
        "GITEA_OWNER": "acme",
        "MCP_GATEWAY_PLUGINS": "orchestrator,citations,gitea",
    }
    r = claude_config(tmp_path, "--json", **env)
    assert r.returncode == 0, r.stderr
    assert "never-printed" not in r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["mcp_json"]["mcpServers"]["gateway"]["env"] == {
        "COCKPIT_API_TOKEN": "${COCKPIT_API_TOKEN}",
        "COCKPIT_API_URL": "http://127.0.0.1:8085",
        "GITEA_OWNER": "acme",
        "GITEA_URL": "${GITEA_URL}",  # a password inside a URL is a secret too
        "MCP_GATEWAY_PLUGINS": "orchestrator,citations,gitea",
    }
    assert out["warnings"] == []
    add = claude_config(tmp_path, "--add", **env).stdout
    assert "-e 'COCKPIT_API_TOKEN=${COCKPIT_API_TOKEN}'" in add and "never-printed" not in add


def test_claude_config_warns_about_each_plugin_whose_backend_is_unset(tmp_path):
    r = claude_config(tmp_path, "--mcp-json", MCP_GATEWAY_PLUGINS="orchestrator,citations,gitea")
    assert r.returncode == 0
    assert json.loads(r.stdout)["mcpServers"]["gateway"]["env"] == {
        "MCP_GATEWAY_PLUGINS": "orchestrator,citations,gitea"
    }
    warnings = [line for line in r.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 3, r.stderr
    for plugin, variable in [
        ("citations", "COCKPIT_API_URL"),
        ("gitea", "GITEA_URL"),
        ("orchestrator", "COCKPIT_API_URL"),
    ]:
        [line] = [w for w in warnings if f"plugin {plugin!r}" in w]
        assert f"set {variable}" in line and "BACKEND_UNAVAILABLE" in line
    quiet = claude_config(
        tmp_path, "--json", MCP_GATEWAY_PLUGINS="orchestrator", COCKPIT_API_URL="http://h:1"
    )
    assert json.loads(quiet.stdout)["warnings"] == []


def test_a_free_text_argument_points_claude_code_at_the_whole_command_text(tmp_path):
    gw = make_gateway(
        plugins=["orchestrator"], env={"COCKPIT_API_URL": "http://127.0.0.1:9"}, cwd=tmp_path
    )

    async def render(client: str | None) -> str:
        return await gw.get_prompt("create_job_guided", {"description": TASK}, client=client)

    import anyio

    whole = anyio.run(render, None)
    assert f"task:\n\n{TASK}\n\n" in whole  # other clients send the argument whole
    split = anyio.run(render, "claude-code")
    assert TASK not in split and "<command-args>" in split and "in full" in split
    assert split.split("\n\n", 2)[2] == whole.split("\n\n", 2)[2]  # the same steps


def test_free_text_must_be_the_last_argument():
    from pydantic import BaseModel, ConfigDict

    class Args(BaseModel):
        model_config = ConfigDict(extra="forbid")
        text: str
        limit: int = 5

    spec = PromptSpec("p", "A prompt.", Args, lambda a, c: "x", free_text="text")
    with pytest.raises(ValueError, match="free_text 'text' must name the last argument"):
        build_prompt(spec, None)  # type: ignore[arg-type]


# The real Claude Code.


@pytest.fixture(scope="module")
def claude() -> Iterator[Path]:
    with installed() as (binary, detail):
        if binary is None:
            pytest.skip(f"Claude Code is not available: {detail}")
        sys.stderr.write(f"\nClaude Code {detail}\n")
        yield binary


@pytest.fixture(scope="module")
def orchestrator() -> Iterator[Any]:
    from gateway_orchestrator_testing import FakeOrchestrator

    with FakeOrchestrator() as api:
        yield api


@pytest.fixture(scope="module")
def model() -> Iterator[StandInModel]:
    with StandInModel() as stand_in:
        yield stand_in


def pasted_project(
    root: Path, claude: Path, model: StandInModel, orchestrator: Any, **env: str
) -> Project:
    """A project with ``.mcp.json`` and ``.claude/settings.json`` exactly as printed by
    ``claude-config``, run with only the orchestrator URL (and ``env``) exported."""
    project = Project(root, claude, model.url)
    exported = {"COCKPIT_API_URL": orchestrator.url, **env}
    for flag, target in (("--mcp-json", ".mcp.json"), ("--settings", ".claude/settings.json")):
        printed = claude_config(project.dir, flag, **exported)
        assert printed.returncode == 0, printed.stderr
        project.write(target, printed.stdout)
    return project


@pytest.fixture(scope="module")
def project(tmp_path_factory, claude, model, orchestrator) -> Project:
    project = pasted_project(tmp_path_factory.mktemp("claude"), claude, model, orchestrator)
    project.trust()
    return project


def approver_args(project: Project) -> list[str]:
    config = {
        "mcpServers": {
            "approver": {
                "command": sys.executable,
                "args": [str(APPROVER)],
                "env": {"APPROVER_LOG": str(project.root / "approvals.jsonl")},
            }
        }
    }
    path = project.write("approver.json", config)
    return ["--mcp-config", str(path), "--permission-prompt-tool", "mcp__approver__approve"]


def approvals(project: Project) -> list[str]:
    log = project.root / "approvals.jsonl"
    return [json.loads(line)["tool_name"] for line in log.read_text().splitlines()]


def play(project: Project, model: StandInModel, steps: list[Any], *args: str) -> Result:
    model.reset([*steps, Say("done")])
    result = project.run("Go ahead.", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.server_status("gateway") == "connected", result.init
    return result


def results(result: Result) -> dict[str, tuple[str, bool]]:
    return {
        name.removeprefix(GATEWAY): (text, error) for name, text, error in result.tool_results()
    }


def denied(result: Result) -> set[str]:
    return {d["tool_name"].removeprefix(GATEWAY) for d in result.final["permission_denials"]}


@pytest.mark.e2e
def test_the_pasted_config_connects_and_a_read_tool_runs_without_a_prompt(project, model):
    result = play(project, model, [Call(GATEWAY + "get_job_stats")])
    assert "COCKPIT_API_URL" not in project.environment()  # the entry carries it
    first = model.turns()[0]
    # Claude Code defers MCP tools behind its ToolSearch tool: the model sees their names in
    # a list, the schemas once it searches; the server instructions come along.
    deferred = {line for line in first.text().splitlines() if line.startswith(GATEWAY)}
    assert GATEWAY + "get_job_stats" in deferred and len(deferred) == 47
    assert "Tools come from plugins" in first.text()
    text, error = results(result)["get_job_stats"]
    assert not error and json.loads(text)["total_jobs"] >= 12
    assert denied(result) == set()


@pytest.mark.e2e
def test_an_untrusted_project_ignores_the_allow_rules_as_the_notes_say(
    tmp_path, claude, model, orchestrator
):
    untrusted = pasted_project(tmp_path, claude, model, orchestrator)
    result = play(untrusted, model, [Call(GATEWAY + "get_job_stats")])
    assert denied(result) == {"get_job_stats"}
    assert "has not been trusted" in result.stderr


@pytest.mark.e2e
def test_mutations_run_headless_exactly_when_an_approver_allows_them(project, model, orchestrator):
    from gateway_orchestrator_testing.seed import JOB_POSTMORTEM, JOB_SCRATCH

    jobs = len(orchestrator.state.jobs)
    create = Call(GATEWAY + "create_job", {"description": TASK, "config_name": "researcher"})
    cancel = Call(GATEWAY + "cancel_job", {"job_id": JOB_SCRATCH})
    refused = play(project, model, [create, cancel])
    assert denied(refused) == {"create_job", "cancel_job"}
    assert len(orchestrator.state.jobs) == jobs
    assert orchestrator.state.jobs[JOB_SCRATCH].status == "created"

    allowed = play(project, model, [create, cancel], *approver_args(project))
    assert approvals(project) == [GATEWAY + "create_job", GATEWAY + "cancel_job"]
    assert denied(allowed) == set()
    out = results(allowed)
    assert not out["create_job"][1] and json.loads(out["create_job"][0])["status"] == "created"
    assert not out["cancel_job"][1] and orchestrator.state.jobs[JOB_SCRATCH].status == "cancelled"
    assert len(orchestrator.state.jobs) == jobs + 1

    bypass = play(
        project,
        model,
        [Call(GATEWAY + "cancel_job", {"job_id": JOB_POSTMORTEM})],
        "--permission-mode",
        "bypassPermissions",
    )
    assert bypass.init["permissionMode"] == "bypassPermissions"
    assert denied(bypass) == {"cancel_job"}  # the ask rule holds in bypass mode too
    assert orchestrator.state.jobs[JOB_POSTMORTEM].status == "created"


@pytest.mark.e2e
def test_person_only_tools_are_refused_headless_even_with_an_approver(
    tmp_path, claude, model, orchestrator
):
    from gateway_orchestrator_testing.seed import JOB_CREATED

    project = pasted_project(
        tmp_path, claude, model, orchestrator, MCP_GATEWAY_CONFIRM_EACH_CALL="destructive"
    )
    project.trust()
    result = play(
        project,
        model,
        [Call(GATEWAY + "cancel_job", {"job_id": JOB_CREATED})],
        *approver_args(project),
    )
    text, error = results(result)["cancel_job"]
    assert error and "requires user interaction" in text
    assert orchestrator.state.jobs[JOB_CREATED].status == "created"


@pytest.mark.e2e
def test_a_multi_word_prompt_argument_reaches_the_model_whole(project, model):
    model.reset([Say("done")])
    result = project.run(f"/{GATEWAY}create_job_guided {TASK}")
    assert result.returncode == 0, result.stderr[-2000:]
    texts = model.user_texts()
    assert any(f"<command-args>{TASK}</command-args>" in t for t in texts), texts
    [rendered] = [t for t in texts if t.startswith("Create an orchestrator job")]
    assert "in full, as in <command-args> above" in rendered
    assert "list_experts()" in rendered and "\n\nSummarize\n\n" not in rendered
