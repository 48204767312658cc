"""Reading a job before acting on it, and the wording every tool uses for a missing one.

Several endpoints answer an unknown job with an empty 200 (todos, workspace, requirements);
the tools then ask ``GET /api/jobs/{id}`` so the model hears "no such job", not "nothing yet".
"""

from __future__ import annotations

from typing import Any

from gateway import ErrorCode, GatewayError, ToolContext
from gateway.rest import validate_answer

from .backend import COCKPIT
from .models import Job

#: Status rule for a 404 on a job route (``{job_id}`` is the call's path parameter).
NO_JOB = "no job {job_id}; list_jobs shows the ids"


def no_job(job_id: str) -> GatewayError:
    return GatewayError(ErrorCode.NOT_FOUND, NO_JOB.format(job_id=job_id))


async def read_job(ctx: ToolContext[Any], job_id: str) -> Job:
    """The job as ``get_job`` shows it; ``NOT_FOUND`` when there is none."""
    data = await ctx.rest(COCKPIT).request(
        "GET",
        "/api/jobs/{job_id}",
        path_params={"job_id": job_id},
        status={404: NO_JOB},
        what=f"job {job_id}",
    )
    job = validate_answer(Job, data, COCKPIT.title, f"job {job_id}")
    assert isinstance(job, Job)
    return job
