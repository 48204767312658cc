"""What a plugin hands the core: tool specs, health checks, and the contexts it gets back.

A tool is data. The core derives the JSON schemas, the MCP annotations and the ``MUTATION:``
paragraph from a :class:`ToolSpec`; nothing has to be kept in sync by hand. A spec is generic in
its input model, so a type checker holds the handler's argument to it. Nothing here knows
about HTTP: the REST kit (:mod:`gateway.rest`) builds specs and reaches its clients on top.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

import anyio
import anyio.to_thread
from pydantic import BaseModel
from typing_extensions import TypeVar as DefaultedTypeVar

from .errors import ErrorCode, GatewayError, Sanitizer

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
SettingsT = TypeVar("SettingsT", bound=BaseModel)
#: A tool's input model; a bare ``ToolSpec`` (in a list of any tools) is ``ToolSpec[Any]``.
ArgsT = DefaultedTypeVar("ArgsT", bound=BaseModel, default=Any)


class Tier(enum.StrEnum):
    """Permission tier of a tool. ``mutation`` tools need the user's confirmation."""

    READ = "read"
    MUTATION = "mutation"


@dataclass(frozen=True)
class Mutation:
    """What a mutation tool does to the world; required for every ``mutation`` tool.

    ``consequence``: what changes ("sets the status of the given jobs").
    ``requires``: the state the target must be in ("the jobs exist").
    The flags become the MCP annotations and the ``MUTATION:`` paragraph.
    """

    consequence: str
    requires: str
    reversible: bool
    destructive: bool
    idempotent: bool


class Backend(Protocol):
    """A backend declared as an object (:class:`gateway.rest.RestBackend`): its ``name`` is
    what its health check, breaker and configuration state are kept under."""

    @property
    def name(self) -> str: ...


class NotInitialized(Exception):
    """Raise from a health check when the backend is set up correctly but has no data yet (a
    jobs database before the first scrape). Health reports ``uninitialized`` with the message,
    which should say what creates it; it is not a failure and does not touch the breaker."""


@dataclass(frozen=True)
class HealthCheck:
    """A named async check of one backend.

    ``check()`` returns ``None`` or a short detail string when healthy and raises when not
    (:class:`NotInitialized` when there is simply nothing there yet).
    ``not_configured``: set it (to a message saying which setting enables the backend) when the
    plugin's settings leave the backend unconfigured; the check is then not run, health reports
    ``unconfigured``, tools depending on ``backend`` are not offered (unless the deployment sets
    ``offer_unconfigured_tools``) and a call fails fast with ``BACKEND_UNAVAILABLE`` and that
    message. ``required=False`` checks do not make ``mcp-gateway health`` fail.
    ``shared``: the same check may come from several plugins that use one backend; it is then
    registered and run once.
    """

    name: str
    check: Callable[[], Awaitable[str | None]]
    backend: str | None = None
    timeout: float = 5.0
    required: bool = True
    not_configured: str | None = None
    shared: bool = False


@dataclass(frozen=True, eq=False)
class Resource(Generic[T]):
    """A typed slot in a plugin's resources: ``CLIENT = Resource[Client]("client")`` once,
    then ``plugin.get(CLIENT)`` is a ``Client | None`` and ``plugin.put(CLIENT, client)``
    accepts only a ``Client``. ``name`` is its key in :attr:`PluginContext.resources`."""

    name: str


@dataclass
class PluginContext(Generic[SettingsT]):
    """Everything the core gives one plugin for its whole life.

    ``settings`` is the plugin's settings model filled from the config file and environment
    (``None`` when the plugin declares none). ``resources`` holds what the plugin opens once in
    ``open_resources`` and closes in ``close_resources`` (HTTP clients, pools); read and write
    it through typed :class:`Resource` slots with :meth:`get` and :meth:`put`.
    ``logger`` writes to stderr through the redacting handler; stdout is the stdio transport.
    ``read_only``: the deployment hides every mutation tool; a plugin must not write on its own
    initiative either (no background maintenance that changes data). ``backends`` is the
    core's hub of REST backends: :mod:`gateway.rest` reaches its clients through it.
    """

    name: str
    version: str
    settings: SettingsT
    data_roots: tuple[Path, ...]
    logger: logging.Logger
    read_only: bool = False
    resources: dict[str, Any] = field(default_factory=dict)
    sanitizer: Callable[[str], str] = field(default_factory=Sanitizer)
    backends: object = None

    def get(self, slot: Resource[T]) -> T | None:
        """What :meth:`put` stored in ``slot``, or ``None``."""
        value: T | None = self.resources.get(slot.name)
        return value

    def put(self, slot: Resource[T], value: T) -> T:
        """Store ``value`` in ``slot`` (for :meth:`get`, and for ``close_resources``)."""
        self.resources[slot.name] = value
        return value

    def sanitize(self, text: str) -> str:
        """Clean text for a *successful* result (e.g. a per-item error inside a batch) with the
        gateway's own rules and secrets; error messages are sanitized by the core anyway."""
        return self.sanitizer(text)

    def resolve_data_path(self, value: str | Path, *, field_name: str = "db_path") -> Path:
        """Resolve ``value`` and insist it lies inside one of the configured data roots.

        Returns the resolved path; raises ``VALIDATION_ERROR`` naming the field otherwise.
        """
        raw = str(value)
        if not raw.strip() or "\x00" in raw:
            raise GatewayError(
                ErrorCode.VALIDATION_ERROR, f"{field_name}: must be a non-empty path"
            )
        candidate = Path(raw)
        base = self.data_roots[0] if self.data_roots else Path.cwd()
        resolved = (candidate if candidate.is_absolute() else base / candidate).resolve()
        for root in self.data_roots:
            if resolved == root or root in resolved.parents:
                self._check_usable(resolved, root, field_name)
                return resolved
        raise GatewayError(
            ErrorCode.VALIDATION_ERROR,
            f"{field_name}: {raw!r} is outside the configured data roots; "
            "use a path inside the working directory (or set MCP_GATEWAY_DATA_ROOTS)",
        )

    @staticmethod
    def _check_usable(path: Path, root: Path, field_name: str) -> None:
        """Names too long for the file system, and paths the OS refuses to look at, are bad
        input: say so now instead of failing later with an OS error."""
        try:
            name_max = os.pathconf(root, "PC_NAME_MAX")
        except (AttributeError, OSError, ValueError):  # no pathconf (Windows), or unknown
            name_max = 255
        reason = None
        if any(len(os.fsencode(part)) > name_max for part in path.parts):
            reason = os.strerror(errno.ENAMETOOLONG)
        else:
            try:
                path.exists()
            except OSError as exc:
                reason = exc.strerror or type(exc).__name__
        if reason is not None:
            if reason == os.strerror(errno.ENAMETOOLONG):
                reason += f"; each folder or file name may have at most {name_max} bytes"
            raise GatewayError(
                ErrorCode.VALIDATION_ERROR, f"{field_name}: not a usable path ({reason})"
            )

    def display_path(self, path: Path) -> str:
        """A path as the client may see it: relative to the data root that holds it."""
        for root in self.data_roots:
            try:
                return path.relative_to(root).as_posix()
            except ValueError:
                continue
        return path.name


ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


