"""An MCP server behind the gateway: one supervised client session per process or URL.

:class:`Upstream` owns everything about one server: starting it (a stdio process of its own,
:class:`ServerProcess`) or connecting to it (Streamable HTTP), the official SDK's
``ClientSession`` over that (``initialize`` at the newest 2025 revision: every server speaks it,
and it keeps a back channel for the server's own requests), listing its tools (every page),
calling them, ``ping`` as its health check, ``notifications/tools/list_changed``, restarting it
with backoff when it exits or its connection breaks, and stopping it (its whole process group).
What the server sends outside answers arrives in one place, :meth:`Upstream._on_message`, and
its requests (sampling, elicitation, roots) in the session's callbacks, which forward them to
the client of the call that is running (:meth:`Upstream._forwarded`).

Besides tools it lists the server's resources, resource templates and prompts, and reads,
gets and completes them (:meth:`Upstream.request`). A server mounted at 2026-07-28
(``ServerSpec.protocol``) is opened with ``server/discover`` instead: its input requests come
as input-required results, passed on by the gateway, and each request carries the
capabilities of the client it is made for (:func:`_forwarding_capabilities`); it tells of
changes (its lists, the resources watched) only on a ``subscriptions/listen`` stream, which
is kept open to it once it is listed (:meth:`Upstream._listening`).

:mod:`gateway.mounts` turns what an upstream lists into tools of the registry; this module
knows nothing of tools beyond their JSON. The SDK is imported only when a session opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

# MAX_MESSAGE_BYTES: one message from a server may be at most this long (a line on stdio, an
# event over HTTP); a server that sends more is stopped and started again: it floods, or it is
# not an MCP server.
from .content import MAX_MESSAGE_BYTES
from .errors import ErrorCode, GatewayError, Sanitizer
from .inputs import (
    CALL,
    FORWARDED_CAPABILITIES,
    NEEDS,
    InputRequest,
    Inputs,
    MissingCapability,
    call_of,
    required_capabilities,
)
from .spec import LogFn, ProgressFn, ServerSpec

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.client.session import ClientSession
    from mcp.shared.message import SessionMessage

log = logging.getLogger("gateway.upstream")

#: A line a server writes to stderr is logged up to this many characters.
MAX_STDERR_LINE = 1000
#: Restarts wait this long at first, doubling up to RESTART_MAX; a server that stayed up for
#: STABLE_SECONDS starts the series again.
RESTART_FIRST = 0.5
RESTART_MAX = 30.0
STABLE_SECONDS = 60.0
#: Seconds a server gets to answer ``initialize`` and each page of ``tools/list``.
CONNECT_TIMEOUT = 60.0
#: Seconds a server gets to answer ``resources/subscribe``, or to acknowledge a listen stream
#: (a client's subscription waits).
SUBSCRIBE_TIMEOUT = 10.0
#: A listen stream that is lost is opened again after this many seconds, doubling up to
#: LISTEN_MAX; one that stayed open for STABLE_SECONDS starts the series again.
LISTEN_FIRST = 0.5
LISTEN_MAX = 30.0
#: At shut-down: seconds after stdin is closed before the process group gets SIGTERM, and after
#: SIGTERM before it gets SIGKILL.
STDIN_GRACE = 1.0
TERM_GRACE = 2.0
#: What of the gateway's environment a stdio server gets besides its own ``env``: enough to
#: find programs and its files, and the locale; never the gateway's tokens and secrets.
INHERITED = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ")
if sys.platform == "win32":  # pragma: no cover - what programs need there to start at all
    INHERITED += ("SYSTEMROOT", "SYSTEMDRIVE", "TEMP", "TMP", "USERPROFILE", "APPDATA", "PATHEXT")


def server_environment(spec: ServerSpec, gateway_env: Mapping[str, str]) -> dict[str, str]:
    """The environment a stdio server starts with: ``PATH``, ``HOME``, the locale (``LANG``,
    ``LC_*``) of the gateway's, then the server's own ``env`` on top."""
    env = {k: v for k, v in gateway_env.items() if k in INHERITED or k.startswith("LC_")}
    env.update(spec.env)
    return env


class State(enum.StrEnum):
    STARTING = "starting"
    UP = "up"
    DOWN = "down"
    STOPPED = "stopped"


# --- the stdio transport ------------------------------------------------------------------------

#: ``mcp_types.CONNECTION_CLOSED``, without importing the SDK's types here.
_CONNECTION_CLOSED = -32000


def _dumps(message: dict[str, Any]) -> bytes:
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "replace") + b"\n"  # a lone surrogate cannot be sent as is


class _Answer:
    """What one of the gateway's own requests is waiting for."""

    __slots__ = ("answered", "done", "error", "progress", "result", "telling")

    def __init__(self, progress: ProgressFn | None) -> None:
        self.done = anyio.Event()
        self.progress = progress
        self.result: dict[str, Any] | None = None
        self.error: tuple[int, str, Any] | None = None
        #: its answer arrived; ``done`` waits for the progress sent before it (``telling``)
        self.answered = False
        self.telling = 0

    def settle(self) -> None:
        """Done once answered and every progress the server sent before is passed on: the
        client hears of the last progress before it gets the result."""
        if self.answered and self.telling == 0:
            self.done.set()


