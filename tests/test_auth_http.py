"""The resource server over real HTTP: uvicorn on 127.0.0.1 serving an MCP SDK server behind
:class:`OAuthGuard`, tokens from a real identity provider on 127.0.0.1.

The MCP server here is a small stand-in for the gateway's: three tools whose ``tools/list``
and ``tools/call`` consult :class:`ScopePolicy` with :func:`current_caller`, as the gateway's
pipeline will. That the caller set by the ASGI guard reaches the SDK's handlers is part of
what is tested.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import mcp_types as t
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server, ServerRequestContext
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.auth import (
    OAuthGuard,
    OAuthVerifier,
    ResourceMetadata,
    ScopePolicy,
    current_caller,
    load_auth_config,
)
from gateway.spec import Tier
from gateway.testing.backends import FaultMode
from tests.auth_issuer import BAD_TOKENS, FakeIssuer, SigningKey, serve_asgi

#: A little over the least refetch interval (1 s): an unknown kid after it fetches again.
REFETCH_INTERVAL = 1.05

MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}
TOOLS: dict[str, tuple[Tier, str]] = {
    "whoami": (Tier.READ, "gateway"),
    "read_notes": (Tier.READ, "notes"),
    "add_note": (Tier.MUTATION, "notes"),
}


def _tool(name: str) -> t.Tool:
    return t.Tool(name=name, description=name, input_schema={"type": "object"})


def _stand_in_server(policy: ScopePolicy, calls: list[str]) -> Server[Any]:
    def missing(name: str) -> str | None:
        tier, plugin = TOOLS[name]
        return policy.missing(current_caller(), tier=tier, plugin=plugin, name=name)

    async def on_list_tools(ctx: ServerRequestContext[Any], params: Any) -> t.ListToolsResult:
        return t.ListToolsResult(tools=[_tool(n) for n in TOOLS if missing(n) is None])

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: t.CallToolRequestParams
    ) -> t.CallToolResult:
        need = missing(params.name)
        if need is not None:
            error = {
                "code": "PERMISSION_DENIED",
                "message": f"{params.name} needs the scope {need}",
                "retryable": False,
            }
            text = json.dumps({"error": error})
            return t.CallToolResult(content=[t.TextContent(type="text", text=text)], is_error=True)
        calls.append(params.name)
        payload = current_caller().as_status()
        return t.CallToolResult(
            content=[t.TextContent(type="text", text=json.dumps(payload))],
            structured_content=payload,
        )

    return Server("stand-in", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


class Served:
    def __init__(self, idp: FakeIssuer, url: str, calls: list[str]) -> None:
        self.idp = idp
        self.url = url
        self.calls = calls
        self.resource = f"{url}/mcp"
        self.metadata_url = f"{url}/.well-known/oauth-protected-resource/mcp"
        self.http = httpx.Client()  # one for the module: each client loads the CA bundle

    def post(
        self, body: dict[str, Any], token: str | None = None, **headers: str
    ) -> httpx.Response:
        sent = dict(MCP_HEADERS)
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers)
        return self.http.post(f"{self.url}/mcp", json=body, headers=sent, timeout=10)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    calls: list[str] = []
    with FakeIssuer() as idp:

        def build(port: int) -> Any:
            resource = f"http://127.0.0.1:{port}/mcp"
            idp.audience = resource
            config = load_auth_config({"issuer": idp.issuer, "jwks_refetch_seconds": 1}, {})
            assert config is not None
            verifier = OAuthVerifier(config, resource=resource)
            policy = ScopePolicy.from_config(config)

            async def healthz(request: Request) -> Response:
                return JSONResponse({"status": "ok"})

            app = _stand_in_server(policy, calls).streamable_http_app(
                streamable_http_path="/mcp",
                json_response=True,
                stateless_http=True,
                host="127.0.0.1",
                custom_starlette_routes=[Route("/healthz", healthz)],
            )
            metadata = ResourceMetadata(resource, config.issuer, policy.supported(), name="gw")
            guard = OAuthGuard(
                app,
                verifier,
                metadata,
                policy,
                open_paths=frozenset({"/healthz"}),
                tool_of=TOOLS.get,
            )
            return guard, verifier.aclose

        with serve_asgi(build) as server:
            served = Served(idp, server.url, calls)
            with served.http:
                yield served


@pytest.fixture
def idp(served: Served) -> Iterator[FakeIssuer]:
    served.idp.mode = FaultMode.NORMAL
    yield served.idp
    served.idp.mode = FaultMode.NORMAL
    served.idp.published = [served.idp.rsa, served.idp.ec]


def _rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def _challenge(served: Served, error: str | None = None, why: str | None = None) -> str:
    parts = []
    if error:
        parts += [f'error="{error}"', f'error_description="{why}"']
    parts += ['scope="gateway:read gateway:mutate"', f'resource_metadata="{served.metadata_url}"']
    return "Bearer " + ", ".join(parts)


# name -> (token builder or None for no Authorization header, error_description or None)
UNAUTHORIZED: dict[str, tuple[Any, str | None]] = {"no token": (None, None), **BAD_TOKENS}


@pytest.mark.parametrize("case", list(UNAUTHORIZED))
def test_bad_tokens_get_401_with_the_challenge(served, idp, case, caplog):
    build, why = UNAUTHORIZED[case]
    token = build(idp) if build else None
    with caplog.at_level(logging.DEBUG):
        r = served.post(_rpc("tools/list"), token)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == _challenge(
        served, "invalid_token" if why else None, why
    )
    assert r.json()["error"]["code"] == "PERMISSION_DENIED"
    if token and len(token) > 8:
        assert token not in r.text and token not in caplog.text
        assert token not in str(r.headers)


def test_a_non_bearer_scheme_is_treated_as_no_token(served, idp):
    r = served.http.post(
        f"{served.url}/mcp",
        json=_rpc("tools/list"),
        headers={**MCP_HEADERS, "Authorization": f"Basic {idp.sign()}"},
        timeout=10,
    )
    assert (r.status_code, r.headers["www-authenticate"]) == (401, _challenge(served))


def test_the_bearer_scheme_is_case_insensitive(served, idp):
    r = served.http.post(
        f"{served.url}/mcp",
        json=_rpc("tools/list"),
        headers={**MCP_HEADERS, "Authorization": f"bEaReR {idp.sign()}"},
        timeout=10,
    )
    assert r.status_code == 200


def test_two_authorization_headers_are_a_bad_request(served, idp):
    headers = [(k, v) for k, v in MCP_HEADERS.items()]
    headers += [("Authorization", f"Bearer {idp.sign()}")] * 2
    r = served.http.post(f"{served.url}/mcp", json=_rpc("tools/list"), headers=headers, timeout=10)
    assert r.status_code == 400
    assert r.headers["www-authenticate"].startswith('Bearer error="invalid_request"')


def test_a_token_with_none_of_the_gateways_scopes_is_403(served, idp):
    r = served.post(_rpc("tools/list"), idp.sign(scope="openid profile"))
    assert r.status_code == 403
    assert r.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", error_description="the token carries none of the '
        f'gateway\'s scopes", scope="gateway:read", resource_metadata="{served.metadata_url}"'
    )


def test_a_rotated_key_is_accepted_over_http(served, idp):
    time.sleep(REFETCH_INTERVAL)  # since an earlier test's fetch: an unknown kid fetches again
    new = idp.rotate()
    r = served.post(_rpc("tools/list"), idp.sign(new))
    assert r.status_code == 200


def test_an_unreachable_issuer_is_503_not_a_401(served, idp):
    # A key the gateway has not seen yet: it must ask the issuer, which is failing.
    time.sleep(REFETCH_INTERVAL)
    token = idp.sign(SigningKey("kid-of-a-new-key", "ES256", idp.ec.private))
    idp.mode = FaultMode.ERROR
    r = served.post(_rpc("tools/list"), token)
    assert r.status_code == 503 and r.headers["retry-after"] == "5"
    assert "www-authenticate" not in r.headers
    assert r.json()["error"] == {
        "code": "BACKEND_UNAVAILABLE",
        "message": "the identity provider cannot be reached to check the access token; "
        "retry in a few seconds",
        "retryable": True,
    }


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
)
def test_protected_resource_metadata_names_the_issuer(served, idp, path):
    r = served.http.get(served.url + path, timeout=10)
    assert r.status_code == 200
    assert r.json() == {
        "resource": served.resource,
        "authorization_servers": [idp.issuer],
        "scopes_supported": ["gateway:read", "gateway:mutate"],
        "bearer_methods_supported": ["header"],
        "resource_name": "gw",
    }
    assert served.http.post(served.url + path, timeout=10).status_code == 405


def test_open_paths_need_no_token(served):
    assert served.http.get(f"{served.url}/healthz", timeout=10).json() == {"status": "ok"}


async def _client(served: Served, token: str) -> Any:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=10)
    return Client(streamable_http_client(served.resource, http_client=http), mode="legacy")


@pytest.mark.anyio
async def test_a_read_token_lists_no_mutation_and_is_refused_one_naming_the_scope(served, idp):
    async with await _client(served, idp.sign(scope="gateway:read")) as client:
        listed = await client.list_tools()
        assert sorted(tool.name for tool in listed.tools) == ["read_notes", "whoami"]
        refused = await client.call_tool("add_note", {})
        assert refused.is_error
        error = json.loads(refused.content[0].text)["error"]
        assert error["code"] == "PERMISSION_DENIED" and "gateway:mutate" in error["message"]
        me = await client.call_tool("whoami", {})
    assert me.structured_content == {
        "subject": "alice",
        "client": "claude-code",
        "scopes": ["gateway:read"],
        "authenticated_by": "jwt",
        "expires_at": me.structured_content["expires_at"],
    }
    assert "add_note" not in served.calls


@pytest.mark.anyio
async def test_a_mutate_token_calls_the_mutation_as_its_subject(served, idp):
    token = idp.sign(idp.ec, sub="bob", scope="gateway:read gateway:mutate")
    async with await _client(served, token) as client:
        listed = await client.list_tools()
        assert sorted(tool.name for tool in listed.tools) == ["add_note", "read_notes", "whoami"]
        done = await client.call_tool("add_note", {})
    assert not done.is_error
    assert done.structured_content["subject"] == "bob"
    assert served.calls[-1] == "add_note"


def test_a_tool_named_in_the_routing_headers_is_refused_before_the_call(served, idp):
    before = list(served.calls)
    body = _rpc("tools/call", {"name": "add_note", "arguments": {}})
    r = served.post(
        body, idp.sign(scope="gateway:read"), **{"Mcp-Method": "tools/call", "Mcp-Name": "add_note"}
    )
    assert r.status_code == 403
    assert r.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", error_description="calling add_note needs the '
        f'scope gateway:mutate", scope="gateway:mutate", resource_metadata="{served.metadata_url}"'
    )
    assert served.calls == before
