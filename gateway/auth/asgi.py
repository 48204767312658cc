"""The HTTP side of the resource server, as pure ASGI parts.

- :class:`ResourceMetadata`: the RFC 9728 document at ``/.well-known/oauth-protected-resource``
  and its path-suffixed form (``…/mcp``), naming the issuer: how a client finds where to sign in.
- :class:`OAuthGuard`: every other route but the open ones needs a valid access token. No or
  a non-bearer ``Authorization`` → 401 with a challenge naming the metadata; a refused token
  → 401 ``invalid_token`` saying why; a token with none of the gateway's scopes, or (when the
  request's ``Mcp-Method``/``Mcp-Name`` headers name the tool) without the tool's scope → 403
  ``insufficient_scope`` naming the scope. Otherwise the caller's :class:`Identity` is set for
  the request (:func:`gateway.auth.current_caller`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

from mcp.shared.auth import ProtectedResourceMetadata
from starlette.types import ASGIApp, Receive, Scope, Send

from ..spec import Tier
from .identity import Identity, calling_as
from .keys import IssuerUnavailable
from .settings import ScopePolicy
from .verifier import TokenRejected, TokenThrottled

log = logging.getLogger("gateway.auth")

METADATA_PATH = "/.well-known/oauth-protected-resource"

#: Looks a tool up by name: its tier and plugin, or ``None`` when there is no such tool.
ToolLookup = Callable[[str], "tuple[Tier, str] | None"]


class Authenticator(Protocol):
    async def authenticate(self, token: str, client: str | None = None) -> Identity: ...

    async def aclose(self) -> None: ...


def _quoted(value: str) -> str:
    """An RFC 9110 quoted-string: no control characters, ``"`` and ``\\`` escaped."""
    clean = "".join(ch for ch in value if ch.isprintable())
    return '"' + clean.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(
    metadata_url: str,
    *,
    error: str | None = None,
    description: str | None = None,
    scope: str | None = None,
) -> str:
    """A ``WWW-Authenticate: Bearer …`` value (RFC 6750 §3, RFC 9728 §5.1)."""
    params = [
        ("error", error),
        ("error_description", description),
        ("scope", scope),
        ("resource_metadata", metadata_url),
    ]
    return "Bearer " + ", ".join(f"{k}={_quoted(v)}" for k, v in params if v)


async def _send_json(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    data = json.dumps(body, separators=(",", ":")).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def _error(code: str, message: str, *, retryable: bool = False) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "retryable": retryable}}


