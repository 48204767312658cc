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
import json
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import CancelledError as ConcurrentCancelled
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from .errors import encodable_data

if TYPE_CHECKING:  # the SDK only where the protocol is served: the CLI's commands divert fds too
    import mcp_types as t
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.shared.message import SessionMessage

log = logging.getLogger("gateway.stdio")


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


def _rejection(line: str) -> t.JSONRPCError:
    """The JSON-RPC error for a line that is not a message: ``-32700`` when it is not JSON,
    ``-32600`` (with its id, if one can be read) when it is JSON but not a request."""
    import mcp_types as t

    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return t.JSONRPCError(
            jsonrpc="2.0", id=None, error=t.ErrorData(code=t.PARSE_ERROR, message="Parse error")
        )
    ident = data.get("id") if isinstance(data, dict) else None
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        ident = None
    return t.JSONRPCError(
        jsonrpc="2.0",
        id=ident,
        error=t.ErrorData(
            code=t.INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message"
        ),
    )


def _encode(message: t.JSONRPCMessage) -> bytes:
    """One line of the wire. A message pydantic cannot encode (a lone surrogate in a string the
    pipeline did not shape, e.g. a protocol error's text) is sent with it replaced, instead of
    ending the server."""
    from pydantic_core import PydanticSerializationError

    try:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        data: Any = encodable_data(
            message.model_dump(mode="json", by_alias=True, exclude_unset=True)
        )
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "replace") + b"\n"


@contextlib.asynccontextmanager
async def json_rpc_streams(
    wire: Wire,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The SDK's ``stdio_server``, over the wire :func:`protected_stdio` took, with two
    differences: a line that is not a JSON-RPC message is answered (``-32700`` or ``-32600``,
    as JSON-RPC requires) instead of being dropped in silence, and a message that cannot be
    encoded is sent with its lone surrogates replaced instead of ending the server."""
    import anyio
    import anyio.to_thread
    import mcp_types as t
    from mcp.shared.message import SessionMessage

    read_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    replies = write_stream.clone()
    out = wire.stdout

    def put(data: bytes) -> None:
        out.write(data)
        out.flush()

    async def reader() -> None:
        async with read_send, replies:
            async for line in StdinLines(wire.stdin):
                if not line.strip():
                    continue
                try:
                    message = t.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError:
                    log.warning("answered a line that is not a JSON-RPC message with an error")
                    await replies.send(SessionMessage(_rejection(line)))
                    continue
                await read_send.send(SessionMessage(message))

    async def writer() -> None:
        async with write_receive:
            async for session_message in write_receive:
                await anyio.to_thread.run_sync(
                    put, _encode(session_message.message), abandon_on_cancel=True
                )

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        yield read_stream, write_stream
