"""Error codes, the error a tool raises on purpose, and the sanitizer every message passes.

Plugins raise :class:`GatewayError` for failures the model should see and act on. Anything
else a handler raises is an accident: the core logs it (redacted) and the client sees a
generic ``INTERNAL_ERROR`` with a correlation id. Every message leaving the gateway, error or
log line, goes through :class:`Sanitizer` first. A backend's HTTP status and the exceptions of
HTTP client libraries map to codes here too (:func:`status_error`, :func:`classify_exception`), once
for the pipeline, health checks and the REST kit.
"""

from __future__ import annotations

import enum
import json
import os
import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote


class ErrorCode(enum.StrEnum):
    VALIDATION_ERROR = "VALIDATION_ERROR"
    NOT_FOUND = "NOT_FOUND"
    CONFLICT = "CONFLICT"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    DB_NOT_FOUND = "DB_NOT_FOUND"
    DB_ERROR = "DB_ERROR"
    BACKEND_UNAVAILABLE = "BACKEND_UNAVAILABLE"
    BACKEND_ERROR = "BACKEND_ERROR"
    TIMEOUT = "TIMEOUT"
    RATE_LIMITED = "RATE_LIMITED"
    INTERNAL_ERROR = "INTERNAL_ERROR"


#: Whether a client may retry the same call unchanged and hope for another outcome.
RETRYABLE_DEFAULT: dict[ErrorCode, bool] = {
    ErrorCode.VALIDATION_ERROR: False,
    ErrorCode.NOT_FOUND: False,
    ErrorCode.CONFLICT: False,
    ErrorCode.PERMISSION_DENIED: False,
    ErrorCode.DB_NOT_FOUND: False,
    ErrorCode.DB_ERROR: False,
    ErrorCode.BACKEND_UNAVAILABLE: True,
    ErrorCode.BACKEND_ERROR: True,
    ErrorCode.TIMEOUT: True,
    ErrorCode.RATE_LIMITED: True,
    ErrorCode.INTERNAL_ERROR: False,
}


class GatewayError(Exception):
    """A deliberate, structured tool failure.

    ``message`` should tell the model what to do next ("call again with cursor=…",
    "set GITEA_URL to enable these tools"). It is still sanitized on the way out.
    ``details`` is optional JSON-able data (e.g. the missing ids); every string in it is
    sanitized too, lists are cut at 100 items.
    ``backend_down``: this failure means the tool's backend itself is down (it refused or
    dropped the connection, or did not answer in time). Only such failures count towards the
    backend's circuit breaker; a backend that answers, even with an error, is up.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        retryable: bool | None = None,
        details: dict[str, Any] | None = None,
        backend_down: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.retryable = RETRYABLE_DEFAULT[self.code] if retryable is None else retryable
        self.details = details
        self.backend_down = backend_down


def error_payload(
    code: ErrorCode,
    message: str,
    *,
    retryable: bool | None = None,
    details: dict[str, Any] | None = None,
    correlation_id: str | None = None,
) -> dict[str, Any]:
    """The one error envelope every tool returns: ``{"error": {code, message, retryable}}``."""
    body: dict[str, Any] = {
        "code": code.value,
        "message": message,
        "retryable": RETRYABLE_DEFAULT[code] if retryable is None else retryable,
    }
    if details:
        body["details"] = details
    if correlation_id:
        body["correlation_id"] = correlation_id
    return {"error": body}


# --- validation errors -----------------------------------------------------------------

_MAX_FIELD_ERRORS = 20
#: The field name of an error about the arguments as a whole.
ARGUMENTS = "(arguments)"


def field_errors(exc: Any) -> list[dict[str, str]]:
    """Each field and rule a pydantic ``ValidationError`` names, never the input value."""
    fields = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = ".".join(str(p) for p in err["loc"]) or ARGUMENTS
        rule = err["type"]
        msg = err["msg"]
        if rule == "extra_forbidden":
            msg = "unknown field; it is not a parameter of this tool"
        elif rule == "missing":
            msg = "required field is missing"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        fields.append({"field": loc, "rule": rule, "message": msg})
    return fields


def invalid(fields: list[dict[str, str]]) -> GatewayError:
    """The one validation error, each thing said once: the message describes each field's
    failure (the words a client was written against), ``details.fields`` names each field and
    rule; a field's message is there only when the message had no room for it."""
    fields = fields[:_MAX_FIELD_ERRORS]
    parts: list[str] = []
    for f in fields:
        part = f"{f['field']}: {f['message']}"
        if parts and sum(len(p) + 2 for p in parts) + len(part) > MAX_MESSAGE_CHARS - 100:
            # room for the rest of the message: the sanitizer cuts at MAX_MESSAGE_CHARS
            break
        parts.append(part)
    rest = len(fields) - len(parts)
    return GatewayError(
        ErrorCode.VALIDATION_ERROR,
        "Invalid arguments: " + "; ".join(parts) + (f" (+{rest} more in details)" if rest else ""),
        details={
            "fields": [
                {"field": f["field"], "rule": f["rule"]}
                if i < len(parts)
                else {"field": f["field"], "rule": f["rule"], "message": f["message"]}
                for i, f in enumerate(fields)
            ]
        },
    )


