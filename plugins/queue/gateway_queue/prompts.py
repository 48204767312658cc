"""The job-search pipeline's triage step as a prompt (requirement documents 000 and 001):
read new jobs in batches, decide each, write the decisions, repeat. Scraping is proposed first
only when this deployment offers it; read-only deployments report decisions instead."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gateway import PromptContext, PromptSpec


class TriageArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    batch_size: int = Field(
        15, ge=1, le=100, description="Jobs per batch (descriptions are ~3 KB; 10-20 fits)."
    )


def triage_new_jobs(args: TriageArgs, ctx: PromptContext) -> str:
    steps = []
    if ctx.has("scrape_jobs") and not ctx.read_only:
        steps.append(
            "If the user wants fresh postings first, propose scrape_jobs with their search terms "
            "and call it once they confirm."
        )
    steps += [
        f"bulk_read_new_jobs(limit={args.batch_size}): the next batch of new jobs. Judge each "
        "by title, company, location and description against what the user is looking for.",
        "Decide per job: shortlist (worth applying), reviewed (seen, keep for later) or reject "
        "(not a fit), with a one-line reason.",
    ]
    if ctx.has("bulk_update_job_status"):
        steps.append(
            'bulk_update_job_status(updates=[{"id": <id>, "status": "<decision>", "notes": '
            '"<reason>"}, ...]) for the whole batch (all or nothing; it asks the user to '
            "confirm)."
        )
    else:
        steps.append(
            "Report the decisions as a table (id, title, decision, reason); this gateway "
            "offers no tool to write them."
        )
    steps.append(
        "While has_more is true, call bulk_read_new_jobs again with cursor=next_cursor and "
        "repeat; stop when the user has seen enough. End with a count per decision and the "
        "shortlist."
    )
    body = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    return f"Triage the new jobs in the queue, {args.batch_size} at a time.\n\n{body}"


def prompts() -> list[PromptSpec]:
    return [
        PromptSpec(
            name="triage_new_jobs",
            title="Triage new jobs",
            description="Read new job postings in batches, decide each, write the statuses.",
            arguments=TriageArgs,
            render=triage_new_jobs,
            requires=("bulk_read_new_jobs",),
        )
    ]
