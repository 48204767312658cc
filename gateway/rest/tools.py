"""The REST dialect: a :class:`RestTool` is a :class:`~gateway.ToolSpec` bound to a backend.

The tools of one backend are declared through a :class:`RestTools` (the backend named once per
module) as typed async functions, like :func:`gateway.tool` declares any tool; ``ctx`` is a
:class:`RestContext`, which sends routes and validates answers into typed models
(``await ctx.fetch(ROUTE, Model)`` sends the call's arguments)::

    api = RestTools(COCKPIT)
    JOB = Route("GET", "/api/jobs/{job_id}", what="job {job_id}", status={404: NO_JOB})


    @api.read
    async def get_job(job_id: JobId, *, ctx: RestContext[Any]) -> Job:
        \"\"\"One job: statuses, config, assigned agent, context.\"\"\"
        return await ctx.fetch(JOB, Job)

``@api.mutation(Mutation(...))`` declares a mutation the same way. With ``input_model=`` (and
``name=``, ``description=``), ``read`` and ``mutation`` declare a tool of a model of its own
that is one ``route=`` (its answer passed through ``shape(data, args)`` if given) or a ``run=``
function, as ``RestTool(...)`` itself does. Either way the backend's breaker and configuration
gate the tool, it is marked open-world, and an answer of an unexpected shape is a
``BACKEND_ERROR`` naming the field, never an ``INTERNAL_ERROR``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio
import anyio.to_thread
from pydantic import BaseModel

from ..backends import BackendHub
from ..configkit import closest
from ..errors import FAILURE_FIELDS, ErrorCode, GatewayError
from ..spec import (
    ArgsT,
    AsyncFunction,
    Mutation,
    RegistrationError,
    SettingsT,
    Tier,
    ToolContext,
    ToolHandler,
    ToolSpec,
    declare,
)
from .backend import RestBackend
from .route import Route
from .shapes import validate_answer

if TYPE_CHECKING:
    from .client import Answer, RestClient

# Run several backend calls at once and keep the error a model can act on.

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")


@overload
async def gather(
    calls: tuple[Callable[[], Awaitable[A]], Callable[[], Awaitable[B]]],
) -> tuple[A, B]: ...
@overload
async def gather(calls: list[Callable[[], Awaitable[T]]]) -> list[T]: ...
async def gather(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any] | tuple[Any, ...]:
    """Run ``calls`` concurrently (a client's limiter bounds the requests) and return their
    results in order: a list, or a tuple for a pair of calls of different kinds. When some
    fail, the first deliberate :class:`GatewayError` is raised (not an exception group, which
    the core could only report as ``INTERNAL_ERROR``), else the first other exception."""
    results: list[Any] = [None] * len(calls)

    async def run(i: int, call: Callable[[], Awaitable[Any]]) -> None:
        results[i] = await call()

    if len(calls) == 1:
        await run(0, calls[0])
    else:
        try:
            async with anyio.create_task_group() as tg:
                for i, call in enumerate(calls):
                    tg.start_soon(run, i, call)
        except BaseExceptionGroup as group:
            leaves = _leaves(group)
            for kind in (GatewayError, Exception):
                chosen = next((e for e in leaves if isinstance(e, kind)), None)
                if chosen is not None:
                    raise chosen from None
            raise
    return tuple(results) if isinstance(calls, tuple) else results


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


M = TypeVar("M", bound=BaseModel)


@dataclass(kw_only=True)
class RestContext(ToolContext[SettingsT]):
    """What a REST tool's ``run`` function gets: the :class:`~gateway.ToolContext` of the call
    (settings, progress, logger, ``sanitize``, ``run_sync``), its backend's client, and the
    call's valid ``arguments``, which :meth:`send` and :meth:`fetch` send when given no values."""

    backend: RestBackend
    arguments: BaseModel | None = None

    @classmethod
    def of(
        cls,
        ctx: ToolContext[SettingsT],
        backend: RestBackend,
        arguments: BaseModel | None = None,
    ) -> RestContext[SettingsT]:
        return cls(
            plugin=ctx.plugin,
            tool=ctx.tool,
            correlation_id=ctx.correlation_id,
            _progress=ctx._progress,
            inputs=ctx.inputs,
            _log=ctx._log,
            backend=backend,
            arguments=arguments,
        )

    @property
    def client(self) -> RestClient:
        """The backend's shared keep-alive client (opened on first use); ``BACKEND_UNAVAILABLE``
        naming the setting when the backend is not configured."""
        hub = self.plugin.backends
        if not isinstance(hub, BackendHub):
            raise GatewayError(ErrorCode.INTERNAL_ERROR, "REST backends are not available here")
        client: RestClient = hub.client(self.backend)
        return client

    async def send(self, route: Route, values: BaseModel | Mapping[str, Any] | None = None) -> Any:
        """Send ``route`` with ``values`` (a model or a mapping; the call's arguments when
        omitted) and return the JSON."""
        return await route.send(self.client, self._values(values))

    async def fetch(
        self, route: Route, model: type[M], values: BaseModel | Mapping[str, Any] | None = None
    ) -> M:
        """Send ``route`` with ``values`` (the call's arguments when omitted) and return the
        answer as ``model``."""
        values = self._values(values)
        answer = await route.request(self.client, values)
        what = route.describe(dict(values))
        return await _off_loop_if_large(
            answer,
            lambda: validate_answer(model, answer.data, self.backend.title, what, size=answer.size),
        )

    def _values(
        self, values: BaseModel | Mapping[str, Any] | None
    ) -> BaseModel | Mapping[str, Any]:
        if values is not None:
            return values
        if self.arguments is None:
            raise TypeError("no values to send: this context has no call's arguments")
        return self.arguments

    def validate(self, model: type[M], data: Any, what: str) -> M:
        """``data`` (an answer, perhaps reshaped) as ``model``: a ``BACKEND_ERROR`` naming the
        field and ``what`` was asked for when it does not fit."""
        return validate_answer(model, data, self.backend.title, what)


#: What ``run=`` takes: ``async def run(args: InputModel, ctx: RestContext) -> OutputModel``.
RestRun = Callable[[ArgsT, RestContext[Any]], Awaitable[object]]


async def _built_later(args: Any, ctx: ToolContext[Any]) -> object:
    raise AssertionError("RestTool.__post_init__ replaces this handler")


@dataclass(frozen=True, kw_only=True)
class RestTool(ToolSpec[ArgsT]):
    """A tool of a REST backend: exactly one of ``route`` (the tool is that call, its answer
    passed through ``shape(data, args)`` and validated into ``output_model``) or ``run`` (an
    async function of the arguments and a :class:`RestContext`). See the module docstring."""

    backend: RestBackend
    handler: ToolHandler[ArgsT] = _built_later
    route: Route | None = None
    shape: Callable[[Any, ArgsT], Any] | None = field(default=None, compare=False)
    run: RestRun[ArgsT] | None = field(default=None, compare=False)
    open_world: bool = True

    def __post_init__(self) -> None:
        if self.handler is not _built_later:
            return  # a handler of its own (the test kit swaps handlers in)
        if self.run is not None and self.route is None:
            handler = _running(self, self.run)
        elif self.route is not None and self.run is None:
            _check_templates(self.name, self.route, self.input_model)
            handler = _sending(self, self.route)
        else:
            raise TypeError(f"RestTool {self.name!r}: give either route= or run=")
        handler.__name__ = handler.__qualname__ = self.name
        object.__setattr__(self, "handler", handler)


def _check_templates(name: str, route: Route, model: type[BaseModel]) -> None:
    """A status template naming what nothing fills would reach the model as ``{quantiy}``."""
    fields = getattr(model, "model_fields", {})
    unfilled = route.unfilled(fields)
    if not unfilled:
        return
    code, placeholder = unfilled[0]
    known = [*FAILURE_FIELDS, *fields]
    raise TypeError(
        f"RestTool {name!r}: the status {code} message names {{{placeholder}}}, which neither "
        f"the failure nor an argument fills (known: {', '.join(known)})"
        + closest(placeholder, known, template="{{{}}}")
    )


def _running(tool: RestTool[ArgsT], run: RestRun[ArgsT]) -> ToolHandler[ArgsT]:
    async def handler(args: ArgsT, ctx: ToolContext[Any]) -> object:
        return await run(args, RestContext.of(ctx, tool.backend, args))

    return handler


def _sending(tool: RestTool[ArgsT], route: Route) -> ToolHandler[ArgsT]:
    title = tool.backend.title
    model = tool.output_model

    async def handler(args: ArgsT, ctx: ToolContext[Any]) -> object:
        answer = await route.request(RestContext.of(ctx, tool.backend).client, args)

        def finish() -> object:
            data = answer.data if tool.shape is None else tool.shape(answer.data, args)
            if model is None or isinstance(data, model):
                return data
            return validate_answer(model, data, title, route.describe(dict(args)), size=answer.size)

        return await _off_loop_if_large(answer, finish)

    return handler


async def _off_loop_if_large(answer: Answer, work: Callable[[], T]) -> T:
    """``work()`` on a large answer runs in a worker thread, abandoned when the tool's timeout
    cuts the call off, so the timeout holds and the event loop serves other calls meanwhile."""
    if not answer.large:
        return work()
    return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)


