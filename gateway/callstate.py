"""What the pipeline learns about one running call from the code it runs.

The pipeline sets :data:`CURRENT_CALL` around a handler; code deeper down (the REST client)
records what it was doing when the call was cut off, so a tool timeout that interrupted a
backend request counts for that backend's breaker. Nothing here imports the rest of the core.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class CallState:
    """What the pipeline learns about one running call from the code it runs."""

    cancelled_waiting_on: str | None = None


CURRENT_CALL: ContextVar[CallState | None] = ContextVar("gateway_current_call", default=None)


def note_cancelled_waiting(backend: str) -> None:
    """The running call was cancelled while waiting for ``backend`` to answer: if that was the
    tool's timeout, the backend did not answer in time (it counts for its breaker)."""
    state = CURRENT_CALL.get()
    if state is not None:
        state.cancelled_waiting_on = backend
