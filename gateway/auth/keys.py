"""The issuer's signing keys: discovered, fetched, cached, refetched once for an unknown key;
and the bounded JSON requests to the identity provider (metadata, keys, introspection).

Which algorithm a key verifies is decided by the key (its ``alg``, else its type and curve)
and the configured allow-list, never by the token: an RSA key never checks an HMAC (``HS*``)
signature, so a token "signed" with the public key as a shared secret finds no key at all.
Symmetric (``oct``) keys in a JWKS are ignored for the same reason.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
from jwt import PyJWK
from jwt.exceptions import PyJWKError

from .settings import AuthConfig, check_url

# Bounded JSON requests to the identity provider (metadata, keys, introspection).

#: A JWKS or a metadata document is a few KB; anything past this is not one.
MAX_BODY = 512 * 1024


class IssuerUnavailable(Exception):
    """The identity provider's metadata, keys or introspection cannot be had right now. Not
    the caller's fault: the transport answers 503 and the caller retries later. The message
    is for the gateway log only."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


async def fetch_json(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    what: str,
    *,
    data: dict[str, str] | None = None,
    auth: httpx.Auth | None = None,
) -> dict[str, Any]:
    """The JSON object at ``url``; :class:`IssuerUnavailable` for anything else (no answer,
    a status other than 200, a body too large or not a JSON object). Redirects are not
    followed: keys come from where the configuration says, not from where a reply points."""
    try:
        async with http.stream(
            method, url, data=data, auth=auth, headers={"Accept": "application/json"}
        ) as resp:
            if resp.status_code != 200:
                raise IssuerUnavailable(
                    f"{what} answered HTTP {resp.status_code}", status=resp.status_code
                )
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > MAX_BODY:
                    raise IssuerUnavailable(f"{what} sent more than {MAX_BODY} bytes")
                chunks.append(chunk)
    except httpx.HTTPError as exc:
        raise IssuerUnavailable(f"{what} cannot be reached ({type(exc).__name__})") from None
    try:
        value = json.loads(b"".join(chunks))
    except ValueError:
        raise IssuerUnavailable(f"{what} did not send JSON") from None
    if not isinstance(value, dict):
        raise IssuerUnavailable(f"{what} did not send a JSON object")
    return value


log = logging.getLogger("gateway.auth")

_RSA = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_CURVES = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
_OKP_CURVES = frozenset({"Ed25519", "Ed448"})


def key_algorithms(jwk: dict[str, Any]) -> frozenset[str]:
    """The signature algorithms this public key can verify."""
    declared = jwk.get("alg")
    kty = jwk.get("kty")
    if kty == "RSA":
        family = _RSA
    elif kty == "EC" and jwk.get("crv") in _EC_CURVES:
        family = frozenset({_EC_CURVES[jwk["crv"]]})
    elif kty == "OKP" and jwk.get("crv") in _OKP_CURVES:
        family = frozenset({"EdDSA"})
    else:  # "oct" (a shared secret) and anything unknown: never a verification key here
        return frozenset()
    if declared is not None:
        return family & {declared}
    return family


def discovery_urls(issuer: str, kind: str) -> list[str]:
    """Where the issuer's metadata may be: OpenID Connect Discovery appends its well-known
    path to the issuer; RFC 8414 inserts its own between the host and the issuer's path."""
    base = issuer.rstrip("/")
    scheme, rest = base.split("://", 1)
    host, _, path = rest.partition("/")
    path = f"/{path}" if path else ""
    openid = f"{base}/.well-known/openid-configuration"
    oauth = f"{scheme}://{host}/.well-known/oauth-authorization-server{path}"
    openid_inserted = f"{scheme}://{host}/.well-known/openid-configuration{path}"
    if kind == "openid":
        return [openid]
    if kind == "oauth":
        return [oauth]
    return list(dict.fromkeys([openid, oauth, openid_inserted]))


@dataclass(frozen=True)
class _Key:
    kid: str | None
    jwk: dict[str, Any]
    algorithms: frozenset[str]


