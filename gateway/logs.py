"""Logging to stderr only (stdout is the stdio transport), redacted on the way out."""

from __future__ import annotations

import logging
import re
import sys

from .errors import Sanitizer

_HANDLER_NAME = "mcp-gateway-stderr"


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

    def __init__(self, sanitizer: Sanitizer, *, debug: bool = False) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.sanitizer = sanitizer
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        if self.debug:
            return escape_controls(self.sanitizer.redact_secrets(line), keep_newlines=True)
        return escape_controls(self.sanitizer(line, max_chars=4000))


def configure_logging(sanitizer: Sanitizer, *, level: str = "INFO", debug: bool = False) -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        if h.get_name() == _HANDLER_NAME:
            root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(RedactingFormatter(sanitizer, debug=debug))
    root.addHandler(handler)
    root.setLevel(level.upper() if not debug else "DEBUG")
    # The SDK and uvicorn are chatty at INFO (one line per request); keep their warnings.
    for name in ("mcp", "uvicorn.access", "httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
