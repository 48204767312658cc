"""The plugin contract: eight hooks, each called once per plugin, each failure isolated.

A plugin is a module (or object) named by an entry point in the group ``mcp_gateway.plugins``
whose functions are decorated with :data:`hookimpl`. An implementation may accept any subset
of a hook's arguments, as usual with pluggy.

The core calls every hook for one plugin at a time, inside its own ``try``. If any hook of a
plugin raises, or returns something the core rejects, that plugin is skipped as a whole (its
tools and checks are withdrawn), its reason is recorded and shown by ``mcp-gateway plugins``
and the ``gateway_status`` tool, and every other plugin keeps serving.

Order at start-up, per plugin: ``plugin_settings`` → ``register_tools`` →
``register_prompts`` → ``register_resources`` → ``register_health_checks`` →
``register_servers``; then, when the server starts, ``open_resources``; at shut-down,
``close_resources``. None of these may do network I/O except ``open_resources`` and
``close_resources``, and those should only open clients, not probe backends: the gateway
must answer ``initialize`` and ``tools/list`` at once even when every backend is down.

Time limits: the import and the load-time hooks of one plugin share ``load_timeout``;
``open_resources`` and ``close_resources`` get ``resource_timeout`` each. They hold for
blocking code too (see :func:`gateway.plugins.time_limit`); a plugin that overruns is skipped.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, overload

import pluggy
from pydantic import BaseModel

from .prompts import Completer, PromptContext, PromptSpec
from .resources import (
    ResourceBody,
    ResourceContext,
    ResourceSpec,
    ResourceTemplateSpec,
    TemplateReader,
)
from .spec import (
    AsyncFunction,
    Backend,
    HealthCheck,
    Mutation,
    PluginContext,
    RegistrationError,
    ServerSpec,
    Tier,
    ToolSpec,
    declare,
    tool,
)

PROJECT = "mcp_gateway"
ENTRY_POINT_GROUP = "mcp_gateway.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Decorate a plugin's hook functions with this.
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec(firstresult=True)
def plugin_settings() -> type[BaseModel] | None:
    """Return the pydantic model of this plugin's settings, or ``None`` for none.

    Called first, once. The core fills the model from the ``[plugins.<name>]`` table of the
    config file and from environment variables, and hands the instance to the other hooks as
    ``plugin.settings``. A field declares its environment variable with
    ``gateway.env_field("GITEA_URL", default=None)``. String values ``{"$env": "NAME"}`` in the
    config file read that variable. ``SecretStr`` values are redacted from every message.
    If validation fails the plugin is skipped with the field and rule as the reason.
    """


@hookspec
def register_tools(register: Callable[[ToolSpec], None], plugin: PluginContext[BaseModel]) -> None:
    """Register this plugin's tools by calling ``register(ToolSpec(...))`` once per tool.

    Called once, after ``plugin_settings``. No I/O. A spec with a bad name, a missing or
    unknown tier, a mutation without ``Mutation(...)``, a non-async handler or an input model
    that allows extra fields is a registration error: the whole plugin is then skipped with
    that reason. A tool name another plugin registers too costs only that tool: neither serves
    it, both report it, and the deployment's ``providers`` setting picks one.
    """


@hookspec
def register_prompts(
    register: Callable[[PromptSpec], None], plugin: PluginContext[BaseModel]
) -> None:
    """Register workflows as MCP prompts by calling ``register(PromptSpec(...))`` once each.

    Called once, after ``register_tools``. No I/O. A prompt's arguments model is validated like
    tool input (``extra="forbid"``); its render function gets a ``PromptContext`` naming the tools
    this deployment offers, so it can name only those. A prompt is listed only while every tool
    in its ``requires`` is offered. A bad spec or a name taken by another plugin skips the
    plugin with that reason; a render function that raises gives the client a generic error.
    """


@hookspec
def register_resources(
    register: Callable[[ResourceSpec | ResourceTemplateSpec], None],
    plugin: PluginContext[BaseModel],
) -> None:
    """Offer MCP resources by calling ``register(ResourceSpec(...))`` (one URI) or
    ``register(ResourceTemplateSpec(...))`` (URIs by a template) once each.

    Called once, after ``register_prompts``. No I/O: a reader runs when a client reads. A read
    is of the read tier and passes the pipeline's layers like a read tool's call (scopes,
    audit where reads are audited, breaker, timeout, sanitizer, size bounds); a file-backed
    resource (``path=``) is read only inside the data roots. A bad spec, or a URI the plugin
    registers twice, skips the plugin with that reason; a URI another source registers too is
    served by neither, and both report it.
    """


@hookspec
def register_health_checks(
    register: Callable[[HealthCheck], None], plugin: PluginContext[BaseModel]
) -> None:
    """Register named async checks of this plugin's backends with ``register(HealthCheck(...))``.

    Called once, after ``register_resources``. No I/O here: the checks run later, on demand
    (``mcp-gateway health``, ``gateway_status``, ``/readyz``), each under its own timeout, with
    results cached. Set ``HealthCheck.not_configured`` when settings leave a backend unset: its
    tools are then not offered.
    """


@hookspec
def register_servers(
    register: Callable[[ServerSpec], None], plugin: PluginContext[BaseModel]
) -> None:
    """Mount MCP servers by calling ``register(ServerSpec(...))`` once per server.

    Called once, after ``register_health_checks``. No I/O: the core starts (or connects to) the
    servers when the gateway starts, lists their tools and serves them through the same
    pipeline as plugin tools (each server reported like a plugin of its name). A spec that is
    not a ``ServerSpec`` skips the plugin. Raise ``gateway.config.ConfigError`` for a mistake in
    the deployment's configuration: the plugin is skipped with that one line as its reason, and
    the CLI stops with exit status 2 showing it.
    """


@hookspec
def open_resources(plugin: PluginContext[BaseModel]) -> Awaitable[None] | None:
    """Open shared resources once, before the first call (may be ``async``).

    Store them in ``plugin.resources`` (an ``httpx.AsyncClient`` with keep-alive, a path).
    Runs under a timeout; a failure here skips the plugin. Do not probe backends here.
    """


@hookspec
def close_resources(plugin: PluginContext[BaseModel]) -> Awaitable[None] | None:
    """Close what ``open_resources`` opened (may be ``async``). Called once at shut-down,
    also when the process is stopping because of an error. Failures are logged, not raised."""


# --- Plugin: the hooks above, written once ---
#
# A plugin declared as one object: its settings, tools, prompts and health checks.
#
# Most plugins' hooks only hand the core what the plugin declared. A :class:`Plugin` is those
# hooks, written once; the entry point names the object (``notes = "gateway_notes.plugin:plugin"``)
# and the core registers it with pluggy like a module::
#
#     plugin = Plugin(settings=Settings)
#
#
#     @plugin.tool(tier=Tier.READ)
#     async def notes_search(query: str = "", *, ctx: ToolContext[Settings]) -> SearchResult:
#         """Find notes whose text contains a substring."""
#         ...
#
# Tools declared elsewhere join with ``tools=`` (specs, or the tools of a
# :class:`~gateway.rest.RestTools`), read each time the plugin is registered, so tools declared
# after this line count too; prompts with ``prompts=`` or ``@plugin.prompt``; resources with
# ``resources=``, ``@plugin.resource`` or ``@plugin.resource_template``. A plugin with more
# hooks (resources to open and close) subclasses :class:`Plugin` and adds them as methods with
# ``@hookimpl``; an entry point may also name a module that binds the hooks it uses
# (``register_tools = plugin.register_tools``).

#: A health check: ``async def name() -> str | None``, or one taking the plugin's context.
CheckFunction = Callable[..., Awaitable[str | None]]
#: A prompt's render function: its parameters are the prompt's arguments (see :meth:`Plugin.prompt`).
PromptFunction = Callable[..., Any]
#: A resource's reader: ``async def name() -> str | bytes`` (or taking the ``ResourceContext``);
#: a template's takes its variables by name too.
ReaderFunction = Callable[..., Awaitable[ResourceBody]]
#: A template variable: ``{id}``, ``{+path}``, ``{?q,page}``, ``{list*}``, ``{name:3}``.
_TEMPLATE_EXPRESSION = re.compile(r"\{[+#./;?&]?([^}]*)\}")


@dataclass(frozen=True)
class _Check:
    """A health check declared with :meth:`Plugin.health_check`, bound to the plugin's context
    when it is registered."""

    function: CheckFunction
    name: str
    backend: str | None
    timeout: float
    required: bool
    not_configured: str | Callable[[PluginContext[Any]], str | None] | None
    shared: bool

    def bind(self, plugin: PluginContext[Any]) -> HealthCheck:
        fn = self.function
        takes_plugin = bool(inspect.signature(fn).parameters)

        async def check() -> str | None:
            return await (fn(plugin) if takes_plugin else fn())

        unset = self.not_configured
        return HealthCheck(
            name=self.name,
            check=check,
            backend=self.backend,
            timeout=self.timeout,
            required=self.required,
            not_configured=unset(plugin) if callable(unset) else unset,
            shared=self.shared,
        )


class Plugin:
    """What a plugin declares; its methods are the hooks that register it.

    ``settings``: the model of its settings (``plugin_settings``). ``tools``, ``prompts``:
    specs declared elsewhere, joined by those of the decorators :meth:`tool`, :meth:`prompt`
    and :meth:`health_check`.
    """

    def __init__(
        self,
        *,
        settings: type[BaseModel] | None = None,
        tools: Iterable[ToolSpec[Any]] = (),
        prompts: Iterable[PromptSpec] = (),
        resources: Iterable[ResourceSpec | ResourceTemplateSpec] = (),
    ) -> None:
        self.settings = settings
        # An iterator is read once, here; any other iterable each time the plugin registers.
        self._given_tools = tuple(tools) if isinstance(tools, Iterator) else tools
        self._given_prompts = tuple(prompts) if isinstance(prompts, Iterator) else prompts
        self._given_resources = tuple(resources) if isinstance(resources, Iterator) else resources
        self._tools: list[ToolSpec[Any]] = []
        self._prompts: list[PromptSpec] = []
        self._resources: list[ResourceSpec | ResourceTemplateSpec] = []
        self._checks: list[_Check] = []

    @property
    def tools(self) -> tuple[ToolSpec[Any], ...]:
        return (*self._given_tools, *self._tools)

    @property
    def prompts(self) -> tuple[PromptSpec, ...]:
        return (*self._given_prompts, *self._prompts)

    @property
    def resources(self) -> tuple[ResourceSpec | ResourceTemplateSpec, ...]:
        return (*self._given_resources, *self._resources)

    # -- declaring ------------------------------------------------------------------------

    @overload
    def tool(self, fn: AsyncFunction, /) -> ToolSpec[Any]: ...

    @overload
    def tool(
        self,
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
    ) -> Callable[[AsyncFunction], ToolSpec[Any]]: ...

    def tool(
        self,
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
        """:func:`gateway.tool`, and the tool is this plugin's."""
        make = tool(
            tier=tier,
            mutation=mutation,
            name=name,
            title=title,
            description=description,
            timeout=timeout,
            backend=backend,
            open_world=open_world,
            max_result_chars=max_result_chars,
        )

        def decorate(fn: AsyncFunction) -> ToolSpec[Any]:
            spec = make(fn)
            self._tools.append(spec)
            return spec

        return decorate if fn is None else decorate(fn)

    @overload
    def health_check(self, fn: CheckFunction, /) -> CheckFunction: ...

    @overload
    def health_check(
        self,
        /,
        *,
        name: str | None = None,
        backend: str | None = None,
        timeout: float = 5.0,
        required: bool = True,
        not_configured: str | Callable[[PluginContext[Any]], str | None] | None = None,
        shared: bool = False,
    ) -> Callable[[CheckFunction], CheckFunction]: ...

    def health_check(
        self,
        fn: CheckFunction | None = None,
        /,
        *,
        name: str | None = None,
        backend: str | None = None,
        timeout: float = 5.0,
        required: bool = True,
        not_configured: str | Callable[[PluginContext[Any]], str | None] | None = None,
        shared: bool = False,
    ) -> CheckFunction | Callable[[CheckFunction], CheckFunction]:
        """Declare a health check: ``async def name(plugin: PluginContext[Settings]) -> str |
        None`` (or without the parameter), healthy when it returns, unhealthy when it raises.
        The keywords are :class:`~gateway.HealthCheck`'s; ``name`` defaults to the function's;
        ``not_configured`` may be a function of the plugin's context (its settings), called
        when the plugin registers. The function is returned as it is."""

        def decorate(fn: CheckFunction) -> CheckFunction:
            self._checks.append(
                _Check(
                    fn,
                    name or fn.__name__,
                    backend,
                    timeout,
                    required,
                    not_configured,
                    shared,
                )
            )
            return fn

        return decorate if fn is None else decorate(fn)

    @overload
    def prompt(self, fn: PromptFunction, /) -> PromptSpec: ...

    @overload
    def prompt(
        self,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        requires: Iterable[str] = (),
        free_text: str | None = None,
        complete: Completer | None = None,
    ) -> Callable[[PromptFunction], PromptSpec]: ...

    def prompt(
        self,
        fn: PromptFunction | None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        requires: Iterable[str] = (),
        free_text: str | None = None,
        complete: Completer | None = None,
    ) -> PromptSpec | Callable[[PromptFunction], PromptSpec]:
        """Declare a prompt the way :meth:`tool` declares a tool: the parameters but the context
        (annotated ``PromptContext``, or named ``ctx``) are its arguments, the docstring's first
        paragraph its description; the function (may be async) returns the text, messages
        (:func:`gateway.message`) or :class:`~gateway.InputRequired`. The keywords are
        :class:`~gateway.PromptSpec`'s."""

        def decorate(fn: PromptFunction) -> PromptSpec:
            declared = declare(
                fn,
                kind="prompt",
                name=name,
                description=description,
                context=(PromptContext,),
                returns_model=False,
            )
            spec = PromptSpec(
                name=declared.name,
                description=declared.description,
                arguments=declared.input_model,
                render=declared.call,
                title=title,
                requires=tuple(requires),
                free_text=free_text,
                complete=complete,
            )
            self._prompts.append(spec)
            return spec

        return decorate if fn is None else decorate(fn)

    def resource(
        self,
        uri: str,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        cache_ttl: float | None = None,
        subscribable: bool = False,
    ) -> Callable[[ReaderFunction], ResourceSpec]:
        """Declare the resource ``uri``: the decorated ``async def`` returns its text (a
        ``str``) or its bytes, and may take the :class:`~gateway.ResourceContext` (annotated, or
        named ``ctx``). Its name is the function's (``name=`` overrides), its description the
        docstring's first paragraph. The keywords are :class:`~gateway.ResourceSpec`'s."""

        def decorate(fn: ReaderFunction) -> ResourceSpec:
            call = _reader(fn, "resource", set())

            async def read(ctx: ResourceContext[Any]) -> ResourceBody:
                return await call({}, ctx)

            spec = ResourceSpec(
                uri=uri,
                name=name or fn.__name__,
                read=read,
                title=title,
                description=description if description is not None else _doc(fn),
                mime_type=mime_type,
                cache_ttl=cache_ttl,
                subscribable=subscribable,
            )
            self._resources.append(spec)
            return spec

        return decorate

    def resource_template(
        self,
        uri_template: str,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        cache_ttl: float | None = None,
        complete: Completer | None = None,
        subscribable: bool = False,
    ) -> Callable[[ReaderFunction], ResourceTemplateSpec]:
        """Declare resources by a URI template (``"notes://{id}"``): the decorated ``async
        def`` takes each of the template's variables by name (a ``str``), and may take the
        :class:`~gateway.ResourceContext`; it returns the text or the bytes of the URI asked
        for. The keywords are :class:`~gateway.ResourceTemplateSpec`'s."""
        variables = {
            v.strip().rstrip("*").split(":")[0]
            for body in _TEMPLATE_EXPRESSION.findall(uri_template)
            for v in body.split(",")
        }

        def decorate(fn: ReaderFunction) -> ResourceTemplateSpec:
            call = _reader(fn, f"resource template {uri_template!r}", variables)
            spec = ResourceTemplateSpec(
                uri_template=uri_template,
                name=name or fn.__name__,
                read=call,
                title=title,
                description=description if description is not None else _doc(fn),
                mime_type=mime_type,
                cache_ttl=cache_ttl,
                complete=complete,
                subscribable=subscribable,
            )
            self._resources.append(spec)
            return spec

        return decorate

    # -- the hooks ------------------------------------------------------------------------

    @hookimpl
    def plugin_settings(self) -> type[BaseModel] | None:
        return self.settings

    @hookimpl
    def register_tools(self, register: Callable[[ToolSpec[Any]], None]) -> None:
        for spec in self.tools:
            register(spec)

    @hookimpl
    def register_prompts(self, register: Callable[[PromptSpec], None]) -> None:
        for spec in self.prompts:
            register(spec)

    @hookimpl
    def register_resources(
        self, register: Callable[[ResourceSpec | ResourceTemplateSpec], None]
    ) -> None:
        for spec in self.resources:
            register(spec)

    @hookimpl
    def register_health_checks(
        self, register: Callable[[HealthCheck], None], plugin: PluginContext[Any]
    ) -> None:
        for check in self._checks:
            register(check.bind(plugin))


