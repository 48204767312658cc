"""What a plugin hands the core: tool specs, health checks, and the contexts it gets back.

A tool is data. The core derives the JSON schemas, the MCP annotations and the ``MUTATION:``
paragraph from a :class:`ToolSpec`; nothing has to be kept in sync by hand. A spec is generic in
its input model, so a type checker holds the handler's argument to it. :func:`tool` writes the
spec of a typed async function: its parameters are the input model, its return annotation the
output model, its docstring the description. Nothing here knows about HTTP: the REST kit
(:mod:`gateway.rest`) builds specs and reaches its clients on top.
"""

from __future__ import annotations

import enum
import errno
import inspect
import logging
import os
import re
import sys
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload, runtime_checkable

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, create_model
from typing_extensions import TypeVar as DefaultedTypeVar

from .content import ToolResult
from .errors import ErrorCode, GatewayError, Sanitizer
from .inputs import NO_INPUTS, InputRequired, Inputs

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
SettingsT = TypeVar("SettingsT", bound=BaseModel)
#: A tool's input model; a bare ``ToolSpec`` (in a list of any tools) is ``ToolSpec[Any]``.
ArgsT = DefaultedTypeVar("ArgsT", bound=BaseModel, default=Any)


class RegistrationError(Exception):
    """A tool spec the core refuses; the plugin that declared it is skipped."""


# No docstring: pydantic would publish it as the description of an input schema.
class Args(BaseModel):
    # Unknown arguments are refused. The validator is built on first use (as for models of a
    # plugin whose schemas come from the schema cache): a start that only lists tools needs none.
    model_config = ConfigDict(extra="forbid", defer_build=True)


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


class BackendClient(Protocol):
    """What the core does with a backend's client: close it at shut-down."""

    async def aclose(self) -> None: ...


@runtime_checkable
class Backend(Protocol):
    """A backend declared as an object (the REST kit's :class:`gateway.rest.RestBackend`).

    ``name`` is what its health check, breaker and configuration state are kept under. The
    core reads its ``settings`` model from ``[plugins.<settings_table>]`` and the environment
    once per name, makes its secrets known, registers the one health check it builds and opens
    the one client it builds on first use (:class:`gateway.backends.BackendHub`), however many
    plugins declare it. The core knows such a backend only through these members.
    """

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> type[BaseModel]: ...

    @property
    def settings_table(self) -> str: ...

    def same_identity(self, other: Any) -> bool:
        """Is ``other`` a declaration of this backend (by another plugin that shares it)?"""
        ...

    def secret_values(self, settings: Any) -> list[str]:
        """The secrets ``settings`` hold, and those sent from them, for the sanitizer."""
        ...

    def not_configured(self, settings: Any, unexpanded: Mapping[str, str]) -> str | None:
        """Why ``settings`` leave the backend unconfigured (``None`` when they do not);
        ``unexpanded``: variables the client left as ``${NAME}`` references."""
        ...

    def enabled_by(self) -> str:
        """The setting that enables the backend, as start lines name it (``GITEA_URL``)."""
        ...

    def open_client(self, settings: Any, sanitizer: Sanitizer) -> BackendClient:
        """The backend's one client, opened on its first use."""
        ...

    def health_check(
        self, settings: Any, client: Callable[[], Any], not_configured: str | None
    ) -> HealthCheck:
        """The backend's one health check; ``client()`` opens or returns its client."""
        ...


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
    core's hub of declared backends (:class:`gateway.backends.BackendHub`): :mod:`gateway.rest`
    reaches its clients through it.
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
    #: where :meth:`resource_updated` goes: the core's subscriptions, told which plugin says it
    _updates: Callable[[str, object], None] | None = field(default=None, repr=False)

    def resource_updated(self, uri: str) -> None:
        """Say that the resource ``uri`` changed: one of this plugin's resources declared
        ``subscribable=True``, or a URI its subscribable template names. The clients
        subscribed to it are sent ``notifications/resources/updated`` (and read it again);
        when none is, this costs a lookup. It returns at once (the clients are told in the
        background), from the event loop or a thread, and never raises: a URI the plugin
        does not serve as subscribable is logged once and told to no one."""
        if self._updates is not None:
            self._updates(self.name, uri)

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
#: Sends one log message to the client: ``(level, message)``.
LogFn = Callable[[str, str], Awaitable[None]]
#: The levels of MCP log messages (RFC 5424's), least severe first.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


async def _no_log(level: str, message: str) -> None:
    return None


