"""Nothing secret or internal leaves the gateway: not in a tool result, not in a log line."""

from __future__ import annotations

import io
import json
import logging
import re
import string
from urllib.parse import quote

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from gateway import ErrorCode, GatewayError, Tier, ToolSpec, hookimpl
from gateway.errors import _CREDENTIAL_WORD, Sanitizer
from gateway.logs import RedactingFormatter
from gateway.testing import make_gateway

CONFIGURED_SECRET = "cfg-Secret-value-9d8e7f"

word = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=12)
# Credentials long and random enough that they cannot occur in a log line by chance.
secret_chars = st.text(
    alphabet=string.ascii_letters + string.digits + "-._~+/", min_size=12, max_size=40
).map(lambda s: "tk9" + s)
abs_path = st.lists(word, min_size=2, max_size=6).map(lambda parts: "/" + "/".join(parts))
win_path = st.lists(word, min_size=2, max_size=4).map(lambda parts: "C:\\" + "\\".join(parts))
pg_url = st.tuples(word, secret_chars.filter(lambda s: "/" not in s), word).map(
    lambda t: (f"postgres://{t[0]}:{t[1]}@{t[2]}.example:5432/jobs", t[1])
)
bearer = secret_chars.map(lambda s: (f"Authorization: Bearer {s}", s))
sql = st.sampled_from(
    [
        "SELECT id, url FROM jobs WHERE status = 'new' ORDER BY captured_at DESC",
        "INSERT INTO jobs (url, status) VALUES (?, ?)",
        "UPDATE jobs SET status = 'applied' WHERE id = 3",
        "DELETE FROM jobs WHERE id IN (1, 2)",
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY)",
        "PRAGMA table_info(jobs)",
    ]
)
traceback_text = st.tuples(abs_path, word).map(
    lambda t: (
        "Traceback (most recent call last):\n"
        f'  File "{t[0]}.py", line 12, in {t[1]}\n'
        "    raise ValueError('x')\n"
        "ValueError: x"
    )
)


label = st.text(
    alphabet=string.ascii_lowercase + string.digits + "-", min_size=1, max_size=12
).filter(lambda w: w[0] != "-" and w[-1] != "-" and any(c.isalpha() for c in w))
# Internal host names as drivers print them: mongo-0.mongo.svc.cluster.local, db.internal.
host_name = st.tuples(
    st.lists(label, min_size=1, max_size=4),
    st.sampled_from(["local", "internal", "svc", "corp", "com", "net", "example"]),
).map(lambda t: ".".join([*t[0], t[1]]))
ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
port = st.integers(1, 65535)


@st.composite
def connection_failure(draw):  # type: ignore[no-untyped-def]
    """A failed connection as drivers, HTTP clients and resolvers word it: (text, hosts)."""
    host = draw(st.one_of(host_name, ipv4))
    p = draw(port)
    template = draw(
        st.sampled_from(
            [
                "ServerSelectionTimeoutError: {h}:{p}: [Errno 111] Connection refused",
                "Cannot connect to host {h}:{p} ssl:default [Connection refused]",
                'connection to server at "{h}" ({ip}), port {p} failed: Connection refused',
                "dial tcp {ip}:{p}: connect: connection refused",
                "getaddrinfo ENOTFOUND {h}",
                "[Errno -2] Name or service not known: '{h}'",
                "could not connect to {h}:{p}: timed out",
                "HTTPConnectionPool(host='{h}', port={p}): Max retries exceeded "
                "(Failed to establish a new connection: [Errno 113] No route to host)",
            ]
        )
    )
    ip = draw(ipv4)
    return template.format(h=host, p=p, ip=ip), [host, ip] if "{ip}" in template else [host]


email = st.tuples(
    st.text(alphabet=string.ascii_letters + string.digits + "._+-", min_size=1, max_size=20).filter(
        lambda w: w[0] not in ".+-"
    ),
    host_name,
).map(lambda t: f"{t[0]}@{t[1]}")
spaced_key = st.sampled_from(
    ["x-api-key", "X-Api-Key", "api-key", "apikey", "secret", "password", "client_secret"]
)
b64url = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=8, max_size=40)
alnum = string.ascii_letters + string.digits
key_word = st.sampled_from(
    ["password", "api_key", "apiKey", "client_secret", "access_token", "db-passwd", "secret"]
)


