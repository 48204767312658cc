"""A plugin declared as one object: its settings, tools, prompts and health checks.

Most plugins' hooks only hand the core what the plugin declared. A :class:`Plugin` is those
hooks, written once; the entry point names the object (``notes = "gateway_notes.plugin:plugin"``)
and the core registers it with pluggy like a module::

    plugin = Plugin(settings=Settings)


    @plugin.tool(tier=Tier.READ)
    async def notes_search(query: str = "", *, ctx: ToolContext[Settings]) -> SearchResult:
        \"\"\"Find notes whose text contains a substring.\"\"\"
        ...

Tools declared elsewhere join with ``tools=`` (specs, or the tools of a
:class:`~gateway.rest.RestTools`), read each time the plugin is registered, so tools declared
after this line count too; prompts with ``prompts=`` or ``@plugin.prompt``; resources with
``resources=``, ``@plugin.resource`` or ``@plugin.resource_template``. A plugin with more
hooks (resources to open and close) subclasses :class:`Plugin` and adds them as methods with
``@hookimpl``; an entry point may also name a module that binds the hooks it uses
(``register_tools = plugin.register_tools``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, overload

from pydantic import BaseModel

from .hookspecs import hookimpl
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
    Tier,
    ToolSpec,
    declare,
    tool,
)

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
