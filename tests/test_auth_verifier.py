"""Access-token verification against a real identity provider on 127.0.0.1 (keys made here)."""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import jwt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.auth import (
    IssuerUnavailable,
    OAuthVerifier,
    TokenRejected,
    TokenThrottled,
    load_auth_config,
)
from gateway.testing.backends import FaultMode, closed_port_url
from tests.auth_issuer import (
    BAD_TOKENS,
    CLIENT_ID,
    CLIENT_SECRET,
    FakeIssuer,
    Introspected,
    SigningKey,
    unsigned_token,
)

pytestmark = pytest.mark.anyio

RESOURCE = "http://127.0.0.1:8765/mcp"
SECRET_ENV = {"MCP_GATEWAY_AUTH_INTROSPECTION_CLIENT_SECRET": CLIENT_SECRET}

#: A little over the least refetch interval (1 s): an unknown kid after it fetches again.
REFETCH_INTERVAL = 1.05


@pytest.fixture
def issuer() -> Any:
    with FakeIssuer() as idp:
        idp.audience = RESOURCE
        yield idp


@pytest.fixture
async def make_verifier() -> AsyncIterator[Callable[..., OAuthVerifier]]:
    made: list[OAuthVerifier] = []

    def make(issuer: str, env: dict[str, str] | None = None, **table: Any) -> OAuthVerifier:
        config = load_auth_config({"issuer": issuer, **table}, env or {})
        assert config is not None
        verifier = OAuthVerifier(config, resource=RESOURCE)
        made.append(verifier)
        return verifier

    yield make
    for verifier in made:
        await verifier.aclose()


async def test_a_read_token_stands_for_its_subject_client_and_scopes(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer)
    exp = int(time.time()) + 300
    identity = await verifier.authenticate(issuer.sign(exp=exp))
    assert identity.subject == "alice"
    assert identity.client_id == "claude-code"
    assert identity.scopes == frozenset({"gateway:read"})
    assert identity.via == "jwt" and identity.issuer == issuer.issuer
    assert identity.expires_at == exp


async def test_an_ec_signed_mutate_token_verifies_with_azp_as_client(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer)
    token = issuer.sign(
        issuer.ec, client_id=None, azp="cli", scope="gateway:read gateway:mutate", sub="bob"
    )
    identity = await verifier.authenticate(token)
    assert (identity.subject, identity.client_id) == ("bob", "cli")
    assert identity.scopes == frozenset({"gateway:read", "gateway:mutate"})


async def test_scp_lists_count_as_scopes(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer)
    identity = await verifier.authenticate(issuer.sign(scope=None, scp=["gateway:mutate"]))
    assert identity.scopes == frozenset({"gateway:mutate"})


def _now() -> int:
    return int(time.time())


# The bad tokens of the issue, and more, each with the description its refusal carries.
REFUSED: dict[str, tuple[Callable[[FakeIssuer], str], str]] = {
    **BAD_TOKENS,
    "no audience": (lambda i: i.sign(aud=None), "the token has no aud claim"),
    "no expiry": (lambda i: i.sign(exp=None), "the token has no exp claim"),
    "no subject or client": (
        lambda i: i.sign(sub=None, client_id=None),
        "the token names neither a subject (sub) nor a client (client_id)",
    ),
    "RS256 header on an EC key": (
        lambda i: _resigned_header(i.sign(i.ec), alg="RS256"),
        "the token is signed with a key the issuer does not publish",
    ),
    "forged signature": (
        lambda i: i.sign(SigningKey(i.rsa.kid, "ES256", i.ec.private)),
        "the token is signed with a key the issuer does not publish",
    ),
    "tampered claims": (lambda i: _tampered(i.sign()), "the token's signature does not verify"),
    "three dots of garbage": (lambda i: "a.b.c", "the token is malformed"),
    "huge": (lambda i: "a" * 20_000, "the token is malformed"),
    "empty": (lambda i: "", "the token is malformed"),
}


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _resigned_header(token: str, **header: Any) -> str:
    """The same payload and signature under another header (an attacker's edit)."""
    _, payload, signature = token.split(".")
    old = jwt.get_unverified_header(token)
    return f"{_b64(json.dumps({**old, **header}).encode())}.{payload}.{signature}"


