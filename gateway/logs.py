"""Logging to stderr only (stdout is the stdio transport), redacted on the way out.

Three properties hold for every line, whoever logs it (the gateway, a plugin, the SDK, uvicorn,
asyncio, an exception nobody caught):

- it is sanitized (no traceback text, absolute path, SQL or secret unless debugging);
- it never blocks the caller: lines are written to fd 2 by a thread of their own, so a client
  that does not read the server's stderr cannot wedge the event loop (which then still
  honours SIGTERM); when the queue is full, lines are dropped and counted;
- the same message cannot flood the log: after ``BURST`` lines of one kind within ``WINDOW``
  seconds, the rest are counted and the next line of that kind says how many were suppressed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any

from .errors import Sanitizer

_HANDLER_NAME = "mcp-gateway-stderr"
#: A line of the log (a plugin's worker leaves out the time: the gateway logs its lines).
LINE = "%(asctime)s %(levelname)s %(name)s: %(message)s"
BURST = 10
WINDOW = 60.0
#: How long flushing (at exit) waits for queued lines to be written.
FLUSH_WAIT = 2.0
_QUEUE_LINES = 10_000


# Everything that can end a line or rewrite a terminal: C0 and C1 controls, DEL, and the
# Unicode line and paragraph separators some viewers break lines at.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def escape_controls(text: str, *, keep_newlines: bool = False) -> str:
    """One log record, one line: a value holding ``\\n2026-… INFO forged`` cannot start a line
    of its own. With ``keep_newlines`` (debug tracebacks) a line break stays but the next line
    is indented, so it can never pass for a record, which starts in the first column."""
    if keep_newlines:
        parts = re.split("\r\n|\n", text)
        return "\n    ".join(_CONTROL.sub(_escape, part) for part in parts)
    return _CONTROL.sub(_escape, text)


class RedactingFormatter(logging.Formatter):
    """Formats the record, then runs the whole line (exception text included) through the
    sanitizer and escapes control characters. In debug mode only credentials are removed and
    line breaks are kept (indented), so tracebacks stay readable."""

    def __init__(self, sanitizer: Sanitizer, *, debug: bool = False, fmt: str = LINE) -> None:
        super().__init__(fmt)
        self.sanitizer = sanitizer
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        suppressed = getattr(record, "suppressed", 0)
        if suppressed:
            line += f" ({suppressed} more like this suppressed in the last {WINDOW:g} s)"
        if self.debug:
            return escape_controls(self.sanitizer.redact_private(line), keep_newlines=True)
        return escape_controls(self.sanitizer(line, max_chars=4000))


class RateLimit(logging.Filter):
    """At most ``burst`` records of one kind (logger, level, message template) per ``window``
    seconds; the first one after a window with suppressed records carries their count."""

    def __init__(
        self,
        burst: int = BURST,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst = burst
        self.window = window
        self.clock = clock
        self._kinds: dict[tuple[str, int, str], list[float]] = {}  # [start, passed, suppressed]

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        kind = self._kinds.get(key)
        if kind is None or now - kind[0] >= self.window:
            if kind is not None and kind[2]:
                record.suppressed = int(kind[2])
            if len(self._kinds) > 1000:  # forget kinds whose window has passed
                self._kinds = {k: v for k, v in self._kinds.items() if now - v[0] < self.window}
            self._kinds[key] = [now, 1, 0]
            return True
        if kind[1] < self.burst:
            kind[1] += 1
            return True
        kind[2] += 1
        return False


class StderrWriter(logging.Handler):
    """Formats on the caller's thread, writes to fd 2 on a thread of its own (see above)."""

    def __init__(self, fd: int = 2) -> None:
        super().__init__()
        self._fd = fd
        self._queue: queue.Queue[bytes | None] = queue.Queue(_QUEUE_LINES)
        self._lock = threading.Lock()
        self._pending = 0
        self._dropped = 0
        self._thread = threading.Thread(target=self._pump, name="mcp-gateway log", daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # a bad format string: logging must never raise or print
            line = f"unprintable log record from {record.name}"
        data = (line + "\n").encode("utf-8", "backslashreplace")
        with self._lock:
            try:
                self._queue.put_nowait(data)
            except queue.Full:
                self._dropped += 1
                return
            self._pending += 1

    def put(self, data: bytes) -> bool:
        """Queue ``data`` (whole lines) to be written as it is, between log lines, never
        inside one; ``False`` when the queue is full (stderr is not being read)."""
        with self._lock:
            try:
                self._queue.put_nowait(data)
            except queue.Full:
                return False
            self._pending += 1
        return True

    def _pump(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                return
            with self._lock:
                dropped, self._dropped = self._dropped, 0
            if dropped:
                note = f"{dropped} log lines dropped: the server's stderr was not read\n"
                data = note.encode() + data
            self._write(data)
            with self._lock:
                self._pending -= 1

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except OSError:  # stderr closed or broken: nowhere to write to
                return
            view = view[written:]

    def flush(self) -> None:
        """Wait (at most ``FLUSH_WAIT`` s) until the queued lines are written."""
        deadline = time.monotonic() + FLUSH_WAIT
        while self._pending and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)

    def close(self) -> None:
        self.flush()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)
        super().close()


