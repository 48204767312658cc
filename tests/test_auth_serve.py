"""Issue 25 end to end: a real ``mcp-gateway serve --transport http`` subprocess as an OAuth
resource server, tokens from a real identity provider on 127.0.0.1, the official MCP client.

One gateway (the example ``notes`` plugin: ``notes_search`` reads, ``notes_add`` and
``notes_delete`` change) serves the whole module; each test signs the tokens it needs.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from conftest import gateway_env
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from wire import MCP_HEADERS, HttpServer, StdioServer, run_cli

from gateway.logs import BURST
from tests.auth_issuer import BAD_TOKENS, CLIENT_ID, CLIENT_SECRET, FakeIssuer

pytestmark = pytest.mark.e2e

READ = "gateway:read"
BOTH = "gateway:read gateway:mutate"
METADATA = "/.well-known/oauth-protected-resource"


@dataclass
class Deployment:
    idp: FakeIssuer
    server: HttpServer
    audit: Path

    @property
    def resource(self) -> str:
        return f"{self.server.url}/mcp"

    def post(self, body: dict[str, Any], token: str | None, **headers: str) -> httpx.Response:
        sent = dict(MCP_HEADERS)
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers)
        return self.server.client.post(self.resource, json=body, headers=sent, timeout=20)

    def challenge(self, error: str | None = None, why: str | None = None) -> str:
        parts = [f'error="{error}"', f'error_description="{why}"'] if error else []
        parts += [
            f'scope="{BOTH}"',
            f'resource_metadata="{self.server.url}{METADATA}/mcp"',
        ]
        return "Bearer " + ", ".join(parts)

    def audit_lines(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines()]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    cwd = tmp_path_factory.mktemp("oauth")
    audit = cwd / "audit.jsonl"
    with FakeIssuer() as idp:
        config = cwd / "gw.toml"
        # From the file, so the [auth] table is read as a deployment writes it.
        config.write_text(
            f'[gateway]\naudit_log = "{audit.name}"\n\n'
            f'[auth]\nissuer = "{idp.issuer}"\njwks_refetch_seconds = 1\n'
        )
        env = gateway_env(MCP_GATEWAY_PLUGINS="notes", MCP_GATEWAY_CONFIG=str(config))
        with HttpServer(cwd, env) as server:
            idp.audience = f"{server.url}/mcp"
            yield Deployment(idp, server, audit)


@pytest.fixture
def idp(deployment: Deployment) -> Iterator[FakeIssuer]:
    yield deployment.idp
    deployment.idp.published = [deployment.idp.rsa, deployment.idp.ec]


def _rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def _client(url: str, token: str, mode: Any = "legacy") -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=20)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


@pytest.mark.anyio
async def test_a_read_token_lists_no_mutation_and_is_refused_one_naming_the_scope(deployment, idp):
    before = deployment.audit_lines()
    async with _client(deployment.resource, idp.sign(scope=READ)) as client:
        listed = await client.list_tools()
        assert sorted(t.name for t in listed.tools) == ["gateway_status", "notes_search"]
        refused = await client.call_tool("notes_add", {"text": "not allowed"})
        found = await client.call_tool("notes_search", {"query": "allowed"})
    assert refused.is_error and refused.structured_content is None
    error = json.loads(refused.content[0].text)["error"]
    assert error["code"] == "PERMISSION_DENIED"
    assert "needs the OAuth scope gateway:mutate" in error["message"]
    assert error["details"] == {"missing_scope": "gateway:mutate"}
    assert not found.is_error
    assert deployment.audit_lines() == before  # refused before anything ran


@pytest.mark.anyio
async def test_a_2026_client_is_refused_by_the_transport_before_the_call(deployment, idp):
    # This protocol names the tool in the request's headers, so the 403 comes first.
    before = deployment.audit_lines()
    async with _client(deployment.resource, idp.sign(scope=READ), "2026-07-28") as client:
        listed = await client.list_tools()
        assert sorted(t.name for t in listed.tools) == ["gateway_status", "notes_search"]
        with pytest.raises(MCPError):
            await client.call_tool("notes_add", {"text": "not allowed"})
        assert not (await client.call_tool("notes_search", {"query": "x"})).is_error
    assert deployment.audit_lines() == before


def test_a_tool_named_in_the_routing_headers_is_refused_by_the_transport(deployment, idp):
    before = deployment.audit_lines()
    r = deployment.post(
        _rpc("tools/call", {"name": "notes_delete", "arguments": {"note_id": 1}}),
        idp.sign(scope=READ),
        **{"Mcp-Method": "tools/call", "Mcp-Name": "notes_delete"},
    )
    assert r.status_code == 403
    assert r.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", error_description="calling notes_delete needs '
        f'the scope gateway:mutate", scope="gateway:mutate", '
        f'resource_metadata="{deployment.server.url}{METADATA}/mcp"'
    )
    assert r.json()["error"]["code"] == "PERMISSION_DENIED"
    assert deployment.audit_lines() == before


@pytest.mark.anyio
async def test_a_mutate_tokens_mutation_is_audited_with_its_subject_and_client(deployment, idp):
    token = idp.sign(idp.ec, sub="bob", client_id=None, azp="team-cli", scope=BOTH)
    async with _client(deployment.resource, token) as client:
        listed = await client.list_tools()
        assert {"notes_add", "notes_delete"} <= {t.name for t in listed.tools}
        added = await client.call_tool("notes_add", {"text": "by bob"})
    assert not added.is_error, added.content
    lines = [x for x in deployment.audit_lines() if x["tool"] == "notes_add"]
    assert [x["outcome"] for x in lines[-2:]] == ["STARTED", "OK"]
    for line in lines[-2:]:
        assert (line["subject"], line["client"]) == ("bob", "team-cli")
    assert token not in deployment.audit.read_text()


@pytest.mark.anyio
async def test_gateway_status_shows_the_caller_its_subject_and_scopes(deployment, idp):
    async with _client(deployment.resource, idp.sign(sub="carol", scope=READ)) as client:
        status = await client.call_tool("gateway_status", {"check_health": False})
    caller = status.structured_content["caller"]
    assert caller["subject"] == "carol" and caller["client"] == "claude-code"
    assert caller["scopes"] == [READ] and caller["authenticated_by"] == "jwt"
    assert isinstance(caller["expires_at"], int)


UNAUTHORIZED: dict[str, tuple[Any, str | None]] = {"no token": (None, None), **BAD_TOKENS}


@pytest.mark.parametrize("case", list(UNAUTHORIZED))
def test_every_bad_token_is_401_with_the_challenge(deployment, idp, case):
    build, why = UNAUTHORIZED[case]
    token = build(idp) if build else None
    r = deployment.post(_rpc("tools/list"), token)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == deployment.challenge(
        "invalid_token" if why else None, why
    )
    assert r.json()["error"]["code"] == "PERMISSION_DENIED"
    if token and len(token) > 8:
        assert token not in r.text
        assert token not in deployment.server.stderr_path.read_text(errors="replace")


def test_a_token_with_none_of_the_gateways_scopes_is_403(deployment, idp):
    r = deployment.post(_rpc("tools/list"), idp.sign(scope="openid profile"))
    assert r.status_code == 403
    assert r.headers["www-authenticate"].startswith('Bearer error="insufficient_scope"')
    assert f'scope="{READ}"' in r.headers["www-authenticate"]


def test_a_rotated_key_is_fetched_and_accepted(deployment, idp):
    time.sleep(1.05)  # the least refetch interval, since an earlier test's fetch
    fetched = idp.jwks_fetches()
    new = idp.rotate()
    r = deployment.post(_rpc("tools/list"), idp.sign(new, scope=READ))
    assert r.status_code == 200 and idp.jwks_fetches() == fetched + 1


@pytest.mark.parametrize("path", [METADATA, METADATA + "/mcp"])
def test_the_protected_resource_metadata_is_served_without_a_token(deployment, path):
    r = deployment.server.client.get(deployment.server.url + path, timeout=10)
    assert r.status_code == 200
    assert r.json() == {
        "resource": deployment.resource,
        "authorization_servers": [deployment.idp.issuer],
        "scopes_supported": ["gateway:read", "gateway:mutate"],
        "bearer_methods_supported": ["header"],
        "resource_name": "gateway",
    }


def test_readiness_needs_a_token_and_liveness_does_not(deployment, idp):
    url, http = deployment.server.url, deployment.server.client
    assert http.get(url + "/readyz", timeout=10).status_code == 401
    token = {"Authorization": f"Bearer {idp.sign(scope=READ)}"}
    assert http.get(url + "/readyz", headers=token, timeout=10).status_code == 200
    assert http.get(url + "/healthz", timeout=10).json() == {"status": "ok"}


def test_refusals_are_logged_without_the_token_and_cannot_flood_the_log(deployment, idp):
    def refusals() -> list[str]:
        deployment.server.stderr()  # flushes what the server wrote so far
        log = deployment.server.stderr_path.read_text(errors="replace")
        return re.findall(r"auth: token refused: (.*)", log)

    before = len(refusals())
    garbage = [f"garbage-{i}-{'x' * 20}" for i in range(BURST * 4)]
    for token in garbage:
        assert deployment.post(_rpc("tools/list"), token).status_code == 401
    deadline = time.monotonic() + 5
    while not refusals() and time.monotonic() < deadline:  # the log is written by a thread
        time.sleep(0.05)
    assert "the token is malformed" in refusals()
    # At most BURST a minute (twice that if a new minute began in between), not one a request.
    assert len(refusals()) - before <= 2 * BURST < len(garbage)
    log = deployment.server.stderr_path.read_text(errors="replace")
    assert not any(token in log for token in garbage)


def test_start_up_names_the_issuer(deployment):
    first = deployment.server.stderr().splitlines()[0]
    assert first == (
        f"mcp-gateway: serving MCP at {deployment.resource} "
        f"(OAuth access tokens from {deployment.idp.issuer})"
    )


# -- the other modes ------------------------------------------------------------------------


def test_a_shared_token_and_an_issuer_together_are_a_config_error(tmp_path):
    env = gateway_env(
        MCP_GATEWAY_TOKEN="shared-token-0123456789",
        MCP_GATEWAY_AUTH_ISSUER="https://idp.example",
    )
    done = run_cli(tmp_path, env, "serve", "--transport", "http", "--port", "1")
    assert done.returncode == 2
    assert done.stderr == (
        "mcp-gateway: MCP_GATEWAY_AUTH_ISSUER: both a shared token (MCP_GATEWAY_TOKEN) and an "
        "OAuth issuer are set: choose one; for a team behind an identity provider, unset the "
        "token\n"
    )


def test_off_loopback_the_public_url_must_be_set(tmp_path):
    env = gateway_env(
        MCP_GATEWAY_AUTH_ISSUER="https://idp.example",
        MCP_GATEWAY_ALLOWED_HOSTS="gw.example:*",
        MCP_GATEWAY_PLUGINS="gateway",
    )
    done = run_cli(tmp_path, env, "serve", "--transport", "http", "--host", "0.0.0.0")
    assert done.returncode == 2
    assert "set resource (MCP_GATEWAY_AUTH_RESOURCE)" in done.stderr
    assert "Traceback" not in done.stderr


def test_made_up_opaque_tokens_cost_the_identity_provider_a_bounded_number_of_requests(tmp_path):
    # Tokens that are not JWTs are introspected; a client sending made-up ones (no credentials
    # needed) used to cost the provider one request each.
    with FakeIssuer() as idp:
        config = tmp_path / "gw.toml"
        config.write_text(
            f'[auth]\nissuer = "{idp.issuer}"\n\n'
            f'[auth.introspection]\nclient_id = "{CLIENT_ID}"\nrefusals_per_minute = 10\n'
        )
        env = gateway_env(
            MCP_GATEWAY_PLUGINS="notes",
            MCP_GATEWAY_CONFIG=str(config),
            MCP_GATEWAY_AUTH_INTROSPECTION_CLIENT_SECRET=CLIENT_SECRET,
        )
        with HttpServer(tmp_path, env) as server:
            body = _rpc("tools/list")
            statuses = []
            started = time.monotonic()
            for n in range(60):
                headers = {**MCP_HEADERS, "Authorization": f"Bearer made-up-token-{n}"}
                r = server.client.post(f"{server.url}/mcp", json=body, headers=headers, timeout=20)
                statuses.append(r.status_code)
            elapsed = time.monotonic() - started
            last = r
        asked = [r for r in idp.requests if r.path == "/introspect"]
    # Ten at once, then one more every 6 s (however slowly this machine sent the rest).
    assert statuses[:10] == [401] * 10 and set(statuses) == {401, 429}
    assert len(asked) == statuses.count(401) <= 10 + int(elapsed / 6)
    assert statuses[-1] == 429 or elapsed > 6
    assert 1 <= int(last.headers.get("retry-after", "6")) <= 6
    assert last.json()["error"]["retryable"] is True


def test_stdio_calls_carry_the_local_os_user(tmp_path):
    audit = tmp_path / "audit.jsonl"
    env = gateway_env(MCP_GATEWAY_PLUGINS="notes", MCP_GATEWAY_AUDIT_LOG=str(audit))
    with StdioServer(tmp_path, env) as server:
        assert not server.call("notes_add", {"text": "local"}).get("isError")
        caller = server.call("gateway_status", {"check_health": False})["structuredContent"][
            "caller"
        ]
    user = pwd.getpwuid(os.getuid()).pw_name
    assert caller == {
        "subject": user,
        "client": "stdio",
        "scopes": None,
        "authenticated_by": "local",
        "expires_at": None,
    }
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["outcome"], x["subject"], x["client"]) for x in lines] == [
        ("STARTED", user, "stdio"),
        ("OK", user, "stdio"),
    ]


def test_stdio_calls_are_audited_as_the_os_account_whatever_logname_and_user_say(tmp_path):
    # A project's .mcp.json "env" can set LOGNAME and USER to anything, newlines included; the
    # account the process runs as is what the kernel says.
    audit = tmp_path / "audit.jsonl"
    forged = 'mallory\n{"tool":"delete_job","outcome":"OK","subject":"alice"}'
    env = gateway_env(
        MCP_GATEWAY_PLUGINS="notes", MCP_GATEWAY_AUDIT_LOG=str(audit), LOGNAME=forged, USER=forged
    )
    with StdioServer(tmp_path, env) as server:
        assert not server.call("notes_add", {"text": "local"}).get("isError")
        caller = server.call("gateway_status", {"check_health": False})["structuredContent"][
            "caller"
        ]
    account = pwd.getpwuid(os.getuid()).pw_name
    assert caller["subject"] == account
    lines = audit.read_text().splitlines()
    assert len(lines) == 2
    assert [(x["outcome"], x["subject"]) for x in map(json.loads, lines)] == [
        ("STARTED", account),
        ("OK", account),
    ]
    assert "mallory" not in audit.read_text()


def test_the_shared_token_holder_is_audited_as_such_and_sees_every_tool(tmp_path):
    audit = tmp_path / "audit.jsonl"
    token = "shared-token-0123456789"
    env = gateway_env(
        MCP_GATEWAY_PLUGINS="notes", MCP_GATEWAY_AUDIT_LOG=str(audit), MCP_GATEWAY_TOKEN=token
    )
    auth = {"Authorization": f"Bearer {token}"}
    with StdioServer(tmp_path, env) as stdio:
        over_stdio = stdio.request("tools/list")["result"]
    with HttpServer(tmp_path, env) as server:
        over_http = server.rpc("tools/list", **auth).json()["result"]
        server.rpc("tools/call", {"name": "notes_add", "arguments": {"text": "t"}}, **auth)
        status = server.rpc(
            "tools/call", {"name": "gateway_status", "arguments": {"check_health": False}}, **auth
        ).json()["result"]["structuredContent"]
    assert json.dumps(over_http, sort_keys=True) == json.dumps(over_stdio, sort_keys=True)
    assert status["caller"]["authenticated_by"] == "token"
    assert status["caller"]["subject"] is None
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["subject"], x["client"]) for x in lines] == [(None, None), (None, None)]
    assert token not in audit.read_text()
