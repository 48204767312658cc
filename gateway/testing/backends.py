"""Real HTTP test backends on 127.0.0.1 for plugin tests: faults on demand and recorded replays.

Every server here is a real ``ThreadingHTTPServer`` in a background thread, so the plugin under
test goes through its real HTTP client, sockets included. Use them as context managers, from
sync tests (``with``) or async ones (``async with``)::

    with RecordedBackend(directory=RECORDINGS) as api:
        api.load("GET_api_jobs")
        ...                                  # point the plugin at api.url
        api.mode = FaultMode.HANG            # the next requests are read and never answered
        assert not api.unmatched             # the plugin sent exactly the recorded requests

- :class:`FakeBackend`: the base class. A switchable :class:`FaultMode`, a log of every request
  received (:class:`ReceivedRequest`), per-route overrides (:meth:`FakeBackend.override` with a
  :class:`Reply`: any status, headers and body, streamed slowly, gzip-encoded or a redirect), and a
  :meth:`FakeBackend.respond` hook that subclasses implement.
- :class:`RecordedBackend`: answers requests that match a loaded recording exactly, 404 otherwise.
- :func:`closed_port_url`: a loopback URL nothing listens on.

Only the standard library is used: importing this costs a test session nothing.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import os
import socket
import struct
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "FakeBackend",
    "FaultMode",
    "ReceivedRequest",
    "RecordedBackend",
    "Recording",
    "Reply",
    "closed_port_url",
]

JSON = "application/json"
INTERNAL_ERROR_BODY = b'{"detail":"Internal Server Error"}'  # FastAPI's answer to a crash
GARBAGE_BODY = b"<!doctype html><title>502 Bad Gateway</title>upstream sent an invalid reply"


def closed_port_url() -> str:
    """A loopback URL nothing listens on: connections to it are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class FaultMode(StrEnum):
    """How a :class:`FakeBackend` treats every request, switchable while it runs."""

    NORMAL = "normal"  # answer: overrides first, then respond()
    REFUSE = "refuse"  # nothing listens on the port (open connections are cut); same port after
    HANG = "hang"  # read the request, never answer until the mode changes or the server closes
    ERROR = "error"  # 500 {"detail": "Internal Server Error"}
    GARBAGE = "garbage"  # 200, Content-Type application/json, a body that is not JSON
    NULL = "null"  # 200, body ``null``


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the server received it."""

    method: str
    target: str  # the request target exactly as sent: raw path plus ``?query``
    path: str  # the raw path as sent, percent-encoding and dot segments untouched
    query_pairs: tuple[tuple[str, str], ...]  # decoded, in order
    headers: dict[str, str]  # names lower-cased
    body: bytes
    json: Any  # the decoded body; None when there is none or it is not JSON

    @property
    def query(self) -> dict[str, str]:
        """Decoded query parameters (for a repeated name, the last value)."""
        return dict(self.query_pairs)


@dataclass
class Reply:
    """An answer: status, headers and a body given as bytes or as a factory of chunks.

    ``delay`` pauses before each chunk of ``chunk_size`` bytes (a slow stream); a body factory
    without ``length`` is sent with ``Transfer-Encoding: chunked``."""

    status: int = 200
    body: bytes | Callable[[], Iterable[bytes]] = b""
    headers: dict[str, str] = field(default_factory=dict)
    length: int | None = None
    chunk_size: int = 64 * 1024
    delay: float = 0.0

    @classmethod
    def json(cls, value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        """A JSON body, compact like FastAPI's."""
        body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        return cls(status, body, {"Content-Type": JSON, **(headers or {})})

    @classmethod
    def redirect(cls, location: str, status: int = 302) -> Reply:
        return cls(status, b"", {"Location": location})

    @classmethod
    def gzip(cls, data: bytes, status: int = 200, content_type: str = JSON) -> Reply:
        """``data`` sent gzip-encoded (``Content-Encoding: gzip``)."""
        return cls(status, _gzip(data), {"Content-Type": content_type, "Content-Encoding": "gzip"})

    @classmethod
    def gzip_bomb(cls, size: int = 1 << 30) -> Reply:
        """A small gzip body that inflates to ``size`` bytes (a JSON string): only a cap on the
        decoded size protects the client."""
        return cls(200, _gzip_bomb(size), {"Content-Type": JSON, "Content-Encoding": "gzip"})

    @classmethod
    def large(cls, size: int, *, delay: float = 0.0, chunk_size: int = 64 * 1024) -> Reply:
        """A valid JSON body (one long string) of exactly ``size`` bytes, streamed in chunks."""
        if size < 2:
            raise ValueError("size must be at least 2 bytes")

        def chunks() -> Iterator[bytes]:
            yield b'"'
            left = size - 2
            block = b"a" * chunk_size
            while left > 0:
                yield block[: min(left, chunk_size)]
                left -= chunk_size
            yield b'"'

        return cls(
            200, chunks, {"Content-Type": JSON}, length=size, chunk_size=chunk_size, delay=delay
        )

    def chunks(self) -> Iterator[bytes]:
        if isinstance(self.body, bytes):
            for i in range(0, len(self.body), self.chunk_size):
                yield self.body[i : i + self.chunk_size]
        else:
            yield from self.body()


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: the gzip container
    return packer.compress(data) + packer.flush()


