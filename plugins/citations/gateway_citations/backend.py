"""The orchestrator API as these tools see it: the shared backend, the ids checked before any
request, and the few helpers every tool uses.

``COCKPIT`` is the very statement the orchestrator plugin makes in
``gateway_orchestrator/backend.py``: installed together, the two plugins get one client, one
breaker and one health check; installed alone, this one still works (it never imports the
orchestrator plugin).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar, cast, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from gateway import ErrorCode, ToolContext, ToolSpec
from gateway.rest import RestBackend, Route, backend_tool, validate_answer

COCKPIT = RestBackend.define(
    "cockpit",
    env_prefix="COCKPIT_API",
    settings_table="orchestrator",
    title="the orchestrator API",
    health_path="/api/health",
)

#: Where a model finds job ids: list_jobs (orchestrator plugin) or, with this plugin alone,
#: list_job_sources without job_id (each source lists its jobs).
JOB_IDS_HINT = "list_jobs (or list_job_sources without job_id) shows them"

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_INT4_MAX = 2**31 - 1  # sources.id and citations.id are PostgreSQL serials


def _job_uuid(value: str) -> str:
    if not _UUID.fullmatch(value):
        raise ValueError(f"must be a job UUID; {JOB_IDS_HINT}")
    return value.lower()


# Every citation endpoint puts the job id into SQL and answers a malformed one with a 500
# carrying the database's text; checked here, it never gets there.
JobId = Annotated[str, Field(max_length=36, description="Job UUID."), AfterValidator(_job_uuid)]
# Strict: a boolean or a string is not an id (lax pydantic would turn true into source 1).
SourceId = Annotated[int, Field(strict=True, ge=1, le=_INT4_MAX, description="Source id.")]
CitationId = Annotated[int, Field(strict=True, ge=1, le=_INT4_MAX, description="Citation id.")]

SourceTypes = Literal["document", "website", "database", "custom"]
SOURCE_TYPES: tuple[str, ...] = get_args(SourceTypes)
SourceType = Annotated[SourceTypes, Field(description="Only sources of this type.")]

Limit = Annotated[int, Field(ge=1, le=100, description="Max rows.")]
Offset = Annotated[int, Field(ge=0, le=_INT4_MAX, description="Rows to skip.")]


class Args(BaseModel):
    """Base of every input model: unknown arguments are refused."""

    model_config = ConfigDict(extra="forbid")


class Wire(BaseModel):
    """Base of the models of the API's answers: fields it adds later are ignored."""

    model_config = ConfigDict(extra="ignore")


M = TypeVar("M", bound=BaseModel)


async def fetch(
    ctx: ToolContext[Any], route: Route, args: BaseModel, model: type[M], *, wrap: str = ""
) -> M:
    """Send ``route`` with ``args`` and return the answer as ``model`` (``BACKEND_ERROR``
    naming the field when it does not fit). ``wrap`` puts an answer that is a bare list
    under that field of ``model``."""
    data = await route.send(ctx.rest(COCKPIT), args)
    if wrap:
        data = {wrap: data}
    return cast(M, validate_answer(model, data, COCKPIT.title, route.describe(dict(args))))


_JOB = Route(
    "GET",
    "/api/jobs/{job_id}",
    what="job {job_id}",
    status={404: (ErrorCode.NOT_FOUND, f"no job {{job_id}}; {JOB_IDS_HINT}")},
)


async def require_job(ctx: ToolContext[Any], job_id: str) -> None:
    """``NOT_FOUND`` unless the job exists.

    The citation endpoints answer an unknown job exactly like a job with nothing in it (an
    empty list, zero counts); tools call this when their answer is empty, so an empty result
    means "the job has none", never "there is no such job".
    """
    await _JOB.send(ctx.rest(COCKPIT), {"job_id": job_id})


def read_tool(**spec: Any) -> ToolSpec:
    """A read tool of this plugin: bound to ``COCKPIT`` (its breaker, health and settings)."""
    return backend_tool(COCKPIT, **spec)