def _tampered(token: str) -> str:
    head, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["scope"] = "gateway:read gateway:mutate"
    return f"{head}.{_b64(json.dumps(claims).encode())}.{signature}"


@pytest.mark.parametrize("case", list(REFUSED))
async def test_bad_tokens_are_refused_saying_why(issuer, make_verifier, case):
    build, why = REFUSED[case]
    verifier = make_verifier(issuer.issuer)
    await verifier.authenticate(issuer.sign())  # keys cached, as in a running server
    with pytest.raises(TokenRejected) as refused:
        await verifier.authenticate(build(issuer))
    assert refused.value.description == why
    assert await verifier.verify_token(build(issuer)) is None


async def test_a_token_expired_within_the_leeway_still_counts(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer, leeway_seconds=30)
    identity = await verifier.authenticate(issuer.sign(exp=_now() - 10))
    assert identity.subject == "alice"
    strict = make_verifier(issuer.issuer, leeway_seconds=0)
    with pytest.raises(TokenRejected, match="expired"):
        await strict.authenticate(issuer.sign(exp=_now() - 10))


async def test_a_rotated_key_is_fetched_once_and_accepted(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer, jwks_refetch_seconds=1)
    await verifier.authenticate(issuer.sign())
    assert issuer.jwks_fetches() == 1
    await anyio.sleep(REFETCH_INTERVAL)
    new = issuer.rotate()
    identity = await verifier.authenticate(issuer.sign(new, sub="carol"))
    assert identity.subject == "carol"
    assert issuer.jwks_fetches() == 2
    await verifier.authenticate(issuer.sign(new))
    assert issuer.jwks_fetches() == 2  # cached again


async def test_unknown_kids_refetch_at_most_once_per_interval(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer, jwks_refetch_seconds=1.0)
    await verifier.authenticate(issuer.sign())
    assert issuer.jwks_fetches() == 1
    await anyio.sleep(1.05)

    async def made_up_kid() -> None:
        forged = SigningKey(f"kid-{uuid.uuid4().hex}", "RS256", issuer.rsa.private)
        with pytest.raises(TokenRejected, match="does not publish"):
            await verifier.authenticate(issuer.sign(forged))

    async with anyio.create_task_group() as tg:  # a burst, all at once
        for _ in range(20):
            tg.start_soon(made_up_kid)
    for _ in range(20):  # and a stream, one after another
        await made_up_kid()
    assert issuer.jwks_fetches() == 2
    # The rotation that arrives inside the interval waits for it; then one fetch finds it.
    new = issuer.rotate()
    with pytest.raises(TokenRejected, match="does not publish"):
        await verifier.authenticate(issuer.sign(new))
    await anyio.sleep(1.05)
    assert (await verifier.authenticate(issuer.sign(new))).subject == "alice"
    assert issuer.jwks_fetches() == 3


async def test_a_token_without_kid_uses_the_one_key_for_its_algorithm(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer)
    token = jwt.encode(issuer.claims(), issuer.ec.private, algorithm="ES256")
    assert "kid" not in jwt.get_unverified_header(token)
    assert (await verifier.authenticate(token)).subject == "alice"
    issuer.published.append(SigningKey.ec("ec-2"))  # now two ES256 keys: ambiguous
    ambiguous = make_verifier(issuer.issuer)
    with pytest.raises(TokenRejected, match="does not publish"):
        await ambiguous.authenticate(token)


async def test_keys_sharing_a_kid_are_told_apart_by_algorithm(issuer, make_verifier):
    rsa_key, ec_key = (
        SigningKey("k1", "RS256", issuer.rsa.private),
        SigningKey("k1", "ES256", issuer.ec.private),
    )
    issuer.published = [rsa_key, ec_key]
    verifier = make_verifier(issuer.issuer)
    assert (await verifier.authenticate(issuer.sign(ec_key))).subject == "alice"
    assert (await verifier.authenticate(issuer.sign(rsa_key))).subject == "alice"


async def test_keys_published_without_alg_verify_only_their_own_family(issuer, make_verifier):
    bare = SigningKey("bare-rsa", "PS256", issuer.rsa.private, publish_alg=False)
    issuer.published = [bare]
    verifier = make_verifier(issuer.issuer)
    assert (await verifier.authenticate(issuer.sign(bare))).subject == "alice"
    ps_as_es = SigningKey("bare-rsa", "ES256", issuer.ec.private)
    with pytest.raises(TokenRejected, match="does not publish"):
        await verifier.authenticate(issuer.sign(ps_as_es))