#: A gzip member header: deflate, no flags, no time, best compression, unknown system.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"


def _deflated(data: bytes, mode: int) -> bytes:
    """``data`` as raw deflate blocks of a fresh stream: they refer to nothing before them."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush(mode)


@functools.lru_cache(maxsize=4)
def _gzip_bomb(size: int) -> bytes:
    """One compressed MiB of ``a`` repeated: each copy ends on a full flush (byte-aligned) and
    refers to nothing before it, so copies may follow each other. Compressing the whole size
    instead cost seconds of CPU per test process for a gigabyte."""
    block = b"a" * (1 << 20)
    whole, rest = divmod(size - 2, len(block))
    tail = block[:rest] + b'"'
    crc = zlib.crc32(b'"')
    for _ in range(whole):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    return b"".join(
        [
            _GZIP_HEADER,
            _deflated(b'"', zlib.Z_FULL_FLUSH),
            _deflated(block, zlib.Z_FULL_FLUSH) * whole,
            _deflated(tail, zlib.Z_FINISH),
            struct.pack("<II", crc, size & 0xFFFFFFFF),
        ]
    )


@dataclass
class _Override:
    path: str
    method: str | None
    reply: Reply
    times: int | None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's backlog of 5 drops the connections a client opens at once past it (they
    # are retried a second later, past short connect timeouts); real servers take hundreds.
    request_queue_size = 128


class FakeBackend:
    """A real HTTP/1.1 server on 127.0.0.1 with fault modes, a request log and overrides.

    Subclasses answer in :meth:`respond`; the default answers 404 ``{"detail": "Not Found"}``.
    Attributes a test may read or set: :attr:`mode`, :attr:`requests` (every request received),
    :attr:`errors` (tracebacks of exceptions raised in :meth:`respond`, answered 500),
    :attr:`latency` (seconds to wait before every answer)."""

    def __init__(self, *, port: int = 0) -> None:
        self._cond = threading.Condition()
        self._mode = FaultMode.NORMAL
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        #: while refusing, the port stays bound (never listening), so that no other server,
        #: another fake backend of the same test included, is given it meanwhile
        self._held: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._overrides: list[_Override] = []
        self._closed = False
        self.requests: list[ReceivedRequest] = []
        self.errors: list[str] = []
        self.latency = 0.0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        with self._cond:
            self._closed = False
            self._listen()
        return self

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            self._stop_listening()
            self._cut_connections()
            self._release()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.close)

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("the backend is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _listen(self) -> None:
        try:
            server = _Server(("127.0.0.1", self._port), _make_handler(self))
        except OSError as exc:  # another process took the port while it was refused
            raise RuntimeError(f"cannot listen on 127.0.0.1:{self._port} again: {exc}") from exc
        self._port = server.server_address[1]
        self._server = server
        # A short poll: close() and the refuse mode wait for the serve loop to notice.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _hold(self) -> None:
        """Keep the port: bound but not listening, a connection to it is refused."""
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            held.bind(("127.0.0.1", self._port))
        except OSError:  # taken already: nothing to hold
            held.close()
            return
        self._held = held

    def _release(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def _cut_connections(self) -> None:
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._connections.clear()

    # -- fault modes ---------------------------------------------------------------------

    @property
    def mode(self) -> FaultMode:
        return self._mode

    @mode.setter
    def mode(self, mode: FaultMode | str) -> None:
        self.set_mode(mode)

    def set_mode(self, mode: FaultMode | str) -> None:
        new = FaultMode(mode)
        with self._cond:
            old, self._mode = self._mode, new
            if self._closed:
                return
            if new is FaultMode.REFUSE and old is not FaultMode.REFUSE:
                self._stop_listening()
                self._cut_connections()
                self._hold()
            elif old is FaultMode.REFUSE and new is not FaultMode.REFUSE:
                self._release()
                self._listen()
            self._cond.notify_all()

    # -- overrides and log ---------------------------------------------------------------

    def override(
        self, path: str, reply: Reply, *, method: str | None = None, times: int | None = None
    ) -> None:
        """Answer requests for the raw ``path`` (and ``method``, if given) with ``reply``,
        ``times`` times or until :meth:`clear_overrides`; the newest override wins."""
        with self._cond:
            self._overrides.insert(0, _Override(path, method and method.upper(), reply, times))

    def clear_overrides(self) -> None:
        with self._cond:
            self._overrides.clear()

    def clear_log(self) -> None:
        with self._cond:
            self.requests.clear()
            self.errors.clear()

    def _take_override(self, request: ReceivedRequest) -> Reply | None:
        with self._cond:
            for item in self._overrides:
                if item.path == request.path and item.method in (None, request.method):
                    if item.times is not None:
                        item.times -= 1
                        if item.times <= 0:
                            self._overrides.remove(item)
                    return item.reply
        return None

    # -- answering -----------------------------------------------------------------------

    def respond(self, request: ReceivedRequest) -> Reply:
        """The answer in normal mode; subclasses implement their backend here."""
        return Reply.json({"detail": "Not Found"}, 404)

    def _answer(self, request: ReceivedRequest) -> Reply | None:
        """The reply for ``request`` under the current mode; None: close without answering."""
        with self._cond:
            self.requests.append(request)
            while self._mode is FaultMode.HANG and not self._closed:
                self._cond.wait()
            if self._closed or self._mode is FaultMode.REFUSE:
                return None
            mode = self._mode
        if self.latency and not self._sleep(self.latency):
            return None
        if mode is FaultMode.ERROR:
            return Reply(500, INTERNAL_ERROR_BODY, {"Content-Type": JSON})
        if mode is FaultMode.GARBAGE:
            return Reply(200, GARBAGE_BODY, {"Content-Type": JSON})
        if mode is FaultMode.NULL:
            return Reply(200, b"null", {"Content-Type": JSON})
        override = self._take_override(request)
        if override is not None:
            return override
        try:
            return self.respond(request)
        except Exception:
            with self._cond:
                self.errors.append(traceback.format_exc())
            return Reply(500, INTERNAL_ERROR_BODY, {"Content-Type": JSON})

    def _sleep(self, seconds: float) -> bool:
        """Wait, waking early when the server closes; False if it did."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return True
                self._cond.wait(left)
        return False


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length > 0 else b""


