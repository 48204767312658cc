"""A fake of the small tasks API the REST plugins of this folder call: a real HTTP server on
127.0.0.1, standard library only (the FastMCP check runs it in a venv without the gateway).

    GET  /tasks?done=&limit=   {"tasks": [Task, ...], "total": n}   newest first
    GET  /tasks/{id}           Task, or 404 {"detail": "Not Found"}
    POST /tasks {title, due}   the new Task (201)
    GET  /health               200 {"status": "ok"}

A Task is ``{"id": int, "title": str, "done": bool, "due": str | null}``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


class TasksApi(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tasks: dict[int, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        self.requests.append((method, path, query, body))
        if path == "/health":
            return 200, {"status": "ok"}
        if path == "/tasks" and method == "POST":
            task = {"id": len(self.tasks) + 1, "title": body["title"], "done": False}
            task["due"] = body.get("due")
            self.tasks[task["id"]] = task
            return 201, task
        if path == "/tasks" and method == "GET":
            rows = [t for t in reversed(self.tasks.values()) if _matches(t, query.get("done"))]
            return 200, {"tasks": rows[: int(query.get("limit", 20))], "total": len(rows)}
        task_id = path.removeprefix("/tasks/")
        if method == "GET" and task_id.isdigit() and int(task_id) in self.tasks:
            return 200, self.tasks[int(task_id)]
        return 404, {"detail": "Not Found"}


def _matches(task: dict[str, Any], done: str | None) -> bool:
    return done is None or task["done"] == (done == "true")


class _Handler(BaseHTTPRequestHandler):
    server: TasksApi

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        url = urlsplit(self.path)
        size = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(size)) if size else None
        status, data = self.server.answer(self.command, url.path, dict(parse_qsl(url.query)), body)
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = _handle


@contextmanager
def serving() -> Iterator[TasksApi]:
    """The API, served from a background thread until the block ends."""
    api = TasksApi()
    thread = threading.Thread(target=api.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        api.shutdown()
        api.server_close()
        thread.join()
