"""A REST backend's own words for a failure: its error body read into one short, sanitized reason.

A backend's answer with a status of 300 or more becomes a :class:`~gateway.GatewayError` whose
code says what the model can do about it (the table is :func:`gateway.errors.status_error`, which
this module hands on, with :class:`Failure` and :data:`StatusRule`, for plugins that import them
from here), and whose message carries the backend's own reason (FastAPI's ``{"detail": …}``,
Gitea's ``{"message": …}``, or a short text), sanitized, then bounded (database text never gets
through: see :meth:`gateway.errors.Sanitizer.backend_text`).
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import (
    FAILURE_FIELDS,
    Failure,
    Sanitizer,
    StatusRule,
    classify_exception,
    default_error,
    render,
    status_error,
    template_fields,
)

__all__ = [
    "FAILURE_FIELDS",
    "MAX_REASON_CHARS",
    "MAX_REASON_SOURCE",
    "Failure",
    "StatusRule",
    "backend_reason",
    "classify_exception",
    "default_error",
    "render",
    "status_error",
    "template_fields",
]

MAX_REASON_CHARS = 300
MAX_REASON_SOURCE = 16 * 1024  # characters of an error body read for its reason
_PLAIN = Sanitizer()


def backend_reason(body: Any, sanitizer: Sanitizer | None = None) -> str:
    """The backend's own words for a failure: one line, sanitized (database text becomes "the
    backend reported a database error"), then cut to ``MAX_REASON_CHARS``. ``sanitizer``: the
    gateway's, which knows the configured secrets; without it, one that knows none."""
    text = _reason_text(body)
    return (sanitizer or _PLAIN).backend_text(text, MAX_REASON_CHARS) if text else ""


def _reason_text(body: Any) -> str:
    if isinstance(body, bytes | bytearray):
        text = body[:MAX_REASON_SOURCE].decode("utf-8", "replace")
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            return text
    if isinstance(body, dict):
        for key in ("detail", "message", "error"):
            if key in body:
                return _detail(body[key])
        return ""
    if isinstance(body, str):
        return body[:MAX_REASON_SOURCE]
    return ""


def _detail(value: Any) -> str:
    # FastAPI request validation: [{"loc": ["query", "limit"], "msg": "…", …}, …]
    if isinstance(value, list):
        parts = []
        for item in value[:5]:
            if isinstance(item, dict):
                loc = [str(p) for p in item.get("loc", []) if p not in ("body", "query", "path")]
                msg = str(item.get("msg", ""))
                parts.append(f"{'.'.join(loc)}: {msg}" if loc else msg)
            else:
                parts.append(str(item))
        return "; ".join(parts)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