@dataclass
class ToolContext(Generic[SettingsT]):
    """Handed to a handler on every call."""

    plugin: PluginContext[SettingsT]
    tool: str
    correlation_id: str
    _progress: ProgressFn = _no_progress
    #: the client's answers when the call is made again after it asked (see
    #: :mod:`gateway.inputs`), and what the client can be asked
    inputs: Inputs = NO_INPUTS
    _log: LogFn = _no_log

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

    def resource_updated(self, uri: str) -> None:
        """See :meth:`PluginContext.resource_updated`."""
        self.plugin.resource_updated(uri)

    async def log(self, level: str, message: str) -> None:
        """Send the client an MCP log message (``notifications/message``) at ``level``
        (``debug`` … ``emergency``), when it asked for messages at that level: on
        2026-07-28 in the request's ``_meta``, before that with ``logging/setLevel``. The text
        is sanitized like an error message; the gateway's own log (``logger``) is separate."""
        if level not in LOG_LEVELS:
            raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
        await self._log(level, message)

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
    depends on: a name that one of the plugin's health checks declares, or a :class:`Backend`
    such as :class:`~gateway.rest.RestBackend` (the core then provides its settings, client and
    health check). Its circuit breaker and configuration state gate the call.
    ``open_world`` says the tool reaches outside the gateway's own data (a remote service).
    ``max_result_chars`` raises Claude Code's 50k-character inline result limit for this tool.
    ``function``: the typed function :func:`tool` declared the tool with (registration errors
    name it); ``None`` for a spec written out.
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
    function: Callable[..., Any] | None = field(default=None, kw_only=True, compare=False)

    @property
    def backend_name(self) -> str | None:
        b = self.backend
        return b if b is None or isinstance(b, str) else b.name


# -- a typed async function as a tool ----------------------------------------------------------

#: What :func:`tool` takes: ``async def name(arg: T, ..., *, ctx: ToolContext[S]) -> Model``.
AsyncFunction = Callable[..., Awaitable[Any]]
_EMPTY = inspect.Parameter.empty


def declared_at(kind: str, name: object, function: Callable[..., Any] | None) -> str:
    """How a registration error names a tool or prompt: ``tool 'x'``, followed by the function
    that declared it, when one did (``tool 'x' (function gateway_notes.plugin.x)``)."""
    where = f"{kind} {name!r}"
    if function is None:
        return where
    module = getattr(function, "__module__", None) or "?"
    qualname = getattr(function, "__qualname__", None) or getattr(function, "__name__", "?")
    return f"{where} (function {module}.{qualname})"


@dataclass(frozen=True)
class Declaration:
    """What a typed function declares. ``input_model`` holds its parameters but the context
    (``extra="forbid"``); ``call(args, ctx)`` calls the function with the fields of a valid
    ``args`` by name (nested models stay models) and the context, if it takes one."""

    name: str
    description: str
    input_model: type[Args]
    output_model: type[BaseModel] | None
    call: Callable[[BaseModel, Any], Any]


def declare(
    fn: Callable[..., Any],
    *,
    kind: str = "tool",
    name: str | None = None,
    description: str | None = None,
    context: tuple[type, ...] = (ToolContext,),
    returns_model: bool = True,
) -> Declaration:
    """Read a tool's (or prompt's) declaration off ``fn``: its name (``name`` overrides), the
    first paragraph of its docstring (``description`` overrides), a model of its parameters, and
    its return annotation when that is a pydantic model (``returns_model=False``: not read). The
    parameter annotated with one of ``context`` (or named ``ctx``) receives the context instead.
    Raises :class:`RegistrationError` naming the function for what cannot be an argument."""
    if not callable(fn):
        raise RegistrationError(
            f"@{kind} decorates a function, not {type(fn).__name__}; its options are keywords "
            f"(@{kind}(tier=...))"
            if kind == "tool"
            else f"@{kind} decorates a function"
        )
    name = name if name is not None else getattr(fn, "__name__", "")
    where = declared_at(kind, name, fn)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise RegistrationError(f"{where}: its signature cannot be read ({exc})") from None
    namespace = _declaring_locals()
    arguments = _Arguments(fn, where, kind, context, namespace)
    for param in signature.parameters.values():
        arguments.add(param)
    return Declaration(
        name=name,
        description=_first_paragraph(fn) if description is None else description,
        input_model=arguments.model(name),
        output_model=_output_model(fn, signature, namespace, where) if returns_model else None,
        call=_caller(fn, arguments.order, arguments.positional, arguments.ctx_name),
    )


