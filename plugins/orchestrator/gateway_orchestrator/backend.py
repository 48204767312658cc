"""The orchestrator API as the tools see it: the backend, and the ids checked before any request.

``COCKPIT`` is declared the same way by the citations plugin, so the core gives both one
client, one breaker and one health check when they are installed together.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from gateway.rest import RestBackend

COCKPIT = RestBackend.define(
    "cockpit",
    env_prefix="COCKPIT_API",
    settings_table="orchestrator",
    title="the orchestrator API",
    health_path="/api/health",
)

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _uuid(what: str, where: str) -> AfterValidator:
    def check(value: str) -> str:
        if not _UUID.fullmatch(value):
            raise ValueError(f"must be a {what} UUID; {where} shows them")
        return value.lower()

    return AfterValidator(check)


# The API answers malformed ids inconsistently (404, empty 200, or a 500 with database text);
# checked here, they never reach it.
JobId = Annotated[str, Field(max_length=36, description="Job UUID."), _uuid("job", "list_jobs")]
AgentId = Annotated[
    str, Field(max_length=36, description="Agent UUID."), _uuid("agent", "list_agents")
]
DatasourceId = Annotated[
    str,
    Field(max_length=36, description="Datasource UUID."),
    _uuid("datasource", "list_datasources"),
]
