"""Creating the page index of the configured jobs database in the background.

A database written by the previous pipeline has no page index, so every page sorts all new jobs
(about a second per page at a million jobs). When the deployment may write, the plugin creates
the index itself, once, shortly after the server started: never during start-up (``initialize``
and ``tools/list`` answer at once) and never inside a tool call. Reads go on meanwhile (they are
slower until the index is committed); writes wait for the build's lock and fail retryable when
it lasts longer than their busy timeout. The health check shows the progress.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from pathlib import Path

import anyio

from .table import IndexProgress

#: Seconds between the server's start and the build: start-up and the first calls come first,
#: and short-lived commands (``mcp-gateway health``, ``call``) end before anything is written.
START_DELAY_S = 3.0


class IndexState(enum.StrEnum):
    WAITING = "waiting"
    BUILDING = "building"
    DONE = "done"  # created by this process
    PRESENT = "present"  # was already there
    NO_DATABASE = "no database"
    FAILED = "failed"
    STOPPED = "stopped"


class BackgroundIndex:
    """One background creation of the page index on ``path`` (shown to people as ``shown``)."""

    def __init__(
        self, path: Path, shown: str, logger: logging.Logger, *, delay: float | None = None
    ) -> None:
        self.path = path
        self.shown = shown
        self.logger = logger
        self.delay = START_DELAY_S if delay is None else delay
        self.state = IndexState.WAITING
        self.reason: str | None = None
        self.progress = IndexProgress()
        self.took: float | None = None
        self._scope = anyio.CancelScope()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Schedule the work on the running event loop and return at once."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Cancel the work (an index being created is interrupted and rolled back) and wait."""
        self._scope.cancel()
        if self._task is not None:
            with anyio.CancelScope(shield=True):
                await asyncio.wait([self._task])

    @property
    def building(self) -> bool:
        return self.state is IndexState.BUILDING

    async def wait(self) -> IndexState:
        """Until the work has finished one way or another (tests, benchmarks)."""
        if self._task is not None:
            await asyncio.wait([self._task])
        return self.state

    async def _run(self) -> None:
        with self._scope:
            await anyio.sleep(self.delay)  # raises only when cancelled: the scope's to catch
            from . import store  # after the delay: the start that made this builder skips it

            try:
                await self._work()
            except store.StoreError as exc:
                self.state, self.reason = IndexState.FAILED, exc.reason
                self.logger.warning(
                    "page index on %s not created: %s; run: python -m gateway_queue "
                    "ensure-indexes --db %s",
                    self.shown,
                    exc.reason,
                    self.shown,
                )
            except Exception as exc:  # never let a background task die silently
                self.state, self.reason = IndexState.FAILED, type(exc).__name__
                self.logger.exception("page index on %s not created", self.shown)
        if self._scope.cancelled_caught and self.state in (
            IndexState.WAITING,
            IndexState.BUILDING,
        ):
            self.state = IndexState.STOPPED

    async def _work(self) -> None:
        from . import store  # imported by _run already

        if not self.path.is_file():
            self.state = IndexState.NO_DATABASE  # the first scrape creates it, indexed
            return
        try:
            async with store.connect_reader(self.path) as conn:
                present = await store.has_page_index(conn)
        except FileNotFoundError:
            self.state = IndexState.NO_DATABASE
            return
        if present:
            self.state = IndexState.PRESENT
            return
        self.state = IndexState.BUILDING
        started = time.monotonic()
        self.logger.info(
            "creating the page index %s on %s in the background; reads keep working meanwhile",
            store.PAGE_INDEX_NAME,
            self.shown,
        )
        created = await store.create_page_index(self.path, progress=self.progress)
        self.took = time.monotonic() - started
        self.state = IndexState.DONE if created else IndexState.PRESENT
        self.logger.info(
            "page index on %s %s in %.1f s (%d rows)",
            self.shown,
            "created" if created else "was created by another writer",
            self.took,
            self.progress.rows,
        )

    def progress_text(self) -> str:
        """``about 40 % after 12 s``."""
        fraction = self.progress.fraction()
        share = f"about {fraction:.0%} " if fraction is not None else ""
        return f"{share}after {self.progress.elapsed():.0f} s"

    def describe(self) -> str:
        """A sentence for the health detail while the index is missing."""
        if self.state is IndexState.BUILDING:
            return (
                f"page index being created in the background: {self.progress_text()}; "
                "reads work meanwhile, slower until it is done"
            )
        if self.state is IndexState.WAITING:
            return (
                "page index missing; the gateway creates it in the background a few seconds "
                "after it starts serving (reads work meanwhile, slower until it is done)"
            )
        if self.state is IndexState.FAILED:
            return (
                f"page index missing: creating it failed ({self.reason}); run: python -m "
                f"gateway_queue ensure-indexes --db {self.shown}"
            )
        return (
            "page index missing, so pages are slower; run: python -m gateway_queue "
            f"ensure-indexes --db {self.shown}"
        )