def format_validation_error(exc: Any) -> GatewayError:
    """A pydantic ``ValidationError`` as the one ``VALIDATION_ERROR``."""
    return invalid(field_errors(exc))


# --- text every client can receive --------------------------------------------------------


def encodable(text: str) -> str:
    """``text`` as UTF-8 can carry it: a lone surrogate (``"\\ud800"``, which a backend's
    JSON escape or a decoded file name may hold) becomes U+FFFD; a surrogate pair is joined.
    ASCII text (most results) is known to be fine without a scan."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def encodable_data(value: Any) -> Any:
    """JSON data with :func:`encodable` applied to every key and string."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {encodable_data(k): encodable_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encodable_data(v) for v in value]
    return value


class _LazyPattern:
    """A regular expression compiled on its first use rather than at import.

    The sanitizer's patterns took ~5 ms of every start to compile, most of them for text a
    start never meets (a driver's error, a failed connection, a path). What the first use
    reads (``search``, ``sub``, ...) is the compiled pattern's own, kept on this object so
    that later uses find it at once.
    """

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends: this is no pattern yet
            raise AttributeError(name)
        value = getattr(re.compile(*self._source), name)
        setattr(self, name, value)
        return value


def _pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """See :class:`_LazyPattern` (used as the compiled pattern it stands for)."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))


# --- sanitizer -------------------------------------------------------------------------

_REDACTED = "[REDACTED]"
MAX_MESSAGE_CHARS = 600

# Environment variables whose values are secrets even if no plugin declared them.
_SECRET_ENV_NAME = _pattern(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL|PRIVATE_KEY)", re.I)
_MIN_SECRET_LEN = 4


def secret_name(name: str) -> bool:
    """Does a variable or header of this name hold a secret (``GITHUB_TOKEN``, ``X-Api-Key``)?"""
    return _SECRET_ENV_NAME.search(name) is not None


#: Shorter "secrets" (an env var ``X_TOKEN=true``) are redacted from messages but never from
#: result data, where replacing a common word would corrupt it.
MIN_RESULT_SECRET_LEN = 8

_TRACEBACK = _pattern(r"Traceback \(most recent call last\):.*", re.S)
_FRAME_LINE = _pattern(r'^\s*File "[^"]*", line \d+.*$', re.M)
_URL_USERINFO = _pattern(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://)[^\s/@'\"<>]+@")
_FILE_URL = _pattern(r"\bfile://\S+")
# A scheme word, then a credential: one with a digit or 20+ characters, so prose such as
# "a basic example" or "token expired" stays readable.
_AUTH_SCHEME = _pattern(
    r"(?i)\b(authorization\s*[:=]\s*)?(bearer|token|basic)(\s+|\+)"
    r"(?=[A-Za-z0-9._~+/=\-]*\d|[A-Za-z0-9._~+/=\-]{20})[A-Za-z0-9._~+/=\-]{6,}"
)
# key = value, key: value (YAML), "key": "value" (JSON), key value (a header as some clients
# print it, ``x-api-key k1…``), with the key naming a credential: its last word is one
# (``password``, ``GITEA_TOKEN``, ``client_secret``, ``x-api-key``, ``accessToken``), so
# ``tokens:``, ``secretary:`` or ``passwordless:`` stay as they are. A value redacted already
# is taken whole, so redacting twice changes nothing.
_CREDENTIAL_WORD = (
    r"pass(?:word|wd|phrase)|pwd|secret|token|credentials?|apikey"
    r"|(?:api|access|private|secret)[_\-.]?key"
)
_CREDENTIAL_KEY = (
    r"(?<![\w\-.])"  # the key starts here
    r"((?:[\w\-.]*[_\-.]|[A-Za-z0-9]*[a-z0-9](?=[A-Z]))?"  # words before, then _ - . or a hump
    r"(?i:" + _CREDENTIAL_WORD + r"))"
)
# After ``key:`` (no quotes, no ``=``) a plain word is prose, not a value: "check the backend's
# credentials: bad token", "token: expired", ``"token": null``. A word of letters only (maybe
# hyphenated: ``x-api-key``), lower case after the first, shorter than 20 characters; anything
# else there is redacted. Separated by spaces alone the key is as likely prose ("the password
# is wrong", "secret sauce"): only a value shaped like a credential goes, 6+ characters with a
# digit or 20+. One pattern for both, so the text is scanned for keys once.
_SECRET_PAIR = _pattern(
    _CREDENTIAL_KEY
    + r"(?:([\"']?\s*[:=]\s*)"
    + r"(\[REDACTED\]|\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[^\s,;&\"'}\]]+)"
    + r"|([ \t]+)((?=[^\s,;&\"'}\])]*\d|[^\s,;&\"'}\])]{20})[^\s,;&\"'}\])]{6,}))"
)
_PLAIN_WORD = _pattern(r"(?=.{1,19}\Z)[A-Za-z][a-z]*(?:-[a-z]+)*")
# An e-mail address is personal data: it names a person, never what the model can act on.
_EMAIL = _pattern(
    r"(?<![\w.+\-%])[A-Za-z0-9._%+\-]+@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}(?![\w\-])"
)
# Text a failed connection writes (a driver, an HTTP client, the resolver) names the host it
# tried: the deployment's internal topology (``mongo-0.mongo.svc.cluster.local:27017``), of no
# use to the model. Such text keeps its words and loses its hosts.
_CONNECTION_FAILURE = _pattern(
    r"""(?ix)
    \bconnection[ ](?:refused|reset|timed[ ]?out|aborted|failed|error)
    | \b(?:could[ ]?not|couldn't|cannot|can't|can[ ]not|unable[ ]to|failed[ ]to)[ ]
      (?:connect|reach|resolve|establish)
    | \bconnect(?:ing|ion)?[ ]to\b[^\n]{0,200}?\b(?:failed|refused|timed[ ]?out)
    | \b(?:ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN)\b
    | \bno[ ]route[ ]to[ ]host | \bhost[ ](?:is[ ])?unreachable | \bnetwork[ ]is[ ]unreachable
    | \bname[ ]or[ ]service[ ]not[ ]known | \bnodename[ ]nor[ ]servname
    | \btemporary[ ]failure[ ]in[ ]name[ ]resolution | \bgetaddrinfo\b
    | \bServerSelectionTimeoutError\b | \bserver[ ]selection[ ]timeout
    | \bNo[ ]connection[ ]could[ ]be[ ]made\b
    """
)
#: Every text _CONNECTION_FAILURE matches holds one of these (lower-cased).
_CONNECTION_WORDS = (
    "connect",
    "reach",
    "resol",
    "establish",
    "route to host",
    "getaddrinfo",
    "servname",
    "service not known",
    "econn",
    "etimedout",
    "enotfound",
    "eai_again",
    "serverselection",
    "server selection",
)
_HOST_REMOVED = "[host removed]"
# In such text: ``host:port`` (the host a name with a letter, an IPv4 address or a bracketed
# IPv6 one), a bare IPv4 address, or a dotted host name (lower case, ending in letters, not a
# file name): each a whole token, never part of a word or a longer dotted name.
_HOST_PORT = _pattern(
    r"(?<![\w.\-])(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*):\d{1,5}(?!\w|\.\d)"
)
_DOTTED = _pattern(r"(?<![\w.\-])[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+(?![\w\-]|\.\w)")
_IPV4 = _pattern(r"(?:\d{1,3}\.){3}\d{1,3}")
_HOST_NAME = _pattern(r"(?:[a-z0-9\-]+\.)+[a-z]{2,63}")
_FILE_NAME = _pattern(
    r".*\.(?:py|pyc|db|sqlite3?|json|toml|ya?ml|txt|log|sock|pem|crt|key|cfg|ini|conf|md|html|csv)"
)

# Credentials recognisable by their shape alone, wherever they appear.
_SECRET_SHAPES = _pattern(
    r"\beyJ[\w\-]{2,}\.eyJ[\w\-]{2,}\.[\w\-]*"  # JWT: base64url '{"…' header and payload
    r"|\bsk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"  # OpenAI / Anthropic keys
    r"|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"  # AWS access key ids
    r"|\bgh[pousr]_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{22,255}"  # GitHub tokens
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack tokens
    r"|-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY-----|.*)",
    re.S,
)
_PERCENT_ESCAPE = _pattern(r"%[0-9A-Fa-f]{2}")
# SQL: a statement keyword followed by the words that make it a statement. Everything from
# the keyword to the end of the line goes; the schema and query text are nobody's business.
_SQL = _pattern(
    r"(?is)\b(?:SELECT\b.*?\bFROM|INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|VIEW|TRIGGER)|DROP\s+(?:TABLE|INDEX|VIEW|TRIGGER)|"
    r"ALTER\s+TABLE|PRAGMA\s+\w+|WITH\s+\w+\s+AS\s*\()[^\n]*"
)
# An absolute POSIX path with at least two segments, or a Windows drive path. Not part of a
# URL (the look-behind refuses a preceding word character, slash, colon or dot). The whole
# run of segments is taken, empty ones and trailing slashes too (``/a//b/``): a path cut
# short would leave a slash behind that a second pass took for another path.
_POSIX_PATH = _pattern(r"(?<![\w/:.~\-\]])(/[^\s/'\"<>()\[\],;:]+/[^\s'\"<>()\[\],;:]*)")
_WIN_PATH = _pattern(r"\b[A-Za-z]:\\(?:[^\s\\'\"<>]+\\)*[^\s\\'\"<>]*")
_WS = _pattern(r"[ \t]+")

#: What a backend's database-shaped error text becomes (see :meth:`Sanitizer.backend_text`).
DATABASE_ERROR = "the backend reported a database error"
# Text that only a database driver writes: its fields (PostgreSQL's DETAIL:, LINE 1:), its
# sentences (constraint violations, unknown tables, refused logins, unreachable servers, which
# name keys, values, hosts, addresses and users) and its exception names. The message such text
# sits in is not worth keeping: it says too much, and nothing the model can act on.
_DATABASE_TEXT = _pattern(
    r"""
    # PostgreSQL (libpq, psycopg, asyncpg)
    \b(?:DETAIL|HINT|CONTEXT|STATEMENT|QUERY|LINE[ ]\d+):[ ]
    | \bduplicate[ ]key[ ]value[ ]violates\b
    | \bviolates[ ](?:unique|foreign[ ]key|not-null|check|exclusion)[ ]constraint\b
    | \b(?:relation|column|role|database|schema|function|type|table)[ ]"[^"\n]*"[ ]
      (?:does[ ]not[ ]exist|already[ ]exists|of[ ]relation)
    | \bsyntax[ ]error[ ]at[ ](?:or[ ]near|end[ ]of[ ]input)\b
    | \bpassword[ ]authentication[ ]failed[ ]for[ ]user\b
    | \bconnection[ ]to[ ]server[ ](?:at|on)[ ]
    | \bcould[ ]not[ ](?:connect[ ]to[ ]server|translate[ ]host[ ]name)\b
    | \bno[ ]pg_hba\.conf[ ]entry\b
    | \bserver[ ]closed[ ]the[ ]connection[ ]unexpectedly\b
    | \bremaining[ ]connection[ ]slots[ ]are[ ]reserved\b
    | \bcanceling[ ]statement[ ]due[ ]to\b
    | \bSQLSTATE\b
    # drivers and ORMs by their exception modules; SQLAlchemy's statement and parameters
    | \b(?:psycopg2?|asyncpg|sqlalchemy|pymysql|MySQLdb|mysql\.connector|aiomysql|aiosqlite
          |sqlite3|pymongo|motor|django\.db|peewee|tortoise|prisma)
      \.(?:\w+\.)?(?:errors?|err|exc|exceptions|\w*Error)\b
    | \b(?:Operational|Integrity|Programming|Interface|Database|Data|NotSupported)Error:
    | \[SQL:[ ] | \[parameters:[ ] | \(Background[ ]on[ ]this[ ]error[ ]at:
    # MySQL, MariaDB
    | \bERROR[ ]\d{4}[ ]\([0-9A-Z]{5}\)
    | \([12]\d{3},[ ]?["']
    | \bDuplicate[ ]entry[ ]'
    | \bAccess[ ]denied[ ]for[ ]user[ ]'
    | \bYou[ ]have[ ]an[ ]error[ ]in[ ]your[ ]SQL[ ]syntax\b
    | \bUnknown[ ](?:column|table|database)[ ]'
    | \bTable[ ]'[^'\n]*'[ ](?:doesn't[ ]exist|already[ ]exists)
    | \bCan't[ ]connect[ ]to[ ](?:local[ ])?(?:MySQL|MariaDB)[ ]server\b
    | \b(?:MySQL|MariaDB)[ ]server[ ]has[ ]gone[ ]away\b
    | \bLost[ ]connection[ ]to[ ](?:MySQL|MariaDB)[ ]server\b
    | \bDeadlock[ ]found[ ]when[ ]trying[ ]to[ ]get[ ]lock\b
    | \bLock[ ]wait[ ]timeout[ ]exceeded\b
    | \bCannot[ ](?:add|delete)[ ]or[ ]update[ ]a[ ](?:child|parent)[ ]row\b
    # SQLite
    | \b(?:UNIQUE|NOT[ ]NULL|FOREIGN[ ]KEY|CHECK|PRIMARY[ ]KEY)[ ]constraint[ ]failed\b
    | \bno[ ]such[ ](?:table|column|function|index|savepoint):[ ]
    | \bhas[ ]no[ ]column[ ]named\b
    | \bnear[ ]"[^"\n]*":[ ]syntax[ ]error\b
    | \bdatabase[ ](?:is[ ]locked|disk[ ]image[ ]is[ ]malformed|table[ ]is[ ]locked)\b
    | \battempt[ ]to[ ]write[ ]a[ ]readonly[ ]database\b
    | \bunable[ ]to[ ]open[ ]database[ ]file\b
    | \bSQLITE_[A-Z]+\b
    # MongoDB, Oracle, SQL Server
    | \bE11000[ ]duplicate[ ]key\b | \bdup[ ]key:[ ]
    | \bORA-\d{5}\b | \[(?:Microsoft\]\[)?ODBC\b | \[SQL[ ]Server\]
    """,
    re.X,
)


def database_text(text: str) -> bool:
    """Does ``text`` look like a database driver's error (see :data:`DATABASE_ERROR`)?"""
    return _DATABASE_TEXT.search(text) is not None


def _host_port(match: re.Match[str]) -> str:
    host = match.group(1)
    if host.startswith("[") or _IPV4.fullmatch(host) or any(c.isalpha() for c in host):
        return _HOST_REMOVED
    return match.group(0)  # a time (12:30) or a ratio, not a host


def _dotted_host(match: re.Match[str]) -> str:
    token = match.group(0)
    if _IPV4.fullmatch(token) or (_HOST_NAME.fullmatch(token) and not _FILE_NAME.fullmatch(token)):
        return _HOST_REMOVED
    return token


def _without_hosts(text: str) -> str:
    """``text`` without the hosts it names when it reports a failed connection."""
    lowered = text.lower()
    if not any(word in lowered for word in _CONNECTION_WORDS):
        return text  # the common case, decided in C: no word any of the sentences holds
    if _CONNECTION_FAILURE.search(text) is None:
        return text
    return _DOTTED.sub(_dotted_host, _HOST_PORT.sub(_host_port, text))


def _credential_pair(match: re.Match[str]) -> str:
    key, separator, value, spaces, _ = match.groups()
    if separator is None:  # key, spaces, a credential-shaped value
        return f"{key}{spaces}{_REDACTED}"
    if "=" not in separator and _PLAIN_WORD.fullmatch(value):
        return match.group(0)  # prose: "credentials: bad token"
    return f"{key}{separator}{_REDACTED}"


class Sanitizer:
    """Removes what must never reach a client or a log line.

    What goes: traceback text, SQL statements, credentials (configured secret values verbatim,
    URL userinfo, ``Bearer``/``token`` values, ``password=`` style pairs; values, never a plain
    word: ``credentials: bad token`` stays), e-mail addresses, the hosts a failed connection
    names, and absolute paths (a path under one of ``roots`` becomes relative, so it stays
    usable; any other becomes ``…/<name>``). Messages are bounded to ``max_chars``.
    """

    def __init__(
        self,
        secrets: Iterable[str] = (),
        roots: Iterable[Path] = (),
        *,
        max_chars: int = MAX_MESSAGE_CHARS,
    ) -> None:
        self._secrets: list[str] = []
        self.max_chars = max_chars
        self._roots = sorted({Path(r).resolve() for r in roots}, key=lambda p: -len(str(p)))
        self.add_secrets(secrets)

    @classmethod
    def from_environment(
        cls, roots: Iterable[Path] = (), env: dict[str, str] | None = None
    ) -> Sanitizer:
        source = os.environ if env is None else env
        secrets = [v for k, v in source.items() if _SECRET_ENV_NAME.search(k)]
        return cls(secrets, roots or [Path.cwd()])

    def add_secrets(self, secrets: Iterable[str]) -> None:
        new = {s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET_LEN}
        self._secrets = sorted(set(self._secrets) | new, key=len, reverse=True)
        # How each secret looks inside JSON text (quotes, backslashes and controls escaped).
        self._in_json = [
            json.dumps(s, ensure_ascii=False)[1:-1]
            for s in self._secrets
            if len(s) >= MIN_RESULT_SECRET_LEN
        ]

    @property
    def checks_results(self) -> bool:
        """Is there any secret long enough to be searched for in result data?"""
        return bool(self._in_json)

    def result_has_secret(self, json_text: str) -> bool:
        """Does this JSON text hold a configured secret? A literal search per secret, in C: the
        check every successful result gets, so it must stay cheap on megabyte pages."""
        return any(needle in json_text for needle in self._in_json)

    def redact_data(self, value: Any) -> Any:
        """``value`` (JSON data) with configured secrets replaced in every key and string."""
        if isinstance(value, str):
            for secret in self._secrets:
                if len(secret) >= MIN_RESULT_SECRET_LEN and secret in value:
                    value = value.replace(secret, _REDACTED)
            return value
        if isinstance(value, dict):
            return {self.redact_data(k): self.redact_data(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_data(v) for v in value]
        return value

    def _path(self, match: re.Match[str]) -> str:
        raw = match.group(1) if match.re is _POSIX_PATH else match.group(0)
        trailing = ""
        while raw and raw[-1] in ".:":  # sentence punctuation after a path
            trailing = raw[-1] + trailing
            raw = raw[:-1]
        for root in self._roots:
            try:
                rel = Path(raw).relative_to(root)
            except ValueError:
                continue
            text = rel.as_posix()
            return (text if text != "." else ".") + trailing
        name = raw.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        return f"…/{name}{trailing}" if name else "…" + trailing

    def redact_secrets(self, text: str) -> str:
        """Only the credentials: configured secrets, URL userinfo, auth header values,
        credential-named pairs and credentials known by their shape (JWTs, ``sk-``, ``AKIA``,
        ``ghp_`` …, PEM private keys), also when URL-encoded."""
        redacted = self._redact_plain(text)
        # URL-encoded text (a query string, a form body): look again at the decoded form, and
        # where that hides a credential, give the decoded text, redacted.
        for _ in range(2):  # double encoding too
            if not _PERCENT_ESCAPE.search(redacted):
                break
            decoded = unquote(redacted)
            cleaned = self._redact_plain(decoded)
            if cleaned == decoded:
                break
            redacted = cleaned
        return redacted

    def _redact_plain(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, _REDACTED)
        text = _URL_USERINFO.sub(r"\1***@", text)
        text = _SECRET_SHAPES.sub(_REDACTED, text)
        text = _AUTH_SCHEME.sub(
            lambda m: f"{m.group(1) or ''}{m.group(2)}{m.group(3)}{_REDACTED}", text
        )
        return _SECRET_PAIR.sub(_credential_pair, text)

    def redact_private(self, text: str) -> str:
        """:meth:`redact_secrets`, and what else nobody outside needs to know: e-mail addresses
        (personal data) and the hosts a failed connection's text names (``could not connect
        to db-0.internal:5432`` → ``… to [host removed]``). Every message and log line gets
        this; prompt text, written by the client's user, gets only :meth:`redact_secrets`."""
        text = self.redact_secrets(text)
        if "@" in text:
            text = _EMAIL.sub(_REDACTED, text)
        return _without_hosts(text)

    def backend_text(self, text: str, max_chars: int) -> str:
        """Words a backend wrote for a failure (its error's reason), made fit to quote: text
        shaped like a database error becomes :data:`DATABASE_ERROR`; anything else is
        sanitized, put on one line and only then cut to ``max_chars``, so a cut cannot leave
        half a statement or half a secret behind."""
        text = encodable(text)
        if database_text(text):
            return DATABASE_ERROR
        line = " ".join(self(text, max_chars=0).split())
        if len(line) > max_chars:
            line = line[: max_chars - 1].rstrip() + "…"
        return line

    def __call__(self, text: object, *, max_chars: int | None = None) -> str:
        s = self.redact_private(encodable(text if isinstance(text, str) else str(text)))
        s = _TRACEBACK.sub("[traceback removed]", s)
        s = _FRAME_LINE.sub("", s)
        s = _FILE_URL.sub("[file url removed]", s)
        s = _SQL.sub("[SQL removed]", s)
        s = _POSIX_PATH.sub(self._path, s)
        s = _WIN_PATH.sub(self._path, s)
        s = _WS.sub(" ", s).strip()
        limit = self.max_chars if max_chars is None else max_chars
        if limit and len(s) > limit:
            s = s[: limit - 1].rstrip() + "…"
        return s


# HTTP status → structured error, once for every REST backend and for the httpx exceptions
# plugin code lets escape (no httpx needed here). A call can override the answer for any status
# with a StatusRule.


@dataclass(frozen=True)
class Failure:
    """What went wrong, for messages and rules: the status, the backend's reason, what was asked
    (``what``: "job 0c3…"), which backend (``title``: "the orchestrator API"), a hint naming the
    credential settings, and the call's values (path and query parameters) for templates."""

    status: int
    reason: str
    what: str
    title: str
    credentials_hint: str = "check the backend's credentials"
    values: Mapping[str, Any] = field(default_factory=dict)


#: How a call answers one status: an error code (default message), a message template (default
#: code for the status) with ``{reason}``, ``{status}``, ``{what}``, ``{title}`` and the call's
#: values (path, query and body fields), both as a tuple, or a function returning the exception
#: to raise (e.g. a plugin's own signal).
StatusRule = ErrorCode | str | tuple[ErrorCode, str] | Callable[[Failure], BaseException]


def _with_reason(message: str, reason: str) -> str:
    return f"{message}: {reason}" if reason else message


def default_error(f: Failure) -> GatewayError:
    """The answer when a call has no rule for this status."""
    s = f.status
    if s == 400 or s == 409:
        return GatewayError(
            ErrorCode.CONFLICT, _with_reason(f"{f.title} refused this for {f.what}", f.reason)
        )
    if s in (401, 403):
        return GatewayError(
            ErrorCode.PERMISSION_DENIED,
            _with_reason(f"{f.title} refused access (HTTP {s}); {f.credentials_hint}", f.reason),
        )
    if s == 404:
        return GatewayError(
            ErrorCode.NOT_FOUND, _with_reason(f"{f.title} found no {f.what}", f.reason)
        )
    if s == 422:
        return GatewayError(
            ErrorCode.VALIDATION_ERROR,
            _with_reason(f"{f.title} rejected the arguments for {f.what}", f.reason),
        )
    if s == 429:
        return GatewayError(
            ErrorCode.BACKEND_ERROR, f"{f.title} is limiting requests (HTTP 429); retry in a minute"
        )
    if s >= 500:
        return GatewayError(
            ErrorCode.BACKEND_ERROR,
            _with_reason(f"{f.title} failed with HTTP {s} on {f.what}", f.reason) + "; retry later",
        )
    return GatewayError(
        ErrorCode.BACKEND_ERROR,
        _with_reason(f"{f.title} answered HTTP {s} for {f.what}", f.reason),
        retryable=False,
    )


#: What every message template may name besides the call's values.
FAILURE_FIELDS = ("reason", "status", "what", "title")


def template_fields(rule: StatusRule) -> list[str]:
    """The names a rule's message template fills (``{quantity}``, ``{job.id}`` → ``job``);
    none for a code or a function."""
    template = rule if isinstance(rule, str) else rule[1] if isinstance(rule, tuple) else None
    if template is None:
        return []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:  # an unmatched brace: rendered as written
        return []
    names = []
    for _, field_name, _, _ in parsed:
        if field_name:
            names.append(field_name.split(".", 1)[0].split("[", 1)[0])
    return names


class _Values(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(template: str, f: Failure) -> str:
    values = _Values({k: v for k, v in f.values.items() if v is not None})
    values.update(reason=f.reason, status=f.status, what=f.what, title=f.title)
    try:
        return string.Formatter().vformat(template, (), values)
    except (ValueError, IndexError, AttributeError):
        return template


def status_error(f: Failure, rules: Mapping[int, StatusRule] | None = None) -> BaseException:
    """The exception for a failed answer: the call's rule for the status, else the default."""
    rule = (rules or {}).get(f.status)
    default = default_error(f)
    if rule is None:
        return default
    if isinstance(rule, ErrorCode):
        return GatewayError(rule, default.message)
    if isinstance(rule, str):
        return GatewayError(default.code, render(rule, f), retryable=default.retryable)
    if isinstance(rule, tuple):
        code, template = rule
        return GatewayError(code, render(template, f))
    return rule(f)


def classify_exception(exc: BaseException) -> GatewayError | None:
    """Map well-known exceptions of HTTP client libraries to structured errors, without
    importing them.

    For plugins that call ``httpx`` themselves (the REST kit maps its own answers): refused,
    dropped or timed-out connections mean the backend is down; an ``HTTPStatusError`` is mapped
    by status, like the kit's answers (a 404 is not worth retrying, a 503 is).
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    module = type(exc).__module__.split(".")[0]
    if module in {"httpx", "httpcore", "httpx2"}:
        if names & {"ConnectTimeout", "PoolTimeout"}:
            return GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                "the backend did not accept a connection in time",
                backend_down=True,
            )
        if names & {"TimeoutException"}:
            return GatewayError(
                ErrorCode.TIMEOUT, "the backend did not answer in time", backend_down=True
            )
        if names & {"ConnectError", "NetworkError"}:
            return GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                "the backend refused or dropped the connection",
                backend_down=True,
            )
        if "HTTPStatusError" in names:
            response = getattr(exc, "response", None)
            status = getattr(response, "status_code", 0)
            if isinstance(status, int) and status >= 300:
                err = status_error(Failure(status, "", "this request", "the backend"))
                if isinstance(err, GatewayError):
                    return err
            return GatewayError(ErrorCode.BACKEND_ERROR, "the backend answered an error status")
        if names & {"RemoteProtocolError", "DecodingError", "TransportError"}:
            return GatewayError(ErrorCode.BACKEND_ERROR, "the backend sent a malformed response")
    if isinstance(exc, ConnectionError):
        return GatewayError(
            ErrorCode.BACKEND_UNAVAILABLE,
            "the backend refused or dropped the connection",
            backend_down=True,
        )
    return None
