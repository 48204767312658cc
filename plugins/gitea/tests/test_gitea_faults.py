"""Gitea down, slow, refusing credentials, failing or answering null: each a clean error.

Each case runs against its own server (or a closed port), never the shared one.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from gateway_gitea_testing import OWNER, TOKEN, FakeGitea, Site

pytestmark = pytest.mark.anyio

UNAVAILABLE = "Gitea is not available — git history tools require a running Gitea instance"


def all_calls(job: str) -> dict[str, dict[str, object]]:
    return {
        "list_job_commits": {"job_id": job, "since_ref": "phase_2_end"},
        "get_job_diff": {"job_id": job, "base": "job-frozen"},
        "get_job_file": {"job_id": job, "file_path": "workspace.md", "ref": "phase_1_end"},
        "list_job_files": {"job_id": job, "path": "output"},
        "list_job_tags": {"job_id": job},
    }


@pytest.fixture
def private_gitea(site: Site) -> Iterator[FakeGitea]:
    """The same repositories behind a server this test may break."""
    with FakeGitea(
        repos={f"{OWNER}/job-{site.job}": site.repo.path}, token=TOKEN, users={"reviewer": "pw"}
    ) as gitea:
        yield gitea


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_gitea_down_is_backend_unavailable_for_every_tool(gateway_factory, site: Site):
    url = f"http://127.0.0.1:{closed_port()}"
    gw = gateway_factory(
        plugins=["gitea"],
        plugin_config={"gitea": {"url": url, "token": TOKEN}},
        env={},
        breaker_failures=100,
    )
    async with gw:
        for name, args in all_calls(site.job).items():
            result = await gw.call(name, args)
            assert result.code == "BACKEND_UNAVAILABLE", (name, result.payload)
            assert result.payload["error"]["message"] == UNAVAILABLE
            assert result.payload["error"]["retryable"] is True
        health = await gw.health.run(plugin="gitea", use_cache=False)
    assert health[0].status == "failed" and UNAVAILABLE in (health[0].detail or "")


async def test_repeated_connection_failures_open_the_breaker(gateway_factory, site: Site):
    url = f"http://127.0.0.1:{closed_port()}"
    gw = gateway_factory(
        plugins=["gitea"], plugin_config={"gitea": {"url": url}}, env={}, breaker_failures=2
    )
    async with gw:
        for _ in range(2):
            await gw.call("list_job_tags", {"job_id": site.job})
        paused = await gw.call("list_job_tags", {"job_id": site.job})
    assert paused.code == "BACKEND_UNAVAILABLE"
    assert "paused" in paused.payload["error"]["message"]


async def test_slow_gitea_times_out_within_the_request_timeout(
    gateway_factory, private_gitea, site: Site
):
    private_gitea.delay = 3.0
    gw = gateway_factory(
        plugins=["gitea"],
        plugin_config={"gitea": {"url": private_gitea.url, "token": TOKEN, "request_timeout": 0.3}},
        env={},
        breaker_failures=100,
    )
    async with gw:
        for name in ("list_job_tags", "get_job_diff"):
            result = await gw.call(name, all_calls(site.job)[name])
            assert result.code == "TIMEOUT", result.payload
            assert "0.3 s" in result.payload["error"]["message"]
            assert result.payload["error"]["retryable"] is True


async def test_slow_gitea_hits_the_tool_timeout_first(gateway_factory, private_gitea, site: Site):
    private_gitea.delay = 3.0
    gw = gateway_factory(
        plugins=["gitea"],
        plugin_config={"gitea": {"url": private_gitea.url, "token": TOKEN}},
        env={},
        default_timeout=0.4,
    )
    async with gw:
        result = await gw.call("get_job_file", all_calls(site.job)["get_job_file"])
    assert result.code == "TIMEOUT" and "get_job_file" in result.payload["error"]["message"]


async def test_bad_token_is_refused_and_never_echoed(
    gateway_factory, private_gitea, site: Site, caplog
):
    bad = "wrong-token-0123456789abcdef"
    gw = gateway_factory(
        plugins=["gitea"], plugin_config={"gitea": {"url": private_gitea.url, "token": bad}}, env={}
    )
    caplog.set_level(logging.DEBUG)
    async with gw:
        results = [await gw.call(n, a) for n, a in all_calls(site.job).items()]
        health = await gw.health.run(plugin="gitea", use_cache=False)
    for result in results:
        assert result.code == "PERMISSION_DENIED", result.payload
        assert "refused the credentials" in result.payload["error"]["message"]
        assert bad not in result.text()
    assert health[0].status == "failed" and "401" in (health[0].detail or "")
    assert bad not in caplog.text


async def test_anonymous_access_refused_by_a_sign_in_only_server(
    gateway_factory, private_gitea, site: Site
):
    private_gitea.require_signin = True
    gw = gateway_factory(
        plugins=["gitea"], plugin_config={"gitea": {"url": private_gitea.url}}, env={}
    )
    async with gw:
        result = await gw.call("list_job_tags", {"job_id": site.job})
    assert (
        result.code == "PERMISSION_DENIED" and "GITEA_TOKEN" in result.payload["error"]["message"]
    )


async def test_basic_auth_with_user_and_password(gateway_factory, private_gitea, site: Site):
    good = {"url": private_gitea.url, "user": "reviewer", "password": "pw"}
    bad = {**good, "password": "not-the-password"}
    async with gateway_factory(plugins=["gitea"], plugin_config={"gitea": good}, env={}) as gw:
        ok = await gw.call("list_job_tags", {"job_id": site.job})
    async with gateway_factory(plugins=["gitea"], plugin_config={"gitea": bad}, env={}) as gw:
        refused = await gw.call("list_job_tags", {"job_id": site.job})
    assert not ok.is_error and ok.payload["count"] == 6
    assert refused.code == "PERMISSION_DENIED"
    assert "not-the-password" not in refused.text()


@pytest.mark.parametrize("fault", ["500", "null"])
async def test_server_errors_and_null_bodies_are_backend_errors(
    gateway_factory, private_gitea, site: Site, fault
):
    private_gitea.fault = fault
    gw = gateway_factory(
        plugins=["gitea"],
        plugin_config={"gitea": {"url": private_gitea.url, "token": TOKEN}},
        env={},
    )
    async with gw:
        for name, args in all_calls(site.job).items():
            result = await gw.call(name, args)
            assert result.code == "BACKEND_ERROR", (name, result.payload)
            message = result.payload["error"]["message"]
            assert ("HTTP 500" in message) if fault == "500" else ("null" in message)
            assert result.payload["error"]["retryable"] is True
        health = await gw.health.run(plugin="gitea", use_cache=False)
    assert health[0].status == "failed"


async def test_not_gitea_at_all_is_a_backend_error(gateway_factory, site: Site):
    """GITEA_URL pointing at some other web server: HTML, not JSON."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Html(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html>hello</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Html)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        gw = gateway_factory(plugins=["gitea"], plugin_config={"gitea": {"url": url}}, env={})
        async with gw:
            result = await gw.call("list_job_tags", {"job_id": site.job})
    finally:
        server.shutdown()
        server.server_close()
    assert result.code == "BACKEND_ERROR" and "not JSON" in result.payload["error"]["message"]


