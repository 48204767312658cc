"""How a serving process stops: only a real signal sent to the gateway ends it.

A plugin can raise ``KeyboardInterrupt`` or ``SystemExit`` anywhere, from a task of its own
too (asyncio re-raises those two out of the event loop), or call ``_thread.interrupt_main()``
from a thread. None of that is the user stopping the gateway, and Claude Code never restarts
a stdio server, so none of it may end the process.

Telling a real signal from a simulated one: ``interrupt_main()`` (``PyErr_SetInterruptEx``)
runs the Python-level handler of the signal, exactly as a delivered signal does, and even
writes to the wakeup fd asyncio's ``add_signal_handler`` reads, so no Python-level handler can
tell them apart. The kernel's delivery goes through the C-level handler first, and
:mod:`faulthandler` can hook that: ``faulthandler.register(sig, file, chain=True)`` dumps a
traceback into ``file`` (a private pipe here) and then calls the handler that was there
before. So a stop signal is real exactly when that pipe has bytes by the time the Python
handler runs. (Blocking the signals in every thread and ``sigwait``-ing for them would work
too, but every process a plugin starts would inherit them blocked.)

While serving, the handlers are asyncio's (``loop.add_signal_handler``): a real SIGINT,
SIGTERM or SIGHUP asks the server to stop (plugin resources are closed, exit status 0); a
second one ends the process at once. Before the loop runs (plugins are being imported), a
real signal raises :class:`Stopping`, which the loader lets through. From the moment
:func:`run` sets the loop up until the server's handlers take over, and again while it winds
down, a real signal is only noted (an exception there would tear the loop's own machinery,
e.g. leave a half-made task behind): the server stops as soon as it starts serving, and a
second signal ends the process at once. Where this is not available (Windows: no
``faulthandler.register``), Python's default handling stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import math
import os
import signal
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Any, TypeVar

import anyio

log = logging.getLogger("gateway.lifecycle")

T = TypeVar("T")
#: How long the tasks still running when the server has stopped get to finish.
SHUTDOWN_WAIT = 5.0
STOP_SIGNALS: tuple[int, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class Stopping(KeyboardInterrupt):
    """A real stop signal arrived while the gateway was starting."""


def is_cancellation(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(is_cancellation(e) for e in exc.exceptions)
    try:
        cancelled = anyio.get_cancelled_exc_class()
    except RuntimeError:  # no event loop (plugins are being imported): asyncio's, then
        cancelled = asyncio.CancelledError
    return isinstance(exc, cancelled)


def cancelled_from_outside() -> bool:
    """Is the running task being cancelled: an enclosing cancel scope (the client cancelled the
    request, the server is shutting down) or a plain asyncio ``Task.cancel()``?"""
    try:
        if anyio.current_effective_deadline() == -math.inf:
            return True
    except RuntimeError:  # no event loop: nothing cancels from outside
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio
        return False
    return task is not None and task.cancelling() > 0


def plugin_fault(exc: BaseException) -> bool:
    """Is ``exc``, raised by plugin code, the plugin's own failure? Not when it is a real stop
    of the gateway or a cancellation from outside, which must go on."""
    if isinstance(exc, Stopping):
        return False
    return not (is_cancellation(exc) and cancelled_from_outside())


class SignalGuard:
    """Installs the stop-signal handlers described above; use as a context manager around
    everything the serving process does (plugin import included)."""

    def __init__(self) -> None:
        self.enabled = bool(STOP_SIGNALS) and hasattr(faulthandler, "register")
        self.received: int | None = None
        self._marker: tuple[int, int] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_stop: Callable[[], None] | None = None
        self._previous: dict[int, Any] = {}
        self._noting = False  # the loop is being set up or wound down: note, do not raise

    # -- real or simulated ----------------------------------------------------------------
    def _real(self) -> bool:
        """Did the kernel deliver a stop signal since the last look (the marker has bytes)?"""
        if self._marker is None:
            return False
        seen = False
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._marker[0], 65536):
                seen = True
        return seen

    def _hook(self) -> None:
        assert self._marker is not None
        for sig in STOP_SIGNALS:
            faulthandler.register(sig, file=self._marker[1], all_threads=False, chain=True)

    def _unhook(self) -> None:
        for sig in STOP_SIGNALS:
            faulthandler.unregister(sig)

    # -- before the loop: a real signal raises Stopping -------------------------------------
    def _before_loop(self, signum: int, frame: FrameType | None) -> None:
        if not self._real():
            log.warning("ignored a simulated %s (a plugin called interrupt_main)", _name(signum))
            return
        if self._noting:
            self._note(signum)
            return
        self.received = signum
        raise Stopping(_name(signum))

    @contextlib.contextmanager
    def noting(self) -> Iterator[None]:
        """Around the event loop's whole life (see :func:`run`): a real signal outside
        :meth:`serving` is noted instead of raised; ``serving`` acts on it when it begins."""
        self._noting = True
        try:
            yield
        finally:
            self._noting = False

    def __enter__(self) -> SignalGuard:
        if not self.enabled:
            return self
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)  # the C handler must never wait on it
        self._marker = (read, write)
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._before_loop)
        self._hook()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._marker is None:
            return
        self._unhook()
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        for fd in self._marker:
            os.close(fd)
        self._marker = None

    # -- while serving: a real signal asks the server to stop -------------------------------
    @contextlib.contextmanager
    def serving(self, on_stop: Callable[[], None]) -> Iterator[None]:
        """While inside (on the event loop's thread), a real stop signal calls ``on_stop``."""
        if self._marker is None:
            yield
            return
        loop = asyncio.get_running_loop()
        self._on_stop = on_stop
        self._unhook()  # add_signal_handler replaces the C-level handler: hook in after it
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._while_serving, sig)
        self._hook()
        if self.received is not None:  # arrived between start-up and now
            loop.call_soon(on_stop)
        try:
            yield
        finally:
            self._unhook()
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)
                signal.signal(sig, self._before_loop)
            self._hook()
            self._on_stop = None

    def _while_serving(self, signum: int) -> None:
        if not self._real():
            log.warning("ignored a simulated %s (a plugin called interrupt_main)", _name(signum))
            return
        self._note(signum)
        if self._on_stop is not None:
            self._on_stop()

    def _note(self, signum: int) -> None:
        """A real stop signal: the first is remembered, a second ends the process now."""
        if self.received is not None:
            log.warning("second %s: stopping now, without waiting for plugins", _name(signum))
            logging.shutdown()
            os._exit(128 + signum)
        self.received = signum
        log.info("%s received: closing plugin resources, then stopping", _name(signum))


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# --- the event loop ----------------------------------------------------------------------------


