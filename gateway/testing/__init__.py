"""Test kit for plugin authors (a pytest plugin, active wherever mcp-gateway is installed).

Fixtures and helpers:

- ``gateway_factory``: ``gateway_factory(plugins=["queue"], objects={...}, plugin_config={...},
  env={...}, **gateway_settings)`` builds a :class:`~gateway.app.Gateway` in a temporary
  working directory (the data root), loading the named installed plugins and/or plugin objects.
- ``gateway_client(gateway)``: ``async with gateway_client(gw) as client`` gives the official
  MCP ``Client`` connected in-process over JSON-RPC (what Claude Code sees, minus the pipe).
- ``tool_error(result)``: the ``{"code", "message", "retryable", …}`` of an MCP error result
  (error results carry it as text only, no ``structuredContent``).
- ``assert_plugin_conforms(name, ...)``: the checks every plugin should pass (see its doc).

Async tests use anyio's pytest plugin: mark them ``@pytest.mark.anyio``. The checks
(``assert_plugin_conforms``, ``assert_backend_tools_degrade``) are awaited there; a sync test
runs one with ``run_check(...)``. A check that is neither fails its test.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from .. import entrypoints
from ..app import Gateway, TelemetryFactory, build_gateway
from ..config import load_config
from ..errors import ErrorCode, GatewayError
from ..plugins import PluginRecord, PluginState
from ..registry import MAX_DESCRIPTION_CHARS, MAX_FULL_NAME, RegisteredTool, full_tool_name
from ..spec import Tier
from .checks import Check, run_check
from .checks import pytest_runtest_call as pytest_runtest_call  # the kit's hook: see checks
from .loopwatch import LoopWatch

SENTINEL_SECRET = "s3cr3t-SENTINEL-token-4f9a"
SENTINEL_PATH = "/srv/private/conformance/secret-file.db"


def make_gateway(
    *,
    plugins: list[str] | None = None,
    objects: dict[str, object] | None = None,
    plugin_config: dict[str, dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    entry_points: bool = True,
    telemetry: TelemetryFactory | None = None,
    **gateway_settings: Any,
) -> Gateway:
    """Build a gateway for tests. ``plugins`` restricts the installed plugins loaded (the
    built-in ``gateway`` plugin is always there); plugins run in process unless ``isolate``
    (or ``MCP_GATEWAY_ISOLATE`` in ``env``) says otherwise; ``env`` replaces the process
    environment;
    ``telemetry`` builds the gateway's telemetry (a
    :class:`gateway.testing.telemetry.TelemetryRecorder` keeps it in memory)."""
    cwd = Path(cwd or Path.cwd()).resolve()
    refresh_installed()
    environment = dict(env if env is not None else os.environ)
    overrides = dict(gateway_settings)
    if plugins is not None:
        # An empty allow-list means "all"; the built-in plugin alone means "none".
        overrides["plugins"] = list(plugins) or ["gateway"]
    overrides.setdefault("data_roots", [str(cwd)])
    overrides.setdefault("audit_log", str(cwd / "audit.jsonl"))
    if "MCP_GATEWAY_ISOLATE" not in environment:
        # The kit runs the plugin under test in process (its checks replace handlers and
        # look at the plugin's state) unless asked to isolate it, as a deployment does.
        overrides.setdefault("isolate", "none")
    config = load_config(
        env={k: v for k, v in environment.items() if k != "MCP_GATEWAY_CONFIG"},
        overrides=overrides,
        cwd=cwd,
    )
    config.plugin_tables = {k: dict(v) for k, v in (plugin_config or {}).items()}
    return build_gateway(config, objects=objects, entry_points=entry_points, telemetry=telemetry)


_Installation = tuple[tuple[str, ...], str, list[tuple[str, int, tuple[int, int] | None]]]
_seen: list[_Installation] = []


def refresh_installed() -> None:
    """Have the core read the installed plugins again if the installation changed since it
    last looked (~1 ms): a test session builds a gateway per test, and its tests install and
    remove distributions (or put them on ``sys.path``) as they go.

    The installation is the import path, the working directory (for relative entries) and
    every ``*.dist-info`` folder with its modification time and its ``entry_points.txt``'s
    size and time: installing or removing a distribution changes that, however soon after a
    scan; so does rewriting its entry points in place.
    """
    path = tuple(sys.path)
    cwd = os.getcwd() if any(not os.path.isabs(entry) for entry in path) else ""
    now = (path, cwd, _distributions())
    if _seen != [now]:
        entrypoints.forget_installed()
        _seen[:] = [now]


def _distributions() -> list[tuple[str, int, tuple[int, int] | None]]:
    out = []
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as it:
                for d in it:
                    if d.name.endswith(".dist-info"):
                        points = _size_and_time(os.path.join(d.path, "entry_points.txt"))
                        out.append((d.name, d.stat().st_mtime_ns, points))
        except OSError:
            continue
    return sorted(out, key=lambda d: d[:2])


def _size_and_time(file: str) -> tuple[int, int] | None:
    try:
        st = os.stat(file)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


@contextmanager
def _chdir(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


@asynccontextmanager
async def gateway_client(gateway: Gateway) -> AsyncIterator[Any]:
    """The official MCP client, connected in-process with JSON-RPC framing and ``initialize``."""
    from mcp import Client

    from ..server import build_server

    async with Client(build_server(gateway), mode="legacy") as client:
        yield client


def tool_error(result: Any) -> dict[str, Any]:
    """The error object of an MCP ``CallToolResult`` with ``isError``: parsed from its text
    content, the only place an error travels (no ``structuredContent``, see docs/errors.md)."""
    assert result.is_error, f"expected an error result, got {result!r}"
    assert result.structured_content is None, "error results carry no structuredContent"
    error: dict[str, Any] = json.loads(result.content[0].text)["error"]
    return error


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def gateway_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Gateway]:
    """Build gateways rooted in a fresh temporary directory (also the working directory)."""
    monkeypatch.chdir(tmp_path)

    def factory(**kwargs: Any) -> Gateway:
        kwargs.setdefault("cwd", tmp_path)
        return make_gateway(**kwargs)

    return factory


def _check_schema(schema: dict[str, Any], where: str) -> None:
    from jsonschema.validators import validator_for

    assert json.loads(json.dumps(schema)) == schema, f"{where}: schema is not plain JSON"
    validator_for(schema).check_schema(schema)


async def _conformance(
    gateway: Gateway,
    name: str,
    health_slack: float,
    server_name: str,
    calls: dict[str, list[dict[str, Any]]] | None,
    max_loop_block: float,
) -> None:
    record = gateway.plugin(name)
    assert record is not None, f"plugin {name!r} is not installed (no entry point of that name)"
    assert record.state is PluginState.LOADED, f"plugin {name!r} did not load: {record.reason}"
    tools = gateway.tools(name)
    assert tools, f"plugin {name!r} registers no tools"

    async with gateway:
        # Published form == enforced form.
        async with gateway_client(gateway) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
        for tool in tools:
            where = f"tool {tool.name!r}"
            assert tool.tier in (Tier.READ, Tier.MUTATION), f"{where}: no tier"
            _check_schema(tool.input_schema, f"{where} inputSchema")
            assert tool.input_schema.get("type") == "object", (
                f"{where}: inputSchema must be an object"
            )
            if tool.output_schema is not None:
                _check_schema(tool.output_schema, f"{where} outputSchema")
            published = listed.get(tool.name)
            assert published is not None, f"{where} is missing from tools/list"
            assert published.input_schema == tool.input_schema, f"{where}: published schema differs"
            ann = published.annotations
            assert ann is not None and ann.read_only_hint is (tool.tier is Tier.READ), (
                f"{where}: readOnlyHint"
            )
            if tool.tier is Tier.MUTATION:
                assert "MUTATION:" in (published.description or ""), (
                    f"{where}: no MUTATION paragraph"
                )
            # Claude Code's limits: a longer description is cut, a longer full name dropped.
            assert len(published.description or "") <= MAX_DESCRIPTION_CHARS, (
                f"{where}: description over {MAX_DESCRIPTION_CHARS} characters"
            )
            full = full_tool_name(server_name, tool.name)
            assert len(full) <= MAX_FULL_NAME, (
                f"{where}: {full!r} is {len(full)} characters; Claude Code drops tools whose "
                f"full name is over {MAX_FULL_NAME}"
            )
            # Unknown arguments are refused before the handler runs.
            res = await gateway.call(tool.name, {"__conformance_unknown__": 1})
            assert res.is_error and res.code == ErrorCode.VALIDATION_ERROR, (
                f"{where}: unknown field accepted"
            )

        # Health checks finish in time, whatever the backends do.
        for check in gateway.health_checks(name):
            with anyio.fail_after(check.timeout + health_slack):
                results = await gateway.check_health(plugin=name, use_cache=False)
            assert all(
                r.status in {"ok", "failed", "timeout", "unconfigured", "uninitialized"}
                for r in results
            )

        # Handlers, run for real, never block the event loop for long.
        await _exercise(gateway, record, tools, calls or {}, max_loop_block)

        # Exceptions carrying a secret and an absolute path come back sanitized.
        gateway.sanitizer.add_secrets([SENTINEL_SECRET])
        for tool in tools:
            for exc in (
                RuntimeError(f"boom with {SENTINEL_SECRET} at {SENTINEL_PATH}"),
                GatewayError(
                    ErrorCode.BACKEND_ERROR,
                    f"failed: token {SENTINEL_SECRET} in {SENTINEL_PATH}",
                    details={"where": [SENTINEL_PATH], "why": f"Bearer {SENTINEL_SECRET}"},
                ),
            ):
                result = await _call_with_failing_handler(gateway, tool, exc)
                text = result.text()
                assert result.is_error, (
                    f"tool {tool.name!r}: a raising handler did not give an error"
                )
                assert SENTINEL_SECRET not in text, f"tool {tool.name!r}: secret leaked: {text}"
                assert SENTINEL_PATH not in text, (
                    f"tool {tool.name!r}: absolute path leaked: {text}"
                )
                assert "Traceback" not in text


def _plugin_folder(record: PluginRecord) -> Path | None:
    import inspect

    target = record.module if inspect.ismodule(record.module) else type(record.module)
    try:
        return Path(inspect.getfile(target)).resolve().parent
    except (TypeError, OSError):
        return None


def _default_calls(tool: RegisteredTool) -> list[dict[str, Any]]:
    """A read tool is called once, with its required arguments guessed from its schema
    (defaults, enum values, a UUID for ids: :func:`example_arguments`), when a guess fits; any
    other tool only with the arguments the test gives (a mutation changes things: the author
    decides)."""
    if tool.tier is not Tier.READ:
        return []
    from .degrade import example_arguments

    try:
        return [example_arguments(tool)]
    except AssertionError:  # nothing fits a field: the test lists the call in calls=
        return []


async def _exercise(
    gateway: Gateway,
    record: PluginRecord,
    tools: list[RegisteredTool],
    calls: dict[str, list[dict[str, Any]]],
    max_loop_block: float,
) -> None:
    by_name = {t.name: t for t in tools}
    unknown = set(calls) - set(by_name)
    assert not unknown, f"calls= names tools the plugin does not have: {sorted(unknown)}"
    folder = _plugin_folder(record)
    for tool in tools:
        for arguments in calls.get(tool.name) or _default_calls(tool):
            where = f"tool {tool.name!r} called with {json.dumps(arguments)[:200]}"
            async with LoopWatch(max_loop_block, prefer=folder) as watch:
                result = await gateway.call(tool.name, arguments)
            assert watch.longest <= max_loop_block, (
                f"{where}: its handler blocked the event loop for {watch.longest:.1f} s (more "
                f"than {max_loop_block:g} s) at {watch.where or 'an unknown line'}; every other "
                "call waits meanwhile and no timeout can stop it. Await an async library, or "
                "run blocking work with `await ctx.run_sync(fn, ...)`"
            )
            assert result.code != ErrorCode.INTERNAL_ERROR, (
                f"{where}: failed unexpectedly (INTERNAL_ERROR); valid arguments must give a "
                "result or a deliberate GatewayError"
            )


async def _call_with_failing_handler(gateway: Gateway, tool: RegisteredTool, exc: Exception) -> Any:
    async def failing(args: Any, ctx: Any) -> Any:
        raise exc

    return await gateway.call_with_handler(tool.name, failing)


def assert_plugin_conforms(
    name: str,
    *,
    plugin_config: dict[str, dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    health_slack: float = 2.0,
    server_name: str = "gateway",
    calls: dict[str, list[dict[str, Any]]] | None = None,
    max_loop_block: float = 1.0,
) -> Check[None]:
    """Load installed plugin ``name`` and check what every plugin must satisfy (``await`` it;
    in a sync test, ``run_check(assert_plugin_conforms(...))``):

    it loads; every tool has a tier, valid JSON schemas that round-trip and equal what
    ``tools/list`` publishes, the right ``readOnlyHint`` and, for mutations, the ``MUTATION:``
    paragraph; descriptions fit Claude Code's 2,048 characters and every full tool name
    ``mcp__<server_name>__<tool>`` its 128; unknown arguments give ``VALIDATION_ERROR``;
    every handler exercised (each read tool with arguments guessed from its schema where a guess
    fits, and every call in ``calls={"tool": [arguments, ...]}``, mutations included) neither
    blocks the event loop for more than ``max_loop_block`` seconds nor fails with
    ``INTERNAL_ERROR``; every health check finishes within its timeout; and an exception
    containing a secret and an absolute path comes back sanitized.
    """
    workdir = Path(cwd or Path.cwd()).resolve()

    async def check() -> None:
        with _chdir(workdir):
            # Every tool published, so every schema is checked, whether its backend is set or not.
            gateway = make_gateway(
                plugins=[name],
                plugin_config=plugin_config,
                env=env,
                cwd=workdir,
                offer_unconfigured_tools=True,
            )
            await _conformance(gateway, name, health_slack, server_name, calls, max_loop_block)

    return Check(f"assert_plugin_conforms({name!r})", check)


from .degrade import assert_backend_tools_degrade, example_arguments  # noqa: E402

__all__ = [
    "SENTINEL_PATH",
    "SENTINEL_SECRET",
    "Check",
    "assert_backend_tools_degrade",
    "assert_plugin_conforms",
    "example_arguments",
    "gateway_client",
    "gateway_factory",
    "make_gateway",
    "run_check",
    "tool_error",
]
