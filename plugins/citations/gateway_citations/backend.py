"""The orchestrator API as these tools see it: the shared backend, the ids checked before any
request, and the job check every tool makes when its answer is empty.

``COCKPIT`` is the very statement the orchestrator plugin makes in
``gateway_orchestrator/backend.py``: installed together, the two plugins get one client, one
breaker and one health check; installed alone, this one still works (it never imports the
orchestrator plugin).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from gateway import ErrorCode
from gateway.rest import RestBackend, RestContext, Route, uuid_check

COCKPIT = RestBackend.define(
    "cockpit",
    env_prefix="COCKPIT_API",
    settings_table="orchestrator",
    title="the orchestrator API",
    health_path="/api/health",
)

#: Where a model finds job ids: list_jobs (orchestrator plugin) or, with this plugin alone,
#: list_job_sources without job_id (each source lists its jobs).
JOB_IDS = "list_jobs (or list_job_sources without job_id)"
_INT4_MAX = 2**31 - 1  # sources.id and citations.id are PostgreSQL serials

# Every citation endpoint puts the job id into SQL and answers a malformed one with a 500
# carrying the database's text; checked here, it never gets there.
JobId = Annotated[str, Field(max_length=36, description="Job UUID."), uuid_check("job", JOB_IDS)]
# Strict: a boolean or a string is not an id (lax pydantic would turn true into source 1).
SourceId = Annotated[int, Field(strict=True, ge=1, le=_INT4_MAX, description="Source id.")]
CitationId = Annotated[int, Field(strict=True, ge=1, le=_INT4_MAX, description="Citation id.")]

SourceTypes = Literal["document", "website", "database", "custom"]
SOURCE_TYPES: tuple[str, ...] = get_args(SourceTypes)
SourceType = Annotated[SourceTypes, Field(description="Only sources of this type.")]

Limit = Annotated[int, Field(ge=1, le=100, description="Max rows.")]
Offset = Annotated[int, Field(ge=0, le=_INT4_MAX, description="Rows to skip.")]


class Wire(BaseModel):
    """Base of the models of the API's answers: fields it adds later are ignored."""

    model_config = ConfigDict(extra="ignore")


_JOB = Route(
    "GET",
    "/api/jobs/{job_id}",
    what="job {job_id}",
    status={404: (ErrorCode.NOT_FOUND, f"no job {{job_id}}; {JOB_IDS} shows them")},
)


async def require_job(ctx: RestContext[Any], job_id: str) -> None:
    """``NOT_FOUND`` unless the job exists.

    The citation endpoints answer an unknown job exactly like a job with nothing in it (an
    empty list, zero counts); tools call this when their answer is empty, so an empty result
    means "the job has none", never "there is no such job".
    """
    await ctx.send(_JOB, {"job_id": job_id})
