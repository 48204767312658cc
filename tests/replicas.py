"""Replicas of the gateway as a team deploys them: ``mcp-gateway serve --transport http`` with
a token, as real processes on 127.0.0.1, serving a throw-away plugin (``tally``) whose
mutation leaves a trace of every run. For the three-replica test and bench/replica_bench.py.

    with Deployment(folder, env) as deployment:
        deployment.start(3)                        # each replica's start-up time measured
        with deployment.balanced() as lb: ...      # HAProxy in front (tests/services.py)

``tally_add(key)`` appends one JSON line ``{key, replica, correlation_id}`` to the effects file
(O_APPEND: whole lines from every replica) after ``hold_ms``, and returns the same object:
what ran, where, exactly as often as it ran. ``tally_get`` is a read that says which replica
answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from services import HAProxy, free_port, haproxy
from wire import tool_call

TOKEN = "replica-test-token-4c1d9e07"
SERVE = [sys.executable, "-m", "gateway.cli", "serve", "--transport", "http"]
#: The gateway's limit window (gateway.limits.WINDOW_SECONDS).
WINDOW_SECONDS = 60

TALLY = """
from __future__ import annotations
import json, os
import anyio
from pydantic import BaseModel, ConfigDict, Field
from gateway import Mutation, ToolSpec, hookimpl

class AddIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(max_length=100)
    hold_ms: int = Field(0, ge=0, le=5000)

class GetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hold_ms: int = Field(0, ge=0, le=5000)

def _replica():
    return os.environ.get("MCP_GATEWAY_REPLICA_NAME", "")

async def tally_add(args, ctx):
    await anyio.sleep(args.hold_ms / 1000)
    effect = {"key": args.key, "replica": _replica(), "correlation_id": ctx.correlation_id}
    fd = os.open(os.environ["TALLY_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(effect) + "\\n").encode())
    finally:
        os.close(fd)
    return effect

async def tally_get(args, ctx):
    await anyio.sleep(args.hold_ms / 1000)
    return {"replica": _replica()}

@hookimpl
def register_tools(register):
    register(ToolSpec(name="tally_add", description="Record a key.", input_model=AddIn,
                      handler=tally_add, tier="mutation",
                      mutation=Mutation(consequence="records the key", requires="nothing",
                                        reversible=False, destructive=False, idempotent=False)))
    register(ToolSpec(name="tally_get", description="Say who answers.", input_model=GetIn,
                      handler=tally_get, tier="read"))
"""


def install_tally(site: Path) -> Path:
    """The plugin as an installed distribution (a module and its dist-info) in ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "gateway_tally.py").write_text(TALLY)
    info = site / "mcp_plugin_gateway_tally-1.0.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: mcp-plugin-gateway-tally\nVersion: 1.0.0\n"
    )
    (info / "entry_points.txt").write_text("[mcp_gateway.plugins]\ntally = gateway_tally\n")
    return site


