"""Streamable HTTP: stateless JSON, bearer token, Host/Origin checks, liveness and readiness."""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import gateway_env
from wire import wait_listening

pytestmark = pytest.mark.e2e

TOKEN = "http-test-token-5b1e"
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(
    tmp_path, env: dict[str, str], host: str = "127.0.0.1", stderr: Any = subprocess.PIPE
) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "serve",
            "--transport",
            "http",
            "--host",
            host,
            "--port",
            str(port),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    url = f"http://{host}:{port}"
    # Any answer: it listens (421 for a Host it does not serve, when MCP_GATEWAY_ALLOWED_HOSTS
    # names others).
    with httpx.Client() as client:
        if wait_listening(client, url, proc):
            return proc, url
    proc.kill()
    raise AssertionError(proc.stderr.read().decode() if proc.stderr else "gateway did not start")


@pytest.fixture
def http_gateway(tmp_path, request) -> Iterator[str]:
    """A gateway of this test's own: for tests that change its notes, read its stderr or
    start it with other settings."""
    extra = getattr(request, "param", {})
    env = gateway_env(MCP_GATEWAY_TOKEN=TOKEN, MCP_GATEWAY_PLUGINS="notes", **extra)
    proc, url = _start(tmp_path, env)
    request.node.gateway_proc = proc
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """One client for the module: ``httpx.get`` makes a client per request, and each loads
    the CA bundle (~40 ms of CPU), even for plain http. A connection per request, as before:
    nothing kept open to a gateway a test has stopped."""
    with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0)) as client:
        yield client


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory) -> Iterator[str]:
    """One gateway for the tests that only send requests it refuses or answers without
    changing anything: starting a process per test cost most of this module's time."""
    env = gateway_env(MCP_GATEWAY_TOKEN=TOKEN, MCP_GATEWAY_PLUGINS="notes")
    root = tmp_path_factory.mktemp("http-gateway")
    # A file, not a pipe nobody reads: a module's worth of refusals must not fill it.
    with (root / "stderr.log").open("wb") as log:
        proc, url = _start(root, env, stderr=log)
        yield url
        proc.terminate()
        proc.wait(timeout=10)


def _stderr_line(proc: subprocess.Popen[bytes], timeout: float = 10) -> str:
    """The next stderr line of the server, or "" if none comes in time (never hangs)."""
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], timeout)
    return proc.stderr.readline().decode() if ready else ""


