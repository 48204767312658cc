"""Access-token verification: JWTs against the issuer's keys, opaque tokens by introspection.

:meth:`OAuthVerifier.authenticate` says *why* a token is refused (the ``error_description``
of the 401); :meth:`OAuthVerifier.verify_token` is the MCP SDK's ``TokenVerifier`` protocol
over it, for code that wants the SDK's ``AccessToken``. No token is ever logged, kept or put
into an error.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
import jwt
from jwt.exceptions import (
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidAlgorithmError,
    InvalidIssuerError,
    InvalidSignatureError,
    InvalidTokenError,
    MissingRequiredClaimError,
)
from mcp.server.auth.provider import AccessToken

from ..tls import tls_context
from .identity import Identity, Via
from .keys import IssuerUnavailable, KeySet, fetch_json
from .settings import AuthConfig, IntrospectionConfig

# From verified claims to an :class:`Identity`, and the RFC 8707 audience check.

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


# RFC 7662 token introspection, for access tokens that are not JWTs.
#
# The issuer is asked once per token and ``cache_seconds`` (never past the token's expiry), a
# refused token too; the cache is keyed by a SHA-256 of the token, so the token itself is kept
# nowhere. Made-up tokens are all different, so the cache alone would let anyone turn the
# gateway into a load generator against the identity provider (1,000 tokens, 1,000 requests):
# each client address may cause only ``refusals_per_minute`` introspections whose token turned
# out not to be valid (:class:`RefusalBudget`), as the key set is refetched for unknown key ids
# at most every ``jwks_refetch_seconds``.

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


log = logging.getLogger("gateway.auth")

#: Real access tokens are a few KB; a header this long is not one.
MAX_TOKEN_CHARS = 16 * 1024
_REQUIRED_CLAIMS = ["exp", "iss", "aud"]

_MALFORMED = "the token is malformed"
_BAD_ALG = "the token's signing algorithm is not accepted"


_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")


def _jose_header(token: str) -> dict[str, Any] | None:
    """The header of a compact JWS, or ``None`` when the token is not one (opaque).

    Only what the key lookup needs; ``jwt.decode`` checks the whole token again afterwards.
    Not ``jwt.get_unverified_header``: it decodes all three segments character by character
    in Python, which doubled the cost of every call."""
    head, dot, rest = token.partition(".")
    if not dot or rest.count(".") != 1 or not _SEGMENT.fullmatch(head) or len(head) % 4 == 1:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class OAuthVerifier:
    """Verifies access tokens for one resource (the gateway's public ``/mcp`` URL)."""

    def __init__(
        self,
        config: AuthConfig,
        *,
        resource: str,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.config = config
        self.resource = resource
        self.audiences = config.audiences(resource)
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(
            timeout=config.http_timeout, follow_redirects=False, verify=tls_context()
        )
        self.keys = KeySet(config, self.http)
        self.introspector = (
            Introspector(config, config.introspection, self.audiences, self.http, self._endpoint)
            if config.introspection is not None
            else None
        )

    async def _endpoint(self) -> str | None:
        value = (await self.keys.metadata()).get("introspection_endpoint")
        return value if isinstance(value, str) else None

    async def aclose(self) -> None:
        if self._own_http:
            await self.http.aclose()

    async def authenticate(self, token: str, client: str | None = None) -> Identity:
        """The caller this token stands for. :class:`TokenRejected` when it does not let its
        holder in; :class:`IssuerUnavailable` when that cannot be decided now;
        :class:`TokenThrottled` when an opaque token would need an introspection that the
        ``client`` address (the request's peer) may not cause now."""
        try:
            identity = await self._authenticate(token, client)
        except TokenRejected as rejected:
            log.info("auth: token refused: %s", rejected.description)
            raise
        return identity

    async def _authenticate(self, token: str, client: str | None) -> Identity:
        if not token or len(token) > MAX_TOKEN_CHARS or not token.isascii():
            raise TokenRejected(_MALFORMED)
        header = _jose_header(token)
        if header is None:
            if self.introspector is not None:
                return await self.introspector.identity(token, client)
            raise TokenRejected(_MALFORMED)
        alg = header.get("alg")
        # Decided before any key is looked up: "none" has no signature, and HS* would treat
        # the issuer's public key as a shared secret anyone can read.
        if not isinstance(alg, str) or alg not in self.config.algorithms:
            raise TokenRejected(_BAD_ALG)
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected(_MALFORMED)
        key = await self.keys.key(kid, alg)
        if key is None:
            raise TokenRejected("the token is signed with a key the issuer does not publish")
        claims = self._decode(token, key, alg)
        if not audience_matches(claims.get("aud"), self.audiences):
            raise TokenRejected("the token was issued for another resource (audience)")
        return identity_from_claims(claims, via="jwt", issuer=self.config.issuer)

    def _decode(self, token: str, key: jwt.PyJWK, alg: str) -> dict[str, Any]:
        try:
            return jwt.decode(
                token,
                key=key,
                algorithms=[alg],
                issuer=self.config.issuer,
                leeway=self.config.leeway_seconds,
                # The audience is checked by audience_matches: URL spellings differ (RFC 8707).
                options={"require": _REQUIRED_CLAIMS, "verify_aud": False},
            )
        except ExpiredSignatureError:
            raise TokenRejected("the token has expired") from None
        except ImmatureSignatureError:
            raise TokenRejected("the token is not valid yet") from None
        except InvalidIssuerError:
            raise TokenRejected("the token was issued by another issuer") from None
        except MissingRequiredClaimError as exc:
            raise TokenRejected(f"the token has no {exc.claim} claim") from None
        except InvalidSignatureError:
            raise TokenRejected("the token's signature does not verify") from None
        except InvalidAlgorithmError:
            raise TokenRejected(_BAD_ALG) from None
        except InvalidTokenError:
            raise TokenRejected(_MALFORMED) from None

    async def verify_token(self, token: str) -> AccessToken | None:
        """The MCP SDK's ``TokenVerifier`` protocol: ``None`` for any refusal."""
        try:
            identity = await self.authenticate(token)
        except (TokenRejected, IssuerUnavailable):
            return None
        return AccessToken(
            token=token,
            client_id=identity.client_id or "",
            scopes=sorted(identity.scopes or ()),
            expires_at=identity.expires_at,
            resource=self.resource,  # the audience check above passed for it
            subject=identity.subject,
            claims={"iss": identity.issuer},
        )