class _Arguments:
    """The parameters of a function, read one by one into the fields of its input model."""

    def __init__(
        self,
        fn: Callable[..., Any],
        where: str,
        kind: str,
        context: tuple[type, ...],
        namespace: dict[str, Any] | None,
    ) -> None:
        self.fn, self.where, self.kind, self.context = fn, where, kind, context
        self.namespace = namespace
        self.fields: dict[str, Any] = {}
        self.order: list[str] = []
        self.positional = 0
        self.ctx_name: str | None = None

    def add(self, param: inspect.Parameter) -> None:
        where = self.where
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise RegistrationError(
                f"{where}: {star}{param.name} cannot become arguments of a {self.kind}; "
                "declare each argument as a parameter of its own"
            )
        hint = self._hint(param)
        if _is_context(hint, self.context) or (param.name == "ctx" and hint is _EMPTY):
            if self.ctx_name is not None:
                raise RegistrationError(
                    f"{where}: {self.ctx_name!r} and {param.name!r} both ask for the context"
                )
            self.ctx_name = param.name
        elif param.name == "ctx":
            raise RegistrationError(
                f"{where}: the parameter ctx receives the context: annotate it "
                f"{self.context[0].__name__} or give the argument another name"
            )
        elif hint is _EMPTY:
            raise RegistrationError(
                f"{where}: parameter {param.name!r} has no type annotation; the input schema "
                "is made from the annotations"
            )
        elif param.name.startswith("_"):
            raise RegistrationError(
                f"{where}: parameter {param.name!r} cannot be an argument: a name that starts "
                "with _ is private to a pydantic model"
            )
        else:
            self.fields[param.name] = (hint, ... if param.default is _EMPTY else param.default)
        self.order.append(param.name)
        self.positional += param.kind is param.POSITIONAL_ONLY

    def _hint(self, param: inspect.Parameter) -> Any:
        """The parameter's annotation as a type; ``_EMPTY`` when it has none, or when ``ctx``'s
        names what cannot be resolved (imported for type checkers only: it is the context)."""
        if param.annotation is _EMPTY:
            return _EMPTY
        try:
            return _resolved(self.fn, param.annotation, self.namespace)
        except Exception as exc:  # NameError, SyntaxError, TypeError from typing
            if param.name == "ctx":
                return _EMPTY
            raise RegistrationError(
                f"{self.where}: the annotation of {param.name!r} ({param.annotation}) cannot be "
                f"resolved ({type(exc).__name__}: {exc}); define or import what it names "
                "before the function"
            ) from None

    def model(self, name: str) -> type[Args]:
        try:
            model: type[Args] = create_model(
                _model_name(name), __base__=Args, __module__=self.fn.__module__, **self.fields
            )
        except Exception as exc:  # pydantic refuses a field name or a definition
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise RegistrationError(
                f"{self.where}: its parameters do not make an input model "
                f"({type(exc).__name__}: {first})"
            ) from None
        lost = [name for name in self.fields if name not in model.model_fields]
        if lost:  # a name pydantic keeps for itself would silently not be an argument
            raise RegistrationError(
                f"{self.where}: {', '.join(map(repr, lost))} cannot be an argument"
            )
        return model


def _declaring_locals() -> dict[str, Any] | None:
    """The local names where the decorator is applied, so that a tool declared inside a
    function can name classes declared there too; ``None`` at module level."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != "gateway" and not module.startswith("gateway."):
            break
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None or frame.f_locals is frame.f_globals:
        return None
    return dict(frame.f_locals)


def _resolved(fn: Callable[..., Any], annotation: Any, namespace: dict[str, Any] | None) -> Any:
    """An annotation as a type: strings (``from __future__ import annotations``) evaluated in
    the function's module, ``Annotated`` metadata (constraints, descriptions) kept."""
    holder = types.SimpleNamespace(__annotations__={"value": annotation})
    hints = typing.get_type_hints(
        holder, globalns=getattr(fn, "__globals__", {}), localns=namespace, include_extras=True
    )
    return hints["value"]


def _is_context(hint: Any, context: tuple[type, ...]) -> bool:
    base = typing.get_origin(hint) or hint
    return isinstance(base, type) and issubclass(base, context)


def _model_name(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_-]", name)) + "Args"


def _first_paragraph(fn: Callable[..., Any]) -> str:
    """The docstring's first paragraph, its lines joined: what the model reads of the tool."""
    doc = inspect.getdoc(fn) or ""
    first = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    return " ".join(line.strip() for line in first.splitlines()).strip()


