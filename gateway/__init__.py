"""mcp-gateway: one MCP server whose tools all come from plugins.

The public API for plugin authors is what this module exports; everything else is internal.

Each name is imported from its module when it is first used (``from gateway import ToolSpec``
imports ``gateway.spec``), not when the package is: ``mcp-gateway serve`` pauses the garbage
collector before anything heavy is imported (see ``gateway.cli``), and it can only do that if
importing the package it lives in imports nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
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

#: The module each exported name is defined in.
_EXPORTS = {
    "config": ("env_field",),
    "content": (
        "Content",
        "Message",
        "ToolResult",
        "audio",
        "embedded",
        "image",
        "link",
        "message",
        "text",
    ),
    "errors": ("ErrorCode", "GatewayError"),
    "hookspecs": ("Plugin", "hookimpl"),
    "inputs": ("InputRequest", "InputRequired", "Inputs", "elicit", "list_roots", "sample"),
    "prompts": ("PromptContext", "PromptSpec"),
    "resources": ("ResourceContext", "ResourceSpec", "ResourceTemplateSpec"),
    "spec": (
        "Args",
        "HealthCheck",
        "Mutation",
        "NotInitialized",
        "PluginContext",
        "Resource",
        "Tier",
        "ToolContext",
        "ToolSpec",
        "tool",
    ),
}
_FROM = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module 'gateway' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found at once from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM})


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