def _decode_json(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def _make_handler(backend: FakeBackend) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def setup(self) -> None:
            super().setup()
            # Without TCP_NODELAY, headers and body leave as two segments and every keep-alive
            # answer waits for a delayed ACK (~40 ms).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with backend._cond:
                backend._connections.add(self.connection)

        def finish(self) -> None:
            with backend._cond:
                backend._connections.discard(self.connection)
            with contextlib.suppress(OSError):
                super().finish()

        def _handle(self) -> None:
            try:
                body = _read_body(self)
                split = urlsplit(self.path)
                request = ReceivedRequest(
                    method=self.command,
                    target=self.path,
                    path=split.path,
                    query_pairs=tuple(parse_qsl(split.query, keep_blank_values=True)),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    json=_decode_json(body),
                )
                reply = backend._answer(request)
                if reply is None:
                    self.close_connection = True
                    return
                self._send(reply)
            except (OSError, ValueError):  # the client went away, or sent a broken body
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _handle

        def _send(self, reply: Reply) -> None:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if isinstance(reply.body, bytes):
                length: int | None = len(reply.body)
            else:
                length = reply.length
            chunked = length is None
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(length))
            self.end_headers()
            if self.command == "HEAD":
                return
            for chunk in reply.chunks():
                if reply.delay and not backend._sleep(reply.delay):
                    self.close_connection = True
                    return
                if not chunk:
                    continue
                if chunked:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                else:
                    self.wfile.write(chunk)
                self.wfile.flush()
            if chunked:
                self.wfile.write(b"0\r\n\r\n")

    return Handler


# -- recorded exchanges --------------------------------------------------------------------


