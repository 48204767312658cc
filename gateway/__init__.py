"""mcp-gateway: one MCP server whose tools all come from plugins.

The public API for plugin authors is what this module exports; everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import env_field
from .errors import ErrorCode, GatewayError
from .hookspecs import hookimpl
from .parts import PluginParts
from .prompts import PromptContext, PromptSpec
from .spec import (
    HealthCheck,
    Mutation,
    NotInitialized,
    PluginContext,
    Resource,
    Tier,
    ToolContext,
    ToolSpec,
)

__all__ = [
    "ErrorCode",
    "GatewayError",
    "HealthCheck",
    "Mutation",
    "NotInitialized",
    "PluginContext",
    "PluginParts",
    "PromptContext",
    "PromptSpec",
    "Resource",
    "Tier",
    "ToolContext",
    "ToolSpec",
    "__version__",
    "env_field",
    "hookimpl",
]
