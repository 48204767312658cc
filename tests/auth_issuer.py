"""A real identity provider on 127.0.0.1 for the auth tests, and a uvicorn server in a thread.

:class:`FakeIssuer` serves OpenID discovery and/or RFC 8414 metadata, a JWKS with keys
generated here (RSA and EC), and RFC 7662 introspection with client authentication. Tokens
are signed with pyjwt, exactly as an identity provider would sign them.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from starlette.types import ASGIApp

from gateway.testing.backends import FakeBackend, ReceivedRequest, Reply

CLIENT_ID = "mcp-gateway"
CLIENT_SECRET = "intro-secret-4f1d9a"  # the gateway's introspection credentials


@dataclass
class SigningKey:
    kid: str
    alg: str
    private: Any
    publish_alg: bool = True

    @classmethod
    def rsa(cls, kid: str, alg: str = "RS256") -> SigningKey:
        return cls(kid, alg, rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def ec(cls, kid: str, alg: str = "ES256") -> SigningKey:
        return cls(kid, alg, ec.generate_private_key(ec.SECP256R1()))

    def public_jwk(self) -> dict[str, Any]:
        algorithm = RSAAlgorithm if self.alg[0] in "RP" else ECAlgorithm
        jwk = dict(algorithm.to_jwk(self.private.public_key(), as_dict=True))
        jwk.update({"kid": self.kid, "use": "sig"})
        if self.publish_alg:
            jwk["alg"] = self.alg
        return jwk

    def public_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


@functools.lru_cache(maxsize=1)
def shared_keys() -> tuple[SigningKey, SigningKey]:
    """One RSA and one EC key for the whole run: generating RSA keys is slow."""
    return SigningKey.rsa("rsa-1"), SigningKey.ec("ec-1")


@dataclass
class Introspected:
    """What the introspection endpoint answers for one opaque token."""

    answer: dict[str, Any]
    calls: int = 0


class FakeIssuer(FakeBackend):
    """``documents``: which metadata documents exist (``openid``, ``oauth``)."""

    def __init__(self, *, path: str = "", documents: tuple[str, ...] = ("openid",)) -> None:
        super().__init__()
        self.issuer_path = path
        self.documents = documents
        self.rsa, self.ec = shared_keys()
        self.published: list[SigningKey] = [self.rsa, self.ec]
        self.extra_jwks: list[dict[str, Any]] = []
        self.opaque: dict[str, Introspected] = {}
        self.audience = "http://127.0.0.1:1/mcp"  # set by the test to its resource
        self.metadata_issuer: str | None = None  # to make the metadata name another issuer

    @property
    def issuer(self) -> str:
        return f"{self.url}{self.issuer_path}"

    # -- the identity provider's endpoints -------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.metadata_issuer or self.issuer,
            "jwks_uri": f"{self.url}/keys",
            "introspection_endpoint": f"{self.url}/introspect",
            "token_endpoint": f"{self.url}/token",
            "authorization_endpoint": f"{self.url}/authorize",
        }

    def respond(self, request: ReceivedRequest) -> Reply:
        openid = f"{self.issuer_path}/.well-known/openid-configuration"
        oauth = f"/.well-known/oauth-authorization-server{self.issuer_path}"
        if request.path == openid and "openid" in self.documents:
            return Reply.json(self.metadata())
        if request.path == oauth and "oauth" in self.documents:
            return Reply.json(self.metadata())
        if request.path == "/keys":
            keys = [k.public_jwk() for k in self.published] + self.extra_jwks
            return Reply.json({"keys": keys})
        if request.path == "/introspect" and request.method == "POST":
            return self._introspect(request)
        return Reply.json({"detail": "Not Found"}, 404)

    def _introspect(self, request: ReceivedRequest) -> Reply:
        expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {expected}":
            return Reply.json({"error": "invalid_client"}, 401)
        form = dict(parse_qsl(request.body.decode()))
        entry = self.opaque.get(form.get("token", ""))
        if entry is None:
            return Reply.json({"active": False})
        entry.calls += 1
        return Reply.json(entry.answer)

    # -- tokens ------------------------------------------------------------------------------

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        base = {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": "alice",
            "client_id": "claude-code",
            "scope": "gateway:read",
            "iat": now,
            "exp": now + 300,
        }
        base.update(overrides)
        return {k: v for k, v in base.items() if v is not None}

    def sign(
        self,
        key: SigningKey | None = None,
        *,
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        key = key or self.rsa
        return jwt.encode(
            self.claims(**claims),
            key.private,
            algorithm=key.alg,
            headers={"kid": key.kid, **(headers or {})},
        )

    def rotate(self) -> SigningKey:
        """Publish a new RSA key next to the old ones, as a rotation starts (the provider
        then signs with it): tokens signed before stay valid."""
        new = SigningKey.rsa(f"rsa-{len(self.published) + 1}-{int(time.time() * 1000)}")
        self.published = [new, *self.published]
        return new

    def jwks_fetches(self) -> int:
        return sum(1 for r in self.requests if r.path == "/keys")


def unsigned_token(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    """A JWT with ``alg: none`` (no signature), built by hand: pyjwt rightly refuses to."""

    def part(value: dict[str, Any]) -> str:
        raw = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT', **(header or {})})}.{part(claims)}."


def hs256_with_public_key(claims: dict[str, Any], key: SigningKey) -> str:
    """The algorithm-confusion forgery: HS256 keyed with the issuer's *public* key (PEM).
    pyjwt refuses PEM keys for HMAC, so the signature is computed by hand."""
    import hashlib
    import hmac

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    header = {"alg": "HS256", "typ": "JWT", "kid": key.kid}
    signing_input = (
        f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}".encode()
    )
    signature = hmac.new(key.public_pem(), signing_input, hashlib.sha256).digest()
    return f"{signing_input.decode()}.{b64(signature)}"


def _now() -> int:
    return int(time.time())


#: The bad tokens of issue 25, each with the ``error_description`` its refusal carries.
BAD_TOKENS: dict[str, tuple[Callable[[FakeIssuer], str], str]] = {
    "garbage": (lambda i: "garbage", "the token is malformed"),
    "expired": (
        lambda i: i.sign(exp=_now() - 120, iat=_now() - 600),
        "the token has expired",
    ),
    "not yet valid": (lambda i: i.sign(nbf=_now() + 120), "the token is not valid yet"),
    "wrong issuer": (
        lambda i: i.sign(iss="https://evil.example"),
        "the token was issued by another issuer",
    ),
    "wrong audience": (
        lambda i: i.sign(aud="https://other.example/mcp"),
        "the token was issued for another resource (audience)",
    ),
    "alg none": (
        lambda i: unsigned_token(i.claims(scope="gateway:mutate"), {"kid": i.rsa.kid}),
        "the token's signing algorithm is not accepted",
    ),
    "HS256 keyed with the public key": (
        lambda i: hs256_with_public_key(i.claims(scope="gateway:mutate"), i.rsa),
        "the token's signing algorithm is not accepted",
    ),
    "unknown kid": (
        lambda i: i.sign(SigningKey("never-published", "RS256", i.rsa.private)),
        "the token is signed with a key the issuer does not publish",
    ),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class ThreadedServer:
    """An ASGI app served by uvicorn on 127.0.0.1 in a thread with its own event loop."""

    port: int
    url: str


@contextmanager
def serve_asgi(
    build: Callable[[int], tuple[ASGIApp, Callable[[], Awaitable[None]]]],
) -> Iterator[ThreadedServer]:
    """``build(port)`` returns the app and an async cleanup run in the server's loop after it
    stops (an httpx client opened there must be closed there)."""
    port = free_port()
    app, cleanup = build(port)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def main() -> None:
        try:
            await server.serve()
        finally:
            await cleanup()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield ThreadedServer(port, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(10)
