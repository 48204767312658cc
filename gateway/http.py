"""Streamable HTTP transport: stateless, bearer token or OAuth, Host/Origin checks.

Bound to loopback by default. On any other address callers must prove who they are: with
OAuth access tokens (``[auth]``, gateway/auth/) or the one shared token
(``MCP_GATEWAY_TOKEN``); the server refuses to start with neither. The Host and Origin checks
(against DNS rebinding) cover every route. ``/healthz`` (liveness, says only "ok") and the
OAuth protected-resource metadata need no token; ``/readyz`` (plugin health) and ``/mcp`` need
one when either is set. ``/mcp`` takes POST only: the server is stateless and opens no
standalone event stream, so GET (and DELETE) answer 405. Answers are JSON but for a call that
reports while it runs (:class:`ModernStreams`). Every request runs as its caller
(:func:`gateway.auth.current_caller`): the token's subject, the token holder, or anonymous.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import json
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .app import Gateway
from .auth.identity import ANONYMOUS, TOKEN_HOLDER, calling_as
from .auth.settings import AuthConfig, AuthConfigError, is_loopback_host
from .config import GatewayConfig
from .connections import GuardedH11Protocol
from .lifecycle import SignalGuard, run
from .limits import LimitGate
from .server import build_server
from .spec import Tier

MCP_PATH = "/mcp"
OPEN_PATHS = frozenset({"/healthz"})
is_loopback = is_loopback_host  # one definition, for the CLI and the auth settings alike


class HttpSettingsError(Exception):
    pass


def _matches(value: str, patterns: list[str]) -> bool:
    """``value`` equals a pattern, or a ``name:*`` pattern with a port: ``localhost:*`` takes
    ``localhost:8765``, never ``localhost:1.evil.example``."""
    for pattern in patterns:
        if value == pattern:
            return True
        if pattern.endswith(":*"):
            prefix = pattern[:-1]
            port = value[len(prefix) :]
            if value.startswith(prefix) and port.isascii() and port.isdigit() and len(port) <= 5:
                return True
    return False


class HostOriginGuard:
    """Pure ASGI middleware: every route, not only ``/mcp``, refuses a ``Host`` that is not ours
    (421) and a browser ``Origin`` that is not allowed (403). Otherwise a page on any site could
    rebind its name to 127.0.0.1 and read ``/readyz`` (plugins, versions, health details)."""

    def __init__(self, app: ASGIApp, hosts: list[str], origins: list[str]) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = origin = ""
        for key, value in scope.get("headers", []):
            if key == b"host":
                host = value.decode("latin-1")
            elif key == b"origin":
                origin = value.decode("latin-1")
        if not _matches(host, self.hosts):
            await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
            return
        if origin and not _matches(origin, self.origins):
            await PlainTextResponse("Invalid Origin header", status_code=403)(scope, receive, send)
            return
        if scope["path"] == MCP_PATH and scope["method"] != "POST":
            # Stateless JSON: no session to delete and no event stream to open. Without this, a
            # GET opened a stream that never ended.
            response = JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32000, "message": "Method Not Allowed: POST only"},
                },
                status_code=405,
                headers={"Allow": "POST"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class ModernStreams:
    """Pure ASGI middleware: a call that may report while it runs is served by a session
    manager that may answer with an event stream, so what it reports (progress, a mounted
    server's included; log messages) reaches the client, and progress keeps Claude Code's
    5-minute HTTP idle timer alive. Those are every 2026-07-28 request (``MCP-Protocol-Version``
    of no handshake revision), whose answer turns into a stream only when something is
    reported first, and a handshake-era (2025) ``tools/call`` that carries a
    ``progressToken``, which is answered as a stream whatever it reports. Everything else keeps
    the JSON-only manager: with event streams, every 2025 answer would be one. A client that
    does not accept event streams keeps JSON too. Both managers share the server, and the
    lifespan runs them both."""

    def __init__(self, app: ASGIApp, modern: StreamableHTTPSessionManager) -> None:
        self.app = app
        self.modern = modern

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            async with self.modern.run():
                await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == MCP_PATH:
            era = _streaming(scope)
            if era == "modern":
                await self.modern.handle_request(scope, receive, send)
                return
            if era == "handshake":
                receive, progress = await _peek_progress(receive)
                if progress:
                    await self.modern.handle_request(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _streaming(scope: Scope) -> str | None:
    """``modern`` for a 2026-07-28 request from a client that takes event streams,
    ``handshake`` for a 2025 one that does, ``None`` for a client that takes none."""
    modern = events = False
    for key, value in scope.get("headers", []):
        if key == b"mcp-protocol-version":
            modern = value.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
        elif key == b"accept":
            events = b"text/event-stream" in value
    if not events or scope.get("method") != "POST":
        return None
    return "modern" if modern else "handshake"


#: A body larger than this is not looked into (it cannot be a small tools/call, and the
#: transport refuses what is over its own limit).
_PEEK_LIMIT = 1024 * 1024


async def _peek_progress(receive: Receive) -> tuple[Receive, bool]:
    """Read the request's body, say whether it is a ``tools/call`` asking for progress, and
    give a ``receive`` that replays it to whoever serves the request."""
    held: list[Any] = []
    body = b""
    while True:
        message = await receive()
        held.append(message)
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if not message.get("more_body") or len(body) > _PEEK_LIMIT:
            break

    async def replay() -> Any:
        return held.pop(0) if held else await receive()

    if b'"progressToken"' not in body or len(body) > _PEEK_LIMIT:
        return replay, False
    try:
        message = json.loads(body)
        meta = message["params"]["_meta"]
        asks = message["method"] == "tools/call" and meta.get("progressToken") is not None
    except (ValueError, KeyError, TypeError, AttributeError):
        asks = False
    return replay, asks


def _bearer(value: bytes) -> bytes | None:
    """The credentials of ``Authorization: Bearer <token>``; the scheme name is
    case-insensitive (RFC 9110, 11.1), so ``bearer`` is as good as ``Bearer``."""
    scheme, _, credentials = value.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    return credentials.strip()


class BearerAuth:
    """Pure ASGI middleware: constant-time check of ``Authorization: Bearer <token>``; the
    request then runs as the token holder (or, with no token set, as an anonymous caller)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.expected = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if self.expected is None:
            with calling_as(ANONYMOUS):
                await self.app(scope, receive, send)
            return
        given: bytes | None = None
        for key, value in scope.get("headers", []):
            if key == b"authorization":
                given = _bearer(value)
                break
        if not hmac.compare_digest(given or b"", self.expected):
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
        with calling_as(TOKEN_HOLDER):
            await self.app(scope, receive, send)


def _oauth(app: ASGIApp, gateway: Gateway, auth: AuthConfig, host: str, port: int) -> ASGIApp:
    """``app`` behind OAuth: RFC 9728 metadata, access tokens checked, the caller set."""
    from .auth import OAuthGuard, OAuthVerifier, ResourceMetadata, ScopePolicy, resolve_resource

    try:
        resource = resolve_resource(auth, host, port, MCP_PATH)
    except AuthConfigError as exc:
        raise HttpSettingsError(str(exc)) from None
    scopes = gateway.policy.scopes or ScopePolicy.from_config(auth)
    name = gateway.config.server_name
    metadata = ResourceMetadata(resource, auth.issuer, scopes.supported(), name=name)

    def tool_of(tool_name: str) -> tuple[Tier, str] | None:
        tool = gateway.offered_tool(tool_name)
        if tool is None:
            return None  # the pipeline answers, as for any caller
        return tool.tier, tool.plugin

    verifier = OAuthVerifier(auth, resource=resource)
    return OAuthGuard(app, verifier, metadata, scopes, open_paths=OPEN_PATHS, tool_of=tool_of)


def build_http_app(
    gateway: Gateway,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
    allowed_origins: list[str] | None = None,
) -> ASGIApp:
    auth = gateway.config.auth
    if auth is not None and token:
        raise HttpSettingsError("a shared token and OAuth ([auth] issuer) exclude each other")
    if not is_loopback(host) and not token and auth is None:
        raise HttpSettingsError(
            f"refusing to serve on non-loopback address {host}: set MCP_GATEWAY_TOKEN "
            "(clients then send 'Authorization: Bearer <token>'), or [auth] issuer for OAuth "
            "access tokens"
        )
    server = build_server(gateway)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        status = await gateway.status()  # runs the checks; the results below come from cache
        failing = [r for r in await gateway.check_health() if r.blocking]
        code = 200 if not failing else 503
        return JSONResponse({"ready": not failing, **status}, status_code=code)

    hosts, origins = allowed_names(host, allowed_hosts, allowed_origins)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
    app: Starlette = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        json_response=True,
        stateless_http=True,
        transport_security=security,
        host=host,
        custom_starlette_routes=[Route("/healthz", healthz), Route("/readyz", readyz)],
    )
    modern = StreamableHTTPSessionManager(
        app=server, json_response=False, stateless=True, security_settings=security
    )
    streams: ASGIApp = ModernStreams(app, modern)
    if gateway.limiter is not None:  # inside the authentication: the caller is known there
        streams = LimitGate(streams, gateway.limiter, _mutation_of(gateway), MCP_PATH)
    guarded = _oauth(streams, gateway, auth, host, port) if auth else BearerAuth(streams, token)
    return HostOriginGuard(guarded, hosts, origins)