async def test_symmetric_and_encryption_keys_in_the_jwks_are_never_used(issuer, make_verifier):
    secret = b"a-shared-secret-of-32-bytes-long!"
    enc = SigningKey.rsa("enc-1")
    issuer.extra_jwks = [
        {"kty": "oct", "kid": "hmac", "k": _b64(secret), "alg": "HS256"},
        {**enc.public_jwk(), "use": "enc"},
    ]
    verifier = make_verifier(issuer.issuer)
    hs = jwt.encode(issuer.claims(), secret, algorithm="HS256", headers={"kid": "hmac"})
    with pytest.raises(TokenRejected, match="algorithm is not accepted"):
        await verifier.authenticate(hs)
    with pytest.raises(TokenRejected, match="does not publish"):
        await verifier.authenticate(issuer.sign(enc))
    assert (await verifier.authenticate(issuer.sign())).subject == "alice"


async def test_only_the_configured_algorithms_are_accepted(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer, algorithms=["ES256"])
    assert (await verifier.authenticate(issuer.sign(issuer.ec))).subject == "alice"
    with pytest.raises(TokenRejected, match="algorithm is not accepted"):
        await verifier.authenticate(issuer.sign(issuer.rsa))


async def test_an_issuer_with_a_path_is_found_through_rfc8414_metadata(make_verifier):
    with FakeIssuer(path="/realms/team", documents=("oauth",)) as idp:
        idp.audience = RESOURCE
        verifier = make_verifier(idp.issuer)
        assert (await verifier.authenticate(idp.sign())).subject == "alice"
        asked = [r.path for r in idp.requests]
    assert asked == [
        "/realms/team/.well-known/openid-configuration",  # 404 here
        "/.well-known/oauth-authorization-server/realms/team",
        "/keys",
    ]


async def test_metadata_naming_another_issuer_is_not_used(issuer, make_verifier):
    issuer.metadata_issuer = "https://impostor.example"
    verifier = make_verifier(issuer.issuer)
    with pytest.raises(IssuerUnavailable, match="names issuer"):
        await verifier.authenticate(issuer.sign())
    assert issuer.jwks_fetches() == 0


async def test_a_configured_jwks_url_needs_no_discovery(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer, jwks_url=f"{issuer.url}/keys")
    assert (await verifier.authenticate(issuer.sign())).subject == "alice"
    assert [r.path for r in issuer.requests] == ["/keys"]


async def test_an_unreachable_issuer_is_unavailable_not_a_refusal(issuer, make_verifier):
    token = issuer.sign()
    down = make_verifier(closed_port_url())
    with pytest.raises(IssuerUnavailable, match="cannot be reached"):
        await down.authenticate(token)
    # A refusal that needs no key is still decided while the issuer is down.
    with pytest.raises(TokenRejected, match="algorithm"):
        await down.authenticate(jwt.encode({"sub": "x"}, "k" * 32, algorithm="HS256"))


async def test_a_failing_issuer_is_not_asked_again_at_once(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer, jwks_refetch_seconds=60)
    issuer.mode = FaultMode.ERROR
    with pytest.raises(IssuerUnavailable, match="HTTP 500"):
        await verifier.authenticate(issuer.sign())
    for _ in range(5):
        with pytest.raises(IssuerUnavailable, match="a moment ago"):
            await verifier.authenticate(issuer.sign())
    assert len(issuer.requests) == 1


async def test_an_issuer_sending_no_keys_is_unavailable(issuer, make_verifier):
    issuer.published = []
    verifier = make_verifier(issuer.issuer)
    with pytest.raises(IssuerUnavailable, match="no usable signature key"):
        await verifier.authenticate(issuer.sign())


async def test_cached_keys_keep_working_while_the_issuer_is_down(issuer, make_verifier, caplog):
    verifier = make_verifier(issuer.issuer, jwks_cache_seconds=0, jwks_refetch_seconds=1)
    await verifier.authenticate(issuer.sign())
    issuer.mode = FaultMode.REFUSE
    with caplog.at_level(logging.WARNING, logger="gateway.auth"):
        identity = await verifier.authenticate(issuer.sign(sub="dave"))
    assert identity.subject == "dave"
    assert "keeping the cached signing keys" in caplog.text


