"""Health checks with timeouts and a cache, and one circuit breaker per backend.

A breaker opens after ``failures`` consecutive connection failures or timeouts of calls (or
health checks) of one backend. While open, tools depending on that backend fail fast with
``BACKEND_UNAVAILABLE``; after ``reset_seconds`` one probe call is let through (half-open): its
success closes the breaker, its failure opens it again.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from .errors import ErrorCode, GatewayError, Sanitizer
from .spec import HealthCheck, NotInitialized


class BreakerState(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass
class Breaker:
    backend: str
    failures_to_open: int
    reset_seconds: float
    clock: Callable[[], float] = time.monotonic
    state: BreakerState = BreakerState.CLOSED
    consecutive_failures: int = 0
    opened_at: float = 0.0
    probe_in_flight: bool = False

    def current_state(self) -> BreakerState:
        if self.state is BreakerState.OPEN and self.clock() - self.opened_at >= self.reset_seconds:
            self.state = BreakerState.HALF_OPEN
            self.probe_in_flight = False
        return self.state

    def retry_after(self) -> float:
        return max(0.0, self.reset_seconds - (self.clock() - self.opened_at))

    def acquire(self) -> bool:
        """May a call go through now? In half-open, only one probe at a time."""
        state = self.current_state()
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and not self.probe_in_flight:
            self.probe_in_flight = True
            return True
        return False

    def record_success(self) -> None:
        self.state = BreakerState.CLOSED
        self.consecutive_failures = 0
        self.probe_in_flight = False

    def record_failure(self) -> None:
        self.consecutive_failures += 1
        self.probe_in_flight = False
        if (
            self.state is BreakerState.HALF_OPEN
            or self.consecutive_failures >= self.failures_to_open
        ):
            self.state = BreakerState.OPEN
            self.opened_at = self.clock()

    def release(self) -> None:
        """A call that neither proved nor disproved the backend (e.g. bad input)."""
        self.probe_in_flight = False


@dataclass
class HealthResult:
    plugin: str
    name: str
    backend: str | None
    status: str  # ok | failed | timeout | unconfigured | uninitialized
    detail: str | None
    required: bool
    duration_ms: float
    checked_at: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def blocking(self) -> bool:
        """A required check that failed or timed out. An unconfigured backend is reported but
        does not block (the deployment chose not to set it up), nor does one with no data yet
        (a fresh install)."""
        return self.required and self.status in ("failed", "timeout")

    def as_dict(self) -> dict[str, Any]:
        return {
            "plugin": self.plugin,
            "check": self.name,
            "backend": self.backend,
            "status": self.status,
            "detail": self.detail,
            "required": self.required,
            "duration_ms": round(self.duration_ms, 1),
        }


class HealthMonitor:
    def __init__(
        self,
        sanitizer: Sanitizer,
        *,
        default_timeout: float = 5.0,
        cache_seconds: float = 15.0,
        breaker_failures: int = 3,
        breaker_reset_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sanitize = sanitizer
        self.default_timeout = default_timeout
        self.cache_seconds = cache_seconds
        self.breaker_failures = breaker_failures
        self.breaker_reset_seconds = breaker_reset_seconds
        self.clock = clock
        self._checks: list[tuple[str, HealthCheck]] = []
        self._cache: dict[tuple[str, str], tuple[float, HealthResult]] = {}
        self._breakers: dict[tuple[str, str], Breaker] = {}
        self._unconfigured: dict[tuple[str, str], str] = {}

    # registration ---------------------------------------------------------------------
    def add_all(self, plugin: str, checks: list[HealthCheck]) -> None:
        for check in checks:
            if not isinstance(check, HealthCheck):
                raise TypeError(f"register() takes a HealthCheck, got {type(check).__name__}")
            if not callable(check.check):
                raise TypeError(f"health check {check.name!r}: check must be an async callable")
        names = [c.name for c in checks]
        if len(set(names)) != len(names):
            raise ValueError("health check names must be unique within a plugin")
        for check in checks:
            self._checks.append((plugin, check))
            if check.backend and check.not_configured:
                self._unconfigured[(plugin, check.backend)] = check.not_configured

    def remove_plugin(self, plugin: str) -> None:
        self._checks = [(p, c) for p, c in self._checks if p != plugin]
        for store in (self._cache, self._breakers, self._unconfigured):
            for key in [k for k in store if k[0] == plugin]:
                del store[key]

    def checks(self) -> list[tuple[str, HealthCheck]]:
        return list(self._checks)

    # breakers -------------------------------------------------------------------------
    def breaker(self, plugin: str, backend: str) -> Breaker:
        key = (plugin, backend)
        b = self._breakers.get(key)
        if b is None:
            b = Breaker(backend, self.breaker_failures, self.breaker_reset_seconds, self.clock)
            self._breakers[key] = b
        return b

    def gate(self, plugin: str, backend: str) -> Breaker:
        """Raise ``BACKEND_UNAVAILABLE`` if the backend is unconfigured or its breaker is open."""
        reason = self._unconfigured.get((plugin, backend))
        if reason:
            raise GatewayError(ErrorCode.BACKEND_UNAVAILABLE, reason, retryable=False)
        b = self.breaker(plugin, backend)
        if not b.acquire():
            wait = max(1, round(b.retry_after()))
            raise GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                f"backend {backend!r} is unavailable after {b.consecutive_failures} consecutive "
                f"failures; calls are paused: retry after {wait} s, or check it with the "
                "gateway_status tool",
                details={"backend": backend, "retry_after_seconds": wait},
            )
        return b

    def breaker_states(self) -> dict[str, dict[str, Any]]:
        out = {}
        for (plugin, backend), b in self._breakers.items():
            out[f"{plugin}/{backend}"] = {
                "state": b.current_state().value,
                "consecutive_failures": b.consecutive_failures,
            }
        for plugin, backend in self._unconfigured:
            out[f"{plugin}/{backend}"] = {"state": "unconfigured", "consecutive_failures": 0}
        return out

    # checks -----------------------------------------------------------------------------
    async def _run_one(self, plugin: str, check: HealthCheck) -> HealthResult:
        started = time.perf_counter()
        if check.not_configured:
            return HealthResult(
                plugin,
                check.name,
                check.backend,
                "unconfigured",
                self._sanitize(check.not_configured),
                check.required,
                0.0,
            )
        timeout = check.timeout or self.default_timeout
        status, detail = "ok", None
        try:
            with anyio.fail_after(timeout):
                detail = await check.check()
        except TimeoutError:
            status, detail = "timeout", f"no answer within {timeout:g} s"
        except NotInitialized as exc:
            status, detail = "uninitialized", str(exc) or "not initialized yet"
        except Exception as exc:
            status = "failed"
            detail = self._sanitize(
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            )
        duration = (time.perf_counter() - started) * 1000
        if check.backend and status != "uninitialized":
            b = self.breaker(plugin, check.backend)
            if status == "ok":
                b.record_success()
            else:
                b.record_failure()
        return HealthResult(
            plugin,
            check.name,
            check.backend,
            status,
            self._sanitize(detail) if detail else None,
            check.required,
            duration,
        )

    async def run(self, *, plugin: str | None = None, use_cache: bool = True) -> list[HealthResult]:
        """Run the checks (of one plugin, or all) concurrently, each under its timeout."""
        selected = [(p, c) for p, c in self._checks if plugin is None or p == plugin]
        results: list[HealthResult | None] = [None] * len(selected)
        now = self.clock()

        async def one(i: int, p: str, c: HealthCheck) -> None:
            cached = self._cache.get((p, c.name))
            if use_cache and cached and now - cached[0] < self.cache_seconds:
                results[i] = cached[1]
                return
            r = await self._run_one(p, c)
            self._cache[(p, c.name)] = (self.clock(), r)
            results[i] = r

        async with anyio.create_task_group() as tg:
            for i, (p, c) in enumerate(selected):
                tg.start_soon(one, i, p, c)
        return [r for r in results if r is not None]