@dataclass
class ToolContext(Generic[SettingsT]):
    """Handed to a handler on every call."""

    plugin: PluginContext[SettingsT]
    tool: str
    correlation_id: str
    _progress: ProgressFn = _no_progress

    @property
    def settings(self) -> SettingsT:
        return self.plugin.settings

    @property
    def logger(self) -> logging.Logger:
        return self.plugin.logger

    @property
    def resources(self) -> dict[str, Any]:
        return self.plugin.resources

    def sanitize(self, text: str) -> str:
        """See :meth:`PluginContext.sanitize`."""
        return self.plugin.sanitize(text)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress. Sent as an MCP progress notification when the client asked for
        progress; a no-op otherwise. Progress also keeps Claude Code's idle watchdog quiet."""
        await self._progress(progress, total, message)

    async def run_sync(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run blocking code (SQLite, a blocking client library) off the event loop.

        On cancellation or timeout the call is abandoned: the thread finishes in the
        background, so blocking code must keep its own work atomic (e.g. one transaction).
        """

        def call() -> R:
            return fn(*args, **kwargs)

        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)


#: A tool's handler: ``async def handler(args: InputModel, ctx: ToolContext) -> OutputModel``.
ToolHandler = Callable[[ArgsT, ToolContext[Any]], Awaitable[object]]


@dataclass(frozen=True)
class ToolSpec(Generic[ArgsT]):
    """One tool. ``input_model`` is both the published ``inputSchema`` and the validator.

    The handler is ``async def handler(args: InputModel, ctx: ToolContext) -> OutputModel | dict``
    (a ``ToolSpec[InputModel]``: a type checker holds the handler to the input model).
    ``tier`` has no default: a spec whose tier is ``None`` is refused when it is registered.
    ``timeout`` (seconds) overrides the gateway default. ``backend`` is the backend the tool
    depends on: a name that one of the plugin's health checks declares, or a
    :class:`~gateway.rest.RestBackend` (the core then provides its settings, client and health
    check). Its circuit breaker and configuration state gate the call.
    ``open_world`` says the tool reaches outside the gateway's own data (a remote service).
    ``max_result_chars`` raises Claude Code's 50k-character inline result limit for this tool.
    """

    name: str
    description: str
    input_model: type[ArgsT]
    handler: ToolHandler[ArgsT]
    tier: Tier | str | None
    title: str | None = None
    output_model: type[BaseModel] | None = None
    mutation: Mutation | None = None
    timeout: float | None = None
    backend: str | Backend | None = None
    open_world: bool = False
    max_result_chars: int | None = None

    @property
    def backend_name(self) -> str | None:
        b = self.backend
        return b if b is None or isinstance(b, str) else b.name


@dataclass(frozen=True)
class ServerSpec:
    """An MCP server to mount: its tools are served like a plugin's, through the same pipeline.

    Stdio: ``command`` with ``args``, started in ``cwd`` (the gateway's own when ``None``) with
    ``env`` and nothing else of the gateway's environment but ``PATH``, ``HOME`` and the locale.
    Streamable HTTP: ``url``, with ``headers`` on every request. ``tools`` (``None``: all) and
    ``deny_tools`` choose which of the server's tools are offered, by the server's own names;
    ``prefix`` is put before each name the gateway publishes; ``tiers`` overrides a tool's tier
    (``read`` only where the server's ``readOnlyHint`` is not enough: anything else is a
    mutation). ``timeout`` (seconds) is each call's, else the gateway default. ``pin``:
    ``"first-use"`` records the definitions the first time the server answers and offers them;
    ``"approve"`` offers nothing until ``mcp-gateway servers approve`` recorded them.
    ``list_wait`` (seconds) bounds how long a first ``tools/list`` waits for the server while it
    starts. ``origin`` says where it was configured (``gw.toml:12``), for messages.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] | None = None
    deny_tools: tuple[str, ...] = ()
    prefix: str = ""
    tiers: Mapping[str, Tier] = field(default_factory=dict)
    timeout: float | None = None
    enabled: bool = True
    pin: str = "first-use"
    list_wait: float = 5.0
    origin: str = ""

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"