class ServerProcess:
    """One stdio server: a process in its own process group, newline-delimited JSON-RPC on its
    stdin and stdout, each stderr line into the gateway's log (redacted, rate-limited like every
    line) under ``gateway.server.<name>``.

    The handle stays here for whoever must act on the process itself: :attr:`pid`,
    :meth:`memory` (resident bytes), :meth:`kill`. Use :func:`open_process`."""

    def __init__(self, name: str, process: anyio.abc.Process) -> None:
        self.name = name
        self.process = process
        self.pid = process.pid
        #: the last lines it wrote to stderr (they often say why it exited)
        self.stderr_tail: deque[str] = deque(maxlen=3)
        #: why the gateway ended the connection itself (a message over the size limit)
        self.cut_off: str | None = None
        self.closed = anyio.Event()
        #: the gateway's own requests in flight (see :meth:`request`), by their id
        self._waiting: dict[str, _Answer] = {}
        self._sent = 0
        self._spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], object] | None = None
        #: where its log messages go, read in line with the answers: a message sent during a
        #: call reaches the call's client before the call's answer is taken
        self.on_log: Callable[[Any], Awaitable[None]] | None = None

    async def request(
        self, method: str, params: dict[str, Any], progress: ProgressFn | None = None
    ) -> dict[str, Any]:
        """Send the server a request of the gateway's own (``tools/call``) and return its
        result as sent (JSON); an error answer raises the SDK's ``MCPError``, as from a
        session (``CONNECTION_CLOSED`` when the server goes away meanwhile).

        The answer is taken straight from the line the reader parsed: not through the
        session's dispatcher, its memory streams and tasks and its second check of the
        result, which cost more than the rest of a mounted call together. Such a request
        has a string id of its own (the session's are numbers) and doubles as its progress
        token. Cancelling the awaiting task sends ``notifications/cancelled``."""
        from mcp import MCPError

        if self.closed.is_set():
            raise MCPError(code=_CONNECTION_CLOSED, message="Connection closed")
        self._sent += 1
        ident = f"gw-{self._sent}"
        if progress is not None:
            meta = dict(params.get("_meta") or {})
            meta["progressToken"] = ident
            params = {**params, "_meta": meta}
        answer = _Answer(progress)
        self._waiting[ident] = answer
        line = _dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        stdin = self.process.stdin
        assert stdin is not None
        try:
            try:
                await stdin.send(line)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                raise MCPError(code=_CONNECTION_CLOSED, message="Connection closed") from None
            await answer.done.wait()
        except anyio.get_cancelled_exc_class():
            # The call's timeout or the client's cancellation: the server is told to stop.
            cancel = {"requestId": ident, "reason": "the gateway cancelled the call"}
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
            with anyio.move_on_after(STDIN_GRACE, shield=True):
                with contextlib.suppress(Exception):
                    await stdin.send(_dumps(note))
            raise
        finally:
            self._waiting.pop(ident, None)
        if answer.error is not None:
            raise MCPError(code=answer.error[0], message=answer.error[1], data=answer.error[2])
        assert answer.result is not None
        return answer.result

    def takes(self, data: Any) -> bool:
        """Whether ``data`` (a parsed line) belongs to one of :meth:`request`'s requests: its
        answer, or its progress. Then it is dealt with here."""
        if not isinstance(data, dict):
            return False
        ident = data.get("id")
        if isinstance(ident, str):
            answer = self._waiting.get(ident)
            if answer is None:
                return False
            result, error = data.get("result"), data.get("error")
            if isinstance(result, dict):
                answer.result = result
            elif isinstance(error, dict):
                code = error.get("code")
                message = error.get("message")
                answer.error = (
                    code if isinstance(code, int) and not isinstance(code, bool) else -32603,
                    message if isinstance(message, str) else "",
                    error.get("data"),
                )
            else:
                answer.error = (-32603, "the answer is not a JSON-RPC result", None)
            answer.answered = True
            answer.settle()
            return True
        if data.get("method") != "notifications/progress":
            return False
        params = data.get("params")
        token = params.get("progressToken") if isinstance(params, dict) else None
        answer = self._waiting.get(token) if isinstance(token, str) else None
        if answer is None or answer.progress is None:
            return answer is not None
        assert isinstance(params, dict)
        done, total, message = params.get("progress"), params.get("total"), params.get("message")
        if isinstance(done, int | float) and not isinstance(done, bool) and self._spawn:
            report = answer.progress

            async def tell() -> None:  # in a task of its own: the reader goes on reading
                try:
                    with contextlib.suppress(Exception):
                        await report(
                            float(done),
                            float(total) if isinstance(total, int | float) else None,
                            message if isinstance(message, str) else None,
                        )
                finally:
                    answer.telling -= 1
                    answer.settle()

            answer.telling += 1
            self._spawn(tell)
        return True

    def _gone(self) -> None:
        """The connection ended: every request still waiting is answered so."""
        for answer in self._waiting.values():
            if not answer.done.is_set():
                answer.error = (_CONNECTION_CLOSED, "Connection closed", None)
                answer.done.set()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def memory(self) -> int | None:
        """Resident memory in bytes (``VmRSS``), ``None`` where it cannot be read."""
        try:
            with open(f"/proc/{self.pid}/status", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
        return None

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the server's whole process group (what it started too)."""
        if sys.platform == "win32":  # pragma: no cover
            with contextlib.suppress(OSError):
                self.process.kill()
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def kill(self) -> None:
        """End the server and everything it started at once (SIGKILL to its process group)."""
        self.signal_group(signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)

    def exit_reason(self) -> str:
        """How it ended, for people: ``exited with code 1`` or ``killed by SIGKILL``."""
        code = self.returncode
        if self.cut_off is not None:
            return self.cut_off
        if code is None:
            return "closed its standard output"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"


class _PipeIn(anyio.abc.ByteReceiveStream):
    """A pipe of a process started before the event loop ran, read by the loop."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self._reader.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._reader.feed_eof()


class _PipeOut(anyio.abc.ByteSendStream):
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, item: bytes) -> None:
        if self._writer.is_closing():
            raise anyio.BrokenResourceError
        try:
            self._writer.write(item)
            await self._writer.drain()
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._writer.close()


class _Started(anyio.abc.Process):
    """A ``subprocess.Popen`` started before the event loop ran (a plugin's worker, so that
    it starts while the gateway does), as the loop's process: its pipes read and written by
    the loop."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._stdin: anyio.abc.ByteSendStream | None = None
        self._stdout: anyio.abc.ByteReceiveStream | None = None
        self._stderr: anyio.abc.ByteReceiveStream | None = None

    async def connect(self, initial: bytes = b"") -> None:
        """Read and write its pipes from the loop; ``initial``: what was read from its stdout
        before (see :data:`Handover`), read first."""
        loop = asyncio.get_running_loop()
        assert self._popen.stdin and self._popen.stdout and self._popen.stderr
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, self._popen.stdin
        )
        self._stdin = _PipeOut(asyncio.StreamWriter(transport, protocol, None, loop))
        for pipe, attr in ((self._popen.stdout, "_stdout"), (self._popen.stderr, "_stderr")):
            reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES, loop=loop)
            if initial and attr == "_stdout":
                reader.feed_data(initial)
            await loop.connect_read_pipe(
                lambda r=reader: asyncio.StreamReaderProtocol(r, loop=loop),  # type: ignore[misc]
                pipe,
            )
            setattr(self, attr, _PipeIn(reader))

    async def aclose(self) -> None:
        for stream in (self._stdin, self._stdout, self._stderr):
            if stream is not None:
                with contextlib.suppress(Exception):
                    await stream.aclose()

    async def wait(self) -> int:
        while self._popen.poll() is None:
            await anyio.sleep(0.01)
        return self._popen.returncode

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    def send_signal(self, signal: signal.Signals) -> None:
        self._popen.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream | None:
        return self._stderr


def start_process(spec: ServerSpec, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ``spec``'s command now, before any event loop runs (see :class:`_Started`):
    in its own process group, with ``env`` and nothing else, its three pipes for the gateway."""
    assert spec.command is not None
    return subprocess.Popen(
        [spec.command, *spec.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=spec.cwd,
        start_new_session=True,
    )


@contextlib.asynccontextmanager
async def open_process(
    spec: ServerSpec,
    env: Mapping[str, str],
    *,
    max_message: int = MAX_MESSAGE_BYTES,
    started: subprocess.Popen[bytes] | None = None,
    handover: Handover | None = None,
    on_stderr: Callable[[str], None] | None = None,
    stdin_grace: float = STDIN_GRACE,
) -> AsyncIterator[
    tuple[
        ServerProcess,
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Start ``spec``'s command (or take the one :func:`start_process` ``started``) and yield
    its handle and the message streams a ``ClientSession`` takes; with ``handover``, once what
    talked to the ``started`` one before is done with its pipes. Each line it writes to
    stderr goes to ``on_stderr`` (else to the log). On exit (also when cancelled) the process
    group is ended: stdin closed, then SIGTERM after ``stdin_grace`` seconds, SIGKILL after
    :data:`TERM_GRACE`."""
    from mcp.shared.message import SessionMessage

    assert spec.command is not None
    # Always a Popen whose pipes the loop reads and writes itself (_Started): anyio's process
    # streams end every write with an extra turn of the event loop, on every call's path.
    process = _Started(started if started is not None else start_process(spec, env))
    await process.connect(await handover() if handover and started is not None else b"")
    handle = ServerProcess(spec.name, process)
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](8)
    server_log = logging.getLogger(f"gateway.server.{spec.name}")
    deliver = _deliverer(handle, to_session, server_log)
    stderr_done = anyio.Event()
    # Its own scope, shielded: when the connection is cancelled (the gateway stops), what the
    # server still writes while it ends is read; it ends with stderr, or when let go below.
    stderr_scope = anyio.CancelScope(shield=True)

    async with anyio.create_task_group() as tg:
        handle._spawn = tg.start_soon
        tg.start_soon(_read_stdout, handle, to_session, deliver, max_message)
        tg.start_soon(_write_stdin, handle, from_session)
        tg.start_soon(_read_stderr, handle, stderr_scope, stderr_done, on_stderr, server_log)
        try:
            yield handle, from_server, to_server
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(handle, stdin_grace)
                # Its last words (why it exited, often) reach the log before it is let go.
                with anyio.move_on_after(STDIN_GRACE):
                    await stderr_done.wait()
                stderr_scope.cancel()
                if process.stderr is not None:
                    with contextlib.suppress(Exception):
                        await process.stderr.aclose()
            tg.cancel_scope.cancel()


