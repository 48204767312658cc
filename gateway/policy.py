"""Deployment policy: which registered tools a client may see and call, and which calls only a
person may approve.

Mutations are confirmed through Claude Code's permission rules (``claude-config`` prints an
``ask`` rule per mutation tool): the terminal UI asks before each call in every permission
mode, and a headless run (``claude -p``, the Agent SDK) hands each call to its approver
(``--permission-prompt-tool``, ``canUseTool``), refusing it when there is none. So by default
(``confirm_each_call = "none"``) mutations can run headless when a program approves them.
``"destructive"`` or ``"mutations"`` mark those tools ``anthropic/requiresUserInteraction``:
Claude Code then accepts no approval but a person's click in its terminal UI, and every
headless run refuses them (observed with Claude Code 2.1.331; docs/claude-code.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .auth.identity import Identity
from .registry import RegisteredTool
from .spec import Tier

if TYPE_CHECKING:
    # Only a gateway with OAuth builds one (its settings are not imported otherwise).
    from .auth.settings import ScopePolicy

#: Claude Code lets only a person in its terminal UI approve a call of a tool carrying this
#: ``_meta`` flag: no allow rule, mode or permission-prompt tool can.
REQUIRES_USER_INTERACTION = "anthropic/requiresUserInteraction"


@dataclass(frozen=True)
class Policy:
    read_only: bool = False
    deny_tools: frozenset[str] = frozenset()
    confirm_each_call: str = "none"  # none | destructive | mutations
    #: With OAuth (``[auth]``), the scope each tool needs; ``None``: no caller is limited.
    scopes: ScopePolicy | None = None

    def hidden_reason(self, tool: RegisteredTool) -> str | None:
        """Why the tool is hidden, or ``None`` when it is visible and callable."""
        if tool.name in self.deny_tools:
            return "denied by the deployment's deny_tools policy"
        if self.read_only and tool.tier is Tier.MUTATION:
            return "hidden because the gateway runs read-only (read_only / MCP_GATEWAY_READ_ONLY)"
        return None

    def visible(self, tool: RegisteredTool) -> bool:
        return self.hidden_reason(tool) is None

    def missing_scope(self, tool: RegisteredTool, caller: Identity) -> str | None:
        """The OAuth scope the caller lacks for this tool, or ``None`` when it may use it (on
        top of :meth:`hidden_reason`, which holds for every caller alike)."""
        if self.scopes is None or caller.scopes is None:
            return None
        return self.scopes.missing(caller, tier=tool.tier, plugin=tool.plugin.name, name=tool.name)

    def confirms_each_call(self, tool: RegisteredTool) -> bool:
        """May only a person approve each call of this tool (never a headless approver)?"""
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
