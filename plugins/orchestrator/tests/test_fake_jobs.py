"""The fake orchestrator's job and agent state machine, validation and routing, beyond what a
single recording shows."""

from __future__ import annotations

import httpx
import pytest
from gateway_orchestrator_testing import Clock, FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from orch_http import send


def job(api: FakeOrchestrator, job_id: str) -> dict:
    status, body = send(api, "GET", f"/api/jobs/{job_id}")
    assert status == 200
    return body


def test_create_assign_then_the_job_processes_on_a_working_agent(orch):
    status, created = send(
        orch,
        "POST",
        "/api/jobs",
        body={"description": "Read the GoBD", "config_name": "researcher"},
    )
    assert status == 200 and created["status"] == "created" and created["assigned_agent_id"] is None
    status, listed = send(orch, "GET", "/api/jobs", {"limit": 1})
    assert [j["id"] for j in listed] == [created["id"]]  # newest first
    status, body = send(orch, "POST", f"/api/jobs/{created['id']}/assign/{ids.AGENT_READY}")
    assert (status, body["status"]) == (200, "assigned")
    after = job(orch, created["id"])
    assert (after["status"], after["assigned_agent_id"]) == ("processing", ids.AGENT_READY)
    agent = orch.state.agents[ids.AGENT_READY]
    assert (agent.status, agent.current_job_id) == ("working", created["id"])
    assert [(c.action, c.outcome) for c in orch.state.agent_calls] == [("start", "accepted")]
    status, body = send(orch, "POST", f"/api/jobs/{created['id']}/assign/{ids.AGENT_READY}")
    assert (status, body["detail"]) == (400, "Job cannot be assigned (status: processing)")


def test_create_stores_instructions_in_the_context_and_clones_global_datasources(orch):
    status, created = send(
        orch,
        "POST",
        "/api/jobs",
        body={
            "description": "d",
            "instructions": "Cite pages.",
            "context": {"b": 1},
            "datasource_ids": [ids.DS_POSTGRES, ids.DS_JOB_POSTGRES, "not-a-uuid", ids.UNKNOWN_ID],
        },
    )
    assert status == 200 and created["config_name"] == "default"  # the API's own default
    detail = job(orch, created["id"])
    assert detail["context"] == '{"b": 1, "instructions": "Cite pages."}'
    status, scoped = send(orch, "GET", "/api/datasources", {"job_id": created["id"]})
    assert [d["type"] for d in scoped] == ["postgresql"]  # only the global one was cloned


def test_assign_to_an_unreachable_pod_is_a_502_and_changes_nothing(orch):
    status, body = send(
        orch, "POST", f"/api/jobs/{ids.JOB_POSTMORTEM}/assign/{ids.AGENT_UNREACHABLE}"
    )
    assert (status, body["detail"]) == (
        502,
        "Failed to connect to agent: All connection attempts failed",
    )
    assert job(orch, ids.JOB_POSTMORTEM)["status"] == "created"
    assert orch.state.agents[ids.AGENT_UNREACHABLE].status == "ready"


def test_a_pod_that_rejects_the_job_is_a_502_with_its_answer(orch):
    agent = orch.state.add_agent("writer", rejects_with="busy with another job")
    status, body = send(orch, "POST", f"/api/jobs/{ids.JOB_POSTMORTEM}/assign/{agent.id}")
    assert (status, body["detail"]) == (502, "Agent rejected job: busy with another job")


def test_cancel_signals_the_agent_before_refusing_a_completed_job(orch):
    orch.state.agents[ids.AGENT_COMPLETED].status = "ready"
    status, body = send(orch, "PUT", f"/api/jobs/{ids.JOB_COMPLETED}/cancel")
    assert status == 400 and "already completed or cancelled" in body["detail"]
    assert [(c.agent_id, c.action, c.job_id) for c in orch.state.agent_calls] == [
        (ids.AGENT_COMPLETED, "cancel", ids.JOB_COMPLETED)
    ]


def test_cancel_skips_an_offline_agent_and_ignores_an_unreachable_one(orch):
    assert send(orch, "PUT", f"/api/jobs/{ids.JOB_STUCK_CREATOR}/cancel")[0] == 200  # offline agent
    assert orch.state.agent_calls == []
    assert send(orch, "PUT", f"/api/jobs/{ids.JOB_FAILED_UNREACHABLE}/cancel")[0] == 200
    assert [c.outcome for c in orch.state.agent_calls] == ["unreachable"]
    assert job(orch, ids.JOB_FAILED_UNREACHABLE)["status"] == "cancelled"


