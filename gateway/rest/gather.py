"""Run several backend calls at once and keep the error a model can act on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, overload

import anyio

from ..errors import GatewayError

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
