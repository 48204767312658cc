"""Jobs and actions: list/get/create/delete, cancel, resume, approve, assign, frozen data,
datasource tests, health, and the Gitea proxy routes (503 without Gitea).

The state machine follows the API's code paths as recorded: assign needs a ``created``/``failed``
job and a ``ready`` agent; resume refuses only ``completed`` and picks the assigned agent unless
it is offline or failed, else the ready agent with the latest heartbeat; cancel signals the
assigned agent *before* its own status check; approve needs ``pending_review`` and a frozen file.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from .api import ApiError, Body, Call, Query, Router, not_found
from .model import Agent, AgentCall, Job, iso_offset, iso_z, jsonb_text, parse_uuid
from .state import State

router = Router()

POD_UNREACHABLE = "All connection attempts failed"


def job_or_404(state: State, job_id: str) -> Job:
    key = parse_uuid(job_id)
    job = state.jobs.get(key) if key else None
    if job is None:
        raise not_found(f"Job '{job_id}'")
    return job


def find_agent(state: State, agent_id: str | None) -> Agent | None:
    key = parse_uuid(agent_id) if agent_id else None
    return state.agents.get(key) if key else None


def audit_count(state: State, job_id: str) -> int | None:
    if not state.mongo:
        return None
    return sum(1 for e in state.audit if e["job_id"] == job_id)


def job_summary(state: State, job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "description": job.description,
        "status": job.status,
        "creator_status": job.creator_status,
        "validator_status": job.validator_status,
        "config_name": job.config_name,
        "assigned_agent_id": job.assigned_agent_id,
        "created_at": iso_z(job.created_at),
        "audit_count": audit_count(state, job.id),
    }


def job_detail(state: State, job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "status": job.status,
        "creator_status": job.creator_status,
        "validator_status": job.validator_status,
        "config_name": job.config_name,
        "config_override": jsonb_text(job.config_override),
        "assigned_agent_id": job.assigned_agent_id,
        "created_at": iso_z(job.created_at),
        "updated_at": iso_z(job.updated_at),
        "description": job.description,
        "context": jsonb_text(job.context),
        "audit_count": audit_count(state, job.id),
    }


def call_pod(
    state: State, agent: Agent, action: str, job_id: str, payload: dict[str, Any]
) -> str | None:
    """POST /job/<action> to the agent's pod: None when accepted, else why not."""
    if not agent.reachable:
        outcome, problem = "unreachable", POD_UNREACHABLE
    elif agent.rejects_with is not None:
        outcome, problem = "rejected", agent.rejects_with
    else:
        outcome, problem = "accepted", None
    state.agent_calls.append(AgentCall(agent.id, action, job_id, payload, outcome))
    return problem


def start_work(state: State, job: Job, agent: Agent, **job_fields: Any) -> None:
    """Job → processing on ``agent``; the agent → working (the API's heartbeat simulation)."""
    now = state.now()
    job.status = "processing"
    job.assigned_agent_id = agent.id
    for name, value in job_fields.items():
        setattr(job, name, value)
    job.updated_at = now
    agent.status = "working"
    agent.current_job_id = job.id
    agent.last_heartbeat = now


@router.get("/api/health")
def health(call: Call) -> Any:
    return {"status": "ok"}


class ListJobs(Query):
    status: str | None = None
    limit: int = Field(100, ge=1, le=500)


@router.get("/api/jobs", query=ListJobs)
def list_jobs(call: Call) -> Any:
    q: ListJobs = call.query
    jobs = sorted(call.state.jobs.values(), key=lambda j: j.created_at, reverse=True)
    if q.status:
        jobs = [j for j in jobs if j.status == q.status]
    return [job_summary(call.state, j) for j in jobs[: q.limit]]


@router.get("/api/jobs/{job_id}")
def get_job(call: Call) -> Any:
    return job_detail(call.state, job_or_404(call.state, call.path["job_id"]))


class CreateJob(Body):
    description: str
    upload_id: str | None = None
    config_upload_id: str | None = None
    instructions_upload_id: str | None = None
    document_path: str | None = None
    document_dir: str | None = None
    config_name: str = "default"
    config_override: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    instructions: str | None = None
    datasource_ids: list[str] | None = None
    builder_session_id: str | None = None


