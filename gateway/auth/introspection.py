"""RFC 7662 token introspection, for access tokens that are not JWTs.

The issuer is asked once per token and ``cache_seconds`` (never past the token's expiry);
the cache is keyed by a SHA-256 of the token, so the token itself is kept nowhere.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import httpx

from .claims import TokenRejected, audience_matches, identity_from_claims
from .fetch import IssuerUnavailable, fetch_json
from .identity import Identity
from .settings import AuthConfig, IntrospectionConfig

log = logging.getLogger("gateway.auth")

_MAX_ENTRIES = 10_000
_Entry = tuple[float, Identity | TokenRejected]


class Introspector:
    def __init__(
        self,
        config: AuthConfig,
        settings: IntrospectionConfig,
        audiences: tuple[str, ...],
        http: httpx.AsyncClient,
        discovered_endpoint: Callable[[], Awaitable[str | None]],
    ) -> None:
        self.config = config
        self.settings = settings
        self.audiences = audiences
        self.http = http
        self._discovered = discovered_endpoint
        # RFC 6749 §2.3.1: id and secret are form-encoded before they go into Basic auth.
        self._auth = httpx.BasicAuth(
            quote(settings.client_id, safe=""),
            quote(settings.client_secret.get_secret_value(), safe=""),
        )
        self._cache: OrderedDict[bytes, _Entry] = OrderedDict()

    async def _endpoint(self) -> str:
        endpoint = self.settings.endpoint or await self._discovered()
        if not endpoint:
            raise IssuerUnavailable(
                "no introspection endpoint: the issuer's metadata names none; set "
                "[auth.introspection] endpoint"
            )
        return endpoint

    async def identity(self, token: str) -> Identity:
        key = hashlib.sha256(token.encode()).digest()
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(key)
            return _unwrap(cached[1])
        verdict = await self._ask(token)
        ttl = self.settings.cache_seconds
        if isinstance(verdict, Identity) and verdict.expires_at is not None:
            ttl = min(ttl, max(0.0, verdict.expires_at + self.config.leeway_seconds - time.time()))
        if ttl > 0:
            self._cache[key] = (now + ttl, verdict)
            while len(self._cache) > _MAX_ENTRIES:
                self._cache.popitem(last=False)
        return _unwrap(verdict)

    async def _ask(self, token: str) -> Identity | TokenRejected:
        endpoint = await self._endpoint()
        try:
            answer = await fetch_json(
                self.http,
                "POST",
                endpoint,
                "the introspection endpoint",
                data={"token": token, "token_type_hint": "access_token"},
                auth=self._auth,
            )
        except IssuerUnavailable as exc:
            if exc.status in (401, 403):
                log.error(
                    "auth: the introspection endpoint refused the gateway's client credentials "
                    "(client_id %r); check [auth.introspection]",
                    self.settings.client_id,
                )
            raise
        return self._judge(answer)

    def _judge(self, answer: dict[str, Any]) -> Identity | TokenRejected:
        if answer.get("active") is not True:
            return TokenRejected("the token is not active (expired, revoked or unknown)")
        now = time.time()
        leeway = self.config.leeway_seconds
        exp, nbf = answer.get("exp"), answer.get("nbf")
        if isinstance(exp, int | float) and exp + leeway < now:
            return TokenRejected("the token has expired")
        if isinstance(nbf, int | float) and nbf - leeway > now:
            return TokenRejected("the token is not valid yet")
        if "iss" in answer and answer["iss"] != self.config.issuer:
            return TokenRejected("the token was issued by another issuer")
        if not audience_matches(answer.get("aud"), self.audiences):
            return TokenRejected("the token was issued for another resource (audience)")
        try:
            return identity_from_claims(answer, via="introspection", issuer=self.config.issuer)
        except TokenRejected as rejected:
            return rejected


def _unwrap(verdict: Identity | TokenRejected) -> Identity:
    if isinstance(verdict, TokenRejected):
        raise TokenRejected(verdict.description)
    return verdict