def _mutation_of(gateway: Gateway) -> Callable[[str], bool | None]:
    """Whether an offered tool is a mutation (``None``: no such tool offered)."""

    def mutation(name: str) -> bool | None:
        tool = gateway.offered_tool(name)
        return None if tool is None else tool.tier is Tier.MUTATION

    return mutation


def allowed_names(
    host: str, allowed_hosts: list[str] | None, allowed_origins: list[str] | None
) -> tuple[list[str], list[str]]:
    """The Host and Origin patterns this server accepts: the configured ones, else the loopback
    names plus the address it is bound to (so ``--host 127.0.0.2`` works as it is)."""
    bound = [f"[{host.strip('[]')}]:*"] if ":" in host else [f"{host}:*"]
    loopback = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    if allowed_hosts:
        hosts = list(allowed_hosts)
    elif is_loopback(host):
        hosts = list(dict.fromkeys([*loopback, *bound]))
    elif host in ("0.0.0.0", "::", "[::]"):
        raise HttpSettingsError(
            f"serving on every interface ({host}) needs the Host names clients will use: set "
            "MCP_GATEWAY_ALLOWED_HOSTS (e.g. 'gateway.example:*,10.0.0.5:*'); requests with "
            "other Host headers are refused to block DNS rebinding"
        )
    else:
        hosts = bound
    origins = list(allowed_origins or []) or [
        f"http://{h}" for h in dict.fromkeys([*loopback, *(bound if is_loopback(host) else [])])
    ]
    return hosts, origins


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound before uvicorn gets it: a port in use or an address this
    machine lacks is one line naming it (:class:`HttpSettingsError`), where uvicorn would log
    its own line and exit 3."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind((bare, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise HttpSettingsError(
                f"--port {port}: port {port} on {host} is already in use (another server "
                "listens there); choose another with --port"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise HttpSettingsError(
                f"--host {host}: this machine has no such address to listen on"
            ) from None
        if exc.errno == errno.EACCES:
            raise HttpSettingsError(
                f"--port {port}: not permitted to listen on port {port} (ports below 1024 need "
                "privileges); choose another with --port"
            ) from None
        raise HttpSettingsError(
            f"cannot listen on {host} port {port}: {exc.strerror or type(exc).__name__}"
        ) from None
    return sock