async def _read_stdout(
    handle: ServerProcess,
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
    deliver: Callable[[bytes], Awaitable[None]],
    max_message: int,
) -> None:
    """Split what the server writes to stdout into lines, each to ``deliver``, until it
    ends; a line over ``max_message`` bytes ends the server."""
    stdout = handle.process.stdout
    assert stdout is not None
    pending = bytearray()
    try:
        async with to_session:
            async for chunk in stdout:
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    pending += chunk[start:end]
                    start = end + 1
                    if len(pending) > max_message:
                        break
                    line = bytes(pending)
                    pending.clear()
                    if line.strip():
                        await deliver(line)
                else:
                    pending += chunk[start:]
                if len(pending) > max_message:
                    handle.cut_off = (
                        f"sent a message over {max_message // (1024 * 1024)} MB; the "
                        "gateway stopped it"
                    )
                    log.error("server %s %s", handle.name, handle.cut_off)
                    handle.kill()
                    return
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass
    finally:
        handle.closed.set()
        handle._gone()


def _deliverer(
    handle: ServerProcess,
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
    server_log: logging.Logger,
) -> Callable[[bytes], Awaitable[None]]:
    """What takes each line the server writes to stdout: an answer or progress of one of the
    gateway's own requests (:meth:`ServerProcess.takes`), a log message (``on_log``), or a
    message for the session."""
    import mcp_types as t
    from mcp.shared.message import SessionMessage
    from pydantic_core import from_json

    async def deliver(line: bytes) -> None:
        try:
            data = from_json(line)
            if handle.takes(data):
                return
            message = t.jsonrpc_message_adapter.validate_python(data, by_name=False)
        except ValueError:
            # Not the protocol (a stray print on stdout): the line is dropped, the server goes on.
            server_log.warning("wrote a line to stdout that is not a JSON-RPC message")
            return
        if handle.on_log is not None and data.get("method") == "notifications/message":
            await handle.on_log(data.get("params"))
            return
        await to_session.send(SessionMessage(message))

    return deliver


async def _write_stdin(
    handle: ServerProcess, from_session: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    """Write what the session sends to the server's stdin, a line each."""
    stdin = handle.process.stdin
    assert stdin is not None
    try:
        async with from_session:
            async for item in from_session:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdin.send(data.encode() + b"\n")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        handle.closed.set()


async def _read_stderr(
    handle: ServerProcess,
    scope: anyio.CancelScope,
    done: anyio.Event,
    on_stderr: Callable[[str], None] | None,
    server_log: logging.Logger,
) -> None:
    """Each line the server writes to stderr (cut to :data:`MAX_STDERR_LINE`) to
    ``on_stderr``, else to ``server_log``; the last few are kept (``stderr_tail``). Read
    inside ``scope``; ``done`` is set when stderr ends."""
    stderr = handle.process.stderr
    assert stderr is not None
    pending = b""
    with (
        scope,
        contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError),
    ):
        async for chunk in _chunks(stderr, done):
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()[-MAX_STDERR_LINE * 4 :]
            for raw in lines:
                text = raw.decode("utf-8", "replace").rstrip()[:MAX_STDERR_LINE]
                if text:
                    handle.stderr_tail.append(text)
                    if on_stderr is not None:
                        on_stderr(text)
                    else:
                        server_log.info("%s", text)


async def _stop(handle: ServerProcess, stdin_grace: float = STDIN_GRACE) -> None:
    """Close stdin and give the server ``stdin_grace`` seconds to exit, then SIGTERM its
    process group and, :data:`TERM_GRACE` later, SIGKILL it (what it started goes with it)."""
    process = handle.process
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    if not await _exited(process, stdin_grace):
        handle.signal_group(signal.SIGTERM)
        if not await _exited(process, TERM_GRACE):
            log.warning("server %s ignored SIGTERM; killing it", handle.name)
    # Whatever is left of the group (children of a server that exited) goes too.
    handle.kill()
    await _exited(process, TERM_GRACE)
    if process.stdout is not None:
        with contextlib.suppress(Exception):
            await process.stdout.aclose()


async def _chunks(stream: anyio.abc.ByteReceiveStream, done: anyio.Event) -> AsyncIterator[bytes]:
    """What ``stream`` sends until it ends; ``done`` is set then."""
    try:
        async for chunk in stream:
            yield chunk
    finally:
        done.set()


async def _exited(process: anyio.abc.Process, timeout: float) -> bool:
    """Whether the process ended within ``timeout`` seconds (polled: ``wait()`` would also wait
    for pipes a child of the server may still hold)."""
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.01)
    return True


# --- the supervised session ----------------------------------------------------------------------


@dataclass
class Listing:
    """What a server offers: its tools as it sent them (JSON, camelCase, every page), and its
    resources, resource templates and prompts (empty when it declares none)."""

    tools: list[dict[str, Any]]
    server_name: str
    server_version: str
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    #: it declares ``resources.subscribe``: a client may subscribe to its resources
    subscribe: bool = False


#: Told each time an upstream (re)connected or listed its tools again.
OnListing = Callable[["Upstream", Listing], Awaitable[None]]
#: What a connection does after ``initialize`` and before it lists the tools (a plugin's
#: worker is handed its settings there).
Prepare = Callable[["Upstream"], Awaitable[None]]
#: What must end before the loop reads and writes the pipes of a process started before the
#: loop ran (a worker handed its settings meanwhile: see :class:`gateway.isolation.FirstLoad`);
#: it returns what it read from the process's stdout past its own answers.
Handover = Callable[[], Awaitable[bytes]]


