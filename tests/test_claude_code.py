"""Claude Code out of the box: what ``claude-config`` prints, pasted as is, in the real client.

The unit tests check what ``claude-config`` prints. The end-to-end tests install the real
Claude Code with npm (``claude_code.client``), paste ``claude-config --mcp-json`` and
``--settings`` into a throw-away project, and run ``claude -p`` there against a stand-in
Messages API that plays the model (``claude_code.model``) and the fake orchestrator, a real
HTTP server. Only the orchestrator URL is exported when ``claude-config`` runs, and Claude
Code itself runs without it: the pasted entry has to carry the deployment.

Tests that run Claude Code the same way (project, approver, permission mode) send their
prompts to one running ``claude -p`` (a stream-json session, as the Agent SDK drives it):
each prompt is a turn of its own with its own script, against the same gateway process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_code.client import Project, Result, Session, installed
from claude_code.model import Call, Say, StandInModel
from conftest import gateway_env

from gateway.claude import ClaudeConfig
from gateway.claude import claude_config as build_claude_config
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
    """``mcp-gateway claude-config`` run as a user runs it, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "claude-config", *args],
        cwd=cwd,
        env=deployment_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def computed_config(cwd: Path, **env: str) -> ClaudeConfig:
    """What ``claude-config`` prints, computed in this process (for checks of the printed
    text; the command itself runs in the tests that check its exit code and streams)."""
    gw = make_gateway(env=deployment_env(**env), cwd=cwd)
    return build_claude_config(gw, gw.config.server_name)


# What claude-config prints.


#: The plugins in process (this project's, by default), or each in a worker of its own: the
#: entry is the same.
PLACES = [{}, {"MCP_GATEWAY_ISOLATE": "all"}]


@pytest.mark.parametrize("place", PLACES, ids=["in-process", "in-workers"])
def test_claude_config_copies_the_set_plugin_settings_and_references_secrets(tmp_path, place):
    env = {
        "COCKPIT_API_URL": "http://127.0.0.1:8085",
        "COCKPIT_API_TOKEN": "tok-never-printed-1",
        "GITEA_URL": "http://bot:pw-never-printed-2@127.0.0.1:3000",
        "GITEA_OWNER": "acme",
        "MCP_GATEWAY_PLUGINS": "orchestrator,citations,gitea",
        **place,
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
        **place,
    }
    assert out["warnings"] == []
    if not place:
        add = computed_config(tmp_path, **env).add_command()
        assert "-e 'COCKPIT_API_TOKEN=${COCKPIT_API_TOKEN}'" in add and "never-printed" not in add


@pytest.mark.parametrize("place", PLACES, ids=["in-process", "in-workers"])
def test_claude_config_warns_about_each_plugin_whose_backend_is_unset(tmp_path, place):
    r = claude_config(
        tmp_path, "--mcp-json", MCP_GATEWAY_PLUGINS="orchestrator,citations,gitea", **place
    )
    assert r.returncode == 0
    assert json.loads(r.stdout)["mcpServers"]["gateway"]["env"] == {
        "MCP_GATEWAY_PLUGINS": "orchestrator,citations,gitea",
        **place,
    }
    warnings = [line for line in r.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 3, r.stderr
    for plugin, variable in [
        ("citations", "COCKPIT_API_URL"),
        ("gitea", "GITEA_URL"),
        ("orchestrator", "COCKPIT_API_URL"),
    ]:
        [line] = [w for w in warnings if f"plugin {plugin!r}" in w]
        assert f"set {variable}" in line and "tool(s) are not offered" in line
    quiet = computed_config(
        tmp_path, MCP_GATEWAY_PLUGINS="orchestrator", COCKPIT_API_URL="http://h:1"
    )
    assert quiet.as_dict()["warnings"] == []


def test_the_settings_cover_the_tools_a_variable_exported_later_adds(tmp_path):
    """Printed in a shell without COCKPIT_API_URL, exported later where Claude Code starts the
    gateway: its settings must already allow every read and ask for every mutation it then
    offers, or a headless run refuses each of them. The policy still applies."""
    deployment = {
        "MCP_GATEWAY_PLUGINS": "orchestrator,queue",
        "MCP_GATEWAY_DENY_TOOLS": "delete_job",
    }
    r = claude_config(tmp_path, "--settings", **deployment)
    assert r.returncode == 0, r.stderr
    permissions = json.loads(r.stdout)["permissions"]
    later = make_gateway(
        env=deployment_env(**deployment, COCKPIT_API_URL="http://127.0.0.1:9"), cwd=tmp_path
    )
    offered = later.offered_tools()
    assert len(offered) == 32  # gateway_status, the queue's 2, the orchestrator's 30 less one
    tiers = {"read": "allow", "mutation": "ask"}
    for tier, rule in tiers.items():
        names = sorted(GATEWAY + t.name for t in offered if t.tier.value == tier)
        assert permissions[rule] == names, rule
    assert GATEWAY + "delete_job" not in permissions["ask"]


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


@pytest.fixture
def fresh(orchestrator) -> Any:
    """The orchestrator back at the recorded scenario, for a test that changes its data or
    needs it as seeded: the data of a new one (not started: that takes no port)."""
    from gateway_orchestrator_testing import FakeOrchestrator

    orchestrator.state = FakeOrchestrator().state
    return orchestrator


@pytest.fixture(scope="module")
def model() -> Iterator[StandInModel]:
    with StandInModel() as stand_in:
        yield stand_in


#: What ``claude-config`` printed, per flag and exported environment: the same deployment
#: pasted into another project is the same text (it names no folder).
PRINTED: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}


