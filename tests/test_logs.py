"""The log handler: never blocks the caller, and one repeated message cannot flood stderr."""

from __future__ import annotations

import logging
import os
import threading

from gateway.errors import Sanitizer
from gateway.logs import RateLimit, RedactingFormatter, StderrWriter


def _logger(handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"gateway.test.{id(handler)}")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return logger


def _read_all(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks).decode()


def test_a_repeated_message_is_rate_limited_and_the_rest_counted():
    read, write = os.pipe()
    handler = StderrWriter(write)
    handler.setFormatter(RedactingFormatter(Sanitizer()))
    clock = [0.0]
    limit = RateLimit(burst=5, window=60, clock=lambda: clock[0])
    handler.addFilter(limit)
    logger = _logger(handler)
    for i in range(1000):
        logger.warning("socket.accept() out of system resource (%d)", i)
    logger.warning("another message")
    handler.flush()
    text = _read_all(read)
    assert text.count("out of system resource") == 5
    assert "another message" in text
    clock[0] = 61.0  # the window passed
    logger.warning("socket.accept() out of system resource (%d)", 1000)
    handler.flush()
    assert "(995 more like this suppressed in the last 60 s)" in _read_all(read)
    handler.close()
    os.close(read)
    os.close(write)


def test_logging_never_blocks_on_a_stderr_nobody_reads():
    read, write = os.pipe()  # nobody reads: the pipe fills after ~64 KB
    handler = StderrWriter(write)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = _logger(handler)
    done = threading.Event()

    def flood() -> None:
        for i in range(50_000):  # ~10 MB
            logger.warning("line %d %s", i, "x" * 200)
        done.set()

    threading.Thread(target=flood, daemon=True).start()
    assert done.wait(30), "logging blocked on a full pipe"
    handler.flush()  # returns within its bound even though the pipe stays full
    assert _read_all(read)  # what fitted was written
    os.close(read)  # the writer thread then fails its write and gives up quietly
    handler.close()
    os.close(write)
