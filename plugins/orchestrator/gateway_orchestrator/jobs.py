"""Tools of the orchestrator plugin: the job lifecycle (list, read, create, assign, resume, cancel, approve, delete)
and the datasource probe.

What the gateway adds over the API: ids checked before any request; ``list_jobs`` filters by
the statuses the database really uses and says whether more jobs match; ``cancel_job`` and
``delete_job`` read the job first (the API signals a job's agent even when it then refuses the
cancel, and deleting says nothing about what was deleted); ``create_job`` says when
``config_name`` names no expert config; every refusal of the API becomes ``CONFLICT`` with its
reason, a missing job or agent ``NOT_FOUND``, an unreachable agent pod ``BACKEND_ERROR``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, Field, RootModel

from gateway import Args, ErrorCode, GatewayError, Mutation, Tier
from gateway.rest import Failure, RestContext, RestTool, Route, UtcTimestamp, gather

from .backend import COCKPIT, AgentId, DatasourceId, JobId
from .lookup import JOB, NO_JOB, no_job, read_job
from .models import JOB_STATUSES, Job, JobArgs, JobStatus, JobSummary, TodoList

# --- list_jobs ---------------------------------------------------------------------------------


class ListJobsArgs(Args):
    status: JobStatus | None = Field(None, description="Only jobs in this status.")
    limit: int = Field(20, ge=1, le=100, description="Most jobs to return.")


class JobList(BaseModel):
    jobs: list[JobSummary]
    total: int | None = Field(description="jobs matching the filter; null if not counted")
    has_more: bool = Field(description="more jobs match than shown: raise limit")


class _JobRows(RootModel[list[JobSummary]]):
    pass


JOBS = Route("GET", "/api/jobs", query=("limit", "status"), what="the jobs")
JOB_COUNTS = Route("GET", "/api/stats/jobs", what="the job counts")


async def list_jobs(args: ListJobsArgs, ctx: RestContext[Any]) -> JobList:
    jobs = (await ctx.fetch(JOBS, _JobRows, args)).root
    if len(jobs) < args.limit:
        return JobList(jobs=jobs, total=len(jobs), has_more=False)
    # A full page: the API has no total (and no offset), its job statistics do.
    total = await _count_jobs(ctx, args.status)
    return JobList(jobs=jobs, total=total, has_more=total is None or total > len(jobs))


async def _count_jobs(ctx: RestContext[Any], status: str | None) -> int | None:
    try:
        stats = await ctx.send(JOB_COUNTS, {})
    except GatewayError:
        return None  # the list itself is fine; only the count is unknown
    if not isinstance(stats, dict):
        return None
    counts = {k: v for k, v in stats.items() if isinstance(v, int) and not isinstance(v, bool)}
    key = "total_jobs" if status is None else status
    if key in counts:
        return counts[key]
    if key == "pending_review" and "total_jobs" in counts:
        # The statistics leave pending_review out, but their total counts those jobs.
        others = sum(counts.get(s, 0) for s in JOB_STATUSES if s != "pending_review")
        return counts["total_jobs"] - others
    return None


# --- get_job, get_todos ------------------------------------------------------------------------


class Archive(BaseModel):
    filename: str
    phase_name: str | None = None
    timestamp: UtcTimestamp | None = None
    path: str


class Todos(BaseModel):
    job_id: str
    has_workspace: bool
    current: TodoList | None = None
    archives: list[Archive] = Field(default_factory=list)


TODOS = Route("GET", "/api/jobs/{job_id}/todos", what="the todos of job {job_id}")


async def get_todos(args: JobArgs, ctx: RestContext[Any]) -> Todos:
    todos = await ctx.fetch(TODOS, Todos, args)
    if not todos.has_workspace:
        await read_job(ctx, args.job_id)  # the API answers an unknown job the same way
    return todos


# --- actions -----------------------------------------------------------------------------------


def _approve_404(f: Failure) -> GatewayError:
    job_id = f.values.get("job_id", "")
    if "frozen" in f.reason:
        return GatewayError(
            ErrorCode.NOT_FOUND,
            f"job {job_id} has no frozen result (output/job_frozen.json) to approve; "
            "resume_job_with_feedback sends it back to an agent",
        )
    return no_job(job_id)


def _assign_404(f: Failure) -> GatewayError:
    if f.reason.startswith("Agent"):
        agent = f.values.get("agent_id", "")
        return GatewayError(ErrorCode.NOT_FOUND, f"no agent {agent}; list_agents shows the ids")
    return no_job(str(f.values.get("job_id", "")))


def _refused(then: str) -> Callable[[Failure], GatewayError]:
    """The rule for the API's 400: its reason (which names the state), then what to do."""

    def rule(f: Failure) -> GatewayError:
        tail = then.format(job_id=f.values.get("job_id", ""))
        return GatewayError(ErrorCode.CONFLICT, f"{f.reason.rstrip('.') or f.what}: {tail}")

    return rule


