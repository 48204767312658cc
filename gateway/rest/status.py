"""HTTP status → structured error, once for every REST backend (no httpx needed here).

A backend's answer with a status of 300 or more becomes a :class:`~gateway.GatewayError` whose
code says what the model can do about it, and whose message carries the backend's own reason
(FastAPI's ``{"detail": …}``, Gitea's ``{"message": …}``, or a short text), sanitized, then
bounded (database text never gets through: see :meth:`gateway.errors.Sanitizer.backend_text`).
A call can override the answer for any status with a :data:`StatusRule`.
:func:`classify_exception` maps the exceptions of HTTP client libraries that plugin code lets
escape (httpx's, by name) the same way, for the pipeline and health.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ErrorCode, GatewayError, Sanitizer

MAX_REASON_CHARS = 300
MAX_REASON_SOURCE = 16 * 1024  # characters of an error body read for its reason
_PLAIN = Sanitizer()


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


def backend_reason(body: Any, sanitizer: Sanitizer | None = None) -> str:
    """The backend's own words for a failure: one line, sanitized (database text becomes "the
    backend reported a database error"), then cut to ``MAX_REASON_CHARS``. ``sanitizer``: the
    gateway's, which knows the configured secrets; without it, one that knows none."""
    text = _reason_text(body)
    return (sanitizer or _PLAIN).backend_text(text, MAX_REASON_CHARS) if text else ""


def _reason_text(body: Any) -> str:
    if isinstance(body, bytes | bytearray):
        text = body[:MAX_REASON_SOURCE].decode("utf-8", "replace")
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            return text
    if isinstance(body, dict):
        for key in ("detail", "message", "error"):
            if key in body:
                return _detail(body[key])
        return ""
    if isinstance(body, str):
        return body[:MAX_REASON_SOURCE]
    return ""


def _detail(value: Any) -> str:
    # FastAPI request validation: [{"loc": ["query", "limit"], "msg": "…", …}, …]
    if isinstance(value, list):
        parts = []
        for item in value[:5]:
            if isinstance(item, dict):
                loc = [str(p) for p in item.get("loc", []) if p not in ("body", "query", "path")]
                msg = str(item.get("msg", ""))
                parts.append(f"{'.'.join(loc)}: {msg}" if loc else msg)
            else:
                parts.append(str(item))
        return "; ".join(parts)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


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
