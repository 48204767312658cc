"""A real ``mcp-gateway serve`` subprocess, spoken to byte by byte (stdio) or over HTTP.

For tests that need what the official client hides: raw lines, garbage, signals, exit codes.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from signal import SIGTERM
from typing import Any, Generic, Protocol, TypeVar

import httpx

INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "wire-test", "version": "1"},
}
_SERVE = [sys.executable, "-m", "gateway.cli", "serve"]
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


class StdioServer:
    """``mcp-gateway serve`` over pipes; stderr goes to a file unless ``stderr`` is given."""

    def __init__(
        self,
        cwd: Path,
        env: dict[str, str],
        *,
        stderr: int | None = None,
        initialize: bool = True,
        **popen: Any,
    ) -> None:
        self.stderr_path = cwd / "gateway-stderr.log"
        self._stderr_file = None if stderr is not None else self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            _SERVE,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr if stderr is not None else self._stderr_file,
            **popen,
        )
        self._buffer = b""
        self._next_id = 100
        if initialize:
            self.request("initialize", INIT)
            self.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def send_raw(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode())

    def read_line(self, timeout: float = 20) -> bytes:
        """The next line the server writes, as sent; ``AssertionError`` if none comes in time."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no message within {timeout} s; stderr: {self.stderr()}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"the server closed stdout; stderr: {self.stderr()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def read_message(self, timeout: float = 20) -> dict[str, Any]:
        """The next line the server writes, parsed."""
        message: dict[str, Any] = json.loads(self.read_line(timeout))
        return message

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 20
    ) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params or {}})
        while True:
            message = self.read_message(timeout)
            if message.get("id") == ident:
                return message

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.request("tools/call", {"name": tool, "arguments": arguments or {}})
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 20) -> int:
        return self.proc.wait(timeout=timeout)

    def stderr(self) -> str:
        if self._stderr_file is None:
            return "(stderr not captured)"
        if not self._stderr_file.closed:
            self._stderr_file.flush()
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        if self._stderr_file is not None:
            self._stderr_file.close()

    def __enter__(self) -> StdioServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FolderCopies:
    """Copies of folders (each file and folder with its times, as the gateway's caches key them)
    to put back: tests that share what one start left behind each get it as it was."""

    def __init__(self, folders: list[Path], where: Path) -> None:
        self.folders = folders
        self.where = where
        for folder in folders:
            shutil.copytree(folder, where / folder.name)

    def restore(self) -> None:
        for folder in self.folders:
            shutil.rmtree(folder)
            shutil.copytree(self.where / folder.name, folder)


class Deployed(Protocol):
    site: Path  # the plugin's folder
    cache: Path  # the user cache the gateway writes


D = TypeVar("D", bound=Deployed)
F = TypeVar("F")


@dataclass
class Primed(Generic[D, F]):
    """A deployment after its first start, what that start gave, how many cache files it left
    (``written``), and copies of the plugin's folder and the cache as it left them: tests about
    a later start share the one first start and each get the deployment back as it was."""

    deployment: D
    first: F
    written: int
    copies: FolderCopies

    @classmethod
    def of(cls, deployment: D, first: F, written: int, where: Path) -> Primed[D, F]:
        return cls(
            deployment, first, written, FolderCopies([deployment.site, deployment.cache], where)
        )

    def restored(self) -> D:
        self.copies.restore()
        return self.deployment


def run_cli(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """One ``mcp-gateway`` command, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(
    client: httpx.Client, url: str, proc: subprocess.Popen[Any], timeout: float = 30
) -> bool:
    """Whether the server at ``url`` answers (any status: it listens) before ``proc`` exits
    or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            client.get(url + "/healthz", timeout=1)
            return True
        except httpx.TransportError:
            time.sleep(0.1)
    return False


class HttpServer:
    """``mcp-gateway serve --transport http`` on a free loopback port."""

    def __init__(self, cwd: Path, env: dict[str, str], **popen: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stderr_path = cwd / "gateway-stderr.log"
        self._stderr_file = self.stderr_path.open("wb")
        popen.setdefault("stderr", self._stderr_file)
        self.proc = subprocess.Popen(
            [*_SERVE, "--transport", "http", "--port", str(self.port)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            **popen,
        )
        #: one client for the server's life: ``httpx.post`` makes a client per request, and
        #: each loads the CA bundle (~40 ms of CPU) even for plain http
        self.client = httpx.Client()
        if not wait_listening(self.client, self.url, self.proc):
            what = "did not start" if self.proc.poll() is None else "exited"
            self.close()
            raise AssertionError(f"the gateway {what}: {self.stderr()}")

    def rpc(
        self, method: str, params: dict[str, Any] | None = None, **headers: str
    ) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
        return self.client.post(
            self.url + "/mcp", json=body, headers={**MCP_HEADERS, **headers}, timeout=20
        )

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.rpc("tools/call", {"name": tool, "arguments": arguments or {}})
        assert answer.status_code == 200, (answer.status_code, answer.text)
        result: dict[str, Any] = answer.json()["result"]
        return result

    def stderr(self) -> str:
        if not self._stderr_file.closed:
            self._stderr_file.flush()
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 20) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self, signum: int = SIGTERM, timeout: float = 20) -> int:
        self.signal(signum)
        return self.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.client.close()
        self._stderr_file.close()

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


MODERN = "2026-07-28"


def tool_call(
    tool: str, arguments: dict[str, Any], *, modern: bool, token: str | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and headers of one raw ``tools/call`` over HTTP: a 2026-07-28 request (its
    ``Mcp-Method``/``Mcp-Name`` headers name the tool, its ``_meta`` carries the version) or a
    2025-06-18 one (stateless JSON, no headers naming the tool)."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    headers = dict(MCP_HEADERS)
    if modern:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "wire-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers.update(
            {
                "Accept": "application/json",
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": "tools/call",
                "Mcp-Name": tool,
            }
        )
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers
