"""Logging to stderr only (stdout is the stdio transport), redacted on the way out."""

from __future__ import annotations

import logging
import sys

from .errors import Sanitizer

_HANDLER_NAME = "mcp-gateway-stderr"


class RedactingFormatter(logging.Formatter):
    """Formats the record, then runs the whole line (exception text included) through the
    sanitizer. In debug mode only credentials are removed, so tracebacks stay readable."""

    def __init__(self, sanitizer: Sanitizer, *, debug: bool = False) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.sanitizer = sanitizer
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        if self.debug:
            return self.sanitizer.redact_secrets(line)
        return self.sanitizer(line, max_chars=4000)


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
