"""The orchestrator's workflows as prompts: reviewing a frozen job, a system health check and
creating a job (the requirements' "Frozen Job Review", "System Health Check" and "Job Creation"
workflows). Each names only tools this deployment offers: without the gitea plugin the review
reads workspace files instead of git history; read-only deployments get no mutation step."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gateway import PromptContext, PromptSpec

from .backend import JobId


class JobArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: JobId


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = Field(
        min_length=1, max_length=4000, description="What the new job should do, in plain words."
    )


def numbered(steps: list[str]) -> str:
    return "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))


def decision(ctx: PromptContext, *, mutations: list[str], otherwise: str) -> str:
    """The closing step: the mutations to propose (asked for one by one, as they need the
    user's confirmation), or what to do when the deployment cannot make them."""
    offered = [m for m in mutations if ctx.has(m.split("(", 1)[0])]
    if not offered:
        return f"Decide, but do not act: {otherwise} (this gateway offers no tool for it)."
    return (
        "Propose one of these to the user with your reasons, and call it only once they "
        "confirm: " + "; or ".join(offered) + "."
    )


def review_frozen_job(args: JobArgs, ctx: PromptContext) -> str:
    job = f'job_id="{args.job_id}"'
    steps = [
        f"get_frozen_job({job}): read the summary, confidence, deliverables and notes. "
        "A low confidence or vague deliverables are what to check hardest.",
    ]
    if ctx.has("list_job_tags", "get_job_diff", "get_job_file"):
        steps += [
            f"list_job_tags({job}): the phase history (phase_N_start/phase_N_end, job-frozen).",
            f'get_job_diff({job}, base="<the last phase_N_start>"): what the final phase '
            "changed; does it deliver what the summary claims?",
            f'get_job_file({job}, file_path="workspace.md") and file_path="plan.md": the '
            "agent's memory and plan; are the plan's goals met?",
        ]
    elif ctx.has("get_workspace_file"):
        steps += [
            f'get_workspace_file({job}, path="workspace.md") and path="plan.md": the agent\'s '
            "memory and plan (no git history in this deployment); are the plan's goals met?",
        ]
    if ctx.has("get_todos"):
        steps.append(f"get_todos({job}): open or skipped todos are unfinished work.")
    steps.append(
        decision(
            ctx,
            mutations=[
                f"approve_job({job}) when the deliverables are complete and sound",
                f'resume_job_with_feedback({job}, feedback="<what exactly to fix>") when not',
            ],
            otherwise="approve, or send back with the feedback you would give",
        )
    )
    return f"Review the frozen job {args.job_id} before it is approved.\n\n" + numbered(steps)


def system_health_check(args: NoArgs, ctx: PromptContext) -> str:
    steps = [
        "get_job_stats(): the queue by status; many failed or pending_review jobs need a look.",
    ]
    if ctx.has("get_stuck_jobs"):
        steps.append(
            "get_stuck_jobs(): processing jobs without progress, with the stuck component."
        )
    if ctx.has("list_agents"):
        steps.append('list_agents(status="ready"): the agents free to take work.')
    if ctx.has("list_jobs"):
        steps.append('list_jobs(status="created"): jobs waiting for an agent.')
    steps.append(
        decision(
            ctx,
            mutations=['assign_job(job_id="<created job>", agent_id="<ready agent>")'],
            otherwise="which created job should go to which ready agent",
        )
        + " Report stuck jobs and their components too."
    )
    return "Check the orchestrator's health and put idle agents to work.\n\n" + numbered(steps)


def create_job_guided(args: CreateArgs, ctx: PromptContext) -> str:
    steps = [
        "list_experts(): pick the expert config that fits the task above.",
        'get_expert(expert_id="<chosen id>"): check its tools and instructions fit.',
    ]
    if ctx.has("list_datasources"):
        steps.append(
            'list_datasources(type="<postgresql|neo4j|mongodb>"): datasources the job needs, '
            "if any (their UUIDs)."
        )
    create = 'create_job(description="<the task>", config_name="<expert id>"' + (
        ', datasource_ids=["<uuid>"])' if ctx.has("list_datasources") else ")"
    )
    steps.append(
        decision(
            ctx,
            mutations=[create],
            otherwise="the description, expert and datasources you would use",
        )
    )
    if ctx.has("assign_job", "list_agents"):
        steps += [
            'list_agents(status="ready"): an agent for it.',
            'Propose assign_job(job_id="<new job>", agent_id="<ready agent>"); call it once '
            "the user confirms.",
        ]
    return (
        "Create an orchestrator job for this task:\n\n"
        + " ".join(args.description.split())
        + "\n\n"
        + numbered(steps)
    )


PROMPTS = (
    PromptSpec(
        name="review_frozen_job",
        title="Review a frozen job",
        description="Review a job waiting in pending_review, then approve it or send it "
        "back with feedback.",
        arguments=JobArgs,
        render=review_frozen_job,
        requires=("get_frozen_job",),
    ),
    PromptSpec(
        name="system_health_check",
        title="Orchestrator health check",
        description="Job queue, stuck jobs and idle agents; assign waiting jobs.",
        arguments=NoArgs,
        render=system_health_check,
        requires=("get_job_stats",),
    ),
    PromptSpec(
        name="create_job_guided",
        title="Create a job, guided",
        description="Choose an expert config and datasources, create the job, assign it.",
        arguments=CreateArgs,
        render=create_job_guided,
        requires=("list_experts", "get_expert"),
        free_text="description",
    ),
)
