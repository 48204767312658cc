"""Per-caller limits: tool calls and mutation calls per minute, per caller.

The caller is the OAuth subject; without OAuth, the client's address (over HTTP; behind a
balancer, the address it forwards, see docs/deploy.md); over stdio, the OS account. The limits
count in fixed windows of a minute: the first call of a caller in a window opens it, each call
the window admits counts once, and a call over a limit is refused (``RATE_LIMITED``, retryable,
saying in how many seconds the window ends) without counting. Within one window no caller gets
more than the limit; across the edge of two windows a burst of up to twice the limit can pass,
the price of a counter that costs one small atomic step per call.

In process by default: each replica counts for itself. With ``limit_redis_url`` every replica
counts in Redis, so N replicas enforce one limit: one Lua script per call reads the window
from Redis's own clock (replicas' clocks never disagree about it), checks both limits and
counts, atomically, in one hash per caller that expires with its window. The caller's name is
hashed into the key: Redis holds no subject or address.

Redis unreachable: a mutation is refused (``BACKEND_UNAVAILABLE``: a limit that cannot be kept
is not waived for changes), a read is limited by this replica's own count meanwhile (fail
open, to N times the limit at worst) and the log says so; Redis is tried again after
:data:`DOWN_SECONDS`. The health check (``gateway/limit_store``) reports it.

Over HTTP, a 2026-07-28 ``tools/call`` names its tool in the ``Mcp-Method``/``Mcp-Name``
headers: :class:`LimitGate` then counts it before the MCP layer reads the body, and a refusal
is the transport's own answer, 429 with ``Retry-After``. Every other call is counted by the
pipeline's layer, and a refusal is the tool's error result.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from .auth.identity import Identity, current_caller
from .configkit import ConfigError
from .errors import ErrorCode, GatewayError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from .config import GatewayConfig

log = logging.getLogger("gateway.limits")

WINDOW_SECONDS = 60
#: How long a replica that could not reach Redis waits before it tries again.
DOWN_SECONDS = 2.0
#: Seconds a call to Redis may take before Redis counts as unreachable.
REDIS_SECONDS = 0.5
KEY_PREFIX = "mcp-gateway:limit:"

#: The client's address of the HTTP request being served (set by :class:`LimitGate`).
CLIENT_ADDRESS: ContextVar[str | None] = ContextVar("gateway_client_address", default=None)
#: The tool the transport already counted for this request (a one-item list, emptied once
#: the pipeline has seen it).
_COUNTED: ContextVar[list[str] | None] = ContextVar("gateway_limit_counted", default=None)


def caller_key(caller: Identity) -> str:
    """Whom a call counts against: the OAuth subject, the OS account (stdio), else the
    client's address."""
    if caller.subject and caller.via in ("jwt", "introspection"):
        return f"sub:{caller.subject}"
    if caller.subject and caller.via == "local":
        return f"os:{caller.subject}"
    return f"addr:{CLIENT_ADDRESS.get() or 'unknown'}"


@dataclass(frozen=True)
class Refusal:
    what: str  # "tool calls" or "mutation calls"
    limit: int
    retry_after: float  # seconds until the window ends


class StoreDown(Exception):
    """Redis could not be asked (the message: what failed)."""


class LocalWindows:
    """The counts of this process (``clock``: seconds; windows align with the wall clock, as
    Redis's do)."""

    def __init__(
        self, calls: int | None, mutations: int | None, clock: Callable[[], float] = time.time
    ) -> None:
        self.calls = calls
        self.mutations = mutations
        self.clock = clock
        self._counts: dict[str, list[int]] = {}  # key -> [window, calls, mutations]

    def take(self, key: str, mutation: bool) -> Refusal | None:
        now = self.clock()
        window = int(now // WINDOW_SECONDS)
        left = (window + 1) * WINDOW_SECONDS - now
        entry = self._counts.get(key)
        if entry is None or entry[0] != window:
            if len(self._counts) >= 10_000:  # forget the callers of windows gone by
                self._counts = {k: v for k, v in self._counts.items() if v[0] == window}
            entry = self._counts[key] = [window, 0, 0]
        if self.calls and entry[1] >= self.calls:
            return Refusal("tool calls", self.calls, left)
        if mutation and self.mutations and entry[2] >= self.mutations:
            return Refusal("mutation calls", self.mutations, left)
        entry[1] += 1
        entry[2] += 1 if mutation else 0
        return None


#: KEYS[1] the caller's hash; ARGV: calls limit, mutations limit (0: none), 1 for a mutation,
#: the window's seconds. Returns {admitted 0/1, milliseconds left in the window, 1 calls /
#: 2 mutations refused}. The window comes from Redis's clock, so every replica agrees on it.
_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local size = tonumber(ARGV[4])
local window = math.floor(now / size)
local left = math.ceil(((window + 1) * size - now) * 1000)
local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'm')
local calls, muts = 0, 0
if tonumber(state[1]) == window then
  calls = tonumber(state[2]) or 0
  muts = tonumber(state[3]) or 0
