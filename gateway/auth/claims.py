"""From verified claims to an :class:`Identity`, and the RFC 8707 audience check."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .identity import Identity, Via

_DEFAULT_PORTS = {"http": 80, "https": 443}


class TokenRejected(Exception):
    """The token does not let its holder in. ``description`` is a fixed sentence (never a
    value from the token), safe for the ``error_description`` the client sees."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class TokenThrottled(Exception):
    """Too many tokens this client address sent were refused lately: a new one is not checked
    until ``retry_after`` seconds have passed (the transport answers 429)."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many refused tokens from this address; retry in {retry_after:.0f} s")
        self.retry_after = retry_after


@functools.lru_cache(maxsize=1024)  # a deployment sees a handful of audiences, on every call
def normalize_resource(value: str) -> str:
    """A resource URL as RFC 3986 compares them (case of scheme and host, default port, a
    trailing slash aside); anything that is not an http(s) URL stays as it is."""
    parts = urlsplit(value)
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        return value
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return value
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def audience_matches(aud: Any, audiences: tuple[str, ...]) -> bool:
    """Was the token issued for this server (RFC 8707)? ``aud`` is a string or a list."""
    given = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    wanted = {normalize_resource(a) for a in audiences}
    return any(isinstance(a, str) and normalize_resource(a) in wanted for a in given)


def token_scopes(claims: dict[str, Any]) -> frozenset[str]:
    """``scope`` (RFC 9068 / 7662: space-separated) or ``scp`` (a list, as some providers)."""
    raw = claims.get("scope", claims.get("scp"))
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list):
        return frozenset(s for s in raw if isinstance(s, str) and s)
    return frozenset()


def identity_from_claims(claims: dict[str, Any], *, via: Via, issuer: str) -> Identity:
    subject = claims.get("sub")
    client = claims.get("client_id", claims.get("azp"))
    if subject is not None and not isinstance(subject, str):
        raise TokenRejected("the token's sub claim is not a string")
    if client is not None and not isinstance(client, str):
        raise TokenRejected("the token's client_id claim is not a string")
    if not subject and not client:
        # Every call must be attributable in the audit log.
        raise TokenRejected("the token names neither a subject (sub) nor a client (client_id)")
    exp = claims.get("exp")
    return Identity(
        subject=subject or None,
        client_id=client or None,
        scopes=token_scopes(claims),
        via=via,
        issuer=issuer,
        expires_at=int(exp) if isinstance(exp, int | float) else None,
    )
