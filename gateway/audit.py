"""Append-only audit log of mutation calls (JSON Lines, one flushed line per event).

Two lines per call, sharing the correlation id: ``"outcome": "STARTED"`` before the handler
runs, and the outcome code after (``OK``, an error code, or ``CANCELLED`` when the call was
cancelled while it ran). A crash between them leaves the first, so an interrupted mutation is
never invisible. The log fails closed: a mutation whose ``STARTED`` line cannot be written
whole is refused before it runs. A line is written whole or reported as not written: a short
write (the disk filled mid-line) is not success, and a fragment left by one never swallows the
next line, which then starts on a line of its own. Argument *values* are never written: only
their names and shapes. Both lines name the caller (``subject``, ``client``; see
:meth:`gateway.auth.Identity.audit_fields`): the token's subject and client over OAuth, the
OS user and ``stdio`` over stdio, nulls for the holder of the shared HTTP token.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("gateway.audit")


def redact_arguments(arguments: dict[str, Any] | None) -> dict[str, str]:
    """Names and shapes only: ``{"updates": "list[3]", "db_path": "str"}``."""
    out: dict[str, str] = {}
    for key, value in (arguments or {}).items():
        if isinstance(value, list | tuple):
            out[str(key)] = f"list[{len(value)}]"
        elif isinstance(value, dict):
            out[str(key)] = f"object[{len(value)}]"
        elif value is None:
            out[str(key)] = "null"
        else:
            out[str(key)] = type(value).__name__
    return out


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, event: dict[str, Any]) -> bool:
        """Append one whole line; ``False`` (and an error in the log) when it could not be."""
        record = {"time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"), **event}
        line = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # O_APPEND: every write goes to the end, also with two gateway processes.
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    _lock_file(fd)
                    _append_line(fd, line)
                finally:
                    os.close(fd)
        except OSError as exc:
            log.error(
                "audit log %s cannot be written (%s): %s correlation_id=%s",
                self.path.name,
                exc.strerror or type(exc).__name__,
                event.get("outcome"),
                event.get("correlation_id"),
            )
            return False
        return True


def _lock_file(fd: int) -> None:
    """Hold the file while checking its end and appending (released when ``fd`` closes), so
    another gateway process cannot write between the two."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


def _append_line(fd: int, line: bytes) -> None:
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        # An earlier write stopped mid-line: end that fragment, or this line would be glued on.
        line = b"\n" + line
    written = 0
    while written < len(line):
        n = os.write(fd, line[written:])
        if n <= 0:
            raise OSError(errno.ENOSPC, "no space left for the audit line")
        written += n