def test_resume_picks_the_ready_agent_with_the_latest_heartbeat_when_its_own_failed(orch):
    status, body = send(
        orch, "POST", f"/api/jobs/{ids.JOB_FAILED}/resume", body={"feedback": "Read in chunks."}
    )
    assert (status, body["agent_id"]) == (200, ids.AGENT_READY)
    (call,) = orch.state.agent_calls
    assert (call.action, call.payload["feedback"]) == ("resume", "Read in chunks.")
    after = job(orch, ids.JOB_FAILED)
    assert (after["status"], after["assigned_agent_id"]) == ("processing", ids.AGENT_READY)


def test_resume_honours_an_explicit_agent_and_accepts_a_completed_one(orch):
    status, body = send(
        orch, "POST", f"/api/jobs/{ids.JOB_FAILED}/resume", body={"agent_id": ids.AGENT_COMPLETED}
    )
    assert (status, body["agent_id"]) == (200, ids.AGENT_COMPLETED)
    assert "feedback" not in orch.state.agent_calls[0].payload


def test_resume_without_a_body_and_with_an_invalid_one(orch):
    assert send(orch, "POST", f"/api/jobs/{ids.JOB_CANCELLED}/resume")[0] == 200
    status, body = send(orch, "POST", f"/api/jobs/{ids.JOB_FAILED}/resume", raw_body=b"{not json")
    assert status == 422 and body["detail"][0]["type"] == "json_invalid"
    status, body = send(orch, "POST", f"/api/jobs/{ids.JOB_FAILED}/resume", body=["a"])
    assert status == 422 and body["detail"][0]["loc"] == ["body"]


def test_approve_writes_the_completion_removes_the_frozen_file_and_completes(orch):
    status, body = send(
        orch, "POST", f"/api/jobs/{ids.JOB_PENDING_REVIEW}/approve", body={"notes": "ok"}
    )
    assert status == 200 and body["approved_at"].endswith("+00:00")
    status, completion = send(
        orch, "GET", f"/api/jobs/{ids.JOB_PENDING_REVIEW}/workspace/output/job_completion.json"
    )
    assert status == 200 and '"reviewer_notes": "ok"' in completion["content"]
    assert send(orch, "GET", f"/api/jobs/{ids.JOB_PENDING_REVIEW}/frozen")[0] == 404
    assert orch.state.jobs[ids.JOB_PENDING_REVIEW].completed_at is not None
    assert job(orch, ids.JOB_PENDING_REVIEW)["status"] == "completed"


def test_freeze_job_makes_any_job_approvable(orch):
    frozen = orch.state.freeze_job(ids.JOB_PROCESSING, summary="Done.", deliverables=("a.md",))
    status, body = send(orch, "GET", f"/api/jobs/{ids.JOB_PROCESSING}/frozen")
    assert (status, body) == (200, frozen)
    status, body = send(orch, "POST", f"/api/jobs/{ids.JOB_PROCESSING}/approve")
    assert (status, body["summary"], body["deliverables"]) == (200, "Done.", ["a.md"])


def test_delete_cascades_like_the_foreign_keys(orch):
    job_id = ids.JOB_PROCESSING
    assert send(orch, "DELETE", f"/api/jobs/{job_id}")[0] == 200
    state = orch.state
    assert not [r for r in state.requirements.values() if r.job_id == job_id]
    assert not [c for c in state.citations.values() if c.job_id == job_id]
    assert not [s for j, s in state.job_sources if j == job_id]
    assert [a for a in state.annotations.values() if a.job_id == job_id]  # no foreign key
    assert (job_id, 1) in state.tags
    status, body = send(orch, "GET", f"/api/jobs/{job_id}/citations")
    assert (status, body) == (200, {"citations": [], "total": 0})
    assert send(orch, "DELETE", f"/api/jobs/{ids.JOB_CREATED}")[0] == 200
    assert ids.DS_JOB_POSTGRES not in state.datasources


def test_list_jobs_bounds_and_filters(orch):
    assert send(orch, "GET", "/api/jobs", {"limit": 500})[0] == 200
    status, body = send(orch, "GET", "/api/jobs", {"limit": "ten"})
    assert status == 422 and body["detail"][0]["type"] == "int_parsing"
    status, body = send(orch, "GET", "/api/jobs", {"status": "pending_review", "limit": 100})
    assert {j["id"] for j in body} == {ids.JOB_PENDING_REVIEW, ids.JOB_REVIEW_NO_FROZEN}