async def test_an_unknown_kid_while_the_issuer_is_down_is_unavailable(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer, jwks_refetch_seconds=1)
    await verifier.authenticate(issuer.sign())
    await anyio.sleep(REFETCH_INTERVAL)
    issuer.mode = FaultMode.ERROR
    with pytest.raises(IssuerUnavailable, match="HTTP 500"):
        await verifier.authenticate(issuer.sign(SigningKey("rotated", "RS256", issuer.rsa.private)))
    assert (await verifier.authenticate(issuer.sign(sub="known-key"))).subject == "known-key"


async def test_no_token_reaches_a_log_or_an_error(issuer, make_verifier, caplog):
    verifier = make_verifier(issuer.issuer)
    tokens = [build(issuer) for build, _ in REFUSED.values()] + [issuer.sign()]
    seen: list[str] = []
    with caplog.at_level(logging.DEBUG):
        for token in tokens:
            try:
                seen.append(repr(await verifier.authenticate(token)))
            except TokenRejected as exc:
                seen.append(str(exc))
    for token in tokens:
        if len(token) > 8:
            signature = token.rsplit(".", 1)[-1] or token
            assert token not in caplog.text and all(token not in s for s in seen)
            assert signature[-16:] not in caplog.text


# -- introspection (RFC 7662) -------------------------------------------------------------


def _opaque(issuer: FakeIssuer, **answer: Any) -> str:
    token = f"opaque-{uuid.uuid4().hex}"
    body = {
        "active": True,
        "iss": issuer.issuer,
        "aud": RESOURCE,
        "sub": "erin",
        "client_id": "claude-code",
        "scope": "gateway:read gateway:mutate",
        "exp": _now() + 300,
    }
    body.update(answer)
    issuer.opaque[token] = Introspected({k: v for k, v in body.items() if v is not None})
    return token


def _introspecting(make_verifier: Callable[..., OAuthVerifier], issuer: FakeIssuer, **extra: Any):
    table = {"introspection": {"client_id": CLIENT_ID, **extra}}
    return make_verifier(issuer.issuer, SECRET_ENV, **table)


async def test_an_opaque_token_is_introspected_once_and_cached(issuer, make_verifier):
    verifier = _introspecting(make_verifier, issuer)
    token = _opaque(issuer)
    for _ in range(3):
        identity = await verifier.authenticate(token)
    assert (identity.subject, identity.via) == ("erin", "introspection")
    assert identity.scopes == frozenset({"gateway:read", "gateway:mutate"})
    assert issuer.opaque[token].calls == 1
    [asked] = [r for r in issuer.requests if r.path == "/introspect"]
    assert asked.headers["content-type"] == "application/x-www-form-urlencoded"
    assert verifier.introspector is not None
    assert token.encode() not in b"".join(k for k in verifier.introspector._cache)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"active": False}, "not active"),
        ({"active": "true"}, "not active"),
        ({"exp": 1_000_000}, "expired"),
        ({"nbf": 4_000_000_000}, "not valid yet"),
        ({"aud": "https://other.example/mcp"}, "another resource"),
        ({"aud": None}, "another resource"),
        ({"iss": "https://evil.example"}, "another issuer"),
    ],
)
async def test_introspection_refusals(issuer, make_verifier, answer, why):
    verifier = _introspecting(make_verifier, issuer)
    token = _opaque(issuer, **answer)
    with pytest.raises(TokenRejected, match=why):
        await verifier.authenticate(token)


def _introspections(issuer: FakeIssuer) -> int:
    return sum(1 for r in issuer.requests if r.path == "/introspect")


