"""Replays: every recording behind the 15 job tools, against the recorded backend.

A recorded request the plugin sends must be byte for byte the one recorded (method, raw path,
query, JSON body or none): the replay server answers nothing else. Its recorded answer must be
shaped without ``INTERNAL_ERROR`` into the expected result or error. Recorded requests that the
gateway refuses on purpose (malformed ids, traversal paths, out-of-range limits) must not reach
the backend at all.

``cancel_job`` and ``delete_job`` read the job before acting; where no recording of that read
exists, it is answered with the job as the (contract-tested) fake renders it, and "race" cases
answer it with a state that lets the action through, as if the job changed in between.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from gateway_orchestrator_testing import RECORDINGS, RECORDINGS_INDEX, State, recorded_backend
from gateway_orchestrator_testing import seed as ids
from gateway_orchestrator_testing.jobs import job_detail
from gateway_orchestrator_testing.seed import seed
from orch_kit import error, ok, orchestrator_gateway

from gateway.testing.backends import Reply

# (method, path template) of every endpoint the job tools call for themselves.
ENDPOINTS = {
    ("GET", "/api/jobs"),
    ("GET", "/api/jobs/{job_id}"),
    ("GET", "/api/jobs/{job_id}/todos"),
    ("POST", "/api/jobs/{job_id}/approve"),
    ("POST", "/api/jobs/{job_id}/resume"),
    ("PUT", "/api/jobs/{job_id}/cancel"),
    ("POST", "/api/jobs"),
    ("DELETE", "/api/jobs/{job_id}"),
    ("POST", "/api/jobs/{job_id}/assign/{agent_id}"),
    ("POST", "/api/datasources/{datasource_id}/test"),
    ("GET", "/api/jobs/{job_id}/frozen"),
    ("GET", "/api/jobs/{job_id}/workspace/{path}"),
    ("GET", "/api/jobs/{job_id}/workspace"),
    ("GET", "/api/jobs/{job_id}/progress"),
    ("GET", "/api/jobs/{job_id}/requirements"),
}

NO_JOB_404 = "GET_api_jobs_{job_id}__404"  # the recorded 404 for UNKNOWN_ID, used by checks


@dataclass(frozen=True)
class Case:
    recording: str
    tool: str
    args: dict[str, Any]
    expect: str = "OK"  # or an error code
    refused: bool = False  # the gateway refuses before any request
    helpers: tuple[str, ...] = ()  # more recordings the call needs
    job_read: str | None = None  # answer the pre-read of this job from the seeded fake's state
    race: str | None = None  # ... but with this status
    says: str = ""  # a fragment of the message


def _recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDINGS / f"{name}.json").read_text())
    return data


def _path_arg(name: str) -> str:
    """The workspace path a recorded request asked for, as a tool argument."""
    path = _recorded(name)["request"]["path"]
    return path.split("/workspace/", 1)[1] if "/workspace/" in path else "../../etc/passwd"


J = {"job_id": ids.JOB_PROCESSING}
BAD = "not-a-uuid"

CASES = [
    # list_jobs
    Case("GET_api_jobs", "list_jobs", {"limit": 100}),
    Case("GET_api_jobs__limit_20", "list_jobs", {}),
    *(
        Case(f"GET_api_jobs__status_{s}", "list_jobs", {"status": s})
        for s in ("cancelled", "completed", "created", "failed", "pending_review", "processing")
    ),
    Case(
        "GET_api_jobs__status_running_no_match",
        "list_jobs",
        {"status": "running"},
        "VALIDATION_ERROR",
        refused=True,
        says="status",
    ),
    Case("GET_api_jobs__422_limit_0", "list_jobs", {"limit": 0}, "VALIDATION_ERROR", True),
    Case("GET_api_jobs__422_limit_501", "list_jobs", {"limit": 501}, "VALIDATION_ERROR", True),
    # get_job
    Case("GET_api_jobs_{job_id}", "get_job", J),
    *(
        Case(f"GET_api_jobs_{{job_id}}__{v}", "get_job", {"job_id": j})
        for v, j in (
            ("created", ids.JOB_CREATED),
            ("processing", ids.JOB_PROCESSING),
            ("completed", ids.JOB_COMPLETED),
            ("failed", ids.JOB_FAILED),
            ("pending_review", ids.JOB_PENDING_REVIEW),
            ("after_approve", ids.JOB_PENDING_REVIEW),
        )
    ),
    Case(NO_JOB_404, "get_job", {"job_id": ids.UNKNOWN_ID}, "NOT_FOUND", says="list_jobs"),
    Case("GET_api_jobs_{job_id}__404_invalid_uuid", "get_job", {"job_id": BAD}, "VALIDATION_ERROR", True),
    # get_todos
    Case("GET_api_jobs_{job_id}_todos", "get_todos", J),
    Case(
        "GET_api_jobs_{job_id}_todos__no_workspace",
        "get_todos",
        {"job_id": ids.UNKNOWN_ID},
        "NOT_FOUND",
        helpers=(NO_JOB_404,),
        says="no job",
    ),
    # approve_job
    Case("POST_api_jobs_{job_id}_approve", "approve_job", {"job_id": ids.JOB_PENDING_REVIEW}),
    Case(
        "POST_api_jobs_{job_id}_approve__400_after_approve",
        "approve_job",
        {"job_id": ids.JOB_PENDING_REVIEW},
        "CONFLICT",
        says="status: completed",
    ),
    Case(
        "POST_api_jobs_{job_id}_approve__400_not_pending_review",
        "approve_job",
        {"job_id": ids.JOB_COMPLETED},
        "CONFLICT",
        says="status: completed",
    ),
    Case(
        "POST_api_jobs_{job_id}_approve__400_processing",
        "approve_job",
        J,
        "CONFLICT",
        says="status: processing",
    ),
    Case("POST_api_jobs_{job_id}_approve__404", "approve_job", {"job_id": ids.UNKNOWN_ID}, "NOT_FOUND", says="no job"),
    Case(
        "POST_api_jobs_{job_id}_approve__404_no_frozen_file",
        "approve_job",
        {"job_id": ids.JOB_REVIEW_NO_FROZEN},
        "NOT_FOUND",
        says="no frozen result",
    ),
    # resume_job_with_feedback
    Case(
        "POST_api_jobs_{job_id}_resume",
        "resume_job_with_feedback",
        {
            "job_id": ids.JOB_FAILED,
            "feedback": "The previous run crashed on a huge tool output. Read files in chunks of 200 lines.",
        },
    ),
    Case(
        "POST_api_jobs_{job_id}_resume__400_agent_busy",
        "resume_job_with_feedback",
        {**J, "feedback": "Please also cover ZUGFeRD 2.3."},
        "CONFLICT",
        says="Agent is not ready (status: working)",
    ),
    Case(
        "POST_api_jobs_{job_id}_resume__400_completed",
        "resume_job_with_feedback",
        {"job_id": ids.JOB_COMPLETED},
        "CONFLICT",
        says="status: completed",
    ),
    Case(
        "POST_api_jobs_{job_id}_resume__400_no_ready_agents",
        "resume_job_with_feedback",
        {"job_id": ids.JOB_REVIEW_NO_FROZEN},
        "CONFLICT",
        says="No ready agents",
    ),
    Case("POST_api_jobs_{job_id}_resume__404", "resume_job_with_feedback", {"job_id": ids.UNKNOWN_ID}, "NOT_FOUND"),
    Case(
        "POST_api_jobs_{job_id}_resume__422_bad_body",
        "resume_job_with_feedback",
        {"job_id": ids.JOB_FAILED, "feedback": ["not", "a", "string"]},
        "VALIDATION_ERROR",
        refused=True,
        says="feedback",
    ),
    Case(
        "POST_api_jobs_{job_id}_resume__502_agent_unreachable",
        "resume_job_with_feedback",
        {"job_id": ids.JOB_REVIEW_NO_FROZEN},
        "BACKEND_ERROR",
        says="agent could not be reached",
    ),
    Case("POST_api_jobs_{job_id}_resume__no_body", "resume_job_with_feedback", {"job_id": ids.JOB_CANCELLED}),
    # cancel_job: the job is read first
    Case("PUT_api_jobs_{job_id}_cancel", "cancel_job", {"job_id": ids.JOB_STUCK_VALIDATOR}, job_read=ids.JOB_STUCK_VALIDATOR),
    Case(
        "PUT_api_jobs_{job_id}_cancel__agent_unreachable_still_200",
        "cancel_job",
        {"job_id": ids.JOB_FAILED_UNREACHABLE},
        job_read=ids.JOB_FAILED_UNREACHABLE,
    ),
    Case(
        "PUT_api_jobs_{job_id}_cancel__400_already_cancelled",
        "cancel_job",
        {"job_id": ids.JOB_CANCELLED},
        "CONFLICT",
        job_read=ids.JOB_CANCELLED,
        race="processing",
        says="changed state meanwhile",
    ),
    Case(
        "PUT_api_jobs_{job_id}_cancel__400_completed",
        "cancel_job",
        {"job_id": ids.JOB_COMPLETED},
        "CONFLICT",
        job_read=ids.JOB_COMPLETED,
        race="processing",
        says="already completed or cancelled",
    ),
    Case(
        "PUT_api_jobs_{job_id}_cancel__404",
        "cancel_job",
        {"job_id": ids.UNKNOWN_ID},
        "NOT_FOUND",
        job_read=ids.JOB_CREATED,
        race="created",
        says="no job",
    ),
    Case("PUT_api_jobs_{job_id}_cancel__404_invalid_uuid", "cancel_job", {"job_id": BAD}, "VALIDATION_ERROR", True),
    # create_job: the expert list is read alongside
    Case(
        "POST_api_jobs",
        "create_job",
        {
            "description": "Research current BMF guidance on electronic invoice archiving (E-Rechnung) and summarise obligations for AP",
            "config_name": "researcher",
        },
        helpers=("GET_api_experts",),
    ),
    Case(
        "POST_api_jobs__full_body",
        "create_job",
        {
            "description": "Extract GoBD retention and immutability requirements from the 2024 accounting procedure documentation",
            "config_name": "defaults",
            "instructions": "Focus on sections 3 and 8. Cite page numbers.",
            "config_override": {"llm": {"temperature": 0.1}},
            "context": {"department": "finance", "priority": "high"},
            "datasource_ids": [ids.DS_POSTGRES],
        },
        helpers=("GET_api_experts",),
    ),
    Case(
        "POST_api_jobs__422_missing_description",
        "create_job",
        {"config_name": "defaults"},
        "VALIDATION_ERROR",
        refused=True,
        says="description",
    ),
    # delete_job: the job is read first
    Case("DELETE_api_jobs_{job_id}", "delete_job", {"job_id": ids.JOB_SCRATCH}, job_read=ids.JOB_SCRATCH),
    Case(
        "DELETE_api_jobs_{job_id}__404_again",
        "delete_job",
        {"job_id": ids.JOB_SCRATCH},
        "NOT_FOUND",
        job_read=ids.JOB_SCRATCH,
        race="created",
        says="no job",
    ),
    Case("DELETE_api_jobs_{job_id}__404_invalid_uuid", "delete_job", {"job_id": BAD}, "VALIDATION_ERROR", True),
    # assign_job
    Case("POST_api_jobs_{job_id}_assign_{agent_id}", "assign_job", {"job_id": ids.JOB_CREATED, "agent_id": ids.AGENT_READY}),
    Case(
        "POST_api_jobs_{job_id}_assign_{agent_id}__400_agent_not_ready",
        "assign_job",
        {"job_id": ids.JOB_POSTMORTEM, "agent_id": ids.AGENT_BOOTING},
        "CONFLICT",
        says="status: booting",
    ),
    Case(
        "POST_api_jobs_{job_id}_assign_{agent_id}__400_job_not_assignable",
        "assign_job",
        {"job_id": ids.JOB_CREATED, "agent_id": ids.AGENT_READY},
        "CONFLICT",
        says="status: processing",
    ),
    Case(
        "POST_api_jobs_{job_id}_assign_{agent_id}__404_agent",
        "assign_job",
        {"job_id": ids.JOB_POSTMORTEM, "agent_id": ids.UNKNOWN_ID},
        "NOT_FOUND",
        says="no agent",
    ),
    Case(
        "POST_api_jobs_{job_id}_assign_{agent_id}__404_agent_invalid_uuid",
        "assign_job",
        {"job_id": ids.JOB_POSTMORTEM, "agent_id": BAD},
        "VALIDATION_ERROR",
        refused=True,
        says="agent_id",
    ),
    Case(
        "POST_api_jobs_{job_id}_assign_{agent_id}__404_job",
        "assign_job",
        {"job_id": ids.UNKNOWN_ID, "agent_id": ids.AGENT_READY},
        "NOT_FOUND",
        says="no job",
    ),
    Case(
        "POST_api_jobs_{job_id}_assign_{agent_id}__502_agent_unreachable",
        "assign_job",
        {"job_id": ids.JOB_POSTMORTEM, "agent_id": ids.AGENT_UNREACHABLE},
        "BACKEND_ERROR",
        says="agent could not be reached",
    ),
    # test_datasource
    Case("POST_api_datasources_{datasource_id}_test", "test_datasource", {"datasource_id": ids.DS_POSTGRES}),
    Case(
        "POST_api_datasources_{datasource_id}_test__mongodb_unreachable",
        "test_datasource",
        {"datasource_id": ids.DS_MONGO},
    ),
    Case(
        "POST_api_datasources_{datasource_id}_test__neo4j_driver_missing",
        "test_datasource",
        {"datasource_id": ids.DS_NEO4J},
    ),
    Case(
        "POST_api_datasources_{datasource_id}_test__404",
        "test_datasource",
        {"datasource_id": ids.UNKNOWN_ID},
        "NOT_FOUND",
        says="list_datasources",
    ),
    Case(
        "POST_api_datasources_{datasource_id}_test__404_invalid_uuid",
        "test_datasource",
        {"datasource_id": BAD},
        "VALIDATION_ERROR",
        True,
    ),
    # get_frozen_job
    Case("GET_api_jobs_{job_id}_frozen", "get_frozen_job", {"job_id": ids.JOB_PENDING_REVIEW}),
    Case("GET_api_jobs_{job_id}_frozen__404", "get_frozen_job", {"job_id": ids.JOB_COMPLETED}, "NOT_FOUND"),
    Case(
        "GET_api_jobs_{job_id}_frozen__404_after_approve",
        "get_frozen_job",
        {"job_id": ids.JOB_PENDING_REVIEW},
        "NOT_FOUND",
        says="no frozen result",
    ),
    Case("GET_api_jobs_{job_id}_frozen__404_invalid_uuid", "get_frozen_job", {"job_id": BAD}, "VALIDATION_ERROR", True),
    # get_workspace_file
    *(
        Case(f"GET_api_jobs_{{job_id}}_workspace_{{path}}{v}", "get_workspace_file", {"job_id": j, "path": p})
        for v, j, p in (
            ("", ids.JOB_PROCESSING, "workspace.md"),
            ("__subdir", ids.JOB_PROCESSING, "archive/phase_1_retrospective.md"),
            ("__todos_yaml", ids.JOB_PROCESSING, "todos.yaml"),
            ("__job_completion_after_approve", ids.JOB_PENDING_REVIEW, "output/job_completion.json"),
        )
    ),
    Case(
        "GET_api_jobs_{job_id}_workspace_{path}__404",
        "get_workspace_file",
        {**J, "path": "missing.md"},
        "NOT_FOUND",
        says="'missing.md'",
    ),
    Case(
        "GET_api_jobs_{job_id}_workspace_{path}__404_no_workspace",
        "get_workspace_file",
        {"job_id": ids.UNKNOWN_ID, "path": "workspace.md"},
        "NOT_FOUND",
    ),
    *(
        Case(
            f"GET_api_jobs_{{job_id}}_workspace_{{path}}__{v}",
            "get_workspace_file",
            {**J, "path": _path_arg(f"GET_api_jobs_{{job_id}}_workspace_{{path}}__{v}")},
            "VALIDATION_ERROR",
            refused=True,
            says="path",
        )
        for v in (
            "absolute_path",
            "sibling_prefix_escape",
            "sibling_prefix_escape_encoded",
            "traversal_as_httpx_sends",
            "traversal_encoded_dots",
            "traversal_encoded_slashes",
            "traversal_raw",
        )
    ),
    # get_workspace_overview
    Case("GET_api_jobs_{job_id}_workspace", "get_workspace_overview", J),
    Case("GET_api_jobs_{job_id}_workspace__pending_review", "get_workspace_overview", {"job_id": ids.JOB_PENDING_REVIEW}),
    Case(
        "GET_api_jobs_{job_id}_workspace__no_workspace",
        "get_workspace_overview",
        {"job_id": ids.UNKNOWN_ID},
        "NOT_FOUND",
        helpers=(NO_JOB_404,),
    ),
    # get_job_progress
    Case("GET_api_jobs_{job_id}_progress", "get_job_progress", J),
    Case("GET_api_jobs_{job_id}_progress__completed", "get_job_progress", {"job_id": ids.JOB_COMPLETED}),
    Case("GET_api_jobs_{job_id}_progress__404", "get_job_progress", {"job_id": ids.UNKNOWN_ID}, "NOT_FOUND"),
    Case("GET_api_jobs_{job_id}_progress__404_invalid_uuid", "get_job_progress", {"job_id": BAD}, "VALIDATION_ERROR", True),
    # get_job_requirements
    Case("GET_api_jobs_{job_id}_requirements", "get_job_requirements", J),
    Case("GET_api_jobs_{job_id}_requirements__page", "get_job_requirements", {**J, "limit": 2, "offset": 2}),
    Case(
        "GET_api_jobs_{job_id}_requirements__status_integrated",
        "get_job_requirements",
        {"job_id": ids.JOB_COMPLETED, "status": "integrated"},
    ),
    Case(
        "GET_api_jobs_{job_id}_requirements__unknown_job",
        "get_job_requirements",
        {"job_id": ids.UNKNOWN_ID},
        "NOT_FOUND",
        helpers=(NO_JOB_404,),
        says="no job",
    ),
    Case(
        "GET_api_jobs_{job_id}_requirements__422_limit",
        "get_job_requirements",
        {**J, "limit": 1001},
        "VALIDATION_ERROR",
        refused=True,
        says="limit",
    ),
    Case(
        "GET_api_jobs_{job_id}_requirements__invalid_uuid",
        "get_job_requirements",
        {"job_id": BAD},
        "VALIDATION_ERROR",
        refused=True,
        says="job_id",
    ),
]  # fmt: skip


def test_every_recording_behind_the_job_tools_has_a_case():
    rows = json.loads(RECORDINGS_INDEX.read_text())
    behind = {
        row["file"].removesuffix(".json")
        for row in rows
        if (row["method"], row["path_template"]) in ENDPOINTS
    }
    cases = {c.recording for c in CASES}
    assert behind - cases == set()
    assert cases - behind == set()
    assert len(cases) == len(CASES)


def _job_reply(job_id: str, status: str | None) -> Reply:
    state = State()
    seed(state)
    body = job_detail(state, state.jobs[job_id])
    if status is not None:
        body["status"] = status
    return Reply.json(body)


async def _replay(case: Case, tmp_path) -> None:
    with recorded_backend(case.recording, *case.helpers) as api:
        api.activate(case.recording)
        if case.job_read is not None:
            target = case.args["job_id"]
            api.override(f"/api/jobs/{target}", _job_reply(case.job_read, case.race), method="GET")
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            result = await gw.call(case.tool, case.args)
        assert result.code == case.expect, result.text()
        if case.says:
            assert case.says in result.text(), result.text()
        if case.refused:
            assert api.requests == [], "refused arguments must not reach the API"
            return
        assert api.unmatched == [], [r.target for r in api.unmatched]
        assert case.recording in {name for _, name in api.served}, (
            "the recorded request was not sent"
        )
        if case.expect == "OK":
            check_shape(case, ok(result))
        else:
            error(result, case.expect)


@pytest.mark.parametrize("case", CASES, ids=[c.recording for c in CASES])
def test_the_recorded_request_is_sent_and_its_answer_shaped(case: Case, tmp_path):
    anyio.run(_replay, case, tmp_path)


def check_shape(case: Case, out: dict[str, Any]) -> None:
    """What the recorded answer must have become (beyond passing the output model)."""
    recorded = _recorded(case.recording)["response"]["json"]
    if case.tool == "list_jobs":
        assert [j["id"] for j in out["jobs"]] == [j["id"] for j in recorded]
        assert (out["total"], out["has_more"]) == (len(recorded), False)
    elif case.tool == "get_job":
        assert out["id"] == recorded["id"] and out["created_at"].endswith("Z")
        if recorded["context"] is not None:
            assert out["context"] == json.loads(recorded["context"])
            assert out["config_override"] == json.loads(recorded["config_override"])
    elif case.tool == "get_todos":
        assert out["current"]["counts"] == {"completed": 2, "in_progress": 1, "pending": 1}
        assert out["current"]["todos"][0]["created_at"] == "2026-11-22T09:20:00Z"
    elif case.tool == "approve_job":
        assert out["approved_at"] == recorded["approved_at"].replace("+00:00", "Z")
    elif case.tool in ("cancel_job", "delete_job"):
        assert out["status"] == recorded["status"] and out["previous_status"]
    elif case.tool == "create_job":
        assert out["id"] == recorded["id"] and out["warnings"] == []
    elif case.tool == "test_datasource":
        assert out["ok"] is (recorded["status"] == "ok") and out["message"]
    elif case.tool == "get_workspace_file":
        assert out["content"] == recorded["content"] and out["truncated"] is False
        assert out["path"] == recorded["path"]
    elif case.tool == "get_workspace_overview":
        assert out["workspace_md"] == recorded["workspace_md"] and out["truncated"] == []
        assert all(f["modified"].endswith("Z") for f in out["files"])
    elif case.tool == "get_job_progress":
        assert out["created_at"] == recorded["created_at"].replace("+00:00", "Z")
        assert out["requirements"] == recorded["requirements"]
    elif case.tool == "get_job_requirements":
        assert len(out["requirements"]) == len(recorded["requirements"])
        assert out["total"] == recorded["total"]
        assert out["has_more"] is (out["offset"] + len(out["requirements"]) < out["total"])
    else:
        assert out  # resume, assign, frozen: the output model accepted the recorded answer


async def _approve_twice(tmp_path) -> None:
    first, again = (
        "POST_api_jobs_{job_id}_approve",
        "POST_api_jobs_{job_id}_approve__400_after_approve",
    )
    with recorded_backend(first, again) as api:
        api.activate(first, again)
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            args = {"job_id": ids.JOB_PENDING_REVIEW}
            ok(await gw.call("approve_job", args))
            assert "status: completed" in error(await gw.call("approve_job", args), "CONFLICT")
        assert [name for _, name in api.served] == [first, again]


def test_a_second_approve_is_the_recorded_conflict(tmp_path):
    anyio.run(_approve_twice, tmp_path)


async def _cancel_as_read(job_id: str, tmp_path) -> str:
    with recorded_backend(
        "GET_api_jobs_{job_id}__completed", NO_JOB_404, "PUT_api_jobs_{job_id}_cancel*"
    ) as api:
        async with orchestrator_gateway(api.url, tmp_path) as gw:
            result = await gw.call("cancel_job", {"job_id": job_id})
        assert [r.method for r in api.requests] == ["GET"]  # the cancel itself never went out
        return result.text()


def test_cancel_with_the_recorded_reads_sends_no_cancel_for_a_completed_or_unknown_job(tmp_path):
    assert "already completed" in anyio.run(_cancel_as_read, ids.JOB_COMPLETED, tmp_path)
    assert "no job" in anyio.run(_cancel_as_read, ids.UNKNOWN_ID, tmp_path)
