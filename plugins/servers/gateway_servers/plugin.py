"""The hooks: the settings the core hands over, and one ``ServerSpec`` per configured server."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import PluginContext, env_field, hookimpl
from gateway.config import ConfigError
from gateway.spec import ServerSpec

from .tables import from_mcp_json, from_tables

VARIABLE = "MCP_GATEWAY_SERVERS"


class ServersSettings(BaseModel):
    """The core hands the config file's ``[servers.<name>]`` tables over as ``servers``, with
    where each came from (``origins``); ``[plugins.servers]`` may set ``mcp_json``."""

    model_config = ConfigDict(extra="forbid")

    mcp_json: str | None = env_field(
        VARIABLE,
        default=None,
        description="A .mcp.json (or Claude Desktop config) whose mcpServers are all mounted",
    )
    servers: dict[str, Any] = Field(default_factory=dict)
    origins: dict[str, str] = Field(default_factory=dict)
    source: str = "the config file"


@hookimpl
def plugin_settings() -> type[BaseModel]:
    return ServersSettings


@hookimpl
def register_servers(
    register: Callable[[ServerSpec], None], plugin: PluginContext[ServersSettings]
) -> None:
    settings = plugin.settings
    # ${NAME} is expanded from the environment the gateway runs in (as Claude Code does).
    env = dict(os.environ)
    specs = from_tables(settings.servers, settings.origins, env, settings.source)
    if settings.mcp_json:
        seen = {s.name: s for s in specs}
        for spec in from_mcp_json(settings.mcp_json, env, VARIABLE):
            if spec.name in seen:
                raise ConfigError(
                    f"{spec.origin}: mcpServers.{spec.name}: a server of that name is also "
                    f"configured at {seen[spec.name].origin}; rename one of them"
                )
            specs.append(spec)
    for spec in specs:
        register(spec)
