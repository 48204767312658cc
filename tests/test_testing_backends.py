"""The test-backend kit (gateway.testing.backends): real servers, fault modes, overrides, replays."""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.testing.backends import (
    FakeBackend,
    FaultMode,
    ReceivedRequest,
    RecordedBackend,
    Recording,
    Reply,
    closed_port_url,
)


def raw_request(
    url: str,
    method: str,
    target: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """Send ``target`` exactly as given (http.client does not normalize paths)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


class Echo(FakeBackend):
    def respond(self, request: ReceivedRequest) -> Reply:
        if request.path == "/boom":
            raise RuntimeError("a bug in the fake")
        return Reply.json({"path": request.path, "query": request.query, "json": request.json})


@pytest.fixture
def echo() -> Iterator[Echo]:
    with Echo() as backend:
        yield backend


def test_closed_port_url_refuses_connections():
    with pytest.raises(httpx.ConnectError):
        httpx.get(closed_port_url(), timeout=2)


def test_base_backend_answers_404_not_found():
    with FakeBackend() as backend:
        resp = httpx.get(backend.url + "/anything")
    assert resp.status_code == 404 and resp.json() == {"detail": "Not Found"}


def test_request_log_keeps_the_raw_path_query_body_and_headers(echo):
    status, _, _ = raw_request(
        echo.url,
        "POST",
        "/api/jobs/x/workspace/%2e%2e/../a?limit=5&q=two+words",
        body=b'{"feedback": "hi"}',
        headers={"Content-Type": "application/json", "X-Token": "t"},
    )
    assert status == 200
    (req,) = echo.requests
    assert req.method == "POST"
    assert req.path == "/api/jobs/x/workspace/%2e%2e/../a"
    assert req.target == "/api/jobs/x/workspace/%2e%2e/../a?limit=5&q=two+words"
    assert req.query == {"limit": "5", "q": "two words"}
    assert req.json == {"feedback": "hi"} and req.body == b'{"feedback": "hi"}'
    assert req.headers["x-token"] == "t"


def test_a_body_that_is_not_json_is_logged_raw(echo):
    raw_request(echo.url, "PUT", "/p", body=b"{not json")
    (req,) = echo.requests
    assert req.json is None and req.body == b"{not json"


def test_refuse_cuts_connections_then_listens_again_on_the_same_port(echo):
    with httpx.Client(base_url=echo.url, timeout=2) as client:
        assert client.get("/a").status_code == 200  # a keep-alive connection is now open
        port = echo.port
        echo.mode = FaultMode.REFUSE
        with pytest.raises(httpx.TransportError):
            client.get("/b")
        with pytest.raises(httpx.ConnectError):
            httpx.get(echo.url + "/c", timeout=2)
        echo.mode = "normal"
        assert echo.port == port
        assert client.get("/d").status_code == 200
    assert [r.path for r in echo.requests] == ["/a", "/d"]


def test_hang_reads_the_request_and_never_answers(echo):
    echo.mode = FaultMode.HANG
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(echo.url + "/slow", timeout=httpx.Timeout(2, read=0.3))
    assert [r.path for r in echo.requests] == ["/slow"]


def test_a_hanging_request_is_answered_once_the_mode_changes(echo):
    echo.mode = FaultMode.HANG
    result: dict[str, Any] = {}

    def call() -> None:
        result["resp"] = httpx.get(echo.url + "/held", timeout=10)

    thread = threading.Thread(target=call)
    thread.start()
    wait_for(lambda: len(echo.requests) == 1)
    echo.mode = FaultMode.NORMAL
    thread.join(5)
    assert result["resp"].json()["path"] == "/held"


def test_closing_the_server_releases_hanging_requests():
    backend = Echo().start()
    backend.mode = FaultMode.HANG
    errors: list[Exception] = []

    def call() -> None:
        try:
            httpx.get(backend.url + "/held", timeout=10)
        except httpx.TransportError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    wait_for(lambda: len(backend.requests) == 1)
    backend.close()
    thread.join(5)
    assert not thread.is_alive() and len(errors) == 1


def test_many_connections_opened_at_once_are_all_accepted_at_once(echo):
    # A client with a pool (the gateway's REST clients send 8 requests at once) connects all
    # at the same moment; none may wait for a dropped handshake to be retried.
    echo.mode = FaultMode.HANG
    socks = [socket.socket() for _ in range(64)]
    try:
        for s in socks:
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", echo.port))
        deadline = time.monotonic() + 0.5
        pending = list(socks)
        while pending and time.monotonic() < deadline:
            _, writable, _ = select.select([], pending, [], 0.05)
            pending = [s for s in pending if s not in writable]
        assert not pending, f"{len(pending)} of 64 connections not accepted within 0.5 s"
        assert all(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 for s in socks)
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize(
    ("mode", "status", "check"),
    [
        (FaultMode.ERROR, 500, lambda r: r.json() == {"detail": "Internal Server Error"}),
        (FaultMode.NULL, 200, lambda r: r.content == b"null" and r.json() is None),
        (FaultMode.GARBAGE, 200, lambda r: _not_json(r.content)),
    ],
)
def test_fault_modes_answer_every_route_the_same_way(echo, mode, status, check):
    echo.mode = mode
    for path in ("/a", "/b/c"):
        resp = httpx.post(echo.url + path, json={"x": 1})
        assert resp.status_code == status
        assert resp.headers["content-type"] == "application/json"
        assert check(resp)
    assert len(echo.requests) == 2


def _not_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return True
    return False


def test_an_override_answers_one_route_then_times_out(echo):
    echo.override("/a", Reply(418, b"teapot", {"Content-Type": "text/plain", "X-A": "1"}), times=1)
    first = httpx.get(echo.url + "/a")
    assert (first.status_code, first.text, first.headers["x-a"]) == (418, "teapot", "1")
    assert httpx.get(echo.url + "/a").status_code == 200  # back to respond()
    assert httpx.get(echo.url + "/b").status_code == 200


def test_an_override_can_be_limited_to_a_method_and_cleared(echo):
    echo.override("/a", Reply.json({"over": True}, 201), method="post")
    assert httpx.get(echo.url + "/a").json()["path"] == "/a"
    assert httpx.post(echo.url + "/a").status_code == 201
    echo.clear_overrides()
    assert httpx.post(echo.url + "/a").status_code == 200


def test_fault_modes_win_over_overrides(echo):
    echo.override("/a", Reply.json({"over": True}))
    echo.mode = FaultMode.ERROR
    assert httpx.get(echo.url + "/a").status_code == 500


def test_a_large_body_is_streamed_with_its_exact_length(echo):
    size = 5 * 1024 * 1024 + 7
    echo.override("/big", Reply.large(size))
    with httpx.stream("GET", echo.url + "/big") as resp:
        assert int(resp.headers["content-length"]) == size
        received = sum(len(chunk) for chunk in resp.iter_raw())
    assert received == size


def test_a_body_factory_without_length_is_sent_chunked(echo):
    echo.override("/c", Reply(200, lambda: iter([b'{"a":', b" 1", b"}"])))
    resp = httpx.get(echo.url + "/c")
    assert resp.headers["transfer-encoding"] == "chunked" and resp.json() == {"a": 1}


def test_a_slow_stream_stalls_between_chunks(echo):
    echo.override("/slow", Reply(200, b"0123456789", chunk_size=2, delay=0.5))
    with httpx.stream("GET", echo.url + "/slow", timeout=httpx.Timeout(5, read=0.1)) as resp:
        assert resp.status_code == 200  # the headers come at once
        with pytest.raises(httpx.ReadTimeout):
            resp.read()


def test_gzip_bodies_are_decoded_by_the_client(echo):
    echo.override("/z", Reply.gzip(b'{"zipped": true}'))
    resp = httpx.get(echo.url + "/z")
    assert resp.headers["content-encoding"] == "gzip" and resp.json() == {"zipped": True}


def test_a_gzip_bomb_is_small_on_the_wire_and_inflates_to_the_size_asked():
    size = 64 * 1024 * 1024
    reply = Reply.gzip_bomb(size)
    assert isinstance(reply.body, bytes) and len(reply.body) < size // 500
    inflater = zlib.decompressobj(31)
    total, first, last = 0, b"", b""
    for i in range(0, len(reply.body), 4096):
        out = inflater.decompress(reply.body[i : i + 4096])
        first = first or out[:1]
        last = out[-1:] or last
        total += len(out)
    assert (total, first, last) == (size, b'"', b'"')


def test_a_redirect_is_sent_as_given(echo):
    echo.override("/r", Reply.redirect("http://elsewhere.test/x", 307))
    resp = httpx.get(echo.url + "/r", follow_redirects=False)
    assert resp.status_code == 307 and resp.headers["location"] == "http://elsewhere.test/x"


def test_an_exception_in_the_fake_is_a_500_and_is_kept(echo):
    resp = httpx.get(echo.url + "/boom")
    assert resp.status_code == 500 and resp.json() == {"detail": "Internal Server Error"}
    assert "a bug in the fake" in echo.errors[0]
    assert httpx.get(echo.url + "/fine").status_code == 200


def test_latency_delays_every_answer_without_blocking_the_close():
    backend = Echo().start()
    backend.latency = 30
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(backend.url + "/x", timeout=httpx.Timeout(2, read=0.2))
    backend.close()  # returns although a handler is still inside its latency


@pytest.mark.anyio
async def test_async_context_manager_and_async_client():
    async with Echo() as backend, httpx.AsyncClient(base_url=backend.url) as client:
        resp = await client.get("/x", params={"a": 1})
        assert resp.json()["query"] == {"a": "1"}


# -- RecordedBackend ------------------------------------------------------------------------


def exchange(
    method: str,
    path: str,
    status: int,
    body: Any,
    query: dict[str, Any] | None = None,
    sent: Any = None,
) -> dict[str, Any]:
    return {
        "request": {
            "method": method,
            "path": path,
            "path_template": path,
            "query": query or {},
            "json": sent,
        },
        "response": {"status": status, "content_type": "application/json", "json": body},
    }


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    files = {
        "GET_api_jobs": exchange("GET", "/api/jobs", 200, [{"id": "a"}], {"limit": 20}),
        "GET_api_jobs__status_failed": exchange(
            "GET", "/api/jobs", 200, [], {"limit": 20, "status": "failed"}
        ),
        "POST_api_jobs_{job_id}_approve": exchange(
            "POST", "/api/jobs/j1/approve", 200, {"status": "approved"}
        ),
        "POST_api_jobs_{job_id}_approve__400_after_approve": exchange(
            "POST", "/api/jobs/j1/approve", 400, {"detail": "Job cannot be approved"}
        ),
        "POST_api_jobs_{job_id}_resume": exchange(
            "POST", "/api/jobs/j1/resume", 200, {"status": "resumed"}, sent={"feedback": "go"}
        ),
        "GET_api_jobs_{job_id}_workspace_{path}__encoded": exchange(
            "GET", "/api/jobs/j1/workspace/%2e%2e/x.md", 200, {"content": "sibling"}
        ),
    }
    for name, data in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    (tmp_path / "text.json").write_text(
        json.dumps(
            {
                "request": {"method": "GET", "path": "/t", "query": {"on": True}, "json": None},
                "response": {"status": 200, "content_type": "text/plain", "text": "plain"},
            }
        )
    )
    return tmp_path


def test_a_matching_request_gets_the_recorded_answer(recordings):
    with RecordedBackend(directory=recordings) as api:
        api.load("GET_api_jobs", "GET_api_jobs__status_failed")
        resp = httpx.get(api.url + "/api/jobs", params={"limit": 20})
        assert resp.status_code == 200 and resp.json() == [{"id": "a"}]
        assert httpx.get(api.url + "/api/jobs?status=failed&limit=20").json() == []
    assert [name for _, name in api.served] == ["GET_api_jobs", "GET_api_jobs__status_failed"]
    assert api.unmatched == []


def test_anything_else_is_a_404_kept_in_unmatched(recordings):
    with RecordedBackend(directory=recordings) as api:
        api.load("GET_api_jobs", "POST_api_jobs_{job_id}_resume")
        other_query = httpx.get(api.url + "/api/jobs", params={"limit": 21})
        assert other_query.status_code == 404
        detail = other_query.json()["detail"]
        assert "no recording matches GET /api/jobs?limit=21" in detail and "GET_api_jobs" in detail
        assert (
            httpx.post(api.url + "/api/jobs/j1/resume", json={"feedback": "no"}).status_code == 404
        )
        assert httpx.post(api.url + "/api/jobs/j1/resume").status_code == 404  # no body at all
        assert (
            httpx.post(api.url + "/api/jobs/j1/resume", json={"feedback": "go"}).status_code == 200
        )
    assert [r.target for r in api.unmatched] == [
        "/api/jobs?limit=21",
        "/api/jobs/j1/resume",
        "/api/jobs/j1/resume",
    ]


def test_the_raw_path_must_match_as_sent(recordings):
    with RecordedBackend(directory=recordings) as api:
        api.load("*workspace*")
        status, _, _ = raw_request(api.url, "GET", "/api/jobs/j1/workspace/%2e%2e/x.md")
        assert status == 200
        status, _, _ = raw_request(api.url, "GET", "/api/jobs/j1/workspace/../x.md")
        assert status == 404
        status, _, _ = raw_request(api.url, "GET", "/api/jobs/j1/workspace/%2E%2E/x.md")
        assert status == 404


def test_recordings_sharing_a_request_answer_in_the_order_activated(recordings):
    with RecordedBackend(directory=recordings) as api:
        api.load("POST_api_jobs_{job_id}_approve*")
        url = api.url + "/api/jobs/j1/approve"
        assert httpx.post(url).status_code == 200  # the first loaded answers by default
        assert httpx.post(url).status_code == 200
        api.activate(
            "POST_api_jobs_{job_id}_approve", "POST_api_jobs_{job_id}_approve__400_after_approve"
        )
        assert [httpx.post(url).status_code for _ in range(3)] == [200, 400, 400]
        api.activate("POST_api_jobs_{job_id}_approve")
        assert httpx.post(url).status_code == 200


def test_loading_by_file_path_text_bodies_and_boolean_queries(recordings):
    with RecordedBackend(Recording.from_file(recordings / "text.json")) as api:
        resp = httpx.get(api.url + "/t", params={"on": "true"})
        assert resp.text == "plain" and resp.headers["content-type"] == "text/plain"


def test_unknown_names_fail_loudly(recordings):
    api = RecordedBackend(directory=recordings)
    with pytest.raises(FileNotFoundError):
        api.load("GET_api_nothing")
    with pytest.raises(KeyError):
        api.activate("GET_api_jobs")
    with pytest.raises(FileNotFoundError):
        RecordedBackend().load("GET_api_jobs")


def test_a_recorded_backend_has_the_fault_modes_too(recordings):
    with RecordedBackend(directory=recordings) as api:
        api.load_all()
        api.mode = FaultMode.ERROR
        assert httpx.get(api.url + "/api/jobs", params={"limit": 20}).status_code == 500
        api.mode = FaultMode.NORMAL
        assert httpx.get(api.url + "/api/jobs", params={"limit": 20}).status_code == 200
