"""What REST tools take and give, worded once: ids checked before any request, the API's
timestamps and JSON-in-strings, offset paging, and the one marker of a cut text.

- :func:`uuid_check`: a UUID argument, lower-cased, refused with a message naming where the
  model finds valid ids (APIs answer malformed ids inconsistently: 404, an empty 200, or a 500
  carrying database text);
- :data:`JsonString` (a JSON document encoded inside a string, decoded) and :data:`UtcTimestamp`
  (ISO-8601 in UTC with ``Z``) for fields of answers;
- :class:`OffsetPage` and :func:`offset_page` for offset/limit paging with a known total;
- :func:`truncation_marker`: how every tool says that it cut a text, and how to read on.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from typing import Annotated, Any, TypedDict, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ValidationError
from pydantic_core import SchemaValidator

from ..errors import ErrorCode, GatewayError

# A backend's answer as a model, at the cost of its first error only.
#
# pydantic collects every error of a failed validation: a list of a million ``{}`` under a model
# with required fields is millions of errors, each built (and ``errors()`` turns each into a
# dict) only for the message to name the first. So an answer is first checked by a validator
# made from the model's schema whose lists, tuples, sets and dicts stop at their first bad item
# (pydantic-core's ``fail_fast``) and which validates nested models' fields without building
# them (pydantic would reuse each model's own, collect-everything validator). A bad answer
# fails there with a handful of errors, however long its lists; a good one is then validated by
# the model itself, so the instance is exactly what ``model_validate`` gives. The answer's size
# is bounded before it is parsed (:mod:`gateway.rest.body`).

M = TypeVar("M", bound=BaseModel)

_FAIL_FAST_TYPES = frozenset({"list", "tuple", "set", "frozenset", "dict"})
# Schemas that build an instance of a class; the check validates their fields only.
_CLASS_TYPES = frozenset({"model", "dataclass"})
_AROUND = frozenset({"function-after", "function-wrap"})
# Keys of a core schema that hold data (defaults, literal values, JSON-schema hints), never
# schemas: nothing under them is changed.
_DATA_KEYS = frozenset({"metadata", "serialization", "default", "expected", "members", "config"})
#: Errors read from a failed validation; more are counted, not turned into Python objects.
MAX_ERRORS_READ = 100
#: An answer of at most this many bytes is validated by the model directly: it cannot hold
#: enough values for their errors to cost much, and most answers are this small.
SMALL_ANSWER_BYTES = 2048


def _check_schema(node: Any) -> Any:
    """The schema of the check: collections stop at their first bad item, a model's (or
    dataclass's) fields are validated without building it, and a validator that runs on the
    built instance (``model_validator(mode="after")``) is left to the model's own validation."""
    if isinstance(node, list):
        return [_check_schema(v) for v in node]
    if isinstance(node, tuple):
        return tuple(_check_schema(v) for v in node)
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    inner = node.get("schema")
    if kind in _CLASS_TYPES or (
        kind in _AROUND and isinstance(inner, dict) and inner.get("type") in _CLASS_TYPES
    ):
        out = _check_schema(inner)
        if "ref" in node:
            out = {**out, "ref": node["ref"]}
        return out
    out = {k: (v if k in _DATA_KEYS else _check_schema(v)) for k, v in node.items()}
    if kind in _FAIL_FAST_TYPES:
        out["fail_fast"] = True
    return out


@lru_cache(maxsize=512)
def _checker(model: type[BaseModel]) -> SchemaValidator | None:
    """A validator of ``model``'s shape that stops at the first bad item of every collection,
    or None when its schema cannot be rewritten (then only the model's own validation runs)."""
    try:
        return SchemaValidator(_check_schema(model.__pydantic_core_schema__))
    except Exception:
        return None


def _first_error(exc: ValidationError) -> str:
    if exc.error_count() > MAX_ERRORS_READ:
        return f"{exc.error_count():,} fields"
    first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(answer)"
    return f"{loc}: {first['msg']}"


def validate_answer(
    model: type[M], data: Any, title: str, what: str, *, size: int | None = None
) -> M:
    """The backend's answer as ``model``, or a ``BACKEND_ERROR`` naming the first thing that
    did not fit. ``size``: the bytes of the body ``data`` was decoded from, when known."""
    try:
        checker = None if size is not None and size <= SMALL_ANSWER_BYTES else _checker(model)
        if checker is not None:
            try:
                checker.validate_python(data)
            except ValidationError:
                raise
            except Exception:  # a validator of the plugin's that needs the real instance
                pass
        return model.model_validate(data)
    except ValidationError as exc:
        raise GatewayError(
            ErrorCode.BACKEND_ERROR,
            f"{title} answered {what} in an unexpected shape ({_first_error(exc)}); "
            "the API may be a different version than this plugin expects",
            retryable=False,
        ) from None


_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def uuid_check(what: str, where: str) -> AfterValidator:
    """The validator of a UUID argument: ``Annotated[str, Field(max_length=36, …),
    uuid_check("job", "list_jobs")]`` refuses anything else with "must be a job UUID;
    list_jobs shows them" and passes the id on in lower case."""

    def check(value: str) -> str:
        if not _UUID.fullmatch(value):
            raise ValueError(f"must be a {what} UUID; {where} shows them")
        return value.lower()

    return AfterValidator(check)


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


def to_utc_iso(value: Any, *, naive: tzinfo | None = None) -> Any:
    """``2026-11-22T09:58:22.221362+00:00`` or ``…Z`` or epoch seconds → ``…Z`` in UTC. Times
    without an offset are left as they are (their zone is unknown), unless ``naive`` is the zone
    the API writes them in."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        moment = datetime.fromtimestamp(value, UTC)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        if moment.tzinfo is None:
            if naive is None:
                return value
            moment = moment.replace(tzinfo=naive)
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


class PageFields(TypedDict):
    total: int
    offset: int
    limit: int
    has_more: bool
    next_offset: int | None


def offset_page(*, total: int, offset: int, limit: int, returned: int) -> PageFields:
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


def truncation_marker(
    omitted: int | None, total: int | None, *, unit: str = "characters", hint: str = ""
) -> str:
    """The one way a tool says it cut a text: ``[truncated] 2,300 of 5,300 characters not
    shown; <hint>``, the hint saying how to see the rest (``[truncated] more characters not
    shown; …`` when the amounts are unknown). The caller puts it where the text was cut (after
    a line break in documents); clients split a result on ``[truncated]``."""
    if omitted is None or total is None:
        marker = f"[truncated] more {unit} not shown"
    else:
        marker = f"[truncated] {omitted:,} of {total:,} {unit} not shown"
    return f"{marker}; {hint}" if hint else marker
