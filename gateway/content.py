"""MCP content for plugins: tool results of any content type, and prompt messages.

A tool's handler that returns a pydantic model or a dict gets the gateway's JSON result
(``structuredContent`` and the same JSON as text). One that returns a :class:`ToolResult`
chooses its content blocks itself, made with the helpers here::

    return ToolResult([text("The chart:"), image(png_bytes, "image/png")])

A prompt's render function may return a list of :func:`message` instead of its text. A block
is the protocol's JSON (``{"type": "image", "data": …, "mimeType": …}``) in a small frozen
object; the ``mcp`` SDK checks it when the result is sent, and nothing here imports the SDK,
so a plugin importing ``gateway`` stays cheap. The core still cleans what leaves (configured
secrets redacted from every string, an error's text sanitized like any error message) and
bounds it (:data:`MAX_CONTENT_BYTES`, :data:`MAX_BLOCKS`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: A tool result, a prompt's messages or a resource's contents may be at most this large as
#: JSON (base64 included): a mounted server's message has the same limit.
MAX_CONTENT_BYTES = 8 * 1024 * 1024
#: One message from a server (a mounted one, a plugin's worker) may be at most this long: a
#: line on stdio, an event over HTTP. Here, not in :mod:`gateway.upstream`, so that a worker,
#: which must not send more, learns it without importing the client side.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
#: A tool result or a prompt holds at most this many content blocks.
MAX_BLOCKS = 1000

__all__ = [
    "MAX_BLOCKS",
    "MAX_CONTENT_BYTES",
    "Content",
    "Message",
    "ToolResult",
    "audio",
    "embedded",
    "image",
    "link",
    "message",
    "text",
]


@dataclass(frozen=True)
class Content:
    """One content block, as the protocol's JSON. Make it with :func:`text`, :func:`image`,
    :func:`audio`, :func:`embedded` or :func:`link`."""

    block: Mapping[str, Any]

    def wire(self) -> dict[str, Any]:
        return dict(self.block)


def text(value: str) -> Content:
    """A text block."""
    if not isinstance(value, str):
        raise TypeError(f"text() takes a str, not {type(value).__name__}")
    return Content({"type": "text", "text": value})


def image(data: bytes, mime_type: str) -> Content:
    """An image block of raw bytes (``image/png``, ``image/jpeg`` …); the core base64-encodes."""
    return Content({"type": "image", "data": _base64(data), "mimeType": mime_type})


def audio(data: bytes, mime_type: str) -> Content:
    """An audio block of raw bytes (``audio/wav``, ``audio/mpeg`` …)."""
    return Content({"type": "audio", "data": _base64(data), "mimeType": mime_type})


def embedded(
    uri: str, *, text: str | None = None, blob: bytes | None = None, mime_type: str | None = None
) -> Content:
    """A resource's contents inside the result: its ``text``, or the raw bytes of ``blob``."""
    return Content({"type": "resource", "resource": contents(uri, text, blob, mime_type)})


def contents(
    uri: str, text: str | None, blob: bytes | None, mime_type: str | None
) -> dict[str, Any]:
    """A resource's contents as JSON (``TextResourceContents`` or ``BlobResourceContents``)."""
    if (text is None) == (blob is None):
        raise ValueError("a resource's contents are exactly one of text or blob")
    out: dict[str, Any] = {"uri": uri}
    if mime_type is not None:
        out["mimeType"] = mime_type
    if text is not None:
        if not isinstance(text, str):
            raise TypeError(f"text is a str, not {type(text).__name__}")
        out["text"] = text
    else:
        assert blob is not None
        out["blob"] = _base64(blob)
    return out


def link(
    uri: str, name: str, *, description: str | None = None, mime_type: str | None = None
) -> Content:
    """A link to a resource the client may read (``resources/read``) instead of its contents."""
    block: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
    if description is not None:
        block["description"] = description
    if mime_type is not None:
        block["mimeType"] = mime_type
    return Content(block)


@dataclass(frozen=True)
class Message:
    """One message of a prompt: who says it and one content block."""

    role: Literal["user", "assistant"]
    content: Content

    def wire(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content.wire()}


def message(content: Content | str, role: Literal["user", "assistant"] = "user") -> Message:
    """One message of a prompt: a content block (a plain string is a text block)."""
    if role not in ("user", "assistant"):
        raise ValueError(f"a message's role is 'user' or 'assistant', not {role!r}")
    return Message(role, text(content) if isinstance(content, str) else content)


def _base64(data: bytes) -> str:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"expected the raw bytes, got {type(data).__name__}")
    return base64.b64encode(bytes(data)).decode("ascii")


def blocks(items: Sequence[Content | str], what: str) -> list[dict[str, Any]]:
    """The JSON of ``items`` (a string is a text block); ``TypeError``/``ValueError`` saying
    what is wrong, naming ``what`` holds them."""
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise TypeError(f"{what} is a list of content blocks")
    if len(items) > MAX_BLOCKS:
        raise ValueError(f"{what} has {len(items)} content blocks, over the {MAX_BLOCKS} allowed")
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(text(item).wire())
        elif isinstance(item, Content):
            out.append(item.wire())
        else:
            raise TypeError(
                f"{what} holds a {type(item).__name__}; use text(), image(), audio(), "
                "embedded() or link()"
            )
    return out


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def size_over(text: str, limit: int) -> int | None:
    """``text``'s size in UTF-8 bytes when it is over ``limit``, else ``None``: what a bound
    counts, since a line or an HTTP body carries bytes (a character is one to four). Encoded
    only when its length leaves it in doubt; a lone surrogate counts as the three bytes of the
    U+FFFD that replaces it."""
    if len(text) * 4 <= limit:
        return None
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return size if size > limit else None


@dataclass(frozen=True)
class ToolResult:
    """A tool's result as MCP content: the blocks (a plain string is a text block),
    optionally ``structured`` JSON (checked against the tool's output model when it has one),
    and ``is_error`` for a failure told with content. A failure the model should act on is
    better raised as :class:`~gateway.GatewayError` (one structured error for every tool)."""

    content: Sequence[Content | str]
    structured: dict[str, Any] | None = None
    is_error: bool = False

    def wire(self) -> dict[str, Any]:
        """The ``CallToolResult`` as JSON; ``TypeError``/``ValueError`` for what is not content."""
        out: dict[str, Any] = {"content": blocks(self.content, "ToolResult.content")}
        if self.structured is not None:
            if not isinstance(self.structured, dict):
                raise TypeError("ToolResult.structured is a JSON object (a dict)")
            out["structuredContent"] = self.structured
        if self.is_error:
            out["isError"] = True
        return out
