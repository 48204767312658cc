"""The ``instructions`` of the initialize result, derived from what this deployment loaded.

Claude Code loads server instructions even when it defers tool schemas, and cuts them at 2,048
characters, so they say in a few lines what each plugin offers (its distribution's one-line
summary, which also says what its ids are), which installed plugins are not offered until a
backend is configured (and what to set), which workflows exist as prompts, and how to read
errors. The text never exceeds :data:`MAX_INSTRUCTIONS_CHARS`: summaries are shortened first.
"""

from __future__ import annotations

from collections.abc import Sequence

from .plugins import PluginRecord, PluginState
from .prompts import RegisteredPrompt
from .registry import client_server_name

MAX_INSTRUCTIONS_CHARS = 2000

GENERAL = (
    "Tools come from plugins. Read tools are safe; a tool whose description has a MUTATION "
    "paragraph changes state and needs the user's confirmation. Errors are "
    '{"error": {"code", "message", "retryable"}}; the message says what to do next. '
    "gateway_status tells why a tool is missing or a backend is down."
)


def slash_command(server: str, prompt: str) -> str:
    """How Claude Code offers a prompt: ``/mcp__<server>__<prompt>``."""
    return f"/mcp__{client_server_name(server)}__{prompt}"


def build_instructions(
    plugins: Sequence[PluginRecord],
    prompts: Sequence[RegisteredPrompt],
    visible_tools: set[str],
    *,
    server: str,
    builtin: str = "gateway",
) -> str:
    offering = [
        p
        for p in plugins
        if p.state is PluginState.LOADED
        and p.name != builtin
        and any(t in visible_tools for t in p.tools)
    ]
    # Installed but not offered until a backend is configured: the model can say what to set.
    waiting = [
        (p.name, next(iter(p.not_offered.values())))
        for p in plugins
        if p.state is PluginState.LOADED and p.not_offered and p not in offering
    ]
    workflows = ""
    if prompts:
        names = ", ".join(
            p.name + "(" + ", ".join(a["name"] for a in p.arguments) + ")" for p in prompts
        )
        workflows = (
            f"Workflows as prompts (in Claude Code {slash_command(server, '<name>')}): {names}. "
            "Each lists the steps with the real tool names."
        )
    for limit in (300, 200, 140, 100, 70):
        lines = [GENERAL]
        if offering or waiting:
            lines.append("Plugins:")
            lines += [f"- {p.name}: {_cut(p.summary or 'tools', limit)}" for p in offering]
            lines += [f"- {name}, not offered: {_cut(why, limit)}" for name, why in waiting]
        if workflows:
            lines.append(workflows)
        text = "\n".join(lines)
        if len(text) <= MAX_INSTRUCTIONS_CHARS:
            return text
    return text[: MAX_INSTRUCTIONS_CHARS - 1].rstrip() + "…"


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
