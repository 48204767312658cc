"""Append-only audit log of mutation calls (JSON Lines, one flushed line per event).

Two lines per call, sharing the correlation id: ``"outcome": "STARTED"`` before the handler
runs, and the outcome code (``OK`` or an error code) after. A crash between them leaves the
first, so an interrupted mutation is never invisible. The log fails closed: a mutation whose
``STARTED`` line cannot be written is refused before it runs. Argument *values* are never
written: only their names and shapes.
"""

from __future__ import annotations

import datetime as dt
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
        """Append one line; ``False`` (and an error in the log) when it could not be written."""
        record = {"time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"), **event}
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # O_APPEND: concurrent writers (two gateway processes) never interleave a line.
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, line.encode())
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
