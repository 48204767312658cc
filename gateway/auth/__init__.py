"""The gateway as an OAuth 2.1 resource server (the MCP authorization spec).

``identity`` (who is calling, for the pipeline and the audit), ``settings`` (the ``[auth]``
table and tiers as scopes), ``keys`` (the issuer's signing keys and bounded requests to it),
``verifier`` (claims to an identity, JWTs against the issuer's keys, opaque tokens by RFC 7662
introspection) and ``asgi`` (RFC 9728 metadata, the 401/403 challenges).

Names are imported on first use: every call asks :func:`current_caller`, and stdio would pay
for pyjwt, cryptography and httpx (about 0.1 s of start-up) without ever checking a token.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .asgi import OAuthGuard, ResourceMetadata, challenge
    from .identity import CURRENT_CALLER, Identity, calling_as, current_caller, local_identity
    from .keys import IssuerUnavailable
    from .settings import (
        AuthConfig,
        AuthConfigError,
        ScopePolicy,
        load_auth_config,
        resolve_resource,
    )
    from .verifier import OAuthVerifier, TokenRejected, TokenThrottled

_WHERE = {
    "OAuthGuard": "asgi",
    "ResourceMetadata": "asgi",
    "challenge": "asgi",
    "TokenRejected": "verifier",
    "TokenThrottled": "verifier",
    "IssuerUnavailable": "keys",
    "CURRENT_CALLER": "identity",
    "Identity": "identity",
    "calling_as": "identity",
    "current_caller": "identity",
    "local_identity": "identity",
    "ScopePolicy": "settings",
    "AuthConfig": "settings",
    "AuthConfigError": "settings",
    "load_auth_config": "settings",
    "resolve_resource": "settings",
    "OAuthVerifier": "verifier",
}

__all__ = [
    "CURRENT_CALLER",
    "AuthConfig",
    "AuthConfigError",
    "Identity",
    "IssuerUnavailable",
    "OAuthGuard",
    "OAuthVerifier",
    "ResourceMetadata",
    "ScopePolicy",
    "TokenRejected",
    "TokenThrottled",
    "calling_as",
    "challenge",
    "current_caller",
    "load_auth_config",
    "local_identity",
    "resolve_resource",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
