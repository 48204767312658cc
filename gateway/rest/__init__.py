"""The REST-backend kit: one dialect for tools over HTTP APIs, one client, one error map, one
set of settings for every API.

Declare the backend once, then each tool as a typed function bound to it::

    COCKPIT = RestBackend.define(
        "cockpit", env_prefix="COCKPIT_API", settings_table="orchestrator",
        title="the orchestrator API", health_path="/api/health",
    )
    api = RestTools(COCKPIT)
    JOB = Route("GET", "/api/jobs/{job_id}", what="job {job_id}")


    @api.read
    async def get_job(job_id: JobId, *, ctx: RestContext[Any]) -> Job:
        \"\"\"One job: statuses, config, assigned agent, context.\"\"\"
        return await ctx.fetch(JOB, Job)

``api.mutation(Mutation(...))`` declares a mutation; ``Plugin(tools=api)`` registers them. A
tool of a model of its own is ``api.read(name=..., description=..., input_model=...,
route=...)`` (or ``run=``), or ``RestTool(...)`` written out. Nothing here imports httpx: the
client module is imported on a backend's first call. See ``docs/plugins/rest.md``.
"""

from __future__ import annotations

from ..errors import Failure, StatusRule, status_error
from .backend import RestBackend
from .body import backend_reason
from .route import Method, Route
from .settings import RestSettings, basic_auth, bearer_auth, env_suffix
from .shapes import (
    JsonString,
    OffsetPage,
    PageFields,
    UtcTimestamp,
    decode_json_string,
    offset_page,
    to_utc_iso,
    truncation_marker,
    uuid_check,
    validate_answer,
)
from .tools import RestContext, RestRun, RestTool, RestTools, gather

__all__ = [
    "Failure",
    "JsonString",
    "Method",
    "OffsetPage",
    "PageFields",
    "RestBackend",
    "RestContext",
    "RestRun",
    "RestSettings",
    "RestTool",
    "RestTools",
    "Route",
    "StatusRule",
    "UtcTimestamp",
    "backend_reason",
    "basic_auth",
    "bearer_auth",
    "decode_json_string",
    "env_suffix",
    "gather",
    "offset_page",
    "status_error",
    "to_utc_iso",
    "truncation_marker",
    "uuid_check",
    "validate_answer",
]