def _wire(value: Any) -> str:
    """A recorded JSON query value as it travels in a URL."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


@dataclass(frozen=True)
class Recording:
    """One recorded exchange: ``{"request": {method, path, query, json, ...}, "response":
    {status, content_type, json | text}}``. ``name`` is the file name without ``.json``."""

    name: str
    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    json: Any
    status: int
    content_type: str
    body: bytes

    @classmethod
    def from_dict(cls, name: str, data: dict[str, Any]) -> Recording:
        req, resp = data["request"], data["response"]
        if "json" in resp:
            body = json.dumps(resp["json"], separators=(",", ":"), ensure_ascii=False).encode()
        else:
            body = str(resp.get("text", "")).encode()
        return cls(
            name=name,
            method=str(req["method"]).upper(),
            path=str(req["path"]),
            query=tuple(sorted((str(k), _wire(v)) for k, v in (req.get("query") or {}).items())),
            json=req.get("json"),
            status=int(resp["status"]),
            content_type=str(resp.get("content_type") or JSON),
            body=body,
        )

    @classmethod
    def from_file(cls, path: str | Path) -> Recording:
        path = Path(path)
        return cls.from_dict(path.stem, json.loads(path.read_text(encoding="utf-8")))

    @property
    def key(self) -> tuple[str, str, tuple[tuple[str, str], ...], str]:
        return (self.method, self.path, self.query, json.dumps(self.json, sort_keys=True))

    def matches(self, request: ReceivedRequest) -> bool:
        return (
            request.method == self.method
            and request.path == self.path
            and tuple(sorted(request.query_pairs)) == self.query
            and request.json == self.json
            and (self.json is not None or not request.body.strip())
        )

    def reply(self) -> Reply:
        return Reply(self.status, self.body, {"Content-Type": self.content_type})


class RecordedBackend(FakeBackend):
    """Replays recorded exchanges; anything else is 404 and kept in :attr:`unmatched`.

    A request is answered when method, raw path, query and JSON body equal a loaded recording's.
    Recordings that share all four (an approve, then the 400 of a second approve) take turns as
    :meth:`activate` says; by default the first loaded answers. :attr:`served` lists
    ``(request, recording name)`` for every answered request."""

    def __init__(self, *recordings: Recording, directory: str | Path | None = None) -> None:
        super().__init__()
        self.directory = Path(directory) if directory is not None else None
        self.recordings: dict[str, Recording] = {}
        self.unmatched: list[ReceivedRequest] = []
        self.served: list[tuple[ReceivedRequest, str]] = []
        self._queues: dict[tuple[Any, ...], list[str]] = {}
        for rec in recordings:
            self.add(rec)

    def add(self, recording: Recording) -> Recording:
        with self._cond:
            self.recordings[recording.name] = recording
            queue = self._queues.setdefault(recording.key, [])
            if not queue:
                queue.append(recording.name)
        return recording

    def load(self, *names: str | Path) -> list[Recording]:
        """Load recordings by file path, or by name or glob pattern (``"GET_api_jobs__*"``)
        inside :attr:`directory`; ``.json`` may be left off."""
        loaded = []
        for name in names:
            for path in self._resolve(name):
                loaded.append(self.add(Recording.from_file(path)))
        return loaded

    def load_all(self) -> list[Recording]:
        return self.load("*")

    def _resolve(self, name: str | Path) -> list[Path]:
        path = Path(name)
        if path.is_file():
            return [path]
        if self.directory is None:
            raise FileNotFoundError(f"no recording file {name} (and no directory to look in)")
        pattern = str(name) if str(name).endswith(".json") else f"{name}.json"
        # Names first, and the file type from the directory entry: a stat per file of a
        # directory of hundreds of recordings, for every name loaded, added up.
        with os.scandir(self.directory) as entries:
            found = sorted(
                Path(entry.path)
                for entry in entries
                if fnmatch.fnmatchcase(entry.name, pattern) and entry.is_file()
            )
        if not found:
            raise FileNotFoundError(f"no recording matches {name!r} in {self.directory.name}/")
        return found

    def activate(self, *names: str) -> None:
        """Make these recordings the ones that answer their requests. Names that share a
        request answer in the order given, one request each; the last then keeps answering."""
        with self._cond:
            chosen: dict[tuple[Any, ...], list[str]] = {}
            for name in names:
                if name not in self.recordings:
                    raise KeyError(f"recording {name!r} is not loaded")
                chosen.setdefault(self.recordings[name].key, []).append(name)
            self._queues.update(chosen)

    def respond(self, request: ReceivedRequest) -> Reply:
        with self._cond:
            for queue in self._queues.values():
                rec = self.recordings[queue[0]]
                if rec.matches(request):
                    if len(queue) > 1:
                        queue.pop(0)
                    self.served.append((request, rec.name))
                    return rec.reply()
            self.unmatched.append(request)
            near = [
                r.name
                for r in self.recordings.values()
                if r.method == request.method and r.path == request.path
            ]
        detail = f"no recording matches {request.method} {request.target}"
        if request.json is not None:
            detail += f" with body {json.dumps(request.json)[:200]}"
        if near:
            detail += f" (same method and path, other query or body: {', '.join(near[:5])})"
        return Reply.json({"detail": detail}, 404)