async def test_made_up_opaque_tokens_cost_one_address_its_budget_of_requests(issuer, make_verifier):
    verifier = _introspecting(make_verifier, issuer, refusals_per_minute=3)
    outcomes: list[str] = []
    refused: list[str] = []

    async def attempt(token: str) -> None:
        try:
            await verifier.authenticate(token, "192.0.2.7")
        except TokenRejected:
            outcomes.append("refused")
            refused.append(token)
        except TokenThrottled as throttled:
            assert 0 < throttled.retry_after <= 20  # one unit comes back every 20 s
            outcomes.append("throttled")

    # 200 made-up tokens at once: each takes a unit before it is asked.
    async with anyio.create_task_group() as tg:
        for n in range(200):
            tg.start_soon(attempt, f"made-up-{n}")
    assert outcomes.count("refused") == 3 and outcomes.count("throttled") == 197
    assert _introspections(issuer) == 3
    # A refused token sent again is answered from the cache, budget or not.
    with pytest.raises(TokenRejected):
        await verifier.authenticate(refused[0], "192.0.2.7")
    assert _introspections(issuer) == 3
    # Another address has a budget of its own; a caller without an address has none to spend.
    assert (await verifier.authenticate(_opaque(issuer), "192.0.2.8")).subject == "erin"
    assert (await verifier.authenticate(_opaque(issuer))).subject == "erin"
    assert _introspections(issuer) == 5


async def test_valid_opaque_tokens_never_use_up_their_addresss_budget(issuer, make_verifier):
    verifier = _introspecting(make_verifier, issuer, refusals_per_minute=3)
    for _ in range(20):  # a team behind one proxy, each with a token of their own
        assert (await verifier.authenticate(_opaque(issuer), "192.0.2.9")).subject == "erin"
    for n in range(3):
        with pytest.raises(TokenRejected):
            await verifier.authenticate(f"made-up-{n}", "192.0.2.9")
    with pytest.raises(TokenThrottled):
        await verifier.authenticate("made-up-3", "192.0.2.9")
    assert _introspections(issuer) == 23


async def test_the_introspection_endpoint_can_be_configured(issuer, make_verifier):
    verifier = _introspecting(make_verifier, issuer, endpoint=f"{issuer.url}/introspect")
    assert (await verifier.authenticate(_opaque(issuer))).subject == "erin"
    assert "/.well-known/openid-configuration" not in [r.path for r in issuer.requests]


async def test_wrong_client_credentials_are_the_operators_problem(issuer, make_verifier, caplog):
    table = {"introspection": {"client_id": CLIENT_ID}}
    env = {"MCP_GATEWAY_AUTH_INTROSPECTION_CLIENT_SECRET": "not-the-secret"}
    verifier = make_verifier(issuer.issuer, env, **table)
    with caplog.at_level(logging.ERROR, logger="gateway.auth"), pytest.raises(IssuerUnavailable):
        await verifier.authenticate(_opaque(issuer))
    assert "client credentials" in caplog.text and "not-the-secret" not in caplog.text


async def test_without_introspection_an_opaque_token_is_malformed(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer)
    with pytest.raises(TokenRejected, match="malformed"):
        await verifier.authenticate(_opaque(issuer))
    assert not [r for r in issuer.requests if r.path == "/introspect"]


async def test_the_sdk_token_verifier_protocol(issuer, make_verifier):
    verifier = make_verifier(issuer.issuer)
    access = await verifier.verify_token(issuer.sign(scope="gateway:mutate gateway:read"))
    assert access is not None
    assert (access.subject, access.client_id) == ("alice", "claude-code")
    assert access.scopes == ["gateway:mutate", "gateway:read"]
    assert access.resource == RESOURCE and access.claims == {"iss": issuer.issuer}


# Anything at all in the Authorization header is refused cleanly, never an exception.
_segment = st.binary(max_size=64).map(_b64)
_tokens = st.one_of(
    st.text(max_size=200),
    st.tuples(_segment, _segment, _segment).map(".".join),
    st.dictionaries(st.sampled_from(["alg", "kid", "typ", "crit"]), st.text(max_size=8)).map(
        lambda h: unsigned_token({"sub": "x"}, h)
    ),
)


@pytest.fixture
def one_verifier(issuer, make_verifier) -> OAuthVerifier:
    """Shared by every example of a hypothesis test (function-scoped fixtures are)."""
    return make_verifier(issuer.issuer, jwks_url=f"{issuer.url}/keys")


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(token=_tokens)
async def test_arbitrary_tokens_are_refused_cleanly(one_verifier, token):
    with pytest.raises(TokenRejected):
        await one_verifier.authenticate(token)
