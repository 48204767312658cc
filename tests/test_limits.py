"""Per-caller limits: calls and mutations per minute, counted in process or in a real Redis
(Debian's redis-server, tests/services.py) that replicas share; refusals say when to retry,
and over HTTP a call the headers name is refused with 429 and Retry-After."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis as redis_client
from conftest import gateway_env
from pydantic import BaseModel, ConfigDict
from replicas import redis_time, within_one_window
from services import Redis, free_port, redis_server
from wire import HttpServer, tool_call

from gateway import Mutation, ToolContext, ToolSpec, hookimpl
from gateway.auth.identity import Identity
from gateway.errors import GatewayError
from gateway.limits import WINDOW_SECONDS, Limiter, LocalWindows, RedisWindows
from gateway.testing import make_gateway

pytestmark = pytest.mark.e2e

TOKEN = "limits-test-token-71d0e2"
ALICE = Identity(subject="alice@example.com", client_id="cli", scopes=None, via="jwt")
BOB = Identity(subject="bob@example.com", client_id="cli", scopes=None, via="jwt")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Tools:
    def __init__(self) -> None:
        self.changes = 0

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def look(args: _In, ctx: ToolContext[Any]) -> dict[str, Any]:
            return {}

        async def change(args: _In, ctx: ToolContext[Any]) -> dict[str, Any]:
            self.changes += 1
            return {"changes": self.changes}

        register(ToolSpec(name="look", description="d", input_model=_In, handler=look, tier="read"))
        register(
            ToolSpec(
                name="change",
                description="d",
                input_model=_In,
                handler=change,
                tier="mutation",
                mutation=Mutation(
                    consequence="changes",
                    requires="nothing",
                    reversible=True,
                    destructive=False,
                    idempotent=False,
                ),
            )
        )


def test_a_window_admits_the_limit_refuses_the_rest_uncounted_and_the_next_starts_fresh():
    clock = [600.0 + 45.5]  # 14.5 s before the window of 600..660 ends
    windows = LocalWindows(calls=3, mutations=1, clock=lambda: clock[0])
    assert windows.take("a", mutation=True) is None
    refused = windows.take("a", mutation=True)
    assert refused is not None and refused.what == "mutation calls" and refused.limit == 1
    assert refused.retry_after == pytest.approx(14.5)
    assert windows.take("a", mutation=False) is None  # a read: the calls limit still has room
    assert windows.take("a", mutation=False) is None
    refused = windows.take("a", mutation=False)
    assert refused is not None and refused.what == "tool calls" and refused.limit == 3
    assert windows.take("b", mutation=True) is None  # another caller counts alone
    clock[0] = 660.0  # the next window: nothing refused counted in the last one
    assert [windows.take("a", mutation=False) for _ in range(3)] == [None] * 3
    assert windows.take("a", mutation=False) is not None


@pytest.mark.anyio
async def test_over_the_limit_a_call_is_refused_retryable_saying_when(tmp_path):
    tools = _Tools()
    gw = make_gateway(
        objects={"t": tools},
        entry_points=False,
        cwd=tmp_path,
        limit_calls_per_minute=3,
        limit_mutations_per_minute=1,
    )
    within_one_window(time.time)
    async with gw:
        first = await gw.call("change")
        second = await gw.call("change")
        reads = [await gw.call("look") for _ in range(3)]
    assert not first.is_error
    error = second.payload["error"]
    assert error["code"] == "RATE_LIMITED" and error["retryable"] is True
    wait = error["details"]["retry_after_seconds"]
    assert 1 <= wait <= WINDOW_SECONDS
    assert error["message"] == (
        f"too many calls: each caller may make 1 mutation calls a minute; retry in {wait} s"
    )
    assert tools.changes == 1  # the refused mutation did not run
    assert [r.is_error for r in reads] == [False, False, True]  # 1 change + 2 reads = 3 calls
    assert reads[2].payload["error"]["code"] == "RATE_LIMITED"
    # A refused mutation is not audited: it never started.
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [x["outcome"] for x in lines] == ["STARTED", "OK"]


@pytest.fixture(scope="module")
def redis() -> Iterator[Redis]:
    with redis_server() as server:
        yield server


@pytest.mark.anyio
async def test_replicas_sharing_redis_enforce_one_limit_and_store_no_caller_name(redis):
    replicas = [Limiter(5, None, RedisWindows(redis.url, 5, None)) for _ in range(3)]
    within_one_window(redis_time(redis.url))
    admitted = 0
    refusals: list[GatewayError] = []
    for i in range(12):
        try:
            await replicas[i % 3].admit(ALICE, "look", mutation=False)
            admitted += 1
        except GatewayError as err:
            refusals.append(err)
    await replicas[0].admit(BOB, "look", mutation=False)  # another caller has its own count
    for r in replicas:
        await r.aclose()
    assert admitted == 5 and len(refusals) == 7
    assert {e.code.value for e in refusals} == {"RATE_LIMITED"}
    keys = redis_client.Redis.from_url(redis.url).keys("mcp-gateway:limit:*")
    assert len(keys) == 2
    assert not any(b"alice" in k or b"bob" in k for k in keys)  # hashed: no subject in Redis
    ttl = redis_client.Redis.from_url(redis.url).pttl(keys[0])
    assert 0 < ttl <= (WINDOW_SECONDS + 1) * 1000  # gone with its window


@pytest.mark.anyio
async def test_redis_unreachable_refuses_mutations_and_limits_reads_per_replica(caplog):
    closed = f"redis://127.0.0.1:{free_port()}/0"
    limiter = Limiter(2, 5, RedisWindows(closed, 2, 5))
    assert limiter.store is not None
    with pytest.raises(GatewayError) as refused:
        await limiter.admit(ALICE, "change", mutation=True)
    error = refused.value
    assert error.code.value == "BACKEND_UNAVAILABLE" and error.retryable
    assert "nothing was done" in error.message and "Redis" in error.message
    within_one_window(time.time)
    await limiter.admit(ALICE, "look", mutation=False)  # reads fail open ...
    await limiter.admit(ALICE, "look", mutation=False)
    with pytest.raises(GatewayError) as third:  # ... to this replica's own count
        await limiter.admit(ALICE, "look", mutation=False)
    assert third.value.code.value == "RATE_LIMITED"
    assert "reads are limited by this replica alone" in caplog.text
    with pytest.raises(GatewayError) as check:
        await limiter.store.check()
    assert "limit store (Redis) cannot be reached" in check.value.message
    await limiter.aclose()


@pytest.mark.anyio
async def test_a_redis_that_stops_is_reported_and_mutations_refused(tmp_path):
    with redis_server() as server:
        gw = make_gateway(
            objects={"t": _Tools()},
            entry_points=False,
            cwd=tmp_path,
            limit_mutations_per_minute=100,
            limit_redis_url=server.url,
        )
        async with gw:
            assert not (await gw.call("change")).is_error
            healthy = {r.name: r for r in await gw.check_health(use_cache=False)}
    # The server has stopped (the block ended); the same gateway starts again without it.
    async with gw:
        refused = await gw.call("change")
        read = await gw.call("look")
        down = {r.name: r for r in await gw.check_health(use_cache=False)}
        status = await gw.status()
    assert healthy["limit_store"].ok
    assert refused.payload["error"]["code"] == "BACKEND_UNAVAILABLE"
    assert not read.is_error  # reads are not limited here (no calls limit), and go on
    assert not down["limit_store"].ok and not down["limit_store"].blocking
    assert any("gateway/limit_store" in p for p in status["problems"])


def test_limit_settings_that_do_not_fit_stop_with_one_line(tmp_path, cli_main):
    cases = [
        (
            {"MCP_GATEWAY_LIMIT_REDIS_URL": "redis://:pw-4410@127.0.0.1:6379/0"},
            "MCP_GATEWAY_LIMIT_REDIS_URL: set, but no limit is",
        ),
        (
            {
                "MCP_GATEWAY_LIMIT_CALLS_PER_MINUTE": "10",
                "MCP_GATEWAY_LIMIT_REDIS_URL": "http://pw-4410@127.0.0.1/",
            },
            "MCP_GATEWAY_LIMIT_REDIS_URL: must be a redis://, rediss:// or unix:// URL",
        ),
        (
            {"MCP_GATEWAY_LIMIT_CALLS_PER_MINUTE": "0"},
            "MCP_GATEWAY_LIMIT_CALLS_PER_MINUTE: must be a whole number from 1 to 1000000, not '0'",
        ),
    ]
    for env, expected in cases:
        done = cli_main(tmp_path, "tools", env=gateway_env(**env))
        assert done.returncode == 2, env
        assert done.stderr.startswith(f"mcp-gateway: {expected}"), done.stderr
        assert done.stderr.count("\n") == 1 and "pw-4410" not in done.stderr


def test_limits_in_redis_without_the_redis_package_stop_with_the_install_line(
    tmp_path, cli_main, monkeypatch
):
    monkeypatch.setitem(sys.modules, "redis", None)  # what an install without the extra has
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    env = gateway_env(
        MCP_GATEWAY_LIMIT_CALLS_PER_MINUTE="10",
        MCP_GATEWAY_LIMIT_REDIS_URL="redis://127.0.0.1:1/0",
    )
    done = cli_main(tmp_path, "tools", env=env)
    assert done.returncode == 2
    assert done.stderr == (
        "mcp-gateway: MCP_GATEWAY_LIMIT_REDIS_URL: the limits in Redis need the redis package, "
        "which is not installed: pip install 'mcp-plugin-gateway[redis]'\n"
    )


@pytest.fixture(scope="module")
def limited_gateway(tmp_path_factory) -> Iterator[HttpServer]:
    env = gateway_env(
        MCP_GATEWAY_TOKEN=TOKEN,
        MCP_GATEWAY_PLUGINS="notes",
        MCP_GATEWAY_LIMIT_CALLS_PER_MINUTE="3",
    )
    with HttpServer(tmp_path_factory.mktemp("limited"), env) as server:
        yield server


def _post(server: HttpServer, modern: bool, source: str = "127.0.0.1") -> httpx.Response:
    body, headers = tool_call("notes_search", {}, modern=modern, token=TOKEN)
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport) as client:
        return client.post(f"{server.url}/mcp", json=body, headers=headers, timeout=20)


def test_over_http_a_call_named_in_its_headers_gets_429_with_retry_after(limited_gateway):
    within_one_window(time.time)
    answers = [_post(limited_gateway, modern=True) for _ in range(4)]
    # Counted once each (by the transport, not again by the pipeline): three pass.
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert all(not a.json()["result"].get("isError") for a in answers[:3])
    refused = answers[3]
    wait = int(refused.headers["Retry-After"])
    assert 1 <= wait <= WINDOW_SECONDS
    error = refused.json()["error"]
    assert error["code"] == "RATE_LIMITED" and error["retryable"] is True
    assert error["message"].endswith(f"retry in {wait} s")
    # A 2025 request names no tool in its headers: the tool's error result says the same.
    legacy = _post(limited_gateway, modern=False)
    assert legacy.status_code == 200
    result = legacy.json()["result"]
    assert result["isError"] is True
    assert json.loads(result["content"][0]["text"])["error"]["code"] == "RATE_LIMITED"
    # Another client address is another caller (the shared token says nothing about who).
    other = _post(limited_gateway, modern=True, source="127.0.0.2")
    assert other.status_code == 200 and not other.json()["result"].get("isError")


def test_readyz_and_health_say_when_redis_and_postgres_cannot_be_reached(tmp_path, cli_main):
    env = gateway_env(
        MCP_GATEWAY_TOKEN=TOKEN,
        MCP_GATEWAY_PLUGINS="notes",
        MCP_GATEWAY_LIMIT_CALLS_PER_MINUTE="100",
        MCP_GATEWAY_LIMIT_REDIS_URL=f"redis://:pw-3391@127.0.0.1:{free_port()}/0",
        MCP_GATEWAY_AUDIT_SINKS="file,postgres",
        MCP_GATEWAY_AUDIT_DATABASE_URL=f"postgresql://u:pw-3391@127.0.0.1:{free_port()}/db",
    )
    with HttpServer(tmp_path, env) as server:
        ready = server.client.get(
            f"{server.url}/readyz", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )
    # Ready (reads are served), and saying what is down.
    assert ready.status_code == 200 and ready.json()["ready"] is True
    problems = ready.json()["problems"]
    assert any(p.startswith("gateway/audit_database: failed: the audit database") for p in problems)
    assert any(
        p.startswith("gateway/limit_store: failed: the limit store (Redis)") for p in problems
    )
    assert "pw-3391" not in ready.text
    done = cli_main(tmp_path, "health", env=env)
    assert done.returncode == 0  # not required checks: the output says, the exit code does not
    rows = [line.split() for line in done.stdout.splitlines()]
    assert ["gateway", "audit_database", "failed", "no"] in [r[:4] for r in rows]
    assert ["gateway", "limit_store", "failed", "no"] in [r[:4] for r in rows]
    assert "pw-3391" not in done.stdout + done.stderr