end
local climit, mlimit = tonumber(ARGV[1]), tonumber(ARGV[2])
local mutation = ARGV[3] == '1'
if climit > 0 and calls >= climit then return {0, left, 1} end
if mutation and mlimit > 0 and muts >= mlimit then return {0, left, 2} end
calls = calls + 1
if mutation then muts = muts + 1 end
redis.call('HSET', KEYS[1], 'w', window, 'c', calls, 'm', muts)
redis.call('PEXPIRE', KEYS[1], left + 1000)
return {1, left, 0}
"""


class RedisWindows:
    """The counts of every replica, in Redis (the ``redis`` extra, imported only here)."""

    def __init__(
        self,
        url: str,
        calls: int | None,
        mutations: int | None,
        *,
        setting: str = "limit_redis_url",
    ) -> None:
        try:
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError:
            raise ConfigError(
                f"{setting}: the limits in Redis need the redis package, which is not "
                "installed: pip install 'mcp-plugin-gateway[redis]'"
            ) from None
        self.calls = calls
        self.mutations = mutations
        # No retries of its own: a call waits at most REDIS_SECONDS for the limit, then the
        # replica counts alone for DOWN_SECONDS.
        self._client: Any = aioredis.Redis.from_url(
            url,
            socket_timeout=REDIS_SECONDS,
            socket_connect_timeout=REDIS_SECONDS,
            retry=Retry(NoBackoff(), 0),
            client_name="mcp-gateway",
        )
        self._script = self._client.register_script(_SCRIPT)
        self._down_until = 0.0

    async def take(self, key: str, mutation: bool) -> Refusal | None:
        if time.monotonic() < self._down_until:
            raise StoreDown("unreachable moments ago")
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        args = [self.calls or 0, self.mutations or 0, 1 if mutation else 0, WINDOW_SECONDS]
        try:
            with anyio.fail_after(REDIS_SECONDS * 2):
                admitted, left_ms, which = await self._script(keys=[KEY_PREFIX + digest], args=args)
        except Exception as exc:  # a connection, timeout or server error: unreachable
            self._down_until = time.monotonic() + DOWN_SECONDS
            raise StoreDown(type(exc).__name__) from None
        if admitted:
            return None
        if int(which) == 2:
            return Refusal("mutation calls", self.mutations or 0, int(left_ms) / 1000)
        return Refusal("tool calls", self.calls or 0, int(left_ms) / 1000)

    async def check(self) -> str | None:
        """The health check: Redis answers (asked even while counted as down)."""
        try:
            with anyio.fail_after(REDIS_SECONDS * 4):
                await self._client.ping()
        except Exception as exc:
            raise GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                f"the limit store (Redis) cannot be reached ({type(exc).__name__}): mutations "
                "are refused and reads limited per replica until it can",
            ) from None
        self._down_until = 0.0
        return "redis"

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):  # connections of a Redis that is gone
            await self._client.aclose()


class Limiter:
    """The limits of a deployment: in Redis when configured, else (and for reads while
    Redis cannot be reached) in this process."""

    def __init__(
        self, calls: int | None, mutations: int | None, store: RedisWindows | None = None
    ) -> None:
        self.calls = calls
        self.mutations = mutations
        self.store = store
        self.local = LocalWindows(calls, mutations)

    async def admit(self, caller: Identity, tool: str, mutation: bool) -> None:
        """Count a call of ``tool`` by ``caller``, or refuse it (:class:`GatewayError`)."""
        if not mutation and not self.calls:
            return  # only mutations are limited
        key = caller_key(caller)
        if self.store is None:
            refusal = self.local.take(key, mutation)
        else:
            try:
                refusal = await self.store.take(key, mutation)
            except StoreDown as down:
                if mutation:
                    raise GatewayError(
                        ErrorCode.BACKEND_UNAVAILABLE,
                        f"tool {tool!r} was not run: the per-caller limits cannot be checked "
                        "(their store, Redis, cannot be reached), so changes are refused until "
                        f"they can; nothing was done. Retry in {math.ceil(DOWN_SECONDS)} s",
                    ) from None
                log.warning(
                    "limit store (Redis) unreachable (%s): reads are limited by this replica "
                    "alone, mutations refused",
                    down,
                )
                refusal = self.local.take(key, mutation)
        if refusal is not None:
            raise refused(refusal)

    def counted(self, tool: str) -> bool:
        """Whether the transport already counted this request's call of ``tool`` (once)."""
        box = _COUNTED.get()
        if box and box[0] == tool:
            box.clear()
            return True
        return False

    async def aclose(self) -> None:
        if self.store is not None:
            await self.store.aclose()