def pasted_project(
    root: Path, claude: Path, model: StandInModel, orchestrator: Any, **env: str
) -> Project:
    """A project with ``.mcp.json`` and ``.claude/settings.json`` exactly as printed by
    ``claude-config``, run with only the orchestrator URL (and ``env``) exported. The gateways
    Claude Code starts keep their schema cache in the suite's one, as a user's gateways share
    the user's."""
    project = Project(root, claude, model.url, {"XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]})
    exported = {"COCKPIT_API_URL": orchestrator.url, **env}
    for flag, target in (("--mcp-json", ".mcp.json"), ("--settings", ".claude/settings.json")):
        key = (flag, tuple(sorted(exported.items())))
        if key not in PRINTED:
            printed = claude_config(project.dir, flag, **exported)
            assert printed.returncode == 0, printed.stderr
            PRINTED[key] = printed.stdout
        project.write(target, PRINTED[key])
    return project


@pytest.fixture(scope="module")
def project(tmp_path_factory, claude, model, orchestrator) -> Project:
    project = pasted_project(tmp_path_factory.mktemp("claude"), claude, model, orchestrator)
    project.trust()
    return project


@pytest.fixture(scope="module")
def headless(project) -> Iterator[Session]:
    """Claude Code in the pasted project as a script starts it: nobody to approve a call."""
    with project.session() as session:
        yield session


@pytest.fixture(scope="module")
def approving(project) -> Iterator[Session]:
    """Claude Code in the pasted project with a permission-prompt tool that approves."""
    with project.session(*approver_args(project)) as session:
        yield session


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, claude, model, orchestrator) -> Iterator[tuple[Project, Session]]:
    """A project pasted where the orchestrator token was set and every destructive call needs
    a person's confirmation, Claude Code in it with the approving permission-prompt tool."""
    project = pasted_project(
        tmp_path_factory.mktemp("guarded"),
        claude,
        model,
        orchestrator,
        COCKPIT_API_TOKEN="tok-only-in-the-shell",
        MCP_GATEWAY_CONFIRM_EACH_CALL="destructive",
    )
    project.trust()
    with project.session(*approver_args(project)) as session:
        yield project, session


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
    """The calls the approver was asked about during the project's latest prompt."""
    log = project.root / "approvals.jsonl"
    if not log.exists():
        return []
    return [json.loads(line)["tool_name"] for line in log.read_text().splitlines()]


def prompt(
    project: Project, text: str, *args: str, session: Session | None = None, timeout: float = 120
) -> Result:
    """``text`` as the next prompt of ``session``, else in a run of its own with ``args``."""
    (project.root / "approvals.jsonl").unlink(missing_ok=True)
    if session is None:
        result = project.run(text, *args, timeout=timeout)
    else:
        assert not args, "a session's arguments are fixed when it starts"
        result = session.send(text, timeout=timeout)
    # A session's prompt has no exit code of its own (None); its session's is checked at the end.
    assert result.returncode in (0, None), result.stderr[-2000:]
    assert not result.final["is_error"], result.final
    return result


def play(
    project: Project,
    model: StandInModel,
    steps: list[Any],
    *args: str,
    session: Session | None = None,
) -> Result:
    model.reset([*steps, Say("done")])
    result = prompt(project, "Go ahead.", *args, session=session)
    assert result.server_status("gateway") == "connected", result.init
    return result


def results(result: Result) -> dict[str, tuple[str, bool]]:
    return {
        name.removeprefix(GATEWAY): (text, error) for name, text, error in result.tool_results()
    }


def denied(result: Result) -> set[str]:
    return {d["tool_name"].removeprefix(GATEWAY) for d in result.final["permission_denials"]}


@pytest.mark.e2e
def test_the_pasted_config_connects_and_a_read_tool_runs_without_a_prompt(project, headless, model):
    result = play(project, model, [Call(GATEWAY + "get_job_stats")], session=headless)
    assert "COCKPIT_API_URL" not in project.environment()  # the entry carries it
    first = model.turns()[0]
    # Claude Code defers MCP tools behind its ToolSearch tool: the model sees their names in
    # a list, the schemas once it searches; the server instructions come along.
    deferred = {line for line in first.text().splitlines() if line.startswith(GATEWAY)}
    # 47 tools installed; Gitea's five are not offered: only the orchestrator URL is set.
    assert GATEWAY + "get_job_stats" in deferred and len(deferred) == 42
    assert GATEWAY + "get_job_diff" not in deferred
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
def test_mutations_run_headless_exactly_when_an_approver_allows_them(
    project, headless, approving, model, fresh
):
    from gateway_orchestrator_testing.seed import JOB_POSTMORTEM, JOB_SCRATCH

    orchestrator = fresh
    jobs = len(orchestrator.state.jobs)
    create = Call(GATEWAY + "create_job", {"description": TASK, "config_name": "researcher"})
    cancel = Call(GATEWAY + "cancel_job", {"job_id": JOB_SCRATCH})
    refused = play(project, model, [create, cancel], session=headless)
    assert denied(refused) == {"create_job", "cancel_job"}
    assert len(orchestrator.state.jobs) == jobs
    assert orchestrator.state.jobs[JOB_SCRATCH].status == "created"

    allowed = play(project, model, [create, cancel], session=approving)
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
def test_person_only_tools_are_refused_headless_even_with_an_approver(guarded, model, fresh):
    from gateway_orchestrator_testing.seed import JOB_CREATED

    # The project's entry sets MCP_GATEWAY_CONFIRM_EACH_CALL=destructive.
    project, session = guarded
    assert "MCP_GATEWAY_CONFIRM_EACH_CALL" in (project.dir / ".mcp.json").read_text()
    result = play(
        project, model, [Call(GATEWAY + "cancel_job", {"job_id": JOB_CREATED})], session=session
    )
    text, error = results(result)["cancel_job"]
    assert error and "requires user interaction" in text
    assert fresh.state.jobs[JOB_CREATED].status == "created"


@pytest.mark.e2e
def test_a_multi_word_prompt_argument_reaches_the_model_whole(project, headless, model):
    model.reset([Say("done")])
    prompt(project, f"/{GATEWAY}create_job_guided {TASK}", session=headless)
    texts = model.user_texts()
    assert any(f"<command-args>{TASK}</command-args>" in t for t in texts), texts
    [rendered] = [t for t in texts if t.startswith("Create an orchestrator job")]
    assert "in full, as in <command-args> above" in rendered
    assert "list_experts()" in rendered and "\n\nSummarize\n\n" not in rendered


@pytest.mark.e2e
def test_a_secret_reference_claude_code_cannot_expand_is_never_sent(guarded, model, orchestrator):
    # claude-config ran where the token was set: the entry holds ${COCKPIT_API_TOKEN}, which
    # Claude Code, started without it, passes on as it is.
    project, session = guarded
    assert "${COCKPIT_API_TOKEN}" in (project.dir / ".mcp.json").read_text()
    assert "COCKPIT_API_TOKEN" not in project.environment()
    sent = len(orchestrator.requests)
    result = play(
        project,
        model,
        [
            Call(GATEWAY + "get_job_stats"),
            Call(GATEWAY + "gateway_status", {"check_health": False}),
        ],
        session=session,
    )
    out = results(result)
    assert not out["get_job_stats"][1]
    assert not any("authorization" in r.headers for r in orchestrator.requests[sent:])
    problems = json.loads(out["gateway_status"][0])["problems"]
    assert any(p.startswith("COCKPIT_API_TOKEN holds ${COCKPIT_API_TOKEN}") for p in problems)


# The four workflows of the orchestrator design, end to end: each starts as the slash command
# of its prompt; the stand-in model makes the calls the rendered prompt asks for, in its order
# (picking ids out of earlier results where the prompt says "<...>"), mutations included, with
# an approver as in a headless run. Each starts from the recorded scenario (``fresh``).


def workflow(
    project: Project, session: Session, model: StandInModel, command: str, steps: list[Call]
) -> tuple[Result, str, dict[str, list[tuple[str, bool]]]]:
    """Send ``/mcp__gateway__<command>`` to ``session`` (which has an approver), the model
    playing ``steps``. Returns Claude Code's answer, the prompt it rendered, and every result
    per tool (text, is_error)."""
    from gateway.prompts import mentioned_tools

    model.reset([*steps, Say("done")])
    result = prompt(project, f"/{GATEWAY}{command}", session=session, timeout=240)
    assert result.server_status("gateway") == "connected", result.init
    assert "stand-in script failed" not in result.final.get("result", ""), result.final
    # The user's message: <command-name>/<command-args>, then the rendered prompt.
    [rendered] = [t for t in model.user_texts() if "\n1. " in t and not t.startswith("<")]
    # The script is the prompt's: every tool it calls is named there, in the same order.
    tools = list(dict.fromkeys(s.tool.removeprefix(GATEWAY) for s in steps))
    assert mentioned_tools(rendered, tools) == set(tools), rendered
    assert sorted(tools, key=rendered.index) == tools, rendered
    calls: dict[str, list[tuple[str, bool]]] = {}
    for name, text, error in result.tool_results():
        calls.setdefault(name.removeprefix(GATEWAY), []).append((text, error))
    assert [n for n in calls] == tools, calls.keys()
    mutations = [s.tool for s in steps if s.tool.removeprefix(GATEWAY) in MUTATIONS]
    assert approvals(project) == mutations and denied(result) == set()
    return result, rendered, calls


MUTATIONS = {"approve_job", "resume_job_with_feedback", "assign_job", "create_job"}


def ok(calls: dict[str, list[tuple[str, bool]]], tool: str, index: int = -1) -> Any:
    text, error = calls[tool][index]
    assert not error, f"{tool}: {text}"
    return json.loads(text)


def freshest_ready_agent(seen: Any) -> str:
    """A model's pick among list_agents(status="ready"): the latest heartbeat."""
    agents = seen.last(GATEWAY + "list_agents")["agents"]
    return str(max(agents, key=lambda a: a["last_heartbeat"])["id"])


@pytest.mark.e2e
def test_workflow_frozen_review_reads_the_job_and_approves_it(project, approving, fresh, model):
    from gateway_orchestrator_testing.seed import JOB_PENDING_REVIEW as JOB

    api = fresh
    job = {"job_id": JOB}
    _, rendered, calls = workflow(
        project,
        approving,
        model,
        f"review_frozen_job {JOB}",
        [
            Call(GATEWAY + "get_frozen_job", job),
            Call(GATEWAY + "get_workspace_file", {**job, "path": "workspace.md"}),
            Call(GATEWAY + "get_workspace_file", {**job, "path": "plan.md"}),
            Call(GATEWAY + "get_todos", job),
            Call(GATEWAY + "approve_job", job),
        ],
    )
    # Gitea is installed but not configured: the review reads the workspace, not git history.
    assert "get_job_diff" not in rendered and "list_job_tags" not in rendered
    assert ok(calls, "get_frozen_job")["confidence"] == 0.85
    assert "frozen for review" in ok(calls, "get_workspace_file", 0)["content"]
    assert "Summarise audit-trail requirements" in ok(calls, "get_workspace_file", 1)["content"]
    assert ok(calls, "approve_job")["status"] == "approved"
    assert api.state.jobs[JOB].status == "completed"
    assert f"job_{JOB}/output/job_completion.json" in api.state.files


@pytest.mark.e2e
def test_workflow_health_check_finds_stuck_jobs_and_puts_an_idle_agent_to_work(
    project, approving, fresh, model
):
    from gateway_orchestrator_testing.seed import AGENT_READY, JOB_STUCK_CREATOR

    api = fresh

    def assign(seen: Any) -> dict[str, Any]:
        waiting = seen.last(GATEWAY + "list_jobs")["jobs"]
        return {"job_id": waiting[0]["id"], "agent_id": freshest_ready_agent(seen)}

    _, _, calls = workflow(
        project,
        approving,
        model,
        "system_health_check",
        [
            Call(GATEWAY + "get_job_stats"),
            Call(GATEWAY + "get_stuck_jobs"),
            Call(GATEWAY + "list_agents", {"status": "ready"}),
            Call(GATEWAY + "list_jobs", {"status": "created"}),
            Call(GATEWAY + "assign_job", assign),
        ],
    )
    assert ok(calls, "get_job_stats")["total_jobs"] == 12
    assert JOB_STUCK_CREATOR in {j["id"] for j in ok(calls, "get_stuck_jobs")["jobs"]}
    picked = ok(calls, "list_jobs")["jobs"][0]["id"]
    assert ok(calls, "assign_job")["agent_id"] == AGENT_READY
    assert api.state.jobs[picked].status == "processing"
    assert api.state.jobs[picked].assigned_agent_id == AGENT_READY
    assert api.state.agents[AGENT_READY].current_job_id == picked


@pytest.mark.e2e
def test_workflow_citation_verification_sends_the_job_back_with_feedback(
    project, approving, fresh, model
):
    from gateway_orchestrator_testing.seed import AGENT_WORKING
    from gateway_orchestrator_testing.seed import JOB_PROCESSING as JOB

    api = fresh
    # The agent has finished its phases: the job waits for review, the agent is idle.
    api.state.freeze_job(JOB, summary="Sources collected and cited.")
    api.state.agents[AGENT_WORKING].status = "completed"
    api.state.agents[AGENT_WORKING].current_job_id = None
    job = {"job_id": JOB}

    def failed(seen: Any) -> dict[str, Any]:
        return {"citation_id": seen.last(GATEWAY + "list_job_citations")["citations"][0]["id"]}

    def its_source(seen: Any) -> dict[str, Any]:
        return {"source_id": seen.last(GATEWAY + "get_citation_detail")["source_id"]}

    def feedback(seen: Any) -> dict[str, Any]:
        detail = seen.last(GATEWAY + "get_citation_detail")
        note = f"Citation {detail['id']}: {detail['verification_notes']} Re-check it."
        return {**job, "feedback": note}

    _, _, calls = workflow(
        project,
        approving,
        model,
        f"verify_citations {JOB}",
        [
            Call(GATEWAY + "get_citation_stats", job),
            Call(GATEWAY + "list_job_citations", {**job, "verification_status": "failed"}),
            Call(GATEWAY + "get_citation_detail", failed),
            Call(GATEWAY + "get_source_detail", its_source),
            Call(GATEWAY + "search_job_sources", {**job, "query": "Structured invoice format"}),
            Call(GATEWAY + "get_source_annotations", lambda seen: {**job, **its_source(seen)}),
            Call(GATEWAY + "resume_job_with_feedback", feedback),
        ],
    )
    assert ok(calls, "get_citation_stats")["citations_by_verification_status"]["failed"] == 1
    assert ok(calls, "get_citation_detail")["id"] == 5
    assert "REQ-ERECH-001" in ok(calls, "get_source_detail")["content"]
    [hit] = ok(calls, "search_job_sources")["results"]
    assert hit["source_id"] == 3 and "**Structured** **invoice** **format**" in hit["snippet"]
    assert ok(calls, "resume_job_with_feedback")["status"] == "resumed"
    assert api.state.jobs[JOB].status == "processing"
    [resume] = [c for c in api.state.agent_calls if c.action == "resume"]
    assert resume.payload["feedback"].startswith("Citation 5: The snapshot lists two")


@pytest.mark.e2e
def test_workflow_job_creation_creates_the_described_job_and_starts_it(
    project, approving, fresh, model
):
    from gateway_orchestrator_testing.seed import AGENT_READY, DS_POSTGRES

    api = fresh
    jobs = set(api.state.jobs)

    def create(seen: Any) -> dict[str, Any]:
        # The task is the user's words after the command, as Claude Code shows them.
        task = seen.text.split("<command-args>", 1)[1].split("</command-args>", 1)[0]
        return {"description": task, "config_name": "researcher", "datasource_ids": [DS_POSTGRES]}

    def assign(seen: Any) -> dict[str, Any]:
        return {
            "job_id": seen.last(GATEWAY + "create_job")["id"],
            "agent_id": freshest_ready_agent(seen),
        }

    _, _, calls = workflow(
        project,
        approving,
        model,
        f"create_job_guided {TASK}",
        [
            Call(GATEWAY + "list_experts"),
            Call(GATEWAY + "get_expert", {"expert_id": "researcher"}),
            Call(GATEWAY + "list_datasources", {"type": "postgresql"}),
            Call(GATEWAY + "create_job", create),
            Call(GATEWAY + "list_agents", {"status": "ready"}),
            Call(GATEWAY + "assign_job", assign),
        ],
    )
    assert "researcher" in {e["id"] for e in ok(calls, "list_experts")["experts"]}
    assert DS_POSTGRES in {d["id"] for d in ok(calls, "list_datasources")["datasources"]}
    [new] = set(api.state.jobs) - jobs
    created = api.state.jobs[new]
    assert ok(calls, "create_job")["id"] == new
    assert (created.description, created.config_name) == (TASK, "researcher")
    assert any(d.job_id == new and d.type == "postgresql" for d in api.state.datasources.values())
    assert (created.status, created.assigned_agent_id) == ("processing", AGENT_READY)
