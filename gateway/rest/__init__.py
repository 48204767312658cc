"""The REST-backend kit: one dialect for tools over HTTP APIs, one client, one error map, one
set of settings for every API.

Declare the backend once, then each tool::

    COCKPIT = RestBackend.define(
        "cockpit", env_prefix="COCKPIT_API", settings_table="orchestrator",
        title="the orchestrator API", health_path="/api/health",
    )

    GET_JOB = RestTool(
        name="get_job", description="…", input_model=JobArgs, output_model=Job,
        tier=Tier.READ, backend=COCKPIT,
        route=Route("GET", "/api/jobs/{job_id}", what="job {job_id}"),
    )

A tool that needs more than one call is the same declaration with ``run=`` and an async
function of the arguments and a :class:`RestContext` (``await ctx.fetch(ROUTE, Model, args)``).
Nothing here imports httpx: the client module is imported on a backend's first call. See
``docs/plugins/rest.md``.
"""

from __future__ import annotations

from .backend import RestBackend, basic_auth, bearer_auth
from .gather import gather
from .route import Method, Route
from .settings import RestSettings, env_suffix
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
)
from .status import Failure, StatusRule, backend_reason, status_error
from .tools import RestContext, RestRun, RestTool, RestTools
from .validation import validate_answer

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
