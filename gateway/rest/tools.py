"""The REST dialect: a :class:`RestTool` is a :class:`~gateway.ToolSpec` bound to a backend.

A tool that is one HTTP call declares its ``route``; the answer (through ``shape(data, args)``
if given) is validated into the output model::

    GET_JOB = RestTool(
        name="get_job",
        description="One job: statuses, config, assigned agent, context.",
        input_model=JobArgs,
        output_model=Job,
        tier=Tier.READ,
        backend=COCKPIT,
        route=Route("GET", "/api/jobs/{job_id}", what="job {job_id}", status={404: NO_JOB}),
    )

A tool that needs more is the same declaration with ``run=`` instead of ``route=``: an async
function of the validated arguments and a :class:`RestContext`, which sends routes and
validates answers into typed models (``await ctx.fetch(ROUTE, Model, args)``). Either way the
backend's breaker and configuration gate the tool, it is marked open-world, and an answer of
an unexpected shape is a ``BACKEND_ERROR`` naming the field, never an ``INTERNAL_ERROR``.
Everything :class:`~gateway.ToolSpec` takes (``tier``, which has no default, ``mutation``,
``title``, ``timeout``, ``max_result_chars``) is taken the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
from pydantic import BaseModel

from ..configfile import closest
from ..errors import ErrorCode, GatewayError
from ..spec import ArgsT, SettingsT, ToolContext, ToolHandler, ToolSpec
from .backend import RestBackend
from .hub import BackendHub
from .route import Route
from .status import FAILURE_FIELDS
from .validation import validate_answer

if TYPE_CHECKING:
    from .client import Answer, RestClient

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


@dataclass(kw_only=True)
class RestContext(ToolContext[SettingsT]):
    """What a REST tool's ``run`` function gets: the :class:`~gateway.ToolContext` of the call
    (settings, progress, logger, ``sanitize``, ``run_sync``) and its backend's client."""

    backend: RestBackend

    @classmethod
    def of(cls, ctx: ToolContext[SettingsT], backend: RestBackend) -> RestContext[SettingsT]:
        return cls(
            plugin=ctx.plugin,
            tool=ctx.tool,
            correlation_id=ctx.correlation_id,
            _progress=ctx._progress,
            backend=backend,
        )

    @property
    def client(self) -> RestClient:
        """The backend's shared keep-alive client (opened on first use); ``BACKEND_UNAVAILABLE``
        naming the setting when the backend is not configured."""
        hub = self.plugin.backends
        if not isinstance(hub, BackendHub):
            raise GatewayError(ErrorCode.INTERNAL_ERROR, "REST backends are not available here")
        return hub.client(self.backend)

    async def send(self, route: Route, values: BaseModel | Mapping[str, Any]) -> Any:
        """Send ``route`` with ``values`` (the arguments, or a mapping) and return the JSON."""
        return await route.send(self.client, values)

    async def fetch(self, route: Route, model: type[M], values: BaseModel | Mapping[str, Any]) -> M:
        """Send ``route`` with ``values`` and return the answer as ``model``."""
        answer = await route.request(self.client, values)
        what = route.describe(dict(values))
        return await _off_loop_if_large(
            answer,
            lambda: validate_answer(model, answer.data, self.backend.title, what, size=answer.size),
        )

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
        return await run(args, RestContext.of(ctx, tool.backend))

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