def _doc(fn: Callable[..., Any]) -> str | None:
    doc = inspect.getdoc(fn) or ""
    first = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    return " ".join(line.strip() for line in first.splitlines()).strip() or None


def _reader(fn: ReaderFunction, what: str, variables: set[str]) -> TemplateReader:
    """``fn`` as a template's reader: called with the variables it names and the context.
    ``RegistrationError`` when its parameters are not the variables (and the context)."""
    if not inspect.iscoroutinefunction(fn):
        raise RegistrationError(
            f"{what}: {getattr(fn, '__name__', fn)!r} must be an async function"
        )
    params = inspect.signature(fn).parameters
    context = next(
        (n for n, p in params.items() if n == "ctx" or "ResourceContext" in str(p.annotation)),
        None,
    )
    named = [n for n in params if n != context]
    if set(named) != variables:
        want = ", ".join(sorted(variables)) or "none"
        raise RegistrationError(
            f"{what}: the parameters of {fn.__name__!r} must be the template's variables "
            f"({want}) and, if it wants it, the context"
        )

    async def read(found: Mapping[str, str], ctx: ResourceContext[Any]) -> ResourceBody:
        kwargs: dict[str, Any] = {n: found.get(n, "") for n in named}
        if context is not None:
            kwargs[context] = ctx
        return await fn(**kwargs)

    return read