def write_stderr(data: bytes) -> bool:
    """Whole lines of ``data`` on stderr, by the log's writer when logging is configured (so
    they never land inside a log line, and never block the caller), else written at once.
    ``False`` when they could not be: the writer's queue is full, or stderr is closed."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, StderrWriter) and handler.get_name() == _HANDLER_NAME:
            return handler.put(data)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(2, view) :]
    except OSError:
        return False
    return True


def _log_uncaught(
    kind: type[BaseException], exc: BaseException, tb: TracebackType | None, where: str
) -> None:
    """One redacted log line (the traceback only in debug mode) instead of Python's own
    traceback, which printed absolute paths straight to stderr."""
    if issubclass(kind, KeyboardInterrupt):
        return
    log = logging.getLogger("gateway")
    if log.isEnabledFor(logging.DEBUG):
        detail = "".join(traceback.format_exception(kind, exc, tb))
        log.error("unexpected %s %s\n%s", kind.__name__, where, detail)
    else:
        frames = traceback.extract_tb(tb)[-1:] if tb is not None else []
        at = "".join(
            f" at {'/'.join(f.filename.replace(chr(92), '/').split('/')[-2:])}:{f.lineno}"
            for f in frames
        )
        log.error(
            "unexpected %s %s: %s%s (MCP_GATEWAY_DEBUG=1 logs the traceback)",
            kind.__name__,
            where,
            exc,
            at,
        )


def _install_crash_hooks() -> None:
    def excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        _log_uncaught(kind, exc, tb, "stopped the gateway")

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        where = f"in thread {args.thread.name if args.thread else '?'}"
        _log_uncaught(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback, where)

    def unraisable(args: Any) -> None:
        kind = type(args.exc_value) if args.exc_value is not None else args.exc_type
        _log_uncaught(kind, args.exc_value or kind(), args.exc_traceback, "was ignored")

    sys.excepthook = excepthook
    threading.excepthook = thread_hook
    sys.unraisablehook = unraisable


def configure_logging(
    sanitizer: Sanitizer, *, level: str = "INFO", debug: bool = False, fmt: str = LINE
) -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        if h.get_name() == _HANDLER_NAME:
            root.removeHandler(h)
            h.close()
    handler = StderrWriter()
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(RedactingFormatter(sanitizer, debug=debug, fmt=fmt))
    handler.addFilter(RateLimit())
    root.addHandler(handler)
    root.setLevel(level.upper() if not debug else "DEBUG")
    # The SDK and uvicorn are chatty at INFO (one line per request); keep their warnings.
    for name in ("mcp", "uvicorn.access", "httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.captureWarnings(True)  # warnings.warn() printed to stderr itself
    _install_crash_hooks()
