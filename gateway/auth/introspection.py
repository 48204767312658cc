"""RFC 7662 token introspection, for access tokens that are not JWTs.

The issuer is asked once per token and ``cache_seconds`` (never past the token's expiry), a
refused token too; the cache is keyed by a SHA-256 of the token, so the token itself is kept
nowhere. Made-up tokens are all different, so the cache alone would let anyone turn the
gateway into a load generator against the identity provider (1,000 tokens, 1,000 requests):
each client address may cause only ``refusals_per_minute`` introspections whose token turned
out not to be valid (:class:`RefusalBudget`), as the key set is refetched for unknown key ids
at most every ``jwks_refetch_seconds``.
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

from .claims import TokenRejected, TokenThrottled, audience_matches, identity_from_claims
from .fetch import IssuerUnavailable, fetch_json
from .identity import Identity
from .settings import AuthConfig, IntrospectionConfig

log = logging.getLogger("gateway.auth")

_MAX_ENTRIES = 10_000
_MAX_CLIENTS = 10_000
_Entry = tuple[float, Identity | TokenRejected]


class RefusalBudget:
    """A token bucket per client address: ``per_minute`` units, refilled evenly over a minute.

    An introspection takes a unit before it is asked (so a thousand requests at once cannot
    all start), and a valid token gives it back: only refusals, and answers the provider could
    not give, use the budget up. The least recently seen addresses are forgotten past
    ``_MAX_CLIENTS`` (memory stays bounded; a forgotten address starts full again)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self._left: OrderedDict[str, tuple[float, float]] = OrderedDict()  # units, as of when

    def _units(self, client: str, now: float) -> float:
        units, at = self._left.get(client, (self.capacity, now))
        return min(self.capacity, units + (now - at) * self.rate)

    def take(self, client: str) -> float | None:
        """Take a unit: ``None`` when there was one, else the seconds until there is."""
        now = self.clock()
        units = self._units(client, now)
        if units < 1:
            self._left[client] = (units, now)
            return (1 - units) / self.rate
        self._left[client] = (units - 1, now)
        self._left.move_to_end(client)
        while len(self._left) > _MAX_CLIENTS:
            self._left.popitem(last=False)
        return None

    def give_back(self, client: str) -> None:
        now = self.clock()
        self._left[client] = (min(self.capacity, self._units(client, now) + 1), now)


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
        self.budget = RefusalBudget(settings.refusals_per_minute)

    async def _endpoint(self) -> str:
        endpoint = self.settings.endpoint or await self._discovered()
        if not endpoint:
            raise IssuerUnavailable(
                "no introspection endpoint: the issuer's metadata names none; set "
                "[auth.introspection] endpoint"
            )
        return endpoint

    async def identity(self, token: str, client: str | None = None) -> Identity:
        """The caller ``token`` stands for. ``client``: the address it came from, whose
        :class:`RefusalBudget` an introspection uses (:class:`TokenThrottled` when it is
        spent); ``None`` (no transport address) is not limited."""
        key = hashlib.sha256(token.encode()).digest()
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(key)
            return _unwrap(cached[1])
        if client is not None:
            wait = self.budget.take(client)
            if wait is not None:
                raise TokenThrottled(wait)
        verdict = await self._ask(token)
        if client is not None and isinstance(verdict, Identity):
            self.budget.give_back(client)
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
