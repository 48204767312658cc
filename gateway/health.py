"""Health checks with timeouts and a cache, and one circuit breaker per backend.

A breaker opens after ``failures`` consecutive failures of one backend itself: calls whose
error says the backend is down (``GatewayError.backend_down``: refused or dropped connections,
request timeouts), or failed health checks. An answer from the backend, even an error status,
proves it is up. While open, tools depending on that backend fail fast with
``BACKEND_UNAVAILABLE``; after ``reset_seconds`` one probe call is let through (half-open): its
success closes the breaker, its failure opens it again. Breakers are per backend *name*, so
plugins that use one backend share its breaker (and a ``shared`` health check runs once).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from .errors import ErrorCode, GatewayError, Sanitizer
from .lifecycle import plugin_fault
from .rest.status import classify_exception
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
    #: Told ``(backend, previous, new)`` on every state change (telemetry counts them).
    on_change: Callable[[str, str, str], None] | None = None

    def _move(self, state: BreakerState) -> None:
        previous, self.state = self.state, state
        if previous is not state and self.on_change is not None:
            self.on_change(self.backend, previous.value, state.value)

    def current_state(self) -> BreakerState:
        if self.state is BreakerState.OPEN and self.clock() - self.opened_at >= self.reset_seconds:
            self._move(BreakerState.HALF_OPEN)
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
        self._move(BreakerState.CLOSED)
        self.consecutive_failures = 0
        self.probe_in_flight = False

    def record_failure(self) -> None:
        self.consecutive_failures += 1
        self.probe_in_flight = False
        if (
            self.state is BreakerState.HALF_OPEN
            or self.consecutive_failures >= self.failures_to_open
        ):
            self.opened_at = self.clock()
            self._move(BreakerState.OPEN)

    def release(self) -> None:
        """A call that neither proved nor disproved the backend (e.g. bad input)."""
        self.probe_in_flight = False


HealthStatus = Literal["ok", "failed", "timeout", "unconfigured", "uninitialized"]


@dataclass
class HealthResult:
    plugin: str
    name: str
    backend: str | None
    status: HealthStatus
    detail: str | None
    required: bool
    duration_ms: float
    checked_at: float = field(default_factory=time.time)
    shared_with: tuple[str, ...] = ()

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
            **({"shared_with": list(self.shared_with)} if self.shared_with else {}),
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
        on_breaker_change: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self._sanitize = sanitizer
        self.on_breaker_change = on_breaker_change
        self.default_timeout = default_timeout
        self.cache_seconds = cache_seconds
        self.breaker_failures = breaker_failures
        self.breaker_reset_seconds = breaker_reset_seconds
        self.clock = clock
        self._checks: list[tuple[str, HealthCheck]] = []
        self._cache: dict[tuple[str, str], tuple[float, HealthResult]] = {}
        self._breakers: dict[str, Breaker] = {}
        self._unconfigured: dict[str, str] = {}
        self._sharers: dict[tuple[str | None, str], list[str]] = {}

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
            if check.shared and self._share(plugin, check):
                continue
            self._checks.append((plugin, check))
            if check.backend and check.not_configured:
                self._unconfigured[check.backend] = check.not_configured

    def _share(self, plugin: str, check: HealthCheck) -> bool:
        """A shared check another plugin registered already: run it once, for both."""
        key = (check.backend, check.name)
        for _owner, existing in self._checks:
            if existing.shared and (existing.backend, existing.name) == key:
                self._sharers.setdefault(key, []).append(plugin)
                return True
        return False

    def remove_plugin(self, plugin: str) -> None:
        kept: list[tuple[str, HealthCheck]] = []
        for owner, check in self._checks:
            key = (check.backend, check.name)
            others = [p for p in self._sharers.get(key, []) if p != plugin]
            self._sharers[key] = others
            if owner != plugin:
                kept.append((owner, check))
            elif check.shared and others:  # another plugin still uses the backend
                kept.append((others.pop(0), check))
            elif check.backend:
                self._unconfigured.pop(check.backend, None)
        self._checks = kept
        for key in [k for k in self._cache if k[0] == plugin]:
            del self._cache[key]

    def checks(self) -> list[tuple[str, HealthCheck]]:
        return list(self._checks)

    def users(self, check: HealthCheck, owner: str) -> list[str]:
        """The plugins a check reports for: its owner and any that share it."""
        return [owner, *self._sharers.get((check.backend, check.name), [])]

    # breakers -------------------------------------------------------------------------
    # One breaker per backend *name*: plugins that use the same backend share it.
    def breaker(self, backend: str) -> Breaker:
        b = self._breakers.get(backend)
        if b is None:
            b = Breaker(backend, self.breaker_failures, self.breaker_reset_seconds, self.clock)
            b.on_change = self.on_breaker_change
            self._breakers[backend] = b
        return b

    def gate(self, backend: str) -> Breaker:
        """Raise ``BACKEND_UNAVAILABLE`` if the backend is unconfigured or its breaker is open."""
        reason = self._unconfigured.get(backend)
        if reason:
            raise GatewayError(ErrorCode.BACKEND_UNAVAILABLE, reason, retryable=False)
        b = self.breaker(backend)
        if not b.acquire():
            wait = max(1, round(b.retry_after()))
            raise GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                f"backend {backend!r} is unavailable after {b.consecutive_failures} consecutive "
                f"failures; calls are paused: retry after {wait} s, or check it with the "
                "gateway_status tool",
            )
        return b

    def breaker_states(self) -> dict[str, dict[str, Any]]:
        out = {}
        for backend, b in self._breakers.items():
            out[backend] = {
                "state": b.current_state().value,
                "consecutive_failures": b.consecutive_failures,
            }
        for backend in self._unconfigured:
            out[backend] = {"state": "unconfigured", "consecutive_failures": 0}
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
        status: HealthStatus = "ok"
        detail: str | None = None
        try:
            with anyio.fail_after(timeout):
                detail = await check.check()
        except TimeoutError:
            status, detail = "timeout", f"no answer within {timeout:g} s"
        except NotInitialized as exc:
            status, detail = "uninitialized", str(exc) or "not initialized yet"
        except Exception as exc:
            mapped = exc if isinstance(exc, GatewayError) else classify_exception(exc)
            status = "timeout" if mapped and mapped.code is ErrorCode.TIMEOUT else "failed"
            detail = self._sanitize(
                mapped.message
                if mapped is not None
                else f"{type(exc).__name__}: {exc}"
                if str(exc)
                else type(exc).__name__
            )
        except BaseException as exc:
            # SystemExit, KeyboardInterrupt, a stray CancelledError, an exception group: checks
            # run in tasks of their own, and asyncio re-raises the first two from the event
            # loop, so one check would end the process. It has failed, nothing more.
            if not plugin_fault(exc):
                raise
            status, detail = "failed", type(exc).__name__
        duration = (time.perf_counter() - started) * 1000
        if check.backend and status != "uninitialized":
            b = self.breaker(check.backend)
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
            r.shared_with = tuple(self.users(c, p)[1:])
            self._cache[(p, c.name)] = (self.clock(), r)
            results[i] = r

        async with anyio.create_task_group() as tg:
            for i, (p, c) in enumerate(selected):
                tg.start_soon(one, i, p, c)
        return [r for r in results if r is not None]
