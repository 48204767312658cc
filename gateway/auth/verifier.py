"""Access-token verification: JWTs against the issuer's keys, opaque tokens by introspection.

:meth:`OAuthVerifier.authenticate` says *why* a token is refused (the ``error_description``
of the 401); :meth:`OAuthVerifier.verify_token` is the MCP SDK's ``TokenVerifier`` protocol
over it, for code that wants the SDK's ``AccessToken``. No token is ever logged, kept or put
into an error.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from typing import Any

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
from .claims import TokenRejected, audience_matches, identity_from_claims
from .fetch import IssuerUnavailable
from .identity import Identity
from .introspection import Introspector
from .keys import KeySet
from .settings import AuthConfig

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