#: What ``shape=`` takes: ``shape(data, args)``, the API's JSON reshaped before validation.
Shape = Callable[[Any, ArgsT], Any]


class RestTools:
    """The tools of one backend: :meth:`read` and :meth:`mutation` declare them, bound to it.
    Iterating gives them in the order declared, so a plugin takes them with
    ``Plugin(tools=api)`` (or ``tools=(*jobs.api, *workspace.api)`` for several modules)."""

    def __init__(self, backend: RestBackend) -> None:
        self.backend = backend
        self._tools: list[RestTool[Any]] = []

    def __iter__(self) -> Iterator[RestTool[Any]]:
        return iter(tuple(self._tools))

    def __len__(self) -> int:
        return len(self._tools)

    @overload
    def read(self, fn: AsyncFunction, /) -> RestTool[Any]: ...

    @overload
    def read(
        self,
        /,
        *,
        name: str,
        description: str,
        input_model: type[ArgsT],
        output_model: type[BaseModel] | None = None,
        route: Route | None = None,
        run: RestRun[ArgsT] | None = None,
        shape: Shape[ArgsT] | None = None,
        title: str | None = None,
        timeout: float | None = None,
        max_result_chars: int | None = None,
    ) -> RestTool[ArgsT]: ...

    @overload
    def read(
        self,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        timeout: float | None = None,
        max_result_chars: int | None = None,
    ) -> Callable[[AsyncFunction], RestTool[Any]]: ...

    def read(
        self,
        fn: AsyncFunction | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        input_model: type[Any] | None = None,
        output_model: type[BaseModel] | None = None,
        route: Route | None = None,
        run: RestRun[Any] | None = None,
        shape: Shape[Any] | None = None,
        title: str | None = None,
        timeout: float | None = None,
        max_result_chars: int | None = None,
    ) -> RestTool[Any] | Callable[[AsyncFunction], RestTool[Any]]:
        """A read tool of this backend. Decorating a typed async function (as
        :func:`gateway.tool`; its ``ctx`` is a :class:`RestContext`), or, with ``input_model=``,
        ``name=`` and ``description=``, a tool of a model of its own that is one ``route=`` or
        a ``run=`` function. The other keywords are :class:`RestTool`'s."""
        return self._declare(
            Tier.READ,
            None,
            fn,
            name=name,
            description=description,
            input_model=input_model,
            output_model=output_model,
            route=route,
            run=run,
            shape=shape,
            title=title,
            timeout=timeout,
            max_result_chars=max_result_chars,
        )

    @overload
    def mutation(
        self,
        mutation: Mutation,
        /,
        *,
        name: str,
        description: str,
        input_model: type[ArgsT],
        output_model: type[BaseModel] | None = None,
        route: Route | None = None,
        run: RestRun[ArgsT] | None = None,
        shape: Shape[ArgsT] | None = None,
        title: str | None = None,
        timeout: float | None = None,
        max_result_chars: int | None = None,
    ) -> RestTool[ArgsT]: ...

    @overload
    def mutation(
        self,
        mutation: Mutation,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        timeout: float | None = None,
        max_result_chars: int | None = None,
    ) -> Callable[[AsyncFunction], RestTool[Any]]: ...

    def mutation(
        self,
        mutation: Mutation | None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        input_model: type[Any] | None = None,
        output_model: type[BaseModel] | None = None,
        route: Route | None = None,
        run: RestRun[Any] | None = None,
        shape: Shape[Any] | None = None,
        title: str | None = None,
        timeout: float | None = None,
        max_result_chars: int | None = None,
    ) -> RestTool[Any] | Callable[[AsyncFunction], RestTool[Any]]:
        """A mutation of this backend, declared as :meth:`read` declares a read tool, with what
        it changes first: ``@api.mutation(Mutation(...))``. Without its
        :class:`~gateway.Mutation` the tool is refused when it is registered."""
        fn: AsyncFunction | None = None
        if callable(mutation) and not isinstance(mutation, Mutation):
            fn, mutation = mutation, None  # a bare @api.mutation: refused at registration
        return self._declare(
            Tier.MUTATION,
            mutation,
            fn,
            name=name,
            description=description,
            input_model=input_model,
            output_model=output_model,
            route=route,
            run=run,
            shape=shape,
            title=title,
            timeout=timeout,
            max_result_chars=max_result_chars,
        )

    def _declare(
        self,
        tier: Tier,
        mutation: Mutation | None,
        fn: AsyncFunction | None,
        *,
        name: str | None,
        description: str | None,
        input_model: type[Any] | None,
        output_model: type[BaseModel] | None,
        route: Route | None,
        run: RestRun[Any] | None,
        shape: Shape[Any] | None,
        title: str | None,
        timeout: float | None,
        max_result_chars: int | None,
    ) -> RestTool[Any] | Callable[[AsyncFunction], RestTool[Any]]:
        common: dict[str, Any] = {
            "tier": tier,
            "mutation": mutation,
            "title": title,
            "timeout": timeout,
            "max_result_chars": max_result_chars,
        }
        if input_model is not None:
            if name is None or description is None:
                raise RegistrationError(
                    f"a tool of input_model={input_model.__name__} needs name= and description="
                )
            return self._add(
                name=name,
                description=description,
                input_model=input_model,
                output_model=output_model,
                route=route,
                run=run,
                shape=shape,
                **common,
            )
        if route is not None or run is not None or shape is not None:
            raise RegistrationError(
                "route=, run= and shape= declare a tool of an input_model=; a decorated "
                "function is the tool (it sends a route with await ctx.fetch(route, Model))"
            )

        def decorate(fn: AsyncFunction) -> RestTool[Any]:
            declared = declare(fn, name=name, description=description)
            return self._add(
                name=declared.name,
                description=declared.description,
                input_model=declared.input_model,
                output_model=declared.output_model,
                run=_run_of(declared.call),
                function=fn,
                **common,
            )

        return decorate if fn is None else decorate(fn)

    def _add(self, **fields: Any) -> RestTool[Any]:
        tool: RestTool[Any] = RestTool(backend=self.backend, **fields)
        self._tools.append(tool)
        return tool


def _run_of(call: Callable[[BaseModel, Any], Any]) -> RestRun[Any]:
    async def run(args: Any, ctx: RestContext[Any]) -> object:
        return await call(args, ctx)

    return run
