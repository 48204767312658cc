"""What a deployment looks like from Claude Code: its configuration, and its context cost.

``claude_config`` builds what to paste: the ``.mcp.json`` document (with the settings the
loaded plugins read from the environment, secrets as ``${VAR}`` references), the project
settings for ``.claude/settings.json`` (the server approved, read tools allowed, mutation tools
asked for) and the equivalent ``claude mcp add`` line, with an absolute command so they work
from any directory; an OAuth deployment (``[auth]``) is served over HTTP, so its entry is the
public ``/mcp`` URL, where Claude Code signs in. ``tool_sizes`` measures what every tool costs
the model on every turn. What Claude Code does with each part was observed with the real
client: docs/claude-code.md.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import ENV_PREFIX
from .deployment import plugin_env
from .instructions import slash_command
from .registry import (
    MAX_FULL_NAME,
    client_server_name,
    context_bytes,
    full_tool_name,
    json_bytes,
)
from .spec import Tier

if TYPE_CHECKING:
    from .app import Gateway

#: Where ``serve --transport http`` listens unless told otherwise (cli.py's defaults).
DEFAULT_HTTP_URL = "http://127.0.0.1:8765/mcp"
#: Core variables that configure the deployment but are not secrets: copied into the entry so
#: the server Claude Code starts is the one described here. The token and the config path are
#: not (the path becomes ``--config``; stdio needs no token).
_NOT_COPIED = {f"{ENV_PREFIX}TOKEN", f"{ENV_PREFIX}CONFIG"}

_HEADLESS = "claude -p and the Agent SDK"
CONFIRM_MEANING = {
    "none": "every mutation tool is an 'ask' rule: the terminal UI asks before each call in "
    f"every permission mode (bypass included); {_HEADLESS} hand each call to their approver "
    "(--permission-prompt-tool, canUseTool) and refuse it when there is none",
    "destructive": 'as "none", but a destructive mutation tool may be approved only by a '
    f"person in the terminal UI: {_HEADLESS} refuse it even with an approver",
    "mutations": 'as "none", but every mutation tool may be approved only by a person in '
    f"the terminal UI: {_HEADLESS} refuse them even with an approver",
}

#: What Claude Code needs before it uses the pasted parts, in three lines.
NOTES = (
    "Trust: until the project folder is trusted, Claude Code ignores this settings file, "
    'headless too; the first `claude` there asks: choose "Yes, I trust this folder" (the '
    'default is "No, exit").',
    "Approval: enabledMcpjsonServers approves the .mcp.json server; until it is approved "
    '`claude mcp list` says "Pending approval".',
    'First start: if the terminal UI asks about the server, choose to use it; "continue '
    'without" leaves its tools out until you enable it under /mcp.',
)

#: Said next to the ``claude mcp add`` line: the line alone leaves mutations unconfirmed.
ADD_NOTE = (
    "Mutations: `claude mcp add` only adds the server; the ask rules of the settings block "
    "(.claude/settings.json, claude-config --settings) are what make Claude Code ask before "
    "each mutation tool call. Without them, bypass mode or --allowedTools run mutations "
    "unasked."
)

SIGN_IN = (
    "Sign in: the gateway takes OAuth access tokens; in Claude Code, /mcp → {name} → "
    "Authenticate opens the identity provider's sign-in (docs/auth.md)."
)


def console_command() -> list[str]:
    """The installed ``mcp-gateway`` next to the running interpreter, as an absolute path (a
    venv's ``bin/``); else the one on PATH; else this interpreter with ``-m gateway.cli``."""
    interpreter = Path(sys.executable).absolute()
    script = interpreter.parent / ("mcp-gateway.exe" if os.name == "nt" else "mcp-gateway")
    if script.is_file():
        return [str(script)]
    found = shutil.which("mcp-gateway")
    if found:
        return [str(Path(found).absolute())]
    return [str(interpreter), "-m", "gateway.cli"]


@dataclass
class ClaudeConfig:
    name: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    allow: list[str]
    ask: list[str]
    confirm_each_call: str
    confirmed: list[str]
    warnings: list[str] = field(default_factory=list)
    prompts: list[tuple[str, str]] = field(default_factory=list)  # (slash command, description)
    #: An OAuth deployment is served over HTTP: Claude Code connects to this ``/mcp`` URL and
    #: signs in, instead of starting the gateway itself.
    url: str | None = None

    def notes(self) -> list[str]:
        return [*NOTES, ADD_NOTE, *([SIGN_IN.format(name=self.name)] if self.url else [])]

    def mcp_json(self) -> dict[str, Any]:
        """The whole ``.mcp.json`` document with this one server."""
        entry: dict[str, Any] = {
            "type": "stdio",
            "command": self.command[0],
            "args": [*self.command[1:], *self.args],
            "env": self.env,
        }
        if self.url:
            entry = {"type": "http", "url": self.url}
        return {"mcpServers": {self.name: entry}}

    def settings_json(self) -> dict[str, Any]:
        """The project's ``.claude/settings.json``: the server approved, and the permissions."""
        return {
            "enabledMcpjsonServers": [self.name],
            "permissions": {"allow": self.allow, "ask": self.ask},
        }

    def add_command(self) -> str:
        """The equivalent ``claude mcp add`` line (project scope writes ``.mcp.json``)."""
        if self.url:
            add = ["claude", "mcp", "add", "--transport", "http", "--scope", "project"]
            return shlex.join([*add, self.name, self.url])
        argv = ["claude", "mcp", "add", "--scope", "project"]
        for key, value in self.env.items():
            argv += ["-e", f"{key}={value}"]
        return shlex.join([*argv, self.name, "--", *self.command, *self.args])

    def as_dict(self) -> dict[str, Any]:
        return {
            "mcp_json": self.mcp_json(),
            "settings_json": self.settings_json(),
            "claude_mcp_add": self.add_command(),
            "confirm_each_call": {
                "setting": self.confirm_each_call,
                "meaning": CONFIRM_MEANING[self.confirm_each_call],
                "tools": self.confirmed,
            },
            "prompts": [{"command": c, "description": d} for c, d in self.prompts],
            "notes": self.notes(),
            "warnings": self.warnings,
        }

    def text(self) -> str:
        """Everything, each part ready to paste, for people."""
        person_only = (
            f" Only a person may approve: {', '.join(self.confirmed)}." if self.confirmed else ""
        )
        return "\n".join(
            [
                "# .mcp.json (project root; merge into mcpServers if the file exists)",
                json.dumps(self.mcp_json(), indent=2, ensure_ascii=False),
                "",
                "# .claude/settings.json: the server approved, read tools allowed, mutation "
                "tools asked for",
                json.dumps(self.settings_json(), indent=2, ensure_ascii=False),
                *[f"# {note}" for note in self.notes()],
                "",
                "# or, instead of editing .mcp.json (the settings block above is still needed: "
                "without its ask rules, bypass mode or --allowedTools run mutations unasked):",
                self.add_command(),
                "",
                f'# confirm_each_call = "{self.confirm_each_call}": '
                f"{CONFIRM_MEANING[self.confirm_each_call]}.{person_only}",
                "# Other values ([gateway] confirm_each_call, MCP_GATEWAY_CONFIRM_EACH_CALL):",
                *[
                    f'#   "{k}": {v}.'
                    for k, v in CONFIRM_MEANING.items()
                    if k != self.confirm_each_call
                ],
                *(
                    ["", "# Workflows, as slash commands in Claude Code:"]
                    + [f"#   {c}: {d}" for c, d in self.prompts]
                    if self.prompts
                    else []
                ),
                *[f"# WARNING: {w}" for w in self.warnings],
            ]
        )


def claude_config(gateway: Gateway, name: str, *, config_path: str | None = None) -> ClaudeConfig:
    safe = client_server_name(name)
    args = ["serve"]
    path = config_path or gateway.config.env.get(f"{ENV_PREFIX}CONFIG")
    if path:
        # Claude Code starts the server in the project directory: a relative path would break.
        args = ["--config", str(Path(path).resolve()), *args]
    env = {
        k: v
        for k, v in gateway.config.env.items()
        if k.startswith(ENV_PREFIX) and k not in _NOT_COPIED
    }
    plugins = plugin_env(gateway)
    env = dict(sorted({**env, **plugins.env}.items()))
    # Every tool the deployment offers once its backends are configured: a variable exported
    # later (Claude Code passes its own environment on) adds tools, and the settings must
    # already allow the reads and ask for the mutations, or a headless run refuses them all.
    tools = gateway.described_tools(unconfigured=True)
    allow = sorted(full_tool_name(safe, t.name) for t in tools if t.tier is Tier.READ)
    ask = sorted(full_tool_name(safe, t.name) for t in tools if t.tier is Tier.MUTATION)
    confirmed = sorted(t.name for t in tools if t.person_must_approve)
    warnings = list(plugins.warnings)
    warnings += [
        f"MCP server {server!r}: none of its tools is approved yet, so the settings allow or ask "
        f"for none of them; `mcp-gateway servers approve {server}` starts it and records its "
        "tools: then run claude-config again"
        for server in gateway.mounts.unapproved()
    ]
    too_long = sorted(t.name for t in tools if len(full_tool_name(safe, t.name)) > MAX_FULL_NAME)
    if too_long:
        longest = max(len(t.name) for t in tools)
        room = MAX_FULL_NAME - len("mcp____") - longest
        warnings.append(
            f"server name {safe!r} makes {len(too_long)} tool name(s) longer than "
            f"{MAX_FULL_NAME} characters as mcp__{safe}__<tool>, and Claude Code drops those "
            f"tools ({', '.join(too_long)}): use --name with at most {room} characters"
        )
    auth = gateway.config.auth
    url = None
    if auth is not None:
        url = auth.resource or DEFAULT_HTTP_URL
        if auth.resource is None:
            warnings.append(
                f"[auth] resource is not set: {url} assumes `serve --transport http` on its "
                "default address; set resource to the URL clients reach"
            )
    return ClaudeConfig(
        name=safe,
        command=console_command(),
        args=args,
        env=env,
        allow=allow,
        ask=ask,
        confirm_each_call=gateway.config.confirm_each_call,
        confirmed=confirmed,
        warnings=warnings,
        prompts=[
            (slash_command(safe, p.name), " ".join(p.spec.description.split())[:120])
            for p in gateway.offered_prompts()
        ],
        url=url,
    )


#: A rough rule for English text and JSON: about four bytes per token.
BYTES_PER_TOKEN = 4


def tool_sizes(gateway: Gateway) -> dict[str, Any]:
    """Per visible tool, the bytes the model sees on every turn: the compact UTF-8 JSON of
    ``{"name", "description", "inputSchema"}`` (Claude Code sends the model nothing else of a
    tool), and a token estimate; largest first, with the total."""
    rows: list[dict[str, Any]] = []
    for tool in gateway.described_tools():
        size = context_bytes(tool)
        rows.append(
            {
                "name": tool.name,
                "plugin": tool.plugin,
                "bytes": size,
                "tokens": math.ceil(size / BYTES_PER_TOKEN),
                "description_bytes": len(tool.description.encode()),
                "input_schema_bytes": json_bytes(tool.input_schema),
            }
        )
    rows.sort(key=lambda r: (-r["bytes"], r["name"]))
    total = sum(r["bytes"] for r in rows)
    return {
        "tools": rows,
        "total": {
            "tools": len(rows),
            "bytes": total,
            "tokens": math.ceil(total / BYTES_PER_TOKEN),
        },
        "method": "compact UTF-8 JSON of name, description and inputSchema per tool; "
        f"tokens ≈ bytes / {BYTES_PER_TOKEN}",
    }
