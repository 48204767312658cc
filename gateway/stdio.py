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
    from mcp.shared.message import SessionMessage

log = logging.getLogger("gateway.stdio")


def _dup_private(fd: int) -> int:
    """A duplicate above the standard range that child processes do not inherit."""
    if sys.platform != "win32":
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    return os.dup(fd)  # pragma: no cover - Windows


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
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


def _is_pipe(stream: BinaryIO) -> bool:
    """A pipe or a socket: what the event loop can wait on itself (not a file, and not a
    terminal, whose file description a shell shares: it must not be left non-blocking)."""
    import stat

    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


#: How much of a pipe the event loop buffers before it stops reading (a longer line is still
#: read whole, on).
_PIPE_BUFFER = 1024 * 1024


class _PipeLines:
    """The lines of a pipe, read by the event loop itself: no thread hands them over."""

    def __init__(self, raw: BinaryIO, initial: bytes = b"") -> None:
        self._raw = raw
        self._initial = initial  # what was read from the pipe before (a worker's first lines)
        self._reader: asyncio.StreamReader | None = None
        self._transport: asyncio.ReadTransport | None = None

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        reader = self._reader
        if reader is None:
            loop = asyncio.get_running_loop()
            reader = self._reader = asyncio.StreamReader(limit=_PIPE_BUFFER, loop=loop)
            if self._initial:
                reader.feed_data(self._initial)
            self._transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop), self._raw
            )
        long = b""
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the end, perhaps without a newline
                if not (long + exc.partial):
                    raise StopAsyncIteration from None
                line = exc.partial
            except asyncio.LimitOverrunError as exc:
                long += await reader.readexactly(exc.consumed)
                continue
            return (long + line).decode("utf-8", errors="replace")

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class _PipeOut:
    """Writes to a pipe from the event loop: non-blocking, waiting only while it is full."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._writer: asyncio.StreamWriter | None = None

    async def write(self, data: bytes) -> None:
        if self._writer is None:
            loop = asyncio.get_running_loop()
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, self._raw
            )
            self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        self._writer.write(data)
        await self._writer.drain()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class _ThreadOut:
    """Writes to a file or a terminal from a worker thread, one message at a time."""

    def __init__(self, raw: BinaryIO) -> None:
        import anyio

        self._raw = raw
        self._lock = anyio.Lock()

    def _put(self, data: bytes) -> None:
        self._raw.write(data)
        self._raw.flush()

    async def write(self, data: bytes) -> None:
        import anyio.to_thread

        async with self._lock:
            await anyio.to_thread.run_sync(self._put, data, abandon_on_cancel=True)

    def close(self) -> None:
        return None


class WireOut:
    """The SDK's write stream over the wire: each message encoded and written by the task that
    sends it (no task in between, so no hand-over on the event loop per message)."""

    def __init__(self, out: _PipeOut | _ThreadOut) -> None:
        self._out = out
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        import anyio

        if self._closed:
            raise anyio.ClosedResourceError
        try:
            await self._out.write(_encode(item.message))
        except (BrokenPipeError, ConnectionResetError):
            raise anyio.BrokenResourceError from None

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> WireOut:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class WireIn:
    """The SDK's read stream over the wire: each line read and checked by the task that asks
    for the next message. A line that is not a JSON-RPC message is answered at once
    (``-32700`` or ``-32600``, as JSON-RPC requires) instead of being dropped in silence."""

    def __init__(self, lines: _PipeLines | StdinLines, replies: WireOut) -> None:
        self._lines = lines
        self._replies = replies

    async def receive(self) -> SessionMessage | Exception:
        import anyio
        import mcp_types as t
        from mcp.shared.message import SessionMessage

        while True:
            try:
                line = await self._lines.__anext__()
            except StopAsyncIteration:
                raise anyio.EndOfStream from None
            if not line.strip():
                continue
            try:
                message = t.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                log.warning("answered a line that is not a JSON-RPC message with an error")
                await self._replies.send(SessionMessage(_rejection(line)))
                continue
            return SessionMessage(message)

    def __aiter__(self) -> WireIn:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        if isinstance(self._lines, _PipeLines):
            self._lines.close()

    async def __aenter__(self) -> WireIn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def json_rpc_streams(wire: Wire) -> AsyncIterator[tuple[WireIn, WireOut]]:
    """The SDK's ``stdio_server``, over the wire :func:`protected_stdio` took, with these
    differences: a line that is not a JSON-RPC message is answered (see :class:`WireIn`); a
    message that cannot be encoded is sent with its lone surrogates replaced instead of ending
    the server; and a pipe (what a client starts the gateway with) is read and written by the
    event loop itself, with no thread and no task in between: those hand-overs were most of a
    call's cost on a busy machine. A file or a terminal is read and written by threads."""
    out = _PipeOut(wire.stdout) if _is_pipe(wire.stdout) else _ThreadOut(wire.stdout)
    lines = _PipeLines(wire.stdin) if _is_pipe(wire.stdin) else StdinLines(wire.stdin)
    write = WireOut(out)
    try:
        yield WireIn(lines, write), write
    finally:
        if isinstance(lines, _PipeLines):
            lines.close()
        out.close()
