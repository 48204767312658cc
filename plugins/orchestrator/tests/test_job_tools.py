"""What the job tools add over the raw API, each against the stateful fake orchestrator (a
real HTTP server on 127.0.0.1): typed outputs, ids checked before any request, honest states
for the mutations, create_job's checks, list_jobs' real statuses and has_more, and unknown jobs
told apart from empty answers. Workspace paths and long texts: test_workspace_tools.py."""

from __future__ import annotations

import pytest
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from orch_http import send
from orch_kit import JOB_TOOLS, MUTATIONS, error, ok, orchestrator_gateway

from gateway.testing import gateway_client
from gateway.testing.backends import Reply

pytestmark = pytest.mark.anyio


# --- typed outputs -----------------------------------------------------------------------------


async def test_json_columns_come_back_as_objects_and_timestamps_in_utc(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        job = ok(await gw.call("get_job", {"job_id": ids.JOB_CREATED}))
        progress = ok(await gw.call("get_job_progress", {"job_id": ids.JOB_PROCESSING}))
        view = ok(await gw.call("get_workspace_overview", {"job_id": ids.JOB_PROCESSING}))
    assert job["config_override"] == {"llm": {"temperature": 0.1}}
    assert job["context"] == {
        "priority": "high",
        "department": "finance",
        "instructions": "Focus on sections 3 and 8. Cite page numbers.",
    }
    assert job["created_at"] == "2026-11-22T09:38:45.491628Z"
    # The API's progress answer uses +00:00; the overview's file times are epoch seconds.
    assert progress["created_at"] == "2026-11-22T09:13:45.491628Z"
    assert progress["completed_at"] is None
    assert view["files"][0]["modified"] == "2026-11-22T09:58:53.675472Z"


# --- ids ---------------------------------------------------------------------------------------

ID_CASES = [
    (tool, {"job_id": "not-a-uuid"}, "job_id", "list_jobs")
    for tool in JOB_TOOLS
    if tool not in ("list_jobs", "create_job", "assign_job", "test_datasource")
] + [
    ("assign_job", {"job_id": ids.JOB_CREATED, "agent_id": "42"}, "agent_id", "list_agents"),
    ("assign_job", {"job_id": "42", "agent_id": ids.AGENT_READY}, "job_id", "list_jobs"),
    ("test_datasource", {"datasource_id": "../x"}, "datasource_id", "list_datasources"),
    (
        "create_job",
        {"description": "d", "datasource_ids": [ids.DS_POSTGRES, "pg"]},
        "datasource_ids.1",
        "list_datasources",
    ),
    ("get_workspace_file", {"job_id": "x" * 36, "path": "plan.md"}, "job_id", "list_jobs"),
]


@pytest.mark.parametrize(("tool", "args", "field", "hint"), ID_CASES)
async def test_malformed_ids_are_refused_before_any_request(
    orch, tmp_path, tool, args, field, hint
):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        message = error(await gw.call(tool, args), "VALIDATION_ERROR")
    assert f"{field}: must be a" in message and hint in message
    assert orch.requests == []


async def test_ids_in_upper_case_are_sent_as_the_api_stores_them(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        job = ok(await gw.call("get_job", {"job_id": ids.JOB_CREATED.upper()}))
    assert job["id"] == ids.JOB_CREATED
    assert orch.requests[0].path == f"/api/jobs/{ids.JOB_CREATED}"


# --- honest states -----------------------------------------------------------------------------


@pytest.mark.parametrize("job_id", [ids.JOB_COMPLETED, ids.JOB_CANCELLED])
async def test_cancel_refuses_a_finished_job_without_signalling_its_agent(orch, tmp_path, job_id):
    status = orch.state.jobs[job_id].status
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        message = error(await gw.call("cancel_job", {"job_id": job_id}), "CONFLICT")
    assert f"already {status}" in message
    assert [r.method for r in orch.requests] == ["GET"]
    assert orch.state.agent_calls == []
    # What the gateway avoids: the API itself signals the agent, then refuses.
    assert send(orch, "PUT", f"/api/jobs/{job_id}/cancel")[0] == 400
    assert [c.action for c in orch.state.agent_calls] == ["cancel"]


async def test_cancel_stops_a_running_job_and_says_what_it_was(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        out = ok(await gw.call("cancel_job", {"job_id": ids.JOB_PROCESSING}))
    assert out == {
        "status": "cancelled",
        "job_id": ids.JOB_PROCESSING,
        "previous_status": "processing",
        "assigned_agent_id": ids.AGENT_WORKING,
        "warning": None,
    }
    assert orch.state.jobs[ids.JOB_PROCESSING].status == "cancelled"
    assert [(c.agent_id, c.action) for c in orch.state.agent_calls] == [
        (ids.AGENT_WORKING, "cancel")
    ]


async def test_approve_needs_pending_review_and_completes_the_job(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        message = error(await gw.call("approve_job", {"job_id": ids.JOB_PROCESSING}), "CONFLICT")
        assert "status: processing" in message and "get_job" in message
        out = ok(await gw.call("approve_job", {"job_id": ids.JOB_PENDING_REVIEW}))
        again = error(await gw.call("approve_job", {"job_id": ids.JOB_PENDING_REVIEW}), "CONFLICT")
        gone = error(
            await gw.call("get_frozen_job", {"job_id": ids.JOB_PENDING_REVIEW}), "NOT_FOUND"
        )
        done = ok(
            await gw.call(
                "get_workspace_file",
                {"job_id": ids.JOB_PENDING_REVIEW, "path": "output/job_completion.json"},
            )
        )
    assert out["status"] == "approved" and out["approved_at"].endswith("Z")
    assert out["deliverables"] == ["output/audit_trail_requirements.md", "workspace.md"]
    assert "status: completed" in again
    assert "no frozen result" in gone
    assert '"approved_by": "human_operator"' in done["content"]
    assert orch.state.jobs[ids.JOB_PENDING_REVIEW].status == "completed"


async def test_approve_without_a_frozen_result_says_so(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        message = error(
            await gw.call("approve_job", {"job_id": ids.JOB_REVIEW_NO_FROZEN}), "NOT_FOUND"
        )
    assert "no frozen result" in message and "resume_job_with_feedback" in message


async def test_resume_refuses_a_completed_job_and_starts_others_with_the_feedback(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        message = error(
            await gw.call("resume_job_with_feedback", {"job_id": ids.JOB_COMPLETED}), "CONFLICT"
        )
        assert "status: completed" in message
        assert orch.state.agent_calls == []
        out = ok(
            await gw.call(
                "resume_job_with_feedback",
                {"job_id": ids.JOB_FAILED, "feedback": "Read the files in chunks."},
            )
        )
        busy = error(
            await gw.call("resume_job_with_feedback", {"job_id": ids.JOB_FAILED}), "CONFLICT"
        )
    # The job's own agent failed, so the API picked the ready one.
    assert out == {"status": "resumed", "job_id": ids.JOB_FAILED, "agent_id": ids.AGENT_READY}
    call = orch.state.agent_calls[0]
    assert (call.action, call.payload["feedback"]) == ("resume", "Read the files in chunks.")
    assert "Agent is not ready (status: working)" in busy and "list_agents" in busy
    assert orch.requests[-1].body == b""  # no feedback: no body, as the API's own client


async def test_assign_needs_a_created_or_failed_job_and_a_ready_agent(orch, tmp_path):
    def assign(job: str, agent: str) -> dict:
        return {"job_id": job, "agent_id": agent}

    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        running = error(
            await gw.call("assign_job", assign(ids.JOB_PROCESSING, ids.AGENT_READY)), "CONFLICT"
        )
        booting = error(
            await gw.call("assign_job", assign(ids.JOB_CREATED, ids.AGENT_BOOTING)), "CONFLICT"
        )
        no_agent = error(
            await gw.call("assign_job", assign(ids.JOB_CREATED, ids.UNKNOWN_ID)), "NOT_FOUND"
        )
        no_job = error(
            await gw.call("assign_job", assign(ids.UNKNOWN_ID, ids.AGENT_READY)), "NOT_FOUND"
        )
        out = ok(await gw.call("assign_job", assign(ids.JOB_FAILED, ids.AGENT_READY)))
    assert "status: processing" in running and "was not assigned" in running
    assert "status: booting" in booting
    assert no_agent.startswith(f"no agent {ids.UNKNOWN_ID}") and "list_agents" in no_agent
    assert no_job.startswith(f"no job {ids.UNKNOWN_ID}") and "list_jobs" in no_job
    assert out == {"status": "assigned", "job_id": ids.JOB_FAILED, "agent_id": ids.AGENT_READY}
    assert orch.state.jobs[ids.JOB_FAILED].status == "processing"


async def test_an_unreachable_agent_is_a_backend_error_that_pauses_no_other_tool(orch, tmp_path):
    args = {"job_id": ids.JOB_CREATED, "agent_id": ids.AGENT_UNREACHABLE}
    async with orchestrator_gateway(orch.url, tmp_path, breaker_failures=2) as gw:
        for _ in range(4):
            result = await gw.call("assign_job", args)
            message = error(result, "BACKEND_ERROR")
            assert result.payload["error"]["retryable"] is True
        resumed = error(
            await gw.call("resume_job_with_feedback", {"job_id": ids.JOB_FAILED_UNREACHABLE}),
            "BACKEND_ERROR",
        )
        job = ok(await gw.call("get_job", {"job_id": ids.JOB_CREATED}))
        status = await gw.status(check_health=False)
    assert "the agent could not be reached" in message and "was not started" in message
    assert "was not resumed" in resumed
    assert job["status"] == "created"  # nothing changed
    assert status["backends"]["cockpit"] == {"state": "closed", "consecutive_failures": 0}


# --- tiers and mutation facts ------------------------------------------------------------------


async def test_mutations_carry_their_facts_and_only_three_are_destructive(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw, gateway_client(gw) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(JOB_TOOLS) <= set(tools)
    for name in JOB_TOOLS:
        tool = tools[name]
        mutation = name in MUTATIONS
        assert tool.annotations.read_only_hint is not mutation, name
        assert ("MUTATION:" in tool.description) is mutation, name
        assert tool.annotations.open_world_hint is True
        if mutation:
            assert "Requires: " in tool.description and "reversible" in tool.description
    destructive = {n for n in JOB_TOOLS if tools[n].annotations.destructive_hint}
    assert destructive == {"approve_job", "cancel_job", "delete_job"}
    idempotent = {n for n in MUTATIONS if tools[n].annotations.idempotent_hint}
    assert idempotent == {"approve_job", "cancel_job", "delete_job", "assign_job"}
    assert "reversible;" in tools["create_job"].description  # delete_job undoes it
    assert "orphaned" in tools["delete_job"].description
    assert "Requires: status pending_review" in tools["approve_job"].description


async def test_delete_says_what_it_deleted_and_warns_for_a_processing_job(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        scratch = ok(await gw.call("delete_job", {"job_id": ids.JOB_SCRATCH}))
        running = ok(await gw.call("delete_job", {"job_id": ids.JOB_PROCESSING}))
        orch.clear_log()
        again = error(await gw.call("delete_job", {"job_id": ids.JOB_SCRATCH}), "NOT_FOUND")
    assert (scratch["previous_status"], scratch["warning"]) == ("created", None)
    assert running["previous_status"] == "processing"
    assert ids.AGENT_WORKING in running["warning"] and "orphaned" in running["warning"]
    assert "no job" in again and [r.method for r in orch.requests] == ["GET"]
    assert ids.JOB_SCRATCH not in orch.state.jobs


# --- create_job --------------------------------------------------------------------------------


async def test_create_job_takes_objects_and_the_job_shows_them(orch, tmp_path):
    args = {
        "description": "Summarise the GoBD",
        "config_name": "researcher",
        "instructions": "Cite pages.",
        "config_override": {"llm": {"temperature": 0}},
        "context": {"team": "finance"},
        "datasource_ids": [ids.DS_POSTGRES.upper()],
    }
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        as_text = error(
            await gw.call("create_job", {**args, "context": '{"team": "finance"}'}),
            "VALIDATION_ERROR",
        )
        assert "context" in as_text and orch.requests == []
        created = ok(await gw.call("create_job", args))
        job = ok(await gw.call("get_job", {"job_id": created["id"]}))
    assert created["status"] == "created" and created["warnings"] == []
    assert job["context"] == {"team": "finance", "instructions": "Cite pages."}
    assert job["config_override"] == {"llm": {"temperature": 0}}
    sent = next(r for r in orch.requests if r.method == "POST")
    assert sent.json["datasource_ids"] == [ids.DS_POSTGRES]


async def test_create_job_says_when_config_name_names_no_expert(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        typo = ok(await gw.call("create_job", {"description": "d", "config_name": "reseacher"}))
        default = ok(await gw.call("create_job", {"description": "d"}))
    assert typo["config_name"] == "reseacher"  # the API accepted it
    [warning] = typo["warnings"]
    assert "'reseacher' names no expert config" in warning
    assert "defaults, coder, debugger, researcher, writer" in warning
    assert "delete_job" in warning
    assert (default["config_name"], default["warnings"]) == ("defaults", [])


async def test_create_job_still_creates_when_the_expert_list_fails(orch, tmp_path):
    orch.override("/api/experts", Reply.json({"detail": "boom"}, 500))
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        created = ok(await gw.call("create_job", {"description": "d", "config_name": "x"}))
    assert created["warnings"] == ["config_name could not be checked: the expert list did not load"]
    assert created["id"] in orch.state.jobs


# --- list_jobs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status", ["created", "processing", "completed", "failed", "cancelled", "pending_review"]
)
async def test_list_jobs_filters_by_the_statuses_the_database_uses(orch, tmp_path, status):
    want = [j.id for j in orch.state.jobs.values() if j.status == status]
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        out = ok(await gw.call("list_jobs", {"status": status}))
    assert want and sorted(j["id"] for j in out["jobs"]) == sorted(want)
    assert (out["total"], out["has_more"]) == (len(want), False)


@pytest.mark.parametrize("status", ["pending", "running"])
async def test_list_jobs_refuses_the_statuses_that_never_match(orch, tmp_path, status):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        message = error(await gw.call("list_jobs", {"status": status}), "VALIDATION_ERROR")
    assert "status" in message and "pending_review" in message and orch.requests == []


async def test_list_jobs_says_when_more_jobs_match_than_it_shows(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        two = ok(await gw.call("list_jobs", {"limit": 2}))
        exact = ok(await gw.call("list_jobs", {"status": "created", "limit": 3}))
        review = ok(await gw.call("list_jobs", {"status": "pending_review", "limit": 1}))
        for bad in (0, 101):
            error(await gw.call("list_jobs", {"limit": bad}), "VALIDATION_ERROR")
    assert [j["id"] for j in two["jobs"]] == [ids.JOB_SCRATCH, ids.JOB_POSTMORTEM]  # newest
    assert (two["total"], two["has_more"]) == (len(orch.state.jobs), True)
    assert (len(exact["jobs"]), exact["total"], exact["has_more"]) == (3, 3, False)
    # The API's statistics have no pending_review count; their total does count them.
    assert (review["total"], review["has_more"]) == (2, True)


async def test_list_jobs_still_lists_when_the_counts_fail(orch, tmp_path):
    orch.override("/api/stats/jobs", Reply.json({"detail": "boom"}, 500))
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        out = ok(await gw.call("list_jobs", {"limit": 2}))
    assert (len(out["jobs"]), out["total"], out["has_more"]) == (2, None, True)


# --- unknown jobs and empty answers ------------------------------------------------------------


@pytest.mark.parametrize("tool", ["get_todos", "get_workspace_overview", "get_job_requirements"])
async def test_an_unknown_job_is_not_found_where_the_api_answers_empty(orch, tmp_path, tool):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        message = error(await gw.call(tool, {"job_id": ids.UNKNOWN_ID}), "NOT_FOUND")
        empty = ok(await gw.call(tool, {"job_id": ids.JOB_SCRATCH}))
    assert message == f"no job {ids.UNKNOWN_ID}; list_jobs shows the ids"
    assert empty.get("has_workspace", False) is False
    assert empty.get("requirements", []) == []


async def test_requirements_page_with_has_more_and_filter_by_status(orch, tmp_path):
    args = {"job_id": ids.JOB_PROCESSING}
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        first = ok(await gw.call("get_job_requirements", {**args, "limit": 2}))
        last = ok(await gw.call("get_job_requirements", {**args, "limit": 2, "offset": 4}))
        done = ok(await gw.call("get_job_requirements", {**args, "status": "integrated"}))
        error(await gw.call("get_job_requirements", {**args, "limit": 101}), "VALIDATION_ERROR")
    assert (first["total"], first["has_more"], first["next_offset"]) == (5, True, 2)
    assert (len(last["requirements"]), last["has_more"], last["next_offset"]) == (1, False, None)
    assert [r["status"] for r in done["requirements"]] == ["integrated"]
    assert first["requirements"][0]["created_at"].endswith("Z")


async def test_todos_are_counted_by_status(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        out = ok(await gw.call("get_todos", {"job_id": ids.JOB_PROCESSING}))
    assert out["current"]["counts"] == {"completed": 2, "in_progress": 1, "pending": 1}
    assert [a["path"] for a in out["archives"]] == [
        "archive/todos_phase_1_strategic_20261122_091502.md"
    ]


# --- test_datasource ---------------------------------------------------------------------------


async def test_test_datasource_reports_ok_or_the_reason_without_secrets(orch, tmp_path):
    orch.state.datasources[ids.DS_MONGO].test_result = (
        "error",
        "could not connect to mongodb://app:hunter2@db:27017/x",
    )
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        good = ok(await gw.call("test_datasource", {"datasource_id": ids.DS_POSTGRES}))
        neo = ok(await gw.call("test_datasource", {"datasource_id": ids.DS_NEO4J}))
        mongo = ok(await gw.call("test_datasource", {"datasource_id": ids.DS_MONGO}))
        missing = error(
            await gw.call("test_datasource", {"datasource_id": ids.UNKNOWN_ID}), "NOT_FOUND"
        )
    assert (good["ok"], good["status"]) == (True, "ok")
    assert (neo["ok"], neo["message"]) == (False, "No module named 'neo4j'")
    assert "hunter2" not in mongo["message"] and "mongodb://" in mongo["message"]
    assert "list_datasources" in missing


async def test_a_fresh_fake_is_enough_for_every_tool(tmp_path):
    """Smoke: each job tool answers without INTERNAL_ERROR on the recorded scenario."""
    calls = {
        "list_jobs": {},
        "get_job": {"job_id": ids.JOB_PROCESSING},
        "get_todos": {"job_id": ids.JOB_PROCESSING},
        "approve_job": {"job_id": ids.JOB_PENDING_REVIEW},
        "resume_job_with_feedback": {"job_id": ids.JOB_CANCELLED},
        "cancel_job": {"job_id": ids.JOB_STUCK_VALIDATOR},
        "create_job": {"description": "d"},
        "delete_job": {"job_id": ids.JOB_SCRATCH},
        "assign_job": {"job_id": ids.JOB_POSTMORTEM, "agent_id": ids.AGENT_READY},
        "test_datasource": {"datasource_id": ids.DS_POSTGRES},
        "get_frozen_job": {"job_id": ids.JOB_PENDING_REVIEW},
        "get_workspace_file": {"job_id": ids.JOB_PROCESSING, "path": "plan.md"},
        "get_workspace_overview": {"job_id": ids.JOB_PROCESSING},
        "get_job_progress": {"job_id": ids.JOB_PROCESSING},
        "get_job_requirements": {"job_id": ids.JOB_PROCESSING},
    }
    assert set(calls) == set(JOB_TOOLS)
    with FakeOrchestrator() as api:
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            # The frozen result is read before the approval removes it.
            for name in sorted(calls, key=lambda n: n != "get_frozen_job"):
                ok(await gw.call(name, calls[name]))
    assert not api.errors
