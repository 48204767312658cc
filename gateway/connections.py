"""HTTP connections that cannot lock authorised clients out (slowloris).

uvicorn has a keep-alive timeout and ``limit_concurrency``, but no limit on how long a request
may take to arrive and no limit on open connections: ``limit_concurrency`` only answers 503 once
a request is complete, so half-sent requests never meet it. 300 of them held every file
descriptor of a server with 256, accept() then failed in a loop, and no client got in.

:class:`GuardedH11Protocol` is uvicorn's h11 protocol with two additions:

- a request (headers and body) must arrive within ``REQUEST_TIMEOUT`` seconds of its first
  byte (of the connection, for the first request), else the connection is closed;
- at most ``max_connections()`` connections are open (below the descriptor limit, so accept()
  keeps working). A new connection over the limit evicts the oldest connection that is not
  being answered (a request still arriving, or idle keep-alive); when every connection is
  being answered, the new one is closed. So a client that sends its request promptly always
  gets in, however many half-sent requests are open.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("gateway.http")

REQUEST_TIMEOUT = 10.0
MAX_CONNECTIONS = 200
#: Descriptors kept free for everything else: plugin files and sockets, the log, the loop.
FD_RESERVE = 64


def max_connections() -> int:
    """``MAX_CONNECTIONS``, or fewer when the process may open fewer descriptors."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return MAX_CONNECTIONS
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft - FD_RESERVE))


class GuardedH11Protocol(H11Protocol):
    limit = max_connections()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opened = time.monotonic()
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limit and not self._evict_one():
            log.warning("refused a connection: %d connections are being answered", self.limit)
            transport.close()
            return
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.transport is not None:
            super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self._idle():
            self._arm()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY:
            self._disarm()  # the request is complete (or the connection is closing)

    # -- request deadline ---------------------------------------------------------------------
    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(REQUEST_TIMEOUT, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            log.warning(
                "closed a connection whose request did not arrive within %g s", REQUEST_TIMEOUT
            )
            self.transport.close()

    # -- connection limit -----------------------------------------------------------------
    def _idle(self) -> bool:
        """Is nothing being answered on this connection (a request still arriving, or none)?"""
        return self.cycle is None or self.cycle.response_complete

    def _evict_one(self) -> bool:
        candidates = [
            c
            for c in self.connections
            if isinstance(c, GuardedH11Protocol)
            and c._idle()
            and c.transport is not None
            and not c.transport.is_closing()
        ]
        if not candidates:
            return False
        oldest = min(candidates, key=lambda c: c.opened)
        log.warning(
            "connection limit (%d) reached: closed the oldest connection not being answered",
            self.limit,
        )
        oldest.transport.close()
        self.connections.discard(oldest)
        return True
