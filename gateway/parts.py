"""A plugin made of declared parts: its tools, its prompts, its settings model.

Most plugins' hooks only hand the core what the plugin declared as data. ``PluginParts``
writes those hooks once; the plugin's module (what its entry point names) binds them::

    PARTS = PluginParts(tools=(*jobs.TOOLS, *audit.TOOLS), prompts=prompts.PROMPTS)
    register_tools = PARTS.register_tools
    register_prompts = PARTS.register_prompts

A plugin with more to do (health checks of its own, resources to open) writes those hooks as
functions beside these, as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

from .hookspecs import hookimpl
from .spec import ToolSpec

if TYPE_CHECKING:
    from .prompts import PromptSpec


@dataclass(frozen=True)
class PluginParts:
    """What a plugin declares; its methods are the hooks that register it, in order."""

    tools: tuple[ToolSpec, ...] = ()
    prompts: tuple[PromptSpec, ...] = ()
    settings: type[BaseModel] | None = None

    @hookimpl
    def plugin_settings(self) -> type[BaseModel] | None:
        return self.settings

    @hookimpl
    def register_tools(self, register: Callable[[ToolSpec], None]) -> None:
        for spec in self.tools:
            register(spec)

    @hookimpl
    def register_prompts(self, register: Callable[[PromptSpec], None]) -> None:
        for spec in self.prompts:
            register(spec)