def _unreachable(done: str) -> tuple[ErrorCode, str]:
    """The rule for the API's 502: the agent's pod refused the connection or the request."""
    return (
        ErrorCode.BACKEND_ERROR,
        "the agent could not be reached, or refused ({reason}); job {job_id} was not "
        f"{done}. Retry later, or use another agent (list_agents(status='ready'))",
    )


class Approved(BaseModel):
    status: str
    job_id: str
    summary: str = ""
    deliverables: list[Any] = Field(default_factory=list)
    approved_at: UtcTimestamp | None = None


class Assigned(BaseModel):
    status: str
    job_id: str
    agent_id: str


class AssignArgs(Args):
    job_id: JobId
    agent_id: AgentId


class ResumeArgs(Args):
    job_id: JobId
    feedback: str | None = Field(
        None, min_length=1, max_length=20_000, description="Guidance added to the agent's context."
    )


class Resumed(BaseModel):
    status: str
    job_id: str
    agent_id: str = Field(description="the agent now working on the job")


RESUME = Route(
    "POST",
    "/api/jobs/{job_id}/resume",
    body=("feedback",),
    what="resuming job {job_id}",
    status={
        400: _refused(
            "job {job_id} was not resumed; get_job shows its status, list_agents the "
            "agents' (the job's own agent is used, else a ready one)"
        ),
        404: NO_JOB,
        502: _unreachable("resumed"),
    },
)
# No feedback: no body at all, as the API's own client sends it.
RESUME_BARE = replace(RESUME, body=None)


async def resume_job_with_feedback(args: ResumeArgs, ctx: RestContext[Any]) -> Resumed:
    return await ctx.fetch(RESUME_BARE if args.feedback is None else RESUME, Resumed, args)


class Changed(BaseModel):
    """What a cancel or delete did, and the job as it was just before."""

    status: str
    job_id: str
    previous_status: str
    assigned_agent_id: str | None = None
    warning: str | None = None


class _Answer(BaseModel):
    status: str


CANCEL = Route(
    "PUT",
    "/api/jobs/{job_id}/cancel",
    what="cancelling job {job_id}",
    status={400: _refused("job {job_id} changed state meanwhile; get_job shows it"), 404: NO_JOB},
)


async def cancel_job(args: JobArgs, ctx: RestContext[Any]) -> Changed:
    job = await read_job(ctx, args.job_id)
    if job.status in ("completed", "cancelled"):
        # Checked here: the API would signal the agent before refusing.
        raise GatewayError(
            ErrorCode.CONFLICT,
            f"job {args.job_id} is already {job.status}; nothing to cancel (nothing was sent)",
        )
    done = await ctx.fetch(CANCEL, _Answer, args)
    return Changed(
        status=done.status,
        job_id=args.job_id,
        previous_status=job.status,
        assigned_agent_id=job.assigned_agent_id,
    )


DELETE = Route("DELETE", "/api/jobs/{job_id}", what="deleting job {job_id}", status={404: NO_JOB})