@pytest.mark.parametrize("engine", ["git", "difflib"])
async def test_content_that_does_not_match_its_sha_is_refused(
    gateway_factory, private_gitea, site: Site, engine
):
    private_gitea.fault = "tamper"
    config = {"url": private_gitea.url, "token": TOKEN, "diff_engine": engine}
    gw = gateway_factory(plugins=["gitea"], plugin_config={"gitea": config}, env={})
    async with gw:
        result = await gw.call("get_job_diff", {"job_id": site.job, "base": "job-frozen"})
    assert result.code == "BACKEND_ERROR"
    assert "does not match its SHA" in result.payload["error"]["message"]


async def test_requests_are_bounded_and_share_keep_alive_connections(
    gateway_factory, private_gitea, site: Site
):
    private_gitea.delay = 0.01  # so that requests overlap
    config = {"url": private_gitea.url, "token": TOKEN, "max_concurrency": 3}
    gw = gateway_factory(plugins=["gitea"], plugin_config={"gitea": config}, env={})
    async with gw:
        private_gitea.reset_counts()
        first = await gw.call("get_job_diff", {"job_id": site.job, "base": "phase_1_start"})
        second = await gw.call("get_job_diff", {"job_id": site.job, "base": "phase_1_end"})
    assert not first.is_error and not second.is_error
    assert private_gitea.requests["raw"] > 20
    assert 1 < private_gitea.max_in_flight <= 3
    assert private_gitea.connections <= 3  # both calls, all requests, at most 3 connections


@pytest.mark.parametrize(
    ("name", "emptied_after"),
    [
        ("list_job_tags", 0),  # /tags answers 409, as older Gitea versions do
        ("list_job_commits", 2),  # both refs resolved, then the listing answers 409
        ("list_job_files", 2),  # HEAD resolved, then the root tree answers 409
        ("get_job_file", 1),  # the ref resolved, then /raw answers 409
        ("get_job_diff", 3),  # both refs resolved, then the trees answer 409
    ],
)
async def test_a_repository_found_empty_midway_gets_a_deliberate_answer(
    gateway_factory, private_gitea, site: Site, name, emptied_after
):
    private_gitea.emptied_after = emptied_after
    gw = gateway_factory(
        plugins=["gitea"],
        plugin_config={"gitea": {"url": private_gitea.url, "token": TOKEN}},
        env={},
    )
    async with gw:
        result = await gw.call(name, all_calls(site.job)[name])
    assert private_gitea.requests["total"] > emptied_after  # the 409 was answered
    repository = f"{OWNER}/job-{site.job}"
    if name.startswith("list_"):
        assert not result.is_error, result.payload
        listed = {"list_job_tags": "tags", "list_job_commits": "commits"}.get(name, "entries")
        assert result.payload[listed] == []
        assert result.payload.get("empty_repository", True) is True
    else:
        assert result.code == "NOT_FOUND", result.payload
        assert result.payload["error"]["message"] == (
            f"the job repository {repository} is empty: the job has not committed anything yet"
        )


def test_a_client_that_gives_up_before_the_answer_costs_the_fake_no_traceback(
    private_gitea: FakeGitea, site: Site, capfd: pytest.CaptureFixture[str]
):
    """What a tool timeout does to the fake: the answer finds the connection reset. That is the
    client's doing; its traceback used to reach the run's output once nobody captured it."""
    private_gitea.delay = 0.3
    host, port = private_gitea.url.removeprefix("http://").split(":")
    path = f"/api/v1/repos/{OWNER}/job-{site.job}/commits?limit=1"
    request = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: token {TOKEN}\r\n\r\n"
    deadline = time.monotonic() + 10
    with socket.create_connection((host, int(port))) as conn:
        conn.sendall(request.encode())
        while not private_gitea.in_flight:  # the fake is answering: now the client goes
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # Closed with a reset, as a client that abandons a request may close it.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    while private_gitea.in_flight:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.2)  # the handler's last words, if any, come after it left the request
    assert "Traceback" not in capfd.readouterr().err
