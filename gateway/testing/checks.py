"""The kit's checks are awaitables: ``await`` one in an async test, hand it to
:func:`run_check` in a sync one. A check that is neither never runs, so the test that made it
fails (through :func:`pytest_runtest_call`) instead of passing without having checked anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

import anyio
import pytest

T = TypeVar("T")

#: What the checks made and dropped without running them were (read after each test).
_NEVER_RUN: list[str] = []


class Check(Generic[T]):
    """One check, not started yet: it runs when awaited (once)."""

    def __init__(self, what: str, run: Callable[[], Awaitable[T]]) -> None:
        self._what = what
        self._run: Callable[[], Awaitable[T]] | None = run

    def __await__(self) -> Generator[Any, None, T]:
        run, self._run = self._run, None
        if run is None:
            raise RuntimeError(f"{self._what} was awaited twice; make a new check to run it again")
        return (yield from run().__await__())

    def __del__(self) -> None:
        if self._run is not None:
            _NEVER_RUN.append(self._what)

    def __repr__(self) -> str:
        return f"<check {self._what}{' (not run)' if self._run is not None else ''}>"


def run_check(check: Check[T]) -> T:
    """Run a check to its end from a sync test (on an event loop of its own) and return what
    it returns: ``run_check(assert_plugin_conforms("notes", cwd=tmp_path))``."""

    async def main() -> T:
        return await check

    return anyio.run(main)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    del _NEVER_RUN[:]
    outcome = yield
    never_run, _NEVER_RUN[:] = list(_NEVER_RUN), []
    if never_run:
        pytest.fail(
            f"{never_run[0]} was never run: `await` it in an async test "
            "(@pytest.mark.anyio), or call run_check(...) on it in a sync test",
            pytrace=False,
        )
    return outcome
