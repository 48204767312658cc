"""Reading a job before acting on it, and the wording every tool uses for a missing one.

Several endpoints answer an unknown job with an empty 200 (todos, workspace, requirements);
the tools then ask ``GET /api/jobs/{id}`` so the model hears "no such job", not "nothing yet".
"""

from __future__ import annotations

from typing import Any

from gateway import ErrorCode, GatewayError
from gateway.rest import RestContext, Route

from .models import Job

#: Status rule for a 404 on a job route (``{job_id}`` is the call's path parameter).
NO_JOB = "no job {job_id}; list_jobs shows the ids"

#: ``GET /api/jobs/{job_id}``: the ``get_job`` tool, and the check before acting on a job.
JOB = Route("GET", "/api/jobs/{job_id}", what="job {job_id}", status={404: NO_JOB})


def no_job(job_id: str) -> GatewayError:
    return GatewayError(ErrorCode.NOT_FOUND, NO_JOB.format(job_id=job_id))


async def read_job(ctx: RestContext[Any], job_id: str) -> Job:
    """The job as ``get_job`` shows it; ``NOT_FOUND`` when there is none."""
    return await ctx.fetch(JOB, Job, {"job_id": job_id})
