"""Health checks with timeouts and a cache, and one circuit breaker per backend.

A breaker opens after ``failures`` consecutive failures of one backend itself: calls whose
error says the backend is down (``GatewayError.backend_down``: refused or dropped connections,
request timeouts), or failed health checks. An answer from the backend, even an error status,
proves it is up. While open, tools depending on that backend fail fast with
``BACKEND_UNAVAILABLE``; after ``reset_seconds`` one probe call is let through (half-open): its
success closes the breaker, its failure opens it again. Breakers are per backend *name*, so
plugins that use one backend share its breaker (and a ``shared`` health check runs once).

While a breaker is open and the gateway is running (:meth:`HealthMonitor.start_probing`), the
backend's health checks also run in the background every ``probe_seconds``, one at a time per
backend, each under its timeout: the first that passes closes the breaker, so calls resume
seconds after the backend is back instead of after ``reset_seconds``. A failed probe changes
nothing, so probing ends by itself when the breaker turns half-open (a call probes then, as
before): an outage costs the backend at most ``reset_seconds / probe_seconds`` checks per
opening, and :meth:`HealthMonitor.stop_probing` ends them at shutdown.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from .errors import ErrorCode, GatewayError, Sanitizer, classify_exception
from .lifecycle import plugin_fault
from .spec import HealthCheck, NotInitialized

log = logging.getLogger("gateway.health")

#: Seconds between two background checks of a backend whose breaker is open.
PROBE_SECONDS = 2.0
#: Upper bound on waiting for running probes when the gateway stops (each has its timeout).
_PROBE_STOP_S = 5.0


class BreakerState(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
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
        probe_seconds: float = PROBE_SECONDS,
    ) -> None:
        self._sanitize = sanitizer
        self.on_breaker_change = on_breaker_change
        self.probe_seconds = probe_seconds
        self._probe_loop: asyncio.AbstractEventLoop | None = None
        self._probes: dict[str, asyncio.Task[None]] = {}
        self.default_timeout = default_timeout
        self.cache_seconds = cache_seconds
        self.breaker_failures = breaker_failures
        self.breaker_reset_seconds = breaker_reset_seconds
        self.clock = clock
        self._checks: list[tuple[str, HealthCheck]] = []
        #: each source's place in a report (as the tool registry's ``order``)
        self.order: dict[str, int] = {}
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
        last = len(self.order)
        return sorted(self._checks, key=lambda pc: self.order.get(pc[0], last))

    def users(self, check: HealthCheck, owner: str) -> list[str]:
        """The plugins a check reports for: its owner and any that share it."""
        return [owner, *self._sharers.get((check.backend, check.name), [])]

    # breakers -------------------------------------------------------------------------
    # One breaker per backend *name*: plugins that use the same backend share it.
    def breaker(self, backend: str) -> Breaker:
        b = self._breakers.get(backend)
        if b is None:
            b = Breaker(backend, self.breaker_failures, self.breaker_reset_seconds, self.clock)
            b.on_change = self._breaker_changed
            self._breakers[backend] = b
        return b

    def _breaker_changed(self, backend: str, previous: str, state: str) -> None:
        if self.on_breaker_change is not None:
            self.on_breaker_change(backend, previous, state)
        if state == BreakerState.OPEN:
            self._probe_soon(backend)

    # background probes ------------------------------------------------------------------
    def start_probing(self) -> None:
        """From now on, an open breaker's backend is checked in the background (on the event
        loop this is called on). The running gateway does this; one-shot uses never do."""
        self._probe_loop = asyncio.get_running_loop()

    async def stop_probing(self) -> None:
        """No more probes; the running ones are cancelled and waited for (bounded)."""
        self._probe_loop = None
        tasks = list(self._probes.values())
        self._probes.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            with anyio.move_on_after(_PROBE_STOP_S, shield=True):
                await asyncio.wait(tasks)

    def _probe_soon(self, backend: str) -> None:
        if self._probe_loop is None or backend in self._probes:
            return
        if self.probe_seconds >= self.breaker_reset_seconds:
            return  # the half-open call comes first anyway
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is not self._probe_loop or not self._checks_of(backend):
            return
        # A context of its own: the call that opened the breaker (its span, its caller) has
        # ended by the time the probe runs, and must not own the probe's requests.
        task = running.create_task(
            self._probe(backend), name=f"probe {backend}", context=contextvars.Context()
        )
        self._probes[backend] = task
        task.add_done_callback(lambda t: self._probe_ended(backend, t))

    def _probe_ended(self, backend: str, task: asyncio.Task[None]) -> None:
        if self._probes.get(backend) is task:
            del self._probes[backend]

    def _checks_of(self, backend: str) -> list[tuple[str, HealthCheck]]:
        return [(p, c) for p, c in self._checks if c.backend == backend and not c.not_configured]

    async def _probe(self, backend: str) -> None:
        b = self.breaker(backend)
        try:
            while True:
                await anyio.sleep(self.probe_seconds)
                if b.current_state() is not BreakerState.OPEN:
                    return  # closed by a call, or half-open: a call probes now
                for plugin, check in self._checks_of(backend):
                    result = await self._run_one(plugin, check, count_failure=False)
                    result.shared_with = tuple(self.users(check, plugin)[1:])
                    self._cache[(plugin, check.name)] = (self.clock(), result)
                    if result.ok:
                        log.info("backend %r answers again; calls resume", backend)
                        return
        except Exception:  # a probe must never end the process, nor fail silently
            log.exception("background check of backend %r failed", backend)

    def gate(self, backend: str) -> Breaker:
        """Raise ``BACKEND_UNAVAILABLE`` if the backend is unconfigured or its breaker is open."""
        reason = self._unconfigured.get(backend)
        if reason:
            raise GatewayError(ErrorCode.BACKEND_UNAVAILABLE, reason, retryable=False)
        b = self.breaker(backend)
        if not b.acquire():
            wait = max(1, round(b.retry_after()))
            sooner = (
                f" (sooner once it answers: it is checked every {self.probe_seconds:g} s)"
                if backend in self._probes
                else ""
            )
            raise GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                f"backend {backend!r} is unavailable after {b.consecutive_failures} consecutive "
                f"failures; calls are paused: retry after {wait} s{sooner}, or check it with "
                "the gateway_status tool",
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
    async def _run_one(
        self, plugin: str, check: HealthCheck, *, count_failure: bool = True
    ) -> HealthResult:
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
            elif count_failure:
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
        selected = [(p, c) for p, c in self.checks() if plugin is None or p == plugin]
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