def _who_may_call(cfg: GatewayConfig, token: str | None) -> str:
    """The start line's words for who may call."""
    if cfg.auth is not None:
        return f"OAuth access tokens from {cfg.auth.issuer}"
    if token:
        return "bearer token required (MCP_GATEWAY_TOKEN)"
    return "no token required (loopback only)"


def _uvicorn_config(app: Any, host: str, port: int) -> Any:
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        http=GuardedH11Protocol,
        # uvicorn's loggers go through the gateway's handler (redacted, rate-limited, never
        # blocking on a full stderr) instead of handlers of their own.
        log_config=None,
        log_level="warning",
        timeout_keep_alive=5,
        # uvicorn's limit on a request's header block (h11 refuses more with 400).
        h11_max_incomplete_event_size=16 * 1024,
    )


def serve_http(
    gateway: Gateway, *, host: str, port: int, guard: SignalGuard | None = None, **kwargs: Any
) -> None:
    import uvicorn

    cfg = gateway.config
    token = cfg.token.get_secret_value() if cfg.token else None
    kwargs.setdefault("allowed_hosts", cfg.allowed_hosts)
    kwargs.setdefault("allowed_origins", cfg.allowed_origins)
    app = build_http_app(gateway, host=host, port=port, token=token, **kwargs)
    sock = _listen(host, port)  # once the settings passed: a refused start binds nothing
    auth = _who_may_call(cfg, token)
    missing = gateway.unoffered_summary()

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # the SignalGuard handles them: only a real signal stops the server

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:  # listening: say where, once, on stderr (stdout is not ours)
                bound = self.servers[0].sockets[0].getsockname()[1] if self.servers else port
                shown = f"[{host.strip('[]')}]" if ":" in host else host
                sys.stderr.write(
                    f"mcp-gateway: serving MCP at http://{shown}:{bound}{MCP_PATH} ({auth})"
                    f"{'; ' + missing if missing else ''}\n"
                )
                sys.stderr.flush()

    server = _Server(_uvicorn_config(app, host, port))

    def stop() -> None:
        server.should_exit = True

    async def main() -> None:
        with guard.serving(stop) if guard is not None else contextlib.nullcontext():
            await server.serve(sockets=[sock])

    try:
        run(main, guard)
    finally:
        sock.close()
