"""Catch a handler that blocks the event loop, and say where it blocks.

A handler runs in the server's event loop: while it calls ``time.sleep()``, a blocking client
or a long computation without awaiting, every other call, progress notification and health
check waits, and no timeout can fire. :class:`LoopWatch` measures that: a heartbeat task in the
loop notes the time every few milliseconds; the longest gap between two beats is the longest
the loop was blocked. A watcher thread samples the loop thread's stack once a gap passes the
limit, so the report names the line that blocks.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from pathlib import Path
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

_BEAT = 0.01  # seconds between heartbeats
_LOOK = 0.02  # seconds between the watcher's looks


class LoopWatch:
    """``async with LoopWatch(limit, prefer=folder) as watch: ...`` then ``watch.longest``
    (seconds) and ``watch.where`` (``"file.py:12 in fn"`` of the first stall over ``limit``,
    preferring frames under ``prefer``, the plugin's own code)."""

    def __init__(self, limit: float, *, prefer: Path | None = None) -> None:
        self.limit = limit
        self.prefer = prefer
        self.longest = 0.0
        self.where: str | None = None
        self._last = time.monotonic()
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._tg: TaskGroup | None = None
        self._watcher: threading.Thread | None = None

    async def _beat(self) -> None:
        while True:
            now = time.monotonic()
            self.longest = max(self.longest, now - self._last)
            self._last = now
            await anyio.sleep(_BEAT)

    def _watch(self) -> None:
        while not self._stop.wait(_LOOK):
            if self.where is None and time.monotonic() - self._last > self.limit:
                frame = sys._current_frames().get(self._loop_thread)
                if frame is not None:
                    self.where = self._describe(traceback.extract_stack(frame))

    def _describe(self, stack: traceback.StackSummary) -> str:
        frames = list(stack)
        if self.prefer is not None:
            own = [f for f in frames if Path(f.filename).is_relative_to(self.prefer)]
            frames = own or frames
        last = frames[-1]
        short = "/".join(Path(last.filename).parts[-2:])
        return f"{short}:{last.lineno} in {last.name}"

    async def __aenter__(self) -> LoopWatch:
        self._loop_thread = threading.get_ident()
        self._last = time.monotonic()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._beat)
        self._watcher = threading.Thread(target=self._watch, name="loop watch", daemon=True)
        self._watcher.start()
        await anyio.sleep(0)  # the first beat
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # A stall that lasted until the end has not been seen by a beat yet.
        self.longest = max(self.longest, time.monotonic() - self._last)
        self._stop.set()
        assert self._tg is not None and self._watcher is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(exc_type, exc, tb)
        self._watcher.join()
