"""Raw HTTP against the fake: the path goes out exactly as written."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlencode

from gateway_orchestrator_testing import FakeOrchestrator


def send(
    api: FakeOrchestrator,
    method: str,
    path: str,
    query: dict[str, Any] | None = None,
    body: Any = None,
    *,
    raw_body: bytes | None = None,
) -> tuple[int, Any]:
    """One request with ``path`` sent exactly as given (http.client leaves ``..`` and
    percent-encoding alone, unlike httpx); returns the status and the decoded JSON body."""
    target = path + ("?" + urlencode(query) if query else "")
    data = (
        raw_body if raw_body is not None else (None if body is None else json.dumps(body).encode())
    )
    headers = {"Content-Type": "application/json"} if data is not None else {}
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    try:
        conn.request(method, target, body=data, headers=headers)
        resp = conn.getresponse()
        payload = resp.read()
        return resp.status, json.loads(payload) if payload else None
    finally:
        conn.close()
