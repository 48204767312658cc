"""Deployment policy: which registered tools a client may see and call."""

from __future__ import annotations

from dataclasses import dataclass

from .registry import RegisteredTool
from .spec import Tier


@dataclass(frozen=True)
class Policy:
    read_only: bool = False
    deny_tools: frozenset[str] = frozenset()

    def hidden_reason(self, tool: RegisteredTool) -> str | None:
        """Why the tool is hidden, or ``None`` when it is visible and callable."""
        if tool.name in self.deny_tools:
            return "denied by the deployment's deny_tools policy"
        if self.read_only and tool.tier is Tier.MUTATION:
            return "hidden because the gateway runs read-only (read_only / MCP_GATEWAY_READ_ONLY)"
        return None

    def visible(self, tool: RegisteredTool) -> bool:
        return self.hidden_reason(tool) is None
