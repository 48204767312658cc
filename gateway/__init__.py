"""mcp-gateway: one MCP server whose tools all come from plugins.

The public API for plugin authors is what this module exports; everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import env_field
from .errors import ErrorCode, GatewayError
from .hookspecs import hookimpl
from .parts import Plugin
from .prompts import PromptContext, PromptSpec
from .spec import (
    Args,
    HealthCheck,
    Mutation,
    NotInitialized,
    PluginContext,
    Resource,
    Tier,
    ToolContext,
    ToolSpec,
    tool,
)

__all__ = [
    "Args",
    "ErrorCode",
    "GatewayError",
    "HealthCheck",
    "Mutation",
    "NotInitialized",
    "Plugin",
    "PluginContext",
    "PromptContext",
    "PromptSpec",
    "Resource",
    "Tier",
    "ToolContext",
    "ToolSpec",
    "__version__",
    "env_field",
    "hookimpl",
    "tool",
]