def _output_model(
    fn: Callable[..., Any],
    signature: inspect.Signature,
    namespace: dict[str, Any] | None,
    where: str,
) -> type[BaseModel] | None:
    """The return annotation as the output model: a pydantic model is published as the
    ``outputSchema``; a dict (or no annotation) publishes none."""
    if signature.return_annotation is _EMPTY:
        return None
    try:
        hint = _resolved(fn, signature.return_annotation, namespace)
    except Exception as exc:
        raise RegistrationError(
            f"{where}: its return annotation ({signature.return_annotation}) cannot be resolved "
            f"({type(exc).__name__}: {exc}); define or import what it names before the function"
        ) from None
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        # ``Model | InputRequired``: a tool that may ask the client first, or return content.
        kept = [m for m in typing.get_args(hint) if m not in _NOT_OUTPUT]
        if len(kept) == 1:
            hint = kept[0]
        elif not kept:
            return None
    if hint in _NOT_OUTPUT:
        return None
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return hint
    if hint is Any or hint is dict or typing.get_origin(hint) in (dict, Mapping):
        return None
    raise RegistrationError(
        f"{where}: returns {signature.return_annotation}; return a pydantic model (it is "
        "published as the outputSchema), a dict, a ToolResult or InputRequired"
    )


#: Return annotations that are not an output model: content of any type, or a request to ask
#: the client first.
_NOT_OUTPUT = (ToolResult, InputRequired)


def _caller(
    fn: Callable[..., Any], order: list[str], positional: int, ctx_name: str | None
) -> Callable[[BaseModel, Any], Any]:
    names = tuple(order)
    keywords = names[positional:]

    def call(args: BaseModel, ctx: Any) -> Any:
        values = [ctx if n == ctx_name else getattr(args, n) for n in names]
        return fn(*values[:positional], **dict(zip(keywords, values[positional:], strict=True)))

    return call


def _handler(call: Callable[[BaseModel, Any], Any]) -> ToolHandler[Any]:
    async def handler(args: Any, ctx: ToolContext[Any]) -> object:
        return await call(args, ctx)

    return handler


@overload
def tool(fn: AsyncFunction, /) -> ToolSpec[Any]: ...


@overload
def tool(
    *,
    tier: Tier | str | None = None,
    mutation: Mutation | None = None,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    backend: str | Backend | None = None,
    open_world: bool = False,
    max_result_chars: int | None = None,
) -> Callable[[AsyncFunction], ToolSpec[Any]]: ...


def tool(
    fn: AsyncFunction | None = None,
    /,
    *,
    tier: Tier | str | None = None,
    mutation: Mutation | None = None,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    backend: str | Backend | None = None,
    open_world: bool = False,
    max_result_chars: int | None = None,
) -> ToolSpec[Any] | Callable[[AsyncFunction], ToolSpec[Any]]:
    """Declare a tool with a typed async function; the decorated name is its :class:`ToolSpec`::

        @tool(tier=Tier.READ)
        async def read_file(
            path: Annotated[str, Field(max_length=500, description="Relative path.")],
            max_chars: Annotated[int, Field(ge=1, le=100_000)] = 2000,
            *,
            ctx: ToolContext[Settings],
        ) -> FileText:
            \"\"\"A text file inside the data roots, cut to max_chars.\"\"\"

    The parameters but the context (annotated ``ToolContext``, or named ``ctx``) are the input
    model (``extra="forbid"``): ``Annotated[..., Field(...)]`` or a ``Field(...)`` default
    carries constraints and descriptions, a default makes an argument optional. The return
    annotation, when a pydantic model, is the output model; the docstring's first paragraph the
    description; the function's name the tool's. The handler calls the function with the valid
    arguments by name. The rest is :class:`ToolSpec`'s, and fails closed the same way: no tier,
    or a mutation without its :class:`Mutation`, is refused when the tool is registered.
    """

    def decorate(fn: AsyncFunction) -> ToolSpec[Any]:
        declared = declare(fn, name=name, description=description)
        return ToolSpec(
            name=declared.name,
            description=declared.description,
            input_model=declared.input_model,
            handler=_handler(declared.call),
            tier=tier,
            title=title,
            output_model=declared.output_model,
            mutation=mutation,
            timeout=timeout,
            backend=backend,
            open_world=open_world,
            max_result_chars=max_result_chars,
            function=fn,
        )

    return decorate if fn is None else decorate(fn)


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
    starts. ``protocol``: the revision it is spoken to at: ``2025-11-25`` (``initialize``; it
    may ask the client over its connection) or ``2026-07-28`` (``server/discover``; it asks
    with input-required results, each request says what the client can do). ``origin`` says
    where it was configured (``gw.toml:12``), for messages.
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
    protocol: str = "2025-11-25"

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"
