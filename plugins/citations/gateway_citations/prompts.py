"""The requirements' "Citation Verification" workflow as a prompt: from the statistics to the
failed citations, their sources and the evidence, to a decision on the job. The decision step
names the orchestrator's approve/resume tools only when this deployment offers them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gateway import PromptContext, PromptSpec

from .backend import JobId


class JobArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: JobId


def verify_citations(args: JobArgs, ctx: PromptContext) -> str:
    job = f'job_id="{args.job_id}"'
    steps = [
        f"get_citation_stats({job}): how many citations are verified, failed, pending.",
        f'list_job_citations({job}, verification_status="failed"): the failed ones (then '
        '"pending" and "unverified" if few failed).',
    ]
    # Each step names a tool this deployment offers (deny_tools may hide any of them).
    optional = [
        (
            "get_citation_detail",
            "get_citation_detail(citation_id=<id>) for each: the claim, the quote, the locator "
            "and why verification failed.",
        ),
        (
            "get_source_detail",
            "get_source_detail(source_id=<its source>): does the source text hold the quote?",
        ),
        (
            "search_job_sources",
            f'search_job_sources({job}, query="<the claim in a few words>"): is there better '
            "evidence? Look at each hit's evidence label and reason.",
        ),
        (
            "get_source_annotations",
            f"get_source_annotations({job}, source_id=<id>): what the agent noted on that source.",
        ),
    ]
    steps += [step for tool, step in optional if ctx.has(tool)]
    approve, resume = ctx.has("approve_job"), ctx.has("resume_job_with_feedback")
    if approve or resume:
        options = []
        if approve:
            options.append(f"approve_job({job}) if the citations hold")
        if resume:
            options.append(
                f'resume_job_with_feedback({job}, feedback="<which citations, what is wrong, '
                'what to re-check>") if not'
            )
        steps.append(
            "Propose to the user, with your reasons: "
            + "; or ".join(options)
            + ". Call it only once they confirm."
        )
    else:
        steps.append(
            "Report which citations hold and which do not, with the feedback the agent should "
            "get (this gateway offers no tool to approve or resume the job)."
        )
    body = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    return f"Verify the citations of job {args.job_id}.\n\n{body}"


PROMPTS = (
    PromptSpec(
        name="verify_citations",
        title="Verify a job's citations",
        description="Check a job's failed citations against their sources, then approve or send "
        "back.",
        arguments=JobArgs,
        render=verify_citations,
        requires=("get_citation_stats", "list_job_citations"),
    ),
)
