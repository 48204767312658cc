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
after this line count too; prompts with ``prompts=`` or ``@plugin.prompt``. A plugin with more
hooks (resources to open and close) subclasses :class:`Plugin` and adds them as methods with
``@hookimpl``; an entry point may also name a module that binds the hooks it uses
(``register_tools = plugin.register_tools``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, overload

from pydantic import BaseModel

from .hookspecs import hookimpl
from .prompts import PromptContext, PromptSpec
from .spec import (
    AsyncFunction,
    Backend,
    HealthCheck,
    Mutation,
    PluginContext,
    Tier,
    ToolSpec,
    declare,
    tool,
)

#: A health check: ``async def name() -> str | None``, or one taking the plugin's context.
CheckFunction = Callable[..., Awaitable[str | None]]
#: A prompt's render function: its parameters are the prompt's arguments (see :meth:`Plugin.prompt`).
PromptFunction = Callable[..., str | Awaitable[str]]


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
    ) -> None:
        self.settings = settings
        # An iterator is read once, here; any other iterable each time the plugin registers.
        self._given_tools = tuple(tools) if isinstance(tools, Iterator) else tools
        self._given_prompts = tuple(prompts) if isinstance(prompts, Iterator) else prompts
        self._tools: list[ToolSpec[Any]] = []
        self._prompts: list[PromptSpec] = []
        self._checks: list[_Check] = []

    @property
    def tools(self) -> tuple[ToolSpec[Any], ...]:
        return (*self._given_tools, *self._tools)

    @property
    def prompts(self) -> tuple[PromptSpec, ...]:
        return (*self._given_prompts, *self._prompts)

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
    ) -> PromptSpec | Callable[[PromptFunction], PromptSpec]:
        """Declare a prompt the way :meth:`tool` declares a tool: the parameters but the context
        (annotated ``PromptContext``, or named ``ctx``) are its arguments, the docstring's first
        paragraph its description; the function (may be async) returns the text. The keywords
        are :class:`~gateway.PromptSpec`'s."""

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
            )
            self._prompts.append(spec)
            return spec

        return decorate if fn is None else decorate(fn)

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
    def register_health_checks(
        self, register: Callable[[HealthCheck], None], plugin: PluginContext[Any]
    ) -> None:
        for check in self._checks:
            register(check.bind(plugin))
