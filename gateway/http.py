"""Streamable HTTP transport: stateless, JSON responses, bearer token, Host/Origin checks.

Bound to loopback by default. On any other address a token (``MCP_GATEWAY_TOKEN``) is
required and the server refuses to start without one. ``/healthz`` (liveness) is open;
``/readyz`` (plugin health) and ``/mcp`` need the token when one is set.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .app import Gateway
from .server import build_server

OPEN_PATHS = frozenset({"/healthz"})


class HttpSettingsError(Exception):
    pass


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """Pure ASGI middleware: constant-time check of ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.expected is None or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = b""
        for key, value in scope.get("headers", []):
            if key == b"authorization":
                given = value
                break
        if not hmac.compare_digest(given, self.expected):
            response = JSONResponse(
                {
                    "error": {
                        "code": "PERMISSION_DENIED",
                        "message": "missing or wrong bearer token",
                        "retryable": False,
                    }
                },
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="mcp-gateway"'},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_http_app(
    gateway: Gateway,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
    allowed_origins: list[str] | None = None,
) -> ASGIApp:
    if not is_loopback(host) and not token:
        raise HttpSettingsError(
            f"refusing to serve on non-loopback address {host}: set MCP_GATEWAY_TOKEN "
            "(clients then send 'Authorization: Bearer <token>')"
        )
    server = build_server(gateway)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        status = await gateway.status()  # runs the checks; the results below come from cache
        failing = [r for r in await gateway.health.run() if r.blocking]
        code = 200 if not failing else 503
        return JSONResponse({"ready": not failing, **status}, status_code=code)

    loopback_hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    if allowed_hosts:
        hosts = list(allowed_hosts)
    elif is_loopback(host):
        hosts = loopback_hosts
    elif host in ("0.0.0.0", "::", "[::]"):
        raise HttpSettingsError(
            f"serving on every interface ({host}) needs the Host names clients will use: set "
            "MCP_GATEWAY_ALLOWED_HOSTS (e.g. 'gateway.example:*,10.0.0.5:*'); requests with "
            "other Host headers are refused to block DNS rebinding"
        )
    else:
        hosts = [f"{host}:*", f"[{host}]:*"] if ":" in host else [f"{host}:*"]
    origins = list(allowed_origins or []) or [
        "http://127.0.0.1:*",
        "http://localhost:*",
        "http://[::1]:*",
    ]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
    app: Starlette = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=True,
        stateless_http=True,
        transport_security=security,
        host=host,
        custom_starlette_routes=[Route("/healthz", healthz), Route("/readyz", readyz)],
    )
    return BearerAuth(app, token)


def serve_http(gateway: Gateway, *, host: str, port: int, **kwargs: Any) -> None:
    import uvicorn

    cfg = gateway.config
    token = cfg.token.get_secret_value() if cfg.token else None
    kwargs.setdefault("allowed_hosts", cfg.allowed_hosts)
    kwargs.setdefault("allowed_origins", cfg.allowed_origins)
    app = build_http_app(gateway, host=host, port=port, token=token, **kwargs)
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")
