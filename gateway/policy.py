"""Deployment policy: which registered tools a client may see and call, and which calls the
user must confirm one by one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .registry import RegisteredTool
from .spec import Tier

#: Claude Code prompts before every call of a tool carrying this ``_meta`` flag, even in
#: auto-accept and bypass-permissions modes.
REQUIRES_USER_INTERACTION = "anthropic/requiresUserInteraction"


@dataclass(frozen=True)
class Policy:
    read_only: bool = False
    deny_tools: frozenset[str] = frozenset()
    confirm_each_call: str = "destructive"  # destructive | mutations | none

    def hidden_reason(self, tool: RegisteredTool) -> str | None:
        """Why the tool is hidden, or ``None`` when it is visible and callable."""
        if tool.name in self.deny_tools:
            return "denied by the deployment's deny_tools policy"
        if self.read_only and tool.tier is Tier.MUTATION:
            return "hidden because the gateway runs read-only (read_only / MCP_GATEWAY_READ_ONLY)"
        return None

    def visible(self, tool: RegisteredTool) -> bool:
        return self.hidden_reason(tool) is None

    def confirms_each_call(self, tool: RegisteredTool) -> bool:
        """Must the client ask the user before every call of this tool?"""
        if tool.tier is not Tier.MUTATION or self.confirm_each_call == "none":
            return False
        if self.confirm_each_call == "mutations":
            return True
        return bool(tool.spec.mutation and tool.spec.mutation.destructive)

    def published_meta(self, tool: RegisteredTool) -> dict[str, Any] | None:
        """The tool's ``_meta`` as listed: the registry's, plus the per-call confirmation."""
        if not self.confirms_each_call(tool):
            return tool.meta
        return {**(tool.meta or {}), REQUIRES_USER_INTERACTION: True}
