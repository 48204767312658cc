"""``assert_backend_tools_degrade``: every REST-backed tool of a plugin fails cleanly, whatever
its backend does."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError

from ..app import CallResult, Gateway
from ..errors import ErrorCode
from ..registry import RegisteredTool
from ..rest.backend import RestBackend
from .backends import FakeBackend, FaultMode
from .checks import Check

#: What each kind of dead backend must give (``None`` = success is acceptable too).
EXPECTED: dict[str, set[str | None]] = {
    "unconfigured": {ErrorCode.BACKEND_UNAVAILABLE.value},
    FaultMode.REFUSE.value: {ErrorCode.BACKEND_UNAVAILABLE.value},
    FaultMode.HANG.value: {ErrorCode.TIMEOUT.value},
    FaultMode.ERROR.value: {ErrorCode.BACKEND_ERROR.value},
    FaultMode.GARBAGE.value: {ErrorCode.BACKEND_ERROR.value},
    # A route may accept a null answer (allow_null); what it must never do is crash.
    FaultMode.NULL.value: {ErrorCode.BACKEND_ERROR.value, ErrorCode.NOT_FOUND.value, None},
}

_STRING_GUESSES = (str(uuid.UUID(int=0x5EED)), "0123456789abcdef01234567", "main", "a", "1")
_TYPE_GUESSES: dict[str, tuple[Any, ...]] = {
    "integer": (1, 0),
    "number": (1.0,),
    "boolean": (True,),
    "array": ([],),
    "object": ({},),
    "null": (None,),
}


def _guesses(schema: Mapping[str, Any]) -> Iterator[Any]:
    if "default" in schema:
        yield schema["default"]
    for key in ("enum", "examples"):
        if isinstance(schema.get(key), list) and schema[key]:
            yield schema[key][0]
    types = schema.get("type")
    for kind in types if isinstance(types, list) else [types]:
        if kind == "string":
            yield from _STRING_GUESSES
        elif isinstance(kind, str):
            yield from _TYPE_GUESSES.get(kind, ())
    for branch in schema.get("anyOf", []) if isinstance(schema.get("anyOf"), list) else []:
        yield from _guesses(branch)


def example_arguments(tool: RegisteredTool) -> dict[str, Any]:
    """Valid arguments for ``tool``, guessed from its schema field by field (a UUID for ids).

    Raises ``AssertionError`` naming the field when nothing fits: pass ``examples`` then."""
    model: type[BaseModel] = tool.spec.input_model
    schema = tool.input_schema
    args: dict[str, Any] = {}
    for field_name in schema.get("required", []):
        prop = schema.get("properties", {}).get(field_name, {})
        for guess in _guesses(prop):
            try:
                model.model_validate({**args, field_name: guess})
            except ValidationError as exc:
                if any(e["loc"][:1] == (field_name,) for e in exc.errors()):
                    continue
            args[field_name] = guess
            break
        else:
            raise AssertionError(
                f"tool {tool.name!r}: no example value fits field {field_name!r}; pass "
                f"examples={{{tool.name!r}: {{...}}}} to assert_backend_tools_degrade"
            )
    model.model_validate(args)
    return args


def assert_backend_tools_degrade(
    name: str,
    *,
    examples: Mapping[str, Mapping[str, Any]] | None = None,
    plugin_config: Mapping[str, Mapping[str, Any]] | None = None,
    cwd: Path | None = None,
    request_timeout: float = 1.0,
    slack: float = 3.0,
) -> Check[list[tuple[str, str, str]]]:
    """For every tool of installed plugin ``name`` bound to a REST backend, check that an
    unconfigured backend, refused connections, a backend that never answers, HTTP 500, an answer
    that is not JSON, and ``null`` each give the right error code (see :data:`EXPECTED`) within
    ``request_timeout`` plus ``slack`` seconds, and never ``INTERNAL_ERROR``. ``await`` it; in a
    sync test, ``run_check(assert_backend_tools_degrade(...))``.

    Each tool is called with ``examples[tool]`` or arguments guessed from its schema. The
    backends are pointed at a real server on 127.0.0.1 through their settings table (merged
    over ``plugin_config``); the process environment is not used. The cases run at once, each
    against a server of its own, and so do the calls of a case, no more at a time than the
    backend's client sends at once (so no call waits for another). Returns ``(tool, case,
    code)`` for every call, case by case, for further assertions.
    """
    workdir = (cwd or Path.cwd()).resolve()

    async def check() -> list[tuple[str, str, str]]:
        return await _degrade(name, examples, plugin_config, workdir, request_timeout, slack)

    return Check(f"assert_backend_tools_degrade({name!r})", check)


@dataclass
class _Outcome:
    tool: str
    case: str
    result: CallResult | None = None
    elapsed: float = 0.0
    failure: BaseException | None = None


async def _degrade(
    name: str,
    examples: Mapping[str, Mapping[str, Any]] | None,
    plugin_config: Mapping[str, Mapping[str, Any]] | None,
    workdir: Path,
    request_timeout: float,
    slack: float,
) -> list[tuple[str, str, str]]:
    from . import make_gateway

    probe = make_gateway(plugins=[name], plugin_config=_tables(plugin_config), env={}, cwd=workdir)
    tools = [t for t in probe.tools(name) if isinstance(t.spec.backend, RestBackend)]
    assert tools, f"plugin {name!r} has no tools bound to a REST backend"
    calls = {t.name: dict((examples or {}).get(t.name) or example_arguments(t)) for t in tools}
    backends = [t.spec.backend for t in tools if isinstance(t.spec.backend, RestBackend)]
    tables = {b.settings_table for b in backends}
    # Never more calls at once than the smallest client sends: a call's time is its own.
    at_once = min(probe.backend_settings(b).max_concurrency for b in backends)

    async def call(gw: Gateway, limit: anyio.CapacityLimiter, outcome: _Outcome) -> None:
        async with limit:
            started = time.monotonic()
            try:
                with anyio.fail_after(request_timeout * 2 + slack + 5):
                    outcome.result = await gw.call(outcome.tool, calls[outcome.tool])
            except TimeoutError as exc:
                outcome.failure = exc
            outcome.elapsed = time.monotonic() - started

    async def run(case: str, url: str | None, outcomes: list[_Outcome]) -> None:
        config = _tables(plugin_config)
        for table in tables:
            config.setdefault(table, {})["request_timeout"] = request_timeout
            if url is None:
                config[table].pop("url", None)
            else:
                config[table]["url"] = url
        # The most breaker_failures allows: every call reaches the backend, none is cut
        # short by an open breaker.
        gw = make_gateway(
            plugins=[name], plugin_config=config, env={}, cwd=workdir, breaker_failures=1000
        )
        limit = anyio.CapacityLimiter(at_once)
        async with gw, anyio.create_task_group() as tg:
            for outcome in outcomes:
                tg.start_soon(call, gw, limit, outcome)

    async def against(mode: FaultMode, outcomes: list[_Outcome]) -> None:
        # A server per case, closed after it (which also ends the requests it hangs on).
        async with FakeBackend() as server:
            server.mode = mode
            await run(mode.value, server.url, outcomes)

    cases = ["unconfigured", *(m.value for m in _FAULTS)]
    outcomes = {case: [_Outcome(tool, case) for tool in calls] for case in cases}
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "unconfigured", None, outcomes["unconfigured"])
        for mode in _FAULTS:
            tg.start_soon(against, mode, outcomes[mode.value])

    seen: list[tuple[str, str, str]] = []
    for case in cases:
        for outcome in outcomes[case]:
            if outcome.failure is not None:
                raise outcome.failure
            result = outcome.result
            assert result is not None
            code = result.code if result.is_error else None
            seen.append((outcome.tool, case, code or "OK"))
            where = f"tool {outcome.tool!r} with a backend in case {case!r}"
            assert code != ErrorCode.INTERNAL_ERROR, f"{where}: {result.text()}"
            assert code in EXPECTED[case], f"{where}: got {code or 'success'}: {result.text()}"
            elapsed = outcome.elapsed
            assert elapsed <= request_timeout * 2 + slack, f"{where}: took {elapsed:.1f} s"
    return seen


_FAULTS = (FaultMode.REFUSE, FaultMode.HANG, FaultMode.ERROR, FaultMode.GARBAGE, FaultMode.NULL)


def _tables(plugin_config: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    return json.loads(json.dumps(dict(plugin_config or {}))) if plugin_config else {}