def test_the_start_line_says_which_tools_wait_and_for_which_variable(tmp_path):
    env = gateway_env(MCP_GATEWAY_PLUGINS="orchestrator,gitea")
    proc, url = _start(tmp_path, env)
    try:
        line = _stderr_line(proc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert line == (
        f"mcp-gateway: serving MCP at {url}/mcp (no token required (loopback only)); 30 tools "
        "wait for COCKPIT_API_URL, 5 for GITEA_URL\n"
    )


def _rpc(method: str, params: dict, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def _serve_every_interface(tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    """Start the HTTP server on 0.0.0.0; every such test expects it to refuse."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "serve",
            "--transport",
            "http",
            "--host",
            "0.0.0.0",
            "--port",
            "1",
        ],
        cwd=tmp_path,
        env=gateway_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_refuses_to_start_on_a_public_address_without_a_token(tmp_path):
    proc = _serve_every_interface(tmp_path)
    assert proc.returncode == 2
    assert "MCP_GATEWAY_TOKEN" in proc.stderr and "non-loopback" in proc.stderr


def test_stateless_calls_work_with_the_right_token(http_gateway):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=http_gateway, headers={**MCP_HEADERS, **auth}, timeout=10) as c:
        # No initialize, no session: each POST stands alone.
        listed = c.post("/mcp", json=_rpc("tools/list", {}))
        assert listed.status_code == 200
        names = {t["name"] for t in listed.json()["result"]["tools"]}
        assert {"notes_search", "notes_add", "gateway_status"} <= names
        assert "mcp-session-id" not in {k.lower() for k in listed.headers}
        added = c.post(
            "/mcp",
            json=_rpc("tools/call", {"name": "notes_add", "arguments": {"text": "via http"}}, 2),
        )
        assert added.json()["result"]["structuredContent"]["text"] == "via http"
        found = c.post(
            "/mcp",
            json=_rpc("tools/call", {"name": "notes_search", "arguments": {"query": "http"}}, 3),
        )
        assert found.json()["result"]["structuredContent"]["count"] == 1
        bad = c.post(
            "/mcp",
            json=_rpc("tools/call", {"name": "notes_search", "arguments": {"limit": "many"}}, 4),
        )
        result = bad.json()["result"]
        assert result["isError"] is True and "structuredContent" not in result
        assert json.loads(result["content"][0]["text"])["error"]["code"] == "VALIDATION_ERROR"
        ready = c.get("/readyz")
        assert ready.status_code == 200 and ready.json()["ready"] is True


@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_a_missing_or_wrong_token_is_401(http, shared_gateway, auth):
    headers = dict(MCP_HEADERS)
    if auth:
        headers["Authorization"] = auth
    r = http.post(shared_gateway + "/mcp", json=_rpc("tools/list", {}), headers=headers, timeout=10)
    assert r.status_code == 401
    assert TOKEN not in r.text
    assert http.get(shared_gateway + "/readyz", headers=headers, timeout=10).status_code == 401


def test_liveness_needs_no_token(http, shared_gateway):
    assert http.get(shared_gateway + "/healthz", timeout=10).json() == {"status": "ok"}


def test_a_foreign_origin_is_403(http, shared_gateway):
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"}
    r = http.post(shared_gateway + "/mcp", json=_rpc("tools/list", {}), headers=headers, timeout=10)
    assert r.status_code == 403


def test_serving_every_interface_needs_the_allowed_host_names(tmp_path):
    proc = _serve_every_interface(tmp_path, MCP_GATEWAY_TOKEN=TOKEN)
    assert proc.returncode == 2 and "MCP_GATEWAY_ALLOWED_HOSTS" in proc.stderr
    assert TOKEN not in proc.stderr


@pytest.mark.parametrize(
    "http_gateway", [{"MCP_GATEWAY_ALLOWED_HOSTS": "gw.example:*"}], indirect=True
)
def test_configured_host_names_are_accepted_and_others_refused(http, http_gateway):
    port = http_gateway.rsplit(":", 1)[1]
    base = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    ok = http.post(
        http_gateway + "/mcp",
        json=_rpc("tools/list", {}),
        headers={**base, "Host": f"gw.example:{port}"},
        timeout=10,
    )
    assert ok.status_code == 200
    other = http.post(
        http_gateway + "/mcp",
        json=_rpc("tools/list", {}),
        headers={**base, "Host": f"127.0.0.1:{port}"},
        timeout=10,
    )
    assert other.status_code == 421


def test_a_foreign_host_header_is_refused(http, shared_gateway):
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example"}
    r = http.post(shared_gateway + "/mcp", json=_rpc("tools/list", {}), headers=headers, timeout=10)
    assert r.status_code in (403, 421)


def test_start_up_says_where_it_listens_and_that_a_token_is_required(http_gateway, request):
    proc = request.node.gateway_proc
    line = _stderr_line(proc)
    assert (
        line
        == f"mcp-gateway: serving MCP at {http_gateway}/mcp (bearer token required (MCP_GATEWAY_TOKEN))\n"
    )
    assert TOKEN not in line


def test_get_on_the_stateless_endpoint_is_405_not_an_endless_stream(http, shared_gateway):
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "text/event-stream, application/json"}
    for method in ("GET", "DELETE"):
        # Streamed: the status arrives with the headers, even if a body would never end.
        with http.stream(method, shared_gateway + "/mcp", headers=headers, timeout=5) as r:
            assert r.status_code == 405 and r.headers["allow"] == "POST"


@pytest.mark.parametrize("path", ["/readyz", "/healthz", "/mcp"])
def test_dns_rebinding_checks_cover_every_route(http, shared_gateway, path):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    foreign_host = http.get(
        shared_gateway + path, headers={**auth, "Host": "evil.example:80"}, timeout=10
    )
    assert foreign_host.status_code == 421 and "notes" not in foreign_host.text
    foreign_origin = http.get(
        shared_gateway + path, headers={**auth, "Origin": "http://evil.example"}, timeout=10
    )
    assert foreign_origin.status_code == 403 and "notes" not in foreign_origin.text


def test_a_loopback_alias_works_without_extra_settings(http, tmp_path):
    env = gateway_env(MCP_GATEWAY_PLUGINS="notes")
    proc, url = _start(tmp_path, env, host="127.0.0.2")
    try:
        line = _stderr_line(proc)
        assert f"at {url}/mcp (no token required (loopback only))" in line
        listed = http.post(
            url + "/mcp", json=_rpc("tools/list", {}), headers=MCP_HEADERS, timeout=10
        )
        assert listed.status_code == 200 and listed.json()["result"]["tools"]
        assert http.get(url + "/readyz", timeout=10).status_code == 200
        origin = {**MCP_HEADERS, "Origin": "http://127.0.0.2:3000"}
        assert (
            http.post(
                url + "/mcp", json=_rpc("tools/list", {}), headers=origin, timeout=10
            ).status_code
            == 200
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer "])
def test_the_bearer_scheme_name_is_case_insensitive(http, shared_gateway, scheme):
    headers = {**MCP_HEADERS, "Authorization": f"{scheme} {TOKEN}"}
    r = http.post(shared_gateway + "/mcp", json=_rpc("tools/list", {}), headers=headers, timeout=10)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [
        ("Host", "localhost:1.evil.example", 421),
        ("Host", "127.0.0.1:8765.evil.example", 421),
        ("Host", "localhost:", 421),
        ("Origin", "http://localhost:1.evil.example", 403),
        ("Origin", "http://127.0.0.1:80@evil.example", 403),
    ],
)
def test_a_host_or_origin_that_only_starts_like_an_allowed_one_is_refused(
    http, shared_gateway, header, value, status
):
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", header: value}
    r = http.post(shared_gateway + "/mcp", json=_rpc("tools/list", {}), headers=headers, timeout=10)
    assert r.status_code == status, r.text