async def delete_job(args: JobArgs, ctx: RestContext[Any]) -> Changed:
    job = await read_job(ctx, args.job_id)
    done = await ctx.fetch(DELETE, _Answer, args)
    warning = None
    if job.status == "processing":
        warning = (
            f"the job was processing: its agent ({job.assigned_agent_id or 'unknown'}) was not "
            "told to stop and may be orphaned; list_agents shows it"
        )
    return Changed(
        status=done.status,
        job_id=args.job_id,
        previous_status=job.status,
        assigned_agent_id=job.assigned_agent_id,
        warning=warning,
    )


# --- create_job --------------------------------------------------------------------------------


class CreateJobArgs(Args):
    description: str = Field(min_length=1, max_length=20_000, description="The task.")
    config_name: str = Field(
        "defaults", min_length=1, max_length=100, description="Expert config (list_experts)."
    )
    datasource_ids: list[DatasourceId] | None = Field(
        None, max_length=20, description="Global datasources to copy into the job."
    )
    instructions: str | None = Field(
        None, min_length=1, max_length=100_000, description="Extra markdown instructions."
    )
    config_override: dict[str, Any] | None = Field(None, description="Per-job config overrides.")
    context: dict[str, Any] | None = Field(None, description="Extra context.")


class CreatedJob(BaseModel):
    id: str
    status: str
    description: str
    config_name: str | None = None
    creator_status: str | None = None
    validator_status: str | None = None
    assigned_agent_id: str | None = None
    created_at: UtcTimestamp | None = None
    updated_at: UtcTimestamp | None = None
    warnings: list[str] = Field(default_factory=list)


CREATE = Route(
    "POST",
    "/api/jobs",
    body=(
        "description",
        "config_name",
        "datasource_ids",
        "instructions",
        "config_override",
        "context",
    ),
    what="the new job",
)
EXPERT_IDS = Route("GET", "/api/experts", what="the expert configs")


async def create_job(args: CreateJobArgs, ctx: RestContext[Any]) -> CreatedJob:
    async def create() -> CreatedJob:
        return await ctx.fetch(CREATE, CreatedJob, args)

    async def experts() -> list[str] | None:
        try:
            listed = await ctx.send(EXPERT_IDS, {})
        except GatewayError:
            return None
        if not isinstance(listed, list):
            return None
        return [e["id"] for e in listed if isinstance(e, dict) and isinstance(e.get("id"), str)]

    # The API does not check config_name; the expert list is read alongside, not before.
    job, known = await gather((create, experts))
    if known is None:
        job.warnings.append("config_name could not be checked: the expert list did not load")
    elif args.config_name not in known:
        job.warnings.append(
            f"config_name {args.config_name!r} names no expert config (there are: "
            f"{', '.join(known)}); the API accepted it. If that was a mistake, delete_job and "
            "create it again"
        )
    return job


# --- test_datasource ---------------------------------------------------------------------------


class DatasourceArgs(Args):
    datasource_id: DatasourceId


class DatasourceTest(BaseModel):
    datasource_id: str
    ok: bool
    status: str = Field(description="ok or error")
    message: str


class _TestAnswer(BaseModel):
    status: str
    message: str = ""


TEST_DATASOURCE = Route(
    "POST",
    "/api/datasources/{datasource_id}/test",
    what="the test of datasource {datasource_id}",
    status={404: "no datasource {datasource_id}; list_datasources shows the ids"},
)


async def test_datasource(args: DatasourceArgs, ctx: RestContext[Any]) -> DatasourceTest:
    answer = await ctx.fetch(TEST_DATASOURCE, _TestAnswer, args)
    return DatasourceTest(
        datasource_id=args.datasource_id,
        ok=answer.status == "ok",
        status=answer.status,
        # A driver's error text may carry a connection string: cleaned, and bounded.
        message=ctx.sanitize(answer.message)[:1000],
    )


# --- the specs ---------------------------------------------------------------------------------

APPROVE = Route(
    "POST",
    "/api/jobs/{job_id}/approve",
    what="approving job {job_id}",
    status={
        400: _refused("job {job_id} was not approved; get_job shows its status"),
        404: _approve_404,
    },
)
ASSIGN = Route(
    "POST",
    "/api/jobs/{job_id}/assign/{agent_id}",
    what="assigning job {job_id}",
    status={
        400: _refused("job {job_id} was not assigned; get_job and list_agents show the states"),
        404: _assign_404,
        502: _unreachable("started"),
    },
)

