"""The orchestrator API as the tools see it: the backend, and the ids checked before any request.

``COCKPIT`` is declared the same way by the citations plugin, so the core gives both one
client, one breaker and one health check when they are installed together.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gateway.rest import RestBackend, uuid_check

COCKPIT = RestBackend.define(
    "cockpit",
    env_prefix="COCKPIT_API",
    settings_table="orchestrator",
    title="the orchestrator API",
    health_path="/api/health",
)

# The API answers malformed ids inconsistently (404, empty 200, or a 500 with database text);
# checked here, they never reach it.
JobId = Annotated[
    str, Field(max_length=36, description="Job UUID."), uuid_check("job", "list_jobs")
]
AgentId = Annotated[
    str, Field(max_length=36, description="Agent UUID."), uuid_check("agent", "list_agents")
]
DatasourceId = Annotated[
    str,
    Field(max_length=36, description="Datasource UUID."),
    uuid_check("datasource", "list_datasources"),
]
