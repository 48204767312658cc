"""Claude Code, installed with npm into a cache folder and run headless in a throw-away project.

:func:`installed` puts ``@anthropic-ai/claude-code`` (its platform package carries the native
binary) into a cache folder outside the repository, once a week at most and never while another
run uses it. :class:`Project` is a temporary project directory with its own ``HOME`` and Claude Code
config directory, so the user's real configuration is never read or touched; ``run`` starts
``claude -p`` in it against the stand-in model and returns the stream-json events, ``session``
keeps one ``claude -p`` running for several prompts of one conversation (stream-json input,
as the Agent SDK drives it), each answered as a run is.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
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
    """One ``claude -p`` run, or one prompt of a session: its stream-json events and what they
    add up to."""

    events: list[dict[str, Any]]
    stderr: str
    returncode: int | None  # None: a prompt of a session that goes on

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
            # ... but gives a stdio server only so long to connect, which a cold start can miss
            # on a loaded machine (the parallel suite): the server then stays "pending" or
            # "failed" and its tools never reach the model. 30 s in 2.1.332 (MCP_TIMEOUT), 5 s
            # before it (MCP_CONNECT_TIMEOUT_MS, which 2.1.332 ignores).
            MCP_TIMEOUT="60000",
            MCP_CONNECT_TIMEOUT_MS="60000",
            **QUIET,
        )
        if hasattr(os, "getuid") and os.getuid() == 0:
            # Claude Code refuses bypassPermissions as root outside a declared sandbox.
            env["IS_SANDBOX"] = "1"
        env.update(self.env)
        env.update(extra or {})
        return env

    def command(self, *args: str) -> list[str]:
        return [str(self.claude), "-p", *args, "--output-format", "stream-json", "--verbose"]

    @contextlib.contextmanager
    def session(self, *args: str, env: dict[str, str] | None = None) -> Iterator[Session]:
        """One ``claude -p`` with ``args`` that takes its prompts from :meth:`Session.send`;
        its exit code is checked when the block ends."""
        session = Session(
            self.command("--input-format", "stream-json", *args), self.dir, self.environment(env)
        )
        try:
            yield session
        finally:
            code = session.close()
        assert code == 0, session.stderr[-2000:]

    def run(
        self, prompt: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> Result:
        proc = subprocess.run(
            self.command(prompt, *args),
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


class Session:
    """A running ``claude -p --input-format stream-json``: one Claude Code, and one of each MCP
    server it starts, through the prompts :meth:`send` writes to its stdin."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self._proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._read_events, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def _read_events(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            with contextlib.suppress(ValueError):
                self._events.put(json.loads(line))
        self._events.put(None)  # the process closed its output

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line)

    def send(self, prompt: str, timeout: float = 120) -> Result:
        """The events of ``prompt``, up to its result (or to the end of the process)."""
        assert self._proc.stdin is not None
        message = {"type": "user", "message": {"role": "user", "content": prompt}}
        events: list[dict[str, Any]] = []
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except OSError:  # it has ended: its exit code and stderr say why
            return Result(events, self.stderr, self._proc.wait())
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self._events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._proc.kill()  # a late answer would pass for the next prompt's
                raise TimeoutError(f"no result in {timeout} s: {self.stderr[-2000:]}") from None
            if event is None:
                return Result(events, self.stderr, self._proc.wait())
            events.append(event)
            if event.get("type") == "result":
                return Result(events, self.stderr, None)

    def close(self, timeout: float = 60) -> int:
        """End the session as a host does (closing its input); the exit code."""
        assert self._proc.stdin is not None
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
            raise
