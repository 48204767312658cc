"""Replicas behind a load balancer (issue 40): throughput through HAProxy with one and with
three replicas, replica start-up time, the errors a client sees when a replica is killed, and
what the Redis limit and the PostgreSQL audit add to a call.

    .venv/bin/python bench/replica_bench.py [--seconds 5] [--rounds 3] [--clients 16]

Needs Debian's haproxy, redis-server and postgresql (as the tests do: tests/services.py) and
the test extras (psycopg, redis). Everything runs on 127.0.0.1; the load generator is a
minimal HTTP/1.1 client on asyncio in this process (keep-alive connections, ~20 µs of CPU a
request), so it takes less of the two cores than the replicas do.

- throughput: ``tools/call`` of a read tool (2025-06-18 JSON requests, as Claude Code sends)
  from ``--clients`` connections for ``--seconds``, through one HAProxy in front of replica r0
  alone and another in front of r0, r1 and r2 (the same processes), alternated ``--rounds``
  times; requests per second, and the ratio three / one, per round.
- start-up: spawn of ``mcp-gateway serve --transport http`` until ``/healthz`` answers, for
  one replica started alone and for three started at once.
- kill: the same load (reads and mutations alternated) through three replicas; one is killed
  with SIGKILL half-way; every answer that is not a tool result is counted by kind.
- added latency, in process (the pipeline without a transport; median of alternated blocks):
  a read call with the Redis limit against none; a mutation with the audit in PostgreSQL and
  the file against the file alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from replicas import TOKEN, Deployment  # noqa: E402
from services import postgres_server, redis_server  # noqa: E402


def _request(port: int, tool: str, arguments: dict[str, Any]) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    ).encode()
    head = (
        "POST /mcp HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        "MCP-Protocol-Version: 2025-06-18\r\n"
        f"Authorization: Bearer {TOKEN}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _load(
    port: int, requests: list[bytes], seconds: float, clients: int, at_half: Any = None
) -> tuple[int, Counter[str], list[float]]:
    """Requests (cycled) from ``clients`` keep-alive connections for ``seconds``: the number
    answered with a tool result, the other outcomes by kind, and when each of those came."""
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    ok = 0
    other: Counter[str] = Counter()
    when: list[float] = []

    async def client(n: int) -> None:
        nonlocal ok
        reader = writer = None
        i = n
        while time.monotonic() < deadline:
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                assert reader is not None
                writer.write(requests[i % len(requests)])
                i += 1
                await writer.drain()
                first = await reader.readline()
                if not first:
                    raise ConnectionResetError("closed without an answer")
                status = int(first.split()[1])
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                if status == 200 and b'"isError":true' not in body:
                    ok += 1
                else:
                    other[f"HTTP {status}" + (" isError" if status == 200 else "")] += 1
                    when.append(time.monotonic() - started)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                other[f"no answer ({type(exc).__name__})"] += 1
                when.append(time.monotonic() - started)
                if writer is not None:
                    writer.close()
                reader = writer = None

    async def halfway() -> None:
        await asyncio.sleep(seconds / 2)
        at_half()

    tasks = [client(n) for n in range(clients)] + ([halfway()] if at_half else [])
    await asyncio.gather(*tasks)
    return ok, other, when


def throughput(deployment: Deployment, seconds: float, rounds: int, clients: int) -> list[str]:
    out = []
    r0 = deployment.replicas[:1]
    with deployment.balanced(r0) as one, deployment.balanced() as three:
        time.sleep(2.5)  # the balancers' first health checks
        for lb in (one, three):  # warm up: every replica's first calls build the models
            asyncio.run(_load(lb.port, [_request(lb.port, "tally_get", {})], 1.0, clients))
        for n in range(rounds):
            rates = {}
            for name, lb in (
                (("one", one), ("three", three))
                if n % 2 == 0
                else (
                    ("three", three),
                    ("one", one),
                )
            ):
                ok, other, _ = asyncio.run(
                    _load(lb.port, [_request(lb.port, "tally_get", {})], seconds, clients)
                )
                rates[name] = ok / seconds
                assert not other, other
            out.append(
                f"round {n + 1}: one replica {rates['one']:.0f} req/s, three {rates['three']:.0f}"
                f" req/s = {rates['three'] / rates['one']:.2f} x"
            )
            print(out[-1], flush=True)
    return out


def kill(deployment: Deployment, seconds: float, clients: int) -> list[str]:
    victim = deployment.replicas[1]
    with deployment.balanced() as lb:
        time.sleep(2.5)
        requests = [
            _request(lb.port, "tally_get", {}),
            *[_request(lb.port, "tally_add", {"key": f"k{i}"}) for i in range(1000)],
        ]
        interleaved = [
            r for pair in zip(requests[:1] * 1000, requests[1:], strict=True) for r in pair
        ]
        killed: list[float] = []

        def stop() -> None:
            killed.append(time.monotonic())
            victim.proc.send_signal(signal.SIGKILL)

        began = time.monotonic()
        ok, other, when = asyncio.run(_load(lb.port, interleaved, seconds, clients, stop))
    at = killed[0] - began
    last = max(when) - at if when else 0.0
    line = (
        f"{ok} tool results in {seconds:g} s through three replicas, {clients} clients; r1 "
        f"killed at {at:.1f} s: {sum(other.values())} other answers "
        f"({', '.join(f'{v} {k}' for k, v in other.items()) or 'none'}), the last "
        f"{last * 1000:.0f} ms after the kill"
    )
    print(line, flush=True)
    return [line]


def startup(env: dict[str, str], root: Path) -> list[str]:
    alone, together = [], []
    for n in range(3):
        with Deployment(root / f"alone{n}", env) as one:
            one.start(1)
            alone.append(one.replicas[0].start_seconds)
    with Deployment(root / "together", env) as three:
        three.start(3)
        together = [r.start_seconds for r in three.replicas]
    line = (
        f"spawn -> /healthz: one replica alone {', '.join(f'{s:.2f}' for s in alone)} s; three "
        f"at once {', '.join(f'{s:.2f}' for s in together)} s"
    )
    print(line, flush=True)
    return [line]


def added_latency(redis_url: str, dsn: str, root: Path, calls: int, blocks: int) -> list[str]:
    """Medians of per-call latency, in process, alternated in blocks."""
    import anyio
    from pydantic import BaseModel, ConfigDict

    from gateway import Mutation, ToolSpec, hookimpl
    from gateway.testing import make_gateway

    class In(BaseModel):
        model_config = ConfigDict(extra="forbid")
        key: str = "k"

    class Tools:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            async def get(args: In, ctx: Any) -> dict[str, Any]:
                return {"key": args.key}

            async def add(args: In, ctx: Any) -> dict[str, Any]:
                return {"key": args.key}

            register(
                ToolSpec(name="get", description="d", input_model=In, handler=get, tier="read")
            )
            mutation = Mutation(
                consequence="c", requires="r", reversible=True, destructive=False, idempotent=True
            )
            register(
                ToolSpec(
                    name="add",
                    description="d",
                    input_model=In,
                    handler=add,
                    tier="mutation",
                    mutation=mutation,
                )
            )

    def gateway(name: str, **settings: Any) -> Any:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        return make_gateway(objects={"t": Tools()}, entry_points=False, cwd=folder, **settings)

    variants = {
        "read, no limit": ("get", gateway("plain")),
        "read, Redis limit": (
            "get",
            gateway("redis", limit_calls_per_minute=1_000_000, limit_redis_url=redis_url),
        ),
        "mutation, file audit": ("add", gateway("file")),
        "mutation, file + PostgreSQL audit": (
            "add",
            gateway(
                "postgres",
                audit_sinks=["file", "postgres"],
                audit_database_url=dsn,
                audit_table="bench_audit",
            ),
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}

    async def main() -> None:
        for _, gw in variants.values():
            await gw.start()
        try:
            for tool, gw in variants.values():  # warm up (models, connections, table)
                for _ in range(50):
                    assert not (await gw.call(tool, {})).is_error
            for _ in range(blocks):
                for name, (tool, gw) in variants.items():
                    for _ in range(calls // blocks):
                        began = time.perf_counter()
                        await gw.call(tool, {})
                        samples[name].append((time.perf_counter() - began) * 1e6)
        finally:
            for _, gw in variants.values():
                await gw.stop()

    anyio.run(main)
    median = {name: statistics.median(s) for name, s in samples.items()}
    lines = [
        f"{name}: median {m:.0f} µs over {len(samples[name])} calls" for name, m in median.items()
    ]
    lines.append(
        f"added by the Redis limit: {median['read, Redis limit'] - median['read, no limit']:.0f}"
        " µs a call; by the PostgreSQL audit: "
        f"{median['mutation, file + PostgreSQL audit'] - median['mutation, file audit']:.0f}"
        " µs a mutation"
    )
    for line in lines:
        print(line, flush=True)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--calls", type=int, default=2000, help="per variant, added latency")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    report: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="replica-bench-") as folder,
        redis_server() as redis,
        postgres_server() as pg,
    ):
        root = Path(folder)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")}
        env.update(
            MCP_GATEWAY_AUDIT_SINKS="stderr,postgres",
            MCP_GATEWAY_AUDIT_DATABASE_URL=pg.dsn,
            MCP_GATEWAY_LIMIT_CALLS_PER_MINUTE="1000000",
            MCP_GATEWAY_LIMIT_REDIS_URL=redis.url,
            MCP_GATEWAY_LOG_LEVEL="WARNING",
        )
        report += startup(env, root / "startup")
        with Deployment(root / "throughput", env) as deployment:
            deployment.start(3)
            report += throughput(deployment, args.seconds, args.rounds, args.clients)
        with Deployment(root / "kill", env) as deployment:
            deployment.start(3)
            report += kill(deployment, args.seconds * 2, args.clients)
        report += added_latency(redis.url, pg.dsn, root / "latency", args.calls, 10)
    print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
