"""HTTP connections: half-sent requests cannot lock authorised clients out."""

from __future__ import annotations

import resource
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from conftest import gateway_env
from wire import MCP_HEADERS, HttpServer, free_port

from gateway import connections
from gateway.connections import GuardedH11Protocol
from gateway.http import build_http_app
from gateway.testing import make_gateway

TOKEN = "limits-test-token-77c1"
HALF_SENT = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


@pytest.mark.e2e
def test_300_half_sent_requests_do_not_lock_out_an_authorised_client(tmp_path):
    env = gateway_env(MCP_GATEWAY_TOKEN=TOKEN, MCP_GATEWAY_PLUGINS="notes")
    with HttpServer(tmp_path, env, preexec_fn=_few_descriptors) as server:
        attackers = []
        try:
            for _ in range(300):
                s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                s.sendall(HALF_SENT)
                attackers.append(s)
            time.sleep(1)
            for _ in range(3):
                answer = server.rpc("tools/list", Authorization=f"Bearer {TOKEN}")
                assert answer.status_code == 200, answer.text
                assert answer.json()["result"]["tools"]
        finally:
            for s in attackers:
                s.close()
        time.sleep(0.5)
        assert server.proc.poll() is None
        assert len(server.stderr()) < 20_000  # no flood of accept() errors


@pytest.fixture
def guarded_server(tmp_path, monkeypatch) -> Iterator[int]:
    """The gateway's HTTP app on uvicorn with the guarded protocol, in a thread of this
    process (so the limits can be made small)."""
    monkeypatch.setattr(connections, "REQUEST_TIMEOUT", 0.5)
    monkeypatch.setattr(GuardedH11Protocol, "limit", 4)
    port = free_port()
    gw = make_gateway(plugins=[], cwd=tmp_path)
    config = uvicorn.Config(
        build_http_app(gw, port=port),
        host="127.0.0.1",
        port=port,
        http=GuardedH11Protocol,
        log_config=None,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def _closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_request_that_does_not_arrive_in_time_is_closed(guarded_server):
    slow = socket.create_connection(("127.0.0.1", guarded_server))
    slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1")
    assert _closed_by_server(slow, within=5)
    silent = socket.create_connection(("127.0.0.1", guarded_server))
    assert _closed_by_server(silent, within=5)
    ok = httpx.get(f"http://127.0.0.1:{guarded_server}/healthz", timeout=5)
    assert ok.json() == {"status": "ok"}


def test_at_the_connection_limit_the_oldest_half_sent_request_makes_room(
    guarded_server, monkeypatch
):
    monkeypatch.setattr(connections, "REQUEST_TIMEOUT", 5.0)  # only the limit closes them here
    half = []
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", guarded_server))
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        half.append(s)
        time.sleep(0.02)
    ok = httpx.post(
        f"http://127.0.0.1:{guarded_server}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers=MCP_HEADERS,
        timeout=5,
    )
    assert ok.status_code == 200
    assert _closed_by_server(half[0], within=0.2)  # the oldest went
    assert not _closed_by_server(half[-1], within=0.05)  # the newest is still waiting
    for s in half:
        s.close()
