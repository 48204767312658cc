"""Real HTTP test backends on 127.0.0.1 whose behaviour a test can switch at run time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gateway.testing.backends import closed_port_url

__all__ = ["SwitchableBackend", "backend", "closed_port_url"]


class SwitchableBackend:
    """``mode``: ``ok`` (200 JSON), ``error`` (500), ``hang`` (accept, never answer)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests = 0
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                backend.requests += 1
                if backend.mode == "hang":
                    time.sleep(30)
                    return
                if backend.mode == "error":
                    body, status = b'{"detail": "boom"}', 500
                else:
                    body, status = json.dumps({"value": 42, "path": self.path}).encode(), 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> SwitchableBackend:
        # A short poll: shutdown() waits for the serve loop to notice, 0.5 s by default.
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def backend() -> Iterator[SwitchableBackend]:
    with SwitchableBackend() as b:
        yield b
