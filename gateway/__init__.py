"""mcp-gateway: one MCP server whose tools all come from plugins.

The public API for plugin authors is what this module exports; everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import env_field
from .content import Content, Message, ToolResult, audio, embedded, image, link, message, text
from .errors import ErrorCode, GatewayError
from .hookspecs import Plugin, hookimpl
from .inputs import InputRequest, InputRequired, Inputs, elicit, list_roots, sample
from .prompts import PromptContext, PromptSpec
from .resources import ResourceContext, ResourceSpec, ResourceTemplateSpec
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
    "Content",
    "ErrorCode",
    "GatewayError",
    "HealthCheck",
    "InputRequest",
    "InputRequired",
    "Inputs",
    "Message",
    "Mutation",
    "NotInitialized",
    "Plugin",
    "PluginContext",
    "PromptContext",
    "PromptSpec",
    "Resource",
    "ResourceContext",
    "ResourceSpec",
    "ResourceTemplateSpec",
    "Tier",
    "ToolContext",
    "ToolResult",
    "ToolSpec",
    "__version__",
    "audio",
    "elicit",
    "embedded",
    "env_field",
    "hookimpl",
    "image",
    "link",
    "list_roots",
    "message",
    "sample",
    "text",
    "tool",
]