def run(main: Callable[[], Coroutine[Any, Any, T]], guard: SignalGuard | None = None) -> T:
    """``asyncio.run(main())``, except that ``SystemExit`` or ``KeyboardInterrupt`` raised by a
    task or callback other than ``main`` (a plugin's background task, a ``call_soon``) is
    logged and the loop goes on: asyncio lets those two out of the loop, ending the process.
    With a ``guard``, a real stop signal while the loop is set up or wound down is noted for
    its :meth:`SignalGuard.serving`, which ``main`` enters first.
    """
    with guard.noting() if guard is not None else contextlib.nullcontext():
        return _run(main)


def _run(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(main())
        return _until_done(loop, task)
    finally:
        try:
            _cancel_all(loop)
            with contextlib.suppress(Exception):
                closing = asyncio.wait_for(loop.shutdown_asyncgens(), SHUTDOWN_WAIT)
                _until_done(loop, loop.create_task(closing))
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _until_done(loop: asyncio.AbstractEventLoop, task: asyncio.Task[T]) -> T:
    while True:
        try:
            return loop.run_until_complete(task)
        except (SystemExit, KeyboardInterrupt) as exc:
            if task.done():  # it is the awaited task's own outcome
                raise
            log.error(
                "background code raised %s outside any call; the gateway goes on (a plugin's "
                "task or callback: it ended, nothing else did)",
                type(exc).__name__,
            )


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left (a plugin's own tasks) and give it ``SHUTDOWN_WAIT`` seconds: a
    task that ignores its cancellation must not keep the process from ending."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not pending:
        return
    for t in pending:
        t.cancel()
    with contextlib.suppress(Exception):
        _until_done(loop, loop.create_task(_settle(pending)))


async def _settle(tasks: list[asyncio.Task[Any]]) -> None:
    done, left = await asyncio.wait(tasks, timeout=SHUTDOWN_WAIT)
    for t in done:
        if not t.cancelled() and t.exception() is not None:
            log.warning(
                "a task ended with %s while the gateway stopped", type(t.exception()).__name__
            )
    if left:
        log.warning("%d task(s) did not stop within %g s; leaving them", len(left), SHUTDOWN_WAIT)
