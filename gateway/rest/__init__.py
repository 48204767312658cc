"""The REST-backend kit: one client, one error map, one set of settings for every HTTP API.

Declare the backend once, then each tool in a few lines::

    class CockpitSettings(RestSettings):
        env_prefix = "COCKPIT_API"          # COCKPIT_API_URL, COCKPIT_API_TOKEN, …

    COCKPIT = RestBackend(
        name="cockpit", settings=CockpitSettings, settings_table="orchestrator",
        title="the orchestrator API", health_path="/api/health",
    )

    register(rest_tool(COCKPIT, Route("GET", "/api/jobs/{job_id}", what="job {job_id}"),
                       name="get_job", description="…", input_model=JobArgs, output_model=Job))

Handlers that need more than one call use the client directly:
``await ctx.rest(COCKPIT).request("GET", "/api/jobs/{job_id}", path_params={...})``.
Nothing here imports httpx: the client module is imported on a backend's first call.
"""

from __future__ import annotations

from .backend import RestBackend, basic_auth, bearer_auth
from .gather import gather
from .settings import RestSettings, env_suffix
from .status import Failure, StatusRule, backend_reason
from .tools import (
    JsonString,
    OffsetPage,
    Route,
    UtcTimestamp,
    backend_tool,
    decode_json_string,
    offset_page,
    rest_tool,
    to_utc_iso,
    validate_answer,
)

__all__ = [
    "Failure",
    "JsonString",
    "OffsetPage",
    "RestBackend",
    "RestSettings",
    "Route",
    "StatusRule",
    "UtcTimestamp",
    "backend_reason",
    "backend_tool",
    "basic_auth",
    "bearer_auth",
    "decode_json_string",
    "env_suffix",
    "gather",
    "offset_page",
    "rest_tool",
    "to_utc_iso",
    "validate_answer",
]