def test_job_stats_leave_out_pending_review_but_count_it(orch):
    orch.state.set_job_status(ids.JOB_POSTMORTEM, "pending_review")
    stats = send(orch, "GET", "/api/stats/jobs")[1]
    assert "pending_review" not in stats
    assert stats["total_jobs"] - sum(v for k, v in stats.items() if k != "total_jobs") == 3


def test_stuck_jobs_follow_the_clock():
    clock = Clock(frozen=True)
    with FakeOrchestrator(clock=clock) as api:
        stuck = send(api, "GET", "/api/stats/stuck", {"threshold_minutes": 30})[1]
        assert ids.JOB_PROCESSING not in [j["id"] for j in stuck]
        clock.advance(3600)
        stuck = send(api, "GET", "/api/stats/stuck", {"threshold_minutes": 30})[1]
        assert ids.JOB_PROCESSING in [j["id"] for j in stuck]
        status, body = send(api, "GET", "/api/stats/stuck", {"threshold_minutes": 1441})
        assert status == 422 and body["detail"][0]["ctx"] == {"le": 1440}


def test_malformed_ids_are_answered_per_endpoint_as_the_api_does(orch):
    assert send(orch, "GET", "/api/jobs/nope/progress") == (404, {"detail": "Job 'nope' not found"})
    assert send(orch, "GET", "/api/jobs/nope/requirements") == (
        200,
        {"requirements": [], "total": 0},
    )
    status, body = send(orch, "GET", "/api/jobs/nope/citations/stats")
    assert status == 500 and "invalid input for query argument $1: 'nope'" in body["detail"]
    assert send(orch, "GET", "/api/datasources", {"job_id": "nope"})[0] == 500
    status, body = send(orch, "GET", "/api/jobs/" + "z" * 32 + "/sources/1/tags")
    assert status == 500 and body["detail"].endswith("unexpected character)")


def test_routing_as_starlette_does_it(orch):
    assert send(orch, "DELETE", "/api/health") == (405, {"detail": "Method Not Allowed"})
    assert send(orch, "GET", "/api/nowhere") == (404, {"detail": "Not Found"})
    resp = httpx.get(orch.url + "/api/jobs/?limit=2", follow_redirects=False)
    assert resp.status_code == 307 and resp.headers["location"].endswith("/api/jobs?limit=2")
    assert httpx.get(orch.url + "/api/jobs/?limit=2", follow_redirects=True).status_code == 200
    status, body = send(orch, "GET", f"/api/jobs/{ids.JOB_PROCESSING}/todos/archives/a%2Fb.md")
    assert (status, body) == (404, {"detail": "Not Found"})


def test_gitea_routes_validate_then_answer_503(orch):
    path = f"/api/jobs/{ids.JOB_PROCESSING}/repo"
    assert send(orch, "GET", f"{path}/tags") == (503, {"detail": "Gitea not available"})
    assert send(orch, "GET", f"{path}/file")[0] == 422
    assert send(orch, "GET", f"{path}/commits", {"limit": 101})[0] == 422


def test_datasource_tests_answer_per_type_or_as_set(orch):
    assert send(orch, "POST", f"/api/datasources/{ids.DS_POSTGRES}/test")[1]["status"] == "ok"
    assert send(orch, "POST", f"/api/datasources/{ids.DS_NEO4J}/test")[1]["status"] == "error"
    ds = orch.state.add_datasource(
        "x",
        "postgresql",
        "postgresql://h/db",
        job_id=ids.JOB_SCRATCH,
        test_result=("error", "timeout"),
    )
    assert send(orch, "POST", f"/api/datasources/{ds.id}/test")[1] == {
        "status": "error",
        "message": "timeout",
    }


def test_an_empty_fake_has_no_rows_but_its_experts():
    with FakeOrchestrator(seed=False) as api:
        assert send(api, "GET", "/api/jobs")[1] == []
        assert {t["rowCount"] for t in send(api, "GET", "/api/tables")[1]} == {0}
        assert send(api, "GET", "/api/experts")[1][0]["id"] == "defaults"


@pytest.mark.parametrize("mode", ["error", "null", "garbage"])
def test_the_fake_has_the_core_fault_modes(orch, mode):
    orch.mode = mode
    resp = httpx.get(orch.url + "/api/health")
    assert resp.status_code == (500 if mode == "error" else 200)
    assert resp.content != b'{"status":"ok"}'