@dataclass
class Replica:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    #: spawn until ``/healthz`` answered, in seconds
    start_seconds: float = 0.0

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@dataclass
class Deployment:
    """Replicas sharing ``env`` (the audit and limit settings), each with its own name."""

    root: Path
    env: dict[str, str]
    replicas: list[Replica] = field(default_factory=list)

    @property
    def effects_file(self) -> Path:
        return self.root / "effects.jsonl"

    def effects(self) -> list[dict[str, Any]]:
        if not self.effects_file.exists():
            return []
        return [json.loads(x) for x in self.effects_file.read_text().splitlines()]

    def start(self, count: int) -> None:
        """Start ``count`` replicas at once and wait until each answers."""
        site = install_tally(self.root / "site")
        path = os.pathsep.join(p for p in (str(site), self.env.get("PYTHONPATH", "")) if p)
        first = len(self.replicas)
        names = [f"r{first + i}" for i in range(count)]

        def start_one(name: str) -> Replica:
            folder = self.root / name
            folder.mkdir(exist_ok=True)
            env = {
                **self.env,
                "PYTHONPATH": path,
                "MCP_GATEWAY_TOKEN": TOKEN,
                "MCP_GATEWAY_PLUGINS": "tally",
                # The throw-away plugin reads the replica's name and its file from the
                # environment, which a worker process is never given: it runs in process.
                "MCP_GATEWAY_ISOLATE": "none",
                "MCP_GATEWAY_REPLICA_NAME": name,
                "TALLY_FILE": str(self.effects_file),
            }
            port = free_port()
            log = folder / "stderr.log"
            began = time.perf_counter()
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [*SERVE, "--port", str(port)],
                    cwd=folder,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=out,
                )
            replica = Replica(name, port, proc, log)
            with httpx.Client() as client:
                deadline = time.monotonic() + 60
                while True:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError(f"replica {name} did not start:\n{replica.stderr()}")
                    try:
                        client.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                        break
                    except httpx.TransportError:
                        time.sleep(0.01)
            replica.start_seconds = time.perf_counter() - began
            return replica

        with ThreadPoolExecutor(count) as pool:
            futures = [pool.submit(start_one, name) for name in names]
            started = []
            for future in futures:
                try:
                    started.append(future.result())
                except AssertionError:
                    for f in futures:  # stop the ones that did start
                        if f.done() and f.exception() is None:
                            f.result().proc.kill()
                    raise
        self.replicas.extend(started)

    @contextmanager
    def balanced(self, replicas: list[Replica] | None = None) -> Iterator[HAProxy]:
        """HAProxy in front of the replicas: checks ``/healthz`` every second, retries only
        a connection that failed, passes the client's address on (``X-Forwarded-For``)."""
        chosen = self.replicas if replicas is None else replicas
        with haproxy(
            [r.address for r in chosen],
            health_path="/healthz",
            health_host="127.0.0.1:80",
            forward_for=True,
        ) as lb:
            yield lb

    def close(self) -> None:
        for replica in self.replicas:
            if replica.proc.poll() is None:
                replica.proc.terminate()
        for replica in self.replicas:
            try:
                replica.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                replica.proc.kill()
                replica.proc.wait()

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Answer:
    """One call's outcome as the client saw it."""

    status: int  # HTTP status; 0: no answer (the connection failed)
    result: dict[str, Any] | None = None  # the tool's JSON (success), or its error envelope
    error: str | None = None  # RATE_LIMITED, an error code, or what the HTTP layer said
    retry_after: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None


def call(
    client: httpx.Client, url: str, tool: str, arguments: dict[str, Any], *, modern: bool
) -> Answer:
    """One raw ``tools/call`` through ``url`` (the balancer or a replica)."""
    body, headers = tool_call(tool, arguments, modern=modern, token=TOKEN)
    try:
        response = client.post(f"{url}/mcp", json=body, headers=headers, timeout=30)
    except httpx.TransportError as exc:
        return Answer(0, error=type(exc).__name__)
    if response.status_code != 200:
        try:
            code = response.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = f"HTTP {response.status_code}"
        return Answer(
            response.status_code, error=code, retry_after=response.headers.get("retry-after")
        )
    result = response.json()["result"]
    payload = json.loads(result["content"][0]["text"])
    if result.get("isError"):
        return Answer(200, payload, error=payload["error"]["code"])
    return Answer(200, payload)


def within_one_window(now: Callable[[], float], need: float = 15.0) -> None:
    """Wait, when fewer than ``need`` seconds are left of the current window of ``now``'s
    clock, for the next one: the counts a test makes then fall in one window."""
    left = WINDOW_SECONDS - now() % WINDOW_SECONDS
    if left < need:
        time.sleep(left + 0.05)


def redis_time(url: str) -> Callable[[], float]:
    import redis

    client = redis.Redis.from_url(url)

    def now() -> float:
        seconds, micros = client.time()
        return float(seconds) + micros / 1e6

    return now