def _abandoned(exc: BaseException) -> Abandon | None:
    """The :class:`Abandon` that ended a connection, if one did (inside task groups too)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, Abandon) else None


class Abandon(Exception):
    """Raised by a :data:`Prepare` step: the server cannot serve (a plugin that failed to
    load), so it is not started again. The message says why."""


class Upstream:
    """One mounted server, kept running: :meth:`run` connects, lists, serves calls and restarts
    it with backoff until cancelled. Calls meanwhile answer ``BACKEND_UNAVAILABLE``.

    Made with: ``prepare``: see :data:`Prepare`. ``started``: its process, started already
    (:func:`start_process`), for the first connection; ``handover``: see :data:`Handover`.
    ``on_stderr``: takes each line it
    writes to stderr. ``stdin_grace``: seconds it gets to exit once its stdin is closed.
    ``title``: what messages call it (``MCP server 'fs'``). ``retry_unanswered=False``: when
    it fails before it ever answered, it is not started again (``settled`` is set).
    ``answers_inputs``: at 2025-11-25 too it asks the client with input-required results and
    takes the answers in the request made again, as at 2026-07-28 (a plugin's worker, which
    never asks over its connection). ``errors``: reads an error it answered as the gateway's
    own error (a worker's), else ``None``. ``quiet_start``: its first connection is logged
    at DEBUG, a restart's at INFO (a plugin's worker: loading a plugin in process is not
    announced either)."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        env: Mapping[str, str],
        sanitizer: Sanitizer,
        on_listing: OnListing,
        on_up: Callable[[], None] | None = None,
        prepare: Prepare | None = None,
        started: subprocess.Popen[bytes] | None = None,
        handover: Handover | None = None,
        on_stderr: Callable[[str], None] | None = None,
        stdin_grace: float = STDIN_GRACE,
        title: str | None = None,
        retry_unanswered: bool = True,
        answers_inputs: bool = False,
        errors: Callable[[Any], GatewayError | None] | None = None,
        quiet_start: bool = False,
    ) -> None:
        self.spec = spec
        self._quiet_start = quiet_start
        self.name = spec.name
        self.title = title or f"MCP server {spec.name!r}"
        self._prepare = prepare
        self._started = started
        self._handover = handover
        self._on_stderr = on_stderr
        self._stdin_grace = stdin_grace
        self._retry_unanswered = retry_unanswered
        self.answers_inputs = answers_inputs
        self._errors = errors
        self._env = dict(env)
        self._sanitize = sanitizer
        self._on_listing = on_listing
        self._on_up = on_up
        self.state = State.STARTING
        self.session: ClientSession | None = None
        self.process: ServerProcess | None = None
        self.restarts = 0
        #: why it is not up (sanitized), ``None`` while it is
        self.reason: str | None = "not started"
        self.retry_at: float | None = None
        #: set once it answered for the first time (its tools are listed)
        self.answered = anyio.Event()
        self.answered_at: float | None = None
        #: set once it answered for the first time, or was given up (see ``retry_unanswered``)
        self.settled = anyio.Event()
        #: set while it is up (a new one each time it goes down)
        self.up = anyio.Event()
        #: why it is being started again on purpose (:meth:`recycle`), until it is up again
        self.recycling: str | None = None
        self._relist = anyio.Event()
        self._broken = anyio.Event()
        #: the calls running by their CALL name, each with its client's back channel and log
        #: (see _forwarded)
        self._running: dict[str, tuple[Inputs, LogFn | None]] = {}
        #: told each URI it says changed (``notifications/resources/updated``)
        self.on_updated: Callable[[str], None] | None = None
        #: the URIs the gateway's clients are subscribed to, and the session that has been
        #: asked to tell of them (subscribed again on the next connection: see :meth:`watch`)
        self.watched: set[str] = set()
        self._watching: object = None
        #: at 2026-07-28, the session whose listen stream is kept open (:meth:`_listening`);
        #: ``_rewatch`` wakes it (the URIs watched changed, or its stream ended); a change of
        #: the URIs watched is counted in ``_asked``, and ``_opened`` counts those a stream
        #: (or the attempt to open one) has taken in, ``_opening`` is set each time it does
        self._listener: object = None
        self._rewatch = anyio.Event()
        self._asked = 0
        self._opened = 0
        self._opening = anyio.Event()
        #: why the last listen stream ended (sanitized)
        self._stream_end = ""

    @property
    def modern(self) -> bool:
        """Mounted at 2026-07-28 (``server/discover``, input-required results)."""
        return self.spec.protocol == MODERN

    # -- running ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, and connect again after each failure, waiting
        :data:`RESTART_FIRST` doubling to :data:`RESTART_MAX`; until cancelled."""
        delay = RESTART_FIRST
        self.reason = "starting"
        while True:
            began = time.monotonic()
            try:
                await self._connected()
            except Exception as exc:  # whatever the server or its transport did: it is down
                given_up = _abandoned(exc)
                if given_up is not None:
                    self.reason = self._sanitize(str(given_up), max_chars=1000)
                    self.state = State.STOPPED
                    self.settled.set()
                    self.session = None
                    return
                self.recycling = None  # a start that failed: the backoff applies
                self.reason = self._why(exc)
                process = self.process
                if process is not None and process.closed.is_set():  # it ended: say how
                    await _exited(process.process, 0.5)
                    self.reason = self._with_stderr(process.exit_reason(), process)
            finally:
                self.session = None
                if self.up.is_set():
                    self.up = anyio.Event()
            if self.recycling is not None:  # ended on purpose (recycle): started at once
                self.reason = self.recycling
                self.state = State.STARTING
                continue
            if not self.answered.is_set() and not self._retry_unanswered:
                log.warning("%s could not be started: %s", self.title, self.reason)
                self.state = State.STOPPED
                self.settled.set()
                return
            if time.monotonic() - began >= STABLE_SECONDS:
                delay = RESTART_FIRST
            self.state = State.DOWN
            self.restarts += 1
            self.retry_at = time.monotonic() + delay
            log.warning(
                "%s is down (%s); %s again in %g s",
                self.title,
                self.reason,
                "starting it" if self.spec.command is not None else "connecting",
                delay,
            )
            await anyio.sleep(delay)
            self.retry_at = None
            delay = min(delay * 2, RESTART_MAX)
            self.state = State.STARTING

    def _why(self, exc: BaseException) -> str:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]  # a task group's: what went wrong in it
        if isinstance(exc, FileNotFoundError):
            return f"command {self.spec.command!r} not found"
        if isinstance(exc, PermissionError):
            return f"command {self.spec.command!r} cannot be run (permission denied)"
        if isinstance(exc, TimeoutError):
            return f"no answer to initialize or tools/list within {CONNECT_TIMEOUT:g} s"
        text = str(exc) or type(exc).__name__
        return self._sanitize(f"{type(exc).__name__}: {text}", max_chars=300)

    async def _connected(self) -> None:
        """One connection, from start to its end: returns (or raises) when it broke."""
        self._broken = anyio.Event()
        self.process = None  # this connection's, once it started
        async with self._transport() as (read, write):
            import mcp_types as t
            from mcp.client.session import ClientSession

            from . import __version__

            # The callbacks make the session declare sampling, elicitation and roots to a 2025
            # server: it may ask over its connection, and each request goes to the client of
            # the running call. At 2026-07-28 each request says what its client can do instead.
            async with (
                _forwarding_capabilities(write) if self.modern else _as_is(write) as send,
                ClientSession(
                    read,
                    send,
                    message_handler=self._on_message,
                    logging_callback=self._on_log,
                    client_info=t.Implementation(name="mcp-gateway", version=__version__),
                    sampling_callback=self._on_sampling,
                    elicitation_callback=self._on_elicitation,
                    list_roots_callback=self._on_roots,
                ) as session,
            ):
                with anyio.fail_after(CONNECT_TIMEOUT):
                    if self.modern:
                        await session.discover()
                    else:
                        await session.initialize()
                info = session.server_info
                if self._prepare is not None:
                    self.session = session
                    await self._prepare(self)
                with anyio.fail_after(CONNECT_TIMEOUT):
                    listing = await self._list(session, info)
                self.session = session
                self.state = State.UP
                self.reason = None
                self.recycling = None
                self.up.set()
                if self._on_up is not None:
                    self._on_up()
                await self._on_listing(self, listing)
                if not self.answered.is_set():
                    self.answered_at = time.monotonic()
                    self.answered.set()
                    self.settled.set()
                log.log(
                    logging.DEBUG if self._quiet_start and not self.restarts else logging.INFO,
                    "%s is up: %s %s, %d tools",
                    self.title,
                    listing.server_name,
                    listing.server_version,
                    len(listing.tools),
                )
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._relisting, session, info)
                    if self.modern:
                        tg.start_soon(self._listening, session)
                    await self._broken.wait()
                    tg.cancel_scope.cancel()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        """The message streams of a fresh connection; the connection breaks when they end."""
        if self.spec.command is not None:
            env = server_environment(self.spec, self._env)
            started, self._started = self._started, None
            handover, self._handover = self._handover, None
            async with open_process(
                self.spec,
                env,
                started=started,
                handover=handover,
                on_stderr=self._on_stderr,
                stdin_grace=self._stdin_grace,
            ) as (process, read, write):
                self.process = process
                process.on_log = self._on_pipe_log

                async def watch() -> None:
                    await process.closed.wait()
                    self.reason = process.exit_reason()
                    if not process.cut_off:
                        await _exited(process.process, 0.5)
                        self.reason = self._with_stderr(process.exit_reason(), process)
                    self._broken.set()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(watch)
                    try:
                        yield read, write
                    finally:
                        tg.cancel_scope.cancel()
            return
        import httpx2  # the SDK's HTTP client (it depends on it)
        from mcp.client.streamable_http import streamable_http_client

        assert self.spec.url is not None
        # The SDK's own defaults: a server may hold a response stream open for a while.
        client = httpx2.AsyncClient(
            headers=dict(self.spec.headers), timeout=httpx2.Timeout(30.0, read=300.0)
        )
        async with (
            client,
            streamable_http_client(
                self.spec.url, http_client=client, max_sse_event_size=MAX_MESSAGE_BYTES
            ) as streams,
        ):
            yield streams

    def _with_stderr(self, reason: str, process: ServerProcess) -> str:
        last = process.stderr_tail[-1] if process.stderr_tail else ""
        text = f"{reason}; its last words on stderr: {last}" if last else reason
        return self._sanitize(text, max_chars=400)

    async def _list(self, session: ClientSession, info: Any) -> Listing:
        caps = session.server_capabilities
        found: dict[str, list[dict[str, Any]]] = {}

        async def tools() -> None:
            found["tools"] = await self._pages(session.list_tools, "tools")

        async def extra(method: Any, key: str) -> None:
            found[key] = await self._extra(method, key)

        # The lists asked at once: one round trip on the first listing's path, not four.
        async with anyio.create_task_group() as tg:
            tg.start_soon(tools)
            # What it does not declare is not asked; what it declares but fails to list is
            # left out (its tools still serve).
            if caps is not None and caps.resources is not None:
                tg.start_soon(extra, session.list_resources, "resources")
                tg.start_soon(extra, session.list_resource_templates, "resource_templates")
            if caps is not None and caps.prompts is not None:
                tg.start_soon(extra, session.list_prompts, "prompts")
        return Listing(
            found["tools"],
            str(getattr(info, "name", "") or ""),
            str(getattr(info, "version", "") or ""),
            resources=found.get("resources", []),
            templates=found.get("resource_templates", []),
            prompts=found.get("prompts", []),
            # At 2026-07-28 it tells of changes on the listen stream (_listening).
            subscribe=caps is not None
            and caps.resources is not None
            and caps.resources.subscribe is True,
        )

    async def _pages(self, method: Any, key: str) -> list[dict[str, Any]]:
        """Every page of a list (as JSON)."""
        import mcp_types as t

        found: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(1000):  # a server whose cursors never end is not listed for ever
            params = t.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await method(params=params)
            found += [
                x.model_dump(by_alias=True, mode="json", exclude_none=True)
                for x in getattr(page, key)
            ]
            cursor = page.next_cursor
            if not cursor:
                break
        return found

    async def _extra(self, method: Any, key: str) -> list[dict[str, Any]]:
        from mcp import MCPError
        from pydantic import ValidationError

        try:
            return await self._pages(method, key)
        except (MCPError, ValidationError) as exc:
            log.warning("server %s: its %s are not listed: %s", self.name, key, self._why(exc))
            return []

    async def _relisting(self, session: ClientSession, info: Any) -> None:
        """List again each time the server says its tools changed (one listing at a time)."""
        while True:
            await self._relist.wait()
            self._relist = anyio.Event()
            try:
                with anyio.fail_after(CONNECT_TIMEOUT):
                    listing = await self._list(session, info)
            except Exception as exc:
                self.reason = self._why(exc)
                self._broken.set()
                return
            await self._on_listing(self, listing)

    async def _on_message(self, message: Any) -> None:
        """Everything the server sends outside answers (and transport failures) lands here."""
        import mcp_types as t

        if isinstance(
            message,
            t.ToolListChangedNotification
            | t.PromptListChangedNotification
            | t.ResourceListChangedNotification,
        ):
            self._relist.set()
        elif isinstance(message, t.ResourceUpdatedNotification):
            if self.on_updated is not None:
                self.on_updated(str(message.params.uri))
        elif isinstance(message, Exception):
            log.warning(
                "server %s: %s", self.name, self._sanitize(f"{type(message).__name__}: {message}")
            )
            if self.spec.url is not None:  # HTTP: the connection is to be made again
                self.reason = self._why(message)
                self._broken.set()

    async def _on_pipe_log(self, params: Any) -> None:
        """A stdio server's ``notifications/message`` as its reader parsed it."""
        import mcp_types as t
        from pydantic import ValidationError

        try:
            checked = t.LoggingMessageNotificationParams.model_validate(params, by_name=False)
        except ValidationError:
            return
        await self._on_log(checked)

    async def _on_log(self, params: Any) -> None:
        """A server's ``notifications/message``: into the gateway's log, and to the client of
        the running call when one call is running (a message says not which call it is of)."""
        text = str(params.data)[:MAX_STDERR_LINE]
        logging.getLogger(f"gateway.server.{self.name}").info("log %s: %s", params.level, text)
        # A message that says which call it is of (a worker's, by the call's name) goes to
        # that call's client; any other only while one call runs.
        meta = getattr(params, "meta", None)
        call = meta.get(CALL) if isinstance(meta, dict) else None
        named = self._running.get(call) if isinstance(call, str) else None
        running = [named] if named is not None else list(self._running.values())
        if len(running) == 1 and running[0][1] is not None:
            send = running[0][1]
            with contextlib.suppress(Exception):  # the client went away: the call goes on
                await send(str(params.level), text)

    async def watch(self, uri: str, on: bool) -> None:
        """Subscribe to ``uri`` (``on``) or unsubscribe from it: now when the server is up,
        and again on each connection that follows (:meth:`rewatch`). What the server answers
        is logged, never raised: the client's subscription holds either way."""
        if on:
            self.watched.add(uri)
        else:
            self.watched.discard(uri)
        session = self.session
        if self.modern:
            if session is not None and session is self._listener:
                await self._relisten()
        elif session is not None and session is self._watching:
            await self._subscribe(session, uri, on)

    async def rewatch(self) -> None:
        """Subscribe the connection that is up to every URI watched, once per connection (at
        2026-07-28 its listen stream is opened with them: :meth:`_listening`)."""
        session = self.session
        if session is None or session is self._watching or self.modern:
            return
        self._watching = session
        for uri in sorted(self.watched):
            await self._subscribe(session, uri, True)

    async def _subscribe(self, session: ClientSession, uri: str, on: bool) -> None:
        import mcp_types as t

        request: Any = (
            t.SubscribeRequest(params=t.SubscribeRequestParams(uri=uri))
            if on
            else t.UnsubscribeRequest(params=t.UnsubscribeRequestParams(uri=uri))
        )
        try:
            with anyio.fail_after(SUBSCRIBE_TIMEOUT):
                await session.send_request(request, t.EmptyResult)
        except Exception as exc:  # whatever it answers, or not: the server's, logged
            log.warning(
                "server %s: %s %s failed: %s",
                self.name,
                request.method,
                uri[:200],
                self._why(exc),
            )

    # -- 2026-07-28: the listen stream ---------------------------------------------------------------

    async def _relisten(self) -> None:
        """The URIs watched changed: the listen stream is opened again with them (this
        revision has no subscribing to one URI). Waits, a while, until it is, so that a change
        the server says right after a client subscribed is told."""
        self._asked += 1
        asked = self._asked
        self._rewatch.set()
        with anyio.move_on_after(SUBSCRIBE_TIMEOUT):
            while self._opened < asked:
                await self._opening.wait()

    def _took(self, asked: int) -> None:
        """A stream opened with the URIs watched when ``asked`` changes had been asked (or
        opening it failed): what :meth:`_relisten` waits for."""
        self._opened = max(self._opened, asked)
        opening, self._opening = self._opening, anyio.Event()
        opening.set()

    async def _listening(self, session: ClientSession) -> None:
        """At 2026-07-28 a server tells of changes only on a ``subscriptions/listen`` stream
        a client opened: one is kept open, for what it declares may change (its lists; the
        URIs watched where it declares ``resources.subscribe``). Its list changes list it
        again (:meth:`_relisting`), its resource updates go to ``on_updated``, as a 2025
        server's notifications do. When the URIs watched change, a stream with the new set
        is opened before the old one is closed; a stream that is lost is opened again with a
        backoff, then the lists are asked again and each URI watched is told changed (what
        was said meanwhile is not replayed); a server that refuses to listen is noted once.
        Its tools serve throughout: nothing here breaks the connection."""
        caps = session.server_capabilities
        lists = {
            "tools_list_changed": bool(caps and caps.tools and caps.tools.list_changed),
            "prompts_list_changed": bool(caps and caps.prompts and caps.prompts.list_changed),
            "resources_list_changed": bool(caps and caps.resources and caps.resources.list_changed),
        }
        subscribable = bool(caps and caps.resources and caps.resources.subscribe)
        if not any(lists.values()) and not subscribable:
            return
        self._listener = session
        delay = LISTEN_FIRST
        lost = False  # a stream was lost: what it would have told is asked for again
        first = True  # the first of this connection: what changed since the listing is asked
        try:
            async with anyio.create_task_group() as tg:
                current: anyio.CancelScope | None = None
                ended = anyio.Event()
                began = 0.0
                listened: list[str] = []  # the URIs the current stream was asked for
                while True:
                    self._rewatch = anyio.Event()
                    asked = self._asked
                    uris = sorted(self.watched) if subscribable else []
                    if current is not None and ended.is_set():  # its stream ended
                        current = None
                        if time.monotonic() - began >= STABLE_SECONDS:
                            delay = LISTEN_FIRST
                        lost = True
                        delay = await self._listen_later(delay, f"ended ({self._stream_end})")
                        continue
                    if current is not None and uris == listened:  # it listens for them
                        self._took(asked)
                        await self._rewatch.wait()
                        continue
                    if not any(lists.values()) and not uris:  # nothing to listen to
                        if current is not None:
                            current.cancel()
                            current = None
                        self._took(asked)
                        await self._rewatch.wait()
                        continue
                    scope, opened_ended = anyio.CancelScope(), anyio.Event()
                    try:
                        honored = await tg.start(
                            self._stream, session, lists, uris, scope, opened_ended
                        )
                    except Exception as exc:
                        why = self._unopened(exc)
                        if why is None:  # refused: not asked again on this connection
                            tg.cancel_scope.cancel()  # the stream it had, if any, too
                            return
                        self._took(asked)
                        lost = True
                        delay = await self._listen_later(delay, why)
                        continue
                    # The new stream is open before the old one closes: nothing said between
                    # (unless the old one ended meanwhile).
                    if current is not None:
                        lost = lost or ended.is_set()
                        current.cancel()
                    current, ended, began = scope, opened_ended, time.monotonic()
                    listened = uris
                    self._took(asked)
                    self._honored(lists, uris, honored)
                    self._caught_up(honored, first=first, lost=lost)
                    first = lost = False
                    await self._rewatch.wait()
        except Exception as exc:  # the connection is ending, or a fault here: tools still serve
            log.info("server %s: not listening any more: %s", self.name, self._why(exc))
        finally:
            self._listener = None
            self._took(self._asked)

    def _unopened(self, exc: Exception) -> str | None:
        """Why a listen stream was not opened, to be tried again; ``None`` when the server
        answered with an error (it does not listen, asked again or not: said once)."""
        import mcp_types as t
        from mcp import MCPError

        if isinstance(exc, MCPError) and exc.error.code != t.CONNECTION_CLOSED:
            log.warning(
                "server %s refused subscriptions/listen, so the gateway is not told when its "
                "lists or resources change (until it is started again): %s",
                self.name,
                self._why(exc),
            )
            return None
        if isinstance(exc, TimeoutError):
            return f"was not acknowledged within {SUBSCRIBE_TIMEOUT:g} s"
        return f"could not be opened ({self._why(exc)})"

    def _caught_up(self, honored: Any, *, first: bool, lost: bool) -> None:
        """A stream is open: what may have changed unsaid is asked for. After the listing (the
        first stream of a connection), the lists again; after a stream was lost, the lists and
        each URI it listens for, told changed (nothing said meanwhile is replayed)."""
        if (first or lost) and (
            honored.tools_list_changed
            or honored.prompts_list_changed
            or honored.resources_list_changed
        ):
            self._relist.set()
        if lost and self.on_updated is not None:
            for uri in honored.resource_subscriptions or ():
                self.on_updated(uri)

    async def _listen_later(self, delay: float, why: str) -> float:
        """Wait ``delay`` seconds before a listen stream is opened again, then say why; the
        next wait. Said after the wait: a stream that ended with its connection is not (the
        connection's end cancels this first)."""
        await anyio.sleep(delay)
        log.warning(
            "server %s: its listen stream %s; opened again after %g s", self.name, why, delay
        )
        return min(delay * 2, LISTEN_MAX)

    async def _stream(
        self,
        session: ClientSession,
        lists: dict[str, bool],
        uris: list[str],
        scope: anyio.CancelScope,
        ended: anyio.Event,
        *,
        task_status: anyio.abc.TaskStatus[Any],
    ) -> None:
        """One listen stream: started once acknowledged (with what the server agreed to tell:
        its ``honored`` filter), then each event it tells is taken, until it ends (``ended``
        set, :meth:`_listening` woken) or ``scope`` is cancelled (it was replaced)."""
        from mcp.client.subscriptions import ResourceUpdated, listen

        with scope:
            started = False
            try:
                async with contextlib.AsyncExitStack() as stack:
                    with anyio.fail_after(SUBSCRIBE_TIMEOUT):
                        sub = await stack.enter_async_context(
                            listen(
                                session,
                                tools_list_changed=lists["tools_list_changed"],
                                prompts_list_changed=lists["prompts_list_changed"],
                                resources_list_changed=lists["resources_list_changed"],
                                resource_subscriptions=uris,
                            )
                        )
                    task_status.started(sub.honored)
                    started = True
                    async for event in sub:
                        if isinstance(event, ResourceUpdated):
                            if self.on_updated is not None:
                                self.on_updated(event.uri)
                        else:
                            self._relist.set()
                    self._stream_end = "the server closed it"
            except Exception as exc:
                if not started:
                    raise
                self._stream_end = self._why(exc.__cause__ or exc)
            ended.set()
            self._rewatch.set()

    def _honored(self, lists: dict[str, bool], uris: list[str], honored: Any) -> None:
        """Note what the server did not agree to tell on a stream (it is not told then)."""
        wire = {
            "tools_list_changed": "its tools",
            "prompts_list_changed": "its prompts",
            "resources_list_changed": "its resources",
        }
        left = [wire[k] for k, on in lists.items() if on and not getattr(honored, k)]
        agreed = set(honored.resource_subscriptions or ())
        left += [repr(uri[:200]) for uri in uris if uri not in agreed]
        if left:
            log.info(
                "server %s will not tell when these change: %s",
                self.name,
                self._sanitize(", ".join(left)),
            )

    # -- the server's requests (2025): forwarded to the client of the running call -----------------

    async def _on_sampling(self, context: Any, params: Any) -> Any:
        import mcp_types as t

        return await self._forwarded("sampling/createMessage", params, t.CreateMessageResult)

    async def _on_elicitation(self, context: Any, params: Any) -> Any:
        import mcp_types as t

        return await self._forwarded("elicitation/create", params, t.ElicitResult)

    async def _on_roots(self, context: Any) -> Any:
        import mcp_types as t

        # A roots/list has no params but _meta, which the session hands over on its own.
        meta = getattr(context, "meta", None)
        params = t.RequestParams.model_validate({"_meta": dict(meta)}) if meta else None
        return await self._forwarded("roots/list", params, t.ListRootsResult)

    async def _forwarded(self, method: str, params: Any, result: Any) -> Any:
        """The server asks the client (a 2025 server-to-client request): forwarded to the
        client of the call that is running, over that call's back channel. A request while no
        call runs, or while several do (a request says not which call it belongs to), or for
        a client without a back channel, is refused to the server."""
        import mcp_types as t
        from pydantic import ValidationError

        body = params.model_dump(by_alias=True, mode="json", exclude_none=True) if params else {}
        request = InputRequest(method, body)
        # Another gateway says which call its request is for; any other server cannot, and is
        # answered only while one call of it runs.
        named = self._running.get(call_of(request) or "")
        running = [named] if named is not None else list(self._running.values())
        forward = running[0][0].forward if len(running) == 1 else None
        if forward is None:
            why = (
                "no call of this server is running"
                if not running
                else "several calls are running and the request says not which it is of"
                if len(running) > 1
                else "the client of the call cannot be asked over its connection"
            )
            log.info("server %s asked %s: refused, %s", self.name, method, why)
            return t.ErrorData(code=t.INVALID_REQUEST, message=f"the gateway cannot ask: {why}")
        try:
            answer = await forward(request)
            return result.model_validate(answer, by_name=False)
        except GatewayError as err:
            said = self._sanitize(err.message)
            return t.ErrorData(code=t.INVALID_REQUEST, message=f"the gateway cannot ask: {said}")
        except ValidationError:
            return t.ErrorData(code=t.INTERNAL_ERROR, message="the client's answer is not one")

    # -- using it ----------------------------------------------------------------------------------

    def recycle(self, why: str) -> None:
        """Start it again now, on purpose (a plugin's worker whose memory grew too much): its
        connection ends, and the next starts at once, not after a backoff."""
        if self.session is None:
            return
        self.recycling = why
        self.up = anyio.Event()  # set again once the next connection is up
        self._broken.set()

    def unavailable(self) -> GatewayError:
        """``BACKEND_UNAVAILABLE`` naming the server and what happens next."""
        stdio = self.spec.command is not None
        down = "is not running" if stdio else "is not connected"
        state = f"{down} ({self.reason})" if self.reason else down
        if self.state is State.STARTING:
            starting = "is starting" if stdio else "is being connected"
            state = starting if self.restarts == 0 else f"{starting} again ({self.reason})"
        wait = ""
        if self.retry_at is not None:
            again = "started" if stdio else "connected"
            wait = f"; it is {again} again in {max(1, round(self.retry_at - time.monotonic()))} s"
        return GatewayError(
            ErrorCode.BACKEND_UNAVAILABLE,
            f"{self.title} {state}{wait}: retry in a few seconds, or see gateway_status",
            backend_down=True,
        )

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        progress: ProgressFn | None = None,
        *,
        inputs: Inputs | None = None,
        log: LogFn | None = None,
        meta: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``tools/call`` of the server's tool ``name``: its result as sent (JSON). Cancelling
        the awaiting task (a timeout, the client's cancellation) sends the server
        ``notifications/cancelled``. ``inputs``: the client's answers to what the server asked
        (2026-07-28) and its back channel (2025); ``log``: where its log messages go."""
        return await self.request(
            "tools/call",
            {"name": name, "arguments": arguments},
            progress=progress,
            inputs=inputs,
            log=log,
            span=name,
            extra_meta=meta,
        )

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        progress: ProgressFn | None = None,
        inputs: Inputs | None = None,
        log: LogFn | None = None,
        span: str | None = None,
        extra_meta: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One request of the server's (``tools/call``, ``resources/read``, ``prompts/get``,
        ``completion/complete``): its result as sent (JSON), an input-required result
        included. A server's ``-32021`` is :class:`~gateway.inputs.MissingCapability`."""
        session = self.session
        if session is None:
            raise self.unavailable()
        import mcp_types as t
        from mcp import MCPError
        from pydantic import ValidationError

        key = secrets.token_urlsafe(12)
        params = self._with_meta(params, key, inputs, extra_meta)
        self._running[key] = (inputs or Inputs(), log)
        try:
            with self._span(span) if span is not None else contextlib.nullcontext() as traced:
                process = self.process
                straight = method == "tools/call" or self.answers_inputs
                if process is not None and straight and not self.modern:
                    # Straight to the pipe (ServerProcess.request): what the server asks
                    # meanwhile still reaches the session's callbacks.
                    if traced is not None:
                        from opentelemetry.propagate import inject

                        inject(params["_meta"])  # this span's trace context
                    result = await process.request(method, params, progress)
                    asks = self.answers_inputs and result.get("resultType") == "input_required"
                    checked = t.InputRequiredResult if asks else _result_type(method)
                    checked.model_validate(result, by_name=False)
                    return result
                request = _request_type(method).model_validate({"method": method, "params": params})
                on_progress: Any = progress
                # The SDK puts the current trace context (this span's) in the request's _meta.
                sent: dict[str, Any] = await session.send_request(
                    request, _RAW, progress_callback=on_progress
                )
            return sent
        except MCPError as exc:
            if exc.error.code == t.MISSING_REQUIRED_CLIENT_CAPABILITY:
                raise MissingCapability.from_error(exc.error.data, self.name) from None
            raise self._refused(exc) from None
        except ValidationError:
            raise self._not_its_result(method) from None
        finally:
            self._running.pop(key, None)

    def _not_its_result(self, method: str) -> GatewayError:
        return GatewayError(
            ErrorCode.BACKEND_ERROR,
            f"{self.title} answered with something that is not a tool result"
            if method == "tools/call"
            else f"{self.title} answered {method} with something that is not its result",
            retryable=False,
        )

    def _with_meta(
        self,
        params: dict[str, Any],
        key: str,
        inputs: Inputs | None,
        extra_meta: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """``params`` with the ``_meta`` of a request of :meth:`request`'s: the call's name
        (``key``) and what its client can be asked; at 2026-07-28 (or to a worker, which
        asks with input-required results at 2025-11-25 too) also the client's answers."""
        import mcp_types as t

        params = dict(params)
        # What the client of the call can be asked: a 2026-07-28 server gets it where the
        # protocol has it (_forwarding_capabilities), another gateway reads it here.
        meta: dict[str, Any] = {
            **(extra_meta or {}),
            CALL: key,
            FORWARDED_CAPABILITIES: required_capabilities(
                set(inputs.capabilities) & set(NEEDS.values()) if inputs else set()
            ),
        }
        params["_meta"] = meta
        if self.modern:
            # The client's level filters (gateway.asking): the server sends them all.
            meta[t.LOG_LEVEL_META_KEY] = "debug"
        if (self.modern or self.answers_inputs) and inputs is not None:
            if inputs.responses:
                params["inputResponses"] = dict(inputs.responses)
            if inputs.state is not None:
                params["requestState"] = inputs.state
        return params

    def _span(self, tool: str) -> contextlib.AbstractContextManager[Any]:
        """With telemetry on, the call's child span: the request to this server."""
        from .telemetry import current

        telemetry = current()
        if not telemetry.enabled:
            return contextlib.nullcontext()
        from opentelemetry.trace import SpanKind

        from .telemetry import names as n

        return telemetry.tracer.start_as_current_span(
            f"upstream tools/call {telemetry.clean.name(tool)}",
            kind=SpanKind.CLIENT,
            attributes={
                n.MCP_METHOD: "tools/call",
                n.GEN_AI_TOOL: telemetry.clean.name(tool),
                n.BACKEND: telemetry.clean.name(self.name),
                n.NETWORK_TRANSPORT: "pipe" if self.spec.command is not None else "tcp",
            },
            record_exception=False,
        )

    def _refused(self, exc: Any) -> GatewayError:
        import mcp_types as t

        if exc.error.code == t.CONNECTION_CLOSED:
            self._broken.set()
            again = "started" if self.spec.command is not None else "connected"
            return GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                f"{self.title} went away during the call; it is {again} again: "
                "retry in a few seconds",
                backend_down=True,
            )
        own = self._errors(exc.error) if self._errors is not None else None
        if own is not None:
            return own
        said = self._sanitize.backend_text(exc.error.message or "", 300)
        if exc.error.code == t.INVALID_PARAMS:
            return GatewayError(
                ErrorCode.VALIDATION_ERROR,
                f"{self.title} refused the arguments: {said}",
            )
        return GatewayError(
            ErrorCode.BACKEND_ERROR,
            f"{self.title} answered with error {exc.error.code}: {said}",
            retryable=False,
        )

    async def ping(self) -> str | None:
        """The health check: a ``ping`` answered, or why not."""
        session = self.session
        if session is None:
            raise self.unavailable()
        from mcp import MCPError

        try:
            await session.send_ping()
        except MCPError as exc:
            raise self._refused(exc) from None
        pid = f", pid {self.process.pid}" if self.process is not None else ""
        return f"{self.spec.transport}{pid}"

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "transport": self.spec.transport,
            "state": self.state.value,
            "restarts": self.restarts,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.process is not None and self.state is State.UP:
            out["pid"] = self.process.pid
        return out


#: The revision a server mounted with ``protocol = "2026-07-28"`` is spoken to at.
MODERN = "2026-07-28"


def _request_type(method: str) -> Any:
    """The SDK's model of a request :meth:`Upstream.request` sends (imported when used)."""
    import mcp_types as t

    return {
        "tools/call": t.CallToolRequest,
        "resources/read": t.ReadResourceRequest,
        "prompts/get": t.GetPromptRequest,
        "completion/complete": t.CompleteRequest,
    }[method]


def _result_type(method: str) -> Any:
    """The SDK's model of the result of a request :meth:`Upstream.request` sends."""
    import mcp_types as t

    return {
        "tools/call": t.CallToolResult,
        "resources/read": t.ReadResourceResult,
        "prompts/get": t.GetPromptResult,
        "completion/complete": t.CompleteResult,
    }[method]


@contextlib.asynccontextmanager
async def _as_is(write: Any) -> AsyncIterator[Any]:
    yield write


@contextlib.asynccontextmanager
async def _forwarding_capabilities(write: Any) -> AsyncIterator[Any]:
    """A write stream that puts the capabilities :meth:`Upstream.request` forwards in place
    of those the session stamps on every 2026-07-28 request (its own, which are not what the
    client of the call can do): a server then asks only what that client can answer."""
    from mcp.shared.message import SessionMessage

    send, receive = anyio.create_memory_object_stream[SessionMessage](8)

    async def relay() -> None:
        async with receive:
            async for item in receive:
                params = getattr(item.message, "params", None)
                meta = params.get("_meta") if isinstance(params, dict) else None
                if isinstance(meta, dict) and FORWARDED_CAPABILITIES in meta:
                    meta["io.modelcontextprotocol/clientCapabilities"] = meta.pop(
                        FORWARDED_CAPABILITIES
                    )
                await write.send(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(relay)
        try:
            async with send:
                yield send
        finally:
            tg.cancel_scope.cancel()


class _Raw:
    """What ``ClientSession.send_request`` builds a result with: here nothing, the JSON stays as
    the server sent it (the session has checked it against the protocol's schema already)."""

    @staticmethod
    def model_validate(raw: Any, by_name: bool = False) -> Any:
        return raw


_RAW: Any = _Raw