class ResourceMetadata:
    """The protected-resource metadata of one resource (the gateway's public ``/mcp`` URL)."""

    def __init__(
        self, resource: str, issuer: str, scopes: list[str], *, name: str | None = None
    ) -> None:
        document = ProtectedResourceMetadata.model_validate(
            {
                "resource": resource,
                "authorization_servers": [issuer],
                "scopes_supported": scopes or None,
                "resource_name": name,
            }
        )
        self.body = document.model_dump_json(exclude_none=True).encode()
        parts = urlsplit(resource)
        suffix = parts.path.rstrip("/")
        self.paths = frozenset({METADATA_PATH, METADATA_PATH + suffix})
        #: RFC 9728 §3.1: the well-known path goes between the host and the resource's path.
        self.url = f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{suffix}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _send_json(
                send,
                405,
                _error("VALIDATION_ERROR", "the metadata is read with GET"),
                {"Allow": "GET, HEAD"},
            )
            return
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self.body)).encode()),
            (b"cache-control", b"public, max-age=3600"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        body = b"" if scope["method"] == "HEAD" else self.body
        await send({"type": "http.response.body", "body": body})


class OAuthGuard:
    """Pure ASGI middleware: access tokens on every route but ``open_paths``."""

    def __init__(
        self,
        app: ASGIApp,
        verifier: Authenticator,
        metadata: ResourceMetadata,
        scopes: ScopePolicy,
        *,
        open_paths: frozenset[str] = frozenset(),
        tool_of: ToolLookup | None = None,
    ) -> None:
        self.app = app
        self.verifier = verifier
        self.metadata = metadata
        self.scopes = scopes
        self.open_paths = open_paths
        self.tool_of = tool_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            # The connections to the issuer are closed in the loop that opened them, once the
            # server has shut down.
            try:
                await self.app(scope, receive, send)
            finally:
                await self.verifier.aclose()
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in self.metadata.paths:
            await self.metadata(scope, receive, send)
            return
        if scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        identity = await self._identify(scope, send)
        if identity is None or not await self._scoped(identity, scope, send):
            return
        with calling_as(identity):
            await self.app(scope, receive, send)

    async def _identify(self, scope: Scope, send: Send) -> Identity | None:
        given = [v for k, v in scope.get("headers", []) if k == b"authorization"]
        if len(given) > 1:
            await self._deny(
                send, 400, "invalid_request", "send one Authorization header, not several"
            )
            return None
        scheme, _, token = given[0].decode("latin-1").partition(" ") if given else ("", "", "")
        if scheme.lower() != "bearer":
            # RFC 6750 §3.1: no credentials at all get a challenge without an error code.
            await self._deny(send, 401, None, "this server needs an OAuth access token")
            return None
        token = token.strip(" ")
        try:
            if not token or " " in token:
                raise TokenRejected("the token is malformed")
            peer = scope.get("client")
            return await self.verifier.authenticate(token, peer[0] if peer else None)
        except TokenRejected as rejected:
            await self._deny(send, 401, "invalid_token", rejected.description)
        except TokenThrottled as throttled:
            wait = max(1, math.ceil(throttled.retry_after))
            log.warning(
                "auth: a client address sent too many refused tokens; its new ones wait %d s", wait
            )
            await _send_json(
                send,
                429,
                _error(
                    "PERMISSION_DENIED",
                    f"too many tokens from this address were refused; retry in {wait} s",
                    retryable=True,
                ),
                {"Retry-After": str(wait)},
            )
        except IssuerUnavailable as exc:
            log.warning("auth: cannot check a token now: %s", exc)
            await _send_json(
                send,
                503,
                _error(
                    "BACKEND_UNAVAILABLE",
                    "the identity provider cannot be reached to check the access token; "
                    "retry in a few seconds",
                    retryable=True,
                ),
                {"Retry-After": "5"},
            )
        return None

    async def _scoped(self, identity: Identity, scope: Scope, send: Send) -> bool:
        """Refuse before the call what the call would refuse: a token that unlocks nothing,
        or a ``tools/call`` whose routing headers name a tool the token may not use."""
        if not self.scopes.grants_anything(identity):
            need = self.scopes.names.read
            await self._deny(
                send,
                403,
                "insufficient_scope",
                "the token carries none of the gateway's scopes",
                need,
            )
            return False
        if self.tool_of is None:
            return True
        headers = dict(scope.get("headers", []))
        if headers.get(b"mcp-method") != b"tools/call" or b"mcp-name" not in headers:
            return True
        name = headers[b"mcp-name"].decode("latin-1")
        tool = self.tool_of(name)
        if tool is None:
            return True  # the call pipeline answers NOT_FOUND
        tier, plugin = tool
        missing = self.scopes.missing(identity, tier=tier, plugin=plugin, name=name)
        if missing is None:
            return True
        await self._deny(
            send, 403, "insufficient_scope", f"calling {name} needs the scope {missing}", missing
        )
        return False

    async def _deny(
        self,
        send: Send,
        status: int,
        error: str | None,
        description: str,
        scope: str | None = None,
    ) -> None:
        if status == 401:
            scope = " ".join(self.scopes.to_request())
        header = challenge(
            self.metadata.url,
            error=error,
            description=description if error else None,
            scope=scope,
        )
        await _send_json(
            send,
            status,
            _error("PERMISSION_DENIED", description),
            {"WWW-Authenticate": header},
        )