class KeySet:
    """The issuer's JWKS, fetched on first use (start-up does no network I/O)."""

    def __init__(self, config: AuthConfig, http: httpx.AsyncClient) -> None:
        self.config = config
        self.http = http
        self._lock = anyio.Lock()
        self._metadata: dict[str, Any] | None = None
        self._keys: list[_Key] | None = None
        self._prepared: dict[tuple[str | None, str], PyJWK] = {}  # by the token's kid and alg
        self._generation = 0
        self._attempted_at = -float("inf")  # last fetch, successful or not
        self._expires_at = -float("inf")

    async def metadata(self) -> dict[str, Any]:
        """The issuer's authorization-server metadata (cached once found)."""
        if self._metadata is not None:
            return self._metadata
        tried = []
        for url in discovery_urls(self.config.issuer, self.config.metadata_document):
            try:
                doc = await fetch_json(self.http, "GET", url, "the issuer's metadata")
            except IssuerUnavailable as exc:
                if exc.status == 404:
                    tried.append(url)
                    continue
                raise
            if doc.get("issuer") != self.config.issuer:
                # RFC 8414 §3.3: a document naming another issuer must not be used.
                raise IssuerUnavailable(
                    f"the metadata at {url} names issuer {str(doc.get('issuer'))[:200]!r}, "
                    f"not the configured {self.config.issuer!r}"
                )
            self._metadata = doc
            return doc
        raise IssuerUnavailable(f"no metadata document found at {', '.join(tried)}")

    async def _jwks_url(self) -> str:
        if self.config.jwks_url:
            return self.config.jwks_url
        uri = (await self.metadata()).get("jwks_uri")
        try:
            return check_url(str(uri), "jwks_uri")
        except ValueError as exc:
            raise IssuerUnavailable(
                f"the issuer's metadata has no usable jwks_uri: {exc}"
            ) from None

    async def key(self, kid: str | None, alg: str) -> PyJWK | None:
        """The key that verifies a token with this ``kid`` and ``alg``, or ``None``.

        An unknown ``kid`` (the issuer rotated its keys) refetches the set once, unless a
        fetch happened less than ``jwks_refetch_seconds`` ago: a stream of made-up ``kid``s
        cannot turn the gateway into a load generator against the identity provider."""
        now = time.monotonic()
        if self._keys is None or now >= self._expires_at:
            await self._refresh(self._generation, keep_stale=True)
        found = self._find(kid, alg)
        recent = now - self._attempted_at < self.config.jwks_refetch_seconds
        if found is None and not self._knows(kid) and not recent:
            # If this fetch fails, the key may well exist (a rotation the provider is down
            # for): that is "cannot tell now", not "refused".
            await self._refresh(self._generation, keep_stale=False)
            found = self._find(kid, alg)
        return found

    def _knows(self, kid: str | None) -> bool:
        return kid is not None and any(k.kid == kid for k in self._keys or [])

    def _find(self, kid: str | None, alg: str) -> PyJWK | None:
        prepared = self._prepared.get((kid, alg))
        if prepared is not None:  # the common case: a key already used, on every call
            return prepared
        usable = [k for k in self._keys or [] if alg in k.algorithms]
        if kid is None:
            # Without a kid the key is only unambiguous when one key can verify this alg.
            match = usable[0] if len(usable) == 1 else None
        else:  # some providers give an RSA and an EC key the same kid
            match = next((k for k in usable if k.kid == kid), None)
        if match is None:
            return None
        prepared = PyJWK(match.jwk, algorithm=alg)
        self._prepared[(kid, alg)] = prepared
        return prepared

    async def _refresh(self, seen_generation: int, *, keep_stale: bool) -> None:
        async with self._lock:
            if self._generation != seen_generation:
                return  # another request fetched while this one waited
            now = time.monotonic()
            if self._keys is None and now - self._attempted_at < self.config.jwks_refetch_seconds:
                raise IssuerUnavailable("the issuer's keys could not be fetched a moment ago")
            self._attempted_at = now
            try:
                keys = await self._fetch()
            except IssuerUnavailable as exc:
                self._metadata = None  # rediscover next time: the jwks_uri may have moved
                if self._keys is None or not keep_stale:
                    raise
                # Keep verifying with the keys we have rather than refuse every caller while
                # the identity provider is down; try again after the refetch interval.
                log.warning("auth: keeping the cached signing keys: %s", exc)
                self._expires_at = now + self.config.jwks_refetch_seconds
                return
            self._keys = keys
            self._prepared = {}
            self._generation += 1
            self._expires_at = now + self.config.jwks_cache_seconds

    async def _fetch(self) -> list[_Key]:
        url = await self._jwks_url()
        doc = await fetch_json(self.http, "GET", url, "the issuer's JWKS")
        entries = doc.get("keys")
        if not isinstance(entries, list):
            raise IssuerUnavailable("the issuer's JWKS has no keys list")
        keys: list[_Key] = []
        allowed = frozenset(self.config.algorithms)
        for jwk in entries:
            if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
                continue
            ops = jwk.get("key_ops")
            if isinstance(ops, list) and "verify" not in ops:
                continue
            algorithms = key_algorithms(jwk) & allowed
            kid = jwk.get("kid")
            if not algorithms or (kid is not None and not isinstance(kid, str)):
                continue
            try:
                PyJWK(jwk, algorithm=min(algorithms))
            except (PyJWKError, ValueError, TypeError) as exc:
                log.warning("auth: skipping an unusable key %r in the JWKS: %s", kid, exc)
                continue
            keys.append(_Key(kid, jwk, algorithms))
        if not keys:
            raise IssuerUnavailable("the issuer's JWKS holds no usable signature key")
        return keys
