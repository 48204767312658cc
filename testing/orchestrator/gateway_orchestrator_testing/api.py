"""Routing and request validation the way the real API (FastAPI on Starlette) does them.

- Routes match the percent-*decoded* path, in declaration order; ``{name}`` is one segment and
  ``{name:path}`` the rest of the path. So ``%2F`` becomes a separator before routing, and raw
  ``..`` segments are passed through untouched.
- No route: 404 ``{"detail": "Not Found"}``; a path with another method: 405; a missing or extra
  trailing slash: a 307 redirect, as Starlette's ``redirect_slashes`` does.
- Path, query and body parameters are validated with pydantic before the handler runs, and every
  error comes back as FastAPI's 422 ``{"detail": [{type, loc, msg, input, ctx?}]}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from gateway.testing.backends import ReceivedRequest, Reply

from .state import State

Handler = Callable[["Call"], Any]


class ApiError(Exception):
    """An HTTP error answer: ``{"detail": detail}``."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(status, detail)
        self.status = status
        self.detail = detail


def not_found(what: str) -> ApiError:
    return ApiError(404, f"{what} not found")


def asyncpg_uuid_error(value: str, arg: int = 1) -> ApiError:
    """The 500 the API answers when asyncpg refuses a job id (``$1::uuid``) it was handed."""
    hexdigits = [c for c in value if c != "-"]
    if not 32 <= len(value) <= 36:
        reason = f"length must be between 32..36 characters, got {len(value)}"
    elif any(c not in "0123456789abcdefABCDEF" for c in hexdigits):
        reason = "unexpected character"
    else:
        reason = "decodes to less than 16 bytes"
    return ApiError(
        500,
        f"invalid input for query argument ${arg}: {value!r} (invalid UUID {value!r}: {reason})",
    )


def sql_uuid(value: str, arg: int = 1) -> str:
    """A job id as asyncpg would send it to PostgreSQL, or its 500."""
    digits = value.replace("-", "")
    if (
        32 <= len(value) <= 36
        and len(digits) == 32
        and all(c in "0123456789abcdefABCDEF" for c in digits)
    ):
        return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}".lower()
    raise asyncpg_uuid_error(value, arg)


class Query(BaseModel):
    """Base for an endpoint's query parameters (aliases are the wire names)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Body(BaseModel):
    """Base for an endpoint's JSON body (FastAPI models ignore unknown fields)."""

    model_config = ConfigDict(extra="ignore")


@dataclass
class Call:
    """One request being answered: the state, the decoded path parameters, the validated query
    and body (None when the route takes none or, for an optional body, none was sent)."""

    state: State
    request: ReceivedRequest
    path: dict[str, Any]
    query: Any = None
    body: Any = None


@dataclass
class Route:
    method: str
    template: str
    handler: Handler
    path_types: dict[str, type] = field(default_factory=dict)
    query: type[Query] | None = None
    body: type[Body] | None = None
    body_required: bool = True
    regex: re.Pattern[str] = field(init=False)

    def __post_init__(self) -> None:
        pattern = re.sub(r"\{(\w+):path\}", r"(?P<\1>.*)", self.template)
        pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern)
        self.regex = re.compile(f"^{pattern}$")


class Router:
    """An ordered route table; the first full match (path and method) answers."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(
        self,
        method: str,
        template: str,
        *,
        path: dict[str, type] | None = None,
        query: type[Query] | None = None,
        body: type[Body] | None = None,
        body_required: bool = True,
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.routes.append(
                Route(method, template, handler, path or {}, query, body, body_required)
            )
            return handler

        return register

    def get(self, template: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.add("GET", template, **kw)

    def post(self, template: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.add("POST", template, **kw)

    def put(self, template: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.add("PUT", template, **kw)

    def delete(self, template: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.add("DELETE", template, **kw)

    def include(self, other: Router) -> None:
        self.routes.extend(other.routes)

    def _match(self, method: str, path: str) -> tuple[Route | None, dict[str, str], list[str]]:
        allowed: list[str] = []
        for route in self.routes:
            m = route.regex.match(path)
            if m is None:
                continue
            if route.method == method or (method == "HEAD" and route.method == "GET"):
                return route, m.groupdict(), allowed
            allowed.append(route.method)
        return None, {}, allowed

    def dispatch(self, state: State, request: ReceivedRequest) -> Reply:
        path = unquote(request.path)
        route, params, allowed = self._match(request.method, path)
        if route is None:
            if allowed:
                return error_reply(405, "Method Not Allowed", {"Allow": ", ".join(allowed)})
            if path != "/":
                other = path[:-1] if path.endswith("/") else path + "/"
                if self._match(request.method, other)[0] or self._match(request.method, other)[2]:
                    query = request.target.partition("?")[2]
                    location = other + (f"?{query}" if query else "")
                    host = request.headers.get("host", "127.0.0.1")
                    return Reply(307, b"", {"Location": f"http://{host}{location}"})
            return error_reply(404, "Not Found")
        try:
            call = _validate(state, request, route, params)
            result = route.handler(call)
        except ApiError as exc:
            return error_reply(exc.status, exc.detail)
        if isinstance(result, Reply):
            return result
        return Reply.json(result)


def error_reply(status: int, detail: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply.json({"detail": detail}, status, headers)


def _errors(
    exc: ValidationError, where: str, *, missing_input: bool = False
) -> list[dict[str, Any]]:
    out = []
    for err in exc.errors(include_url=False):
        item: dict[str, Any] = {
            "type": err["type"],
            "loc": [where, *err["loc"]],
            "msg": err["msg"],
            "input": None if (missing_input and err["type"] == "missing") else err["input"],
        }
        if "ctx" in err:
            item["ctx"] = {k: _plain(v) for k, v in err["ctx"].items()}
        out.append(item)
    return out


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


def _validate(state: State, request: ReceivedRequest, route: Route, params: dict[str, str]) -> Call:
    problems: list[dict[str, Any]] = []
    path: dict[str, Any] = dict(params)
    for name, kind in route.path_types.items():
        try:
            path[name] = TypeAdapter(kind).validate_python(params[name])
        except ValidationError as exc:
            problems += [{**e, "loc": ["path", name]} for e in _errors(exc, "path")]
    query = None
    if route.query is not None:
        try:
            query = route.query.model_validate(request.query)
        except ValidationError as exc:
            problems += _errors(exc, "query", missing_input=True)
    body = None
    if route.body is not None:
        body, body_problems = _body(request, route.body, route.body_required)
        problems += body_problems
    if problems:
        raise ApiError(422, problems)
    return Call(state, request, path, query, body)


def _body(
    request: ReceivedRequest, model: type[Body], required: bool
) -> tuple[Any, list[dict[str, Any]]]:
    if not request.body.strip():
        if required:
            return None, [
                {"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}
            ]
        return None, []
    try:
        value = json.loads(request.body)
    except ValueError as exc:
        error = exc if isinstance(exc, json.JSONDecodeError) else None
        return None, [
            {
                "type": "json_invalid",
                "loc": ["body", error.pos if error else 0],
                "msg": "JSON decode error",
                "input": {},
                "ctx": {"error": error.msg if error else str(exc)},
            }
        ]
    if value is None and not required:
        return None, []
    try:
        return model.model_validate(value), []
    except ValidationError as exc:
        return None, _errors(exc, "body")
