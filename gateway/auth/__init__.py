"""The gateway as an OAuth 2.1 resource server (the MCP authorization spec).

``settings`` (the ``[auth]`` table), ``verifier`` (JWTs against the issuer's keys, opaque
tokens by RFC 7662 introspection), ``scopes`` (tiers as scopes), ``identity`` (who is calling,
for the pipeline and the audit) and ``asgi`` (RFC 9728 metadata, the 401/403 challenges).
"""

from __future__ import annotations

from .asgi import OAuthGuard, ResourceMetadata, challenge
from .claims import TokenRejected
from .fetch import IssuerUnavailable
from .identity import CURRENT_CALLER, Identity, calling_as, current_caller, local_identity
from .scopes import ScopePolicy
from .settings import AuthConfig, AuthConfigError, load_auth_config, resolve_resource
from .verifier import OAuthVerifier

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
    "calling_as",
    "challenge",
    "current_caller",
    "load_auth_config",
    "local_identity",
    "resolve_resource",
]
