"""Claude Code, installed with npm into a cache folder and run headless in a throw-away project.

:func:`installed` puts ``@anthropic-ai/claude-code`` (its platform package carries the native
binary) into a cache folder outside the repository, once a week at most and never while another
run uses it. :class:`Project` is a temporary project directory with its own ``HOME`` and Claude Code
config directory, so the user's real configuration is never read or touched; ``run`` starts
``claude -p`` in it against the stand-in model and returns the stream-json events.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npm_cache import cache_dir, npm_package

#: The latest release, not ``@2``: npm would pick the last 2.x whose ``engines`` allow the
#: local node, though the package runs a native binary, not node.
PACKAGE = "@anthropic-ai/claude-code@latest"

#: Keeps Claude Code to the stand-in model: no telemetry, error reports, update checks or
#: other side traffic (documented in its env-vars reference).
QUIET = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
}


@contextlib.contextmanager
def installed() -> Iterator[tuple[Path | None, str]]:
    """The ``claude`` executable from the cache (installed first if needed) and its version,
    unchanged until the block ends; or ``None`` and the reason it is not available."""
    folder = cache_dir("claude-code")
    binary = folder / "node_modules" / ".bin" / ("claude.cmd" if os.name == "nt" else "claude")
    with npm_package(folder, PACKAGE, binary) as why:
        if why is not None:
            yield None, why
            return
        proc = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60
        )
        if proc.returncode != 0:
            yield None, f"claude --version failed: {proc.stderr[-500:]}"
            return
        yield binary, proc.stdout.split()[0]


@dataclass
class Result:
    """One ``claude -p`` run: its stream-json events and what they add up to."""

    events: list[dict[str, Any]]
    stderr: str
    returncode: int

    @property
    def init(self) -> dict[str, Any]:
        return next(e for e in self.events if e.get("subtype") == "init")

    @property
    def final(self) -> dict[str, Any]:
        return next(e for e in reversed(self.events) if e.get("type") == "result")

    def server_status(self, name: str) -> str | None:
        return next((s["status"] for s in self.init["mcp_servers"] if s["name"] == name), None)

    def tool_results(self) -> list[tuple[str, str, bool]]:
        """(tool name, result text, is_error) for every tool call of the run, in order."""
        names: dict[str, str] = {}
        out = []
        for event in self.events:
            message = event.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_use":
                    names[block["id"]] = block["name"]
                elif block.get("type") == "tool_result":
                    inner = block.get("content", "")
                    text = (
                        inner
                        if isinstance(inner, str)
                        else "".join(b.get("text", "") for b in inner if isinstance(b, dict))
                    )
                    name = names.get(block["tool_use_id"], "?")
                    out.append((name, text, bool(block.get("is_error"))))
        return out


@dataclass
class Project:
    """A temporary project for Claude Code with its own HOME and config directory."""

    root: Path
    claude: Path
    model_url: str
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.dir = self.root / "project"
        self.home = self.root / "home"
        self.config_dir = self.home / ".claude"
        for d in (self.dir, self.config_dir):
            d.mkdir(parents=True, exist_ok=True)

    def write(self, relative: str, document: Any) -> Path:
        path = self.dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(document if isinstance(document, str) else json.dumps(document, indent=2))
        return path

    def trust(self) -> None:
        """Accept the workspace trust dialog as the terminal UI would record it."""
        state_file = self.config_dir / ".claude.json"
        state = json.loads(state_file.read_text()) if state_file.exists() else {}
        project = state.setdefault("projects", {}).setdefault(str(self.dir), {})
        project["hasTrustDialogAccepted"] = True
        state_file.write_text(json.dumps(state, indent=2))

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env.update(
            HOME=str(self.home),
            USERPROFILE=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            CLAUDE_CONFIG_DIR=str(self.config_dir),
            ANTHROPIC_BASE_URL=self.model_url,
            ANTHROPIC_API_KEY="sk-ant-stand-in",
            # -p otherwise waits only ~2 s for MCP servers, then starts without their tools.
            MCP_CONNECTION_NONBLOCKING="0",
            # ... but gives a stdio server 5 s to connect (MCP_CONNECT_TIMEOUT_MS), which a
            # cold start misses on a loaded machine (the parallel suite): the server then stays
            # "pending" and its tools never reach the model.
            MCP_CONNECT_TIMEOUT_MS="60000",
            **QUIET,
        )
        if hasattr(os, "getuid") and os.getuid() == 0:
            # Claude Code refuses bypassPermissions as root outside a declared sandbox.
            env["IS_SANDBOX"] = "1"
        env.update(self.env)
        env.update(extra or {})
        return env

    def run(
        self, prompt: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> Result:
        proc = subprocess.run(
            [
                str(self.claude),
                "-p",
                prompt,
                "--output-format",
                "stream-json",
                "--verbose",
                *args,
            ],
            cwd=self.dir,
            env=self.environment(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        events = []
        for line in proc.stdout.splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return Result(events, proc.stderr, proc.returncode)