TOOLS = (
    RestTool(
        name="list_jobs",
        description="Orchestrator jobs, newest first.",
        input_model=ListJobsArgs,
        output_model=JobList,
        tier=Tier.READ,
        backend=COCKPIT,
        run=list_jobs,
    ),
    RestTool(
        name="get_job",
        description="One job: statuses, config, assigned agent, context.",
        input_model=JobArgs,
        output_model=Job,
        tier=Tier.READ,
        backend=COCKPIT,
        route=JOB,
    ),
    RestTool(
        name="get_todos",
        description="A job's current todos (counted by status) and archived todo lists.",
        input_model=JobArgs,
        output_model=Todos,
        tier=Tier.READ,
        backend=COCKPIT,
        run=get_todos,
    ),
    RestTool(
        name="approve_job",
        description="Accept the result of a frozen job (review it first: get_frozen_job).",
        input_model=JobArgs,
        output_model=Approved,
        tier=Tier.MUTATION,
        mutation=Mutation(
            consequence="marks the job completed, writes output/job_completion.json and "
            "removes the frozen result",
            requires="status pending_review with a frozen result",
            reversible=False,
            destructive=True,
            idempotent=True,
        ),
        backend=COCKPIT,
        route=APPROVE,
    ),
    RestTool(
        name="resume_job_with_feedback",
        description="Send a job back to an agent, with feedback on what to change.",
        input_model=ResumeArgs,
        output_model=Resumed,
        tier=Tier.MUTATION,
        mutation=Mutation(
            consequence="an agent works on the job again (status processing), the feedback "
            "in its context",
            requires="status not completed; the job's agent or another one ready",
            reversible=False,
            destructive=False,
            idempotent=False,
        ),
        backend=COCKPIT,
        run=resume_job_with_feedback,
    ),
    RestTool(
        name="cancel_job",
        description="Stop a job and its agent.",
        input_model=JobArgs,
        output_model=Changed,
        tier=Tier.MUTATION,
        mutation=Mutation(
            consequence="sets the job cancelled and tells its agent to stop; work in "
            "progress is lost",
            requires="status not completed or cancelled",
            reversible=False,
            destructive=True,
            idempotent=True,
        ),
        backend=COCKPIT,
        run=cancel_job,
    ),
    RestTool(
        name="create_job",
        description="Create a job for an agent (assign_job starts it).",
        input_model=CreateJobArgs,
        output_model=CreatedJob,
        tier=Tier.MUTATION,
        mutation=Mutation(
            consequence="adds a job in status created",
            requires="nothing",
            reversible=True,
            destructive=False,
            idempotent=False,
        ),
        backend=COCKPIT,
        run=create_job,
    ),
    RestTool(
        name="delete_job",
        description="Delete a job. A processing job's agent is not stopped and may be "
        "orphaned: cancel_job first.",
        input_model=JobArgs,
        output_model=Changed,
        tier=Tier.MUTATION,
        mutation=Mutation(
            consequence="deletes the job with its requirements, citations and job-scoped "
            "datasources",
            requires="the job exists, in any status",
            reversible=False,
            destructive=True,
            idempotent=True,
        ),
        backend=COCKPIT,
        run=delete_job,
    ),
    RestTool(
        name="assign_job",
        description="Start a job on an agent.",
        input_model=AssignArgs,
        output_model=Assigned,
        tier=Tier.MUTATION,
        mutation=Mutation(
            consequence="the agent starts the job (job processing, agent working)",
            requires="job created or failed; agent ready",
            reversible=False,
            destructive=False,
            idempotent=True,
        ),
        backend=COCKPIT,
        route=ASSIGN,
    ),
    RestTool(
        name="test_datasource",
        description="Check that a datasource can be reached.",
        input_model=DatasourceArgs,
        output_model=DatasourceTest,
        tier=Tier.READ,
        backend=COCKPIT,
        run=test_datasource,
    ),
)
