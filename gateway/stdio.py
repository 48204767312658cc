"""Standard streams while plugins run: stdout carries only the protocol (or the CLI's output).

The SDK's ``stdio_server`` diverts fd 1 only while it serves, but plugins are imported and
their load-time hooks run before that: a ``print()`` at import time, or a C library writing to
fd 1, landed on the wire ahead of the first response. So the gateway takes the descriptors
itself before any plugin is imported: fd 1 points at stderr and fd 0 at the null device from
then on, and the protocol (or the CLI's own output) uses private duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError as ConcurrentCancelled
from dataclasses import dataclass
from typing import BinaryIO


def _dup_private(fd: int) -> int:
    """A duplicate above the standard range that child processes do not inherit."""
    if sys.platform != "win32":
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    return os.dup(fd)  # pragma: no cover - Windows


@dataclass
class Wire:
    """The real stdin and stdout, for the protocol only."""

    stdin: BinaryIO
    stdout: BinaryIO


@contextlib.contextmanager
def _diverted(fd: int, target: int) -> Iterator[int]:
    """Point ``fd`` at ``target`` and yield a private duplicate of what it was; restore after."""
    private = _dup_private(fd)
    os.dup2(target, fd)
    try:
        yield private
    finally:
        with contextlib.suppress(OSError):
            os.dup2(private, fd)
        with contextlib.suppress(OSError):
            os.close(private)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[BinaryIO]:
    """While inside, anything written to fd 1 or ``sys.stdout`` goes to stderr; yields the
    real stdout for the caller's own output."""
    sys.stdout.flush()
    with _diverted(1, 2) as private:
        out = os.fdopen(private, "wb", closefd=False)
        try:
            yield out
        finally:
            # Whatever a plugin left in sys.stdout's buffer goes to stderr, not to the caller.
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            with contextlib.suppress(OSError, ValueError):
                out.flush()


@contextlib.contextmanager
def protected_stdio() -> Iterator[Wire]:
    """For ``serve`` over stdio: fd 1 to stderr, fd 0 to the null device (a plugin reading
    stdin gets EOF instead of protocol bytes); the protocol gets the originals."""
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        with stdout_to_stderr() as out, _diverted(0, null) as private_in:
            yield Wire(os.fdopen(private_in, "rb", closefd=False), out)
    finally:
        os.close(null)


class StdinLines:
    """The protocol's input lines, read by a daemon thread.

    anyio's ``wrap_file`` reads in a worker thread that cancellation cannot interrupt and that
    interpreter exit waits for, so Ctrl-C never stopped a stdio server waiting for input. Here
    waiting for the next line is an ``await`` on a queue: cancellable, and exit does not wait
    for the reader. The queue is bounded, so a fast client still waits for the server.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._queue: asyncio.Queue[bytes | None] | None = None

    def _start(self) -> asyncio.Queue[bytes | None]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=8)

        def put(item: bytes | None) -> bool:
            try:
                asyncio.run_coroutine_threadsafe(queue.put(item), loop).result()
            except (RuntimeError, asyncio.CancelledError, ConcurrentCancelled):
                return False  # the loop is gone: the server is shutting down
            return True

        def pump() -> None:
            try:
                for line in iter(self._raw.readline, b""):
                    if not put(line):
                        return
            except (OSError, ValueError):
                pass
            put(None)

        threading.Thread(target=pump, name="mcp-gateway stdin", daemon=True).start()
        return queue

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        if self._queue is None:
            self._queue = self._start()
        line = await self._queue.get()
        if line is None:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")
