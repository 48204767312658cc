"""A backend's answer body, bounded before anything is built from it.

- :class:`BoundedDecoder` undoes the ``Content-Encoding`` layers itself, pulling at most a small
  step through every layer, so no stage ever holds more than the cap: ``gzip, gzip`` (1.8 KB on
  the wire, gigabytes after two inflations) costs no more than a plain answer of the cap.
- :func:`json_values` counts the JSON values of a body before it is parsed (strings set aside,
  in C), so an answer of millions of ``{}`` is refused before millions of objects exist.
- :func:`decode_json` parses, with the count checked first for bodies that could exceed it.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import Sanitizer

#: The codings asked for (``Accept-Encoding``) and undone here; others are refused.
ACCEPT_ENCODING = "gzip, deflate"
MAX_CODINGS = 4  # layers of Content-Encoding undone; a server applies one
_STEP = 64 * 1024  # bytes pulled through a layer at a time


class DecodingFailed(Exception):
    """The body is not what its ``Content-Encoding`` says (or uses a coding not asked for)."""


class _Layer:
    """One zlib layer (gzip or deflate) that hands out its output ``_STEP`` bytes at a time."""

    def __init__(self, coding: str, source: Callable[[], bytes]) -> None:
        self.coding = coding
        self.source = source
        self.pending = b""  # input not inflated yet
        self.full = False  # the last output filled a step: zlib may hold more of it
        self.inflater: Any = None  # zlib's Decompress, which typeshed does not export
        self.done = False  # the stream ended; what follows it is ignored

    def _more(self) -> bool:
        more = self.source()
        self.pending += more
        return bool(more)

    def _begin(self) -> bool:
        """Start inflating at ``pending`` (a new stream, or a gzip body's next member); False
        when the source has not sent enough yet to tell how."""
        while len(self.pending) < 2:
            if not self._more():
                return False
        if self.coding == "gzip":
            if self.inflater is not None and not self.pending.startswith(b"\x1f\x8b"):
                self.done = True  # trailing bytes after the last member
                return True
            wbits = zlib.MAX_WBITS | 16
        elif self.inflater is not None:
            self.done = True  # a deflate stream has one member
            return True
        else:
            # "deflate" is meant to be zlib-wrapped; some servers send it raw.
            first, second = self.pending[0], self.pending[1]
            wrapped = first & 0x0F == 8 and (first << 8 | second) % 31 == 0
            wbits = zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS
        self.inflater = zlib.decompressobj(wbits)
        return True

    def read(self) -> bytes:
        """At most ``_STEP`` decoded bytes; empty when the source has nothing more for now."""
        while True:
            if self.done:
                self.pending = b""
                if not self.source():
                    return b""
                continue
            if not self.pending and not self.full and not self._more():
                return b""
            if (self.inflater is None or self.inflater.eof) and not self._begin():
                return b""
            if self.done:
                continue
            try:
                out: bytes = self.inflater.decompress(self.pending, _STEP)
            except zlib.error as exc:
                raise DecodingFailed(f"invalid {self.coding} data") from exc
            if self.inflater.eof:
                self.pending, self.full = self.inflater.unused_data, False
            else:
                self.pending, self.full = self.inflater.unconsumed_tail, len(out) == _STEP
            if out:
                return out

    def finish(self) -> None:
        if self.pending or (self.inflater is not None and not self.inflater.eof):
            raise DecodingFailed(f"truncated {self.coding} data")


class BoundedDecoder:
    """Decodes a body chunk by chunk through its ``Content-Encoding`` layers (listed in the
    order they were applied), never more than ``_STEP`` bytes in flight at any layer."""

    def __init__(self, codings: list[str]) -> None:
        names = [c.strip().lower() for c in codings if c.strip()]
        names = ["gzip" if n == "x-gzip" else n for n in names if n != "identity"]
        unknown = sorted({n for n in names if n not in ("gzip", "deflate")})
        if unknown:
            raise DecodingFailed(f"Content-Encoding {', '.join(unknown)}, which was not asked for")
        if len(names) > MAX_CODINGS:
            raise DecodingFailed(f"{len(names)} layers of Content-Encoding")
        self._raw: list[bytes] = []
        self._layers: list[_Layer] = []
        source: Callable[[], bytes] = self._next_raw
        for name in reversed(names):  # the last coding applied is undone first
            layer = _Layer(name, source)
            self._layers.append(layer)
            source = layer.read
        self._read = source

    def _next_raw(self) -> bytes:
        return self._raw.pop(0) if self._raw else b""

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        """The decoded bytes this raw chunk completes, step by step (stop iterating once
        enough was read: nothing more is decoded)."""
        if not self._layers:
            if chunk:
                yield chunk
            return
        self._raw.append(chunk)
        while True:
            out = self._read()
            if not out:
                return
            yield out

    def finish(self) -> None:
        """Raise when the body ended inside an encoded stream."""
        for layer in self._layers:
            layer.finish()


# --- counting before parsing ------------------------------------------------------------------

_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"')


def json_values(body: bytes) -> int:
    """How many JSON values ``body`` holds (the document, each array element, each member's
    value), counted on the bytes: strings are set aside, then separators and containers
    counted. Exact for any JSON whose empty containers are written ``{}``/``[]``; at most one
    too many per empty container written with a space inside."""
    bare = _STRING.sub(b"", body) if b'"' in body else body
    opened = bare.count(b"{") + bare.count(b"[")
    return 1 + bare.count(b",") + opened - bare.count(b"{}") - bare.count(b"[]")


class TooManyValues(Exception):
    """The body holds more JSON values than allowed (counted before parsing)."""


class TooDeep(Exception):
    """The body nests deeper than the parser goes."""


def decode_json(body: bytes, max_values: int) -> Any:
    """The JSON document in ``body``; :class:`TooManyValues` past ``max_values`` (a body too
    short to hold that many is not counted: every value takes at least two bytes with its
    separator), :class:`TooDeep` past the parser's nesting, ``ValueError`` if not JSON."""
    if len(body) > 2 * max_values:
        # Cheap bound first: separators and brackets, strings included.
        rough = body.count(b",") + body.count(b"{") + body.count(b"[") + 1
        if rough > max_values and json_values(body) > max_values:
            raise TooManyValues
    try:
        return json.loads(body)
    except RecursionError:
        raise TooDeep from None


# The backend's own words for a failure: its error body read into one short, sanitized reason
# (FastAPI's {"detail": …}, Gitea's {"message": …}, or a short text), then bounded; database
# text never gets through (see gateway.errors.Sanitizer.backend_text). The code a status maps
# to is gateway.errors.status_error's.

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
