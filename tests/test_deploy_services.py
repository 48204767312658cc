"""The services replicas share, as tests/services.py starts them: each answers, runs with its
data in a folder of its own and is gone (port closed, folder removed) after its block."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psycopg
import pytest
from services import Redis, free_port, haproxy, listening, postgres_server, redis_server

pytestmark = pytest.mark.e2e


def test_redis_answers_ping_and_keeps_a_value_until_it_stops():
    with redis_server() as redis:
        assert redis.command("PING") == b"+PONG"
        assert redis.command("SET", "replica", "r1") == b"+OK"
        assert redis.command("GET", "replica") == b"r1"
    assert not listening(redis.port)
    assert redis.folder is not None and not redis.folder.exists()


def test_redis_with_a_password_refuses_a_client_without_it():
    with redis_server(password="redis-test-pass-61c2") as redis:
        assert redis.command("PING") == b"+PONG"
        anonymous = Redis(redis.port)
        assert anonymous.command("PING").startswith(b"-NOAUTH")
        assert redis.url == f"redis://:redis-test-pass-61c2@127.0.0.1:{redis.port}/0"


def test_postgres_takes_its_superuser_with_the_password_and_no_other():
    with postgres_server() as pg:
        with psycopg.connect(pg.dsn, connect_timeout=10) as conn:
            conn.execute("CREATE TABLE audit (id serial PRIMARY KEY, tool text NOT NULL)")
            conn.execute("INSERT INTO audit (tool) VALUES (%s), (%s)", ("a", "b"))
            rows = conn.execute("SELECT tool FROM audit ORDER BY id").fetchall()
            assert rows == [("a",), ("b",)]
            assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
        wrong = pg.dsn.replace(pg.password, "not-the-password")
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(wrong, connect_timeout=10)
        if os.geteuid() == 0:  # PostgreSQL refuses root: the server runs as another user
            status = Path(f"/proc/{pg.pid}/status").read_text()
            uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
            assert uid != "0" and pg.runs_as in ("postgres", "nobody")
    assert not listening(pg.port)
    assert pg.folder is not None and not pg.folder.exists()


@contextmanager
def named_server(name: str) -> Iterator[int]:
    """A trivial HTTP server answering its name, on a free loopback port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = name.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            # A health check may close as soon as it has the status line.
            with contextlib.suppress(ConnectionError):
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _statuses(client: httpx.Client, url: str) -> dict[str, str]:
    rows = csv.DictReader(io.StringIO(client.get(url).text.lstrip("# ")))
    return {
        r["svname"]: r["status"]
        for r in rows
        if r["pxname"] == "replicas" and r["svname"] not in ("FRONTEND", "BACKEND")
    }


def test_haproxy_balances_over_its_backends():
    with (
        named_server("one") as one,
        named_server("two") as two,
        haproxy([("127.0.0.1", one), ("127.0.0.1", two)]) as lb,
        httpx.Client(timeout=10) as client,
    ):
        seen = [client.get(lb.url + "/").text for _ in range(4)]
        statuses = _statuses(client, lb.stats_url)
    assert sorted(seen) == ["one", "one", "two", "two"]  # round robin
    assert set(statuses) == {"r0", "r1"}


def test_haproxy_tries_a_refused_connection_again_on_another_backend():
    nothing = free_port()  # nobody listens there: every connection to it is refused
    with (
        named_server("one") as one,
        haproxy([("127.0.0.1", nothing), ("127.0.0.1", one)]) as lb,
        httpx.Client(timeout=10) as client,
    ):
        answers = [client.get(lb.url + "/") for _ in range(4)]
    # Round robin sends every other request to the refusing one: retried, none lost.
    assert [(a.status_code, a.text) for a in answers] == [(200, "one")] * 4


def test_haproxy_health_checks_take_a_backend_that_does_not_answer_out():
    nothing = free_port()  # nobody listens there
    with named_server("up") as up, httpx.Client(timeout=10) as client:
        backends = [("127.0.0.1", up), ("127.0.0.1", nothing)]
        with haproxy(backends, health_path="/healthz", health_host="gw.example") as lb:
            deadline = time.monotonic() + 30
            while (statuses := _statuses(client, lb.stats_url)) != {"r0": "UP", "r1": "DOWN"}:
                assert time.monotonic() < deadline, statuses
                time.sleep(0.2)
            assert [client.get(lb.url + "/").text for _ in range(3)] == ["up"] * 3
        assert "http-check send meth GET uri /healthz hdr Host gw.example" in lb.config
