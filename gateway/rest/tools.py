"""Declarative REST tools: a route, an input model, an output model → a ``ToolSpec``.

```python
GET_JOB = rest_tool(
    COCKPIT,
    Route("GET", "/api/jobs/{job_id}", what="job {job_id}", status={404: "no job {job_id}"}),
    name="get_job", description="…", input_model=JobArgs, output_model=Job,
)
```
Path placeholders are filled from the input fields of the same name (percent-encoded), the
fields named in ``query`` go into the query string and those in ``body`` into a JSON object
(``None`` values are left out), ``rename`` maps an input name to the name on the wire. The
answer is passed through ``shape(data, args)`` if given, then validated with the output model:
an answer of an unexpected shape is a ``BACKEND_ERROR`` naming the field, never a crash.

Types for what APIs send: :data:`JsonString` (a JSON document encoded inside a string, decoded),
:data:`UtcTimestamp` (ISO-8601 in UTC with ``Z``), and :func:`offset_page` for offset/limit
paging with a total.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ValidationError

from ..errors import ErrorCode, GatewayError
from ..spec import Mutation, Tier, ToolContext, ToolSpec
from .backend import RestBackend
from .status import StatusRule

if TYPE_CHECKING:
    from .client import RestClient


@dataclass(frozen=True)
class Route:
    """One HTTP call of a tool. ``what`` is a noun phrase for messages, filled from the
    arguments ("job {job_id}"); ``status`` overrides answers per status code."""

    method: str
    path: str
    query: tuple[str, ...] = ()
    body: tuple[str, ...] | None = None
    rename: Mapping[str, str] = field(default_factory=dict)
    status: Mapping[int, StatusRule] = field(default_factory=dict)
    what: str | None = None
    allow_null: bool = False

    def describe(self, values: Mapping[str, Any]) -> str:
        if self.what is None:
            return f"{self.method} {self.path}"
        try:
            return self.what.format_map({k: v for k, v in values.items()})
        except (KeyError, IndexError, ValueError):
            return self.what

    async def send(self, client: RestClient, args: BaseModel | Mapping[str, Any]) -> Any:
        """Send this route with values taken from ``args`` and return the decoded JSON."""
        values = dict(args)
        wire = self.rename.get
        path_params = {name: values.get(name) for name in _placeholders(self.path)}
        params = {wire(n, n): _plain(values.get(n)) for n in self.query}
        json_body: Any
        if self.body is None:
            from .client import NO_BODY

            json_body = NO_BODY
        else:
            json_body = {
                wire(n, n): _plain(values[n]) for n in self.body if values.get(n) is not None
            }
        return await client.request(
            self.method,
            self.path,
            path_params=path_params,
            params=params,
            json_body=json_body,
            status=self.status,
            what=self.describe(values),
            allow_null=self.allow_null,
        )


def _placeholders(path: str) -> list[str]:
    return re.findall(r"\{(\w+)\}", path)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def validate_answer(model: type[BaseModel], data: Any, title: str, what: str) -> BaseModel:
    """The backend's answer as ``model``, or a ``BACKEND_ERROR`` naming what did not fit."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(answer)"
        raise GatewayError(
            ErrorCode.BACKEND_ERROR,
            f"{title} answered {what} in an unexpected shape ({loc}: {first['msg']}); "
            "the API may be a different version than this plugin expects",
            retryable=False,
        ) from None


def backend_tool(
    backend: RestBackend,
    *,
    name: str,
    description: str,
    input_model: type[BaseModel],
    handler: Any,
    output_model: type[BaseModel] | None = None,
    tier: Tier | str = Tier.READ,
    mutation: Mutation | None = None,
    title: str | None = None,
    timeout: float | None = None,
    max_result_chars: int | None = None,
) -> ToolSpec:
    """A tool with a handler of its own that calls ``backend`` (``ctx.rest(backend)``): its
    breaker and configuration gate the tool, which is marked open-world (it reaches outside)."""
    return ToolSpec(
        name=name,
        title=title,
        description=description,
        input_model=input_model,
        output_model=output_model,
        handler=handler,
        tier=tier,
        mutation=mutation,
        timeout=timeout,
        backend=backend,
        open_world=True,
        max_result_chars=max_result_chars,
    )


def rest_tool(
    backend: RestBackend,
    route: Route,
    *,
    name: str,
    description: str,
    input_model: type[BaseModel],
    output_model: type[BaseModel] | None = None,
    shape: Callable[[Any, Any], Any] | None = None,
    tier: Tier | str = Tier.READ,
    mutation: Mutation | None = None,
    title: str | None = None,
    timeout: float | None = None,
    max_result_chars: int | None = None,
) -> ToolSpec:
    """A tool that is one HTTP call: see the module docstring."""

    async def handler(args: BaseModel, ctx: ToolContext[Any]) -> Any:
        data = await route.send(ctx.rest(backend), args)
        if shape is not None:
            data = shape(data, args)
        if output_model is None or isinstance(data, output_model):
            return data
        return validate_answer(output_model, data, backend.title, route.describe(dict(args)))

    handler.__name__ = name
    return backend_tool(
        backend,
        name=name,
        title=title,
        description=description,
        input_model=input_model,
        output_model=output_model,
        handler=handler,
        tier=tier,
        mutation=mutation,
        timeout=timeout,
        max_result_chars=max_result_chars,
    )


# --- types for what APIs send ----------------------------------------------------------------


def decode_json_string(value: Any) -> Any:
    """A JSON document sent inside a string (``"{\\"a\\": 1}"``) as the document; other values,
    and strings that are not JSON, unchanged."""
    if isinstance(value, str) and (value.lstrip()[:1] in ("{", "[", '"') or value == "null"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


#: A field the API sends as a JSON-encoded string; the model sees the decoded value.
JsonString = Annotated[Any, BeforeValidator(decode_json_string)]


def to_utc_iso(value: Any) -> Any:
    """``2026-11-22T09:58:22.221362+00:00`` or ``…Z`` or epoch seconds → ``…Z`` in UTC. Times
    without an offset are left as they are: their zone is unknown."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        moment = datetime.fromtimestamp(value, UTC)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        if moment.tzinfo is None:
            return value
    else:
        return value
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


#: An ISO-8601 timestamp normalized to UTC with a ``Z``.
UtcTimestamp = Annotated[str, BeforeValidator(to_utc_iso)]


class OffsetPage(BaseModel):
    """The paging fields of a result (what :func:`offset_page` fills): base of a page model."""

    total: int
    offset: int
    limit: int
    has_more: bool
    next_offset: int | None = None


def offset_page(*, total: int, offset: int, limit: int, returned: int) -> dict[str, Any]:
    """``has_more`` and ``next_offset`` for offset/limit paging with a known total."""
    next_offset = offset + returned
    more = returned > 0 and next_offset < total
    return {
        "total": total,
        "offset": offset,
        "limit": limit,
        "has_more": more,
        "next_offset": next_offset if more else None,
    }
