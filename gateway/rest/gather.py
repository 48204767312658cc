"""Run several backend calls at once and keep the error a model can act on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from ..errors import GatewayError

T = TypeVar("T")


async def gather(calls: list[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run ``calls`` concurrently (a client's limiter bounds the requests) and return their
    results in order. When some fail, the first deliberate :class:`GatewayError` is raised (not
    an exception group, which the core could only report as ``INTERNAL_ERROR``), else the first
    other exception."""
    if len(calls) == 1:
        return [await calls[0]()]
    results: list[Any] = [None] * len(calls)

    async def run(i: int, call: Callable[[], Awaitable[T]]) -> None:
        results[i] = await call()

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
    return results


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
