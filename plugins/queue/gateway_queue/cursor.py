"""Opaque page cursors for ``bulk_read_new_jobs``.

A cursor is the keyset ``(captured_at, id)`` of the last row of a page, as compact JSON with a
version, followed by a checksum, in unpadded URL-safe base64. It is not a secret; the checksum
only makes a truncated, edited or made-up cursor fail loudly instead of silently skipping or
repeating rows. Decoding is strict: the string must be exactly what :func:`encode_cursor`
produces for the keyset it decodes to.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Keyset

VERSION = 1
MAX_CURSOR_CHARS = 4096
_CHECKSUM_CHARS = 16
_INT64 = (-(2**63), 2**63 - 1)


class CursorError(ValueError):
    """The cursor is not one this tool issued."""


def _checksum(body: bytes) -> str:
    return hashlib.sha256(b"gateway-queue/new-jobs-cursor\x00" + body).hexdigest()[:_CHECKSUM_CHARS]


def _body(key: Keyset) -> bytes:
    captured: Any = key.captured_at
    if isinstance(captured, bytes):  # a BLOB captured_at in a legacy row; keep it exact
        captured = {"hex": captured.hex()}
    doc = {"v": VERSION, "c": captured, "i": key.id}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=True).encode()


def encode_cursor(key: Keyset) -> str:
    body = _body(key)
    raw = body + b"." + _checksum(body).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str) -> Keyset:
    """The keyset a cursor stands for; raises :class:`CursorError` for anything else."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise CursorError("empty or too long")
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise CursorError("not base64") from None
    body, sep, checksum = raw.rpartition(b".")
    if not sep or checksum != _checksum(body).encode():
        raise CursorError("checksum mismatch")
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise CursorError("not JSON") from None
    if not isinstance(doc, dict) or set(doc) != {"v", "c", "i"} or doc["v"] != VERSION:
        raise CursorError("unknown layout")
    ident, captured = doc["i"], doc["c"]
    if type(ident) is not int or not _INT64[0] <= ident <= _INT64[1]:
        raise CursorError("bad id")
    if isinstance(captured, dict):
        if set(captured) != {"hex"} or not isinstance(captured["hex"], str):
            raise CursorError("bad captured_at")
        try:
            captured = bytes.fromhex(captured["hex"])
        except ValueError:
            raise CursorError("bad captured_at") from None
    elif captured is not None and not isinstance(captured, str):
        raise CursorError("bad captured_at")
    from .store import Keyset  # the store with the first page read, not with the plugin

    key = Keyset(captured_at=captured, id=ident)
    if encode_cursor(key) != cursor:  # one spelling per keyset: no equivalent variants
        raise CursorError("not canonical")
    return key