@router.post("/api/jobs", body=CreateJob)
def create_job(call: Call) -> Any:
    body: CreateJob = call.body
    state = call.state
    context = dict(body.context or {})
    for name in ("upload_id", "config_upload_id", "instructions_upload_id", "instructions"):
        if getattr(body, name):
            context[name] = getattr(body, name)
    job = state.add_job(
        body.description,
        config_name=body.config_name,
        config_override=body.config_override or None,
        context=context or None,
        document_path=body.document_path or body.document_dir,
    )
    # Selected global datasources are cloned into the job's scope; anything else is skipped
    # (the API only logs it), and so is a second one of a type (the scope allows one per type).
    for ds_id in body.datasource_ids or []:
        key = parse_uuid(ds_id)
        ds = state.datasources.get(key) if key else None
        taken = {d.type for d in state.datasources.values() if d.job_id == job.id}
        if ds is None or ds.job_id is not None or ds.type in taken:
            continue
        state.add_datasource(
            ds.name,
            ds.type,
            ds.connection_url,
            job_id=job.id,
            description=ds.description,
            credentials=dict(ds.credentials),
            read_only=ds.read_only,
        )
    return {
        "id": job.id,
        "status": job.status,
        "creator_status": job.creator_status,
        "validator_status": job.validator_status,
        "config_name": job.config_name,
        "assigned_agent_id": None,
        "created_at": iso_z(job.created_at),
        "updated_at": iso_z(job.updated_at),
        "description": job.description,
    }


@router.delete("/api/jobs/{job_id}")
def delete_job(call: Call) -> Any:
    state = call.state
    job = job_or_404(state, call.path["job_id"])
    # The foreign keys cascade to requirements, citations, job_sources and job-scoped
    # datasources; source_annotations and source_tags have none and stay.
    del state.jobs[job.id]
    for req_id in [k for k, r in state.requirements.items() if r.job_id == job.id]:
        del state.requirements[req_id]
    for cite_id in [k for k, c in state.citations.items() if c.job_id == job.id]:
        del state.citations[cite_id]
    for ds_id in [k for k, d in state.datasources.items() if d.job_id == job.id]:
        del state.datasources[ds_id]
    state.job_sources[:] = [(j, s) for j, s in state.job_sources if j != job.id]
    return {"status": "deleted"}


@router.put("/api/jobs/{job_id}/cancel")
def cancel_job(call: Call) -> Any:
    state = call.state
    job = job_or_404(state, call.path["job_id"])
    agent = find_agent(state, job.assigned_agent_id)
    if agent is not None and agent.pod_ip and agent.status != "offline":
        # Signalled before the status check below, so a refused cancel still reaches the
        # agent; an unreachable pod does not stop the cancel.
        call_pod(state, agent, "cancel", job.id, {"reason": "Cancelled via cockpit"})
    if job.status in ("completed", "cancelled"):
        raise ApiError(400, "Job cannot be cancelled (already completed or cancelled)")
    job.status = "cancelled"
    job.updated_at = state.now()
    return {"status": "cancelled"}


class Resume(Body):
    feedback: str | None = None
    agent_id: str | None = None


@router.post("/api/jobs/{job_id}/resume", body=Resume, body_required=False)
def resume_job(call: Call) -> Any:
    state = call.state
    body: Resume = call.body or Resume()
    job = job_or_404(state, call.path["job_id"])
    if job.status == "completed":
        raise ApiError(400, f"Job cannot be resumed (status: {job.status}).")
    agent = find_agent(state, body.agent_id or job.assigned_agent_id)
    if agent is None or agent.status in ("offline", "failed"):
        ready = sorted(
            (a for a in state.agents.values() if a.status == "ready"),
            key=lambda a: a.last_heartbeat,
            reverse=True,
        )
        if not ready:
            raise ApiError(400, "No ready agents available to resume job.")
        agent = ready[0]
    if agent.status not in ("ready", "completed"):
        raise ApiError(400, f"Agent is not ready (status: {agent.status})")
    if not agent.pod_ip:
        raise ApiError(400, "Agent has no pod IP configured")
    payload: dict[str, Any] = {"job_id": job.id, "config_name": job.config_name}
    if body.feedback:
        payload["feedback"] = body.feedback
    problem = call_pod(state, agent, "resume", job.id, payload)
    if problem == POD_UNREACHABLE:
        raise ApiError(502, f"Failed to connect to agent: {problem}. Agent may be offline.")
    if problem is not None:
        raise ApiError(502, f"Agent rejected resume request: {problem}")
    start_work(state, job, agent)
    return {"status": "resumed", "job_id": call.path["job_id"], "agent_id": agent.id}


class Approve(Body):
    notes: str | None = None


FROZEN = "output/job_frozen.json"


def read_frozen(state: State, job_id: str) -> dict[str, Any] | None:
    # Gitea is absent in this fake, as when recorded: the local workspace is the only place.
    file = state.files.get(f"job_{job_id}/{FROZEN}")
    return None if file is None else dict(json.loads(file.content))


