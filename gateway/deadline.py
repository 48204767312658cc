"""A time limit that also stops *blocking* plugin code at load time.

``anyio.fail_after`` only stops code that awaits; a hook that calls ``time.sleep()`` or a
blocking client never gives it the chance. Running hooks in a worker thread would stop the
wait but not the work, and what a hook creates must live where the server uses it: an
``httpx.AsyncClient`` or an aiosqlite connection from ``open_resources`` belongs to the
server's event loop, a ``sqlite3`` connection to its thread. So hooks keep running on the main
thread, in the server's loop, and a timer signal (``SIGALRM``) interrupts them there when they
overrun: the handler raises :class:`HookOverrun` into the hook's own frames.

The handler only raises while the guarded code is on the stack. An async hook that is merely
suspended (awaiting I/O) is left to ``anyio.fail_after``; raising then would hit the event loop
itself. Where signals cannot be used (not the main thread, no ``SIGALRM`` on Windows) the limit
is not enforced for blocking code, only for code that awaits.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

#: After raising once, raise again at this interval in case the hook swallowed it.
_AGAIN = 0.5
#: While the hook is suspended (awaiting), look again this often.
_POLL = 0.05


class HookOverrun(BaseException):
    """Raised into a hook that overran its limit. A ``BaseException`` so that a hook's own
    ``except Exception`` cannot swallow it."""


def enforceable() -> bool:
    """Can blocking code be interrupted here (POSIX, main thread)?"""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _on_stack(target: FrameType, frame: FrameType | None) -> bool:
    while frame is not None:
        if frame is target:
            return True
        frame = frame.f_back
    return False


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the code run inside this block (by the caller's frame) after ``seconds``.

    Use it around the call of a hook, in the function that calls it; in an ``async def`` the
    block's frame is the coroutine's, which is on the stack exactly while the hook runs.
    """
    if not enforceable() or seconds <= 0:
        yield
        return
    guarded = sys._getframe(2)  # the caller's frame (1 is contextmanager's __enter__)

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if _on_stack(guarded, frame):
            signal.setitimer(signal.ITIMER_REAL, _AGAIN)
            raise HookOverrun
        signal.setitimer(signal.ITIMER_REAL, _POLL)

    previous: Any = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
