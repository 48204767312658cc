"""Network preflight: resolve the board's host name before a term is scraped.

A scrape that starts while DNS is down wastes minutes and reports a confusing board error;
a cheap resolution first, retried with exponential back-off, tells the two apart.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

Resolver = Callable[[str, int], Awaitable[Any]]
Sleeper = Callable[[float], Awaitable[None]]

#: One resolution attempt may not take longer than this (a stuck resolver is a failure).
ATTEMPT_TIMEOUT_S = 10.0


async def resolve_host(host: str, port: int) -> Any:
    """The real resolver: the system's getaddrinfo, off the event loop."""
    return await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)


def backoff_delays(attempts: int, sleep_seconds: float, backoff: float) -> list[float]:
    """The sleeps between ``attempts`` tries: ``sleep_seconds * backoff**k`` for k = 0, 1, …
    (one fewer than the attempts: there is no sleep after the last one)."""
    return [sleep_seconds * backoff**k for k in range(max(attempts - 1, 0))]


@dataclass(frozen=True)
class PreflightResult:
    ok: bool
    attempts: int
    reason: str | None = None


async def preflight(
    host: str,
    *,
    attempts: int,
    sleep_seconds: float,
    backoff: float,
    resolve: Resolver = resolve_host,
    sleep: Sleeper = anyio.sleep,
) -> PreflightResult:
    """Resolve ``host`` up to ``attempts`` times, sleeping per :func:`backoff_delays` between
    failures. Never blocks the event loop; cancellation passes through."""
    delays = backoff_delays(attempts, sleep_seconds, backoff)
    reason = "not attempted"
    for attempt in range(1, attempts + 1):
        try:
            with anyio.fail_after(ATTEMPT_TIMEOUT_S):
                await resolve(host, 443)
            return PreflightResult(True, attempt)
        except TimeoutError:
            reason = f"no answer within {ATTEMPT_TIMEOUT_S:g} s"
        except OSError as exc:  # socket.gaierror and friends
            reason = _describe(exc)
        if attempt <= len(delays):
            await sleep(delays[attempt - 1])
    return PreflightResult(
        False,
        attempts,
        f"preflight failed: could not resolve {host!r} after {attempts} attempt(s) ({reason}); "
        "check the network or DNS, or pass preflight_host=null to skip the check",
    )


def _describe(exc: OSError) -> str:
    # gaierror's strerror ("Name or service not known") names no file or secret.
    text = exc.strerror or type(exc).__name__
    return " ".join(str(text).split())[:120]