@st.composite
def shaped_secret(draw):  # type: ignore[no-untyped-def]
    """A credential in one of the shapes the sanitizer must know without being told the value:
    (text to embed, the secret part that must not come out)."""
    kind = draw(st.sampled_from(["json", "yaml", "jwt", "sk", "aws", "ghp", "github_pat", "pem"]))
    value = draw(secret_chars)
    if kind == "json":
        key = draw(key_word)
        quote = draw(st.sampled_from(['"', "'"]))
        space = draw(st.sampled_from(["", " "]))
        return f"{{{quote}{key}{quote}:{space}{quote}{value}{quote}, {quote}n{quote}: 1}}", value
    if kind == "yaml":
        return f"{draw(key_word)}: {value}", value
    if kind == "jwt":
        token = f"eyJ{draw(b64url)}.eyJ{draw(b64url)}.{draw(b64url)}"
        return token, token
    if kind == "sk":
        token = draw(st.sampled_from(["sk-", "sk-proj-", "sk-ant-"])) + draw(
            st.text(alphabet=alnum, min_size=24, max_size=48)
        )
        return token, token
    if kind == "aws":
        token = "AKIA" + draw(
            st.text(alphabet=string.ascii_uppercase + string.digits, min_size=16, max_size=16)
        )
        return token, token
    if kind == "ghp":
        token = "ghp_" + draw(st.text(alphabet=alnum, min_size=36, max_size=40))
        return token, token
    if kind == "github_pat":
        token = "github_pat_" + draw(st.text(alphabet=alnum + "_", min_size=22, max_size=82))
        return token, token
    body = "\n".join(
        draw(
            st.lists(
                st.text(alphabet=alnum + "+/", min_size=16, max_size=64), min_size=1, max_size=4
            )
        )
    )
    label = draw(st.sampled_from(["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]))
    return f"-----BEGIN {label}PRIVATE KEY-----\n{body}\n-----END {label}PRIVATE KEY-----", body


@st.composite
def leaky_message(draw):  # type: ignore[no-untyped-def]
    """A message mixing ordinary words with every kind of thing that must not leak."""
    forbidden: list[str] = []
    parts: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(
            st.sampled_from(
                [
                    "word",
                    "path",
                    "win",
                    "pg",
                    "bearer",
                    "secret",
                    "sql",
                    "tb",
                    "shape",
                    "encoded",
                    "spaced",
                    "email",
                    "connection",
                ]
            )
        )
        if kind == "spaced":  # a header as some clients print it: "x-api-key <value>"
            value = draw(secret_chars)
            parts.append(f"{draw(spaced_key)} {value}")
            forbidden.append(value)
        elif kind == "email":
            address = draw(email)
            parts.append(
                draw(st.sampled_from(["{}", "<{}>", "({})", "{}:", "'{}'"])).format(address)
            )
            forbidden.append(address)
        elif kind == "connection":
            text, hosts = draw(connection_failure())
            parts.append(text)
            forbidden += hosts
        elif kind in ("shape", "encoded"):
            text, secret = draw(shaped_secret())
            if kind == "encoded":  # the same inside a query string or form body
                text = "q=" + quote(text, safe="")
            parts.append(text)
            forbidden += [secret, quote(secret, safe="")]
        elif kind == "word":
            parts.append(draw(word))
        elif kind == "path":
            p = draw(abs_path)
            parts.append(
                draw(st.sampled_from(["{}", "'{}'", '"{}"', "({})", "{}:", "at {}."])).format(p)
            )
            forbidden.append(p)
        elif kind == "win":
            p = draw(win_path)
            parts.append(p)
            forbidden.append(p)
        elif kind == "pg":
            url, pw = draw(pg_url)
            parts.append(url)
            forbidden.append(pw)
        elif kind == "bearer":
            header, token = draw(bearer)
            parts.append(header)
            forbidden.append(token)
        elif kind == "secret":
            parts.append(f"key={CONFIGURED_SECRET}")
            forbidden.append(CONFIGURED_SECRET)
        elif kind == "sql":
            q = draw(sql)
            parts.append(q)
            forbidden.append(q)
        else:
            parts.append(draw(traceback_text))
            forbidden.append("Traceback (most recent call last)")
    return " ".join(parts), forbidden


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Raiser:
    def __init__(self) -> None:
        self.exc: Exception = RuntimeError()

    @hookimpl
    def register_tools(self, register):  # type: ignore[no-untyped-def]
        async def boom(args, ctx):  # type: ignore[no-untyped-def]
            raise self.exc

        register(
            ToolSpec(
                name="boom", description="Raises.", input_model=_In, handler=boom, tier=Tier.READ
            )
        )


def _gateway_with_log(tmp_path):  # type: ignore[no-untyped-def]
    raiser = _Raiser()
    gw = make_gateway(
        objects={"raiser": raiser},
        entry_points=False,
        env={"SERVICE_API_TOKEN": CONFIGURED_SECRET},
        cwd=tmp_path,
    )
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(RedactingFormatter(gw.sanitizer))
    logger = logging.getLogger("gateway")
    logger.addHandler(handler)
    return gw, raiser, stream, lambda: logger.removeHandler(handler)


def test_leaky_exceptions_never_reach_the_result_or_the_log(tmp_path):
    gw, raiser, stream, cleanup = _gateway_with_log(tmp_path)
    calls: list[int] = []

    @settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(leaky_message(), st.sampled_from(["unexpected", "deliberate"]))
    def check(case, kind):  # type: ignore[no-untyped-def]
        message, forbidden = case
        calls.append(1)
        raiser.exc = (
            RuntimeError(message)
            if kind == "unexpected"
            else GatewayError(ErrorCode.BACKEND_ERROR, message)
        )
        stream.seek(0)
        stream.truncate()
        result = anyio.run(gw.call, "boom", {})
        text = result.text()
        log_text = stream.getvalue()
        assert result.is_error
        assert result.code == ("INTERNAL_ERROR" if kind == "unexpected" else "BACKEND_ERROR")
        if kind == "unexpected":
            assert result.payload["error"]["correlation_id"] in log_text
        for needle in forbidden:
            assert needle not in text, (needle, text)
            assert needle not in log_text, (needle, log_text)
        assert len(result.payload["error"]["message"]) <= 600

    try:
        check()
    finally:
        cleanup()
    assert len(calls) >= 1000


def test_paths_under_the_data_root_stay_usable_as_relative_paths(tmp_path):
    s = Sanitizer([], [tmp_path])
    assert s(f"cannot open {tmp_path}/data/capture/jobs.db.") == "cannot open data/capture/jobs.db."
    assert s("cannot open /srv/elsewhere/jobs.db") == "cannot open …/jobs.db"
    assert s("see https://host.example/a/b/c") == "see https://host.example/a/b/c"


def test_url_userinfo_is_removed_but_the_host_is_kept():
    s = Sanitizer()
    assert s("the dsn postgres://bob:hunter22@db.internal:5432/x has no sslmode") == (
        "the dsn postgres://***@db.internal:5432/x has no sslmode"
    )


def test_a_failed_connection_names_no_host():
    s = Sanitizer()
    assert s("connect to postgres://bob:hunter22@db.internal:5432/x failed") == (
        "connect to postgres://***@[host removed]/x failed"
    )
    assert (
        s(
            "ServerSelectionTimeoutError: mongo-0.mongo.svc.cluster.local:27017: "
            "[Errno 111] Connection refused"
        )
        == "ServerSelectionTimeoutError: [host removed]: [Errno 111] Connection refused"
    )
    # Times, versions, file names and exception names in the same text stay.
    assert s("could not connect to 10.0.3.7:5432 at 12:30 (jobs.db, psycopg 3.2)") == (
        "could not connect to [host removed] at 12:30 (jobs.db, psycopg 3.2)"
    )
    # Text that reports no failed connection keeps its URLs whole.
    assert s("see https://docs.example.com:8443/setup") == "see https://docs.example.com:8443/setup"


def test_e_mail_addresses_are_redacted_from_messages_and_log_lines(tmp_path):
    s = Sanitizer()
    assert s("job 7 belongs to Jane Roe <jane.roe+jobs@corp.example>") == (
        "job 7 belongs to Jane Roe <[REDACTED]>"
    )
    assert s("git@github.com:org/repo.git and v1.2@3") == "[REDACTED]:org/repo.git and v1.2@3"
    gw, raiser, stream, cleanup = _gateway_with_log(tmp_path)
    try:
        raiser.exc = RuntimeError("mail to jane.roe@corp.example bounced")
        result = anyio.run(gw.call, "boom", {})
    finally:
        cleanup()
    assert "jane.roe" not in result.text() and "jane.roe" not in stream.getvalue()


def test_messages_are_bounded():
    s = Sanitizer(max_chars=50)
    assert len(s("x" * 10_000)) == 50


FORGED = "x\n2026-11-22 12:00:00,000 INFO gateway.audit: forged line\r\x1b[2K\u2028also forged"


def test_newlines_and_control_characters_in_values_cannot_forge_log_lines(tmp_path):
    gw, raiser, stream, cleanup = _gateway_with_log(tmp_path)
    try:
        raiser.exc = RuntimeError(f"notes field was {FORGED}")
        result = anyio.run(gw.call, "boom", {})
        logging.getLogger("gateway.plugin.raiser").warning("note: %s", FORGED)
    finally:
        cleanup()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines  # one record, one line
    assert result.payload["error"]["correlation_id"] in lines[0]
    for line in lines:
        assert "\x1b" not in line and "\r" not in line and "\u2028" not in line
        assert "\\n2026-11-22 12:00:00,000 INFO gateway.audit: forged line\\r\\x1b[2K" in line


def test_debug_logs_keep_tracebacks_readable_but_every_continuation_is_indented(tmp_path):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(RedactingFormatter(Sanitizer(), debug=True))
    logger = logging.getLogger("gateway.test.debug")
    logger.addHandler(handler)
    try:
        try:
            raise ValueError(FORGED)
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) > 3 and "Traceback (most recent call last):" in lines[1]
    assert all(line.startswith("    ") for line in lines[1:])
    assert not any(line.startswith("2026-11-22") for line in lines)


ordinary = st.one_of(
    # "Bearer <anything>" (and "Token …", "Basic …" before a credential-shaped value) is an
    # Authorization value, which the sanitizer redacts on purpose (in any case: the scheme is
    # case-insensitive).
    word.filter(lambda w: w.lower() not in ("bearer", "token", "basic")),
    st.uuids().map(str),
    st.binary(min_size=20, max_size=20).map(bytes.hex),  # a git SHA
    st.integers(0, 10**12).map(str),
    st.uuids().map(lambda u: f"job-{u.hex[:12]}"),
    st.sampled_from(
        [
            "a basic example",
            "the token expired",
            "Bearer of bad news",
            "sk-1",
            "credentials: bad token, sign in again",
            "the password is wrong",
            "at 12:30",
            "v1.2.3",
            "jobs.db",
        ]
    ),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(ordinary, min_size=1, max_size=12))
def test_ordinary_ids_shas_and_uuids_are_left_alone(parts):
    text = " ".join(parts)
    assert Sanitizer()(text, max_chars=10_000) == text


ECHO_TOKEN = 'ghx-Echoed"token\\value-7c1d'  # a quote and a backslash: escaped inside JSON


class _Echo:
    """A tool whose backend echoes the configured token inside data."""

    @hookimpl
    def plugin_settings(self):  # type: ignore[no-untyped-def]
        from pydantic import SecretStr

        from gateway import env_field

        class Settings(BaseModel):
            token: SecretStr | None = env_field("ECHO_SERVICE_TOKEN", default=None)

        return Settings

    @hookimpl
    def register_tools(self, register):  # type: ignore[no-untyped-def]
        class Out(BaseModel):
            tags: list[str]
            files: dict[str, str]

        async def leaky(args, ctx):  # type: ignore[no-untyped-def]
            return Out(
                tags=["v1", f"release-{ECHO_TOKEN}"],
                files={f"{ECHO_TOKEN}.txt": f"content with {ECHO_TOKEN} inside", "b": "x1"},
            )

        async def short(args, ctx):  # type: ignore[no-untyped-def]
            return {"words": ["true", "value"]}

        for name, handler, out in (("leaky", leaky, Out), ("short", short, None)):
            register(
                ToolSpec(
                    name=name,
                    description="d",
                    input_model=_In,
                    output_model=out,
                    handler=handler,
                    tier=Tier.READ,
                )
            )


def test_configured_secrets_are_redacted_from_successful_results(tmp_path):
    from gateway.testing import gateway_client

    gw = make_gateway(
        objects={"echo": _Echo()},
        entry_points=False,
        env={"ECHO_SERVICE_TOKEN": ECHO_TOKEN, "SHORT_TOKEN": "true"},
        cwd=tmp_path,
    )

    async def run():  # type: ignore[no-untyped-def]
        async with gw, gateway_client(gw) as client:
            return (
                await gw.call("leaky"),
                await client.call_tool("leaky", {}),
                await gw.call("short"),
            )

    direct, listed, short = anyio.run(run)
    expected = {
        "tags": ["v1", "release-[REDACTED]"],
        "files": {"[REDACTED].txt": "content with [REDACTED] inside", "b": "x1"},
    }
    assert direct.payload == expected and not direct.is_error
    assert json.loads(direct.text()) == expected
    assert listed.structured_content == expected
    assert json.loads(listed.content[0].text) == expected
    assert ECHO_TOKEN not in listed.content[0].text
    # A short value of a secret-named variable is not searched for in data: "true" stays.
    assert short.payload == {"words": ["true", "value"]}


def test_words_near_credential_words_are_not_redacted():
    s = Sanitizer([CONFIGURED_SECRET])
    for harmless in (
        "tokens: 5 of 10 free",
        "max_tokens: 100",
        "token_type: bearer",
        "secretary: Ann Smith",
        "passwordless: yes",
        "Secrets: none configured",
        '{"tokens": 12, "credential_id": 4}',
    ):
        assert s.redact_secrets(harmless) == harmless
        assert s(harmless) == harmless
    for leaky, value in (
        ("password=hunter22", "hunter22"),
        ("GITEA_TOKEN=abcdefgh1", "abcdefgh1"),
        ("accessToken: xyz12345", "xyz12345"),
        ("x-api-key: k1k2k3", "k1k2k3"),
        ("client.secret = 'zz top'", "zz top"),
        ('{"apiKey": "q1w2e3"}', "q1w2e3"),
        ("x-api-key 7f3a9c2e1b", "7f3a9c2e1b"),
        ("request refused: api-key Zx81-Qa-77 unknown", "Zx81-Qa-77"),
        ("apikey correcthorsebatterystaple", "correcthorsebatterystaple"),
        ("password hunter22", "hunter22"),
        ("secret=abc", "abc"),
        ("password: Hunter2", "Hunter2"),
    ):
        assert value not in s.redact_secrets(leaky), leaky


def test_a_plain_word_after_a_credential_word_is_prose_and_stays():
    # A backend's 401 reason, {"detail": "bad token"}, as the REST kit quotes it.
    s = Sanitizer()
    for prose in (
        "the orchestrator API refused access (HTTP 401); set a valid COCKPIT_API_TOKEN: bad token",
        "check the backend's credentials: bad token",
        '{"detail": "bad token"}',
        "token: expired",
        "Token: Invalid",
        '{"token": null}',
        "the password is wrong",
        "secret sauce",
        "x-api-key missing",
        "password 2 attempts left",
    ):
        assert s(prose) == prose, prose


credential_key = st.sampled_from(
    [
        "password",
        "api_key",
        "x-api-key",
        "apikey",
        "secret",
        "client_secret",
        "GITEA_TOKEN",
        "credentials",
        "accessToken",
    ]
)
plain_word = (
    st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=19)
    .map(lambda w: w.capitalize() if len(w) % 2 else w)
    # A word that names a credential itself ("credential 000000") is a key, and what follows
    # it a value: not prose.
    .filter(lambda w: re.fullmatch(_CREDENTIAL_WORD, w, re.IGNORECASE) is None)
)


@settings(max_examples=500, deadline=None)
@given(credential_key, st.sampled_from([": ", ":", " "]), plain_word, word, secret_chars)
def test_values_go_and_plain_words_stay_after_the_same_key(key, sep, prose, after, value):
    s = Sanitizer()
    sentence = f"refused: {key}{sep}{prose} {after}"
    assert s(sentence, max_chars=0) == sentence
    leaked = f"refused: {key}{sep}{value} {after}"
    cleaned = s(leaked, max_chars=0)
    assert (
        value not in cleaned and cleaned.startswith(f"refused: {key}") and cleaned.endswith(after)
    )


text_with_secrets = st.one_of(
    leaky_message().map(lambda m: m[0]),
    st.text(alphabet=string.printable + "…äß€", max_size=200),
    st.lists(
        st.sampled_from(
            [
                "token: ",
                "password=",
                "[REDACTED]",
                "]",
                "[",
                "Bearer ",
                "https://u:p@h/",
                "%3D",
                "secret",
                "tokens: 5",
                "x9abcdefgh12",
                CONFIGURED_SECRET,
                '"',
                " ",
                "\n",
            ]
        ),
        max_size=25,
    ).map("".join),
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_with_secrets)
def test_redaction_is_idempotent(text):
    s = Sanitizer([CONFIGURED_SECRET])
    once = s.redact_secrets(text)
    assert s.redact_secrets(once) == once
    cleaned = s(text, max_chars=0)
    assert s(cleaned, max_chars=0) == cleaned


def test_every_sanitizer_pattern_compiles_and_is_the_pattern_written():
    """The sanitizer's patterns are compiled on first use, not at import (a start needs few of
    them): one that cannot compile would only show when a message first needs it, while a
    failure is being reported. Each compiles here, to the pattern and flags written."""
    import re

    import gateway.errors as errors

    lazy = {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, errors._LazyPattern)
    }
    assert len(lazy) >= 20, sorted(lazy)
    for name, value in lazy.items():
        written, flags = value._source
        compiled = re.compile(written, flags)
        assert (value.pattern, value.flags) == (compiled.pattern, compiled.flags), name
        # the compiled pattern's methods, kept after their first use, answer as it does
        for text in ("", "SELECT a FROM b at /srv/app/x.py user@example.org"):
            found, expected = value.search(text), compiled.search(text)
            assert (found and found.span()) == (expected and expected.span()), name
        assert value.search is value.search, name