@router.post("/api/jobs/{job_id}/approve", body=Approve, body_required=False)
def approve_job(call: Call) -> Any:
    state = call.state
    job_id = call.path["job_id"]
    body: Approve = call.body or Approve()
    job = job_or_404(state, job_id)
    if job.status != "pending_review":
        raise ApiError(
            400,
            f"Job cannot be approved (status: {job.status}). "
            "Only jobs in 'pending_review' status can be approved.",
        )
    frozen = read_frozen(state, job.id)
    if frozen is None:
        raise ApiError(
            404,
            f"No job_frozen.json found for job '{job_id}' (checked Gitea repo and local workspace)",
        )
    now = state.now()
    completion = {
        **frozen,
        "status": "job_completed",
        "approved_at": iso_offset(now),
        "approved_by": "human_operator",
    }
    if body.notes:
        completion["reviewer_notes"] = body.notes
    state.write_file(
        job.id, "output/job_completion.json", json.dumps(completion, indent=2, ensure_ascii=False)
    )
    state.delete_file(job.id, FROZEN)
    job.status = "completed"
    job.completed_at = job.updated_at = now
    return {
        "status": "approved",
        "job_id": job_id,
        "summary": completion.get("summary", ""),
        "deliverables": completion.get("deliverables", []),
        "approved_at": completion["approved_at"],
    }


@router.get("/api/jobs/{job_id}/frozen")
def frozen_job(call: Call) -> Any:
    job_id = call.path["job_id"]
    frozen = read_frozen(call.state, job_id)
    if frozen is None:
        raise ApiError(404, f"No frozen job data found for job '{job_id}'")
    return frozen


@router.post("/api/jobs/{job_id}/assign/{agent_id}")
def assign_job(call: Call) -> Any:
    state = call.state
    job = job_or_404(state, call.path["job_id"])
    if job.status not in ("created", "failed"):
        raise ApiError(400, f"Job cannot be assigned (status: {job.status})")
    agent_id = call.path["agent_id"]
    agent = find_agent(state, agent_id)
    if agent is None:
        raise not_found(f"Agent '{agent_id}'")
    if agent.status != "ready":
        raise ApiError(400, f"Agent is not ready (status: {agent.status})")
    if not agent.pod_ip:
        raise ApiError(400, "Agent has no pod IP configured")
    payload = {"job_id": job.id, "description": job.description, "config_name": job.config_name}
    problem = call_pod(state, agent, "start", job.id, payload)
    if problem == POD_UNREACHABLE:
        raise ApiError(502, f"Failed to connect to agent: {problem}")
    if problem is not None:
        raise ApiError(502, f"Agent rejected job: {problem}")
    start_work(state, job, agent, creator_status="pending")
    return {"status": "assigned", "agent_id": agent_id, "job_id": call.path["job_id"]}


TEST_RESULTS = {
    "postgresql": (
        "ok",
        "Connected: PostgreSQL 15.20 (Debian 15.20-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gc",
    ),
    # The orchestrator's requirements do not include the neo4j driver.
    "neo4j": ("error", "No module named 'neo4j'"),
    "mongodb": ("error", "127.0.0.1:27017: [Errno 111] Connection refused, Timeout: 5.0s"),
}


@router.post("/api/datasources/{datasource_id}/test")
def test_datasource(call: Call) -> Any:
    ds_id = call.path["datasource_id"]
    key = parse_uuid(ds_id)
    ds = call.state.datasources.get(key) if key else None
    if ds is None:
        raise not_found(f"Datasource '{ds_id}'")
    status, message = ds.test_result or TEST_RESULTS[ds.type]
    return {"status": status, "message": message}


# -- the Gitea proxy: Gitea is absent in this fake, as it was when recorded ------------------


class Commits(Query):
    sha: str = "main"
    since_ref: str | None = None
    page: int = Field(1, ge=1)
    limit: int = Field(20, ge=1, le=100)


class Diff(Query):
    base: str
    head: str = "HEAD"


class RepoFile(Query):
    path: str
    ref: str | None = None


class Contents(Query):
    path: str = ""
    ref: str | None = None


def no_gitea(call: Call) -> Any:
    raise ApiError(503, "Gitea not available")


for _template, _query in (
    ("/api/jobs/{job_id}/repo/contents", Contents),
    ("/api/jobs/{job_id}/repo/file", RepoFile),
    ("/api/jobs/{job_id}/repo/commits", Commits),
    ("/api/jobs/{job_id}/repo/diff", Diff),
    ("/api/jobs/{job_id}/repo/tags", None),
):
    router.get(_template, query=_query)(no_gitea)