def refused(refusal: Refusal) -> GatewayError:
    wait = max(1, math.ceil(refusal.retry_after))
    return GatewayError(
        ErrorCode.RATE_LIMITED,
        f"too many calls: each caller may make {refusal.limit} {refusal.what} a minute; "
        f"retry in {wait} s",
        details={"retry_after_seconds": wait},
    )


def build_limiter(config: GatewayConfig) -> Limiter | None:
    """``None`` when no limit is set (no layer, no gate)."""
    calls, mutations = config.limit_calls_per_minute, config.limit_mutations_per_minute
    if not calls and not mutations:
        return None
    url = config.limit_redis_url
    if url is None:
        return Limiter(calls, mutations)
    from .config import setting_label

    setting = setting_label(config, "limit_redis_url")
    store = RedisWindows(url.get_secret_value(), calls, mutations, setting=setting)
    return Limiter(calls, mutations, store)


class LimitGate:
    """Pure ASGI middleware, inside the authentication (the caller is known): records the
    client's address for :func:`caller_key`, and counts a ``tools/call`` whose
    ``Mcp-Method``/``Mcp-Name`` headers name an offered tool before the MCP layer runs it,
    answering 429 with ``Retry-After`` over the limit. (The MCP layer checks that the header
    names the tool of the body; the pipeline counts any call it was not told about.)"""

    def __init__(
        self,
        app: ASGIApp,
        limiter: Limiter,
        is_mutation: Callable[[str], bool | None],
        path: str,
    ) -> None:
        self.app = app
        self.limiter = limiter
        self.is_mutation = is_mutation  # None: not an offered tool
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        peer = scope.get("client")
        address = CLIENT_ADDRESS.set(peer[0] if peer else None)
        counted = _COUNTED.set(None)
        try:
            name = self._named_call(scope)
            if name is not None:
                mutation = self.is_mutation(name)
                if mutation is not None:
                    try:
                        await self.limiter.admit(current_caller(), name, mutation)
                    except GatewayError as err:
                        if err.code is ErrorCode.RATE_LIMITED:
                            await _too_many(send, err)
                            return
                        # The store is down: the pipeline refuses it as the tool's error.
                    else:
                        _COUNTED.set([name])
            await self.app(scope, receive, send)
        finally:
            _COUNTED.reset(counted)
            CLIENT_ADDRESS.reset(address)

    def _named_call(self, scope: Scope) -> str | None:
        if scope["path"] != self.path or scope["method"] != "POST":
            return None
        method = names = None
        count = 0
        for key, value in scope.get("headers", []):
            if key == b"mcp-method":
                method = value
            elif key == b"mcp-name":
                names, count = value, count + 1
        if method != b"tools/call" or names is None or count != 1:
            return None
        from mcp.shared.inbound import decode_header_value

        return decode_header_value(names.decode("latin-1"))


async def _too_many(send: Send, err: GatewayError) -> None:
    import json

    wait = (err.details or {}).get("retry_after_seconds", 1)
    body = json.dumps(
        {"error": {"code": err.code.value, "message": err.message, "retryable": True}},
        separators=(",", ":"),
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(wait).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})
